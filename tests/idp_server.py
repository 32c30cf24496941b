"""A real identity provider for the team-server tests: panva's certified ``oidc-provider`` (npm, pinned by
tests/idp/package-lock.json, installed by .ci/run) on 127.0.0.1, started by the tests (tests/idp/server.mjs). Its
clients stand for users (alice, bob; carol lacks the ba-mcp scope; brief's tokens expire in 2 s; opaque's tokens are
opaque), each token asked for with client credentials and a resource indicator (RFC 8707); their tokens, and a
logged-in user's, carry ``groups: ["ba-analysts"]``, a self-registered client's own tokens none."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, free_port

HOME = ROOT / "tests" / "idp"


@contextlib.contextmanager
def identity_provider(key_file: Path, port: int | None = None, id_token_client: str | None = None) -> Iterator[str]:
    """The provider on ``port`` (a free one by default), signing with the key in ``key_file`` (made when missing):
    yields its issuer URL. ``id_token_client``: a confidential client of that id (secret ``id-token-secret``) that
    logs users in (``log_in``) for ID tokens."""
    if not (HOME / "node_modules" / "oidc-provider").exists():
        pytest.skip("tests/idp is not installed (.ci/run runs: npm ci --prefix tests/idp)")
    port = port or free_port()
    proc = subprocess.Popen(
        ["node", "server.mjs", str(port), str(key_file)],
        cwd=HOME,
        env={**os.environ, "IDP_ID_TOKEN_CLIENT": id_token_client or ""},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        for line in proc.stdout:
            if line.startswith("ready"):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the identity provider did not start")
        else:
            raise RuntimeError("the identity provider ended before it was ready")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def token(issuer: str, user: str, resource: str, scope: str = "ba-mcp") -> str:
    """An access token for ``user`` (a client of the provider: client credentials) issued for ``resource``."""
    form = {"grant_type": "client_credentials", "client_id": user, "client_secret": f"{user}-secret", "scope": scope}
    body = urllib.parse.urlencode({**form, "resource": resource}).encode()
    with urllib.request.urlopen(urllib.request.Request(f"{issuer}/token", data=body), timeout=30) as answer:
        issued: dict[str, str] = json.loads(answer.read())
    return issued["access_token"]


def register(issuer: str, metadata: dict[str, object]) -> dict[str, str]:
    """Anonymous dynamic client registration (RFC 7591), as anybody on the internet may: the client's id and secret."""
    body = json.dumps(metadata).encode()
    request = urllib.request.Request(f"{issuer}/reg", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        registered: dict[str, str] = json.loads(answer.read())
    return registered


def client_token(issuer: str, client_id: str, client_secret: str, resource: str, scope: str = "ba-mcp") -> str:
    """A client-credentials access token of any client (a registered one's: no person behind it)."""
    form = {"grant_type": "client_credentials", "client_id": client_id, "client_secret": client_secret}
    body = urllib.parse.urlencode({**form, "scope": scope, "resource": resource}).encode()
    with urllib.request.urlopen(urllib.request.Request(f"{issuer}/token", data=body), timeout=30) as answer:
        issued: dict[str, str] = json.loads(answer.read())
    return issued["access_token"]


def log_in(authorization_url: str, redirect_uri: str, login: str) -> dict[str, str]:
    """A user's browser: the provider's login page (``login``, any password), its consent page, then the redirect to
    ``redirect_uri`` — whose query parameters (``code``, ``state``, ``iss``) it returns."""
    import re

    import httpx2

    with httpx2.Client(follow_redirects=False, timeout=30) as web:
        response = web.get(authorization_url)
        for _ in range(20):
            if response.is_redirect:
                location = urllib.parse.urljoin(str(response.url), response.headers["location"])
                if location.startswith(redirect_uri):
                    query = urllib.parse.parse_qs(urllib.parse.urlsplit(location).query)
                    return {k: v[0] for k, v in query.items()}
                response = web.get(location)
                continue
            form = re.search(r'<form[^>]*action="([^"]+)"', response.text)
            assert form, response.text[:500]
            fields = dict(re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', response.text))
            if 'name="login"' in response.text:
                fields |= {"login": login, "password": "any"}
            response = web.post(urllib.parse.urljoin(str(response.url), form.group(1)), data=fields)
    raise AssertionError("the provider never redirected back")
