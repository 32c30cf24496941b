"""A real HTTP server on 127.0.0.1 for the web tools' tests: pages, data files, hostile answers, and fake
search providers (SearXNG, Brave, Tavily, DuckDuckGo's HTML page). It counts every request it gets, so a
test can prove that a refused URL never reached it."""

from __future__ import annotations

import functools
import gzip
import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

ARTICLE = """<!doctype html><html><head><title>Quarterly sales review</title></head><body>
<nav><a href="/">Home</a> | <a href="/products">Products</a> | <a href="/about">About us</a></nav>
<div class="cookie-banner" id="cookie-consent">We use cookies. <button>Accept all cookies</button></div>
<main><article>
<h1>Quarterly sales review</h1>
<p>Revenue in the third quarter grew by twelve percent against the same quarter of last year, driven by
the furniture category and a strong month in the northern region. Margins held steady despite higher
freight costs, and the share of online orders rose again.</p>
<h2>Revenue by region</h2>
<table><tr><th>Region</th><th>Revenue</th></tr><tr><td>North</td><td>1,200</td></tr>
<tr><td>South</td><td>950</td></tr></table>
<p>The full methodology is described in the <a href="https://example.com/method">methods note</a>, which
explains how returns and discounts were treated in the quarter's figures.</p>
</article></main>
<footer>Copyright 2026 Example Corp. All rights reserved. Privacy policy. Terms of use.</footer>
</body></html>"""

JS_ONLY = """<!doctype html><html><head><title>App</title><script src="/app.js"></script></head>
<body><div id="root"></div><script>window.render()</script><noscript>Enable JavaScript</noscript></body></html>"""

CSV = "region,month,revenue\n" + "\n".join(
    f"{r},2025-{m:02d},{100 + m * 7}" for r in ("North", "South") for m in range(1, 13)
)
LONG_TEXT = "".join(
    f"Paragraph {i}: " + "the quick brown fox jumps over the lazy dog. " * 8 + "\n\n" for i in range(400)
)

DDG = """<html><body>
<div class="result results_links results_links_deep web-result result--ad"><a class="result__a" href="https://ads.example/x">Ad</a></div>
<div class="result results_links results_links_deep web-result"><h2 class="result__title">
<a rel="nofollow" class="result__a"
 href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.org%2Fretail&amp;rut=x">Retail <b>trends</b> 2026</a></h2>
<a class="result__snippet" href="#">Retail sales grew in <b>2026</b>, led by online.</a></div>
<div class="result results_links web-result"><h2 class="result__title">
<a class="result__a" href="https://example.net/report">Market report</a></h2>
<a class="result__snippet">Quarterly market report.</a></div>
</body></html>"""


def _hits(n: int) -> list[dict[str, Any]]:
    return [
        {
            "title": f"Result {i}",
            "url": f"https://example.com/{i}",
            "content": f"Snippet number {i} about retail.",
            "publishedDate": f"2026-0{1 + i % 9}-01",
            "engine": "fake",
            "score": 1.0 / (i + 1),
        }
        for i in range(n)
    ]


class WebServer:
    """Start with ``with WebServer() as web``; ``web.url(path)``; ``web.hits`` counts requests."""

    def __init__(self) -> None:
        self.hits = 0
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.do_GET()

            def do_GET(self) -> None:
                with outer.lock:
                    outer.hits += 1
                    outer.paths.append(self.path)
                    outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                try:
                    outer.route(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]

    def __enter__(self) -> WebServer:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def route(self, h: BaseHTTPRequestHandler) -> None:
        parsed = urlparse(h.path)
        path, query = parsed.path, parse_qs(parsed.query)
        length = int(h.headers.get("content-length") or 0)
        body = h.rfile.read(length) if length else b""

        def send(status: int, data: bytes | str, ctype: str = "text/html; charset=utf-8", **headers: str) -> None:
            raw = data.encode() if isinstance(data, str) else data
            h.send_response(status)
            h.send_header("Content-Type", ctype)
            h.send_header("Content-Length", str(len(raw)))
            for k, v in headers.items():
                h.send_header(k.replace("_", "-"), v)
            h.end_headers()
            h.wfile.write(raw)

        if path == "/robots.txt":
            return send(200, "User-agent: *\nDisallow: /private\n", "text/plain")
        if path == "/article":
            return send(200, ARTICLE)
        if path == "/article.gz":
            return send(200, gzip.compress(ARTICLE.encode()), Content_Encoding="gzip")
        if path == "/js":
            return send(200, JS_ONLY)
        if path == "/long.txt":
            return send(200, LONG_TEXT, "text/plain; charset=utf-8")
        if path == "/data.json":
            return send(200, json.dumps({"kpi": "revenue", "values": [1, 2, 3]}), "application/json")
        if path == "/sales.csv":
            return send(200, CSV, "text/csv")
        if path == "/export":  # a data file served as octet-stream, named by its URL
            return send(200, CSV, "application/octet-stream")
        if path == "/report.pdf":
            return send(200, pdf_bytes("Revenue grew twelve percent in the quarter"), "application/pdf")
        if path == "/logo.png":
            return send(200, b"\x89PNG\r\n\x1a\n" + bytes(200), "image/png")
        if path == "/private/page":
            return send(200, "secret")
        if path == "/ua":
            return send(200, h.headers.get("User-Agent", ""), "text/plain")
        if path == "/huge":
            return send(200, "<html><body><p>" + "word " * 100_000 + "</p></body></html>")
        if path == "/huge.csv":
            return send(200, "a,b\n" + "1,2\n" * 100_000, "text/csv")
        if path == "/huge-nolength":  # close-delimited body, no Content-Length
            h.send_response(200)
            h.send_header("Content-Type", "text/plain")
            h.send_header("Connection", "close")
            h.end_headers()
            for _ in range(200):
                h.wfile.write(b"x" * 10_000)
            h.close_connection = True
            return None
        if path == "/slow":
            time.sleep(float(query.get("s", ["5"])[0]))
            return send(200, "late")
        if path == "/drip":  # headers at once, then a byte every 0.1 s: no single read times out
            h.send_response(200)
            h.send_header("Content-Type", "text/plain")
            h.send_header("Content-Length", "60")
            h.end_headers()
            for _ in range(60):
                h.wfile.write(b"x")
                h.wfile.flush()
                time.sleep(0.1)
            return None
        if path.startswith("/r/"):
            n = int(path.rsplit("/", 1)[1])
            return send(302, "", Location="/article" if n <= 1 else f"/r/{n - 1}")
        if path == "/tofile":
            return send(302, "", Location="file:///etc/passwd")
        # fake search providers
        if path == "/searxng/search":
            if query.get("format") != ["json"]:
                return send(403, "json not enabled")
            q = query.get("q", [""])[0]
            if q == "boom":
                return send(500, "internal error")
            if q == "slowdown":
                return send(429, "too many", "text/plain", Retry_After="30")
            return send(200, json.dumps({"query": q, "results": _hits(25)}), "application/json")
        if path == "/brave":
            if h.headers.get("X-Subscription-Token") != "good-key":
                return send(401, json.dumps({"error": "bad key"}), "application/json")
            n = int(query.get("count", ["10"])[0])
            web = [
                {"title": x["title"], "url": x["url"], "description": x["content"], "age": "2 days"} for x in _hits(n)
            ]
            return send(200, json.dumps({"web": {"results": web}}), "application/json")
        if path == "/tavily":
            payload = json.loads(body or b"{}")
            if h.headers.get("Authorization") != "Bearer good-key":
                return send(401, "unauthorized")
            with self.lock:
                self.tavily_calls = getattr(self, "tavily_calls", 0) + 1
                first = self.tavily_calls == 1
            if payload.get("query") == "ratelimited" and first:
                return send(429, "slow down", "text/plain", Retry_After="1")
            n = int(payload.get("max_results", 5))
            results = [{"title": x["title"], "url": x["url"], "content": x["content"], "score": 0.5} for x in _hits(n)]
            return send(200, json.dumps({"query": payload.get("query"), "results": results}), "application/json")
        if path == "/ddg":
            return send(200, DDG)
        return send(404, "not found")


@functools.cache
def pdf_bytes(text: str) -> bytes:
    """A one-page PDF with ``text`` in its text layer (pypdf's own writer; no fixture file needed)."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    page = writer.add_blank_page(width=300, height=200)
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
    )
    stream = DecodedStreamObject()
    stream.set_data(f"BT /F1 12 Tf 20 100 Td ({text}) Tj ET".encode())
    page[NameObject("/Contents")] = writer._add_object(stream)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
