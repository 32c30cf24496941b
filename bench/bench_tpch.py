"""Issue 40: TPC-H's 22 queries (as published, tests/tpch/qNN.sql) through query_database over stdio against
the same engine queried directly in this process, interleaved, per query, on three sources:

* DuckDB uploads — the eight tables as Parquet files in the workspace's uploads/, named upload_<table> in the
  query; reference: DuckDB in process with a view upload_<table> over read_parquet of the same file;
* a DuckDB file — the tables in a configured DuckDB database (``databases.tpchfile.path``); reference:
  ``duckdb.connect(read_only=True)`` on the same file;
* PostgreSQL 15 — started like the tests' one (tests/pg_server.py), the tables loaded with their keys;
  reference: ADBC in process (a plain connection, fetch to Arrow).

The data comes from ``tpchgen-cli`` (a dev dependency), generated once per scale under ~/.cache/ba-mcp-tests.
The server runs with its result cache off and every call at the defaults an analyst gets (standard level,
max_rows 1000: a longer result is kept as an artifact). Each query's figure is the median over rounds of its
call time / its direct time; the summary is the geometric mean of those ratios per source.

Run: uv run python bench/bench_tpch.py [--scale 0.1] [--rounds 5] [--no-postgres] [--against <python>]

``--against``: the interpreter of another checkout's environment (``git worktree add /tmp/before <rev> && cd
/tmp/before && uv sync --frozen --offline``; its engine workers then import its own code) — its server is measured
in the same rounds, interleaved, for a before/after in one run.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
from common import AGAINST_HELP, DATA, ROOT, call, env_for, initialize, spawn
from common import servers as common_servers

sys.path.insert(0, str(ROOT))
from tests import tpch
from tests.pg_server import postgres


def uploads_sql(text: str) -> str:
    """The query on the uploads: each table name as the upload's (upload_lineitem), columns untouched."""
    return re.sub(r"\b(" + "|".join(tpch.TABLES) + r")\b", r"upload_\1", text)


def duckdb_file(folder: Path, scale: float) -> Path:
    path = DATA / f"tpch-{scale}.duckdb"
    if path.is_file():
        return path
    DATA.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    con = duckdb.connect(str(partial))
    for name in tpch.TABLES:
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM read_parquet('{folder / name}.parquet')")
    con.close()
    partial.rename(path)
    return path


def _workers_mb(pid: int) -> list[float]:
    """RSS of each worker process (engine, connection, sandbox; not the shims) of server ``pid``, largest first."""
    import psutil

    found = []
    for child in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.memory_info().rss > 40 * 1024 * 1024:  # the shims are ~15 MB
                found.append(child.memory_info().rss / 2**20)
    return sorted(found, reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--against", help=AGAINST_HELP)
    parser.add_argument("--against-label", default="")
    parser.add_argument(
        "--idle", type=float, default=0, help="then wait this many seconds and report the workers' memory again"
    )
    args = parser.parse_args()
    folder = tpch.data(args.scale)
    db = duckdb_file(folder, args.scale)
    queries = tpch.queries()
    ws = Path(tempfile.mkdtemp(prefix="ba-bench-tpch-"))
    (ws / "uploads").mkdir()
    for name in tpch.TABLES:
        shutil.copy(folder / f"{name}.parquet", ws / "uploads" / f"{name}.parquet")

    direct_uploads = duckdb.connect()
    for name in tpch.TABLES:
        direct_uploads.execute(
            f"CREATE VIEW upload_{name} AS SELECT * FROM read_parquet('{ws / 'uploads' / name}.parquet')"
        )
    direct_file = duckdb.connect(str(db), read_only=True)

    def duck(con: duckdb.DuckDBPyConnection) -> Any:
        return lambda sql: con.sql(sql).to_arrow_table()

    sources: dict[str, tuple[str, Any, Any]] = {
        "DuckDB uploads": ("demo", uploads_sql, duck(direct_uploads)),
        "DuckDB file": ("tpchfile", lambda s: s, duck(direct_file)),
    }
    env = {"BA_MCP_CACHE__MAX_ENTRIES": "0", "BA_MCP_DATABASES__TPCHFILE__PATH": str(db)}

    with postgres() if not args.no_postgres else contextlib.nullcontext() as pg:
        if pg is not None:
            tpch.load_postgres(pg, folder, database="tpch")
            env["BA_MCP_DATABASES__TPCH__URL"] = pg.url("analyst", "tpch")
            con = pg.connect("analyst", "tpch")
            cur = con.cursor()

            def adbc(sql: str) -> Any:
                # the driver takes one bare statement: the comments and the trailing ';' off, as the server does
                cur.execute("\n".join(x for x in sql.splitlines() if not x.startswith("--")).rstrip().rstrip(";"))
                return cur.fetch_arrow_table()

            sources["PostgreSQL"] = ("tpch", lambda s: s, adbc)
        servers = {
            name: spawn(command, env_for(ws, **env), cwd)
            for name, (command, cwd) in common_servers(args.against, args.against_label).items()
        }
        ids = iter(range(10, 10**9))
        for proc in servers.values():
            initialize(proc)
            # Warm-up: each source's first query (connections, the workers' first plans), not timed.
            for database, shape, direct in sources.values():
                direct(shape(queries[1]))
                reply = call(proc, next(ids), "query_database", {"query": shape(queries[1]), "database": database})[1]
                assert not reply["result"].get("isError"), reply
        memory = {w: [_workers_mb(proc.pid)] for w, proc in servers.items()}
        ratios = {(w, s): {n: [] for n in queries} for w in servers for s in sources}
        added = {(w, s): {n: [] for n in queries} for w in servers for s in sources}
        for round_ in range(args.rounds):
            for n, text in queries.items():
                for source, (database, shape, direct) in sources.items():
                    sql = shape(text)
                    timed: dict[str, float] = {}
                    order = ["direct", *servers]
                    order = order[round_ % len(order) :] + order[: round_ % len(order)]  # each goes first in turn
                    for who in order:
                        if who == "direct":
                            started = time.perf_counter()
                            direct(sql)
                            timed["direct"] = time.perf_counter() - started
                        else:
                            elapsed, reply = call(
                                servers[who], next(ids), "query_database", {"query": sql, "database": database}
                            )
                            assert not reply["result"].get("isError"), (who, source, n, reply)
                            timed[who] = elapsed
                    for who in servers:
                        ratios[who, source][n].append(timed[who] / timed["direct"])
                        added[who, source][n].append((timed[who] - timed["direct"]) * 1000)
        for who, proc in servers.items():
            memory[who].append(_workers_mb(proc.pid))
        if args.idle:  # the sessions' queries have ended: what their workers keep once idle for a while
            time.sleep(args.idle)
            for who, proc in servers.items():
                memory[who].append(_workers_mb(proc.pid))
        for proc in servers.values():
            proc.kill()
            proc.wait()

    columns = [(w, s) for s in sources for w in servers]
    print(f"TPC-H SF {args.scale}, {args.rounds} rounds interleaved; per query: median ratio to the engine direct")
    print("      " + "".join(f"{s[:14]:>16}" for w, s in columns))
    if len(servers) > 1:
        print("      " + "".join(f"{w[-14:]:>16}" for w, s in columns))
    for n in queries:
        print(f"Q{n:02d}   " + "".join(f"{statistics.median(ratios[c][n]):>15.2f}x" for c in columns))
    for who, points in memory.items():
        said = ["after warm-up", "after the rounds", f"{args.idle:g} s idle later"]
        print(
            f"{who}: its worker processes (MB, largest first) "
            + "; ".join(
                f"{what}: {', '.join(f'{m:.0f}' for m in mbs)}" for what, mbs in zip(said, points, strict=False)
            )
        )
    targets = {"DuckDB uploads": 1.3, "DuckDB file": 1.3, "PostgreSQL": 1.15}
    for who, source in columns:
        medians = [statistics.median(ratios[who, source][n]) for n in queries]
        geo = math.exp(sum(math.log(r) for r in medians) / len(medians))
        ms = statistics.median([statistics.median(added[who, source][n]) for n in queries])
        print(
            f"{who:<22} {source:<16} geometric mean {geo:5.2f}x   median added {ms:+6.1f} ms   "
            f"target <= {targets[source]}x"
        )


if __name__ == "__main__":
    main()
