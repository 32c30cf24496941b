"""The artifact store (content addressing, crash safety, clean-up, caps) and the workspace's ids."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from ba_mcp.errors import ToolFailure
from ba_mcp.settings import ArtifactSettings
from ba_mcp.stores.artifacts import ArtifactStore
from ba_mcp.workspace import Workspace, upload_id_for

# -- artifact store -------------------------------------------------------------------------------


def store(tmp_path: Path, **settings: float) -> ArtifactStore:
    root = tmp_path / "artifacts"
    root.mkdir(exist_ok=True)
    return ArtifactStore(root, ArtifactSettings(**settings))  # type: ignore[arg-type]


def test_artifacts_are_content_addressed_and_typed(tmp_path: Path) -> None:
    s = store(tmp_path)
    table = pa.table({"a": [1, 2, None], "b": ["x", "", None]})
    t1 = s.put_table(table, title="t", source_tool="test")
    t2 = s.put_table(pa.table({"a": [1, 2, None], "b": ["x", "", None]}), title="again", source_tool="test")
    assert t1.id == t2.id and len(s.list()) == 1
    assert t1.id == "artifact_" + t1.sha256[:12] and t1.rows == 3 and t1.mime == "application/vnd.apache.parquet"
    _, back = s.read_table(t1.id)
    assert back.column("b").to_pylist() == ["x", "", None]  # empty and missing stay distinct
    text = s.put_text("# hello", title="doc", source_tool="test", mime="text/markdown")
    js = s.put_json({"k": [1, 2]}, title="j", source_tool="test")
    assert (text.kind, js.kind) == ("markdown", "json")
    assert json.loads(s.read_bytes(js.id)[1]) == {"k": [1, 2]}
    with pytest.raises(ToolFailure) as err:
        s.get("artifact_../../etc")
    assert err.value.type.value == "invalid_parameters"


def test_a_crash_mid_write_leaves_nothing_listed(tmp_path: Path) -> None:
    """kill -9 a writer between the content rename and the metadata commit: the artifact must not exist."""
    root = tmp_path / "artifacts"
    root.mkdir()
    script = f"""
import os, sys
sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})
from pathlib import Path
from typing import Any
from ba_mcp.stores.artifacts import ArtifactStore
from ba_mcp.settings import ArtifactSettings
s = ArtifactStore(Path({str(root)!r}), ArtifactSettings())
s._write_meta = lambda meta: os.kill(os.getpid(), 9)   # die right before the metadata commit
s.put_text("half written " * 1000, title="t", source_tool="test")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert proc.returncode == -9
    s = store(tmp_path)
    assert s.list() == []
    orphans = [p for p in root.iterdir() if p.is_file()]
    assert orphans and all(not p.name.endswith(".meta.json") for p in orphans)
    ws = Workspace(tmp_path)
    with pytest.raises(ToolFailure) as err:
        ws.resolve(orphans[0].name.split(".")[0])
    assert err.value.type.value == "not_found"
    old = time.time() - 7200
    for p in orphans:
        os.utime(p, (old, old))
    assert s.cleanup()["orphans"] == len(orphans)


def test_cleanup_expires_by_ttl_and_evicts_lru_but_spares_readers(tmp_path: Path) -> None:
    s = store(tmp_path, ttl_hours=1, max_bytes=1024 * 1024)
    blobs = [s.put_text(str(i) * 300_000, title=f"b{i}", source_tool="t") for i in range(3)]  # 3 × 300 kB
    now = time.time()
    for i, meta in enumerate(blobs):  # b0 oldest access … b2 newest
        meta.last_accessed = now - 600 + i * 60
        s._write_meta(meta)
    with s.reading(blobs[0].id):  # a reader holds the least recently used one
        fourth = s.put_text("3" * 300_000, title="b3", source_tool="t")  # the cap holds on write
        assert s.total_bytes() <= 1024 * 1024
        left = {m.id for m in s.list()}
        assert blobs[0].id in left, "an artifact being read is never deleted"
        assert blobs[1].id not in left and fourth.id in left  # the least recently used one that is free went
        removed = s.cleanup(now)
    assert removed["evicted"] == 0 and s.total_bytes() <= 1024 * 1024  # writes already kept it under the cap
    assert fourth.id in {m.id for m in s.list()}
    before = len(s.list())
    expired = s.cleanup(now + 2 * 3600)
    assert expired["expired"] == before and s.list() == []


def test_one_artifact_is_never_larger_than_the_store(tmp_path: Path) -> None:
    s = store(tmp_path, max_bytes=1024 * 1024)  # max_artifact_bytes stays 1 GiB by default
    with pytest.raises(ToolFailure) as err:
        s.put_text("x" * 2 * 1024 * 1024, title="big", source_tool="t")
    assert err.value.code == "ARTIFACT_TOO_LARGE" and s.list() == []


def test_a_users_artifacts_stay_under_their_quota_their_own_oldest_going_first(tmp_path: Path) -> None:
    """Issue 54: ``max_bytes_per_user`` bounds one HTTP session's (one user's) artifacts: its own least recently used
    go first, another user's are never touched, and one too large for the quota is refused naming the key."""
    from ba_mcp import callers

    s = store(tmp_path, max_bytes_per_user=1024 * 1024)
    mb = 400 * 1024
    with callers.acting_as("user-bob"):
        bobs = s.put_text("b" * mb, title="bob", source_tool="t")
    with callers.acting_as("user-alice"):
        first = s.put_text("1" * mb, title="one", source_tool="t")
        second = s.put_text("2" * mb, title="two", source_tool="t")
        third = s.put_text("3" * mb, title="three", source_tool="t")  # 1.2 MB of hers: the first goes
        assert {m.id for m in s.list()} == {second.id, third.id}
        with pytest.raises(ToolFailure) as err:
            s.put_text("4" * 2 * 1024 * 1024, title="too big", source_tool="t")
        assert err.value.code == "USER_QUOTA" and "artifacts.max_bytes_per_user" in err.value.message
    assert first.id not in {m.id for m in s.list()}
    with callers.acting_as("user-bob"):
        assert [m.id for m in s.list()] == [bobs.id]


def test_a_new_artifact_reads_no_other_metadata_and_the_cap_holds_across_two_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40: a write checks the store's total from the store's own count (it read every metadata file on
    every write: a session's thousandth result read a thousand files), yet two servers on one workspace keep
    the cap (S-7): each sees the other's changes through the shared change counter."""
    one, two = store(tmp_path, max_bytes=1024 * 1024), store(tmp_path, max_bytes=1024 * 1024)
    for i in range(30):
        one.put_text(f"small {i}", title=f"s{i}", source_tool="t")
    read: list[str] = []
    real = ArtifactStore._read_meta
    monkeypatch.setattr(ArtifactStore, "_read_meta", lambda self, aid: read.append(aid) or real(self, aid))
    new = one.put_text("one more", title="s30", source_tool="t")
    assert read == [new.id], read  # only its own id (is the same content already stored?)
    monkeypatch.undo()
    # 3 × 300 kB by the second server, then 2 × 300 kB by the first, whose count predates them
    big = [two.put_text(str(i) * 300_000, title=f"b{i}", source_tool="t") for i in range(3)]
    assert two.total_bytes() <= 1024 * 1024
    more = [one.put_text(str(i) * 300_000, title=f"c{i}", source_tool="t") for i in range(5, 7)]
    assert one.total_bytes() <= 1024 * 1024 and two.total_bytes() <= 1024 * 1024
    left = {m.id for m in one.list()}
    assert all(m.id in left for m in more) and sum(m.id in left for m in big) == 1  # the oldest two went
    one.cleanup(time.time() + 7200)  # removes files older than an hour that no metadata lists: not the counter
    assert (tmp_path / "artifacts" / ".changes").is_file()


def test_the_same_result_again_rewrites_its_metadata_only_when_that_changes_something(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 40: a repeated result (the same content) left its metadata rewritten, fsync and all, every time."""
    from ba_mcp import callers

    s = store(tmp_path)
    with callers.acting_as("a"):
        first = s.put_text("the same", title="t", source_tool="t")
    written: list[str] = []
    real = ArtifactStore._write_meta
    monkeypatch.setattr(ArtifactStore, "_write_meta", lambda self, meta: written.append(meta.id) or real(self, meta))
    with callers.acting_as("a"):
        assert s.put_text("the same", title="t", source_tool="t").id == first.id
    assert written == []  # nothing new to say
    with callers.acting_as("a~analysis"):  # a saved analysis's run of a's: the same principal, the same artifact
        assert s.put_text("the same", title="t", source_tool="t").id == first.id
    assert written == [first.id]  # a new owner (the run's session) is written
    with callers.acting_as("a"):
        again = s.get(first.id)
    again.last_accessed -= 120
    real(s, again)
    with callers.acting_as("a"):
        s.put_text("the same", title="t", source_tool="t")
    assert written == [first.id, first.id]  # an access time older than a minute is refreshed
    with callers.acting_as("b"):  # another principal's same bytes are an artifact of theirs (issue 60)
        assert s.put_text("the same", title="t", source_tool="t").id != first.id


# -- workspace ------------------------------------------------------------------------------------


def test_upload_ids(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path)
    (tmp_path / "uploads" / "Q3 sales.csv").write_text("a\n1\n")
    (tmp_path / "uploads" / "report.csv").write_text("a\n")
    (tmp_path / "uploads" / "report.xlsx").write_text("x")
    assert upload_id_for("Q3 sales.csv") == "upload_Q3_sales"
    assert ws.resolve("upload_Q3_sales").name == "upload_Q3_sales"
    assert ws.resolve("upload_report.csv").filename == "report.csv"
    with pytest.raises(ToolFailure, match="ambiguous"):
        ws.resolve("upload_report")
    # listed by SQL identifiers (FROM upload_report_csv); the full-name ids shown before still resolve
    assert sorted(uid for uid, _, _ in ws.uploads()) == ["upload_Q3_sales", "upload_report_csv", "upload_report_xlsx"]
    assert ws.resolve("upload_report_xlsx").filename == "report.xlsx"
    assert ws.resolve("upload_report.xlsx").name == "upload_report_xlsx"
