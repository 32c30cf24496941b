"""Saved analyses (issue 26): a conversation's calls saved over stdio, re-run in a fresh process with
no MCP client and no model (`ba-mcp analyses run`), the same digests with the same parameters and a report of
what changed with others; the generated script passes ruff and answers --help; bad input is refused, nothing
half-written; report.html opened in a real headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp import ClientSession

from tests.conftest import ROOT, ba, in_process, make_workspace, meta_of, text_of
from tests.sandbox_common import sandbox_settings

pytestmark = pytest.mark.anyio

QUERY = (
    "SELECT month(order_date) AS month, category, round(sum(net_revenue), 2) AS revenue FROM order_facts "
    "WHERE status = 'completed' AND order_date >= DATE '2025-01-01' GROUP BY ALL ORDER BY ALL"
)
PIVOT = (
    "monthly = load_artifact('{aid}')\n"
    "pivot = monthly.pivot_table(index='month', columns='category', values='revenue', aggfunc='sum')\n"
    "pivot.round(0)"
)
CHART = "import matplotlib.pyplot as plt\nax = pivot.plot(figsize=(6, 3), title='Net revenue by category')"


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("analyses"))


@pytest.fixture(scope="module")
async def s(ws: Path) -> AsyncIterator[ClientSession]:
    async with in_process(ws, None, **sandbox_settings(BA_MCP_SANDBOX__ALLOWED_IMPORTS="*")) as client:
        yield client.session  # the real server and pipeline, in process


async def ok(s: ClientSession, tool: str, **args: Any) -> Any:
    result = await s.call_tool(tool, args)
    assert not result.is_error, text_of(result)
    return result


async def refused(s: ClientSession, tool: str, **args: Any) -> str:
    result = await s.call_tool(tool, args)
    assert result.is_error, text_of(result)
    return text_of(result)


@pytest.fixture(scope="module")
async def saved(s: ClientSession, ws: Path) -> Path:
    """Three calls (a query with a date literal, pandas on its artifact, a chart), saved with `since`."""
    queried = await ok(s, "query_database", query=QUERY, output_level="brief")
    aid = meta_of(queried)["artifact_id"]
    await ok(s, "run_python", code=PIVOT.format(aid=aid))
    await ok(s, "run_python", code=CHART)
    text = text_of(
        await ok(
            s,
            "save_analysis",
            name="monthly-review",
            steps="last:3",
            parameters={"since": "2025-01-01"},
            description="Monthly net revenue by category",
        )
    )
    assert "Saved analysis monthly-review" in text and "s3_figure1 (image)" in text, text
    return ws / "analyses" / "monthly-review"


@pytest.mark.slow  # a server or command-line process of its own: the slow tier (the fast tier stays in process)
async def test_a_saved_analysis_replays_in_a_fresh_process_with_equal_digests(
    saved: Path, ws: Path, tmp_path: Path
) -> None:
    manifest = yaml.safe_load((saved / "analysis.yaml").read_text())
    assert manifest["parameters"] == {"since": {"type": "date", "default": "2025-01-01"}}
    assert [o["name"] for o in manifest["outputs"]] == ["s1_table", "s2_value", "s3_figure1"]
    step = manifest["steps"][0]
    assert "CAST($since AS DATE)" in step["sql"] and "2025-01-01" not in step["sql"]  # bound, never pasted
    # a fresh workspace holding only the analysis: nothing of the conversation (no artifact) is needed
    fresh = make_workspace(tmp_path / "fresh")
    shutil.copytree(saved, fresh / "analyses" / "monthly-review")
    out = tmp_path / "run-same"
    same = ba("analyses", "run", "monthly-review", "--out", str(out), workspace=fresh)
    assert same.returncode == 0, same.stdout + same.stderr
    for name in ("s1_table", "s2_value", "s3_figure1"):
        assert re.search(rf"^{name} \(.*\): same$", same.stdout, re.M), same.stdout
    for made in ("s1_table.parquet", "s1_table.csv", "s2_value.parquet", "s3_figure1.png", "report.md", "report.html"):
        assert (out / made).is_file(), made
    changed = ba(
        "analyses", "run", "monthly-review", "--param", "since=2025-07-01", "--out", str(ws / "run-h2"), workspace=ws
    )
    assert changed.returncode == 0, changed.stdout + changed.stderr
    assert re.search(
        r"s1_table \(revenue by month and category\): changed: rows 48 → 24; revenue total ", changed.stdout
    )
    assert "month total" not in changed.stdout  # a month number is no amount: never totalled
    assert re.search(r"s3_figure1 \(Net revenue by category\): changed", changed.stdout), changed.stdout
    report = (ws / "run-h2" / "report.md").read_text()
    assert "since = '2025-07-01'" in report and "changed: rows 48 → 24" in report, report


@pytest.mark.slow  # a server or command-line process of its own: the slow tier (the fast tier stays in process)
def test_the_generated_script_passes_ruff_and_answers_help(saved: Path) -> None:
    script = saved / "analysis.py"
    lint = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", str(script)], capture_output=True, text=True
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    helped = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, cwd=ROOT)
    assert helped.returncode == 0, helped.stderr
    assert "--since SINCE" in helped.stdout and "default '2025-01-01'" in helped.stdout and "--out" in helped.stdout


def _steps_logged(ws: Path) -> list[dict[str, object]]:
    """The telemetry lines of calls a saved analysis's run made (its session: the caller's, ``~analysis``)."""
    lines = [json.loads(line) for f in sorted((ws / "logs").glob("telemetry-*.jsonl")) for line in f.open()]
    return [line for line in lines if str(line["session"]).endswith("~analysis")]


async def test_run_analysis_resources_and_history_from_the_conversation(
    s: ClientSession, saved: Path, ws: Path
) -> None:
    del saved
    before = len(_steps_logged(ws))
    result = await ok(s, "run_analysis", name="monthly-review", parameters={"since": "2025-10-01"})
    # issue 52: each step ran through the runner — a call of the run's session in the telemetry, like a client's
    steps = _steps_logged(ws)[before:]
    assert [line["tool"] for line in steps] == ["query_database", "run_python", "run_python"], steps
    assert all(line["success"] and line["duration_ms"] > 0 for line in steps), steps
    text = text_of(result)
    assert "s1_table: changed: rows 48 → 12" in text and "s3_figure1: changed" in text, text
    assert any(b.type == "image" for b in result.content)
    catalog = (await s.read_resource("analysis://catalog")).contents[0].text  # type: ignore[union-attr]
    assert "- monthly-review: Monthly net revenue by category (3 steps; since='2025-01-01')" in catalog, catalog
    shown = (await s.read_resource("analysis://monthly-review")).contents[0].text  # type: ignore[union-attr]
    assert "since: date, default '2025-01-01'" in shown and "s1 query_database" in shown, shown
    history = (await s.read_resource("ba://history")).contents[0].text  # type: ignore[union-attr]
    assert " run_analysis ok" in history and " save_analysis ok" in history, history


async def test_bad_input_is_refused_and_nothing_is_half_written(s: ClientSession, saved: Path, ws: Path) -> None:
    del saved
    said = await refused(s, "save_analysis", name="x", steps=["call_000000000000"])
    assert "UNKNOWN_STEP" in said and "call_000000000000" in said
    said = await refused(s, "save_analysis", name="x", steps="last:1", parameters={"region": "Atlantis"})
    assert "BAD_PARAMETER" in said and "Atlantis" in said and "occurs in no step" in said
    for name in ("../evil", "a/b", "..", "Upper"):
        assert "BAD_NAME" in await refused(s, "save_analysis", name=name, steps="last:1")
    said = await refused(s, "save_analysis", name="monthly-review", steps="last:1")
    assert "EXISTS" in said and "overwrite" in said
    said = await refused(s, "save_analysis", name="x", steps="last:1", parameters={"since": True})
    assert "since" in said
    said = await refused(s, "run_analysis", name="monthly-review", parameters={"until": "2025-01-01"})
    assert "BAD_PARAMETER" in said and "until" in said
    # a step that fails when run again: nothing is saved
    upload = ws / "uploads" / "gone.csv"
    upload.write_text("a,b\n1,2\n")
    await ok(s, "query_database", query="SELECT sum(b) AS b FROM 'uploads/gone.csv'")
    upload.unlink()
    said = await refused(s, "save_analysis", name="gone", steps="last:1")
    assert "STEP_FAILED" in said and "step s1" in said, said
    assert not (ws / "analyses" / "gone").exists()
    assert not [p for p in (ws / "analyses").iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_a_database_no_longer_configured_is_named(saved: Path, ws: Path, tmp_path: Path) -> None:
    copy = make_workspace(tmp_path / "other")
    shutil.copytree(saved, copy / "analyses" / "monthly-review")
    manifest = yaml.safe_load((copy / "analyses" / "monthly-review" / "analysis.yaml").read_text())
    manifest["databases"] = ["warehouse"]
    (copy / "analyses" / "monthly-review" / "analysis.yaml").write_text(yaml.safe_dump(manifest))
    run = ba("analyses", "run", "monthly-review", workspace=copy)
    assert run.returncode != 0 and "database 'warehouse', which is not configured" in run.stdout, run.stdout
    listed = ba("analyses", "list", workspace=ws)
    assert "monthly-review  3 steps  since='2025-01-01'" in listed.stdout, listed.stdout


@pytest.mark.slow
async def test_the_report_opens_in_headless_chromium_with_its_table_and_chart(
    saved: Path, ws: Path, tmp_path: Path
) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Chromium is not installed (.ci/run installs Debian's package where it can)")
    out = ws / "run-browser"
    assert ba("analyses", "run", "monthly-review", "--out", str(out), workspace=ws).returncode == 0
    page = (out / "report.html").as_uri()
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = subprocess.run([chromium, *flags, "--dump-dom", page], capture_output=True, text=True, timeout=120)
    assert "<table>" in dom.stdout and "s1_table" in dom.stdout and "<img" in dom.stdout, dom.stderr[-500:]
    shot = tmp_path / "report.png"
    subprocess.run(
        [chromium, *flags, f"--screenshot={shot}", "--window-size=1200,3000", page],
        capture_output=True,
        text=True,
        timeout=120,
    )
    from PIL import Image

    image = Image.open(shot).convert("RGB")
    colours = image.getcolors(maxcolors=1_000_000) or []
    # the chart's lines are coloured (matplotlib's blue, orange, green, red): a page whose image did not load
    # has only greys
    coloured = sum(n for n, (r, g, b) in colours if max(r, g, b) - min(r, g, b) > 80)
    assert coloured > 500, f"{coloured} coloured pixels: the chart did not render"


async def test_a_saved_analysis_is_a_prompt_and_a_wrong_type_is_named(saved: Path, ws: Path) -> None:
    from tests.conftest import in_process

    async with in_process(ws) as client:  # a server started after the save
        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert "rerun-monthly-review" in prompts, list(prompts)
        got = await client.get_prompt("rerun-monthly-review", {"values": "since=2025-03-01"})
        text = got.messages[0].content.text  # type: ignore[union-attr]
        assert 'run_analysis(name="monthly-review", parameters={"since": "2025-03-01"})' in text, text
    typed = saved.parent / "typed"
    shutil.copytree(saved, typed)
    manifest = yaml.safe_load((typed / "analysis.yaml").read_text())
    manifest["name"] = "typed"
    manifest["parameters"] = {"since": {"type": "int", "default": 2025}}
    (typed / "analysis.yaml").write_text(yaml.safe_dump(manifest))
    run = ba("analyses", "run", "typed", "--param", "since=soon", workspace=ws)
    assert run.returncode == 2 and "parameter since is of type integer; 'soon' is not one" in run.stderr, run.stderr
    shutil.rmtree(typed)


# -- S-13: nothing the model writes becomes code run on the host -------------------------------------------------


def hostile(marker: Path) -> str:
    """Python that writes ``marker`` wherever a text is pasted into a ``\"\"\"`` or ``'''`` string of a script."""
    act = f"__import__('pathlib').Path({str(marker)!r}).write_text('ran on the host')"
    return f"x\"\"\"\n{act}\n\"\"\"'''\n{act}\n'''\\"


@pytest.mark.slow
async def test_model_written_texts_never_run_as_host_code_when_an_analysis_is_re_run(
    s: ClientSession, ws: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    evil = hostile(marker)
    # a metrics filter whose literal holds ''' (a SQL string of quotes), SQL and code holding """, ''', \\ and lines
    where = "regions.region = '''+__import__(\"pathlib\").Path(\"" + str(marker) + "\").write_text(\"x\")+'''"
    await ok(s, "query_metrics", metrics=["net_revenue"], where=[where], output_level="brief")
    await ok(s, "query_database", query=f"SELECT 1 AS one, '{evil.replace(chr(39), chr(39) * 2)}' AS t /* {evil} */")
    await ok(s, "run_python", code=f"text = {evil!r}  # {evil[:3]}\nlen(text)")
    saved = await ok(s, "save_analysis", name="evil", steps="last:3", description=evil)
    assert "Saved analysis evil" in text_of(saved)
    folder = ws / "analyses" / "evil"
    from ba_mcp.analyses.manifest import SCRIPT

    assert (folder / "analysis.py").read_text() == SCRIPT  # the one fixed launcher: nothing of the model in it
    manifest = yaml.safe_load((folder / "analysis.yaml").read_text())
    assert manifest["description"] == evil and manifest["steps"][0]["metrics_query"]["where"] == [where]
    ran = ba("analyses", "run", "evil", "--out", str(tmp_path / "out"), workspace=ws)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    for argv in (["--help"], ["--out", str(tmp_path / "out2")]):
        script = subprocess.run(
            [sys.executable, str(folder / "analysis.py"), *argv], capture_output=True, text=True, cwd=ROOT
        )
        assert script.returncode == 0, script.stdout + script.stderr
    said = text_of(await ok(s, "run_analysis", name="evil"))
    assert "s1_table: same" in said, said
    assert not marker.exists(), "model-written text ran as Python on the host"
    shutil.rmtree(folder)


@pytest.mark.slow
async def test_a_timed_out_run_analysis_ends_its_running_step(ws: Path) -> None:
    """run_analysis's timeout cancels the step that is running in its engine, not only the wait for it."""
    import time

    import psutil

    from tests.conftest import in_process

    slow = "SELECT count(*) AS n FROM range(3000) a, range(3000) b, range(3000) c WHERE a.range + b.range > c.range"
    folder = ws / "analyses" / "slow"
    folder.mkdir(parents=True)
    manifest = {
        "name": "slow",
        "description": "",
        "parameters": {},
        "databases": ["demo"],
        "steps": [{"id": "s1", "tool": "query_database", "database": "demo", "sql": slow}],
        "outputs": [],
    }
    (folder / "analysis.yaml").write_text(yaml.safe_dump(manifest))
    try:
        async with in_process(ws, BA_MCP_TOOLS__RUN_ANALYSIS__TIMEOUT_S="2") as client:
            started = time.monotonic()
            result = await client.call_tool("run_analysis", {"name": "slow"})
            assert result.is_error and "Error Type: timeout" in text_of(result), text_of(result)
            assert time.monotonic() - started < 20
            workers = psutil.Process().children(recursive=True)
            for w in workers:
                w.cpu_percent(None)
            time.sleep(1.5)
            busy = sum(w.cpu_percent(None) for w in workers if w.is_running())
            assert busy < 30, f"the step's engine still runs after the timeout: {busy:.0f} % CPU"
    finally:
        shutil.rmtree(folder)


async def test_a_step_that_reads_a_window_of_a_table_is_saved_and_re_run(s: ClientSession, ws: Path) -> None:
    """A file_reader step that pages a stored table (offset, nrows) keeps the rows it asked for: saving it
    refused it as "exceeds the artifact size limit" (found by bench_memory, issue 40)."""
    queried = await ok(s, "query_database", query="SELECT * FROM order_lines ORDER BY ALL", max_rows=10)
    aid = meta_of(queried)["artifact_id"]
    await ok(s, "file_reader", path=aid, offset=100, nrows=20)
    text = text_of(await ok(s, "save_analysis", name="a-window", steps="last:2"))
    assert "s2 file_reader" in text, text
    manifest = yaml.safe_load((ws / "analyses" / "a-window" / "analysis.yaml").read_text())
    assert [(o["name"], o.get("rows")) for o in manifest["outputs"]][-1] == ("s2_table", 20), manifest["outputs"]
    again = text_of(await ok(s, "run_analysis", name="a-window"))
    assert re.search(r"^s2_table: same$", again, re.M), again


def test_measures_add_up_as_arrows_kernels_do_in_python() -> None:
    """A saved analysis's totals and ranges are figured in Python (the server holds no compute kernels, issue
    40): hand-computed answers, and Arrow's own kernels agree on every column."""
    from decimal import Decimal

    import pyarrow as pa
    import pyarrow.compute as pc

    from ba_mcp.analyses.measures import additive_column, column_total, value_range
    from ba_mcp.analyses.replay import _measures

    frame = pa.table(
        {
            "region": ["n", "s", "e", "w"],
            "revenue": pa.array([Decimal("10.10"), Decimal("0.20"), None, Decimal("5.00")], pa.decimal128(8, 2)),
            "orders": pa.array([3, None, 4, 5], pa.int64()),
            "discount": [0.1, 0.25, None, 0.0],  # fractions: no total, whatever the name says
            "spend": [1.5, float("nan"), 2.0, 4.25],
            "margin_pct": [12.5, -3.0, None, 40.0],  # a rate by its name: a range
            "year": [2024, 2024, 2025, 2025],  # a dimension: neither
        }
    )
    totals, ranges = _measures(frame)
    assert totals.keys() == {"revenue", "orders", "spend"} and (totals["revenue"], totals["orders"]) == (15.3, 12.0)
    assert str(totals["spend"]) == "nan"  # a NaN among the values: as Arrow's sum says
    assert ranges == {"discount": [0.0, 0.25], "margin_pct": [-3.0, 40.0]}
    for name in frame.column_names[1:]:
        column = frame.column(name)
        arrow_sum = pc.sum(column).as_py()
        ours = column_total(column)
        assert (str(ours) == str(arrow_sum) == "nan") or ours == arrow_sum, name
        low, high = pc.min(column).as_py(), pc.max(column).as_py()
        assert value_range(column) == ((low, high) if low is not None else None), name
    assert not additive_column("discount", frame.column("discount")) and additive_column("spend", frame["spend"])
    assert column_total(pa.chunked_array([[None]], pa.int64())) is None
