"""Shared by the two run_python modules (each spawns its own server over stdio): the server's settings, a
secret in its environment that user code must never see, and small call helpers."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters

from tests.conftest import stdio_params, text_of

SECRET = "s3cr3t-" + uuid.uuid4().hex


def sandbox_params(ws: Path, **env: str) -> StdioServerParameters:
    """A stdio server with the sandbox's settings below and the secret in its environment."""
    return stdio_params(ws, SERVER_SECRET_TOKEN=SECRET, **sandbox_settings(**env))


def sandbox_settings(**env: str) -> dict[str, str]:
    """The sandbox's settings of these tests (as the environment gives them; ``env`` added). No spare worker by
    default (each started worker imports numpy, pandas and matplotlib: ~1.5 CPU-s, and a spare is started again after
    each one taken); the test of the spare asks for it."""
    return {
        "BA_MCP_SANDBOX__SPARE_WORKERS": env.pop("BA_MCP_SANDBOX__SPARE_WORKERS", "0"),
        "BA_MCP_SANDBOX__INTERRUPT_GRACE_S": "1",
        "BA_MCP_SANDBOX__MEMORY_MB": "2048",
        "BA_MCP_SANDBOX__MAX_PROCESSES": "48",
        "BA_MCP_SANDBOX__MAX_FILE_MB": "20",
        "BA_MCP_SANDBOX__DISK_MB": "64",
        "BA_MCP_SANDBOX__MAX_TRANSFER_MB": "16",
        **env,
    }


async def run(session: ClientSession, code: str, **extra: Any) -> Any:
    return await session.call_tool("run_python", {"code": code, **extra})


def ok(result: Any) -> str:
    assert not result.is_error, text_of(result)
    return text_of(result)


def failed(result: Any, etype: str, code: str | None = None) -> str:
    text = text_of(result)
    assert result.is_error, text
    assert f"Error Type: {etype}" in text, text
    if code:
        assert f"Error Code: {code}" in text, text
    return text
