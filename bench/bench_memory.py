"""P-8: memory of the server process alone — idle (after the background warm-up) and after one call of
each tool and one query on each kind of source (the demo database, a workspace CSV, a table artifact, a
configured DuckDB file) — with the worker processes (engine and Python sandbox) reported separately, against
a hello-world MCPServer idle, and the same hello-world holding the libraries ba-mcp's server must (pyarrow's core,
the token vocabulary: P-8's floor with none of ba-mcp's code). The web tools read a page and
search through a local fake on 127.0.0.1.

Run: uv run python bench/bench_memory.py [--calls 1000] [--against <python of another checkout>]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import psutil
from common import AGAINST_HELP, ROOT, call, env_for, initialize, python, servers, spawn

sys.path.insert(0, str(ROOT))
from tests.web_fixtures import WebServer

MB = 1024 * 1024


def rss(pid: int) -> tuple[float, list[float]]:
    proc = psutil.Process(pid)
    return proc.memory_info().rss / MB, [c.memory_info().rss / MB for c in proc.children(recursive=True)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=0, help="then this many mixed calls, RSS every 250")
    parser.add_argument("--against", help=AGAINST_HELP)
    args = parser.parse_args()
    calls = args.calls
    ws = Path(tempfile.mkdtemp(prefix="ba-bench-"))
    (ws / "uploads").mkdir(parents=True)
    (ws / "uploads" / "sales_2025.csv").write_bytes((ROOT / "ba_mcp" / "samples" / "sales_2025.csv").read_bytes())
    configured = ws / "sales.duckdb"
    con = duckdb.connect(str(configured))
    con.execute("CREATE TABLE t AS SELECT range AS id, range % 7 AS g FROM range(100000)")
    con.close()
    web = WebServer().__enter__()
    env = env_for(
        ws,
        BA_MCP_DATABASES__SALES__PATH=str(configured),
        BA_MCP_WEB__ALLOW_PRIVATE_NETWORKS="true",
        BA_MCP_WEB__SEARCH__SEARXNG__URL=web.url("/searxng"),
        BA_MCP_WEB__SEARCH__MIN_INTERVAL_S="0",
    )

    hello = spawn([python(), str(ROOT / "bench" / "hello_server.py")], env)
    initialize(hello)
    time.sleep(2)
    ref, _ = rss(hello.pid)
    hello.kill()
    hello.wait()
    # the floor: the same hello-world holding what ba-mcp's server must hold (pyarrow's core, the token vocabulary),
    # each used once
    floor = spawn([python(), str(ROOT / "bench" / "hello_server.py"), "--with-libraries"], env)
    initialize(floor)
    call(floor, 2, "hello", {"name": "floor"})
    time.sleep(1)
    with_libraries, _ = rss(floor.pid)
    floor.kill()
    floor.wait()
    print(
        f"P-8 reference: hello-world MCPServer {ref:.0f} MB; the same with pyarrow's core (Arrow IPC; no numpy) and "
        f"the token vocabulary loaded and used once: {with_libraries:.0f} MB"
    )

    for name, (command, cwd) in servers(args.against).items():
        measure(name, command, cwd, env, web, calls, ref)
    web.__exit__(None, None, None)


def measure(name: str, command: list[str], cwd: Path, env: dict[str, str], web: Any, calls: int, ref: float) -> None:
    """One server: idle, after one call of each tool, over ``calls`` mixed calls; printed."""
    server = spawn(command, env, cwd)
    initialize(server)
    time.sleep(4)  # the spare worker has started and the warm-up has finished
    idle, workers_idle = rss(server.pid)
    _, big = call(server, 2, "query_database", {"query": "SELECT * FROM order_lines", "max_rows": 10})
    artifact = re.search(r"artifact_[0-9a-f]{12}", json.dumps(big)).group(0)  # type: ignore[union-attr]
    for i, (tool, args) in enumerate(
        [
            ("file_reader", {"path": "upload_sales_2025"}),
            ("query_database", {"query": "SELECT status, count(*) FROM orders GROUP BY 1"}),
            ("query_database", {"query": "SELECT count(*) FROM 'uploads/sales_2025.csv'"}),
            ("query_database", {"query": f"SELECT count(*) FROM {artifact}"}),
            ("query_database", {"database": "sales", "query": "SELECT g, count(*) FROM t GROUP BY 1"}),
            ("run_python", {"code": "print(1)"}),
            # a DataFrame over the budget: a table artifact written from the server's memory
            ("run_python", {"code": "import pandas as pd\npd.DataFrame({'n': range(3000), 'k': ['a', 'b'] * 1500})"}),
            ("query_metrics", {"metrics": ["net_revenue", "order_count"], "dimensions": ["regions.region"]}),
            ("use_skill", {"name": "rfm-segmentation"}),
            ("web_reader", {"url": web.url("/article")}),
            ("web_search", {"query": "quarterly sales"}),
            (
                "save_analysis",
                {"name": "bench", "steps": ["last:9"], "overwrite": True},
            ),  # every call above but the web's and the skill's
            ("run_analysis", {"name": "bench"}),
            ("file_reader", {"path": artifact, "offset": 100, "nrows": 20}),  # a page of a stored table
        ],
        start=3,
    ):
        _, reply = call(server, i, tool, args)
        assert not reply["result"].get("isError"), reply
    time.sleep(1)
    busy, workers_busy = rss(server.pid)
    rollup = dict(
        (line.split(":")[0], int(line.split()[1]) / 1024)
        for line in Path(f"/proc/{server.pid}/smaps_rollup").read_text().splitlines()[1:]
        if line.split()[-1] == "kB"
    )
    by_file: dict[str, float] = {}
    for m in psutil.Process(server.pid).memory_maps():
        by_file[Path(m.path).name or m.path] = by_file.get(Path(m.path).name or m.path, 0) + m.rss / MB
    loaded = sorted(
        {
            m.path.split("site-packages/")[1].split("/")[0]
            for m in psutil.Process(server.pid).memory_maps()
            if "site-packages/" in m.path
        }
    )
    flat: list[tuple[int, float]] = [(0, busy)]
    for n in range(1, calls + 1):  # mixed calls, each different (no cached answer), RSS every 250
        tool, args = [
            ("query_database", {"query": f"SELECT status, count(*) + {n} AS n FROM orders GROUP BY 1"}),
            ("query_database", {"query": f"SELECT * FROM 'uploads/sales_2025.csv' LIMIT {n % 97 + 20}"}),
            ("file_reader", {"path": "upload_sales_2025", "offset": n % 50, "nrows": 20}),
            ("run_python", {"code": f"print(sum(range({n})))"}),
            ("query_database", {"database": "sales", "query": f"SELECT g, sum(id) FROM t WHERE id > {n} GROUP BY 1"}),
            ("web_reader", {"url": web.url("/article") + f"?n={n}"}),
        ][n % 6]
        _, reply = call(server, 1000 + n, tool, args)
        assert not reply["result"].get("isError"), reply
        if n % 250 == 0:
            flat.append((n, rss(server.pid)[0]))
    assert server.stdin is not None
    server.stdin.close()
    server.wait(10)

    print(f"P-8 {name} server process idle: {idle:.0f} MB RSS (hello-world idle {ref:.0f} MB)")
    print(f"P-8 {name} server process after one call of each tool: {busy:.0f} MB RSS  target <= 120 MB")
    print("    native libraries in the server process: " + ", ".join(loaded))
    print(
        f"    of it: anonymous {rollup.get('Anonymous', 0):.0f} MB, "
        f"files {rollup.get('Rss', 0) - rollup.get('Anonymous', 0):.0f}"
        " MB; largest: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(by_file.items(), key=lambda kv: -kv[1])[:8])
    )
    if calls:
        print(
            f"P-8 {name} server RSS over mixed calls: "
            + ", ".join(f"{n}: {mb:.0f} MB" for n, mb in flat)
            + "  target: flat"
        )
    print(
        "    worker processes (engine and sandbox), separately: idle "
        + ", ".join(f"{m:.0f}" for m in workers_idle)
        + " MB; after the calls "
        + ", ".join(f"{m:.0f}" for m in workers_busy)
        + " MB (shims and workers)"
    )


if __name__ == "__main__":
    main()
