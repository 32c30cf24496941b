"""A real identity provider for the team-server tests: panva's certified ``oidc-provider`` (npm, pinned by
tests/idp/package-lock.json, installed by .ci/run) on 127.0.0.1, started by the tests (tests/idp/server.mjs). Its
clients stand for users (alice, bob; carol lacks the ba-mcp scope; brief's tokens expire in 2 s; opaque's tokens are
opaque), each token asked for with client credentials and a resource indicator (RFC 8707)."""

from __future__ import annotations

import contextlib
import json
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
def identity_provider(key_file: Path, port: int | None = None) -> Iterator[str]:
    """The provider on ``port`` (a free one by default), signing with the key in ``key_file`` (made when missing):
    yields its issuer URL."""
    if not (HOME / "node_modules" / "oidc-provider").exists():
        pytest.skip("tests/idp is not installed (.ci/run runs: npm ci --prefix tests/idp)")
    port = port or free_port()
    proc = subprocess.Popen(
        ["node", "server.mjs", str(port), str(key_file)],
        cwd=HOME,
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
