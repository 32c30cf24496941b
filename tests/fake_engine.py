"""An engine the package does not know: registered by a test (``registry.register``), it is reached through
query_database, the schema resource and the tool's description with no other change (issue 35)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ba_mcp.databases.base import Analysis, Execution, query
from ba_mcp.errors import ErrorType, ToolFailure


class FakeDatabase:
    """Answers every statement with the statement's text and its length (as if an engine ran it)."""

    def __init__(self, name: str, owner: Any) -> None:
        self.name = name
        self.owner = owner

    @property
    def dialect(self) -> str:
        return "fake"

    @property
    def identity(self) -> str | None:
        return None

    def analyse(self, sql: str, session: str, ctx: Any = None) -> Analysis:
        return Analysis(("SELECT",), (), sql)

    def run(self, sql: str, params: Any, files: Any, max_rows: int, ctx: Any) -> Execution:
        import pyarrow as pa

        head = pa.table({"statement": [sql], "length": [len(sql)], "params": [str(params)]})
        return Execution(head, False)

    def query(self, sql: str, params: Any, max_rows: int, files: Any, ctx: Any, title: str = "", **_: Any) -> Any:
        return query(self, sql, params, max_rows, files, ctx, self.owner.artifacts, title or f"query on {self.name}")

    def describe(self, session: str = "default") -> dict[str, Any]:
        columns = [{"name": n, "type": t, "nullable": True} for n, t in (("statement", "text"), ("length", "integer"))]
        table = {
            "kind": "table",
            "rows": 1,
            "rows_estimated": False,
            "comment": "",
            "definition": "",
            "columns": columns,
        }
        return {"database": self.name, "description": "", "dialect": "FakeDB", "tables": {"echo": table}}

    def classify_error(self, exc: Exception, columns_hint: str | None = None) -> ToolFailure:
        return ToolFailure(ErrorType.EXECUTION_ERROR, "SQL_ERROR", str(exc)[:200])


class FakeEngine:
    def database(self, name: str, conf: Any, owner: Any) -> FakeDatabase:
        return FakeDatabase(name, owner)

    def host_file(self, conf: Any, root: Path) -> Path | None:
        return None


ENGINE = FakeEngine()
