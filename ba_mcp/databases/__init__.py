"""Databases: one interface (``base.Database``), one module per engine. Today: DuckDB (``duckdb``)."""

from ba_mcp.databases.base import Analysis, Database, Execution, collect
from ba_mcp.databases.duckdb import Databases, DuckDBDatabase

__all__ = ["Analysis", "Database", "Databases", "DuckDBDatabase", "Execution", "collect"]
