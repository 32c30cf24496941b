"""The ba-mcp command: a thin layer over the library (serve, demo, call, artifacts, stats, audit, install, doctor).

Only the CLI prints to stdout; with ``serve`` over stdio nothing but JSON-RPC reaches stdout.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import platform
import shutil
import sys
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ba_mcp.settings import Settings


def _err(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


def _settings(args: argparse.Namespace) -> Settings:
    """The command's configuration from every source (``settings.config_sources``). What a project's
    ``ba-mcp.yaml`` was refused, and the command that approves it, goes to stderr (S-17)."""
    from ba_mcp.settings import ConfigError, config_sources, load_settings

    overrides: dict[str, Any] = {"workspace": args.workspace} if getattr(args, "workspace", None) else {}
    roots = {}
    for item in getattr(args, "read_root", None) or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            _err(f"ba-mcp: --read-root wants NAME=DIRECTORY, got {item!r}")
            raise SystemExit(2)
        roots[name] = Path(path).expanduser().absolute()
    if roots:
        overrides["files"] = {"read_roots": roots}
    operator, project = config_sources(getattr(args, "config", None))
    try:
        settings = load_settings(operator, project=project, **overrides)
    except ConfigError as exc:
        _err(f"ba-mcp: {exc}")
        raise SystemExit(2) from None
    state = settings.project_file
    if state is not None and ((not state.approved and state.ignored) or state.refused):
        _err(f"ba-mcp: {state.advice()}")
    return settings


# -- serve ------------------------------------------------------------------------------------


def _large_allocations_return_to_the_system() -> None:
    """glibc raises its mmap threshold after a large block is freed (up to 32 MB), so a large request's text
    or argument is later carved from the heap and kept by the process after it is freed; a fixed threshold
    keeps blocks over 1 MiB in their own mappings, returned when freed (S-16: the server's memory stays flat).
    Two malloc arenas, not one per thread (each keeps what its thread freed), and Arrow's buffers from the same
    allocator rather than mimalloc's own pages, which it keeps after a table is freed (issue 40, P-8)."""
    import ctypes
    import ctypes.util

    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")  # read when pyarrow first allocates
    name = ctypes.util.find_library("c")
    if not name or not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(name)
        libc.mallopt(-3, 1024 * 1024)  # M_MMAP_THRESHOLD
        libc.mallopt(-8, 2)  # M_ARENA_MAX
    except (OSError, AttributeError):
        pass


def _no_numpy_in_the_server() -> None:
    """pyarrow imports numpy whenever it is installed — 11 MB of the server's memory (issue 40, P-8) — yet the
    server holds no numpy data: run_python's numpy is the sandbox worker's, the engines' are theirs. Marked absent
    before anything imports pyarrow, pyarrow runs without it (supported since pyarrow 16), and code in the server
    that reached for numpy fails loudly. ``tests/test_stdio_run_python.py`` checks a served session maps none."""
    sys.modules.setdefault("numpy", None)  # type: ignore[arg-type]


def cmd_serve(args: argparse.Namespace) -> int:
    from ba_mcp.bytecode import Compiling

    # A new install (nothing compiled yet): the background compilation starts first, on another CPU while this process
    # reads its settings and imports (most of a new install's first start), so that the spares find bytecode once the
    # handshake is done; it ends with this process. Compiled (its stamp current): nothing starts.
    bytecode = Compiling()
    bytecode.start()
    settings = _settings(args)
    _large_allocations_return_to_the_system()
    _no_numpy_in_the_server()
    logging.basicConfig(
        stream=sys.stderr, level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    _setup_otel(settings)
    from ba_mcp.app import App
    from ba_mcp.server import build_server

    if args.transport == "stdio" and sys.stdin.isatty():
        _err(
            "ba-mcp: serving MCP on stdin/stdout, waiting for an MCP client (this is the command a host such as "
            "Claude Desktop runs).\n"
            "To try it in a terminal instead: `uv run ba-mcp demo` (a short analysis through a real client) or "
            '`uv run ba-mcp call query_database "query=SELECT 42"`. Ctrl-C (or Ctrl-D) stops it.'
        )
    from ba_mcp.settings import ConfigError

    loopback = args.host in ("127.0.0.1", "localhost", "::1")
    if args.transport == "http" and not loopback and settings.http.auth is None:
        _err(
            f"ba-mcp: not serving on {args.host}: over HTTP without http.auth anyone who reaches the port would use "
            "your databases and files as you. Set http.auth (an OAuth issuer and this server's audience: "
            "docs/team-server.md), or serve on 127.0.0.1."
        )
        bytecode.close()
        return 2
    try:
        app = App(settings, bytecode=bytecode)
    except ConfigError as exc:
        bytecode.close()
        _err(f"ba-mcp: {exc}")
        return 2
    server = build_server(app)
    # Start-up made ~100,000 objects the cycle collector tracks and ~2,600 of garbage: the collector, off since
    # main(), would have scanned them again and again (~50 ms of the SDK's import and ours, P-1). They are frozen —
    # left out of every later collection, as what lives as long as the server — and collection resumes.
    gc.freeze()
    gc.enable()
    if args.transport == "http":
        auth = settings.http.auth
        where = f"http://{args.host}:{args.port}/mcp" + (f" for {auth.audience} (OAuth: {auth.issuer})" if auth else "")
        _err(f"ba-mcp: serving MCP over streamable HTTP at {where}")
        server.run("streamable-http", host=args.host, port=args.port)
    else:
        server.run("stdio")
    # The App is closed (workers ended, databases closed, telemetry written line by line): skip the
    # interpreter's teardown of pandas, pyarrow and DuckDB, which takes longer than the whole shutdown
    # may (P-10: 250 ms after stdin closes).
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _setup_otel(settings: Settings) -> None:
    endpoint = settings.telemetry.otlp_endpoint
    if not endpoint:
        return
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        _err("ba-mcp: telemetry.otlp_endpoint is set but the OpenTelemetry SDK is not installed: uv sync --extra otel")
        raise SystemExit(2) from None
    provider = TracerProvider(resource=Resource.create({"service.name": "ba-mcp"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    trace.set_tracer_provider(provider)


# -- demo -------------------------------------------------------------------------------------


def cmd_demo(args: argparse.Namespace) -> int:
    import anyio

    from ba_mcp import bytecode
    from ba_mcp.demo import run_demo

    if bytecode.writable() and not bytecode.compiled():
        # the README's first command: a new install's bytecode made here, in the foreground, once — its workers (and
        # the test run after it) read it instead of compiling pandas and the rest from source (issue 65)
        print("Compiling the installed libraries' bytecode, once for this install (every later start reads it) …")
        started = time.monotonic()
        bytecode.compile_missing(workers=os.cpu_count() or 1)
        print(f"… compiled in {time.monotonic() - started:.0f} s.\n")
    return anyio.run(run_demo, args.workspace, args.config, print)


# -- call -------------------------------------------------------------------------------------


def _parse_pairs(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise SystemExit(f"ba-mcp call: expected key=value, got {pair!r}")
        key, value = pair.split("=", 1)
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def cmd_call(args: argparse.Namespace) -> int:
    import anyio
    from mcp import Client

    from ba_mcp.server import build_server

    settings = _settings(args)
    arguments = json.loads(args.json) if args.json else _parse_pairs(args.args)
    if args.level:
        arguments["output_level"] = args.level

    async def go() -> int:
        async with Client(build_server(_app_for(settings, args.tool))) as client:
            result = await client.call_tool(args.tool, arguments)
        print_result(result)
        return 1 if result.is_error else 0

    return anyio.run(go)


def _app_for(settings: Settings, tool: str) -> Any:
    """An App serving just ``tool`` (no Python sandbox is started for a file read), or every tool when it is
    not one the App can build alone (an unknown or disabled name gets the server's own error)."""
    from ba_mcp.app import App

    if settings.tool(tool).enabled:
        try:
            return App(settings, [tool])
        except ValueError:
            pass
    return App(settings)


def print_result(result: Any) -> None:
    for block in result.content:
        if block.type == "text":
            print(block.text)
        elif block.type == "image":
            print(f"[image content: {block.mime_type}, {len(block.data) * 3 // 4:,} bytes]")
        elif block.type == "resource_link":
            print(f"[resource link: {block.uri} ({block.mime_type})]")


# -- artifacts --------------------------------------------------------------------------------


def cmd_artifacts(args: argparse.Namespace) -> int:
    from ba_mcp import callers

    with callers.acting_as(callers.EVERYONE):  # the operator sees every session's artifacts
        return _artifacts(args)


def _artifacts(args: argparse.Namespace) -> int:
    from ba_mcp.stores.artifacts import ArtifactStore
    from ba_mcp.workspace import Workspace

    settings = _settings(args)
    # the operator's own look at the store: every session's artifacts, also through the tools it runs
    settings = settings.model_copy(update={"artifacts": settings.artifacts.model_copy(update={"shared": True})})
    ws = Workspace.open(settings.workspace_root())
    store = ArtifactStore(ws.dir("artifacts"), settings.artifacts)
    if args.action == "list":
        metas = store.list()
        if not metas:
            print("no artifacts")
        name = owner_names(settings)
        for m in metas:
            age = time.strftime("%Y-%m-%d %H:%M", time.localtime(m.created))
            owners = ", ".join(dict.fromkeys(name(o) for o in m.owners))
            print(
                printable(
                    f"{m.id}  {m.kind:<8} {m.size:>12,} B  {age}  {m.source_tool:<14} {owners:<24} {m.title[:60]}"
                )
            )
        return 0
    if args.action == "show":
        if not args.id:
            raise SystemExit("ba-mcp artifacts show: give an artifact id")
        return _show_artifact(settings, args.id, args.level)
    if args.action == "export":
        return _export_artifact(settings, store, args)
    _err("ba-mcp: cleaning the artifact store …")
    removed = store.cleanup()
    print(json.dumps(removed))
    return 0


def _export_artifact(settings: Settings, store: Any, args: argparse.Namespace) -> int:
    """Write an artifact as a file beneath files.export_dir (CSV, XLSX, Parquet, PNG or Markdown)."""
    from ba_mcp.errors import ToolFailure
    from ba_mcp.exports import Exports

    if not args.id or not args.path:
        raise SystemExit("ba-mcp artifacts export: give an artifact id and a path, e.g. artifact_0123456789ab q3.xlsx")
    exports = Exports(settings.export_root(), store)
    try:
        written = exports.write(args.id, args.path, overwrite=args.overwrite)
    except ToolFailure as failure:
        _err(f"ba-mcp artifacts export: {failure.message}" + (f"; {failure.hint}" if failure.hint else ""))
        return 1
    print(f"wrote {exports.root / written.split('/', 1)[1]}")
    return 0


def _show_artifact(settings: Settings, aid: str, level: str) -> int:
    """The artifact's metadata, then file_reader's observation of it, through the pipeline."""
    import anyio
    from mcp import Client

    from ba_mcp.errors import ToolFailure
    from ba_mcp.server import build_server
    from ba_mcp.stores.artifacts import ArtifactStore
    from ba_mcp.workspace import Workspace

    try:
        store = ArtifactStore(Workspace.open(settings.workspace_root()).dir("artifacts"), settings.artifacts)
        print(json.dumps(store.get(aid).public(), indent=1))
    except ToolFailure as failure:
        _err(f"ba-mcp artifacts show: {failure.message}; `uv run ba-mcp artifacts list` shows the artifacts there are")
        return 1

    async def go() -> int:
        async with Client(build_server(_app_for(settings, "file_reader"))) as client:
            result = await client.call_tool("file_reader", {"path": aid, "output_level": level})
        print_result(result)
        return 1 if result.is_error else 0

    return anyio.run(go)


# -- skills -----------------------------------------------------------------------------------


def cmd_skills(args: argparse.Namespace) -> int:
    from ba_mcp.skills import load_skills, sources, validate_folder
    from ba_mcp.skills.loader import skill_folders

    if args.action == "validate":
        if args.target:
            directories = [Path(args.target)]
            if not directories[0].is_dir():
                _err(f"ba-mcp skills validate: {args.target} is not a directory")
                return 2
        else:
            directories = [d for _, d in sources(_settings(args).skills)]
        folders = [f for d in directories for f in skill_folders(d)]
        if not folders:
            _err("ba-mcp skills validate: no skill folders (folders holding a SKILL.md) found")
            return 1
        failed = 0
        for folder in folders:
            problems = validate_folder(folder)
            if problems:
                failed += 1
                print(f"FAIL  {folder.name}")
                for problem in problems:
                    print(f"      - {problem}")
            else:
                print(f"ok    {folder.name}")
        print(f"{len(folders) - failed} of {len(folders)} skill(s) valid")
        return 1 if failed else 0
    skills = load_skills(_settings(args).skills)
    for warning in skills.warnings:
        _err(f"warning: skill {warning}")
    if args.action == "show":
        if not args.target:
            _err("ba-mcp skills show: give a skill name (ba-mcp skills list shows them)")
            return 2
        from ba_mcp.errors import ToolFailure

        try:
            skill = skills.get(args.target)
        except ToolFailure as failure:
            _err(f"ba-mcp skills show: {failure.message}; {failure.hint}")
            return 1
        print(skill.read(skill.skill_file).decode("utf-8"), end="")
        print(f"\n--- files of {skill.name} ({skill.uri()}):")
        for f in skill.files:
            print(f"{f.size:>10,} B  {f.path}")
        return 0
    if not len(skills):
        print("no skills loaded")
        return 0
    width = max(len(sk.name) for sk in skills)
    print(f"{'name':<{width}}  {'source':<16} files  use          description")
    for sk in skills:
        use = ("prompt" if sk.user_invocable else "") + ("+model" if sk.model_invocable else "")
        line = f"{sk.name:<{width}}  {sk.source:<16} {len(sk.files):>5}  {use.strip('+'):<12} {sk.description}"
        print(line)
    return 0


# -- metrics ----------------------------------------------------------------------------------


def cmd_plugins(args: argparse.Namespace) -> int:
    """Every installed plug-in package: what it adds, and whether the configuration loads it (plugins:)."""
    found = _settings(args).plugin_status
    if not found:
        print("no plug-in packages installed (entry points ba_mcp.engines, ba_mcp.tools, ba_mcp.skills)")
    for plugin in found:
        state = ("unavailable: " + plugin.problem) if plugin.problem else "loaded" if plugin.enabled else "not enabled"
        print(f"{plugin.name} {plugin.version}".rstrip() + f"  {state}")
        for item in plugin.provides:
            print(f"    {item}")
    return 1 if any(p.problem for p in found) else 0


def cmd_metrics(args: argparse.Namespace) -> int:
    """Metric files, read here (this command is not the server): list, show one, validate strictly."""
    from ba_mcp.app import metrics_of
    from ba_mcp.errors import ToolFailure
    from ba_mcp.metrics.catalog import answer, models_of
    from ba_mcp.metrics.files import metric_files, read_sources
    from ba_mcp.metrics.load import validate_files

    settings = _settings(args)
    metrics = metrics_of(settings, dict(settings.files.read_roots))
    if args.action == "validate":
        paths = [Path(args.target)] if args.target else metrics.files()
        if args.target and not paths[0].exists():
            _err(f"ba-mcp metrics validate: {args.target} does not exist")
            return 2
        files = metric_files(paths)
        if not files:
            _err("ba-mcp metrics validate: no metric files (*.yml, *.yaml) found")
            return 1
        sources, unreadable = read_sources(files, metrics.max_file_bytes)
        model, problems = validate_files(sources, metrics.dialects, metrics.grains)
        for problem in [*unreadable, *problems]:
            print(problem)
        counts = f"{len(model.metrics)} metric(s), {len(model.datasets)} dataset(s) in {len(files)} file(s)"
        if unreadable or problems:
            print(f"{len(unreadable) + len(problems)} problem(s); {counts}")
            return 1
        print(f"valid: {counts}")
        return 0
    _, unreadable = metrics.sources()
    _, unparsed = metrics.manifests()
    summary_request = metrics.request("summary")
    model, dbt = models_of(summary_request)  # your files and the dbt projects, as the server reads them
    summary = answer(model, summary_request, dbt)
    for warning in [*unreadable, *unparsed, *summary["warnings"]]:
        _err(f"warning: {warning} (left out)")
    if args.action == "show":
        if not args.target:
            _err("ba-mcp metrics show: give a metric name (ba-mcp metrics list shows them)")
            return 2
        try:
            print(answer(model, metrics.request("describe", name=args.target), dbt)["text"])
        except ToolFailure as failure:
            _err(f"ba-mcp metrics show: {failure.message}; {failure.hint}")
            return 1
        return 0
    if not summary["metrics"]:
        print("no metrics defined (add OSI files to <workspace>/metrics/ or a dbt project; see docs/metrics.md)")
        return 0
    width = max(len(m["name"]) for m in summary["metrics"])
    for m in summary["metrics"]:
        on = f"  [{m['database']}]" if m.get("database") else ""
        print(f"{m['name']:<{width}}  {m['headline']}{on}")
    return 0


# -- analyses ---------------------------------------------------------------------------------


def cmd_analyses(args: argparse.Namespace) -> int:
    """Saved analyses (analyses/<name>/ in the workspace, and each user's of a team server as <user>/<name>): list,
    show one, run one with no model, publish one to the team or unpublish it (for its owner)."""
    from ba_mcp import callers
    from ba_mcp.analyses import published
    from ba_mcp.analyses.manifest import listed, read_manifest
    from ba_mcp.errors import ToolFailure
    from ba_mcp.workspace import Workspace

    settings = _settings(args)
    root = settings.workspace_root()
    # the operator sees every principal's: the workspace's own analyses/, then each user's as <user>/<name>
    folders = {"": root / "analyses", **{h: p / "analyses" for h, p in Workspace(root).homes().items()}}
    if args.action == "list":
        shown = 0
        person = owner_names(settings)
        for home, where in folders.items():
            for name in listed(where, shared=True):
                manifest = read_manifest(where, name, shared=True)
                params = ", ".join(f"{n}={s.get('default')!r}" for n, s in (manifest.get("parameters") or {}).items())
                steps = len(manifest.get("steps") or [])
                label = f"{home}/{name}" if home else name
                record = published.of(root / "published", str(manifest.get("owner") or "default"), name)
                shown_as = f"  [published as {record.qualified}]" if record else ""
                owner = person(str(manifest.get("owner") or "default"))
                description = manifest.get("description") or ""
                print(printable(f"{label}  {steps} steps  {params}  {description}  [owner {owner}]{shown_as}"))
                shown += 1
        if not shown:
            print("no saved analyses (save_analysis saves one from a conversation)")
        return 0
    if not args.name:
        _err(f"ba-mcp analyses {args.action}: give an analysis name (ba-mcp analyses list shows them)")
        return 2
    home, _, name = args.name.rpartition("/")
    if home not in folders:
        _err(f"ba-mcp analyses {args.action}: no user folder {home!r} (ba-mcp analyses list shows the analyses)")
        return 1
    folder, args.name = folders[home], name
    try:
        manifest = read_manifest(folder, args.name, shared=True)
    except ToolFailure as failure:
        _err(f"ba-mcp analyses {args.action}: {failure.message}; {failure.hint}")
        return 1
    if args.action == "show":
        print((folder / args.name / "analysis.yaml").read_text(encoding="utf-8"), end="")
        return 0
    if args.action in ("publish", "unpublish"):  # on the owner's behalf: the record names them, not the operator
        owner = str(manifest.get("owner") or "default")
        if args.action == "unpublish":
            done = published.unpublish(root / "published", owner, args.name)
            print(f"unpublished {args.name}" if done else f"{args.name} was not published")
            return 0
        before = published.of(root / "published", owner, args.name)
        by = str(manifest.get("by") or (before.by if before else "") or home or callers.operator().display)
        (root / "published").mkdir(mode=0o700, exist_ok=True)
        record = published.publish(root / "published", owner, by, manifest)
        print(f"published {args.name} as {record.qualified} (by {record.by}): every user may read and re-run it")
        return 0
    from ba_mcp.rerun import run_folder

    given = {}
    for pair in args.param or []:
        key, sep, value = pair.partition("=")
        if not sep:
            _err(f"ba-mcp analyses run: --param {pair!r} is not name=value")
            return 2
        given[key.strip()] = value
    try:
        return run_folder(
            folder / args.name,
            given,
            Path(args.out) if args.out else None,
            config=args.config,
            open_report=bool(args.open),
        )
    except ToolFailure as failure:
        _err(f"ba-mcp analyses run: {failure.message}" + (f"; {failure.hint}" if failure.hint else ""))
        return 2


# -- stats ------------------------------------------------------------------------------------


def cmd_stats(args: argparse.Namespace) -> int:
    from ba_mcp.pipeline.usage import TelemetryLog, Usage
    from ba_mcp.workspace import Workspace

    settings = _settings(args)
    ws = Workspace.open(settings.workspace_root())
    since = time.time() - args.hours * 3600 if args.hours else None
    name = owner_names(settings)
    report = Usage.from_records(TelemetryLog(ws.dir("logs")).read(since), by=lambda rec: name(rec.session)).report()
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    total = report["total"]
    print(
        f"calls: {total['calls']}  success: {total['success_rate']:.1%}  cache hits: {total['cache_hit_rate']:.1%}  "
        f"avg latency: {total['avg_latency_ms']} ms  output tokens: {total['output_tokens']:,}"
    )
    print(f"{'tool':<16}{'calls':>7}{'ok %':>8}{'err %':>8}{'cache %':>9}{'avg ms':>10}{'tok in':>10}{'tok out':>10}")
    for name, st in report["tools"].items():
        print(
            f"{name:<16}{st['calls']:>7}{st['success_rate']:>8.1%}{st['error_rate']:>8.1%}{st['cache_hit_rate']:>9.1%}"
            f"{st['avg_latency_ms']:>10}{st['input_tokens']:>10,}{st['output_tokens']:>10,}"
        )
    if report["errors_by_type"]:
        print("errors by type: " + ", ".join(f"{k} {v}" for k, v in report["errors_by_type"].items()))
    width = max([16, *(len(user) + 2 for user in report["users"])])
    print(f"{'user':<{width}}{'calls':>7}{'ok %':>8}{'err %':>8}{'avg ms':>10}{'tok out':>10}")
    for user, st in report["users"].items():
        print(
            f"{user:<{width}}{st['calls']:>7}{st['success_rate']:>8.1%}{st['error_rate']:>8.1%}"
            f"{st['avg_latency_ms']:>10}{st['output_tokens']:>10,}"
        )
    return 0


def owner_names(settings: Settings) -> Any:
    """A session key (an owner of stored items, a telemetry record's session) as the person it is: the display name
    the audit trail recorded for its principal (``principals.jsonl``), else the key itself."""
    from ba_mcp import callers
    from ba_mcp.pipeline import audit

    known = audit.names(settings.audit_dir())

    def name(key: str) -> str:
        principal = callers.principal_of(key)
        return printable(known.get(principal) or principal)

    return name


def printable(text: str) -> str:
    """A text people wrote (a display name from a token, a statement, a reason) as a terminal shows it: each character
    that is not printable — a control character that starts an escape sequence or moves the cursor, a bidirectional
    override, a line separator — as its ``\\u`` escape, so no record can rewrite or hide another on the screen."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(c: str) -> str:
    """A character as JSON escapes it (a surrogate pair past U+FFFF): inside a JSON string, the same character."""
    n = ord(c)
    if n <= 0xFFFF:
        return f"\\u{n:04x}"
    n -= 0x10000
    return f"\\u{0xD800 + (n >> 10):04x}\\u{0xDC00 + (n & 0x3FF):04x}"


# -- audit ------------------------------------------------------------------------------------


def cmd_audit(args: argparse.Namespace) -> int:
    """``ba-mcp audit``: the audit trail's records (S-20), oldest first — of one user, one tool, one database, from a
    time (``--since``: a date, today, yesterday, a duration back such as 24h) to another (``--until``)."""
    from ba_mcp.pipeline import audit

    settings = _settings(args)
    folder = settings.audit_dir()
    try:
        since = audit.moment(args.since) if args.since else None
        until = audit.moment(args.until) if args.until else None
    except ValueError as exc:
        _err(f"ba-mcp audit: {exc}")
        return 2
    if not audit.trail_files(folder):
        off = "" if settings.audit.enabled else " (audit.enabled is false)"
        _err(f"ba-mcp audit: no audit trail in {folder}{off}")
        return 1
    named = audit.principals_named(folder, args.user) if args.user else []
    if len(named) > 1:  # "alice" is the name before the @ of two people, or one's subject and another's name
        people = "; ".join(
            printable(f"{p['display']} (issuer {p['issuer']}, subject {p['subject']}, key {p['key']})") for p in named
        )
        said = f"--user {printable(args.user)} names {len(named)} principals: {people}"
        _err(f"ba-mcp audit: {said}; give one's whole display name, subject or key")
        return 2
    shown = 0
    for entry in audit.select(audit.read(folder, since, until), args.user, args.tool, args.database):
        # --json too: JSON leaves C1 controls (U+009B starts an escape sequence) and bidirectional overrides as they
        # are; escaped, the line decodes to the same record
        print(printable(json.dumps(entry, ensure_ascii=False)) if args.json else audit_line(entry))
        shown += 1
    if not shown and not args.json:
        print("no audit records match")
    return 0


def audit_line(entry: dict[str, Any]) -> str:
    """One record as a line for people: local time, who, what, where, how it ended, the statement's head."""
    from ba_mcp.pipeline.audit import seconds_of

    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds_of(entry["time"])))
    who = str((entry.get("principal") or {}).get("display") or "-")
    if entry.get("event") == "refused":
        status = f"refused {entry['status']}" if entry.get("status") else "refused"
        request = " ".join(str(entry[k]) for k in ("method", "path", "tool") if entry.get(k))
        client = f" from {entry['client']}" if entry.get("client") else ""
        return printable(
            f"{when}  {who:<20} {status} {entry.get('error_code')}: {entry.get('reason')}  {request}{client}"
        )
    where = str(entry.get("database") or "") + (f" as {entry['role']}" if entry.get("role") else "")
    outcome = str(entry.get("outcome"))
    if outcome != "ok":
        outcome += f" {entry.get('error_code')}"
    rows = f"{entry['rows']:,} rows" if isinstance(entry.get("rows"), int) else ""
    said = entry.get("statement") or entry.get("executed")
    text = said.get("text", "") if isinstance(said, dict) else json.dumps(entry.get("arguments") or {})
    head = " ".join(str(text).split())
    head = head[:100] + ("…" if len(head) > 100 else "")
    parts = [when, f"{who:<20}", f"{entry.get('tool')!s:<15}", where, outcome, rows, f"{entry.get('duration_ms')} ms"]
    return printable("  ".join(p for p in parts if p) + f"  {head}")


# -- install ----------------------------------------------------------------------------------


def claude_desktop_config_path() -> Path:
    system = platform.system()
    if system == "Darwin":
        return Path.home() / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    if system == "Windows":
        return (
            Path(os.environ.get("APPDATA", Path.home() / "AppData" / "Roaming"))
            / "Claude"
            / "claude_desktop_config.json"
        )
    return Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "Claude" / "claude_desktop_config.json"


def server_entry(settings: Settings, config: Path | None, project: Path | None = None) -> dict[str, Any]:
    """The host configuration entry that starts this installation's server over stdio: the configured read
    roots travel with it; ``project`` (Claude Code's project folder) becomes the read root ``project`` and
    its ``ba-exports/`` the export folder."""
    script = shutil.which("ba-mcp")
    command, args = (str(Path(script).resolve()), []) if script else (sys.executable, ["-m", "ba_mcp"])
    args.append("serve")
    if config is not None:
        args += ["--config", str(config.resolve())]
    roots = {name: Path(p).expanduser().resolve() for name, p in settings.files.read_roots.items()}
    env = {"BA_MCP_WORKSPACE": str(settings.workspace_root())}
    if project is not None:
        roots.setdefault("project", project.resolve())
        env["BA_MCP_FILES__EXPORT_DIR"] = str(project.resolve() / "ba-exports")
    for name, root in roots.items():
        args += ["--read-root", f"{name}={root}"]
    return {"command": command, "args": args, "env": env}


def merge_server_config(path: Path, name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """The host's JSON config with our entry added or replaced; every other key kept."""
    data: dict[str, Any] = {}
    if path.exists():
        text = path.read_text(encoding="utf-8")
        if text.strip():
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise SystemExit(
                    f"ba-mcp install: {path} is not valid JSON ({exc.msg}); fix it first, nothing was written"
                ) from None
        if not isinstance(data, dict):
            raise SystemExit(f"ba-mcp install: {path} does not hold a JSON object; nothing was written")
    servers = data.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise SystemExit(f"ba-mcp install: 'mcpServers' in {path} is not an object; nothing was written")
    servers[name] = entry
    return data


def cmd_install(args: argparse.Namespace) -> int:
    from ba_mcp.settings import config_sources, variables_needed

    settings = _settings(args)
    operator, project = config_sources(args.config)
    config = args.config  # a project's ba-mcp.yaml is never made the operator's --config of an entry (S-17)
    if project is not None and args.host == "claude-desktop":
        _err(
            f"ba-mcp install: {project} is a project file, not carried into the entry; to make it your own "
            "configuration pass it with --config"
        )
    if args.host == "claude-desktop":
        path = args.config_path or claude_desktop_config_path()
        entry = server_entry(settings, config)
        # Claude Desktop starts servers with little of your environment: the variables the configuration's
        # databases name travel in the entry (the file is yours; it is written readable by you alone)
        carried = variables_needed(operator, project=project)
        entry["env"].update({name: os.environ[name] for name in carried})
        entry["env"].update({k: v for k, v in os.environ.items() if k.startswith("BA_MCP_") and k not in entry["env"]})
        if carried:
            _err(f"ba-mcp install: the entry holds the values of {', '.join(carried)} (keep it private)")
    else:  # a project's .mcp.json: the project's files are readable as project/<path>; Claude Code starts the
        # server with the environment it runs in, so nothing secret is written into the project
        path = args.config_path or Path.cwd() / ".mcp.json"
        entry = server_entry(settings, config, project=path.parent)
    merged = merge_server_config(path, args.name, entry)
    if args.print:
        print(json.dumps({"mcpServers": {args.name: entry}}, indent=2))
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")
    if args.host == "claude-desktop":
        tmp.chmod(0o600)
    os.replace(tmp, path)
    print(f"wrote the '{args.name}' server to {path}")
    if args.host == "claude-desktop":
        print("restart Claude Desktop to load it")
    return 0


# -- config -----------------------------------------------------------------------------------


def cmd_config(args: argparse.Namespace) -> int:
    """``ba-mcp config trust|untrust|status [FILE]``: approve a project's ``ba-mcp.yaml`` (S-17). The approval is
    the digest of the file's exact content, recorded in the user's configuration directory — never in the
    project — so a changed file needs approval again."""
    from ba_mcp.settings import PROJECT_FILE, ConfigError, load_settings, trust_project, untrust_project

    if args.action == "tools":
        print(tool_settings_yaml(load_settings(environ={})))
        return 0
    path = (args.file or Path.cwd() / PROJECT_FILE).absolute()
    if not path.is_file():
        _err(f"ba-mcp config: no {path.name} at {path.parent}")
        return 2
    if args.action == "trust":
        try:
            load_settings(project=path, environ={})  # what is approved must be valid configuration
        except ConfigError as exc:
            _err(f"ba-mcp config: not approved: {exc}")
            return 2
        try:
            digest = trust_project(path)
        except ConfigError as exc:
            _err(f"ba-mcp config: {exc}")
            return 2
        print(f"approved {path} (sha256 {digest[:16]}…): every key in it applies until the file changes")
        return 0
    if args.action == "untrust":
        print(f"approval withdrawn for {path}" if untrust_project(path) else f"{path} was not approved")
        return 0
    try:
        state = load_settings(project=path, environ={}).project_file
    except ConfigError as exc:
        _err(f"ba-mcp config: {exc}")
        return 2
    assert state is not None
    print(state.advice())
    return 0


def tool_settings_yaml(settings: Settings) -> str:
    """``ba-mcp config tools``: every built-in tool's section (``tools.<name>``) as YAML with its defaults, each own
    key under its description — read from the tools' own models, so a new tool's keys appear without a word here."""
    from ba_mcp import registry
    from ba_mcp.settings import ToolSettings

    lines = [
        "# Every tool has enabled (false: not served), timeout_s (per call), max_timeout_s (the most a call may ask",
        "# for) and default_level (null: default_output_level); then its own keys. Defaults shown.",
        "tools:",
    ]
    for name in registry.tool_names():
        model = settings.tool_model(name)
        defaults = model().model_dump(mode="json")
        lines.append(f"  {name}:")
        for key, field in model.model_fields.items():
            if field.description and key not in ToolSettings.model_fields:
                lines += [f"    # {part}" for part in textwrap.wrap(field.description, 100)]
            lines.append(f"    {key}: {json.dumps(defaults[key])}")
    return "\n".join(lines)


def cmd_bundle(args: argparse.Namespace) -> int:
    """``ba-mcp bundle OUT``: the MCPB bundle's folder (ba_mcp/bundle.py), ready for ``mcpb pack``."""
    from ba_mcp.bundle import BundleError, build

    try:
        out = build(args.out)
    except BundleError as exc:
        _err(f"ba-mcp bundle: {exc}")
        return 2
    print(f"assembled {out}; pack it with: npx @anthropic-ai/mcpb pack {out} ba-mcp.mcpb")
    return 0


# -- doctor -----------------------------------------------------------------------------------


def cmd_doctor(args: argparse.Namespace) -> int:
    try:
        settings = _settings(args)
    except SystemExit:
        return 2
    from ba_mcp.doctor import healthy, run_checks

    checks = run_checks(settings, network=args.network)
    width = max(len(c.name) for c in checks)
    for c in checks:
        print(f"{'ok  ' if c.ok else 'FAIL'}  {c.name:<{width}}  {c.detail}")
    return 0 if healthy(checks) else 1


# -- parser -----------------------------------------------------------------------------------


def engine_commands() -> list[Any]:
    """The engines that add commands of their own (the registry says which)."""
    from ba_mcp import registry
    from ba_mcp.databases.base import engine_of

    return [engine_of(info.kind) for info in registry.engines() if info.commands]


def build_parser(only_serve: bool = False) -> argparse.ArgumentParser:
    """The CLI's parser; ``only_serve``: just `serve`, what a host starts (the other commands, and the engines'
    own, are not built: a host's start waits for none of them)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", type=Path, help="a user YAML configuration file")
    common.add_argument("--workspace", type=Path, help="the workspace directory (overrides configuration)")
    common.add_argument(
        "--read-root",
        action="append",
        metavar="NAME=DIR",
        help="a read-only folder the tools reach as NAME/<path> (repeatable; adds to files.read_roots)",
    )

    parser = argparse.ArgumentParser(
        prog="ba-mcp", description="Business-analysis tool server for MCP. With no command: serve over stdio."
    )
    sub = parser.add_subparsers(dest="command")

    p = sub.add_parser("serve", parents=[common], help="run the MCP server (stdio by default)")
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="how clients reach it")
    p.add_argument("--host", default="127.0.0.1", help="http: the address to listen on")
    p.add_argument("--port", type=int, default=8000, help="http: the port to listen on")
    p.set_defaults(func=cmd_serve)
    if only_serve:
        return parser

    p = sub.add_parser("demo", parents=[common], help="run a short analysis through a real MCP session over stdio")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser(
        "call", parents=[common], help="call one tool through the pipeline and print what the model sees"
    )
    p.add_argument("tool", help="the tool's name (query_database, run_python, …)")
    p.add_argument("args", nargs="*", help="key=value arguments (values parsed as JSON when they are JSON)")
    p.add_argument("--json", help="all arguments as one JSON object")
    p.add_argument("--level", choices=["brief", "standard", "full"], help="the output level of the observation")
    p.set_defaults(func=cmd_call)

    p = sub.add_parser("artifacts", parents=[common], help="inspect and clean the artifact store")
    p.add_argument("action", choices=["list", "show", "export", "gc"], help="gc: drop what is past its limits")
    p.add_argument("id", nargs="?", help="show, export: the artifact's id")
    p.add_argument("path", nargs="?", help="export: the file to write beneath files.export_dir (e.g. q3.xlsx)")
    p.add_argument("--overwrite", action="store_true", help="export: replace an existing file")
    p.add_argument("--level", choices=["brief", "standard", "full"], default="standard", help="show: the output level")
    p.set_defaults(func=cmd_artifacts)

    p = sub.add_parser("skills", parents=[common], help="list, show and strictly validate skills")
    p.add_argument("action", choices=["list", "show", "validate"])
    p.add_argument("target", nargs="?", help="show: a skill name; validate: a skill folder or a folder of skills")
    p.set_defaults(func=cmd_skills)

    p = sub.add_parser(
        "plugins", parents=[common], help="the installed plug-in packages and which are loaded (plugins:)"
    )
    p.set_defaults(func=cmd_plugins)

    p = sub.add_parser("metrics", parents=[common], help="list, show and strictly validate metric (OSI) files")
    p.add_argument("action", choices=["list", "show", "validate"])
    p.add_argument("target", nargs="?", help="show: a metric name; validate: a file or a folder of files")
    p.set_defaults(func=cmd_metrics)

    p = sub.add_parser(
        "analyses", parents=[common], help="list, show, re-run (no model needed), publish or unpublish saved analyses"
    )
    p.add_argument("action", choices=["list", "show", "run", "publish", "unpublish"])
    p.add_argument("name", nargs="?", help="the analysis (a team server's users' as <user>/<name>)")
    p.add_argument("--param", action="append", help="run: name=value (repeatable)")
    p.add_argument("--out", help="run: the folder for outputs and the report (default: the analysis's runs/<time>/)")
    p.add_argument("--open", action="store_true", help="run: open report.html in the default browser afterwards")
    p.set_defaults(func=cmd_analyses)

    p = sub.add_parser("stats", parents=[common], help="tool-call report from the telemetry log, by tool and by user")
    p.add_argument("--hours", type=float, help="only the last N hours")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("audit", parents=[common], help="who ran what: the audit trail's records (oldest first)")
    p.add_argument("--user", help="one user: their display name (or its part before @), subject or key")
    p.add_argument("--since", help="from: a date (2026-05-04), today, yesterday, or a duration back (24h, 7d, 30m)")
    p.add_argument("--until", help="to (not including): the same forms")
    p.add_argument("--tool", help="one tool's calls (query_database, run_python, …)")
    p.add_argument("--database", help="the calls on one configured database")
    p.add_argument("--json", action="store_true", help="the records as they are, one JSON object a line")
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("install", parents=[common], help="add ba-mcp to a host's configuration")
    p.add_argument("host", choices=["claude-desktop", "claude-code"], help="the host to configure")
    p.add_argument("--print", action="store_true", help="print the entry instead of writing it")
    p.add_argument("--name", default="ba-mcp", help="the server's name in the host configuration")
    p.add_argument("--config-path", type=Path, help="the host configuration file to write (default: the host's own)")
    p.set_defaults(func=cmd_install)

    for engine in engine_commands():  # an engine's own commands (a local server to try it with, …)
        engine.add_commands(sub, common)

    p = sub.add_parser(
        "config", help="approve (trust), withdraw or show a project's ba-mcp.yaml; list the tools' settings (tools)"
    )
    p.add_argument("action", choices=["trust", "untrust", "status", "tools"])
    p.add_argument("file", nargs="?", type=Path, help="the project file (default: ./ba-mcp.yaml)")
    p.set_defaults(func=cmd_config)

    p = sub.add_parser("bundle", help="assemble the Claude Desktop extension's folder (then: mcpb pack FOLDER)")
    p.add_argument("out", type=Path, help="the folder to assemble it in (new or empty)")
    p.set_defaults(func=cmd_bundle)

    p = sub.add_parser("doctor", parents=[common], help="check the environment (nothing outside is contacted)")
    p.add_argument("--network", action="store_true", help="also send the search provider one test query")
    p.set_defaults(func=cmd_doctor)
    return parser


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help")):
        argv.insert(0, "serve")  # bare `ba-mcp [--config …]`: what MCP hosts run
    if argv[0] == "serve":
        gc.disable()  # until the server is built: see cmd_serve
    try:
        args = build_parser(only_serve=argv[0] == "serve").parse_args(argv)
        code = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`ba-mcp artifacts show ID | head`): stop quietly, like any Unix tool.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    except KeyboardInterrupt:
        _err("ba-mcp: interrupted")
        code = 130
    finally:
        gc.enable()  # serve turned it on once built; a start that failed (or a test calling main) gets it back
    raise SystemExit(code)
