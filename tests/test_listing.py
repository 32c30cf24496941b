"""tools/list within its budget by construction (``ba_mcp.listing``, issue 64 item 5): what every tool would repeat is
said once, and a fixed rule says what gives way when tools are added — the skill catalog (to a pointer: use_skill()
lists every skill), then descriptions to their first sentence (the last-listed tool first), then optional
parameters' descriptions; never a tool, a parameter or a required field.

The host-lens tests that read tools/list are run again here (imported below: pytest collects them in this module,
with this module's ``host`` fixture) against a server holding a two-parameter tool more than the built-in ones — the
tool that broke the listing and two of those tests in issue 64. (The observations themselves do not depend on the
tools listed: test_host_lens reads them at every level.)"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from pydantic import Field

from ba_mcp import listing, registry
from ba_mcp.app import App
from ba_mcp.pipeline.tokens import TokenCounter
from ba_mcp.results import Document
from ba_mcp.server import build_server
from ba_mcp.settings import ToolSettings, config_dir, load_settings
from ba_mcp.tool import Tool, ToolContext, ToolParams
from tests import test_host_lens as lens
from tests.conftest import NO_SPARES, text_of

# the host-lens tests, collected here with this module's host fixture (a two-parameter tool more)
lens_workspace = lens.lens_workspace
test_errors_carry_everything_in_their_text = lens.test_errors_carry_everything_in_their_text
test_tools_declare_an_output_schema_only_when_they_send_structured_content = (
    lens.test_tools_declare_an_output_schema_only_when_they_send_structured_content
)

pytestmark = pytest.mark.anyio

BUDGET = 2000
COUNTER = TokenCounter(config_dir() / "token_encoders.yaml", "gpt")
ENV = {"BA_MCP_WEB__SEARCH__DUCKDUCKGO__ENDPOINT": "http://127.0.0.1:9/", **NO_SPARES}


def described(name: str) -> type[Tool]:
    """A two-parameter tool like issue 64's describe_table (146 tokens listed), under ``name``."""

    class DescribeTableParams(ToolParams):
        table: str = Field(description="a table of the database, an upload (upload_<name>) or an artifact id")
        database: str = Field("demo", description="the configured database the table is in")

    class DescribeTable(Tool):
        title = "Describe a table"
        description = (
            "Columns, types, row count, null share and a few sample rows of one table: what to know before writing "
            "SQL against it. Works on a configured database's tables, on uploads and on artifacts alike."
        )
        Params = DescribeTableParams

        def execute(self, params: Any, ctx: ToolContext) -> Document:
            return Document(params.table, f"{params.table} in {params.database}")

    DescribeTable.name = name
    return DescribeTable


def app_with(workspace: Path, extra: list[Tool], **env: str) -> App:
    models: dict[str, type[ToolSettings]] = {t.name: ToolSettings for t in extra}
    settings = load_settings(workspace=workspace, environ={**ENV, **env}, tool_models=models)
    return App(settings, [*registry.tool_names(), *extra])


def wire(tools: list[Any]) -> list[dict[str, Any]]:
    return [t.model_dump(by_alias=True, exclude_none=True) for t in tools]


def tokens(tools: list[dict[str, Any]]) -> int:
    return COUNTER.raw_tokens(json.dumps(tools, ensure_ascii=False))


@pytest.fixture(scope="module", params=[False, True], ids=["text-only", "structured"])
async def host(request: pytest.FixtureRequest, lens_workspace: Path) -> AsyncIterator[tuple[Client, bool]]:
    """The host-lens server, with a two-parameter tool added (a plug-in's or an embedder's: the App's tools)."""
    structured = bool(request.param)
    env = {"BA_MCP_OBSERVATION__STRUCTURED_CONTENT": "true"} if structured else {}
    async with Client(build_server(app_with(lens_workspace, [described("describe_table")()], **env))) as client:
        yield client, structured


async def test_a_two_parameter_tool_is_listed_within_the_budget_and_costs_no_skill(host: tuple[Client, bool]) -> None:
    """Issue 64: describe_table took tools/list to 2,146 of 2,000. Now it is listed whole beside every built-in tool
    within the budget, and every skill keeps its name in use_skill's listing (with structuredContent on, every skill
    stays one call away: use_skill())."""
    client, structured = host
    tools = wire((await client.list_tools()).tools)
    names = [t["name"] for t in tools]
    assert names == [*registry.tool_names(), "describe_table"] and tokens(tools) <= BUDGET, tokens(tools)
    added = tools[-1]
    assert added["inputSchema"]["required"] == ["table"] and set(added["inputSchema"]["properties"]) == {
        "output_level",
        "table",
        "database",
    }
    catalog = next(t for t in tools if t["name"] == "use_skill")["description"]
    if structured:  # an output schema on every tool (the operator's choice): the catalog may give way to its pointer
        assert "profitability" in catalog or "use_skill() lists the" in catalog, catalog
    else:
        for skill in ("profitability", "kpi-anomaly-detection", "customer-lifetime-value", "analysis-workflow"):
            assert skill in catalog, catalog
    python = next(t for t in tools if t["name"] == "run_python")["description"]
    for needed in ("persist", "load_file", "load_artifact", "save_artifact", "head and tail", "guardrail"):
        assert structured or needed in python, needed  # by default the built-in tools' descriptions are whole
    done = await client.call_tool("describe_table", {"table": "orders"})
    assert not done.is_error and "orders in demo" in text_of(done), text_of(done)


async def test_three_tools_more_fit_by_the_rule_in_its_order(lens_workspace: Path) -> None:
    """Three such tools (about 440 tokens): the catalog gives way to its pointer, then descriptions are cut to their
    first sentence from the last-listed tool back (and to fewer words, the last-listed first); no tool, parameter or
    required field is lost, and the tools listed first keep their descriptions whole."""
    extra = [described(f"describe_{i}")() for i in range(3)]
    app = app_with(lens_workspace, extra)
    plain = listing.definitions(list(app.tools.values()))
    async with Client(build_server(app)) as client:
        tools = wire((await client.list_tools()).tools)
    assert tokens(plain) > BUDGET + 300 and tokens(tools) <= BUDGET, (tokens(plain), tokens(tools))
    assert [t["name"] for t in tools] == [t["name"] for t in plain]
    for before, after in zip(plain, tools, strict=True):
        assert after["inputSchema"].get("required") == before["inputSchema"].get("required"), after["name"]
        assert set(after["inputSchema"]["properties"]) == set(before["inputSchema"]["properties"]), after["name"]
        assert after["title"] == before["title"]
    catalog = next(t for t in tools if t["name"] == "use_skill")["description"]
    assert "use_skill() lists the" in catalog, catalog
    cut = [t["name"] for t, p in zip(tools, plain, strict=True) if t["description"] != p["description"]]
    assert cut[-1] == "describe_2" and "file_reader" not in cut, cut  # the last-listed first; the first kept
    last = next(t for t in tools if t["name"] == "describe_2")["description"]  # its first sentence, or fewer words
    assert last.startswith("Columns, types, row count") and last.endswith(("against it.", " …")), last
    assert len(last.split()) >= listing.MIN_WORDS


async def test_use_skill_with_no_name_lists_every_skill_with_its_description(lens_workspace: Path) -> None:
    """What the catalog leaves out of the listing is one call away: use_skill() returns every skill the model may
    use, each with its whole description."""
    app = app_with(lens_workspace, [])
    async with Client(build_server(app)) as client:
        result = await client.call_tool("use_skill", {})
    text = text_of(result)
    assert not result.is_error, text
    skills = app.skills.model_skills()
    assert len(skills) >= 10
    for skill in skills:
        assert f"- {skill.name}: {skill.description}" in text, skill.name


def test_the_rule_gives_way_in_its_order_and_never_drops_a_required_field() -> None:
    """``listing.fit`` alone, on a listing and a budget of our own: (b) first sentences from the last tool back,
    then (c) optional parameters' descriptions; required parameters keep theirs, and a listing that cannot fit is
    served whole in its tools and parameters."""

    def tool(name: str) -> dict[str, Any]:
        return {
            "name": name,
            "title": name.title(),
            "description": f"{name} does one thing. It also explains at length why it does it and how to call it.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "needed": {"type": "string", "description": "what it works on, said in words"},
                    "extra": {"type": "integer", "description": "how much of it, said in more words"},
                },
                "required": ["needed"],
            },
        }

    whole = [tool("alpha"), tool("beta"), tool("gamma")]
    full = listing.cost(whole, COUNTER.raw_tokens)
    one_cut = listing.fit(whole, full - 5, COUNTER.raw_tokens)
    assert [t["description"] for t in one_cut] == [
        whole[0]["description"],
        whole[1]["description"],
        "gamma does one thing.",
    ]
    squeezed = listing.fit(whole, 1, COUNTER.raw_tokens)  # nothing fits: everything that may give way did
    assert whole == [tool("alpha"), tool("beta"), tool("gamma")]  # the listing given is left as it was
    for t in squeezed:
        assert t["description"] == f"{t['name']} does one thing."
        assert t["inputSchema"]["required"] == ["needed"]
        assert t["inputSchema"]["properties"]["needed"]["description"] == "what it works on, said in words"
        assert "description" not in t["inputSchema"]["properties"]["extra"]


def test_what_every_tool_would_repeat_is_not_in_its_schema(tmp_path: Path) -> None:
    """``additionalProperties: false`` (the server refuses unknown arguments) is in no listed schema, and
    output_level only on the tools whose results it sizes — every tool still accepts it."""
    from ba_mcp.tools.use_skill import UseSkill

    app = app_with(tmp_path, [])
    shown = {d["name"]: d for d in listing.definitions(list(app.tools.values()))}
    assert all("additionalProperties" not in d["inputSchema"] for d in shown.values())
    assert "output_level" not in shown["use_skill"]["inputSchema"]["properties"]
    assert "output_level" in shown["query_database"]["inputSchema"]["properties"]
    assert UseSkill.Params(name="x", output_level="brief").output_level == "brief"


def test_one_long_sentence_pays_for_itself_before_any_other_tool_gives_a_word() -> None:
    """A last-listed tool whose description is one long sentence (a plug-in's, ~1,400 tokens) is cut to the words
    that fit, ending in "…", and the tools listed before it keep theirs whole."""
    first = {
        "name": "first",
        "title": "First",
        "description": "First does one thing. It also explains at length why it does it and how to call it.",
        "inputSchema": {"type": "object", "properties": {}},
    }
    wordy = {**first, "name": "wordy", "description": "Forecasts " + "every very " * 700 + "series"}
    budget = listing.cost([first], COUNTER.raw_tokens) + 60
    fitted = listing.fit([first, wordy], budget, COUNTER.raw_tokens)
    assert listing.cost(fitted, COUNTER.raw_tokens) <= budget
    assert fitted[0] == first and fitted[1]["description"].endswith(" …")
    assert len(fitted[1]["description"].split()) > listing.MIN_WORDS
