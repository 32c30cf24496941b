"""The Searcher: runs a search on the configured provider, one request per ``min_interval_s`` (calls queue),
a 429 answered by waiting what ``Retry-After`` asks (once, when it is short) and otherwise a rate_limit
error; the provider's answer read into hits, or a clear dependency_error. API keys travel only in request
headers or bodies: they never appear in a hit, an error or a log line."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio

from ba_mcp.errors import ErrorType, ToolFailure
from ba_mcp.web.search.base import Hit, Provider, choose, not_configured
from ba_mcp.web.search.providers import provider_for

if TYPE_CHECKING:
    import httpx2 as httpx

    from ba_mcp.settings import SearchSettings

_MAX_RETRY_AFTER_S = 10.0


class Searcher:
    """Runs searches on the configured provider with spacing between requests."""

    def __init__(self, settings: SearchSettings, client: Any) -> None:
        self.settings = settings
        self._client = client  # a callable returning the App's shared httpx.AsyncClient
        self._lock = anyio.Lock()
        self._last = 0.0

    @property
    def provider(self) -> str:
        return choose(self.settings)

    async def search(self, query: str, n: int) -> list[Hit]:
        provider = self.backend()
        if not provider.configured():
            raise not_configured(provider)
        for attempt in range(2):
            async with self._lock:  # calls queue: one request per min_interval_s
                wait = self._last + self.settings.min_interval_s - time.monotonic()
                if wait > 0:
                    await anyio.sleep(wait)
                try:
                    response, body = await self._send(provider, query, n)
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
                    f"{provider.name} refused the search: too many requests"
                    + (f" (retry after {after:g} s)" if after is not None else ""),
                    "wait before searching again, or raise web.search.min_interval_s",
                    retry_after=after,
                )
            return self._read(provider, response, body, n)
        raise AssertionError("unreachable")

    def backend(self) -> Provider:
        """The configured provider's object."""
        return provider_for(self.provider, self.settings)

    async def _send(self, provider: Provider, query: str, n: int) -> tuple[httpx.Response, bytes]:
        """The provider's answer and its body, read like every remote body: streamed, capped on the wire and
        after decompression (``_ANSWER_BYTES``)."""
        import httpx2 as httpx

        from ba_mcp.web.fetch import capped_body

        try:
            client = self._client()
            response = await client.send(provider.request(client, query, n), stream=True)
            try:
                body, _ = await capped_body(response, _ANSWER_BYTES)
            finally:
                await response.aclose()
            return response, body
        except httpx.TimeoutException:
            raise ToolFailure(
                ErrorType.TIMEOUT, "SEARCH_TIMEOUT", f"{provider.name} did not answer in time", "try again shortly"
            ) from None
        except httpx.HTTPError as exc:
            raise ToolFailure(
                ErrorType.DEPENDENCY_ERROR,
                "SEARCH_UNAVAILABLE",
                f"the search provider {provider.name} could not be reached ({type(exc).__name__})",
                provider.configure,
            ) from None

    def _read(self, provider: Provider, response: httpx.Response, body: bytes, n: int) -> list[Hit]:
        status = response.status_code
        if status in (401, 403):
            raise ToolFailure(
                ErrorType.DEPENDENCY_ERROR,
                "SEARCH_AUTH",
                f"{provider.name} refused the request (HTTP {status}): the key is missing, wrong or out of quota",
                provider.configure,
            )
        if status >= 400:
            raise ToolFailure(
                ErrorType.DEPENDENCY_ERROR if status < 500 else ErrorType.TRANSIENT_ERROR,
                "SEARCH_FAILED",
                f"{provider.name} answered HTTP {status}",
                "try again later" if status >= 500 else provider.configure,
            )
        try:
            return provider.hits(body, n)
        except (ValueError, AttributeError, TypeError):
            raise ToolFailure(
                ErrorType.DEPENDENCY_ERROR,
                "SEARCH_BAD_ANSWER",
                f"{provider.name} answered with something that is not its search format",
                provider.configure,
            ) from None


_ANSWER_BYTES = 4 * 1024 * 1024  # of a search provider's answer, on the wire and decompressed


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
