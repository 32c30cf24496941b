"""P-11 and P-12 on a real local PostgreSQL (started like the tests' one: tests/pg_server.py).

P-11: a small aggregate through query_database over stdio vs the same query through ADBC in-process (a plain
connection, no transaction frame), interleaved, p50. P-12: 3,000,000 rows with max_rows=10 → observation +
complete artifact vs ADBC fetch_record_batch + pyarrow.parquet write of the same rows; server RSS growth.

Run: uv run python bench/bench_postgres.py [--runs 50]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq
from common import ROOT, call, env_for, initialize, p50, python, report, rss_mb, spawn

sys.path.insert(0, str(ROOT))
from tests.pg_server import make_big, postgres

SMALL = "SELECT status, count(*) AS n, sum(amount) AS revenue FROM orders GROUP BY status ORDER BY status"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    runs = parser.parse_args().runs
    with postgres() as pg:
        make_big(pg)
        ws = Path(tempfile.mkdtemp(prefix="ba-bench-"))
        env = env_for(ws, BA_MCP_DATABASES__SHOP__URL=pg.url("analyst"), BA_MCP_ENGINE__SPARE_WORKERS="0")
        proc = spawn([python(), "-m", "ba_mcp"], env)
        initialize(proc)
        call(proc, 1, "query_database", {"database": "shop", "query": "SELECT 1"})  # the connection is made
        con = pg.connect("analyst")
        cur = con.cursor()
        ours, ref = [], []
        for i in range(runs):
            started = time.perf_counter()
            cur.execute(SMALL)
            cur.fetch_arrow_table()
            ref.append(time.perf_counter() - started)
            elapsed, reply = call(proc, 100 + i, "query_database", {"database": "shop", "query": SMALL})
            assert not reply["result"].get("isError"), reply
            ours.append(elapsed)
        report(
            "P-11 small aggregate on PostgreSQL, stdio vs ADBC in-process (p50)",
            p50(ours) * 1000,
            p50(ref) * 1000,
            "ms",
            "<= in-process + 3 ms",
        )
        print(f"    overhead over ADBC in-process: {(p50(ours) - p50(ref)) * 1000:+.2f} ms at p50")

        big_ours, big_ref = [], []
        before = rss_mb(proc.pid)
        peak = before
        for i in range(3):
            out = Path(tempfile.mkdtemp()) / "big.parquet"
            started = time.perf_counter()
            cur.execute("SELECT * FROM big")
            reader = cur.fetch_record_batch()
            with pq.ParquetWriter(out, reader.schema, compression="zstd") as writer:
                for batch in reader:
                    writer.write_batch(batch)
            big_ref.append(time.perf_counter() - started)
            os.unlink(out)
            elapsed, reply = call(
                proc, 1000 + i, "query_database", {"database": "shop", "query": "SELECT * FROM big", "max_rows": 10}
            )
            text = reply["result"]["content"][0]["text"]
            assert "of 3,000,000 rows shown" in text, text[:400]
            big_ours.append(elapsed)
            peak = max(peak, rss_mb(proc.pid))
        report(
            "P-12 3,000,000 PostgreSQL rows → observation + complete artifact vs ADBC fetch + Parquet write",
            p50(big_ours) * 1000,
            p50(big_ref) * 1000,
            "ms",
            "<= 1.5 x",
        )
        print(f"    ratio {p50(big_ours) / p50(big_ref):.2f}x; server RSS growth {peak - before:+.1f} MB (<= 300 MB)")
        con.close()
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
