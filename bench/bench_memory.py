"""P-8: memory of the server process alone — idle (after the background warm-up) and after one call of
each tool — with the sandbox's processes reported separately, against a hello-world MCPServer idle.

Run: uv run python bench/bench_memory.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import psutil
from common import ROOT, call, env_for, initialize, python, spawn

MB = 1024 * 1024


def rss(pid: int) -> tuple[float, list[float]]:
    proc = psutil.Process(pid)
    return proc.memory_info().rss / MB, [c.memory_info().rss / MB for c in proc.children(recursive=True)]


def main() -> None:
    ws = Path(tempfile.mkdtemp(prefix="ba-bench-"))
    (ws / "uploads").mkdir(parents=True)
    (ws / "uploads" / "sales_2025.csv").write_bytes((ROOT / "ba_mcp" / "samples" / "sales_2025.csv").read_bytes())
    env = env_for(ws)

    hello = spawn([python(), str(ROOT / "bench" / "hello_server.py")], env)
    initialize(hello)
    time.sleep(2)
    ref, _ = rss(hello.pid)
    hello.kill()
    hello.wait()

    server = spawn([python(), "-m", "ba_mcp"], env)
    initialize(server)
    time.sleep(4)  # the spare worker has started and the warm-up has finished
    idle, workers_idle = rss(server.pid)
    for i, (tool, args) in enumerate(
        [
            ("file_reader", {"path": "upload_sales_2025"}),
            ("query_database", {"query": "SELECT status, count(*) FROM orders GROUP BY 1"}),
            ("run_python", {"code": "print(1)"}),
        ],
        start=2,
    ):
        _, reply = call(server, i, tool, args)
        assert not reply["result"].get("isError"), reply
    time.sleep(1)
    busy, workers_busy = rss(server.pid)
    assert server.stdin is not None
    server.stdin.close()
    server.wait(10)

    print(f"P-8 server process idle: {idle:.0f} MB RSS (hello-world idle {ref:.0f} MB)  target <= 150 MB")
    print(f"P-8 server process after one call of each tool: {busy:.0f} MB RSS  target <= 150 MB")
    print(
        "    sandbox processes, separately: idle "
        + ", ".join(f"{m:.0f}" for m in workers_idle)
        + " MB; after the calls "
        + ", ".join(f"{m:.0f}" for m in workers_busy)
        + " MB (shims and workers)"
    )


if __name__ == "__main__":
    main()
