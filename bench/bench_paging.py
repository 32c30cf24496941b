"""Paging a 5,000-row artifact as the interactive view does (issue 40, P-14: <= 10 ms a page): ``view_rows`` over
stdio, from a client that declares MCP Apps, for pages across the artifact (plain, sorted, filtered), and as the
model pages it (``file_reader`` with an offset) — against DuckDB reading the same page of the same Parquet file
in this process, interleaved. ``--against``: another checkout's server in the same rounds.

Run: uv run python bench/bench_paging.py [--pages 60] [--against <python of another checkout>]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
from common import AGAINST_HELP, env_for, initialize, request, servers, spawn

APPS = {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}
QUERY = "SELECT range AS n, range % 7 AS weekday, round(range * 2.5, 1) AS revenue FROM range(5000)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=60)
    parser.add_argument("--against", help=AGAINST_HELP)
    args = parser.parse_args()
    ws = Path(tempfile.mkdtemp(prefix="ba-bench-"))
    procs: dict[str, subprocess.Popen[bytes]] = {
        name: spawn(command, env_for(ws), cwd) for name, (command, cwd) in servers(args.against).items()
    }
    ids = iter(range(2, 10**6))

    def call(proc: subprocess.Popen[bytes], tool: str, arguments: dict) -> tuple[float, dict]:
        started = time.perf_counter()
        params = {"name": tool, "arguments": arguments}
        reply = request(proc, {"jsonrpc": "2.0", "id": next(ids), "method": "tools/call", "params": params})
        return time.perf_counter() - started, reply

    artifact = ""
    for proc in procs.values():  # the same result in one workspace: the same artifact for every server
        initialize(proc, APPS)
        _, made = call(proc, "query_database", {"query": QUERY, "output_level": "brief"})
        artifact = re.search(r"artifact_[0-9a-f]{12}", json.dumps(made)).group(0)  # type: ignore[union-attr]
    parquet = str(next((ws / "artifacts").rglob(f"{artifact}*.parquet")))
    con = duckdb.connect()
    where = " WHERE " + " OR ".join(f"CAST({c} AS VARCHAR) ILIKE '%12%'" for c in ("n", "weekday", "revenue"))
    kinds: dict[str, tuple[str, dict[str, Any], str, str]] = {  # tool and arguments, the page's and count's clauses
        "page": ("view_rows", {}, "", ""),
        "sorted page": ("view_rows", {"order_by": "revenue", "descending": True}, ' ORDER BY "revenue" DESC', ""),
        "filtered page": ("view_rows", {"filter": "12"}, where, where),
        "file_reader offset page (full level)": ("file_reader", {"output_level": "full"}, "", None),  # type: ignore[dict-item]
    }
    for name, (tool, extra, sql, counted) in kinds.items():
        timed: dict[str, list[float]] = {"direct": [], **{who: [] for who in procs}}
        order = ["direct", *procs]
        rows = con.execute(f"SELECT count(*) FROM read_parquet('{parquet}'){counted or ''}").fetchall()[0][0]
        for i in range(args.pages):
            offset = (i * 50) % rows  # pages of the rows there are (the filter's matches for a filtered page)
            for who in order[i % len(order) :] + order[: i % len(order)]:
                if who == "direct":
                    started = time.perf_counter()
                    con.execute(f"SELECT * FROM read_parquet('{parquet}'){sql} LIMIT 50 OFFSET {offset}").fetchall()
                    if counted is not None:
                        con.execute(f"SELECT count(*) FROM read_parquet('{parquet}'){counted}").fetchall()
                    timed["direct"].append(time.perf_counter() - started)
                    continue
                if tool == "view_rows":
                    arguments = {"artifact_id": artifact, "offset": offset, "limit": 50, **extra}
                else:  # the model's way; each page asked once per server (no cached answer)
                    arguments = {"path": artifact, "offset": offset, "nrows": 50, **extra}
                seconds, reply = call(procs[who], tool, arguments)
                assert not reply["result"].get("isError"), reply
                timed[who].append(seconds)
        ref = statistics.median(timed["direct"]) * 1000
        print(
            f"{name}: "
            + "; ".join(f"{who} p50 {statistics.median(timed[who]) * 1000:.1f} ms" for who in procs)
            + f" (target <= 10 ms); DuckDB in process, the page{' and its count' if counted is not None else ''}: "
            f"p50 {ref:.1f} ms"
        )
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)


if __name__ == "__main__":
    main()
