"""The engine ``filedir``: a folder of CSV and Parquet files on this machine, each file a table named after it,
queried with DuckDB's SQL through DuckDB's ADBC driver in ba-mcp's connection worker.

Read-only by its own rule, three times over: the folder is bound read-only into the worker's root (``LocalEngine``);
DuckDB may open the folder's own regular files only (no link, no file outside it, no new file in it), a setting
locked before any file is read; and what runs is built from DuckDB's own parse of the statement — exactly one
``SELECT``, or ``EXPLAIN [ANALYZE]`` of exactly one ``SELECT`` — anything else (a statement the parser cannot read
included) refused as READ_ONLY before it runs."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from ba_mcp import Code, Connect, ErrorType, Held, LocalEngine, Opened, TableInfo, ToolFailure

_SUFFIXES = {".csv": "read_csv_auto", ".parquet": "read_parquet"}
# EXPLAIN [ANALYZE]: what follows it is parsed again, and must be exactly one SELECT.
_EXPLAIN = re.compile(r"\s*explain\s+(analyze\s+)?", re.I)
log = logging.getLogger(__name__)


class FolderEngine(LocalEngine):
    kind = "filedir"
    folder = True  # a folder, not a file: checked to exist, bound read-only at /databases/<name>

    def open(self, c: Held, request: Connect) -> Opened:
        import adbc_driver_duckdb.dbapi as duckdb_adbc

        folder = Path(self.where(c, request))  # the bound folder, the very one the server opened
        with os.scandir(folder) as entries:  # its own regular files: a symbolic link (anywhere) is no table
            files = sorted(
                Path(entry.path)
                for entry in entries
                if Path(entry.name).suffix.lower() in _SUFFIXES and entry.is_file(follow_symlinks=False)
            )
        c.con = duckdb_adbc.connect(":memory:", autocommit=True)
        c.cur = c.con.cursor()
        # Locked before any file is read: DuckDB opens these files and no other (nothing outside the folder, no new
        # file in it: COPY … TO is refused by DuckDB itself), and no statement sets it back.
        c.cur.execute("SET allowed_paths = ?", [[str(path) for path in files]])
        c.cur.execute("SET enable_external_access = false")
        c.cur.execute("SET lock_configuration = true")
        for path in files:
            table, file = path.stem.replace('"', '""'), str(path).replace("'", "''")
            try:
                c.cur.execute(f"CREATE VIEW \"{table}\" AS SELECT * FROM {_SUFFIXES[path.suffix.lower()]}('{file}')")
            except Exception as exc:  # a file DuckDB cannot read is no table; the others still are
                log.warning("filedir: %s is not served: %s", path.name, str(exc).splitlines()[0][:200])
        c.cur.execute("SELECT version()")
        return {"version": f"DuckDB {c.cur.fetchone()[0]}"}

    def statement(self, c: Held, sql: str) -> str:
        """What runs, built from DuckDB's own parse of ``sql``: its one SELECT, or EXPLAIN [ANALYZE] of its one
        SELECT (what follows EXPLAIN parsed again). Anything else is refused before it runs: another kind of
        statement, several, one DuckDB cannot parse, a NUL (the driver would cut the statement there)."""
        c.running = c.cur
        query = _one(sql, "SELECT")
        if query is not None:
            return query
        explain = _one(sql, "EXPLAIN")
        found = _EXPLAIN.match(explain or "")
        inner = _one(explain[found.end() :], "SELECT") if explain is not None and found else None
        if found is None or inner is None:
            raise ToolFailure(  # in the worker as in the server: the call's error, as it is
                ErrorType.PERMISSION_DENIED,
                Code.READ_ONLY,
                "this database is read-only: one SELECT per call (or EXPLAIN [ANALYZE] of one SELECT)",
                "use SELECT; keep a result by querying it again",
            )
        return ("EXPLAIN ANALYZE " if found.group(1) else "EXPLAIN ") + inner

    def catalog(self, c: Held, schemas: list[str]) -> dict[str, TableInfo]:
        """Each file's table and its columns (no row counts: counting would read every file)."""
        out: dict[str, TableInfo] = {}
        c.cur.execute(
            "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
        )
        for table, column, kind, nullable in c.cur.fetchall():
            entry = out.setdefault(
                table,
                {"kind": "view", "rows": 0, "rows_estimated": True, "comment": "", "definition": "", "columns": []},
            )
            entry["columns"].append({"name": column, "type": kind, "nullable": nullable == "YES"})
        return out


def _one(sql: str, kind: str) -> str | None:
    """The text of ``sql``'s one statement, as DuckDB's parser reads it, if it is exactly one of ``kind``; else
    None (several, another kind, not parsed, a NUL)."""
    import duckdb

    if "\x00" in sql:
        return None
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error:
        return None
    if len(statements) != 1 or statements[0].type.name != kind:
        return None
    return str(statements[0].query)


ENGINE = FolderEngine()
