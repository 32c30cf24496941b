"""Plug-ins from installed packages (issue 64 item 4; ``ba_mcp/plugins.py``): the example package of
``tests/plugins/ba-mcp-example`` — a separate distribution installed into the test environment by the lock — adds an
engine (``filedir``: a folder of CSV and Parquet files), a tool (``business_days``), a file format (``records``:
``.rec`` files, parsed in the engine worker) and a skill folder, through entry points, only when the operator's
configuration names it; a project file cannot; a plug-in that fails to import is listed unavailable with the reason
and the server serves without it.

The fast tests load plug-ins into this process's registry and take them out again; the sessions (slow) are real
``ba-mcp serve`` processes over stdio."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from ba_mcp import plugins, registry
from ba_mcp.formats import format_for
from ba_mcp.settings import load_settings, trust_project
from tests.conftest import ROOT, in_process, server_env, text_of

EXAMPLE = "ba-mcp-example"


@pytest.fixture
def clean_registry() -> Iterator[None]:
    """The registry's tables as they were before the test (a plug-in loaded here is this process's otherwise)."""
    engines, tools, formats = registry.engines(), registry.tool_names(), registry.formats()
    yield
    for fmt in registry.formats():
        if fmt not in formats:
            registry.unregister_format(fmt.name)
    for info in registry.engines():
        if info not in engines:
            registry.unregister(info.kind)
    for name in registry.tool_names():
        if name not in tools:
            registry.unregister_tool(name)


def broken_site(root: Path, entry: str, module: str) -> Path:
    """A folder that, on the import path, is an installed distribution ``ba-mcp-broken`` whose one entry point is
    ``entry`` (``[group]\\nname = value``) and whose package ``ba_mcp_broken`` holds ``module``'s text."""
    site = root / "site"
    info = site / "ba_mcp_broken-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ba-mcp-broken\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry + "\n")
    (site / "ba_mcp_broken").mkdir()
    (site / "ba_mcp_broken" / "__init__.py").write_text(module)
    return site


# -- the loader, in this process -------------------------------------------------------------------------------


def test_an_enabled_plugin_adds_its_engine_tool_and_skills_to_the_same_tables(
    tmp_path: Path, clean_registry: None
) -> None:
    """Named in the operator's ``plugins:`` the example package's engine takes URLs of its scheme, its tool's section
    is validated by the tool's own model, its skill folder is read; loading it twice changes nothing."""
    env = {"BA_MCP_PLUGINS": json.dumps([EXAMPLE]), "BA_MCP_DATABASES__LAKE__URL": "filedir:///lake"}
    config = tmp_path / "config.yaml"
    config.write_text("tools:\n  business_days: {holidays: [2026-12-25]}\n")
    for _ in range(2):
        settings = load_settings(config, workspace=tmp_path / "ws", environ=env)
    [plugin] = [p for p in settings.plugin_status if p.name == EXAMPLE]
    assert plugin.loaded and plugin.version == "0.1.0", plugin
    assert set(plugin.provides) == {"engine filedir", "tool business_days", "format records", "skills example"}
    assert registry.format_info("records") == registry.FormatInfo(
        "records", (".rec",), "ba_mcp_example.records:read", "Records (field: value)", EXAMPLE
    )
    assert settings.databases["lake"].kind == "filedir"
    assert registry.info("filedir").label == "Folder of files"
    assert registry.tool_names().count("business_days") == 1
    assert settings.tool("business_days").holidays == [dt.date(2026, 12, 25)]  # type: ignore[attr-defined]
    assert any((p / "month-end-calendar" / "SKILL.md").is_file() for p in settings.skills.paths)
    assert registry.tool_info("business_days") == registry.ToolInfo(
        "business_days", "ba_mcp_example.business_days:BusinessDays", EXAMPLE
    )
    again = load_settings(workspace=tmp_path / "ws", environ={})  # a configuration naming none: its tables hold none
    assert "business_days" not in registry.tool_names() and again.skills.paths == []
    assert "filedir" not in {e.kind for e in registry.engines()} and not [f for f in registry.formats() if f.plugin]


def test_an_installed_plugin_not_enabled_loads_nothing(tmp_path: Path, clean_registry: None) -> None:
    settings = load_settings(workspace=tmp_path / "ws", environ={})
    [plugin] = [p for p in settings.plugin_status if p.name == EXAMPLE]
    assert not plugin.enabled and not plugin.problem and "tool business_days" in plugin.provides
    assert "business_days" not in registry.tool_names()
    assert "filedir" not in {e.kind for e in registry.engines()}
    from ba_mcp.settings import ConfigError

    with pytest.raises(ConfigError, match=r"not a tool of this server .*plug-in ba-mcp-example has it"):
        load_settings(workspace=tmp_path / "ws", environ={"BA_MCP_TOOLS__BUSINESS_DAYS__ENABLED": "true"})


def test_a_project_file_cannot_enable_a_plugin_even_approved(
    tmp_path: Path, clean_registry: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading code is the operator's alone: a project's ``plugins:`` is refused and named, approved or not."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    project = tmp_path / "repo" / "ba-mcp.yaml"
    project.parent.mkdir()
    project.write_text(f"plugins: [{EXAMPLE}]\n")
    for approve in (False, True):
        if approve:
            trust_project(project)
        settings = load_settings(project=project, workspace=tmp_path / "ws", environ={})
        assert settings.plugins == [], approve
        assert settings.project_file is not None and settings.project_file.approved == approve
        assert any(r.startswith("plugins — the operator's alone") for r in settings.project_file.refused)
        assert "business_days" not in registry.tool_names()


@pytest.mark.parametrize(
    ("entry", "module", "reason"),
    [
        ("[ba_mcp.tools]\nbroken = ba_mcp_broken:Broken", "import not_a_module_anywhere\n", "ModuleNotFoundError"),
        ("[ba_mcp.tools]\nbroken = ba_mcp_broken:Broken", "Broken = 3\n", "is not a Tool class named 'broken'"),
        (
            "[ba_mcp.tools]\nquery_database = ba_mcp_broken:QueryDatabase",
            "from ba_mcp.tools.query_database import QueryDatabase\n",
            "a tool named 'query_database' is already served",
        ),
        (
            "[ba_mcp.engines]\nduckdb = ba_mcp_broken:INFO",
            "from ba_mcp import EngineInfo\nINFO = EngineInfo('duckdb', 'Mine', 'ba_mcp_broken')\n",
            "an engine of kind 'duckdb' is already served",
        ),
        (
            "[ba_mcp.formats]\nmine = ba_mcp_broken:INFO",
            "from ba_mcp import FormatInfo\nINFO = FormatInfo('mine', ('.csv',), 'ba_mcp_broken:read')\nread = len\n",
            "files ending in .csv are already read as another format",
        ),
        (
            "[ba_mcp.formats]\nexcel = ba_mcp_broken:INFO",
            "from ba_mcp import FormatInfo\nINFO = FormatInfo('excel', ('.xl9',), 'ba_mcp_broken:read')\nread = len\n",
            "a format named 'excel' is already read",
        ),
        (
            "[ba_mcp.formats]\nmine = ba_mcp_broken:INFO",
            "from ba_mcp import FormatInfo\nINFO = FormatInfo('mine', ('.mine',), 'ba_mcp_broken:nothing')\n",
            "has no function 'nothing'",
        ),
        (
            "[ba_mcp.skills]\nx = ba_mcp_broken:NOWHERE",
            "NOWHERE = '/nonexistent/skills'\n",
            "is not a folder of skills",
        ),
    ],
)
def test_a_plugin_that_cannot_load_is_unavailable_with_the_reason_and_replaces_nothing(
    tmp_path: Path, clean_registry: None, monkeypatch: pytest.MonkeyPatch, entry: str, module: str, reason: str
) -> None:
    site = broken_site(tmp_path, entry, module)
    monkeypatch.syspath_prepend(str(site))  # (and the import system's caches invalidated)
    monkeypatch.delitem(sys.modules, "ba_mcp_broken", raising=False)  # each case's own package
    before = registry.tool_info("query_database"), registry.info("duckdb")
    loaded = plugins.enable(["BA_MCP.broken", EXAMPLE])  # a name written another way is the same package
    by_name = {p.name: p for p in loaded.plugins}
    assert by_name["ba-mcp-broken"].enabled and reason in by_name["ba-mcp-broken"].problem, by_name
    assert by_name[EXAMPLE].loaded  # the other plug-in loads regardless
    assert (registry.tool_info("query_database"), registry.info("duckdb")) == before
    assert "broken" not in registry.tool_names()
    assert [f.name for f in registry.formats() if f.plugin] == ["records"]  # the example's; the broken one's none
    assert format_for(".csv") == "csv"


RECORDS = """# two fields each, the third record a field more
region: North
amount: 10.5

region: South
amount: 4
manager: Ben

region: West
amount: 7
"""


@pytest.mark.anyio
async def test_a_plugin_format_is_read_by_file_reader_in_the_engine_worker(
    tmp_path: Path, clean_registry: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example's ``records`` format through a real MCP session (in process): a ``.rec`` file is read by its
    suffix as a table, windowed like every table (offset, nrows, the continuation), listed with its format — and
    parsed in the engine worker, never in the server: the server's copy of the reader is replaced by one that
    fails, and the answers are the worker's. A line that is no record is the format's own error."""
    import ba_mcp_example.records

    def in_the_server(reading: object) -> object:
        raise AssertionError("a plug-in's format was parsed in the server")

    monkeypatch.setattr(ba_mcp_example.records, "read", in_the_server)
    ws = tmp_path / "ws"
    (ws / "data").mkdir(parents=True)
    (ws / "data" / "sales.rec").write_text(RECORDS)
    (ws / "data" / "bad.rec").write_text("region: North\nthis line has no colon\n")
    async with in_process(ws, ["file_reader"], BA_MCP_PLUGINS=json.dumps([EXAMPLE])) as client:
        whole = await client.call_tool("file_reader", {"path": "data/sales.rec", "output_level": "full"})
        text = text_of(whole)
        assert not whole.is_error and "3 rows" in text, text
        for value in ("North", "South", "West", "10.5", "Ben", "manager"):
            assert value in text, (value, text)
        second = await client.call_tool("file_reader", {"path": "data/sales.rec", "offset": 1, "nrows": 1})
        text = text_of(second)
        assert not second.is_error and "South" in text and "North" not in text and "West" not in text, text
        assert "offset=2" in text or '"offset": 2' in text, text  # the continuation from the next record
        listed = text_of(await client.call_tool("file_reader", {"path": "data", "output_level": "full"}))
        assert "2 records" in listed, listed
        bad = await client.call_tool("file_reader", {"path": "data/bad.rec"})
        assert bad.is_error and "BAD_RECORD" in text_of(bad) and "line 2" in text_of(bad), text_of(bad)


# -- real sessions over stdio ----------------------------------------------------------------------------------


def _lake(ws: Path) -> dict[str, float]:
    """The engine's folder: a CSV and a Parquet file; the sums by region the query must give."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    lake = ws / "lake"
    lake.mkdir(parents=True)
    (lake / "sales.csv").write_text("region,amount\nNorth,10.5\nSouth,4\nNorth,1.25\n")
    pq.write_table(pa.table({"region": ["North", "South"], "manager": ["Ada", "Ben"]}), lake / "regions.parquet")
    return {"North": 10.5 + 1.25, "South": 4.0}


async def _session(params: StdioServerParameters, errlog: Path, body: object) -> None:
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await body(session)  # type: ignore[operator]


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_example_plugin_serves_its_engine_and_tool_through_a_real_session(tmp_path: Path) -> None:
    """Enabled by the operator (``BA_MCP_PLUGINS``): its tool is listed and called through the pipeline (a table at
    the asked output level), its engine answers query_database (a CSV joined with a Parquet file) and its schema
    resource, refuses a write by its own rule (READ_ONLY, the folder unchanged), and its skill is offered."""
    import numpy as np

    ws = tmp_path / "ws"
    sums = _lake(ws)
    audit = tmp_path / "audit"
    env = {
        "BA_MCP_PLUGINS": json.dumps([EXAMPLE]),
        "BA_MCP_DATABASES__LAKE__URL": "filedir:///lake",
        "BA_MCP_AUDIT__DIR": str(audit),
    }
    start, end = dt.date(2026, 2, 1), dt.date(2026, 3, 31)

    async def body(session: ClientSession) -> None:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert "business_days" in tools and "lake (Folder of files)" in (tools["query_database"].description or "")
        assert "month-end-calendar" in (tools["use_skill"].description or "")
        days = await session.call_tool("business_days", {"start": str(start), "end": str(end), "output_level": "full"})
        text = text_of(days)
        assert not days.is_error, text
        for month in ("2026-02", "2026-03"):
            first = dt.date(2026, int(month[-2:]), 1)
            last = min(end, (first + dt.timedelta(days=32)).replace(day=1) - dt.timedelta(days=1))
            expected = int(np.busday_count(first, last + dt.timedelta(days=1)))
            assert f"{month}" in text and str(expected) in text, (month, expected, text)

        sql = (
            "SELECT s.region, r.manager, sum(s.amount) AS total FROM sales s JOIN regions r USING (region) "
            "GROUP BY ALL ORDER BY s.region"
        )
        answer = await session.call_tool(
            "query_database", {"database": "lake", "query": sql, "output_level": "full", "timeout": 120}
        )
        text = text_of(answer)
        assert not answer.is_error, text
        for region, total in sums.items():
            assert region in text and f"{total:g}" in text, (region, total, text)
        assert "Ada" in text and "Ben" in text, text
        schema = (await session.read_resource("db://lake/schema")).contents[0]
        assert "Folder of files" in schema.text and "regions" in schema.text, schema  # type: ignore[union-attr]
        for write in ("CREATE TABLE kept AS SELECT 1 AS a", "COPY sales TO '/databases/lake/copy.csv'"):
            refused = await session.call_tool("query_database", {"database": "lake", "query": write})
            assert refused.is_error and "READ_ONLY" in text_of(refused), text_of(refused)
        assert sorted(p.name for p in (ws / "lake").iterdir()) == ["regions.parquet", "sales.csv"]
        bad = await session.call_tool("business_days", {"start": str(end), "end": str(start)})  # the tool's error
        assert bad.is_error and "BAD_RANGE" in text_of(bad), text_of(bad)
        years = {"start": "2026-01-01", "end": "2027-12-31"}  # the pipeline's observation at the level asked
        brief = text_of(await session.call_tool("business_days", {**years, "output_level": "brief"}))
        full = text_of(await session.call_tool("business_days", {**years, "output_level": "full"}))
        assert brief.startswith("business_days: table (brief)") and "24 rows" in brief, brief
        assert full.startswith("business_days: table (full)") and "Schema: month" in full, full

    await _session(
        StdioServerParameters(
            command=sys.executable, args=["-m", "ba_mcp", "serve"], env=server_env(ws, **env), cwd=str(ROOT)
        ),
        tmp_path / "stderr.log",
        body,
    )
    records = [json.loads(line) for f in sorted(audit.glob("audit-*.jsonl")) for line in f.read_text().splitlines()]
    tools = [r.get("tool") for r in records if r.get("event") == "call"]
    assert tools.count("business_days") == 4 and "query_database" in tools, tools  # the audit trail has them


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_plugin_not_enabled_or_named_by_a_project_file_is_absent(tmp_path: Path) -> None:
    """Installed but not in the operator's ``plugins:`` — or named only by the project's ``ba-mcp.yaml``, approved
    or not — the server lists none of it and its engine's URL reaches no engine."""
    ws = tmp_path / "ws"
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "ba-mcp.yaml").write_text(f"plugins: [{EXAMPLE}]\n")
    env = server_env(ws, XDG_CONFIG_HOME=str(tmp_path / "config"))

    async def body(session: ClientSession) -> None:
        names = [t.name for t in (await session.list_tools()).tools]
        assert "query_database" in names and "business_days" not in names, names

    for cwd in (ROOT, repo):
        await _session(
            StdioServerParameters(command=sys.executable, args=["-m", "ba_mcp", "serve"], env=env, cwd=str(cwd)),
            tmp_path / "stderr.log",
            body,
        )


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_broken_plugin_is_listed_unavailable_and_the_server_serves(tmp_path: Path) -> None:
    """A plug-in whose import fails: the server starts and serves (the example plug-in beside it loads), says on its
    log which plug-in is unavailable and why; ``ba-mcp plugins`` and ``ba-mcp doctor`` list it so."""
    ws = tmp_path / "ws"
    site = broken_site(tmp_path, "[ba_mcp.tools]\nbroken = ba_mcp_broken:Broken", "import not_a_module_anywhere\n")
    env = server_env(ws, PYTHONPATH=str(site), BA_MCP_PLUGINS=json.dumps(["ba-mcp-broken", EXAMPLE]))

    async def body(session: ClientSession) -> None:
        names = [t.name for t in (await session.list_tools()).tools]
        assert "business_days" in names and "broken" not in names, names
        result = await session.call_tool("query_database", {"query": "SELECT 41 + 1 AS answer", "timeout": 120})
        assert not result.is_error and "42" in text_of(result), text_of(result)

    log = tmp_path / "stderr.log"
    await _session(
        StdioServerParameters(command=sys.executable, args=["-m", "ba_mcp", "serve"], env=env, cwd=str(ROOT)),
        log,
        body,
    )
    said = "plug-in ba-mcp-broken is unavailable: ModuleNotFoundError: No module named 'not_a_module_anywhere'"
    assert said in log.read_text(), log.read_text()
    listed = subprocess.run(
        [sys.executable, "-m", "ba_mcp", "plugins"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert listed.returncode == 1, listed.stderr
    assert "ba-mcp-broken 0.1  unavailable: ModuleNotFoundError" in listed.stdout, listed.stdout
    assert f"{EXAMPLE} 0.1.0  loaded" in listed.stdout, listed.stdout
