"""What the skills' method tests share: a real stdio server over a workspace of the test's uploads, a call that must
succeed, a Python expression's value, and a skill's script exactly as the model reads it (``use_skill`` at ``full``:
a long session never downgrades it)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.client.stdio import stdio_client

from tests.conftest import ROOT, stdio_params, text_of


@contextlib.asynccontextmanager
async def served(ws: Path, uploads: dict[str, str] | None = None, **env: str) -> AsyncIterator[ClientSession]:
    """A server over ``ws`` with ``uploads`` ({file name: text}) in its ``uploads/``, run_python's timeout generous
    for fitting models."""
    (ws / "uploads").mkdir(parents=True, exist_ok=True)
    for name, text in (uploads or {}).items():
        (ws / "uploads" / name).write_text(text)
    params = stdio_params(ws, **{"BA_MCP_TOOLS__RUN_PYTHON__TIMEOUT_S": "120", **env})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def ok(session: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    return result


async def value(session: ClientSession, expression: str) -> str:
    """``repr`` of an expression in the session's interpreter (its first line)."""
    text = text_of(await ok(session, "run_python", code=f"print(repr({expression}))", output_level="full"))
    return text.split("## stdout\n", 1)[1].strip().split("\n")[0]


async def script(session: ClientSession, skill: str, path: str) -> str:
    """The script as the model reads it — checked to be the whole file (it fits the model's window)."""
    read = text_of(await ok(session, "use_skill", name=skill, path=path, output_level="full"))
    code = read.split("\n", 2)[2].rstrip("\n")
    assert code.strip() == (ROOT / "skills" / skill / path).read_text().strip()
    return code
