"""query_database through an MCP client talking to the server in-process: analysis, reach into the
workspace, and the hostile list of S-3 — each refused, nothing changed, nothing leaked."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from mcp import Client
from mcp.types import ResourceTemplateReference

from tests.conftest import in_process, make_workspace, meta_of, text_of

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def query_workspace(standard_workspace: Path) -> Path:
    return standard_workspace


@pytest.fixture
def demo_client(default_server: Client) -> Client:
    """The run's shared server in the default configuration (conftest: default_server): these tests read the demo
    database and the standard workspace and leave them as they were (the hostile statements check it)."""
    return default_server


async def q(session: Client, query: str, **extra):
    return await session.call_tool("query_database", {"query": query, **extra})


def ok(result) -> str:
    assert not result.is_error, text_of(result)
    return text_of(result)


def refused(result, query_workspace: Path, error_type: str = "permission_denied") -> str:
    text = text_of(result)
    assert result.is_error, text
    assert f"Error Type: {error_type}" in text, text
    assert str(query_workspace) not in text and "root:x:" not in text and "secret beside" not in text
    return text


def demo_digest(query_workspace: Path) -> str:
    return hashlib.sha256((query_workspace / "data" / "demo.duckdb").read_bytes()).hexdigest()


async def test_tool_listing_and_schema_resource(demo_client: Client) -> None:
    tool = {t.name: t for t in (await demo_client.list_tools()).tools}["query_database"]
    assert set(tool.input_schema["properties"]) == {
        "query",
        "max_rows",
        "params",
        "database",
        "output_level",
        "timeout",
        "search",  # words, instead of query: the tables, columns and comments holding them (issue 63)
    }
    assert tool.annotations.read_only_hint is True
    schema = (await demo_client.read_resource("db://demo/schema")).contents[0].text
    assert "## orders (table, 20,000 rows)" in schema and "## order_facts (view," in schema
    assert "- order_date: DATE" in schema or "- order_date: TIMESTAMP" in schema
    done = await demo_client.complete(
        ResourceTemplateReference(uri="db://{database}/schema"), {"name": "database", "value": "d"}
    )
    assert done.completion.values == ["demo"]


async def test_decimal_and_hugeint_columns_show_their_types(demo_client: Client) -> None:
    sql = "SELECT 123.45::DECIMAL(18,2) AS amount, 170141183460469231731687303715884105727::HUGEINT AS big"
    text = ok(await q(demo_client, sql, output_level="standard"))
    assert "amount: decimal(18,2)" in text and "big: int128" in text and "mixed" not in text
    assert "170141183460469231731687303715884105727" in text


async def test_the_schema_resource_explains_the_database(demo_client: Client) -> None:
    listed = [str(r.uri) for r in (await demo_client.list_resources()).resources]
    assert "db://demo/schema" in listed  # listed, not only a template
    schema = (await demo_client.read_resource("db://demo/schema")).contents[0].text
    assert "net_revenue" in schema and "(1 - l.discount)" in schema and "Definition:" in schema  # the view's SQL
    assert "only completed orders count as revenue" in schema  # a column comment
    assert "values: cancelled, completed, returned" in schema  # a low-cardinality text column
    assert "Public Sector" in schema and "customer_name: VARCHAR\n" in schema  # many values: not listed


async def test_analysis_on_the_demo_data(demo_client: Client) -> None:
    text = ok(
        await q(
            demo_client,
            "SELECT year(order_date) AS year, count(*) AS orders FROM orders GROUP BY 1 ORDER BY 1",
            output_level="full",
        )
    )
    years = [line.split(",") for line in text.splitlines() if line[:2] == "20"]
    assert [y for y, _ in years] == ["2022", "2023", "2024", "2025"]
    assert sum(int(n) for _, n in years) == 20000 and int(years[-1][1]) > int(years[0][1])  # growth
    returns = ok(
        await q(demo_client, "SELECT status, count(*) n FROM orders GROUP BY 1 ORDER BY 1", output_level="full")
    )
    assert "returned," in returns and "cancelled," in returns
    nulls = ok(
        await q(demo_client, "SELECT count(*) FILTER (email IS NULL) AS no_email FROM customers", output_level="full")
    )
    assert int(nulls.splitlines()[-1]) > 0


async def test_params_bind_values(demo_client: Client) -> None:
    named = ok(
        await q(
            demo_client,
            "SELECT count(*) AS n FROM orders WHERE status = $s",
            params={"s": "returned"},
            output_level="full",
        )
    )
    positional = ok(
        await q(
            demo_client, "SELECT count(*) AS n FROM orders WHERE status = ?", params=["returned"], output_level="full"
        )
    )
    assert named.splitlines()[-1] == positional.splitlines()[-1] and int(named.splitlines()[-1]) > 100
    injection = ok(
        await q(
            demo_client,
            "SELECT count(*) AS n FROM orders WHERE status = $s",
            params={"s": "x' OR '1'='1"},
            output_level="full",
        )
    )
    assert injection.splitlines()[-1] == "0"
    missing = await q(demo_client, "SELECT * FROM orders WHERE status = $s")
    assert missing.is_error and "params" in text_of(missing)


async def test_large_results_fetch_max_rows_and_keep_the_rest(demo_client: Client) -> None:
    result = await q(demo_client, "SELECT * FROM order_lines ORDER BY order_id, line_no", max_rows=100)
    sc = meta_of(result)
    assert sc["rows"] == 100 and sc["total_rows"] == 49980 and sc["truncated"] is True
    aid = sc["artifact_id"]
    assert "of 49,980 rows" in text_of(result) and aid in text_of(result)
    again = ok(await q(demo_client, f"SELECT count(*) AS n, sum(quantity) AS q FROM {aid}", output_level="full"))
    direct = ok(await q(demo_client, "SELECT count(*) AS n, sum(quantity) AS q FROM order_lines", output_level="full"))
    assert again.splitlines()[-1] == direct.splitlines()[-1]


@pytest.mark.slow
async def test_ten_million_rows_are_never_materialised(demo_client: Client) -> None:
    result = await q(
        demo_client, "SELECT range AS i, range % 7 AS g FROM range(10000000)", max_rows=1000, output_level="brief"
    )
    text = ok(result)
    assert "of 10,000,000" in text
    aid = meta_of(result)["artifact_id"]
    check = ok(await q(demo_client, f"SELECT count(*) AS n, max(i) AS m FROM {aid}", output_level="full"))
    assert check.splitlines()[-1] == "10000000,9999999"


async def test_workspace_files_uploads_and_artifacts_are_queryable(demo_client: Client) -> None:
    by_path = ok(
        await q(
            demo_client,
            "SELECT region, count(*) AS n FROM 'uploads/sales.csv' GROUP BY 1 ORDER BY 1",
            output_level="full",
        )
    )
    assert "East,16" in by_path and "North,17" in by_path
    by_id = ok(await q(demo_client, "SELECT count(*) AS n FROM upload_sales", output_level="full"))
    assert by_id.splitlines()[-1] == "50"
    pq = ok(await q(demo_client, "SELECT sum(k) AS s FROM 'uploads/facts.parquet'", output_level="full"))
    assert pq.splitlines()[-1] == str(sum(range(1000)))
    latin = ok(await q(demo_client, "SELECT city FROM 'uploads/latin1.csv' ORDER BY 1", output_level="full"))
    assert "Málaga" in latin and "Zürich" in latin
    js = ok(await q(demo_client, "SELECT count(*) AS n FROM 'uploads/records.json'", output_level="full"))
    assert js.splitlines()[-1] == "30"
    made = await demo_client.call_tool("file_reader", {"path": "uploads/sales.csv", "output_level": "brief"})
    aid = meta_of(made)["artifact_id"]
    joined = ok(
        await q(
            demo_client, f"SELECT count(*) AS n FROM {aid} a JOIN upload_sales u USING (order_id)", output_level="full"
        )
    )
    assert joined.splitlines()[-1] == "50"


@pytest.mark.parametrize(
    "query",
    [
        "CREATE TABLE evil AS SELECT 1",
        "INSERT INTO regions VALUES (9, 'X', 'Y', 'ZZ')",
        "UPDATE orders SET status = 'x'",
        "DELETE FROM orders",
        "DROP TABLE orders",
        "ATTACH ':memory:' AS m",
        "ATTACH '/tmp/evil.duckdb' AS e",
        "DETACH demo",
        "INSTALL httpfs",
        "LOAD httpfs",
        "COPY orders TO 'uploads/stolen.csv'",
        "COPY (SELECT 1) TO '/tmp/evil.csv'",
        "EXPORT DATABASE 'uploads/dump'",
        "SET enable_external_access = true",
        "SET threads = 1",
        "RESET lock_configuration",
        "PRAGMA enable_profiling",
        "SELECT 1; DROP TABLE orders",
        "SELECT 1; SELECT 2",
        "CALL checkpoint()",
        "WITH x AS (INSERT INTO regions VALUES (9, 'X', 'Y', 'ZZ') RETURNING *) SELECT * FROM x",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/passwd')",
        "SELECT * FROM glob('/etc/*')",
        "SELECT * FROM '/etc/passwd'",
        "SELECT * FROM '../outside.txt'",
        "SELECT * FROM read_csv('../outside.txt')",
        "SELECT * FROM read_csv('uploads/sales.csv')",
        "SELECT * FROM 'uploads/escape.txt'",
        "SELECT * FROM 'https://example.com/data.csv'",
        "SELECT * FROM read_parquet('s3://bucket/x.parquet')",
        "SELECT current_setting('enable_external_access') AND false; SET threads=1",
        # EXPLAIN ANALYZE executes what it explains: only a SELECT may follow EXPLAIN (issue 8, item 1)
        "EXPLAIN ANALYZE COPY (SELECT 'pwned' AS a) TO '{ws}/data/demo.duckdb' (HEADER false, USE_TMP_FILE false)",
        "EXPLAIN ANALYZE COPY (SELECT 'pwned' AS a) TO '{ws}/data/demo.duckdb.wal' (HEADER false, USE_TMP_FILE false)",
        "EXPLAIN /* c */ ANALYZE COPY (SELECT 'pwned' AS a) TO '{ws}/data/demo.duckdb' (HEADER false)",
        "explain\tanalyze copy (select 1) to '{ws}/data/demo.duckdb'",
        "EXPLAIN (FORMAT json) COPY (SELECT 1) TO '{ws}/data/demo.duckdb'",
        "EXPLAIN ANALYZE INSERT INTO regions VALUES (9, 'X', 'Y', 'ZZ')",
        "EXPLAIN ANALYZE CHECKPOINT",
        "EXPLAIN COPY orders TO '{ws}/uploads/stolen.csv'",
    ],
)
async def test_hostile_statements_are_refused_and_change_nothing(
    demo_client: Client, query_workspace: Path, query: str
) -> None:
    await q(demo_client, "SELECT 1")  # the demo database exists
    before = demo_digest(query_workspace)
    uploads = sorted(p.name for p in (query_workspace / "uploads").iterdir())
    result = await q(demo_client, query.replace("{ws}", str(query_workspace)))
    text = text_of(result)
    assert result.is_error, text
    assert "Error Type: permission_denied" in text or "Error Type: not_found" in text, text
    assert str(query_workspace) not in text and "root:x:" not in text and "secret beside" not in text
    assert demo_digest(query_workspace) == before
    assert sorted(p.name for p in (query_workspace / "uploads").iterdir()) == uploads
    assert not Path("/tmp/evil.csv").exists() and not Path("/tmp/evil.duckdb").exists()
    still = await q(
        demo_client,
        "SELECT current_setting('enable_external_access') AS ext, count(*) AS n FROM regions",
        output_level="full",
    )
    assert ok(still).splitlines()[-1] == "false,5"


async def test_explain_of_a_select_still_works_and_no_statement_reaches_the_configured_file(
    demo_client: Client, query_workspace: Path
) -> None:
    before = demo_digest(query_workspace)
    plan = ok(await q(demo_client, "EXPLAIN SELECT count(*) FROM orders", output_level="full"))
    assert "physical_plan" in plan or "explain_value" in plan
    assert ok(await q(demo_client, "EXPLAIN ANALYZE SELECT count(*) FROM orders", output_level="full"))
    assert ok(await q(demo_client, "explain (format json) select 1", output_level="full"))
    # The engine knows the file by its read-only mount in the worker's own root, not the workspace's path.
    where = ok(await q(demo_client, "SELECT path FROM duckdb_databases() WHERE NOT internal", output_level="full"))
    assert str(query_workspace) not in where and "demo.duckdb" in where
    paths = "SELECT string_agg(value, ' ') AS v FROM duckdb_settings() WHERE value LIKE '%/%'"
    settings = ok(await q(demo_client, paths, output_level="full"))
    assert str(query_workspace) not in settings
    assert demo_digest(query_workspace) == before


async def test_params_as_json_text_and_pivot_without_in(demo_client: Client, query_workspace: Path) -> None:
    text = ok(await q(demo_client, "SELECT $y + 1 AS next_year", params='{"y": 2024}', output_level="full"))
    assert text.splitlines()[-1] == "2025"
    positional = ok(await q(demo_client, "SELECT ? * 2 AS d", params="[21]", output_level="full"))
    assert positional.splitlines()[-1] == "42"
    bad = refused(await q(demo_client, "SELECT 1", params="{not json"), query_workspace, "invalid_parameters")
    assert "params" in bad
    pivot = refused(await q(demo_client, "PIVOT orders ON status USING count(*)"), query_workspace, "validation_error")
    assert "PIVOT_NEEDS_IN" in pivot and "IN (" in pivot and "read-only" not in pivot
    named = ok(
        await q(demo_client, "PIVOT orders ON status IN ('completed', 'returned') USING count(*)", output_level="full")
    )
    assert "completed" in named and "returned" in named


async def test_syntax_errors_unknown_tables_and_databases(demo_client: Client, query_workspace: Path) -> None:
    syntax = refused(await q(demo_client, "SELEC * FROM orders"), query_workspace, "validation_error")
    assert "syntax error" in syntax.lower()
    table = refused(await q(demo_client, "SELECT * FROM ordersx"), query_workspace, "not_found")
    assert "db://demo/schema" in table
    column = refused(await q(demo_client, "SELECT revenue_x FROM orders"), query_workspace, "validation_error")
    assert "db://demo/schema" in column
    db = refused(await q(demo_client, "SELECT 1", database="warehouse"), query_workspace, "invalid_parameters")
    assert "demo" in db
    rows = refused(await q(demo_client, "SELECT 1", max_rows=10**9), query_workspace, "invalid_parameters")
    assert "max_rows" in rows


async def test_a_query_holding_a_nul_is_refused_before_any_engine_sees_it(
    demo_client: Client, query_workspace: Path
) -> None:
    """Every ADBC driver takes the statement as a C string, cut at its first NUL: what would run is not what was
    read. Refused as the call's invalid parameter (the built-in DuckDB engine too), and nothing ran."""
    for sql in ("SELECT 1\x00", "DROP TABLE orders\x00 ((", "SELECT count(*) FROM orders\x00; DROP TABLE orders"):
        said = refused(await q(demo_client, sql), query_workspace, "invalid_parameters")
        assert "query" in said and "NUL" in said, said
    assert "rows" in ok(await q(demo_client, "SELECT count(*) AS n FROM orders")).lower()  # still there


@pytest.mark.slow
async def test_a_query_past_its_timeout_is_interrupted(query_workspace: Path) -> None:
    unasked = {"BA_MCP_TOOLS__QUERY_DATABASE__CONFIRM_SCAN_ROWS": str(10**15)}  # a timeout, not a scan to confirm
    async with in_process(query_workspace, BA_MCP_TOOLS__QUERY_DATABASE__TIMEOUT_S="1", **unasked) as short:
        result = await q(short, "SELECT count(*) FROM range(100000000000) a, range(10) b WHERE a.range % 7 = b.range")
        refused(result, query_workspace, "timeout")
        assert not (await q(short, "SELECT 1")).is_error  # the server and the database keep serving


async def test_awkward_columns(demo_client: Client) -> None:
    binary = ok(
        await q(
            demo_client,
            "SELECT 'abc'::BLOB AS b, NULL::INTEGER AS n, [1, 2] AS l, {'k': 1} AS s, "
            "123.45::DECIMAL(10,2) AS d, INTERVAL 3 DAY AS iv",
            output_level="full",
        )
    )
    assert "<3 bytes>" in binary and "[1,2]" in binary and '{""k"":1}' in binary and "123.45" in binary
    nulls = await q(demo_client, "SELECT CASE WHEN range % 10 = 0 THEN range END AS mostly_null FROM range(1000)")
    assert "900 nulls" in ok(nulls)
    wide_sql = "SELECT " + ", ".join(f"repeat('x', 500) AS c{i}" for i in range(60))
    wide = await q(demo_client, wide_sql)
    text = ok(wide)
    assert len(text) < 60_000 and meta_of(wide)["artifact_id"]  # long cells cut, complete row stored
    metrics = json.loads((await demo_client.read_resource("ba://metrics")).contents[0].text)
    assert metrics["session"]["tools"]["query_database"]["calls"] >= 3


async def test_concurrent_queries_on_one_session(demo_client: Client) -> None:
    import anyio

    results: dict[int, str] = {}

    async def one(i: int) -> None:
        r = await q(
            demo_client,
            "SELECT count(*) AS n FROM order_facts WHERE year(order_date) = $y",
            params={"y": 2022 + i % 4},
            output_level="full",
        )
        results[i] = ok(r).splitlines()[-1]

    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(one, i)
    assert len(results) == 12 and len({results[i] for i in range(4)}) == 4
    assert all(results[i] == results[i % 4] for i in range(12))


async def test_results_are_cached_until_the_data_changes(demo_client: Client, query_workspace: Path) -> None:
    csv = query_workspace / "uploads" / "live.csv"
    csv.write_text("a\n1\n2\n")
    sql = "SELECT sum(a) AS s FROM 'uploads/live.csv'"
    first = ok(await q(demo_client, sql, output_level="full"))
    before = json.loads((await demo_client.read_resource("ba://metrics")).contents[0].text)["session"]["tools"][
        "query_database"
    ]
    second = ok(await q(demo_client, sql, output_level="brief"))
    after = json.loads((await demo_client.read_resource("ba://metrics")).contents[0].text)["session"]["tools"][
        "query_database"
    ]
    assert after["cache_hit_rate"] > before["cache_hit_rate"] and "1 rows" in second
    csv.write_text("a\n1\n2\n3\n")
    third = ok(await q(demo_client, sql, output_level="full"))
    assert first.splitlines()[-1] == "3" and third.splitlines()[-1] == "6"


def test_the_demo_database_is_built_once_per_machine_and_copied_after(tmp_path: Path) -> None:
    from ba_mcp.demo_data import _cached_copy, ensure_demo_database

    cached = _cached_copy()
    assert cached is not None and str(cached).startswith(os.environ["XDG_CACHE_HOME"])  # the tests' own cache
    first, second = tmp_path / "a" / "demo.duckdb", tmp_path / "b" / "demo.duckdb"
    ensure_demo_database(first)
    assert cached.is_file()
    ensure_demo_database(second)
    assert second.read_bytes() == cached.read_bytes() and first.stat().st_size == second.stat().st_size


async def test_an_engine_registered_outside_the_package_is_reached_with_no_other_change(tmp_path: Path) -> None:
    """Adding an engine = one module + one registry line (issue 35): a test's module, registered, is configured by
    its URL scheme and answers query_database, db://{name}/schema and the tool's description."""
    from ba_mcp import registry
    from tests.conftest import in_process, make_workspace

    registry.register(registry.EngineInfo("fake", "FakeDB", "tests.fake_engine", ("fake://",)))
    try:
        async with in_process(make_workspace(tmp_path), BA_MCP_DATABASES__TOY__URL="fake://anywhere") as client:
            result = await client.call_tool(
                "query_database", {"database": "toy", "query": "SELECT $1", "params": [7], "output_level": "full"}
            )
            assert not result.is_error and "SELECT $1,9,[7]" in text_of(result), text_of(result)
            schema = (await client.read_resource("db://toy/schema")).contents[0].text  # type: ignore[union-attr]
            assert "FakeDB" in schema and "echo" in schema, schema
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert "toy (FakeDB)" in (tools["query_database"].description or "")
    finally:
        registry.unregister("fake")


def test_file_and_folder_backed_engines_share_one_base(tmp_path: Path) -> None:
    """Issue 52 item 4: an engine whose database is a folder (a CSV folder over an ADBC driver) is one class on
    ``LocalEngine`` with ``folder = True`` — the URL's path (three slashes: in the workspace), the check that it
    exists, the read-only bind into the worker's root come from the base SQLite uses too (tests/folder_engine.py).
    The engines' own code with the real settings; the App's pools stand aside (no worker is started here: a second
    App in this process would re-make the process's one worker cgroup under the other tests' workers)."""
    from types import SimpleNamespace

    from ba_mcp import registry
    from ba_mcp.databases.base import engine_of
    from ba_mcp.errors import ToolFailure
    from ba_mcp.settings import load_settings

    ws = tmp_path
    (ws / "lake").mkdir()
    (ws / "notafolder.csv").write_text("a\n1\n")
    registry.register(registry.EngineInfo("csvdir", "CSV folder", "tests.folder_engine", ("csvdir:",)))
    try:
        env = {
            "BA_MCP_DATABASES__LAKE__URL": "csvdir:///lake",
            "BA_MCP_DATABASES__GONE__URL": "csvdir:///nowhere",
            "BA_MCP_DATABASES__FILE__URL": "csvdir:///notafolder.csv",
            "BA_MCP_DATABASES__LITE__URL": "sqlite:///lake",  # a file engine given a folder: refused
        }
        databases = load_settings(workspace=ws, environ=env).databases
        owner = SimpleNamespace(
            connections=object(),
            workspace=SimpleNamespace(root=ws),
            slots=lambda name: None,
            catalogs=None,
            artifacts=None,
        )
        conf = databases["lake"]
        lake = engine_of(conf.kind).database("lake", conf, owner)
        assert conf.kind == "csvdir" and lake.host_file == ws / "lake"  # type: ignore[attr-defined]
        message = lake.engine.connect_message(conf, lake.host_file)  # type: ignore[attr-defined]
        assert message.uri == {"target": "/databases/lake", "host": str(ws / "lake")}
        for name, what in (("gone", "folder"), ("file", "folder"), ("lite", "file")):
            with pytest.raises(ToolFailure, match=f"{what} of database '{name}' does not exist"):
                engine_of(databases[name].kind).database(name, databases[name], owner)
    finally:
        registry.unregister("csvdir")


@pytest.mark.slow
async def test_an_engine_registered_from_outside_the_package_is_served_by_its_worker(tmp_path: Path) -> None:
    """Issue 52: the folder engine of tests/folder_engine.py — a module outside ba_mcp, registered with one line —
    answers query_database end to end: its connection worker is given its package (bound read-only into the
    worker's root, on its import path) and the folder (bound at /databases/lake), and DuckDB's ADBC driver reads the
    CSV files there. (Slow tier: a second App in this process, and a real confined worker.)"""
    from ba_mcp import registry

    (tmp_path / "lake").mkdir()
    (tmp_path / "lake" / "sales.csv").write_text("region,amount\nNorth,10.5\nSouth,4\nNorth,1.5\n")
    registry.register(registry.EngineInfo("csvdir", "CSV folder", "tests.folder_engine", ("csvdir:",)))
    try:
        client = in_process(tmp_path, ["query_database"], BA_MCP_DATABASES__LAKE__URL="csvdir:///lake")
        async with client:
            sql = "SELECT region, sum(amount) AS total FROM sales GROUP BY region ORDER BY region"
            result = await client.call_tool("query_database", {"query": sql, "database": "lake"})
            text = text_of(result)
            assert not result.is_error, text
            assert "North" in text and "12" in text and "South" in text and "4" in text, text
    finally:
        registry.unregister("csvdir")


async def test_views_of_named_files_are_kept_between_calls_and_never_stale(tmp_path: Path) -> None:
    """Issue 40: the engine worker keeps the view (and descriptor) of a Parquet or CSV file a call named for the
    session's next calls — but only while the file named again is the very file, unchanged: rewritten in place
    with its size and modification time put back, replaced by another file, or past the sixteen kept, each
    answer is the file's current content; the session's schema lists none of those views."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ws = make_workspace(tmp_path)
    up = ws / "uploads"
    pq.write_table(pa.table({"a": pa.array([1, 2], pa.int64())}), up / "a.parquet")
    async with in_process(ws, ["query_database"], BA_MCP_CACHE__MAX_ENTRIES="0") as client:
        total = "SELECT sum(a) AS s FROM 'uploads/a.parquet'"
        assert ok(await q(client, total, output_level="full")).splitlines()[-1] == "3"
        stat = (up / "a.parquet").stat()
        pq.write_table(pa.table({"a": pa.array([5, 2], pa.int64())}), up / "a.parquet")  # same size in place
        os.utime(up / "a.parquet", ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert (up / "a.parquet").stat().st_size == stat.st_size
        assert (up / "a.parquet").stat().st_mtime_ns == stat.st_mtime_ns
        assert ok(await q(client, total, output_level="full")).splitlines()[-1] == "7"
        pq.write_table(pa.table({"a": pa.array([10, 20, 30], pa.int64())}), up / "b.parquet")
        os.replace(up / "b.parquet", up / "a.parquet")  # another file under the name
        assert ok(await q(client, total, output_level="full")).splitlines()[-1] == "60"
        for i in range(20):  # more files than the worker keeps
            (up / f"c{i}.csv").write_text(f"v\n{i}\n{i}\n")
            assert ok(await q(client, f"SELECT sum(v) FROM 'uploads/c{i}.csv'", output_level="full")).endswith(
                f"\n{2 * i}"
            )
        both = ok(
            await q(
                client,
                "SELECT (SELECT sum(v) FROM 'uploads/c0.csv') + (SELECT sum(v) FROM 'uploads/c19.csv') AS s",
                output_level="full",
            )
        )
        assert both.splitlines()[-1] == "38"
        ok(await q(client, "SELECT sum(v) FROM upload_c19"))  # kept under the upload's id
        ok(await q(client, "CREATE TEMP TABLE upload_c19 AS SELECT 5 AS v"))  # the session names its own objects
        ok(await q(client, "CREATE TEMP TABLE kept AS SELECT * FROM 'uploads/a.parquet'"))
        assert ok(await q(client, total, output_level="full")).splitlines()[-1] == "60"
        for reach in (  # a kept descriptor by its slot's name: refused before any statement runs
            "SELECT * FROM '/proc/self/fd/200'",
            "SELECT * FROM read_parquet('/proc/self/fd/200')",
            "SELECT * FROM read_csv(['/proc/self/fd/201', '/proc/self/fd/202'])",
        ):
            result = await q(client, reach)
            assert result.is_error and "60" not in text_of(result).split("Error Message")[0], text_of(result)
        schema = (await client.read_resource("db://demo/schema")).contents[0].text
        assert "kept" in schema and "uploads/a.parquet" not in schema and "c19.csv" not in schema, schema[-2000:]
