"""P-4: file_reader nrows=100 on a 1 GB CSV through a stdio session: time and server RSS growth.

Reference (same run): the same call on a 1 MB CSV. The 1 GB file is generated once into bench/.data/.
Run: uv run python bench/bench_file_reader.py [--gb 1.0] [--runs 15]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
from pathlib import Path

from common import DATA, call, env_for, initialize, p50, python, report, rss_mb, spawn


def make_csv(path: Path, size: int) -> None:
    if path.exists() and path.stat().st_size >= size:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(1)
    lines = ["order_id,order_date,region,channel,product,quantity,unit_price,revenue\n"]
    regions, channels = ["North", "South", "East", "West"], ["online", "retail", "partner"]
    block = "".join(
        f"{i},2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d},{rng.choice(regions)},{rng.choice(channels)},"
        f"P{rng.randint(1, 500)},{rng.randint(1, 9)},{rng.uniform(5, 900):.2f},{rng.uniform(5, 9000):.2f}\n"
        for i in range(20000)
    )
    with path.open("w") as f:
        f.write(lines[0])
        written = 0
        while written < size:
            f.write(block)
            written += len(block)


def measure(ws: Path, name: str, runs: int) -> tuple[float, float]:
    # The raw-result cache is switched off so every call reads the file.
    proc = spawn([python(), "-m", "ba_mcp"], env_for(ws, BA_MCP_CACHE__MAX_ENTRIES="0"))
    initialize(proc)
    call(proc, 1, "file_reader", {"path": "uploads/small.csv", "nrows": 100, "output_level": "brief"})  # warm-up
    before = rss_mb(proc.pid)
    times = []
    for i in range(runs):
        elapsed, reply = call(proc, 10 + i, "file_reader", {"path": f"uploads/{name}", "nrows": 100})
        assert not reply["result"].get("isError"), reply
        times.append(elapsed)
    growth = rss_mb(proc.pid) - before
    proc.kill()
    proc.wait()
    return p50(times), growth


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    big = DATA / f"orders_{args.gb:g}gb.csv"
    make_csv(big, int(args.gb * 1024**3))
    ws = Path(tempfile.mkdtemp(prefix="ws-", dir=DATA))  # beside the data, so a hard link works
    (ws / "uploads").mkdir()
    (ws / "uploads" / "big.csv").hardlink_to(big)  # a symlink would leave the workspace and be refused
    make_csv(ws / "uploads" / "small.csv", 1024**2)
    big_t, big_rss = measure(ws, "big.csv", args.runs)
    small_t, small_rss = measure(ws, "small.csv", args.runs)
    print(f"file sizes: big {big.stat().st_size / 1024**3:.2f} GiB, small 1 MiB")
    report("P-4 file_reader nrows=100 standard, 1 GB CSV (p50)", big_t * 1000, small_t * 1000, "ms", "<= 150 ms")
    report("P-4 server RSS growth over the calls, 1 GB CSV", big_rss, max(small_rss, 0.001), "MB", "<= 50 MB")
    shutil.rmtree(ws, ignore_errors=True)


if __name__ == "__main__":
    main()
