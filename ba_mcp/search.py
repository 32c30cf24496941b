"""Web search providers behind one interface (SPEC §4.4): SearXNG, Brave, Tavily and the no-key default,
DuckDuckGo's HTML results page.

Each provider turns (query, n) into a list of hits: ``title``, ``url``, ``snippet``, ``date`` and
``extra`` (everything else the provider returned). Endpoints are the operator's configuration and are not
subject to web_reader's address rule. API keys travel only in request headers or bodies: they never appear
in a hit, an error or a log line. Requests to one provider are spaced by ``min_interval_s`` (calls queue).

Why DuckDuckGo's HTML page and not the ``ddgs`` library: ddgs spreads a query over several engines through
a browser-impersonating native HTTP client of its own; one documented endpoint parsed with lxml is smaller,
testable against a local server, and its failure is a clear dependency_error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

import anyio

from ba_mcp.errors import ErrorType, ToolFailure

if TYPE_CHECKING:
    import httpx2 as httpx

    from ba_mcp.settings import SearchSettings

_MAX_RETRY_AFTER_S = 10.0


@dataclass
class Hit:
    title: str
    url: str
    snippet: str = ""
    date: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


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


_CONFIGURE = {
    "searxng": "set web.search.searxng.url to your SearXNG instance (its JSON format enabled)",
    "brave": "set web.search.brave.api_key (BA_MCP_WEB__SEARCH__BRAVE__API_KEY)",
    "tavily": "set web.search.tavily.api_key (BA_MCP_WEB__SEARCH__TAVILY__API_KEY)",
    "duckduckgo": "configure another provider (web.search.provider: searxng, brave or tavily)",
}


class Searcher:
    """Runs searches on the configured provider with spacing between requests."""

    def __init__(self, settings: SearchSettings, client: Any) -> None:
        self.s = settings
        self._client = client  # a callable returning the App's shared httpx.AsyncClient
        self._lock = anyio.Lock()
        self._last = 0.0

    @property
    def provider(self) -> str:
        return choose(self.s)

    async def search(self, query: str, n: int) -> list[Hit]:
        provider = self.provider
        if provider == "searxng" and not self.s.searxng.url:
            raise _not_configured(provider)
        if provider in ("brave", "tavily") and not getattr(self.s, provider).api_key:
            raise _not_configured(provider)
        for attempt in range(2):
            async with self._lock:  # calls queue: one request per min_interval_s
                wait = self._last + self.s.min_interval_s - time.monotonic()
                if wait > 0:
                    await anyio.sleep(wait)
                try:
                    response = await self._request(provider, query, n)
                finally:
                    self._last = time.monotonic()
            if response.status_code == 429:
                after = _retry_after(response.headers.get("retry-after"))
                if attempt == 0 and after is not None and after <= _MAX_RETRY_AFTER_S:
                    await anyio.sleep(after)  # no sooner than asked
                    continue
                raise ToolFailure(
                    ErrorType.RATE_LIMIT,
                    "SEARCH_RATE_LIMITED",
                    f"{provider} refused the search: too many requests"
                    + (f" (retry after {after:g} s)" if after is not None else ""),
                    "wait before searching again, or raise web.search.min_interval_s",
                    retry_after=after,
                )
            return self._parse(provider, response, n)
        raise AssertionError("unreachable")

    async def _request(self, provider: str, query: str, n: int) -> httpx.Response:
        import httpx2 as httpx

        client: httpx.AsyncClient = self._client()
        s = self.s
        try:
            if provider == "searxng":
                base = str(s.searxng.url).rstrip("/")
                return await client.get(f"{base}/search", params={"q": query, "format": "json", "pageno": 1})
            if provider == "brave":
                return await client.get(
                    s.brave.endpoint,
                    params={"q": query, "count": n},
                    headers={"X-Subscription-Token": str(s.brave.api_key), "Accept": "application/json"},
                )
            if provider == "tavily":
                return await client.post(
                    s.tavily.endpoint,
                    json={"query": query, "max_results": n},
                    headers={"Authorization": f"Bearer {s.tavily.api_key}"},
                )
            return await client.post(s.duckduckgo.endpoint, data={"q": query, "kl": "wt-wt"})
        except httpx.TimeoutException:
            raise ToolFailure(
                ErrorType.TIMEOUT, "SEARCH_TIMEOUT", f"{provider} did not answer in time", "try again shortly"
            ) from None
        except httpx.HTTPError as exc:
            raise ToolFailure(
                ErrorType.DEPENDENCY_ERROR,
                "SEARCH_UNAVAILABLE",
                f"the search provider {provider} could not be reached ({type(exc).__name__})",
                _CONFIGURE[provider],
            ) from None

    def _parse(self, provider: str, response: httpx.Response, n: int) -> list[Hit]:
        status = response.status_code
        if status in (401, 403):
            raise ToolFailure(
                ErrorType.DEPENDENCY_ERROR,
                "SEARCH_AUTH",
                f"{provider} refused the request (HTTP {status}): the key is missing, wrong or out of quota",
                _CONFIGURE[provider],
            )
        if status >= 400:
            raise ToolFailure(
                ErrorType.DEPENDENCY_ERROR if status < 500 else ErrorType.TRANSIENT_ERROR,
                "SEARCH_FAILED",
                f"{provider} answered HTTP {status}",
                "try again later" if status >= 500 else _CONFIGURE[provider],
            )
        try:
            if provider == "duckduckgo":
                return _duckduckgo(response.text)[:n]
            data = response.json()
            raw = {
                "searxng": lambda: data.get("results", []),
                "brave": lambda: (data.get("web") or {}).get("results", []),
                "tavily": lambda: data.get("results", []),
            }[provider]()
        except (ValueError, AttributeError, TypeError):
            raise ToolFailure(
                ErrorType.DEPENDENCY_ERROR,
                "SEARCH_BAD_ANSWER",
                f"{provider} answered with something that is not its search format",
                _CONFIGURE[provider],
            ) from None
        hits = []
        for item in raw[:n]:
            if not isinstance(item, dict) or not item.get("url"):
                continue
            snippet = item.get("content") or item.get("description") or ""
            date = item.get("publishedDate") or item.get("published_date") or item.get("page_age") or item.get("age")
            known = {"title", "url", "content", "description", "publishedDate", "published_date", "page_age"}
            extra = {k: v for k, v in item.items() if k not in known}
            hits.append(Hit(str(item.get("title") or ""), str(item["url"]), _plain(str(snippet)), date, extra))
        return hits


def _not_configured(provider: str) -> ToolFailure:
    return ToolFailure(
        ErrorType.DEPENDENCY_ERROR,
        "SEARCH_NOT_CONFIGURED",
        f"the search provider {provider} is not configured",
        _CONFIGURE[provider],
    )


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def _plain(html: str) -> str:
    """Snippets sometimes carry <strong> and entities: plain text, one line."""
    if "<" not in html and "&" not in html:
        return " ".join(html.split())
    import lxml.html

    try:
        return " ".join(lxml.html.fromstring(f"<div>{html}</div>").text_content().split())
    except Exception:
        return " ".join(html.split())


def _duckduckgo(page: str) -> list[Hit]:
    """Hits of DuckDuckGo's HTML results page (``a.result__a`` links, ``.result__snippet`` text); the
    redirect wrapper ``/l/?uddg=<url>`` is unwrapped. Ads are skipped."""
    import lxml.html

    if not page.strip():
        return []
    doc = lxml.html.fromstring(page)
    hits = []
    for result in doc.xpath('//div[contains(concat(" ", normalize-space(@class), " "), " result ")]'):
        if "result--ad" in (result.get("class") or ""):
            continue
        links = result.xpath('.//a[contains(@class, "result__a")]')
        if not links:
            continue
        href = links[0].get("href") or ""
        parsed = urlparse(href)
        if parsed.path.startswith("/l/"):
            href = parse_qs(parsed.query).get("uddg", [href])[0]
        elif href.startswith("//"):
            href = "https:" + href
        snippet = result.xpath('.//*[contains(@class, "result__snippet")]')
        hits.append(
            Hit(
                " ".join(links[0].text_content().split()),
                href,
                " ".join(snippet[0].text_content().split()) if snippet else "",
            )
        )
    return hits
