"""Issue 21: the engine workers at scale, on large configured files, and at shutdown.

* Scale: a GROUP BY over a 10,000,000-row Parquet file in uploads/, through a stdio session, against DuckDB's
  own read_parquet of the same file in this process — interleaved, p50. Target ≤ 1.2 ×.
* A configured DuckDB file of ≥ 1.3 GB: the first query of a fresh server against a direct
  ``duckdb.connect(read_only=True)`` + the same query (target ≤ 3 ×); no new file of comparable size appears
  anywhere while it is served; the hostile list leaves its SHA-256 unchanged.
* P-10: shutdown (stdin closed → process gone) with a runaway query in flight. Target ≤ 250 ms.

The data files are generated once into bench/.data/.
Run: uv run python bench/bench_engine.py [--runs 5] [--gb 1.3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

import duckdb
from common import DATA, call, env_for, initialize, p50, python, report, rss_mb, spawn

GROUP_BY = "SELECT g, count(*) AS n, sum(x) AS total FROM {src} GROUP BY g ORDER BY g"
HOSTILE = [
    "EXPLAIN ANALYZE COPY (SELECT 'pwned' AS a) TO '{db}' (HEADER false, USE_TMP_FILE false)",
    "EXPLAIN ANALYZE COPY (SELECT 'pwned' AS a) TO '{db}.wal' (HEADER false, USE_TMP_FILE false)",
    "COPY t TO '{db}'",
    "CHECKPOINT",
    "ATTACH '{db}' AS w",
    "DROP TABLE t",
    "INSERT INTO t VALUES (1, 0.5, 'x')",
    "CREATE TABLE big.main.x AS SELECT 1",
]


def make_parquet(path: Path, rows: int = 10_000_000) -> None:
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute(
        f"COPY (SELECT range AS id, range % 97 AS g, random() AS x FROM range({rows})) TO '{path}' "
        "(FORMAT parquet, COMPRESSION zstd)"
    )
    con.close()


def make_database(path: Path, gb: float) -> None:
    if path.exists() and path.stat().st_size >= gb * 1e9:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    rows = int(gb * 1e9 / 24)  # about 24 bytes a row on disk (an id, a double, 32 hex characters compressed)
    con = duckdb.connect(str(path), config={"enable_progress_bar": False})
    con.execute(f"CREATE TABLE t AS SELECT range AS id, random() AS x, md5(range::VARCHAR) AS h FROM range({rows})")
    con.close()


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 24):
            h.update(chunk)
    return h.hexdigest()


def new_big_files(roots: list[Path], at_least: int, since: float) -> list[str]:
    found = []
    for root in roots:
        for dirpath, dirs, files in os.walk(root):
            if dirpath.count(os.sep) - str(root).count(os.sep) >= 5:
                dirs[:] = []
            for name in files:
                try:
                    st = os.stat(os.path.join(dirpath, name))
                except OSError:
                    continue
                if st.st_size >= at_least and st.st_mtime >= since:
                    found.append(os.path.join(dirpath, name))
    return found


def scale(runs: int) -> None:
    parquet = DATA / "ten_million.parquet"
    make_parquet(parquet)
    ws = Path(tempfile.mkdtemp(prefix="ba-bench-"))
    (ws / "uploads").mkdir()
    os.link(parquet, ws / "uploads" / "ten_million.parquet")
    proc = spawn([python(), "-m", "ba_mcp"], env_for(ws, BA_MCP_CACHE__MAX_ENTRIES="0"))
    initialize(proc)
    query = {"query": GROUP_BY.format(src="'uploads/ten_million.parquet'"), "max_rows": 100}
    call(proc, 2, "query_database", query)  # the worker is up
    con = duckdb.connect()
    before = rss_mb(proc.pid)
    ours, ref = [], []
    for i in range(runs):
        started = time.perf_counter()
        con.execute(GROUP_BY.format(src=f"read_parquet('{parquet}')")).fetchall()
        ref.append(time.perf_counter() - started)
        elapsed, reply = call(proc, 10 + i, "query_database", query)
        assert not reply["result"].get("isError"), reply
        ours.append(elapsed)
    growth = rss_mb(proc.pid) - before
    proc.kill()
    proc.wait()
    report("GROUP BY over a 10M-row Parquet upload vs read_parquet in-process", p50(ours), p50(ref), "s", "<= 1.2 x")
    print(f"    server RSS growth over those calls: {growth:+.1f} MB")


def big_file(gb: float) -> None:
    db = DATA / "big.duckdb"
    make_database(db, gb)
    size = db.stat().st_size
    query = "SELECT count(*) AS n, avg(x) AS mean, max(h) AS top FROM t"
    digest = sha256(db)
    started = time.perf_counter()
    con = duckdb.connect(str(db), read_only=True)
    con.execute(query).fetchall()
    con.close()
    ref = time.perf_counter() - started
    ws = Path(tempfile.mkdtemp(prefix="ba-bench-"))
    since = time.time()
    proc = spawn([python(), "-m", "ba_mcp"], env_for(ws, BA_MCP_DATABASES__BIG__PATH=str(db)))
    initialize(proc)
    elapsed, reply = call(proc, 2, "query_database", {"database": "big", "query": query})
    assert not reply["result"].get("isError"), reply
    roots = [ws, Path(tempfile.gettempdir()), Path.home() / ".cache", DATA]
    copies = [p for p in new_big_files(roots, size // 2, since) if p != str(db)]
    for i, statement in enumerate(HOSTILE):
        _, answer = call(proc, 10 + i, "query_database", {"database": "big", "query": statement.format(db=db)})
        assert answer["result"].get("isError"), (statement, answer)
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(10)
    report(f"first query on a {size / 1e9:.2f} GB DuckDB file vs direct read_only connect", elapsed, ref, "s", "<= 3 x")
    print(f"    new files of >= {size // 2 // 10**6:,} MB while served: {copies or 'none'}")
    print(f"    SHA-256 after {len(HOSTILE)} hostile statements: {'unchanged' if sha256(db) == digest else 'CHANGED'}")


def shutdown(runs: int) -> None:
    times = []
    for _ in range(runs):
        ws = Path(tempfile.mkdtemp(prefix="ba-bench-"))
        proc = spawn([python(), "-m", "ba_mcp"], env_for(ws, BA_MCP_TOOLS__QUERY_DATABASE__TIMEOUT_S="120"))
        initialize(proc)
        call(proc, 2, "query_database", {"query": "SELECT 1"})
        assert proc.stdin is not None
        runaway = {"query": "SELECT levenshtein(repeat('a', 150000), repeat('b', 150000))"}
        message = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "query_database"}}
        message["params"]["arguments"] = runaway  # type: ignore[index]
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        time.sleep(1.0)
        started = time.perf_counter()
        proc.stdin.close()
        proc.wait(30)
        times.append(time.perf_counter() - started)
    report("P-10 shutdown with a runaway query in flight (p50)", p50(times) * 1000, 250, "ms", "<= 250 ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--gb", type=float, default=1.3)
    args = parser.parse_args()
    scale(args.runs)
    big_file(args.gb)
    shutdown(args.runs)


if __name__ == "__main__":
    main()
