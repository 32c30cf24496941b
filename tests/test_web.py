"""web_search and web_reader through a real MCP client, against real HTTP servers on 127.0.0.1.

Nothing here leaves the machine: the pages and the fake search providers are served by tests/web_fixtures.py;
URLs naming private or metadata addresses are refused by the guard before any connection (the loopback
spellings prove it: the local server counts zero requests), and the redirect from a public address to
loopback runs in a network namespace of its own (test_web_namespace.py)."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.conftest import ROOT, in_process, meta_of, text_of
from tests.web_fixtures import WebServer

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def web() -> Iterator[WebServer]:
    with WebServer() as server:
        yield server


def _env(web: WebServer, **extra: str) -> dict[str, str]:
    return {
        "BA_MCP_WEB__ALLOW_PRIVATE_NETWORKS": "true",  # the test server lives on loopback
        "BA_MCP_WEB__TIMEOUT_S": "15",  # generous: a loaded machine must not fail a test (the timeout test sets 1)
        "BA_MCP_WEB__MAX_DOWNLOAD_BYTES": "200000",
        "BA_MCP_WEB__SEARCH__MIN_INTERVAL_S": "0",
        "BA_MCP_WEB__SEARCH__SEARXNG__URL": web.url("/searxng"),
        "BA_MCP_WEB__USER_AGENT": "ba-mcp-test/1.0",
        "BA_MCP_RETRY__MAX_RETRIES": "0",  # the retry policy has its own tests; here each failure once
        **extra,
    }


@pytest.fixture(scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory, web: WebServer) -> AsyncIterator[Client]:
    ws = tmp_path_factory.mktemp("webws")
    async with in_process(ws, ["web_reader", "web_search", "file_reader", "query_database"], **_env(web)) as c:
        yield c


@pytest.fixture(scope="module")
async def guarded(tmp_path_factory: pytest.TempPathFactory, web: WebServer) -> AsyncIterator[Client]:
    """The shipped address rule (private networks not allowed)."""
    ws = tmp_path_factory.mktemp("guardws")
    env = _env(web)
    del env["BA_MCP_WEB__ALLOW_PRIVATE_NETWORKS"]
    async with in_process(ws, ["web_reader"], **env) as c:
        yield c


async def read(c: Client, url: str, **extra: Any) -> Any:
    return await c.call_tool("web_reader", {"url": url, **extra})


def error_code(result: Any) -> str:
    assert result.is_error, text_of(result)
    return str(meta_of(result)["error"]["code"])


# -- content --------------------------------------------------------------------------------------


async def test_an_article_becomes_its_main_content_as_markdown(client: Client, web: WebServer) -> None:
    result = await read(client, web.url("/article"))
    text = text_of(result)
    assert not result.is_error, text
    assert text.startswith("web_reader: document (standard)")
    assert "# Quarterly sales review" in text and "Revenue by region" in text
    assert "North" in text and "1,200" in text  # the table is kept
    assert "[methods note](https://example.com/method)" in text  # links are kept
    for boilerplate in ("Accept all cookies", "All rights reserved", "About us"):
        assert boilerplate not in text


async def test_gzip_bodies_are_inflated(client: Client, web: WebServer) -> None:
    text = text_of(await read(client, web.url("/article.gz")))
    assert "Revenue by region" in text


async def test_json_csv_pdf_and_text_each_get_their_kind(client: Client, web: WebServer) -> None:
    js = await read(client, web.url("/data.json"))
    assert text_of(js).startswith("web_reader: json (standard)") and '"kpi": "revenue"' in text_of(js)
    csv = await read(client, web.url("/sales.csv"))
    text = text_of(csv)
    assert text.startswith("web_reader: table (standard)") and "24 rows × 3 columns" in text
    aid = re.search(r"artifact_[0-9a-f]{12}", text)
    assert aid, text  # the data file is an artifact the other tools can use
    q = await client.call_tool("query_database", {"query": f"SELECT sum(revenue) AS total FROM '{aid.group(0)}'"})
    assert not q.is_error and str(sum(100 + m * 7 for m in range(1, 13)) * 2) in text_of(q)
    export = await read(client, web.url("/export?name=x.csv"))
    assert error_code(export) == "BINARY_CONTENT"  # octet-stream with no data suffix is refused
    pdf = await read(client, web.url("/report.pdf"))
    assert "Revenue grew twelve percent" in text_of(pdf), text_of(pdf)


async def test_binary_and_javascript_only_pages_are_clear_errors(client: Client, web: WebServer) -> None:
    png = await read(client, web.url("/logo.png"))
    assert error_code(png) == "BINARY_CONTENT" and "image/png" in text_of(png)
    js = await read(client, web.url("/js"))
    assert error_code(js) == "NO_READABLE_TEXT" and "JavaScript" in text_of(js)
    missing = await read(client, web.url("/nowhere"))
    assert error_code(missing) == "HTTP_404"


async def test_long_text_comes_in_windows_with_the_whole_as_an_artifact(client: Client, web: WebServer) -> None:
    first = await read(client, web.url("/long.txt"), max_length=5000)
    text = text_of(first)
    assert "start_index=5000" in text, text
    whole = re.search(r"or read the whole text: (artifact_[0-9a-f]{12})", text)
    assert whole, text
    second = text_of(await read(client, web.url("/long.txt"), start_index=5000, max_length=5000))
    assert "characters 5,000–10,000" in second and "start_index=10000" in second
    stored = await client.call_tool("file_reader", {"path": whole.group(1), "output_level": "full"})
    total = int(re.search(r"of ([\d,]+)\)", text).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert f"{total:,} characters" in text_of(stored) and "Paragraph 0:" in text_of(stored)  # the whole text
    # The default window (20,000 characters) is more than standard shows: the one continuation starts
    # where the shown part ends, so reading on skips nothing (issue 19).
    page = text_of(await read(client, web.url("/long.txt")))
    assert page.count("start_index=") == 1 and re.search(r"or read the whole text: " + whole.group(1), page), page
    resume = int(re.search(r"start_index=(\d+)", page).group(1))  # type: ignore[union-attr]
    shown = page.split("~2,000 tokens):\n\n", 1)[1].split("\n\nTruncated:", 1)[0]
    assert resume == len(shown), (resume, len(shown))
    after = text_of(await read(client, web.url("/long.txt"), start_index=resume, max_length=200))
    assert f"characters {resume:,}–" in after
    past = await read(client, web.url("/long.txt"), start_index=10**7)
    assert error_code(past) == "INVALID_PARAMETERS" or meta_of(past)["error"]["type"] == "invalid_parameters"


async def test_one_download_serves_every_level_and_window(client: Client, web: WebServer) -> None:
    url = web.url("/article") + "?once"
    before = web.paths.count("/article?once")
    for level in ("brief", "standard", "full"):
        result = await read(client, url, output_level=level)
        assert text_of(result).startswith(f"web_reader: document ({level})"), text_of(result)
    await read(client, url, start_index=100, max_length=200)
    assert web.paths.count("/article?once") - before == 1


async def test_the_user_agent_is_sent_and_robots_txt_is_respected(client: Client, web: WebServer) -> None:
    ua = await read(client, web.url("/ua"))
    assert "ba-mcp-test/1.0" in text_of(ua)
    assert all(h.get("user-agent") == "ba-mcp-test/1.0" for h in web.headers)
    private = await read(client, web.url("/private/page"))
    assert error_code(private) == "ROBOTS_DISALLOWED"
    assert "/private/page" not in web.paths


async def test_downloads_are_capped(client: Client, web: WebServer) -> None:
    huge = await read(client, web.url("/huge"))
    assert not huge.is_error and "larger than web.max_download_bytes" in text_of(huge)
    assert error_code(await read(client, web.url("/huge.csv"))) == "DOWNLOAD_TOO_LARGE"
    nolength = await read(client, web.url("/huge-nolength"))
    assert "only its beginning was read" in text_of(nolength)


@pytest.mark.slow
async def test_downloads_are_timed_as_a_whole(tmp_path: Path, web: WebServer) -> None:
    async with in_process(tmp_path, ["web_reader"], **_env(web, BA_MCP_WEB__TIMEOUT_S="1")) as client:
        assert error_code(await read(client, web.url("/slow?s=4"))) == "DOWNLOAD_TIMEOUT"
        assert error_code(await read(client, web.url("/drip"))) == "DOWNLOAD_TIMEOUT"  # total, not per read


async def test_redirects_are_followed_within_the_limit_and_revetted(client: Client, web: WebServer) -> None:
    ok = await read(client, web.url("/r/3"))
    assert "Revenue by region" in text_of(ok) and "redirected to" in text_of(ok)
    assert error_code(await read(client, web.url("/r/9"))) == "TOO_MANY_REDIRECTS"
    assert error_code(await read(client, web.url("/tofile"))) == "URL_REFUSED"


# -- the address rule (S-5) -----------------------------------------------------------------------


async def test_loopback_in_every_spelling_is_refused_before_any_connection(guarded: Client, web: WebServer) -> None:
    port = web.port
    spellings = [
        f"http://127.0.0.1:{port}/article",
        f"http://localhost:{port}/article",
        f"http://LOCALHOST.:{port}/article",
        f"http://2130706433:{port}/article",
        f"http://0x7f000001:{port}/article",
        f"http://0x7f.1:{port}/article",
        f"http://0177.0.0.1:{port}/article",
        f"http://127.1:{port}/article",
        f"http://[::1]:{port}/article",
        f"http://[::ffff:127.0.0.1]:{port}/article",
        f"http://[::ffff:7f00:1]:{port}/article",
        f"http://user:pw@127.0.0.1:{port}/article",
        f"http://example.com@127.0.0.1:{port}/article",
        f"HTTP://127.0.0.1:{port}/article",
        f"http://0.0.0.0:{port}/article",
        f"http://0:{port}/article",
    ]
    before = web.hits
    for url in spellings:
        result = await read(guarded, url)
        # URL_REFUSED by the address rule, or BAD_URL where the URL parser itself rejects the spelling
        assert error_code(result) in ("URL_REFUSED", "BAD_URL"), (url, text_of(result))
    assert web.hits == before  # not one connection reached the server


@contextlib.contextmanager
def peak_growth() -> Iterator[list[int]]:
    """This process's peak RSS growth over the block, in bytes (sampled every 5 ms), in ``[0]`` after it."""
    import psutil

    me = psutil.Process()
    before, peak, done = me.memory_info().rss, [0], threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], me.memory_info().rss)
            done.wait(0.005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    growth = [0]
    try:
        yield growth
    finally:
        done.set()
        watcher.join()
        growth[0] = peak[0] - before


@pytest.mark.slow
async def test_a_robots_txt_bomb_is_read_capped(client: Client) -> None:
    """Issue 22 item 2: robots.txt was read whole and inflated by httpx (3 MB of gzip, 3 GB of zeros). Now the
    same capped raw read and capped decompression as every other body: the page is answered, memory stays."""
    import gzip as gz
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    bomb = gz.compress(b"\0" * (384 << 20), compresslevel=9)  # ~370 KB on the wire, 384 MB inflated

    class Site(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            robots = self.path == "/robots.txt"
            body = bomb if robots else b"<html><body><p>" + b"A readable page. " * 40 + b"</p></body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain" if robots else "text/html")
            if robots:
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    site = ThreadingHTTPServer(("127.0.0.1", 0), Site)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    try:
        with peak_growth() as growth:  # the in-process server: this very process
            result = await read(client, f"http://127.0.0.1:{site.server_address[1]}/page")
    finally:
        site.shutdown()
    assert not result.is_error and "A readable page" in text_of(result), text_of(result)
    assert growth[0] < 150 << 20, growth[0] >> 20


def test_no_remote_body_is_read_whole() -> None:
    """Issue 22 item 2: every remote body goes through fetch.capped_body; nothing reads a response whole."""
    whole = re.compile(r"\b(?:response|resp|r)\.(?:content\b|text\b|json\(|read\(|aread\()")
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sorted((ROOT / "ba_mcp").rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if whole.search(line) and not line.lstrip().startswith(("#", '"""'))
    ]
    assert not found, found


@pytest.mark.slow
async def test_a_search_answer_bomb_is_read_capped(tmp_path: Path) -> None:
    """A search provider's answer is read like every body: a gzip bomb is cut, not inflated."""
    import gzip as gz
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    bomb = gz.compress(b'{"results": [' + b" " * (384 << 20) + b"]}", compresslevel=9)

    class Provider(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(bomb)))
            self.end_headers()
            self.wfile.write(bomb)

        def log_message(self, *args: object) -> None:
            pass

    site = ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    env = {
        "BA_MCP_WEB__ALLOW_PRIVATE_NETWORKS": "true",
        "BA_MCP_WEB__SEARCH__SEARXNG__URL": f"http://127.0.0.1:{site.server_address[1]}",
        "BA_MCP_WEB__SEARCH__MIN_INTERVAL_S": "0",
        "BA_MCP_RETRY__MAX_RETRIES": "0",
    }
    try:
        async with in_process(tmp_path / "ws", ["web_search"], **env) as c:
            with peak_growth() as growth:
                result = await c.call_tool("web_search", {"query": "quarterly sales"})
    finally:
        site.shutdown()
    assert result.is_error and "SEARCH_BAD_ANSWER" in text_of(result), text_of(result)
    assert growth[0] < 150 << 20, growth[0] >> 20


async def test_ipv6_outside_global_unicast_is_refused(guarded: Client, web: WebServer) -> None:
    """Issue 22 item 3: site-local fec0::/10 passed Python's is_global; the rule is now an allow-list."""
    from ba_mcp.web.fetch import address_problem, numeric_host

    for host in ("fec0::1", "feff::1", "fd00::1", "fc00::5", "2001:db8::1", "100::1", "4000::1", "::2"):
        address = numeric_host(host)
        assert address is not None and address_problem(address) is not None, host
    assert address_problem(numeric_host("2606:4700:4700::1111")) is None  # type: ignore[arg-type]
    before = web.hits
    result = await read(guarded, "http://[fec0::1]:8080/internal-admin")
    assert error_code(result) == "URL_REFUSED", text_of(result)
    assert "site-local" in text_of(result) and web.hits == before


async def test_the_connected_peer_is_checked_before_anything_is_sent(
    web: WebServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 22 item 3, the second boundary: should a vetted name ever connect to a private address (a resolver
    that answers differently the second time, a vetting bug — here ``vet`` itself is made to lie), the socket's
    own peer address is checked when the TCP connection is made, and nothing is written to it."""
    import httpx2 as httpx

    from ba_mcp.errors import ToolFailure
    from ba_mcp.settings import WebSettings
    from ba_mcp.web import fetch

    port = httpx.URL(web.url("/article")).port

    async def lying_vet(url: Any, allow_private: bool) -> fetch.Target:
        return fetch.Target(httpx.URL(f"http://public.example:{port}/article"), "127.0.0.1")

    monkeypatch.setattr(fetch, "vet", lying_vet)
    for allow_private in (False, True):
        fetcher = fetch.Fetcher(WebSettings(allow_private_networks=allow_private, timeout_s=15), "test")
        before = web.hits
        try:
            if allow_private:  # the control: the same connection is made and served when private is allowed
                assert (await fetcher.fetch("http://public.example/article")).status == 200
                assert web.hits > before
                continue
            with pytest.raises(ToolFailure) as refused:
                await fetcher.fetch("http://public.example/article")
            assert refused.value.code == "URL_REFUSED" and "loopback" in refused.value.message
            assert "nothing was sent" in refused.value.message and web.hits == before
        finally:
            await fetcher.aclose()


# -- web_search -------------------------------------------------------------------------------------


async def test_search_levels_show_what_their_names_say(client: Client) -> None:
    brief = text_of(
        await client.call_tool("web_search", {"query": "retail", "num_results": 5, "output_level": "brief"})
    )
    assert brief.startswith("web_search: table (brief)") and "https://example.com/4" in brief and "Result 0" in brief
    assert "Snippet number" not in brief
    standard = text_of(await client.call_tool("web_search", {"query": "retail", "num_results": 5}))
    assert "Snippet number 3 about retail." in standard and "2026-" in standard and '"engine"' not in standard
    assert "engine" not in standard.split("More columns at full")[0]
    full = text_of(await client.call_tool("web_search", {"query": "retail", "num_results": 5, "output_level": "full"}))
    assert "engine" in full and "score" in full and "fake" in full
    twenty = await client.call_tool("web_search", {"query": "retail", "num_results": 20})
    assert meta_of(twenty)["rows"] == 20


@pytest.mark.slow  # three servers of its own and a provider that answers slowly: ~5 s
async def test_search_errors_name_the_provider_and_what_to_configure(
    client: Client, tmp_path: Path, web: WebServer
) -> None:
    boom = await client.call_tool("web_search", {"query": "boom"})
    assert "searxng answered HTTP 500" in text_of(boom)
    limited = await client.call_tool("web_search", {"query": "slowdown"})
    assert error_code(limited) == "SEARCH_RATE_LIMITED" and "retry after 30" in text_of(limited)
    bad = await client.call_tool("web_search", {"query": "x", "num_results": 21})
    assert bad.is_error and "num_results" in text_of(bad)
    env = _env(web, BA_MCP_WEB__SEARCH__PROVIDER="brave", BA_MCP_WEB__SEARCH__BRAVE__API_KEY="wrong-key-123")
    env["BA_MCP_WEB__SEARCH__BRAVE__ENDPOINT"] = web.url("/brave")
    async with in_process(tmp_path / "b", ["web_search"], **env) as c:
        result = await c.call_tool("web_search", {"query": "retail"})
        assert error_code(result) == "SEARCH_AUTH" and "brave" in text_of(result)
        assert "wrong-key-123" not in text_of(result) and "wrong-key-123" not in str(meta_of(result))
    env = _env(web, BA_MCP_WEB__SEARCH__PROVIDER="searxng", BA_MCP_WEB__SEARCH__SEARXNG__URL="http://127.0.0.1:9")
    async with in_process(tmp_path / "s", ["web_search"], **env) as c:
        result = await c.call_tool("web_search", {"query": "retail"})
        assert error_code(result) == "SEARCH_UNAVAILABLE" and "web.search.searxng.url" in text_of(result)
    env = _env(web, BA_MCP_WEB__SEARCH__PROVIDER="tavily")
    async with in_process(tmp_path / "t", ["web_search"], **env) as c:
        result = await c.call_tool("web_search", {"query": "retail"})
        assert error_code(result) == "SEARCH_NOT_CONFIGURED" and "tavily.api_key" in text_of(result)


@pytest.mark.slow  # timed: a 429 is retried after its 1 s Retry-After; three servers start (~6 s)
async def test_brave_tavily_and_duckduckgo_answer_through_one_interface(tmp_path: Path, web: WebServer) -> None:
    env = _env(
        web, BA_MCP_WEB__SEARCH__BRAVE__API_KEY="good-key", BA_MCP_WEB__SEARCH__BRAVE__ENDPOINT=web.url("/brave")
    )
    del env["BA_MCP_WEB__SEARCH__SEARXNG__URL"]  # auto: Brave, since its key is set
    async with in_process(tmp_path / "b", ["web_search"], **env) as c:
        result = await c.call_tool("web_search", {"query": "retail", "num_results": 3})
        assert "web search (brave)" in text_of(result) and "Snippet number 2" in text_of(result)
    env = _env(
        web, BA_MCP_WEB__SEARCH__TAVILY__API_KEY="good-key", BA_MCP_WEB__SEARCH__TAVILY__ENDPOINT=web.url("/tavily")
    )
    del env["BA_MCP_WEB__SEARCH__SEARXNG__URL"]
    async with in_process(tmp_path / "t", ["web_search"], **env) as c:
        result = await c.call_tool("web_search", {"query": "ratelimited", "num_results": 2})
        assert not result.is_error and "web search (tavily)" in text_of(result)  # the 429 was retried after 1 s
    env = _env(web, BA_MCP_WEB__SEARCH__DUCKDUCKGO__ENDPOINT=web.url("/ddg"))
    del env["BA_MCP_WEB__SEARCH__SEARXNG__URL"]  # auto with nothing configured: DuckDuckGo
    async with in_process(tmp_path / "d", ["web_search"], **env) as c:
        result = await c.call_tool("web_search", {"query": "retail"})
        text = text_of(result)
        assert "web search (duckduckgo)" in text and "https://example.org/retail" in text
        assert "Retail trends 2026" in text and "ads.example" not in text


async def test_search_results_are_cached_per_provider_query_and_count(client: Client, web: WebServer) -> None:
    before = web.paths.count("/searxng/search?q=cached&format=json&pageno=1")
    for _ in range(3):
        await client.call_tool("web_search", {"query": "cached", "num_results": 3})
    assert sum(p.startswith("/searxng/search?q=cached") for p in web.paths) - max(before, 0) == 1


async def test_both_tools_are_read_only_and_open_world(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in ("web_search", "web_reader"):
        ann = tools[name].annotations
        assert ann is not None and ann.read_only_hint is True and ann.open_world_hint is True


@pytest.mark.slow
def test_a_public_page_is_read_and_its_redirect_to_loopback_refused_in_a_namespace() -> None:
    """The honest version of "public origin redirects to an internal address": in a network namespace of the
    test's own (only lo, with 8.8.8.8 on it), under the shipped address rule."""
    import json
    import shutil
    import subprocess
    import sys

    if not (shutil.which("unshare") and shutil.which("ip")):
        pytest.skip("unshare and ip are needed for a network namespace")
    probe = Path(__file__).with_name("web_namespace_probe.py")
    proc = subprocess.run(["unshare", "-n", sys.executable, str(probe)], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0 and "unshare failed" in proc.stderr:
        pytest.skip(f"no permission for a network namespace here: {proc.stderr.strip()[:200]}")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not out["page"]["error"] and "quarterly revenue" in out["page"]["text"], out["page"]
    for url, text in out["private"].items():  # refused inside the namespace: nothing could leave anyway
        assert "URL_REFUSED" in text, (url, text)
    for hop in ("hop", "hop_name"):
        assert out[hop]["error"] and "URL_REFUSED" in out[hop]["text"], out[hop]
    assert out["loopback_hits"] == 0


@pytest.mark.slow  # a server or command-line process of its own: the slow tier (the fast tier stays in process)
async def test_both_tools_over_stdio_at_every_level(tmp_path: Path, web: WebServer) -> None:
    from mcp import ClientSession, stdio_client

    from tests.conftest import stdio_params

    async with stdio_client(stdio_params(tmp_path, **_env(web))) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        for level in ("brief", "standard", "full"):
            page = await s.call_tool("web_reader", {"url": web.url("/article"), "output_level": level})
            assert text_of(page).startswith(f"web_reader: document ({level})") and "Quarterly sales review" in text_of(
                page
            )
            hits = await s.call_tool("web_search", {"query": "retail", "num_results": 3, "output_level": level})
            assert text_of(hits).startswith(f"web_search: table ({level})") and "https://example.com/2" in text_of(hits)


@pytest.mark.slow  # a server or command-line process of its own: the slow tier (the fast tier stays in process)
def test_doctor_reports_the_search_provider_and_whether_it_answers(tmp_path: Path, web: WebServer) -> None:
    from tests.conftest import ba

    env = {"BA_MCP_WEB__SEARCH__SEARXNG__URL": web.url("/searxng")}
    # Issue 22 item 9: without --network nothing outside the machine is contacted, and doctor says so.
    before = web.hits
    out = ba("doctor", workspace=tmp_path, env=env)
    assert re.search(r"ok\s+web search\s+searxng configured; not contacted", out.stdout), out.stdout
    assert web.hits == before
    out = ba("doctor", "--network", workspace=tmp_path, env=env)
    assert re.search(r"ok\s+web search\s+searxng answers \(1 result", out.stdout), out.stdout
    assert web.hits > before
