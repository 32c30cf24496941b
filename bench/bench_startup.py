"""P-1 cold start over stdio (spawn → initialize answered) and P-10 shutdown on stdin close, against a
hello-world MCPServer measured in the same run.

Honest rounds: every process a run started — the server and everything it spawned (the sandbox's spare
worker, its shim) — has ended before the next run starts, so no leftover loads numpy while the next
server starts; the order of ba-mcp and the reference alternates; min and median are reported.

Run: uv run python bench/bench_startup.py [--runs 10] [--against <python of another checkout>]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
from common import AGAINST_HELP, ROOT, env_for, initialize, python, servers, spawn


def one_run(args: list[str], env: dict[str, str], cwd: Path = ROOT) -> tuple[float, float]:
    """(spawn → initialize answered, stdin closed → the server and all it started are gone), seconds."""
    started = time.perf_counter()
    proc = spawn(args, env, cwd)
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
    parser.add_argument("--against", help=AGAINST_HELP)
    args = parser.parse_args()
    ws = Path(tempfile.mkdtemp(prefix="ba-bench-"))
    env = env_for(ws)
    contenders = {name: (command, cwd) for name, (command, cwd) in servers(args.against).items()}
    contenders["hello-world"] = ([python(), str(ROOT / "bench" / "hello_server.py")], ROOT)
    for name, (command, cwd) in contenders.items():
        if name != "hello-world":
            # each checkout's modules compiled, as an installed server's are after its first start (a shell with
            # PYTHONDONTWRITEBYTECODE set would otherwise compile every changed module on every start)
            subprocess.run([command[0], "-m", "compileall", "-q", "ba_mcp", "sandbox"], cwd=cwd, check=True)
            one_run(command, env, cwd)  # the first start creates the workspace; not counted
    timed: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    names = list(contenders)
    for i in range(args.runs):  # interleaved, each going first in turn
        for name in names[i % len(names) :] + names[: i % len(names)]:
            command, cwd = contenders[name]
            timed[name].append(one_run(command, env, cwd))

    def show(label: str, which: int, target: str) -> None:
        ref = statistics.median(t[which] for t in timed["hello-world"])
        for name, runs in timed.items():
            if name == "hello-world":
                continue
            values = [t[which] for t in runs]
            print(
                f"{label}: {name} {min(values) * 1000:.0f} / {statistics.median(values) * 1000:.0f} ms (min / median), "
                f"hello-world median {ref * 1000:.0f} ms; ratio of medians {statistics.median(values) / ref:.2f}  "
                f"target {target}"
            )

    show("P-1 spawn -> initialize", 0, "ratio <= 1.15")
    show("P-10 stdin closed -> all processes gone", 1, "<= 250 ms")


if __name__ == "__main__":
    main()
