"""The code store: code run by run_python, content-addressed in the workspace's ``code/`` folder."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any


class CodeStore:
    """Code run by run_python, kept as ``code_<12 hex>.py`` (content-addressed) plus ``.meta.json`` in the
    workspace's ``code/`` folder (seed 002's code store). The metadata is written last, so a half-written
    code file is never listed; the store stays under ``max_bytes`` (least recently used first) and forgets
    files unused for ``ttl_s``. The one place that knows the folder's layout."""

    def __init__(self, folder: Path, max_bytes: int, ttl_s: float) -> None:
        self.folder = folder
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        folder.mkdir(parents=True, exist_ok=True)

    def put(self, code: str, language: str = "python") -> str:
        """Store ``code``; returns its id (the same code gets the same id)."""
        code_id = "code_" + hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        meta_path = self.folder / f"{code_id}.meta.json"
        if meta_path.exists():
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
        }
        for path, data in (
            (self.folder / f"{code_id}.py", code.encode("utf-8", "surrogatepass")),
            (meta_path, json.dumps(meta, ensure_ascii=False).encode()),
        ):
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")  # unique per writer, threads included
            tmp.write_bytes(data)
            os.replace(tmp, path)
        self.trim(keep=code_id)
        return code_id

    def list(self) -> list[dict[str, Any]]:
        """The metadata of every stored code file, by id."""
        metas = []
        for meta_path in sorted(self.folder.glob("code_*.meta.json")):
            try:
                metas.append(json.loads(meta_path.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue
        return metas

    def trim(self, keep: str = "") -> int:
        """Remove code unused for ``ttl_s``, then the least recently used until the store holds at most
        ``max_bytes``. Returns how many were removed."""
        entries = []
        for meta in self.folder.glob("code_*.meta.json"):
            code_id = meta.name[: -len(".meta.json")]
            try:
                size = meta.stat().st_size + (self.folder / f"{code_id}.py").stat().st_size
                used = meta.stat().st_mtime
            except OSError:
                continue
            entries.append((used, code_id, size))
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
