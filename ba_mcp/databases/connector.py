"""Databases reached through ADBC connections (T-Q-W, S-11): what every such engine shares.

The statement runs **in the database, in its own dialect**, over a pooled connection held by a connection worker
(``ba_mcp.workers.connections``): the server never opens the connection itself. Results take the DuckDB results'
path: at most ``max_rows + 1`` rows to the server, the complete result streamed into a table artifact by the
worker, which DuckDB then joins with workspace files and other databases' results (``FROM artifact_<id>``).

* ``ConnectedDatabase`` — the server's side: a configured connection as a ``Database``;
* ``Catalogs`` — each database's schema, asked of a connection and kept a minute;
* ``sql_failure`` — a database's error in the error vocabulary (T-E) by its SQLSTATE (the engine's own texts first);
* ``ConnectedEngine`` — an engine served by connection workers, with the defaults of any ADBC driver. Its worker
  hooks run in the connection worker (``inside/connection.py``, which knows no engine: it loads the one the
  registry names): ``open`` (connect; what the database says of itself), ``begin``/``vet``/``end`` (the read-only
  frame of one call), ``columns`` (the result's Arrow types), ``catalog``, ``interrupt``. Engines override what
  they need (``postgresql.py``, ``sqlite.py``, ``spark.py``); ``adbc.py`` is any other driver.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ba_mcp import callers, registry
from ba_mcp.databases import roles
from ba_mcp.databases.base import (
    Analysis,
    CatalogCache,
    Execution,
    Owner,
    RunThenCollect,
    Schema,
    Tables,
    in_worker,
)
from ba_mcp.databases.slots import slot_wait
from ba_mcp.errors import Code, ErrorType, ToolFailure, denied
from ba_mcp.registry import local_path
from ba_mcp.workers.messages import Catalog, Connect, Opened, Statement

if TYPE_CHECKING:
    from collections.abc import Sequence

    import adbc_driver_manager.dbapi as dbapi
    import pyarrow as pa

    from ba_mcp.databases.slots import FairSlots
    from ba_mcp.settings import DatabaseSettings
    from ba_mcp.stores.artifacts import ArtifactStore
    from ba_mcp.tool import ToolContext
    from ba_mcp.workers.connections import Connections
    from ba_mcp.workers.failures import EngineError
    from ba_mcp.workspace import Resolved

_SCHEMA_TTL_S = 60.0
_SCHEMA_WAIT_S = 30.0  # for a free connection to read the catalog with


def label_of(conf: DatabaseSettings) -> str:
    """How people name a database's engine (the generic ADBC engine: its driver)."""
    if conf.kind == "adbc":
        return conf.driver or "ADBC"
    return registry.info(conf.kind).label


@dataclass
class ConnectedDatabase(RunThenCollect):
    """One configured connection (a ``databases.base.Database``)."""

    name: str
    conf: DatabaseSettings
    engine: ConnectedEngine
    pool: Connections
    slots: FairSlots
    catalogs: CatalogCache  # the App's Catalogs
    store: ArtifactStore  # where a complete result is kept
    host_file: Path | None = None  # a database that is a file on this machine (bound read-only into the worker)

    @property
    def dialect(self) -> str:
        return self.conf.kind if self.conf.kind != "adbc" else (self.conf.driver or "adbc")

    @property
    def artifacts(self) -> ArtifactStore:
        return self.store

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
        identity = self.engine.identity(self.name, self.conf, callers.principal())  # refused before any wait
        who = callers.principal_of(ctx.session)
        started = time.monotonic()
        if not self.slots.acquire(who, slot_wait(ctx.timeout), ctx.cancelled.is_set):
            raise self.slots.busy(self.name, who, time.monotonic() - started)
        label = hashlib.sha256(ctx.session.encode()).hexdigest()[:8]  # the session, told apart by the database
        request = Statement(
            sql=sql,
            params=params,
            max_rows=max_rows,
            timeout_s=ctx.timeout,
            label=label,
            identity=identity,
            scan_bound=ctx.memo.get("scan_bound"),  # a scan planned past it is refused, saying its estimate
        )
        for attempt in (1, 2):  # a connection found dead before the statement ran is replaced, once
            held = self.pool.connection(self.name, self.conf, self.engine, ctx, self.host_file)
            try:
                session = held.__enter__()
                reply, blobs = session.ask(request)
                head = session.arrow(blobs[0])
                break
            except BaseException as exc:
                lost = isinstance(exc, ToolFailure) and exc.code == "CONNECTION_LOST"
                if lost:  # it and its idle siblings (a restart ends them all): the retry connects anew
                    session.discard()
                    self.pool.drop_idle(self.name)
                held.__exit__(type(exc), exc, exc.__traceback__)
                if lost and attempt == 1:
                    continue
                self.slots.release(who)
                raise

        def release() -> None:
            held.__exit__(None, None, None)
            self.slots.release(who)

        execution = in_worker(session.ask, reply, head, release)
        role = identity.get("role") or self.pool.info.get(self.name, {}).get("role")
        if role:  # the database role it ran as: the mapped one, else the connecting role (for the call's provenance)
            execution.provenance["role"] = str(role)
        return execution

    def describe(self, session: str = "default") -> Schema:
        tables = self.catalogs.of(self)  # connects, so the version is known after it
        version = self.version()
        return {
            "database": self.name,
            "description": self.conf.description,
            "dialect": label_of(self.conf) + (f" {version}" if version else ""),
            "tables": tables,
        }

    def classify_error(self, exc: Exception, columns_hint: str | None = None) -> ToolFailure:
        return sql_failure(exc, self.name, self.conf, self.engine)

    def version(self) -> str:
        info = self.pool.info.get(self.name, {})
        return str(info.get("version") or "")


class Catalogs:
    """The schema of each connected database, asked of a connection and kept for a minute — per database role when
    its callers run as roles of their own (``role_from``: a role's grants decide the common values it is shown)."""

    def __init__(self) -> None:
        self._kept: dict[tuple[str, str | None], tuple[float, Tables]] = {}  # (database, role) -> catalog
        self._lock = threading.Lock()

    def of(self, db: ConnectedDatabase) -> Tables:
        from ba_mcp.workers.failures import worker_failures

        identity = db.engine.identity(db.name, db.conf, callers.principal())  # read as the caller's role
        key = (db.name, identity.get("role"))
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None and time.monotonic() - kept[0] < _SCHEMA_TTL_S:
            return kept[1]
        who = callers.principal_of(callers.current())
        if not db.slots.acquire(who, _SCHEMA_WAIT_S):
            raise ToolFailure(
                ErrorType.TRANSIENT_ERROR,
                "DATABASE_BUSY",
                f"every connection to {db.name} was busy for {_SCHEMA_WAIT_S:g} s; its schema could not be read",
                "retry shortly",
            )
        try:
            with (
                worker_failures(engine=lambda exc: sql_failure(exc, db.name, db.conf, db.engine)),
                db.pool.connection(db.name, db.conf, db.engine, None, db.host_file) as session,
            ):
                reply, _ = session.ask(Catalog(list(db.conf.schemas), identity))
        finally:
            db.slots.release(who)
        tables: Tables = reply["tables"]
        with self._lock:
            self._kept[key] = (time.monotonic(), tables)
        return tables


def sql_failure(exc: Exception, name: str, conf: DatabaseSettings, engine: ConnectedEngine) -> ToolFailure:
    """A database's error in the error vocabulary (T-E): the engine's own texts first, then by its SQLSTATE, keeping the
    database's message and position."""
    from ba_mcp.workers.failures import EngineError

    if isinstance(exc, ToolFailure):
        return exc
    if not isinstance(exc, EngineError):
        raise exc
    state, text = exc.sqlstate, engine.message(exc)
    schema_hint = f"read the resource db://{name}/schema for tables and columns"
    own = engine.failure(text, state)
    if own is not None:
        return own
    if state == "57014" or "canceling statement" in text or "OPERATION_CANCELED" in text or "interrupted" in text:
        return ToolFailure(
            ErrorType.TIMEOUT,
            Code.TIMEOUT,
            "the query was cancelled in the database at its timeout",
            "filter or aggregate more",
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
        return ToolFailure(ErrorType.VALIDATION_ERROR, "SQL_SYNTAX", text, f"fix the SQL ({label_of(conf)} dialect)")
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


Bound = tuple[Any, ...] | None  # a statement's values as the worker passes them to the driver: positional, or none
# a result's schema as the server reads it, the function converting each batch to it, and display names of the types
# Arrow cannot show (``ConnectedEngine.columns``)
Columns = tuple["pa.Schema", Callable[["pa.RecordBatch"], "pa.RecordBatch"], dict[str, str]]


class Held(Protocol):
    """What an engine's worker-side hooks receive (``c``): the connection worker's state for the one database
    connection it serves (``inside/connection.py``'s ``Connector``). An engine keeps what is its own (a second
    cursor, a session id, the file's URI) in ``extra``, under names of its choosing."""

    options: dict[str, Any]  # the worker's start options
    con: dbapi.Connection  # the ADBC (DB-API) connection ``open`` made
    cur: dbapi.Cursor  # the cursor the user's statements run on
    frame: dbapi.Cursor | None  # a cursor of our own fixed text (the read-only frame), where an engine needs one
    running: dbapi.Cursor  # the cursor running the call's statement (``statement`` picks it; ``interrupt`` cancels it)
    label: str  # the calling session's digest (an application_name, a job tag)
    identity: dict[str, Any]  # who the call runs as (``ConnectedEngine.identity``: user, role), set with each call
    in_transaction: bool  # a read-only transaction is open (``begin`` … ``end``)
    extra: dict[str, Any]  # the engine's own state

    def frame_sql(self, sql: str) -> None:
        """Run our own fixed text (the frame's BEGIN, ROLLBACK …) on the frame's cursor, its result read and dropped."""
        ...


class ConnectedEngine:
    """An engine served by connection workers: the defaults of any ADBC driver (its own read-only option where it
    has one, its own catalog, ADBC's cancel). Subclasses override the hooks their engine needs."""

    kind = "adbc"
    folder = False  # the database on this machine (``host_file``) is a folder, not a file (``LocalEngine``)
    takes_roles = False  # runs each call as the database role its caller maps to (``role_from``; ``identity``)

    # -- the server's side ------------------------------------------------------------------------------

    def identity(self, name: str, conf: DatabaseSettings, who: callers.Principal) -> dict[str, Any]:
        """Who a call runs as in the database, decided here in the server from its caller and sent with the call as
        data (the worker's ``begin`` reads it as ``c.identity``): ``user`` names the caller to the database's own logs
        (their display name), ``role`` is the database role the call takes — the one ``role_from`` maps ``who`` to
        (``roles.role_for``: refused when it maps none), None for the connecting role. An engine that runs calls with
        the caller's own credentials (a warehouse taking the user's token) overrides this and ``begin``."""
        role = roles.role_for(name, conf.role_from, who) if conf.role_from is not None else None
        return {"user": who.display, "role": role}

    def database(self, name: str, conf: DatabaseSettings, owner: Owner) -> ConnectedDatabase:
        if owner.connections is None:
            raise ToolFailure(ErrorType.DEPENDENCY_ERROR, "DATABASE_UNAVAILABLE", f"'{name}' is not served here")
        try:
            host_file = self.host_file(conf, owner.workspace.root)
        except ToolFailure as failure:  # a file engine's URL in a form it refuses
            raise ToolFailure(
                failure.type, failure.code, f"the URL of database '{name}' {failure.message}", failure.hint
            ) from None
        if host_file is not None and not (host_file.is_dir() if self.folder else host_file.is_file()):
            what = "folder" if self.folder else "file"
            raise ToolFailure(
                ErrorType.DEPENDENCY_ERROR,
                "DATABASE_MISSING",
                f"the {label_of(conf)} {what} of database '{name}' does not exist",
                f"check databases.{name}.url",
            )
        return ConnectedDatabase(
            name, conf, self, owner.connections, owner.slots(name), owner.catalogs, owner.artifacts, host_file
        )

    def host_file(self, conf: DatabaseSettings, root: Path) -> Path | None:
        """The file on this machine the database is (None: a server reached over the network)."""
        return None

    def connect_message(self, conf: DatabaseSettings, host_file: Path | None) -> Connect:
        """What the worker's ``connect`` needs (the URL and options travel over its socket, never elsewhere)."""
        info = registry.info(conf.kind)
        return Connect(
            engine=info.module,
            driver=conf.driver or info.driver or "",
            uri=conf.url.get_secret_value() if conf.url is not None else "",
            options={k: v.get_secret_value() for k, v in conf.options.items()},
            allow_privileged_role=conf.allow_privileged_role,
            allow_writable_role=conf.allow_writable_role,
            allow_unguarded_writes=conf.allow_unguarded_writes,
            allow_functions=list(conf.allow_functions),
            # the only roles a call may take: each vetted at connect, as the connecting role is
            roles=conf.role_from.all_roles() if conf.role_from is not None else [],
        )

    def message(self, exc: EngineError) -> str:
        """The database's own words out of an ADBC message (its ERROR line, and the LINE/position that follows)."""
        raw = exc.message or exc.detail
        m = re.search(r"ERROR:\s+(.*?)(?:\n\.\s*SQLSTATE:.*)?$", raw, re.S)
        text = m.group(1) if m else re.sub(r"^[A-Z_]+: (\[[^\]]+\] )?", "", raw)
        text = re.sub(r"\s*SQLSTATE: \w+\s*$", "", text)
        text = re.sub(r"\n+Query was: .*$", "", text, flags=re.S).strip().rstrip(".")
        return text[:600]

    def failure(self, text: str, sqlstate: str) -> ToolFailure | None:
        """An error text only this engine speaks (None: the SQLSTATE decides)."""
        return None

    # -- the connection worker's side (``c``: what the worker holds, ``Held``) --------------------------------

    def open(self, c: Held, request: Connect) -> Opened:
        """Open the connection (``c.con``, ``c.cur``) as ``request`` says (``connect_message`` made it); what the
        database says of itself (its version, …)."""
        import adbc_driver_manager.dbapi as dbapi

        uri, options = request.uri, dict(request.options or {})
        kwargs = {"uri": uri, **options} if uri else options
        c.con = dbapi.connect(driver=driver_location(request.driver), db_kwargs=kwargs, autocommit=True)
        c.cur = c.con.cursor()
        info = self.driver_info(c)
        reply: Opened = {"version": str(info.get("vendor_version", ""))}
        try:  # read-only where the driver offers it (and by the user's role)
            c.con.adbc_connection.set_options(**{"adbc.connection.readonly": "true"})
            reply["read_only_by_driver"] = True
        except Exception:
            reply["read_only_by_driver"] = False
        return reply

    def driver_info(self, c: Held) -> dict[str, Any]:
        return {str(k): v for k, v in c.con.adbc_get_info().items() if isinstance(v, (str, int))}

    def named(self, c: Held, sql: str, params: dict[str, Any]) -> tuple[str, list[Any]]:
        """``$name`` placeholders as the engine's positional ones, and their values in order (an engine that
        cannot tell placeholders from text refuses named parameters)."""
        from ba_mcp.workers.wire import Failure

        raise Failure(
            type="invalid_parameters",
            code="BAD_PARAMS",
            message="this database takes positional parameters ($1, $2, … or ?), not named ones",
            hint="pass params as an array, in the order of the placeholders",
        )

    def statement(self, c: Held, sql: str) -> str:
        """The statement as the engine runs it (``c.running``: the cursor that runs it; by default ``c.cur``)."""
        c.running = c.cur
        return sql

    def begin(self, c: Held, timeout_s: float, label: str) -> None:
        """Open the read-only frame of one call (nothing by default: the driver and the role decide)."""

    def vet(self, c: Held, sql: str, params: Bound, timeout_s: float) -> None:
        """Refuse a statement before it runs (nothing by default)."""

    def bind(self, c: Held, sql: str, params: Bound, timeout_s: float) -> Bound:
        """The parameters as the statement takes them (as given by default)."""
        return params

    def end(self, c: Held) -> None:
        """Close the call's frame: nothing of it may outlive the call."""

    def columns(self, schema: pa.Schema) -> Columns:
        """The result's schema as plain Arrow types the server and Parquet read the same way (extension types as
        their storage), the function converting a batch to it, and display names of types Arrow cannot show."""
        return plain_schema(schema, {})

    def catalog(self, c: Held, schemas: list[str]) -> Tables:
        """Any ADBC driver: the driver's own catalog (tables and columns; no row counts)."""
        out: Tables = {}
        objects = c.con.adbc_get_objects(depth="all").read_all().to_pylist()
        for catalog in objects:
            for schema in catalog.get("catalog_db_schemas") or []:
                for table in schema.get("db_schema_tables") or []:
                    name = table["table_name"]
                    if schema.get("db_schema_name"):
                        name = f"{schema['db_schema_name']}.{name}"
                    out[name] = {
                        "kind": str(table.get("table_type") or "table").lower(),
                        "rows": 0,
                        "rows_estimated": True,
                        "comment": "",
                        "definition": "",
                        "columns": [
                            {"name": col["column_name"], "type": col.get("xdbc_type_name") or "", "nullable": True}
                            for col in table.get("table_columns") or []
                        ],
                    }
        return out

    def interrupt(self, c: Held) -> None:
        """The call's timeout: cancel the statement (ADBC's cancel; an engine whose work outlives its client
        stops it in the engine too)."""
        (c.running or c.cur).adbc_cancel()


class LocalEngine(ConnectedEngine):
    """An engine whose database is a file — or, with ``folder = True``, a folder — on this machine, named by its
    URL as SQLAlchemy does (``scheme:///relative/to/the/workspace``, ``scheme:////absolute``): bound read-only into
    the connection worker's root at ``/databases/<name>`` (and reached there), checked to exist before a worker
    starts. SQLite is one; a folder of CSV or Parquet files read by an ADBC driver is another — its engine writes
    only ``open`` (``where(c, request)`` is the path to open) and the hooks it needs."""

    def host_file(self, conf: DatabaseSettings, root: Path) -> Path | None:
        """The file or folder of the URL (three slashes: relative to the workspace; four: absolute): ``local_path``."""
        return local_path(conf.url.get_secret_value() if conf.url is not None else "", root)

    def connect_message(self, conf: DatabaseSettings, host_file: Path | None) -> Connect:
        target = f"/databases/{host_file.name}" if host_file is not None else ""
        uri = {"target": target, "host": str(host_file)}  # bound there in the worker's own root
        return dataclasses.replace(super().connect_message(conf, host_file), uri=uri)

    def where(self, c: Held, request: Connect) -> str:
        """The path the worker opens: the bound one in its own root (its host path where it has no mount
        namespace) — only when it is the very file the server opened (``request.identity``: device and inode;
        ``workers.connections.open_host_file``), so a symbolic link swapped in before the bind is refused."""
        import os

        uri = request.uri
        path = str(uri["target"] if c.options.get("confined") else uri["host"])
        expected = request.identity
        try:
            found = os.stat(path)
        except OSError:
            found = None
        if expected is not None and (found is None or [found.st_dev, found.st_ino] != list(expected)):
            from ba_mcp.workers.wire import Failure

            raise Failure(
                type="permission_denied",
                code="DATABASE_FILE_REFUSED",
                message="the database's file changed between the server opening it and the worker binding it "
                "(a symbolic link swapped in?)",
                hint="check the file; a project file's database must be a file inside the project",
            )
        return path


class ExactDecimal:
    """A column of exact numbers the driver gives as text (PostgreSQL's unconstrained NUMERIC) as
    ``decimal128(precision, scale)``: rounded half away from zero to the scale; a value whose integer part does not
    fit is an error naming the column (never a wrapped number)."""

    def __init__(self, column: str, precision: int, scale: int) -> None:
        import pyarrow as pa

        self.column, self.precision, self.scale = column, precision, scale
        self.type = pa.decimal128(precision, scale)

    def __call__(self, text: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        try:
            wide = pc.cast(text, pa.decimal256(76, 38))  # any text with ≤ 38 digits after the point, exactly
        except pa.ArrowInvalid:
            wide = pa.array(_decimals(text.to_pylist(), self.scale), pa.decimal256(76, self.scale))
        try:
            return pc.round(wide, self.scale, round_mode="half_towards_infinity").cast(self.type)
        except pa.ArrowInvalid:
            from ba_mcp.workers.wire import Failure

            whole = self.precision - self.scale
            raise Failure(
                type="execution_error",
                code="NUMBER_TOO_LARGE",
                message=f"column {self.column!r} holds a number of more than {whole} digits before the point, past "
                f"the decimal({self.precision},{self.scale}) an unconstrained NUMERIC is read as",
                hint=f"cast it in the query: {self.column}::numeric(38,2) (or ::float8 for an approximate number)",
            ) from None


def exact_decimal(column: str, precision_scale: tuple[int, int]) -> ExactDecimal:
    return ExactDecimal(column, *precision_scale)


def _decimals(values: list[Any], scale: int) -> list[Any]:
    """Texts with more than 38 digits after the point, rounded to ``scale`` digits half away from zero."""
    from decimal import ROUND_HALF_UP, Decimal

    step = Decimal(1).scaleb(-scale)
    out: list[Decimal | None] = []
    for v in values:
        if v is None or v in ("NaN", "Infinity", "-Infinity"):
            out.append(None)
        else:
            out.append(Decimal(v).quantize(step, rounding=ROUND_HALF_UP))
    return out


def plain_schema(schema: pa.Schema, casts_by_field: dict[int, Any]) -> Columns:
    """``schema`` with extension types as their storage and the fields of ``casts_by_field`` (index -> an Arrow
    type, or an ``ExactDecimal``) cast; the batch converter; no display types."""
    import pyarrow as pa

    fields, casts = [], dict(casts_by_field)
    for i, f in enumerate(schema):
        cast = casts.get(i)
        target = getattr(cast, "type", cast) or (
            f.type.storage_type if isinstance(f.type, pa.ExtensionType) else f.type
        )
        if cast is None and target != f.type:
            casts[i] = target
        fields.append(pa.field(f.name, target, f.nullable))
    plain = pa.schema(fields)
    if not casts:
        return plain, lambda batch: batch, {}

    def convert(batch: Any) -> Any:
        columns = []
        for i, column in enumerate(batch.columns):
            if i in casts:
                storage = column.storage if isinstance(column, pa.ExtensionArray) else column
                cast = casts[i]
                if isinstance(cast, ExactDecimal):
                    column = cast(storage)
                else:
                    column = storage.cast(cast) if storage.type != cast else storage
            columns.append(column)
        return pa.RecordBatch.from_arrays(columns, schema=plain)

    return plain, convert, {}


def driver_location(driver: str) -> str:
    """An ADBC driver package's shared library (``adbc_driver_flightsql`` → its ``_driver_path()``), else the name
    as given: a driver manifest's name or a library's path, which the driver manager finds itself."""
    import importlib

    try:
        module = importlib.import_module(driver)
    except ImportError:
        return driver
    locate = getattr(module, "_driver_path", None)
    return str(locate()) if callable(locate) else driver


def rows(cur: Any, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    cur.execute(sql, params)
    return list(cur.fetchall())


def close_quietly(*things: Any) -> None:
    for thing in things:
        with contextlib.suppress(Exception):
            thing.close()
