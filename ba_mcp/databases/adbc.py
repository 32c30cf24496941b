"""Your own databases through ADBC: PostgreSQL, SQLite and any ADBC driver (SPEC §4.2.1, S-11).

The statement runs **in the database, in its own dialect**, over a pooled connection held by a connection worker
(``ba_mcp.workers.connections``): the server never opens the connection itself. Read-only is the database's and
the role's doing, never a check of SQL text — PostgreSQL: one prepared statement in a READ ONLY transaction that
is always rolled back, a privileged role refused at connect; SQLite: the file bound read-only into the worker
and opened read-only and immutable. Results take the DuckDB results' path: at most ``max_rows + 1`` rows to the
server, the complete result streamed into a table artifact by the worker, which DuckDB then joins with workspace
files and other databases' results (``FROM artifact_<id>``).
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ba_mcp.databases.base import Analysis, Execution, in_worker
from ba_mcp.errors import Code, ErrorType, ToolFailure, denied, timed_out
from ba_mcp.workers.connections import DIALECTS, database_message
from ba_mcp.workers.pool import EngineError
from ba_mcp.workers.wire import BadStream, read_arrow

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ba_mcp.settings import DatabaseSettings
    from ba_mcp.tool import ToolContext
    from ba_mcp.workers.connections import Connections
    from ba_mcp.workspace import Resolved

_SCHEMA_TTL_S = 60.0
_SCHEMA_WAIT_S = 30.0  # for a free connection to read the catalog with


@dataclass
class ConnectedDatabase:
    """One configured connection (a ``databases.base.Database``)."""

    name: str
    conf: DatabaseSettings
    pool: Connections
    slots: threading.BoundedSemaphore
    host_file: Path | None = None  # SQLite: the file on this machine

    @property
    def dialect(self) -> str:
        return self.conf.kind if self.conf.kind != "adbc" else (self.conf.driver or "adbc")

    @property
    def identity(self) -> str | None:
        """None: a live database changes without telling us, so its results are never cached."""
        return None

    def analyse(self, sql: str, session: str, ctx: ToolContext | None = None) -> Analysis:
        """No parse of ours: the database's own parser and rules decide (one prepared statement, read-only)."""
        return Analysis(("SELECT",), (), sql)

    def run(
        self, sql: str, params: Any, files: Sequence[tuple[str, Resolved]], max_rows: int, ctx: ToolContext
    ) -> Execution:
        while not self.slots.acquire(timeout=0.05):
            if ctx.cancelled.is_set():
                raise timed_out(
                    f"every connection to {self.name} was busy with other queries until the timeout "
                    f"(databases.{self.name}.max_concurrent = {self.conf.max_concurrent})",
                    "retry shortly",
                )
        label = hashlib.sha256(ctx.session.encode()).hexdigest()[:8]  # application_name: sessions told apart
        request = {
            "op": "run",
            "sql": sql,
            "params": params,
            "max_rows": max_rows,
            "timeout_s": ctx.timeout,
            "label": label,
        }
        for attempt in (1, 2):  # a connection found dead before the statement ran is replaced, once
            held = self.pool.connection(self.name, self.conf, ctx, self.host_file)
            try:
                session = held.__enter__()
                reply, blobs = session.ask(request)
                head = read_arrow(blobs[0], self.pool.conf.max_transfer_mb * 1024 * 1024)
                break
            except BaseException as exc:
                lost = isinstance(exc, ToolFailure) and exc.code == "CONNECTION_LOST"
                if lost:  # it and its idle siblings (a restart ends them all): the retry connects anew
                    session.discard()
                    self.pool.drop_idle(self.name)
                held.__exit__(type(exc), exc, exc.__traceback__)
                if lost and attempt == 1:
                    continue
                self.slots.release()
                if isinstance(exc, BadStream):
                    raise ToolFailure(ErrorType.EXECUTION_ERROR, "ENGINE_PROTOCOL", str(exc)) from None
                raise

        def release() -> None:
            held.__exit__(None, None, None)
            self.slots.release()

        return in_worker(session.ask, reply, head, release)

    def describe(self, session: str = "default") -> dict[str, Any]:
        raise NotImplementedError  # Databases.schema serves it (cached per database)

    def classify_error(self, exc: Exception, columns_hint: str | None = None) -> ToolFailure:
        return sql_failure(exc, self.name, self.dialect)

    def version(self) -> str:
        info = self.pool.info.get(self.name, {})
        return str(info.get("version") or "")


class Catalogs:
    """The schema of each connected database, asked of a connection and kept for a minute."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[float, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def of(self, db: ConnectedDatabase) -> dict[str, Any]:
        with self._lock:
            kept = self._kept.get(db.name)
        if kept is not None and time.monotonic() - kept[0] < _SCHEMA_TTL_S:
            return kept[1]
        if not db.slots.acquire(timeout=_SCHEMA_WAIT_S):
            raise ToolFailure(
                ErrorType.TRANSIENT_ERROR,
                "DATABASE_BUSY",
                f"every connection to {db.name} was busy for {_SCHEMA_WAIT_S:g} s; its schema could not be read",
                "retry shortly",
            )
        try:
            with db.pool.connection(db.name, db.conf, None, db.host_file) as session:
                reply, _ = session.ask({"op": "describe", "schemas": list(db.conf.schemas)})
        except EngineError as exc:
            raise sql_failure(exc, db.name, db.dialect) from None
        finally:
            db.slots.release()
        tables = reply["tables"]
        with self._lock:
            self._kept[db.name] = (time.monotonic(), tables)
        return tables


def dialect_name(conf: DatabaseSettings) -> str:
    return DIALECTS.get(conf.kind, conf.driver or "ADBC")


def sql_failure(exc: Exception, name: str, dialect: str) -> ToolFailure:
    """A database's error in the spec's vocabulary, by its SQLSTATE, keeping its own message and position."""
    if isinstance(exc, ToolFailure):
        return exc
    if not isinstance(exc, EngineError):
        raise exc
    state, text = exc.sqlstate, database_message(exc)
    schema_hint = f"read the resource db://{name}/schema for tables and columns"
    if "BA_MCP_READ_ONLY" in text:  # ba-mcp's rule in Spark
        return denied(
            text.replace("BA_MCP_READ_ONLY: ", ""),
            "use SELECT (SHOW, DESCRIBE and EXPLAIN run too); results over max_rows are kept as artifacts",
            code=Code.READ_ONLY,
        )
    if state == "57014" or "canceling statement" in text or "OPERATION_CANCELED" in text or "interrupted" in text:
        return ToolFailure(
            ErrorType.TIMEOUT,
            Code.TIMEOUT,
            "the query was cancelled in the database at its timeout",
            "filter or aggregate more, or raise tools.query_database.timeout_s",
        )
    if state in ("25006", "25001") or "readonly database" in text or "read-only" in text:
        return denied(
            f"the statement would change the database, which is read-only here: {text}",
            "use SELECT; keep a result by querying it again, or join results as artifacts in DuckDB",
            code=Code.READ_ONLY,
        )
    if "multiple commands" in text:
        return denied(
            "the query holds more than one statement; exactly one is allowed per call",
            "send one SELECT per call",
            code="ONE_STATEMENT",
        )
    if state == "42501":
        return denied(text, f"the role of databases.{name} may not do that; ask for a grant", code="ACCESS_DENIED")
    if state in ("42P01", "3F000") or "no such table" in text:
        return ToolFailure(ErrorType.NOT_FOUND, "UNKNOWN_TABLE", text, schema_hint)
    if state in ("42703", "42883", "42804") or "no such column" in text:
        return ToolFailure(ErrorType.VALIDATION_ERROR, "BIND_ERROR", text, schema_hint)
    if state == "42601" or "syntax error" in text:
        return ToolFailure(
            ErrorType.VALIDATION_ERROR, "SQL_SYNTAX", text, f"fix the SQL ({DIALECTS.get(dialect, dialect)} dialect)"
        )
    if state.startswith("08"):
        return ToolFailure(ErrorType.DEPENDENCY_ERROR, "DATABASE_UNAVAILABLE", f"database '{name}': {text}", "retry")
    if state.startswith("53"):
        return ToolFailure(ErrorType.RESOURCE_ERROR, "DATABASE_RESOURCES", text, "aggregate or filter more")
    if state.startswith("22"):
        return ToolFailure(ErrorType.VALIDATION_ERROR, "SQL_ERROR", text, schema_hint)
    if state.startswith("28"):
        return ToolFailure(ErrorType.PERMISSION_DENIED, "DATABASE_AUTH", text, f"check databases.{name}")
    text = text or "the database refused the statement"
    return ToolFailure(ErrorType.EXECUTION_ERROR, "SQL_ERROR", text, schema_hint)
