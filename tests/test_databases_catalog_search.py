"""Issue 63 item 3: finding one's way in a big catalog — query_database's ``search`` (and ``db://{database}/search/
{words}``) over relations, columns and comments; partitions and inheritance folded into their parent; alias views
labelled; domains with their base type; the overview fast.

Fast tests take the pieces alone (the words, the ranking, the folding, what an alias view is) and the search on the
demo database in-process; the slow ones a real PostgreSQL 15 with a company-sized catalog (tests/big_catalog.py: 169
relations in seven schemas, a ``PARTITION BY RANGE`` table, a Pagila-style ``INHERITS`` parent, alias views,
domains), through the server.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from ba_mcp import resources
from ba_mcp.databases.catalog_search import search, search_markdown, words_of
from ba_mcp.databases.pg_catalog import alias_of, fold
from tests import big_catalog, pg_server
from tests.conftest import in_process, make_workspace, text_of

pytestmark = pytest.mark.anyio


def _table(*columns: str, comment: str = "", rows: int = 0, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "table",
        "rows": rows,
        "rows_estimated": True,
        "comment": comment,
        "definition": "",
        "columns": [{"name": c, "type": "integer", "nullable": True} for c in columns],
        **extra,
    }


CATALOG = {
    "purchasing.purchaseorderheader": _table(
        "purchaseorderid", "vendorid", "orderdate", "subtotal", comment="General purchase order information.", rows=4012
    ),
    "purchasing.purchaseorderdetail": _table("purchaseorderid", "productid", "orderqty", rows=8845),
    "purchasing.vendor": _table(
        "businessentityid", "name", comment="Companies from whom Adventure Works purchases parts.", rows=104
    ),
    "pu.poh": {
        **_table("id", "purchaseorderid", "vendorid"),
        "kind": "view",
        "alias_of": "purchasing.purchaseorderheader",
    },
    "sales.salesorderheader": _table("salesorderid", "customerid", "orderdate", rows=31465),
    "hr.employee": _table("businessentityid", "jobtitle", rows=290),
}


def test_words_are_lowercased_singular_and_without_stop_words() -> None:
    assert words_of("Purchase ORDERS by Vendor") == ["purchase", "order", "vendor"]
    assert words_of("categories of the address") == ["categor", "address"]
    assert words_of("by the of") == []


def test_purchase_orders_by_vendor_finds_the_header_first_with_its_alias_view_under_it() -> None:
    words, found = search(CATALOG, "purchase orders by vendor")
    assert words == ["purchase", "order", "vendor"]
    names = [name for name, _ in found]
    assert names[0] == "purchasing.purchaseorderheader"  # all three words: two in its name, vendor in a column
    assert "pu.poh" not in names  # the alias of a relation found is no second answer
    assert set(names[1:3]) == {"purchasing.purchaseorderdetail", "purchasing.vendor"}
    assert "hr.employee" not in names
    text = search_markdown("aw", "# Database aw", CATALOG, "purchase orders by vendor")
    first = text.split("## ")[1]
    assert first.startswith("purchasing.purchaseorderheader (table, ≈4,012 rows)")
    assert "- vendorid: integer" in first and "Alias views of it: pu.poh" in first
    assert "Matched: purchase (name), order (name), vendor (column)" in first


def test_a_search_that_matches_nothing_says_so_and_what_to_try() -> None:
    text = search_markdown("aw", "# Database aw", CATALOG, "zeppelin")
    assert "No table, view or column of aw (6 relations) has zeppelin" in text
    assert "No words to search for" in search_markdown("aw", "# Database aw", CATALOG, "the of")


def test_partitions_and_inheriting_children_fold_into_their_parent() -> None:
    tables = {
        "sales.ledger": _table("entry_id", rows=0, partitioned="PARTITION BY RANGE (booked_on)"),
        **{f"sales.ledger_2024_0{m}": _table("entry_id", rows=1000 * m) for m in (1, 2, 3)},
        "payment": _table("payment_id", rows=5),  # an INHERITS parent may keep rows of its own
        **{f"payment_p2007_0{m}": _table("payment_id", rows=100) for m in (1, 2)},
        "sub_partition": _table("entry_id", rows=7),  # a partition of a partition: folded into the top
        "other": _table("x", rows=3),
    }
    parents = {f"sales.ledger_2024_0{m}": "sales.ledger" for m in (1, 2, 3)}
    parents |= {f"payment_p2007_0{m}": "payment" for m in (1, 2)}
    parents["sub_partition"] = "sales.ledger_2024_03"
    folded = fold(tables, parents)
    assert sorted(folded) == ["other", "payment", "sales.ledger"]
    assert folded["sales.ledger"]["rows"] == 1000 + 2000 + 3000 + 7
    assert folded["payment"]["rows"] == 5 + 200
    assert "sub_partition" in folded["sales.ledger"]["children"]
    assert "query sales.ledger — it reads their rows" in folded["sales.ledger"]["note"]
    assert "2 tables inheriting from it" in folded["payment"]["note"]


@pytest.mark.parametrize(
    ("definition", "expected"),
    [
        (
            " SELECT poh.purchaseorderid AS id, poh.status FROM purchasing.purchaseorderheader poh;",
            "purchasing.purchaseorderheader",
        ),
        ("SELECT a, b FROM t", "t"),
        ("SELECT a FROM t WHERE a > 1", None),  # filtered
        ("SELECT a, b + 1 AS c FROM t", None),  # computed
        ("SELECT t.a FROM t JOIN u ON u.a = t.a", None),  # joined
        ("SELECT a FROM t GROUP BY a", None),
        ("SELECT DISTINCT a FROM t", None),
        ("SELECT a FROM t LIMIT 5", None),
        ("SELECT a FROM t UNION SELECT a FROM u", None),
        ("SELECT a FROM (SELECT a FROM t) s", None),
        ("not sql at all", None),
    ],
)
def test_an_alias_view_only_renames_one_relation(definition: str, expected: str | None) -> None:
    assert alias_of(definition) == expected


async def test_search_through_query_database_on_the_demo(default_server: Client) -> None:
    """The search is a parameter of the tool (Claude Desktop's model cannot read resources): the demo's order tables
    with their columns; query and search together, or neither, are refused saying what to send."""
    client = default_server  # the run's shared server in the default configuration: the search only reads
    result = await client.call_tool("query_database", {"search": "customers who returned orders"})
    text = text_of(result)
    assert not result.is_error, text
    assert "## orders (table, 20,000 rows)" in text and "- customer_id: BIGINT" in text
    assert text.index("## orders") < text.index("## customers")  # three words beat one
    both = await client.call_tool("query_database", {"search": "orders", "query": "SELECT 1"})
    assert both.is_error and "send search alone" in text_of(both)
    neither = await client.call_tool("query_database", {})
    assert neither.is_error and "pass query (one SQL statement) or search" in text_of(neither)
    resource = await client.read_resource("db://demo/search/returned%20orders")
    assert "## orders (table" in resource.contents[0].text  # type: ignore[union-attr]


# -- a company-sized catalog on a real PostgreSQL ---------------------------------------------------------------

needs_postgres = pytest.mark.skipif(
    not pg_server.available(), reason="PostgreSQL binaries (initdb, pg_ctl) are not installed"
)


@pytest.fixture(scope="module")
def bigcat() -> pg_server.Postgres:
    pg = pg_server.running()
    big_catalog.make_catalog(pg)
    return pg


@pytest.mark.slow
@needs_postgres
async def test_a_big_catalog_overview_folds_labels_and_is_fast(
    bigcat: pg_server.Postgres, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """169 relations in seven schemas: the overview lists the partitioned ledger and the inheritance parent once,
    with the whole's rows and their children folded in (no child listed of its own), alias views as aliases; its
    catalog is read within 2 s (on a connection already made: a connection worker's start is the pool's, timed in
    bench/bench_catalog.py); a domain-typed column shows its base type."""
    assert big_catalog.relations(bigcat) >= 150
    ws = make_workspace(tmp_path)
    env = {"BA_MCP_DATABASES__AW__URL": bigcat.url("analyst", big_catalog.DATABASE)}
    async with in_process(ws, ["query_database"], **env) as client:
        connected = await client.call_tool("query_database", {"database": "aw", "query": "SELECT 1 AS one"})
        assert not connected.is_error, text_of(connected)
        started = time.monotonic()
        overview = (await client.read_resource("db://aw/schema")).contents[0].text  # type: ignore[union-attr]
        first_read = time.monotonic() - started
        assert first_read <= 2.0, first_read
        # whole (with columns, "## name (…)") or, past the budget, by name ("- name (…)"): labelled alike
        lines = [line.removeprefix("## ").removeprefix("- ") for line in overview.splitlines()]
        assert "payment (table, ≈15,000 rows, 6 children folded in)" in lines
        assert "sales.ledger (table, ≈6,000 rows, 6 partitions folded in)" in lines
        assert not any(line.startswith(("payment_p2007", "sales.ledger_2024")) for line in lines)
        assert "pu.poh (view, alias of purchasing.purchaseorderheader)" in lines
        monkeypatch.setattr(resources, "SCHEMA_BUDGET_CHARS", 5_000)  # past its budget: listed by name
        listed = (await client.read_resource("db://aw/schema")).contents[0].text  # type: ignore[union-attr]
        assert "- payment (table, ≈15,000 rows, 6 children folded in)" in listed.splitlines()
        assert "- pu.poh (view, alias of purchasing.purchaseorderheader)" in listed.splitlines()
        assert "search='purchase order vendor'" in listed  # and how to search it
        table = (await client.read_resource("db://aw/schema/sales.ledger")).contents[0].text  # type: ignore[union-attr]
        assert "6 partitions (sales.ledger_2024_01 … sales.ledger_2024_06) are folded in: query sales.ledger" in table
        assert "Partitioned: PARTITION BY RANGE (booked_on)" in table
        vendor = (await client.read_resource("db://aw/schema/purchasing.vendor")).contents[0].text  # type: ignore[union-attr]
        assert '- name: character varying(50) (domain "Name") not null' in vendor
        assert "Alias views of it: pu.v" in vendor


@pytest.mark.slow
@needs_postgres
async def test_one_search_call_finds_purchase_orders_by_vendor_and_the_query_written_from_it_is_right(
    bigcat: pg_server.Postgres, tmp_path: Path
) -> None:
    """The model's first call: search; its second: the right query, written from the columns the search showed —
    its answer equals the database's own (a direct connection); the folded parent is queried whole."""
    ws = make_workspace(tmp_path)
    env = {"BA_MCP_DATABASES__AW__URL": bigcat.url("analyst", big_catalog.DATABASE)}
    async with in_process(ws, ["query_database"], **env) as client:
        found = await client.call_tool("query_database", {"database": "aw", "search": "purchase orders by vendor"})
        text = text_of(found)
        assert not found.is_error, text
        first = text.split("\n## ")[1]
        assert first.startswith("purchasing.purchaseorderheader (table, ≈4,012 rows)"), first[:200]
        assert "- vendorid: integer" in first and "Foreign key: vendorid → purchasing.vendor(businessentityid)" in first
        assert "Alias views of it: pu.poh" in first
        assert "## pu.poh" not in text
        sql = (
            "SELECT v.name, count(*) AS orders FROM purchasing.purchaseorderheader h JOIN purchasing.vendor v "
            "ON v.businessentityid = h.vendorid GROUP BY v.name ORDER BY orders DESC, v.name LIMIT 3"
        )
        answer = await client.call_tool("query_database", {"database": "aw", "query": sql, "output_level": "full"})
        expected = bigcat.sql(sql, role="analyst", database=big_catalog.DATABASE)
        for name, orders in expected:
            assert f"{name},{orders}" in text_of(answer), (name, orders, text_of(answer))
        payments = await client.call_tool("query_database", {"database": "aw", "search": "payments"})
        assert "## payment (table, ≈15,000 rows, 6 children folded in)" in text_of(payments)
        whole = await client.call_tool(
            "query_database", {"database": "aw", "query": "SELECT count(*) AS n FROM payment"}
        )
        assert "15000" in text_of(whole).replace(",", "")


@pytest.mark.slow
@needs_postgres
async def test_a_scan_past_the_bound_is_refused_with_the_estimate_and_runs_when_sent_again(
    bigcat: pg_server.Postgres, tmp_path: Path
) -> None:
    """An estimate before a large scan: the rows PostgreSQL's plan reads in sequential scans (each scanned relation
    whole, by the catalog's estimate) past tools.query_database.confirm_scan_rows are refused with the figure and the
    relations; the same statement sent again runs; an index lookup on the same table is not asked about."""
    ws = make_workspace(tmp_path)
    env = {
        "BA_MCP_DATABASES__AW__URL": bigcat.url("analyst", big_catalog.DATABASE),
        "BA_MCP_TOOLS__QUERY_DATABASE__CONFIRM_SCAN_ROWS": "1000",
    }
    async with in_process(ws, ["query_database"], **env) as client:

        async def ask(sql: str) -> tuple[bool, str]:
            result = await client.call_tool("query_database", {"database": "aw", "query": sql})
            return bool(result.is_error), text_of(result)

        count = "SELECT count(*) AS n FROM purchasing.purchaseorderheader WHERE subtotal > 0"
        refused, text = await ask(count)
        assert refused and "LARGE_SCAN" in text, text
        assert "about 4,012 rows" in text and "purchasing.purchaseorderheader ≈4,012 rows" in text
        assert "send the same query again" in text
        again, text = await ask(count)
        expected = bigcat.sql(count, role="analyst", database=big_catalog.DATABASE)[0][0]
        assert not again and str(expected) in text.replace(",", ""), text
        looked_up, text = await ask("SELECT subtotal FROM purchasing.purchaseorderheader WHERE purchaseorderid = 7")
        assert not looked_up, text
        partitioned, text = await ask("SELECT sum(amount) AS total FROM sales.ledger")
        assert partitioned and "about 6,000 rows" in text, text  # its six partitions, each scanned whole
