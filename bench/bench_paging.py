"""Paging a 5,000-row artifact as the interactive view does (issue 40, P-14: <= 10 ms a page): ``view_rows`` over
stdio, from a client that declares MCP Apps, for pages across the artifact (plain, sorted, filtered), and as the
model pages it (``file_reader`` with an offset) — against DuckDB reading the same page of the same Parquet file
in this process, interleaved.

Run: uv run python bench/bench_paging.py [--pages 60]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

import duckdb
from common import env_for, initialize, python, request, spawn

APPS = {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}
QUERY = "SELECT range AS n, range % 7 AS weekday, round(range * 2.5, 1) AS revenue FROM range(5000)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=60)
    args = parser.parse_args()
    ws = Path(tempfile.mkdtemp(prefix="ba-bench-"))
    server = spawn([python(), "-m", "ba_mcp"], env_for(ws))
    initialize(server, APPS)
    ids = iter(range(2, 10**6))

    def call(tool: str, arguments: dict) -> tuple[float, dict]:
        started = time.perf_counter()
        params = {"name": tool, "arguments": arguments}
        reply = request(server, {"jsonrpc": "2.0", "id": next(ids), "method": "tools/call", "params": params})
        return time.perf_counter() - started, reply

    _, made = call("query_database", {"query": QUERY, "output_level": "brief"})
    artifact = re.search(r"artifact_[0-9a-f]{12}", json.dumps(made)).group(0)  # type: ignore[union-attr]
    files = list((ws / "artifacts").rglob(f"{artifact}*.parquet")) or list(ws.rglob(f"*{artifact[9:]}*.parquet"))
    parquet = str(files[0])
    con = duckdb.connect()
    where = " WHERE " + " OR ".join(f"CAST({c} AS VARCHAR) ILIKE '%12%'" for c in ("n", "weekday", "revenue"))
    kinds = {  # (view_rows arguments, the page's clauses, the count's clause)
        "page": ({}, "", ""),
        "sorted page": ({"order_by": "revenue", "descending": True}, ' ORDER BY "revenue" DESC NULLS LAST', ""),
        "filtered page": ({"filter": "12"}, where, where),
    }
    for name, (extra, sql, counted) in kinds.items():
        ours, ref = [], []
        for i in range(args.pages):
            offset = (i * 50) % 5000
            seconds, reply = call("view_rows", {"artifact_id": artifact, "offset": offset, "limit": 50, **extra})
            assert not reply["result"].get("isError"), reply
            ours.append(seconds)
            started = time.perf_counter()
            con.execute(f"SELECT * FROM read_parquet('{parquet}'){sql} LIMIT 50 OFFSET {offset}").fetchall()
            con.execute(f"SELECT count(*) FROM read_parquet('{parquet}'){counted}").fetchall()
            ref.append(time.perf_counter() - started)
        ms = statistics.median(ours) * 1000
        print(
            f"{name}: view_rows over stdio p50 {ms:.1f} ms (target <= 10 ms); DuckDB in process, the page and its "
            f"count: p50 {statistics.median(ref) * 1000:.1f} ms"
        )
    ours, ref = [], []
    for i in range(args.pages):  # the model's way: file_reader with an offset (each page once: no cached answer)
        offset = (i * 50) % 5000
        seconds, reply = call("file_reader", {"path": artifact, "offset": offset, "nrows": 50, "output_level": "full"})
        assert not reply["result"].get("isError"), reply
        ours.append(seconds)
        started = time.perf_counter()
        con.execute(f"SELECT * FROM read_parquet('{parquet}') LIMIT 50 OFFSET {offset}").fetchall()
        ref.append(time.perf_counter() - started)
    print(
        f"file_reader offset page (full level): p50 {statistics.median(ours) * 1000:.1f} ms (target <= 10 ms); "
        f"DuckDB in process, the page: p50 {statistics.median(ref) * 1000:.1f} ms"
    )
    server.stdin.close()
    server.wait(10)


if __name__ == "__main__":
    main()
