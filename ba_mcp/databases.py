"""Configured DuckDB databases, each opened once, read-only and confined by the engine (S-3).

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
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ba_mcp.demo_data import ensure_demo_database
from ba_mcp.pipeline.errors import ErrorType, ToolFailure, invalid

if TYPE_CHECKING:
    import duckdb

    from ba_mcp.settings import Settings
    from ba_mcp.workspace import Workspace

DEMO_FILE = "demo.duckdb"


@dataclass(frozen=True)
class Analysis:
    kinds: tuple[str, ...]  # one statement type name per statement, e.g. ("SELECT",)
    refs: tuple[str, ...]  # unqualified table names of a single read-only statement
    sql: str = ""  # what runs: the one statement as DuckDB's parser split it (EXPLAIN rebuilt around it)
    refusal: str = ""  # why a lone EXPLAIN is refused (it does not explain exactly one SELECT)


@dataclass
class Database:
    name: str
    path: Path  # the configured file (never opened by DuckDB)
    connection: duckdb.DuckDBPyConnection  # on the private copy
    source_identity: str  # the original's identity when it was copied

    @property
    def identity(self) -> str:
        return f"{self.name}:{self.source_identity}"


def _file_identity(path: Path) -> str:
    st = path.stat()
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


# EXPLAIN [ANALYZE | (FORMAT name)] <statement>: what follows the prefix must parse as one SELECT.
_EXPLAIN = re.compile(r"^\s*explain\s+(?:(analyze)\s+|\(\s*format\s+(json|text|html|graphviz)\s*\)\s+)?", re.I)


class Databases:
    def __init__(self, settings: Settings, workspace: Workspace) -> None:
        self.settings = settings
        self.workspace = workspace
        self._open: dict[str, Database] = {}
        self._lock = threading.Lock()
        self._parser: duckdb.DuckDBPyConnection | None = None
        self._analyses: dict[str, Analysis] = {}
        self._private: Path | None = None
        # Queries executing at once. A query past its timeout is interrupted, but a few DuckDB functions
        # (one huge repeat(), say) finish their vector before they notice: its slot stays taken until
        # then, so abandoned work cannot pile up however often a client retries.
        self.slots = threading.BoundedSemaphore(settings.query_database.max_concurrent)

    @property
    def private_dir(self) -> Path:
        """A directory of this server's own (mode 0700, outside the workspace) holding the database copies."""
        if self._private is None:
            self._private = Path(tempfile.mkdtemp(prefix="ba-mcp-db-"))
        return self._private

    @property
    def names(self) -> list[str]:
        return sorted(self.settings.databases)

    def path_of(self, name: str) -> Path:
        conf = self.settings.databases[name]
        if conf.path is None:
            return self.workspace.dir("data") / DEMO_FILE
        path = conf.path.expanduser()
        return path if path.is_absolute() else self.workspace.root / path

    def get(self, name: str) -> Database:
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
                db = self._open[name] = Database(name, path, self._connect(name, path), identity)
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
        q = self.settings.query_database
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
        import duckdb

        with self._lock:
            known = self._analyses.get(query)
        if known is not None:
            return known
        statements = duckdb.extract_statements(query)
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
            inner = duckdb.extract_statements(sql[match.end() :])
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

    def close(self) -> None:
        with self._lock:
            for db in self._open.values():
                db.connection.close()
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
