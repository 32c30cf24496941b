"""The private parts of the MCP SDK that ba-mcp relies on (server.SdkInternals). If the SDK renames or
removes them, this fails loudly instead of a feature silently stopping (logging/setLevel, serving stdio and its claim,
ending a Python worker with its HTTP session)."""

from __future__ import annotations

import inspect
from pathlib import Path

from ba_mcp.app import App
from ba_mcp.server import SdkInternals, ToolHandlers, build_server
from ba_mcp.settings import load_settings


def test_the_sdk_still_has_what_the_adapter_uses(tmp_path: Path) -> None:
    server = build_server(App(load_settings(workspace=tmp_path / "ws", environ={}), tools=["file_reader"]))
    lowlevel = SdkInternals.lowlevel(server)
    for name in ("add_request_handler", "run", "create_initialization_options"):
        assert callable(getattr(lowlevel, name, None)), name
    for method in ("tools/list", "tools/call"):  # served by ToolHandlers, not by MCPServer's tool manager
        entry = lowlevel.get_request_handler(method)
        assert entry is not None and isinstance(getattr(entry.handler, "__self__", None), ToolHandlers), method
    server.streamable_http_app()  # creates the session manager
    manager = lowlevel._session_manager
    assert callable(manager._discard_session)  # wrapped by BaServer.streamable_http_app
    from mcp.server import stdio  # SdkInternals.claimed_stdio: the claim of fd 0 and 1 (every stdio test uses it)

    assert list(inspect.signature(stdio._claim_fd).parameters) == ["fd", "stream", "mode", "open_diversion"]
    assert callable(stdio._open_stdin_diversion) and callable(stdio._open_stdout_diversion)


def test_http_session_end_hook_calls_back(tmp_path: Path) -> None:
    import anyio

    server = build_server(App(load_settings(workspace=tmp_path / "ws", environ={}), tools=["file_reader"]))
    ended: list[str] = []

    async def callback(session_id: str) -> None:
        ended.append(session_id)

    server.streamable_http_app()
    assert SdkInternals.on_http_session_end(server, callback)

    class Transport:  # what the SDK's discard touches of a transport
        is_terminated = True

    async def discard() -> None:
        await SdkInternals.lowlevel(server)._session_manager._discard_session("abc", Transport())

    anyio.run(discard)
    assert ended == ["abc"]
