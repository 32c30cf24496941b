"""Issue 63: an estimate before a large scan for DuckDB and Spark, as PostgreSQL has one (``LARGE_SCAN`` past
``tools.query_database.confirm_scan_rows``; the same statement sent again runs). Each engine's own figure: DuckDB's
plan (``EXPLAIN (FORMAT json)``: a table read sequentially counted whole, by its catalog), Spark's ``EXPLAIN COST``
``rowCount`` where it gives one. No figure, no refusal. (Spark through a real server: tests/test_values.py's
Spark test, which starts one.)"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from mcp import ClientSession, stdio_client

from ba_mcp.databases.spark import planned_rows
from ba_mcp.inside.duck import DuckSession
from ba_mcp.inside.sql import Relations, parse, readable_rows, refuse_large_scan, scanned_rows
from ba_mcp.workers.messages import Query
from ba_mcp.workers.wire import Failure
from tests.conftest import make_workspace, stdio_params, text_of


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("CREATE TABLE big AS SELECT range AS id, range % 7 AS k FROM range(300000)")
    con.execute("CREATE TABLE small AS SELECT range AS id FROM range(10)")
    return con


def test_duckdbs_figure_counts_a_scanned_table_whole_and_gives_none_without_a_scan(
    con: duckdb.DuckDBPyConnection,
) -> None:
    whole = con.execute("SELECT count(*) FROM big").fetchall()[0][0]
    rows, scans = scanned_rows(con, "SELECT * FROM big WHERE k = ?", [1])  # a filter spares no row from being read
    assert rows == whole == 300_000 and scans == ["memory.main.big ≈300,000 rows"]
    rows, scans = scanned_rows(con, "SELECT * FROM big JOIN small USING (id)", None)
    assert rows == 300_010 and scans[0].startswith("memory.main.big")
    assert scanned_rows(con, "SELECT 1", None) == (None, [])  # no scan, no figure
    assert scanned_rows(con, "SELECT * FROM range(5000)", None)[0] == 5000  # a table function: its estimate
    with pytest.raises(Failure) as refused:
        refuse_large_scan(con, "SELECT k, count(*) FROM big GROUP BY k", None, 100_000)
    said = refused.value.fields
    assert said["code"] == "LARGE_SCAN" and "300,000 rows" in said["message"], said
    assert "100,000" in said["message"] and "confirm_scan_rows" in said["message"], said
    refuse_large_scan(con, "SELECT k, count(*) FROM big GROUP BY k", None, 1_000_000)  # under the bound: runs
    refuse_large_scan(con, "SELECT k, count(*) FROM big GROUP BY k", None, None)  # no bound (confirmed): runs
    refuse_large_scan(con, "SELECT * FROM nowhere", None, 1)  # its own error comes when it runs


# Statements the parse bounds (each table named counted whole, per reference) and statements it leaves to the plan
BOUNDED = [
    "SELECT k, count(*) FROM big GROUP BY k ORDER BY 1",
    "SELECT * FROM big JOIN small USING (id) WHERE k = 3",
    "SELECT * FROM memory.main.big UNION ALL SELECT id, id FROM main.small",
    "SELECT * FROM BIG b1, big b2 WHERE b1.id = b2.id",
    "SELECT k, sum(id), avg(id), max(id), stddev(id), arg_max(id, k) FROM big GROUP BY k HAVING min(id) > 0",
    "SELECT * FROM big ASOF JOIN small USING (id)",
    "SELECT * FROM big WHERE id IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)",
    "VALUES (1), (2), (3)",
    "SELECT 1",
    "SELECT * FROM big WHERE id = ?",
]
TO_THE_PLAN = [
    "SELECT * FROM range(5000)",  # a table function
    "SELECT * FROM big_view",  # a view
    "WITH a AS (SELECT * FROM big) SELECT * FROM a JOIN a b USING (id)",  # a CTE: its scans are the plan's
    "SELECT (SELECT count(*) FROM small s WHERE s.id = b.id) FROM big b",  # decorrelated through a CTE
    "SELECT k, count(DISTINCT id), count(DISTINCT k) FROM big GROUP BY k",  # DISTINCT aggregates: a CTE too
    "SELECT * FROM (SELECT * FROM big) t",  # a derived table
    "SELECT * FROM nowhere",  # unknown: a file DuckDB might read in its place
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT * FROM r",
    "SUMMARIZE big",
    "PIVOT big ON k IN (1, 2) USING count(*)",
    "SELECT * FROM 'nowhere.parquet'",
    "SELECT * FROM big JOIN small USING (id) WHERE k = 3 LIMIT 5",  # a LIMIT: the table may be read again for its rows
    "SELECT *, row_number() OVER (PARTITION BY k ORDER BY id DESC) FROM big QUALIFY 1 = 1",  # a window
    "SELECT k, count(*) FROM big GROUP BY ROLLUP (k)",  # grouping sets: the input read once per set
    "SELECT median(id), mode(k) FROM big",  # holistic aggregates of two kinds: a CTE of their input
    "SELECT sum(id) FILTER (WHERE k = 1) FROM big",  # a filtered aggregate
]


def test_theparse_bounds_no_less_than_duckdbs_plan_counts_and_leaves_the_rest_to_the_plan(
    con: duckdb.DuckDBPyConnection,
) -> None:
    con.execute("CREATE VIEW big_view AS SELECT * FROM big, range(3)")
    relations = Relations.of(con)
    for sql in BOUNDED:
        most = readable_rows(parse(con, sql), relations)
        planned = scanned_rows(con, sql, [1] if "?" in sql else None)[0]
        assert most is not None and most >= (planned or 0), (sql, most, planned)
    assert readable_rows(parse(con, BOUNDED[0]), relations) == 300_001  # and ORDER BY's constant
    assert readable_rows(parse(con, BOUNDED[3]), relations) == 600_000  # once per reference
    for sql in TO_THE_PLAN:
        assert readable_rows(parse(con, sql), relations) is None, sql


def test_a_statement_sent_again_is_not_parsed_again_and_its_bound_is_the_same(
    con: duckdb.DuckDBPyConnection,
) -> None:
    """The parse is a query of its own (~1 ms, P-2): the last statements' parses are kept by their text."""
    relations = Relations.of(con)
    sql = "SELECT k, count(*) FROM big JOIN small USING (id) GROUP BY k"
    first = parse(con, sql)

    class Counted:  # the same connection, its queries counted
        asked = 0

        def execute(self, *args: object) -> duckdb.DuckDBPyConnection:
            Counted.asked += 1
            return con.execute(*args)

    assert parse(Counted(), sql) is first and Counted.asked == 0
    assert readable_rows(parse(Counted(), sql), relations) == 300_010
    other = parse(Counted(), sql + " ORDER BY k")  # another text: parsed
    assert Counted.asked == 1 and other is not first and not other.get("error")


def test_a_files_view_whose_rows_the_worker_knows_is_bounded_by_them(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    path = tmp_path / "sales.parquet"
    con.execute(f"COPY (SELECT range AS id, range % 50 AS region FROM range(1234)) TO '{path}' (FORMAT parquet)")
    con.execute(f"CREATE TEMP VIEW sales AS SELECT * FROM read_parquet('{path}')")  # as the engine worker makes it
    sql = "SELECT region, count(*) FROM sales GROUP BY region"
    assert readable_rows(parse(con, sql), Relations.of(con)) is None  # a view: unknown
    made = {"sales": (1234, f"SELECT * FROM read_parquet('{path}')")}  # the rows and the query the worker made it of
    known = Relations.of(con, known=made)
    most = readable_rows(parse(con, sql), known)
    assert most == 1234 and most >= (scanned_rows(con, sql, None)[0] or 0), most
    assert readable_rows(parse(con, sql), Relations.of(con, known={"sales": (1234, "SELECT 1")})) is None  # not it
    con.execute("CREATE VIEW main.sales AS SELECT * FROM big")  # another view of that name: unknown again
    assert readable_rows(parse(con, sql), Relations.of(con, known=made)) is None


def test_a_users_function_leaves_every_statement_to_the_plan(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TEMP MACRO sum(x) AS (SELECT count(*) FROM range(100000000000))")  # takes a built-in's name
    relations = Relations.of(con)
    assert relations.functions == {"sum"}
    assert readable_rows(parse(con, "SELECT sum(id) FROM small"), relations) is None
    with pytest.raises(Failure) as refused:  # the plan sees the macro's scan
        refuse_large_scan(con, "SELECT sum(id) FROM small", None, 1_000_000, relations)
    assert "100,000,000,000" in refused.value.fields["message"], refused.value.fields


def test_a_statement_under_the_bound_by_itsparse_runs_and_one_over_it_is_refused_with_the_plans_figure(
    con: duckdb.DuckDBPyConnection,
) -> None:
    relations = Relations.of(con)
    refuse_large_scan(con, "SELECT k, count(*) FROM big GROUP BY k", None, 300_000, relations)  # 300,000: not over
    with pytest.raises(Failure) as refused:  # over by its parse: the plan decides, and gives the figure
        refuse_large_scan(con, "SELECT * FROM big JOIN small USING (id)", None, 300_005, relations)
    said = refused.value.fields
    assert said["code"] == "LARGE_SCAN" and "300,010 rows" in said["message"], said
    with pytest.raises(Failure):  # unbounded by its parse (a table function): the plan's figure
        refuse_large_scan(con, "SELECT count(*) FROM range(100000000000) a, big", None, 1_000_000, relations)


def test_the_engine_worker_reads_its_catalog_anew_after_a_statement_changes_it(tmp_path: Path) -> None:
    path = tmp_path / "wh.duckdb"
    made = duckdb.connect(str(path))
    made.execute("CREATE TABLE events AS SELECT range AS id FROM range(1000)")
    made.close()
    session = DuckSession({"databases": [{"name": "wh", "alias": "wh", "path": str(path)}]})
    session.attach()

    def query(sql: str, bound: int | None = 100_000) -> None:
        session.query(Query(database="wh", sql=sql, params=None, max_rows=10, scan_bound=bound), [])

    query("SELECT count(*) FROM events")  # under the bound: runs, the catalog read once
    assert session.relations is not None and session.relations.tables["events"] == [("wh", "main", 1000)]
    known = session.relations
    query("SELECT count(*) FROM events")
    assert session.relations is known  # nothing changed: not read again
    with pytest.raises(Failure) as refused:  # its own scan is asked about before it runs
        query("CREATE TEMP TABLE events AS SELECT range AS id FROM range(200000)")
    assert "200,000 rows" in refused.value.fields["message"], refused.value.fields
    query("CREATE TEMP TABLE events AS SELECT range AS id FROM range(200000)", None)  # confirmed: shadows wh's events
    assert session.relations is None
    with pytest.raises(Failure) as refused:
        query("SELECT sum(id) FROM events")
    assert "200,000 rows" in refused.value.fields["message"], refused.value.fields
    query("CREATE TEMP MACRO n() AS (SELECT count(*) FROM range(100000000000))")
    with pytest.raises(Failure) as refused:
        query("SELECT n()")
    assert "100,000,000,000" in refused.value.fields["message"], refused.value.fields
    session.rest()
    session.attach()
    assert session.relations is None
    query("SELECT 1")
    assert session.functions is not None and session.functions[1] == {"n"}  # the session's macro, still there


# Spark's own EXPLAIN COST text (Spark 4), as a local Spark Connect printed it: without a rowCount (its cost-based
# optimizer off: sizes only) and with one (range(), and relations whose statistics the optimizer holds)
SIZES_ONLY = (
    "== Optimized Logical Plan ==\n"
    "Aggregate [k#16L], [k#16L, count(1) AS count(1)#17L], Statistics(sizeInBytes=788.1 KiB)\n"
    "+- Project [k#16L], Statistics(sizeInBytes=525.4 KiB)\n"
    "   +- Relation spark_catalog.default.t[id#15L,k#16L] parquet, Statistics(sizeInBytes=788.1 KiB)\n\n"
    "== Physical Plan ==\nAdaptiveSparkPlan isFinalPlan=false\n"
)
RANGE = (
    "== Optimized Logical Plan ==\n"
    "Range (0, 1000000, step=1), Statistics(sizeInBytes=7.6 MiB, rowCount=1.00E+6)\n\n"
    "== Physical Plan ==\n*(1) Range (0, 1000000, step=1, splits=2)\n"
)
JOINED = (
    "== Optimized Logical Plan ==\n"
    "Join Inner, (id#36L = id#47L), Statistics(sizeInBytes=606.6 GiB, rowCount=4.00E+10)\n"
    ":- Filter (k#37L = 1), Statistics(sizeInBytes=788.1 KiB, rowCount=3)\n"
    ":  +- Relation spark_catalog.default.t[id#36L,k#37L] parquet, "
    "Statistics(sizeInBytes=788.1 KiB, rowCount=2.00E+5)\n"
    "+- Filter isnotnull(id#47L), Statistics(sizeInBytes=788.1 KiB)\n"
    "   +- Relation spark_catalog.default.u[id#47L] parquet, Statistics(sizeInBytes=788.1 KiB, rowCount=150000)\n\n"
    "== Physical Plan ==\n"
)


def test_sparks_figure_is_the_row_count_of_the_relations_its_plan_reads() -> None:
    assert planned_rows(SIZES_ONLY) == (None, [])  # sizes only: no figure, so never refused
    assert planned_rows(RANGE) == (1_000_000, ["Range ≈1,000,000 rows"])
    # the leaves' counts (what is read), never the join's estimate of its output
    assert planned_rows(JOINED) == (
        350_000,
        ["spark_catalog.default.t ≈200,000 rows", "spark_catalog.default.u ≈150,000 rows"],
    )
    one_row = "== Optimized Logical Plan ==\nProject [1 AS 1#61], Statistics(sizeInBytes=1.0 B)\n+- OneRowRelation\n"
    assert planned_rows(one_row) == (None, [])


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_large_duckdb_scan_is_asked_with_its_figure_and_runs_when_sent_again(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    path = tmp_path / "wh.duckdb"
    made = duckdb.connect(str(path))
    made.execute("CREATE TABLE events AS SELECT range AS id, range % 5 AS kind FROM range(250000)")
    made.execute("CREATE TABLE kinds AS SELECT range AS kind FROM range(5)")
    made.close()
    env = {
        "BA_MCP_DATABASES__WH__PATH": str(path),
        "BA_MCP_TOOLS__QUERY_DATABASE__CONFIRM_SCAN_ROWS": "100000",
        "BA_MCP_METRICS__DEMO": "false",
    }
    big = "SELECT kind, count(*) AS n FROM events GROUP BY kind ORDER BY kind"
    with open("/dev/null", "w") as errlog:
        async with (
            stdio_client(stdio_params(ws, **env), errlog=errlog) as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            first = await s.call_tool("query_database", {"database": "wh", "query": big})
            said = text_of(first)
            assert first.is_error and "LARGE_SCAN" in said, said
            assert "DuckDB expects this statement to read about 250,000 rows" in said and "100,000" in said, said
            again = await s.call_tool("query_database", {"database": "wh", "query": big})
            assert not again.is_error, text_of(again)
            assert "50000" in text_of(again) or "50,000" in text_of(again), text_of(again)  # 250,000 / 5 kinds
            small = await s.call_tool("query_database", {"database": "wh", "query": "SELECT count(*) FROM kinds"})
            assert not small.is_error, text_of(small)  # under the bound: never asked
            # a CREATE … AS SELECT runs as soon as DuckDB binds it: its plan is asked first, and nothing is made
            copy = {"database": "wh", "query": "CREATE TEMP TABLE copied AS SELECT * FROM events"}
            asked = await s.call_tool("query_database", copy)
            assert asked.is_error and "LARGE_SCAN" in text_of(asked) and "250,000" in text_of(asked), text_of(asked)
            count = {"database": "wh", "query": "SELECT count(*) AS n FROM copied"}
            missing = await s.call_tool("query_database", count)
            assert missing.is_error and "copied" in text_of(missing), text_of(missing)
            made = await s.call_tool("query_database", copy)  # sent again: it runs
            assert not made.is_error, text_of(made)
            counted = await s.call_tool("query_database", count)
            assert "250000" in text_of(counted) or "250,000" in text_of(counted), text_of(counted)


@pytest.mark.slow  # memory, measured (tracemalloc over DuckDB's parse of long statements): the slow tier's
def test_the_parses_kept_by_their_text_stay_small_in_the_engine_worker(con: duckdb.DuckDBPyConnection) -> None:
    """The parses kept (``inside.sql.parse``) are bounded by what they hold, not only by how many: a statement parses
    to a tree ~300 times its text (an IN list of ids, a long select list), so 64 statements of 20,000 characters held
    ~430 MB in a session's engine worker (found by an attack on the change) — 8 times the growth
    (``engine.renew_growth_mb``, 50 MB) past which an idle worker counts as grown. A session that sends such statements,
    each once, keeps its worker small; a short statement is still kept."""
    import tracemalloc

    from ba_mcp.inside import sql

    saved = dict(sql._PARSED)
    sql._PARSED.clear()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        # as long as may be kept, enough of them to pass the bound in all; and longer (never kept)
        for longest, many in ((sql._PARSED_LONGEST, sql._PARSED_CHARS // sql._PARSED_LONGEST + 4), (20_000, 2)):
            for i in range(many):
                head = f"SELECT * FROM big WHERE k = {i} AND id IN ("
                ids = ",".join(["1"] * ((longest - len(head) - 1) // 2))
                text = f"{head}{ids})"
                assert len(text) <= longest and not parse(con, text).get("error")
        kept_mb = (tracemalloc.get_traced_memory()[0] - before) / 1e6
        short = "SELECT k FROM small JOIN big USING (id)"
        assert parse(con, short) is parse(con, short)
    finally:
        tracemalloc.stop()
        sql._PARSED.clear()
        sql._PARSED.update(saved)
    assert kept_mb < 20, f"{kept_mb:.0f} MB of parses kept"
