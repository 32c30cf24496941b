"""Metrics (docs/metrics.md): OSI files, the compiler's semantics on OSI's own test vectors, the boundary around a
model's ``where``, and the same numbers through query_metrics, hand-written SQL and run_python's metric().

The vectors are those of compliance/foundation/DATA_TESTS.md in open-semantic-interchange/OSI: their fixtures'
data in a DuckDB file configured as database ``osi``, each vector's query through query_metrics over stdio, rows
compared as multisets (NULL equals NULL, numbers by value).
"""

from __future__ import annotations

import csv
import io
import json
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, stdio_client

from ba_mcp import registry
from ba_mcp.errors import ToolFailure
from ba_mcp.metrics.catalog import DEMO_FILE, catalog_text
from ba_mcp.metrics.compile import Query, compile_query
from ba_mcp.metrics.load import load_model, validate_files
from tests.conftest import ba, make_workspace, stdio_params, text_of
from tests.osi_fixtures import MODELS, make_database
from tests.sandbox_common import sandbox_params

pytestmark = pytest.mark.anyio

DIALECTS = {"osi": "duckdb"}


def rows_of(text: str) -> list[tuple[Any, ...]]:
    """The rows of a full-level table observation (its CSV block), numbers as floats, NULL as None."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Rows ("))
    body = []
    for line in lines[start + 1 :]:
        if not line or line.startswith(("Note:", "Defined:", "Complete result:", "More rows")):
            break
        body.append(line)
    reader = csv.reader(io.StringIO("\n".join(body)))
    next(reader)  # the header
    return [tuple(_value(cell) for cell in row) for row in reader]


def _value(cell: str) -> Any:
    if cell == "NULL":
        return None
    try:
        return round(float(cell), 2)
    except ValueError:
        return cell


def multiset(rows: list[tuple[Any, ...]]) -> Counter[tuple[Any, ...]]:
    return Counter(
        tuple(round(v, 2) if isinstance(v, float | int) and not isinstance(v, bool) else v for v in r) for r in rows
    )


# -- OSI's vectors, over stdio ---------------------------------------------------------------------------------

# (vector, query_metrics arguments, expected rows or the error's code and the words it must contain)
VECTORS: list[tuple[str, dict[str, Any], Any]] = [
    ("T-001", {"metrics": ["revenue"], "dimensions": ["customers.region"]}, [("EAST", 350), ("WEST", 75), (None, 30)]),
    (
        "T-005a",
        {"metrics": ["total_order_amount"], "dimensions": ["customers.region"]},
        [("EAST", 350), ("WEST", 75), (None, 30)],
    ),
    (
        "T-005b",
        {"metrics": ["avg_order_amount"], "dimensions": ["customers.region"]},
        [("EAST", 116.67), ("WEST", 75), (None, 30)],
    ),
    (
        "T-005e",
        {"metrics": ["distinct_order_statuses"], "dimensions": ["customers.region"]},
        [("EAST", 2), ("WEST", 1), (None, 1)],
    ),
    (
        "T-006",
        {"metrics": ["order_count"], "dimensions": ["customers.region"], "where": ["orders.status = 'completed'"]},
        [("EAST", 2), ("WEST", 1), (None, 1)],
    ),
    # T-010: the orphan order 105 (customer 99) under a NULL region: the join is LEFT, not INNER
    ("T-010", {"metrics": ["revenue"], "dimensions": ["region"]}, [("EAST", 350), ("WEST", 75), (None, 30)]),
    (
        "T-011",
        {"metrics": ["revenue", "return_total"], "dimensions": ["customers.region"]},
        [("EAST", 350, 10), ("WEST", 75, 5), ("NORTH", None, 15), (None, 30, None)],
    ),
    ("T-012", {"metrics": ["revenue", "return_total"]}, [(455, 30)]),
    (
        "T-013",
        {"metrics": ["nopath_revenue", "moved_quantity"]},
        ("NO_SHARED_DIMENSION", ["nopath_orders", "inventory_movements", "shared dimension"]),
    ),
    ("T-015", {"metrics": ["total_gross"], "dimensions": ["actors.height"]}, [(170, 300), (180, 50)]),
    (
        "T-016",
        {"metrics": ["avg_gross"], "dimensions": ["actors.height"]},
        ("UNSAFE_REAGGREGATION", ["AVG", "non-distributive", "nested", "AVG(AVG"]),
    ),
    (
        "T-019",
        {"metrics": ["ambig_order_count"], "dimensions": ["users.region"]},
        ("AMBIGUOUS_PATH", ["order_placed_by", "order_fulfilled_by"]),
    ),
    (
        "T-026",
        {"metrics": ["revenue"], "dimensions": ["customers.region"], "order_by": ["customers.region asc"]},
        [("EAST", 350), ("WEST", 75), (None, 30)],
    ),
    # T-028's table shows a NULL-region row of 200.00 for order 105, but F-PRELUDE (DATA_TESTS.md §3.1, and
    # T-001's 30.00) gives order 105 an amount of 30, which `amount > 60` excludes: on the fixture's data the
    # NULL row is absent. The vector's point — a list is ANDed (EAST is 100, not 150) — holds.
    (
        "T-028",
        {
            "metrics": ["revenue"],
            "dimensions": ["customers.region"],
            "where": ["orders.status = 'completed'", "orders.amount > 60"],
        },
        [("EAST", 100), ("WEST", 75)],
    ),
]


@pytest.fixture(scope="module")
def osi_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = make_workspace(tmp_path_factory.mktemp("osi"))
    make_database(ws / "osi.duckdb")
    (ws / "metrics").mkdir()
    for name, text in MODELS.items():
        (ws / "metrics" / name).write_text(text)
    return ws


@pytest.fixture(scope="module")
async def osi(osi_workspace: Path) -> AsyncIterator[ClientSession]:
    params = stdio_params(
        osi_workspace, BA_MCP_DATABASES__OSI__PATH=str(osi_workspace / "osi.duckdb"), BA_MCP_METRICS__DEMO="false"
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        yield s


@pytest.mark.slow  # a server or command-line process of its own: the slow tier (the fast tier stays in process)
@pytest.mark.parametrize(("vector", "args", "expected"), VECTORS, ids=[v[0] for v in VECTORS])
async def test_the_osi_vectors_through_query_metrics_over_stdio(
    osi: ClientSession, vector: str, args: dict[str, Any], expected: Any
) -> None:
    result = await osi.call_tool("query_metrics", {**args, "output_level": "full"})
    text = text_of(result)
    if isinstance(expected, tuple):  # an error: its code and the words OSI requires in its diagnostic
        code, words = expected
        assert result.is_error, text
        assert f"Error Code: {code}" in text, text
        for word in words:
            assert word.lower() in text.lower(), (word, text)
        return
    assert not result.is_error, text
    rows = rows_of(text)
    assert multiset(rows) == multiset(expected), (vector, rows)
    if vector == "T-026":  # the order itself: NULLS LAST, even where the dialect's default would agree
        assert rows == [tuple(float(v) if isinstance(v, int) else v for v in r) for r in expected], rows


def test_compiled_sql_is_deterministic_says_nulls_last_and_ands_a_list() -> None:
    model = load_model(list(MODELS.items()), DIALECTS)
    q = Query(metrics=["revenue"], dimensions=["customers.region"], order_by=["customers.region asc"])
    first, second = compile_query(model, q).sql, compile_query(load_model(list(MODELS.items()), DIALECTS), q).sql
    assert first == second  # D-014: byte-identical
    assert first.endswith("ORDER BY region ASC NULLS LAST"), first  # T-026's SQL contract
    desc = compile_query(model, Query(metrics=["revenue"], dimensions=["region"], order_by=["revenue desc"])).sql
    assert desc.endswith("ORDER BY revenue DESC NULLS LAST"), desc
    listed = Query(
        metrics=["revenue"], dimensions=["region"], where=["orders.status = 'completed'", "orders.amount > 60"]
    )
    single = Query(
        metrics=["revenue"], dimensions=["region"], where=["orders.status = 'completed' AND orders.amount > 60"]
    )
    assert compile_query(model, listed).sql == compile_query(model, single).sql  # T-028: the list is an AND
    # no dimensions, two facts: CROSS JOIN of one-row branches (T-012); with dimensions: FULL OUTER (T-011)
    assert "CROSS JOIN" in compile_query(model, Query(metrics=["revenue", "return_total"])).sql
    stitched = compile_query(model, Query(metrics=["revenue", "return_total"], dimensions=["region"])).sql
    assert "UNION SELECT" in stitched and "LEFT JOIN b2 ON k.d1 IS NOT DISTINCT FROM b2.d1" in stitched, stitched


def test_the_compiler_targets_each_database_dialect() -> None:
    """The same model re-pointed at PostgreSQL, SQLite and Spark compiles to each one's SQL (grains included)."""
    prelude = MODELS["prelude.yml"]
    for dialect, expect in [
        ("postgres", "DATE_TRUNC('MONTH'"),
        ("sqlite", "'start of month'"),
        ("spark", "DATE_TRUNC('MONTH'"),
    ]:
        text = prelude.replace("source: osi.", "source: wh.public.").replace(
            "{name: status, expression: status, dimension: {}}",
            "{name: status, expression: status, dimension: {}}\n"
            "      - {name: placed, expression: placed, dimension: {is_time: true}}",
        )
        model = load_model([("m.yml", text)], {"wh": dialect}, registry.grain_sql())
        assert "revenue" in model.metrics, model.warnings
        sql = compile_query(model, Query(metrics=["revenue"], dimensions=["region"], time_grain="month")).sql
        assert expect in sql and "public.orders AS orders" in sql, (dialect, sql)


# -- the model's where: a boundary by the parse tree, not by text ----------------------------------------------

HOSTILE = [
    ("orders.customer_id IN (SELECT id FROM premium_customers)", "subquery"),
    ("EXISTS (SELECT 1 FROM customers)", "subquery"),
    ("orders.status = 'completed' -- and the rest", "comment"),
    ("orders.status = 'completed' /* hidden */", "comment"),
    ("orders.status = 'x'; DROP TABLE orders", "';'"),
    ("pg_sleep(10) IS NULL", "PG_SLEEP"),
    ("read_csv('/etc/passwd') IS NOT NULL", "READ_CSV"),
    ("nextval('orders_id_seq') > 0", "NEXTVAL"),
    ("customers.secret_salary > 0", "no field"),
    ("orders.amount > (SELECT max(amount) FROM orders)", "subquery"),
    ("SUM(orders.amount) > 100", "aggregate"),
    ("revenue > 100", "metric"),
    ("ROW_NUMBER() OVER () = 1", "window"),
    ("osi.main.orders.amount > 1", "more than dataset.field"),
    ("$1 = 1", "not allowed"),
]


@pytest.mark.parametrize(("predicate", "said"), HOSTILE, ids=[h[1] + str(i) for i, h in enumerate(HOSTILE)])
def test_a_hostile_where_is_refused_by_its_parse_tree(predicate: str, said: str) -> None:
    model = load_model(list(MODELS.items()), DIALECTS)
    with pytest.raises(ToolFailure) as caught:
        compile_query(model, Query(metrics=["revenue"], dimensions=["region"], where=[predicate]))
    failure = caught.value
    assert failure.type.value == "validation_error"
    assert said.lower() in (failure.message + failure.hint).lower(), failure.message


@pytest.mark.slow  # a server or command-line process of its own: the slow tier (the fast tier stays in process)
async def test_hostile_where_and_unknown_names_over_stdio_then_the_server_keeps_serving(osi: ClientSession) -> None:
    for predicate in (
        "orders.customer_id IN (SELECT id FROM premium_customers)",
        "1=1; SELECT 1",
        "pg_sleep(5) IS NULL",
    ):
        result = await osi.call_tool("query_metrics", {"metrics": ["revenue"], "where": [predicate]})
        assert result.is_error and "Error Code: BAD_PREDICATE" in text_of(result), text_of(result)
    result = await osi.call_tool("query_metrics", {"metrics": ["revenu"], "dimensions": ["region"]})
    assert result.is_error and "UNKNOWN_METRIC" in text_of(result) and "revenue" in text_of(result), text_of(result)
    result = await osi.call_tool("query_metrics", {"metrics": ["revenue"], "dimensions": ["customers.regoin"]})
    text = text_of(result)
    assert result.is_error and "UNKNOWN_DIMENSION" in text and "customers.region" in text, text
    result = await osi.call_tool("query_metrics", {"metrics": ["revenue"], "dimensions": ["customers.region"]})
    assert not result.is_error, text_of(result)


# -- files: both OSI shapes, strict and lenient ------------------------------------------------------------------

OSI_10 = """\
semantic_model:
  - name: shop
    custom_extensions:
      - {vendor_name: COMMON, data: '{"filters": {"big": "orders.amount > 60"}}'}
    datasets:
      - name: orders
        source: osi.main.orders
        primary_key: [id]
        fields:
          - name: id
            expression: {dialects: [{dialect: ANSI_SQL, expression: id}]}
          - name: amount
            expression:
              dialects: [{dialect: ANSI_SQL, expression: amount}, {dialect: SNOWFLAKE, expression: "amount::number"}]
    metrics:
      - name: big_revenue
        expression: {dialects: [{dialect: ANSI_SQL, expression: "SUM(orders.amount)"}]}
        custom_extensions:
          - {vendor_name: COMMON, data: '{"filter": "big"}'}
"""


def test_an_osi_10_file_with_dialects_and_a_named_filter() -> None:
    model, problems = validate_files([("shop.yml", OSI_10)], DIALECTS)
    assert problems == []
    compiled = compile_query(model, Query(metrics=["big_revenue"]))
    assert "WHERE orders.amount > 60" in compiled.sql and "main.orders AS orders" in compiled.sql, compiled.sql
    assert compiled.definitions == ["big_revenue = SUM(orders.amount) where orders.amount > 60"]


def test_strict_validation_names_file_and_line_and_lenient_load_serves_the_rest() -> None:
    broken = """\
name: broken
datasets:
  - name: a
    source: osi.orders
    primary_key: [id]
    colour: blue
    fields:
      - {name: id, expression: id}
      - {name: b_id, expression: b_id}
      - {name: amount, expression: "amount +* 2"}
  - name: b
    source: osi.customers
    primary_key: [id]
    fields:
      - {name: id, expression: id}
      - {name: a_id, expression: a_id}
relationships:
  - {name: a_to_b, from: a, to: b, from_columns: [b_id], to_columns: [id]}
  - {name: b_to_a, from: b, to: a, from_columns: [a_id], to_columns: [id]}
  - {name: to_nowhere, from: a, to: c, from_columns: [id], to_columns: [id]}
metrics:
  - {name: good, expression: "COUNT(a.id)"}
  - {name: bad, expression: "SUM(a.nothing)"}
  - {name: built_on_bad, expression: "bad / NULLIF(good, 0)"}
  - {name: nowhere, expression: "SUM(x.y)", description: unknown dataset}
"""
    _, problems = validate_files([("m.yml", broken)], DIALECTS)
    text = "\n".join(problems)
    assert "m.yml:3: dataset a: unknown keys ['colour']" in text, text
    assert "m.yml:10: field a.amount: does not parse" in text, text
    assert "m.yml:20: relationship to_nowhere: unknown dataset 'c'" in text, text
    assert "relationships form a cycle: a → b → a" in text, text
    assert "m.yml:23: metric bad: metric bad names a.nothing" in text, text
    assert "m.yml:25: metric nowhere" in text and "'x', which is no dataset" in text, text
    lenient = load_model([("m.yml", broken)], DIALECTS)
    assert sorted(lenient.metrics) == ["good"]  # the broken ones (and the one built on one) are left out
    assert any("built_on_bad" in w for w in lenient.warnings), lenient.warnings


def test_the_cli_lists_shows_and_validates(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    listed = ba("metrics", "list", workspace=ws)
    assert listed.returncode == 0 and "net_revenue" in listed.stdout and "average_order_value" in listed.stdout
    shown = ba("metrics", "show", "average_order_value", workspace=ws)
    assert shown.returncode == 0 and "net_revenue / NULLIF(order_count, 0)" in shown.stdout, shown.stdout
    assert "FULL OUTER JOIN" not in shown.stdout and "CROSS JOIN" in shown.stdout  # no dimensions: one row
    missing = ba("metrics", "show", "aov", workspace=ws)
    assert missing.returncode == 1 and "average_order_value" in missing.stderr  # a synonym points to its metric
    assert ba("metrics", "validate", workspace=ws).returncode == 0
    bad = tmp_path / "bad.yml"
    bad.write_text("datasets:\n  - name: x\n    source: nowhere.t\n")
    failed = ba("metrics", "validate", str(bad), workspace=ws)
    assert (
        failed.returncode == 1
        and f"{bad}:2: dataset x" in failed.stdout
        and "names no configured database" in failed.stdout
    )


def test_the_demo_catalog_fits_its_token_budget() -> None:
    from ba_mcp.pipeline.tokens import TokenCounter
    from ba_mcp.settings import config_dir

    model = load_model([("demo", DEMO_FILE.read_text())], {"demo": "duckdb"})
    assert model.warnings == [] and len(model.metrics) >= 8
    summary = {
        "metrics": [{"name": m.name, "headline": m.headline()} for m in model.metrics.values()],
        "dimensions": [
            f"{f.dataset}.{f.name}" for d in model.datasets.values() for f in d.fields.values() if f.is_dimension
        ],
    }
    text = catalog_text(summary)
    tokens = TokenCounter(config_dir() / "token_encoders.yaml", "claude").raw_tokens(text)
    assert tokens <= 400, (tokens, text)
    assert "net_revenue" in text and "regions.region" in text and "orders.order_date" in text


@pytest.mark.slow  # timed: the fast tier never depends on the wall clock
def test_compiling_a_three_dataset_query_takes_milliseconds() -> None:
    """Not a timing assertion of the suite's speed: a bound 10x above the measured median (bench_metrics.py)
    that only an accidental blow-up (a path search gone exponential) would cross."""
    model = load_model([("demo", DEMO_FILE.read_text())], {"demo": "duckdb"})
    q = Query(metrics=["net_revenue", "order_count"], dimensions=["regions.region", "customers.segment"])
    start = time.perf_counter()
    for _ in range(5):
        compile_query(model, q)
    assert (time.perf_counter() - start) / 5 < 0.2


# -- the same numbers three ways, on the demo database ---------------------------------------------------------

HAND_WRITTEN = """
SELECT region_name AS region, sum(net_revenue) AS net_revenue, count(DISTINCT order_id) AS order_count,
       100.0 * sum(gross_margin) / sum(net_revenue) AS margin_pct
FROM order_facts WHERE status = 'completed' GROUP BY region_name
"""


@pytest.mark.slow  # a server or command-line process of its own: the slow tier (the fast tier stays in process)
async def test_the_same_metric_through_query_metrics_sql_and_run_python(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    params = sandbox_params(ws, BA_MCP_SANDBOX__ALLOWED_IMPORTS="*")
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        by_metrics = await s.call_tool(
            "query_metrics",
            {"metrics": ["net_revenue", "order_count", "margin_pct"], "dimensions": ["region"], "output_level": "full"},
        )
        text = text_of(by_metrics)
        assert not by_metrics.is_error, text
        assert "Defined: net_revenue = SUM(order_lines.net_amount) where orders.status = 'completed'" in text, text
        by_sql = await s.call_tool("query_database", {"query": HAND_WRITTEN, "output_level": "full"})
        assert not by_sql.is_error, text_of(by_sql)
        code = (
            "df = metric(['net_revenue', 'order_count', 'margin_pct'], by=['region'])\n"
            "import json; print(json.dumps(df.astype(object).where(df.notna(), None).values.tolist()))"
        )
        by_python = await s.call_tool("run_python", {"code": code})
        assert not by_python.is_error, text_of(by_python)
        printed = [line for line in text_of(by_python).splitlines() if line.startswith("[[")]
        assert printed, text_of(by_python)
        python_rows = json.loads(printed[0])
        expected = multiset(rows_of(text_of(by_sql)))
        assert len(expected) == 6  # five regions and the customers with none
        assert multiset(rows_of(text)) == expected
        assert multiset([tuple(r) for r in python_rows]) == expected
        # brief names no definitions; the grain adds the metric's own time dimension
        brief = await s.call_tool(
            "query_metrics", {"metrics": ["net_revenue"], "time_grain": "year", "output_level": "brief"}
        )
        assert "Defined:" not in text_of(brief) and "order_date_year" in text_of(brief), text_of(brief)
        catalog = await s.read_resource("metrics://catalog")  # type: ignore[arg-type]
        assert "net_revenue" in catalog.contents[0].text  # type: ignore[union-attr]
        one = await s.read_resource("metrics://margin_pct")  # type: ignore[arg-type]
        assert "gross_margin / NULLIF(net_revenue, 0)" in one.contents[0].text  # type: ignore[union-attr]


# -- where files are found; completion; SQLite ---------------------------------------------------------------


async def test_a_read_roots_metrics_folder_is_served_and_names_complete(tmp_path: Path) -> None:
    """The Claude Code plugin maps the project to the read root `project`: project/metrics/*.yml is found."""
    from mcp.types import ResourceTemplateReference

    from tests.conftest import in_process

    ws, project = make_workspace(tmp_path / "ws"), tmp_path / "project"
    (project / "metrics").mkdir(parents=True)
    (project / "metrics" / "extra.yml").write_text(
        "name: extra\nmetrics:\n"
        "  - {name: big_orders, expression: 'COUNT(orders.order_id)', description: Orders over 1000.}\n"
    )
    # a file that only adds a metric over the demo's datasets extends the demo's model (metrics.demo: null)
    async with in_process(ws, BA_MCP_FILES__READ_ROOTS=json.dumps({"project": str(project)})) as client:
        catalog = await client.read_resource("metrics://catalog")
        assert "- big_orders: Orders over 1000" in catalog.contents[0].text  # type: ignore[union-attr]
        done = await client.complete(ResourceTemplateReference(uri="metrics://{name}"), {"name": "name", "value": "n"})
        assert done.completion.values == ["net_revenue"], done.completion
        result = await client.call_tool("query_metrics", {"metrics": ["big_orders"], "output_level": "full"})
        assert rows_of(text_of(result)) == [(20000.0,)], text_of(result)
        (project / "metrics" / "extra.yml").write_text("name: extra\n")  # a changed file is read again
        catalog = await client.read_resource("metrics://catalog")
        assert "big_orders" not in catalog.contents[0].text  # type: ignore[union-attr]


@pytest.mark.slow  # a server or command-line process of its own: the slow tier (the fast tier stays in process)
async def test_the_osi_vectors_on_sqlite(tmp_path: Path) -> None:
    """The same model on a SQLite file (its own dialect: `IS` for IS NOT DISTINCT FROM, date grains by DATE())."""
    import sqlite3

    from tests.osi_fixtures import TABLES

    ws = make_workspace(tmp_path)
    con = sqlite3.connect(ws / "osi.db")
    for name, (columns, rows) in TABLES.items():
        con.execute(f"CREATE TABLE {name} ({columns.replace('DECIMAL(10,2)', 'NUMERIC')})")
        con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    con.commit()
    con.close()
    (ws / "metrics").mkdir()
    (ws / "metrics" / "prelude.yml").write_text(MODELS["prelude.yml"].replace("source: osi.", "source: lite."))
    params = stdio_params(ws, BA_MCP_DATABASES__LITE__URL="sqlite:///osi.db", BA_MCP_METRICS__DEMO="false")
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        for vector in ("T-001", "T-006", "T-011", "T-012", "T-026", "T-028"):
            args, expected = next((a, e) for v, a, e in VECTORS if v == vector)
            result = await s.call_tool("query_metrics", {**args, "output_level": "full"})
            assert not result.is_error, text_of(result)
            assert multiset(rows_of(text_of(result))) == multiset(expected), (vector, text_of(result))


def test_the_bundled_demo_file_yields_to_the_users_names() -> None:
    from ba_mcp.metrics.catalog import DEMO_NAME

    own = "name: mine\ndatasets:\n  - name: orders\n    source: osi.orders\n    fields: [{name: id, expression: id}]\n"
    own += "metrics:\n  - {name: orders_here, expression: 'COUNT(orders.id)'}\n"
    dialects = {"osi": "duckdb", "demo": "duckdb"}
    model = load_model([(DEMO_NAME, DEMO_FILE.read_text()), ("mine.yml", own)], dialects)
    assert sorted(model.metrics) == ["orders_here"] and model.datasets["orders"].database == "osi"
    assert any("left out, as your metric files define orders" in w for w in model.warnings), model.warnings
    beside = own.replace("name: orders\n", "name: my_orders\n").replace("COUNT(orders.id)", "COUNT(my_orders.id)")
    both = load_model([(DEMO_NAME, DEMO_FILE.read_text()), ("mine.yml", beside)], dialects)
    assert "net_revenue" in both.metrics and "orders_here" in both.metrics and both.warnings == []


async def test_metric_files_are_never_read_through_links_devices_or_past_the_cap(tmp_path: Path) -> None:
    """S-2 for metric files: a link in a project's metrics/ to a file outside every root, to /proc/kallsyms (past
    the cap, whatever stat says) or to /proc/kmsg (a read that blocks), a FIFO, and a metrics/ folder that is
    itself a link: none is read; the project's own file is, and query_metrics answers."""
    import os

    from tests.conftest import in_process

    ws, project, outside = make_workspace(tmp_path / "ws"), tmp_path / "project", tmp_path / "outside"
    (project / "metrics").mkdir(parents=True)
    outside.mkdir()
    leaked = "name: leaked\nmetrics:\n  - {name: leaked_secret, expression: 'COUNT(orders.order_id)'}\n"
    (outside / "secret.yml").write_text(leaked)
    (project / "metrics" / "own.yml").write_text(
        "name: own\nmetrics:\n  - {name: own_orders, expression: 'COUNT(orders.order_id)', description: Ours.}\n"
    )
    (project / "metrics" / "leak.yml").symlink_to(outside / "secret.yml")
    (project / "metrics" / "kallsyms.yml").symlink_to("/proc/kallsyms")
    (project / "metrics" / "kmsg.yml").symlink_to("/proc/kmsg")
    os.mkfifo(project / "metrics" / "fifo.yml")
    other = tmp_path / "other"  # a second root whose metrics/ folder is a link to the outside
    other.mkdir()
    (other / "metrics").symlink_to(outside)
    roots = json.dumps({"project": str(project), "other": str(other)})
    async with in_process(ws, BA_MCP_FILES__READ_ROOTS=roots, BA_MCP_TOOLS__QUERY_METRICS__TIMEOUT_S="120") as client:
        catalog = (await client.read_resource("metrics://catalog")).contents[0].text  # type: ignore[union-attr]
        assert "own_orders" in catalog and "leaked_secret" not in catalog, catalog
        result = await client.call_tool("query_metrics", {"metrics": ["own_orders"], "output_level": "full"})
        assert not result.is_error and rows_of(text_of(result)) == [(20000.0,)], text_of(result)
    from ba_mcp.metrics.files import metric_files, read_sources

    sources, warnings = read_sources(metric_files([project / "metrics", other / "metrics"]), 1024 * 1024)
    assert [Path(name).name for name, _ in sources] == ["own.yml"]
    said = "\n".join(warnings)
    for name in ("leak.yml", "kallsyms.yml", "kmsg.yml"):
        assert f"{name}: cannot be read (a symbolic link, not followed)" in said, said
    assert "fifo.yml: not a regular file" in said, said
