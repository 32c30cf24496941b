"""One guarded Spark Connect server per test run, started early in the background (tests/background.py; a JVM takes
~15 s to start).

The tables the tests read are made once per machine by a server without the rule (as an operator would), kept in
a cache folder named by the digest of what they hold (like the demo database and the rule's jar), where a server
WITH the rule serves them (``guarded``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests import background


def trap_tables() -> list[str]:
    """The hand-computed trap database of tests/test_time_metrics.py, in the namespace ``trap``."""
    from tests.trap import TABLES as TRAP

    out = ["CREATE DATABASE IF NOT EXISTS trap"]
    for name, (columns, rows) in TRAP.items():
        spark_columns = columns.replace(" PRIMARY KEY", "").replace("numeric(12,2)", "DECIMAL(12,2)")
        out.append(f"CREATE TABLE trap.{name} ({spark_columns.replace('text', 'STRING')}) USING parquet")
        values = ", ".join(
            "(" + ", ".join(f"DATE '{v}'" if isinstance(v, str) and v[:2] == "20" else repr(v) for v in row) + ")"
            for row in rows
        )
        out.append(f"INSERT INTO trap.{name} VALUES {values}")
    return out


ROWS = 1_000_000
TABLES = (
    "CREATE TABLE sales USING parquet AS SELECT id, id % 1000 AS store, "
    f"CAST(id % 97 AS DOUBLE) * 1.5 AS amount FROM range({ROWS})",
    "CREATE TABLE regions (store INT, region STRING) USING parquet",
    "INSERT INTO regions SELECT id, CASE WHEN id % 2 = 0 THEN 'north' ELSE 'south' END FROM range(1000)",
    "COMMENT ON TABLE sales IS 'One row per sale'",
    *trap_tables(),
)


def available() -> str:
    """'' when a local Spark Connect can run here, else why not."""
    try:
        from ba_mcp.databases import spark

        spark.spark_home()
        import adbc_driver_spark  # noqa: F401
    except Exception as exc:
        return f"Spark Connect is not available here: {exc}"
    if shutil.which("java") is None:
        return "Spark Connect needs Java 17 (java is not on PATH)"
    return ""


def sql(url: str, *statements: str) -> list[Any]:
    """Run statements over ADBC; the rows of the last one."""
    import adbc_driver_manager.dbapi as dbapi
    import adbc_driver_spark

    with (
        dbapi.connect(driver=adbc_driver_spark._driver_path(), db_kwargs={"uri": url}, autocommit=True) as con,
        con.cursor() as cur,
    ):
        rows: list[Any] = []
        for statement in statements:
            cur.execute(statement)
            rows = cur.fetchall() if cur.description else []
        return rows


def cache_root() -> Path:
    return Path(os.environ.get("BAMCP_TEST_CACHE") or Path.home() / ".cache" / "ba-mcp-tests")


def lake() -> Path:
    """The metastore and warehouse holding the tests' tables, made once per machine by a server without the rule
    (the metastore records the tables' absolute locations, so the folder is used where it was made; one run at a
    time opens it, under a lock)."""
    import fcntl

    import pyspark

    from ba_mcp.databases import spark

    digest = hashlib.sha256(json.dumps([TABLES, pyspark.__version__]).encode()).hexdigest()[:12]
    kept = cache_root() / f"spark-lake-{digest}"
    kept.parent.mkdir(parents=True, exist_ok=True)
    with open(kept.parent / f"{kept.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (kept / "ready").is_file():
            background.end_processes(f"databaseName={kept / 'metastore_db'};")  # a killed run's, half-way
            shutil.rmtree(kept, ignore_errors=True)
            with spark.local(kept, guarded=False) as setup:
                sql(setup.url, *TABLES)
            (kept / "ready").write_text("ok")
    return kept


@contextlib.contextmanager
def guarded(folder: Path) -> Iterator[dict[str, Any]]:
    """The run's guarded Spark Connect on the lake, warmed by a first query (a cold JVM's first session takes
    seconds): its URL and the lake's folder."""
    from ba_mcp.databases import spark

    workdir = lake()
    with background.exclusive(workdir.parent / f"{workdir.name}.run.lock", "the tests' Spark lake"):
        # a Spark Connect still on the lake now is a killed run's (a live run would hold the lock): it holds the
        # Derby metastore, and every later server on the lake would fail "Unable to instantiate
        # SessionHiveMetaStoreClient" — ended here
        background.end_processes(f"databaseName={workdir / 'metastore_db'};")
        with spark.local(workdir, guarded=True, log=folder / "spark.log") as server:
            sql(server.url, "SELECT count(*) FROM sales")
            yield {"url": server.url, "workdir": str(workdir)}
