"""P-7: 32 concurrent mixed calls on one HTTP server — all must succeed, and no call may hold the event
loop more than 50 ms. The server runs with the lag monitor on (``telemetry.lag_monitor``: a task that
sleeps 10 ms and records how late it wakes); its figures are read from ``ba://metrics`` afterwards.

The 32 calls, over 8 client sessions at once: file_reader of the demo sample at each level, small and
large query_database aggregates, a 100,000-row result kept as an artifact, and run_python cells.

Run: uv run python bench/bench_concurrency.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from common import ROOT, env_for, python
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("file_reader", {"path": "uploads/sales_2025.csv", "output_level": "brief"}),
    ("file_reader", {"path": "uploads/sales_2025.csv", "output_level": "standard"}),
    ("file_reader", {"path": "uploads/sales_2025.csv", "output_level": "full"}),
    ("query_database", {"query": "SELECT status, count(*) AS n FROM orders GROUP BY 1"}),
    (
        "query_database",
        {"query": "SELECT category, year(order_date) AS y, sum(net_revenue) AS r FROM order_facts GROUP BY ALL"},
    ),
    ("query_database", {"query": "SELECT range AS i, range % 7 AS g FROM range(100000)", "max_rows": 100}),
    ("run_python", {"code": "import numpy as np\nfloat(np.arange(100000).sum())"}),
    ("run_python", {"code": "print('hello')"}),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def session_calls(url: str, which: list[int], results: list[bool]) -> dict[str, Any]:
    async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as s:
        await s.initialize()
        for i in which:
            tool, args = CALLS[i % len(CALLS)]
            result = await s.call_tool(tool, args)
            results.append(not result.is_error)
        metrics = json.loads((await s.read_resource("ba://metrics")).contents[0].text)
        return dict(metrics.get("event_loop") or {})


async def one_round(url: str) -> tuple[int, dict[str, Any]]:
    results: list[bool] = []
    lag: dict[str, Any] = {}

    async def run(k: int) -> None:
        nonlocal lag
        lag = await session_calls(url, [k * 4 + j for j in range(4)], results)

    async with anyio.create_task_group() as tg:
        for k in range(8):  # 8 sessions × 4 calls = 32 calls in flight together
            tg.start_soon(run, k)
    return sum(results), lag


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    ws = Path(tempfile.mkdtemp(prefix="ba-bench-"))
    (ws / "uploads").mkdir(parents=True)
    (ws / "uploads" / "sales_2025.csv").write_bytes((ROOT / "ba_mcp" / "samples" / "sales_2025.csv").read_bytes())
    port = free_port()
    env = env_for(ws, BA_MCP_TELEMETRY__LAG_MONITOR="true", BA_MCP_CACHE__MAX_ENTRIES="0")
    proc = subprocess.Popen(
        [python(), "-m", "ba_mcp", "serve", "--transport", "http", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        time.sleep(3)  # the background warm-up has finished: the figures are for the calls
        url = f"http://127.0.0.1:{port}/mcp"
        for r in range(rounds):
            ok, lag = anyio.run(one_round, url)
            print(
                f"P-7 round {r + 1}: {ok} of 32 calls succeeded; event loop (whole server life so far): worst "
                f"lag {lag.get('max_ms')} ms, {lag.get('over_50ms')} of {lag.get('samples')} wake-ups later "
                "than 50 ms  target: 32 of 32, no lag over 50 ms"
            )
    finally:
        proc.terminate()
        proc.wait(10)
    sys.exit(0)


if __name__ == "__main__":
    main()
