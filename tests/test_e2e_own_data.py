"""Issue 36: your own data as it is — through a spawned server over stdio, against the run's real PostgreSQL.

* The 22 TPC-H queries as published (comments, trailing ``;``) through ``query_database`` on DuckDB uploads and on
  PostgreSQL, each result equal to DuckDB in-process.
* PostgreSQL ``NUMERIC(12,2)`` and unconstrained ``NUMERIC`` as numbers through every step: the observation (exact,
  with a summary), an artifact summed and joined in DuckDB, ``load_artifact`` (a numeric dtype), ``query_metrics``
  and ``metric()``, a saved analysis re-run from the shell with ``--config`` (and ``analysis.py --config``).
* A per-call ``timeout``; typed parameters (an ISO date against a date column); keys in ``db://…/schema``;
  ``SHOW`` and ``EXPLAIN`` (its statement vetted); one configuration for every command and host (``--config``,
  the project's ``ba-mcp.yaml``, a Claude Desktop entry that carries its variables); the demo's metrics stepping
  aside for a model of yours; a saved analysis whose step exported a file; ``load_file`` and the read limit;
  ``doctor --network`` with web search disabled.
"""

from __future__ import annotations

import csv
import http.server
import io
import json
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests import pg_server, tpch
from tests.conftest import ba, make_workspace, text_of
from tests.sandbox_common import sandbox_params

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,  # the analyst's own PostgreSQL (a server of its own) and the TPC-H data, beside DuckDB
    pytest.mark.skipif(not pg_server.available(), reason="PostgreSQL binaries (initdb, pg_ctl) are not installed"),
]

ARTIFACT = re.compile(r"artifact_[0-9a-f]{12}")
PASSWORD = pg_server.PASSWORDS["analyst"]

# database "own": a table with NUMERIC(12,2) and an unconstrained NUMERIC, keys to join by, dates
OWN = (
    "CREATE TABLE customers (id int PRIMARY KEY, region text NOT NULL)",
    "INSERT INTO customers VALUES (1, 'north'), (2, 'south'), (3, 'north'), (4, 'east')",
    "CREATE TABLE sales (id int PRIMARY KEY, customer_id int REFERENCES customers, sold_on date, "
    "price numeric(12,2), ratio numeric)",
    "INSERT INTO sales VALUES (1, 1, '2025-01-05', 1234567.89, 0.125), (2, 2, '2025-01-20', 0.10, 2.5), "
    "(3, 1, '2025-02-03', 99999.99, 1 / 3::numeric), (4, 3, '2025-02-14', 10.01, 7031022.00000000000000000000), "
    "(5, 4, '2025-03-01', 0.05, 0.000001), (6, 2, '2025-03-31', 5000.00, 12345678901234567.5)",
    "ANALYZE",
)
PRICE_TOTAL = "1339578.04"  # by hand: 1234567.89 + 0.10 + 99999.99 + 10.01 + 0.05 + 5000.00
# 12345678901234567.5 + 7031022 + 2.5 + 0.125 + 0.000001 + 0.333333333333333333 (1/3 to 18 decimals)
RATIO_TOTAL = "12345678908265592.458334333333333333"

METRICS = """
name: own
custom_extensions:
  - {vendor_name: COMMON, data: '{"database": "own"}'}
datasets:
  - name: sales
    source: own.public.sales
    primary_key: [id]
    fields:
      - {name: sold_on, expression: sold_on, dimension: {is_time: true}}
      - {name: price, expression: price}
      - {name: customer_id, expression: customer_id}
  - name: customers
    source: own.public.customers
    primary_key: [id]
    fields:
      - {name: region, expression: region, dimension: {}}
relationships:
  - {name: sale_customer, from: sales, to: customers, from_columns: [customer_id], to_columns: [id]}
metrics:
  - name: revenue
    expression: SUM(sales.price)
    description: What was sold, at its price.
    custom_extensions:
      - {vendor_name: COMMON, data: '{"time_dimension": "sales.sold_on"}'}
"""


@pytest.fixture(scope="module")
def pg() -> pg_server.Postgres:
    server = pg_server.running()
    if not server.sql("SELECT count(*) FROM pg_database WHERE datname = 'own'", database="postgres")[0][0]:
        server.sql("CREATE DATABASE own OWNER owner", database="postgres")
        server.sql(*OWN, role="owner", database="own")
    tpch.load_postgres(server, tpch.data())
    return server


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = make_workspace(tmp_path_factory.mktemp("own"))
    folder = tpch.data()
    for name in tpch.TABLES:
        shutil.copy(folder / f"{name}.parquet", ws / "uploads" / f"{name}.parquet")
    (ws / "uploads" / "own_regions.csv").write_text("customer_id,manager\n1,Ana\n2,Bo\n3,Ana\n4,Cy\n")
    (ws / "metrics").mkdir()
    (ws / "metrics" / "own.yml").write_text(METRICS)
    return ws


def _own_url(pg: pg_server.Postgres, database: str = "own") -> str:
    return f"postgresql://analyst:${{OWN_PASSWORD}}@127.0.0.1:{pg.port}/{database}"


@pytest.fixture(scope="module")
async def s(pg: pg_server.Postgres, ws: Path) -> AsyncIterator[ClientSession]:
    params = sandbox_params(
        ws,
        OWN_PASSWORD=PASSWORD,
        BA_MCP_DATABASES__OWN__URL=_own_url(pg),
        BA_MCP_DATABASES__TPCH__URL=_own_url(pg, "tpch"),
        BA_MCP_SANDBOX__ALLOWED_IMPORTS="*",
        BA_MCP_OBSERVATION__INLINE_LIMIT_TOKENS="60000",
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(s: ClientSession, tool: str, **args: Any) -> str:
    result = await s.call_tool(tool, args)
    assert not result.is_error, text_of(result)
    return text_of(result)


async def refused(s: ClientSession, tool: str, **args: Any) -> str:
    result = await s.call_tool(tool, args)
    assert result.is_error, text_of(result)
    return text_of(result)


def table_rows(text: str) -> list[list[str]]:
    """The rows of a full-level table observation (its CSV block)."""
    lines = text.splitlines()
    count = int(re.search(r": ([\d,]+) rows × ", text).group(1).replace(",", ""))  # type: ignore[union-attr]
    start = next(i for i, line in enumerate(lines) if line.startswith("Rows ("))
    reader = csv.reader(io.StringIO("\n".join(lines[start + 1 :])))
    next(reader, None)  # the header
    return [row for _, row in zip(range(count), reader, strict=False)]


def _key(value: Any) -> str:
    text = value.isoformat() if hasattr(value, "isoformat") else "NULL" if value is None else str(value)
    try:
        return f"{float(text):.6f}"
    except ValueError:
        return text


async def test_the_22_tpch_queries_as_published_on_duckdb_uploads_and_postgresql(s: ClientSession) -> None:
    expected = tpch.duckdb_answers(tpch.data())
    for name in tpch.TABLES:  # the uploads under the names the queries use, for this session
        await call(s, "query_database", query=f"CREATE TEMP TABLE {name} AS SELECT * FROM upload_{name}")
    for database in ("demo", "tpch"):
        for n, text in tpch.queries().items():
            assert text.rstrip().endswith(";") and text.startswith("-- TPC-H")
            shown = table_rows(
                await call(s, "query_database", query=text, database=database, output_level="full", max_rows=5000)
            )
            want = expected[n]
            assert len(shown) == len(want), (database, n, shown[:3], want[:3])
            shown.sort(key=lambda row: [_key(v) for v in row])
            ordered = sorted(want, key=lambda row: [_key(v) for v in row])
            for got, row in zip(shown, ordered, strict=True):
                assert all(tpch.same(g, w) for g, w in zip(got, row, strict=True)), (database, n, got, row)
    q17 = await call(s, "query_database", query=tpch.queries()[17], database="tpch", output_level="full")
    assert "avg_yearly\nNULL" in q17, q17  # a row of NULLs reads NULL, never an empty line


async def test_numeric_columns_are_numbers_in_the_observation_artifacts_pandas_and_metrics(s: ClientSession) -> None:
    text = await call(s, "query_database", database="own", query="SELECT sum(price) AS p, sum(ratio) AS r FROM sales")
    assert f"p,r\n{PRICE_TOTAL},{RATIO_TOTAL}" in text, text  # exact: no float noise, no 20-digit tail
    assert "query on own" in text and "p: decimal(12,2)" not in text, text
    text = await call(
        s, "query_database", database="own", query="SELECT price / 100.0 AS hundredth FROM sales WHERE id = 1"
    )
    assert "hundredth\n12345.6789\n" in text + "\n", text  # PostgreSQL's 12345.67890000000000000000
    # a summary of each column: numbers, with their range and mean
    text = await call(
        s, "query_database", database="own", query="SELECT s.price, s.ratio FROM sales s, generate_series(1, 20) g"
    )
    assert "- price: decimal(12,2) — min 0.05, mean 223263, max 1234568; 6 distinct" in text, text
    assert "- ratio: numeric — min 0.000001, mean 2.05761e+15, max 12345678901234567.5" in text, text
    # kept as an artifact: DuckDB sums it and joins it with an upload (it held text: sum(VARCHAR) failed)
    text = await call(s, "query_database", database="own", query="SELECT * FROM sales ORDER BY id", max_rows=2)
    kept = ARTIFACT.search(text).group(0)  # type: ignore[union-attr]
    summed = await call(s, "query_database", query=f"SELECT sum(price) AS p, sum(ratio) AS r FROM {kept}")
    assert f"p,r\n{PRICE_TOTAL},{RATIO_TOTAL}" in summed, summed
    joined = await call(
        s,
        "query_database",
        query=f"SELECT r.manager, sum(a.price) / count(*) AS mean_price FROM {kept} a "
        "JOIN 'uploads/own_regions.csv' r USING (customer_id) GROUP BY 1 ORDER BY 1",
        output_level="full",
    )
    means = [(manager, float(v)) for manager, v in table_rows(joined)]
    by_hand = [("Ana", (1234567.89 + 99999.99 + 10.01) / 3), ("Bo", (0.10 + 5000.00) / 2), ("Cy", 0.05)]
    assert [m for m, _ in means] == [m for m, _ in by_hand], joined
    assert all(abs(a - b) < 1e-6 for (_, a), (_, b) in zip(means, by_hand, strict=True)), joined
    # pandas gets numbers
    out = await call(
        s,
        "run_python",
        code=f"df = load_artifact('{kept}')\n"
        "(str(df.price.dtype), str(df.ratio.dtype), round(float(df.price.sum()), 2))",
        output_level="full",
    )
    assert "('float64', 'float64', 1339578.04)" in out, out
    # the metric of the database's own model: its catalog names the database, the answer is exact
    catalog = (await s.read_resource("metrics://catalog")).contents[0].text  # type: ignore[union-attr]
    assert "Metrics on own" in catalog and "net_revenue" not in catalog, catalog  # the demo's stepped aside
    text = await call(s, "query_metrics", metrics=["revenue"], time_grain="month", output_level="full")
    assert "metrics on own" in text, text
    months = [(row[0][:7], row[1]) for row in table_rows(text)]
    assert months == [("2025-01", "1234567.99"), ("2025-02", "100010"), ("2025-03", "5000.05")], text
    out = await call(
        s,
        "run_python",
        code="m = metric('revenue', by=['customers.region'])\n(str(m.revenue.dtype), round(float(m.revenue.sum()), 2))",
        output_level="full",
    )
    assert f"('float64', {PRICE_TOTAL})" in out, out


async def test_a_timeout_per_call_bounded_by_the_ceiling_with_a_hint_naming_it(s: ClientSession) -> None:
    text = await refused(s, "query_database", database="own", query="SELECT pg_sleep(5)", timeout=0.5)
    assert "Error Type: timeout" in text and "pass timeout (seconds) up to 300" in text, text
    text = await refused(s, "query_database", database="own", query="SELECT 1", timeout=1000)
    assert "invalid_parameters" in text and "ceiling of 300 s" in text, text
    assert "1" in await call(s, "query_database", database="own", query="SELECT 1 AS one", timeout=20)
    text = await refused(s, "query_metrics", metrics=["revenue"], timeout=1000)
    assert "ceiling of 300 s" in text, text


async def test_iso_dates_bind_to_date_columns_keys_show_and_show_and_explain_run(
    s: ClientSession, pg: pg_server.Postgres
) -> None:
    text = await call(
        s,
        "query_database",
        database="own",
        query="SELECT count(*) AS n FROM sales WHERE sold_on >= $1",
        params=["2025-02-01"],
    )
    assert text.rstrip().endswith("\n4"), text
    text = await refused(
        s, "query_database", database="own", query="SELECT count(*) FROM sales WHERE sold_on >= $1", params=["soon"]
    )
    assert "parameter $1 is used as date" in text, text
    schema = (await s.read_resource("db://own/schema")).contents[0].text  # type: ignore[union-attr]
    assert "Primary key: id" in schema and "Foreign key: customer_id → customers(id)" in schema, schema
    text = await call(s, "query_database", database="own", query="SHOW timezone;")
    assert "TimeZone" in text, text
    text = await call(s, "query_database", database="own", query="-- the plan\nEXPLAIN SELECT * FROM sales;")
    assert "Seq Scan on sales" in text, text
    # EXPLAIN ANALYZE runs its statement: the statement is vetted like any other
    text = await refused(
        s, "query_database", database="own", query="EXPLAIN ANALYZE SELECT pg_terminate_backend(pg_backend_pid())"
    )
    assert "FUNCTION_NOT_ALLOWED" in text and "pg_backend_pid" in text, text
    text = await refused(s, "query_database", database="own", query="SELECT 1; SELECT 2;")
    assert "ONE_STATEMENT" in text, text
    # a DO block ran (the driver runs a statement without rows outside COPY) and EXPLAIN cannot vet it: it could
    # end every other session of the role. A statement runs only once its plan was read; DO and CALL are refused.
    with pg.connect("analyst", "own") as victim, victim.cursor() as cur:
        for statement in (
            "DO $$ BEGIN PERFORM pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
            "AND usename = 'analyst'; END $$",
            "CALL nothing()",
        ):
            text = await refused(s, "query_database", database="own", query=statement)
            assert "NOT_A_QUERY" in text, text
        text = await refused(s, "query_database", database="own", query="SET statement_timeout = 0")
        assert "SQL_SYNTAX" in text, text  # no plan: it does not run
        cur.execute("SELECT 1")
        assert cur.fetchall() == [(1,)]  # the victim's session lives


@pytest.mark.slow  # the analysis re-run from the shell, its script as a process (~5 s; the fast tier is full)
async def test_a_saved_analysis_reruns_from_the_shell_with_its_configuration(
    s: ClientSession, pg: pg_server.Postgres, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ArrowInvalid crash (sum(x)/100.0, round(), avg() on NUMERIC) and the ignored --config, and a step that
    exported a file (saving replays it: the file now exists)."""
    await call(
        s,
        "query_database",
        database="own",
        query="SELECT sum(price) AS revenue, sum(price) / 100.0 AS hundredths, round(avg(ratio), 2) AS mean_ratio "
        "FROM sales WHERE sold_on >= DATE '2025-02-01'",
        output_level="brief",
    )
    await call(s, "run_python", code="import pandas as pd\nexport(pd.DataFrame({'a': [1]}), 'own/marker.csv')")
    text = await call(s, "save_analysis", name="own-review", steps="last:2", parameters={"since": "2025-02-01"})
    assert "Saved analysis own-review" in text, text
    assert (ws / "exports" / "own" / "marker.csv").is_file()
    config = tmp_path / "own.yaml"
    config.write_text(yaml.safe_dump({"databases": {"own": {"url": _own_url(pg)}}}))
    monkeypatch.setenv("OWN_PASSWORD", PASSWORD)
    bare = ba("analyses", "run", "own-review", workspace=ws)
    assert bare.returncode == 2 and "database 'own'" in bare.stdout and "--config" in bare.stdout, bare.stdout
    out = tmp_path / "run"
    done = ba("analyses", "run", "own-review", "--config", str(config), "--out", str(out), workspace=ws)
    assert done.returncode == 0 and re.search(r"^s1_table \(.*\): same$", done.stdout, re.M), done.stdout + done.stderr
    script = ws / "analyses" / "own-review" / "analysis.py"
    env = {"PATH": "/usr/bin:/bin", "OWN_PASSWORD": PASSWORD, "HOME": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, str(script), "--config", str(config), "--since", "2025-03-01", "--out", str(tmp_path / "r2")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert run.returncode == 0 and re.search(r"^s1_table \(.*\): changed", run.stdout, re.M), run.stdout + run.stderr


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server that records each request (a search provider that must not be asked)."""
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()

        do_POST = do_GET

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", hits
    finally:
        server.shutdown()


def test_doctor_network_leaves_a_disabled_web_search_alone(ws: Path, recorder: tuple[str, list[str]]) -> None:
    url, hits = recorder
    env = {"BA_MCP_WEB__SEARCH__DUCKDUCKGO__ENDPOINT": url, "BA_MCP_TOOLS__WEB_SEARCH__ENABLED": "false"}
    done = ba("doctor", "--network", workspace=ws, env=env)
    assert "web search" in done.stdout and "disabled" in done.stdout and hits == [], done.stdout
    ba("doctor", "--network", workspace=ws, env={"BA_MCP_WEB__SEARCH__DUCKDUCKGO__ENDPOINT": url})
    assert hits, "with web search on, --network asks the provider (the look-alike)"


@pytest.mark.slow  # it starts servers of its own, as a host does
def test_one_configuration_for_every_host(
    pg: pg_server.Postgres, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """install claude-desktop carries the variables the configuration's databases name; without them the entry
    would fail at start (Claude Desktop passes little of the environment)."""
    config = tmp_path / "mine.yaml"
    config.write_text(yaml.safe_dump({"databases": {"own": {"url": _own_url(pg)}}}))
    monkeypatch.setenv("OWN_PASSWORD", PASSWORD)
    done = ba("install", "claude-desktop", "--print", "--config", str(config), workspace=ws)
    assert done.returncode == 0, done.stderr
    entry = json.loads(done.stdout)["mcpServers"]["ba-mcp"]
    assert entry["env"]["OWN_PASSWORD"] == PASSWORD and "OWN_PASSWORD" in done.stderr, done.stderr
    assert "--config" in entry["args"] and str(config.resolve()) in entry["args"]
    monkeypatch.delenv("OWN_PASSWORD")
    started = subprocess.run(  # as Claude Desktop starts it: the entry's command, arguments and variables only
        [entry["command"], *entry["args"]],
        input="",
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **entry["env"]},
        timeout=60,
    )
    assert started.returncode == 0 and "invalid configuration" not in started.stderr, started.stderr
    bare = subprocess.run(  # the look-alike: the same entry without the variable fails at start, naming it
        [entry["command"], *entry["args"]],
        input="",
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **{k: v for k, v in entry["env"].items() if k != "OWN_PASSWORD"}},
        timeout=60,
    )
    assert bare.returncode != 0 and "OWN_PASSWORD is not set" in bare.stderr, bare.stderr


@pytest.mark.slow  # it starts servers of its own, as a host does
async def test_a_projects_ba_mcp_yaml_configures_the_server_started_there(
    pg: pg_server.Postgres, ws: Path, tmp_path: Path
) -> None:
    """Where Claude Code starts the plugin's server: the project folder, whose ba-mcp.yaml is read — whole once the
    user approved it (its database names ${OWN_PASSWORD}: unapproved, a project file expands no variable)."""
    from ba_mcp.settings import trust_project

    project = tmp_path / "project"
    project.mkdir()
    (project / "ba-mcp.yaml").write_text(yaml.safe_dump({"databases": {"own": {"url": _own_url(pg)}}}))
    trust_project(project / "ba-mcp.yaml")  # the user's configuration folder: XDG_CONFIG_HOME, the server's too
    base = sandbox_params(ws, OWN_PASSWORD=PASSWORD)
    params = StdioServerParameters(command=base.command, args=base.args, env=base.env, cwd=str(project))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool(
            "query_database", {"database": "own", "query": "SELECT count(*) AS n FROM sales"}
        )
        assert not result.is_error and text_of(result).rstrip().endswith("\n6"), text_of(result)
        tool = next(t for t in (await session.list_tools()).tools if t.name == "query_database")
        assert "own (PostgreSQL)" in (tool.description or ""), tool.description


def test_a_metric_defined_twice_names_both_places() -> None:
    from ba_mcp.metrics.load import validate_files

    model = "name: {m}\ndatasets:\n  - {{name: {d}, source: demo.orders, fields: [{{name: x}}]}}\nmetrics:\n"
    model += "  - {{name: revenue, expression: SUM({d}.x)}}\n"
    one, two = model.format(m="a", d="t"), model.format(m="b", d="u")
    _, problems = validate_files([("one.yml", one), ("two.yml", two)], {"demo": "duckdb"})
    assert any(
        "metric revenue is defined twice: here and at one.yml:5" in p and p.startswith("two.yml:5") for p in problems
    ), problems


@pytest.mark.slow  # it starts servers of its own, as a host does
async def test_load_file_honours_the_read_limit(ws: Path) -> None:
    (ws / "uploads" / "wide.csv").write_text("a,b\n" + "".join(f"{i},{i * 2}\n" for i in range(2000)))
    params = sandbox_params(ws, BA_MCP_SANDBOX__ALLOWED_IMPORTS="*", BA_MCP_FORMATS__MAX_FILE_BYTES="4096")
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("run_python", {"code": "load_file('upload_wide')"})
        assert result.is_error or "over the server's read limit" in text_of(result), text_of(result)
        assert "formats.max_file_bytes" in text_of(result) and "nrows" in text_of(result), text_of(result)
        result = await session.call_tool("run_python", {"code": "len(load_file('upload_wide', nrows=5))"})
        assert not result.is_error and "5" in text_of(result), text_of(result)
