"""SQLite (``sqlite:///relative/to/the/workspace.db``, ``sqlite:////absolute/path.db``; ``adbc_driver_sqlite``).

The file is bound read-only into the connection worker's root and opened ``mode=ro&immutable=1``: SQLite writes
nothing, not even a journal or a lock. A connection keeps TEMP objects, ATTACHed files and PRAGMAs, so every call
that ran a statement is followed by a fresh connection (off the call's path): no call changes what another sees.
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ba_mcp.databases.connector import ConnectedEngine, Held, close_quietly, rows

if TYPE_CHECKING:
    from ba_mcp.settings import DatabaseSettings


class SqliteEngine(ConnectedEngine):
    kind = "sqlite"

    def host_file(self, conf: DatabaseSettings, root: Path) -> Path | None:
        """The file of the URL (SQLAlchemy's convention: three slashes relative to the workspace, four absolute)."""
        url = conf.url.get_secret_value() if conf.url is not None else ""
        rest = url[len("sqlite:") :]
        rest = rest[3:] if rest.startswith("///") else rest.lstrip("/") if rest.startswith("//") else rest
        path = Path(urllib.parse.unquote(rest.split("?", 1)[0])).expanduser()
        return path if path.is_absolute() else root / path

    def connect_message(self, conf: DatabaseSettings, host_file: Path | None) -> dict[str, Any]:
        message = super().connect_message(conf, host_file)
        where = f"/databases/{host_file.name}" if host_file is not None else ""
        message["uri"] = {"target": where, "host": str(host_file)}  # bound there in the worker's own root
        return message

    def open(self, c: Held, message: dict[str, Any]) -> dict[str, Any]:
        uri = message["uri"]
        # the file bound read-only into this process's root (its own path where there is no mount namespace)
        path = uri["target"] if c.options.get("confined") else uri["host"]
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

    def catalog(self, c: Held, schemas: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for kind, name, sql in rows(
            c.cur,
            "SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'",
        ):
            cols = [
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
