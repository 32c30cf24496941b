"""Issue 63 item 3: the calls and tokens a model needs before its first right query on a big catalog, before and
after query_database's ``search``; how fast the overview is read.

The catalog is tests/big_catalog.py's (169 relations in seven schemas — AdventureWorks-like tables with comments
and keys, alias views, a ``PARTITION BY RANGE`` table, a Pagila-style ``INHERITS`` parent) on a real local
PostgreSQL started like the tests' one. The question: "purchase orders by vendor" (the vendors with the most purchase
orders). Each path is what a model reads, call by call, over stdio as a host gets it (the text blocks Claude Desktop
shows; cl100k tokens):

* before, tools only (Claude Desktop's model cannot read resources): list the relations from information_schema
  (at ``full``, or it sees a preview only), read the columns of the two tables it picked, then the query;
* before, with resources (Claude Code): db://aw/schema (the whole overview), then the query;
* after: query_database(search="purchase orders by vendor"), then the query.

Then the overview's read: the first (the server fresh: a connection worker starts, connects and checks the role),
once connected, and kept (a minute).

Run: uv run python bench/bench_catalog.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT, call, env_for, initialize, python, request, spawn

sys.path.insert(0, str(ROOT))
from ba_mcp.pipeline.tokens import TokenCounter
from ba_mcp.settings import config_dir
from tests.big_catalog import make_catalog, relations
from tests.pg_server import postgres

RIGHT = (
    "SELECT v.name, count(*) AS orders FROM purchasing.purchaseorderheader h JOIN purchasing.vendor v "
    "ON v.businessentityid = h.vendorid GROUP BY v.name ORDER BY orders DESC LIMIT 10"
)
TABLES = (
    "SELECT table_schema, table_name, table_type FROM information_schema.tables "
    "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2"
)
COLUMNS = (
    "SELECT table_schema, table_name, column_name, data_type FROM information_schema.columns "
    "WHERE table_schema = 'purchasing' AND table_name IN ('purchaseorderheader', 'vendor') "
    "ORDER BY 1, 2, ordinal_position"
)


def text(reply: dict[str, Any]) -> str:
    result = reply["result"]
    if "contents" in result:
        return "\n".join(c.get("text", "") for c in result["contents"])
    assert not result.get("isError"), result
    return "\n".join(b.get("text", "") for b in result["content"] if b.get("type") == "text")


def main() -> None:
    counter = TokenCounter(config_dir() / "token_encoders.yaml", "claude")
    with postgres() as pg:
        make_catalog(pg)
        print(f"catalog: {relations(pg)} relations (tables, partitions, views) in 7 schemas")
        ws = Path(tempfile.mkdtemp(prefix="ba-bench-catalog-"))
        env = env_for(ws, BA_MCP_DATABASES__AW__URL=pg.url("analyst", "bigcat"), BA_MCP_ENGINE__SPARE_WORKERS="0")
        proc = spawn([python(), "-m", "ba_mcp"], env)
        try:
            initialize(proc)
            ids = iter(range(10, 10_000))

            def resource(uri: str) -> tuple[float, str]:
                started = time.perf_counter()
                reply = request(
                    proc, {"jsonrpc": "2.0", "id": next(ids), "method": "resources/read", "params": {"uri": uri}}
                )
                return time.perf_counter() - started, text(reply)

            def tool(arguments: dict[str, Any]) -> str:
                _, reply = call(proc, next(ids), "query_database", {"database": "aw", **arguments})
                return text(reply)

            cold, overview = resource("db://aw/schema")
            warm_started = time.perf_counter()
            tool({"query": "SELECT 1"})
            connected_call = time.perf_counter() - warm_started
            time.sleep(61)  # past the catalog's minute: read again on the connection now made
            warm, _ = resource("db://aw/schema")
            kept, _ = resource("db://aw/schema")
            print(
                f"db://aw/schema: first read {cold:.2f} s (server fresh: a connection worker started, connected, "
                f"role checked, catalog read); on a connection made {warm:.2f} s; kept {kept * 1000:.0f} ms; "
                f"a call on the connection made {connected_call * 1000:.0f} ms"
            )

            right = tool({"query": RIGHT})
            paths = {
                "before, tools only (information_schema)": [
                    tool({"query": TABLES, "output_level": "full"}),
                    tool({"query": COLUMNS, "output_level": "full"}),
                    right,
                ],
                "before, resources (db://aw/schema whole)": [overview, right],
                "after (query_database search)": [tool({"search": "purchase orders by vendor"}), right],
            }
            print(f"{'path':<44} {'calls':>5} {'tokens before the query':>24} {'with it':>8}")
            for name, reads in paths.items():
                before = sum(counter.raw_tokens(r) for r in reads[:-1])
                print(f"{name:<44} {len(reads):>5} {before:>24,} {before + counter.raw_tokens(reads[-1]):>8,}")
        finally:
            proc.kill()


if __name__ == "__main__":
    main()
