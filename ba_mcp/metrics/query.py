"""The shape of a metrics question (``query_metrics``' parameters, ``run_python``'s ``metric()``), validated once."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, field_validator


# A question to the metrics: which metrics, by which dimensions and grain, filtered, ordered, limited — as the tool
# and run_python's ``metric()`` take it (the compiler checks the names and predicates in an engine worker). No
# docstring: the model's schema is in the tool's listing, which counts every token.
class MetricsQuery(BaseModel):
    metrics: Annotated[list[str], Field(min_length=1)]
    dimensions: Annotated[list[str], Field(default_factory=list, description="dataset.field to group by")]
    time_grain: Literal["day", "week", "month", "quarter", "year"] | None = None
    where: Annotated[list[str], Field(default_factory=list, description="predicates on fields, ANDed")]
    order_by: Annotated[list[str], Field(default_factory=list)]
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
