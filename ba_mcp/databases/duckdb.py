"""The DuckDB engine: configured DuckDB files, served by engine workers (``ba_mcp.workers``), never in the server.

Each session's engine worker opens one in-memory DuckDB and ATTACHes every configured file READ_ONLY where
its own mount namespace shows it: a read-only bind mount, so no statement — not ``EXPLAIN ANALYZE COPY … TO
'<the file>'``, ``CHECKPOINT``, or a write to its WAL — can change a byte of it, and opening a 50 GB file
costs nothing (no copy is ever made). The session's TEMP tables and views live in that connection between
calls and die with the session. Workspace files and table artifacts the statement names reach the worker as
descriptors the resolver opened, read there by DuckDB's own readers.

What the server keeps: which statements it lets through (DuckDB's parse, in the worker, must report one
SELECT, EXPLAIN of one SELECT, or a CREATE/DROP — which the read-only attachment confines to the session's
own objects), the per-database query slots, and the classification of the engine's errors.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ba_mcp import callers
from ba_mcp.databases.base import Analysis, Execution, Owner, RunThenCollect, Schema, in_worker
from ba_mcp.databases.slots import slot_wait
from ba_mcp.errors import Code, ErrorType, ToolFailure, denied
from ba_mcp.workers.duckworkers import file_identity
from ba_mcp.workers.failures import EngineError
from ba_mcp.workers.messages import Describe, Query

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ba_mcp.settings import DatabaseSettings
    from ba_mcp.tool import ToolContext
    from ba_mcp.workspace import Resolved, Workspace

DEMO_FILE = "demo.duckdb"


@dataclass
class DuckDBDatabase(RunThenCollect):
    """One configured DuckDB database (a ``databases.base.Database``)."""

    name: str
    path: Path  # the configured file (bound read-only into each engine worker)
    owner: Owner  # the App's databases.configured.Databases: its engine workers, slots, parse, workspace data
    dialect: str = "duckdb"

    @property
    def identity(self) -> str:
        return f"{self.name}:{file_identity(self.path)}"

    def analyse(self, sql: str, session: str, ctx: ToolContext | None = None) -> Analysis:
        return self.owner.analyse(sql, session, ctx)

    def run(
        self, sql: str, params: Any, files: Sequence[tuple[str, Resolved]], max_rows: int, ctx: ToolContext
    ) -> Execution:
        """Run ``sql`` in the session's engine worker once a query slot of this database is free; the call's
        timeout interrupts it there and, past the grace, ends the worker."""
        slots = self.owner.slots(self.name)
        who = callers.principal_of(ctx.session)
        started = time.monotonic()
        if not slots.acquire(who, slot_wait(ctx.timeout), ctx.cancelled.is_set):
            raise slots.busy(self.name, who, time.monotonic() - started)
        held = self.owner.duck_workers.held(ctx.session, ctx)
        try:
            call = held.__enter__()
            specs, fds = self.owner.file_specs(files)
            request = Query(
                self.name,
                sql,
                params,
                max_rows,
                specs,
                self.owner.settings.formats.model_dump(),
                ctx.memo.get("scan_bound"),  # scans DuckDB expects past it are refused, saying so
                # another program's lock on the file (a dbt build) is waited out within the call's timeout
                max(0.0, slot_wait(ctx.timeout) - (time.monotonic() - started)),
            )
            reply, blobs = call.ask(request, fds)
            head = call.arrow(blobs[0])
        except ToolFailure as exc:
            held.__exit__(type(exc), exc, exc.__traceback__)
            slots.release(who)
            raise self._locked(exc) from None
        except BaseException as exc:
            held.__exit__(type(exc), exc, exc.__traceback__)
            slots.release(who)
            raise

        def release() -> None:
            held.__exit__(None, None, None)
            slots.release(who)

        waited = reply.get("lock_waited_s")
        notes = [f"waited {waited:.1f} s for another program's lock on {self.path.name}"] if waited else []
        return in_worker(call.ask, reply, head, release, notes)

    def _locked(self, failure: ToolFailure) -> ToolFailure:
        """A DATABASE_LOCKED failure from the worker, naming the program that holds the lock where the system says
        (the worker, in a PID namespace of its own, cannot see it); any other failure as it is."""
        holder = lock_holder(self.path) if failure.code == "DATABASE_LOCKED" else None
        if holder is None:
            return failure
        return ToolFailure(
            failure.type, failure.code, failure.message.replace("another program", holder, 1), failure.hint
        )

    @property
    def artifacts(self) -> Any:
        return self.owner.artifacts

    def describe(self, session: str = "default") -> Schema:
        """Tables and views with columns, types, row counts, comments, view definitions, the values of
        low-cardinality text columns — and the session's own TEMP tables and views."""
        with self.owner.duck_workers.held(session, None) as call:
            reply, _ = call.ask(Describe(self.name))
        description = self.owner.settings.databases[self.name].description
        return {"database": self.name, "description": description, "dialect": "DuckDB", "tables": reply["tables"]}

    def classify_error(self, exc: Exception, columns_hint: str | None = None) -> ToolFailure:
        """The engine's errors in the error vocabulary (T-E); ``columns_hint`` replaces the schema hint when the
        query reads workspace data."""
        return _sql_failure(exc, self.name, self.owner.clean, columns_hint)


class DuckDBEngine:
    """DuckDB files (``databases.<name>.path``) and the embedded demo (no path): served by the engine workers."""

    def database(self, name: str, conf: DatabaseSettings, owner: Owner) -> DuckDBDatabase:
        path = self.file_of(conf, owner.workspace)
        if conf.path is None:
            owner.prepare()
        if not path.is_file():
            raise ToolFailure(
                ErrorType.DEPENDENCY_ERROR,
                "DATABASE_MISSING",
                f"the file of database '{name}' does not exist",
                "check the `databases` setting",
            )
        return DuckDBDatabase(name, path, owner)

    def host_file(self, conf: DatabaseSettings, root: Path) -> Path | None:
        if conf.path is None:
            return None  # the demo: in the workspace's data/
        path = conf.path.expanduser()
        return path if path.is_absolute() else root / path

    def file_of(self, conf: DatabaseSettings, workspace: Workspace) -> Path:
        return self.host_file(conf, workspace.root) or workspace.dir("data") / DEMO_FILE


ENGINE = DuckDBEngine()


def lock_holder(path: Path) -> str | None:
    """Who holds a write lock on ``path`` — "another program (dbt, PID 4242)" — from Linux's ``/proc/locks`` (the
    server sees every process of its machine); None where that cannot be told."""
    try:
        info = os.stat(path)
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    file = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    for line in lines:
        parts = line.split()  # "1: POSIX  ADVISORY  WRITE 3449 08:01:1234 0 EOF" (a waiter's line holds "->")
        if len(parts) >= 6 and "->" not in parts and parts[3] == "WRITE" and parts[5] == file:
            pid = parts[4]
            try:
                with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
                    name = f.read().strip()
            except OSError:
                name = ""
            shown = "".join(c for c in name if c.isprintable())[:40]
            return f"another program ({shown + ', ' if shown else ''}PID {pid})"
    return None


def _bad_data(name: str, detail: str) -> ToolFailure:
    detail = re.sub(r"'?/proc/self/fd/\d+'?", "the file", detail).split("\n")[0][:300]
    return ToolFailure(
        ErrorType.VALIDATION_ERROR,
        "BAD_DATA",
        f"{name[:200]} could not be read as a table: {detail}",
        'check the file with file_reader (format="text" shows its lines); fix or re-export it',
    )


def _sql_failure(
    exc: Exception, database: str, clean: Callable[[str], str], columns_hint: str | None = None
) -> ToolFailure:
    if not isinstance(exc, EngineError):
        raise exc
    classes = set(exc.classes)
    raw = exc.message
    message = clean(raw.split("\n\nLINE")[0])
    schema_hint = columns_hint or f"read the resource db://{database}/schema for tables and columns"
    if "InterruptException" in classes:
        return ToolFailure(
            ErrorType.TIMEOUT,
            Code.TIMEOUT,
            "the query was interrupted at its timeout",
            "filter or aggregate more",
        )
    if "PermissionException" in classes:
        return denied(
            message,
            "only the database and workspace data named in FROM (paths, upload_ and artifact_ ids) are reachable",
            code="ACCESS_DENIED",
        )
    if "MemoryError" in classes or "OutOfMemoryException" in classes:
        return ToolFailure(
            ErrorType.RESOURCE_ERROR,
            Code.OUT_OF_MEMORY,
            message.split("\n")[0] or "out of memory",
            "aggregate or filter more (the memory limit is databases.<name>.memory_limit)",
        )
    if "IOException" in classes and "/proc/self/fd/" in raw:
        return _bad_data("the workspace file", raw)
    if "InvalidInputException" in classes and "read-only" in raw.lower():
        return denied(
            "the statement would write to a configured database, which is read-only",
            "use SELECT; keep intermediate results with CREATE TEMP TABLE name AS SELECT …",
            code=Code.READ_ONLY,
        )
    if "CatalogException" in classes:
        return ToolFailure(ErrorType.NOT_FOUND, "UNKNOWN_TABLE", message, schema_hint)
    if "BinderException" in classes:
        return ToolFailure(ErrorType.VALIDATION_ERROR, "BIND_ERROR", message, schema_hint)
    if "ParserException" in classes:
        return ToolFailure(ErrorType.VALIDATION_ERROR, "SQL_SYNTAX", message, "fix the SQL (DuckDB dialect)")
    if "InvalidInputException" in classes and "parameter" in raw.lower():
        return ToolFailure(
            ErrorType.INVALID_PARAMETERS,
            "BAD_PARAMS",
            message,
            "pass params as an object for $name placeholders or an array for ? / $1",
        )
    if classes & {"ConversionException", "InvalidInputException", "OutOfRangeException"}:
        if "/proc/self/fd/" in raw or "CSV" in raw:
            return _bad_data("the workspace file", raw)
        return ToolFailure(ErrorType.VALIDATION_ERROR, "SQL_ERROR", message, schema_hint)
    if classes:
        return ToolFailure(ErrorType.EXECUTION_ERROR, "SQL_ERROR", message, schema_hint)
    return ToolFailure(
        ErrorType.EXECUTION_ERROR, "ENGINE_ERROR", clean(exc.detail or raw)[:300], "retry; report it if it persists"
    )
