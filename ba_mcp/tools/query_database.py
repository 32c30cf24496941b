"""query_database (SPEC §4.2): one read-only SQL statement on a configured DuckDB database.

Confinement is the engine's (see ``databases.py``), never a pattern over SQL text: DuckDB's parser must
report exactly one statement of a read-only type; the database is attached read-only with external
access off and its configuration locked. Workspace files and table artifacts that the statement names
(``'uploads/sales.csv'``, ``upload_sales``, ``artifact_…``) are resolved through the workspace resolver
and registered as Arrow datasets on the call's own cursor. Results are fetched in Arrow batches:
at most ``max_rows + 1`` rows are materialised; a larger result is streamed into a Parquet artifact.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, field_validator

from ba_mcp.formats import FORMATS, TABLE_FORMATS
from ba_mcp.pipeline.cache import CacheMode, CachePolicy
from ba_mcp.pipeline.errors import ErrorType, ToolFailure, denied, invalid
from ba_mcp.pipeline.results import Table
from ba_mcp.settings import FileReaderSettings, QueryDatabaseSettings
from ba_mcp.tools.base import Tool, ToolContext, ToolParams, ToolPolicy
from ba_mcp.workspace import ARTIFACT_ID, UPLOAD_ID

if TYPE_CHECKING:
    import pyarrow as pa

    from ba_mcp.databases import Database, Databases
    from ba_mcp.pipeline.artifacts import ArtifactStore
    from ba_mcp.workspace import Resolved, Workspace

_READ_ONLY_TYPES = {"SELECT", "EXPLAIN"}
_FILE_SUFFIXES = {suffix for suffix, fmt in FORMATS.items() if fmt in TABLE_FORMATS}
_BATCH_ROWS = 8192


class QueryDatabaseParams(ToolParams):
    query: Annotated[
        str,
        Field(
            min_length=1,
            max_length=100_000,
            description="SELECT, WITH … SELECT, DESCRIBE, SUMMARIZE or EXPLAIN; values go in params",
        ),
    ]
    max_rows: Annotated[
        int,
        Field(
            ge=1,
            description="rows to fetch (a larger result is kept whole as an artifact)",
        ),
    ] = 1000
    params: Annotated[
        dict[str, Any] | list[Any] | None,
        Field(description="bind values: an object for $name, an array for ? or $1"),
    ] = None

    @field_validator("params", mode="before")
    @classmethod
    def _params_as_json_text(cls, value: Any) -> Any:
        """Some clients send every argument as a string: '{"y": 2024}' is the object it spells."""
        if isinstance(value, str) and value.strip()[:1] in ("{", "["):
            try:
                return json.loads(value)
            except ValueError:
                raise ValueError("params is text but not valid JSON; pass an object or an array") from None
        return value

    database: Annotated[str, Field(max_length=100, description="a configured connection")] = "demo"


class QueryDatabase(Tool):
    name = "query_database"
    title = "Query a database (read-only SQL)"
    description = (
        "Run one read-only SQL statement (DuckDB dialect) on a configured database — by default 'demo', an "
        "office-supplies retailer 2022–2025 (orders, order_lines, customers, products, regions, channels, "
        "calendar, view order_facts); its schema: the resource db://{database}/schema. Workspace data is "
        "queryable too: FROM 'uploads/sales.csv', FROM upload_sales, FROM artifact_<id>; join it with tables. "
        "Aggregate in SQL rather than fetching raw rows: results over max_rows are kept whole as an artifact. "
        "Writes, ATTACH, COPY, INSTALL, SET and files outside the workspace are refused."
    )
    version = "1"
    Params = QueryDatabaseParams
    policy = ToolPolicy(idempotent=True, cache=CachePolicy(CacheMode.IDENTITY))
    artifact_reader = "query_database: SELECT … FROM {id}"
    artifact_kinds = frozenset({"table"})

    def __init__(
        self,
        settings: QueryDatabaseSettings,
        workspace: Workspace,
        artifacts: ArtifactStore,
        databases: Databases,
        formats: FileReaderSettings,
    ) -> None:
        self.settings: QueryDatabaseSettings = settings
        self.workspace = workspace
        self.artifacts = artifacts
        self.databases = databases
        self.formats = formats  # bounds for parsing workspace files registered as tables

    def cache_identity(self, params: QueryDatabaseParams, ctx: ToolContext) -> str | None:
        try:
            plan = _plan(params, self)
        except ToolFailure:
            return None  # execute() reports it
        return "|".join([plan.database.identity, *(f"{name}={r.identity}" for name, r in plan.files)])

    def execute(self, params: QueryDatabaseParams, ctx: ToolContext) -> Table:
        app = self
        ceiling = self.settings.max_rows_ceiling
        if params.max_rows > ceiling:
            raise invalid(
                f"'max_rows' is {params.max_rows}",
                f"max_rows must be between 1 and {ceiling}; aggregate in SQL instead of fetching more",
                code="INVALID_ARGUMENTS",
            )
        plan = _plan(params, app)
        slots = app.databases.slots
        while not slots.acquire(timeout=0.1):
            if ctx.cancelled.is_set():
                raise ToolFailure(
                    ErrorType.TIMEOUT,
                    "TIMEOUT",
                    "every query slot was taken by earlier queries until the timeout",
                    "retry shortly; earlier long queries are still being stopped",
                )
        try:
            return self._run(params, plan, ctx)
        finally:
            slots.release()

    def _run(self, params: QueryDatabaseParams, plan: _Plan, ctx: ToolContext) -> Table:
        app = self
        cur = plan.database.connection.cursor()
        ctx.on_cancel(cur.interrupt)  # the runner's timeout interrupts the query
        try:
            for name, resolved in plan.files:
                cur.register(name, _registered(name, resolved, app))
            try:
                relation = cur.sql(plan.sql, params=params.params)
                reader = relation.to_arrow_reader(_BATCH_ROWS)
                return _collect(reader, params, app, _display_types(relation), plan.title(params.database))
            except ToolFailure:
                raise
            except Exception as exc:
                raise _sql_failure(exc, params.database, app, plan) from None
        finally:
            cur.close()


@dataclass(frozen=True)
class _Plan:
    """The database to run on and the workspace data (name, resolved file) to register for the query."""

    database: Database
    files: list[tuple[str, Resolved]]
    sql: str  # the one statement that runs, as DuckDB's parser gave it
    database_tables: bool = True  # whether it names anything but workspace data (tables, views, CTEs)

    def title(self, database: str) -> str:
        """What the result is a query on: the database, the workspace data it reads, or both."""
        names = ", ".join(name for name, _ in self.files)[:120]
        if not names:
            return f"query on {database}"
        return f"query on {database} and {names}" if self.database_tables else f"query on {names}"


def _plan(params: QueryDatabaseParams, app: QueryDatabase) -> _Plan:
    """Check the statement with DuckDB's parser and resolve the workspace data it names."""
    import duckdb

    try:
        analysis = app.databases.analyse(params.query)
    except duckdb.Error as exc:
        raise ToolFailure(
            ErrorType.VALIDATION_ERROR, "SQL_SYNTAX", _clean(str(exc), app), "fix the SQL (DuckDB dialect)"
        ) from None
    if analysis.kinds == ("MULTI",):  # what DuckDB makes of a PIVOT whose columns it must discover first
        raise ToolFailure(
            ErrorType.VALIDATION_ERROR,
            "PIVOT_NEEDS_IN",
            "a PIVOT without an IN list expands into several statements (DuckDB first reads the distinct "
            "values to make columns of), and one statement is allowed per call",
            "name the columns: PIVOT orders ON status IN ('completed', 'returned') USING count(*) — "
            "or SELECT DISTINCT the values first",
        )
    if len(analysis.kinds) != 1:
        raise denied(
            f"the query holds {len(analysis.kinds)} statements; exactly one is allowed per call",
            "send one SELECT per call",
            code="ONE_STATEMENT",
        )
    kind = analysis.kinds[0]
    if analysis.refusal:
        raise denied(analysis.refusal, "explain a SELECT, or run the SELECT itself", code="READ_ONLY")
    if kind not in _READ_ONLY_TYPES or not analysis.sql:
        raise denied(
            f"{kind} statements are not allowed: query_database is read-only",
            "use SELECT (or WITH … SELECT, DESCRIBE, SUMMARIZE, EXPLAIN)",
            code="READ_ONLY",
        )
    database = app.databases.get(params.database)
    files = [(name, app.workspace.resolve(name)) for name in analysis.refs if _is_workspace_ref(name)]
    return _Plan(database, files, analysis.sql, database_tables=len(files) < len(set(analysis.refs)))


def _is_workspace_ref(name: str) -> bool:
    """Names that denote workspace data rather than a database table or CTE."""
    if name.startswith("artifact_"):  # a malformed id is then refused by the resolver
        return True
    if name.startswith("upload_") and UPLOAD_ID.match(name):
        return True
    return "/" in name or "\\" in name or "://" in name or Path(name).suffix.lower() in _FILE_SUFFIXES


def _registered(name: str, resolved: Resolved, app: QueryDatabase) -> Any:
    """``_dataset``, with a file that is not a readable table reported as such (S-10: clear errors)."""
    import pyarrow as pa

    try:
        return _dataset(resolved, app)
    except ToolFailure:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _bad_data(name, str(exc)) from None


def _bad_data(name: str, detail: str) -> ToolFailure:
    detail = re.sub(r"'?/proc/self/fd/\d+'?", "the file", detail).split("\n")[0][:300]
    return ToolFailure(
        ErrorType.VALIDATION_ERROR,
        "BAD_DATA",
        f"{name[:200]} could not be read as a table: {detail}",
        'check the file with file_reader (format="text" shows its lines); fix or re-export it',
    )


def _dataset(resolved: Resolved, app: QueryDatabase) -> Any:
    """An Arrow dataset (or table) over a workspace file, for registration on a cursor. It reads the
    descriptor the resolver opened (``/proc/self/fd/<n>`` reopens that very file), never a workspace path."""
    import pyarrow.csv as pacsv
    import pyarrow.dataset as ds

    from ba_mcp.formats import detect_encoding

    path, ref_id = resolved.path, resolved.ref_id
    if ref_id and ARTIFACT_ID.match(ref_id):
        meta = app.artifacts.get(ref_id)
        if meta.kind != "table":
            raise ToolFailure(
                ErrorType.VALIDATION_ERROR,
                "NOT_A_TABLE",
                f"{ref_id} is a {meta.kind} artifact, not a table",
                "only table artifacts can be queried; read others with file_reader",
            )
        return ds.dataset(str(path), format="parquet")
    suffix = resolved.suffix
    if suffix in (".parquet", ".pq"):
        return ds.dataset(str(path), format="parquet")
    if suffix in (".csv", ".tsv", ".tab"):
        with path.open("rb") as f:
            encoding = detect_encoding(f.read(65536)) or "utf-8"
        delimiter = "\t" if suffix != ".csv" else ","
        return ds.dataset(
            str(path),
            format=ds.CsvFileFormat(
                parse_options=pacsv.ParseOptions(delimiter=delimiter),
                read_options=pacsv.ReadOptions(encoding=encoding.replace("-sig", "")),
            ),
        )
    if suffix in (".json", ".jsonl", ".ndjson", ".xlsx", ".xlsm", ".xls"):
        from ba_mcp.formats import table_of

        return table_of(resolved, app.formats, resolved.name)
    raise ToolFailure(
        ErrorType.VALIDATION_ERROR,
        "NOT_QUERYABLE",
        f"files of type '{suffix or 'unknown'}' cannot be queried",
        "query CSV, TSV, Parquet, JSON, JSON Lines or Excel files, or table artifacts",
    )


def _display_types(relation: Any) -> dict[str, str]:
    """DuckDB types that Arrow cannot tell apart, named as the model should read them (HUGEINT arrives as
    decimal128(38, 0))."""
    shown: dict[str, str] = {}
    for name, dtype in zip(relation.columns, relation.types, strict=False):
        text = str(dtype).upper()
        if text in ("HUGEINT", "UHUGEINT"):
            shown[name] = "int128" if text == "HUGEINT" else "uint128"
        elif text.startswith("DECIMAL"):
            shown[name] = text.lower().replace(" ", "")
    return shown


def _collect(
    reader: pa.RecordBatchReader, params: QueryDatabaseParams, app: QueryDatabase, types: dict[str, str], title: str
) -> Table:
    """At most max_rows + 1 rows in memory; the rest, if any, streamed with them into a Parquet artifact."""
    import pyarrow as pa

    limit = params.max_rows
    head: list[pa.RecordBatch] = []
    have = 0
    for batch in reader:
        head.append(batch)
        have += batch.num_rows
        if have > limit:
            break
    schema = reader.schema
    if have <= limit:
        table = pa.Table.from_batches(head, schema=schema)
        return Table(title, table, total_rows=table.num_rows, meta={"database": params.database}, column_types=types)
    # More rows than asked for: keep the complete result, streamed, within the artifact size limit.
    meta, total, complete = _stream_to_artifact(head, reader, schema, app, title)
    first = pa.Table.from_batches(head, schema=schema).slice(0, limit)
    notes = []
    if complete:
        notes.append(
            f"the query returned {total:,} rows; the first {limit:,} (max_rows) were fetched and the "
            f"complete result is {meta.id}"
        )
    else:
        notes.append(
            f"the query returned more than {total:,} rows; the result exceeds the artifact size limit "
            "and was not stored — filter or aggregate in SQL"
        )
    return Table(
        title,
        first,
        column_types=types,
        total_rows=total if complete else None,
        more=not complete,
        notes=notes,
        artifact_id=meta.id if complete and meta else None,
        meta={"database": params.database, "fetched_rows": limit},
    )


def _stream_to_artifact(
    head: list[Any], reader: Any, schema: Any, app: QueryDatabase, title: str
) -> tuple[Any, int, bool]:
    import pyarrow.parquet as pq

    limit = app.artifacts.max_single_bytes
    state = {"rows": 0, "complete": True}

    def write(path: Path) -> None:
        with pq.ParquetWriter(path, schema, compression="zstd") as writer:
            for batch in _chain(head, reader):
                writer.write_batch(batch)
                state["rows"] += batch.num_rows
                if path.stat().st_size > limit:
                    state["complete"] = False
                    break

    meta = app.artifacts.put_table_writer(write, title=title, source_tool="query_database")
    return meta, state["rows"], bool(state["complete"])


def _chain(head: list[Any], reader: Any) -> Any:
    yield from head
    yield from reader


def _sql_failure(exc: Exception, database: str, app: QueryDatabase, plan: _Plan | None = None) -> ToolFailure:
    import duckdb

    message = _clean(str(exc).split("\n\nLINE")[0], app)
    schema_hint = f"read the resource db://{database}/schema for tables and columns"
    if plan is not None and plan.files:  # the query reads workspace data: its columns are the file's
        first = plan.files[0][0]
        shown = (
            f"'{first}'" if ("/" in first or "." in first) and not first.startswith(("upload_", "artifact_")) else first
        )
        files = f"DESCRIBE SELECT * FROM {shown} (or file_reader) shows the columns of {first}"
        schema_hint = files if not plan.database_tables else f"{files}; db://{database}/schema has the tables"
    if isinstance(exc, duckdb.InterruptException):
        return ToolFailure(
            ErrorType.TIMEOUT,
            "TIMEOUT",
            "the query was interrupted at its timeout",
            "filter or aggregate more, or raise tools.query_database.timeout_s",
        )
    if isinstance(exc, duckdb.PermissionException):
        return denied(
            message,
            "only the database and workspace data named in FROM (paths, upload_ and artifact_ "
            "ids) are reachable; file functions, URLs and settings are not",
            code="ACCESS_DENIED",
        )
    stream = re.search(r"reading the stream registered as '([^']*)' failed: (.*)", str(exc))
    if stream:
        return _bad_data(stream.group(1), stream.group(2))
    if isinstance(exc, duckdb.InvalidInputException) and "read-only" in str(exc).lower():
        return denied("the statement would write; query_database is read-only", "use SELECT", code="READ_ONLY")
    if isinstance(exc, duckdb.CatalogException):
        return ToolFailure(ErrorType.NOT_FOUND, "UNKNOWN_TABLE", message, schema_hint)
    if isinstance(exc, duckdb.BinderException):
        return ToolFailure(ErrorType.VALIDATION_ERROR, "BIND_ERROR", message, schema_hint)
    if isinstance(exc, duckdb.ParserException):
        return ToolFailure(ErrorType.VALIDATION_ERROR, "SQL_SYNTAX", message, "fix the SQL (DuckDB dialect)")
    if isinstance(exc, duckdb.OutOfMemoryException):
        return ToolFailure(
            ErrorType.RESOURCE_ERROR,
            "OUT_OF_MEMORY",
            message.split("\n")[0],
            "aggregate or filter more (the memory limit is tools.query_database.memory_limit)",
        )
    if isinstance(exc, duckdb.InvalidInputException) and "parameter" in str(exc).lower():
        return ToolFailure(
            ErrorType.INVALID_PARAMETERS,
            "BAD_PARAMS",
            message,
            "pass params as an object for $name placeholders or an array for ? / $1",
        )
    if isinstance(exc, (duckdb.ConversionException, duckdb.InvalidInputException, duckdb.OutOfRangeException)):
        return ToolFailure(ErrorType.VALIDATION_ERROR, "SQL_ERROR", message, schema_hint)
    if isinstance(exc, duckdb.Error):
        return ToolFailure(ErrorType.EXECUTION_ERROR, "SQL_ERROR", message, schema_hint)
    raise exc


def _clean(message: str, app: QueryDatabase) -> str:
    """DuckDB messages may quote paths it was given; never the workspace's real one (S-1)."""
    return message.replace(str(app.workspace.root) + "/", "").replace(str(app.workspace.root), "<workspace>")[:600]
