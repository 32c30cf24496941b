"""P-1 cold start over stdio (spawn → initialize answered) and P-10 shutdown on stdin close, against a
hello-world MCPServer measured in the same run.

Honest rounds: every process a run started — the server and everything it spawned (the sandbox's spare
worker, its shim) — has ended before the next run starts, so no leftover loads numpy while the next
server starts; the order of ba-mcp and the reference alternates; min and median are reported.

Run: uv run python bench/bench_startup.py [--runs 10]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import psutil
from common import ROOT, env_for, initialize, python, spawn


def one_run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(spawn → initialize answered, stdin closed → the server and all it started are gone), seconds."""
    started = time.perf_counter()
    proc = spawn(args, env)
    initialize(proc)
    ready = time.perf_counter() - started
    time.sleep(0.5)  # let background start-up (the spare worker) begin, as in real use
    family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    closed = time.perf_counter()
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)
    _, alive = psutil.wait_procs(family, timeout=30)
    shutdown = time.perf_counter() - closed
    for p in alive:  # not counted as ended: reported by the time it took, then removed
        p.kill()
    return ready, shutdown


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    ws = Path(tempfile.mkdtemp(prefix="ba-bench-"))
    env = env_for(ws)
    hello = [python(), str(ROOT / "bench" / "hello_server.py")]
    ba = [python(), "-m", "ba_mcp"]
    one_run(ba, env)  # the first start creates the workspace; not counted
    ours: list[tuple[float, float]] = []
    ref: list[tuple[float, float]] = []
    for i in range(runs):  # interleaved, alternating which goes first
        order = [(ba, ours), (hello, ref)] if i % 2 else [(hello, ref), (ba, ours)]
        for args, into in order:
            into.append(one_run(args, env))

    def show(label: str, ours_s: list[float], ref_s: list[float], target: str) -> None:
        o_min, o_med = min(ours_s), statistics.median(ours_s)
        r_min, r_med = min(ref_s), statistics.median(ref_s)
        print(
            f"{label}: ba-mcp {o_min * 1000:.0f} / {o_med * 1000:.0f} ms (min / median), hello-world "
            f"{r_min * 1000:.0f} / {r_med * 1000:.0f} ms; ratio of medians {o_med / r_med:.2f}  target {target}"
        )

    show("P-1 spawn -> initialize", [r for r, _ in ours], [r for r, _ in ref], "ratio <= 1.15")
    show("P-10 stdin closed -> all processes gone", [s for _, s in ours], [s for _, s in ref], "<= 250 ms")


if __name__ == "__main__":
    main()
