"""P-2: query_database round trip over stdio against the same query run in-process with DuckDB,
and the cost of a 1,000,000-row result with max_rows=1000 (time and server RSS growth).

Run: uv run python bench/bench_query.py [--runs 50]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import duckdb
from common import call, env_for, initialize, p50, python, report, rss_mb, spawn

SMALL = (
    "SELECT channel_id, count(*) AS orders, round(sum(quantity * unit_price), 2) AS gross "
    "FROM orders JOIN order_lines USING (order_id) WHERE status = 'completed' GROUP BY 1 ORDER BY 1"
)
BIG = "SELECT range AS i, range % 97 AS g, range * 0.5 AS x FROM range(1000000)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    runs = parser.parse_args().runs
    ws = Path(tempfile.mkdtemp(prefix="ba-bench-"))
    # The raw-result cache is off, so every call runs the query.
    proc = spawn([python(), "-m", "ba_mcp"], env_for(ws, BA_MCP_CACHE__MAX_ENTRIES="0"))
    initialize(proc)
    call(proc, 1, "query_database", {"query": "SELECT 1"})  # generates the demo database
    con = duckdb.connect(str(ws / "data" / "demo.duckdb"), read_only=True)
    ours, ref = [], []
    for i in range(runs):
        started = time.perf_counter()
        con.execute(SMALL).fetchall()
        ref.append(time.perf_counter() - started)
        elapsed, reply = call(proc, 100 + i, "query_database", {"query": SMALL, "output_level": "full"})
        assert not reply["result"].get("isError"), reply
        ours.append(elapsed)
    report(
        "P-2 small aggregate, stdio round trip vs in-process (p50)",
        p50(ours) * 1000,
        p50(ref) * 1000,
        "ms",
        "<= in-process + 3 ms",
    )
    print(f"    overhead over in-process DuckDB: {(p50(ours) - p50(ref)) * 1000:+.2f} ms at p50")

    # SELECT 42: the fixed cost of a call; the hello-world tool round trip is what the SDK and stdio cost alone.
    hello = spawn([python(), str(Path(__file__).with_name("hello_server.py"))], env_for(ws))
    initialize(hello)
    ours, ref, bare = [], [], []
    for i in range(runs):
        started = time.perf_counter()
        con.execute("SELECT 42").fetchall()
        ref.append(time.perf_counter() - started)
        elapsed, reply = call(proc, 500 + i, "query_database", {"query": "SELECT 42", "output_level": "full"})
        assert not reply["result"].get("isError"), reply
        ours.append(elapsed)
        bare.append(call(hello, 500 + i, "hello", {"name": "x"})[0])
    hello.kill()
    hello.wait()
    report("P-2 SELECT 42, stdio round trip vs in-process (p50)", p50(ours) * 1000, p50(ref) * 1000, "ms", "<= +3 ms")
    print(
        f"    overhead over in-process DuckDB: {(p50(ours) - p50(ref)) * 1000:+.2f} ms at p50; "
        f"hello-world MCPServer tool round trip {p50(bare) * 1000:.2f} ms (the SDK and stdio alone)"
    )

    # A small aggregate over an uploaded Parquet file (100,000 rows), the file named as an analyst names it.
    upload = ws / "uploads" / "sales.parquet"
    upload.parent.mkdir(exist_ok=True)
    duckdb.sql(
        "COPY (SELECT range AS id, range % 50 AS region, (range * 7919) % 1000 / 10.0 AS amount FROM range(100000)) "
        f"TO '{upload}' (FORMAT parquet)"
    )
    on_upload = "SELECT region, count(*) AS n, sum(amount) AS total FROM {} GROUP BY region ORDER BY region"
    direct = duckdb.connect()
    ours, ref = [], []
    for i in range(runs):
        started = time.perf_counter()
        direct.sql(on_upload.format(f"read_parquet('{upload}')")).fetchall()
        ref.append(time.perf_counter() - started)
        elapsed, reply = call(proc, 700 + i, "query_database", {"query": on_upload.format("upload_sales")})
        assert not reply["result"].get("isError"), reply
        ours.append(elapsed)
    report(
        "P-2 small aggregate over an uploaded Parquet (p50)",
        p50(ours) * 1000,
        p50(ref) * 1000,
        "ms",
        "<= in-process + 5 ms",
    )
    print(f"    overhead over in-process DuckDB reading the same file: {(p50(ours) - p50(ref)) * 1000:+.2f} ms at p50")

    started = time.perf_counter()
    con.sql(BIG).to_arrow_table()
    big_ref = time.perf_counter() - started
    before = rss_mb(proc.pid)
    big_times = []
    for i in range(3):
        elapsed, reply = call(proc, 1000 + i, "query_database", {"query": BIG, "max_rows": 1000})
        assert not reply["result"].get("isError"), reply
        big_times.append(elapsed)
    growth = rss_mb(proc.pid) - before
    report(
        "P-2 1,000,000-row result, max_rows=1000 (p50 of 3)",
        p50(big_times) * 1000,
        big_ref * 1000,
        "ms",
        "ref = in-process fetch of all rows to Arrow",
    )
    print(f"    server RSS growth over those calls: {growth:.1f} MB (result kept as a Parquet artifact)")
    proc.kill()
    proc.wait()


if __name__ == "__main__":
    main()
