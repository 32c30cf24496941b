"""One interface, several engines (ARCHITECTURE.md: databases/).

A ``Database`` is one configured connection. Its contract, whatever the engine:

* ``analyse(sql, session) -> Analysis``: what the engine's own parser says of the text (statement types, the
  table names it reads, the one statement that would run); a syntax error is ``ToolFailure`` SQL_SYNTAX.
* ``run(sql, params, files, max_rows, ctx) -> Execution``: the statement executed by the engine's own rules
  (read-only for every configured database), the workspace ``files`` (name → resolved file) visible to it by
  name; the first ``max_rows + 1`` rows come back as Arrow, and ``Execution.store`` writes the complete
  result into an open file. The call's cancellation (``ctx.on_cancel``) ends the statement in the engine.
* ``describe(session) -> Schema``: the catalog — the database, its dialect and description, and each table or view
  (``TableInfo``: kind, row count or estimate, comment, definition, columns with their types and comments, keys,
  partitions folded in), the same shape from every engine; the schema resource and the catalog search render it.
* ``classify_error(exc) -> ToolFailure``: the engine's exceptions in the error vocabulary (T-E).
* ``dialect`` names the SQL dialect, ``identity`` changes whenever the data may have changed (cache keys).

An ``Engine`` (``databases/<kind>.py``, named by ``registry.py``) makes the Database of a configured database of
its kind. ``query()`` is the one call users make (run, then ``collect()``: at most ``max_rows + 1`` rows in the
server, the complete result streamed by the engine into a table artifact, as the observation's raw ``Table``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, Protocol, TypedDict

from ba_mcp.results import Table

if TYPE_CHECKING:
    import pyarrow as pa

    from ba_mcp.databases.slots import FairSlots
    from ba_mcp.errors import ToolFailure
    from ba_mcp.settings import DatabaseSettings, Settings
    from ba_mcp.stores.artifacts import ArtifactStore
    from ba_mcp.tool import ToolContext
    from ba_mcp.workers.connections import Connections
    from ba_mcp.workers.duckworkers import DuckWorkers
    from ba_mcp.workers.messages import Result
    from ba_mcp.workspace import Resolved, Workspace


class ColumnInfo(TypedDict):
    """A column in the catalog."""

    name: str
    type: str  # as the engine names it (a domain's base type with it: ``varchar(50) (domain "Name")``)
    nullable: bool
    comment: NotRequired[str]
    values: NotRequired[list[str] | None]  # the few values of a low-cardinality text column (an engine that knows)


class ForeignKey(TypedDict):
    columns: list[str]
    references: str  # the table, as the catalog names it
    referenced_columns: list[str]


class TableInfo(TypedDict):
    """A table or view in the catalog, as every engine's ``catalog`` hook gives it (JSON across the worker
    boundary): what the schema resource and the catalog search render."""

    kind: str  # table, view, materialized view, foreign table, temporary table …
    rows: int | None  # its row count, or the engine's estimate (``rows_estimated``); None: unknown
    columns: list[ColumnInfo]
    rows_estimated: NotRequired[bool]
    comment: NotRequired[str]
    definition: NotRequired[str]  # a view's SQL
    primary_key: NotRequired[list[str]]
    foreign_keys: NotRequired[list[ForeignKey]]
    partitioned: NotRequired[str]  # its partition key (``PARTITION BY …``)
    children: NotRequired[list[str]]  # its partitions or inheriting tables, folded into it
    note: NotRequired[str]  # what a model must know to query it (children folded in: query the parent)
    alias_of: NotRequired[str]  # the one relation a view only renames


Tables = dict[str, TableInfo]  # the catalog's tables and views by the name a query uses


class Schema(TypedDict):
    """``Database.describe()``: one database's catalog."""

    database: str
    description: str  # the operator's (databases.<name>.description)
    dialect: str  # the engine and its version, as people name them ("PostgreSQL 16.4")
    tables: Tables


@dataclass(frozen=True)
class Analysis:
    kinds: tuple[str, ...]  # one statement type name per statement, e.g. ("SELECT",)
    refs: tuple[str, ...]  # unqualified table names of a single read-only statement
    sql: str = ""  # what runs: the one statement as the parser split it (EXPLAIN rebuilt around it)
    refusal: str = ""  # why a lone EXPLAIN is refused (it does not explain exactly one SELECT)


@dataclass
class Execution:
    """A statement that ran: its first rows (at most ``max_rows + 1``), whether there are more, names for the
    types Arrow cannot tell apart, and ``store(fd, limit)`` -> (rows written, complete, whole-column figures
    or None) writing the complete result as Parquet into an open file."""

    head: pa.Table
    more: bool
    display_types: dict[str, str] = field(default_factory=dict)
    store: Callable[[int, int], tuple[int, bool, Any]] = lambda fd, limit: (0, False, None)
    close: Callable[[], None] = lambda: None
    provenance: dict[str, Any] = field(default_factory=dict)  # how it ran, for the call's (the database role)
    notes: list[str] = field(default_factory=list)  # what the answer says of how it ran (a wait for a lock)


class Database(Protocol):
    name: str

    @property
    def dialect(self) -> str: ...

    @property
    def identity(self) -> str | None: ...

    def analyse(self, sql: str, session: str, ctx: ToolContext | None = None) -> Analysis: ...

    def run(
        self, sql: str, params: Any, files: Sequence[tuple[str, Resolved]], max_rows: int, ctx: ToolContext
    ) -> Execution: ...

    def query(
        self,
        sql: str,
        params: Any,
        max_rows: int,
        files: Sequence[tuple[str, Resolved]],
        ctx: ToolContext,
        title: str = "",
        columns_hint: str | None = None,
    ) -> Table: ...

    def describe(self, session: str = "default") -> Schema: ...

    def classify_error(self, exc: Exception, columns_hint: str | None = None) -> ToolFailure: ...


class CatalogCache(Protocol):
    """Each connected database's catalog, read once and kept a while (``connector.Catalogs``)."""

    def of(self, db: Any) -> Tables: ...


class Owner(Protocol):
    """What an engine's databases are built with (``Engine.database``'s ``owner``): the App's configured databases
    (``configured.Databases``) — the services every database of every engine shares."""

    settings: Settings
    workspace: Workspace
    artifacts: ArtifactStore
    duck_workers: DuckWorkers  # the DuckDB workers (a DuckDB database's statements; DuckDB's parser)
    connections: Connections | None  # the connection workers (None: connections are not served here)

    @property
    def catalogs(self) -> CatalogCache: ...

    def slots(self, name: str) -> FairSlots:
        """Database ``name``'s query slots (fair between principals)."""
        ...

    def prepare(self) -> None:
        """Make the demo database exist."""
        ...

    def analyse(self, query: str, session: str = "default", ctx: ToolContext | None = None) -> Analysis:
        """What DuckDB's parser says of ``query``."""
        ...

    def file_specs(self, files: Sequence[tuple[str, Resolved]]) -> tuple[list[dict[str, Any]], list[int]]:
        """The workspace files a DuckDB statement reads, as the worker is given them (and their descriptors)."""
        ...

    def clean(self, message: str) -> str:
        """An engine's message without the workspace's real paths (S-1)."""
        ...


class Engine(Protocol):
    """One database engine (``databases/<kind>.py``'s ``ENGINE``, named by the registry): what makes a configured
    database of its kind. Engines served by connection workers also implement the worker's hooks
    (``connector.ConnectedEngine``: connect, the read-only frame of a call, the catalog, interrupt, failure)."""

    def database(self, name: str, conf: DatabaseSettings, owner: Owner) -> Database:
        """The configured database ``name`` (``owner``: the App's ``Databases``, with its pools and slots)."""
        ...

    def host_file(self, conf: DatabaseSettings, root: Path) -> Path | None:
        """The file on this machine the database lives in (None: a server reached over the network)."""
        ...


class RunThenCollect:
    """``Database.query`` for a database that runs (``run``) in a worker: the result collected into the raw
    ``Table``, the complete one kept in ``artifacts``."""

    name: str

    @property
    def artifacts(self) -> ArtifactStore:
        raise NotImplementedError

    def query(
        self,
        sql: str,
        params: Any,
        max_rows: int,
        files: Sequence[tuple[str, Resolved]],
        ctx: ToolContext,
        title: str = "",
        columns_hint: str | None = None,
    ) -> Table:
        database: Database = self  # type: ignore[assignment]  # a Database with this mixin's query
        return query(
            database, sql, params, max_rows, files, ctx, self.artifacts, title or f"query on {self.name}", columns_hint
        )


def engine_of(kind: str) -> Engine:
    """The engine the registry names for ``kind`` (its module imported on first use)."""
    import importlib

    from ba_mcp import registry

    engine: Engine = importlib.import_module(registry.info(kind).module).ENGINE
    return engine


def query(
    database: Database,
    sql: str,
    params: Any,
    max_rows: int,
    files: Sequence[tuple[str, Resolved]],
    ctx: ToolContext,
    artifacts: ArtifactStore,
    title: str,
    columns_hint: str | None = None,
) -> Table:
    """``Database.query`` of every engine: the one call every user of a database makes (query_database,
    query_metrics, a saved analysis's replay): run ``sql`` read-only and collect the result — at most
    ``max_rows`` rows in the server, the complete result kept as a table artifact — as the observation's raw
    ``Table``. The engine's errors are ToolFailures."""
    from ba_mcp.errors import ToolFailure

    try:
        execution = database.run(sql, params, files, max_rows, ctx)
        try:
            return collect(execution, max_rows, artifacts, title, database.name)
        finally:
            execution.close()
    except ToolFailure:
        raise
    except Exception as exc:
        raise database.classify_error(exc, columns_hint) from None


def in_worker(
    ask: Callable[..., Any],
    reply: Result,
    head: pa.Table,
    release: Callable[[], None],
    notes: Sequence[str] = (),
) -> Execution:
    """The Execution of a statement that ran in a worker (an engine or a connection worker): ``ask`` speaks to
    that worker, ``reply`` is its answer to ``run``; a cut result is stored (``store``) or dropped at ``close``,
    which then calls ``release`` (the worker and the query slot go back) — once. ``notes``: what the answer says of
    how it ran."""
    from ba_mcp.errors import ToolFailure
    from ba_mcp.workers.failures import engine_failure, worker_failures
    from ba_mcp.workers.messages import Drop, Store

    state = {"open": True, "pending": bool(reply["more"])}

    def store(fd: int, limit: int) -> tuple[int, bool, Any]:
        state["pending"] = False
        answer, _ = ask(Store(limit), [fd])
        stats = (answer["stats"], answer["total"]) if "stats" in answer else None
        return int(answer["rows"]), bool(answer["complete"]), stats

    def close() -> None:
        if not state["open"]:
            return
        state["open"] = False
        try:
            if state["pending"]:
                with contextlib.suppress(ToolFailure), worker_failures(engine=engine_failure):
                    ask(Drop())  # a worker that cannot drop it is ended by the pool
        finally:
            release()

    return Execution(head, bool(reply["more"]), dict(reply.get("display_types") or {}), store, close, notes=list(notes))


def collect(execution: Execution, max_rows: int, artifacts: ArtifactStore, title: str, database: str) -> Table:
    """At most max_rows + 1 rows in the server; a larger result streamed by the engine into a Parquet artifact
    (within the artifact size limit), and the observation's Table says which."""
    head, types = execution.head, execution.display_types
    if not execution.more:
        return Table(
            title,
            head,
            total_rows=head.num_rows,
            meta={"database": database},
            column_types=types,
            notes=list(execution.notes),
            provenance=dict(execution.provenance),
        )
    state: dict[str, Any] = {}

    def write(path: Path) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            state["rows"], state["complete"], state["stats"] = execution.store(fd, artifacts.max_single_bytes)
        finally:
            os.close(fd)

    meta = artifacts.put_table_writer(
        write, title=title, source_tool="query_database", known=lambda: (int(state["rows"]), head.schema)
    )
    total, complete = int(state["rows"]), bool(state["complete"])
    first = head.slice(0, max_rows)
    if complete:
        note = (
            f"the query returned {total:,} rows; the first {max_rows:,} (max_rows) were fetched and the "
            f"complete result is {meta.id}"
        )
    else:
        note = (
            f"the query returned more than {total:,} rows; the result exceeds the artifact size limit "
            "and was not stored — filter or aggregate in SQL"
        )
    return Table(
        title,
        first,
        column_types=types,
        total_rows=total if complete else None,
        more=not complete,
        notes=[*execution.notes, note],
        artifact_id=meta.id if complete else None,
        meta={"database": database, "fetched_rows": max_rows},
        whole_stats=state.get("stats") if complete else None,
        provenance=dict(execution.provenance),
    )
