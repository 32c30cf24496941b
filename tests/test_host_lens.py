"""What each host's model reads of a result — the "host lens" — for every tool, at every level, with
structuredContent off (the default) and on.

How hosts render tool results (verified in public reports, see T-L):
* Claude Code (and VS Code): when a result carries ``structuredContent`` the model receives only
  ``JSON.stringify(structuredContent)``; the text blocks are dropped (anthropics/claude-code issues 79944,
  55677, 54450; microsoft/vscode 290063). For error results it drops ``structuredContent`` and shows the
  text (anthropics/claude-code 86032).
* Claude Desktop / claude.ai: the model receives the text blocks only.
So the observation must be whole in the text, and whole again wherever structuredContent is sent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.conftest import NO_SPARES, in_process, text_of

pytestmark = pytest.mark.anyio

LEVELS = ("brief", "standard", "full")


def claude_code_lens(result: Any) -> str:
    if result.structured_content is not None and not result.is_error:
        return json.dumps(result.structured_content, ensure_ascii=False)
    return text_of(result)


def claude_desktop_lens(result: Any) -> str:
    return text_of(result)


@pytest.fixture(scope="module")
def lens_workspace(standard_workspace: Path) -> Path:
    """The run's standard workspace: it holds the markers (uploads/tiny.csv, uploads/note.txt)."""
    return standard_workspace


@pytest.fixture(scope="module", params=[False, True], ids=["text-only", "structured"])
async def host(
    request: pytest.FixtureRequest, lens_workspace: Path, default_server: Client
) -> AsyncIterator[tuple[Client, bool]]:
    """The text-only host reads through the run's default_server (structuredContent off is the default); the
    structured one through a server of its own."""
    if not request.param:
        yield default_server, False
        return
    async with in_process(lens_workspace, BA_MCP_OBSERVATION__STRUCTURED_CONTENT="true") as client:
        yield client, True


CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("file_reader", {"path": "uploads/tiny.csv"}, ["ZEPHYR-42", "QUOKKA-7"]),
    ("file_reader", {"path": "uploads/note.txt"}, ["PELICAN-99"]),
    ("query_database", {"query": "SELECT 'marker-q' AS b, 41 + 1 AS answer"}, ["marker-q", "42"]),
    ("query_database", {"query": "SELECT status, count(*) AS n FROM orders GROUP BY 1 ORDER BY 1"}, ["cancelled"]),
    ("run_python", {"code": "print('hi-marker'); 6 * 7"}, ["hi-marker", "42"]),
]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("tool", "args", "facts"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
async def test_every_host_reads_the_same_observation(
    host: tuple[Client, bool], tool: str, args: dict[str, Any], facts: list[str], level: str
) -> None:
    client, structured = host
    result = await client.call_tool(tool, {**args, "output_level": level})
    assert not result.is_error, text_of(result)
    desktop, code = claude_desktop_lens(result), claude_code_lens(result)
    if structured:
        sent = json.loads(code)
        assert sent["text"] == desktop  # the whole observation reaches Claude Code's model too
        assert sent.get("kind") and sent.get("level") == level  # and the metadata beside it
    else:
        assert result.structured_content is None and code == desktop
    if level != "brief":  # brief is one line of shape and ids by design; the values come from standard up
        for fact in facts:
            assert fact in desktop and fact in code, (fact, desktop)


async def test_errors_carry_everything_in_their_text(host: tuple[Client, bool]) -> None:
    client, _ = host
    result = await client.call_tool("file_reader", {"path": "../outside.txt"})
    assert result.is_error
    for lens in (claude_code_lens(result), claude_desktop_lens(result)):
        assert "Error Type: permission_denied" in lens and "Hint:" in lens and "inside the workspace" in lens


async def test_tools_declare_an_output_schema_only_when_they_send_structured_content(
    host: tuple[Client, bool],
) -> None:
    client, structured = host
    for tool in (await client.list_tools()).tools:
        if structured:
            assert tool.output_schema and tool.output_schema["required"] == ["text"], tool.name
        else:
            assert tool.output_schema is None, tool.name


async def test_tools_list_is_lean_and_says_the_levels_once(default_server: Client) -> None:
    """Issue 10: tools/list lean; since issue 26 every tool listed — nine, the skill catalog included — within
    2,000 cl100k tokens (bench/bench_tokens.py measures the same); the output levels explained in the server's
    instructions only, and run_python's description naming what a model needs."""
    from ba_mcp import registry
    from ba_mcp.pipeline.tokens import TokenCounter
    from ba_mcp.settings import config_dir

    tools = (await default_server.list_tools()).tools  # the run's shared server: the default tools, as a host lists
    instructions = default_server.instructions or ""
    counter = TokenCounter(config_dir() / "token_encoders.yaml", "gpt")
    listing = json.dumps([t.model_dump(by_alias=True, exclude_none=True) for t in tools], ensure_ascii=False)
    assert (
        len(tools) == len(registry.tool_names()) and counter.raw_tokens(listing) <= 2000
    )  # the skill catalog included
    assert "brief" in instructions and "standard" in instructions and "full" in instructions
    assert "standard =" not in listing and "Levels:" not in listing
    python = next(t for t in tools if t.name == "run_python").description or ""
    for needed in ("persist", "load_file", "load_artifact", "save_artifact", "head and tail", "scipy", "guardrail"):
        assert needed in python, needed


async def test_a_tool_added_is_paid_for_by_the_skill_catalog_not_by_the_budget(lens_workspace: Path) -> None:
    """Issue 52 item 5: tools/list was 1,991 of 2,000 tokens and a newcomer's 35-line tool took it to 2,073. Now the
    listing holds tools_list_budget_tokens by construction: every built-in tool plus such a tool is listed within
    2,000 cl100k tokens, the skills that no longer fit in use_skill's catalog named (use_skill returns their
    description) — none is lost. (The catalog gives up to ~80 tokens; beyond that a tool makes room by the rule in
    docs/design.md, "The tools/list budget".)"""
    from pydantic import BaseModel, Field

    from ba_mcp import registry
    from ba_mcp.app import App
    from ba_mcp.pipeline.tokens import TokenCounter
    from ba_mcp.results import Document
    from ba_mcp.server import build_server
    from ba_mcp.settings import ToolSettings, config_dir, load_settings
    from ba_mcp.tool import Tool

    class ForecastParams(BaseModel):  # about the newcomer's 35-line tool (+82 tokens)
        series: str = Field(description="artifact id or file")

    class Forecast(Tool):
        name, title, Params = "forecast", "Forecast a series", ForecastParams
        description = "Forecast a series, with intervals."

        def execute(self, params: ForecastParams, ctx: object) -> Document:
            return Document("forecast", "")

    settings = load_settings(workspace=lens_workspace, environ=NO_SPARES, tool_models={"forecast": ToolSettings})
    client = Client(build_server(App(settings, [*registry.tool_names(), Forecast()])))
    async with client:
        tools = (await client.list_tools()).tools
    counter = TokenCounter(config_dir() / "token_encoders.yaml", "gpt")
    listing = json.dumps([t.model_dump(by_alias=True, exclude_none=True) for t in tools], ensure_ascii=False)
    assert len(tools) == len(registry.tool_names()) + 1 and counter.raw_tokens(listing) <= 2000, counter.raw_tokens(
        listing
    )
    catalog = next(t for t in tools if t.name == "use_skill").description or ""
    assert "More skills (use_skill returns their description): " in catalog, catalog
    for skill in ("profitability", "kpi-anomaly-detection", "customer-lifetime-value", "analysis-workflow"):
        assert skill in catalog, skill
