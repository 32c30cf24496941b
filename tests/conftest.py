"""Shared fixtures: a workspace holding every kind of file the tools meet; servers in-process (the real
server and pipeline through an MCP client) and over stdio (``stdio_params``)."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests import background, pg_server, spark_server

if TYPE_CHECKING:  # the SDK is imported where a server is made: a file that makes none runs without it (~3 s)
    from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent

# pytest keeps the test files' rewritten bytecode (their asserts made to explain themselves) in __pycache__ unless
# bytecode is not to be written (PYTHONDONTWRITEBYTECODE, as on this machine): then each of the run's two workers
# rewrites and compiles all ~100 test files anew at every run, ~14 CPU-s each. The run writes it (a checkout's own
# files; the servers' workers still run -B and write nothing).
sys.dont_write_bytecode = False


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def _hermetic_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No BA_MCP_* variable of the calling shell reaches a test (in-process settings read the environment),
    and the platform's default workspace points into a temporary directory, not the user's data."""
    saved = dict(os.environ)
    for name in [n for n in os.environ if n.startswith("BA_MCP_")]:
        del os.environ[name]
    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("xdg-data"))
    # the user-level configuration and the approvals of project files (S-17): the run's own, never the user's
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("xdg-config"))
    # the audit trail's default folder (S-20): the run's own, never the user's
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("xdg-state"))
    uv = shutil.which("uv")
    if uv and "UV_CACHE_DIR" not in os.environ:  # uv keeps the machine's own (warm) cache
        found = subprocess.run([uv, "cache", "dir"], capture_output=True, text=True)
        if found.returncode == 0 and found.stdout.strip():
            os.environ["UV_CACHE_DIR"] = found.stdout.strip()
    # the demo database's cache: one per machine for the tests (named by the generator's digest, so a change
    # builds anew), not one per run — the build takes seconds of CPU
    cache = spark_server.cache_root() / "xdg-cache"
    cache.mkdir(parents=True, exist_ok=True)
    os.environ["XDG_CACHE_HOME"] = str(cache)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


# No spare worker started ahead (a server here is built for a few calls, most never run Python; a spare Python worker
# preloads scipy and scikit-learn: ~2 CPU-s for nothing): a test that is about spares asks for them.
NO_SPARES = {"BA_MCP_SANDBOX__SPARE_WORKERS": "0", "BA_MCP_ENGINE__SPARE_WORKERS": "0"}


def server_env(workspace: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k in ("PATH", "HOME", "LANG", "TMPDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME")
    }
    env["BA_MCP_WORKSPACE"] = str(workspace)
    # Tests never reach the internet: the no-key search default points at a closed loopback port.
    env["BA_MCP_WEB__SEARCH__DUCKDUCKGO__ENDPOINT"] = "http://127.0.0.1:9/"
    # No spare Python worker unless a test asks for one (sandbox_params does): most servers here never run
    # Python, and one that does starts its worker on the first call.
    env["BA_MCP_SANDBOX__SPARE_WORKERS"] = "0"
    env["BA_MCP_ENGINE__SPARE_WORKERS"] = "0"  # likewise the engine's: a first query starts its worker
    env.update(extra)
    return env


def stdio_params(workspace: Path, **extra_env: str) -> StdioServerParameters:
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable, args=["-m", "ba_mcp", "serve"], env=server_env(workspace, **extra_env), cwd=str(ROOT)
    )


def make_workspace(root: Path) -> Path:
    """A workspace with the files the hostile and format tests need. Deterministic."""
    ws = root / "ws"
    up = ws / "uploads"
    up.mkdir(parents=True)
    rng = random.Random(7)
    lines = ["order_id,order_date,region,amount,note"]
    for i in range(50):
        note = "" if i % 10 == 0 else ("late, partial" if i % 7 == 0 else f"n{i}")
        amount = "" if i == 3 else f"{rng.uniform(10, 500):.2f}"
        lines.append(f'{i},2025-01-{i % 28 + 1:02d},{["North", "South", "East"][i % 3]},{amount},"{note}"')
    (up / "sales.csv").write_text("\n".join(lines) + "\n")
    (up / "ragged.csv").write_text("a,b,c\n1,2,3\n4,5,6,7,8\n9,10\n11,12,13\n")
    (up / "latin1.csv").write_bytes("name,city\nJosé,Málaga\nRené,Zürich\nFrançois,Besançon\n".encode("latin-1"))
    (up / "utf16.txt").write_bytes("Résumé of Q3: revenue grew 12 %. Next steps follow.\n".encode("utf-16"))
    (up / "empty.csv").write_bytes(b"")
    (up / "blob.bin").write_bytes(bytes(rng.randrange(256) for _ in range(4096)) + b"\x00\x00")
    (up / "config.json").write_text(json.dumps({"name": "kpi", "targets": {"q1": 10, "q2": 12}, "owners": ["a", "b"]}))
    (up / "records.json").write_text(
        json.dumps([{"id": i, "city": f"c{i}", "tags": ["x", "y"], "geo": {"lat": i}} for i in range(30)])
    )
    (up / "events.jsonl").write_text(
        "\n".join(json.dumps({"seq": i, "kind": "click" if i % 2 else "view"}) for i in range(40))
    )
    md = ["# Quarterly report", "", "## Summary", ""]
    md += [
        f"Paragraph {i}: revenue in region {i % 4} grew by {i % 9} percent compared to last year." for i in range(400)
    ]
    md += ["", "## Appendix", "", "The end."]
    (up / "report.md").write_text("\n".join(md))
    (up / "script.py").write_text(
        "def total(rows):\n    return sum(r['amount'] for r in rows)\n\n\nclass Model:\n    pass\n"
    )
    (up / "query.sql").write_text("SELECT region, SUM(amount) FROM sales GROUP BY region;\n")
    (up / "big.csv").write_text("id,value\n" + "".join(f"{i},{i * 3}\n" for i in range(30000)))
    (up / "big.txt").write_text("".join(f"line {i} of a long log file\n" for i in range(20000)))
    (up / "subdir").mkdir()
    _excel(up / "book.xlsx")
    _parquet(up / "facts.parquet")
    (root / "outside.txt").write_text("secret beside the workspace\n")
    os.symlink(root / "outside.txt", up / "escape.txt")
    os.symlink("/etc/passwd", up / "passwd_link")
    os.mkfifo(up / "pipe.csv")
    return ws


def _excel(path: Path) -> None:
    from openpyxl import Workbook

    wb = Workbook()
    ws = wb.active
    assert ws is not None
    ws.title = "Revenue"
    ws.append(["month", "revenue"])
    for m in range(1, 13):
        ws.append([f"2025-{m:02d}", m * 1000])
    costs = wb.create_sheet("Costs")
    costs.append(["item", "cost"])
    costs.append(["rent", 5000])
    costs.append(["salaries", 42000])
    wb.save(path)


def _parquet(path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({"k": list(range(1000)), "v": [i * 0.5 for i in range(1000)]})
    pq.write_table(table, path, row_group_size=100)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("wsroot"))


def in_process(workspace: Path, tools: list[str] | None = None, *, extensions: Any = None, **env: str) -> Client:
    """An MCP client connected in-process to a server over ``workspace`` (the real server and pipeline,
    without a subprocess); ``env`` are BA_MCP_* settings as the environment would give them; ``extensions`` what the
    client declares in its handshake (the SDK's ``ClientExtension``s: MCP Apps)."""
    from mcp import Client

    from ba_mcp.app import App
    from ba_mcp.server import build_server
    from ba_mcp.settings import load_settings

    env = {  # never the internet; no spare Python worker unless asked for (see server_env)
        "BA_MCP_WEB__SEARCH__DUCKDUCKGO__ENDPOINT": "http://127.0.0.1:9/",
        **NO_SPARES,
        **env,
    }
    settings = load_settings(workspace=workspace, environ=env)
    if log := os.environ.get("TESTS_SERVER_LOG"):  # counts the servers a run builds: one line each, by test file
        with open(log, "a", encoding="utf-8") as f:
            f.write(os.environ.get("PYTEST_CURRENT_TEST", "?").split("::")[0] + "\n")
    return Client(build_server(App(settings, tools)), extensions=extensions)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """An idle process in a session of its own, as a worker's shim is: what a pool's priority levers (nice, the
    autogroup, the cpu cgroup the spare's lowering makes) act on, in the tests of those levers."""
    from ba_mcp.workers.process import remove_cgroups

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()
        remove_cgroups([proc.pid], wait_s=1)  # the cpu cgroup a lowering made, where the server makes them


@pytest.fixture(scope="session")
def standard_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's standard workspace (``make_workspace``) that ``default_server`` serves: no test writes into it (the
    server keeps its own state there). A test that writes files, links or folders into its workspace takes
    ``workspace`` (its module's own) or a ``tmp_path``.
    Beside make_workspace's files, two whose markers test_host_lens looks for in what each host's model reads."""
    ws = make_workspace(tmp_path_factory.mktemp("standard"))
    (ws / "uploads" / "tiny.csv").write_text("city,code\nOslo,ZEPHYR-42\nLima,QUOKKA-7\n")
    (ws / "uploads" / "note.txt").write_text("The marker sentence is PELICAN-99. It ends here.\n")
    return ws


@pytest.fixture(scope="session")
async def default_server(standard_workspace: Path) -> AsyncIterator[Client]:
    """One in-process server for the whole run (one for each xdist worker), built when a file first asks for it, in
    the default configuration: the standard workspace, every default tool, no setting of a test's own. The files that
    only read through it share it (test_file_reader, test_query_database, test_databases_catalog_search,
    test_host_lens, test_views). It is one MCP session: what a call leaves in the session (artifacts, kept results,
    the history, run_python's notebook, temporary tables) the files after it see. A file that needs another
    configuration or workspace, writes to the workspace, or asserts on its session's own state (``ba://history``, the
    artifacts it lists) builds its own with ``in_process`` (e.g. test_e2e_hostile writes links into its workspace;
    test_pipeline_provenance reads its session's history; test_audit reads its own audit trail)."""
    async with in_process(standard_workspace) as client:
        yield client


@pytest.fixture(scope="module")
async def session(workspace: Path) -> AsyncIterator[Client]:
    """One in-process server for a whole test module over its own ``workspace``, with small file limits: the hostile
    paths (test_e2e_hostile), which write links and files into their workspace and read past the limits."""
    client = in_process(
        workspace,
        BA_MCP_FORMATS__MAX_FILE_BYTES="200000",
        BA_MCP_FORMATS__PARTIAL_TEXT_BYTES="50000",
    )
    async with client:
        yield client


def meta_of(result: Any) -> dict[str, Any]:
    """A result's machine-readable metadata (``_meta``; the model reads the text)."""
    from ba_mcp.server import META_KEY

    return dict((result.meta or {}).get(META_KEY) or {})


def text_of(result: Any) -> str:
    return "\n".join(b.text for b in result.content if b.type == "text")


def server_process(ws: Path) -> Any:
    """The spawned ``ba-mcp serve`` process serving ``ws`` (found by its environment), as a psutil.Process."""
    psutil = pytest.importorskip("psutil")
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info.get("cmdline") or []
        if "ba_mcp" in cmd and "serve" in cmd:
            try:
                if p.environ().get("BA_MCP_WORKSPACE") == str(ws):
                    return p
            except psutil.Error:
                continue
    raise AssertionError("server process not found")


def server_rss(ws: Path) -> int:
    """RSS in bytes of the spawned ``ba-mcp serve`` process serving ``ws``."""
    return int(server_process(ws).memory_info().rss)


def ba(*args: str, workspace: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The ba-mcp command, run in this process (the CLI is a thin layer over the library, and an import of
    the SDK per command would cost a second each): its exit code, stdout and stderr, with ``env``'s
    variables set while it runs. Tests where the process itself is the point spawn it."""
    from ba_mcp.cli import main

    variables = {k: v for k, v in {**server_env(workspace), **(env or {})}.items() if k.startswith("BA_MCP_")}
    saved = dict(os.environ)
    os.environ.update(variables)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


# The suite runs on two processes, one test file to a process at a time (xdist's loadfile: a file's
# module-scoped servers are started once), handed out in this order (--no-loadscope-reorder): the longest files
# first (by their durations in a fast-tier run), so that no long file is left for the end with the other process idle.
# The slow tier's (deselected in the fast tier) are among them: PostgreSQL's first, Spark's once the run's Spark
# Connect (started in the background when the run began) has had time to start.
LONGEST_FIRST = (
    "test_postgres.py",
    "test_e2e_own_data.py",
    "test_skill_kpi_anomaly.py",
    "test_skills_bundled.py",
    "test_publish.py",
    "test_spark.py",
    "test_workers_duckdb.py",
    "test_stdio_limits.py",
    "test_server_memory.py",
    "test_sandbox_hostile.py",
    "test_report.py",
    "test_skill_forecast.py",
    "test_team_attacks.py",
    "test_skill_cohort_retention.py",
    "test_skill_clv.py",
    "test_skill_discount.py",
    "test_skill_ab_readout.py",
    "test_skill_budget.py",
    "test_skill_returns.py",
    # the fast tier's own, by their CPU in a fast-tier run (the files above are the slow tier's or mostly slow)
    "test_analyses.py",
    "test_plugin_attacks.py",
    "test_e2e_truth.py",
    "test_runner.py",
    "test_query_database.py",
    "test_stdio_run_python.py",
    "test_listing.py",
    "test_house.py",
    "test_host_lens.py",
    "test_metrics.py",
    "test_databases_bad_url.py",
    "test_audit.py",
    "test_time_metrics.py",
    "test_e2e_hostile.py",
    "test_web.py",
    "test_transports_and_cli.py",
    "test_e2e_field_day.py",
    "test_pipeline_provenance.py",
)


def _slow_throughout(path: Path) -> bool:
    """Whether a test file marks all its tests slow (its module-level ``pytestmark`` holds ``pytest.mark.slow``)."""
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            return any(isinstance(n, ast.Attribute) and n.attr == "slow" for n in ast.walk(node.value))
    return False


def _files_named(config: pytest.Config) -> bool:
    """Whether the command line names test files (or tests in them) only, no folder."""
    base = config.invocation_params.dir
    named = [base / str(a).split("::")[0] for a in config.args]
    return bool(named) and all(p.is_file() for p in named)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The fast tier (``-m 'not slow'``) does not import a file whose every test is slow: importing the slow tier's
    modules (their engines' clients, their fixtures' helpers) cost each worker ~3 CPU-s of collection for nothing."""
    if (config.option.markexpr or "").strip() != "not slow" or collection_path.suffix != ".py":
        return None
    if _files_named(config):  # only the files named are imported: reading every other file's marks cost ~0.6 s
        return None
    if collection_path.name.startswith("test_") and _slow_throughout(collection_path):
        return True
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the order within a file is kept


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """One test file (or tests of one file) named on the command line runs in this process, in seconds: the two
    workers of ``addopts`` pay off only across files (each starts the SDK, pandas and the servers again). Runs
    before xdist decides on its session. Then, in the process that hands out the work: a killed run's servers
    ended, and the run's PostgreSQL and Spark Connect started in the background when their tests will run (they
    start while other tests run; the tests wait for them)."""
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    # The bytecode the servers' workers read and never write (python -I -B): compiled here, once for an install (a
    # stamp says so), before any worker starts — else a fresh clone's workers compile pandas and the rest from source
    # at every start (issue 65). The server does the same in the background; a test run cannot wait for that.
    from ba_mcp import bytecode

    bytecode.compile_missing(workers=os.cpu_count() or 1)
    markers = config.option.markexpr or ""
    targets = [str(a).split("::")[0] for a in config.args] or ["tests"]
    files = {Path(t).resolve() for t in targets}
    if len(files) == 1 and next(iter(files)).is_file() and getattr(config.option, "tx", None):
        config.option.dist, config.option.tx, config.option.numprocesses = "no", [], 0

    def runs(file: str, marker: str | None = "slow") -> bool:
        """Whether ``file``'s tests that need the service (all marked ``marker``: PostgreSQL's and Spark's are in
        the slow tier) are selected: not by ``-m 'not slow'`` (the fast tier), yes by ``-m slow`` or
        ``-m 'slow or not slow'``."""
        if marker and f"not {marker}" in markers and marker not in markers.replace(f"not {marker}", ""):
            return False
        return any(t.endswith(file) or Path(t).is_dir() for t in targets)

    pg_server.end_leftovers()  # a killed run's servers end here, whatever this run needs
    services = []
    postgres = any(runs(f) for f in ("test_postgres.py", "test_e2e_own_data.py", "test_time_metrics.py"))
    postgres = postgres or runs("test_team_isolation.py") or runs("test_databases_roles.py")
    postgres = postgres or runs("test_publish_team.py")
    postgres = postgres or runs("test_audit_http.py")
    postgres = postgres or runs("test_team_attacks.py")
    postgres = postgres or runs("test_pg14_grants.py")
    postgres = postgres or runs("test_analyses_params.py")
    postgres = postgres or runs("test_values.py")
    postgres = postgres or runs("test_databases_catalog_search.py")
    if postgres and pg_server.available() and not os.environ.get(background.variable("postgres")):
        services.append(background.Service("postgres", pg_server.service, _service_folder()))
    if (
        any(all(runs(f, m) for m in ("spark", "slow")) for f in ("test_spark.py", "test_time_metrics.py"))
        and not spark_server.available()
        and not os.environ.get(background.variable("spark"))
    ):
        services.append(background.Service("spark", spark_server.guarded, _service_folder()))
    for service in services:
        service.start()
    config.stash[_SERVICES] = services


def pytest_unconfigure(config: pytest.Config) -> None:
    for service in config.stash.get(_SERVICES, []):
        service.stop()
        shutil.rmtree(service.folder, ignore_errors=True)


def _service_folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="ba-mcp-test-service-"))


_SERVICES = pytest.StashKey[list[background.Service]]()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_serve(workspace: Path, port: int | None = None, **extra_env: str) -> Iterator[str]:
    """A spawned ``ba-mcp serve --transport http`` on ``port`` (a free loopback port by default): yields its MCP
    URL."""
    port = port or free_port()
    with tempfile.TemporaryFile() as log:  # what the server says, never a pipe that could fill
        proc = subprocess.Popen(
            [sys.executable, "-m", "ba_mcp", "serve", "--transport", "http", "--port", str(port)],
            env=server_env(workspace, **extra_env),
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        log.seek(0)
                        raise RuntimeError(log.read().decode(errors="replace")[-4000:] or "server exited") from None
                    time.sleep(0.05)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
            proc.kill()
