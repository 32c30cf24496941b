"""Issue 62, part 3: an analysis's owner publishes it to the team; every principal reads it and re-runs it as
themselves, nobody changes it, and once unpublished it is unknown to them again by every path. In process: one App,
two principals made the way the server makes them (``callers.Principal``, each call acting as its key), a file each
principal owns by path (``exports/who.csv``) standing for the data each may see. The same through real HTTP sessions,
a real identity provider and PostgreSQL's row-level security: tests/test_publish_team.py (slow tier)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from ba_mcp import callers
from ba_mcp.analyses import published
from ba_mcp.app import App
from ba_mcp.cli import main
from ba_mcp.errors import ToolFailure
from ba_mcp.resources import analysis_catalog, analysis_markdown
from ba_mcp.settings import load_settings

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,  # several principals, each with workers of their own per test: the slow tier
]

ALICE = callers.Principal("user-alice", "https://idp.example.com", "alice", "alice@example.com")
BOB = callers.Principal("user-bob", "https://idp.example.com", "bob", "bob@example.com")
CAROL = callers.Principal("user-carol", "https://idp.example.com", "carol", "carol@example.com")
MINE = "SELECT who, n FROM 'exports/who.csv' ORDER BY n"  # each principal's own file: their data
QUALIFIED = "alice@example.com/weekly"


def _own_file(ws: Path, who: callers.Principal, rows: str) -> None:
    folder = ws / "users" / who.key / "exports"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "who.csv").write_text("who,n\n" + rows)


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[App]:
    ws = tmp_path / "ws"
    env = {"BA_MCP_SANDBOX__SPARE_WORKERS": "0", "BA_MCP_ENGINE__SPARE_WORKERS": "0"}
    made = App(load_settings(workspace=ws, environ=env), ["query_database", "save_analysis", "run_analysis"])
    _own_file(made.workspace.root, ALICE, "alice-row,1\nalice-row,2\nalice-row,3\n")
    _own_file(made.workspace.root, BOB, "bob-row,10\n")
    try:
        yield made
    finally:
        await made.aclose()


async def call(app: App, who: callers.Principal, tool: str, **args: Any) -> tuple[bool, str]:
    """One call as the server serves it for ``who``: (failed, the text the model reads)."""
    with callers.acting_as(who.key, who):
        outcome = await app.runner.call(app.tools[tool], args, who)
    if outcome.failure is not None:
        return True, f"{outcome.failure.code}: {outcome.failure.message} ({outcome.failure.hint})"
    assert outcome.observation is not None
    return False, outcome.observation.text


async def ok(app: App, who: callers.Principal, tool: str, **args: Any) -> str:
    failed, said = await call(app, who, tool, **args)
    assert not failed, said
    return said


@contextlib.contextmanager
def serving(who: callers.Principal) -> Iterator[None]:
    with callers.acting_as(who.key, who):
        yield


def views(app: App, who: callers.Principal) -> dict[str, str]:
    """What ``who`` learns of alice's analysis by every path but the tools: the catalog, the resource by her
    qualified name and by the plain name, the completions of the published resource's arguments."""
    seen: dict[str, str] = {}
    with serving(who):
        seen["catalog"] = analysis_catalog(app)
        for name in (QUALIFIED, "weekly"):
            try:
                seen[name] = analysis_markdown(app, name)
            except ResourceNotFoundError as unknown:
                seen[name] = f"unknown: {unknown}"
        owners = [r.handle for r in published.others(app.workspace.dir("published"), who.key)]
        names = [r.name for r in published.others(app.workspace.dir("published"), who.key)]
    seen["completion"] = f"{owners} {names}"
    return seen


async def save_alices(app: App, **more: Any) -> str:
    await ok(app, ALICE, "query_database", query=MINE)
    return await ok(
        app, ALICE, "save_analysis", name="weekly", steps="last:1", description="alice's weekly look", **more
    )


async def test_bob_reads_and_reruns_alices_published_analysis_as_himself(app: App) -> None:
    await save_alices(app)
    said = await ok(app, ALICE, "save_analysis", name="weekly", publish=True)
    assert f"Published weekly to the team as {QUALIFIED}" in said, said

    seen = views(app, BOB)
    assert f"{QUALIFIED}: alice's weekly look" in seen["catalog"] and "by alice@example.com" in seen["catalog"]
    assert "Published by alice@example.com" in seen[QUALIFIED] and "FROM 'exports/who.csv'" in seen[QUALIFIED]
    assert seen["weekly"].startswith("unknown: no analysis named weekly")  # bob's own names stay his own
    assert seen["completion"] == "['alice@example.com'] ['weekly']"

    before = {k: len(app.sessions(k).history) for k in ("user-alice", "user-alice~analysis")}
    said = await ok(app, BOB, "run_analysis", name=QUALIFIED)
    assert "bob-row" in said and "alice-row" not in said, said  # his file, read as him
    assert "Run as you (bob@example.com)" in said and "is alice@example.com's" in said, said
    replayed = app.sessions("user-bob~analysis").history  # the replay's steps: bob's session, bob's principal
    assert [r.tool for r in replayed] == ["query_database"] and replayed[0].success
    assert {k: len(app.sessions(k).history) for k in before} == before  # nothing ran in alice's sessions
    with serving(BOB):
        made = app.artifacts.list()  # what the run made (bob made nothing else)
    assert made and all(set(m.owners) <= {"user-bob", "user-bob~analysis"} for m in made), made
    with serving(ALICE):
        assert not {m.id for m in made} & {m.id for m in app.artifacts.list()}  # unknown to alice
        with pytest.raises(ToolFailure):
            app.artifacts.get(made[0].id)


async def test_bob_cannot_change_alices_published_analysis(app: App) -> None:
    await save_alices(app, publish=True)
    alices = app.workspace.root / "users" / "user-alice" / "analyses" / "weekly" / "analysis.yaml"
    record = app.workspace.root / "published" / "user-alice" / "weekly.json"
    kept = alices.read_bytes(), record.read_bytes()

    for name in (QUALIFIED, "../user-alice/weekly", "user-alice/weekly"):  # never a name of bob's
        failed, said = await call(app, BOB, "save_analysis", name=name, steps="last:1", overwrite=True)
        assert failed and "BAD_NAME" in said, said
    failed, said = await call(app, BOB, "save_analysis", name="weekly", publish=False)  # he has no weekly
    assert failed and "UNKNOWN_ANALYSIS" in said, said
    await ok(app, BOB, "query_database", query=MINE)
    said = await ok(app, BOB, "save_analysis", name="weekly", steps="last:1", description="bob's", publish=True)
    assert "Published weekly to the team as bob@example.com/weekly" in said, said  # his own, beside hers
    said = await ok(app, BOB, "save_analysis", name="weekly", publish=False)
    assert "Unpublished weekly" in said, said

    assert (alices.read_bytes(), record.read_bytes()) == kept  # hers untouched, still published
    assert (app.workspace.root / "users" / "user-bob" / "analyses" / "weekly" / "analysis.yaml").is_file()
    with serving(CAROL):
        assert [r.qualified for r in published.others(app.workspace.dir("published"), CAROL.key)] == [QUALIFIED]


async def test_after_unpublishing_bob_gets_what_he_got_before_it_was_published(app: App) -> None:
    await save_alices(app)
    before = views(app, BOB)
    failed, unknown_before = await call(app, BOB, "run_analysis", name=QUALIFIED)
    assert failed and "UNKNOWN_ANALYSIS" in unknown_before and "alice's" not in unknown_before, unknown_before

    await ok(app, ALICE, "save_analysis", name="weekly", publish=True)
    assert views(app, BOB) != before
    said = await ok(app, ALICE, "save_analysis", name="weekly", publish=False)
    assert "Unpublished weekly" in said, said

    assert views(app, BOB) == before
    assert await call(app, BOB, "run_analysis", name=QUALIFIED) == (True, unknown_before)
    left = [p.name for p in (app.workspace.root / "published").iterdir()]
    assert left == [published.HANDLES], left  # nothing of hers is left there but her handle, kept for her alone
    said = await ok(app, ALICE, "run_analysis", name="weekly")  # still hers, on her data
    assert "alice-row" in said, said


async def test_the_published_copy_holds_none_of_the_owners_figures_and_follows_her_saves(app: App) -> None:
    conclusion = {"text": "three rows of mine", "output": "s1_table", "rule": "count"}
    await save_alices(app, conclusions=[conclusion], publish=True)
    saved = yaml.safe_load(
        (app.workspace.root / "users" / "user-alice" / "analyses" / "weekly" / "analysis.yaml").read_text()
    )
    assert saved["outputs"][0]["rows"] == 3 and saved["conclusions"][0]["expected"] == 3
    assert saved["by"] == "alice@example.com"
    copy = published.of(app.workspace.dir("published"), "user-alice", "weekly")
    assert copy is not None and copy.by == "alice@example.com" and copy.owner == "user-alice"
    assert copy.manifest["outputs"] == [{"name": "s1_table", "kind": "table"}]
    assert "expected" not in copy.manifest["conclusions"][0] and "owner" not in copy.manifest
    assert copy.manifest["steps"] == saved["steps"]

    said = await ok(app, BOB, "run_analysis", name=QUALIFIED)
    assert "reads: “three rows of mine” — 1 on this run" in said and "s1_table: 1 rows" in said, said
    assert "was 3" not in said and "NO LONGER HOLDS" not in said, said

    await ok(app, ALICE, "query_database", query=MINE)
    said = await ok(
        app, ALICE, "save_analysis", name="weekly", steps="last:1", description="alice's v2", overwrite=True
    )
    assert f"as {QUALIFIED}" in said, said  # still published: the copy follows what she saved
    with serving(BOB):
        assert "alice's v2" in analysis_catalog(app)


def test_a_replayed_step_runs_for_the_callers_session_and_principal() -> None:
    """A replay's steps run in threads of their own (run_bounded): the caller's principal goes with them, so a step's
    query takes the caller's database role (databases.<name>.role_from), not the operator's."""
    from ba_mcp.tool import ToolContext, run_bounded

    with callers.acting_as(BOB.key, BOB), callers.acting_as(f"{BOB.key}~analysis"):
        ran = run_bounded(lambda: (callers.current(), callers.principal()), ToolContext(session="x", timeout=5), "s1")
    assert ran == ("user-bob~analysis", BOB)


def test_a_published_name_only_picks_among_the_records_and_never_follows_a_link(tmp_path: Path) -> None:
    root = tmp_path / "published"
    manifest = {"name": "weekly", "steps": [], "outputs": []}
    published.publish(root, "user-alice", "alice@example.com", manifest)
    assert published.find(root, QUALIFIED) is not None
    secret = tmp_path / "users" / "user-alice" / "analyses" / "weekly"
    secret.mkdir(parents=True)
    (secret / "analysis.json").write_text(json.dumps({"handle": "x", "name": "analysis", "manifest": {}}))
    for name in (
        "alice@example.com/../weekly",
        "../users/user-alice/analyses/weekly",
        "user-alice/weekly",
        "alice@example.com/weekly/../../users",
        "alice@example.com%2Fweekly",
        "/weekly",
        "alice@example.com/",
        "x/analysis",
    ):
        assert published.find(root, name) is None, name
    # records planted as links, a file's or a folder's (the folder is the server's; a link there leads nowhere)
    os.symlink(secret / "analysis.json", root / "user-alice" / "analysis.json")
    elsewhere = tmp_path / "elsewhere"
    published.publish(elsewhere, "user-mallory", "mallory", manifest)
    os.symlink(elsewhere / "user-mallory", root / "user-mallory")
    assert published.find(elsewhere, "mallory/weekly") is not None  # a record where it is written
    assert published.find(root, "mallory/weekly") is None
    assert [r.qualified for r in published.records(root)] == [QUALIFIED]


def test_handles_are_made_from_display_names_and_never_taken_twice(tmp_path: Path) -> None:
    assert published.handle_of("Alice Smith") == "alice-smith"
    assert published.handle_of("ALICE@Example.com") == "alice@example.com"
    assert published.handle_of("../..") == "user" and published.handle_of("") == "user"
    root = tmp_path / "published"
    first = published.publish(root, "user-alice", "alice@example.com", {"name": "a"})
    other = published.publish(root, "user-mallory", "Alice@example.com", {"name": "b"})  # the same display
    again = published.publish(root, "user-alice", "alice@new.example.com", {"name": "c"})  # her first handle stays
    assert first.handle == again.handle == "alice@example.com", (first, again)
    assert other.handle.startswith("alice@example.com-") and other.handle != first.handle
    assert published.find(root, f"{other.handle}/b") == other and published.find(root, "alice@example.com/b") is None


async def test_on_stdio_publishing_is_accepted_and_says_there_is_one_user(tmp_path: Path) -> None:
    env = {"BA_MCP_SANDBOX__SPARE_WORKERS": "0", "BA_MCP_ENGINE__SPARE_WORKERS": "0"}
    app = App(
        load_settings(workspace=tmp_path / "ws", environ=env), ["query_database", "save_analysis", "run_analysis"]
    )
    me = callers.operator()
    try:
        await ok(app, me, "query_database", query="SELECT 42 AS answer")
        said = await ok(app, me, "save_analysis", name="mine", steps="last:1", publish=True)
        assert "this server's one user is you" in said, said
        handle = published.handle_of(me.display)
        with serving(me):
            assert f"published as {handle}/mine" in analysis_catalog(app)
            assert "Published to the team by others" not in analysis_catalog(app)  # their own is no one else's
        assert "42" in await ok(app, me, "run_analysis", name="mine")
    finally:
        await app.aclose()


async def test_where_every_user_sees_every_analysis_nothing_is_published(tmp_path: Path) -> None:
    env = {"BA_MCP_ARTIFACTS__SHARED": "true", "BA_MCP_ENGINE__SPARE_WORKERS": "0"}
    app = App(load_settings(workspace=tmp_path / "ws", environ=env), ["query_database", "save_analysis"])
    try:
        await ok(app, ALICE, "query_database", query="SELECT 1 AS one")
        said = await ok(app, ALICE, "save_analysis", name="one", steps="last:1", publish=True)
        assert "artifacts.shared" in said and not any((app.workspace.root / "published").iterdir()), said
    finally:
        await app.aclose()


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as ended:
        main(list(argv))
    out = capsys.readouterr().out
    assert ended.value.code == 0, out
    return out


async def test_the_operator_publishes_and_unpublishes_a_users_analysis_in_their_name(
    app: App, capsys: pytest.CaptureFixture[str]
) -> None:
    await save_alices(app)
    ws = str(app.workspace.root)
    said = cli(capsys, "analyses", "publish", "user-alice/weekly", "--workspace", ws)
    assert f"published weekly as {QUALIFIED} (by alice@example.com)" in said, said
    listed = cli(capsys, "analyses", "list", "--workspace", ws)
    assert f"[published as {QUALIFIED}]" in next(line for line in listed.splitlines() if "user-alice/weekly" in line)
    with serving(BOB):
        assert QUALIFIED in analysis_catalog(app)
    assert "unpublished weekly" in cli(capsys, "analyses", "unpublish", "user-alice/weekly", "--workspace", ws)
    with serving(BOB):
        assert QUALIFIED not in analysis_catalog(app)
