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

import re
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ba_mcp.databases.adbc import Catalogs, ConnectedDatabase, dialect_name
from ba_mcp.databases.base import Analysis, Execution, in_worker
from ba_mcp.demo_data import ensure_demo_database
from ba_mcp.errors import Code, ErrorType, ToolFailure, denied, invalid, timed_out
from ba_mcp.ids import ARTIFACT_ID
from ba_mcp.workers.pool import EngineError, file_identity
from ba_mcp.workers.wire import BadStream, read_arrow

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ba_mcp.settings import DatabaseSettings, Settings
    from ba_mcp.stores.artifacts import ArtifactStore
    from ba_mcp.tool import ToolContext
    from ba_mcp.workers.connections import Connections
    from ba_mcp.workers.pool import Engines
    from ba_mcp.workspace import Resolved, Workspace

DEMO_FILE = "demo.duckdb"
QUERYABLE = (".parquet", ".pq", ".csv", ".tsv", ".tab", ".json", ".jsonl", ".ndjson", ".xlsx", ".xlsm", ".xls")


@dataclass
class DuckDBDatabase:
    """One configured DuckDB database (a ``databases.base.Database``)."""

    name: str
    path: Path  # the configured file (bound read-only into each engine worker)
    owner: Databases
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
        while not slots.acquire(timeout=0.05):
            if ctx.cancelled.is_set():
                raise timed_out(
                    "every query slot of this database was taken by other queries until the timeout",
                    "retry shortly",
                )
        engines = self.owner.engines
        held = engines.session(ctx.session, ctx)
        try:
            call = held.__enter__()
            specs, fds = self.owner.file_specs(files)
            reply, blobs = call.ask(
                {
                    "op": "run",
                    "database": self.name,
                    "sql": sql,
                    "params": params,
                    "max_rows": max_rows,
                    "files": specs,
                    "bounds": self.owner.settings.formats.model_dump(),
                },
                fds,
            )
            head = read_arrow(blobs[0], engines.conf.max_transfer_mb * 1024 * 1024)
        except BaseException as exc:
            held.__exit__(type(exc), exc, exc.__traceback__)
            slots.release()
            if isinstance(exc, BadStream):
                raise ToolFailure(ErrorType.EXECUTION_ERROR, "ENGINE_PROTOCOL", str(exc)) from None
            raise

        def release() -> None:
            held.__exit__(None, None, None)
            slots.release()

        return in_worker(call.ask, reply, head, release)

    def describe(self, session: str = "default") -> dict[str, Any]:
        return self.owner.schema(self.name, session)

    def classify_error(self, exc: Exception, columns_hint: str | None = None) -> ToolFailure:
        """The engine's errors in the spec's vocabulary; ``columns_hint`` replaces the schema hint when the
        query reads workspace data."""
        return _sql_failure(exc, self.name, self.owner.clean, columns_hint)


def sqlite_path(conf: DatabaseSettings, root: Path) -> Path:
    """The file of a ``sqlite:`` URL: ``sqlite:///relative/to/the/workspace.db`` or ``sqlite:////absolute/path.db``
    (SQLAlchemy's convention)."""
    url = conf.url.get_secret_value() if conf.url is not None else ""
    rest = url[len("sqlite:") :]
    rest = rest[3:] if rest.startswith("///") else rest.lstrip("/") if rest.startswith("//") else rest
    path = Path(urllib.parse.unquote(rest.split("?", 1)[0])).expanduser()
    return path if path.is_absolute() else root / path


class Databases:
    """The configured databases of one App, served by its engine workers."""

    def __init__(
        self,
        settings: Settings,
        workspace: Workspace,
        engines: Engines,
        artifacts: ArtifactStore,
        connections: Connections | None = None,
    ) -> None:
        self.settings = settings
        self.workspace = workspace
        self.engines = engines
        self.artifacts = artifacts
        self.connections = connections  # the connection workers of configured connections (url/driver)
        self.catalogs = Catalogs()
        self._lock = threading.Lock()
        self._analyses: dict[str, Analysis] = {}
        self._slots = {name: threading.BoundedSemaphore(db.max_concurrent) for name, db in settings.databases.items()}
        self._changes: dict[str, int] = {}  # session -> CREATE/DROP statements it ran
        engines.prepare = self.prepare

    def session_objects(self, session: str) -> int:
        """How many times the session changed its own TEMP objects (0: never; its reads are anyone's)."""
        return self._changes.get(session, 0)

    def changed_objects(self, session: str) -> None:
        with self._lock:
            self._changes[session] = self._changes.get(session, 0) + 1

    def slots(self, name: str) -> threading.BoundedSemaphore:
        """Queries in flight on database ``name`` across sessions (``databases.<name>.max_concurrent``); a
        session has one engine worker, so one session holds at most one slot at a time."""
        return self._slots[name]

    @property
    def names(self) -> list[str]:
        return sorted(self.settings.databases)

    def is_file(self, name: str) -> bool:
        """Whether ``name`` is a DuckDB file (or the demo), served by the engine workers."""
        return self.settings.databases[name].kind == "duckdb"

    def path_of(self, name: str) -> Path:
        conf = self.settings.databases[name]
        if conf.kind == "sqlite":
            return sqlite_path(conf, self.workspace.root)
        if conf.path is None:
            return self.workspace.dir("data") / DEMO_FILE
        path = conf.path.expanduser()
        return path if path.is_absolute() else self.workspace.root / path

    def paths(self) -> dict[str, Path]:
        """The DuckDB files the engine workers bind (connections are not theirs)."""
        return {name: self.path_of(name) for name in self.names if self.is_file(name)}

    def prepare(self) -> None:
        """Make the demo database exist (generated on first use, in a process of its own)."""
        with self._lock:
            for name, conf in self.settings.databases.items():
                if conf.path is None and conf.kind == "duckdb":
                    ensure_demo_database(self.path_of(name))

    def get(self, name: str) -> DuckDBDatabase | ConnectedDatabase:
        """The database ``name`` (the demo database is generated on first use)."""
        if name not in self.settings.databases:
            raise invalid(f"unknown database '{name[:60]}'", "database must be one of: " + ", ".join(self.names))
        conf = self.settings.databases[name]
        if conf.kind != "duckdb":
            if self.connections is None:
                raise ToolFailure(ErrorType.DEPENDENCY_ERROR, "DATABASE_UNAVAILABLE", f"'{name}' is not served here")
            host_file = self.path_of(name) if conf.kind == "sqlite" else None
            if host_file is not None and not host_file.is_file():
                raise ToolFailure(
                    ErrorType.DEPENDENCY_ERROR,
                    "DATABASE_MISSING",
                    f"the SQLite file of database '{name}' does not exist",
                    f"check databases.{name}.url",
                )
            return ConnectedDatabase(name, conf, self.connections, self.slots(name), host_file)
        path = self.path_of(name)
        if self.settings.databases[name].path is None:
            self.prepare()
        if not path.is_file():
            raise ToolFailure(
                ErrorType.DEPENDENCY_ERROR,
                "DATABASE_MISSING",
                f"the file of database '{name}' does not exist",
                "check the `databases` setting",
            )
        return DuckDBDatabase(name, path, self)

    def analyse(self, query: str, session: str = "default", ctx: ToolContext | None = None) -> Analysis:
        """What DuckDB's parser (in the session's engine worker) says of ``query``: its statements' types and
        the unqualified table names it reads. Memoised per query text. A syntax error is SQL_SYNTAX."""
        with self._lock:
            known = self._analyses.get(query)
        if known is not None:
            return known
        try:
            with self.engines.session(session, ctx) as call:
                reply, _ = call.ask({"op": "analyse", "sql": query})
        except EngineError as exc:
            raise ToolFailure(
                ErrorType.VALIDATION_ERROR, "SQL_SYNTAX", self.clean(exc.message), "fix the SQL (DuckDB dialect)"
            ) from None
        analysis = Analysis(
            tuple(reply["kinds"]), tuple(reply["refs"]), str(reply.get("sql", "")), str(reply.get("refusal", ""))
        )
        with self._lock:
            if len(self._analyses) >= 512:
                self._analyses.pop(next(iter(self._analyses)))
            self._analyses[query] = analysis
        return analysis

    def file_specs(self, files: Sequence[tuple[str, Resolved]]) -> tuple[list[dict[str, Any]], list[int]]:
        """What the worker needs to read each workspace file (its descriptor goes along)."""
        specs, fds = [], []
        for name, resolved in files:
            table = False
            if resolved.ref_id and ARTIFACT_ID.match(resolved.ref_id):
                meta = self.artifacts.get(resolved.ref_id)
                if meta.kind != "table":
                    raise ToolFailure(
                        ErrorType.VALIDATION_ERROR,
                        "NOT_A_TABLE",
                        f"{resolved.ref_id} is a {meta.kind} artifact, not a table",
                        "only table artifacts can be queried; read others with file_reader",
                    )
                table = True
            elif resolved.suffix not in QUERYABLE:
                raise ToolFailure(
                    ErrorType.VALIDATION_ERROR,
                    "NOT_QUERYABLE",
                    f"files of type '{resolved.suffix or 'unknown'}' cannot be queried",
                    "query CSV, TSV, Parquet, JSON, JSON Lines or Excel files, or table artifacts",
                )
            specs.append(
                {
                    "name": name,
                    "suffix": resolved.suffix,
                    "size": resolved.size,
                    "kind": resolved.kind,
                    "ref_id": resolved.ref_id,
                    "table": table,
                }
            )
            fds.append(resolved.fd)
        return specs, fds

    def schema(self, name: str, session: str = "default") -> dict[str, Any]:
        """Tables and views with columns, types, row counts, comments, view definitions, the values of
        low-cardinality text columns — and the session's own TEMP tables and views."""
        db = self.get(name)
        description = self.settings.databases[name].description
        if isinstance(db, ConnectedDatabase):
            tables = self.catalogs.of(db)  # connects, so the version is known after it
            version = db.version()
            dialect = dialect_name(db.conf) + (f" {version}" if version else "")
            return {"database": name, "description": description, "dialect": dialect, "tables": tables}
        with self.engines.session(session, None) as call:
            reply, _ = call.ask({"op": "describe", "database": name})
        return {"database": name, "description": description, "dialect": "DuckDB", "tables": reply["tables"]}

    def clean(self, message: str) -> str:
        """Engine messages may quote paths; never the workspace's real one, nor a descriptor's (S-1)."""
        root = str(self.workspace.root)
        message = re.sub(r"/proc/self/fd/\d+", "the file", message)
        return message.replace(root + "/", "").replace(root, "<workspace>")[:600]

    def close(self) -> None:
        """Nothing of the databases lives in the server; the engine workers are ended by their pool."""


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
            "filter or aggregate more, or raise tools.query_database.timeout_s",
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
