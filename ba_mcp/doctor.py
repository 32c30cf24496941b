"""``ba-mcp doctor``: the environment's checks as typed results (``Check``), for the CLI to print.

Essential checks (configuration, offline tokenizer, pandas/pyarrow, a writable workspace) decide the exit
code; the others report what is available (the sandbox's protections by their ids, the search provider)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ba_mcp.settings import DatabaseSettings, Settings
from ba_mcp.version import __version__

ESSENTIAL = frozenset({"configuration", "tokenizer offline", "workspace writable", "pandas / pyarrow"})


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def run_checks(settings: Settings, network: bool = False) -> list[Check]:
    """Every check, in the order they are shown (the configuration was valid to get here). Nothing outside
    this machine is contacted unless ``network`` (``ba-mcp doctor --network``): then the search provider is
    sent one query."""
    from ba_mcp.pipeline.tokens import TokenCounter
    from ba_mcp.settings import config_dir

    checks = [Check("configuration", True, "valid")]
    if settings.project_file is not None:  # S-17: what the project's ba-mcp.yaml was refused, and how to approve it
        project = settings.project_file
        checks.append(Check("project file", project.approved or not project.ignored, project.advice()))
    for plugin in settings.plugin_status:  # the operator's plug-ins: loaded, or why not (the rest is served)
        if plugin.enabled:
            what = f"{plugin.version}: {', '.join(plugin.provides)}" if plugin.loaded else "unavailable: "
            checks.append(Check(f"plug-in {plugin.name}", plugin.loaded, what + plugin.problem))
    counter = TokenCounter(config_dir() / "token_encoders.yaml", settings.model_family)
    info = counter.model_info()
    checks.append(
        Check(
            "tokenizer offline",
            info["offline_vocabulary"],
            f"{info['encoding']} (hash-verified), {settings.model_family} margin {info['margin']}"
            if info["offline_vocabulary"]
            else f"character estimate in use: {info['fallback_reason']}",
        )
    )
    try:
        import duckdb

        checks.append(Check("duckdb", True, f"version {duckdb.__version__}"))
    except ImportError as exc:
        checks.append(Check("duckdb", False, str(exc)))
    try:
        import pandas
        import pyarrow

        checks.append(Check("pandas / pyarrow", True, f"{pandas.__version__} / {pyarrow.__version__}"))
    except ImportError as exc:
        checks.append(Check("pandas / pyarrow", False, str(exc)))
    root = settings.workspace_root()
    try:
        from ba_mcp.workspace import Workspace

        ws = Workspace.open(root)
        probe = ws.dir("logs") / ".doctor-probe"
        probe.write_text("ok")
        probe.unlink()
        checks.append(Check("workspace writable", True, str(root)))
        checks += _check_sandbox(settings, ws.dir("sessions"))
        checks += _check_engine(settings, ws.dir("sessions"))
        checks += _check_databases(settings, ws.root, ws.dir("sessions"), network)
        checks.append(_check_metrics(settings, dict(settings.files.read_roots)))
        checks += _check_dbt(settings, dict(settings.files.read_roots))
    except OSError as exc:
        checks.append(Check("workspace writable", False, f"{root}: {exc.strerror}"))
    if not settings.tool("web_search").enabled:  # nothing to ask of a provider the server never uses
        checks.append(Check("web search", True, "disabled (tools.web_search.enabled: false); not contacted"))
    else:
        checks.append(_check_search(settings) if network else _search_configured(settings))
    from ba_mcp.redaction import redact

    return [Check(c.name, c.ok, redact(c.detail)) for c in checks]  # no line shows a database's credentials


def _check_metrics(settings: Settings, read_roots: dict[str, Path]) -> Check:
    """The metric files served, strictly validated (not essential: the server serves what loads)."""
    from ba_mcp.app import metrics_of

    metrics = metrics_of(settings, read_roots)
    files = metrics.files()
    if not files:
        return Check("metrics", True, "no metric files (add OSI files to <workspace>/metrics/)")
    model, problems = metrics.validate()
    counts = f"{len(model.metrics)} metric(s) from {len(files)} file(s)"
    if problems:
        return Check(
            "metrics", False, f"{counts}; {len(problems)} problem(s), first: {problems[0]} (ba-mcp metrics validate)"
        )
    return Check("metrics", True, counts)


def _check_dbt(settings: Settings, read_roots: dict[str, Path]) -> list[Check]:
    """Each dbt project served (``metrics.dbt``): its semantic manifest there and newer than its models' YAML,
    its database configured, MetricFlow installed and reading it (not essential: the rest of the server works)."""
    from ba_mcp.app import metrics_of
    from ba_mcp.metrics.catalog import models_of

    checks: list[Check] = []
    metrics = metrics_of(settings, read_roots)
    for entry, (database, manifest, _) in zip(settings.metrics.dbt, metrics.dbt, strict=True):
        project = entry.project.expanduser()
        name = f"dbt project {project.name}"
        if database not in settings.databases:
            checks.append(Check(name, False, f"its database {database!r} is not configured (databases.{database})"))
            continue
        if not manifest.is_file():
            checks.append(Check(name, False, f"no {manifest} (run `dbt parse` in {project})"))
            continue
        yamls = [p for p in (project / "models").rglob("*.y*ml")] if (project / "models").is_dir() else []
        stale = [p for p in yamls if p.stat().st_mtime > manifest.stat().st_mtime]
        try:
            import metricflow  # noqa: F401
        except ImportError:
            checks.append(Check(name, False, "MetricFlow is not installed (uv sync --extra dbt)"))
            continue
        request = metrics.request("summary")
        _, dbt = models_of(dataclasses.replace(request, files=[], dbt=[m for m in request.dbt if m[0] == database]))
        served = [p for p in (dbt.projects if dbt is not None else []) if p.database == database]
        if not served:
            problems = dbt.warnings if dbt is not None else ["no manifest read"]
            checks.append(Check(name, False, f"MetricFlow cannot read the manifest: {problems[0]}"))
            continue
        detail = f"{len(served[0].metrics)} metric(s) on database {database}, compiled by MetricFlow"
        if stale:
            detail += f"; {stale[0].name} changed after the manifest was written (run `dbt parse`)"
        checks.append(Check(name, not stale, detail))
    return checks


def _check_engine(settings: Settings, sessions: Path) -> list[Check]:
    """Start a real engine worker (SQL and file parsing run there) and report the boundary in force: which
    of mount namespace, unprivileged uid, memory cgroup or rlimit the machine allowed."""
    from ba_mcp.errors import ToolFailure
    from ba_mcp.workers.duckworkers import DuckWorkers
    from sandbox import protocol

    probe = sessions / ".doctor-engine.duckdb"
    probe.touch()  # a stand-in database file, so the read-only binding is exercised too
    workers = DuckWorkers(settings, sessions, {"probe": probe})
    try:
        with workers.held("doctor", None) as call:
            protections = [(str(p[0]), str(p[1])) for p in call.handle.protections]
    except ToolFailure as failure:
        return [Check("engine worker", False, failure.message)]
    finally:
        workers.close()
        probe.unlink(missing_ok=True)
    ids = {pid for pid, _ in protections}
    boundary = [
        name
        for name, pid in (
            ("mount namespace", protocol.READ_ONLY_ROOT),
            ("read-only database files", protocol.READ_ONLY_FILES),
            ("uid", protocol.UNPRIVILEGED_USER),
            ("memory cgroup", protocol.MEMORY_ALL_PROCESSES),
            ("cpu cgroup", protocol.CPU_SHARE),
            ("rlimit", protocol.MEMORY_PER_PROCESS),
            ("seccomp", protocol.SECCOMP_FILTER),
        )
        if pid in ids
    ]
    degraded = [text for pid, text in protections if pid == protocol.DEGRADED]
    ok = protocol.READ_ONLY_ROOT in ids and protocol.READ_ONLY_FILES in ids
    detail = "boundary: " + (", ".join(boundary) or "none") + ("; " + "; ".join(degraded) if degraded else "")
    return [Check("engine worker", ok, detail)]


def _check_databases(settings: Settings, root: Path, sessions: Path, network: bool) -> list[Check]:
    """Every configured connection: reachable or not, the server's version, the role and its privileges, and
    advice when the role can write. One on another machine is contacted only with ``--network``."""
    import urllib.parse
    from concurrent.futures import ThreadPoolExecutor

    from ba_mcp.databases.base import engine_of
    from ba_mcp.databases.connector import ConnectedEngine, label_of
    from ba_mcp.errors import ToolFailure
    from ba_mcp.workers.connections import Connections, redact, shown_url, url_refusal

    pool = Connections(settings, sessions)

    def check(name: str, conf: DatabaseSettings, engine: ConnectedEngine) -> Check:
        """One database (in a thread of its own: the databases are contacted at once, each by its worker)."""
        label, dialect = f"database {name}", label_of(conf)
        problem = conf.unavailable()
        if problem is not None:  # this database only: served as unavailable, the rest of the server works
            return Check(label, False, f"unavailable: {problem[0]} (databases.{name}.url); {problem[1]}")
        refused = url_refusal(name, conf)
        if refused is not None:
            return Check(label, False, f"{refused.message} ({refused.hint})")
        try:
            host_file = engine.host_file(conf, root)
        except ToolFailure as failure:  # a file engine's URL in a form it refuses
            return Check(label, False, f"its URL {failure.message}; {failure.hint}")
        url = conf.url.get_secret_value() if conf.url is not None else ""
        host = (urllib.parse.urlsplit(url).hostname or "") if host_file is None else ""
        local = host_file is not None or host in ("localhost", "127.0.0.1", "::1") or (not host and bool(url))
        if not local and not network:
            where = shown_url(conf) or "its options"
            return Check(label, True, f"{dialect} at {where}: not contacted (ba-mcp doctor --network)")
        try:
            with pool.connection(name, conf, engine, None, host_file):
                info = dict(pool.info.get(name, {}))
        except ToolFailure as failure:
            return Check(label, False, redact(f"{failure.message} ({failure.hint})", conf))
        detail = f"{dialect} {info.get('version', '')}".strip()
        if info.get("role"):
            privileges = ", ".join(info.get("privileges") or []) or "no server-file or program privileges"
            detail += f"; role {info['role']} ({privileges})"
        if info.get("mapped_roles"):  # role_from: each taken at connect and held to the same checks
            mapped = ", ".join(info["mapped_roles"])
            detail += f"; callers run as their mapped roles {mapped} (each passed the same checks)"
        if info.get("detail"):  # what the engine says of its read-only boundary
            detail += f"; {info['detail']}"
        for warning in info.get("warnings") or []:  # served, with what the operator should still run
            detail += f"; warning: {warning}"
        if info.get("read_only_by_driver") is False:
            detail += "; the driver cannot make the connection read-only: connect as a user that can only read"
        return Check(label, True, redact(detail, conf))  # the role may be what ${PGUSER} gave

    engines = {name: engine_of(conf.kind) for name, conf in settings.databases.items()}
    connected = [
        (name, conf, engines[name])
        for name, conf in settings.databases.items()
        if isinstance(engines[name], ConnectedEngine)
    ]
    try:
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(connected)))) as threads:
            return list(threads.map(lambda item: check(*item), connected))
    finally:
        pool.close()


def healthy(checks: list[Check]) -> bool:
    return all(c.ok for c in checks if c.name in ESSENTIAL)


def _search_configured(settings: Settings) -> Check:
    """Which provider web_search would use, without contacting it."""
    from ba_mcp.web.search import Searcher

    provider = Searcher(settings.web.search, lambda: None).provider
    return Check("web search", True, f"{provider} configured; not contacted (ba-mcp doctor --network sends it a query)")


def _check_search(settings: Settings) -> Check:
    """The search provider web_search uses, and whether it answers one query (not essential: the other tools
    work without it)."""
    import anyio

    from ba_mcp.errors import ToolFailure
    from ba_mcp.web.fetch import Fetcher
    from ba_mcp.web.search import Searcher

    async def probe() -> str:
        fetcher = Fetcher(settings.web, __version__)
        try:
            searcher = Searcher(settings.web.search, lambda: fetcher.client)
            hits = await searcher.search("business analysis", 1)
            return f"{searcher.provider} answers ({len(hits)} result(s) for a test query)"
        finally:
            await fetcher.aclose()

    name = "web search"
    try:
        return Check(name, True, anyio.run(probe))
    except ToolFailure as failure:
        return Check(name, False, f"{failure.message}; {failure.hint}")


def _check_sandbox(settings: Settings, sessions: Path) -> list[Check]:
    """Start a real worker with the configured limits and report the protections it could apply."""
    from ba_mcp.errors import ToolFailure
    from ba_mcp.workers.sandboxes import sandbox_options
    from ba_mcp.workers.spawn import ready as wait_ready
    from ba_mcp.workers.spawn import spawn

    try:
        worker = spawn("sandbox", settings.sandbox, sessions, sandbox_options(settings.sandbox), None)
    except OSError as exc:
        return [Check("sandbox worker", False, f"could not start: {exc}")]
    try:
        ready = wait_ready("sandbox", worker, settings.sandbox.start_timeout_s)  # killed, and said, if it did not
    except ToolFailure as failure:
        return [Check("sandbox worker", False, failure.message)]
    finally:
        worker.kill()
    from sandbox import protocol

    reported = [(str(p[0]), str(p[1])) for p in ready.get("protections", []) if isinstance(p, list) and len(p) == 2]
    checks = [Check("sandbox worker", True, f"started; numpy + pandas loaded in {ready.get('import_ms')} ms")]
    expected = {
        "no network, no host abstract sockets": protocol.NETWORK_NAMESPACE if not settings.sandbox.network else "",
        "processes end with the worker": protocol.PID_NAMESPACE,
        "minimal root filesystem (no host files or sockets)": protocol.READ_ONLY_ROOT,
        "private /dev": protocol.PRIVATE_DEV,
        "unprivileged user": protocol.UNPRIVILEGED_USER,
        "system call filter": protocol.SECCOMP_FILTER,
        "process count limit": protocol.PROCESS_COUNT,
        "memory limit for all processes": protocol.MEMORY_ALL_PROCESSES,
        "memory limit per process": protocol.MEMORY_PER_PROCESS,
    }
    degraded = [text for pid, text in reported if pid == protocol.DEGRADED]
    for label, wanted in expected.items():
        if not wanted:
            checks.append(Check(f"sandbox: {label}", True, "off by configuration (sandbox.network: true)"))
            continue
        found = next((text for pid, text in reported if pid == wanted), None)
        checks.append(
            Check(f"sandbox: {label}", found is not None, found or "; ".join(degraded) or "not available here")
        )
    others = [text for pid, text in reported if pid not in expected.values() and pid != protocol.DEGRADED]
    checks += [Check("sandbox: also", True, text) for text in others]
    return checks
