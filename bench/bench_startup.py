"""P-1: cold start over stdio (spawn → initialize answered) against a hello-world MCPServer.

Run: uv run python bench/bench_startup.py [--runs 10]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from common import ROOT, env_for, initialize, p50, python, report, spawn


def cold_start(args: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = spawn(args, env)
    initialize(proc)
    elapsed = time.perf_counter() - started
    proc.kill()
    proc.wait()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    ws = Path(tempfile.mkdtemp(prefix="ba-bench-"))
    env = env_for(ws)
    hello = [python(), str(ROOT / "bench" / "hello_server.py")]
    ba = [python(), "-m", "ba_mcp"]
    cold_start(ba, env)  # first start creates the workspace; not counted
    ours, ref = [], []
    for _ in range(runs):  # interleaved so machine noise hits both alike
        ref.append(cold_start(hello, env))
        ours.append(cold_start(ba, env))
    report("P-1 cold start, spawn -> initialize answered (p50)", p50(ours), p50(ref), "s", "ratio <= 1.15")


if __name__ == "__main__":
    main()
