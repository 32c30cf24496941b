"""S-16 (issue 34 item 9): the server's own memory is bounded — what history keeps per call and per session, HTTP
sessions a client abandoned, and a large value from run_python (stored from the worker's memory file, never held
whole). Measured on the spawned server's RSS (psutil), over the transports clients use."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx2 as httpx
import psutil
import pytest
from mcp import ClientSession, stdio_client

from tests.conftest import http_serve, make_workspace, server_process, stdio_params, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # a process's memory and CPU, measured

MB = 1024 * 1024


async def test_history_keeps_no_large_arguments_refused_calls_included(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    params = stdio_params(ws, BA_MCP_SESSIONS__HISTORY_CALL_BYTES="65536")
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        await s.call_tool("query_database", {"query": "SELECT 1 AS warm"})
        server = server_process(ws)
        padding = "x" * (8 * MB)
        for i in range(24):
            if i == 2:  # the transport's buffers have grown to the largest line: what follows is what is kept
                before = server.memory_info().rss
            refused = await s.call_tool("query_database", {"query": padding})  # over the query's limit: refused
            assert refused.is_error
        grown = server.memory_info().rss - before
        ran = await s.call_tool("query_database", {"query": f"SELECT 1 AS n /* {padding[:90_000]} */"})
        assert not ran.is_error, text_of(ran)
        history = (await s.read_resource("ba://history")).contents[0].text  # type: ignore[union-attr]
        saved = await s.call_tool("save_analysis", {"name": "big", "steps": "last:1"})
    # kept, they would be 176 MB; garbage the cycle collector frees in its own time comes and goes (~40 MB)
    assert grown < 90 * MB, f"22 more refused calls of 8 MB grew the server by {grown / MB:.0f} MB"
    assert "query_database" in history
    assert saved.is_error and "too large to keep" in text_of(saved), text_of(saved)


async def test_abandoned_http_sessions_end_with_their_workers(tmp_path: Path) -> None:
    """Clients that never say goodbye (no DELETE): after sessions.http_idle_timeout_s each session's engine
    worker ends and the server forgets it."""
    ws = make_workspace(tmp_path)
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    with http_serve(ws, BA_MCP_SESSIONS__HTTP_IDLE_TIMEOUT_S="2") as url:
        server = next(p for p in psutil.process_iter(["cmdline"]) if _serves(p, ws))  # not another test's server
        seen: dict[int, psutil.Process] = {}  # gathered after each call: on a busy machine the first may end early
        with httpx.Client(timeout=60) as http:
            for i in range(5):
                answer = http.post(url, json=init, headers=headers)
                sid = answer.headers["mcp-session-id"]
                mine = {**headers, "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
                http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=mine)
                call = {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "query_database", "arguments": {"query": f"SELECT {i} AS answer"}},
                }
                assert "answer" in http.post(url, json=call, headers=mine).text
                seen.update({c.pid: c for c in server.children(recursive=True)})
        workers = list(seen.values())
        assert len(workers) >= 5, workers  # one engine worker per session
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and [c for c in workers if c.is_running()]:
            time.sleep(0.2)
        assert not [c for c in workers if c.is_running()], "the abandoned sessions' workers still run"


async def test_a_large_value_from_run_python_is_stored_without_being_held_whole(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    code = (
        "import numpy as np, pandas as pd\n"
        "pd.DataFrame({'a': np.arange(10_000_000, dtype='float64'), 'b': np.arange(10_000_000)})"  # 160 MB
    )
    params = stdio_params(ws, BA_MCP_SANDBOX__ALLOWED_IMPORTS="*")  # the default limits: a 160 MB value passes
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        await s.call_tool("run_python", {"code": "1"})
        server = server_process(ws)
        before = server.memory_info().rss
        peak = [before]
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], server.memory_info().rss)
                time.sleep(0.01)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            result = await s.call_tool("run_python", {"code": code, "timeout": 120})
        finally:
            done.set()
            watcher.join()
        after = server.memory_info().rss
        text = text_of(result)
        meta: dict[str, Any] = json.loads(json.dumps(result.meta or {}))
    assert not result.is_error and "10,000,000 rows" in text and "artifact_" in text, text
    assert meta
    # the 160 MB value's pages are the worker's memory file, mapped while its artifact is written; nothing like
    # the gigabyte the whole-copy path took, and little kept after
    assert peak[0] - before < 450 * MB, f"peak +{(peak[0] - before) / MB:.0f} MB"
    assert after - before < 100 * MB, f"kept +{(after - before) / MB:.0f} MB"


async def test_a_refused_compressed_value_leaves_nothing_running(tmp_path: Path) -> None:
    """Issue 34 item 11: a compressed Arrow IPC stream handed over by run_python is refused before it is decoded,
    and no process of ours burns CPU after the answer (with no spare interpreter to start: sandbox.spare_workers 0;
    a spare, when configured, is started for the next session by design)."""
    from tests.test_workers_duckdb import ARROW_BOMB_CELL, _cpu_of_ours

    ws = make_workspace(tmp_path)
    async with (
        stdio_client(stdio_params(ws, BA_MCP_SANDBOX__ALLOWED_IMPORTS="*")) as (read, write),
        ClientSession(read, write) as s,
    ):
        await s.initialize()
        await s.call_tool("run_python", {"code": "1"})
        result = await s.call_tool("run_python", {"code": ARROW_BOMB_CELL})
        server = server_process(ws)
        before = _cpu_of_ours(server)
        time.sleep(4)
        burnt = _cpu_of_ours(server) - before
    assert "refused" in text_of(result) and "compressed" in text_of(result), text_of(result)
    assert burnt < 0.3, f"{burnt:.2f} CPU-s after the answer"


def _serves(process: psutil.Process, ws: Path) -> bool:
    """Whether ``process`` is a ba-mcp HTTP server of workspace ``ws``."""
    try:
        return "--transport" in (process.info["cmdline"] or []) and process.environ().get("BA_MCP_WORKSPACE") == str(ws)
    except psutil.Error:
        return False
