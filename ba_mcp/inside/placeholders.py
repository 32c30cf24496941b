"""A saved analysis's parameters found in a step's SQL, filter or code and replaced, in a DuckDB worker (the text is
the model's; ``params`` reads it)."""

from __future__ import annotations

from typing import Any

from ba_mcp.inside.serve import Answer
from ba_mcp.workers.messages import Placed, Placeholders

__all__ = ["place"]


def place(request: Placeholders, fds: list[int]) -> Answer[Placed]:
    from ba_mcp.inside.params import code_cut, code_placeholders, filter_placeholders, sql_cut, sql_placeholders

    values = dict(request.values or {})
    cut: dict[str, Any] = {}
    if request.sql is not None:
        text, found = sql_placeholders(str(request.sql), values)
        cut = sql_cut(text)  # what the step's result covers: a top N, a page (a key figure of it says so)
    elif request.filter is not None:
        text, found = filter_placeholders(str(request.filter), values)
    else:
        text, found = code_placeholders(str(request.code or ""), values)
        cut = code_cut(text)  # the value it ends with: a head(n), an nlargest(n)
    return {"op": "placeholders", "text": text, "found": found, "cut": cut}, []
