"""Issue 40: why a query runs slower in an engine worker than in the bench's own process — measured with no
ba-mcp code at all. Two plain child processes (``python -c``: DuckDB, the TPC-H file ATTACHed READ_ONLY, no
confinement, no seccomp, no cgroup) answer the 22 TPC-H queries on request through a pipe, timing each query
themselves. Every query runs once in each child per round, which child goes first alternating, so each child's
times split into:

* **after itself** — the child ran the previous query (another one) last: its caches, thread pool and address
  space were the last ones used;
* **after the other process** — the other child ran the same query just before.

The same alternation between two DuckDB instances in *this* process (each its own in-memory database with the
file attached: separate buffer pools, separate thread pools, one address space) is the control.

What it shows on this 2-vCPU VM (issue 40's "unexplained 1 ms"): a query that runs right after another process ran
one is ~8 % slower (+0.6 ms at a 6-8 ms geometric mean; 1.07-1.10x over five runs) than one that runs after its
own process, whichever the process; in one process the switch between two DuckDB instances costs nothing. (A child
after itself against this process: 1.00x to 1.11x between runs — the parent's pipe write ran in between.) An engine
worker always runs after other processes (the client's, the server's), the bench's direct reference half of the
time: this — not seccomp, the cgroup, the confinement or the worker's code (``DuckSession.query`` in this process is as
fast as DuckDB alone) — is the "~1 ms slower in the worker", the price of running SQL in a process of its own (S-12).

Run: uv run python bench/bench_process_switch.py [--rounds 10] [--scale 0.1]
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import time

import duckdb
from bench_tpch import duckdb_file
from common import ROOT

sys.path.insert(0, str(ROOT))
from tests import tpch

CHILD = """
import sys, time, duckdb
con = duckdb.connect(":memory:", config={"threads": 2})
con.execute("ATTACH " + repr(sys.argv[1]) + " AS t (READ_ONLY)")
con.execute("USE t")
queries = {}
for line in sys.stdin:
    n, _, path = line.strip().partition(" ")
    if n not in queries:
        queries[n] = open(path).read()
    started = time.perf_counter()
    for _ in con.sql(queries[n]).to_arrow_reader(2048):
        pass
    sys.stdout.write(f"{time.perf_counter() - started}\\n")
    sys.stdout.flush()
"""


def geo_ms(series: dict[int, list[float]]) -> float:
    medians = [statistics.median(v) for v in series.values()]
    return 1000 * math.exp(sum(math.log(m) for m in medians) / len(medians))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--scale", type=float, default=0.1)
    args = parser.parse_args()
    db = duckdb_file(tpch.data(args.scale), args.scale)
    files = {n: ROOT / "tests" / "tpch" / f"q{n:02d}.sql" for n in tpch.queries()}
    texts = {n: p.read_text() for n, p in files.items()}

    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]

    def in_child(k: int, n: int) -> float:
        pipe_in, pipe_out = children[k].stdin, children[k].stdout
        assert pipe_in is not None and pipe_out is not None
        pipe_in.write(f"{n} {files[n]}\n")
        pipe_in.flush()
        return float(pipe_out.readline())

    instances = []
    for _ in range(2):
        con = duckdb.connect(":memory:", config={"threads": 2})
        con.execute(f"ATTACH '{db}' AS t (READ_ONLY)")
        con.execute("USE t")
        instances.append(con)

    def in_process(k: int, n: int) -> float:
        started = time.perf_counter()
        for _ in instances[k].sql(texts[n]).to_arrow_reader(2048):
            pass
        return time.perf_counter() - started

    kinds = {"two processes": in_child, "two instances in this process": in_process}
    times = {(kind, how): {n: [] for n in files} for kind in kinds for how in ("after itself", "after the other")}
    for run in kinds.values():  # warm-up: every query once in each
        for n in files:
            run(0, n), run(1, n)
    for kind, run in kinds.items():  # one kind at a time: nothing else runs between the two it compares
        for round_ in range(args.rounds):
            for i, n in enumerate(files):
                # the order alternates every query, so the first to run a query ran the previous one last
                first = (round_ + i) % 2
                times[kind, "after itself"][n].append(run(first, n))
                times[kind, "after the other"][n].append(run(1 - first, n))
    for child in children:
        child.kill()
        child.wait()

    print(f"TPC-H SF {args.scale}, {args.rounds} rounds: geometric mean of per-query medians")
    for kind in kinds:
        itself, other = geo_ms(times[kind, "after itself"]), geo_ms(times[kind, "after the other"])
        print(
            f"{kind:<31} after itself {itself:6.2f} ms   right after the other {other:6.2f} ms   "
            f"{other / itself:5.2f}x ({other - itself:+.2f} ms)"
        )
    child = geo_ms(times["two processes", "after itself"])
    alone = geo_ms(times["two instances in this process", "after itself"])
    print(f"a child after itself (only this process's pipe write between) vs this process: {child / alone:.2f}x")


if __name__ == "__main__":
    main()
