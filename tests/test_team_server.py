"""Issue 54: a team server — streamable HTTP as an OAuth 2.1 resource server, tested against a real identity provider
(panva's certified ``oidc-provider``, tests/idp_server.py) through the official streamable HTTP client.

401 with the protected-resource metadata (RFC 9728); a valid token end to end; a token for another audience, an
expired one, a forged signature, another key under the issuer's key id, a shared-secret signature, an EC signature
under the issuer's RSA key id, a header with no or garbage fields and a missing scope refused (401/403, never a 500);
an ID token refused unless ``http.auth.token_types`` lists JWT; an anonymously registered client's own token refused
under ``allowed_clients`` or ``required_claims`` (introspected tokens too); opaque tokens through introspection; a key
rotation followed; two users' artifacts and analyses kept apart across sessions; a session id presented with another
user's token refused; a non-loopback host without ``http.auth`` refused at start. Slow tier: the provider and the
servers are processes. The verifier in process: tests/test_auth.py."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import ROOT, free_port, http_serve, make_workspace, meta_of, server_env, text_of
from tests.idp_server import client_token, identity_provider, log_in, register, token

pytestmark = [pytest.mark.slow, pytest.mark.anyio]
APPS = {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}


@dataclass
class Team:
    issuer: str
    url: str  # the server's MCP URL: its audience
    key_file: Path

    def token(self, user: str, scope: str = "ba-mcp", resource: str | None = None) -> str:
        return token(self.issuer, user, resource or self.url, scope)


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    base = tmp_path_factory.mktemp("team")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with identity_provider(base / "key.json") as issuer:
        env = {
            "BA_MCP_HTTP__AUTH__ISSUER": issuer,
            "BA_MCP_HTTP__AUTH__AUDIENCE": url,
            "BA_MCP_HTTP__AUTH__REQUIRED_SCOPES": '["ba-mcp"]',
            "BA_MCP_HTTP__AUTH__LEEWAY_S": "0",
            "BA_MCP_HTTP__AUTH__KEYS_CACHE_S": "1",
            "BA_MCP_HTTP__AUTH__INTROSPECTION_CLIENT_ID": "ba-mcp-server",
            "BA_MCP_HTTP__AUTH__INTROSPECTION_CLIENT_SECRET": "ba-mcp-server-secret",
        }
        with http_serve(make_workspace(base), port=port, **env) as served:
            assert served == url
            yield Team(issuer, url, base / "key.json")


@asynccontextmanager
async def session_as(bearer: str, url: str, extensions: dict[str, Any] | None = None) -> AsyncIterator[ClientSession]:
    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=60)
    async with (
        client,
        streamable_http_client(url, http_client=client) as (read, write, *_),
        ClientSession(read, write, extensions=extensions) as session,
    ):
        await session.initialize()
        yield session


def post(url: str, bearer: str | None, **headers: str) -> httpx2.Response:
    """One raw initialize request, as a client would send it first."""
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    return httpx2.post(
        url, json=message, headers={"Accept": "application/json, text/event-stream", **headers}, timeout=30
    )


def test_no_token_is_401_naming_the_protected_resource_metadata(team: Team) -> None:
    answer = post(team.url, None)
    assert answer.status_code == 401
    challenge = answer.headers["www-authenticate"]
    assert challenge.startswith("Bearer") and "resource_metadata=" in challenge, challenge
    metadata_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
    metadata = httpx2.get(metadata_url, timeout=30).json()
    assert metadata["resource"] == team.url and metadata["authorization_servers"] == [team.issuer], metadata
    assert "ba-mcp" in metadata.get("scopes_supported", ["ba-mcp"])


async def test_a_valid_token_works_end_to_end_with_a_view_page(team: Team) -> None:
    async with session_as(team.token("alice"), team.url, APPS) as alice:
        names = {t.name for t in (await alice.list_tools()).tools}
        assert {"query_database", "view_rows"} <= names
        result = await alice.call_tool(
            "query_database", {"query": "SELECT range AS n FROM range(3000)", "output_level": "brief"}
        )
        assert not result.is_error, text_of(result)
        page = await alice.call_tool("view_rows", {"artifact_id": meta_of(result)["artifact_id"], "offset": 2990})
        assert not page.is_error, text_of(page)
        data = page.structured_content or {}
        assert data["total_rows"] == 3000 and data["rows"][-1][0] == 2999


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(part: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


@pytest.mark.parametrize(
    "case",
    [
        "another audience",
        "forged signature",
        "another key with the issuer's key id",
        "a shared-secret signature",
        "an EC signature under the issuer's RSA key id",
        "a header with no fields",
        "a header of garbage",
        "header fields of the wrong types",
    ],
)
def test_tokens_the_server_must_not_accept_are_401(team: Team, case: str) -> None:
    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    good = team.token("alice")
    header, payload, signature = good.split(".")
    claims, kid = _unb64(payload), _unb64(header)["kid"]
    if case == "another audience":
        bad = team.token("alice", resource="http://127.0.0.1:1/somewhere-else")
    elif case == "forged signature":
        bad = f"{header}.{payload}.{signature[:-6]}{'AAAAAA' if not signature.endswith('AAAAAA') else 'BBBBBB'}"
    elif case == "a shared-secret signature":  # the issuer's public key as an HMAC secret (algorithm confusion)
        public = json.dumps(json.loads(team.key_file.read_text())["n"])
        bad = jwt.encode(claims, public, algorithm="HS256", headers={"kid": kid})
    elif case == "another key with the issuer's key id":
        mine = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        bad = jwt.encode(claims, mine, algorithm="RS256", headers={"kid": kid, "typ": "at+jwt"})
    elif case == "an EC signature under the issuer's RSA key id":  # the header chose the algorithm: a 500 once
        mine_ec = ec.generate_private_key(ec.SECP256R1())
        bad = jwt.encode(claims, mine_ec, algorithm="ES256", headers={"kid": kid, "typ": "at+jwt"})
    elif case == "a header with no fields":
        bad = f"{_b64(b'{}')}.{payload}.{signature}"
    elif case == "a header of garbage":
        bad = f"{_b64(bytes(range(256)))}.{payload}.{signature}"
    else:
        fields = {"alg": ["RS256"], "kid": {"kid": kid}, "typ": 7, "crit": "b64"}
        bad = f"{_b64(json.dumps(fields).encode())}.{payload}.{signature}"
    assert post(team.url, good).status_code == 200
    refused = post(team.url, bad)
    assert refused.status_code == 401, (case, refused.status_code, refused.text[:300])
    assert "invalid_token" in refused.headers.get("www-authenticate", ""), refused.headers
    assert post(team.url, good).status_code == 200  # and the server goes on serving


def test_an_expired_token_is_401(team: Team) -> None:
    brief = team.token("brief")  # valid for 2 s
    assert post(team.url, brief).status_code == 200
    time.sleep(3)
    assert post(team.url, brief).status_code == 401


def test_a_token_without_the_scope_is_403_insufficient_scope(team: Team) -> None:
    answer = post(team.url, team.token("carol", scope="other"))
    assert answer.status_code == 403
    assert "insufficient_scope" in answer.headers.get("www-authenticate", "") + answer.text


async def test_an_opaque_token_is_introspected(team: Team) -> None:
    opaque = team.token("opaque")
    assert opaque.count(".") != 2  # not a JWT
    async with session_as(opaque, team.url) as session:
        result = await session.call_tool("query_database", {"query": "SELECT 6 * 7 AS answer"})
        assert "42" in text_of(result)


async def test_two_users_work_apart_and_each_finds_their_own_in_a_new_session(team: Team) -> None:
    made = "SELECT range AS n, range * 2 AS twice FROM range(2500)"
    async with session_as(team.token("alice"), team.url) as alice:
        result = await alice.call_tool("query_database", {"query": made, "output_level": "brief"})
        artifact = meta_of(result)["artifact_id"]
        saved = await alice.call_tool("save_analysis", {"name": "alice-rows", "steps": "last:1"})
        assert not saved.is_error, text_of(saved)
    async with session_as(team.token("bob"), team.url) as bob:
        read = await bob.call_tool("file_reader", {"path": artifact})
        assert read.is_error, text_of(read)
        with pytest.raises(Exception):  # noqa: B017 - the SDK raises its error type for a refused read
            await bob.read_resource(f"artifact://{artifact}")  # type: ignore[arg-type]
        catalog = await bob.read_resource("analysis://catalog")  # type: ignore[arg-type]
        assert "alice-rows" not in str(catalog.contents[0])
        rerun = await bob.call_tool("run_analysis", {"name": "alice-rows"})
        assert rerun.is_error, text_of(rerun)
        mine = await bob.call_tool("query_database", {"query": "SELECT 1 AS bob"})
        assert not mine.is_error
    async with session_as(team.token("alice"), team.url) as alice_again:  # a new session of the same user
        read = await alice_again.call_tool("file_reader", {"path": artifact, "output_level": "brief"})
        assert not read.is_error and "2,500" in text_of(read), text_of(read)
        catalog = await alice_again.read_resource("analysis://catalog")  # type: ignore[arg-type]
        assert "alice-rows" in str(catalog.contents[0])


def test_a_session_id_presented_with_another_users_token_is_refused(team: Team) -> None:
    opened = post(team.url, team.token("alice"))
    assert opened.status_code == 200
    session_id = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "mcp-session-id": session_id}
    as_bob = httpx2.post(
        team.url, json=listing, headers={**headers, "Authorization": f"Bearer {team.token('bob')}"}, timeout=30
    )
    assert as_bob.status_code in (403, 404), (as_bob.status_code, as_bob.text[:300])
    assert "query_database" not in as_bob.text


def test_a_rotated_signing_key_is_fetched_when_a_token_names_it(tmp_path: Path) -> None:
    """The provider restarts with a new signing key: the server, holding the old key set, fetches the issuer's keys
    again when a token names a key id it does not know (at most every 10 s), and accepts the new tokens."""
    port, idp_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}/mcp"

    def kid(jwt_text: str) -> str:
        header = jwt_text.split(".")[0]
        return str(json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))["kid"])

    old_provider = identity_provider(tmp_path / "old.json", idp_port)
    issuer = old_provider.__enter__()
    try:
        env = {"BA_MCP_HTTP__AUTH__ISSUER": issuer, "BA_MCP_HTTP__AUTH__AUDIENCE": url}
        with http_serve(make_workspace(tmp_path), port=port, **env):
            old = token(issuer, "alice", url)
            assert post(url, old).status_code == 200  # the old key set fetched and kept
            old_provider.__exit__(None, None, None)
            with identity_provider(tmp_path / "new.json", idp_port) as same:
                assert same == issuer
                new = token(same, "alice", url)
                assert kid(new) != kid(old)
                time.sleep(11)
                assert post(url, new).status_code == 200
    finally:
        old_provider.__exit__(None, None, None)


def test_a_non_loopback_host_without_auth_refuses_to_start(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ba_mcp", "serve", "--transport", "http", "--host", "0.0.0.0", "--port", "9"],
        env=server_env(tmp_path),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "http.auth" in done.stderr, done.stderr


async def test_a_sessions_requests_a_minute_are_bounded_and_another_session_is_not_slowed(tmp_path: Path) -> None:
    """``http.requests_per_minute``: one session (one user, with auth) past it is refused, saying which setting
    and when to try again; another session is served meanwhile."""
    from mcp.shared.exceptions import MCPError

    with http_serve(make_workspace(tmp_path), BA_MCP_HTTP__REQUESTS_PER_MINUTE="6") as url:
        async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as busy:
            await busy.initialize()
            refused = None
            for _ in range(10):
                try:
                    await busy.list_tools()
                except MCPError as exc:
                    refused = exc
                    break
            assert refused is not None and "http.requests_per_minute" in str(refused), refused
            async with streamable_http_client(url) as (read2, write2, *_), ClientSession(read2, write2) as other:
                await other.initialize()
                assert (await other.list_tools()).tools


def test_behind_a_reverse_proxy_terminating_tls(tmp_path: Path) -> None:
    """docs/team-server.md's deployment, run: Caddy terminates TLS (its own local CA here; a public certificate in
    production) and forwards to the server on 127.0.0.1; the public https URL is the audience, the protected-resource
    metadata names it, and a client that trusts the certificate works end to end through the proxy."""
    import shutil
    import socket
    import ssl

    caddy = shutil.which("caddy")
    if caddy is None:
        pytest.skip("Caddy is not installed (.ci/run installs Debian's package)")
    proxy_port, port = free_port(), free_port()
    public = f"https://127.0.0.1:{proxy_port}/mcp"
    caddyfile = tmp_path / "Caddyfile"
    caddyfile.write_text(
        "{\n  admin off\n  skip_install_trust\n"
        f"  storage file_system {tmp_path / 'caddy'}\n}}\n"
        f"https://127.0.0.1:{proxy_port} {{\n  tls internal\n  reverse_proxy 127.0.0.1:{port}\n}}\n"
    )
    proxy = subprocess.Popen(
        [caddy, "run", "--config", str(caddyfile), "--adapter", "caddyfile"],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with identity_provider(tmp_path / "key.json") as issuer:
            env = {"BA_MCP_HTTP__AUTH__ISSUER": issuer, "BA_MCP_HTTP__AUTH__AUDIENCE": public}
            with http_serve(make_workspace(tmp_path), port=port, **env):
                root = tmp_path / "caddy" / "pki" / "authorities" / "local" / "root.crt"
                deadline = time.monotonic() + 60
                while not root.exists() or not _listening(proxy_port, socket):
                    assert proxy.poll() is None and time.monotonic() < deadline, "Caddy did not start"
                    time.sleep(0.1)
                trusted = ssl.create_default_context(cafile=str(root))
                challenge = httpx2.post(public, json={}, verify=trusted, timeout=30)
                assert challenge.status_code == 401
                assert f'resource_metadata="https://127.0.0.1:{proxy_port}/' in challenge.headers["www-authenticate"]
                bearer = token(issuer, "alice", public)

                async def use() -> str:
                    client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, verify=trusted)
                    async with (
                        client,
                        streamable_http_client(public, http_client=client) as (read, write, *_),
                        ClientSession(read, write) as session,
                    ):
                        await session.initialize()
                        return text_of(await session.call_tool("query_database", {"query": "SELECT 7 * 6 AS a"}))

                import anyio

                assert "42" in anyio.run(use)
    finally:
        proxy.terminate()
        proxy.wait(10)


def _listening(port: int, socket: Any) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


async def test_a_user_logs_in_through_the_authorization_code_flow_with_pkce(team: Team) -> None:
    """The official Python SDK client's OAuth support, as an MCP client does it: the 401 leads it to the resource's
    metadata and the issuer's, it registers itself (RFC 7591), sends the user to log in (the provider's own login and
    consent pages, filled in here as a browser would), exchanges the code with its PKCE verifier for a token of this
    resource (RFC 8707), and calls the server. It registers for refresh tokens too, as Claude and the SDK do: the
    provider must allow them (docs/team-server.md)."""
    import anyio.to_thread
    from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
    from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

    redirect_uri = "http://127.0.0.1:33418/callback"  # never listened on: the browser's last redirect is read
    seen: dict[str, str] = {}

    class Memory:
        tokens: OAuthToken | None = None
        client: OAuthClientInformationFull | None = None

        async def get_tokens(self) -> OAuthToken | None:
            return self.tokens

        async def set_tokens(self, tokens: OAuthToken) -> None:
            self.tokens = tokens

        async def get_client_info(self) -> OAuthClientInformationFull | None:
            return self.client

        async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
            self.client = client_info

    def browser(authorization_url: str) -> None:
        """The user's browser: the provider's login page (user "dana"), its consent page, the redirect back."""
        seen["authorization_url"] = authorization_url
        seen.update(log_in(authorization_url, redirect_uri, "dana"))

    async def redirect(url: str) -> None:
        await anyio.to_thread.run_sync(browser, url)

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=seen["code"], state=seen.get("state"), iss=seen.get("iss"))

    metadata = OAuthClientMetadata(
        client_name="ba-mcp test client",
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],  # as Claude and the SDK register (its default)
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    storage = Memory()
    oauth = OAuthClientProvider(team.url, metadata, storage, redirect, callback)
    async with (
        httpx2.AsyncClient(auth=oauth, timeout=60) as client,
        streamable_http_client(team.url, http_client=client) as (read, write, *_),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        result = await session.call_tool("query_database", {"query": "SELECT 6 * 7 AS answer"})
        assert not result.is_error and "42" in text_of(result)
    asked = seen["authorization_url"]
    assert "code_challenge_method=S256" in asked and "resource=" in asked, asked
    assert storage.tokens is not None and storage.client is not None and storage.client.client_id


def test_host_and_origin_follow_the_public_url(team: Team) -> None:
    """DNS rebinding: a request naming another host, or coming from another origin's page, is refused even with a
    valid token; the public URL's own name and origin are served."""
    good = team.token("alice")
    assert post(team.url, good, Origin="http://127.0.0.1:" + team.url.split(":")[2].split("/")[0]).status_code == 200
    assert post(team.url, good, Host="evil.example").status_code in (400, 403, 421)
    assert post(team.url, good, Origin="https://evil.example").status_code in (400, 403)


def _id_token(issuer: str, client_id: str, user: str) -> str:
    """An OpenID Connect ID token of ``user``, issued to the confidential client ``client_id`` (the authorization-code
    flow with PKCE, the provider's login page filled in): its ``aud`` is the client id."""
    import hashlib
    import secrets
    import urllib.parse

    redirect_uri = "http://127.0.0.1:33418/callback"
    verifier = secrets.token_urlsafe(48)
    challenge = _b64(hashlib.sha256(verifier.encode()).digest())
    asked = {"client_id": client_id, "response_type": "code", "scope": "openid", "redirect_uri": redirect_uri}
    asked |= {"code_challenge": challenge, "code_challenge_method": "S256", "state": "s", "nonce": "n"}
    answer = log_in(f"{issuer}/auth?{urllib.parse.urlencode(asked)}", redirect_uri, user)
    exchange = {"grant_type": "authorization_code", "code": answer["code"], "redirect_uri": redirect_uri}
    exchange |= {"code_verifier": verifier, "client_id": client_id, "client_secret": "id-token-secret"}
    issued = httpx2.post(f"{issuer}/token", data=exchange, timeout=30)
    assert issued.status_code == 200, issued.text
    return str(issued.json()["id_token"])


def test_an_id_token_is_no_access_token_unless_the_operator_lists_jwt(tmp_path: Path) -> None:
    """RFC 9068 §4: an ID token whose client id is the server's URL carries iss, aud (the client id: the audience),
    exp and sub — everything but an access token's typ (at+jwt). Refused under the default ``token_types``; accepted
    only when the operator lists JWT (for an issuer whose access tokens are typed JWT, or not typed at all)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with identity_provider(tmp_path / "key.json", id_token_client=url) as issuer:
        id_token = _id_token(issuer, url, "dana")
        header, payload = (_unb64(part) for part in id_token.split(".")[:2])
        assert header.get("typ", "JWT") == "JWT" and payload["aud"] == url and payload["sub"] == "dana"
        env = {"BA_MCP_HTTP__AUTH__ISSUER": issuer, "BA_MCP_HTTP__AUTH__AUDIENCE": url}
        with http_serve(make_workspace(tmp_path / "default"), port=port, **env):
            assert post(url, token(issuer, "alice", url)).status_code == 200  # an access token (typ at+jwt)
            refused = post(url, id_token)
            assert refused.status_code == 401, (refused.status_code, refused.text[:300])
            assert "invalid_token" in refused.headers.get("www-authenticate", "")
        env["BA_MCP_HTTP__AUTH__TOKEN_TYPES"] = '["at+jwt", "JWT"]'
        with http_serve(make_workspace(tmp_path / "jwt"), port=port, **env):
            assert post(url, id_token).status_code == 200


def test_a_self_registered_clients_own_token_names_nobody_under_allowed_clients_or_required_claims(
    team: Team, tmp_path: Path
) -> None:
    """Anonymous dynamic registration (RFC 7591) and client credentials: anybody who reaches the provider gets a
    client, and its own token for this server, whose sub is the client — a principal with no person behind it.
    ``allowed_clients`` (the token's client_id) and ``required_claims`` (here the provider's groups claim, on its
    users' tokens only) refuse it — a 401, as any refused token —, JWT and introspected tokens alike; the configured
    clients still work."""
    stranger = register(
        team.issuer,
        {
            "client_name": "anybody",
            "grant_types": ["client_credentials"],
            "response_types": [],
            "redirect_uris": [],
            "token_endpoint_auth_method": "client_secret_post",
        },
    )
    anonymous = client_token(team.issuer, stranger["client_id"], stranger["client_secret"], team.url)
    assert _unb64(anonymous.split(".")[1])["sub"] == stranger["client_id"]
    assert post(team.url, anonymous).status_code == 200  # without either setting: a principal

    introspection = {
        "BA_MCP_HTTP__AUTH__INTROSPECTION_CLIENT_ID": "ba-mcp-server",
        "BA_MCP_HTTP__AUTH__INTROSPECTION_CLIENT_SECRET": "ba-mcp-server-secret",
    }
    settings = {
        "allowed_clients": ({"BA_MCP_HTTP__AUTH__ALLOWED_CLIENTS": '["alice", "bob"]'}, {"alice": 200, "opaque": 401}),
        "required_claims": (
            {"BA_MCP_HTTP__AUTH__REQUIRED_CLAIMS": '{"groups": "ba-analysts"}'},
            {"bob": 200, "opaque": 200},
        ),
    }
    for name, (setting, expected) in settings.items():
        port = free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        env = {"BA_MCP_HTTP__AUTH__ISSUER": team.issuer, "BA_MCP_HTTP__AUTH__AUDIENCE": url, **introspection, **setting}
        with http_serve(make_workspace(tmp_path / name), port=port, **env):
            mine = client_token(team.issuer, stranger["client_id"], stranger["client_secret"], url)
            refused = post(url, mine)
            assert refused.status_code == 401, (name, refused.status_code, refused.text[:300])
            assert "invalid_token" in refused.headers.get("www-authenticate", "")
            for user, status in expected.items():  # opaque: its token introspected (client_id opaque, groups)
                issued = token(team.issuer, user, url)
                assert (issued.count(".") == 2) is (user != "opaque")
                assert post(url, issued).status_code == status, (name, user)
