"""query_metrics (docs/metrics.md): declared metrics by dimensions, compiled to one SQL statement and run on its
database with ``Database.query`` (the database's read-only boundary, max_rows, artifacts) — never through another
tool.

The compile runs in the session's engine worker (``workers.work.ask_metrics``): ``where`` is text from the
model, parsed and checked there. The observation names each metric's definition in one line at standard and
full, so the model can tell the user what "revenue" meant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from ba_mcp.errors import ToolFailure
from ba_mcp.metrics.query import MetricsQuery
from ba_mcp.results import Table
from ba_mcp.settings import ToolSettings
from ba_mcp.tool import CacheMode, CachePolicy, Tool, ToolContext, ToolParams, ToolPolicy

if TYPE_CHECKING:
    from ba_mcp.databases import Databases
    from ba_mcp.metrics.catalog import Metrics
    from ba_mcp.tools.services import Services


class QueryMetricsParams(ToolParams, MetricsQuery):  # the question (metrics.query.MetricsQuery) and output_level
    timeout: float | None = Field(None, gt=0, description="seconds")


class QueryMetricsSettings(ToolSettings):
    max_rows: int = Field(
        1000, ge=1, description="Rows shown before the complete result is kept as an artifact (as query_database's)."
    )


class QueryMetrics(Tool):
    name = "query_metrics"
    view = "table"  # the MCP Apps view of its results (views/)
    title = "Query agreed metrics"
    description = (
        "Agreed metrics (metrics://catalog) by dimensions, compiled so joins never double-count. Use it, not SQL, "
        "for a defined metric."
    )
    version = "1"
    Params = QueryMetricsParams
    Settings = QueryMetricsSettings
    policy = ToolPolicy(idempotent=True, cache=CachePolicy(CacheMode.IDENTITY))

    @classmethod
    def build(cls, services: Services) -> QueryMetrics | None:
        """None without a metric file: no tool, nor its description."""
        settings = services.settings.tool(cls.name)
        assert isinstance(settings, QueryMetricsSettings)
        return cls(settings, services.databases, services.metrics) if services.metrics.files() else None

    def __init__(self, settings: QueryMetricsSettings, databases: Databases, metrics: Metrics) -> None:
        self.settings: QueryMetricsSettings = settings
        self.metrics = metrics
        self.databases = databases

    def cache_identity(self, params: QueryMetricsParams, ctx: ToolContext) -> str | None:
        request = self.metrics.request("compile")
        identities = []
        for name in sorted(self.metrics.dialects):
            try:
                identity = self.databases.get(name).identity
            except ToolFailure:
                return None
            if identity is None:
                return None  # a live database: never cached
            identities.append(identity)
        return "|".join([request.digest, *identities])

    def execute(self, params: QueryMetricsParams, ctx: ToolContext) -> Table:
        question = params.model_dump(exclude={"output_level", "timeout"})
        return self.databases.metrics_table(self.metrics, question, self.settings.max_rows, ctx)
