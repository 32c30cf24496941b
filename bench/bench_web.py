"""P-9: web_reader on a 200 kB local page: p50 of the stdio MCP round trip (a fresh download each call: the
URL changes, so neither the page cache nor the raw-result cache answers) vs, as docs/requirements.md defines the
reference, a bare httpx GET of the same page plus the same extraction (``web.extract.html_to_markdown``) in
this process — interleaved, same run. Target ≤ 2 ×.

Run: uv run python bench/bench_web.py [--runs 30]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx2 as httpx
from common import ROOT, call, env_for, initialize, p50, python, report, spawn

sys.path.insert(0, str(ROOT))
from ba_mcp.web.extract import html_to_markdown

PARAGRAPH = "<p>Revenue in the quarter grew in every region, led by furniture and a strong online channel. </p>\n"
PAGE = (
    "<html><head><title>Benchmark page</title></head><body><nav>Home | About</nav><article><h1>Report</h1>"
    + PARAGRAPH * (200_000 // len(PARAGRAPH))
    + "</article><footer>Copyright</footer></body></html>"
).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a: object) -> None:
        pass

    def do_GET(self) -> None:
        body = b"User-agent: *\nAllow: /\n" if self.path == "/robots.txt" else PAGE
        self.send_response(200)
        self.send_header("Content-Type", "text/plain" if self.path == "/robots.txt" else "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    ws = Path(tempfile.mkdtemp(prefix="ba-bench-"))
    proc = spawn([python(), "-m", "ba_mcp"], env_for(ws, BA_MCP_WEB__ALLOW_PRIVATE_NETWORKS="true"))
    initialize(proc)
    call(proc, 1, "web_reader", {"url": f"{base}/warm"})  # imports trafilatura once
    ours, ref = [], []
    with httpx.Client() as client:
        for i in range(runs):
            started = time.perf_counter()
            response = client.get(f"{base}/page{i}")
            response.raise_for_status()
            html_to_markdown(response.text, f"{base}/page{i}")
            ref.append(time.perf_counter() - started)
            elapsed, reply = call(proc, 10 + i, "web_reader", {"url": f"{base}/page{i}"})
            assert not reply["result"].get("isError"), reply
            ours.append(elapsed)
    proc.kill()
    proc.wait()
    report(
        f"P-9 web_reader, {len(PAGE) // 1000} kB page over stdio vs httpx GET + extraction (p50)",
        p50(ours) * 1000,
        p50(ref) * 1000,
        "ms",
        "<= 2 x",
    )


if __name__ == "__main__":
    sys.exit(main())
