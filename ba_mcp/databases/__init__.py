"""Databases: one interface (``base.Database``), one module per engine behind an ``Engine`` (``duckdb``,
``postgresql``, ``sqlite``, ``spark``, ``adbc`` for any other ADBC driver; what connected engines share in
``connector``) named by the table of engines (``ba_mcp/registry.py``), and the configured databases of an App
(``configured``).

Imported on first use: importing the package loads no engine."""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "Analysis": "ba_mcp.databases.base",
    "Database": "ba_mcp.databases.base",
    "Engine": "ba_mcp.databases.base",
    "Execution": "ba_mcp.databases.base",
    "collect": "ba_mcp.databases.base",
    "query": "ba_mcp.databases.base",
    "ConnectedDatabase": "ba_mcp.databases.connector",
    "Databases": "ba_mcp.databases.configured",
    "DuckDBDatabase": "ba_mcp.databases.duckdb",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)
