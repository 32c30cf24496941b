"""The DuckDB engine: configured DuckDB databases, each opened once, read-only and confined by the engine (S-3).

Every connection is opened with ``read_only=True`` (the database is attached READ_ONLY),
``enable_external_access=false`` with no allowed directories or paths (no file, URL or database other
than its own can be reached), extension auto-install and auto-load off, community extensions off, and
``lock_configuration=true`` so no statement can change any of that. Queries run on a cursor per call;
workspace data reaches a query only as Arrow datasets the server registers on that cursor.

DuckDB always lets a statement write its own database file and WAL, whatever the settings (an
``EXPLAIN ANALYZE COPY … TO '<the database file>'`` did). So no connection is ever opened on a
configured file: each database is served from a private copy in a directory only this server knows
(``Databases.private_dir``, outside the workspace), made again when the original changes. The
original is only ever opened for reading, to copy it; nothing a statement does can reach it.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ba_mcp.databases.base import Analysis, Execution
from ba_mcp.demo_data import ensure_demo_database
from ba_mcp.errors import Code, ErrorType, ToolFailure, denied, invalid, timed_out
from ba_mcp.ids import ARTIFACT_ID

if TYPE_CHECKING:
    from collections.abc import Mapping

    import duckdb

    from ba_mcp.settings import FormatsSettings, Settings
    from ba_mcp.stores.artifacts import ArtifactStore
    from ba_mcp.tool import ToolContext
    from ba_mcp.workspace import Resolved, Workspace

log = logging.getLogger(__name__)

DEMO_FILE = "demo.duckdb"


_BATCH_ROWS = 8192


@dataclass
class DuckDBDatabase:
    """One configured DuckDB database (a ``databases.base.Database``), served from its private copy."""

    name: str
    path: Path  # the configured file (never opened by DuckDB)
    connection: duckdb.DuckDBPyConnection  # on the private copy
    source_identity: str  # the original's identity when it was copied
    owner: Databases
    dialect: str = "duckdb"

    @property
    def identity(self) -> str:
        return f"{self.name}:{self.source_identity}"

    @property
    def max_concurrent(self) -> int:
        return self.owner.settings.databases[self.name].max_concurrent

    def analyse(self, sql: str) -> Analysis:
        """DuckDB's parse of ``sql`` (see ``Databases.analyse``); a syntax error is SQL_SYNTAX."""
        import duckdb

        try:
            return self.owner.analyse(sql)
        except duckdb.Error as exc:
            raise ToolFailure(
                ErrorType.VALIDATION_ERROR, "SQL_SYNTAX", self.owner.clean(str(exc)), "fix the SQL (DuckDB dialect)"
            ) from None

    def run(self, sql: str, params: Any, tables: Mapping[str, Any], ctx: ToolContext) -> Execution:
        """Execute ``sql`` on a cursor of its own, ``tables`` registered on it, once a query slot is free;
        the call's cancellation interrupts the cursor. The slot and the cursor are held until the
        Execution is closed."""
        slots = self.owner.slots(self.name)
        while not slots.acquire(timeout=0.1):
            if ctx.cancelled.is_set():
                raise ToolFailure(
                    ErrorType.TIMEOUT,
                    Code.TIMEOUT,
                    "every query slot was taken by earlier queries until the timeout",
                    "retry shortly; earlier long queries are still being stopped",
                )
        cur = self.connection.cursor()

        def close() -> None:
            cur.close()
            slots.release()

        try:
            ctx.on_cancel(cur.interrupt)  # the runner's timeout interrupts the query
            for name, data in tables.items():
                cur.register(name, data)
            if ctx.cancelled.is_set():  # the timeout came while planning: an interrupt before the start is lost
                raise timed_out("the query was stopped at its timeout before it started", "retry, or filter more")
            relation = cur.sql(sql, params=params)
            return Execution(relation.to_arrow_reader(_BATCH_ROWS), _display_types(relation), close)
        except BaseException:
            close()
            raise

    def describe(self) -> dict[str, Any]:
        return self.owner.schema(self.name)

    def classify_error(self, exc: Exception, columns_hint: str | None = None) -> ToolFailure:
        """DuckDB's exceptions in the spec's vocabulary; ``columns_hint`` replaces the schema hint when
        the query reads workspace data."""
        return _sql_failure(exc, self.name, self.owner.clean, columns_hint)


def _file_identity(path: Path) -> str:
    st = path.stat()
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


# EXPLAIN [ANALYZE | (FORMAT name)] <statement>: what follows the prefix must parse as one SELECT.
_EXPLAIN = re.compile(r"^\s*explain\s+(?:(analyze)\s+|\(\s*format\s+(json|text|html|graphviz)\s*\)\s+)?", re.I)


class Databases:
    def __init__(self, settings: Settings, workspace: Workspace) -> None:
        self.settings = settings
        self.workspace = workspace
        self._open: dict[str, DuckDBDatabase] = {}
        self._lock = threading.Lock()
        self._parser: duckdb.DuckDBPyConnection | None = None
        self._analyses: dict[str, Analysis] = {}
        self._private: Path | None = None
        self._slots = {name: threading.BoundedSemaphore(db.max_concurrent) for name, db in settings.databases.items()}

    @property
    def private_dir(self) -> Path:
        """A directory of this server's own (mode 0700, outside the workspace) holding the database copies."""
        if self._private is None:
            self._private = Path(tempfile.mkdtemp(prefix="ba-mcp-db-"))
        return self._private

    def slots(self, name: str) -> threading.BoundedSemaphore:
        """Queries executing at once on database ``name`` (``databases.<name>.max_concurrent``). A query past
        its timeout is interrupted, but a few DuckDB functions (one huge repeat(), say) finish their vector
        before they notice: its slot stays taken until then, so abandoned work cannot pile up."""
        return self._slots[name]

    @property
    def names(self) -> list[str]:
        return sorted(self.settings.databases)

    def path_of(self, name: str) -> Path:
        conf = self.settings.databases[name]
        if conf.path is None:
            return self.workspace.dir("data") / DEMO_FILE
        path = conf.path.expanduser()
        return path if path.is_absolute() else self.workspace.root / path

    def get(self, name: str) -> DuckDBDatabase:
        """The open database ``name``; the demo database is generated on first use."""
        if name not in self.settings.databases:
            raise invalid(f"unknown database '{name[:60]}'", "database must be one of: " + ", ".join(self.names))
        with self._lock:
            path = self.path_of(name)
            if self.settings.databases[name].path is None:
                ensure_demo_database(path)
            try:
                identity = _file_identity(path)
            except OSError:
                identity = ""
            if not identity or not path.is_file():
                raise ToolFailure(
                    ErrorType.DEPENDENCY_ERROR,
                    "DATABASE_MISSING",
                    f"the file of database '{name}' does not exist",
                    "check the `databases` setting",
                )
            db = self._open.get(name)
            if db is None or db.source_identity != identity:
                # A changed original is copied again; cursors of the old copy finish on it.
                db = self._open[name] = DuckDBDatabase(name, path, self._connect(name, path), identity, self)
            return db

    def _connect(self, name: str, path: Path) -> duckdb.DuckDBPyConnection:
        """A locked, read-only connection on a fresh private copy of ``path`` (and its WAL)."""
        import duckdb

        folder = Path(tempfile.mkdtemp(prefix="db-", dir=self.private_dir))
        copy = folder / f"{re.sub(r'[^A-Za-z0-9_-]', '_', name)[:60]}.duckdb"
        try:
            shutil.copyfile(path, copy)
            wal = path.with_name(path.name + ".wal")
            if wal.is_file():
                shutil.copyfile(wal, copy.with_name(copy.name + ".wal"))
        except OSError as exc:
            raise ToolFailure(
                ErrorType.DEPENDENCY_ERROR,
                "DATABASE_UNREADABLE",
                f"the file of database '{name}' cannot be read ({exc.strerror})",
                "check the `databases` setting and the file's permissions",
            ) from None
        (folder / "tmp").mkdir()
        q = self.settings.databases[name]
        return duckdb.connect(
            str(copy),
            read_only=True,
            config={  # order matters: DuckDB refuses a temp_directory given before external access is off
                "enable_external_access": False,
                "temp_directory": str(folder / "tmp"),
                "home_directory": str(folder),
                "threads": q.threads,
                "memory_limit": q.memory_limit,
                "autoinstall_known_extensions": False,
                "autoload_known_extensions": False,
                "allow_community_extensions": False,
                "lock_configuration": True,
            },
        )

    def parser(self) -> duckdb.DuckDBPyConnection:
        """A cursor on an empty, locked in-memory database, used only to parse SQL."""
        import duckdb

        with self._lock:
            if self._parser is None:
                self._parser = duckdb.connect(
                    ":memory:",
                    config={
                        "enable_external_access": False,
                        "autoinstall_known_extensions": False,
                        "autoload_known_extensions": False,
                        "lock_configuration": True,
                    },
                )
            return self._parser.cursor()

    def analyse(self, query: str) -> Analysis:
        """What DuckDB's parser says of ``query``: its statements' types and the unqualified table names
        the first one refers to. Memoised per query text (the same query is often asked again at another
        level). Raises duckdb.Error for a syntax error."""
        with self._lock:
            known = self._analyses.get(query)
        if known is not None:
            return known
        statements = self._statements(query)
        kinds = tuple(st.type.name for st in statements)
        analysis = Analysis(kinds, ())
        if len(statements) == 1 and kinds[0] == "SELECT":
            sql = statements[0].query
            analysis = Analysis(kinds, tuple(self._parse_refs(sql)), sql)
        elif len(statements) == 1 and kinds[0] == "EXPLAIN":
            analysis = self._explain(statements[0].query, kinds)
        with self._lock:
            if len(self._analyses) >= 512:
                self._analyses.pop(next(iter(self._analyses)))
            self._analyses[query] = analysis
        return analysis

    def _statements(self, sql: str) -> list[Any]:
        """DuckDB's split of ``sql`` into statements, on a parser cursor of this call's own: the module-level
        ``duckdb.extract_statements`` runs on DuckDB's one default connection, which refuses a second thread
        while a first is still on it ("connection is busy with another call")."""
        cur = self.parser()
        try:
            return list(cur.extract_statements(sql))
        finally:
            cur.close()

    def _explain(self, sql: str, kinds: tuple[str, ...]) -> Analysis:
        """EXPLAIN is allowed of exactly one SELECT, judged by DuckDB's parse of what follows the prefix.
        What runs is rebuilt from that parsed statement, so no EXPLAIN of anything else (EXPLAIN ANALYZE
        COPY …, which executes the COPY) can reach the engine, however the prefix is written."""
        import duckdb

        match = _EXPLAIN.match(sql)
        refusal = (
            "EXPLAIN is allowed only of a single SELECT (EXPLAIN SELECT …, EXPLAIN ANALYZE SELECT …, "
            "EXPLAIN (FORMAT json) SELECT …)"
        )
        if match is None:
            return Analysis(kinds, (), "", refusal)
        try:
            inner = self._statements(sql[match.end() :])
        except duckdb.Error:
            return Analysis(kinds, (), "", refusal)
        if len(inner) != 1 or inner[0].type.name != "SELECT":
            return Analysis(kinds, (), "", refusal)
        prefix = "EXPLAIN ANALYZE " if match.group(1) else "EXPLAIN "
        if match.group(2):
            prefix = f"EXPLAIN (FORMAT {match.group(2).lower()}) "
        return Analysis(kinds, tuple(self._parse_refs(inner[0].query)), prefix + inner[0].query)

    def _parse_refs(self, statement_sql: str) -> list[str]:
        cur = self.parser()
        try:
            row = cur.execute("SELECT json_serialize_sql(?::VARCHAR)", [statement_sql]).fetchone()
            tree = json.loads(row[0]) if row else {"error": True}
        finally:
            cur.close()
        if tree.get("error"):
            return []
        found: list[str] = []

        def walk(node: Any) -> None:
            if isinstance(node, dict):
                unqualified = not node.get("schema_name") and not node.get("catalog_name")
                if node.get("type") == "BASE_TABLE" and isinstance(node.get("table_name"), str) and unqualified:
                    found.append(node["table_name"])
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)

        walk(tree)
        return list(dict.fromkeys(found))

    def schema(self, name: str) -> dict[str, Any]:
        """Tables and views with columns, types, row counts, comments, view definitions, and the values of
        low-cardinality text columns (what an analyst wants before writing SQL)."""
        db = self.get(name)
        cur = db.connection.cursor()
        try:
            cols = cur.execute(
                "SELECT table_name, column_name, data_type, is_nullable, comment FROM duckdb_columns() "
                "WHERE schema_name = 'main' AND NOT internal ORDER BY table_name, column_index"
            ).fetchall()
            tables_info = {
                t: {"kind": "table", "comment": c}
                for t, c in cur.execute(
                    "SELECT table_name, comment FROM duckdb_tables() WHERE schema_name = 'main' AND NOT internal"
                ).fetchall()
            }
            for view, comment, sql in cur.execute(
                "SELECT view_name, comment, sql FROM duckdb_views() WHERE schema_name = 'main' AND NOT internal"
            ).fetchall():
                tables_info[view] = {"kind": "view", "comment": comment, "definition": sql}
            tables: dict[str, dict[str, Any]] = {}
            for table, column, dtype, nullable, comment in cols:
                entry = tables.setdefault(table, {**tables_info.get(table, {"kind": "table"}), "columns": []})
                entry["columns"].append(
                    {"name": column, "type": dtype, "nullable": bool(nullable), "comment": comment or ""}
                )
            for table, entry in tables.items():  # names come from the catalog, quoted
                count = cur.execute(f'SELECT count(*) FROM "{table}"').fetchone()
                entry["rows"] = count[0] if count else 0
                if entry["kind"] != "table":
                    continue
                for col in entry["columns"]:
                    if col["type"] == "VARCHAR" and entry["rows"]:
                        col["values"] = _few_values(cur, table, col["name"])
        finally:
            cur.close()
        return {"database": name, "description": self.settings.databases[name].description, "tables": tables}

    def clean(self, message: str) -> str:
        """DuckDB messages may quote paths it was given; never the workspace's real one (S-1)."""
        root = str(self.workspace.root)
        return message.replace(root + "/", "").replace(root, "<workspace>")[:600]

    def close(self, grace_s: float = 2.0) -> None:
        """Close every connection once its queries have stopped: a query interrupted at its timeout may still
        be unwinding in its thread, and DuckDB refuses to close a connection that is busy. Whatever is still
        busy after ``grace_s`` is left to end with the process (its private copy is removed all the same)."""
        import duckdb

        deadline = time.monotonic() + grace_s
        with self._lock:
            for db in self._open.values():
                slots = self._slots[db.name]
                taken = 0
                while taken < db.max_concurrent and slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    taken += 1  # every slot back: no query of this database runs any more
                try:
                    db.connection.close()
                except duckdb.Error:
                    log.warning("database %s was still busy at shutdown; it ends with the process", db.name)
                finally:
                    for _ in range(taken):
                        slots.release()
            self._open.clear()
            if self._parser is not None:
                self._parser.close()
                self._parser = None
            if self._private is not None:
                shutil.rmtree(self._private, ignore_errors=True)
                self._private = None


_FEW = 12


def _few_values(cur: duckdb.DuckDBPyConnection, table: str, column: str) -> list[str] | None:
    """The distinct values of a text column when there are at most a dozen (order statuses, segments)."""
    rows = cur.execute(
        f'SELECT DISTINCT "{column}" FROM "{table}" WHERE "{column}" IS NOT NULL LIMIT {_FEW + 1}'
    ).fetchall()
    if len(rows) > _FEW:
        return None
    return sorted(str(r[0]) for r in rows)


def workspace_table(name: str, resolved: Resolved, artifacts: ArtifactStore, bounds: FormatsSettings) -> Any:
    """An Arrow dataset (or table) over a workspace file or table artifact, for registration on a cursor,
    with a file that is not a readable table reported as such (S-10: clear errors)."""
    import pyarrow as pa

    try:
        return _dataset(resolved, artifacts, bounds)
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


def _dataset(resolved: Resolved, artifacts: ArtifactStore, bounds: FormatsSettings) -> Any:
    """An Arrow dataset (or table) over a workspace file, for registration on a cursor. It reads the
    descriptor the resolver opened (``/proc/self/fd/<n>`` reopens that very file), never a workspace path."""
    import pyarrow.csv as pacsv
    import pyarrow.dataset as ds

    from ba_mcp.formats import detect_encoding

    path, ref_id = resolved.path, resolved.ref_id
    if ref_id and ARTIFACT_ID.match(ref_id):
        meta = artifacts.get(ref_id)
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

        return table_of(resolved, bounds, resolved.name)
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


def _sql_failure(
    exc: Exception, database: str, clean: Callable[[str], str], columns_hint: str | None = None
) -> ToolFailure:
    import duckdb

    message = clean(str(exc).split("\n\nLINE")[0])
    schema_hint = columns_hint or f"read the resource db://{database}/schema for tables and columns"
    if isinstance(exc, duckdb.InterruptException):
        return ToolFailure(
            ErrorType.TIMEOUT,
            Code.TIMEOUT,
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
        return denied("the statement would write; query_database is read-only", "use SELECT", code=Code.READ_ONLY)
    if isinstance(exc, duckdb.CatalogException):
        return ToolFailure(ErrorType.NOT_FOUND, "UNKNOWN_TABLE", message, schema_hint)
    if isinstance(exc, duckdb.BinderException):
        return ToolFailure(ErrorType.VALIDATION_ERROR, "BIND_ERROR", message, schema_hint)
    if isinstance(exc, duckdb.ParserException):
        return ToolFailure(ErrorType.VALIDATION_ERROR, "SQL_SYNTAX", message, "fix the SQL (DuckDB dialect)")
    if isinstance(exc, duckdb.OutOfMemoryException):
        return ToolFailure(
            ErrorType.RESOURCE_ERROR,
            Code.OUT_OF_MEMORY,
            message.split("\n")[0],
            "aggregate or filter more (the memory limit is databases.<name>.memory_limit)",
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
