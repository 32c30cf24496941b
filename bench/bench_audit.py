"""What the audit trail costs (issue 62 item 2, S-20): the time a call takes with the trail on against off, and the
memory each user adds.

Two stdio servers over workspaces made alike, the same in all but ``audit.enabled`` (the raw-result cache off in
both, so every call runs), started together. Per round, interleaved in alternating order: ``query_database SELECT n``
(the fixed cost of a call: the trail's record is the difference) and ``run_python`` with a 200 kB cell (a record
bounded at ``max_text_kb``: its head, digest and length). p50 and p90 of each, and the difference and ratio of the
p50s; what writing one record costs in this process (the difference without the noise of two servers). Then the
memory: the trail's own per principal it has named (tracemalloc over ``AuditLog`` for 2,000 users in
this process), and the server's unique memory (USS) before and after ``--users`` HTTP sessions (a new principal key
each; the server without ``http.auth``) made one call each and went idle, on a server with the trail and one without.

Run: uv run python bench/bench_audit.py [--runs 200] [--users 20]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import anyio
import psutil
from common import call, env_for, initialize, p50, python, report, spawn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ba_mcp import callers
from ba_mcp.pipeline.audit import AuditLog
from ba_mcp.pipeline.usage import CallRecord
from ba_mcp.settings import AuditSettings
from tests.conftest import free_port, http_serve, make_workspace

CELL = "total = 0\n" + "".join(f"total += {i}  # a long cell: line {i:06d} of a notebook\n" for i in range(4000))


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def timed_calls(runs: int, base: Path) -> None:
    procs = {}
    for trail in ("on", "off"):
        ws = make_workspace(base / f"w-{trail}")
        env = env_for(
            ws,
            BA_MCP_CACHE__MAX_ENTRIES="0",
            BA_MCP_AUDIT__ENABLED="true" if trail == "on" else "false",
            BA_MCP_AUDIT__DIR=str(base / f"audit-{trail}"),
            BA_MCP_SANDBOX__SPARE_WORKERS="0",
        )
        procs[trail] = spawn([python(), "-m", "ba_mcp"], env)
    ids = iter(range(10, 10**9))
    for proc in procs.values():
        initialize(proc)
        for n in range(5):  # the demo database, the engine worker, the sandbox: started before the timing
            call(proc, next(ids), "query_database", {"query": f"SELECT {n} AS v"})
            call(proc, next(ids), "run_python", {"code": f"x = {n}"})
    print(f"run_python's cell: {len(CELL):,} characters (the record keeps 64 KB of it, its digest and length)")
    for label, arguments_of in (
        ("query_database SELECT n", lambda n: ("query_database", {"query": f"SELECT {n} AS v"})),
        ("run_python, a 200 kB cell", lambda n: ("run_python", {"code": CELL + f"n = {n}\n"})),
    ):
        times: dict[str, list[float]] = {"on": [], "off": []}
        order = ["on", "off"]
        for i in range(runs):
            for trail in order if i % 2 == 0 else order[::-1]:
                tool, arguments = arguments_of(i)
                seconds, reply = call(procs[trail], next(ids), tool, arguments)
                assert not reply["result"].get("isError"), reply
                times[trail].append(seconds * 1000)
        on, off = p50(times["on"]), p50(times["off"])
        report(f"{label}: p50 with the trail (ms)", on, off, "ms", "added ≤ 0.5 ms")
        print(f"{'':<58} added {on - off:+.3f} ms at p50; p90 {p90(times['on']):.3f} vs {p90(times['off']):.3f} ms")
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(10)
    written = sum(p.stat().st_size for p in (base / "audit-on").glob("audit-*.jsonl"))
    print(f"the trail written: {written:,} bytes for {2 * runs + 10} calls; none with it off")


def trail_memory_per_user(base: Path, users: int = 2000) -> float:
    trail = AuditLog.open(AuditSettings(), base / "audit-memory")
    record = CallRecord("0" * 32, "", "query_database", time.time(), 1.0, 0, 0, "standard", False, False, 0, True)
    who = [callers.from_claims(f"user-{i:016x}", {"email": f"user{i}@example.com"}, f"u{i}") for i in range(users)]
    trail.call(record, callers.operator(), {"query": "SELECT 1"}, {})  # the day's file opened before measuring
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for principal in who:
        record.session = principal.key
        trail.call(record, principal, {"query": "SELECT 1"}, {})
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    trail.close()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    return grown / users


def record_cost_us(base: Path, records: int = 20_000) -> tuple[float, float]:
    """What writing one record costs in this process (µs): a small query's, and a 200 kB cell's (bounded, hashed)."""
    trail = AuditLog.open(AuditSettings(), base / "audit-cost")
    record = CallRecord("0" * 32, "user-a", "query_database", time.time(), 1.0, 0, 0, "standard", False, False, 0, True)
    who = callers.from_claims("user-a", {"email": "alice@example.com"}, "alice")
    costs = []
    for arguments, n in (({"query": "SELECT region, count(*) FROM sales GROUP BY 1"}, records), ({"code": CELL}, 500)):
        started = time.perf_counter()
        for _ in range(n):
            trail.call(record, who, arguments, {"database": "demo"}, (3, 160))
        costs.append((time.perf_counter() - started) / n * 1e6)
    trail.close()
    return costs[0], costs[1]


async def one_call(url: str) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("query_database", {"query": "SELECT 1 AS v"})
        assert not result.is_error


def server_uss_mb(port: int) -> float:
    server = next(c.pid for c in psutil.net_connections("tcp") if c.laddr and c.laddr.port == port and c.pid)
    return psutil.Process(server).memory_full_info().uss / 1024**2


def server_memory_per_user(base: Path, users: int) -> None:
    ports = {"on": free_port(), "off": free_port()}
    with (
        http_serve(make_workspace(base / "http-on"), port=ports["on"], BA_MCP_AUDIT__DIR=str(base / "a-on")) as on,
        http_serve(make_workspace(base / "http-off"), port=ports["off"], BA_MCP_AUDIT__ENABLED="false") as off,
    ):
        urls = {"on": on, "off": off}
        for url in urls.values():
            anyio.run(one_call, url)  # imports, the demo database and a first engine worker aside
        time.sleep(2)
        before = {k: server_uss_mb(p) for k, p in ports.items()}
        for i in range(users):
            for trail in ("on", "off") if i % 2 == 0 else ("off", "on"):
                anyio.run(one_call, urls[trail])
        time.sleep(3)
        after = {k: server_uss_mb(p) for k, p in ports.items()}
    for trail in ("on", "off"):
        grown = after[trail] - before[trail]
        print(
            f"server USS with the trail {trail:<3}: {before[trail]:.1f} MB before, {after[trail]:.1f} MB after {users} "
            f"users' sessions ({grown * 1024 / users:+.1f} KB per user)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--users", type=int, default=20)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-audit-"))
    try:
        timed_calls(args.runs, base)
        small, cell = record_cost_us(base)
        print(f"one record written, in process: {small:.1f} µs (a small query's), {cell:.0f} µs (a 200 kB cell's)")
        print(f"the trail's own memory: {trail_memory_per_user(base):.0f} bytes per principal it has named")
        server_memory_per_user(base, args.users)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
