"""A fair share of a database (issue 60): bob's query while alice keeps the database busy, against bob alone.

A real identity provider (tests/idp), a PostgreSQL of the bench's own and two HTTP servers with ``http.auth`` over it,
started together: ``fair`` with the defaults (``max_concurrent`` 4, one user's share half of it) and ``unshared``
with ``max_concurrent_per_user`` 4 (what every server did before: one semaphore for everybody). On each, bob times
``--runs`` small queries alone; then alice opens four sessions, each running ``SELECT pg_sleep(--hold)``, and bob
times the same queries while they run. Each of bob's calls has a 60 s timeout.

Run: uv run python bench/bench_fair_share.py [--runs 10] [--hold 20]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import pg_server
from tests.conftest import free_port, http_serve, make_workspace
from tests.idp_server import identity_provider, token

_calls = iter(range(10**9))


@contextlib.asynccontextmanager
async def session_of(url: str, bearer: str):  # type: ignore[no-untyped-def]
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=120) as client,
        streamable_http_client(url, http_client=client) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def timed(session: ClientSession, query: str) -> float:
    started = time.perf_counter()
    result = await session.call_tool("query_database", {"database": "shop", "query": query, "timeout": 60})
    took = time.perf_counter() - started
    if result.is_error:
        return float("inf")  # a timeout: never an answer
    return took


async def bob_runs(session: ClientSession, runs: int) -> list[float]:
    return [await timed(session, f"SELECT count(*) + {next(_calls)} AS n FROM orders") for _ in range(runs)]


async def measure(url: str, issuer: str, runs: int, hold: float) -> dict[str, list[float]]:
    alice_token, bob_token = token(issuer, "alice", url), token(issuer, "bob", url)
    async with session_of(url, bob_token) as bob:
        await bob_runs(bob, 2)  # bob's connection worker started
        alone = await bob_runs(bob, runs)
        async with (
            session_of(url, alice_token) as a1,
            session_of(url, alice_token) as a2,
            session_of(url, alice_token) as a3,
            session_of(url, alice_token) as a4,
            anyio.create_task_group() as group,
        ):
            for a in (a1, a2, a3, a4):
                group.start_soon(timed, a, f"SELECT pg_sleep({hold}) AS slept, {next(_calls)} AS n")
            await anyio.sleep(2)  # alice's four calls reach the database
            busy = await bob_runs(bob, runs)
    return {"alone": alone, "alice saturating": busy}


def figures(times: list[float]) -> str:
    answered = [t for t in times if t != float("inf")]
    if not answered:
        return f"no answer in {len(times)} calls"
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    shown = "timeout" if p95 == float("inf") else f"{p95 * 1000:.0f} ms"
    return f"p50 {statistics.median(answered) * 1000:.0f} ms, p95 {shown}, {len(times) - len(answered)} timeouts"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--hold", type=float, default=20.0)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ba-mcp-fair-"))
    with pg_server.postgres() as pg, identity_provider(base / "key.json") as issuer, contextlib.ExitStack() as stack:
        urls = {}
        for name, per_user in (("fair", None), ("unshared", "4")):
            port = free_port()
            url = f"http://127.0.0.1:{port}/mcp"
            env = {
                "BA_MCP_HTTP__AUTH__ISSUER": issuer,
                "BA_MCP_HTTP__AUTH__AUDIENCE": url,
                "BA_MCP_DATABASES__SHOP__URL": pg.url(),
                "BA_MCP_DATABASES__SHOP__MAX_CONCURRENT": "4",
                **({"BA_MCP_DATABASES__SHOP__MAX_CONCURRENT_PER_USER": per_user} if per_user else {}),
            }
            stack.enter_context(http_serve(make_workspace(base / name), port=port, **env))
            urls[name] = url
        for name, url in urls.items():
            for label, times in anyio.run(measure, url, issuer, args.runs, args.hold).items():
                print(f"{name:<9} bob {label:<17} {figures(times)}")


if __name__ == "__main__":
    main()
