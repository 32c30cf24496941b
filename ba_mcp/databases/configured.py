"""The configured databases of one App (``databases.<name>``): each made by the engine the registry names for it.

``Databases`` holds what the engines share: the DuckDB workers (DuckDB files, the session's TEMP objects) and
the connection workers (connections), the per-database query slots, the connected databases' catalogs, DuckDB's
parse of a statement (memoised), the workspace data a statement names handed to the worker as descriptors.
"""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ba_mcp.databases.base import Analysis, Database, Schema, engine_of
from ba_mcp.databases.connector import Catalogs, label_of
from ba_mcp.databases.duckdb import DEMO_FILE, DuckDBEngine
from ba_mcp.databases.slots import FairSlots
from ba_mcp.demo_data import ensure_demo_database
from ba_mcp.errors import Code, ErrorType, ToolFailure, denied, invalid, not_found
from ba_mcp.formats.table import TABLE_SUFFIXES
from ba_mcp.ids import ARTIFACT_ID
from ba_mcp.workers.failures import EngineError, worker_failures
from ba_mcp.workers.messages import Analyse, Metered, MetricsWork
from ba_mcp.workers.work import ask_metrics

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ba_mcp.results import Table
    from ba_mcp.settings import DatabaseSettings, Settings
    from ba_mcp.stores.artifacts import ArtifactStore
    from ba_mcp.tool import ToolContext
    from ba_mcp.workers.connections import Connections
    from ba_mcp.workers.duckworkers import DuckWorkers
    from ba_mcp.workspace import Resolved, Workspace


log = logging.getLogger(__name__)
WORKSPACE = "workspace"  # the name a model uses for "where my uploads are"


def per_user(settings: Settings, db: DatabaseSettings) -> int | None:
    """One user's share of a database's slots: as configured, else all of them on one analyst's server and half
    (at least one) on a server whose users log in (``http.auth``)."""
    if db.max_concurrent_per_user is not None:
        return db.max_concurrent_per_user
    return max(1, db.max_concurrent // 2) if settings.http.auth is not None else None


class DuckFiles:
    """The configured DuckDB files as the DuckDB workers need them, known before the workers are built: which files
    they bind (``paths``), making the demo's exist before a worker binds it (``prepare``), and whether a session's
    worker holds objects the session made (``keeps_state``: counted by ``changed_objects``)."""

    def __init__(self, settings: Settings, workspace: Workspace) -> None:
        self.settings = settings
        self.workspace = workspace
        self._engines = {name: engine_of(conf.kind) for name, conf in settings.databases.items()}
        self._lock = threading.Lock()
        self._changes: dict[str, int] = {}  # session -> CREATE/DROP statements it ran

    def paths(self) -> dict[str, Path]:
        """The DuckDB files the DuckDB workers bind (connections are not theirs)."""
        return {
            name: engine.file_of(self.settings.databases[name], self.workspace)
            for name, engine in sorted(self._engines.items())
            if isinstance(engine, DuckDBEngine)
        }

    def prepare(self) -> None:
        """Make the demo database exist (generated on first use, in a process of its own)."""
        demo = any(
            isinstance(engine, DuckDBEngine) and self.settings.databases[name].path is None
            for name, engine in self._engines.items()
        )
        if demo:
            with self._lock:
                ensure_demo_database(self.workspace.dir("data") / DEMO_FILE)

    def session_objects(self, session: str) -> int:
        """How many times the session changed its own TEMP objects (0: never; its reads are anyone's)."""
        return self._changes.get(session, 0)

    def changed_objects(self, session: str) -> None:
        with self._lock:
            self._changes[session] = self._changes.get(session, 0) + 1

    def keeps_state(self, session: str) -> bool:
        """Whether the session's DuckDB worker holds TEMP tables or views the session made."""
        return self.session_objects(session) > 0


class Databases:
    """The configured databases of one App, served by its DuckDB workers (``files``: what they bind) and its
    connection workers."""

    def __init__(
        self,
        settings: Settings,
        workspace: Workspace,
        duck_workers: DuckWorkers,
        artifacts: ArtifactStore,
        connections: Connections | None = None,
        files: DuckFiles | None = None,
    ) -> None:
        self.settings = settings
        self.workspace = workspace
        self.duck_workers = duck_workers
        self.files = files if files is not None else DuckFiles(settings, workspace)
        self.artifacts = artifacts
        self.connections = connections  # the connection workers of configured connections (url/driver)
        self.catalogs = Catalogs()
        self._engines = {name: engine_of(conf.kind) for name, conf in settings.databases.items()}
        self._lock = threading.Lock()
        self._analyses: dict[str, Analysis] = {}
        self._slots = {
            name: FairSlots(db.max_concurrent, per_user(settings, db)) for name, db in settings.databases.items()
        }
        for name in self.names:  # said once at start, on stderr: the server serves everything else
            if (why := self.unavailable(name)) is not None:
                log.warning("database %s is unavailable: %s (databases.%s.url)", name, why, name)

    def session_objects(self, session: str) -> int:
        """How many times the session changed its own TEMP objects (0: never; its reads are anyone's)."""
        return self.files.session_objects(session)

    def changed_objects(self, session: str) -> None:
        self.files.changed_objects(session)

    def slots(self, name: str) -> FairSlots:
        """Queries in flight on database ``name`` across principals (``databases.<name>.max_concurrent``), each
        principal's at most their share (``max_concurrent_per_user``), waiting callers served fairly."""
        return self._slots[name]

    @property
    def names(self) -> list[str]:
        return sorted(self.settings.databases)

    def is_file(self, name: str) -> bool:
        """Whether ``name`` is a DuckDB file (or the demo), served by the engine workers."""
        return isinstance(self._engines[name], DuckDBEngine)

    def paths(self) -> dict[str, Path]:
        """The DuckDB files the DuckDB workers bind (connections are not theirs)."""
        return self.files.paths()

    def prepare(self) -> None:
        """Make the demo database exist (generated on first use, in a process of its own)."""
        self.files.prepare()

    def get(self, name: str) -> Database:
        """The database ``name``, made by its engine (the demo database is generated on first use). ``workspace``
        (unless a database has that name) is where the workspace's files are queried: the demo, else the first
        DuckDB database — every DuckDB database reads uploads and artifacts."""
        if name == WORKSPACE and name not in self.settings.databases:
            files = [n for n in self.names if self.is_file(n)]
            if files:
                name = "demo" if "demo" in files else files[0]
        if name not in self.settings.databases:
            raise invalid(f"unknown database '{name[:60]}'", "database must be one of: " + ", ".join(self.names))
        conf, engine = self.settings.databases[name], self._engines[name]
        problem = conf.unavailable()
        if problem is not None:  # this database only: the others and the files are served
            raise ToolFailure(
                ErrorType.DEPENDENCY_ERROR,
                "DATABASE_UNAVAILABLE",
                f"database '{name}' is unavailable: {problem[0]} (databases.{name}.url)",
                problem[1],
            )
        if conf.role_from is not None and not getattr(engine, "takes_roles", False):
            raise ToolFailure(
                ErrorType.DEPENDENCY_ERROR,
                "DATABASE_UNAVAILABLE",
                f"databases.{name}.role_from: the {self.label(name)} engine cannot run a call as another database "
                "role, so it serves nobody rather than everybody as one role",
                f"remove databases.{name}.role_from, or connect each group of users through a database of its own",
            )
        return engine.database(name, conf, self)

    def unavailable(self, name: str) -> str | None:
        """Why database ``name`` cannot be served at all (its URL reaches no engine), for the tool's description and
        the doctor; None when it may be."""
        problem = self.settings.databases[name].unavailable()
        return None if problem is None else problem[0]

    def label(self, name: str) -> str:
        """How people name the engine of database ``name`` (the tool's description, the doctor)."""
        return label_of(self.settings.databases[name])

    def analyse(self, query: str, session: str = "default", ctx: ToolContext | None = None) -> Analysis:
        """What DuckDB's parser (in the session's engine worker) says of ``query``: its statements' types and
        the unqualified table names it reads. Memoised per query text. A syntax error is SQL_SYNTAX."""
        with self._lock:
            known = self._analyses.get(query)
        if known is not None:
            return known

        def syntax(exc: EngineError) -> ToolFailure:
            hint = "fix the SQL (DuckDB dialect)"
            return ToolFailure(ErrorType.VALIDATION_ERROR, "SQL_SYNTAX", self.clean(exc.message), hint)

        with self.duck_workers.held(session, ctx) as call, worker_failures(engine=syntax):
            reply, _ = call.ask(Analyse(query))
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
            elif resolved.suffix not in TABLE_SUFFIXES:
                raise ToolFailure(
                    ErrorType.VALIDATION_ERROR,
                    "NOT_QUERYABLE",
                    f"files of type '{resolved.suffix or 'unknown'}' cannot be queried",
                    "query CSV, TSV, Parquet, JSON, JSON Lines, Excel or ODS files, or table artifacts",
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

    def metrics_table(self, metrics: Any, question: dict[str, Any], max_rows: int, ctx: ToolContext) -> Table:
        """The metrics' numbers (query_metrics, run_python's ``metric()``): ``question`` compiled against the files
        of ``metrics`` (the server's ``metrics.catalog.Metrics``) and run, with a ``Defined:`` line per metric."""
        if not metrics.sources()[0] and not metrics.manifests()[0]:
            raise not_found(
                "no metrics are defined on this server",
                "add OSI metric files to the workspace's metrics/ folder (ba-mcp metrics validate checks them); "
                "query_database runs SQL meanwhile",
            )
        table, compiled = self.metrics_query(metrics.request("compile", query=question), max_rows, ctx)
        table.details = [f"Defined: {line}" for line in compiled["definitions"]]
        table.details += [f"Note: {line}" for line in compiled.get("notes") or []]
        table.provenance["metrics"] = {**question, "defined": compiled["definitions"]}
        return table

    def metrics_query(self, request: MetricsWork, max_rows: int, ctx: ToolContext) -> tuple[Table, Metered]:
        """A metrics question (``Metrics.request("compile", …)``: it carries the metric files) compiled in the
        session's engine worker, then run on its database with ``query`` — the compiled statement passes the
        database's own parser as one SELECT. The table and what the compiler said (SQL, definitions)."""

        def uncompiled(exc: EngineError) -> ToolFailure:  # the compiler itself failed (a predicate nested too deep)
            return ToolFailure(
                ErrorType.VALIDATION_ERROR,
                "BAD_METRICS_QUERY",
                f"the metrics query could not be compiled: {(exc.detail or exc.message).strip()[:300]}",
                "simplify where; metrics://catalog lists metrics and dimensions",
            )

        with worker_failures(engine=uncompiled):
            compiled = ask_metrics(self.duck_workers, ctx, ctx.session, request)
        database = self.get(compiled["database"])
        analysis = database.analyse(compiled["sql"], ctx.session, ctx)
        if analysis.kinds != ("SELECT",) or not analysis.sql:
            raise denied("the compiled metrics query is not one SELECT", "report it", code=Code.READ_ONLY)
        table = database.query(analysis.sql, None, max_rows, [], ctx, f"metrics on {database.name}")
        table.provenance = {
            **table.provenance,  # how it ran (the database role)
            "database": database.name,
            "dialect": database.dialect,
            "sql": analysis.sql,
            "params": None,
            "read": [],
        }
        return table, compiled

    def schema(self, name: str, session: str = "default") -> Schema:
        """The database's catalog as its engine describes it (for db://{name}/schema)."""
        return self.get(name).describe(session)

    def clean(self, message: str) -> str:
        """Engine messages may quote paths; never the workspace's real one, nor a descriptor's (S-1)."""
        root = str(self.workspace.root)
        message = re.sub(r"/proc/self/fd/\d+", "the file", message)
        return message.replace(root + "/", "").replace(root, "<workspace>")[:600]

    def close(self) -> None:
        """Nothing of the databases lives in the server; the engine workers are ended by their pool."""
