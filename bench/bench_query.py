"""P-2: query_database round trip over stdio against the same query run in-process with DuckDB (a small aggregate
on the demo, SELECT 42, a small aggregate over an uploaded Parquet file), and the cost of a 1,000,000-row result
with max_rows=1000 (time and server RSS growth). ``--against``: another checkout's server in the same rounds.

Run: uv run python bench/bench_query.py [--runs 50] [--against <python of another checkout>]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
from common import AGAINST_HELP, call, env_for, initialize, p50, python, report, rss_mb, servers, spawn

SMALL = (
    "SELECT channel_id, count(*) AS orders, round(sum(quantity * unit_price), 2) AS gross "
    "FROM orders JOIN order_lines USING (order_id) WHERE status = 'completed' GROUP BY 1 ORDER BY 1"
)
BIG = "SELECT range AS i, range % 97 AS g, range * 0.5 AS x FROM range(1000000)"
ON_UPLOAD = "SELECT region, count(*) AS n, sum(amount) AS total FROM {} GROUP BY region ORDER BY region"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--against", action="append", help=AGAINST_HELP + " (may be given more than once)")
    args = parser.parse_args()
    runs = args.runs
    ws = Path(tempfile.mkdtemp(prefix="ba-bench-"))
    upload = ws / "uploads" / "sales.parquet"
    upload.parent.mkdir(parents=True)
    duckdb.sql(  # a small aggregate over an uploaded Parquet file (100,000 rows), named as an analyst names it
        "COPY (SELECT range AS id, range % 50 AS region, (range * 7919) % 1000 / 10.0 AS amount FROM range(100000)) "
        f"TO '{upload}' (FORMAT parquet)"
    )
    # The raw-result cache is off, so every call runs the query.
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name, (command, cwd) in servers(args.against).items():
            procs[name] = spawn(command, env_for(ws, BA_MCP_CACHE__MAX_ENTRIES="0"), cwd)
        measure(procs, ws, upload, runs)
    finally:  # the servers and the workspace (its demo database, the upload, the artifacts) go with the bench
        for proc in procs.values():
            proc.kill()
            proc.wait()
        shutil.rmtree(ws, ignore_errors=True)


def measure(procs: dict[str, subprocess.Popen[bytes]], ws: Path, upload: Path, runs: int) -> None:
    ids = iter(range(10, 10**9))
    for proc in procs.values():
        initialize(proc)
        call(proc, next(ids), "query_database", {"query": "SELECT 1"})  # generates the demo database
    con = duckdb.connect(str(ws / "data" / "demo.duckdb"), read_only=True)
    direct = duckdb.connect()

    def interleaved(label: str, reference: Any, arguments: dict[str, Any], target: str) -> dict[str, float]:
        timed: dict[str, list[float]] = {"direct": [], **{name: [] for name in procs}}
        order = ["direct", *procs]
        for i in range(runs):
            for who in order[i % len(order) :] + order[: i % len(order)]:
                if who == "direct":
                    started = time.perf_counter()
                    reference()
                    timed["direct"].append(time.perf_counter() - started)
                else:
                    elapsed, reply = call(procs[who], next(ids), "query_database", arguments)
                    assert not reply["result"].get("isError"), reply
                    timed[who].append(elapsed)
        ref = p50(timed["direct"])
        for name in procs:
            report(f"{label} — {name} (p50)", p50(timed[name]) * 1000, ref * 1000, "ms", target)
            print(f"    over in-process DuckDB: {(p50(timed[name]) - ref) * 1000:+.2f} ms at p50")
        return {name: p50(timed[name]) for name in procs}

    interleaved(
        "P-2 small aggregate, stdio vs in-process",
        lambda: con.execute(SMALL).fetchall(),
        {"query": SMALL, "output_level": "full"},
        "<= in-process + 3 ms",
    )
    interleaved(
        "P-2 small aggregate over an uploaded Parquet",
        lambda: direct.sql(ON_UPLOAD.format(f"read_parquet('{upload}')")).fetchall(),
        {"query": ON_UPLOAD.format("upload_sales")},
        "<= in-process + 5 ms",
    )
    # SELECT 42: the fixed cost of a call; the hello-world tool round trip is what the SDK and stdio cost alone.
    fixed = interleaved(
        "P-2 SELECT 42, stdio vs in-process",
        lambda: con.execute("SELECT 42").fetchall(),
        {"query": "SELECT 42", "output_level": "full"},
        "<= +3 ms",
    )
    hello = spawn([python(), str(Path(__file__).with_name("hello_server.py"))], env_for(ws))
    initialize(hello)
    bare = [call(hello, 500 + i, "hello", {"name": "x"})[0] for i in range(runs)]
    hello.kill()
    hello.wait()
    print(
        f"    hello-world MCPServer tool round trip {p50(bare) * 1000:.2f} ms (the SDK and stdio alone); SELECT 42: "
        + ", ".join(f"{name} {seconds * 1000:.2f} ms" for name, seconds in fixed.items())
    )

    started = time.perf_counter()
    con.sql(BIG).to_arrow_table()
    big_ref = time.perf_counter() - started
    for name, proc in procs.items():
        before = rss_mb(proc.pid)
        big_times = []
        for _ in range(3):
            elapsed, reply = call(proc, next(ids), "query_database", {"query": BIG, "max_rows": 1000})
            assert not reply["result"].get("isError"), reply
            big_times.append(elapsed)
        report(
            f"P-2 1,000,000-row result, max_rows=1000 — {name} (p50 of 3)",
            p50(big_times) * 1000,
            big_ref * 1000,
            "ms",
            "ref = in-process fetch of all rows to Arrow",
        )
        print(
            f"    server RSS growth over those calls: {rss_mb(proc.pid) - before:.1f} MB (kept as a Parquet artifact)"
        )


if __name__ == "__main__":
    main()
