"""The workspace: the one directory tree tools may touch, and the resolver of every reference into it.

References a model may pass: ``upload_<name>`` (a file in ``uploads/``), ``code_<12 hex>`` (code run
by run_python), ``artifact_<12 hex>`` (a stored result), or a path relative to the workspace root.
``Workspace.resolve()`` is the only way a tool turns one of those into a file: it confines the real
path to the workspace (S-2) and only ever answers with ids and workspace-relative names (S-1).
"""

from __future__ import annotations

import os
import re
import stat
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ba_mcp.pipeline.errors import denied, invalid, not_found

SUBDIRS = ("uploads", "artifacts", "code", "sessions", "data", "logs")

ARTIFACT_ID = re.compile(r"^artifact_[0-9a-f]{12}$")
CODE_ID = re.compile(r"^code_[0-9a-f]{12}$")
UPLOAD_ID = re.compile(r"^upload_[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")
MAX_REF_LENGTH = 4096

RefKind = Literal["upload", "code", "artifact", "path"]


@dataclass(frozen=True)
class Resolved:
    """A reference resolved to a regular file inside the workspace.

    ``path`` is the real path (never shown to a client); ``name`` is what may be shown:
    the id for ids, the workspace-relative path otherwise.
    """

    kind: RefKind
    path: Path
    name: str
    ref_id: str | None
    size: int
    mtime_ns: int
    inode: int

    @property
    def identity(self) -> str:
        """Changes whenever the file's content may have changed (for cache keys)."""
        return f"{self.inode}:{self.size}:{self.mtime_ns}"


def upload_id_for(filename: str) -> str:
    """The id of an upload: ``upload_`` + its file name without the extension, made id-safe."""
    stem = filename.rsplit(".", 1)[0] if "." in filename[1:] else filename
    return "upload_" + re.sub(r"[^A-Za-z0-9._-]", "_", stem)


class Workspace:
    """The confined file tree. Create with ``Workspace.open(root)`` to make its layout."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.realpath(root))

    @classmethod
    def open(cls, root: Path) -> Workspace:
        ws = cls(root)
        for sub in SUBDIRS:
            (ws.root / sub).mkdir(parents=True, exist_ok=True)
        return ws

    def dir(self, name: str) -> Path:
        return self.root / name

    # -- resolution ---------------------------------------------------------------------------

    def resolve(self, ref: str) -> Resolved:
        """Resolve a reference to a regular file inside the workspace.

        Raises ToolFailure: ``permission_denied`` for anything that would leave the workspace or is not
        a regular file (devices, FIFOs, sockets), ``not_found`` for unknown ids and missing files,
        ``invalid_parameters`` for malformed references.
        """
        ref = self._check_text(ref)
        if ref.startswith("artifact_"):
            if not ARTIFACT_ID.match(ref):
                raise invalid(
                    f"'{ref[:40]}' is not a valid artifact id", "artifact ids look like artifact_0123456789ab"
                )
            return self._existing(self.root / "artifacts", ref, "artifact")
        if ref.startswith("code_") and CODE_ID.match(ref):
            return self._existing(self.root / "code", ref, "code")
        if ref.startswith("upload_"):
            return self._upload(ref)
        if "://" in ref:
            scheme = ref.split("://", 1)[0].lower()
            if scheme == "skill":
                raise not_found(
                    "no skills are installed on this server, so skill:// paths cannot be read",
                    "read the resource ba://files for what can be read",
                )
            raise denied(
                f"'{scheme}://' references are not files of the workspace",
                "use web_reader for URLs; pass an upload id, an artifact id or a workspace-relative path",
            )
        return self._relative(ref)

    def relative_name(self, real: Path) -> str:
        return real.relative_to(self.root).as_posix()

    def _check_text(self, ref: str) -> str:
        if not isinstance(ref, str) or not ref.strip():
            raise invalid("path is empty", "pass an upload id, an artifact id or a workspace-relative path")
        if len(ref) > MAX_REF_LENGTH:
            raise invalid(f"path is {len(ref)} characters long; at most {MAX_REF_LENGTH} are accepted")
        if "\x00" in ref or any(ord(c) < 32 for c in ref):
            raise denied("path contains a NUL or control character")
        return ref.strip()

    def _relative(self, ref: str) -> Resolved:
        decoded = ref
        for _ in range(3):  # undo (nested) percent-encoding before judging the path
            nxt = urllib.parse.unquote(decoded)
            if nxt == decoded:
                break
            decoded = nxt
        for form in {ref, decoded}:
            if "\x00" in form:
                raise denied("path contains a NUL character")
            if form.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:", form):
                raise denied(
                    "absolute paths are not allowed",
                    "pass a path relative to the workspace, e.g. uploads/sales.csv, or an upload id",
                )
            if ".." in re.split(r"[\\/]+", form):
                raise denied("'..' is not allowed in paths", "pass a path inside the workspace, e.g. uploads/sales.csv")
        candidate = self.root / ref
        if not os.path.lexists(candidate) and decoded != ref:
            candidate = self.root / decoded
        return self._confined(candidate, ref, "path", None)

    def _upload(self, ref: str) -> Resolved:
        if not UPLOAD_ID.match(ref):
            raise invalid(f"'{ref[:60]}' is not a valid upload id", "upload ids look like upload_sales")
        want = ref[len("upload_") :]
        uploads = self.root / "uploads"
        exact = [p for p in _entries(uploads) if p.name == want]
        matches = exact or [p for p in _entries(uploads) if upload_id_for(p.name) == ref]
        if not matches:
            raise not_found(f"no upload with id {ref}", "read the resource ba://files for the ids of uploads")
        if len(matches) > 1:
            names = ", ".join(sorted(f"uploads/{p.name}" for p in matches))
            raise invalid(f"{ref} is ambiguous: it names {names}", "pass the workspace-relative path instead")
        return self._confined(matches[0], ref, "upload", ref)

    def _existing(self, folder: Path, ref_id: str, kind: RefKind) -> Resolved:
        # A stored item is listed by its metadata file, committed after the data file (T-A):
        # data without metadata is a half-written item and does not exist for readers.
        listed = (folder / f"{ref_id}.meta.json").is_file()
        matches = [
            p for p in _entries(folder) if p.name.split(".", 1)[0] == ref_id and not p.name.endswith(".meta.json")
        ]
        if not listed or not matches:
            what = "artifact" if kind == "artifact" else "code file"
            raise not_found(
                f"no {what} with id {ref_id} (it may have expired)",
                "read the resource ba://files for what is available",
            )
        return self._confined(matches[0], ref_id, kind, ref_id)

    def _confined(self, candidate: Path, shown: str, kind: RefKind, ref_id: str | None) -> Resolved:
        real = Path(os.path.realpath(candidate))
        if real != self.root and self.root not in real.parents:
            raise denied(
                f"'{shown[:200]}' resolves outside the workspace",
                "only files inside the workspace can be read (symbolic links may not point out of it)",
            )
        try:
            # O_NONBLOCK: opening a FIFO must not hang; fstat on the opened file decides what it is.
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            raise not_found(
                f"'{shown[:200]}' does not exist in the workspace", "read the resource ba://files for what is available"
            ) from None
        except IsADirectoryError:
            raise not_found(f"'{shown[:200]}' is a directory, not a file", "read the resource ba://files") from None
        except PermissionError:
            raise denied(f"'{shown[:200]}' cannot be opened: permission denied") from None
        except OSError:
            raise denied(f"'{shown[:200]}' cannot be opened") from None
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            raise not_found(f"'{shown[:200]}' is a directory, not a file", "read the resource ba://files")
        if not stat.S_ISREG(st.st_mode):
            raise denied(f"'{shown[:200]}' is not a regular file (device, FIFO or socket)")
        name = shown if ref_id else self.relative_name(real)
        return Resolved(kind, real, name, ref_id, st.st_size, st.st_mtime_ns, st.st_ino)

    # -- listing ------------------------------------------------------------------------------

    def uploads(self) -> list[tuple[str, Path, os.stat_result]]:
        """(id, path, stat) of every regular file directly in uploads/. Files whose short ids collide
        (sales.csv, sales.xlsx) are listed by their full-name ids (upload_sales.csv), which resolve too."""
        files = []
        for p in _entries(self.root / "uploads"):
            try:
                st = p.stat()
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                files.append((upload_id_for(p.name), p, st))
        counts: dict[str, int] = {}
        for uid, _, _ in files:
            counts[uid] = counts.get(uid, 0) + 1
        return [(uid if counts[uid] == 1 else "upload_" + p.name, p, st) for uid, p, st in files]


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    except OSError:
        return []
