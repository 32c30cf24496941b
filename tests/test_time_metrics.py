"""Issue 37: metrics over time, checked against a hand-computed trap database on DuckDB and on the run's
PostgreSQL — each metric's own date under a grain, distinct counts through one-to-many paths, window functions
refused by validation, and the six kinds of time intelligence (period over period, to-date with a fiscal year,
running and rolling, share of total, semi-additive balances, conversion).

Every expected number below is worked out by hand from ``TABLES`` (the comments say how)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, stdio_client

from ba_mcp.errors import ToolFailure
from ba_mcp.metrics.compile import Query, compile_query
from ba_mcp.metrics.load import load_model, validate_files
from tests import background, pg_server
from tests.conftest import in_process, make_workspace, stdio_params, text_of
from tests.trap import TABLES

pytestmark = pytest.mark.anyio


def _common(**data: Any) -> str:
    import json

    return "[{vendor_name: COMMON, data: '" + json.dumps(data) + "'}]"


MODEL = f"""
name: trap
datasets:
  - name: customers
    source: {{db}}.{{schema}}.customers
    primary_key: [id]
    fields: [{{name: id}}, {{name: region, dimension: {{}}}}]
  - name: orders
    source: {{db}}.{{schema}}.orders
    primary_key: [id]
    fields:
      - {{name: id}}
      - {{name: customer_id}}
      - {{name: order_date, dimension: {{is_time: true}}}}
      - {{name: amount}}
  - name: order_lines
    source: {{db}}.{{schema}}.order_lines
    primary_key: [id]
    fields: [{{name: id}}, {{name: order_id}}, {{name: product_id}}, {{name: qty}}]
  - name: products
    source: {{db}}.{{schema}}.products
    primary_key: [id]
    fields: [{{name: id}}, {{name: category, dimension: {{}}}}]
  - name: tickets
    source: {{db}}.{{schema}}.tickets
    primary_key: [id]
    fields: [{{name: id}}, {{name: customer_id}}, {{name: opened_at, dimension: {{is_time: true}}}}]
  - name: balances
    source: {{db}}.{{schema}}.balances
    primary_key: [account_id, as_of]
    fields:
      - {{name: account_id, dimension: {{}}}}
      - {{name: as_of, dimension: {{is_time: true}}}}
      - {{name: balance}}
  - name: visits
    source: {{db}}.{{schema}}.visits
    primary_key: [id]
    fields: [{{name: id}}, {{name: customer_id}}, {{name: visited_at, dimension: {{is_time: true}}}}]
relationships:
  - {{name: order_customer, from: orders, to: customers, from_columns: [customer_id], to_columns: [id]}}
  - {{name: line_order, from: order_lines, to: orders, from_columns: [order_id], to_columns: [id]}}
  - {{name: line_product, from: order_lines, to: products, from_columns: [product_id], to_columns: [id]}}
  - {{name: ticket_customer, from: tickets, to: customers, from_columns: [customer_id], to_columns: [id]}}
metrics:
  - {{name: revenue, expression: SUM(orders.amount)}}
  - {{name: ticket_count, expression: COUNT(tickets.id)}}
  - {{name: buyers, expression: COUNT(DISTINCT orders.customer_id)}}
  - {{name: avg_amount, expression: AVG(orders.amount)}}
  - {{name: revenue_last_year, expression: revenue, custom_extensions: {_common(offset_window="1 year")}}}
  - {{name: revenue_prev_month, expression: revenue, custom_extensions: {_common(offset_window="1 month")}}}
  - {{name: revenue_change_yoy, expression: revenue - revenue_last_year}}
  - {{name: revenue_growth_yoy, expression: revenue / revenue_last_year - 1}}
  - {{name: revenue_ytd, expression: revenue, custom_extensions: {_common(cumulative={"grain_to_date": "year"})}}}
  - name: revenue_fytd
    expression: revenue
    custom_extensions: {_common(cumulative={"grain_to_date": "year", "fiscal_year_start_month": 4})}
  - {{name: revenue_qtd, expression: revenue, custom_extensions: {_common(cumulative={"grain_to_date": "quarter"})}}}
  - {{name: revenue_running, expression: revenue, custom_extensions: {_common(cumulative={})}}}
  - {{name: revenue_3m, expression: revenue, custom_extensions: {_common(cumulative={"window": "3 months"})}}}
  - {{name: revenue_share, expression: revenue, custom_extensions: {_common(share={"of": ["customers.region"]})}}}
  - {{name: revenue_share_all, expression: revenue, custom_extensions: {_common(share={"of": "all"})}}}
  - name: balance
    expression: SUM(balances.balance)
    custom_extensions: {
    _common(
        non_additive_dimension={
            "name": "balances.as_of",
            "window_choice": "max",
            "window_groupings": ["balances.account_id"],
        }
    )
}
  - name: visit_to_order
    expression: COUNT(DISTINCT visits.customer_id)
    custom_extensions: {
    _common(
        conversion={
            "base_entity": "visits.customer_id",
            "base_time": "visits.visited_at",
            "conversion_entity": "orders.customer_id",
            "conversion_time": "orders.order_date",
            "window": "30 days",
        }
    )
}
"""

Run = Callable[[str], list[tuple[Any, ...]]]


def model_text(schema: str) -> str:
    return MODEL.replace("{db}", "trap").replace("{schema}", schema)


def _duckdb(folder: Path, close: bool = False) -> tuple[Any, Run]:
    import duckdb

    path = folder / "trap.duckdb"
    con = duckdb.connect(str(path))
    for name, (columns, rows) in TABLES.items():
        con.execute(f"CREATE TABLE {name} ({columns.replace('text', 'VARCHAR')})")
        con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    if close:
        con.close()
    model = load_model([("trap.yml", model_text("main"))], {"trap": "duckdb"})
    return model, lambda sql: con.execute(sql).fetchall()


def _postgres() -> tuple[Any, Run]:
    pg = pg_server.running()
    if not pg.sql("SELECT count(*) FROM pg_database WHERE datname = 'trap'", database="postgres")[0][0]:
        pg.sql("CREATE DATABASE trap OWNER owner", database="postgres")
        statements = []
        for name, (columns, rows) in TABLES.items():
            statements.append(f"CREATE TABLE {name} ({columns})")
            values = ", ".join("(" + ", ".join(repr(v) for v in row) + ")" for row in rows)
            statements.append(f"INSERT INTO {name} VALUES {values}")
        pg.sql(*statements, role="owner", database="trap")
    model = load_model([("trap.yml", model_text("public"))], {"trap": "postgres"})
    return model, lambda sql: pg.sql(sql, role="analyst", database="trap")


def _spark() -> tuple[Any, Run]:
    from tests import spark_server

    why = spark_server.available()
    if why:  # never a silent skip (as tests/test_spark.py)
        pytest.fail(why)
    state = background.wait("spark")
    if "error" in state:
        pytest.fail(f"the run's Spark Connect did not start: {state['error']}")
    model = load_model([("trap.yml", model_text("trap"))], {"trap": "spark"})
    cursor = _spark_cursor(state["url"])

    def run(sql: str) -> list[tuple[Any, ...]]:
        cursor.execute(sql)
        return list(cursor.fetchall())

    return model, run


_SPARK: dict[str, Any] = {}  # url -> (connection, cursor): one Spark session for the module's queries


def _spark_cursor(url: str) -> Any:
    """One Spark session for the module's queries (each new connection is a session: a second of its own)."""
    import adbc_driver_manager.dbapi as dbapi
    import adbc_driver_spark

    if url not in _SPARK:
        con = dbapi.connect(driver=adbc_driver_spark._driver_path(), db_kwargs={"uri": url}, autocommit=True)
        _SPARK[url] = (con, con.cursor())
    return _SPARK[url][1]


@pytest.fixture(scope="module", autouse=True)
def _close_spark() -> Any:
    yield
    for con, cursor in _SPARK.values():
        cursor.close()
        con.close()
    _SPARK.clear()


@pytest.fixture(
    params=[
        "duckdb",
        pytest.param("postgres", marks=pytest.mark.slow),  # PostgreSQL and Spark: servers of their own
        pytest.param("spark", marks=[pytest.mark.spark, pytest.mark.slow]),
    ]
)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Any, Run]:
    if request.param == "postgres":
        if not pg_server.available():
            pytest.skip("PostgreSQL binaries are not installed")
        return _postgres()
    if request.param == "spark":
        return _spark()
    return _duckdb(tmp_path)


def plain(value: Any) -> Any:
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()[:10]
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return round(float(value), 6)
    if isinstance(value, str):
        try:
            return round(float(value), 6)
        except ValueError:
            return value
    return value


def ask(engine: tuple[Any, Run], metrics: list[str], **query: Any) -> list[tuple[Any, ...]]:
    model, run = engine
    assert not [w for w in model.warnings if "trap.yml" in w], model.warnings
    compiled = compile_query(model, Query(metrics=metrics, **query))
    return [tuple(plain(v) for v in row) for row in run(compiled.sql)]


def test_two_metrics_with_dates_of_their_own_each_count_by_their_own(engine: tuple[Any, Run]) -> None:
    """Revenue by order date (2024: 100+200+50; 2025: 150+300+40+60) and tickets by their opening date (2024: 2,
    2025: 3) — whichever comes first (it was 5 tickets as 8, or revenue by the tickets' dates)."""
    want = [("2024-01-01", 350.0, 2.0), ("2025-01-01", 550.0, 3.0)]
    assert ask(engine, ["revenue", "ticket_count"], time_grain="year") == want
    flipped = ask(engine, ["ticket_count", "revenue"], time_grain="year")
    assert flipped == [(t, b, a) for t, a, b in want]


def test_distinct_customers_by_category_through_a_one_to_many_path(engine: tuple[Any, Run]) -> None:
    """orders → order_lines → products: chairs are on orders 1, 2, 3, 6, 7 (customers 1, 2, 3), desks on 1, 4, 5
    (customers 1, 2). Revenue stays each order once per category (chairs 100+200+50+40+60)."""
    assert ask(engine, ["buyers"], dimensions=["products.category"]) == [("chairs", 3.0), ("desks", 2.0)]
    assert ask(engine, ["revenue"], dimensions=["products.category"]) == [("chairs", 450.0), ("desks", 550.0)]
    with pytest.raises(ToolFailure) as refused:
        ask(engine, ["avg_amount"], dimensions=["products.category"])
    assert refused.value.code == "UNSAFE_REAGGREGATION" and "the relationship line_order" in refused.value.message
    assert "many-to-many" not in refused.value.message and "bridge" not in refused.value.message


def test_validation_refuses_a_window_function_naming_file_and_line() -> None:
    text = "name: w\ndatasets:\n  - {name: t, source: demo.orders, fields: [{name: x}]}\nmetrics:\n"
    text += "  - {name: lagged, expression: LAG(SUM(t.x)) OVER (ORDER BY 1)}\n"
    _, problems = validate_files([("w.yml", text)], {"demo": "duckdb"})
    assert any(p.startswith("w.yml:5: metric lagged") and "window function" in p for p in problems), problems


def test_period_over_period(engine: tuple[Any, Run]) -> None:
    """2025 against 2024: 550 vs 350, a change of 200, +57.14 %; a month against the one before it, NULL where
    that month had no orders (2025-01 after 2024-12), never the row before it."""
    rows = ask(
        engine,
        ["revenue", "revenue_last_year", "revenue_change_yoy", "revenue_growth_yoy"],
        time_grain="year",
    )
    assert rows == [("2024-01-01", 350.0, None, None, None), ("2025-01-01", 550.0, 350.0, 200.0, 0.571429)]
    rows = ask(engine, ["revenue", "revenue_prev_month"], time_grain="month")
    assert rows == [
        ("2024-01-01", 100.0, None),
        ("2024-02-01", 250.0, 100.0),
        ("2025-01-01", 150.0, None),
        ("2025-02-01", 300.0, 150.0),
        ("2025-03-01", 40.0, 300.0),
        ("2025-04-01", 60.0, 40.0),
    ]


def test_to_date_with_a_fiscal_year_from_april(engine: tuple[Any, Run]) -> None:
    """Year to date restarts in January; the fiscal year from April restarts in April (2025-04: 60 alone, while
    the calendar year keeps adding: 550); quarter to date restarts in April too."""
    rows = ask(engine, ["revenue_ytd", "revenue_fytd", "revenue_qtd"], time_grain="month")
    assert rows == [
        ("2024-01-01", 100.0, 100.0, 100.0),
        ("2024-02-01", 350.0, 350.0, 350.0),
        ("2025-01-01", 150.0, 150.0, 150.0),
        ("2025-02-01", 450.0, 450.0, 450.0),
        ("2025-03-01", 490.0, 490.0, 490.0),
        ("2025-04-01", 550.0, 60.0, 60.0),
    ]


def test_running_and_rolling_totals(engine: tuple[Any, Run]) -> None:
    """From the start: 100, 350, 500, 800, 840, 900. Over three months (this and the two before): 2025-01 has
    no orders in 2024-11 or -12, so 150; 2025-04 is 300 + 40 + 60."""
    rows = ask(engine, ["revenue_running", "revenue_3m"], time_grain="month")
    assert rows == [
        ("2024-01-01", 100.0, 100.0),
        ("2024-02-01", 350.0, 350.0),
        ("2025-01-01", 500.0, 150.0),
        ("2025-02-01", 800.0, 450.0),
        ("2025-03-01", 840.0, 490.0),
        ("2025-04-01", 900.0, 400.0),
    ]


def test_share_of_region_and_of_all(engine: tuple[Any, Run]) -> None:
    """Within each year, north's and south's shares: 2024 300/350 and 50/350; 2025 450/550 and 100/550. Of all:
    north 750/900, south 150/900."""
    rows = ask(engine, ["revenue_share"], dimensions=["customers.region"], time_grain="year")
    assert rows == [
        ("north", "2024-01-01", 0.857143),
        ("north", "2025-01-01", 0.818182),
        ("south", "2024-01-01", 0.142857),
        ("south", "2025-01-01", 0.181818),
    ]
    assert ask(engine, ["revenue_share_all"], dimensions=["customers.region"]) == [
        ("north", 0.833333),
        ("south", 0.166667),
    ]


def test_a_balance_is_its_last_value_in_the_period_summed_over_accounts(engine: tuple[Any, Run]) -> None:
    """January: a1's last balance 120 (the 31st) + a2's 50 (the 10th) = 170; February: 90 + 70 = 160; with no
    grain, each account's last: 90 + 70 = 160 — never the sum of every row (490)."""
    assert ask(engine, ["balance"], time_grain="month") == [("2025-01-01", 170.0), ("2025-02-01", 160.0)]
    assert ask(engine, ["balance"]) == [(160.0,)]
    rows = ask(engine, ["balance"], dimensions=["balances.account_id"], time_grain="month")
    assert rows == [
        ("a1", "2025-01-01", 120.0),
        ("a1", "2025-02-01", 90.0),
        ("a2", "2025-01-01", 50.0),
        ("a2", "2025-02-01", 70.0),
    ]


def test_conversion_within_a_window(engine: tuple[Any, Run]) -> None:
    """January's visitors 1, 2, 3: customer 1 ordered 14 days later (within 30), 2 after 38 days, 3 after 44 —
    one of three. February's visitor 1 ordered before, not after: none."""
    assert ask(engine, ["visit_to_order"], time_grain="month") == [("2025-01-01", 0.333333), ("2025-02-01", 0.0)]


async def test_time_intelligence_through_query_metrics_in_a_session(tmp_path: Path) -> None:
    """Through the real server and pipeline, in process (the stdio transport is tested in files of its own)."""
    ws = make_workspace(tmp_path)
    _duckdb(ws, close=True)
    (ws / "metrics").mkdir()
    (ws / "metrics" / "trap.yml").write_text(model_text("main"))
    async with in_process(ws, None, BA_MCP_DATABASES__TRAP__PATH=str(ws / "trap.duckdb")) as s:
        result = await s.call_tool(
            "query_metrics",
            {
                "metrics": ["revenue", "revenue_last_year", "revenue_growth_yoy"],
                "time_grain": "year",
                "output_level": "full",
            },
        )
        text = text_of(result)
        assert not result.is_error and "2025-01-01,550,350,0.571428571428571" in text, text
        assert "revenue_last_year = offset_window of revenue (window: 1 year)" in text, text
        catalog = (await s.read_resource("metrics://catalog")).contents[0].text  # type: ignore[union-attr]
        assert "revenue_ytd" in catalog and "visit_to_order" in catalog, catalog


# -- dbt's semantic models, compiled by MetricFlow -------------------------------------------------------------


def _dbt_build(folder: Path) -> tuple[Path, dict[str, str]]:
    """tests/dbt_shop (a dbt project: semantic models, simple, ratio, derived-with-offset and cumulative metrics)
    built into a DuckDB file with dbt-duckdb; ``dbt parse`` writes target/semantic_manifest.json."""
    import os
    import shutil
    import subprocess
    import sys

    project = folder / "tiny_shop"
    shutil.copytree(Path(__file__).parent / "dbt_shop", project)
    (project / "profiles.yml").write_text(
        f"tiny:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n      path: {folder / 'shop.duckdb'}\n"
    )
    env = {**os.environ, "DBT_PROFILES_DIR": str(project), "DO_NOT_TRACK": "1", "DBT_SEND_ANONYMOUS_USAGE_STATS": "0"}
    for command in ("run", "parse"):
        done = subprocess.run(
            [str(Path(sys.executable).with_name("dbt")), command], cwd=project, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout[-2000:]
    return project, env


def _mf(project: Path, env: dict[str, str], metric: str, group_by: str) -> list[list[str]]:
    import csv
    import subprocess
    import sys

    out = project / "mf.csv"
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("mf")),
            "query",
            "--metrics",
            metric,
            "--group-by",
            group_by,
            "--csv",
            str(out),
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]
    return sorted(list(csv.reader(out.read_text().splitlines()))[1:])


@pytest.mark.slow  # dbt builds the project, MetricFlow's CLI answers: processes of their own
async def test_a_dbt_projects_metrics_answer_as_metricflow_does(tmp_path: Path) -> None:
    """By year: revenue 300 (2024: 100 + 200) and 450; growth over last year 2025: 450 - 300 = 150 (2024 has no
    year before, 2026 no revenue: NULL); revenue per order by region: north (orders 1, 3) 250 / 2, south 500 / 2.
    The cumulative metric, whose period semantics are MetricFlow's own, equals `mf query`."""
    import csv
    import io

    project, env = _dbt_build(tmp_path)
    ws = make_workspace(tmp_path)
    params = stdio_params(
        ws,
        BA_MCP_DATABASES__SHOP__PATH=str(tmp_path / "shop.duckdb"),
        BA_MCP_METRICS__DBT=f'[{{"project": "{project}", "database": "shop"}}]',
        BA_MCP_METRICS__DEMO="false",
    )

    def rows(text: str) -> list[list[str]]:
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("Rows ("))
        body = [line for line in lines[start + 1 :] if line and not line.startswith(("Defined:", "Note:"))]
        return sorted(list(csv.reader(io.StringIO("\n".join(body))))[1:])

    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()

        async def ask(**args: Any) -> list[list[str]]:
            result = await s.call_tool("query_metrics", {**args, "output_level": "full"})
            assert not result.is_error, text_of(result)
            assert "(dbt, MetricFlow)" in text_of(result), text_of(result)
            return rows(text_of(result))

        assert await ask(metrics=["revenue"], time_grain="year") == [["2024-01-01", "300"], ["2025-01-01", "450"]]
        growth = await ask(metrics=["revenue_growth_yoy"], time_grain="year")
        # MetricFlow joins offsets through its time spine: 2026 (last year's 450, no revenue) is a row, NULL
        assert growth == [["2024-01-01", "NULL"], ["2025-01-01", "150"], ["2026-01-01", "NULL"]], growth
        assert await ask(metrics=["revenue_per_order"], dimensions=["customer__region"]) == [
            ["north", "125"],
            ["south", "250"],
        ]
        ours = await ask(metrics=["cumulative_revenue"], time_grain="month")
        catalog = (await s.read_resource("metrics://catalog")).contents[0].text  # type: ignore[union-attr]
        assert "Metrics on shop" in catalog and "revenue_growth_yoy" in catalog and "customer__region" in catalog
    theirs = _mf(project, env, "cumulative_revenue", "metric_time__month")
    assert len(ours) == len(theirs) and all(
        o[0] == t[0][:10] and abs(float(o[1]) - float(t[1])) < 1e-9 for o, t in zip(ours, theirs, strict=True)
    ), (ours[:3], theirs[:3])
