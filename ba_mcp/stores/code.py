"""The code store: code run by run_python, content-addressed in the workspace's ``code/`` folder."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from ba_mcp import callers


class CodeStore:
    """Code run by run_python, kept as ``code_<12 hex>.py`` (content-addressed) plus ``.meta.json`` in the
    workspace's ``code/`` folder (seed 002's code store). The metadata is written last, so a half-written
    code file is never listed; the store stays under ``max_bytes`` (least recently used first) and forgets
    files unused for ``ttl_s``. The one place that knows the folder's layout.

    Like artifacts, code belongs to the sessions that ran it (``owners``; S-9): ``list`` and ``visible``
    answer for the current session (``ba_mcp.callers``) unless ``shared``."""

    def __init__(self, folder: Path, max_bytes: int, ttl_s: float, shared: bool = False) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self.shared = shared
        self._lock = threading.Lock()
        folder.mkdir(parents=True, exist_ok=True)

    def put(self, code: str, language: str = "python") -> str:
        """Store ``code``; returns its id (the same code gets the same id)."""
        digest = hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()
        who = callers.principal_of(callers.current())
        if not self.shared and who not in (callers.DEFAULT, callers.EVERYONE):  # each principal's own (S-19)
            digest = hashlib.sha256(f"{who}\0{digest}".encode()).hexdigest()
        code_id = "code_" + digest[:12]
        meta_path = self.folder / f"{code_id}.meta.json"
        known = self._meta(code_id)
        if known is not None:
            with self._lock:
                known = self._meta(code_id) or known
                owners = callers.with_owner(known.get("owners", [callers.DEFAULT]))
                if owners is not None:
                    self._write(meta_path, json.dumps({**known, "owners": owners}, ensure_ascii=False).encode())
            with contextlib.suppress(OSError):
                os.utime(meta_path)  # recently used
            return code_id
        first = next((line.strip() for line in code.splitlines() if line.strip()), "")
        description = first.lstrip("#").strip() if first.startswith("#") else first
        meta = {
            "id": code_id,
            "language": language,
            "description": description[:120],
            "line_count": code.count("\n") + 1,
            "chars": len(code),
            "created": time.time(),
            "owners": callers.new_owners(),
        }
        self._write(self.folder / f"{code_id}.py", code.encode("utf-8", "surrogatepass"))
        self._write(meta_path, json.dumps(meta, ensure_ascii=False).encode())
        self.trim(keep=code_id)
        return code_id

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")  # unique per writer, threads included
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def _meta(self, code_id: str) -> dict[str, Any] | None:
        try:
            meta = json.loads((self.folder / f"{code_id}.meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return meta if isinstance(meta, dict) else None

    def visible(self, code_id: str) -> bool:
        """Whether the code file ``code_id`` exists for the current session."""
        meta = self._meta(code_id)
        return meta is not None and callers.may_read(meta.get("owners", [callers.DEFAULT]), self.shared)

    def list(self) -> list[dict[str, Any]]:
        """The metadata of the current session's stored code files, by id (owners left out)."""
        metas = []
        for meta_path in sorted(self.folder.glob("code_*.meta.json")):
            meta = self._meta(meta_path.name[: -len(".meta.json")])
            if meta is not None and callers.may_read(meta.get("owners", [callers.DEFAULT]), self.shared):
                metas.append({k: v for k, v in meta.items() if k != "owners"})
        return metas

    def trim(self, keep: str = "") -> int:
        """Remove code unused for ``ttl_s``, then the least recently used until the store holds at most
        ``max_bytes``. Returns how many were removed."""
        # os.scandir, not Path.glob: this runs on every new code file, and pathlib interns each name it makes —
        # the interpreter's table of interned strings grew with the store and never shrank (issue 40, P-8)
        entries = []
        folder = str(self.folder)
        with os.scandir(folder) as listing:
            for meta in listing:
                if not (meta.name.startswith("code_") and meta.name.endswith(".meta.json")):
                    continue
                code_id = meta.name[: -len(".meta.json")]
                try:
                    stat = meta.stat()
                    size = stat.st_size + os.stat(os.path.join(folder, f"{code_id}.py")).st_size
                except OSError:
                    continue
                entries.append((stat.st_mtime, code_id, size))
        total = sum(size for _, _, size in entries)
        now = time.time()
        removed = 0
        for used, code_id, size in sorted(entries):
            expired = self.ttl_s and now - used > self.ttl_s
            if code_id == keep or (total <= self.max_bytes and not expired):
                continue
            for name in (f"{code_id}.meta.json", f"{code_id}.py"):  # unlisted first
                with contextlib.suppress(FileNotFoundError):
                    (self.folder / name).unlink()
            total -= size
            removed += 1
        return removed
