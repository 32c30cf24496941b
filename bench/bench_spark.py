"""Issue 24: a GROUP BY over 1,000 groups of a 10,000,000-row Parquet-backed Spark table through query_database
over stdio vs the same query through ADBC in this process (a plain Spark Connect session), interleaved, p50;
and how soon the next query answers after one cancelled at its timeout.

Run: uv run python bench/bench_spark.py [--runs 15]   (the spark extra; Java 17)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, call, env_for, initialize, p50, python, report, spawn

sys.path.insert(0, str(ROOT))
from ba_mcp.databases import spark
from tests.test_spark import _sql

QUERY = "SELECT store, count(*) AS n, sum(amount) AS total FROM sales GROUP BY store ORDER BY store"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    workdir = Path(tempfile.mkdtemp(prefix="ba-bench-spark-"))
    with spark.local(workdir, guarded=False) as setup:
        _sql(
            setup.url,
            "CREATE TABLE sales USING parquet AS SELECT id, id % 1000 AS store, CAST(id % 97 AS DOUBLE) AS amount "
            "FROM range(10000000)",
        )
    with spark.local(workdir, guarded=True) as server:
        _sql(server.url, "SELECT count(*) FROM sales")
        ws = Path(tempfile.mkdtemp(prefix="ba-bench-"))
        env = env_for(
            ws,
            BA_MCP_DATABASES__LAKE__URL=server.url,
            BA_MCP_ENGINE__SPARE_WORKERS="0",
            BA_MCP_TOOLS__QUERY_DATABASE__TIMEOUT_S="5",
        )
        proc = spawn([python(), "-m", "ba_mcp"], env)
        initialize(proc)
        for i in range(3):  # the connection, the session's first queries
            call(proc, 1 + i, "query_database", {"database": "lake", "query": QUERY, "max_rows": 2000})
        import adbc_driver_manager.dbapi as dbapi
        import adbc_driver_spark

        con = dbapi.connect(driver=adbc_driver_spark._driver_path(), db_kwargs={"uri": server.url}, autocommit=True)
        cur = con.cursor()
        for _ in range(3):
            cur.execute(QUERY)
            cur.fetch_arrow_table()
        ours, ref = [], []
        for i in range(runs):
            started = time.perf_counter()
            cur.execute(QUERY)
            rows = cur.fetch_arrow_table()
            ref.append(time.perf_counter() - started)
            assert rows.num_rows == 1000
            elapsed, reply = call(
                proc, 100 + i, "query_database", {"database": "lake", "query": QUERY, "max_rows": 2000}
            )
            assert not reply["result"].get("isError"), reply
            ours.append(elapsed)
        report(
            "Spark GROUP BY over 10 M Parquet rows, stdio vs ADBC in-process (p50)",
            p50(ours) * 1000,
            p50(ref) * 1000,
            "ms",
            "<= in-process + 50 ms",
        )
        print(f"    overhead: {(p50(ours) - p50(ref)) * 1000:+.1f} ms at p50 (one warm ADBC session each)")
        waits = []
        for i in range(3):
            long = "SELECT count(*) FROM range(100000000000) WHERE rand() < 0.5"
            call(proc, 500 + i, "query_database", {"database": "lake", "query": long})
            elapsed, reply = call(proc, 600 + i, "query_database", {"database": "lake", "query": "SELECT 1 AS one"})
            assert not reply["result"].get("isError"), reply
            waits.append(elapsed)
        worst = max(waits) * 1000
        print(f"    after a query cancelled at its 5 s timeout, the next answered in {worst:.0f} ms (max of 3)")
        cur.close()
        con.close()
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
