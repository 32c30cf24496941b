"""Issue 50: the analyst's day in the field, each item through a real MCP session the way the analyst met it.

- a conversation at the default level (no call asks for ``brief``) saves with conclusions and re-runs;
- ``dbt run`` on the served DuckDB file succeeds while a session is open, and the next ``query_metrics`` shows
  the rebuilt numbers (the slow tier: dbt builds the project).
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, stdio_client

from tests.conftest import in_process, make_workspace, stdio_params, text_of

pytestmark = pytest.mark.anyio

BY_REGION = (
    "SELECT region_name, round(sum(net_revenue), 2) AS revenue FROM order_facts "
    "WHERE status = 'completed' AND order_date >= DATE '2025-01-01' GROUP BY ALL ORDER BY revenue DESC"
)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("field"))


@pytest.fixture(scope="module")
async def s(ws: Path) -> AsyncIterator[ClientSession]:
    async with in_process(ws) as client:  # the real server and pipeline, in process
        yield client.session


async def ok(s: ClientSession, tool: str, **args: Any) -> str:
    result = await s.call_tool(tool, args)
    assert not result.is_error, text_of(result)
    return text_of(result)


def csv_rows(text: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Rows ("))
    skip = ("Defined:", "Note:", "[", "Numbers above")
    body = [line for line in lines[start + 2 :] if line and not line.startswith(skip)]
    return [line.split(",") for line in body]


async def test_a_conversation_at_the_default_level_saves_with_conclusions_and_re_runs(s: ClientSession) -> None:
    """Item 1: the table was shown whole (no artifact); its conclusions bind to the output by name and by the call
    id the conversation saw in ba://history; the re-run with an earlier period says which no longer hold."""
    shown = await ok(s, "query_database", query=BY_REGION)
    assert "artifact" not in shown.lower(), shown  # shown whole at the default level: the case that failed
    assert "Numbers above are rounded to 6 significant digits" in shown, shown  # money rounded: said (item 9)
    rows = csv_rows(shown)
    leader = rows[0][0]
    history = (await s.read_resource("ba://history")).contents[0].text  # type: ignore[union-attr]
    call = re.findall(r"call_\w+", history)[0]
    saved = await ok(
        s,
        "save_analysis",
        name="regions-2025",
        steps=["last:1"],
        parameters={"since": "2025-01-01"},
        conclusions=[
            {"text": f"{len(rows)} regions sold", "output": "s1_table", "rule": "count"},
            {
                "text": f"{leader} leads",
                "output": call,
                "rule": "rows",
                "key": "region_name",
                "where": [["revenue", ">=", float(rows[0][1]) - 0.01]],
            },
        ],
    )
    assert f"Conclusion recorded: “{leader} leads” (rows of s1_table = ['{leader}'])" in saved, saved
    again = await ok(s, "run_analysis", name="regions-2025")
    assert "All 2 conclusion(s) still hold." in again, again
    earlier = await ok(s, "run_analysis", name="regions-2025", parameters={"since": "2023-01-01"})
    assert (
        "1 of 2 conclusion(s) no longer hold." in earlier and f"NO LONGER HOLDS: “{leader} leads”" in earlier
    )  # more revenue since 2023: the leader's threshold moves


# -- dbt beside ba-mcp (slow: dbt builds the project) -----------------------------------------------------------


def _free(path: Path, within_s: float = 30.0) -> None:
    """Wait until a writer can open ``path`` (DuckDB's lock), as dbt does; fail if the server keeps it."""
    import duckdb

    deadline = time.monotonic() + within_s
    while True:
        try:
            duckdb.connect(str(path)).close()
            return
        except duckdb.IOException as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"the served file stays locked between calls: {exc}") from None
            time.sleep(0.1)


def _dbt_session(tmp_path: Path, **env: str) -> tuple[Path, dict[str, str], Any]:
    from tests.test_time_metrics import _dbt_build

    project, dbt_env = _dbt_build(tmp_path)
    ws = make_workspace(tmp_path)
    params = stdio_params(
        ws,
        BA_MCP_DATABASES__SHOP__PATH=str(tmp_path / "shop.duckdb"),
        BA_MCP_METRICS__DBT=f'[{{"project": "{project}", "database": "shop"}}]',
        **env,
    )
    return project, dbt_env, params


@pytest.mark.slow
async def test_dbt_run_succeeds_while_a_session_is_open_and_the_next_query_sees_it(tmp_path: Path) -> None:
    """Item 2: revenue by year is 300 and 450 (tests/dbt_shop); an order of 1,000 in 2025 is added to the model and
    ``dbt run`` rebuilds the file while the session stays open: 2025 becomes 1,450."""
    import os
    import subprocess
    import sys

    project, env, params = _dbt_session(tmp_path, BA_MCP_METRICS__DEMO="false")
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()

        async def by_year() -> list[list[str]]:
            return csv_rows(await ok(s, "query_metrics", metrics=["revenue"], time_grain="year", output_level="full"))

        assert await by_year() == [["2024-01-01", "300"], ["2025-01-01", "450"]]
        await ok(s, "query_database", database="shop", query="SELECT count(*) AS n FROM orders")
        model = project / "models" / "orders.sql"
        model.write_text(
            model.read_text().replace(
                "(4, 2, date '2025-02-10', 300.0)",
                "(4, 2, date '2025-02-10', 300.0),\n    (5, 1, date '2025-03-01', 1000.0)",
            )
        )
        _free(tmp_path / "shop.duckdb")
        done = subprocess.run(
            [str(Path(sys.executable).with_name("dbt")), "run"],
            cwd=project,
            env={**env, "PATH": os.environ["PATH"]},
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stdout[-2000:]  # the session is open: its engine holds no lock
        assert await by_year() == [["2024-01-01", "300"], ["2025-01-01", "1450"]]


@pytest.mark.slow
async def test_a_dbt_metric_says_what_it_means_its_period_rule_and_its_group_bys(tmp_path: Path) -> None:
    """Items 3, 4 and 6 on tests/dbt_shop (orders: 2024-01-10 100, 2024-02-05 200, 2025-01-15 150, 2025-02-10 300):
    the derived metric names its offset input, the two cumulative metrics read differently, revenue_ytd by month
    takes each month's first day (MetricFlow's period_agg: first) — February 2024 is 100 (January's order), not
    300 — and a Note says so; the catalog pages rather than cuts (a budget of 600 characters here), and every
    group-by name is found; the CLI and the doctor cover the dbt project."""
    from tests.conftest import ba

    project, _, params = _dbt_session(tmp_path, BA_MCP_METRICS__CATALOG_BUDGET_CHARS="600")
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()

        async def resource(uri: str) -> str:
            return (await s.read_resource(uri)).contents[0].text  # type: ignore[arg-type,union-attr]

        growth = await resource("metrics://revenue_growth_pct")
        assert "(revenue - rev_ly) / rev_ly; with revenue; rev_ly = revenue 1 year earlier (offset_window)" in growth
        assert "Group by: customer__region, metric_time (time_grain)" in growth, growth
        ytd, rolling = await resource("metrics://revenue_ytd"), await resource("metrics://revenue_3m")
        assert "to date from the start of each year (grain_to_date)" in ytd and "period_agg: first" in ytd, ytd
        assert "over the trailing 3 months (window)" in rolling and "period_agg: last" in rolling, rolling

        text = await ok(s, "query_metrics", metrics=["revenue_ytd"], time_grain="month", output_level="full")
        values = {row[0][:7]: row[1] for row in csv_rows(text)}
        assert values["2024-02"] == "100" and values["2024-03"] == "300" and values["2025-02"] == "150", values
        assert "Note: revenue_ytd is the value on each month's first day (MetricFlow's period_agg: first" in text
        daily = await ok(s, "query_metrics", metrics=["revenue_ytd"], time_grain="day", limit=3)
        assert "Note:" not in daily  # a day is its own first day

        pages, uri = [], "metrics://catalog"
        while True:
            page = await resource(uri)
            assert len(page) <= 600, page
            pages.append(page)
            follow = re.search(r"continued in (metrics://catalog/\d+)", page)
            if not follow:
                break
            uri = follow.group(1)
        catalog = "\n".join(pages)
        assert len(pages) > 1 and "customer__region" in catalog and "- north_revenue" in catalog, pages
        assert "net_revenue" in catalog  # the demo's metrics too: nothing is cut

        # item 9: a typo suggests the dbt project's names; plain SQL on a dbt metric is pointed to MetricFlow's
        # syntax; a name two models define is resolved aloud
        typo = await s.call_tool("query_metrics", {"metrics": ["revenue_ydt"], "time_grain": "month"})
        assert typo.is_error and "close names: revenue_ytd" in text_of(typo), text_of(typo)
        plain = await s.call_tool("query_metrics", {"metrics": ["revenue"], "where": ["customer__region = 'north'"]})
        assert plain.is_error and "{{ Dimension('customer__region') }} = 'north'" in text_of(plain), text_of(plain)
        (Path(params.env["BA_MCP_WORKSPACE"]) / "metrics").mkdir(exist_ok=True)
        mine = Path(params.env["BA_MCP_WORKSPACE"]) / "metrics" / "mine.yml"
        mine.write_text("name: mine\nmetrics:\n  - {name: revenue, expression: net_revenue}\n")
        both = await ok(s, "query_metrics", metrics=["revenue"], time_grain="year")
        assert "Note: revenue is also defined by" in both and "this is the dbt project's on shop" in both, both
        mine.unlink()

        # item 7: a dbt analysis takes its period as a parameter, a literal inside MetricFlow's filter
        since = "{{ TimeDimension('metric_time', 'day') }} >= '2025-01-01'"
        assert csv_rows(await ok(s, "query_metrics", metrics=["revenue"], time_grain="year", where=[since])) == [
            ["2025-01-01", "450"]
        ]
        saved = await ok(s, "save_analysis", name="dbt-since", steps=["last:1"], parameters={"since": "2025-01-01"})
        assert "since (date, default '2025-01-01')" in saved, saved
        again = await ok(s, "run_analysis", name="dbt-since", parameters={"since": "2024-01-01"})
        assert "rows 1 → 2; revenue total 450 → 750" in again, again

    env = {k: v for k, v in params.env.items() if k.startswith("BA_MCP_")}
    listed = ba("metrics", "list", workspace=Path(params.env["BA_MCP_WORKSPACE"]), env=env)
    assert listed.returncode == 0 and re.search(r"revenue_ytd\s+Revenue year to date\s+\[shop\]", listed.stdout)
    shown = ba("metrics", "show", "revenue_3m", workspace=Path(params.env["BA_MCP_WORKSPACE"]), env=env)
    assert "over the trailing 3 months (window)" in shown.stdout, shown
    doctor = ba("doctor", workspace=Path(params.env["BA_MCP_WORKSPACE"]), env=env)
    assert re.search(
        r"ok\s+dbt project tiny_shop\s+9 metric\(s\) on database shop, compiled by MetricFlow", doctor.stdout
    )
    (project / "target" / "semantic_manifest.json").unlink()
    doctor = ba("doctor", workspace=Path(params.env["BA_MCP_WORKSPACE"]), env=env)
    assert "run `dbt parse` in" in doctor.stdout, doctor.stdout


async def test_a_date_filter_chooses_the_periods_shown_not_the_history_an_offset_reads(
    s: ClientSession, ws: Path
) -> None:
    """Item 5, by hand from the demo (net revenue of completed orders, by month, as query_database sums it below):
    March and April 2024 are 344,453.14 and 422,459.56; January–March 2025 are 425,457.60 + 458,054.71 + 473,408.42
    = 1,356,920.73. Filtered to March–April 2025, last year's values and the year to date still read them."""
    (ws / "metrics").mkdir(exist_ok=True)
    (ws / "metrics" / "time.yml").write_text(
        "name: time\nmetrics:\n"
        "  - {name: net_revenue_ly, expression: net_revenue, custom_extensions: [{vendor_name: COMMON, data: "
        '\'{"offset_window": "1 year"}\'}]}\n'
        "  - {name: net_revenue_ytd, expression: net_revenue, custom_extensions: [{vendor_name: COMMON, data: "
        '\'{"cumulative": {"grain_to_date": "year"}}\'}]}\n'
    )
    months = await ok(
        s,
        "query_database",
        query="SELECT strftime(order_date, '%Y-%m') AS m, round(sum(net_revenue), 2) AS v FROM order_facts "
        "WHERE status = 'completed' AND year(order_date) IN (2024, 2025) GROUP BY ALL ORDER BY ALL",
        output_level="full",
    )
    by_month = {m: float(v) for m, v in csv_rows(months)}
    assert by_month["2024-03"] == 344453.14 and by_month["2024-04"] == 422459.56
    assert round(by_month["2025-01"] + by_month["2025-02"] + by_month["2025-03"], 2) == 1356920.73
    text = await ok(
        s,
        "query_metrics",
        metrics=["net_revenue", "net_revenue_ly", "net_revenue_ytd"],
        time_grain="month",
        where=["orders.order_date >= DATE '2025-03-01'", "orders.order_date < DATE '2025-05-01'"],
        output_level="full",
    )
    # full shows a double exactly (a sum of floats: 473408.42000000045); the answers are to the cent
    rows = [[row[0][:7], *(round(float(v), 2) for v in row[1:])] for row in csv_rows(text)]
    ytd_april = round(1356920.73 + by_month["2025-04"], 2)
    assert rows == [
        ["2025-03", by_month["2025-03"], 344453.14, 1356920.73],
        ["2025-04", by_month["2025-04"], 422459.56, ytd_april],
    ], text
    assert "Note: the time filter (orders.order_date >= DATE '2025-03-01'; " in text, text
    mixed = await s.call_tool(
        "query_metrics",
        {
            "metrics": ["net_revenue_ly"],
            "time_grain": "month",
            "where": ["orders.order_date >= DATE '2025-03-01' OR customers.segment = 'Consumer'"],
        },
    )
    assert mixed.is_error and "TIME_FILTER_MIXED" in text_of(mixed), text_of(mixed)
    (ws / "metrics" / "time.yml").unlink()


def test_the_metrics_catalog_pages_and_loses_no_line() -> None:
    """Item 6: 80 metrics and 120 dimensions in pages of 600 characters: every name on exactly one page."""
    from ba_mcp.metrics.catalog import catalog_text

    summary = {
        "metrics": [
            {"name": f"metric_{i}", "headline": f"what metric {i} counts", "database": "db"} for i in range(80)
        ],
        "dimensions": [f"entity_{i}__dimension_{i}" for i in range(120)],
    }
    first = catalog_text(summary, 600)
    count = int(re.search(r"page 1 of (\d+)", first).group(1))  # type: ignore[union-attr]
    pages = [first] + [catalog_text(summary, 600, n) for n in range(2, count + 1)]
    assert all(len(p) <= 600 for p in pages)
    text = "\n".join(pages)
    assert all(text.count(f"- metric_{i}:") == 1 for i in range(80))
    assert all(len(re.findall(rf"\bentity_{i}__dimension_{i}\b", text)) == 1 for i in range(120))
    with pytest.raises(Exception, match="page"):
        catalog_text(summary, 600, count + 1)


# -- item 7: typed parameters -------------------------------------------------------------------------------------


async def test_parameters_are_typed_checked_before_any_step_and_found_in_metrics_filters(
    s: ClientSession, ws: Path
) -> None:
    """A date inside a metrics filter is a parameter (the analysis takes its period), typed ``date``; a value that
    is no date is refused naming the parameter, from the conversation and from the shell, before any step."""
    import yaml

    from tests.conftest import ba

    first = await ok(
        s,
        "query_metrics",
        metrics=["net_revenue"],
        time_grain="month",
        where=["orders.order_date >= DATE '2025-10-01'"],
    )
    assert len(csv_rows(first)) == 3, first  # October to December 2025
    saved = await ok(s, "save_analysis", name="since-october", steps=["last:1"], parameters={"since": "2025-10-01"})
    assert "Parameters: since (date, default '2025-10-01')" in saved, saved
    manifest = yaml.safe_load((ws / "analyses" / "since-october" / "analysis.yaml").read_text())
    assert manifest["steps"][0]["metrics_query"]["where"] == ["orders.order_date >= DATE ${since}"], manifest
    later = await ok(s, "run_analysis", name="since-october", parameters={"since": "2025-12-01"})
    assert "rows 3 → 1" in later, later
    wrong = await s.call_tool("run_analysis", {"name": "since-october", "parameters": {"since": "notadate"}})
    assert wrong.is_error and "parameter since is of type date; 'notadate' is not one" in text_of(wrong)
    shell = ba("analyses", "run", "since-october", "--param", "since=2025-13-01", workspace=ws)
    assert shell.returncode == 2 and "parameter since is of type date; '2025-13-01' is not one" in shell.stderr


def test_only_the_occurrences_that_are_the_parameter_are_replaced() -> None:
    from ba_mcp.inside.params import code_placeholders, filter_placeholders, sql_placeholders

    sql = "SELECT round(avg(x), 4) AS r FROM t WHERE n > 4 AND k IN (1, 4) AND d >= DATE '2025-01-01' LIMIT 4"
    assert sql_placeholders(sql, {"n": 4, "since": "2025-01-01"})[0] == (
        "SELECT round(avg(x), 4) AS r FROM t WHERE n > $n AND k IN (1, $n) AND d >= CAST($since AS DATE) LIMIT $n"
    )
    assert sql_placeholders("SELECT round(x, 4) FROM t", {"digits": 4})[0] == "SELECT round(x, $digits) FROM t"
    code = "threshold = 4\nshown = df.round(4)\nflags = df[df.z > 4]\n"
    assert code_placeholders(code, {"t": 4})[0] == (
        'threshold = PARAMS["t"]\nshown = df.round(4)\nflags = df[df.z > PARAMS["t"]]\n'
    )
    metricflow = "{{ TimeDimension('metric_time', 'day') }} >= '2025-01-01'"
    assert filter_placeholders(metricflow, {"since": "2025-01-01", "grain": "day"}) == (
        "{{ TimeDimension('metric_time', 'day') }} >= ${since}",
        ["since"],
    )


def test_the_report_shows_rates_as_percentages_dates_by_grain_and_labels_for_people() -> None:
    """Item 8, the report: a return rate of 0.0425 reads 4.25 %, a month 2025-03 (not 2025-03-01 00:00:00),
    metric_time__month reads Month; 36 monthly labels are thinned so that none overlaps another."""
    import datetime as dt

    import pyarrow as pa

    from ba_mcp.analyses.report import chart, shaped

    months = [dt.datetime(2023 + i // 12, i % 12 + 1, 1) for i in range(36)]
    frame = pa.table(
        {
            "metric_time__month": months,
            "net_revenue": [1000.0 + i for i in range(36)],
            "return_rate": [0.0425] * 36,
        }
    )
    table = shaped(frame)
    assert table.headers == ["Month", "Net revenue", "Return rate"]
    assert table.rows[-1] == ["2025-12-01", "1,035", "4.25 %"], table.rows[-1]
    svg = chart(frame, "revenue")
    labels = re.findall(r'class="tick">(\d{4}-\d{2})</text>', svg)
    xs = [float(x) for x in re.findall(r'<text x="([\d.]+)" y="\d+" text-anchor="middle"', svg)]
    assert labels[0] == "2023-01" and len(labels) == len(xs) < 36
    assert min(b - a for a, b in itertools.pairwise(xs)) >= 7 * 7, xs  # 7 characters of ~7 px each


def test_validation_refuses_a_window_function_written_without_over() -> None:
    """Item 9: ``revenue / LAG(revenue) - 1`` failed only at query time; validation refuses it, naming the line."""
    from ba_mcp.metrics.load import validate_files

    text = "name: w\ndatasets:\n  - {name: t, source: demo.orders, fields: [{name: x}]}\nmetrics:\n"
    text += "  - {name: revenue, expression: SUM(t.x)}\n  - {name: growth, expression: revenue / LAG(revenue) - 1}\n"
    _, problems = validate_files([("w.yml", text)], {"demo": "duckdb"})
    assert any(p.startswith("w.yml:6: metric growth") and "window function" in p for p in problems), problems


# -- item 10: a model's day on a public benchmark ------------------------------------------------------------------


async def test_file_names_as_the_user_knows_them_resolve_and_one_column_name_serves_every_tool(
    s: ClientSession, ws: Path
) -> None:
    """A bare file name is the upload; a name with spaces is told its working id; a near miss names the file it
    probably meant; database="workspace" is where uploads are queried; a padded header reads the same in SQL and
    file_reader."""
    (ws / "uploads" / "test_ave.csv").write_text("a,num. calls abandoned \n1,2\n3,4\n")
    (ws / "uploads" / "beauty and the labor market.csv").write_text("x,y\n1,2\n")
    read = await ok(s, "file_reader", path="test_ave.csv", output_level="full")
    assert "column names trimmed of surrounding spaces, as SQL reads them: 'num. calls abandoned ' → " in read, read
    spaced = await s.call_tool("file_reader", {"path": "upload_beauty and the labor market"})
    assert spaced.is_error and "its id is upload_beauty_and_the_labor_market" in text_of(spaced)
    near = await s.call_tool("query_database", {"query": "SELECT * FROM upload_test_av"})
    assert near.is_error and "did you mean upload_test_ave (uploads/test_ave.csv)?" in text_of(near)
    summed = await ok(
        s, "query_database", database="workspace", query='SELECT sum("num. calls abandoned") AS n FROM upload_test_ave'
    )
    assert csv_rows(summed) == [["6"]], summed


@pytest.mark.slow
async def test_scikit_learn_is_importable_and_named(tmp_path: Path) -> None:
    """22 of the benchmark's 257 questions need it: a seeded split and a logistic regression, in the sandbox."""
    from tests.sandbox_common import sandbox_params

    code = (
        "from sklearn.linear_model import LogisticRegression\nfrom sklearn.model_selection import train_test_split\n"
        "import numpy as np\nrng = np.random.default_rng(0)\nX = rng.normal(size=(400, 3))\n"
        "y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)\n"
        "Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, random_state=42)\n"
        "print(len(Xte), LogisticRegression().fit(Xtr, ytr).score(Xte, yte) > 0.9)"
    )
    async with (
        stdio_client(sandbox_params(make_workspace(tmp_path))) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert "sklearn" in (tools["run_python"].description or "")
        result = await session.call_tool("run_python", {"code": code})
        assert not result.is_error and "100 True" in text_of(result), text_of(result)
