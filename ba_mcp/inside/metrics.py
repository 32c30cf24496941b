"""Metrics work in a DuckDB worker: the server's metric files (sent along) read once per digest, then a query
compiled (its ``where`` is the model's text), a summary, or a metric's description
(``ba_mcp.metrics.catalog.answer``)."""

from __future__ import annotations

from typing import Any

from ba_mcp.inside.serve import Answer
from ba_mcp.workers.messages import Metered, MetricsWork

__all__ = ["MetricsModels"]


class MetricsModels:
    """The metrics model last read (by its digest), answering the ``metrics`` requests."""

    def __init__(self) -> None:
        self.models: dict[str, Any] = {}

    def answer(self, request: MetricsWork, fds: list[int]) -> Answer[Metered]:
        from ba_mcp.metrics.catalog import answer, models_of

        digest = str(request.digest)
        held = self.models.get(digest)
        if held is None:
            held = models_of(request)
            self.models = {digest: held}
        model, dbt = held
        return {"op": "metrics", **answer(model, request, dbt)}, []
