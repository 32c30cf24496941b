"""TPC-H at a small scale for the tests: the data from ``tpchgen-cli`` (a dev dependency; cached per scale under
``~/.cache/ba-mcp-tests``), the 22 queries as published (``tests/tpch/qNN.sql``: comments, the specification's
validation parameters, the trailing ``;``), the tables loaded into a PostgreSQL database, and each query's
answer from DuckDB in-process — the reference every engine's result is compared with."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")
QUERIES = Path(__file__).parent / "tpch"
INDEXES = (
    "ALTER TABLE region ADD PRIMARY KEY (r_regionkey)",
    "ALTER TABLE nation ADD PRIMARY KEY (n_nationkey)",
    "ALTER TABLE supplier ADD PRIMARY KEY (s_suppkey)",
    "ALTER TABLE customer ADD PRIMARY KEY (c_custkey)",
    "ALTER TABLE part ADD PRIMARY KEY (p_partkey)",
    "ALTER TABLE partsupp ADD PRIMARY KEY (ps_partkey, ps_suppkey)",
    "ALTER TABLE orders ADD PRIMARY KEY (o_orderkey)",
    "ALTER TABLE lineitem ADD PRIMARY KEY (l_orderkey, l_linenumber)",
    "CREATE INDEX ON lineitem (l_partkey, l_suppkey)",
)


def queries() -> dict[int, str]:
    return {int(p.stem[1:]): p.read_text() for p in sorted(QUERIES.glob("q*.sql"))}


def data(scale: float = 0.01) -> Path:
    """The eight tables as Parquet files, generated once per scale factor."""
    folder = Path.home() / ".cache" / "ba-mcp-tests" / f"tpch-{scale}"
    if all((folder / f"{t}.parquet").is_file() for t in TABLES):
        return folder
    partial = folder.with_name(folder.name + f".{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    tool = Path(sys.executable).with_name("tpchgen-cli")
    subprocess.run([str(tool), "parquet", "-s", str(scale), f"--output-dir={partial}"], check=True, capture_output=True)
    shutil.rmtree(folder, ignore_errors=True)
    partial.rename(folder)
    return folder


def arrow_table(folder: Path, name: str) -> Any:
    """A table with plain strings (the generator writes string views, which not every reader takes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(folder / f"{name}.parquet")
    schema = pa.schema(
        [pa.field(f.name, pa.string() if f.type == pa.string_view() else f.type, f.nullable) for f in table.schema]
    )
    return table.cast(schema)


def load_postgres(pg: Any, folder: Path, database: str = "tpch") -> None:
    """The tables into ``database`` (owned by ``owner``; ``analyst`` reads it through pg_read_all_data)."""
    if pg.sql(f"SELECT count(*) FROM pg_database WHERE datname = '{database}'", database="postgres")[0][0]:
        return
    pg.sql(f"CREATE DATABASE {database} OWNER owner", database="postgres")
    with pg.connect("owner", database) as con, con.cursor() as cur:
        for name in TABLES:
            cur.adbc_ingest(name, arrow_table(folder, name), mode="create")
        for statement in INDEXES:  # the keys the specification allows (Q20's correlated subquery: 16 s without)
            cur.execute(statement)
        cur.execute("ANALYZE")
    con.close()


def duckdb_answers(folder: Path) -> dict[int, list[tuple[Any, ...]]]:
    import duckdb

    con = duckdb.connect()
    for name in TABLES:
        con.execute(f"CREATE VIEW {name} AS SELECT * FROM read_parquet('{folder / name}.parquet')")
    return {n: con.execute(text).fetchall() for n, text in queries().items()}


def same(shown: str, expected: Any) -> bool:
    """A value as a tool's CSV shows it equals DuckDB's (numbers to 1e-9 relative: an exact decimal of one engine
    is a double of another; dates as ISO text; NULL as the observation writes it)."""
    if expected is None:
        return shown in ("", "NULL")
    if isinstance(expected, (int, float, Decimal)) and not isinstance(expected, bool):
        try:
            return math.isclose(float(shown), float(expected), rel_tol=1e-9, abs_tol=1e-9)
        except ValueError:
            return False
    if hasattr(expected, "isoformat"):
        return shown == expected.isoformat()
    return shown == str(expected)
