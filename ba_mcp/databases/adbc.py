"""Any other ADBC driver (``driver:`` a driver package, or a driver manifest's name, with its ``url`` and options):
Flight SQL (Dremio, Doris, GizmoSQL), Snowflake, BigQuery… The defaults of ``connector.ConnectedEngine``: the
driver is asked for a read-only connection where it offers one (``ba-mcp doctor`` says when it cannot: then connect
as a user that can only read), its own catalog serves the schema resource, ADBC's cancel stops a statement.
"""

from __future__ import annotations

from ba_mcp.databases.connector import ConnectedEngine

ENGINE = ConnectedEngine()
