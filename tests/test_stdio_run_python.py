"""run_python through a real MCP session over stdio: the notebook, the helpers, timeouts, output — with the
shipped import policy. The hostile list of S-4 is in test_sandbox_hostile.py (guardrail off)."""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import ClientSession, stdio_client

from tests.conftest import make_workspace, meta_of, server_process
from tests.sandbox_common import failed, ok, run, sandbox_params

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox's isolation is Linux-specific"),
]


@pytest.fixture(scope="module")
def python_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("proot"))


@pytest.fixture(scope="module")
async def python_server(python_workspace: Path) -> AsyncIterator[ClientSession]:
    """The shipped configuration (import policy on)."""
    async with stdio_client(sandbox_params(python_workspace)) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        yield s


# -- the notebook -----------------------------------------------------------------------------------


async def test_state_persists_between_calls_and_last_expression_is_returned(python_server: ClientSession) -> None:
    ok(await run(python_server, "total = 40\nitems = ['a', 'b']"))
    text = ok(await run(python_server, "total + len(items)"))
    assert text.startswith("run_python: result (standard)")
    assert "## value" in text and "\n42" in text


async def test_stdout_stderr_and_execution_time_are_reported(python_server: ClientSession) -> None:
    result = await run(python_server, "import sys\nprint('hello', 3)\nprint('warn', file=sys.stderr)")
    assert result.is_error  # sys is not in the shipped policy
    result = await run(python_server, "import warnings\nprint('hello', 3)\nwarnings.warn('careful')")
    text = ok(result)
    assert "## stdout" in text and "hello 3" in text
    assert "## stderr" in text and "careful" in text
    shown = re.search(r"Ran code_[0-9a-f]{12} in ([\d.]+) (ms|s)", text)
    assert shown, text
    took = meta_of(result)["meta"]["execution_ms"]
    assert took > 0 and abs(took - float(shown.group(1)) * (1 if shown.group(2) == "ms" else 1000)) <= max(
        1.0, took / 10
    )


async def test_dataframe_value_becomes_a_table_with_the_complete_result_as_an_artifact(
    python_server: ClientSession,
) -> None:
    result = await run(
        python_server, "import pandas as pd\npd.DataFrame({'n': range(500), 'sq': [i * i for i in range(500)]})"
    )
    text = ok(result)
    assert "value of the last expression: 500 rows × 2 columns" in text
    aid = re.search(r"Complete table: (artifact_[0-9a-f]{12})", text).group(1)
    back = ok(await python_server.call_tool("query_database", {"query": f"SELECT sum(sq) AS s FROM {aid}"}))
    assert str(sum(i * i for i in range(500))) in back


async def test_a_grouped_frame_keeps_its_index_as_columns(python_server: ClientSession) -> None:
    code = "import pandas as pd\ndf = pd.DataFrame({'k': ['a', 'b', 'a'], 'v': [1, 2, 3]})\ndf.groupby('k').v.sum()"
    text = ok(await run(python_server, code))
    assert "k,v" in text and "a,4" in text and "b,2" in text


async def test_a_filtered_frame_is_saved_without_its_row_positions(python_server: ClientSession) -> None:
    """A filtered or sorted frame's unnamed integer index is not data: saved and loaded back, the frame has
    its own columns only (an 'index' column put the item one column over in a skill's script)."""
    code = (
        "import pandas as pd\ndf = pd.DataFrame({'k': ['a', 'b', 'c'], 'v': [1, 2, 3]})\n"
        "back = load_artifact(save_artifact(df[df.v > 1].sort_values('v', ascending=False)))\nlist(back.columns)"
    )
    assert "['k', 'v']" in ok(await run(python_server, code))


async def test_figures_come_back_as_image_content_and_image_artifacts(python_server: ClientSession) -> None:
    code = (
        "import matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots()\nax.bar(['a', 'b'], [3, 5])\nax.set_title('Sales by region')\n"
        "plt.figure()\nplt.plot([1, 2, 3])"
    )
    result = await run(python_server, code)
    text = ok(result)
    images = [c for c in result.content if c.type == "image"]
    assert len(images) == 2 and all(c.mime_type == "image/png" for c in images)
    assert "Sales by region" in text
    links = [c for c in result.content if c.type == "resource_link"]
    assert len(links) == 2 and all(link.mime_type == "image/png" for link in links)
    # figures are closed after capture: the next cell returns none
    again = await run(python_server, "1 + 1")
    assert not [c for c in again.content if c.type == "image"]


async def test_code_is_stored_under_its_code_id_and_readable_by_file_reader(python_server: ClientSession) -> None:
    code = "# monthly revenue check\nrevenue = [1, 2, 3]\nsum(revenue)"
    text = ok(await run(python_server, code))
    code_id = re.search(r"(code_[0-9a-f]{12})", text).group(1)
    read = ok(await python_server.call_tool("file_reader", {"path": code_id, "output_level": "full"}))
    assert "revenue = [1, 2, 3]" in read
    files = await python_server.read_resource("ba://files")
    assert code_id in files.contents[0].text and "monthly revenue check" in files.contents[0].text


async def test_reset_starts_a_fresh_interpreter(python_server: ClientSession) -> None:
    ok(await run(python_server, "kept = 1"))
    text = ok(await run(python_server, "'kept' in dir()", reset=True))
    assert "False" in text and "fresh interpreter" in text


@pytest.mark.slow
async def test_progress_notifications_while_a_long_cell_runs(python_server: ClientSession) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    code = "import time\nfor i in range(3):\n    progress(i, 3, f'step {i}')\n    time.sleep(0.8)\n'done'"
    result = await python_server.call_tool("run_python", {"code": code}, progress_callback=on_progress)
    ok(result)
    messages = [m for _, _, m in seen]
    assert "step 0" in messages and "step 2" in messages
    assert any(m and m.startswith("running for") for m in messages)
    seen.clear()
    flood = "for i in range(20000):\n    progress(i, 20000, 'flood')\n'flooded'"
    ok(await python_server.call_tool("run_python", {"code": flood}, progress_callback=on_progress))
    assert sum(1 for _, _, m in seen if m == "flood") <= 10  # throttled in the worker (issue 8 item 13)


# -- helpers ------------------------------------------------------------------------------------------


async def test_save_artifact_is_queryable_by_other_tools_and_load_artifact_reads_their_results(
    python_server: ClientSession,
) -> None:
    code = "import pandas as pd\naid = save_artifact(pd.DataFrame({'x': [1, 2, 3]}), title='three rows')\naid"
    aid = re.search(r"artifact_[0-9a-f]{12}", ok(await run(python_server, code))).group(0)
    assert "6" in ok(await python_server.call_tool("query_database", {"query": f"SELECT sum(x) FROM {aid}"}))
    queried = ok(
        await python_server.call_tool("query_database", {"query": "SELECT 7 AS seven", "output_level": "brief"})
    )
    qid = re.search(r"artifact_[0-9a-f]{12}", queried).group(0)
    assert "\n7" in ok(await run(python_server, f"load_artifact('{qid}').seven.sum()"))
    text_id = re.search(r"artifact_[0-9a-f]{12}", ok(await run(python_server, "save_artifact('some notes')"))).group(0)
    assert "some notes" in ok(await python_server.call_tool("file_reader", {"path": text_id}))
    json_id = re.search(r"artifact_[0-9a-f]{12}", ok(await run(python_server, "save_artifact({'a': [1, 2]})"))).group(0)
    assert "[1, 2]" in ok(await run(python_server, f"load_artifact('{json_id}')"))


async def test_uploads_open_by_id_and_nothing_outside_uploads(python_server: ClientSession) -> None:
    text = ok(await run(python_server, "df = load_upload('upload_sales')\ndf.shape"))
    assert re.search(r"\(\d+, \d+\)", text)
    text = ok(
        await run(python_server, "with open_upload('upload_report') as f:\n    first = f.read(200)\nlen(first) > 0")
    )
    assert "True" in text
    for ref in ("../../etc/passwd", "/etc/passwd", "artifact_000000000000", "upload_nope", "upload_escape"):
        text = failed(await run(python_server, f"open_upload({ref!r})"), "execution_error", "PYTHON_EXCEPTION")
        assert "HelperError" in text
        assert "root:" not in text
    failed(await run(python_server, "load_artifact('artifact_000000000000')"), "execution_error")


# -- hostile and bad input ---------------------------------------------------------------------------


@pytest.mark.slow
async def test_endless_loop_is_interrupted_and_state_survives(python_server: ClientSession) -> None:
    ok(await run(python_server, "survivor = 'still here'"))
    text = failed(await run(python_server, "while True:\n    pass", timeout=1), "timeout", "TIMEOUT")
    assert "state" in text and "kept" in text
    assert "still here" in ok(await run(python_server, "survivor"))


@pytest.mark.slow
async def test_printing_100_mb_is_trimmed_with_the_total_stated(python_server: ClientSession) -> None:
    result = await run(python_server, "print('x' * 100_000_000)\nprint('end marker')")
    text = ok(result)
    assert "100,000,012 characters were printed" in text
    assert "end marker" in text
    assert len(text) < 100_000


async def test_imports_outside_the_policy_are_refused_naming_the_module(python_server: ClientSession) -> None:
    for module in ("subprocess", "socket", "ctypes", "os.path"):
        text = failed(await run(python_server, f"import {module}"), "permission_denied", "IMPORT_NOT_ALLOWED")
        assert f"'{module.split('.')[0]}'" in text
    text = failed(await run(python_server, "from shutil import rmtree"), "permission_denied", "IMPORT_NOT_ALLOWED")
    assert "'shutil'" in text
    assert "2" in ok(await run(python_server, "import math, statistics\nround(math.sqrt(4))"))


async def test_syntax_error_is_a_validation_error_and_nothing_runs(python_server: ClientSession) -> None:
    text = failed(await run(python_server, "marker = 1\ndef broken(:\n    pass"), "validation_error", "SYNTAX_ERROR")
    assert "line 2" in text
    assert "False" in ok(await run(python_server, "'marker' in dir()"))


async def test_ten_megabyte_code_is_refused_clearly(python_server: ClientSession) -> None:
    code = "x = 1\n" + "# padding\n" * 1_100_000
    text = failed(await run(python_server, code), "invalid_parameters", "CODE_TOO_LONG")
    assert "11,000,006 characters" in text and "1,000,000" in text
    assert "2" in ok(await run(python_server, "1 + 1"))


async def test_invalid_arguments_name_the_field(python_server: ClientSession) -> None:
    text = failed(await run(python_server, "1", timeout=-1), "invalid_parameters")
    assert "timeout" in text
    text = failed(await python_server.call_tool("run_python", {}), "invalid_parameters")
    assert "'code' is required" in text


@pytest.mark.slow
async def test_the_worker_does_not_outlive_the_server(tmp_path: Path) -> None:
    psutil = pytest.importorskip("psutil")
    ws = make_workspace(tmp_path)
    async with (
        stdio_client(sandbox_params(ws, BA_MCP_SANDBOX__SPARE_WORKERS="1")) as (read, write),
        ClientSession(read, write) as s,
    ):
        await s.initialize()
        ok(await run(s, "1"))
        workers = [p for p in psutil.process_iter(["cmdline"]) if _is_worker_of(p, ws)]
        assert len(workers) >= 2  # the session's worker (shim + PID 1 child) and the spare
    for p in workers:
        p.wait(timeout=10)  # psutil.TimeoutExpired if a worker lived on
        assert not p.is_running()


def _is_worker_of(proc, ws: Path) -> bool:
    """A sandbox process (shim or PID 1 child) whose server serves ``ws``."""
    cmd = proc.info.get("cmdline") or []
    if "sandbox" not in cmd:
        return False
    try:
        return any(p.environ().get("BA_MCP_WORKSPACE") == str(ws) for p in proc.parents())
    except Exception:
        return False


# -- the worker's channel and what comes through it (issue 8 items 6 and 11) ---------------------------


@pytest.mark.slow
async def test_concurrent_first_calls_of_a_session_share_one_interpreter(tmp_path: Path) -> None:
    """Issue 10: three parallel first calls each set a variable; all three survive in one interpreter,
    and only one call reports a fresh interpreter (the others queued on it)."""
    import anyio

    from tests.conftest import in_process

    texts: list[str] = []
    async with in_process(make_workspace(tmp_path), ["run_python"]) as client:

        async def one(i: int) -> None:
            texts.append(ok(await run(client, f"v{i} = {i}")))

        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(one, i)
        names = ok(await run(client, "sorted(k for k in dir() if k in ('v0', 'v1', 'v2'))"))
    assert "['v0', 'v1', 'v2']" in names
    assert sum("fresh interpreter" in t for t in texts) == 1


# -- run_python tells the truth (issue 10) -----------------------------------------------------------


async def test_tracebacks_show_the_users_frames_and_no_paths(python_server: ClientSession) -> None:
    text = failed(
        await run(python_server, "import pandas as pd\ndf = pd.DataFrame({'a': [1]})\ndf['missing']"), "execution_error"
    )
    assert 'File "code_' in text and "KeyError" in text and "frame(s) inside pandas" in text
    for real in ("site-packages", ".venv", "/root", "/work", sys.prefix):
        assert real not in text, text
    hint = failed(await run(python_server, "import pandas as pd\npd.read_csv('uploads/sales.csv')"), "execution_error")
    assert 'load_file("upload_sales")' in hint and "site-packages" not in hint
    assert len(hint) < 1500


async def test_long_output_keeps_its_last_line_and_the_whole_output_as_an_artifact(
    python_server: ClientSession,
) -> None:
    result = await run(python_server, "for i in range(20000):\n    print(f'line {i}')\nprint('LAST LINE')")
    text = ok(result)
    assert "LAST LINE" in text and "line 0" in text
    aid = re.search(r"the whole text is (artifact_[0-9a-f]{12})", text)
    assert aid, text
    # Cut in one place, continued in one way: one elision, one artifact named (issue 19).
    assert len(set(re.findall(r"artifact_[0-9a-f]{12}", text))) == 1 and text.count("not shown") == 1, text
    assert "omitted" not in text
    whole = ok(await python_server.call_tool("file_reader", {"path": aid.group(1), "nrows": 3, "offset": 0}))
    assert "line 0" in whole
    stored = ok(await python_server.call_tool("file_reader", {"path": aid.group(1), "output_level": "brief"}))
    printed = sum(len(f"line {i}\n") for i in range(20000)) + len("LAST LINE\n")
    assert f"{printed:,} characters" in stored  # every character printed, not only the head and tail
    cut = failed(
        await run(python_server, "for i in range(5000):\n    print(f'row {i}')\nraise ValueError('late')"),
        "execution_error",
    )
    assert "row 4999" in cut and "ValueError: late" in cut and "artifact_" in cut  # the tail before the error


async def test_short_output_and_values_are_shown_compactly(python_server: ClientSession) -> None:
    text = ok(await run(python_server, "print('hello')\n6 * 7"))
    assert "## stdout\nhello" in text and "## value (int)\n42" in text
    assert "characters, 1 words" not in text


@pytest.mark.slow
async def test_the_server_process_never_loads_pandas(tmp_path: Path) -> None:
    """Tables are Arrow from DuckDB, Parquet and the sandbox to the observer: after a query, a DataFrame
    value, a Parquet artifact read back, the artifact resource and a listing, no pandas (nor numpy) library is
    mapped into the server. (pandas lives in the sandbox worker; in the server it is loaded by CSV, Excel and JSON
    parsing and by querying workspace files: importing pyarrow.dataset and DuckDB's register() both import it.)"""
    from ba_mcp.databases.duckdb import DEMO_FILE
    from ba_mcp.demo_data import ensure_demo_database

    ws = make_workspace(tmp_path)
    ensure_demo_database(ws / "data" / DEMO_FILE)
    async with stdio_client(sandbox_params(ws)) as (read, write), ClientSession(read, write) as python_server:
        await python_server.initialize()
        await _lean_session(python_server, ws)


async def _lean_session(python_server: ClientSession, ws: Path) -> None:
    code = (
        "import pandas as pd\n"
        "pd.DataFrame({'x': [1.5, None, 3.25], 'when': pd.to_datetime(['2025-01-01 10:00', None, '2025-01-02 00:00'])})"
    )
    made = ok(await run(python_server, code))
    assert "value of the last expression: 3 rows × 2 columns" in made and "2025-01-01T10:00:00" in made
    query = await python_server.call_tool(
        "query_database", {"query": "SELECT status, count(*) AS n, min(order_date) AS first FROM orders GROUP BY ALL"}
    )
    assert not query.is_error, query
    saved = ok(
        await run(python_server, "import pandas as pd\nsave_artifact(pd.DataFrame({'n': range(300)}), title='numbers')")
    )
    aid = re.search(r"artifact_[0-9a-f]{12}", saved)
    assert aid
    read = await python_server.call_tool("file_reader", {"path": aid.group(0)})
    assert not read.is_error and "300 rows" in read.content[0].text  # type: ignore[union-attr]
    resource = await python_server.read_resource(f"artifact://{aid.group(0)}")
    assert resource.contents[0].text.startswith("n\n0\n1\n")  # type: ignore[union-attr]
    listed = await python_server.call_tool("file_reader", {"path": "uploads"})  # a table the server builds itself
    assert not listed.is_error and "directory uploads" in listed.content[0].text, listed  # type: ignore[union-attr]
    # Parquet written from the server's memory and streamed by an engine, read back whole and paged, a saved
    # analysis made and re-run: the engine workers write and read the Parquet, short columns are summarised in
    # Python, long stored ones by a worker — the server loads neither Parquet nor Arrow's compute kernels (issue 40)
    big = ok(await run(python_server, "import pandas as pd\npd.DataFrame({'n': range(3000), 'k': ['a', 'b'] * 1500})"))
    assert "Complete table: artifact_" in big, big
    streamed = await python_server.call_tool("query_database", {"query": "SELECT * FROM order_lines", "max_rows": 10})
    stored = re.search(r"artifact_[0-9a-f]{12}", streamed.content[0].text)  # type: ignore[union-attr]
    assert stored and not streamed.is_error
    page = await python_server.call_tool("file_reader", {"path": stored.group(0), "offset": 100, "nrows": 20})
    assert "rows 100–119" in page.content[0].text, page  # type: ignore[union-attr]
    assert not (await python_server.call_tool("save_analysis", {"name": "lean", "steps": ["last:3"]})).is_error
    again = await python_server.call_tool("run_analysis", {"name": "lean"})
    assert "s1_value: same\ns2_table: same\ns3_table: same" in again.content[0].text, again  # type: ignore[union-attr]
    mapped = {m.path for m in server_process(ws).memory_maps()}
    assert not [path for path in mapped if "/pandas/" in path]
    assert not [path for path in mapped if "/numpy/" in path or "/numpy.libs/" in path]  # pyarrow runs without it
    # (libparquet and libarrow_compute are linked into pyarrow's core and always mapped: its Python modules are not)
    assert not [path for path in mapped if "/pyarrow/_parquet" in path or "/pyarrow/_compute" in path]
    assert [path for path in mapped if "/pyarrow/" in path]  # the check sees the server's libraries
