"""Issue 24: query_database on Apache Spark through Spark Connect — a real Spark Connect server (pyspark 4.3,
installed with the dev dependencies; Java 17), read-only by ba-mcp's rule in the engine, cancelled in the cluster.

The run's one guarded server is started in the background when the run begins (``tests/spark_server.py``), on a
copy of tables made once per machine by a server without the rule (as an operator would). Marked ``spark``:
``uv run pytest -m "not spark"`` leaves them out (and starts no JVM).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, stdio_client

from ba_mcp.databases import spark
from tests import background, spark_server
from tests.conftest import ba, make_workspace, server_process, stdio_params, text_of

# the slow tier: Spark Connect is a JVM server of its own, and the rule is tested at its process boundary
pytestmark = [pytest.mark.anyio, pytest.mark.spark, pytest.mark.slow]

ARTIFACT = re.compile(r"artifact_[0-9a-f]{12}")
ROWS = spark_server.ROWS
_sql = spark_server.sql


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(folder.rglob("*"))
        if "metastore_db" not in p.parts and p.suffix not in (".log", ".pid", ".json") and "tmp" not in p.parts
    }


@pytest.fixture(scope="module")
def clusters() -> dict[str, Any]:
    """The run's guarded Spark Connect (tests/spark_server.py: started in the background when the run began,
    on a copy of the tables made once per machine by a server without the rule)."""
    why = spark_server.available()
    if why:  # never a silent skip: the README's set-up installs pyspark and the ADBC driver, the machine Java 17
        pytest.fail(why)
    state = background.wait("spark")
    if "error" in state:
        pytest.fail(f"the run's Spark Connect did not start: {state['error']}")
    return {"url": state["url"], "workdir": Path(state["workdir"])}


@contextlib.asynccontextmanager
async def _client(ws: Path, env: dict[str, str]) -> AsyncIterator[ClientSession]:
    with open("/dev/null", "w") as errlog:
        async with (
            stdio_client(stdio_params(ws, **env), errlog=errlog) as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            yield s


@pytest.fixture(scope="module")
async def lake(clusters: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    ws = make_workspace(tmp_path_factory.mktemp("sparkws"))
    env = {
        "BA_MCP_DATABASES__LAKE__URL": clusters["url"],
        "BA_MCP_DATABASES__LAKE__DRIVER": "adbc_driver_spark",
        # generous: a busy machine's Spark answers slowly, and no test here times the cluster (the one that
        # times out on purpose passes its own timeout)
        "BA_MCP_TOOLS__QUERY_DATABASE__TIMEOUT_S": "120",
        "BA_MCP_TOOLS__QUERY_METRICS__TIMEOUT_S": "120",
        # the query that times out on purpose is estimated past any scan to confirm (Spark counts range()'s rows)
        "BA_MCP_TOOLS__QUERY_DATABASE__CONFIRM_SCAN_ROWS": str(10**15),
        "BA_MCP_ENGINE__SPARE_WORKERS": "0",
    }
    async with _client(ws, env) as s:
        deadline = time.monotonic() + 90
        while True:  # the server's first Spark session (the JVM itself was warmed when it started)
            failed, text = await _ask(s, database="lake", query="SELECT count(*) FROM sales")
            if not failed:
                break
            assert time.monotonic() < deadline, f"Spark Connect never answered: {text}"
        yield s, ws


def _by_region() -> dict[str, list[Any]]:
    """The known answer: sales (count, total amount) of ids 1000 and up, by their store's region."""
    expected: dict[str, list[Any]] = {"north": [0, 0.0], "south": [0, 0.0]}
    for i in range(1000, ROWS):
        region = "north" if (i % 1000) % 2 == 0 else "south"
        expected[region][0] += 1
        expected[region][1] += (i % 97) * 1.5
    return expected


def _shown_by_region(text: str) -> dict[str, list[str]]:
    return {
        line.split(",")[0]: line.split(",")[1:] for line in text.splitlines() if line.startswith(("north,", "south,"))
    }


GENEROUS = {"BA_MCP_TOOLS__QUERY_DATABASE__TIMEOUT_S": "120"}  # a busy machine's first Spark session is slow


async def _ask(s: ClientSession, **args: Any) -> tuple[bool, str]:
    result = await s.call_tool("query_database", args)
    return bool(result.is_error), text_of(result)


@pytest.mark.slow
async def test_an_endpoint_without_the_rule_is_refused_unless_allowed(tmp_path: Path) -> None:
    """A second JVM, without the rule (and without tables: it only has to answer)."""
    with spark.local(tmp_path / "bare", guarded=False) as server:
        bare = server.url
        ws = make_workspace(tmp_path)
        bare_env = {"BA_MCP_DATABASES__BARE__URL": bare, "BA_MCP_ENGINE__SPARE_WORKERS": "0", **GENEROUS}
        async with _client(ws, bare_env) as s:
            failed, text = await _ask(s, database="bare", query="SELECT 1")
        assert failed and "UNGUARDED_SPARK" in text and "allow_unguarded_writes" in text, text
        env = {
            "BA_MCP_DATABASES__BARE__URL": bare,
            "BA_MCP_DATABASES__BARE__ALLOW_UNGUARDED_WRITES": "true",
            "BA_MCP_ENGINE__SPARE_WORKERS": "0",
            **GENEROUS,
        }
        async with _client(ws, env) as allowed:
            failed, text = await _ask(allowed, database="bare", query="SELECT 5 AS five")
        assert not failed and text.rstrip().endswith("5"), text
        out = ba("doctor", workspace=tmp_path / "doctor", env={"BA_MCP_DATABASES__BARE__URL": bare})
        line = next(x for x in out.stdout.splitlines() if x.split()[1:3] == ["database", "bare"])
        assert line.startswith("FAIL") and "without ba-mcp's read-only rule" in line, out.stdout


async def test_an_aggregate_runs_in_spark_with_params_and_known_answers(lake: Any, clusters: dict[str, Any]) -> None:
    s, _ = lake
    query = (
        "SELECT r.region, count(*) AS n, round(sum(s.amount), 2) AS total FROM sales s JOIN regions r "
        "ON s.store = r.store WHERE s.id >= ? GROUP BY r.region ORDER BY r.region"
    )
    failed, text = await _ask(s, database="lake", query=query, params=[1000], output_level="full")  # exact floats
    assert not failed, text
    expected, shown = _by_region(), _shown_by_region(text)
    for region, (n, total) in expected.items():
        assert int(shown[region][0]) == n and abs(float(shown[region][1]) - total) < 0.01, text


@pytest.mark.slow
async def test_a_large_result_streams_into_an_artifact_with_bounded_server_memory(lake: Any) -> None:
    s, ws = lake
    failed, _ = await _ask(s, database="lake", query="SELECT 1 AS warm")
    assert not failed
    server = server_process(ws)
    before = server.memory_info().rss
    failed, text = await _ask(
        s, database="lake", query="SELECT id, store, amount FROM sales WHERE id < 1000000", max_rows=10
    )
    assert not failed and "Truncated: 10 of 1,000,000 rows shown" in text, text
    growth = server.memory_info().rss - before
    kept = ARTIFACT.search(text).group(0)  # type: ignore[union-attr]
    failed, text = await _ask(s, query=f"SELECT count(*) AS n, sum(id) AS total FROM {kept}")
    assert not failed and "1000000,499999500000" in text, text
    assert growth < 300 * 1024 * 1024, growth


HOSTILE = [
    "CREATE TABLE planted (a INT) USING parquet",
    "INSERT INTO regions VALUES (5000, 'east')",
    "INSERT OVERWRITE DIRECTORY '{dir}/exported' USING parquet SELECT * FROM regions",
    "CREATE TABLE copied USING parquet LOCATION '{dir}/copied' AS SELECT * FROM regions",
    "DROP TABLE regions",
    "CACHE TABLE regions",
    "ADD JAR /tmp/nothing.jar",
    "SET spark.sql.runSQLOnFiles=true",
    "EXECUTE IMMEDIATE 'DROP TABLE sales'",
    "BEGIN INSERT INTO regions VALUES (6000, 'west'); END",
    "SELECT reflect('java.lang.System', 'getProperty', 'user.name')",
    "SELECT java_method('java.lang.Runtime', 'getRuntime')",
    "SELECT * FROM text.`/etc/hostname`",
    "TRUNCATE TABLE regions",
    "ALTER TABLE regions ADD COLUMNS (extra INT)",
    "CREATE TEMPORARY VIEW v AS SELECT 1 AS a",
    # S-15: nothing that runs a program or user code, and no EXECUTE IMMEDIATE at all
    "SELECT TRANSFORM(region) USING 'sh -c \"id > {dir}/pwned; cat /etc/passwd\"' AS (line STRING) FROM regions",
    "SELECT TRANSFORM(*) USING 'cat' FROM (SELECT 1 AS a)",
    "EXECUTE IMMEDIATE 'SELECT 1'",
    "CREATE TEMPORARY FUNCTION plus1(x INT) RETURNS INT RETURN x + 1",
    "SELECT try_reflect('java.lang.System', 'getenv', 'HOME')",
]
ALWAYS_BY_THE_RULE = ("TRANSFORM", "EXECUTE IMMEDIATE 'SELECT 1'", "try_reflect")


async def test_every_write_is_refused_by_the_rule_and_nothing_is_written(
    lake: Any, clusters: dict[str, Any], tmp_path: Path
) -> None:
    s, _ = lake
    before = _digest(clusters["workdir"])
    outcomes = []
    for statement in HOSTILE:
        failed, text = await _ask(s, database="lake", query=statement.format(dir=tmp_path))
        outcomes.append((statement, failed, text.splitlines()[1:4]))
    assert all(failed for _, failed, _ in outcomes), [o for o in outcomes if not o[1]]
    assert sum("READ_ONLY" in " ".join(t) for _, _, t in outcomes) >= len(HOSTILE) - 2, outcomes
    for statement, _, text in outcomes:
        if any(mark in statement for mark in ALWAYS_BY_THE_RULE):
            assert "READ_ONLY" in " ".join(text), (statement, text)
    assert _digest(clusters["workdir"]) == before
    assert not list(tmp_path.iterdir())  # no directory for INSERT OVERWRITE DIRECTORY, no table location
    failed, text = await _ask(s, database="lake", query="SELECT count(*) AS n FROM regions")
    assert not failed and text.rstrip().endswith("1000"), text
    failed, text = await _ask(s, database="lake", query="SHOW TABLES")
    assert not failed and "sales" in text, text


@pytest.mark.slow
async def test_a_long_query_is_cancelled_in_the_cluster_and_the_next_answers_promptly(lake: Any) -> None:
    s, _ = lake
    started = time.monotonic()
    failed, text = await _ask(
        s, database="lake", query="SELECT count(*) FROM range(100000000000) a WHERE rand() < 0.5", timeout=10
    )
    assert failed and "timeout" in text.lower(), text
    timed_out = time.monotonic()
    failed, text = await _ask(s, database="lake", query="SELECT 41 + 1 AS answer")
    assert not failed and text.rstrip().endswith("42"), text
    assert time.monotonic() - timed_out < 2.5, "the next query waited for the cancelled job"
    assert timed_out - started < 15


async def test_the_schema_resource_names_spark_and_lists_the_catalog(lake: Any) -> None:
    s, _ = lake
    schema = (await s.read_resource("db://lake/schema")).contents[0].text  # type: ignore[union-attr]
    assert "# Database lake (Spark 4.3.0" in schema, schema[:300]
    assert "## sales (table)" in schema and "- amount: double" in schema and "One row per sale" in schema
    tools = await s.list_tools()
    description = next(t.description for t in tools.tools if t.name == "query_database") or ""
    assert "lake (Spark)" in description


def test_doctor_says_the_rule_is_active(clusters: dict[str, Any], tmp_path: Path) -> None:
    out = ba("doctor", workspace=tmp_path, env={"BA_MCP_DATABASES__LAKE__URL": clusters["url"]})
    line = next(x for x in out.stdout.splitlines() if x.split()[1:3] == ["database", "lake"])
    assert line.startswith("ok") and "Spark 4.3.0; ba-mcp's read-only rule is active" in line, out.stdout


async def test_metrics_compile_to_spark_and_give_the_known_answers(lake: Any) -> None:
    """An OSI file over the lake's tables: two facts (sales, regions) stitched by region, in Spark's dialect."""
    s, ws = lake
    (ws / "metrics").mkdir(exist_ok=True)
    (ws / "metrics" / "lake.yml").write_text(
        "name: lake\n"
        "datasets:\n"
        "  - name: sales\n    source: lake.default.sales\n    primary_key: [id]\n    fields:\n"
        "      - {name: id, expression: id}\n      - {name: store, expression: store}\n"
        "      - {name: amount, expression: amount}\n"
        "  - name: regions\n    source: lake.default.regions\n    primary_key: [store]\n    fields:\n"
        "      - {name: store, expression: store}\n      - {name: region, expression: region, dimension: {}}\n"
        "relationships:\n"
        "  - {name: sales_of_stores, from: sales, to: regions, from_columns: [store], to_columns: [store]}\n"
        "metrics:\n"
        "  - {name: sales_total, expression: 'SUM(sales.amount)'}\n"
        "  - {name: sales_count, expression: 'COUNT(sales.id)'}\n"
        "  - {name: stores, expression: 'COUNT(regions.store)'}\n"
    )
    result = await s.call_tool(
        "query_metrics",
        {
            "metrics": ["sales_count", "sales_total", "stores"],
            "dimensions": ["region"],
            "where": ["sales.id >= 1000"],
            "output_level": "full",
        },
    )
    text = text_of(result)
    assert not result.is_error, text
    expected, shown = _by_region(), _shown_by_region(text)
    for region, (n, total) in expected.items():
        assert int(shown[region][0]) == n and abs(float(shown[region][1]) - total) < 0.01, text
        assert int(shown[region][2]) == 500, text  # each region's stores: its own branch, not multiplied by sales


def test_the_rule_refuses_user_code_sent_by_any_spark_connect_client(clusters: dict[str, Any]) -> None:
    """S-15 in the engine, whoever the client: pyspark's own Connect client registers a Python UDF and maps with
    pandas — plans that would run user code on the cluster — and the rule refuses both."""
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import udf

    session = SparkSession.builder.remote(clusters["url"]).getOrCreate()
    try:
        session.udf.register("plus_one", lambda x: x + 1, "int")
        attempts = {
            "registered UDF": lambda: session.sql("SELECT plus_one(1)").collect(),
            "inline UDF": lambda: session.range(3).select(udf(lambda x: x * 2, "long")("id")).collect(),
            "mapInPandas": lambda: session.range(3).mapInPandas(lambda it: it, "id long").collect(),
        }
        for what, attempt in attempts.items():
            with pytest.raises(Exception, match="BA_MCP_READ_ONLY") as refused:
                attempt()
            assert "PythonUDF" in str(refused.value) or "MapInPandas" in str(refused.value), what
        assert session.sql("SELECT count(*) AS n FROM regions").collect()[0][0] == 1000
    finally:
        session.stop()


@pytest.mark.slow
@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_spark_local_in_the_background_ends_its_jvm_on_a_signal(signum: str, tmp_path: Path) -> None:
    """Issue 36: `ba-mcp spark-local &` from a script — whose background jobs start with SIGINT ignored — ignored
    Ctrl-C's signal, and SIGTERM ended the command but left its JVM serving. Each now ends both."""
    import os
    import signal
    import socket
    import subprocess
    import sys

    import psutil

    if spark_server.available():
        pytest.fail(spark_server.available())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    workdir = tmp_path / "lake"

    def as_a_background_job() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # what a non-interactive shell does for `cmd &`

    command = subprocess.Popen(
        [sys.executable, "-m", "ba_mcp", "spark-local", "--unguarded", "--dir", str(workdir), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=as_a_background_job,
    )
    try:
        assert command.stdout is not None
        first = command.stdout.readline()
        assert "Spark Connect" in first, first + command.stdout.read()
        jvms = [p for p in psutil.process_iter(["cwd", "name"]) if p.info["cwd"] == str(workdir)]
        assert jvms, "the JVM serves from the lake's folder"
        command.send_signal(getattr(signal, signum))
        assert command.wait(60) == 0
        _, alive = psutil.wait_procs(jvms, timeout=30)
        assert not alive, [p.info for p in alive]
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    finally:
        if command.poll() is None:
            os.kill(command.pid, signal.SIGKILL)
        for p in psutil.process_iter(["cwd"]):
            if p.info["cwd"] == str(workdir):
                p.kill()
