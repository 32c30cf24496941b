"""SQLite (``sqlite:///relative/to/the/workspace.db``, ``sqlite:////absolute/path.db``; ``adbc_driver_sqlite``).

The file is bound read-only into the connection worker's root and opened ``mode=ro&immutable=1``: SQLite writes
nothing, not even a journal or a lock. A connection keeps TEMP objects, ATTACHed files and PRAGMAs, so every call
that ran a statement is followed by a fresh connection (off the call's path): no call changes what another sees.
"""

from __future__ import annotations

import urllib.parse

from ba_mcp.databases.base import ColumnInfo, Tables
from ba_mcp.databases.connector import Held, LocalEngine, close_quietly, rows
from ba_mcp.workers.messages import Connect, Opened


class SqliteEngine(LocalEngine):
    kind = "sqlite"

    def open(self, c: Held, request: Connect) -> Opened:
        path = self.where(c, request)  # the file bound read-only into this process's root
        c.extra["file_uri"] = f"file:{urllib.parse.quote(path)}?mode=ro&immutable=1"
        self._connect(c)
        return {"version": str(self.driver_info(c).get("vendor_version", ""))}

    def _connect(self, c: Held) -> None:
        import adbc_driver_sqlite.dbapi as lite

        c.con = lite.connect(c.extra["file_uri"], autocommit=True)
        c.cur = c.con.cursor()

    def begin(self, c: Held, timeout_s: float, label: str) -> None:
        c.in_transaction = True  # a statement will run on this connection

    def end(self, c: Held) -> None:
        if c.in_transaction:
            c.in_transaction = False
            close_quietly(c.cur, c.con)
            self._connect(c)

    def catalog(self, c: Held, schemas: list[str]) -> Tables:
        out: Tables = {}
        for kind, name, sql in rows(
            c.cur,
            "SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'",
        ):
            cols: list[ColumnInfo] = [
                {"name": col[1], "type": col[2] or "", "nullable": not col[3]}
                for col in rows(c.cur, f"SELECT * FROM pragma_table_info('{name.replace(chr(39), chr(39) * 2)}')")
            ]
            count = 0
            if kind == "table":
                try:
                    found = rows(c.cur, "SELECT stat FROM sqlite_stat1 WHERE tbl = ? LIMIT 1", (name,))
                    count = int(str(found[0][0]).split()[0]) if found else 0
                except Exception:
                    count = 0
            out[name] = {
                "kind": kind,
                "rows": count,
                "rows_estimated": True,
                "comment": "",
                "definition": sql if kind == "view" else "",
                "columns": cols,
            }
        return out


ENGINE = SqliteEngine()
