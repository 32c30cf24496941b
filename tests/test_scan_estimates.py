"""Issue 63: an estimate before a large scan for DuckDB and Spark, as PostgreSQL has one (``LARGE_SCAN`` past
``tools.query_database.confirm_scan_rows``; the same statement sent again runs). Each engine's own figure: DuckDB's
plan (``EXPLAIN (FORMAT json)``: a table read sequentially counted whole, by its catalog), Spark's ``EXPLAIN COST``
``rowCount`` where it gives one. No figure, no refusal. (Spark through a real server: tests/test_values_as_shown.py's
Spark test, which starts one.)"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from mcp import ClientSession, stdio_client

from ba_mcp.databases.spark import planned_rows
from ba_mcp.inside.sql import refuse_large_scan, scanned_rows
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
