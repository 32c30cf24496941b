"""Databases: one interface (``base.Database``), one module per engine: DuckDB files (``duckdb``), and
connections through ADBC — PostgreSQL, SQLite, any ADBC driver (``adbc``)."""

from ba_mcp.databases.adbc import ConnectedDatabase
from ba_mcp.databases.base import Analysis, Database, Execution, collect
from ba_mcp.databases.duckdb import Databases, DuckDBDatabase

__all__ = ["Analysis", "ConnectedDatabase", "Database", "Databases", "DuckDBDatabase", "Execution", "collect"]
