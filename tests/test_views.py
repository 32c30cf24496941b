"""Issue 39 item 3: results as interactive views in the host (MCP Apps, io.modelcontextprotocol/ui).

A client that declares the extension gets views named on the tools (``_meta.ui.resourceUri`` and the flat
``ui/resourceUri`` hosts of the earlier draft read), the app-only ``view_rows`` and the ``ui://`` pages; one that
does not gets exactly what it got before. Each view is rendered in headless Chromium inside a host page built
with the official ``AppBridge`` (npm ``@modelcontextprotocol/ext-apps``, bundled by esbuild from
``tests/apps_host``, which ``.ci/run`` installs), fed with the real input and result of a call to the running
server; the view's tools/call go back to the server through the bridge."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, ClientSession, stdio_client
from mcp.client.extension import advertise

from ba_mcp.views import APP_MIME_TYPE, EXTENSION_ID, REPORT_VIEW, ROWS_TOOL, TABLE_VIEW
from tests.conftest import ROOT, http_serve, in_process, make_workspace, meta_of, stdio_params, text_of

pytestmark = pytest.mark.anyio
APPS = {EXTENSION_ID: {"mimeTypes": [APP_MIME_TYPE]}}
HOST = ROOT / "tests" / "apps_host"
ROWS = "SELECT range AS n, range % 7 AS weekday, round(range * 2.5, 1) AS revenue FROM range(5000)"


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("views"))


@pytest.fixture(scope="module")
async def apps(ws: Path) -> AsyncIterator[ClientSession]:
    """A client that renders views (it declares MCP Apps in its handshake); the server in process (the stdio
    handshakes are the slow tests below)."""
    declared = [advertise(EXTENSION_ID, APPS[EXTENSION_ID])]
    async with in_process(ws, None, extensions=declared, BA_MCP_SANDBOX__ALLOWED_IMPORTS="*") as client:
        yield client.session


@pytest.fixture
def plain(default_server: Client) -> ClientSession:
    """A client that renders no views: the run's shared server in the default configuration (conftest)."""
    return default_server.session


async def test_a_client_that_declares_apps_gets_views_and_another_gets_what_it_got(
    apps: ClientSession, plain: ClientSession
) -> None:
    with_views = {t.name: t for t in (await apps.list_tools()).tools}
    without = {t.name: t for t in (await plain.list_tools()).tools}
    for name in ("query_database", "query_metrics", "file_reader", "run_python"):
        assert with_views[name].meta == {"ui": {"resourceUri": TABLE_VIEW}, "ui/resourceUri": TABLE_VIEW}
        assert without[name].meta is None
    assert with_views["run_analysis"].meta["ui"]["resourceUri"] == REPORT_VIEW  # type: ignore[index]
    rows = with_views[ROWS_TOOL]
    assert rows.meta["ui"]["visibility"] == ["app"] and ROWS_TOOL not in without  # type: ignore[index]
    # what the model sees is the same list: the app-only tool is hidden by hosts, _meta is not the model's
    seen = [t.model_dump(exclude={"meta"}) for n, t in with_views.items() if n != ROWS_TOOL]
    assert seen == [t.model_dump(exclude={"meta"}) for t in without.values()]
    listed = {str(r.uri): r for r in (await apps.list_resources()).resources}
    assert listed[TABLE_VIEW].mime_type == APP_MIME_TYPE and TABLE_VIEW not in {
        str(r.uri) for r in (await plain.list_resources()).resources
    }
    page = (await apps.read_resource(TABLE_VIEW)).contents[0]
    assert page.mime_type == APP_MIME_TYPE
    html = page.text  # type: ignore[union-attr]
    assert "<script>" in html and "script-src 'sha256-" in html and "connect-src 'none'" in html
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "") and "https://" not in html
    # the model's text never grows: the same call gives the same text to both; the whole table rides in _meta
    query = "SELECT 1 AS a, 'x' AS b UNION ALL SELECT 2, 'y'"
    one = await apps.call_tool("query_database", {"query": query})
    two = await plain.call_tool("query_database", {"query": query})
    assert text_of(one).split("\n")[1:] == text_of(two).split("\n")[1:]
    assert one.meta["dev.ba-mcp/view"]["tables"][0]["rows"] == [[1, "x"], [2, "y"]]  # type: ignore[index]
    assert "dev.ba-mcp/view" not in (two.meta or {})


@pytest.mark.slow  # two more server starts (the fast tier is at its 90 s budget)
async def test_the_2026_07_28_handshake_declares_and_gets_the_same(ws: Path) -> None:
    """The modern protocol (server/discover, capabilities on each request): the server advertises the extension
    in its capabilities (the 2025-11-25 schema has no place for it: there, hosts read the tools' _meta)."""
    async with stdio_client(stdio_params(ws)) as (read, write), ClientSession(read, write, extensions=APPS) as session:
        found = await session.discover()
        assert found.capabilities.extensions is not None and EXTENSION_ID in found.capabilities.extensions
        assert session.protocol_version == "2026-07-28"
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert tools["query_database"].meta["ui"]["resourceUri"] == TABLE_VIEW  # type: ignore[index]
        assert ROWS_TOOL in tools
        page = (await session.read_resource(REPORT_VIEW)).contents[0]
        assert page.mime_type == APP_MIME_TYPE and 'data-mode="report"' in page.text  # type: ignore[union-attr]
    async with stdio_client(stdio_params(ws)) as (read, write), ClientSession(read, write, extensions=APPS) as session:
        legacy = await session.initialize()
        assert legacy.protocol_version == "2025-11-25" and legacy.capabilities.extensions is None


async def test_view_rows_pages_sorts_and_filters_the_complete_artifact(apps: ClientSession) -> None:
    result = await apps.call_tool("query_database", {"query": ROWS, "output_level": "brief"})
    artifact = meta_of(result)["artifact_id"]
    page = await apps.call_tool(ROWS_TOOL, {"artifact_id": artifact, "offset": 4990, "limit": 50})
    data = page.structured_content or {}
    assert data["total_rows"] == 5000 and data["rows"][-1][0] == 4999 and len(data["rows"]) == 10
    page = await apps.call_tool(ROWS_TOOL, {"artifact_id": artifact, "order_by": "revenue", "descending": True})
    assert (page.structured_content or {})["rows"][0][0] == 4999
    page = await apps.call_tool(ROWS_TOOL, {"artifact_id": artifact, "filter": "4321"})
    assert [r[0] for r in (page.structured_content or {})["rows"]] == [4321]
    bad = await apps.call_tool(ROWS_TOOL, {"artifact_id": artifact, "order_by": 'n" DESC; --'})
    assert bad.is_error and "BAD_VIEW_REQUEST" in text_of(bad)
    gone = await apps.call_tool(ROWS_TOOL, {"artifact_id": "artifact_000000000000"})
    assert gone.is_error


async def test_view_rows_refuses_bad_arguments_naming_the_parameter(apps: ClientSession) -> None:
    """Red team: ``{"offset": "abc"}`` answered Python's ``invalid literal for int()``; a negative limit gave one row
    and 1.5 a page. Each bad argument is refused, the error naming it and what it takes; the paging stays served."""
    result = await apps.call_tool("query_database", {"query": ROWS, "output_level": "brief"})
    artifact = meta_of(result)["artifact_id"]
    bad: list[tuple[dict[str, Any], str]] = [
        ({"offset": "abc"}, "offset must be a whole number from 0"),
        ({"offset": -1}, "offset must be a whole number from 0"),
        ({"offset": 1.5}, "offset must be a whole number"),
        ({"offset": True}, "offset must be a whole number"),
        ({"offset": 10**20}, "offset must be a whole number"),
        ({"offset": [1]}, "not an array"),
        ({"limit": 0}, "limit must be a whole number from 1 to 1,000"),
        ({"limit": -5}, "limit must be a whole number from 1 to 1,000"),
        ({"limit": 10**9}, "limit must be a whole number from 1 to 1,000"),
        ({"limit": "50"}, "limit must be a whole number"),
        ({"order_by": 3}, "order_by must be a text"),
        ({"order_by": "no such column"}, "order_by: no column 'no such column'"),
        ({"descending": "yes"}, "descending must be true or false"),
        ({"descending": 1}, "descending must be true or false"),
        ({"filter": {"a": 1}}, "filter must be a text"),
        ({"filter": "x" * 201}, "filter must be a text of at most 200 characters"),
        ({"chart": "n"}, "chart must be an object"),
        ({"chart": {"x": "n"}}, "chart.y is required"),
        ({"chart": {"x": "n", "y": 2}}, "chart.y must be a text"),
        ({"chart": {"x": "n", "y": "revenue", "z": "n"}}, "chart: unknown key 'z'"),
        ({"chart": {"x": "nope", "y": "revenue"}}, "chart.x: no column 'nope'"),
        ({"page": 2}, "unknown argument 'page'"),
    ]
    for arguments, said in bad:
        answer = await apps.call_tool(ROWS_TOOL, {"artifact_id": artifact, **arguments})
        text = text_of(answer)
        assert answer.is_error and "BAD_VIEW_REQUEST" in text and said in text, (arguments, text)
        assert "invalid literal" not in text and "Traceback" not in text
    for artifact_id in (7, None, "artifact_XYZ", "../artifact_000000000000"):
        answer = await apps.call_tool(ROWS_TOOL, {"artifact_id": artifact_id})
        assert answer.is_error and "artifact_id must be an artifact id" in text_of(answer), text_of(answer)
    page = await apps.call_tool(ROWS_TOOL, {"artifact_id": artifact, "offset": 4998.0, "limit": 1000})
    data = page.structured_content or {}
    assert not page.is_error and [r[0] for r in data["rows"]] == [4998, 4999] and data["total_rows"] == 5000


async def test_view_rows_pages_an_artifact_whatever_its_column_names(apps: ClientSession) -> None:
    """Red team: a data column named ``__ba_mcp_total`` (the page's helper column) broke paging; columns named after
    artifact ids (``artifact_0123456789ab_total``, ``see artifact_…``, a real artifact's id) must never be read as
    references to artifacts — the ids a statement reads are the tables DuckDB's parser finds, never text inside a
    quoted identifier. Paged, filtered, sorted and charted through the real path, and queried."""
    other = meta_of(await apps.call_tool("query_database", {"query": ROWS, "output_level": "brief"}))["artifact_id"]
    names = [
        "__ba_mcp_total",
        "__BA_MCP_TOTAL_",
        "artifact_0123456789ab_total",
        "see artifact_0123456789ab",
        other,  # a look-alike: the name of a real artifact, as a column
        'a "quoted" name',
    ]
    picked = ", ".join(f"range % {i + 2} AS {_quote(name)}" for i, name in enumerate(names))
    made = await apps.call_tool(
        "query_database", {"query": f"SELECT range AS n, {picked} FROM range(2500)", "output_level": "brief"}
    )
    artifact = meta_of(made)["artifact_id"]
    page = await apps.call_tool(ROWS_TOOL, {"artifact_id": artifact, "offset": 2495, "limit": 10})
    data = page.structured_content or {}
    assert not page.is_error, text_of(page)
    assert [c["name"] for c in data["columns"]] == ["n", *names] and data["total_rows"] == 2500
    assert data["rows"][0] == [2495, *[2495 % (i + 2) for i in range(len(names))]] and len(data["rows"]) == 5
    for name in names:  # sorted by each: the total is the count of rows, never the column's values
        page = await apps.call_tool(ROWS_TOOL, {"artifact_id": artifact, "order_by": name, "descending": True})
        data = page.structured_content or {}
        assert not page.is_error and data["total_rows"] == 2500 and len(data["rows"][0]) == 1 + len(names), name
    page = await apps.call_tool(ROWS_TOOL, {"artifact_id": artifact, "filter": "2499", "limit": 5})
    assert [r[0] for r in (page.structured_content or {})["rows"]] == [2499]
    page = await apps.call_tool(ROWS_TOOL, {"artifact_id": artifact, "offset": 3000})  # past the end: the count
    data = page.structured_content or {}
    assert data["rows"] == [] and data["total_rows"] == 2500
    chart = await apps.call_tool(ROWS_TOOL, {"artifact_id": artifact, "chart": {"x": names[3], "y": "n"}})
    points = (chart.structured_content or {})["chart"]["points"]
    assert [p[0] for p in points] == [0, 1, 2, 3, 4]
    # the model's SQL: a quoted identifier or a string that holds an id reads no artifact; the table it names does
    query = (
        f'SELECT count(*) AS rows, sum("see artifact_0123456789ab") AS s FROM {artifact} '
        f"WHERE {_quote(other)} >= 0 AND 'see {other}' <> 'artifact_0123456789ab'"
    )
    answer = await apps.call_tool("query_database", {"query": query})
    assert not answer.is_error and "2500," in text_of(answer), text_of(answer)
    assert [r["ref"] for r in meta_of(answer)["provenance"]["read"]] == [artifact]
    # and a string literal in FROM names an artifact, as it always did (DuckDB reads FROM 'x' as the table x)
    answer = await apps.call_tool("query_database", {"query": f"SELECT count(*) AS rows FROM '{artifact}'"})
    assert not answer.is_error and "2500" in text_of(answer), text_of(answer)


async def test_a_whole_table_with_two_columns_of_one_name_keeps_every_cell(apps: ClientSession) -> None:
    """The table a result shows whole (in _meta for the view) is read column by column: two columns named ``a``
    are two cells of each row (rows as dicts kept one of them)."""
    result = await apps.call_tool("query_database", {"query": 'SELECT 1 AS a, 2 AS a, 3 AS "A"'})
    table = result.meta["dev.ba-mcp/view"]["tables"][0]  # type: ignore[index]
    assert [c["name"] for c in table["columns"]] == ["a", "a", "A"] and table["rows"] == [[1, 2, 3]]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@pytest.mark.slow  # a server process
def test_a_bare_probe_then_an_apps_handshake_on_one_stdio_connection_gets_views_the_second_time(ws: Path) -> None:
    """Issue 53 (ext-apps#671): Claude's host sends a bare ``initialize`` first, then one declaring the extension —
    on the same connection. The views follow the latest handshake: none after the probe, every one after the
    second. Raw JSON-RPC lines, as the host writes them (the SDK's client initializes once per session)."""
    params = stdio_params(ws)
    proc = subprocess.Popen(
        [params.command, *params.args], env=params.env, cwd=params.cwd, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    lines = iter(proc.stdout.readline, "")

    def ask(number: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params or {}}) + "\n")
        proc.stdin.flush()
        answer: dict[str, Any] = next(m for m in map(json.loads, lines) if m.get("id") == number)
        return answer["result"]

    def initialized() -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")

    hello = {"protocolVersion": "2025-11-25", "clientInfo": {"name": "claude-ai", "version": "0.1.0"}}
    try:
        assert ask(1, "initialize", {**hello, "capabilities": {}})["protocolVersion"] == "2025-11-25"
        initialized()
        probe = {t["name"]: t for t in ask(2, "tools/list")["tools"]}
        assert all("_meta" not in t for t in probe.values()) and ROWS_TOOL not in probe
        ask(3, "initialize", {**hello, "capabilities": {"extensions": APPS}})
        initialized()
        second = {t["name"]: t for t in ask(4, "tools/list")["tools"]}
        assert second["query_database"]["_meta"]["ui"]["resourceUri"] == TABLE_VIEW and ROWS_TOOL in second
        views = {r["uri"] for r in ask(5, "resources/list")["resources"]}
        assert TABLE_VIEW in views and REPORT_VIEW in views
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow  # a server process
async def test_one_http_server_answers_a_probe_an_apps_handshake_server_discover_and_initialize(ws: Path) -> None:
    """Issue 53: over streamable HTTP each handshake is its own session of one server — a bare probe gets no views,
    the Apps handshake after it gets them (ext-apps#671); a 2026-07-28 client's ``server/discover`` (Claude Code
    2.1.260 sends it first) is answered with the extension, and a 2025-11-25 ``initialize`` still works beside it."""
    from mcp.client.streamable_http import streamable_http_client

    with http_serve(ws) as url:
        async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as probe:
            await probe.initialize()
            tools = {t.name: t for t in (await probe.list_tools()).tools}
            assert tools["query_database"].meta is None and ROWS_TOOL not in tools
        async with (
            streamable_http_client(url) as (read, write, *_),
            ClientSession(read, write, extensions=APPS) as second,
        ):
            await second.initialize()
            tools = {t.name: t for t in (await second.list_tools()).tools}
            assert tools["query_database"].meta["ui"]["resourceUri"] == TABLE_VIEW and ROWS_TOOL in tools  # type: ignore[index]
        async with (
            streamable_http_client(url) as (read, write, *_),
            ClientSession(read, write, extensions=APPS) as modern,
        ):
            found = await modern.discover()
            assert modern.protocol_version == "2026-07-28"
            assert found.capabilities.extensions is not None and EXTENSION_ID in found.capabilities.extensions
            assert ROWS_TOOL in {t.name for t in (await modern.list_tools()).tools}
        async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as legacy:
            assert (await legacy.initialize()).protocol_version == "2025-11-25"
            result = await legacy.call_tool("query_database", {"query": "SELECT 41 + 1 AS answer"})
            assert "42" in text_of(result)


# -- rendered in Chromium through the official AppBridge -----------------------------------------------

HOST_PAGE = """<!doctype html><html><head><meta charset="utf-8"></head><body style="margin:0">
<iframe id="view" sandbox="allow-scripts" style="width:1000px;height:1400px;border:0"></iframe>
</body></html>"""

START = """async ([html, input, result, theme, modes]) => {
  const iframe = document.getElementById("view");
  const hostContext = {theme, availableDisplayModes: modes, displayMode: "inline"};
  const bridge = new window.AppBridge(null, {name: "test-host", version: "1.0.0"}, {serverTools: {}}, {hostContext});
  window.bridge = bridge;
  window.modeRequests = [];
  bridge.onrequestdisplaymode = async ({mode}) => {  // a host that grants what it offers
    window.modeRequests.push(mode);
    return {mode: modes.includes(mode) ? mode : "inline"};
  };
  bridge.oncalltool = async (params) => JSON.parse(await window.hostCallTool(params.name, params.arguments));
  window.sizes = [];
  bridge.onsizechange = (size) => window.sizes.push(size);
  const ready = new Promise((resolve, reject) => {
    bridge.oninitialized = resolve;
    setTimeout(() => reject(new Error("the view never initialized")), 20000);
  });
  // the bridge listens before the view loads: the view's ui/initialize is its first message
  await bridge.connect(new window.PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  iframe.srcdoc = html;
  await ready;
  await bridge.sendToolInput({arguments: input});
  await bridge.sendToolResult(result);
  return true;
}"""


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The official AppBridge as one script (esbuild, offline, from tests/apps_host/node_modules)."""
    esbuild = HOST / "node_modules" / ".bin" / "esbuild"
    if not esbuild.exists():
        pytest.skip("tests/apps_host is not installed (.ci/run runs: npm ci --prefix tests/apps_host)")
    out = tmp_path_factory.mktemp("host") / "host.js"
    made = subprocess.run(
        [str(esbuild), "entry.js", "--bundle", "--format=iife", f"--outfile={out}"],
        cwd=HOST,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    return out.read_text()


@asynccontextmanager
async def rendered(
    session: ClientSession,
    bundle: str,
    view: str,
    tool: str,
    arguments: dict[str, Any],
    modes: tuple[str, ...] = ("inline",),
) -> AsyncIterator[tuple[Any, Any, list[str]]]:
    """Call ``tool`` on the server, then render ``view`` in a host page with the AppBridge fed with the call's
    input and result (the host offering the display ``modes``): the page, the view's frame and every URL the page
    requested."""
    from playwright.async_api import async_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Chromium is not installed (.ci/run installs Debian's package where it can)")
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    html = (await session.read_resource(view)).contents[0].text  # type: ignore[union-attr]
    payload = result.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def host_call_tool(name: str, args: dict[str, Any]) -> str:
        called = await session.call_tool(name, args)
        return json.dumps(called.model_dump(by_alias=True, mode="json", exclude_none=True))

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = await browser.new_page(viewport={"width": 1000, "height": 1400})
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            await page.expose_function("hostCallTool", host_call_tool)
            await page.set_content(HOST_PAGE)
            await page.add_script_tag(content=bundle)
            assert await page.evaluate(START, [html, arguments, payload, "light", list(modes)])
            frame = page.frames[1]
            await frame.wait_for_selector("main > *:not(#waiting)", timeout=20000)
            yield page, frame, requests
        finally:
            await browser.close()


@pytest.mark.slow
async def test_the_table_view_renders_rows_and_a_chart_and_pages_to_the_last_row(
    apps: ClientSession, bundle: str, tmp_path: Path
) -> None:
    query = {"query": ROWS, "output_level": "brief"}
    async with rendered(apps, bundle, TABLE_VIEW, "query_database", query) as (page, frame, requests):
        await table_view_works(page, frame, requests, tmp_path)


@pytest.mark.slow
async def test_the_views_declare_inline_and_fullscreen_and_go_full_screen_where_the_host_offers_it(
    apps: ClientSession, bundle: str
) -> None:
    """Issue 53: the view tells the host the display modes it supports (``appCapabilities.availableDisplayModes``:
    inline and fullscreen, read back by the official AppBridge); where the host offers full screen, a toggle asks
    for it (``ui/request-display-mode``) and back; where it offers only inline, there is no toggle."""
    query = {"query": "SELECT 1 AS a", "output_level": "brief"}
    async with rendered(apps, bundle, TABLE_VIEW, "query_database", query, ("inline", "fullscreen")) as (
        page,
        frame,
        _,
    ):
        assert await page.evaluate("window.bridge.getAppCapabilities().availableDisplayModes") == [
            "inline",
            "fullscreen",
        ]
        toggle = frame.locator("button.display-mode")
        assert await toggle.text_content() == "Full screen"
        await toggle.click()
        await frame.wait_for_selector("button.display-mode:text-is('Exit full screen')")
        await frame.locator("button.display-mode").click()
        await frame.wait_for_selector("button.display-mode:text-is('Full screen')")
        assert await page.evaluate("window.modeRequests") == ["fullscreen", "inline"]
    async with rendered(apps, bundle, TABLE_VIEW, "query_database", query) as (page, frame, _):  # inline only
        assert await page.evaluate("window.bridge.getAppCapabilities().availableDisplayModes") == [
            "inline",
            "fullscreen",
        ]
        assert await frame.locator("button.display-mode").count() == 0


async def table_view_works(page: Any, frame: Any, requests: list[str], tmp_path: Path) -> None:
    await frame.wait_for_selector("td")
    assert await frame.locator("tbody tr").count() == 50
    assert (await frame.locator("tbody tr").first.locator("td").first.text_content()) == "0"
    await frame.wait_for_selector("svg.chart rect")  # a chart of the result (drawn once its rows came)
    assert await frame.locator("select[aria-label='Chart type']").input_value() == "bar"
    await frame.locator("button[data-page=last]").click()
    await frame.wait_for_selector(".status:text-is('rows 4,951–5,000 of 5,000')")  # the view's CSP forbids eval
    assert (await frame.locator("tbody tr").last.locator("td").first.text_content()) == "4,999"
    assert await frame.locator(".status").text_content() == "rows 4,951–5,000 of 5,000"
    await frame.locator("th", has_text="revenue").click()
    await frame.locator("th", has_text="revenue").click()  # descending
    await frame.wait_for_selector("tbody tr:first-child td:first-child:text-is('4,999')")
    await page.screenshot(path=str(tmp_path / "table-view.png"), full_page=True)
    assert [u for u in requests if not u.startswith(("about:", "data:"))] == [], requests


@pytest.mark.slow
async def test_a_time_series_is_charted_as_a_line_and_figures_show_as_images(
    apps: ClientSession, bundle: str, tmp_path: Path
) -> None:
    monthly = {"metrics": ["net_revenue"], "time_grain": "month", "output_level": "brief"}
    async with rendered(apps, bundle, TABLE_VIEW, "query_metrics", monthly) as (page, frame, _):
        await frame.wait_for_selector("svg.chart polyline")
        assert await frame.locator("select[aria-label='Chart type']").input_value() == "line"
        await page.screenshot(path=str(tmp_path / "series-view.png"), full_page=True)
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.title('a figure')"
    async with rendered(apps, bundle, TABLE_VIEW, "run_python", {"code": code}) as (page, frame, requests):
        await frame.wait_for_selector("figure img")
        src = await frame.locator("figure img").first.get_attribute("src")
        assert src is not None and src.startswith("data:image/png;base64,")
        assert [u for u in requests if not u.startswith(("about:", "data:"))] == [], requests


@pytest.mark.slow
async def test_the_report_view_leads_with_the_analysis_headline(
    apps: ClientSession, bundle: str, tmp_path: Path
) -> None:
    made = await apps.call_tool(
        "query_database", {"query": "SELECT 2025 AS year, 10 AS orders", "output_level": "brief"}
    )
    assert not made.is_error
    saved = await apps.call_tool(
        "save_analysis",
        {
            "name": "views-report",
            "steps": "last:1",
            "conclusions": [{"text": "10 orders", "output": "s1_table", "rule": "value", "column": "orders"}],
        },
    )
    assert not saved.is_error, text_of(saved)
    name = {"name": "views-report"}
    async with rendered(apps, bundle, REPORT_VIEW, "run_analysis", name) as (page, frame, requests):
        await frame.wait_for_selector(".summary .headline")
        headline = await frame.locator(".summary .headline").text_content() or ""
        assert headline.startswith("All 1 conclusion(s) still hold"), headline
        await frame.wait_for_selector("td")
        await page.screenshot(path=str(tmp_path / "report-view.png"), full_page=True)
        assert [u for u in requests if not u.startswith(("about:", "data:"))] == [], requests


DAILY = (
    "SELECT DATE '2007-01-01' + CAST(i AS INTEGER) AS day, ['North', 'South', 'East'][i % 3 + 1] AS region, "
    "round(100 + (i % 97) * 1.5, 2) AS revenue FROM range(6809) AS t(i)"
)


@pytest.mark.slow
async def test_the_chart_is_of_the_whole_result_and_splits_into_series(
    apps: ClientSession, bundle: str, tmp_path: Path
) -> None:
    """Issue 50 item 8: 6,809 daily rows (an artifact, 1,000 fetched) are charted whole — by month, bucketed in the
    engine and said so, one line per region — and the last points add up to the true total of the last month
    (August 2025 up to the 22nd: the sum query_database gives), not the cliff of a first page. Split by
    region, a monthly table draws one line per region with a legend, its dates labelled by month (2025-03, not
    2025-03-01T00:00:00)."""
    last = await apps.call_tool(
        "query_database",
        {
            "query": f"SELECT sum(revenue) AS v, max(day) AS d FROM ({DAILY}) WHERE day >= DATE '2025-08-01'",
            "output_level": "full",
        },
    )
    total = float(text_of(last).split("Rows (csv):\nv,d\n", 1)[1].split(",")[0])
    async with rendered(apps, bundle, TABLE_VIEW, "query_database", {"query": DAILY}) as (page, frame, _):
        await frame.wait_for_selector("svg.chart polyline")
        note = await frame.locator(".chart-note").text_content()
        assert note is not None and "all 6,809 rows" in note and "by month (6,809 values of day bucketed)" in note
        lines = [
            (await line.get_attribute("data-values") or "").split(",")
            for line in await frame.locator("svg.chart polyline").all()
        ]
        assert len(lines) == 3 and all(len(values) == 224 for values in lines)  # split by region, by default
        last = sum(float(values[-1]) for values in lines)
        assert abs(last - total) < 0.01, (last, total)
        labels = await frame.locator("svg.chart text.x-label").all_text_contents()
        assert labels[0] == "2007-01" and all(len(label) == 7 for label in labels), labels
        await page.screenshot(path=str(tmp_path / "whole-result-chart.png"), full_page=True)
    monthly = {
        "query": f"SELECT date_trunc('month', day) AS month, region, sum(revenue) AS revenue FROM ({DAILY}) "
        "WHERE day >= DATE '2024-01-01' GROUP BY ALL ORDER BY ALL"
    }
    async with rendered(apps, bundle, TABLE_VIEW, "query_database", monthly) as (page, frame, _):
        await frame.wait_for_selector("svg.chart polyline")
        assert await frame.locator("select[aria-label='Split by']").input_value() == "region"
        assert sorted(await frame.locator("ul.legend li").all_text_contents()) == ["East", "North", "South"]
        assert await frame.locator("svg.chart polyline").count() == 3
        labels = await frame.locator("svg.chart text.x-label").all_text_contents()
        assert labels[0] == "2024-01" and "T" not in "".join(labels), labels
        await page.screenshot(path=str(tmp_path / "series-split-chart.png"), full_page=True)
