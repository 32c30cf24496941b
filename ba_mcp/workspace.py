"""The workspace: the one directory tree tools may touch, and the resolver of every reference into it.

References a model may pass: ``upload_<name>`` (a file in ``uploads/``), ``code_<12 hex>`` (code run
by run_python), ``artifact_<12 hex>`` (a stored result), or a path relative to the workspace root.
``Workspace.resolve()`` is the only way a tool turns one of those into a file, and it answers with an
**open descriptor**, never a path to open again (S-2): the file is opened once, beneath a descriptor of
the workspace root, with no symbolic link followed at any step (``openat2`` with
``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`` where the kernel has it, else an
``O_NOFOLLOW`` walk one component at a time from the root's descriptor). Readers read that descriptor
(``Resolved.open()``, or ``Resolved.path`` — ``/proc/self/fd/<n>``, which reopens the very file that was
opened, not a path in the workspace — for libraries that want a path), so swapping a file for a symlink
between a check and a read cannot redirect a tool. ``sessions/`` (written by the sandbox), ``logs/`` and
``published/`` (analyses published to the team, read as such) are not readable through any reference;
``artifacts/`` and ``code/`` only by id, and an id resolves only when ``Workspace.owned`` says the calling
session may read it (S-9: the stores own that answer, the App connects them). Only ids and
workspace-relative names are ever shown (S-1).
"""

from __future__ import annotations

import ctypes
import difflib
import errno
import os
import re
import stat
import urllib.parse
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Literal

from ba_mcp import callers
from ba_mcp.errors import ToolFailure, denied, invalid, not_found
from ba_mcp.ids import ARTIFACT_ID, CODE_ID, SQL_UPLOAD_ID, UPLOAD_ID, legacy_upload_id_for, upload_id_for

SUBDIRS = ("uploads", "artifacts", "code", "sessions", "data", "logs", "users", "published")
# never read through a reference; ``published/`` holds the analyses owners published to the team, written by the
# server on the owner's request and read only by the analyses' own code (ba_mcp.analyses.published)
PRIVATE_DIRS = frozenset({"sessions", "logs", "users", "published"})
# What a principal writes and owns by path (saved analyses, exports): a folder of each principal's own
# (``users/<principal>/``) when the server keeps principals apart, reached by every principal as ``analyses/``
# and ``exports/`` — another principal's is unknown by every path (S-19)
HOME_DIRS = frozenset({"analyses", "exports"})
STORE_DIRS = frozenset({"artifacts", "code"})  # read only by id, so that each session reaches only its own

MAX_REF_LENGTH = 4096
CLOSEST_LISTED = 20  # uploads a not-found error lists (with their ids) when none is close to the name asked for

RefKind = Literal["upload", "code", "artifact", "path", "root", "skill"]


@dataclass(frozen=True, eq=False)
class Resolved:
    """A reference resolved to a regular file inside the workspace, held open.

    ``name`` is what may be shown: the id for ids, the workspace-relative path otherwise; ``filename``
    is the file's own name (for its suffix). The descriptor is closed by ``close()`` or when the object
    is dropped.
    """

    kind: RefKind
    name: str
    ref_id: str | None
    filename: str
    size: int
    mtime_ns: int
    inode: int
    fd: int
    _closer: weakref.finalize | None = field(default=None, repr=False, compare=False)

    @property
    def identity(self) -> str:
        """Changes whenever the file's content may have changed (for cache keys)."""
        return f"{self.inode}:{self.size}:{self.mtime_ns}"

    @property
    def suffix(self) -> str:
        return Path(self.filename).suffix.lower()

    @property
    def path(self) -> Path:
        """A path for libraries that open by path: it reopens this very file (never shown to a client)."""
        return Path(f"/proc/self/fd/{self.fd}")

    def open(self) -> BinaryIO:
        """The file for reading, from its start, with an offset of its own."""
        return open(self.path, "rb")

    def close(self) -> None:
        if self._closer is not None:
            self._closer()


class Workspace:
    """The confined file tree. Create with ``Workspace.open(root)`` to make its layout."""

    def __init__(
        self,
        root: Path,
        read_roots: Mapping[str, Path] | None = None,
        shared: bool = False,
        owned: Callable[[RefKind, str], bool] | None = None,
        schemes: Mapping[str, Callable[[str], Resolved]] | None = None,
    ) -> None:
        self.root = Path(os.path.realpath(root))
        self.shared = shared  # artifacts.shared: one folder of analyses and exports for every principal
        self._root_fd: int | None = None
        # Read-only directories beyond the workspace (``files.read_roots``), reachable as <name>/<path>.
        self.read_roots = {name: Path(os.path.realpath(Path(p).expanduser())) for name, p in (read_roots or {}).items()}
        self._read_root_fds: dict[str, int] = {}
        # One handler per kind of reference: id prefixes, then URI schemes (``schemes``: ``<scheme>://…`` resolved
        # by its handler, which does its own confinement — the App's ``skill://``), then workspace-relative paths.
        self._prefixes: list[tuple[str, Callable[[str], Resolved]]] = [
            ("artifact_", self._artifact),
            ("code_", self._code),
            ("upload_", self._upload),
        ]
        self._schemes = {scheme.lower(): handler for scheme, handler in (schemes or {}).items()}
        # whether the calling session may read the stored item (an artifact or a code file) of an id: the stores
        # answer (S-9); None: every id resolves (a tool's own tests, the CLI's one user)
        self.owned: Callable[[RefKind, str], bool] = owned if owned is not None else lambda kind, ref_id: True

    def close(self) -> None:
        """Let go of the folders held open (the workspace's and the read roots'); a later use opens them again."""
        held = [self._root_fd, *self._read_root_fds.values()]
        self._root_fd, self._read_root_fds = None, {}
        for fd in held:
            if fd is not None:
                os.close(fd)

    def _root(self) -> int:
        if self._root_fd is None:
            self._root_fd = os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        return self._root_fd

    @classmethod
    def open(
        cls,
        root: Path,
        read_roots: Mapping[str, Path] | None = None,
        shared: bool = False,
        owned: Callable[[RefKind, str], bool] | None = None,
        schemes: Mapping[str, Callable[[str], Resolved]] | None = None,
    ) -> Workspace:
        ws = cls(root, read_roots, shared, owned, schemes)
        for sub in SUBDIRS:
            (ws.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(ws.root / "users", 0o700)
        os.chmod(ws.root / "published", 0o700)
        return ws

    def dir(self, name: str) -> Path:
        return self.root / name

    # -- each principal's own folders ---------------------------------------------------------

    def home(self) -> str | None:
        """The folder (beneath ``users/``) of what the calling principal writes and owns by path, or None when
        they work at the workspace's root: a stdio process or stateless HTTP (one analyst), the operator, or a
        server whose principals share everything (``artifacts.shared``)."""
        who = callers.principal_of(callers.current())
        if self.shared or who in (callers.DEFAULT, callers.EVERYONE):
            return None
        return home_name(who)

    def own(self, name: str, default: Path | None = None) -> Path:
        """The calling principal's folder ``name`` (one of HOME_DIRS): ``users/<principal>/<name>`` when the
        server keeps principals apart, else ``default`` (or ``<workspace>/<name>``)."""
        assert name in HOME_DIRS, name
        home = self.home()
        if home is None:
            return default if default is not None else self.root / name
        return self.root / "users" / home / name

    def homes(self) -> dict[str, Path]:
        """Every principal's folder (the operator's view): {folder name: path}."""
        return {p.name: p for p in _entries(self.root / "users") if p.is_dir()}

    def _homed(self, parts: list[str]) -> list[str]:
        """Workspace-relative ``parts`` as opened for the caller: ``analyses/…`` and ``exports/…`` in their own
        folder when they have one."""
        home = self.home() if parts and parts[0] in HOME_DIRS else None
        return ["users", home, *parts] if home is not None else parts

    # -- resolution ---------------------------------------------------------------------------

    def resolve(self, ref: str) -> Resolved:
        """Resolve a reference to a regular file inside the workspace.

        Raises ToolFailure: ``permission_denied`` for anything that would leave the workspace or is not
        a regular file (devices, FIFOs, sockets), ``not_found`` for unknown ids and missing files,
        ``invalid_parameters`` for malformed references.
        """
        ref = self._check_text(ref)
        for prefix, handler in self._prefixes:
            if ref.startswith(prefix):
                return handler(ref)
        if "://" in ref:
            scheme = ref.split("://", 1)[0].lower()
            if scheme in self._schemes:
                return self._schemes[scheme](ref)
            raise denied(
                f"'{scheme[:40]}://' references are not files of the workspace",
                "use web_reader for URLs; pass an upload id, an artifact id or a workspace-relative path",
            )
        return self._relative(ref)

    def _artifact(self, ref: str) -> Resolved:
        if not ARTIFACT_ID.match(ref):
            raise invalid(f"'{ref[:40]}' is not a valid artifact id", "artifact ids look like artifact_0123456789ab")
        return self._existing(self.root / "artifacts", ref, "artifact")

    def _code(self, ref: str) -> Resolved:
        if not CODE_ID.match(ref):
            return self._relative(ref)  # a file that happens to be named code_…
        return self._existing(self.root / "code", ref, "code")

    def _check_text(self, ref: str) -> str:
        if not isinstance(ref, str) or not ref.strip():
            raise invalid("path is empty", "pass an upload id, an artifact id or a workspace-relative path")
        if len(ref) > MAX_REF_LENGTH:
            raise invalid(f"path is {len(ref)} characters long; at most {MAX_REF_LENGTH} are accepted")
        if "\x00" in ref or any(ord(c) < 32 for c in ref):
            raise denied("path contains a NUL or control character")
        return ref.strip()

    def _relative(self, ref: str) -> Resolved:
        decoded = self._refuse_escapes(ref)
        parts = [p for p in re.split(r"[\\/]+", ref) if p not in ("", ".")]
        if parts and parts[0] in self.read_roots:
            return self._in_read_root(parts[0], "/".join(parts[1:]), ref)
        shown = "/".join(parts)
        relative = "/".join(self._homed(parts))
        if decoded != ref and not self._exists(relative):
            shown = "/".join(p for p in re.split(r"[\\/]+", decoded) if p not in ("", "."))
            relative = "/".join(self._homed(shown.split("/")))
        if len(parts) == 1 and not self._exists(relative) and self._exists(f"uploads/{relative}"):
            relative = shown = f"uploads/{relative}"  # a file named as the user knows it: sales.csv is uploads/…
        try:
            return open_resolved(self._root(), relative, ref, "path", None, display=shown)
        except ToolFailure as failure:
            if failure.code != "NOT_FOUND" or "does not exist" not in failure.message:
                raise
            raise not_found(failure.message, self._closest(parts[-1] if parts else ref)) from None

    def near(self, name: str, uploads: list[tuple[str, Path, os.stat_result]] | None = None) -> list[tuple[str, str]]:
        """The uploads (id, file name) closest to ``name`` — a file name, an id, a stem, or a table name a query
        gave one (``world_happiness_report``) — at most three."""
        uploads = self.uploads() if uploads is None else uploads
        keys = {
            **{p.name: uid for uid, p, _ in uploads},
            **{uid: uid for uid, _, _ in uploads},
            **{p.stem: uid for uid, p, _ in uploads},
            **{uid[len("upload_") :]: uid for uid, _, _ in uploads},
        }
        close = difflib.get_close_matches(name, list(keys), n=3, cutoff=0.6)
        names = {uid: p.name for uid, p, _ in uploads}
        return [(uid, names[uid]) for uid in dict.fromkeys(keys[c] for c in close)]

    def _closest(self, name: str) -> str:
        """A hint naming the uploads closest to ``name`` with the ids that read them, else every upload's id."""
        uploads = self.uploads()
        found = self.near(name, uploads)
        if found:
            return "did you mean " + " or ".join(f"{uid} (uploads/{filename})" for uid, filename in found) + "?"
        # Listed in the text itself: a host that shows the model only tools (Claude Desktop) cannot read ba://files
        if not uploads:
            return "there are no uploads: put files in the workspace's uploads/ folder"
        shown = ", ".join(f"{uid} (uploads/{p.name})" for uid, p, _ in uploads[:CLOSEST_LISTED])
        left = len(uploads) - CLOSEST_LISTED
        more = f", … {left:,} more (file_reader on uploads/ lists them all)" if left > 0 else ""
        return f"the uploads, each with the id that reads it (in SQL too): {shown}{more}"

    def _refuse_escapes(self, ref: str) -> str:
        """Refuse absolute paths, '..' and the private folders, in the text and its percent-decoded form;
        returns the decoded form."""
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
            parts = [p for p in re.split(r"[\\/]+", form) if p not in ("", ".")]
            if ".." in parts:
                raise denied("'..' is not allowed in paths", "pass a path inside the workspace, e.g. uploads/sales.csv")
            if parts and parts[0] in PRIVATE_DIRS:
                raise denied(
                    f"'{parts[0]}/' is not readable through the tools",
                    "files move from run_python to the other tools with save_artifact(obj); read uploads/ files "
                    "and artifacts by id",
                )
            if parts and parts[0] in STORE_DIRS:
                raise denied(
                    f"'{parts[0]}/' is read by id only",
                    "pass the id (artifact_… or code_…); the resource ba://files lists this session's",
                )
        return decoded

    def _in_read_root(self, name: str, relative: str, ref: str) -> Resolved:
        """A file of the read root ``name``: opened beneath that directory like a workspace file, and
        refused if it is in fact the workspace's private ``sessions/`` or ``logs/`` (a root that holds
        the workspace), judged on the opened descriptor itself."""
        shown = f"{name}/{relative}"
        fd = self._read_root_fd(name)
        if not relative:
            raise not_found(f"'{name}/' is a directory, not a file", f"pass a file's path, e.g. {name}/data/sales.csv")
        self._not_private(name, relative, shown)
        resolved = open_resolved(fd, relative, shown, "root", None, display=shown, where=f"{name}/")
        try:
            real = Path(os.readlink(f"/proc/self/fd/{resolved.fd}"))
        except OSError:
            real = None
        if real is not None and any(real.is_relative_to(self.root / d) for d in PRIVATE_DIRS | STORE_DIRS):
            resolved.close()
            raise denied(f"'{shown[:200]}' is a private folder of the workspace", "read artifacts and code by id")
        return resolved

    def _not_private(self, name: str, relative: str, shown: str) -> None:
        """Refuse a path of a read root that lies in the workspace's private or store folders by its very name,
        before anything is opened: whether such a file exists is nobody's to learn (another user's export, an
        artifact id). No link is followed beneath a read root, so the name is where the path leads."""
        target = self.read_roots[name].joinpath(*[p for p in relative.split("/") if p not in ("", ".")])
        if any(target == self.root / d or target.is_relative_to(self.root / d) for d in PRIVATE_DIRS | STORE_DIRS):
            raise denied(f"'{shown[:200]}' is a private folder of the workspace", "read artifacts and code by id")

    def _read_root_fd(self, name: str) -> int:
        fd = self._read_root_fds.get(name)
        if fd is None:
            try:
                fd = os.open(self.read_roots[name], os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as exc:
                raise not_found(
                    f"the read root '{name}' is not available: {exc.strerror}",
                    "check files.read_roots (or serve --read-root) in the server's configuration",
                ) from None
            self._read_root_fds[name] = fd
        return fd

    def _exists(self, relative: str) -> bool:
        try:
            os.stat(relative, dir_fd=self._root(), follow_symlinks=False)
            return True
        except OSError:
            return False

    def _upload(self, ref: str) -> Resolved:
        if not UPLOAD_ID.match(ref):
            safe = upload_id_for(ref[len("upload_") :] + ".x")  # the id its file would have: spaces become _
            same = [uid for uid, _, _ in self.uploads() if uid == safe]
            raise invalid(
                f"'{ref[:60]}' is not a valid upload id",
                f"its id is {same[0]}" if same else self._closest(ref[len("upload_") :]),
            )
        want = ref[len("upload_") :]
        names = _names(self.root / "uploads")  # one listing, names only (a query may name eight uploads)
        matches = [n for n in names if n == want] or [n for n in names if ref in _ids_of(n)]
        if not matches:  # SQL matches identifiers whatever their case: so does an id (upload_q3_sales, Q3 sales.csv)
            matches = [n for n in names if ref.lower() in {i.lower() for i in _ids_of(n)}]
        if len(matches) > 1:  # the full-name id of one of files whose stems collide (upload_sales_csv)
            matches = [n for n in matches if upload_id_for(n, whole=True) == ref] or matches
        if not matches:
            raise not_found(f"no upload with id {ref}", self._closest(want))
        if len(matches) > 1:
            listed = ", ".join(sorted(f"uploads/{n}" for n in matches))
            raise invalid(f"{ref} is ambiguous: it names {listed}", "pass the workspace-relative path instead")
        # an id of the file shown before ids were SQL identifiers (upload_data-2020.v1): shown by its id now
        shown = ref if SQL_UPLOAD_ID.match(ref) else (self.upload_id(matches[0]) or ref)
        return self._confined(f"uploads/{matches[0]}", shown, "upload", shown)

    def _existing(self, folder: Path, ref_id: str, kind: RefKind) -> Resolved:
        # A stored item is listed by its metadata file, committed after the data file (T-A):
        # data without metadata is a half-written item and does not exist for readers.
        listed = (folder / f"{ref_id}.meta.json").is_file()
        matches = sorted(n for n in _names(folder) if n.split(".", 1)[0] == ref_id and not n.endswith(".meta.json"))
        if not listed or not matches or not self.owned(kind, ref_id):  # another session's: as if it were not there
            what = "artifact" if kind == "artifact" else "code file"
            raise not_found(
                f"no {what} with id {ref_id} (it may have expired)",
                "read the resource ba://files for what is available",
            )
        return self._confined(f"{folder.name}/{matches[0]}", ref_id, kind, ref_id)

    def _confined(self, relative: str, shown: str, kind: RefKind, ref_id: str | None) -> Resolved:
        """Open ``relative`` beneath the root without following any link, and keep it open."""
        return open_resolved(self._root(), relative, shown, kind, ref_id)

    # -- listing ------------------------------------------------------------------------------

    def directory(self, ref: str) -> tuple[str, list[Entry], bool] | None:
        """The entries of a directory a reference names — a read root or a folder in it (``project/``,
        ``project/data``), or a workspace folder (``uploads/``) — as (the name to show, entries sorted by
        name, whether more entries exist than were read). None when the reference is not a directory.
        The directory is opened beneath its root like a file (no link followed, nothing outside reached);
        links inside it are listed as links, never followed; ``sessions/`` and ``logs/`` are refused."""
        if not isinstance(ref, str) or not ref.strip() or ref.startswith(("artifact_", "code_", "upload_")):
            return None
        if "://" in ref:
            return None
        ref = self._check_text(ref)
        parts = [p for p in re.split(r"[\\/]+", ref) if p not in ("", ".")]
        if not parts:
            return None
        self._refuse_escapes(ref)  # the same refusals as for a file ('..', absolute, private folders)
        if parts[0] in self.read_roots:
            root_fd, relative, where = self._read_root_fd(parts[0]), "/".join(parts[1:]), f"{parts[0]}/"
            self._not_private(parts[0], relative, ref)
        else:
            root_fd, relative, where = self._root(), "/".join(self._homed(parts)), "the workspace"
        try:
            if relative:
                fd = open_beneath(root_fd, relative, directory=True)
            else:  # the read root itself: a readable descriptor of the directory its O_PATH one names
                fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=root_fd)
        except (NotADirectoryError, FileNotFoundError):
            return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EXDEV):
                raise denied(f"'{ref[:200]}' goes through a symbolic link or out of {where}") from None
            return None
        try:
            if parts[0] in self.read_roots:
                real = Path(os.readlink(f"/proc/self/fd/{fd}"))
                if any(real.is_relative_to(self.root / d) for d in PRIVATE_DIRS | STORE_DIRS):
                    raise denied(f"'{ref[:200]}' is a private folder of the workspace")
            entries, more = _scan(fd, "/".join(parts))
        finally:
            _close(fd)
        return "/".join(parts) + "/", entries, more

    def uploads(self) -> list[tuple[str, Path, os.stat_result]]:
        """(id, path, stat) of every regular file directly in uploads/. Each id is an SQL identifier
        (``ids.upload_id_for``); files whose short ids collide (sales.csv, sales.xlsx) are listed by their
        full-name ids (upload_sales_csv), and files whose full-name ids collide too (a-b.csv, a_b.csv) by
        ``upload_`` + the file name itself (written in double quotes in SQL). All of them resolve."""
        files = []
        for p in _entries(self.root / "uploads"):
            try:
                st = p.stat()
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                files.append((p, st))
        short = _counts(upload_id_for(p.name) for p, _ in files)
        whole = _counts(upload_id_for(p.name, whole=True) for p, _ in files)
        listed = []
        for p, st in files:
            uid = upload_id_for(p.name)
            if short[uid] > 1:
                uid = upload_id_for(p.name, whole=True)
                uid = uid if whole[uid] == 1 else "upload_" + p.name
            listed.append((uid, p, st))
        return listed

    def upload_id(self, filename: str) -> str | None:
        """The id the upload ``uploads/<filename>`` is listed by (None: no such upload)."""
        return next((uid for uid, p, _ in self.uploads() if p.name == filename), None)


@dataclass(frozen=True)
class Entry:
    """One entry of a listed directory: the path to pass to the tools, what it is, its size and time."""

    path: str
    kind: Literal["file", "directory", "link", "other"]
    size: int | None
    modified_ns: int


MAX_LISTED = 100_000  # entries read from one directory at the most


def _scan(fd: int, shown: str) -> tuple[list[Entry], bool]:
    """The entries of the directory ``fd`` (hidden names left out), by name; stat'ed without following links."""
    entries: list[Entry] = []
    more = False
    with os.scandir(fd) as it:
        for item in it:
            if item.name.startswith("."):
                continue
            if len(entries) >= MAX_LISTED:
                more = True
                break
            try:
                st = os.stat(item.name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                kind: Literal["file", "directory", "link", "other"] = "link"
            elif stat.S_ISDIR(st.st_mode):
                kind = "directory"
            elif stat.S_ISREG(st.st_mode):
                kind = "file"
            else:
                kind = "other"
            path = f"{shown}/{item.name}" + ("/" if kind == "directory" else "")
            entries.append(Entry(path, kind, st.st_size if kind == "file" else None, st.st_mtime_ns))
    entries.sort(key=lambda e: e.path)
    return entries, more


def open_resolved(
    root_fd: int,
    relative: str,
    shown: str,
    kind: RefKind,
    ref_id: str | None,
    *,
    allow_links: bool = False,
    display: str | None = None,
    where: str = "the workspace",
) -> Resolved:
    """Open ``relative`` beneath the directory ``root_fd`` and keep it open. ``shown`` names it in errors,
    ``display`` (default: the id, else ``relative``) is the Resolved's name; ``where`` names the directory
    in errors. No symbolic link is followed (``allow_links``: links that stay beneath the directory are),
    nothing outside the directory is reached; directories, devices, FIFOs and sockets are refused."""
    if not relative:
        raise not_found(f"'{shown[:200]}' is a directory, not a file", "read the resource ba://files")
    try:
        fd = open_beneath(root_fd, relative, allow_links=allow_links)
    except FileNotFoundError:
        raise not_found(
            f"'{shown[:200]}' does not exist in {where}", "read the resource ba://files for what is available"
        ) from None
    except IsADirectoryError:
        raise not_found(f"'{shown[:200]}' is a directory, not a file", "read the resource ba://files") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EXDEV, errno.ENOTDIR):
            raise denied(
                f"'{shown[:200]}' goes through a symbolic link or out of {where}",
                f"only files inside {where} can be read",
            ) from None
        raise denied(f"'{shown[:200]}' cannot be opened") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise not_found(f"'{shown[:200]}' is a directory, not a file", "read the resource ba://files")
        if not stat.S_ISREG(st.st_mode):
            raise denied(f"'{shown[:200]}' is not a regular file (device, FIFO or socket)")
        # Reads block normally from here on (the descriptor was opened non-blocking for FIFOs' sake).
        os.set_blocking(fd, True)
    except BaseException:
        _close(fd)
        raise
    name = display or (shown if ref_id else relative)
    filename = relative.rsplit("/", 1)[-1]
    resolved = Resolved(kind, name, ref_id, filename, st.st_size, st.st_mtime_ns, st.st_ino, fd)
    object.__setattr__(resolved, "_closer", weakref.finalize(resolved, _close, fd))  # the fd lives as long
    return resolved


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


# openat2(2): Linux ≥ 5.6; the syscall number is the same on every architecture.
_SYS_OPENAT2 = 437
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_openat2_missing = False


def open_beneath(root_fd: int, relative: str, *, allow_links: bool = False, directory: bool = False) -> int:
    """Open ``relative`` for reading beneath the directory ``root_fd``: no symbolic link is followed at any
    step, and nothing outside the directory can be reached. Raises OSError (ELOOP for a link, EXDEV for an
    escape, ENOENT, …). ``allow_links``: symbolic links that resolve beneath the directory are followed
    (the kernel refuses any that leave it); where openat2 is missing, links are refused all the same."""
    global _openat2_missing
    if not _openat2_missing:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            resolve = _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS | (0 if allow_links else _RESOLVE_NO_SYMLINKS)
            how = _OpenHow(_OPEN_FLAGS | (os.O_DIRECTORY if directory else 0), 0, resolve)
            fd = libc.syscall(_SYS_OPENAT2, root_fd, relative.encode(), ctypes.byref(how), ctypes.sizeof(how))
            if fd >= 0:
                return int(fd)
            err = ctypes.get_errno()
            if err not in (errno.ENOSYS, errno.EPERM):  # EPERM: a seccomp filter that does not know it
                raise OSError(err, os.strerror(err), relative)
            _openat2_missing = True
        except AttributeError:
            _openat2_missing = True
    return _walk_beneath(root_fd, relative, directory)


def _walk_beneath(root_fd: int, relative: str, directory: bool = False) -> int:
    """The portable form: one component at a time from ``root_fd``, each opened with O_NOFOLLOW."""
    parts = relative.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise OSError(errno.EXDEV, "not beneath the workspace", relative)
    current = root_fd
    try:
        for part in parts[:-1]:
            nxt = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current)
            if current != root_fd:
                os.close(current)
            current = nxt
        return os.open(parts[-1], _OPEN_FLAGS | os.O_NOFOLLOW | (os.O_DIRECTORY if directory else 0), dir_fd=current)
    finally:
        if current != root_fd:
            os.close(current)


def _ids_of(filename: str) -> set[str]:
    """Every id that names the upload ``filename``: the short and full-name ids, and the short id shown before
    ids were SQL identifiers."""
    return {upload_id_for(filename), upload_id_for(filename, whole=True), legacy_upload_id_for(filename)}


def _counts(values: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def _names(folder: Path) -> list[str]:
    """The names in ``folder`` but hidden ones, unsorted (none when it cannot be read)."""
    try:
        return [n for n in os.listdir(folder) if not n.startswith(".")]
    except OSError:
        return []


def _entries(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    except OSError:
        return []


_HOME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def home_name(principal: str) -> str:
    """The folder name of a principal's own files: their key when it is a plain name (``user-<digest>``,
    ``http-<digest>``), else a digest of it."""
    if _HOME.fullmatch(principal) and principal not in (".", ".."):
        return principal
    import hashlib

    return "k-" + hashlib.sha256(principal.encode("utf-8", "replace")).hexdigest()[:24]
