"""The first call of a session against the warm call, per tool (issue 50 item 10).

A host starts the server when it starts, and the first tool call comes seconds later (the user types, the model
thinks): each case is a fresh server over stdio, initialized, left idle for ``--idle`` seconds, then the tool's
first call and a second, warm call with other arguments (no cache hit). Each tool gets a fresh server, so each first
call is the first of its session. Reported: the first call's time, the warm call's, and their ratio; with
``--against`` another checkout's server runs the same cases in the same run, interleaved (before/after).

Run: uv run python bench/bench_first_call.py [--runs 3] [--idle 3] [--against /tmp/before/.venv/bin/python]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
from common import AGAINST_HELP, call, env_for, initialize, servers, spawn

CASES = {  # tool -> (first call's arguments, the warm call's)
    "file_reader": ({"path": "upload_calls", "output_level": "standard"}, {"path": "upload_calls", "nrows": 500}),
    "query_database": (
        {"query": "SELECT region_name, sum(net_revenue) AS v FROM order_facts GROUP BY 1"},
        {"query": "SELECT channel_name, sum(net_revenue) AS v FROM order_facts GROUP BY 1"},
    ),
    "query_metrics": (
        {"metrics": ["net_revenue"], "time_grain": "month"},
        {"metrics": ["order_count"], "time_grain": "quarter"},
    ),
    "run_python": (
        {"code": "import scipy.stats\nround(float(scipy.stats.norm.cdf(1.0)), 4)"},
        {"code": "import scipy.stats\nround(float(scipy.stats.t.cdf(1.0, 5)), 4)"},
    ),
}


def workspace() -> Path:
    ws = Path(tempfile.mkdtemp(prefix="ba-bench-first-"))
    (ws / "uploads").mkdir()
    lines = ["day,agent,num. calls abandoned ,avg wait"] + [
        f"2024-{1 + i % 12:02d}-{1 + i % 28:02d},agent {i % 17},{i % 23},{(i * 37) % 300 / 10}" for i in range(2000)
    ]
    (ws / "uploads" / "calls.csv").write_text("\n".join(lines) + "\n")
    return ws


def one(command: list[str], cwd: Path, tool: str, idle: float) -> tuple[float, float]:
    ws = workspace()
    proc = spawn(command, env_for(ws), cwd)
    try:
        initialize(proc)
        time.sleep(idle)
        first_args, warm_args = CASES[tool]
        first, reply = call(proc, 2, tool, first_args)
        assert not reply.get("result", {}).get("isError"), reply
        warm, reply = call(proc, 3, tool, warm_args)
        assert not reply.get("result", {}).get("isError"), reply
        return first, warm
    finally:
        family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        for p in psutil.wait_procs(family, timeout=30)[1]:
            p.kill()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--idle", type=float, default=3.0, help="seconds between initialize and the first call")
    parser.add_argument("--tools", default=",".join(CASES))
    parser.add_argument("--against", help=AGAINST_HELP)
    args = parser.parse_args()
    contenders = servers(args.against)
    tools = args.tools.split(",")
    times: dict[tuple[str, str], list[tuple[float, float]]] = {(c, t): [] for c in contenders for t in tools}
    for run in range(args.runs):
        order = list(contenders) if run % 2 == 0 else list(reversed(contenders))
        for tool in tools:
            for name in order:
                command, cwd = contenders[name]
                times[(name, tool)].append(one(command, cwd, tool, args.idle))
    print(f"first call of a fresh session vs the warm call (median of {args.runs}; idle {args.idle:g} s first)")
    print(f"{'server':<28} {'tool':<16} {'first ms':>9} {'warm ms':>9} {'first/warm':>11}")
    for (name, tool), pairs in times.items():
        first = statistics.median(p[0] for p in pairs) * 1000
        warm = statistics.median(p[1] for p in pairs) * 1000
        print(f"{name:<28} {tool:<16} {first:9.1f} {warm:9.1f} {first / warm:11.1f}")


if __name__ == "__main__":
    main()
