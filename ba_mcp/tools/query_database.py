"""query_database (docs/databases.md): one read-only SQL statement on a configured database.

Confinement is the engine's (``databases/``), never a pattern over SQL text: the database's own parser
must report exactly one statement of a read-only type, and the engine runs it read-only. Workspace files
and table artifacts that the statement names (``'uploads/sales.csv'``, ``upload_sales``, ``artifact_…``)
are resolved through the workspace resolver and handed to the engine as Arrow data. Results come as Arrow
batches: at most ``max_rows + 1`` rows are materialised; a larger result is streamed into an artifact
(``databases.collect``).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, ValidationInfo, field_validator

from ba_mcp.errors import Code, ErrorType, ToolFailure, denied, invalid
from ba_mcp.formats import TABLE_SUFFIXES
from ba_mcp.ids import UPLOAD_ID
from ba_mcp.results import Document, Table
from ba_mcp.settings import ToolSettings
from ba_mcp.tool import CacheMode, CachePolicy, Tool, ToolContext, ToolParams, ToolPolicy

if TYPE_CHECKING:
    from ba_mcp.databases import Database, Databases
    from ba_mcp.stores.artifacts import ArtifactStore
    from ba_mcp.tools.services import Services
    from ba_mcp.workspace import Resolved, Workspace

_READ_ONLY_TYPES = {"SELECT", "EXPLAIN"}
_SESSION_TYPES = {"CREATE", "DROP"}  # the session's own TEMP tables and views (configured databases are read-only)


class QueryDatabaseParams(ToolParams):
    query: Annotated[
        str,
        Field(
            max_length=100_000,
            description="values go in params",
        ),
    ] = ""
    max_rows: Annotated[
        int,
        Field(ge=1),
    ] = 1000
    params: Annotated[
        dict[str, Any] | list[Any] | None,
        Field(description="object for $name, array for ? or $1"),
    ] = None

    @field_validator("query")
    @classmethod
    def _no_nul(cls, value: str) -> str:
        """A NUL ends the statement for every ADBC driver (a C string): what runs would not be what was vetted."""
        if "\x00" in value:
            raise ValueError("the query holds a NUL character (\\x00); remove it")
        return value

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

    database: str = "demo"
    timeout: float | None = Field(None, gt=0, description="seconds")
    search: Annotated[
        str | None,
        Field(description="find tables: words in names, columns, comments"),
    ] = None

    @field_validator("database", "search")
    @classmethod
    def _short(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A name or a few words (the bounds live here, not in the schema every conversation pays for)."""
        bound = 100 if info.field_name == "database" else 300
        if value is not None and len(value) > bound:
            raise ValueError(f"at most {bound} characters")
        return value


class QueryDatabaseSettings(ToolSettings):
    max_rows_ceiling: int = Field(100_000, ge=1, description="Largest max_rows a call may ask for.")
    confirm_scan_rows: int | None = Field(
        10_000_000,
        ge=1,
        description="A statement whose sequential scans read more rows than this (the database's own estimate: "
        "its plan and catalog, where the engine gives one) is refused with the figure the first time; the same "
        "statement sent again in the session within 10 minutes runs. None: never asked.",
    )


_CONFIRM_S = 600.0  # how long a refused large scan, sent again, is taken as confirmed


class QueryDatabase(Tool):
    name = "query_database"
    view = "table"  # the MCP Apps view of its results (views/)
    title = "Query a database"
    description = (
        "One read-only SQL statement (DuckDB) on a database (default 'demo', a retailer 2022–2025: view "
        "order_facts …; tables: db://{database}/schema) or on "
        "workspace data: FROM 'uploads/sales.csv', upload_sales, artifact_<id>. CREATE TEMP TABLE keeps a "
        "result."
    )
    version = "1"
    Params = QueryDatabaseParams
    Settings = QueryDatabaseSettings
    policy = ToolPolicy(idempotent=True, cache=CachePolicy(CacheMode.IDENTITY))
    artifact_reader = "query_database: SELECT … FROM {id}"
    artifact_kinds = frozenset({"table"})

    @classmethod
    def build(cls, services: Services) -> QueryDatabase:
        settings = services.settings.tool(cls.name)
        assert isinstance(settings, QueryDatabaseSettings)
        return cls(settings, services.workspace, services.artifacts, services.databases)

    def __init__(
        self,
        settings: QueryDatabaseSettings,
        workspace: Workspace,
        artifacts: ArtifactStore,
        databases: Databases,
    ) -> None:
        self.settings: QueryDatabaseSettings = settings
        self.workspace = workspace
        self.artifacts = artifacts
        self.databases = databases
        self._large: dict[tuple[str, str], float] = {}  # (session, statement) refused as a large scan -> when
        connected = [
            f"{name} ({databases.label(name)}"
            + (f"; unavailable: {why})" if (why := databases.unavailable(name)) else ")")
            for name in databases.names
            if not databases.is_file(name)
        ]
        if connected:  # the configured connections, each queried in its own dialect (no workspace files there)
            self.description = (
                f"{type(self).description} Also: {', '.join(connected)} — SQL in that database's own dialect, "
                "params as an array for $1, $2."
            )

    def cache_identity(self, params: QueryDatabaseParams, ctx: ToolContext) -> str | None:
        if params.search is not None or not params.query:
            return None  # a live catalog (or a refusal): always asked
        try:
            plan = self._planned(params, ctx)
        except ToolFailure:
            return None  # execute() reports it
        if plan.kind in _SESSION_TYPES:
            return None  # changes the session's objects: always runs
        # A session that made TEMP objects reads them by name: its results are its own, until it changes them.
        if plan.database.identity is None:
            return None  # a live database: its results are never cached
        made = self.databases.session_objects(ctx.session)
        own = [f"session={ctx.session}#{made}"] if made else []
        return "|".join([plan.database.identity, *own, *(f"{name}={r.identity}" for name, r in plan.files)])

    def execute(self, params: QueryDatabaseParams, ctx: ToolContext) -> Table | Document:
        if params.search is not None:
            return self._search(params, ctx)
        if not params.query.strip():
            raise invalid(
                "neither query nor search was given",
                "pass query (one SQL statement) or search (words naming what you look for: purchase order vendor)",
                code=Code.INVALID_ARGUMENTS,
            )
        ceiling = self.settings.max_rows_ceiling
        if params.max_rows > ceiling:
            raise invalid(
                f"'max_rows' is {params.max_rows}",
                f"max_rows must be between 1 and {ceiling}; aggregate in SQL instead of fetching more",
                code=Code.INVALID_ARGUMENTS,
            )
        plan = self._planned(params, ctx)
        database = plan.database
        if plan.kind in _SESSION_TYPES:
            self.databases.changed_objects(ctx.session)
        asked = self._large_scan_bound(ctx.session, plan.sql)
        if asked is not None:
            ctx.memo["scan_bound"] = asked
        try:
            table = database.query(
                plan.sql,
                params.params,
                params.max_rows,
                plan.files,
                ctx,
                title=plan.title(params.database),
                columns_hint=plan.columns_hint(params.database),
            )
        except ToolFailure as failure:
            if failure.code == "UNKNOWN_TABLE":
                _name_close_uploads(failure, self.workspace)
            if failure.code == "LARGE_SCAN":  # the same statement sent again runs
                self._large[(ctx.session, plan.sql)] = time.monotonic()
            raise
        table.provenance = {
            **table.provenance,  # how it ran (the database role)
            "database": database.name,
            "dialect": database.dialect,
            "sql": plan.sql,
            "params": params.params,
            "read": [self.artifacts.read_ref(name, resolved) for name, resolved in plan.files],
        }
        return table

    def _large_scan_bound(self, session: str, sql: str) -> int | None:
        """The rows a statement's planned scans may read unasked (None: any) — none when this session's same statement
        was refused as a large scan in the last 10 minutes (sending it again confirms it)."""
        now = time.monotonic()
        for key, when in list(self._large.items()):
            if now - when > _CONFIRM_S:
                del self._large[key]
        if self._large.pop((session, sql), None) is not None:
            return None
        return self.settings.confirm_scan_rows

    def _search(self, params: QueryDatabaseParams, ctx: ToolContext) -> Document:
        """The database's relations whose names, columns or comments hold the words (``catalog_search``)."""
        from ba_mcp.databases.catalog_search import search_markdown

        if params.query.strip():
            raise invalid(
                "both query and search were given",
                "send search alone to find tables, then query in a call of its own",
                code=Code.INVALID_ARGUMENTS,
            )
        schema = self.databases.schema(params.database, ctx.session)
        dialect = schema.get("dialect") or "DuckDB"
        heading = f"# Search of database {params.database} ({dialect}: write SQL in its dialect)"
        text = search_markdown(params.database, heading, schema["tables"], params.search or "")
        return Document(f"tables of {params.database} matching {params.search!r}"[:120], text, mime="text/markdown")

    def _planned(self, params: QueryDatabaseParams, ctx: ToolContext) -> _Plan:
        """The call's plan, made once: the cache lookup and the execution share it (``ctx.memo``)."""
        plan = ctx.memo.get("plan")
        if not isinstance(plan, _Plan):
            plan = ctx.memo["plan"] = _plan(params, self, ctx)
        return plan


@dataclass(frozen=True)
class _Plan:
    """The database to run on and the workspace data (name, resolved file) to register for the query."""

    database: Database
    files: list[tuple[str, Resolved]]
    sql: str  # the one statement that runs, as the database's parser gave it
    database_tables: bool = True  # whether it names anything but workspace data (tables, views, CTEs)
    kind: str = "SELECT"  # the statement's type

    def title(self, database: str) -> str:
        """What the result is a query on: the database, the workspace data it reads, or both."""
        names = ", ".join(name for name, _ in self.files)[:120]
        if not names:
            return f"query on {database}"
        return f"query on {database} and {names}" if self.database_tables else f"query on {names}"

    def columns_hint(self, database: str) -> str | None:
        """Where the columns of the workspace data the query reads are shown (None: it reads none)."""
        if not self.files:
            return None
        first = self.files[0][0]
        is_id = first.startswith(("upload_", "artifact_"))
        shown = f"'{first}'" if ("/" in first or "." in first) and not is_id else first
        hint = f"DESCRIBE SELECT * FROM {shown} (or file_reader) shows the columns of {first}"
        return f"{hint}; db://{database}/schema has the tables" if self.database_tables else hint


def _plan(params: QueryDatabaseParams, tool: QueryDatabase, ctx: ToolContext) -> _Plan:
    """Check the statement with the database's own parser and resolve the workspace data it names."""
    database = tool.databases.get(params.database)
    try:
        analysis = database.analyse(params.query, ctx.session, ctx)
    except ToolFailure as failure:
        if failure.code == "SQL_SYNTAX":
            _name_uploads_as_sql_takes_them(failure, params.query, tool.workspace)
        raise
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
        raise denied(analysis.refusal, "explain a SELECT, or run the SELECT itself", code=Code.READ_ONLY)
    if kind not in _READ_ONLY_TYPES | _SESSION_TYPES or not analysis.sql:
        raise denied(
            f"{kind} statements are not allowed: query_database is read-only",
            "use SELECT (or WITH … SELECT, DESCRIBE, SUMMARIZE, EXPLAIN); keep intermediate results with "
            "CREATE TEMP TABLE name AS SELECT …",
            code=Code.READ_ONLY,
        )
    files = [(name, tool.workspace.resolve(name)) for name in analysis.refs if _is_workspace_ref(name)]
    return _Plan(database, files, analysis.sql, database_tables=len(files) < len(set(analysis.refs)), kind=kind)


_NOT_SQL_ID = re.compile(r"(?<![\w'\"])upload_[\w.-]*[-.][\w.-]*")  # an upload id with '-' or '.', written bare


def _name_uploads_as_sql_takes_them(failure: ToolFailure, query: str, workspace: Workspace) -> None:
    """A syntax error where the query names an upload by an id holding ``-`` or ``.`` (an id shown before ids
    were SQL identifiers, or its file name): the hint gives the id SQL takes for each such upload."""
    found = []
    for written in dict.fromkeys(_NOT_SQL_ID.findall(query)):
        try:
            resolved = workspace.resolve(written.rstrip("."))
        except ToolFailure:
            continue
        uid = workspace.upload_id(resolved.filename) if resolved.kind == "upload" else None
        resolved.close()
        if uid and uid != written:
            found.append(f"{uid} for {written} (uploads/{resolved.filename})")
    if found:
        failure.hint = "write the upload ids as SQL takes them: " + "; ".join(found[:8])


_NO_TABLE = re.compile(r"Table with name ([^\s!]+) does not exist")


def _name_close_uploads(failure: ToolFailure, workspace: Workspace) -> None:
    """A table not found whose name is close to an upload's (``FROM world_happiness_report``): the hint names the
    upload's id first, in its own text (a host that shows the model only tools cannot read ba://files)."""
    missing = _NO_TABLE.search(failure.message)
    found = workspace.near(missing.group(1).strip('"')) if missing else []
    if found:
        named = " or ".join(f"{uid} (uploads/{filename})" for uid, filename in found)
        failure.hint = f"an upload is read by its id: did you mean {named}? Else: {failure.hint}"


def _is_workspace_ref(name: str) -> bool:
    """Names that denote workspace data rather than a database table or CTE."""
    if name.startswith("artifact_"):  # a malformed id is then refused by the resolver
        return True
    if name.startswith("upload_") and UPLOAD_ID.match(name):
        return True
    return "/" in name or "\\" in name or "://" in name or Path(name).suffix.lower() in TABLE_SUFFIXES
