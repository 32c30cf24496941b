"""The engine worker: where untrusted SQL runs and untrusted bytes are decoded, in a process the server kills.

Started as ``python -I -B -m ba_mcp.worker '<options JSON>'`` (see ``pool``), it confines itself first
(``sandbox.isolation.confine``: its own mount, PID and network namespaces, a minimal read-only root, the
configured database files bound read-only, an unprivileged uid, a memory cgroup and rlimits, seccomp), then
opens one in-memory DuckDB with every configured database ATTACHed READ_ONLY while calls come (DETACHed, its
lock released, once the session is idle for ``REST_S``), and serves one session:

* ``analyse`` — DuckDB's parse of a statement (types, the table names it reads, what would run);
* ``run`` — a statement on the session's connection (its TEMP tables and views persist across calls);
  workspace files arrive as descriptors and are read by DuckDB's own readers (a Parquet or CSV file's view and
  descriptor are kept for the session's next calls while the file is unchanged); the first ``max_rows + 1``
  rows come back as an uncompressed Arrow stream in a sealed memory file, and on ``store`` the complete
  result is written as Parquet into the descriptor the server opened for the artifact;
* ``describe`` — a database's catalog, with the session's own temporary tables and views;
* ``parse`` — a workspace file or downloaded bytes through ``ba_mcp.formats`` (file_reader's reads);
* ``stats`` — whole-column figures of a stored table;
* ``extract`` — the readable text of a downloaded page or PDF (``ba_mcp.web.extract``);
* ``metrics`` — metric files read, a metrics query compiled (its ``where`` is the model's text), a summary;
* ``placeholders`` — a saved analysis's parameter values found in a step's SQL or code and replaced.

A SIGINT (forwarded by the shim) interrupts the running statement; the server kills the worker when that
does not end it within its grace.
"""

from __future__ import annotations

import contextlib
import faulthandler
import fcntl
import json
import os
import re
import select
import signal
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ba_mcp.values import shown_schema
from ba_mcp.workers.wire import Failure, encode_raw, memfile, write_arrow
from sandbox import protocol
from sandbox.isolation import SESSION_DIR, confine

_BATCH_ROWS = 8192
REST_S = 0.5  # an engine idle this long DETACHes the database files, so another program may write them
_STATS_IN_MEMORY_BYTES = 16 * 1024 * 1024  # a stored result up to this size is summarised from memory
SLOT_FD = 200  # the descriptors of a call's files are moved to SLOT_FD, SLOT_FD + 1, …
MAX_FILES = 60
_KEEP_VIEWS = 16  # workspace files whose views (and descriptors) a session keeps between calls
_PARKED_FD = SLOT_FD + MAX_FILES + 40  # where a kept view's descriptor waits between calls
_LOCK_CONFLICT = "Conflicting lock"  # DuckDB's words when another process holds the file's lock
_MAKES_OR_DROPS = re.compile(r"(?i)(create|drop)\b")


def slot_path(i: int) -> str:
    return f"/proc/self/fd/{SLOT_FD + i}"


def _too_many() -> Failure:
    return Failure(type="validation_error", code="TOO_MANY_FILES", message=f"at most {MAX_FILES} files per query")


def _identity(fd: int) -> tuple[int, ...]:
    """What says a descriptor's file is the one a kept view reads: the same file, unchanged."""
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass
class _Kept:
    """A workspace file's view kept for the session's next calls. Its slot stays reserved, but is open only
    during a call that names the file: between calls the descriptor waits at ``fd``, outside the slot numbers
    DuckDB may open, so a statement reaches by path only the files its own call named (as before any was kept)."""

    identity: tuple[int, ...]
    kind: tuple[str, bool]  # (suffix, a table artifact): how it was read
    slot: int
    fd: int


def _table_stats(table: Any) -> dict[str, dict[str, Any]]:
    """``parquet_stats``' figures of an Arrow table in memory (``column_stats``), as JSON carries them."""
    from ba_mcp.pipeline.encode import column_stats
    from ba_mcp.results import cell_value

    out: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(table.column_names):
        stats = column_stats(table.column(i))
        for key in ("min", "mean", "max"):
            if key in stats:
                stats[key] = cell_value(stats[key])
        if stats.get("top") is not None:
            stats["top"] = [cell_value(stats["top"][0]), int(stats["top"][1])]
        out[name] = stats
    return out


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass
class _Source:
    """A file handed over as a descriptor (``ba_mcp.formats.Source``)."""

    name: str
    size: int
    suffix: str
    kind: str
    ref_id: str | None
    fd: int

    @property
    def path(self) -> Path:
        return Path(f"/proc/self/fd/{self.fd}")

    def open(self) -> Any:
        return open(self.path, "rb")


class Engine:
    def __init__(self, sock: socket.socket, options: dict[str, Any]) -> None:
        import duckdb

        self.sock = sock
        self.options = options
        self.busy = False
        self.pending_store: Any = None  # (reader, head batches, schema, …, convert) of a result cut at max_rows
        tmp = os.path.join(SESSION_DIR if options.get("confined") else os.getcwd(), "duckdb_tmp")
        os.makedirs(tmp, exist_ok=True)
        self.con = duckdb.connect(
            ":memory:",
            config={
                "threads": int(options.get("threads", 2)),
                "memory_limit": str(options.get("memory_limit", "2GB")),
                "temp_directory": tmp,
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
                "allow_community_extensions": False,
                "allow_unsigned_extensions": False,
                # its cache is keyed by path and modification time: a slot's next file could be served stale
                "enable_external_file_cache": False,
            },
        )
        # Slots (descriptor numbers SLOT_FD + i) in use, and the views of workspace files DuckDB reads kept from
        # call to call (registering five Parquet files and dropping them again cost 3-4 ms of every call): a call
        # that names a kept file again, unchanged (``_identity`` of the descriptor the server just opened), uses
        # its view; least recently used first when they are trimmed.
        self.used: set[int] = set()
        self.kept: dict[str, _Kept] = {}
        self.missing: dict[str, str] = {}
        self.locked: dict[str, str] = {}  # files another program held locked at ATTACH (a writer: dbt), waited out
        self.lock_wait_over = threading.Event()  # set by an interrupt: a wait for a lock ends now
        self.models: dict[str, Any] = {}  # the metrics model last compiled for, by its digest
        self.current = ""  # the database the session's connection USEs
        self.warming: threading.Thread | None = None  # the spare's warm-up imports, until the first operation
        self.warm_stop = threading.Event()  # set by the first operation: the warm-up imports no further module
        self.databases = list(options.get("databases", []))
        self.attached = False  # the files are ATTACHed only while calls come (``attach``/``rest``)
        self.aliases = {db["name"]: db["alias"] for db in self.databases}
        # No file access at all but to the descriptors of the session's calls, which are moved to fixed numbers
        # (DuckDB resolves a path before it checks it; the workspace path a descriptor leads to does not
        # exist in this process's root, so only the descriptor's own name matches).
        files = [db["path"] + suffix for db in self.databases for suffix in ("", ".wal")]  # read-only mounts
        self.con.execute("SET allowed_paths = ?", [[slot_path(i) for i in range(MAX_FILES)] + files])
        self.con.execute("SET enable_external_access = false")
        self.con.execute("SET lock_configuration = true")

    # -- the database files: held only while calls come -----------------------------------------------

    def attach(self) -> None:
        """ATTACH every configured file READ_ONLY before an operation. DuckDB's read-only open still takes the
        file's lock, which makes ``dbt run`` (or any writer) fail while it is held, so the files are DETACHed
        again once the session has been idle for ``REST_S`` (``rest``): an idle session never holds a user's
        file, and the next call opens the file as it is then (a rebuilt file gets a fresh worker first:
        ``Engines._current``)."""
        if self.attached:
            return
        import duckdb

        self.attached = True
        self.missing.clear()
        self.locked.clear()
        for db in self.databases:
            try:
                self.con.execute(f"ATTACH {_literal(db['path'])} AS {_quote(db['alias'])} (READ_ONLY)")
            except duckdb.Error as exc:
                detail = str(exc).split("\n")[0][:300]
                (self.locked if _LOCK_CONFLICT in detail else self.missing)[db["name"]] = detail

    def resting(self) -> float | None:
        """How long the loop may wait for the next request before ``rest`` (None: nothing to let go of, or a
        cut result still waits for its ``store`` or ``drop``)."""
        return REST_S if self.attached and self.pending_store is None else None

    def rest(self) -> None:
        """DETACH the files (their locks go with them); the session's TEMP objects stay."""
        if not self.attached:
            return
        self.attached = False
        if self.current:
            self.con.execute("USE memory")
            self.current = ""
        for db in self.databases:
            if db["name"] not in self.missing and db["name"] not in self.locked:
                self.con.execute(f"DETACH DATABASE IF EXISTS {_quote(db['alias'])}")

    # -- the loop -----------------------------------------------------------------------------------

    def serve(self) -> None:
        serve(self, self.sock, self.options)

    def interrupt(self) -> None:
        if self.busy:
            self.lock_wait_over.set()
            self.con.interrupt()

    # -- SQL ----------------------------------------------------------------------------------------

    def op_analyse(self, message: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        from ba_mcp.worker.sql import analyse

        return {"op": "analysis", **analyse(self.con, message["sql"])}, []

    def op_run(self, message: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        import pyarrow as pa

        self._drop_pending()
        name = message["database"]
        waited = self._opened(name, float(message.get("lock_wait_s", 0.0)))
        if self.current != name:  # USE costs a quarter of a millisecond: only when the database changes
            self.con.execute(f"USE {_quote(self.aliases[name])}")
            self.current = name
        files = message.get("files", [])
        if len(files) > MAX_FILES:
            raise _too_many()
        named = {spec["name"] for spec in files}
        if _MAKES_OR_DROPS.match(message["sql"]):  # DuckDB's text of the statement: it starts at its keyword
            for other in [n for n in self.kept if n not in named]:  # the session may name its own objects so
                self._forget(other)
        self._trim_kept(named)
        fresh = [(spec, fd) for spec, fd in zip(files, fds, strict=False) if not self._still_kept(spec, fd)]
        held: Any = self._placed([fd for _, fd in fresh], named)
        taken = held.__enter__()
        created: list[str] = []
        try:
            created = self._register(fresh, taken, message.get("bounds", {}))
            relation = self._bound(message["sql"], message.get("params"), named)
            if relation is None:  # a statement without rows (CREATE, DROP): it has run
                self._forget_kept()  # it may have made or dropped objects of those names: views are made afresh
                done = pa.table({"result": pa.array(["done"], pa.string())})
                reply = {"op": "result", "rows": 1, "more": False, "display_types": {}, **waited}
                return reply, [memfile(write_arrow(done))]
            from ba_mcp.worker.sql import refuse_large_scan  # past the bound: refused with DuckDB's own estimate

            refuse_large_scan(self.con, message["sql"], message.get("params"), message.get("scan_bound"))
            types = _display_types(list(zip(relation.columns, relation.types, strict=False)))
            reader = relation.to_arrow_reader(_BATCH_ROWS)
            # values as DuckDB shows them: intervals as text, float4 by its shortest form (ba_mcp.values); a
            # TIMESTAMPTZ is already in the session's zone
            schema, convert, display = shown_schema(reader.schema, lambda batch: batch)
            types = {**display, **types}
            max_rows = int(message["max_rows"])
            head: list[pa.RecordBatch] = []
            have = 0
            for batch in reader:
                head.append(convert(batch))
                have += batch.num_rows
                if have > max_rows:
                    break
            more = have > max_rows
            if more:
                self.pending_store = (reader, head, schema, created, held, convert)
                created, held = [], None
            blob = write_arrow(pa.Table.from_batches(head, schema=schema).slice(0, max_rows + 1))
            return {"op": "result", "rows": have, "more": more, "display_types": types, **waited}, [memfile(blob)]
        finally:
            self._unregister(created)
            if held is not None:
                held.__exit__(None, None, None)

    def _opened(self, name: str, lock_wait_s: float = 0.0) -> dict[str, float]:
        """Database ``name`` is ATTACHed, after waiting up to ``lock_wait_s`` for another program's lock on its file;
        returns what the answer says of a wait (``lock_waited_s``)."""
        waited = self._wait_for_lock(name, lock_wait_s) if name in self.locked else {}
        if name in self.missing:
            raise Failure(
                type="dependency_error",
                code="DATABASE_MISSING",
                message=f"database '{name}' could not be opened: {self.missing[name]}",
                hint="check the `databases` setting",
            )
        return waited

    def _wait_for_lock(self, name: str, wait_s: float) -> dict[str, float]:
        """ATTACH database ``name``, whose file another program holds locked (a writer: ``dbt build``), again every
        few tenths of a second until the lock is gone — then the seconds waited — or ``wait_s`` has passed or the
        call is interrupted: DATABASE_LOCKED (never DATABASE_MISSING: nothing is wrong with the configuration)."""
        import duckdb

        db = next(d for d in self.databases if d["name"] == name)
        started, pause = time.monotonic(), 0.05
        self.lock_wait_over.clear()
        while True:
            left = wait_s - (time.monotonic() - started)
            if left <= 0 or self.lock_wait_over.wait(min(pause, left)):
                break
            try:
                self.con.execute(f"ATTACH {_literal(db['path'])} AS {_quote(db['alias'])} (READ_ONLY)")
            except duckdb.Error as exc:
                if _LOCK_CONFLICT not in str(exc):
                    del self.locked[name]
                    self.missing[name] = str(exc).split("\n")[0][:300]
                    return {}
                pause = min(pause * 2, 0.5)
                continue
            del self.locked[name]
            return {"lock_waited_s": round(time.monotonic() - started, 2)}
        raise Failure(
            type="resource_error",
            code="DATABASE_LOCKED",
            message=f"database '{name}' is locked by another program that is writing to it; waited "
            f"{time.monotonic() - started:.1f} s for it to finish",
            hint="retry when that program (a dbt build, say) finishes: ba-mcp only reads the file",
        )

    def op_store(self, message: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        """The complete result of the last ``run`` (cut at max_rows) as Parquet into the descriptor given,
        stopping past ``limit`` bytes; then its whole-column figures."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self.pending_store is None:
            raise Failure(type="execution_error", code="NOTHING_TO_STORE", message="no result is waiting")
        reader, head, schema, created, held, convert = self.pending_store
        self.pending_store = None
        limit = int(message["limit"])
        rows, complete = 0, True
        held_bytes, kept = 0, []  # the batches while the result is small: its figures are then counted from them
        kept_all = True
        try:
            with open(fds[0], "wb", closefd=False) as out, pq.ParquetWriter(out, schema, compression="zstd") as writer:
                for batches in (head, map(convert, reader)):
                    for batch in batches:
                        writer.write_batch(batch)
                        rows += batch.num_rows
                        if kept_all:
                            held_bytes += batch.nbytes
                            kept_all = held_bytes <= _STATS_IN_MEMORY_BYTES
                            if kept_all:
                                kept.append(batch)
                            else:
                                kept.clear()
                        if out.tell() > limit:
                            complete = False
                            break
                    if not complete:
                        break
        finally:
            with contextlib.suppress(Exception):
                reader.close()  # a result left unread would block the connection
            self._unregister(created)
            held.__exit__(None, None, None)
        reply: dict[str, Any] = {"op": "stored", "rows": rows, "complete": complete}
        if complete and kept_all:  # held here: Arrow's kernels, not a second read of the file just written
            reply.update(stats=_table_stats(pa.Table.from_batches(kept, schema=schema)), total=rows)
        elif complete:
            from ba_mcp.worker.sql import parquet_stats

            with self._placed(fds[:1]) as taken:
                stats, total = parquet_stats(self.con, slot_path(taken[0]))
            reply.update(stats=stats, total=total)
        return reply, []

    def op_drop(self, message: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        self._drop_pending()
        return {"op": "dropped"}, []

    def _drop_pending(self) -> None:
        if self.pending_store is not None:
            with contextlib.suppress(Exception):
                self.pending_store[0].close()
            self._unregister(self.pending_store[3])
            self.pending_store[4].__exit__(None, None, None)
        self.pending_store = None

    def op_describe(self, message: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        from ba_mcp.worker.sql import catalog

        name = message["database"]
        self._opened(name)
        self._drop_pending()
        self._forget_kept()  # the session's own objects are what it made, not the views of files it named
        return {"op": "catalog", **catalog(self.con, self.aliases[name])}, []

    def op_write_parquet(self, message: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        """The table of an Arrow stream (``fds[0]``, the server's memory file) as a Parquet artifact into
        ``fds[1]``: the server keeps no Parquet writer of its own (issue 40: 22 MB of its memory)."""
        import mmap

        import pyarrow as pa
        import pyarrow.parquet as pq

        with mmap.mmap(fds[0], 0, access=mmap.ACCESS_READ) as mapped:
            table = pa.ipc.open_stream(pa.py_buffer(mapped)).read_all()
            with open(fds[1], "wb", closefd=False) as out:
                pq.write_table(table, out, compression="zstd")
            rows = table.num_rows
            del table  # its buffers are the mapping's: released before it closes
        return {"op": "written", "rows": rows}, []

    def op_read_parquet(self, message: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        """A Parquet artifact (``fds[0]``) as an Arrow stream for the server, which keeps no Parquet reader."""
        import pyarrow.parquet as pq

        from ba_mcp.workers.wire import memfile, write_arrow

        with open(fds[0], "rb", closefd=False) as source:
            table = pq.ParquetFile(source).read()  # not read_table: it goes through pyarrow.dataset (pandas)
        return {"op": "table", "rows": table.num_rows}, [memfile(write_arrow(table), "table")]

    def op_stats(self, message: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        from ba_mcp.worker.sql import parquet_stats

        with self._placed(fds[:1]) as taken:
            stats, total = parquet_stats(self.con, slot_path(taken[0]))
        return {"op": "stats", "stats": stats, "total": total}, []

    @contextlib.contextmanager
    def _placed(self, fds: list[int], named: set[str] | frozenset[str] = frozenset()) -> Any:
        """``fds`` at free slot numbers DuckDB may open, and the kept views' files the call ``named`` at their
        reserved ones, for the duration of the call (kept views not named give up their slots when there are too
        few free); a new slot whose view is kept on (``_register``) stays reserved, closed."""
        if len(fds) > MAX_FILES - len(self.used):
            for old in [n for n in self.kept if n not in named][: len(fds) - (MAX_FILES - len(self.used))]:
                self._forget(old)
        if len(fds) > MAX_FILES - len(self.used):
            raise _too_many()
        taken: list[int] = []
        opened = [(k.slot, k.fd) for n, k in self.kept.items() if n in named]
        try:
            for slot, parked in opened:
                os.dup2(parked, SLOT_FD + slot, inheritable=False)
            for fd in fds:
                slot = next(i for i in range(MAX_FILES) if i not in self.used)
                os.dup2(fd, SLOT_FD + slot, inheritable=False)
                self.used.add(slot)
                taken.append(slot)
            yield taken
        finally:
            kept = {k.slot for k in self.kept.values()}
            for slot in [slot for slot, _ in opened] + taken:
                with contextlib.suppress(OSError):
                    os.close(SLOT_FD + slot)
                if slot not in kept:
                    self.used.discard(slot)

    def _still_kept(self, spec: dict[str, Any], fd: int) -> bool:
        """Whether the file a call names has its view kept, for this very file unchanged (then most recently
        used); a kept view of anything else under that name is dropped."""
        name = spec["name"]
        kept = self.kept.get(name)
        if kept is None:
            return False
        if kept.identity == _identity(fd) and kept.kind == (spec["suffix"], bool(spec.get("table"))):
            self.kept[name] = self.kept.pop(name)
            return True
        self._forget(name)
        return False

    def _forget(self, name: str) -> None:
        kept = self.kept.pop(name)
        with contextlib.suppress(Exception):
            self.con.execute(f"DROP VIEW IF EXISTS temp.main.{_quote(name)}")
        for fd in (kept.fd, SLOT_FD + kept.slot):  # the slot is open when forgotten during a call naming it
            with contextlib.suppress(OSError):
                os.close(fd)
        self.used.discard(kept.slot)

    def _forget_kept(self) -> None:
        for name in list(self.kept):
            self._forget(name)

    def _trim_kept(self, named: set[str]) -> None:
        for name in [n for n in self.kept if n not in named][: max(0, len(self.kept) - _KEEP_VIEWS)]:
            self._forget(name)

    def _register(self, files: list[tuple[dict[str, Any], int]], taken: list[int], bounds: dict[str, Any]) -> list[str]:
        """Each workspace file as a TEMP view named as the statement names it, read by DuckDB's own readers
        (Parquet, UTF-8 CSV: the view and its descriptor kept for the next calls) or, for the formats DuckDB does
        not read here, by ``ba_mcp.formats`` (bounded; registered for this call only — returned)."""
        created: list[str] = []
        try:
            for (spec, fd), slot in zip(files, taken, strict=False):
                name = spec["name"]
                path = _literal(slot_path(slot))
                suffix = spec["suffix"]
                if spec.get("table") or suffix in (".parquet", ".pq"):
                    scan = f"read_parquet({path})"
                elif suffix in (".csv", ".tsv", ".tab") and _utf8(fd):
                    delim = "','" if suffix == ".csv" else "'\\t'"
                    scan = f"read_csv({path}, delim={delim}, header=true{_names_option(fd, suffix)})"
                else:
                    scan = ""
                if scan:
                    self.con.execute(f"CREATE OR REPLACE TEMP VIEW {_quote(name)} AS SELECT * FROM {scan}")
                    parked = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _PARKED_FD)
                    self.kept[name] = _Kept(_identity(fd), (suffix, bool(spec.get("table"))), slot, parked)
                else:
                    from ba_mcp.formats import table_of
                    from ba_mcp.settings import FormatsSettings

                    source = _Source(name, spec["size"], suffix, spec["kind"], spec.get("ref_id"), fd)
                    self.con.register(name, table_of(source, FormatsSettings(**bounds), name))
                    created.append(name)
        except BaseException:
            self._unregister(created)
            raise
        return created

    def _unregister(self, names: list[str]) -> None:
        for name in names:
            with contextlib.suppress(Exception):
                self.con.execute(f"DROP VIEW IF EXISTS temp.main.{_quote(name)}")
            with contextlib.suppress(Exception):
                self.con.unregister(name)

    def _bound(self, sql: str, params: Any, named: set[str]) -> Any:
        """The statement as a relation; a column it names that is not there is refused with the columns of the
        workspace files it reads, written as SQL takes them (DuckDB's own candidates leave out names unlike the
        one asked for, and a host that shows its model only tools cannot read a resource that lists them)."""
        import duckdb

        try:
            return self.con.sql(sql, params=params)
        except duckdb.BinderException as exc:
            if not named or "not found" not in str(exc):
                raise
            listed = []
            keywords = self.con.execute(
                "SELECT keyword_name FROM duckdb_keywords() WHERE keyword_category <> 'unreserved'"
            ).fetchall()
            reserved = {k for (k,) in keywords}
            for name in sorted(named)[:4]:
                with contextlib.suppress(Exception):
                    columns = [c[0] for c in self.con.execute(f"SELECT * FROM {_quote(name)} LIMIT 0").description]
                    shown = ", ".join(_sql_name(c, reserved) for c in columns[:60])
                    shown += " …" if len(columns) > 60 else ""
                    listed.append(f"Columns of {_sql_name(name, reserved)}: {shown}")
            if not listed:
                raise
            text = str(exc)
            head, sep, tail = text.partition("\n\nLINE")
            raise type(exc)(head + "\n" + "\n".join(listed) + sep + tail) from None

    # -- bytes --------------------------------------------------------------------------------------

    def op_parse(self, message: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        from ba_mcp.formats import Reader, Window
        from ba_mcp.settings import FormatsSettings

        s = message["source"]
        source = _Source(s["name"], s["size"], s["suffix"], s["kind"], s.get("ref_id"), fds[0])
        window = Window(**message.get("window", {}))
        reader = Reader(source, window, FormatsSettings(**message["bounds"]), message["title"], message.get("encoding"))
        raw = reader.read(message["format"])
        if message.get("whole"):  # a downloaded data file is kept whole or not at all: checked before it is sent
            from ba_mcp.errors import ErrorType, ToolFailure
            from ba_mcp.results import Table

            if not isinstance(raw, Table) or raw.more:
                title = message["title"]
                raise ToolFailure(
                    ErrorType.VALIDATION_ERROR,
                    "NOT_TABULAR",
                    f"{title} is not a table" if not isinstance(raw, Table) else f"{title} is too large to read whole",
                    "query CSV, Parquet, JSON arrays of objects, JSON Lines or Excel files",
                )
        encoded, blobs = encode_raw(raw)
        return {"op": "raw", "raw": encoded}, [memfile(b) for b in blobs]

    def op_metrics(self, message: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        """Metrics work over the server's metric files (sent along; read once per digest): compile a query (its
        ``where`` is the model's text), a summary, a metric's description (``ba_mcp.metrics.catalog.answer``)."""
        from ba_mcp.metrics.catalog import answer, models_of

        digest = str(message["digest"])
        held = self.models.get(digest)
        if held is None:
            held = models_of(message)
            self.models = {digest: held}
        model, dbt = held
        return {"op": "metrics", **answer(model, message, dbt)}, []

    def op_placeholders(self, message: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        """A saved analysis's parameters found in a step's SQL or code and replaced (``worker.params``)."""
        from ba_mcp.worker.params import code_cut, code_placeholders, filter_placeholders, sql_cut, sql_placeholders

        values = dict(message.get("values") or {})
        cut: dict[str, Any] = {}
        if message.get("sql") is not None:
            text, found = sql_placeholders(str(message["sql"]), values)
            cut = sql_cut(text)  # what the step's result covers: a top N, a page (a key figure of it says so)
        elif message.get("filter") is not None:
            text, found = filter_placeholders(str(message["filter"]), values)
        else:
            text, found = code_placeholders(str(message.get("code", "")), values)
            cut = code_cut(text)  # the value it ends with: a head(n), an nlargest(n)
        return {"op": "placeholders", "text": text, "found": found, "cut": cut}, []

    def op_extract(self, message: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        from ba_mcp.web.extract import extract_in_worker

        with open(fds[0], "rb", closefd=False) as f:
            f.seek(0)
            body = f.read()
        result = extract_in_worker(body, message)
        text = result.pop("text").encode("utf-8", "surrogatepass")
        return {"op": "extracted", **result}, [memfile(text)]


def serve(target: Any, sock: socket.socket, options: dict[str, Any]) -> None:
    """Answer requests until the server closes the channel: each ``op`` by ``target.op_<op>``; an answer over
    ``max_transfer_bytes`` is refused here, before it is sent."""
    while True:
        window = target.resting() if hasattr(target, "resting") else None
        if window is not None and not select.select([sock], [], [], window)[0]:
            target.rest()  # idle: let go of what other programs may want (a DuckDB file's lock)
        try:
            message, fds = protocol.recv(sock)
        except (EOFError, OSError, protocol.ProtocolError):
            return
        op = message.get("op")
        try:
            handler = getattr(target, f"op_{op}", None)
            if handler is None:
                raise Failure(type="execution_error", code="BAD_OP", message=f"unknown operation {op!r}")
            warming = getattr(target, "warming", None)
            if warming is not None:  # a half-imported package seen from two threads fails (pandas, pyarrow)
                if not message.get("warm"):  # a call came (not the warm-up's own read): it ends with this module
                    target.warm_stop.set()
                warming.join()
                target.warming = None
            target.busy = True
            if hasattr(target, "attach"):
                target.attach()
            reply, out = handler(message, fds)
        except Failure as exc:
            reply, out = {"op": "error", "failure": exc.fields}, []
        except BaseException as exc:
            reply, out = _error_reply(exc), []
        finally:
            target.busy = False
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        size = sum(os.fstat(fd).st_size for fd in out)
        limit = int(options.get("max_transfer_bytes") or 0)
        if limit and size > limit:
            for fd in out:
                os.close(fd)
            out = []
            reply = {
                "op": "error",
                "failure": {
                    "type": "resource_error",
                    "code": "RESULT_TOO_LARGE",
                    "message": f"the answer is {size:,} bytes; at most {limit:,} are taken from the engine "
                    "(engine.max_transfer_mb)",
                    "hint": "fetch fewer or narrower rows (max_rows, LIMIT, fewer columns, substr of long text)",
                },
            }
        try:
            protocol.send(sock, reply, out)
        finally:
            for fd in out:
                os.close(fd)
        follow_up, target.after_reply = getattr(target, "after_reply", None), None
        if follow_up is not None:  # work that need not delay the answer (a connection's ROLLBACK)
            target.busy = True
            try:
                follow_up()
            except Exception:
                pass  # the next operation starts with a rollback of its own
            finally:
                target.busy = False


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _utf8(fd: int) -> bool:
    """Whether a text file's first 64 KB are UTF-8 (or ASCII): then DuckDB's own CSV reader reads it."""
    sample = os.pread(fd, 65536, 0)
    if sample.startswith((b"\xff\xfe", b"\xfe\xff")):
        return False
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start > len(sample) - 4  # a character cut at the sample's end
    return True


def _sql_name(name: str, reserved: set[str]) -> str:
    """A column or file name as SQL takes it: bare when a plain lower-case identifier and no keyword DuckDB
    reserves (``order``), else in double quotes."""
    return name if re.fullmatch(r"[a-z_][a-z0-9_]*", name) and name not in reserved else _quote(name)


def _names_option(fd: int, suffix: str) -> str:
    """``, names=[…]`` when DuckDB would name a column otherwise than pandas and file_reader (an empty header, a
    repeated one): one name for a column in every tool (``formats.csv.sql_header_names``)."""
    from ba_mcp.formats.csv import sql_header_names

    names = sql_header_names(os.pread(fd, 1 << 20, 0), "," if suffix == ".csv" else "\t")
    return f", names=[{', '.join(_literal(n) for n in names)}]" if names else ""


def _display_types(description: list[Any]) -> dict[str, str]:
    """DuckDB types Arrow cannot tell apart, as the model should read them (HUGEINT arrives as decimal128(38, 0))."""
    shown: dict[str, str] = {}
    for column in description:
        name, text = column[0], str(column[1]).upper()
        if text in ("HUGEINT", "UHUGEINT"):
            shown[name] = "int128" if text == "HUGEINT" else "uint128"
        elif text.startswith("DECIMAL"):
            shown[name] = text.lower().replace(" ", "")
    return shown


def _error_reply(exc: BaseException) -> dict[str, Any]:
    """An error as the server classifies it: a ToolFailure's fields, or the engine exception's class names."""
    from ba_mcp.errors import ToolFailure

    if isinstance(exc, ToolFailure):
        return {
            "op": "error",
            "failure": {"type": exc.type.value, "code": exc.code, "message": exc.message, "hint": exc.hint},
        }
    classes = [
        c.__name__ for c in type(exc).__mro__ if c.__module__.startswith(("duckdb", "_duckdb", "adbc_driver_manager"))
    ]
    if isinstance(exc, MemoryError):
        classes = ["MemoryError"]
    if isinstance(exc, KeyboardInterrupt):
        classes = ["InterruptException"]
    detail = "" if classes else traceback.format_exception_only(type(exc), exc)[-1][-300:]
    engine = {"classes": classes, "message": str(exc)[:2000], "detail": detail}
    if getattr(exc, "sqlstate", None):  # an ADBC driver's error: the database's own SQLSTATE
        engine["sqlstate"] = str(exc.sqlstate)  # type: ignore[attr-defined]
    elif classes:  # some drivers (Spark's) give it only in the text
        import re

        found = re.search(r"SQLSTATE: ([0-9A-Z]{5})", str(exc))
        if found:
            engine["sqlstate"] = found.group(1)
    return {"op": "error", "engine": engine}


# -- entry point ----------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    options = json.loads(argv[0])
    fd = int(options["fd"])
    protections = confine({**options, "close_in_shim": [fd]})
    options["confined"] = any(pid == protocol.READ_ONLY_ROOT for pid, _ in protections)
    if not options["confined"]:  # no mount namespace: the databases are opened where they are
        for db in options.get("databases", []):
            db["path"] = db["host_path"]
    sock = socket.socket(fileno=fd)
    faulthandler.enable()
    if options.get("kind") == "connection":
        return _serve_connection(sock, options, protections)
    # SIGINT is taken by a thread of its own (DuckDB's threads, started later, inherit the mask): it
    # interrupts the statement running in the main thread.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    started = time.perf_counter()
    import pyarrow  # noqa: F401

    engine = Engine(sock, options)
    _on_sigint(engine.interrupt)
    protocol.send(
        sock,
        {
            "op": "ready",
            "pid": os.getpid(),
            "protections": protections,
            "missing": engine.missing,
            "import_ms": round((time.perf_counter() - started) * 1000, 1),
        },
    )
    if options.get("warm"):  # what the first calls will import (the metrics compiler: ~0.5 s), off the call's path
        modules = list(options["warm"])
        warm = threading.Thread(target=_import_quietly, args=(modules, engine.warm_stop), name="warm", daemon=True)
        warm.start()
        engine.warming = warm  # the first operation waits for it: one package is never imported by two threads
    engine.serve()
    return 0


def _on_sigint(interrupt: Any) -> None:
    """SIGINT (the call's timeout; blocked in every thread) taken by a thread of its own, which calls ``interrupt``."""

    def interrupts() -> None:
        while True:
            signal.sigwait({signal.SIGINT})
            with contextlib.suppress(Exception):
                interrupt()

    threading.Thread(target=interrupts, name="interrupts", daemon=True).start()


def _import_quietly(modules: list[str], stop: threading.Event) -> None:
    """The spare's warm-up: ``modules`` imported in turn (the server keeps the spare at low CPU priority until a call
    takes it: ``workers.priority``) until the first operation stops it — that call waits for the module in progress
    only, never for the rest (the metrics compiler a file's call does not need)."""
    import importlib

    for module in modules:
        if stop.is_set():
            return
        with contextlib.suppress(Exception):
            importlib.import_module(module)


def _serve_connection(sock: socket.socket, options: dict[str, Any], protections: list[Any]) -> int:
    """A connection worker (``connection.Connector``): SIGINT cancels the running statement in the database."""
    from ba_mcp.worker.connection import Connector

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    connector = Connector(sock, options)
    _on_sigint(connector.interrupt)
    protocol.send(sock, {"op": "ready", "pid": os.getpid(), "protections": protections, "missing": {}})
    serve(connector, sock, options)
    return 0


def run(argv: list[str]) -> None:
    """``main``, ending the process without the interpreter's teardown (DuckDB's bindings print a page of
    reference-leak warnings at exit, which would bury the one line that says what went wrong)."""
    try:
        code = main(argv)
    except BaseException:
        traceback.print_exc(limit=6)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run(sys.argv[1:])
