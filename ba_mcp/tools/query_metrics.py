"""query_metrics (SPEC §4.6): declared metrics by dimensions, compiled to one SQL statement and run through
query_database's path (its read-only boundary, max_rows, artifacts and observation).

The compile runs in the session's engine worker (``workers.pool.compile_metrics``): ``where`` is text from the
model, parsed and checked there. The observation names each metric's definition in one line at standard and
full, so the model can tell the user what "revenue" meant.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, field_validator

from ba_mcp.errors import ErrorType, ToolFailure, not_found
from ba_mcp.results import Table
from ba_mcp.settings import QueryMetricsSettings
from ba_mcp.tool import CacheMode, CachePolicy, Tool, ToolContext, ToolParams, ToolPolicy
from ba_mcp.tools.query_database import QueryDatabase, QueryDatabaseParams
from ba_mcp.workers.pool import EngineError, ask_metrics

if TYPE_CHECKING:
    from ba_mcp.databases import Databases
    from ba_mcp.metrics.catalog import Metrics
    from ba_mcp.settings import QueryDatabaseSettings
    from ba_mcp.stores.artifacts import ArtifactStore
    from ba_mcp.workers.pool import Engines
    from ba_mcp.workspace import Workspace


class QueryMetricsParams(ToolParams):
    metrics: Annotated[list[str], Field(min_length=1)]
    dimensions: Annotated[list[str], Field(default_factory=list, description="dataset.field to group by")]
    time_grain: Literal["day", "week", "month", "quarter", "year"] | None = None
    where: Annotated[list[str], Field(default_factory=list, description="predicates on fields, ANDed")]
    order_by: Annotated[list[str], Field(default_factory=list, description="e.g. 'net_revenue desc'")]
    limit: Annotated[int | None, Field(ge=1)] = None

    @field_validator("metrics", "dimensions", "where", "order_by", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        """A JSON array sent as text is the array; one name alone is a list of one."""
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    return json.loads(text)
                except ValueError:
                    raise ValueError("a list sent as text must be a JSON array") from None
            return [text] if text else []
        return value

    @field_validator("metrics", "dimensions", "where", "order_by")
    @classmethod
    def _bounded(cls, value: list[str], info: Any) -> list[str]:
        """At most 20 entries (where: 10), each a non-empty text of at most 200 characters (where: 1,000)."""
        most, longest = (10, 1000) if info.field_name == "where" else (20, 200)
        if len(value) > most:
            raise ValueError(f"at most {most} entries")
        for item in value:
            if not item.strip() or len(item) > longest:
                raise ValueError(f"each entry is a non-empty text of at most {longest:,} characters")
        return value


class QueryMetrics(Tool):
    name = "query_metrics"
    title = "Query agreed metrics"
    description = (
        "Agreed metrics (metrics://catalog) by dimensions, compiled so joins never double-count, each defined in "
        "the result. Use it, not SQL, for a defined metric."
    )
    version = "1"
    Params = QueryMetricsParams
    policy = ToolPolicy(idempotent=True, cache=CachePolicy(CacheMode.IDENTITY))

    def __init__(
        self,
        settings: QueryMetricsSettings,
        sql_settings: QueryDatabaseSettings,
        workspace: Workspace,
        artifacts: ArtifactStore,
        databases: Databases,
        engines: Engines,
        metrics: Metrics,
    ) -> None:
        self.settings: QueryMetricsSettings = settings
        self.metrics = metrics
        self.engines = engines
        self.databases = databases
        self.sql = QueryDatabase(sql_settings, workspace, artifacts, databases)

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
        return "|".join([request["digest"], *identities])

    def execute(self, params: QueryMetricsParams, ctx: ToolContext) -> Table:
        compiled = self.compile(params, ctx)
        query = QueryDatabaseParams(
            query=compiled["sql"], database=compiled["database"], max_rows=self.settings.max_rows
        )
        table = self.sql.execute(query, ctx)
        table.title = f"metrics on {compiled['database']}"
        table.details = [f"Defined: {line}" for line in compiled["definitions"]]
        table.provenance["metrics"] = {
            **params.model_dump(exclude={"output_level"}),
            "defined": compiled["definitions"],
        }
        return table

    def compile(self, params: QueryMetricsParams, ctx: ToolContext) -> dict[str, Any]:
        if not self.metrics.sources()[0]:
            raise not_found(
                "no metrics are defined on this server",
                "add OSI metric files to the workspace's metrics/ folder (ba-mcp metrics validate checks them); "
                "query_database runs SQL meanwhile",
            )
        request = self.metrics.request("compile", query=params.model_dump(exclude={"output_level"}))
        try:
            return ask_metrics(self.engines, ctx, ctx.session, request)
        except EngineError as exc:  # the compiler itself failed (a predicate nested beyond its stack, say)
            raise ToolFailure(
                ErrorType.VALIDATION_ERROR,
                "BAD_METRICS_QUERY",
                f"the metrics query could not be compiled: {(exc.detail or exc.message).strip()[:300]}",
                "simplify where; metrics://catalog lists metrics and dimensions",
            ) from None
