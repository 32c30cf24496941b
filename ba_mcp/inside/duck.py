"""A DuckDB worker's session: where untrusted SQL runs, in a process the server kills.

Started by ``main`` (``python -I -B -m ba_mcp.inside '<options JSON>'``, confined first), it opens one in-memory
DuckDB with every configured database ATTACHed READ_ONLY while calls come (DETACHed, its lock released, once the
session is idle for ``REST_S``), and answers one session's SQL:

* ``Analyse`` — DuckDB's parse of a statement (types, the table names it reads, what would run);
* ``Query`` — a statement on the session's connection (its TEMP tables and views persist across calls);
  workspace files arrive as descriptors and are read by DuckDB's own readers (a Parquet or CSV file's view and
  descriptor are kept for the session's next calls while the file is unchanged); the first ``max_rows + 1``
  rows come back as an uncompressed Arrow stream in a sealed memory file, and on ``Store`` the complete
  result is written as Parquet into the descriptor the server opened for the artifact (``Drop``: discarded);
* ``Describe`` — a database's catalog, with the session's own temporary tables and views;
* ``Stats`` — whole-column figures of a stored table.

The same worker decodes files and pages (``decoding``), writes and reads Parquet artifacts (``parquet``), compiles
metrics (``metrics``) and finds a saved analysis's placeholders (``placeholders``): ``main.duck_handlers``.
A SIGINT (forwarded by the shim) interrupts the running statement; the server kills the worker when that
does not end it within its grace.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ba_mcp.inside.decoding import FdSource
from ba_mcp.inside.serve import Answer, Handlers, handles
from ba_mcp.values import shown_schema
from ba_mcp.workers.messages import (
    Analyse,
    Analysed,
    Describe,
    Described,
    Done,
    Drop,
    Figures,
    Query,
    Result,
    Stats,
    Store,
    Stored,
)
from ba_mcp.workers.wire import Failure, first_rows, memfile, write_arrow
from sandbox.isolation import SESSION_DIR

if TYPE_CHECKING:
    from ba_mcp.inside.sql import Relations

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
    rows: int | None = None  # a Parquet file's rows, by its footer (what its view can read at most)


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


def _result(rows: int, more: bool, display_types: dict[str, str], lock_waited_s: float | None) -> Result:
    """``Query``'s reply: the rows read, whether there are more, the types Arrow cannot show, a lock waited out."""
    reply: Result = {"op": "result", "rows": rows, "more": more, "display_types": display_types}
    if lock_waited_s is not None:
        reply["lock_waited_s"] = lock_waited_s
    return reply


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class DuckSession:
    """One session's in-memory DuckDB and what it keeps between calls (the views of workspace files, a result cut
    at max_rows waiting for its ``Store``); ``handlers`` are the SQL requests it answers."""

    def __init__(self, options: dict[str, Any]) -> None:
        import duckdb

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
        # What the catalog holds (``inside.sql.Relations``: LARGE_SCAN's estimate from the parse), until it changes
        # (``_changed``); the user's functions in it, by what can add one: the files ATTACHed, as they are on disk,
        # and the statements the session ran (~30 ms to list: not again for the same)
        self.relations: Relations | None = None
        self.functions: tuple[tuple[Any, ...], set[str]] | None = None
        self.statements = 0
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
        ``DuckWorkers._current``)."""
        if self.attached:
            return
        import duckdb

        self.attached = True
        self._changed()
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
        self._changed()
        if self.current:
            self.con.execute("USE memory")
            self.current = ""
        for db in self.databases:
            if db["name"] not in self.missing and db["name"] not in self.locked:
                self.con.execute(f"DETACH DATABASE IF EXISTS {_quote(db['alias'])}")

    # -- the loop -----------------------------------------------------------------------------------

    def handlers(self) -> Handlers:
        return dict(
            [
                handles(Analyse, self.analyse),
                handles(Query, self.query),
                handles(Store, self.store),
                handles(Drop, self.drop),
                handles(Describe, self.describe),
                handles(Stats, self.stats),
            ]
        )

    def warm_up(self, imports: Callable[[threading.Event], None]) -> None:
        """Run ``imports`` in a thread of its own, told to stop by the first call (``warm_stop``); the first
        operation waits for it (a half-imported package seen from two threads fails: pandas, pyarrow)."""
        self.warming = threading.Thread(target=imports, args=(self.warm_stop,), name="warm", daemon=True)
        self.warming.start()

    def interrupt(self) -> None:
        if self.busy:
            self.lock_wait_over.set()
            self.con.interrupt()

    # -- SQL ----------------------------------------------------------------------------------------

    def analyse(self, request: Analyse, fds: list[int]) -> Answer[Analysed]:
        from ba_mcp.inside.sql import analyse

        return analyse(self.con, request.sql), []

    def query(self, request: Query, fds: list[int]) -> Answer[Result]:
        import pyarrow as pa

        from ba_mcp.inside.sql import parse, refuse_large_scan

        self._drop_pending()
        name = request.database
        waited = self._opened(name, float(request.lock_wait_s or 0.0))
        if self.current != name:  # USE costs a quarter of a millisecond: only when the database changes
            self.con.execute(f"USE {_quote(self.aliases[name])}")
            self.current = name
        files = request.files
        if len(files) > MAX_FILES:
            raise _too_many()
        named = {spec["name"] for spec in files}
        folded: dict[str, str] = {}
        for spec in files:  # SQL's names ignore case: one view of that name would read one of the files for both
            first = folded.setdefault(spec["name"].lower(), spec["name"])
            if first != spec["name"]:
                raise Failure(
                    type="validation_error",
                    code="AMBIGUOUS_FILE_NAME",
                    message=f"'{first}' and '{spec['name']}' differ only in case, which SQL's names ignore: "
                    "one statement cannot read both by name",
                    hint="read them in separate statements, or copy one under a name of its own",
                )
        for other in [n for n in self.kept if n not in named and n.lower() in folded]:
            self._forget(other)  # a kept view of another spelling is the same DuckDB view: this file's now
        if _MAKES_OR_DROPS.match(request.sql):  # DuckDB's text of the statement: it starts at its keyword
            for other in [n for n in self.kept if n not in named]:  # the session may name its own objects so
                self._forget(other)
        self._trim_kept(named)
        fresh = [(spec, fd) for spec, fd in zip(files, fds, strict=False) if not self._still_kept(spec, fd)]
        held: Any = self._placed([fd for _, fd in fresh], named)
        taken = held.__enter__()
        created: list[str] = []
        try:
            created = self._register(fresh, taken, request.bounds)
            bound = request.scan_bound
            # DuckDB's parse of a SELECT (LARGE_SCAN's estimate reads it); anything else may change the catalog
            tree = None
            with contextlib.suppress(Exception):  # the statement's own error, if any, comes when it runs
                tree = parse(self.con, request.sql) if bound else None
            if tree is None or tree.get("error"):
                self._changed(statement=True)
                tree = None
                if bound and _MAKES_OR_DROPS.match(request.sql):  # CREATE … AS SELECT runs as soon as it is bound:
                    refuse_large_scan(self.con, request.sql, request.params, bound)  # its plan is asked first
            relation = self._bound(request.sql, request.params, named)
            if relation is None:  # a statement without rows (CREATE, DROP): it has run
                self._changed(statement=True)
                self._forget_kept()  # it may have made or dropped objects of those names: views are made afresh
                done = pa.table({"result": pa.array(["done"], pa.string())})
                return _result(1, False, {}, waited), [memfile(write_arrow(done))]
            # past the bound: refused with DuckDB's own estimate
            refuse_large_scan(self.con, request.sql, request.params, bound, self._relations() if tree else None, tree)
            types = _display_types(list(zip(relation.columns, relation.types, strict=False)))
            reader = relation.to_arrow_reader(_BATCH_ROWS)
            # values as DuckDB shows them: intervals as text, float4 by its shortest form (ba_mcp.values); a
            # TIMESTAMPTZ is already in the session's zone
            schema, convert, display = shown_schema(reader.schema, lambda batch: batch)
            types = {**display, **types}
            head, have, more, blob = first_rows(reader, convert, schema, int(request.max_rows))
            if more:
                self.pending_store = (reader, head, schema, created, held, convert)
                created, held = [], None
            return _result(have, more, types, waited), [memfile(blob)]
        finally:
            self._unregister(created)
            if held is not None:
                held.__exit__(None, None, None)

    def _opened(self, name: str, lock_wait_s: float = 0.0) -> float | None:
        """Database ``name`` is ATTACHed, after waiting up to ``lock_wait_s`` for another program's lock on its file;
        returns the seconds waited (None: no other program held it)."""
        waited = self._wait_for_lock(name, lock_wait_s) if name in self.locked else None
        if name in self.missing:
            raise Failure(
                type="dependency_error",
                code="DATABASE_MISSING",
                message=f"database '{name}' could not be opened: {self.missing[name]}",
                hint="check the `databases` setting",
            )
        return waited

    def _wait_for_lock(self, name: str, wait_s: float) -> float | None:
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
                self._changed()
                self.con.execute(f"ATTACH {_literal(db['path'])} AS {_quote(db['alias'])} (READ_ONLY)")
            except duckdb.Error as exc:
                if _LOCK_CONFLICT not in str(exc):
                    del self.locked[name]
                    self.missing[name] = str(exc).split("\n")[0][:300]
                    return None
                pause = min(pause * 2, 0.5)
                continue
            del self.locked[name]
            return round(time.monotonic() - started, 2)
        raise Failure(
            type="resource_error",
            code="DATABASE_LOCKED",
            message=f"database '{name}' is locked by another program that is writing to it; waited "
            f"{time.monotonic() - started:.1f} s for it to finish",
            hint="retry when that program (a dbt build, say) finishes: ba-mcp only reads the file",
        )

    def store(self, request: Store, fds: list[int]) -> Answer[Stored]:
        """The complete result of the last ``query`` (cut at max_rows) as Parquet into the descriptor given,
        stopping past ``limit`` bytes; then its whole-column figures."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self.pending_store is None:
            raise Failure(type="execution_error", code="NOTHING_TO_STORE", message="no result is waiting")
        reader, head, schema, created, held, convert = self.pending_store
        self.pending_store = None
        limit = int(request.limit)
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
        reply: Stored = {"op": "stored", "rows": rows, "complete": complete}
        if complete and kept_all:  # held here: Arrow's kernels, not a second read of the file just written
            reply["stats"], reply["total"] = _table_stats(pa.Table.from_batches(kept, schema=schema)), rows
        elif complete:
            from ba_mcp.inside.sql import parquet_stats

            with self._placed(fds[:1]) as taken:
                stats, total = parquet_stats(self.con, slot_path(taken[0]))
            reply["stats"], reply["total"] = stats, total
        return reply, []

    def drop(self, request: Drop, fds: list[int]) -> Answer[Done]:
        self._drop_pending()
        return {"op": "dropped"}, []

    def _drop_pending(self) -> None:
        if self.pending_store is not None:
            with contextlib.suppress(Exception):
                self.pending_store[0].close()
            self._unregister(self.pending_store[3])
            self.pending_store[4].__exit__(None, None, None)
        self.pending_store = None

    def describe(self, request: Describe, fds: list[int]) -> Answer[Described]:
        from ba_mcp.inside.sql import catalog

        name = request.database
        self._opened(name)
        self._drop_pending()
        self._forget_kept()  # the session's own objects are what it made, not the views of files it named
        return {"op": "catalog", "tables": catalog(self.con, self.aliases[name])}, []

    def stats(self, request: Stats, fds: list[int]) -> Answer[Figures]:
        from ba_mcp.inside.sql import parquet_stats

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
        self._changed()
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
        if files:
            self._changed()
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
                    rows = _parquet_rows(self.con, path) if scan.startswith("read_parquet") else None
                    self.kept[name] = _Kept(_identity(fd), (suffix, bool(spec.get("table"))), slot, parked, rows)
                else:
                    from ba_mcp.formats import table_of
                    from ba_mcp.settings import FormatsSettings

                    source = FdSource(name, spec["size"], suffix, spec["kind"], spec.get("ref_id"), fd)
                    self.con.register(name, table_of(source, FormatsSettings(**bounds), name))
                    created.append(name)
        except BaseException:
            self._unregister(created)
            raise
        return created

    def _unregister(self, names: list[str]) -> None:
        if names:
            self._changed()
        for name in names:
            with contextlib.suppress(Exception):
                self.con.execute(f"DROP VIEW IF EXISTS temp.main.{_quote(name)}")
            with contextlib.suppress(Exception):
                self.con.unregister(name)

    def _changed(self, statement: bool = False) -> None:
        """The catalog changes (a file ATTACHed or DETACHed, a view made or dropped, a ``statement`` run): what
        ``_relations`` knew of it is gone."""
        self.relations = None
        self.statements += statement

    def _relations(self) -> Relations | None:
        """The catalog as ``refuse_large_scan`` reads a statement's parse against (``inside.sql.Relations``), or
        None when DuckDB cannot list it (then the plan decides, as without it)."""
        from ba_mcp.inside.sql import Relations, user_functions

        if self.relations is None:
            files = tuple(_stat(db["path"] + suffix) for db in self.databases for suffix in ("", ".wal"))
            key = (self.statements, self.attached, files)
            try:
                if self.functions is None or self.functions[0] != key:
                    self.functions = (key, user_functions(self.con))
                known = {
                    name: (kept.rows, f"SELECT * FROM read_parquet({_literal(slot_path(kept.slot))})")
                    for name, kept in self.kept.items()
                    if kept.rows is not None
                }
                self.relations = Relations.of(self.con, self.functions[1], known)
            except Exception:
                return None
        return self.relations

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


def _parquet_rows(con: Any, path: str) -> int | None:
    """The rows of the Parquet file at ``path`` (an SQL literal), by its footer; None when it cannot be read so."""
    with contextlib.suppress(Exception):
        found = con.execute(f"SELECT sum(num_rows) FROM parquet_file_metadata({path})").fetchall()
        if found and found[0][0] is not None:
            return int(found[0][0])
    return None


def _stat(path: str) -> tuple[int, ...] | None:
    """What says a database file is as it was (None: not there)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


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
