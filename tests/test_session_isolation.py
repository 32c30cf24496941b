"""S-9 / issue 22 item 1: a client reaches only its own session's artifacts and code.

Over HTTP one server serves many clients: session B's saved JSON, query result and code must not be listed,
completed, read or queried by session A, by id, by path or through run_python — and an id A computes from
guessed content answers exactly like an id that never existed. An operator may share a single-user server's
artifacts (``artifacts.shared``). Over stdio a process is one session, and what earlier processes kept stays
readable.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import ClientSession, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID
from mcp.shared.exceptions import MCPError
from mcp.types import ResourceTemplateReference

from ba_mcp import callers
from ba_mcp.settings import ArtifactSettings
from ba_mcp.stores.artifacts import ArtifactStore
from ba_mcp.views import ROWS_TOOL
from ba_mcp.workspace import Workspace
from tests.conftest import http_serve, make_workspace, stdio_params, text_of

pytestmark = pytest.mark.anyio

SECRET_CELL = "save_artifact({'salary_of_ceo': 912345})"
QUERY = "SELECT range AS n, 'payroll-' || range AS who FROM range(100)"
ARTIFACT = re.compile(r"artifact_[0-9a-f]{12}")


@contextlib.asynccontextmanager
async def _session(url: str, views: bool = False) -> AsyncIterator[ClientSession]:
    """A client session; ``views``: one that declares MCP Apps (it lists and may call the app-only view_rows)."""
    extensions = {EXTENSION_ID: {"mimeTypes": [APP_MIME_TYPE]}} if views else None
    async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write, extensions=extensions) as s:
        await s.initialize()
        yield s


async def _ok(s: ClientSession, tool: str, **args: object) -> str:
    result = await s.call_tool(tool, dict(args))
    assert not result.is_error, text_of(result)
    return text_of(result)


async def _refused(s: ClientSession, tool: str, **args: object) -> str:
    result = await s.call_tool(tool, dict(args))
    assert result.is_error, text_of(result)
    return text_of(result)


async def _files(s: ClientSession) -> str:
    return (await s.read_resource("ba://files")).contents[0].text  # type: ignore[union-attr]


async def _completed_ids(s: ClientSession) -> list[str]:
    done = await s.complete(ResourceTemplateReference(uri="artifact://{id}"), {"name": "id", "value": "artifact_"})
    return list(done.completion.values)


@pytest.mark.slow
async def test_a_session_reaches_only_its_own_artifacts_and_code(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    with http_serve(ws) as url:
        async with _session(url) as b:
            saved = await b.call_tool("run_python", {"code": SECRET_CELL})
            assert not saved.is_error, text_of(saved)
            secret = ARTIFACT.search(text_of(saved)).group(0)  # type: ignore[union-attr]
            code = re.search(r"code_[0-9a-f]{12}", json.dumps(saved.model_dump(mode="json"))).group(0)  # type: ignore[union-attr]
            cut = ARTIFACT.search(await _ok(b, "query_database", query=QUERY, max_rows=5)).group(0)  # type: ignore[union-attr]
            # B's own: listed, completed and readable every way
            listing = await _files(b)
            assert secret in listing and cut in listing and code in listing
            assert {secret, cut} <= set(await _completed_ids(b))
            assert "912345" in await _ok(b, "file_reader", path=secret)
            assert "save_artifact" in await _ok(b, "file_reader", path=code)
            assert "payroll-99" in (await b.read_resource(f"artifact://{cut}")).contents[0].text  # type: ignore[union-attr]
            assert "912345" in await _ok(b, "run_python", code=f"load_artifact({secret!r})")

            async with _session(url, views=True) as a:
                listing = await _files(a)
                assert secret not in listing and cut not in listing and code not in listing
                assert not {secret, cut} & set(await _completed_ids(a))
                metrics = json.loads((await a.read_resource("ba://metrics")).contents[0].text)  # type: ignore[union-attr]
                assert metrics["artifacts"] == {"count": 0, "bytes": 0}
                # by id, with every tool and the resource: "not found", and nothing of the content
                never = "artifact_" + "0" * 12
                unknown = (await _refused(a, "file_reader", path=never)).replace(never, "<id>")
                for ref in (secret, cut):
                    told = await _refused(a, "file_reader", path=ref)
                    assert told.replace(ref, "<id>") == unknown  # a guessed id is not confirmed
                    assert "912345" not in told
                    with pytest.raises(MCPError, match="no artifact"):
                        await a.read_resource(f"artifact://{ref}")
                    told = await _refused(a, "query_database", query=f"SELECT * FROM '{ref}'")
                    assert "not_found" in told and "payroll" not in told
                    told = await _refused(a, "run_python", code=f"load_artifact({ref!r})")
                    assert "no artifact" in told and "912345" not in told
                    paged = await a.call_tool(ROWS_TOOL, {"artifact_id": ref})  # a view pages only its own
                    assert paged.is_error and paged.structured_content is None, text_of(paged)
                    assert "not_found" in text_of(paged) and "payroll" not in text_of(paged)
                    charted = await a.call_tool(ROWS_TOOL, {"artifact_id": ref, "chart": {"x": "who", "y": "n"}})
                    assert charted.is_error and "payroll" not in text_of(charted), text_of(charted)
                told = await _refused(a, "file_reader", path=code)
                assert "no code file" in told and "save_artifact" not in told
                # by path: the stores' folders are read by id only, and not listed
                paths = ("artifacts/", f"artifacts/{secret}.json", f"code/{code}.py", f"artifacts/{secret}.meta.json")
                for path in paths:
                    told = await _refused(a, "file_reader", path=path)
                    assert "read by id only" in told and "912345" not in told
                told = await _refused(a, "query_database", query=f"SELECT * FROM 'artifacts/{cut}.parquet'")
                assert "payroll" not in told

                # the same query gives A a result of A's own: another artifact (issue 60: the same bytes never
                # join another session's item, whose id would confirm its content and show its title)
                mine = ARTIFACT.search(await _ok(a, "query_database", query=QUERY, max_rows=5)).group(0)  # type: ignore[union-attr]
                assert mine != cut
                assert "payroll-99" in await _ok(a, "file_reader", path=mine, offset=95)
                listing = await _files(a)  # (A's own code names the id it tried: listed as A's code)
                assert f"[{mine}]" in listing and f"[{cut}]" not in listing and f"[{secret}]" not in listing
                assert f"[{code}]" not in listing
                await _refused(a, "file_reader", path=secret)
                await _refused(a, "file_reader", path=cut)


@pytest.mark.slow
async def test_an_operator_shares_a_single_user_servers_artifacts(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    with http_serve(ws, BA_MCP_ARTIFACTS__SHARED="true") as url:
        async with _session(url) as b, _session(url) as a:
            cut = ARTIFACT.search(await _ok(b, "query_database", query=QUERY, max_rows=5)).group(0)  # type: ignore[union-attr]
            assert cut in await _files(a) and cut in await _completed_ids(a)
            assert "payroll-99" in await _ok(a, "file_reader", path=cut, offset=95)


@pytest.mark.slow  # a server or command-line process of its own: the slow tier (the fast tier stays in process)
async def test_over_stdio_a_later_process_reads_what_an_earlier_one_kept(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    async with stdio_client(stdio_params(ws)) as (read, write), ClientSession(read, write) as first:
        await first.initialize()
        cut = ARTIFACT.search(await _ok(first, "query_database", query=QUERY, max_rows=5)).group(0)  # type: ignore[union-attr]
    async with stdio_client(stdio_params(ws)) as (read, write), ClientSession(read, write) as later:
        await later.initialize()
        assert cut in await _files(later)
        assert "payroll-99" in await _ok(later, "file_reader", path=cut, offset=95)


def test_the_stores_answer_for_the_calling_session(tmp_path: Path) -> None:
    """The pieces: owners recorded on commit (the same bytes from two sessions: two artifacts), ``get``/``list`` per
    session, the
    workspace's ids and a read root that holds the workspace, and metadata from before owners existed."""
    ws = Workspace.open(
        tmp_path / "ws", {"everything": tmp_path}, owned=lambda kind, ref_id: any(m.id == ref_id for m in store.list())
    )
    store = ArtifactStore(ws.dir("artifacts"), ArtifactSettings())
    with callers.acting_as("http-a"):
        mine = store.put_json({"n": 1}, title="a's", source_tool="test")
        shared = store.put_json({"n": 2}, title="both", source_tool="test")
        assert ws.resolve(mine.id).size == mine.size
    with callers.acting_as("http-b"):  # the same bytes: b's own artifact, never a share of a's (issue 60)
        again = store.put_json({"n": 2}, title="b's", source_tool="test")
        assert again.id != shared.id and [m.id for m in store.list()] == [again.id]
        with pytest.raises(Exception, match="no artifact"):
            store.get(shared.id)
        with pytest.raises(Exception, match="no artifact"):
            store.get(mine.id)
        with pytest.raises(Exception, match="no artifact"):
            ws.resolve(mine.id)
        with pytest.raises(Exception, match="private folder"):
            ws.resolve(f"everything/ws/artifacts/{mine.id}.json")
    with callers.acting_as(callers.EVERYONE):
        assert {m.id for m in store.list()} == {mine.id, shared.id, again.id}
        assert store.get(shared.id).owners == ["http-a"] and store.get(shared.id).title == "both"
    # metadata written before owners were recorded belongs to stdio's session
    meta_path = ws.dir("artifacts") / f"{mine.id}.meta.json"
    old = json.loads(meta_path.read_text())
    del old["owners"]
    meta_path.write_text(json.dumps(old))
    assert store.get(mine.id).id == mine.id  # "default": the session outside any request
    with callers.acting_as("http-a"), pytest.raises(Exception, match="no artifact"):
        store.get(mine.id)


@pytest.mark.slow
async def test_a_session_sees_runs_and_overwrites_only_its_own_saved_analyses(tmp_path: Path) -> None:
    """S-9 / S-13 (issue 34 item 7, issue 60): session B can neither list, read, complete, re-run nor overwrite the
    analysis A saved, and may save one of the same name; the operator's command sees both."""
    from tests.conftest import ba

    ws = make_workspace(tmp_path)
    with http_serve(ws) as url:
        async with _session(url) as a, _session(url) as b:
            await _ok(a, "query_database", query=QUERY + " WHERE range < 5")
            await _ok(a, "save_analysis", name="payroll", steps="last:1", description="A's own")
            assert "payroll" in (await a.read_resource("analysis://catalog")).contents[0].text  # type: ignore[union-attr]
            catalog = (await b.read_resource("analysis://catalog")).contents[0].text  # type: ignore[union-attr]
            assert "payroll" not in catalog, catalog
            with pytest.raises(MCPError):
                await b.read_resource("analysis://payroll")
            done = await b.complete(ResourceTemplateReference(uri="analysis://{name}"), {"name": "name", "value": "p"})
            assert "payroll" not in done.completion.values
            said = await _refused(b, "run_analysis", name="payroll")
            assert "UNKNOWN_ANALYSIS" in said and "A's own" not in said, said
            await _ok(b, "query_database", query="SELECT 1 AS planted")
            # names are each session's own (issue 60): B's payroll is B's, and A's is untouched
            said = await _ok(b, "save_analysis", name="payroll", steps="last:1", overwrite=True)
            assert "EXISTS" not in said, said
            assert "planted" in await _ok(b, "run_analysis", name="payroll")
            assert "planted" not in await _ok(a, "run_analysis", name="payroll")
    manifests = {p.parent.parent.parent.name: p.read_text() for p in ws.glob("users/*/analyses/payroll/analysis.yaml")}
    assert len(manifests) == 2 and not (ws / "analyses" / "payroll").exists(), manifests
    assert sorted("A's own" in m for m in manifests.values()) == [False, True]
    listed = ba("analyses", "list", workspace=ws).stdout
    assert sorted(line.split()[0] for line in listed.splitlines()) == sorted(f"{h}/payroll" for h in manifests)
