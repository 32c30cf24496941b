"""Fetching a URL the model gave us (docs/tools.md, S-5): the address rule, the pinned connection, redirects,
robots.txt, the byte cap and the total timeout.

The boundary is where the connection is made, not a check before it: a URL's host is resolved once, every
address it resolves to must pass the rule, and the request is sent *to that vetted address* (the URL's
host is rewritten to the IP; ``Host`` and TLS SNI keep the name, so certificates are still checked against
it). There is no second resolution for a rebinding DNS server to answer differently. Every redirect hop is
vetted the same way before it is followed. Numeric hosts in any spelling (``2130706433``, ``0x7f.1``,
``0177.0.0.1``, ``127.1``, ``[::ffff:127.0.0.1]``) are read the way the C library reads them, so the rule
sees the address a connection would reach.

Operator-configured endpoints (search providers) do not go through the address rule: they are the
operator's choice, and a self-hosted SearXNG usually lives on localhost.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from ba_mcp.errors import ErrorType, ToolFailure

if TYPE_CHECKING:
    import httpx2 as httpx

    from ba_mcp.settings import WebSettings

IP = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_REDIRECTS = {301, 302, 303, 307, 308}


def refused(
    message: str,
    hint: str = "only public http(s) addresses are read (an operator may allow intranets: web.allow_private_networks)",
) -> ToolFailure:
    return ToolFailure(ErrorType.PERMISSION_DENIED, "URL_REFUSED", message, hint)


def numeric_host(host: str) -> IP | None:
    """The address a numeric host names, in every spelling the resolver accepts (inet_aton's decimal, hex,
    octal and short forms; IPv6 with or without brackets); None for a name."""
    bare = host.strip("[]").rstrip(".").lower()
    try:
        return ipaddress.ip_address(bare.split("%", 1)[0])
    except ValueError:
        pass
    if bare and all(c in "0123456789abcdefx." for c in bare):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(bare))
        except OSError:
            return None
    return None


_GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")
_ROBOTS_BYTES = 512 * 1024  # of a robots.txt, on the wire and decompressed


def address_problem(ip: IP) -> str | None:
    """Why a connection to ``ip`` is refused (None: a public address)."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return address_problem(ip.ipv4_mapped)
        if ip.sixtofour is not None:
            return address_problem(ip.sixtofour)
        if ip.teredo is not None:
            return address_problem(ip.teredo[1])
        if ip in _NAT64:
            return address_problem(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_unspecified:
        return "an unspecified address"
    if ip.is_link_local:
        return "a link-local address (cloud metadata lives there)"
    if ip.is_multicast:
        return "a multicast address"
    if isinstance(ip, ipaddress.IPv6Address) and ip not in _GLOBAL_UNICAST_V6:
        # an allow-list: Python's is_global does not know site-local fec0::/10 (nor every later carve-out)
        return "an IPv6 address outside global unicast (2000::/3): site-local, unique-local or reserved"
    if isinstance(ip, ipaddress.IPv4Address) and ip in ipaddress.ip_network("100.64.0.0/10"):
        return "a carrier-grade NAT address (cloud metadata lives there too)"
    if ip.is_private:
        return "a private-network address"
    if ip.is_reserved or not ip.is_global:
        return "a reserved address"
    return None


@dataclass(frozen=True)
class Target:
    """A vetted URL: where to connect (``address``) and what to ask for there."""

    url: httpx.URL
    address: str

    def request_url(self) -> httpx.URL:
        host = f"[{self.address}]" if ":" in self.address else self.address
        return self.url.copy_with(host=host)

    def headers(self) -> dict[str, str]:
        default = {"http": 80, "https": 443}[self.url.scheme]
        port = self.url.port
        return {"Host": self.url.host + (f":{port}" if port and port != default else "")}


async def vet(url: str | httpx.URL, allow_private: bool) -> Target:
    """Parse, check the scheme, resolve once and check every address; refuse before any connection."""
    import httpx2 as httpx

    try:
        parsed = httpx.URL(url) if isinstance(url, str) else url
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise ToolFailure(
            ErrorType.INVALID_PARAMETERS, "BAD_URL", f"not a valid URL: {exc}", "give a full http(s):// URL"
        ) from None
    if parsed.scheme not in ("http", "https"):
        raise refused(f"the scheme '{parsed.scheme[:20] or 'none'}' is not fetched", "give an http:// or https:// URL")
    if parsed.userinfo:
        raise refused("URLs with credentials (user:password@) are not fetched", "give the URL without credentials")
    host = parsed.host
    if not host:
        raise ToolFailure(ErrorType.INVALID_PARAMETERS, "BAD_URL", "the URL has no host", "give a full URL")
    numeric = numeric_host(host)
    if numeric is not None:
        addresses: list[IP] = [numeric]
    else:
        try:
            infos = await anyio.getaddrinfo(host.rstrip("."), parsed.port or 443, type=socket.SOCK_STREAM)
        except (socket.gaierror, OSError, UnicodeError):
            raise ToolFailure(
                ErrorType.DEPENDENCY_ERROR,
                "DNS_FAILED",
                f"the host {host[:100]} could not be resolved",
                "check the URL",
            ) from None
        addresses = list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos))
    if not addresses:
        raise ToolFailure(ErrorType.DEPENDENCY_ERROR, "DNS_FAILED", f"the host {host[:100]} has no address")
    if not allow_private:
        for ip in addresses:
            problem = address_problem(ip)
            if problem:
                raise refused(f"{host[:100]} resolves to {problem}; it is not fetched")
    return Target(parsed, str(addresses[0]))


@dataclass
class Download:
    """What a fetch brought back: the final URL, status, headers and at most ``max_download_bytes`` of body."""

    url: str
    status: int
    content_type: str
    body: bytes
    capped: bool  # the body is longer than the cap; this is its beginning
    total_bytes: int | None  # Content-Length when the server sent one
    redirects: list[str] = field(default_factory=list)


class Fetcher:
    """The App's one ``httpx.AsyncClient`` and the rules of S-5. Created lazily on the event loop."""

    def __init__(self, settings: WebSettings, version: str) -> None:
        self.settings = settings
        self.user_agent = settings.user_agent or f"ba-mcp/{version}"
        self._client: httpx.AsyncClient | None = None
        self._robots: dict[str, tuple[float, Any]] = {}

    @property
    def client(self) -> httpx.AsyncClient:
        import httpx2 as httpx

        if self._client is None:
            self._client = httpx.AsyncClient(
                follow_redirects=False,
                trust_env=False,  # no proxy from the environment: the connection goes where it was vetted
                timeout=httpx.Timeout(self.settings.timeout_s),
                headers={"User-Agent": self.user_agent, "Accept-Encoding": "gzip, deflate"},
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def fetch(self, url: str) -> Download:
        """GET ``url`` by the rules: vetted and pinned, redirects re-vetted, robots.txt, byte cap, total timeout."""
        try:
            with anyio.fail_after(self.settings.timeout_s):
                return await self._fetch(url)
        except TimeoutError:
            raise ToolFailure(
                ErrorType.TIMEOUT,
                "DOWNLOAD_TIMEOUT",
                f"the download did not finish within {self.settings.timeout_s:g} s",
                "try again later, or raise web.timeout_s",
            ) from None

    async def _fetch(self, url: str) -> Download:
        import httpx2 as httpx

        redirects: list[str] = []
        target = await vet(url, self.settings.allow_private_networks)
        while True:
            if self.settings.respect_robots_txt:
                await self._check_robots(target)
            response = await self._send(target)
            try:
                if response.status_code in _REDIRECTS and "location" in response.headers:
                    if len(redirects) >= self.settings.max_redirects:
                        raise ToolFailure(
                            ErrorType.DEPENDENCY_ERROR,
                            "TOO_MANY_REDIRECTS",
                            f"more than {self.settings.max_redirects} redirects",
                            "give the final URL, or raise web.max_redirects",
                        )
                    try:
                        nxt = target.url.join(response.headers["location"])
                    except (httpx.InvalidURL, ValueError):
                        raise ToolFailure(
                            ErrorType.DEPENDENCY_ERROR, "BAD_REDIRECT", "a redirect to an invalid URL"
                        ) from None
                    redirects.append(str(nxt))
                    target = await vet(nxt, self.settings.allow_private_networks)
                    continue
                return await self._read(target, response, redirects)
            finally:
                await response.aclose()

    async def _send(self, target: Target) -> httpx.Response:
        """GET the vetted target at its vetted address, streamed. Unless private networks are allowed, the
        connected socket's peer is checked before a byte of the request is written: it must be the vetted
        address and a public one (the second boundary, where the connection happens)."""
        import httpx2 as httpx

        request = self.client.build_request("GET", target.request_url(), headers=target.headers())
        if target.url.scheme == "https":
            request.extensions["sni_hostname"] = target.url.host
        if not self.settings.allow_private_networks:
            request.extensions["trace"] = _peer_guard(target)
        try:
            return await self.client.send(request, stream=True)
        except _PeerRefused as refusal:
            raise refusal.failure from None
        except httpx.HTTPError as exc:
            raise _unreachable(target.url, exc) from None

    async def _read(
        self, target: Target, response: httpx.Response, redirects: list[str], cap: int | None = None
    ) -> Download:
        """The body of a streamed response: at most ``cap`` bytes (web.max_download_bytes) on the wire, and at
        most ``cap`` bytes after decompression."""
        cap = cap if cap is not None else self.settings.max_download_bytes
        length = response.headers.get("content-length")
        total = int(length) if length and length.isdigit() else None
        body, over = await capped_body(response, cap)
        capped = over or (total is not None and total > cap)
        return Download(
            url=str(target.url),
            status=response.status_code,
            content_type=response.headers.get("content-type", ""),
            body=body,
            capped=capped,
            total_bytes=total,
            redirects=redirects,
        )

    async def _check_robots(self, target: Target) -> None:
        """robots.txt of the target's origin, fetched the same vetted way: 401/403 and 5xx mean disallow (as
        the reference fetch server does), other 4xx mean allow. Cached per origin for an hour."""
        from protego import Protego

        origin = f"{target.url.scheme}://{target.url.netloc.decode('ascii')}"
        known = self._robots.get(origin)
        if known is None or time.monotonic() - known[0] > 3600:
            robots_target = Target(target.url.copy_with(path="/robots.txt", query=None, fragment=None), target.address)
            response = await self._send(robots_target)
            try:
                if response.status_code in (401, 403) or response.status_code >= 500:
                    rules: Any = False
                elif response.status_code >= 300:
                    rules = True
                else:  # the same capped raw read and capped decompression as every other remote body
                    body = (await self._read(robots_target, response, [], cap=_ROBOTS_BYTES)).body
                    rules = Protego.parse(body.decode("utf-8", "replace"))
            finally:
                await response.aclose()
            known = self._robots[origin] = (time.monotonic(), rules)
        rules = known[1]
        path = target.url.raw_path.decode("ascii", "replace")
        if rules is False or (rules is not True and not rules.can_fetch(origin + path, self.user_agent)):
            raise ToolFailure(
                ErrorType.PERMISSION_DENIED,
                "ROBOTS_DISALLOWED",
                f"{origin}'s robots.txt does not allow {self.user_agent} to fetch {path[:200]}",
                "the site's owner asked robots not to read this page; respect it, or set "
                "web.respect_robots_txt: false if you are allowed to read it",
            )


class _PeerRefused(Exception):
    """A connection whose peer is not the vetted public address (raised from the transport's trace hook)."""

    def __init__(self, failure: ToolFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def _peer_guard(target: Target) -> Callable[[str, dict[str, Any]], Awaitable[None]]:
    """httpcore's ``trace`` hook: when the TCP connection is made, its peer address is read off the socket and
    checked; a wrong one closes the socket before the request is written."""

    async def trace(event: str, info: dict[str, Any]) -> None:
        if event != "connection.connect_tcp.complete":
            return
        stream = info.get("return_value")
        peer = stream.get_extra_info("server_addr") if stream is not None else None
        try:
            ip = ipaddress.ip_address(str(peer[0]).split("%", 1)[0])  # type: ignore[index]
        except (TypeError, ValueError, IndexError):
            problem: str | None = "an address that could not be read"
        else:
            vetted = ipaddress.ip_address(target.address)
            problem = address_problem(ip) or (None if ip == vetted else f"{ip}, not the vetted {vetted}")
        if problem:
            if stream is not None:
                await stream.aclose()
            host = target.url.host[:100]
            raise _PeerRefused(refused(f"the connection to {host} reached {problem}; nothing was sent"))

    return trace


def _unreachable(url: httpx.URL, exc: Exception) -> ToolFailure:
    return ToolFailure(
        ErrorType.DEPENDENCY_ERROR,
        "UNREACHABLE",
        f"{url.host[:100]} could not be reached ({type(exc).__name__})",
        "check the URL; the site may be down",
    )


async def capped_body(response: httpx.Response, cap: int) -> tuple[bytes, bool]:
    """The body of a streamed response — every remote body goes through here, never ``.content``: at most
    ``cap`` bytes read on the wire and at most ``cap`` bytes after decompression; and whether it was cut."""
    chunks: list[bytes] = []
    have = 0
    async for chunk in response.aiter_raw():  # raw: the cap counts bytes on the wire
        chunks.append(chunk)
        have += len(chunk)
        if have > cap:
            break
    body = b"".join(chunks)[:cap]
    encoding = response.headers.get("content-encoding", "").lower()
    if encoding and encoding != "identity":
        body = _decompress(body, encoding, cap)
    return body, have > cap


def _decompress(body: bytes, encoding: str, cap: int) -> bytes:
    """A gzip/deflate/brotli/zstd body, inflated to at most ``cap`` bytes (a small bomb stays small)."""
    import zlib

    if encoding in ("gzip", "x-gzip", "deflate"):
        d = zlib.decompressobj(wbits=47 if encoding != "deflate" else 15)
        try:
            return d.decompress(body, cap)
        except zlib.error:
            raise ToolFailure(ErrorType.DEPENDENCY_ERROR, "BAD_ENCODING", f"the {encoding} body is corrupt") from None
    raise ToolFailure(
        ErrorType.DEPENDENCY_ERROR, "UNSUPPORTED_ENCODING", f"the server sent a {encoding[:30]}-encoded body"
    )
