"""Issue 62 item 2 over the real thing: a team server (streamable HTTP, ``http.auth`` against a real identity provider,
tests/idp) on a real PostgreSQL with a password. Alice's and bob's calls are recorded under their names; a forged
token, no token and a token without the scope are recorded as refused with the verifier's reason; a refused statement
with its outcome and code; the database role a call ran as (``role_from``); ``ba-mcp audit --user alice`` answers
what she ran; and no token — nor any of its three pieces — nor the database's password is anywhere in the trail.
Slow tier: the provider, the database and the server are processes. In process: tests/test_audit.py."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from ba_mcp.pipeline import audit
from tests import pg_server
from tests.conftest import ROOT, free_port, http_serve, make_workspace, server_env, text_of
from tests.idp_server import identity_provider, token
from tests.test_team_server import session_as

pytestmark = [pytest.mark.slow, pytest.mark.anyio]
COUNT = "SELECT status, count(*) AS n FROM orders GROUP BY 1 ORDER BY 1"
REGIONAL = "SELECT current_user AS role, region, count(*) AS n FROM sales GROUP BY 1, 2"


@dataclass
class Team:
    issuer: str
    url: str
    folder: Path  # the audit trail's
    workspace: Path
    password: str  # the database's


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    base = tmp_path_factory.mktemp("audit-http")
    pg = pg_server.running()
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    folder = base / "state" / "audit"
    ws = make_workspace(base)
    with identity_provider(base / "key.json") as issuer:
        env = {
            "BA_MCP_HTTP__AUTH__ISSUER": issuer,
            "BA_MCP_HTTP__AUTH__AUDIENCE": url,
            "BA_MCP_HTTP__AUTH__REQUIRED_SCOPES": '["ba-mcp"]',
            "BA_MCP_DATABASES__SHOP__URL": pg.url(),
            # each person as their own database role (row-level security): the role a call ran as is in its record
            "BA_MCP_DATABASES__REGIONAL__URL": pg.url("rls_reader", "regional"),
            "BA_MCP_DATABASES__REGIONAL__ROLE_FROM": json.dumps({"claim": "sub", "roles": {"alice": "rls_eu"}}),
            "BA_MCP_AUDIT__DIR": str(folder),
        }
        with http_serve(ws, port=port, **env):
            yield Team(issuer, url, folder, ws, pg_server.PASSWORDS["analyst"])


def _post(url: str, bearer: str | None) -> httpx2.Response:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    return httpx2.post(url, json=message, headers=headers, timeout=30)


def _forged(jwt: str) -> str:
    """The token with its signature's first character changed: well formed, signed by nobody."""
    head, body, signature = jwt.split(".")
    return f"{head}.{body}.{'A' if signature[0] != 'A' else 'B'}{signature[1:]}"


async def test_who_ran_what_and_who_was_refused_is_in_the_trail_and_no_secret_is(team: Team) -> None:
    alice, bob, carol = (
        token(team.issuer, u, team.url, s) for u, s in (("alice", "ba-mcp"), ("bob", "ba-mcp"), ("carol", "other"))
    )
    async with session_as(alice, team.url) as session:
        done = await session.call_tool("query_database", {"query": COUNT, "database": "shop"})
        assert not done.is_error, text_of(done)
        refused = await session.call_tool("query_database", {"query": "DELETE FROM orders", "database": "shop"})
        assert refused.is_error, text_of(refused)
        await session.call_tool("file_reader", {"path": "uploads/sales.csv"})
        mine = await session.call_tool("query_database", {"query": REGIONAL, "database": "regional"})
        assert not mine.is_error, text_of(mine)
    async with session_as(bob, team.url) as session:
        assert not (
            await session.call_tool("query_database", {"query": "SELECT 1 AS one", "database": "shop"})
        ).is_error
    forged = _forged(alice)
    assert _post(team.url, forged).status_code == 401
    assert _post(team.url, None).status_code == 401
    assert _post(team.url, carol).status_code == 403
    assert _post(team.url, alice).status_code == 200

    entries = list(audit.read(team.folder))
    calls = [e for e in entries if e["event"] == "call"]
    by_alice = [e for e in calls if e["principal"]["display"] == "alice"]
    assert [e["tool"] for e in by_alice] == ["query_database"] * 2 + ["file_reader", "query_database"], by_alice
    first, second, _, as_herself = by_alice
    assert as_herself["database"] == "regional" and as_herself["role"] == "rls_eu", as_herself
    assert as_herself["rows"] == 1 and as_herself["statement"]["text"] == REGIONAL, as_herself  # her region's row
    assert first["principal"]["issuer"] == team.issuer and first["principal"]["subject"] == "alice", first
    assert first["principal"]["key"].startswith("user-") and first["session"] == first["principal"]["key"], first
    assert first["database"] == "shop" and first["statement"]["text"] == COUNT and first["rows"] == 2, first
    assert first["outcome"] == "ok" and first["bytes"] > 0, first
    assert second["outcome"] == "refused" and second["error_code"] in ("READ_ONLY", "ACCESS_DENIED"), second
    assert second["database"] == "shop" and second["statement"]["text"] == "DELETE FROM orders", second
    assert [e["principal"]["display"] for e in calls if e["principal"]["display"] != "alice"] == ["bob"]
    refusals = [(e["status"], e["error_code"], e["reason"]) for e in entries if e["event"] == "refused"]
    assert refusals == [
        (401, "invalid_token", "the signature does not verify"),
        (401, "no_token", "no bearer token"),
        (403, "insufficient_scope", "a scope http.auth.required_scopes names is missing"),
    ], refusals
    carols = next(e for e in entries if e.get("error_code") == "insufficient_scope")
    assert carols["principal"]["subject"] == "carol" and carols["path"] == "/mcp", carols

    trail = "".join(p.read_text() for p in team.folder.iterdir())
    secrets = {"the database's password": team.password, "regional's password": pg_server.PASSWORDS["rls_reader"]}
    for name, jwt in (
        ("alice's token", alice),
        ("bob's token", bob),
        ("carol's token", carol),
        ("the forgery", forged),
    ):
        secrets[name] = jwt
        for i, piece in enumerate(jwt.split(".")):
            secrets[f"{name}, piece {i}"] = piece[-40:]  # the header is the same for every token: its tail too
    found = [name for name, secret in secrets.items() if secret in trail]
    assert not found, found

    # the operator asks what alice ran: her calls, nobody else's
    answer = subprocess.run(
        [sys.executable, "-m", "ba_mcp", "audit", "--user", "alice", "--since", "1h", "--json"],
        env=server_env(team.workspace, BA_MCP_AUDIT__DIR=str(team.folder)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert answer.returncode == 0, answer.stderr
    shown: list[dict[str, Any]] = [json.loads(line) for line in answer.stdout.splitlines()]
    assert [e["call_id"] for e in shown] == [e["call_id"] for e in by_alice], answer.stdout
