"""P-3: run_python round trips over stdio.

* warm ``print(1)`` through a stdio MCP session, against a bare pipe worker measured in the same run
  (a subprocess that reads one line, execs it with stdout captured and answers — no MCP, no sandbox);
* the first call right after the server starts (spawn → initialize → run_python), against the
  spawn → initialize of a hello-world MCPServer;
* the worker's memory at idle (RSS of the worker processes, after matplotlib has preloaded).

Run: uv run python bench/bench_python.py [--runs 200] [--starts 5]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
from common import ROOT, call, env_for, initialize, p50, python, report, spawn

BARE_WORKER = r"""
import io, sys, contextlib
out = sys.stdout
for line in sys.stdin:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(line)
    out.write(repr(buf.getvalue()) + "\n")
    out.flush()
"""


def bare_round_trips(runs: int) -> list[float]:
    proc = subprocess.Popen([python(), "-c", BARE_WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin and proc.stdout
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        proc.stdin.write(b"print(1)\n")
        proc.stdin.flush()
        proc.stdout.readline()
        times.append(time.perf_counter() - started)
    proc.kill()
    proc.wait()
    return times


def first_call(ws: Path) -> tuple[float, float]:
    started = time.perf_counter()
    proc = spawn([python(), "-m", "ba_mcp"], env_for(ws))
    initialize(proc)
    ready = time.perf_counter() - started
    _, reply = call(proc, 2, "run_python", {"code": "print(1)"})
    assert not reply["result"].get("isError"), reply
    total = time.perf_counter() - started
    proc.kill()
    proc.wait()
    return total, ready


def hello_start() -> float:
    started = time.perf_counter()
    proc = spawn([python(), str(ROOT / "bench" / "hello_server.py")], env_for(Path(tempfile.mkdtemp())))
    initialize(proc)
    elapsed = time.perf_counter() - started
    proc.kill()
    proc.wait()
    return elapsed


def worker_rss_mb(server_pid: int) -> tuple[float, int]:
    procs = [p for p in psutil.Process(server_pid).children(recursive=True) if "sandbox" in p.cmdline()]
    return sum(p.memory_info().rss for p in procs) / 1024**2, len(procs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()

    ws = Path(tempfile.mkdtemp(prefix="ba-bench-"))
    firsts, hellos = [], []
    for _ in range(args.starts):
        firsts.append(first_call(ws)[0])
        hellos.append(hello_start())
    report("P-3 first run_python call after start (spawn→result, p50)", p50(firsts), p50(hellos), "s", "<= 1.5 s")
    print("    reference: spawn→initialize of a hello-world MCPServer")

    proc = spawn([python(), "-m", "ba_mcp"], env_for(ws))
    initialize(proc)
    for i in range(10):
        call(proc, 10 + i, "run_python", {"code": "print(1)"})
    ours = []
    for i in range(args.runs):
        elapsed, reply = call(proc, 100 + i, "run_python", {"code": "print(1)"})
        assert not reply["result"].get("isError"), reply
        ours.append(elapsed)
    bare = bare_round_trips(args.runs)
    report("P-3 warm print(1), stdio MCP round trip (p50)", p50(ours) * 1000, p50(bare) * 1000, "ms", "<= 10 ms")
    print("    reference: bare pipe worker (read line, exec with captured stdout, answer)")
    time.sleep(3)  # idle: the session's worker preloads matplotlib after 1 s without calls
    rss, n = worker_rss_mb(proc.pid)
    print(f"P-3 worker memory at idle: {rss:.0f} MB RSS across {n} processes (session worker + spare, shims included)")
    proc.kill()
    proc.wait()


if __name__ == "__main__":
    main()
