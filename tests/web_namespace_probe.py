"""Run inside a fresh network namespace (``unshare -n``) by test_web.py: a "public" address (8.8.8.8) put on
the namespace's own loopback interface serves a page and a redirect to 127.0.0.1; web_reader with the
shipped address rule must read the public page and refuse the redirect hop before connecting to loopback.
Nothing here can leave the namespace: it has no interface but lo."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


PRIVATE = [
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/latest/meta-data/",
    "http://100.100.100.200/latest/meta-data/",
    "http://10.0.0.1/",
    "http://172.16.5.4/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://224.0.0.1/",
    "http://255.255.255.255/",
    "http://240.0.0.1/",
    "http://[fe80::1]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[2002:a9fe:a9fe::]/",
    "file:///etc/passwd",
    "ftp://example.com/x",
    "gopher://127.0.0.1:70/",
]


def main() -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    subprocess.run(["ip", "addr", "add", "8.8.8.8/32", "dev", "lo"], check=True)
    hits = {"loopback": 0}

    class Public(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.path == "/robots.txt":
                body, status, extra = b"User-agent: *\nAllow: /\n", 200, {}
            elif self.path == "/hop":
                body, status, extra = b"", 302, {"Location": f"http://127.0.0.1:{inner.server_address[1]}/secret"}
            elif self.path == "/hop-name":
                body, status, extra = b"", 302, {"Location": f"http://localhost:{inner.server_address[1]}/secret"}
            else:
                body = (
                    b"<html><head><title>Public page</title></head><body><article><h1>Public page</h1><p>"
                    + (b"This public page talks about quarterly revenue and regional growth in some detail. " * 5)
                    + b"</p></article></body></html>"
                )
                status, extra = 200, {}
            self.send_response(status)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            for k, v in extra.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

    class Inner(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def do_GET(self) -> None:
            hits["loopback"] += 1
            self.send_response(200)
            self.send_header("Content-Length", "6")
            self.end_headers()
            self.wfile.write(b"secret")

    public = ThreadingHTTPServer(("8.8.8.8", 80), Public)
    inner = ThreadingHTTPServer(("127.0.0.1", 0), Inner)
    for server in (public, inner):
        threading.Thread(target=server.serve_forever, daemon=True).start()

    from mcp import Client

    from ba_mcp.app import App
    from ba_mcp.server import build_server
    from ba_mcp.settings import load_settings

    async def run() -> dict[str, object]:
        settings = load_settings(workspace=Path(tempfile.mkdtemp()), environ={"BA_MCP_WEB__TIMEOUT_S": "5"})
        out: dict[str, object] = {}
        async with Client(build_server(App(settings, ["web_reader"]))) as c:
            for name, url in (
                ("page", "http://8.8.8.8/page"),
                ("hop", "http://8.8.8.8/hop"),
                ("hop_name", "http://8.8.8.8/hop-name"),
            ):
                result = await c.call_tool("web_reader", {"url": url})
                out[name] = {"error": result.is_error, "text": result.content[0].text}
            out["private"] = {}
            for url in PRIVATE:
                result = await c.call_tool("web_reader", {"url": url})
                out["private"][url] = result.content[0].text  # type: ignore[index]
        out["loopback_hits"] = hits["loopback"]
        return out

    print(json.dumps(asyncio.run(run())))


if __name__ == "__main__":
    main()
