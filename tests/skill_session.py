"""What the skills' method tests share: the real server in this process (its pipeline and sandbox workers through an
MCP client; the stdio transport is tested in files of its own) over a workspace of the test's uploads, a call that
must succeed, a Python expression's value, and a skill's script exactly as the model reads it (``use_skill`` at
``full``: a long session never downgrades it)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from mcp import ClientSession

from tests.conftest import ROOT, in_process, text_of


@contextlib.asynccontextmanager
async def served(ws: Path, uploads: dict[str, str] | None = None, **env: str) -> AsyncIterator[ClientSession]:
    """A server over ``ws`` with ``uploads`` ({file name: text}) in its ``uploads/``, run_python's timeout generous
    for fitting models. Each playbook file keeps one of its own rather than sharing one (conftest's default_server):
    its cells leave names in run_python's notebook that another playbook's script would read as its input (the
    mistake test_skill_inputs guards the scripts against)."""
    (ws / "uploads").mkdir(parents=True, exist_ok=True)
    for name, text in (uploads or {}).items():
        (ws / "uploads" / name).write_text(text)
    async with in_process(ws, None, **{"BA_MCP_TOOLS__RUN_PYTHON__TIMEOUT_S": "120", **env}) as client:
        yield client.session


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
