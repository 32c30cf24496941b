"""What a team server costs (issue 54): the first call with OAuth against without, and the memory an idle user holds.

Two HTTP servers on 127.0.0.1 over one workspace each — one with ``http.auth`` against a real identity provider
(tests/idp: panva's oidc-provider), one without — started together. Per run, interleaved: a new client session on
each (a new user on the authenticated one: its own token) does ``initialize`` and a first query; the time from the
first byte sent to the query's answer is taken. Then ``--users`` users each make one query on the authenticated
server and leave their session idle: the server's and its workers' memory (PSS) before and after, per user.

Run: uv run python bench/bench_team.py [--runs 8] [--users 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2
import psutil
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import free_port, http_serve, make_workspace
from tests.idp_server import identity_provider, token

QUERY = "SELECT region_name, sum(net_revenue) + {n} AS v FROM order_facts GROUP BY 1"  # never a cached answer
_calls = iter(range(10**9))
USERS = {"alice": "ba-mcp", "bob": "ba-mcp", "carol": "other", "brief": "ba-mcp"}  # tests/idp's clients: users


async def first_call(url: str, bearer: str | None) -> tuple[float, float]:
    """A new session's initialize and first query, and a second query in it (seconds each)."""
    headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
    started = time.perf_counter()
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as client,
        streamable_http_client(url, http_client=client) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await session.call_tool("query_database", {"query": QUERY.format(n=next(_calls))})
        assert not result.is_error
        first = time.perf_counter() - started
        started = time.perf_counter()
        assert not (await session.call_tool("query_database", {"query": QUERY.format(n=next(_calls))})).is_error
        return first, time.perf_counter() - started


def pss_mb(port: int) -> float:
    """The server listening on ``port`` and its descendants (workers), in MB of proportional set size."""
    server = next(c.pid for c in psutil.net_connections("tcp") if c.laddr and c.laddr.port == port and c.pid)
    processes = [psutil.Process(server), *psutil.Process(server).children(recursive=True)]
    total = 0.0
    for p in processes:
        try:
            total += p.memory_full_info().pss
        except psutil.Error:
            pass
    return total / 1024**2


def processes(port: int) -> int:
    server = next(c.pid for c in psutil.net_connections("tcp") if c.laddr and c.laddr.port == port and c.pid)
    return 1 + len(psutil.Process(server).children(recursive=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--users", type=int, default=4)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-team-"))
    port, plain_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with identity_provider(base / "key.json") as issuer:
        env = {"BA_MCP_HTTP__AUTH__ISSUER": issuer, "BA_MCP_HTTP__AUTH__AUDIENCE": url}
        with (
            http_serve(make_workspace(base / "a"), port=port, **env),
            http_serve(make_workspace(base / "b"), port=plain_port) as plain_url,
        ):
            anyio.run(first_call, plain_url, None)  # each server's own first start (imports, the spare) aside
            anyio.run(first_call, url, token(issuer, "alice", url))
            with_auth, without = [], []
            for run in range(args.runs):
                bearer = token(issuer, ("alice", "bob")[run % 2], url)  # tokens are asked for outside the timing
                pair = [(with_auth, url, bearer), (without, plain_url, None)]
                for times, where, credential in pair if run % 2 == 0 else pair[::-1]:
                    times.append(anyio.run(first_call, where, credential))
            for label, i in (("a new session's initialize + first query", 0), ("a second query in it", 1)):
                a = statistics.median(t[i] for t in with_auth) * 1000
                w = statistics.median(t[i] for t in without) * 1000
                print(f"{label}, median of {args.runs}: with OAuth {a:.1f} ms, without {w:.1f} ms, ratio {a / w:.2f}")
            print("  (with OAuth the two users' new sessions find their engine workers; without, each new session")
            print("   is someone new and starts one)")
            time.sleep(2)
            before = pss_mb(port)
            for user, scope in list(USERS.items())[: args.users]:
                anyio.run(first_call, url, token(issuer, user, url, scope))
            time.sleep(2)
            after = pss_mb(port)
            print(f"processes: {processes(port)}")
            print(f"memory: {before:.0f} MB before, {after:.0f} MB after {args.users} users' first query each")
            print(f"  {(after - before) / args.users:.0f} MB per idle user (their engine worker; no Python worker)")


if __name__ == "__main__":
    main()
