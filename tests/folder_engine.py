"""A folder-backed engine the package does not know (issue 52): a folder of CSV files read by DuckDB's ADBC driver,
written as the newcomer wrote theirs — one class on ``LocalEngine`` with ``folder = True`` and its ``open``, nothing
copied. Registered from outside ba_mcp, its module is given to the connection worker (bound into its root)."""

from __future__ import annotations

from pathlib import Path

from ba_mcp.databases.connector import Held, LocalEngine
from ba_mcp.workers.messages import Connect, Opened


class FolderEngine(LocalEngine):
    kind = "csvdir"
    folder = True

    def open(self, c: Held, request: Connect) -> Opened:
        import adbc_driver_duckdb.dbapi as duckdb_adbc

        folder = Path(self.where(c, request))  # the folder, bound read-only into the worker's root
        c.extra["folder"] = str(folder)
        c.con = duckdb_adbc.connect(":memory:")
        c.cur = c.con.cursor()
        for path in sorted(folder.glob("*.csv")):  # each file a view named after it
            quoted = str(path).replace("'", "''")
            c.cur.execute(f"CREATE VIEW \"{path.stem}\" AS SELECT * FROM read_csv_auto('{quoted}')")
        return {"version": "csv folder"}


ENGINE = FolderEngine()
