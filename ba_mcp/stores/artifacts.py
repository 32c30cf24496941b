"""The artifact store (T-A): results kept by the server, referenced by ``artifact_<12 hex>`` ids.

Layout in ``<workspace>/artifacts/``: ``<id>.<ext>`` holds the content (tables as Parquet, text as
UTF-8, JSON as JSON, images as PNG) and ``<id>.meta.json`` its metadata. The id is the first 12 hex
digits of the content's SHA-256, so the same result is stored once.

Crash safety (S-7): content is written to ``.tmp/``, fsynced and renamed into place; the metadata
file is committed the same way *after* it. An artifact exists for readers only when its metadata
exists, so a kill -9 at any moment leaves either nothing listed or a complete artifact; orphans are
removed by ``cleanup()``. Cleanup never deletes an artifact that a reader holds (``reading()``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ba_mcp import callers
from ba_mcp.errors import Code, ErrorType, ToolFailure, not_found
from ba_mcp.ids import ARTIFACT_ID

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import pyarrow as pa

    from ba_mcp.settings import ArtifactSettings
    from ba_mcp.workspace import Resolved

KIND_EXT = {"table": "parquet", "text": "txt", "markdown": "md", "json": "json", "image": "png"}
_TOUCH_EVERY_S = 60.0
_ORPHAN_AGE_S = 3600.0


@dataclass
class ArtifactMeta:
    id: str
    kind: str  # table | text | markdown | json | image
    mime: str
    ext: str
    size: int
    sha256: str
    title: str
    source_tool: str
    created: float
    last_accessed: float
    rows: int | None = None
    columns: list[dict[str, str]] = field(default_factory=list)
    summary: str = ""
    owners: list[str] = field(default_factory=lambda: [callers.DEFAULT])

    @property
    def uri(self) -> str:
        return f"artifact://{self.id}"

    def public(self) -> dict[str, Any]:
        """Metadata as shown to clients (no paths)."""
        data = asdict(self)
        data.pop("ext")
        data.pop("owners")
        data["uri"] = self.uri
        return data


class ParquetIO(Protocol):
    """Writes a table as Parquet into an open descriptor and reads one from it — elsewhere (the server's: a DuckDB
    worker, ``workers.work.DuckParquet``, so the server holds no Parquet code: issue 40)."""

    def write(self, table: pa.Table, fd: int) -> None: ...

    def read(self, fd: int) -> pa.Table: ...


class ArtifactStore:
    """``parquet``: where tables are written and read as Parquet (None: in this process — tests, ``rerun``)."""

    def __init__(self, root: Path, settings: ArtifactSettings, parquet: ParquetIO | None = None) -> None:
        self.root = root
        self.settings = settings
        self._tmp = root / ".tmp"
        self._tmp.mkdir(parents=True, exist_ok=True)
        self._in_use: dict[str, int] = {}
        self.parquet = parquet
        self._lock = threading.Lock()
        self._commit_lock = threading.Lock()  # room is made and the artifact listed as one step
        self._meta_lock = threading.Lock()  # metadata is re-read and rewritten as one step (owners, access time)
        # The listed artifacts' sizes as this process last counted them: a new artifact checks the store's total
        # without reading every metadata file. Every listing and removal, by any server on this workspace, adds one
        # byte to .changes (an O_APPEND write: its length is a change counter); the count is redone when the
        # counter moved by anything but this process's own changes.
        self._sizes: dict[str, int] | None = None
        self._seen_changes = -1
        self._changes = root / ".changes"
        self._index_lock = threading.Lock()

    @property
    def max_single_bytes(self) -> int:
        """The largest artifact the store takes: never more than the whole store's cap."""
        return min(self.settings.max_artifact_bytes, self.settings.max_bytes)

    # -- writing ------------------------------------------------------------------------------

    def put_table(self, table: pa.Table, *, title: str, source_tool: str) -> ArtifactMeta:
        return self.put_table_writer(
            lambda path: self._write_parquet(table, path),
            title=title,
            source_tool=source_tool,
            known=(table.num_rows, table.schema),  # what the file's footer would say: not read back
        )

    def _write_parquet(self, table: pa.Table, path: Path) -> None:
        """``table`` as a zstd Parquet file: by ``parquet`` when the store has one (the server's: a DuckDB
        worker writes it, so the server holds no Parquet writer — issue 40), else here (tests, ``rerun``). A
        writer that fails leaves the write to this process, and says so in the log."""
        if self.parquet is not None:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                self.parquet.write(table, fd)
                return
            except Exception as exc:  # the worker is busy or gone: the artifact is still written, here
                log.warning("the engine worker could not write %s (%s); writing it in the server", path.name, exc)
            finally:
                os.close(fd)
        import pyarrow.parquet as pq

        pq.write_table(table, path, compression="zstd")

    def put_table_writer(
        self,
        write: Callable[[Path], Any],
        *,
        title: str,
        source_tool: str,
        known: tuple[int, Any] | Callable[[], tuple[int, Any]] | None = None,
    ) -> ArtifactMeta:
        """A table artifact written by ``write(path)`` as Parquet (streamed, never whole in memory); its rows and
        schema read from the file's footer unless ``known`` (rows, Arrow schema — or a function saying them
        once ``write`` is done) says them: then the server needs no Parquet reader (issue 40: 22 MB)."""

        def describe(path: Path) -> tuple[int, list[dict[str, str]], str]:
            if known is not None:
                rows, schema = known() if callable(known) else known
            else:
                import pyarrow.parquet as pq

                md = pq.read_metadata(path)
                rows, schema = md.num_rows, md.schema.to_arrow_schema()
            columns = [{"name": f.name, "type": str(f.type)} for f in schema]
            names = ", ".join(c["name"] for c in columns)
            return rows, columns, f"{rows:,} rows × {len(columns)} columns: {names}"

        return self._commit(
            write,
            kind="table",
            mime="application/vnd.apache.parquet",
            title=title,
            source_tool=source_tool,
            describe=describe,
        )

    def put_text(self, text: str, *, title: str, source_tool: str, mime: str = "text/plain") -> ArtifactMeta:
        kind = "markdown" if mime == "text/markdown" else "text"
        data = text.encode("utf-8")
        return self._commit(lambda p: p.write_bytes(data), kind=kind, mime=mime, title=title, source_tool=source_tool)

    def put_json(self, value: Any, *, title: str, source_tool: str) -> ArtifactMeta:
        data = json.dumps(value, ensure_ascii=False, indent=1, sort_keys=False, default=str).encode("utf-8")
        return self._commit(
            lambda p: p.write_bytes(data), kind="json", mime="application/json", title=title, source_tool=source_tool
        )

    def put_image(self, data: bytes, *, title: str, source_tool: str, mime: str = "image/png") -> ArtifactMeta:
        return self._commit(
            lambda p: p.write_bytes(data), kind="image", mime=mime, title=title, source_tool=source_tool
        )

    def _commit(
        self,
        write: Callable[[Path], Any],
        *,
        kind: str,
        mime: str,
        title: str,
        source_tool: str,
        rows: int | None = None,
        columns: list[dict[str, str]] | None = None,
        summary: str = "",
        describe: Callable[[Path], tuple[int, list[dict[str, str]], str]] | None = None,
    ) -> ArtifactMeta:
        tmp = self._tmp / f"{uuid.uuid4().hex}.part"
        try:
            write(tmp)
            if describe is not None:
                rows, columns, summary = describe(tmp)
            size = tmp.stat().st_size
            if size > self.max_single_bytes:
                raise ToolFailure(
                    ErrorType.RESOURCE_ERROR,
                    Code.ARTIFACT_TOO_LARGE,
                    f"the result is {size:,} bytes, over the artifact limit of {self.max_single_bytes:,}",
                    "narrow the request (fewer rows or columns, or aggregate first)",
                )
            digest = _sha256_file(tmp)
            aid = f"artifact_{self._address(digest)[:12]}"
            ext = KIND_EXT[kind]
            final = self.root / f"{aid}.{ext}"
            existing = self._read_meta(aid)
            if existing is not None and final.exists():
                # the same content again: its metadata is rewritten only when that changes something (a new owner,
                # an access time older than a minute) — not on every repeat of a result (0.7 ms with its fsync)
                stale = time.time() - existing.last_accessed > _TOUCH_EVERY_S
                return self._update(existing, own=True, touch=stale)
            _fsync(tmp)
            with self._commit_lock:
                self._make_room_for_caller(size)
                self._make_room(size)
                os.replace(tmp, final)
                meta = self._list_new(aid, kind, mime, ext, size, digest, title, source_tool, rows, columns, summary)
                self._noted(aid, size)
                return meta
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def _address(self, digest: str) -> str:
        """An artifact's address: its content's digest — under the calling principal where principals are kept apart
        (S-19), so that storing the same bytes as another user makes an artifact of one's own instead of joining
        theirs (which would confirm their content and show their title)."""
        who = callers.principal_of(callers.current())
        if self.settings.shared or who in (callers.DEFAULT, callers.EVERYONE):
            return digest
        return hashlib.sha256(f"{who}\0{digest}".encode()).hexdigest()

    def _make_room_for_caller(self, incoming: int) -> None:
        """Keep the calling HTTP session's (user's) artifacts under ``max_bytes_per_user``: its own least recently
        used go first (those no other session holds); still over, the new one is refused (stdio's one session and
        the operator's commands are bounded by ``max_bytes`` alone)."""
        cap, caller = self.settings.max_bytes_per_user, callers.current()
        if cap is None or caller == callers.DEFAULT:
            return
        mine = [m for m in self._all() if caller in m.owners]
        total = sum(m.size for m in mine)
        for meta in sorted(mine, key=lambda m: m.last_accessed):
            if total + incoming <= cap:
                break
            if meta.owners == [caller] and self._remove(meta):
                total -= meta.size
        if total + incoming > cap:
            raise ToolFailure(
                ErrorType.RESOURCE_ERROR,
                "USER_QUOTA",
                f"your artifacts take {total:,} bytes and this one {incoming:,}: over artifacts.max_bytes_per_user "
                f"({cap:,})",
                "narrow the request, or wait for older artifacts to expire (artifacts.ttl_hours)",
            )

    def _make_room(self, incoming: int) -> None:
        """Keep the store under ``max_bytes`` on every write (S-7): least recently used artifacts go first;
        if those being read cannot go, the new one is refused. The total is this process's count of the folder
        (read again when the folder changed behind it); what to evict is chosen from the metadata read afresh."""
        if self._known_total() + incoming <= self.settings.max_bytes:
            return
        metas = self._all()
        total = sum(m.size for m in metas)
        for meta in sorted(metas, key=lambda m: m.last_accessed):
            if total + incoming <= self.settings.max_bytes:
                break
            if self._remove(meta):
                total -= meta.size
        if total + incoming > self.settings.max_bytes:
            raise ToolFailure(
                ErrorType.RESOURCE_ERROR,
                "STORE_FULL",
                f"the artifact store is full ({total:,} of {self.settings.max_bytes:,} bytes in artifacts being read)",
                "retry shortly, or raise artifacts.max_bytes",
            )

    def _list_new(
        self,
        aid: str,
        kind: str,
        mime: str,
        ext: str,
        size: int,
        digest: str,
        title: str,
        source_tool: str,
        rows: int | None,
        columns: list[dict[str, str]] | None,
        summary: str,
    ) -> ArtifactMeta:
        now = time.time()
        meta = ArtifactMeta(
            id=aid,
            kind=kind,
            mime=mime,
            ext=ext,
            size=size,
            sha256=digest,
            title=title[:200],
            source_tool=source_tool,
            created=now,
            last_accessed=now,
            rows=rows,
            columns=columns or [],
            summary=summary[:500],
            owners=callers.new_owners(),
        )
        self._write_meta(meta)
        return meta

    def _write_meta(self, meta: ArtifactMeta) -> None:
        tmp = self._tmp / f"{uuid.uuid4().hex}.meta"
        tmp.write_text(json.dumps(asdict(meta)), encoding="utf-8")
        _fsync(tmp)
        os.replace(tmp, self.root / f"{meta.id}.meta.json")

    # -- reading ------------------------------------------------------------------------------

    def _read_meta(self, aid: str) -> ArtifactMeta | None:
        try:
            data = json.loads((self.root / f"{aid}.meta.json").read_text(encoding="utf-8"))
            return ArtifactMeta(**data)
        except (OSError, ValueError, TypeError):
            return None

    def visible(self, meta: ArtifactMeta) -> bool:
        """Whether the current session may read this artifact."""
        return callers.may_read(meta.owners, self.settings.shared)

    def get(self, aid: str) -> ArtifactMeta:
        """Metadata of an artifact of the current session; ``not_found`` when unknown, expired or another
        session's, ``invalid`` for a malformed id."""
        meta = self._found(aid)
        if not self.visible(meta):
            raise _missing(aid)
        return meta

    def claim(self, aid: str) -> ArtifactMeta:
        """Make an artifact the current session's own (and return it): only for an artifact that a call of
        this session produced or legitimately reached — a cached result of the same call, a page read
        first by another session."""
        return self._update(self._found(aid), own=True)

    def _found(self, aid: str) -> ArtifactMeta:
        if not isinstance(aid, str) or not ARTIFACT_ID.match(aid):
            raise ToolFailure(
                ErrorType.INVALID_PARAMETERS,
                "INVALID_ARTIFACT_ID",
                f"'{str(aid)[:40]}' is not an artifact id",
                "artifact ids look like artifact_0123456789ab",
            )
        meta = self._read_meta(aid)
        if meta is None or not self.data_path(meta).exists():
            raise _missing(aid)
        return meta

    def data_path(self, meta: ArtifactMeta) -> Path:
        return self.root / f"{meta.id}.{meta.ext}"

    @contextlib.contextmanager
    def reading(self, aid: str) -> Iterator[ArtifactMeta]:
        """Hold an artifact for reading: cleanup skips it until the block ends; its access time is refreshed."""
        with self._lock:
            self._in_use[aid] = self._in_use.get(aid, 0) + 1
        try:
            meta = self.get(aid)
            self._touch(meta)
            yield meta
        finally:
            with self._lock:
                self._in_use[aid] -= 1
                if not self._in_use[aid]:
                    del self._in_use[aid]

    def read_bytes(self, aid: str) -> tuple[ArtifactMeta, bytes]:
        with self.reading(aid) as meta:
            return meta, self.data_path(meta).read_bytes()

    def read_table(self, aid: str) -> tuple[ArtifactMeta, pa.Table]:
        """A table artifact whole: by ``parquet`` when the store has one (the server's: a DuckDB worker reads
        it), else here (tests, ``rerun``); a reader that fails leaves the read to this process, and says so."""
        with self.reading(aid) as meta:
            if meta.kind != "table":
                raise ToolFailure(
                    ErrorType.VALIDATION_ERROR, "NOT_A_TABLE", f"{aid} is a {meta.kind} artifact, not a table"
                )
            path = self.data_path(meta)
            if self.parquet is not None:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    return meta, self.parquet.read(fd)
                except Exception as exc:  # the worker is busy or gone, or the table is over the transfer limit
                    log.warning("the engine worker could not read %s (%s); reading it in the server", aid, exc)
                finally:
                    os.close(fd)
            import pyarrow.parquet as pq

            return meta, pq.ParquetFile(path).read()  # read_table goes through pyarrow.dataset, which imports pandas

    def _touch(self, meta: ArtifactMeta) -> None:
        if time.time() - meta.last_accessed > _TOUCH_EVERY_S:
            self._update(meta, touch=True)

    def _update(self, meta: ArtifactMeta, *, own: bool = False, touch: bool = False) -> ArtifactMeta:
        """The metadata re-read and rewritten under a lock: the current session added to its owners
        (``own``), its access time refreshed (``touch``)."""
        with self._meta_lock:
            fresh = self._read_meta(meta.id) or meta
            owners = callers.with_owner(fresh.owners) if own else None
            if owners is None and not touch:
                return fresh
            if owners is not None:
                fresh.owners = owners
            if touch:
                fresh.last_accessed = time.time()
            with contextlib.suppress(OSError):
                self._write_meta(fresh)
            return fresh

    def _all(self) -> list[ArtifactMeta]:
        """Every session's artifacts, oldest first (for the store's own upkeep)."""
        changes = self._change_count()  # before reading: a change made meanwhile makes the next count read again
        metas = []
        for p in self.root.glob("artifact_*.meta.json"):
            meta = self._read_meta(p.name[: -len(".meta.json")])
            if meta is not None:
                metas.append(meta)
        with self._index_lock:
            self._sizes, self._seen_changes = {m.id: m.size for m in metas}, changes
        return sorted(metas, key=lambda m: m.created)

    def _change_count(self) -> int:
        try:
            return os.stat(self._changes).st_size
        except FileNotFoundError:
            return 0

    def _known_total(self) -> int:
        """The listed artifacts' bytes: this process's count while no other process changed the store."""
        with self._index_lock:
            if self._sizes is not None and self._seen_changes == self._change_count():
                return sum(self._sizes.values())
        self._all()
        with self._index_lock:
            return sum((self._sizes or {}).values())

    def _noted(self, aid: str, size: int | None) -> None:
        """This process listed (``size``) or removed (None) an artifact: one more change counted; its own count
        follows when the counter moved by this change alone, else it is read again at the next check."""
        fd = os.open(self._changes, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, b".")
            after = os.lseek(fd, 0, os.SEEK_CUR)  # the counter just after this change (appends are atomic)
        finally:
            os.close(fd)
        with self._index_lock:
            if self._sizes is None:
                return
            if size is None:
                self._sizes.pop(aid, None)
            else:
                self._sizes[aid] = size
            self._seen_changes = after if after == self._seen_changes + 1 else -1

    def list(self) -> list[ArtifactMeta]:
        """The current session's artifacts, oldest first."""
        return [m for m in self._all() if self.visible(m)]

    # -- cleanup ------------------------------------------------------------------------------

    def cleanup(self, now: float | None = None) -> dict[str, int]:
        """Expire by TTL, evict least-recently-used down to 80 % of ``max_bytes``, drop orphans.

        Never removes an artifact held by ``reading()``. Returns counts of what was removed."""
        now = time.time() if now is None else now
        ttl_s = self.settings.ttl_hours * 3600
        removed = {"expired": 0, "evicted": 0, "orphans": 0, "bytes_freed": 0}
        metas = self._all()
        live = []
        for meta in metas:
            if now - meta.last_accessed > ttl_s and self._remove(meta):
                removed["expired"] += 1
                removed["bytes_freed"] += meta.size
            else:
                live.append(meta)
        total = sum(m.size for m in live)
        if total > self.settings.max_bytes:
            target = 0.8 * self.settings.max_bytes
            for meta in sorted(live, key=lambda m: m.last_accessed):
                if total <= target:
                    break
                if self._remove(meta):
                    total -= meta.size
                    removed["evicted"] += 1
                    removed["bytes_freed"] += meta.size
        listed = {m.id for m in self._all()}
        for p in list(self.root.iterdir()) + list(self._tmp.iterdir()):
            if p.is_dir() or p == self._changes:
                continue
            stem = p.name.split(".", 1)[0]
            if p.parent == self.root and stem in listed:
                continue
            with contextlib.suppress(OSError):
                if now - p.stat().st_mtime > _ORPHAN_AGE_S:
                    p.unlink()
                    removed["orphans"] += 1
        return removed

    def _remove(self, meta: ArtifactMeta) -> bool:
        with self._lock:
            if meta.id in self._in_use:
                return False
            # Metadata first: the artifact stops being listed before its content goes.
            with contextlib.suppress(FileNotFoundError):
                (self.root / f"{meta.id}.meta.json").unlink()
            with contextlib.suppress(FileNotFoundError):
                self.data_path(meta).unlink()
        self._noted(meta.id, None)
        return True

    def read_ref(self, name: str, resolved: Resolved) -> dict[str, Any]:
        """A workspace file a call read, for its provenance: an artifact with its content digest, a file with its
        size and modification time (a digest of a large upload would mean reading it whole once more)."""
        ref: dict[str, Any] = {"ref": name, "size": resolved.size}
        if resolved.kind == "artifact" and resolved.ref_id:
            ref["sha256"] = self.get(resolved.ref_id).sha256
        else:
            ref["mtime_ns"] = resolved.mtime_ns
        return ref

    def total_bytes(self) -> int:
        """Bytes of every session's artifacts: what ``max_bytes`` bounds."""
        return sum(m.size for m in self._all())


def _missing(aid: str) -> ToolFailure:
    return not_found(f"no artifact with id {aid} (it may have expired)", "read the resource ba://files")


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1024 * 1024), b""):
            h.update(chunk)
    return h.hexdigest()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
