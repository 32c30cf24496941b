"""web_search (docs/tools.md): the configured provider's results as a table — titles and URLs at brief, snippets
and dates at standard, every field at full — kept in the runner's raw-result cache for web.search.cache_ttl_s."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from ba_mcp.results import RawResult, Table, arrow_array
from ba_mcp.settings import ToolSettings
from ba_mcp.tool import REMOTE_RETRIES, CacheMode, CachePolicy, Tool, ToolContext, ToolParams, ToolPolicy

if TYPE_CHECKING:
    from ba_mcp.settings import SearchSettings
    from ba_mcp.tools.services import Services
    from ba_mcp.web.search import Searcher


class WebSearchParams(ToolParams):
    query: Annotated[str, Field(min_length=1, max_length=400)]
    num_results: Annotated[int, Field(ge=1, le=20)] = 10


class WebSearchSettings(ToolSettings):
    max_timeout_s: float = Field(120, gt=0)


class WebSearch(Tool):
    name = "web_search"
    title = "Search the web"
    description = "Search the web: titles and URLs; snippets and dates at standard."
    Params = WebSearchParams
    Settings = WebSearchSettings
    policy = ToolPolicy(idempotent=True, retry_on=REMOTE_RETRIES, read_only=True, open_world=True)

    @classmethod
    def build(cls, services: Services) -> WebSearch:
        return cls(services.settings.tool(cls.name), services.settings.web.search, services.searcher)

    def __init__(self, settings: ToolSettings, search: SearchSettings, searcher: Searcher) -> None:
        self.settings = settings
        self.searcher = searcher
        # Results are kept by the runner's raw-result cache for web.search.cache_ttl_s (the one cache).
        ttl = search.cache_ttl_s
        cache = CachePolicy(CacheMode.TTL, ttl_s=ttl) if ttl > 0 else CachePolicy()
        self.policy = dataclasses.replace(type(self).policy, cache=cache)

    async def execute(self, params: WebSearchParams, ctx: ToolContext) -> RawResult:
        import pyarrow as pa

        provider = self.searcher.provider
        hits = await self.searcher.search(params.query, params.num_results)
        extras = sorted({k for h in hits for k in h.extra})
        columns: dict[str, list[Any]] = {
            "title": [h.title for h in hits],
            "url": [h.url for h in hits],
            "snippet": [h.snippet for h in hits],
            "date": [None if h.date is None else str(h.date) for h in hits],
        }
        for k in extras:
            columns[k] = [_cell(h.extra.get(k)) for h in hits]
        table = pa.Table.from_arrays([arrow_array(v, pa.string()) for v in columns.values()], names=list(columns))
        notes = [] if hits else [f"{provider} found nothing for this query"]
        result = Table(
            f"web search ({provider}): {params.query[:80]}",
            table,
            total_rows=len(hits),
            notes=notes,
            meta={"provider": provider},
            key_columns=["title", "url"],
            standard_columns=["title", "url", "snippet", "date"],
        )
        return result


def _cell(value: Any) -> str | None:
    import json

    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
