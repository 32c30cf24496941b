"""The engine ``filedir``: a folder of CSV and Parquet files on this machine, each file a table named after it,
queried with DuckDB's SQL through DuckDB's ADBC driver in ba-mcp's connection worker.

Read-only by its own rule, three times over: the folder is bound read-only into the worker's root (``LocalEngine``);
DuckDB may read files in that folder only, a setting locked once the tables are made; and every statement is read
by DuckDB's own parser before it runs — exactly one ``SELECT`` (or ``EXPLAIN``), anything else refused as
READ_ONLY."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ba_mcp import Code, ErrorType, Held, LocalEngine, ToolFailure

_SUFFIXES = {".csv": "read_csv_auto", ".parquet": "read_parquet"}
_READS = ("SELECT", "EXPLAIN")


class FolderEngine(LocalEngine):
    kind = "filedir"
    folder = True  # a folder, not a file: checked to exist, bound read-only at /databases/<name>

    def open(self, c: Held, message: dict[str, Any]) -> dict[str, Any]:
        import adbc_driver_duckdb.dbapi as duckdb_adbc

        folder = Path(self.where(c, message))  # the bound folder, the very one the server opened
        c.con = duckdb_adbc.connect(":memory:", autocommit=True)
        c.cur = c.con.cursor()
        for path in sorted(folder.iterdir()):
            reader = _SUFFIXES.get(path.suffix.lower())
            if reader and path.is_file():
                table, file = path.stem.replace('"', '""'), str(path).replace("'", "''")
                c.cur.execute(f"CREATE VIEW \"{table}\" AS SELECT * FROM {reader}('{file}')")
        where = str(folder).replace("'", "''")
        for setting in (
            f"SET allowed_directories = ['{where}/']",  # no file outside the folder
            "SET enable_external_access = false",
            "SET lock_configuration = true",  # and no statement sets it back
        ):
            c.cur.execute(setting)
        c.cur.execute("SELECT version()")
        return {"version": f"DuckDB {c.cur.fetchone()[0]}"}

    def vet(self, c: Held, sql: str, params: Any, timeout_s: float) -> None:
        """One statement that reads, as DuckDB's own parser sees it; anything else is refused before it runs."""
        import duckdb

        try:
            kinds = [statement.type.name for statement in duckdb.extract_statements(sql)]
        except duckdb.Error:
            return  # not SQL DuckDB can parse: running it says where (SQL_SYNTAX)
        if len(kinds) != 1 or kinds[0] not in _READS:
            raise ToolFailure(  # in the worker as in the server: the call's error, as it is
                ErrorType.PERMISSION_DENIED,
                Code.READ_ONLY,
                f"this database is read-only: one SELECT per call (the query is {' + '.join(kinds)})",
                "use SELECT; keep a result by querying it again",
            )

    def catalog(self, c: Held, schemas: list[str]) -> dict[str, Any]:
        """Each file's table and its columns (no row counts: counting would read every file)."""
        out: dict[str, Any] = {}
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


ENGINE = FolderEngine()
