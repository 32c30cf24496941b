"""The search providers, one class each (docs/tools.md): SearXNG (self-hosted), Brave and Tavily (API keys) and the
no-key default, DuckDuckGo's HTML results page.

Why DuckDuckGo's HTML page and not the ``ddgs`` library: ddgs spreads a query over several engines through
a browser-impersonating native HTTP client of its own; one documented endpoint parsed with lxml is smaller,
testable against a local server, and its failure is a clear dependency_error.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlparse

from ba_mcp.web.search.base import Hit, Provider, json_hits

if TYPE_CHECKING:
    import httpx2 as httpx

    from ba_mcp.settings import SearchSettings


class SearXNG:
    name = "searxng"
    configure = "set web.search.searxng.url to your SearXNG instance (its JSON format enabled)"

    def __init__(self, settings: SearchSettings) -> None:
        self.url = settings.searxng.url

    def configured(self) -> bool:
        return bool(self.url)

    def request(self, client: httpx.AsyncClient, query: str, n: int) -> httpx.Request:
        base = str(self.url).rstrip("/")
        return client.build_request("GET", f"{base}/search", params={"q": query, "format": "json", "pageno": 1})

    def hits(self, body: bytes, n: int) -> list[Hit]:
        return json_hits(json.loads(body).get("results", []), n)


class Brave:
    name = "brave"
    configure = "set web.search.brave.api_key (BA_MCP_WEB__SEARCH__BRAVE__API_KEY)"

    def __init__(self, settings: SearchSettings) -> None:
        self.key, self.endpoint = settings.brave.api_key, settings.brave.endpoint

    def configured(self) -> bool:
        return bool(self.key)

    def request(self, client: httpx.AsyncClient, query: str, n: int) -> httpx.Request:
        headers = {"X-Subscription-Token": str(self.key), "Accept": "application/json"}
        return client.build_request("GET", self.endpoint, params={"q": query, "count": n}, headers=headers)

    def hits(self, body: bytes, n: int) -> list[Hit]:
        return json_hits((json.loads(body).get("web") or {}).get("results", []), n)


class Tavily:
    name = "tavily"
    configure = "set web.search.tavily.api_key (BA_MCP_WEB__SEARCH__TAVILY__API_KEY)"

    def __init__(self, settings: SearchSettings) -> None:
        self.key, self.endpoint = settings.tavily.api_key, settings.tavily.endpoint

    def configured(self) -> bool:
        return bool(self.key)

    def request(self, client: httpx.AsyncClient, query: str, n: int) -> httpx.Request:
        headers = {"Authorization": f"Bearer {self.key}"}
        return client.build_request("POST", self.endpoint, json={"query": query, "max_results": n}, headers=headers)

    def hits(self, body: bytes, n: int) -> list[Hit]:
        return json_hits(json.loads(body).get("results", []), n)


class DuckDuckGo:
    name = "duckduckgo"
    configure = "configure another provider (web.search.provider: searxng, brave or tavily)"

    def __init__(self, settings: SearchSettings) -> None:
        self.endpoint = settings.duckduckgo.endpoint

    def configured(self) -> bool:
        return True

    def request(self, client: httpx.AsyncClient, query: str, n: int) -> httpx.Request:
        return client.build_request("POST", self.endpoint, data={"q": query, "kl": "wt-wt"})

    def hits(self, body: bytes, n: int) -> list[Hit]:
        return duckduckgo_hits(body.decode("utf-8", "replace"))[:n]


PROVIDERS: dict[str, type[SearXNG | Brave | Tavily | DuckDuckGo]] = {
    p.name: p for p in (SearXNG, Brave, Tavily, DuckDuckGo)
}


def provider_for(name: str, settings: SearchSettings) -> Provider:
    return PROVIDERS[name](settings)


def duckduckgo_hits(page: str) -> list[Hit]:
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
