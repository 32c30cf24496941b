"""Provenance (issue 26): every result's ``_meta`` says what produced it — a call id, the tool, its
arguments, the database, dialect and SQL or the code id, what it read and wrote with digests — and
``ba://history`` lists the session's calls, newest first; another session sees none of them."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import http_serve, in_process, make_workspace, meta_of, text_of

pytestmark = pytest.mark.anyio


def provenance(result: Any) -> dict[str, Any]:
    return dict(meta_of(result)["provenance"])


async def test_each_result_says_what_produced_it_and_history_lists_the_calls(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    csv_text = "region,target\nNorth,10\nSouth,20\n"
    (ws / "uploads" / "regions.csv").write_text(csv_text)
    async with in_process(ws, BA_MCP_SANDBOX__ALLOWED_IMPORTS="*") as client:
        query = (
            "SELECT status, count(*) AS n FROM orders WHERE order_date >= $since GROUP BY status "
            "UNION ALL SELECT region, target FROM 'uploads/regions.csv'"
        )
        sql = await client.call_tool(
            "query_database", {"query": query, "params": {"since": "2024-01-01"}, "output_level": "brief"}
        )
        assert not sql.is_error, text_of(sql)
        made = provenance(sql)
        assert re.fullmatch(r"call_[0-9a-f]{12}", made["call_id"]) and made["tool"] == "query_database"
        assert made["arguments"] == {"query": query, "params": {"since": "2024-01-01"}}  # as sent, level aside
        assert made["database"] == "demo" and made["dialect"] == "duckdb" and "order_date >= $since" in made["sql"]
        assert made["params"] == {"since": "2024-01-01"}
        assert made["read"] == [
            {"ref": "uploads/regions.csv", "size": len(csv_text), "mtime_ns": made["read"][0]["mtime_ns"]}
        ]
        (written,) = made["wrote"]
        artifact = meta_of(sql)["artifact_id"]
        assert written["id"] == artifact and written["kind"] == "table" and len(written["sha256"]) == 64

        code = f"df = load_artifact('{artifact}')\nsave_artifact(df.head(2), title='two rows')"
        cell = await client.call_tool("run_python", {"code": code})
        assert not cell.is_error, text_of(cell)
        ran = provenance(cell)
        assert re.fullmatch(r"code_[0-9a-f]{12}", ran["code_id"])
        loaded, saved = ran["helpers"]
        assert loaded == {"helper": "load_artifact", "id": artifact, "sha256": written["sha256"]}
        assert saved["helper"] == "save_artifact" and saved["id"].startswith("artifact_") and len(saved["sha256"]) == 64

        read = await client.call_tool("file_reader", {"path": saved["id"], "output_level": "brief"})
        assert provenance(read)["read"] == [
            {"ref": saved["id"], "size": provenance(read)["read"][0]["size"], "sha256": saved["sha256"]}
        ]

        failed = await client.call_tool("query_database", {"query": "SELECT nope FROM orders"})
        assert failed.is_error and provenance(failed)["error"] and provenance(failed)["call_id"].startswith("call_")

        history = (await client.read_resource("ba://history")).contents[0].text  # type: ignore[union-attr]
        lines = history.splitlines()[1:]
        calls = [provenance(r)["call_id"] for r in (failed, read, cell, sql)]  # newest first
        assert [line.split()[1] for line in lines] == calls, history
        assert f" query_database {provenance(failed)['error']}: " in lines[0], history
        assert f"→ {artifact}" in lines[3] and "order_date >= $since" in lines[3], history


@contextlib.asynccontextmanager
async def _session(url: str) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as s:
        await s.initialize()
        yield s


@pytest.mark.slow  # a server or command-line process of its own: the slow tier (the fast tier stays in process)
async def test_history_is_the_sessions_own(tmp_path: Path) -> None:
    with http_serve(make_workspace(tmp_path)) as url:
        async with _session(url) as a, _session(url) as b:
            done = await a.call_tool("query_database", {"query": "SELECT 42 AS answer"})
            call_id = provenance(done)["call_id"]
            mine = (await a.read_resource("ba://history")).contents[0].text  # type: ignore[union-attr]
            theirs = (await b.read_resource("ba://history")).contents[0].text  # type: ignore[union-attr]
    assert call_id in mine and "SELECT 42" in mine
    assert call_id not in theirs and theirs == "No calls yet in this session."
