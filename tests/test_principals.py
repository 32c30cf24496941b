"""Issue 60, the pieces: each principal's own folders in the workspace (ba_mcp/workspace.py) and a fair share of a
database's query slots (ba_mcp/databases/slots.py). The same behaviour through real HTTP sessions and a real identity
provider: tests/test_team_isolation.py (slow tier)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import yaml

from ba_mcp import callers
from ba_mcp.analyses.manifest import listed, move_to_owners
from ba_mcp.databases.slots import FairSlots
from ba_mcp.errors import ToolFailure
from ba_mcp.workspace import Workspace, home_name


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace.open(tmp_path / "ws")


def _write(ws: Workspace, who: str, name: str, text: str) -> None:
    with callers.acting_as(who):
        folder = ws.own("exports")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def test_each_principal_reads_and_lists_only_their_own_exports(ws: Workspace) -> None:
    _write(ws, "user-alice", "q3.csv", "alice\n")
    _write(ws, "user-bob", "other.csv", "bob\n")
    with callers.acting_as("user-alice"):
        mine = ws.resolve("exports/q3.csv")
        assert mine.name == "exports/q3.csv" and mine.open().read() == b"alice\n"  # shown as she named it
        shown, entries, _ = ws.directory("exports/") or ("", [], False)
        assert shown == "exports/" and [e.path for e in entries] == ["exports/q3.csv"]
    with callers.acting_as("user-bob"), pytest.raises(ToolFailure) as unknown:
        ws.resolve("exports/q3.csv")
    assert unknown.value.code == "NOT_FOUND"
    with callers.acting_as("user-bob~analysis"):  # a saved analysis's run is its caller's
        assert ws.resolve("exports/other.csv").open().read() == b"bob\n"


@pytest.mark.parametrize(
    "path",
    ["users/user-alice/exports/q3.csv", "users%2Fuser-alice%2Fexports%2Fq3.csv", "./users/user-alice/exports/q3.csv"],
)
def test_the_users_folder_is_reached_by_no_path(ws: Workspace, path: str) -> None:
    _write(ws, "user-alice", "q3.csv", "alice\n")
    for who in ("user-bob", "user-alice", callers.DEFAULT):
        with callers.acting_as(who), pytest.raises(ToolFailure) as refused:
            ws.resolve(path)
        assert refused.value.code == "PERMISSION_DENIED", refused.value
        with callers.acting_as(who), pytest.raises(ToolFailure):
            ws.directory("users/")


def test_one_analyst_and_a_shared_server_keep_the_workspace_folders(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path / "one")
    (ws.root / "exports").mkdir()
    (ws.root / "exports" / "q3.csv").write_text("mine\n")
    with callers.acting_as(callers.DEFAULT):  # stdio and stateless HTTP: the paths documented
        assert ws.own("exports") == ws.root / "exports"
        assert ws.resolve("exports/q3.csv").open().read() == b"mine\n"
    shared = Workspace.open(tmp_path / "shared", shared=True)
    with callers.acting_as("user-alice"):
        assert shared.own("analyses") == shared.root / "analyses"  # artifacts.shared: one folder for all


def test_a_principal_that_is_not_a_plain_name_gets_a_digest_for_a_folder() -> None:
    assert home_name("user-0123abcd") == "user-0123abcd"
    for odd in ("..", "a/b", "x" * 80, "ünï", ".hidden"):
        name = home_name(odd)
        assert name.startswith("k-") and "/" not in name and len(name) == 26, name


def test_analyses_saved_before_each_principal_had_a_folder_move_to_their_owners(ws: Workspace) -> None:
    root = ws.dir("analyses")
    for name, owner in (("mine", callers.DEFAULT), ("hers", "user-alice"), ("clash", "user-alice")):
        (root / name).mkdir(parents=True)
        (root / name / "analysis.yaml").write_text(yaml.safe_dump({"name": name, "owner": owner}))
    with callers.acting_as("user-alice"):
        alices = ws.own("analyses")
    (alices / "clash").mkdir(parents=True)
    (alices / "clash" / "analysis.yaml").write_text(yaml.safe_dump({"name": "clash", "owner": "user-alice"}))

    def folder_of(owner: str) -> Path:
        with callers.acting_as(owner):
            return ws.own("analyses")

    assert move_to_owners(root, folder_of) == ["hers"]
    assert sorted(listed(root, shared=True)) == ["clash", "mine"]  # the one already there of that name stays
    with callers.acting_as("user-alice"):
        assert listed(alices) == ["clash", "hers"]


def test_one_principal_holds_at_most_their_share_and_another_gets_a_slot() -> None:
    slots = FairSlots(4, 2)
    assert slots.acquire("alice", 0) and slots.acquire("alice", 0)
    assert not slots.acquire("alice", 0)  # her share is taken; two slots are still free
    assert slots.acquire("bob", 0)
    failure = slots.busy("shop", "alice", 3.0)
    assert "your own 2 queries" in failure.message and "max_concurrent_per_user = 2" in failure.message
    slots.release("alice")
    assert slots.acquire("alice", 0)


def test_a_waiter_is_told_whose_work_held_the_database() -> None:
    slots = FairSlots(2, 2)
    assert slots.acquire("alice", 0) and slots.acquire("alice", 0)
    assert not slots.acquire("bob", 0)
    failure = slots.busy("shop", "bob", 30.0)
    assert failure.type.value == "timeout" and "busy with other users' work" in failure.message, failure
    assert "narrow" not in failure.hint and "not the slow one" in failure.hint


def test_a_freed_slot_goes_to_the_principal_with_the_fewest_queries_running() -> None:
    slots = FairSlots(2)  # no share of its own: one principal may hold both
    assert slots.acquire("alice", 0) and slots.acquire("alice", 0)
    order: list[str] = []
    queued = threading.Event()

    def wait(who: str) -> None:
        if slots.acquire(who, 60):
            order.append(who)

    first = threading.Thread(target=wait, args=("alice",))  # alice asks first …
    first.start()
    while not slots._waiting:
        queued.wait(0.01)
    second = threading.Thread(target=wait, args=("carol",))  # … carol, with nothing running, second
    second.start()
    while len(slots._waiting) < 2:
        queued.wait(0.01)
    slots.release("alice")
    second.join(30)
    assert order == ["carol"]  # served first although she came second
    slots.release("alice")
    first.join(30)
    assert order == ["carol", "alice"]


def test_a_cancelled_waiter_leaves_the_queue() -> None:
    slots = FairSlots(1)
    assert slots.acquire("alice", 0)
    assert not slots.acquire("bob", 60, lambda: True)  # cancelled at once: no wait for the timeout
    assert not slots._waiting
    slots.release("alice")
    assert slots.acquire("bob", 0)


def test_the_same_bytes_stored_by_two_users_are_two_artifacts(tmp_path: Path) -> None:
    """Red team, issue 60: content addressing across users confirmed alice's content to bob and showed him her title.
    Each user's address is their own; one analyst's (and a shared server's) stays the content's digest."""
    from ba_mcp.settings import ArtifactSettings
    from ba_mcp.stores.artifacts import ArtifactStore

    store = ArtifactStore(tmp_path / "artifacts", ArtifactSettings())
    with callers.acting_as("user-alice"):
        hers = store.put_text("CEO bonus: 731000", title="ALICE-CONFIDENTIAL", source_tool="run_python")
    with callers.acting_as("user-bob"):
        his = store.put_text("CEO bonus: 731000", title="bob guess", source_tool="run_python")
        assert his.id != hers.id and his.title == "bob guess" and his.owners == ["user-bob"]
        with pytest.raises(ToolFailure):
            store.get(hers.id)
    with callers.acting_as("user-alice~analysis"):  # her saved analysis's run: hers
        again = store.put_text("CEO bonus: 731000", title="again", source_tool="run_python")
        assert again.id == hers.id
    with callers.acting_as(callers.DEFAULT):
        one = store.put_text("CEO bonus: 731000", title="mine", source_tool="run_python")
        assert one.id == "artifact_" + one.sha256[:12]
    shared = ArtifactStore(tmp_path / "shared", ArtifactSettings(shared=True))
    with callers.acting_as("user-alice"):
        a = shared.put_text("same", title="a", source_tool="t")
    with callers.acting_as("user-bob"):
        assert shared.put_text("same", title="b", source_tool="t").id == a.id


def test_a_read_root_holding_the_workspace_says_nothing_of_what_is_in_users(tmp_path: Path) -> None:
    """Red team, issue 60: a read root containing the workspace told an existing file of another user's folder
    (refused) from a missing one (not found). Both are refused, by name, before anything is opened."""
    ws = Workspace.open(tmp_path / "ws", {"base": tmp_path})
    _write(ws, "user-alice", "q3.csv", "alice\n")
    for path in ("base/ws/users/user-alice/exports/q3.csv", "base/ws/users/user-alice/exports/q4.csv"):
        with callers.acting_as("user-bob"), pytest.raises(ToolFailure) as refused:
            ws.resolve(path)
        assert refused.value.code == "PERMISSION_DENIED", (path, refused.value)
    with callers.acting_as("user-bob"), pytest.raises(ToolFailure) as listing:
        ws.directory("base/ws/users/user-alice/")
    assert listing.value.code == "PERMISSION_DENIED"


def test_names_a_user_reaches_as_their_own_are_no_read_root_and_no_analysis_ends_in_a_newline() -> None:
    from pydantic import ValidationError

    from ba_mcp.analyses.manifest import check_name
    from ba_mcp.settings import FilesSettings

    for name in ("exports", "analyses", "users"):
        with pytest.raises(ValidationError):
            FilesSettings(read_roots={name: Path("/tmp")})
    with pytest.raises(ToolFailure) as bad:
        check_name("weekly-sales\n")
    assert bad.value.code == "BAD_NAME"
    assert check_name("weekly-sales") == "weekly-sales"
