"""Issue 63 items 5 and 6: a saved analysis takes the engine's own parameters, and what it hands on is true.

Item 5: a ``save_analysis`` parameter binds a step's ``params`` entry (``$1``, ``?``, ``$name``) as well as a
literal in its SQL, so a PostgreSQL analysis written as docs/databases.md says (values in ``params``) is re-run for
another period (``run_analysis``, ``ba-mcp analyses run NAME --param``); the report's audit trail shows each
statement with the values it was bound to. Item 6: a key figure of a cut result (a top N, a page) says what it
covers — "top 10 customers only" — in the report, its total row and the "what changed" lines the view shows; a
bar chart's categories are named whole ("Superior Bicycles", never "Superior Bic").

The fast tier checks the pieces in process; the slow tier runs a real PostgreSQL 15 (tests/pg_server.py) through
the server over stdio and the CLI, every figure compared with the one PostgreSQL computes itself.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
import yaml
from mcp import ClientSession, stdio_client

from ba_mcp.analyses.manifest import plan
from ba_mcp.errors import ToolFailure
from tests import pg_server
from tests.conftest import ba, make_workspace, meta_of, stdio_params, text_of

TOP = (
    "-- spend by customer\n"
    "SELECT c.name AS customer_name, sum(o.amount) AS spend FROM orders o JOIN customers c ON c.id = o.customer_id "
    "WHERE o.ordered_at >= $1 AND o.ordered_at < $2 AND o.status = 'completed' GROUP BY 1 ORDER BY 2 DESC, 1 "
    "LIMIT 10"
)
WHOLE = (
    "-- spend in the period\n"
    "SELECT sum(amount) AS spend FROM orders WHERE ordered_at >= $1 AND ordered_at < $2 AND status = 'completed'"
)


def _place(kind: str, text: str, values: dict[str, Any]) -> tuple[str, list[str], dict[str, Any]]:
    """What the engine worker's ``placeholders`` operation answers (the same functions, in process)."""
    from ba_mcp.inside.params import code_cut, code_placeholders, sql_cut, sql_placeholders

    if kind == "sql":
        text, found = sql_placeholders(text, values)
        return text, found, sql_cut(text)
    text, found = code_placeholders(text, values)
    return text, found, code_cut(text)


def _record(sql: str, params: Any, call: str = "call_1") -> Any:
    prov = {"sql": sql, "params": params, "database": "shop", "wrote": [{"id": "artifact_aaaaaaaaaaaa"}]}
    return SimpleNamespace(
        call_id=call, tool="query_database", arguments={"query": sql, "params": params}, provenance=prov
    )


# -- item 5, the pieces ------------------------------------------------------------------------------------


def test_a_parameter_binds_the_params_entry_that_holds_its_value() -> None:
    p = plan(
        "a", "", [_record(TOP, ["2025-01-01", "2025-07-01"])], {"since": "2025-01-01", "until": "2025-07-01"}, _place
    )
    step = p.steps[0].manifest()
    assert step["binds"] == {1: "since", 2: "until"}, step
    assert step["sql"] == TOP  # the statement is the engine's own: nothing placed in its text
    assert p.parameters == {
        "since": {"type": "date", "default": "2025-01-01"},
        "until": {"type": "date", "default": "2025-07-01"},
    }
    # `?` (DuckDB, SQLite) the same; a number's text binds a number parameter, kept as text when run
    q = plan("b", "", [_record("SELECT * FROM t WHERE n > ? AND r = ?", ["40", "north"])], {"n": 40}, _place)
    assert q.steps[0].manifest()["binds"] == {1: "n"}
    # named params of the engine ($name with an object) by their key
    r = plan("c", "", [_record("SELECT * FROM t WHERE r = $region", {"region": "north"})], {"where": "north"}, _place)
    assert r.steps[0].manifest()["binds"] == {"region": "where"}


def test_a_value_in_neither_sql_nor_params_and_a_literal_beside_positional_params_are_refused_saying_why() -> None:
    with pytest.raises(ToolFailure) as missing:
        plan("a", "", [_record(TOP, ["2025-01-01", "2025-07-01"])], {"since": "2024-01-01"}, _place)
    assert "occurs in no step's SQL, params or code" in missing.value.message
    assert "params ($1, ?)" in missing.value.hint
    with pytest.raises(ToolFailure) as mixed:
        plan("a", "", [_record(TOP, ["2025-01-01", "2025-07-01"])], {"state": "completed"}, _place)
    assert "parameter state" in mixed.value.message and "written in the SQL of step s1" in mixed.value.message
    assert "as a params entry too ($3)" in mixed.value.hint, mixed.value.hint


def test_a_run_binds_its_values_where_the_saved_ones_were_and_the_trail_names_them() -> None:
    from ba_mcp.analyses.replay import bound_params, statement_values

    step = {
        "tool": "query_database",
        "sql": TOP,
        "params": ["2025-01-01", "2025-07-01"],
        "binds": {1: "since", 2: "until"},
    }
    values = {"since": "2025-03-01", "until": "2025-05-01"}
    assert bound_params(TOP, step["params"], step["binds"], values) == ["2025-03-01", "2025-05-01"]
    assert statement_values(step, values) == ["$1 = '2025-03-01' (since)", "$2 = '2025-05-01' (until)"]
    # an entry no parameter binds keeps its saved value; a number bound where text was saved stays text
    step = {"sql": "SELECT 1 WHERE n > ? AND r = ?", "params": ["40", "north"], "binds": {1: "n"}}
    assert bound_params(step["sql"], step["params"], step["binds"], {"n": 55}) == ["55", "north"]
    assert statement_values(step, {"n": 55}) == ["$1 = '55' (n)", "$2 = 'north'"]
    # a literal the save placed in the SQL ($since) is shown as the parameter it is
    step = {"sql": "SELECT 1 WHERE d >= CAST($since AS DATE)", "params": None}
    assert statement_values(step, {"since": "2025-02-01"}) == ["$since = '2025-02-01' (parameter)"]


# -- item 6, the pieces ------------------------------------------------------------------------------------


def test_what_cuts_a_statement_is_read_from_its_outermost_query() -> None:
    from ba_mcp.inside.params import sql_cut

    kept = "o.ordered_at >= $1 AND o.ordered_at < $2 AND o.status = 'completed'"
    assert sql_cut(TOP) == {"ordered": True, "limit": 10, "where": kept}
    assert sql_cut("SELECT a FROM t ORDER BY a LIMIT $1 OFFSET 20") == {"ordered": True, "limit": "$1", "offset": 20}
    assert sql_cut("SELECT a FROM t WHERE x = ? LIMIT ?") == {"limit": "?2", "where": "x = ?1"}
    assert sql_cut("WITH x AS (SELECT * FROM t ORDER BY a LIMIT 3) SELECT * FROM x") == {}  # the whole of x
    assert sql_cut("SELECT * FROM t ORDER BY a FETCH FIRST 5 ROWS ONLY") == {"ordered": True, "limit": 5}
    assert sql_cut(WHOLE) == {"where": "ordered_at >= $1 AND ordered_at < $2 AND status = 'completed'"}  # a filter
    assert sql_cut("SELECT region, sum(v) AS s FROM t GROUP BY 1 HAVING sum(v) > 10 -- big ones\n") == {
        "where": "having sum(v) > 10"
    }
    assert sql_cut("SELECT a FROM t WHERE x = 1 UNION ALL SELECT a FROM u") == {}  # no one filter is the result's
    assert sql_cut("SELECT * FROM (SELECT * FROM t WHERE a = 1) s") == {}  # what the outermost query keeps: all
    assert sql_cut("SELECT sum(v) FROM t") == {}


def test_what_cuts_a_python_steps_value_is_read_from_its_last_expression() -> None:
    from ba_mcp.inside.params import code_cut

    assert code_cut("x = load_artifact('a')\nx.groupby('v')['s'].sum().nlargest(10)") == {"limit": 10, "ordered": True}
    assert code_cut("df.sort_values('s', ascending=False).head(7).round(0)") == {"limit": 7, "ordered": True}
    assert code_cut("df.head(10).sort_values('s')") == {"limit": 10, "ordered": False}  # the first 10, sorted
    assert code_cut("df.iloc[:20]") == {"limit": 20, "ordered": False}
    assert code_cut("df.sum()") == {} and code_cut("print(df.head(3))") == {}
    # a filter keeps part of the rows: a boolean mask, .loc[mask, cols], .query("…") — a column pick is none
    assert code_cut("df[df['region'] == 'north']['s'].sum()") == {"where": "df['region'] == 'north'"}
    assert code_cut('df.query("amount > 100").groupby("v").sum()') == {"where": "amount > 100"}
    assert code_cut("df.loc[(df.a > 1) & ~df.b.isna(), ['a']].head(3)") == {
        "limit": 3,
        "ordered": False,
        "where": "(df.a > 1) & ~df.b.isna()",
    }
    assert code_cut("df[['a', 'b']].sum()") == {} and code_cut("df['a'].sum()") == {}
    # a parameter for N: the save places PARAMS["top"], the cut names it
    record = SimpleNamespace(
        call_id="call_2", tool="run_python", arguments={"code": "df.nlargest(5, 's')"}, provenance={"wrote": []}
    )
    step = plan("a", "", [record], {"top": 5}, _place).steps[0].manifest()
    assert step["code"] == "df.nlargest(PARAMS[\"top\"], 's')" and step["cut"] == {"limit": "$top", "ordered": True}


def _shown(frame: pa.Table, covers: str = "", title: str = "spend by customer") -> Any:
    from ba_mcp.analyses.replay import _measures
    from ba_mcp.analyses.report import Shown

    totals, _ = _measures(frame)
    facts = {"name": "s1_table", "kind": "table", "sha256": "0" * 64, "rows": frame.num_rows, "totals": totals}
    if covers:
        facts["covers"] = covers
    step = {
        "id": "s1",
        "tool": "query_database",
        "sql": f"-- {title}\nSELECT 1",
        "params": ["2013-01-01"],
        "binds": {1: "since"},
    }
    return Shown("s1_table", "table", step, "same", "s1_table.csv", frame=frame, expected=dict(facts), facts=facts)


def test_a_key_figure_of_a_top_n_says_what_it_covers_and_the_trail_its_values() -> None:
    from ba_mcp.analyses.measures import covers
    from ba_mcp.analyses.report import key_figures, render_html, render_markdown

    vendors = [f"Superior Bicycles {i}" for i in range(10)]
    frame = pa.table({"vendor_name": vendors, "spend": pa.array([Decimal(100 * (10 - i)) for i in range(10)])})
    said = covers(10, True, 0, frame)
    assert said == "top 10 vendors only"
    assert covers(10, False, 20, frame) == "vendors 21–30 only"
    assert covers(3, True, 0, pa.table({"category": ["a", "b", "c"], "n": [1, 2, 3]})) == "top 3 categories only"
    cut = _shown(frame, said)
    [(label, value, moved)] = key_figures([cut])
    assert (
        moved == "unchanged" and value == "5,500" and label == "spend of the top 10 vendors only (spend by customer)"
    ), label
    [(whole_label, _, _)] = key_figures([_shown(frame)])
    assert whole_label == "spend (spend by customer)"  # a result nothing cut is the whole: no qualifier
    manifest = {"name": "vendors", "steps": [cut.step]}
    values = {"since": "2014-01-01"}
    md = render_markdown(manifest, values, [cut], [], 1.0, False)
    assert "**5,500** spend of the top 10 vendors only" in md, md
    assert "Total of the top 10 vendors only" in md
    assert "with $1 = '2014-01-01' (since)" in md  # this run's value, not the saved one
    page = render_html(manifest, values, [cut], [], 1.0, False)
    assert "with $1 = &#x27;2014-01-01&#x27; (since)" in page
    # the bar chart names every vendor whole
    for vendor in vendors:
        assert f">{vendor}</text>" in page, vendor


def test_a_filter_is_labelled_with_what_it_keeps_and_a_cut_saved_before_as_it_was() -> None:
    from ba_mcp.analyses.replay import Output, Replay, with_values

    frame = pa.table({"vendor_name": [f"v{i}" for i in range(10)], "spend": list(range(10))})

    def labelled(cut: dict[str, Any] | None, bound: Any, values: dict[str, Any]) -> str:
        run = SimpleNamespace(outputs=[Output("s1", "s1_table", "table", "a", "0" * 64, rows=10)], values=values)
        Replay._covers(run, cut, bound, frame)  # type: ignore[arg-type]
        return run.outputs[-1].covers

    kept = "o.ordered_at >= $1 AND o.status = 'completed'"
    assert labelled({"where": kept}, ["2014-01-01"], {}) == (
        "rows where o.ordered_at >= '2014-01-01' AND o.status = 'completed'"
    )
    assert labelled({"limit": 10, "ordered": True, "where": "x = ?1"}, [5], {}) == (
        "top 10 vendors only, of the rows where x = 5"
    )
    assert labelled({"where": "df['region'] == PARAMS['region']"}, {"region": "north"}, {"region": "north"}) == (
        "rows where df['region'] == 'north'"
    )
    # a manifest saved before filters were read: its cut has no "where" (or there is no cut): labelled as it was
    assert labelled({"limit": 10, "ordered": True}, None, {}) == "top 10 vendors only"
    assert labelled(None, None, {}) == "" and labelled({}, None, {}) == ""
    assert with_values("d >= $since AND n < $9", {"since": "2025-01-01"}, {}) == "d >= '2025-01-01' AND n < $9"


def test_what_changed_names_a_cut_results_total_as_the_cut() -> None:
    from ba_mcp.analyses.manifest import describe_change

    before = {"sha256": "a", "kind": "table", "rows": 10, "totals": {"spend": 100.0}, "covers": "top 10 vendors only"}
    after = {**before, "sha256": "b", "totals": {"spend": 120.0}}
    line = describe_change(before, after, same_parameters=False)
    assert line.startswith("changed: spend total of the top 10 vendors only 100 → 120"), line


def test_a_long_category_name_ends_in_an_ellipsis_with_the_whole_name_on_hover() -> None:
    from ba_mcp.analyses.report import LABEL_CHARS, chart

    long = "International Bicycle Distributors of Northern Europe and the Baltic"
    svg = chart(pa.table({"vendor": [long, "Short"], "spend": [2.0, 1.0]}), "spend")
    assert f"<title>{long}</title>{long[: LABEL_CHARS - 1]}…</text>" in svg
    assert ">Short</text>" in svg


# -- the slow tier: a real PostgreSQL ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg() -> pg_server.Postgres:
    return pg_server.running()


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("params"))


@pytest.fixture(scope="module")
def env(pg: pg_server.Postgres) -> dict[str, str]:
    return {"BA_MCP_DATABASES__SHOP__URL": pg.url("analyst"), "BA_MCP_ENGINE__SPARE_WORKERS": "0"}


@pytest.fixture(scope="module")
async def s(ws: Path, env: dict[str, str]) -> AsyncIterator[ClientSession]:
    async with stdio_client(stdio_params(ws, **env)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def ok(s: ClientSession, tool: str, **args: Any) -> str:
    result = await s.call_tool(tool, args)
    assert not result.is_error, text_of(result)
    return text_of(result) + f"\n{meta_of(result).get('artifact_id', '')}"


def _top(pg: pg_server.Postgres, since: str, until: str) -> list[tuple[str, Decimal]]:
    """PostgreSQL's own answer to TOP for a period (psql's text of each sum)."""
    sql = TOP.replace("$1", f"'{since}'").replace("$2", f"'{until}'").replace("sum(o.amount)", "sum(o.amount)::text")
    return [(name, Decimal(spend)) for name, spend in pg.sql(sql)]


def _whole(pg: pg_server.Postgres, since: str, until: str) -> Decimal:
    sql = WHOLE.replace("$1", f"'{since}'").replace("$2", f"'{until}'").replace("sum(amount)", "sum(amount)::text")
    return Decimal(pg.sql(sql)[0][0])


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.skipif(not pg_server.available(), reason="PostgreSQL binaries (initdb, pg_ctl) are not installed")
async def test_a_postgres_analysis_with_1_and_2_is_re_run_for_another_period(
    s: ClientSession, pg: pg_server.Postgres, ws: Path, env: dict[str, str]
) -> None:
    """save_analysis binds since/until to $1/$2; run_analysis and `ba-mcp analyses run --param` re-run it for
    another period — every figure PostgreSQL's own — the report's trail shows each statement's values, and the
    key figure of the top 10 says it is the top 10's, beside the whole period's."""
    from ba_mcp.analyses.measures import number
    from ba_mcp.results import exact_number

    first = ("2025-01-01", "2025-07-01")
    shown = await ok(s, "query_database", database="shop", query=TOP, params=list(first), output_level="brief")
    aid = shown.rsplit("\n", 1)[1]
    await ok(s, "query_database", database="shop", query=WHOLE, params=list(first), output_level="brief")
    await ok(s, "run_python", code=f"spend = load_artifact('{aid}')\nspend.nlargest(3, 'spend')")
    said = await ok(
        s,
        "save_analysis",
        name="customer-spend",
        steps="last:3",
        parameters={"since": first[0], "until": first[1]},
        description="Spend by customer in a period",
    )
    assert "since (date, default '2025-01-01'; binds s1 $1, s2 $1)" in said, said
    assert "until (date, default '2025-07-01'; binds s1 $2, s2 $2)" in said, said
    manifest = yaml.safe_load((ws / "analyses" / "customer-spend" / "analysis.yaml").read_text())
    assert [st.get("binds") for st in manifest["steps"]] == [{1: "since", 2: "until"}, {1: "since", 2: "until"}, None]
    kept = "o.ordered_at >= $1 AND o.ordered_at < $2 AND o.status = 'completed'"
    assert manifest["steps"][0]["cut"] == {"ordered": True, "limit": 10, "where": kept}
    assert manifest["steps"][1]["cut"] == {"where": kept.replace("o.", "")}  # a filter: what it keeps, labelled
    assert manifest["steps"][2]["cut"] == {"limit": 3, "ordered": True}
    top, whole_period, three = manifest["outputs"]

    def rows_of(since: str, until: str, alias: str = "o.") -> str:
        period = f"{alias}ordered_at >= '{since}' AND {alias}ordered_at < '{until}'"
        return f"rows where {period} AND {alias}status = 'completed'"

    assert top["covers"] == f"top 10 customers only, of the {rows_of(*first)}" and top["rows"] == 10, top
    assert whole_period["covers"] == rows_of(*first, alias=""), whole_period
    assert Decimal(str(top["totals"]["spend"])) == sum(v for _, v in _top(pg, *first))
    assert three["covers"] == "top 3 customers only", three

    # run_analysis for another period: the figures are PostgreSQL's for that period, the top-N total says so
    later = ("2025-07-01", "2026-01-01")
    text = await ok(s, "run_analysis", name="customer-spend", parameters={"since": later[0], "until": later[1]})
    expected = _top(pg, *later)
    assert expected != _top(pg, *first)  # another period, other figures
    for name, spend in expected:
        assert f"{name},{exact_number(spend)}" in text, (name, spend, text[:3000])
    assert "spend total of the top 10 customers only" in text, text[:2000]

    # from the shell, with --param: the report's key figures and its trail
    out = ws / "run-later"
    args = ["--param", f"since={later[0]}", "--param", f"until={later[1]}", "--out", str(out)]
    done = ba("analyses", "run", "customer-spend", *args, workspace=ws, env=env)
    assert done.returncode == 0, done.stderr
    md = (out / "report.md").read_text()
    figures = {label: value for value, label in re.findall(r"^- \*\*([^*]+)\*\* (.+?)(?: — since .*)?$", md, re.M)}
    cut = sum(v for _, v in expected)
    whole = _whole(pg, *later)
    assert whole > cut  # the top 10 is not the whole period: the label is what keeps the figure true
    label = f"spend of the top 10 customers only, of the {rows_of(*later)} (spend by customer)"  # this run's values
    assert figures.get(label) == number(float(cut)), figures
    top3 = [label for label in figures if label.startswith("spend of the top 3 customers only")]
    assert [figures[label] for label in top3] == [number(float(sum(v for _, v in expected[:3])))], figures
    assert figures.get(f"spend of the {rows_of(*later, alias='')} (spend in the period)") == number(float(whole)), (
        figures
    )
    trail = md.split("## Audit trail", 1)[1]
    assert trail.count(f"$1 = '{later[0]}'") == 2  # the SQL steps' values; the Python step binds none
    assert trail.count(f"with $1 = '{later[0]}' (since), $2 = '{later[1]}' (until)") == 2, trail
    html = (out / "report.html").read_text()
    assert f"with $1 = &#x27;{later[0]}&#x27; (since), $2 = &#x27;{later[1]}&#x27; (until)" in html
    for name, _ in expected:  # the bar chart names each customer whole
        assert f">{name}</text>" in html, name
