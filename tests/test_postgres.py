"""Issue 23: your own databases — a real PostgreSQL 15 started by the tests, and a real SQLite file — through a
spawned server over stdio.

Read-only is the database's and the role's doing (one prepared statement in a READ ONLY transaction that is
always rolled back; privileged roles refused at connect; SQLite read-only, immutable and bound read-only): the
hostile list runs as a role that CAN write and must leave the database exactly as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import hashlib
import json
import re
import sqlite3
import time
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import psutil
import pytest
from mcp import ClientSession, stdio_client
from mcp.types import ResourceTemplateReference

from ba_mcp.metrics.catalog import DEMO_FILE
from ba_mcp.results import exact_number
from tests import pg_server
from tests.conftest import ba, make_workspace, server_process, stdio_params, text_of

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,  # a PostgreSQL server of its own, its roles and grants: a process boundary
    pytest.mark.skipif(not pg_server.available(), reason="PostgreSQL binaries (initdb, pg_ctl) are not installed"),
]

ARTIFACT = re.compile(r"artifact_[0-9a-f]{12}")


@pytest.fixture(scope="module")
def pg() -> pg_server.Postgres:
    """The run's PostgreSQL, started in the background when the run began (tests/background.py)."""
    return pg_server.running()


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = make_workspace(tmp_path_factory.mktemp("pg"))
    lines = ["customer_id,region"] + [f"{i},{'north' if i % 2 else 'south'}" for i in range(1, 31)]
    (ws / "uploads" / "regions.csv").write_text("\n".join(lines) + "\n")
    lite = ws / "data" / "kpis.db"
    lite.parent.mkdir(exist_ok=True)
    con = sqlite3.connect(lite)
    con.executescript(
        "CREATE TABLE kpi (month TEXT, revenue REAL); INSERT INTO kpi VALUES ('2025-01', 10.5), ('2025-02', 20.25);"
    )
    con.commit()
    con.close()
    return ws


def _env(pg: pg_server.Postgres, **extra: str) -> dict[str, str]:
    closed = pg.port + 1 if pg.port < 65000 else pg.port - 1
    return {
        "BA_MCP_DATABASES__SHOP__URL": f"postgresql://analyst:${{SHOP_PASSWORD}}@127.0.0.1:{pg.port}/shop",
        "SHOP_PASSWORD": pg_server.PASSWORDS["analyst"],
        "BA_MCP_DATABASES__SHOP__DESCRIPTION": "Webshop orders",
        "BA_MCP_DATABASES__SHOP__MAX_CONCURRENT": "4",
        "BA_MCP_DATABASES__WRITER__URL": pg.url("owner"),
        "BA_MCP_DATABASES__WRITER__ALLOW_WRITABLE_ROLE": "true",
        "BA_MCP_DATABASES__OWNED__URL": pg.url("owner"),  # a role that can write: refused unless allowed
        "BA_MCP_DATABASES__LINKED__URL": pg.url("analyst", "linked"),
        "BA_MCP_DATABASES__LINKEDOK__URL": pg.url("analyst", "linked"),
        "BA_MCP_DATABASES__LINKEDOK__ALLOW_WRITABLE_ROLE": "true",
        "BA_MCP_DATABASES__TRGM__URL": pg.url("analyst", "linked"),  # pg_trgm's similarity allowed by name
        "BA_MCP_DATABASES__TRGM__ALLOW_WRITABLE_ROLE": "true",
        "BA_MCP_DATABASES__TRGM__ALLOW_FUNCTIONS": '["similarity"]',
        "BA_MCP_DATABASES__QUERYPW__URL": f"postgresql://analyst@127.0.0.1:{pg.port}/shop?password=Query-Secret-9",
        "BA_MCP_DATABASES__QUERYDOWN__URL": f"postgresql://analyst@127.0.0.1:{closed}/shop?sslmode=disable&password=Query-Secret-9",
        "BA_MCP_DATABASES__SUPER__URL": pg.url("postgres"),
        "BA_MCP_DATABASES__FILES__URL": pg.url("filereader"),
        "BA_MCP_DATABASES__WRONG__URL": pg.url("analyst", password="not-the-password"),
        "BA_MCP_DATABASES__DOWN__URL": f"postgresql://analyst:x@127.0.0.1:{closed}/shop",
        "BA_MCP_DATABASES__LITE__URL": "sqlite:///data/kpis.db",
        "BA_MCP_DATABASES__WIDE__URL": pg.url("analyst"),
        "BA_MCP_DATABASES__WIDE__SCHEMAS": '["wide"]',
        "BA_MCP_ENGINE__SPARE_WORKERS": "0",
        **extra,
    }


@contextlib.asynccontextmanager
async def _client(ws: Path, env: dict[str, str], errlog: Any) -> AsyncIterator[ClientSession]:
    async with stdio_client(stdio_params(ws, **env), errlog=errlog) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        yield s


@pytest.fixture(scope="module")
def said() -> list[str]:
    """Everything the server said in these tests (results, errors, resources): no password in it."""
    return []


@pytest.fixture(scope="module")
def stderr_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pglog") / "stderr.txt"


@pytest.fixture(scope="module")
async def shop(pg: pg_server.Postgres, ws: Path, stderr_log: Path) -> Any:
    with stderr_log.open("w") as errlog:
        # a generous default (a busy machine is slow, not wrong); the timeout test passes its own
        env = _env(pg, BA_MCP_TOOLS__QUERY_DATABASE__TIMEOUT_S="120", BA_MCP_SANDBOX__ALLOWED_IMPORTS="*")
        async with _client(ws, env, errlog) as s:
            yield s


async def _ask(s: ClientSession, said: list[str], **args: Any) -> tuple[bool, str]:
    result = await s.call_tool("query_database", args)
    text = text_of(result)
    said.append(text + json.dumps(result.model_dump(mode="json")))
    return result.is_error, text


async def test_a_query_runs_in_postgres_with_params_exact_decimals_and_an_artifact_duckdb_joins(
    shop: ClientSession, pg: pg_server.Postgres, said: list[str]
) -> None:
    failed, text = await _ask(
        shop,
        said,
        database="shop",
        query="SELECT status, count(*) AS n, sum(amount) AS revenue FROM orders GROUP BY status ORDER BY status",
    )
    assert not failed, text
    for status, n, revenue in pg.sql(
        "SELECT status, count(*), sum(amount)::text FROM orders GROUP BY status ORDER BY status"
    ):
        assert f"{status},{n},{exact_number(Decimal(revenue))}" in text, text  # NUMERIC exact to the cent
    failed, text = await _ask(
        shop, said, database="shop", query="SELECT count(*) AS n FROM orders WHERE amount > $1", params=[400]
    )
    expected = pg.sql("SELECT count(*) FROM orders WHERE amount > 400")[0][0]
    assert not failed and text.rstrip().endswith(str(expected)), text
    # cut at max_rows: the complete result is an artifact, which DuckDB joins with an uploaded CSV
    failed, text = await _ask(
        shop, said, database="shop", query="SELECT customer_id, amount FROM orders ORDER BY id", max_rows=5
    )
    assert not failed and "Truncated: 5 of 1,000 rows shown" in text, text
    kept = ARTIFACT.search(text).group(0)  # type: ignore[union-attr]
    failed, text = await _ask(
        shop,
        said,
        query=f"SELECT r.region, sum(o.amount) AS revenue FROM {kept} o JOIN 'uploads/regions.csv' r "
        "USING (customer_id) GROUP BY 1 ORDER BY 1",
    )
    assert not failed, text
    totals: dict[str, Decimal] = {"north": Decimal(0), "south": Decimal(0)}
    for customer_id, amount in pg.sql("SELECT customer_id, amount::text FROM orders"):
        totals["north" if customer_id % 2 else "south"] += Decimal(amount)
    north, south = (exact_number(totals[r]) for r in ("north", "south"))
    assert f"north,{north}" in text and f"south,{south}" in text, text
    failed, brief = await _ask(shop, said, database="shop", query="SELECT * FROM customers", output_level="brief")
    assert not failed and "30 rows" in brief, brief


HOSTILE = [
    "SELECT 1; DROP TABLE orders",
    "DROP TABLE orders",
    "CREATE TABLE planted (a int)",
    "INSERT INTO audit VALUES ('x')",
    "UPDATE orders SET amount = 0",
    "DELETE FROM orders",
    "TRUNCATE orders",
    "WITH gone AS (DELETE FROM orders RETURNING *) SELECT count(*) FROM gone",
    "SELECT scribble()",
    "CALL wipe()",
    "SELECT nextval('ticket')",
    "SET TRANSACTION READ WRITE",
    "INSERT INTO audit VALUES ('after set transaction')",
    "SELECT set_config('transaction_read_only', 'off', false)",
    "SELECT set_config('default_transaction_read_only', 'off', false)",
    "INSERT INTO audit VALUES ('after set_config')",
    "SET default_transaction_read_only = off",
    "INSERT INTO audit VALUES ('after set')",
    "PREPARE sneaky AS INSERT INTO audit VALUES ('prepared')",
    "EXECUTE sneaky",
    "DO $$ BEGIN INSERT INTO audit VALUES ('do'); END $$",
    "COPY audit FROM PROGRAM 'echo planted'",
    "LOCK TABLE orders IN ACCESS EXCLUSIVE MODE",
    "VACUUM orders",
    "COMMIT",
    "INSERT INTO audit VALUES ('after commit')",
    "ROLLBACK",
    "ROLLBACK",
    "INSERT INTO audit VALUES ('after rollback')",
    "ALTER DATABASE shop SET default_transaction_read_only = off",
    "CREATE TEMP TABLE scratch AS SELECT 1 AS a",
    "SELECT * FROM scratch",
]


async def test_a_role_that_can_write_changes_nothing(
    shop: ClientSession, pg: pg_server.Postgres, said: list[str]
) -> None:
    before = pg_server.fingerprint(pg)
    outcomes = []
    for statement in HOSTILE:
        failed, text = await _ask(shop, said, database="writer", query=statement)
        outcomes.append((statement, failed, text.splitlines()[2:4]))
    assert pg_server.fingerprint(pg) == before, outcomes
    # every write was refused by the database, clearly; what ran changed nothing that outlives the call (a
    # lock is released, a temp table dropped, a setting undone by the rollback that ends every call)
    harmless = ("SELECT", "SET", "PREPARE", "COMMIT", "ROLLBACK", "LOCK", "CREATE TEMP")
    changing = [o for o in outcomes if not o[1] and not o[0].startswith(harmless)]
    assert not changing, changing
    refused = dict((o[0], o[2]) for o in outcomes)
    assert "Error Code: ONE_STATEMENT" in refused["SELECT 1; DROP TABLE orders"]
    assert "Error Code: READ_ONLY" in refused["INSERT INTO audit VALUES ('after commit')"]
    assert "Error Code: READ_ONLY" in refused["INSERT INTO audit VALUES ('after rollback')"]
    assert "Error Code: READ_ONLY" in refused["INSERT INTO audit VALUES ('after set_config')"]
    assert "UNKNOWN_TABLE" in " ".join(refused["SELECT * FROM scratch"])  # the temp table went with its call
    assert pg.sql("SELECT count(*) FROM orders", role="analyst")[0][0] == 1000  # no lock outlived its call
    failed, text = await _ask(shop, said, database="writer", query="SELECT count(*) AS n FROM orders")
    assert not failed and text.rstrip().endswith("1000"), text  # the connection serves on


async def test_privileged_roles_are_refused_and_no_program_runs(
    shop: ClientSession, pg: pg_server.Postgres, said: list[str], tmp_path: Path
) -> None:
    planted = Path(pg.folder) / "planted-by-copy"
    for database, what in (("super", "superuser"), ("files", "pg_read_server_files")):
        failed, text = await _ask(shop, said, database=database, query=f"COPY (SELECT 1) TO PROGRAM 'touch {planted}'")
        assert failed and "PRIVILEGED_ROLE" in text and what in text and "allow_privileged_role" in text, text
    assert not planted.exists()


async def test_a_role_that_can_write_or_use_dblink_is_refused_and_dblink_never_commits(
    shop: ClientSession, pg: pg_server.Postgres, said: list[str]
) -> None:
    """S-14: a read-only transaction does not stop dblink_exec committing on a connection of its own."""
    failed, text = await _ask(shop, said, database="owned", query="SELECT count(*) FROM orders")
    assert failed and "WRITABLE_ROLE" in text and "write to tables" in text and "allow_writable_role" in text, text
    secret = pg_server.PASSWORDS["owner"]
    attack = (
        f"SELECT dblink_exec('host=127.0.0.1 port={pg.port} dbname=linked user=owner password={secret}', "
        "'INSERT INTO ledger VALUES (''planted'')')"
    )
    failed, text = await _ask(shop, said, database="linked", query=attack)
    assert failed and "WRITABLE_ROLE" in text and "dblink" in text, text
    said.pop()  # the attack's own text holds the owner's password (the model wrote it, not the server)
    failed, text = await _ask(shop, said, database="linkedok", query=attack)  # the role allowed by name: not dblink
    assert failed and "FUNCTION_NOT_ALLOWED" in text and "dblink_exec" in text, text
    said.pop()
    assert pg.sql("SELECT count(*) FROM ledger", database="linked")[0][0] == 0


async def test_no_lock_or_session_state_outlives_a_call(
    shop: ClientSession, pg: pg_server.Postgres, said: list[str]
) -> None:
    """S-14: session-level advisory locks (a rollback keeps them) filling the lock table blocked every new
    connection to the server, a superuser's too — and the reset after the answer left them for over a second: the
    lock functions are off the allow-list, so no lock is ever taken; prepared statements outlived the call."""
    for attack in (
        "SELECT count(pg_advisory_lock(k)) FROM generate_series(1, 100000) k",
        "SELECT pg_advisory_lock(7) AS held",
        "SELECT pg_try_advisory_xact_lock(7) AS held",
    ):
        failed, text = await _ask(shop, said, database="shop", query=attack)
        assert failed and "FUNCTION_NOT_ALLOWED" in text and "advisory" in text, text
        assert pg.sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")[0][0] == 0
    failed, text = await _ask(shop, said, database="shop", query="PREPARE kept AS SELECT 1")
    assert pg.sql("SELECT 1", role="analyst")[0][0] == 1  # a new connection is served
    failed, text = await _ask(shop, said, database="shop", query="EXECUTE kept")
    assert failed and 'prepared statement "kept" does not exist' in text, text


async def test_a_statement_calls_only_functions_on_the_catalogs_allow_list(
    shop: ClientSession, pg: pg_server.Postgres, said: list[str]
) -> None:
    """S-14: functions that run SQL given as a string hide their inner statement from the plan — another session's
    SQL was read, and ended, through them; the names are read by PostgreSQL's own parser, wherever they stand
    (VALUES, LIMIT, attribute notation), and a view the DBA made over pg_stat_activity reads like the view."""
    pg.sql(
        "CREATE OR REPLACE VIEW public.activity AS SELECT query FROM pg_stat_activity",
        "GRANT SELECT ON public.activity TO analyst",
        "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    )
    pg.sql("CREATE EXTENSION IF NOT EXISTS pg_trgm", database="linked")
    for attack, named in (
        ("SELECT query_to_xml('select query from pg_' || 'stat_activity', true, false, '')", "query_to_xml"),
        (
            "SELECT query_to_xml(format('select pg_%s(pid) from pg_stat_activity', 'terminate_backend'), true, "
            "false, '')",
            "query_to_xml",
        ),
        ("SELECT * FROM ts_stat('select to_tsvector(query) from pg_stat_activity')", "ts_stat"),
        ("SELECT cursor_to_xml('c', 1, false, false, '')", "cursor_to_xml"),
        ("SELECT query_to_xml_and_xmlschema('select 1', true, false, '')", "query_to_xml_and_xmlschema"),
        ("SELECT * FROM (VALUES (query_to_xml('select 1', true, false, ''))) v(x)", "query_to_xml"),
        ("SELECT 1 LIMIT length(query_to_xml('select 1', true, false, '')::text)", "query_to_xml"),
        (
            "SELECT sum(x) OVER (ROWS BETWEEN pg_backend_pid() PRECEDING AND CURRENT ROW) FROM (SELECT 1 x) t",
            "pg_backend_pid",
        ),
        ("SELECT * FROM activity", "activity"),
        ("SELECT pg_read_file('/etc/passwd')", "pg_read_file"),
        ("SELECT lo_get(1)", "lo_get"),
        ("SELECT pg_catalog.pg_terminate_backend(1)", "pg_terminate_backend"),
        ("SELECT pg_try_advisory_lock(1)", "pg_try_advisory_lock"),
        ("SELECT set_config('work_mem', '1GB', false)", "set_config"),
        ("SELECT similarity('word', 'words')", "similarity"),  # an extension's function: off unless named
    ):
        failed, text = await _ask(shop, said, database="shop", query=attack)
        assert failed and "FUNCTION_NOT_ALLOWED" in text and named in text, (attack, text)
    # what analysts use: dates, text, math, JSON, aggregates, windows, series, the information schema
    for query in (
        "SELECT date_trunc('month', now())::date AS m, extract(year FROM current_date) AS y, "
        "to_char(DATE '2025-03-01', 'YYYY-MM') AS ym, age(TIMESTAMP '2025-03-01', TIMESTAMP '2024-01-01') AS a",
        "SELECT upper(segment) AS s, length(segment) AS n, regexp_replace(segment, 'e', 'E', 'g') AS r, "
        "coalesce(nullif(segment, ''), '-') AS c, segment ILIKE '%cons%' AS l FROM customers LIMIT 3",
        "SELECT round(avg(amount), 2) AS a, percentile_cont(0.5) WITHIN GROUP (ORDER BY amount) AS median, "
        "stddev(amount) AS sd, string_agg(DISTINCT status, ',') AS statuses, count(*) FILTER (WHERE amount > 0) AS n "
        "FROM orders",
        "SELECT id, amount, lag(amount) OVER (ORDER BY id) AS prev, row_number() OVER w AS r, "
        "sum(amount) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS rolling FROM orders "
        "WINDOW w AS (PARTITION BY customer_id ORDER BY id) ORDER BY id LIMIT 5",
        "SELECT jsonb_build_object('a', 1) ->> 'a' AS a, json_agg(x) AS j, to_jsonb(ARRAY[1, 2]) AS arr "
        "FROM generate_series(1, 3) x",
        "SELECT random() < 2 AS r, gen_random_uuid() IS NOT NULL AS u, "
        "clock_timestamp() > now() - interval '1 day' AS t",
        "SELECT count(*) AS n FROM orders TABLESAMPLE BERNOULLI (50) REPEATABLE (1)",
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'orders'",
        "SELECT * FROM revenue_by_segment",
        "SELECT amount::numeric(14, 2) AS a, CAST(id AS text) AS t, id BETWEEN 1 AND 3 AS b FROM orders LIMIT 2",
    ):
        failed, text = await _ask(shop, said, database="shop", query=query)
        assert not failed, (query, text)
    failed, text = await _ask(shop, said, database="trgm", query="SELECT similarity('word', 'words') AS s")
    assert not failed and "0.57" in text, text  # allowed by name: databases.trgm.allow_functions


@pytest.mark.slow
async def test_one_session_cannot_see_or_end_anothers_statements(
    shop: ClientSession, pg: pg_server.Postgres, said: list[str]
) -> None:
    """S-14: every session shares the role, and a role reads its own backends' SQL and may end them; each
    session's statements carry an application_name of their own for the operator."""
    running = asyncio.create_task(
        _ask(shop, said, database="shop", query="SELECT pg_sleep(2) AS slept, 'secret plan' AS s")
    )
    deadline = time.monotonic() + 10
    names: list[Any] = []
    while not names and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        names = pg.sql(
            "SELECT application_name FROM pg_stat_activity WHERE query LIKE '%secret plan%' AND pid <> pg_backend_pid()"
        )
    # who, for the DBA: the operator's name (stdio has no login) and the session's digest
    assert names and re.fullmatch(rf"ba-mcp {re.escape(getpass.getuser())} [0-9a-f]{{8}}", names[0][0]), names
    for attack in (
        "SELECT query FROM pg_stat_activity",
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE 'ba-mcp%'",
        "SELECT pg_cancel_backend(pid) FROM pg_stat_activity",
        "SELECT pg_stat_get_backend_activity(b) FROM pg_stat_get_backend_idset() b",
    ):
        failed, text = await _ask(shop, said, database="writer", query=attack)
        assert failed and "FUNCTION_NOT_ALLOWED" in text, (attack, text)
    failed, text = await running
    assert not failed and "secret plan" in text, text  # the other session's statement ran to its end


async def test_a_password_in_the_url_query_is_never_shown(shop: ClientSession, said: list[str]) -> None:
    failed, text = await _ask(shop, said, database="querydown", query="SELECT 1")
    assert failed and "DATABASE_UNAVAILABLE" in text and "password=***" in text, text
    failed, text = await _ask(shop, said, database="querypw", query="SELECT 1 AS one")  # a wrong password
    assert failed and "DATABASE_AUTH" in text and "password=***" in text, text


@pytest.mark.slow
async def test_a_statement_past_its_timeout_is_cancelled_in_postgres(
    shop: ClientSession, pg: pg_server.Postgres, said: list[str]
) -> None:
    started = time.monotonic()
    failed, text = await _ask(shop, said, database="shop", query="SELECT pg_sleep(30) AS slept", timeout=4)
    assert failed and "timeout" in text, text
    assert time.monotonic() - started < 15
    running = (
        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%pg_sleep(30)%' "
        "AND pid <> pg_backend_pid()"
    )
    deadline = time.monotonic() + 5
    while pg.sql(running)[0][0]:
        assert time.monotonic() < deadline, "the statement still runs in PostgreSQL"
        await asyncio.sleep(0.1)
    failed, text = await _ask(shop, said, database="shop", query="SELECT 7 AS seven")
    assert not failed and text.rstrip().endswith("7"), text


@pytest.mark.slow
async def test_concurrent_calls_share_a_bounded_pool(
    shop: ClientSession, pg: pg_server.Postgres, said: list[str]
) -> None:
    peak = 0

    async def watch() -> None:
        nonlocal peak
        for _ in range(40):
            n = pg.sql("SELECT count(*) FROM pg_stat_activity WHERE usename = 'analyst' AND datname = 'shop'")[0][0]
            peak = max(peak, n)
            await asyncio.sleep(0.05)

    async def one(i: int) -> tuple[bool, str]:
        return await _ask(shop, said, database="shop", query=f"SELECT {i} AS i, pg_sleep(0.2) IS NULL AS slept")

    watcher = asyncio.ensure_future(watch())
    results = await asyncio.gather(*(one(i) for i in range(12)))
    await watcher
    assert all(not failed for failed, _ in results), results
    assert 1 <= peak <= 4, peak  # databases.shop.max_concurrent


async def test_connections_the_database_ended_are_replaced(
    shop: ClientSession, pg: pg_server.Postgres, said: list[str]
) -> None:
    pg.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'analyst' AND datname = 'shop'")
    failed, text = await _ask(shop, said, database="shop", query="SELECT 2 AS two")
    assert not failed and text.rstrip().endswith("2"), text


async def test_the_schema_resource_names_the_dialect_comments_estimates_and_values(
    shop: ClientSession, said: list[str]
) -> None:
    schema = (await shop.read_resource("db://shop/schema")).contents[0].text  # type: ignore[union-attr]
    said.append(schema)
    assert "# Database shop (PostgreSQL 15" in schema and "Webshop orders" in schema
    assert "## orders (table, ≈1,000 rows)" in schema and "- amount: numeric(12,2)" in schema
    assert "Who buys" in schema and "segment: text — consumer or business — values:" in schema
    assert "## revenue_by_segment (view)" in schema and "sum(o.amount) AS revenue" in schema
    tools = await shop.list_tools()
    description = next(t.description for t in tools.tools if t.name == "query_database")
    assert "shop (PostgreSQL)" in (description or "") and "lite (SQLite)" in (description or "")


async def test_a_catalog_too_large_to_show_is_listed_by_name_with_a_resource_per_table(
    shop: ClientSession, pg: pg_server.Postgres, said: list[str]
) -> None:
    columns = ", ".join(f"measure_{j} numeric(12,2)" for j in range(12))
    pg.sql(
        "CREATE SCHEMA wide",
        *(f"CREATE TABLE wide.t_{i:03d} (id int, {columns})" for i in range(400)),
        "GRANT USAGE ON SCHEMA wide TO analyst",
        role="owner",
    )
    index = (await shop.read_resource("db://wide/schema")).contents[0].text  # type: ignore[union-attr]
    said.append(index)
    assert "400 tables and views" in index and "db://wide/schema/{table}" in index
    assert all(f"- wide.t_{i:03d} (table" in index for i in range(400))  # every table, by name
    assert "measure_3" not in index and len(index) < 40_000
    one = (await shop.read_resource("db://wide/schema/wide.t_007")).contents[0].text  # type: ignore[union-attr]
    assert "## wide.t_007 (table" in one and "- measure_11: numeric(12,2)" in one
    done = await shop.complete(
        ResourceTemplateReference(uri="db://{database}/schema/{table}"),
        {"name": "table", "value": "wide.t_01"},
        context_arguments={"database": "wide"},
    )
    assert done.completion.values == [f"wide.t_{i:03d}" for i in range(10, 20)]


async def test_unreachable_refused_and_unknown_databases_are_clear(shop: ClientSession, said: list[str]) -> None:
    failed, text = await _ask(shop, said, database="down", query="SELECT 1")
    assert failed and "DATABASE_UNAVAILABLE" in text and "databases.down.url" in text, text
    failed, text = await _ask(shop, said, database="wrong", query="SELECT 1")
    assert failed and "DATABASE_AUTH" in text and "databases.wrong.url" in text and "***" in text, text
    failed, text = await _ask(shop, said, database="nowhere", query="SELECT 1")
    assert failed and "shop" in text and "lite" in text, text


async def test_any_adbc_driver_by_configuration(pg: pg_server.Postgres, ws: Path) -> None:
    """``driver:`` names an ADBC driver package (here Flight SQL, an extra): it is loaded in the connection worker
    and an unreachable server is a clear DATABASE_UNAVAILABLE naming the setting."""
    pytest.importorskip("adbc_driver_flightsql")
    env = {
        "BA_MCP_DATABASES__LAKE__DRIVER": "adbc_driver_flightsql",
        "BA_MCP_DATABASES__LAKE__URL": "grpc://127.0.0.1:9",
    }
    with open("/dev/null", "w") as errlog:
        async with _client(ws, env, errlog) as s:
            failed, text = await _ask(s, [], database="lake", query="SELECT 1")
    assert failed and "DATABASE_UNAVAILABLE" in text and "databases.lake" in text, text


async def test_a_sqlite_file_is_read_and_never_changed(shop: ClientSession, ws: Path, said: list[str]) -> None:
    lite = ws / "data" / "kpis.db"
    digest = hashlib.sha256(lite.read_bytes()).hexdigest()
    failed, text = await _ask(shop, said, database="lite", query="SELECT month, revenue FROM kpi ORDER BY month")
    assert not failed and "2025-02,20.25" in text, text
    for statement in (
        "INSERT INTO kpi VALUES ('2025-03', 1)",
        "DROP TABLE kpi",
        "VACUUM",
        "PRAGMA journal_mode = WAL",
        "CREATE TABLE x (a)",
    ):
        await _ask(shop, said, database="lite", query=statement)
    assert hashlib.sha256(lite.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in lite.parent.iterdir() if p.name.startswith("kpis")) == ["kpis.db"]
    # S-14: a TEMP view or an ATTACH made by one call changes no later call (the connections are the pool's, shared
    # by every session): each call has a fresh connection
    for statement in (
        "CREATE TEMP VIEW kpi AS SELECT '2025-01' AS month, -999999 AS revenue",
        "ATTACH DATABASE ':memory:' AS planted",
    ):
        await _ask(shop, said, database="lite", query=statement)
        failed, text = await _ask(shop, said, database="lite", query="SELECT sum(revenue) AS total FROM kpi")
        assert not failed and text.rstrip().endswith("30.75"), (statement, text)
        failed, text = await _ask(shop, said, database="lite", query="SELECT name FROM pragma_database_list")
        assert not failed and "planted" not in text, text


async def test_the_sandbox_never_sees_a_database_secret(shop: ClientSession, said: list[str]) -> None:
    result = await shop.call_tool("run_python", {"code": "import os\nprint(sorted(os.environ.items()))"})
    text = text_of(result)
    said.append(text)
    assert not result.is_error and "PATH" in text, text
    assert "SHOP_PASSWORD" not in text and "BA_MCP_DATABASES" not in text
    assert all(password not in text for password in pg_server.PASSWORDS.values())


def test_no_password_appears_anywhere(ws: Path, said: list[str], stderr_log: Path, shop: Any) -> None:
    """After the tests above (pytest keeps the file's order): every result, error, resource, the server's
    stderr, its logs and telemetry — no password of any role."""
    texts = [*said, stderr_log.read_text(errors="replace")]
    for path in (ws / "logs").rglob("*"):
        if path.is_file():
            texts.append(path.read_text(errors="replace"))
    blob = "\n".join(texts)
    assert len(blob) > 1000
    for password in [*pg_server.PASSWORDS.values(), "Query-Secret-9"]:
        assert password not in blob


@pytest.mark.slow  # the doctor starts workers and connects to each database (~4.5 s; the fast tier is full)
def test_doctor_lists_every_database_with_its_role(pg: pg_server.Postgres, ws: Path) -> None:
    env = _env(
        pg,
        BA_MCP_DATABASES__SHOP__URL=pg.url("analyst"),  # the CLI runs in this process: no ${VAR} from a child's env
        BA_MCP_DATABASES__FAR__URL="postgresql://someone:far-Secret@db.example.invalid:5432/x",
    )
    out = ba("doctor", workspace=ws, env=env)
    lines = {line.split()[2]: line for line in out.stdout.splitlines() if line.split()[1:2] == ["database"]}
    assert re.search(r"^ok\s.*PostgreSQL 15[.\d]*; role analyst \(no server-file", lines["shop"]), out.stdout
    assert "the role can write" in lines["writer"] and "GRANT pg_read_all_data" in lines["writer"]
    assert "PRIVILEGED_ROLE" in lines["super"] or "superuser" in lines["super"]
    assert lines["down"].startswith("FAIL") and "could not be reached" in lines["down"]
    assert "not contacted" in lines["far"] and "someone:***@db.example.invalid" in lines["far"]
    assert lines["lite"].startswith("ok") and "SQLite" in lines["lite"]
    for secret in [*pg_server.PASSWORDS.values(), "far-Secret"]:
        assert secret not in out.stdout + out.stderr


@pytest.mark.slow
async def test_three_million_rows_stream_into_a_complete_artifact_with_bounded_memory(
    pg: pg_server.Postgres, ws: Path
) -> None:
    pg_server.make_big(pg)
    with open("/dev/null", "w") as errlog:
        async with _client(ws, _env(pg), errlog) as s:
            failed, _ = await _ask(s, [], database="shop", query="SELECT 1 AS warm")
            assert not failed
            server = server_process(ws)
            before = server.memory_info().rss
            peak = [before]
            stop = False

            async def sample() -> None:
                while not stop:
                    with contextlib.suppress(psutil.Error):
                        peak[0] = max(peak[0], server.memory_info().rss)
                    await asyncio.sleep(0.05)

            sampler = asyncio.ensure_future(sample())
            failed, text = await _ask(s, [], database="shop", query="SELECT * FROM big", max_rows=10)
            stop = True
            await sampler
            assert not failed and "Truncated: 10 of 3,000,000 rows shown" in text, text
            kept = ARTIFACT.search(text).group(0)  # type: ignore[union-attr]
            failed, text = await _ask(s, [], query=f"SELECT count(*) AS n, sum(id) AS s FROM {kept}")
            assert not failed and "3000000,4500001500000" in text, text
            assert peak[0] - before < 300 * 1024 * 1024, (before, peak[0])


# -- metrics on PostgreSQL: the demo's metric file re-pointed at the same data there ---------------------------

SALES_SQL = """
SELECT r.region_name AS region, sum(round(l.quantity * l.unit_price * (1 - l.discount), 2)) AS net_revenue,
       count(DISTINCT o.order_id) AS order_count,
       100.0 * sum(round(l.quantity * (l.unit_price * (1 - l.discount) - p.unit_cost), 2))
             / sum(round(l.quantity * l.unit_price * (1 - l.discount), 2)) AS margin_pct
FROM order_lines l JOIN orders o ON o.order_id = l.order_id JOIN products p ON p.product_id = l.product_id
JOIN customers c ON c.customer_id = o.customer_id LEFT JOIN regions r ON r.region_id = c.region_id
WHERE o.status = 'completed' GROUP BY r.region_name
"""


def _load_demo_into(pg: pg_server.Postgres, folder: Path) -> None:
    """The demo database's tables in a PostgreSQL database ``sales`` (money as numeric, as warehouses keep it)."""
    import duckdb

    from ba_mcp.demo_data import ensure_demo_database

    demo = folder / "demo.duckdb"
    ensure_demo_database(demo)
    casts = {"unit_price": "DECIMAL(10,2)", "discount": "DECIMAL(5,3)", "unit_cost": "DECIMAL(10,2)"}
    pg.sql("CREATE DATABASE sales OWNER owner", database="postgres")
    con = duckdb.connect(str(demo), read_only=True)
    try:
        with pg.connect("owner", "sales") as target, target.cursor() as cur:
            for table in ("regions", "channels", "products", "customers", "orders", "order_lines"):
                columns = [c[0] for c in con.execute(f"DESCRIBE {table}").fetchall()]
                shown = ", ".join(f"CAST({c} AS {casts[c]}) AS {c}" if c in casts else c for c in columns)
                cur.adbc_ingest(table, con.sql(f"SELECT {shown} FROM {table}").to_arrow_table(), mode="create")
    finally:
        con.close()


async def test_the_same_metric_through_query_metrics_sql_and_run_python_on_postgresql(
    pg: pg_server.Postgres, tmp_path: Path
) -> None:
    from tests.test_metrics import multiset, rows_of

    _load_demo_into(pg, tmp_path)
    ws = make_workspace(tmp_path / "ws")
    (ws / "metrics").mkdir()
    (ws / "metrics" / "sales.yml").write_text(DEMO_FILE.read_text().replace("demo.main.", "sales.public."))
    env = _env(
        pg,
        BA_MCP_DATABASES__SALES__URL=pg.url("analyst", "sales"),
        BA_MCP_METRICS__DEMO="false",
        BA_MCP_SANDBOX__ALLOWED_IMPORTS="*",
    )
    with (tmp_path / "err.txt").open("w") as errlog:
        async with _client(ws, env, errlog) as s:
            metrics = ["net_revenue", "order_count", "margin_pct"]
            by_metrics = await s.call_tool(
                "query_metrics", {"metrics": metrics, "dimensions": ["region"], "output_level": "full"}
            )
            assert not by_metrics.is_error, text_of(by_metrics)
            by_sql = await s.call_tool(
                "query_database", {"database": "sales", "query": SALES_SQL, "output_level": "full"}
            )
            assert not by_sql.is_error, text_of(by_sql)
            code = (
                f"df = metric({metrics!r}, by='region')\n"
                "import json; print(json.dumps([[None if v is None else (v if isinstance(v, str) else float(v)) "
                "for v in row] for row in df.astype(object).where(df.notna(), None).values.tolist()]))"
            )
            by_python = await s.call_tool("run_python", {"code": code})
            assert not by_python.is_error, text_of(by_python)
    expected = multiset(rows_of(text_of(by_sql)))
    assert len(expected) == 6
    assert multiset(rows_of(text_of(by_metrics))) == expected, (text_of(by_metrics), text_of(by_sql))
    printed = [line for line in text_of(by_python).splitlines() if line.startswith("[[")]
    assert multiset([tuple(r) for r in json.loads(printed[0])]) == expected


RESERVED = "Qz7@xK#v9/Rm?Lp:W8"  # the password of role atsign: every character a URL reserves
WRONG = "Vb3@nM#q8/Zt?Xc"  # a wrong one, as reserved
TOKEN = "TkN9zQ4xWv7Lr2Hs"  # a token as the whole user part
PAIR = "Wq4kZ%3AHj5vX8qPn2"  # user%3Apassword: a user part that is both, encoded


@pytest.mark.slow  # a server and the doctor of their own (each database is connected to)
async def test_a_password_with_reserved_characters_shows_no_fragment_anywhere(
    pg: pg_server.Postgres, ws: Path, tmp_path: Path
) -> None:
    """The raw password (@ # / ? :) is refused before any driver reads it, saying to percent-encode it; encoded it
    connects; a wrong encoded one, a token as the user part and ``user%3Apassword`` are refused by PostgreSQL — and
    no fragment of any of them longer than 3 characters, raw or encoded, is in a tool error, a ``db://`` resource,
    the doctor's output or the server's stderr."""
    from urllib.parse import quote

    pg.sql(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'atsign') THEN "
        f"CREATE ROLE atsign LOGIN PASSWORD '{RESERVED}'; END IF; END $$",
        "GRANT pg_read_all_data TO atsign",
    )
    at = f"127.0.0.1:{pg.port}/shop"
    env = {
        "BA_MCP_DATABASES__RAW__URL": f"postgresql://atsign:{RESERVED}@{at}",
        "BA_MCP_DATABASES__ENCODED__URL": f"postgresql://atsign:{quote(RESERVED, safe='')}@{at}",
        "BA_MCP_DATABASES__WRONG__URL": f"postgresql://atsign:{quote(WRONG, safe='')}@{at}",
        "BA_MCP_DATABASES__TOKEN__URL": f"postgresql://{TOKEN}@{at}",
        "BA_MCP_DATABASES__PAIR__URL": f"postgresql://{PAIR}@{at}",
        "BA_MCP_ENGINE__SPARE_WORKERS": "0",
    }
    said: list[str] = []
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as errlog:
        async with _client(ws, env, errlog) as s:
            failed, text = await _ask(s, said, database="encoded", query="SELECT current_user AS who")
            assert not failed and "atsign" in text, text  # percent-encoded, it is read right
            failed, text = await _ask(s, said, database="raw", query="SELECT 1")
            assert failed and "DATABASE_UNAVAILABLE" in text and "percent-encode the password" in text, text
            for name in ("wrong", "token", "pair"):
                failed, text = await _ask(s, said, database=name, query="SELECT 1")
                assert failed and "DATABASE_AUTH" in text and f"databases.{name}.url" in text, text
            for name in ("raw", "wrong", "token", "pair"):
                try:
                    said.append(json.dumps((await s.read_resource(f"db://{name}/schema")).model_dump(mode="json")))
                except Exception as exc:  # the resource's error
                    said.append(str(exc))
    doctor = ba("doctor", workspace=ws, env=env)
    lines = {line.split()[2]: line for line in doctor.stdout.splitlines() if line.split()[1:2] == ["database"]}
    assert lines["encoded"].startswith("ok") and lines["raw"].startswith("FAIL"), doctor.stdout
    assert "percent-encode the password" in lines["raw"], lines["raw"]
    assert all(lines[name].startswith("FAIL") for name in ("wrong", "token", "pair")), doctor.stdout
    blob = "\n".join([*said, errors.read_text(errors="replace"), doctor.stdout, doctor.stderr])
    assert len(blob) > 1000 and "DATABASE_AUTH" in blob
    for secret in (RESERVED, WRONG, TOKEN, PAIR, "Wq4kZ:Hj5vX8qPn2"):
        for form in {secret, quote(secret, safe=""), quote(secret)}:
            for i in range(len(form) - 3):
                assert form[i : i + 4] not in blob, (form[i : i + 4], secret)
