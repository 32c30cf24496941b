"""Metrics (docs/metrics.md): compile time of a metrics query, and what a query_metrics result costs the model.

* compile: a three-dataset query of the demo's metrics (net revenue and orders by region and segment: order
  lines, orders, customers, regions) compiled in this process (median of 200, after a warm-up), and the same
  through an engine worker as the tool does it (the round trip included; the model is read once per worker).
  Target: <= 20 ms.
* tokens: the observation of query_metrics and of query_database running the same numbers by hand-written SQL,
  at each level (cl100k), alone and with the call's arguments (what the model writes: names, or the SQL).
  Target: query_metrics <= query_database at the same level. And metrics://catalog for
  the demo file (target <= 400 at brief).

    uv run python bench/bench_metrics.py
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client

from ba_mcp.app import App
from ba_mcp.metrics.catalog import DEMO_FILE
from ba_mcp.metrics.compile import Query, compile_query
from ba_mcp.metrics.load import load_model
from ba_mcp.pipeline.tokens import TokenCounter
from ba_mcp.server import build_server
from ba_mcp.settings import config_dir, load_settings
from ba_mcp.tool import ToolContext
from ba_mcp.workers.work import ask_metrics

QUERY = Query(metrics=["net_revenue", "order_count"], dimensions=["regions.region", "customers.segment"])
SQL = """SELECT r.region_name AS region, c.segment, f.net_revenue, f.order_count FROM (
  SELECT o.customer_id, sum(round(l.quantity * l.unit_price * (1 - l.discount), 2)) AS net_revenue,
         count(DISTINCT o.order_id) AS order_count
  FROM orders o JOIN order_lines l USING (order_id) WHERE o.status = 'completed' GROUP BY o.customer_id) f
JOIN customers c USING (customer_id) LEFT JOIN regions r USING (region_id)"""
HAND = f"""SELECT region, segment, sum(net_revenue) AS net_revenue, sum(order_count) AS order_count
FROM ({SQL}) GROUP BY region, segment ORDER BY region NULLS LAST, segment NULLS LAST"""


def compile_ms() -> tuple[float, float]:
    model = load_model([("demo", DEMO_FILE.read_text())], {"demo": "duckdb"})
    compile_query(model, QUERY)
    times = []
    for _ in range(200):
        start = time.perf_counter()
        compile_query(model, QUERY)
        times.append(time.perf_counter() - start)
    app = App(load_settings(environ={}, workspace=Path(tempfile.mkdtemp(prefix="ba-bench-"))))
    try:
        ctx = ToolContext(session="default")
        request = app.metrics.request("compile", query=QUERY.__dict__)
        ask_metrics(app.duck_workers, ctx, "default", request)  # the worker reads the model once
        worker = []
        for _ in range(50):
            start = time.perf_counter()
            ask_metrics(app.duck_workers, ctx, "default", request)
            worker.append(time.perf_counter() - start)
    finally:
        app.close()
    return statistics.median(times) * 1000, statistics.median(worker) * 1000


def tokens() -> tuple[dict[str, tuple[int, int, int, int]], int]:
    counter = TokenCounter(config_dir() / "token_encoders.yaml", "claude")

    async def observe() -> tuple[dict[str, tuple[int, int, int, int]], int]:
        app = App(load_settings(environ={}, workspace=Path(tempfile.mkdtemp(prefix="ba-bench-"))))
        out: dict[str, tuple[int, int, int, int]] = {}
        async with Client(build_server(app)) as client:
            for level in ("brief", "standard", "full"):
                args = {"metrics": QUERY.metrics, "dimensions": QUERY.dimensions, "output_level": level}
                metrics = await client.call_tool("query_metrics", args)
                sql = await client.call_tool("query_database", {"query": HAND, "output_level": level})
                texts = ["\n".join(b.text for b in r.content if b.type == "text") for r in (metrics, sql)]
                assert not metrics.is_error and not sql.is_error, texts
                written = [json.dumps(a) for a in (args, {"query": HAND, "output_level": level})]
                out[level] = (
                    counter.raw_tokens(texts[0]),
                    counter.raw_tokens(texts[1]),
                    counter.raw_tokens(written[0]),
                    counter.raw_tokens(written[1]),
                )
            catalog = await client.read_resource("metrics://catalog")
            catalog_tokens = counter.raw_tokens(catalog.contents[0].text)  # type: ignore[union-attr]
        return out, catalog_tokens

    return anyio.run(observe)


def main() -> None:
    local, worker = compile_ms()
    print(
        f"compile of a 3-dataset metrics query: {local:.1f} ms in process, {worker:.1f} ms through an engine "
        "worker (target <= 20 ms)"
    )
    per_level, catalog = tokens()
    for level, (metrics, sql, asked, written) in per_level.items():
        print(
            f"tokens at {level:<8}: observation: query_metrics {metrics:>4}, query_database (same numbers) {sql:>4} "
            f"({metrics / sql:.2f}x); with the call's arguments the model writes: {metrics + asked:>4} vs "
            f"{sql + written:>4} ({(metrics + asked) / (sql + written):.2f}x)"
        )
    print(f"metrics://catalog (demo file): {catalog} tokens cl100k (target <= 400)")


if __name__ == "__main__":
    main()
