"""The application object, built first: settings, workspace, stores, caches, databases, the sandbox
client, per-session state, and the tools — each constructed once with the services it needs. The server
is then built from it (``server.build_server(app)``), so tool descriptions may depend on live state.

There are no module-level singletons. Heavy imports (pyarrow, the tokenizer vocabulary) are warmed up in
the background after start so the handshake stays as fast as a bare MCPServer's (P-1); pandas is not
imported on the common paths at all (tables are Arrow from the engines to the observer). Skills are
loaded here (warnings on stderr), so use_skill's description holds their catalog; a tool whose
``tools.<name>.enabled`` is false is not built.
``aclose()`` (or ``close()``) ends the workers and closes the databases.
"""

from __future__ import annotations

import logging
import os
import urllib.parse
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ba_mcp import registry
from ba_mcp.bytecode import Compiling
from ba_mcp.databases import Databases
from ba_mcp.databases.configured import DuckFiles
from ba_mcp.errors import ToolFailure
from ba_mcp.exports import Exports
from ba_mcp.metrics.catalog import Metrics
from ba_mcp.pipeline.audit import AuditLog
from ba_mcp.pipeline.cache import RawCache
from ba_mcp.pipeline.observe import Observer, ToolTraits
from ba_mcp.pipeline.runner import Runner
from ba_mcp.pipeline.sessions import Sessions
from ba_mcp.pipeline.tokens import TokenCounter
from ba_mcp.pipeline.usage import TelemetryLog
from ba_mcp.settings import ConfigError, Settings, config_dir
from ba_mcp.skills import load_skills
from ba_mcp.stores.artifacts import ArtifactStore
from ba_mcp.stores.code import CodeStore
from ba_mcp.tool import Tool
from ba_mcp.tools.services import BuiltIn, Services
from ba_mcp.version import __version__
from ba_mcp.web.fetch import Fetcher
from ba_mcp.web.search import Searcher
from ba_mcp.workers.connections import Connections
from ba_mcp.workers.duckworkers import DuckWorkers
from ba_mcp.workers.process import bound_workers, own_memory_limit, unbound_workers
from ba_mcp.workers.sandboxes import Sandboxes
from ba_mcp.workers.work import DuckParquet, ask_metrics, table_stats
from ba_mcp.workspace import Resolved, Workspace

if TYPE_CHECKING:
    from ba_mcp.workers.messages import Metered, MetricsWork

log = logging.getLogger(__name__)


def _bound_the_workers(settings: Settings, owner: object) -> int:
    """One cgroup over every worker of this server, beneath the server's own: its memory is the configured
    workers' together, at most the server's own limit and 80 % of the machine. A configuration whose workers
    need more than a limit a supervisor put on the server is refused, naming the settings."""
    sb, en = settings.sandbox, settings.engine
    sandboxes, engines = sb.max_workers + sb.spare_workers, en.max_workers + en.spare_workers
    wanted = (sb.memory_mb * sandboxes + en.memory_mb * engines) * 1024 * 1024
    limit = own_memory_limit()
    if limit is not None and wanted > limit:
        raise ConfigError(
            f"the workers may use {wanted >> 20:,} MB together (sandbox.memory_mb {sb.memory_mb} × "
            f"{sandboxes} + engine.memory_mb {en.memory_mb} × {engines}: max_workers + spare_workers), more than "
            f"the {limit >> 20:,} MB this server's cgroup is limited to; lower them"
        )
    # the machine's memory from the C library (psutil, which this read before, is only a dev dependency: an
    # installed server without it did not start)
    ram = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 0.8)
    ceiling = min(limit or ram, ram)
    bound_workers(owner, wanted, sb.max_processes * sandboxes + 64 * engines, ceiling)
    return ceiling


class App:
    """``tools``: the tools to serve — Tool instances (an embedding application's, a test's: they get their
    ``tools.<name>`` settings) or names of built-in tools (built here with their services). Default: every
    built-in tool. ``bytecode``: the background compilation, when the caller started it already (``ba-mcp serve``
    starts it before its own imports)."""

    def __init__(
        self, settings: Settings, tools: Iterable[Tool | str] | None = None, bytecode: Compiling | None = None
    ) -> None:
        self.settings = settings
        self.workspace = Workspace.open(
            settings.workspace_root(),
            settings.files.read_roots,
            settings.artifacts.shared,
            self._owned,  # ids resolve only for the sessions that own them (S-9): the stores answer
            {"skill": self._skill_file},  # skill://<skill>/<file>: a skill's own files, confined to its folder
        )
        for name, root in self.workspace.read_roots.items():
            if not root.is_dir():
                log.warning("read root %r is not available: files.read_roots.%s is not a directory", name, name)
        # the audit trail (S-20): apart from every folder a tool reaches, or a team server does not start
        team = settings.http.auth is not None
        self.audit = AuditLog.open(settings.audit, settings.audit_dir(), served_folders(settings, self.workspace), team)
        if not settings.artifacts.shared and any(self.workspace.dir("analyses").glob("*/analysis.yaml")):
            self._move_analyses_to_owners()
        self.skills = load_skills(settings.skills)
        for warning in self.skills.warnings:
            log.warning("skill %s", warning)
        for plugin in settings.plugin_status:  # served without it (plugins.py)
            if plugin.problem:
                log.warning("plug-in %s is unavailable: %s", plugin.name, plugin.problem)
        self._workers_ceiling = _bound_the_workers(settings, self)
        self.metrics = metrics_of(settings, self.workspace.read_roots)
        self.duck_files = DuckFiles(settings, self.workspace)
        self.duck_workers = DuckWorkers(
            settings,
            self.workspace.dir("sessions"),
            self.duck_files.paths(),
            prepare=self.duck_files.prepare,
            keeps_state=self.duck_files.keeps_state,  # a session's TEMP tables and views
            warm=duck_warm_up(settings, self.metrics),
            # and, with a dbt project, the model itself by its digest: MetricFlow's parse of the manifest, off the
            # next call's path (after a dbt build the session's worker is replaced: the spare that replaces it has
            # read it)
            warm_request=self._metrics_read if self.metrics.files() and settings.metrics.dbt else None,
        )
        self.artifacts = ArtifactStore(
            self.workspace.dir("artifacts"), settings.artifacts, DuckParquet(self.duck_workers)
        )
        self.exports = Exports(
            settings.export_root(),
            self.artifacts,
            configuration_folders(settings, self.workspace),
            lambda root: self.workspace.own("exports", root),  # each principal's own, where they are kept apart
        )
        self.code = code_store(settings, self.workspace.dir("code"))
        self.tokens = TokenCounter(config_dir() / "token_encoders.yaml", settings.model_family)
        self.cache = RawCache(settings.cache.max_entries, settings.cache.max_bytes)
        self.connections = Connections(settings, self.workspace.dir("sessions"))
        self.databases = Databases(
            settings, self.workspace, self.duck_workers, self.artifacts, self.connections, self.duck_files
        )
        self.bytecode = bytecode or Compiling()  # what the workers import, compiled once in the background
        self.sandboxes = Sandboxes(settings.sandbox, self.workspace.dir("sessions"), self._compiled_for_a_worker)
        self.telemetry = TelemetryLog(self.workspace.dir("logs"), settings.telemetry.enabled)
        self.fetcher = Fetcher(settings.web, __version__)
        self.searcher = Searcher(settings.web.search, lambda: self.fetcher.client)
        self.sessions = Sessions(settings.sessions)
        names = registry.tool_names()
        wanted = list(tools) if tools is not None else [n for n in names if settings.tool(n).enabled]
        unknown = [t for t in wanted if isinstance(t, str) and t not in names]
        if unknown:
            raise ValueError(f"no built-in tool named {unknown[0]!r} (built-in: {', '.join(names)})")
        self.tools: dict[str, Tool] = {}
        builtin = self._builtin_tools({t for t in wanted if isinstance(t, str)})
        for tool in wanted:
            if isinstance(tool, str):
                if tool not in builtin:
                    continue  # nothing to serve (no metric file, no skill the model may use)
                tool = builtin[tool]
            else:
                tool.settings = settings.tool(tool.name)
            self.tools[tool.name] = tool
        traits = {name: ToolTraits(t.window_arg, t.artifact_reader, t.artifact_kinds) for name, t in self.tools.items()}
        self.observer = Observer(self.artifacts, self.tokens, settings.observation, traits, self._table_stats)
        self.loop_lag: dict[str, float] = {"samples": 0, "max_ms": 0.0, "over_50ms": 0}  # telemetry.lag_monitor
        self.runner = Runner(
            settings, self.observer, self.cache, self.telemetry, self.tokens, self.sessions, self.audit
        )

    def _builtin_tools(self, names: set[str]) -> dict[str, Tool]:
        """The built-in tools named, each built from the services by its class (the tool table in ``registry``),
        in the table's order; a tool with nothing to serve (no metric file, no skill) is left out."""
        services: Services = self  # what a tool's build may take (checked here, by the type checker)
        built = {}
        for name in registry.tool_names():
            if name not in names:
                continue
            builder: BuiltIn = registry.tool_class(name)  # a tool's class (its module imported now)
            if (tool := builder.build(services)) is not None:
                built[name] = tool
        return built

    def metrics_answer(self, action: str, **args: Any) -> Metered:
        """Metrics work done by the calling session's engine worker (the files are parsed there, never here):
        a ``summary`` (kept per version of the files, its warnings logged once) or a metric's ``describe``."""
        import ba_mcp.callers as callers

        request = self.metrics.request(action, **args)
        key = (request.digest, action + repr(sorted(args.items())))
        answer = self.metrics.answers.get(key)
        if answer is None:
            answer = ask_metrics(self.duck_workers, None, callers.current(), request)
            if action == "summary":
                for warning in [*self.metrics.sources()[1], *answer.get("warnings", [])]:
                    log.warning("metrics: %s", warning)
            if len(self.metrics.answers) > 256:
                self.metrics.answers.clear()
            self.metrics.answers[key] = answer
        return answer

    def _metrics_read(self) -> MetricsWork:
        return self.metrics.request("read")

    def _move_analyses_to_owners(self) -> None:
        """Analyses a principal saved in the workspace's analyses/ before each had a folder of their own, moved
        to their owner's (where the owner now finds them)."""
        import ba_mcp.callers as callers
        from ba_mcp.analyses.manifest import move_to_owners

        def folder_of(owner: str) -> Path:
            with callers.acting_as(owner):
                return self.workspace.own("analyses")

        moved = move_to_owners(self.workspace.dir("analyses"), folder_of)
        if moved:
            log.info("moved %d saved analyses to their owners' folders", len(moved))

    def _owned(self, kind: str, ref_id: str) -> bool:
        """Whether the calling session may read the stored item ``ref_id`` (an artifact or a code file)."""
        if kind == "artifact":
            try:
                self.artifacts.get(ref_id)
            except ToolFailure:
                return False
            return True
        return self.code.visible(ref_id)

    def _table_stats(self, aid: str) -> tuple[dict[str, dict[str, Any]], int] | None:
        """Whole-column figures of a stored table, computed by an engine worker over the artifact's file."""
        with self.artifacts.reading(aid) as meta:
            if meta.kind != "table":
                return None
            fd = os.open(self.artifacts.data_path(meta), os.O_RDONLY | os.O_CLOEXEC)
        try:
            return table_stats(self.duck_workers, fd)
        finally:
            os.close(fd)

    def _skill_file(self, ref: str) -> Resolved:
        """``skill://<name>/<path>`` as a file the tools can read, confined to that skill's folder."""
        rest = ref.split("://", 1)[1]
        name, _, path = rest.partition("/")
        return self.skills.get(name).open(urllib.parse.unquote(path) or "SKILL.md")

    def warm_up(self) -> None:
        """Load the token vocabulary and Arrow's core (every table result crosses it: 0.1 s off the session's first
        table call), in a background thread after the handshake. Arrow's compute kernels and Parquet are not
        loaded: the server's calls need neither (engine workers write and read Parquet; short columns are
        summarised in Python) — a call that does (a long table held in the server) loads them then."""
        try:
            self.tokens.load()
            self.runner.warm_import(["pyarrow", "pyarrow.ipc"])
        except Exception:
            log.debug("warm-up failed", exc_info=True)

    def start_sandbox(self) -> None:
        """Start the spare workers in the background: Python (when run_python is served) and engine. On a new install
        the background compilation starts first and the spares after what the workers import is compiled (numpy,
        pandas, pyarrow as they start, then a spare's preloads: scipy.stats, …), so they read bytecode instead of
        compiling the same modules from source beside it; a call that starts a Python worker meanwhile waits only for
        what a worker imports as it starts, the compilation raised (``_compiled_for_a_worker``)."""
        self.bytecode.start()
        if "run_python" in self.tools:
            self.sandboxes.prestart()  # waits for it (the spare's low priority) before its spare
        else:
            self._compiled_for_a_worker(False)
        self.duck_workers.prestart()

    def _compiled_for_a_worker(self, urgent: bool) -> None:
        """What a Python worker's start waits for on a new install (``bytecode.Compiling``; at once when no compilation
        runs): a call's (``urgent``), what a worker imports as it starts, the compilation raised meanwhile; the spare's,
        all a worker imports, later too (its preloads)."""
        wait_s = self.settings.sandbox.start_timeout_s
        if urgent:
            self.bytecode.first(True, wait_s)
        else:
            self.bytecode.imported(wait_s)

    def close(self) -> None:
        """End the sandbox workers and close the databases (idempotent)."""
        self.runner.settle()  # the last calls' telemetry, before the log closes
        self.sandboxes.close()
        self.duck_workers.close()
        self.bytecode.close()
        self.connections.close()
        self.databases.close()
        self.telemetry.close()
        self.audit.close()
        self.skills.close()
        self.workspace.close()
        unbound_workers(self, self._workers_ceiling)  # the cgroup goes with the process's last App

    async def aclose(self) -> None:
        """``close()`` off the event loop (and, later, services that must close on it)."""
        import anyio.to_thread

        await self.fetcher.aclose()
        await anyio.to_thread.run_sync(self.close)

    def cleanup_artifacts(self) -> dict[str, int]:
        """Periodic clean-up of the artifact store and the code store (TTL and size caps)."""
        try:
            removed = self.artifacts.cleanup()
            removed["code_files"] = self.code.trim()
            return removed
        except OSError as exc:
            log.warning("artifact cleanup failed: %s", exc.strerror)
            return {}


def configuration_folders(settings: Settings, workspace: Workspace) -> list[Path]:
    """The folders the server reads configuration from — skills, metric files (the workspace's and each read
    root's ``metrics/``, ``metrics.paths``), dbt projects: no tool writes into them (S-18)."""
    from ba_mcp.skills import sources

    found = [folder for _, folder in sources(settings.skills)]
    found += [workspace.root / "metrics", *(root / "metrics" for root in workspace.read_roots.values())]
    found += [p.expanduser() for p in settings.metrics.paths]
    found += [project.project.expanduser() for project in settings.metrics.dbt]
    return found


def served_folders(settings: Settings, workspace: Workspace) -> list[tuple[str, Path]]:
    """Every folder a tool reaches, by the setting that names it: the workspace, the read roots, the export folder,
    the configuration folders (skills, metric files, dbt projects) and the folders of file engines' databases — none
    may hold the audit trail, nor lie in it."""
    found = [("the workspace", workspace.root), ("files.export_dir", settings.export_root())]
    found += [(f"files.read_roots.{name}", root) for name, root in workspace.read_roots.items()]
    found += [("a skills or metrics folder", folder) for folder in configuration_folders(settings, workspace)]
    for name, conf in settings.databases.items():
        if conf.url is not None and registry.info(conf.kind).files:
            try:
                found.append((f"databases.{name}", registry.local_path(conf.url.get_secret_value(), workspace.root)))
            except ToolFailure:
                continue  # refused when the database is opened
    return found


def code_store(settings: Settings, folder: Path) -> CodeStore:
    """The store of run_python's code: its knobs are that tool's (``tools.run_python``)."""
    from ba_mcp.tools.run_python import RunPythonSettings

    rp = settings.tool("run_python")
    assert isinstance(rp, RunPythonSettings)
    return CodeStore(folder, rp.code_store_max_bytes, rp.code_ttl_hours * 3600, settings.artifacts.shared)


def duck_warm_up(settings: Settings, metrics: Metrics) -> list[str]:
    """What a session's first calls import in its DuckDB worker, imported by the spare once ready (off any call's
    path): the file readers (pandas) and, with metric files, the metrics compiler and its catalog."""
    warm = ["pandas", "ba_mcp.formats", "ba_mcp.formats.csv", "ba_mcp.formats.excel"]
    if metrics.files():
        warm += ["ba_mcp.metrics.load", "ba_mcp.metrics.compile", "ba_mcp.metrics.catalog"]
        if settings.metrics.dbt:
            warm += ["ba_mcp.metrics.dbt", "metricflow.engine.metricflow_engine"]
    return warm


def metrics_of(settings: Settings, read_roots: dict[str, Path]) -> Metrics:
    """The metric files served with ``settings``, their dialects from the database registry."""
    from ba_mcp import registry

    return Metrics(
        settings,
        settings.workspace_root(),
        dict(read_roots),
        registry.dialects(settings.databases),
        registry.grain_sql(),
        registry.metricflow_renderers(),
    )
