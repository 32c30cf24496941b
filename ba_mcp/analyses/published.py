"""Saved analyses published to the team (S-19: what a principal owns is unknown to every other principal "unless
its owner published it (read and re-run only)").

An owner publishes one of their saved analyses; the server writes a copy of its manifest — steps, parameters,
description, conclusions — with the owner's key and display name to ``published/<owner's folder>/<name>.json``, a
folder of the workspace that no reference reaches (``workspace.PRIVATE_DIRS``) and nothing writes but this module,
on the owner's request (``save_analysis``'s ``publish``, the operator's ``ba-mcp analyses publish``). The copy leaves
out the figures of the owner's own run — the outputs' digests, rows, totals and ranges, each conclusion's
``expected`` value: what the owner's rows showed is theirs (under row-level security, another user's rows differ).

Every principal lists, reads and re-runs a published analysis as ``<handle>/<name>`` — the handle is the owner's
display name at their first publication (``alice@example.com``), theirs for good (``.handles.json``: unpublishing
their last one frees it for nobody, so a name the team knows never comes to lead to another's code) — and a re-run is
the caller's own: their session, workers, artifacts and database identity. Nobody but its owner changes it: a name
another user saves is their own.
Finding one never opens anything of the owner's folder, nor a path a caller's text builds: the record is picked
among the names a listing of ``published/`` gives. Unpublishing deletes the record; the analysis is unknown to the
others again, by every path. Saving the analysis again refreshes its copy.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ba_mcp.analyses.manifest import NAME, read_manifest, unknown
from ba_mcp.errors import ToolFailure
from ba_mcp.workspace import home_name

HANDLE = re.compile(r"^[a-z0-9][a-z0-9._@+-]{0,63}$")
HANDLES = ".handles.json"  # {handle: owner's key}: each handle ever given, and to whom (written only by ``publish``)
_publishing = threading.Lock()  # one publication at a time in this process (and ``_exclusive``: across processes)
_OWNERS_FIGURES = ("sha256", "rows", "totals", "ranges")  # an output's, from the owner's run


@dataclass(frozen=True)
class Published:
    """One published analysis: ``handle``/``name`` is how every principal names it; ``owner`` the owner's key
    (never shown), ``by`` their display name; ``manifest`` the copy every principal reads and re-runs."""

    handle: str
    name: str
    owner: str
    by: str
    published: str
    manifest: dict[str, Any]

    @property
    def qualified(self) -> str:
        return f"{self.handle}/{self.name}"


def shareable(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest as others read it: the owner's figures left out (outputs keep their names and kinds;
    conclusions their text and rule, not what the owner's run read)."""
    copy = {k: v for k, v in manifest.items() if k != "owner"}
    copy["outputs"] = [
        {k: v for k, v in o.items() if k not in _OWNERS_FIGURES}
        for o in manifest.get("outputs") or []
        if isinstance(o, dict)
    ]
    copy["conclusions"] = [
        {k: v for k, v in c.items() if k != "expected"}
        for c in manifest.get("conclusions") or []
        if isinstance(c, dict)
    ]
    return copy


def handle_of(display: str) -> str:
    """A display name as a handle: lower case, runs of anything but letters, digits and ``._@+-`` as one ``-``."""
    text = re.sub(r"[^a-z0-9._@+-]+", "-", display.strip().lower())
    text = re.sub(r"\.{2,}", ".", text).strip("-._@+")[:64].rstrip("-._@+")
    return text if HANDLE.fullmatch(text) else "user"


def publish(root: Path, owner: str, by: str, manifest: dict[str, Any]) -> Published:
    """Publish (or refresh) ``owner``'s analysis ``manifest`` under their handle — the one they published under
    before, else their display name ``by``'s, with a digest of their key added when another principal holds it."""
    name = str(manifest.get("name") or "")
    assert NAME.fullmatch(name), name
    with _exclusive(root):
        handles = _handles(root)
        given = [h for h, key in handles.items() if key == owner]
        if given:
            handle = given[0]
        else:
            kept = [r.handle for r in records(root) if r.owner == owner]  # published before handles were kept
            base = kept[0] if kept else handle_of(by)
            held = set(handles) | {r.handle for r in records(root) if r.owner != owner}
            digest = hashlib.sha256(owner.encode()).hexdigest()
            handle = next(
                h for h in (base, *(f"{base[: 63 - n]}-{digest[:n]}" for n in (6, 12, 24, 48))) if h not in held
            )
            _write_json(root, HANDLES, {**handles, handle: owner})
        return _write_record(root, owner, by, name, handle, manifest)


def _write_record(root: Path, owner: str, by: str, name: str, handle: str, manifest: dict[str, Any]) -> Published:
    record = Published(handle, name, owner, by, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), shareable(manifest))
    folder = _folder(root, owner)
    folder.mkdir(parents=True, exist_ok=True)
    data = {
        "handle": record.handle,
        "name": name,
        "owner": owner,
        "by": by,
        "published": record.published,
        "manifest": record.manifest,
    }
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, ensure_ascii=False, default=str)
        os.replace(tmp, folder / f"{name}.json")
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return record


@contextlib.contextmanager
def _exclusive(root: Path) -> Iterator[None]:
    """One publication at a time, by every server of the workspace (a lock on ``published/`` itself): two principals
    publishing for the first time never both take a handle."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    with _publishing:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock


def _handles(root: Path) -> dict[str, str]:
    """Each handle given, with its owner's key (``HANDLES``; none where nothing was published since it was kept)."""
    try:
        fd = os.open(root / HANDLES, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    with os.fdopen(fd, encoding="utf-8") as f:
        try:
            data = json.loads(f.read())
        except ValueError:
            return {}
    return {str(h): str(k) for h, k in data.items()} if isinstance(data, dict) else {}


def _write_json(folder: Path, name: str, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out, ensure_ascii=False, default=str)
        os.replace(tmp, folder / name)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _theirs(record: Published, handles: dict[str, str]) -> bool:
    """Whether ``record``'s handle is its owner's (a record under a handle given to another is nobody's)."""
    return handles.get(record.handle, record.owner) == record.owner


def unpublish(root: Path, owner: str, name: str) -> bool:
    """Take ``owner``'s analysis ``name`` off the team's view; False when it was not published."""
    if not NAME.fullmatch(name):
        return False
    try:
        (_folder(root, owner) / f"{name}.json").unlink()
    except FileNotFoundError:
        return False
    try:
        _folder(root, owner).rmdir()  # the owner's last one
    except OSError:
        pass
    return True


def of(root: Path, owner: str, name: str) -> Published | None:
    """``owner``'s own publication of ``name``, if any."""
    if not NAME.fullmatch(name):
        return None
    return _load(_folder(root, owner) / f"{name}.json")


def find(root: Path, qualified: str) -> Published | None:
    """The analysis published as ``<handle>/<name>``, else None. The text only picks among the names ``published/``
    lists; it is never joined into a path."""
    handle, _, name = qualified.partition("/")
    if not HANDLE.fullmatch(handle) or not NAME.fullmatch(name):
        return None
    wanted = f"{name}.json"
    handles = _handles(root)
    for home in _homes(root):
        if wanted in _names(root / home):
            record = _load(root / home / wanted)
            if record is not None and record.handle == handle and _theirs(record, handles):
                return record
    return None


def records(root: Path) -> list[Published]:
    """Every published analysis, by handle and name."""
    found = []
    handles = _handles(root)
    for home in _homes(root):
        for entry in _names(root / home):
            if entry.endswith(".json"):
                record = _load(root / home / entry)
                if record is not None and _theirs(record, handles):
                    found.append(record)
    return sorted(found, key=lambda r: (r.handle, r.name))


def others(root: Path, owner: str) -> list[Published]:
    """The analyses published by principals other than ``owner``: what the catalog lists beside their own."""
    return [r for r in records(root) if r.owner != owner]


def read(
    folder: Path, root: Path, name: str, owner: str, shared: bool = False
) -> tuple[dict[str, Any], Published | None]:
    """The manifest a caller (``owner``, their ``folder``) names: ``<handle>/<name>`` a published one (with its
    record), else their own; one they cannot see is ``UNKNOWN_ANALYSIS``, the same whether it was never saved, is
    another's or is no longer published."""
    if "/" not in name:
        try:
            return read_manifest(folder, name, shared), None
        except ToolFailure as failure:
            if failure.code != "UNKNOWN_ANALYSIS":
                raise
    else:
        record = find(root, name)
        if record is not None:
            return record.manifest, record
    raise unknown(name, folder, shared, [r.qualified for r in others(root, owner)])


def _folder(root: Path, owner: str) -> Path:
    return root / home_name(owner)


def _homes(root: Path) -> list[str]:
    """The owners' folders in ``published/`` (a link there is nobody's folder)."""
    try:
        with os.scandir(root) as entries:
            return sorted(e.name for e in entries if not e.name.startswith(".") and e.is_dir(follow_symlinks=False))
    except OSError:
        return []


def _names(folder: Path) -> list[str]:
    try:
        return sorted(n for n in os.listdir(folder) if not n.startswith("."))
    except OSError:
        return []


def _load(path: Path) -> Published | None:
    """A record as written by ``publish``; anything else (a half-written or foreign file) is no publication."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, encoding="utf-8") as f:
        try:
            data = json.loads(f.read())
        except ValueError:
            return None
    if not isinstance(data, dict) or not isinstance(data.get("manifest"), dict):
        return None
    handle, name = str(data.get("handle") or ""), str(data.get("name") or "")
    if not HANDLE.fullmatch(handle) or not NAME.fullmatch(name) or path.name != f"{name}.json":
        return None
    return Published(
        handle,
        name,
        str(data.get("owner") or ""),
        str(data.get("by") or handle),
        str(data.get("published") or ""),
        data["manifest"],
    )
