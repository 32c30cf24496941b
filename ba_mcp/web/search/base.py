"""What every search provider is (docs/tools.md): a ``Provider`` turns (query, n) into a request and its answer
into hits — ``title``, ``url``, ``snippet``, ``date`` and ``extra`` (everything else the provider returned).
Endpoints are the operator's configuration and are not subject to web_reader's address rule."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ba_mcp.errors import ErrorType, ToolFailure

if TYPE_CHECKING:
    import httpx2 as httpx

    from ba_mcp.settings import SearchSettings


@dataclass
class Hit:
    title: str
    url: str
    snippet: str = ""
    date: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Provider(Protocol):
    """One search service: its name, what to configure when it is missing, whether it is configured, the
    request it sends, and the hits it reads from the answer (``n`` at most)."""

    name: str
    configure: str

    def configured(self) -> bool: ...

    def request(self, client: httpx.AsyncClient, query: str, n: int) -> httpx.Request: ...

    def hits(self, body: bytes, n: int) -> list[Hit]: ...


def choose(s: SearchSettings) -> str:
    """The provider ``auto`` stands for, or the one configured."""
    if s.provider != "auto":
        return s.provider
    if s.searxng.url:
        return "searxng"
    if s.brave.api_key:
        return "brave"
    if s.tavily.api_key:
        return "tavily"
    return "duckduckgo"


def json_hits(raw: list[Any], n: int) -> list[Hit]:
    """Hits of a JSON provider's result list (SearXNG, Brave and Tavily name their fields alike)."""
    hits = []
    for item in raw[:n]:
        if not isinstance(item, dict) or not item.get("url"):
            continue
        snippet = item.get("content") or item.get("description") or ""
        date = item.get("publishedDate") or item.get("published_date") or item.get("page_age") or item.get("age")
        known = {"title", "url", "content", "description", "publishedDate", "published_date", "page_age"}
        extra = {k: v for k, v in item.items() if k not in known}
        hits.append(Hit(str(item.get("title") or ""), str(item["url"]), plain(str(snippet)), date, extra))
    return hits


def not_configured(provider: Provider) -> ToolFailure:
    return ToolFailure(
        ErrorType.DEPENDENCY_ERROR,
        "SEARCH_NOT_CONFIGURED",
        f"the search provider {provider.name} is not configured",
        provider.configure,
    )


def plain(html: str) -> str:
    """Snippets sometimes carry <strong> and entities: plain text, one line."""
    if "<" not in html and "&" not in html:
        return " ".join(html.split())
    import lxml.html

    try:
        return " ".join(lxml.html.fromstring(f"<div>{html}</div>").text_content().split())
    except Exception:
        return " ".join(html.split())
