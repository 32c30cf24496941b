"""The MCP adapter on the SDK's stable surface (``ba_mcp.server``, issue 64 item 3): tools/list and tools/call are the
low-level handlers (``ToolHandlers``), middleware only observes, and who is calling is derived once per request and
handed to the runner as data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from ba_mcp import callers, server
from ba_mcp.app import App
from ba_mcp.settings import load_settings
from tests.conftest import text_of

pytestmark = pytest.mark.anyio

ENV = {"BA_MCP_SANDBOX__SPARE_WORKERS": "0", "BA_MCP_ENGINE__SPARE_WORKERS": "0"}


def test_the_only_middleware_of_ours_is_the_one_that_observes(tmp_path: Path) -> None:
    """No middleware of ba-mcp's rewrites tools/list or resources/list or answers tools/call (the SDK's own — its
    OpenTelemetry spans, its request-state boundary — stay as the SDK installs them)."""
    built = server.build_server(App(load_settings(workspace=tmp_path, environ=ENV), tools=["query_database"]))
    ours = [type(m).__name__ for m in built.middleware if type(m).__module__.startswith("ba_mcp")]
    assert ours == ["_SessionMiddleware"], ours


async def test_who_is_calling_is_derived_once_a_request_and_handed_to_the_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One derivation per message the server receives (``request_principal``, in the one middleware), and the tools'
    handler hands that very principal to ``Runner.call``: nothing derives it again."""
    derived: list[callers.Principal] = []
    seen: list[tuple[str, callers.Principal]] = []  # each message's method and the principal it is served for
    handed: list[Any] = []
    derive = server.request_principal

    def counted(request: Any) -> callers.Principal:
        derived.append(derive(request))
        return derived[-1]

    async def recorder(ctx: Any, call_next: Any) -> Any:  # inside ours: what the handlers see
        seen.append((ctx.method, callers.principal()))
        return await call_next(ctx)

    monkeypatch.setattr(server, "request_principal", counted)
    app = App(load_settings(workspace=tmp_path, environ=ENV), tools=["query_database"])
    call = app.runner.call

    async def spied(tool: Any, arguments: dict[str, Any], who: callers.Principal, **kw: Any) -> Any:
        handed.append(who)
        return await call(tool, arguments, who, **kw)

    monkeypatch.setattr(app.runner, "call", spied)
    built = server.build_server(app)
    built.middleware.append(recorder)
    async with Client(built, mode="legacy") as client:
        result = await client.call_tool("query_database", {"query": "SELECT 42 AS answer"})
        assert not result.is_error and "42" in text_of(result), text_of(result)
        unknown = await client.call_tool("no_such_tool", {})
    assert unknown.is_error and "UNKNOWN_TOOL" in text_of(unknown) and "query_database" in text_of(unknown)
    assert len(derived) == len(seen) and all(who is d for (_, who), d in zip(seen, derived, strict=True))
    calls = [who for method, who in seen if method == "tools/call"]
    assert len(calls) == 2 and handed == [calls[0]] and handed[0] is calls[0]  # an unknown name never reaches it
