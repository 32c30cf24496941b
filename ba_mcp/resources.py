"""Resource content (``ba://files``, ``ba://metrics``, ``artifact://``, ``upload://``, ``db://``; ``skill://``
is ``skills.mcp``'s) and the
completions of their arguments. ``register(server, app)`` adds them to a server; ``COMPLETIONS`` is the
table of argument completions each resource adds to (the server's one completion handler reads it).
``read_special`` serves what a resource template cannot: artifacts with their own MIME type, and the
caller's own session metrics.
"""

from __future__ import annotations

import json
import mimetypes
import time
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import anyio.to_thread
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.types import Completion, ResourceTemplateReference
from pydantic import Field

from ba_mcp import callers
from ba_mcp.analyses.manifest import listed, read_manifest
from ba_mcp.analyses.published import Published, of, others
from ba_mcp.analyses.published import read as read_analysis
from ba_mcp.databases.catalog_search import aliases, search_markdown, size_of, table_lines
from ba_mcp.errors import ToolFailure
from ba_mcp.ids import ARTIFACT_ID
from ba_mcp.metrics.catalog import catalog_text

if TYPE_CHECKING:
    from mcp.server import MCPServer

    from ba_mcp.app import App
    from ba_mcp.databases.base import Schema

_RESOURCE_TEXT_LIMIT = 10 * 1024 * 1024

Completer = Callable[["App", dict[str, str]], list[str]]  # (app, the arguments already chosen) -> values
SCHEMA_BUDGET_CHARS = 40_000  # a larger catalog is listed by name, each table a resource of its own


def register(server: MCPServer[Any], app: App) -> None:
    """The resources of ``app`` on ``server``, and one completion handler over their completers."""
    completions: dict[tuple[str, str], Completer] = {
        ("artifact://{id}", "id"): lambda a, _: [m.id for m in reversed(a.artifacts.list())],
        ("upload://{name}", "name"): lambda a, _: [uid for uid, _, _ in a.workspace.uploads()],
        ("db://{database}/schema", "database"): lambda a, _: a.databases.names,
        ("db://{database}/schema/{table}", "database"): lambda a, _: a.databases.names,
        ("db://{database}/schema/{table}", "table"): _table_names,
        ("db://{database}/search/{words}", "database"): lambda a, _: a.databases.names,
        ("skill://{name}/{path}", "name"): lambda a, _: [s.name for s in a.skills],
        ("metrics://{name}", "name"): lambda a, _: [m["name"] for m in a.metrics_answer("summary")["metrics"]],
        ("analysis://{name}", "name"): lambda a, _: listed(a.workspace.own("analyses"), a.settings.artifacts.shared),
        ("analysis://{owner}/{name}", "owner"): lambda a, _: list(dict.fromkeys(r.handle for r in _published(a))),
        ("analysis://{owner}/{name}", "name"): lambda a, chosen: [
            r.name for r in _published(a) if r.handle == chosen.get("owner")
        ],
    }

    @server.resource(
        "ba://files",
        name="files",
        title="Workspace files",
        mime_type="text/markdown",
        description="Uploads, code files and artifacts with their ids, kinds and sizes.",
    )
    async def files() -> str:
        return await anyio.to_thread.run_sync(files_listing, app)

    @server.resource(
        "ba://metrics",
        name="metrics",
        title="Tool metrics",
        mime_type="application/json",
        description="This session's per-tool calls, latency, tokens, success, error and cache-hit rates.",
    )
    async def metrics() -> str:  # served by read_special, which knows the session
        return metrics_report(app, "default")

    @server.resource(
        "ba://history",
        name="history",
        title="Call history",
        mime_type="text/markdown",
        description="This session's tool calls, newest first: call id, tool, outcome, what it wrote.",
    )
    async def history() -> str:  # served by read_special, which knows the session
        return history_markdown(app, "default")

    @server.resource(
        "artifact://{id}",
        name="artifact",
        title="Artifact",
        description="A stored result by id: tables as CSV, text and JSON as themselves, images as PNG.",
    )
    async def artifact(id: str) -> str | bytes:
        content, _ = await anyio.to_thread.run_sync(read_artifact_resource, app, id)
        return content

    @server.resource(
        "db://{database}/schema",
        name="database-schema",
        title="Database schema",
        mime_type="text/markdown",
        description="Tables and views of a query_database connection, with columns, types and row counts.",
    )
    async def db_schema(database: str) -> str:
        return await anyio.to_thread.run_sync(schema_markdown, app, database)

    @server.resource(
        "upload://{name}",
        name="upload",
        title="Uploaded file",
        description="The raw content of an upload by id (upload_<name>) or file name; at most 10 MB.",
    )
    async def upload(name: str) -> str | bytes:
        return await anyio.to_thread.run_sync(_read_upload, app, name)

    @server.resource(
        "db://{database}/schema/{table}",
        name="database-table",
        title="Table of a database",
        mime_type="text/markdown",
        description="One table or view of a query_database connection: columns, types, comments, definition.",
    )
    async def db_table(database: str, table: str) -> str:
        return await anyio.to_thread.run_sync(table_markdown, app, database, table)

    @server.resource(
        "db://{database}/search/{words}",
        name="database-search",
        title="Search a database's catalog",
        mime_type="text/markdown",
        description="The tables and views whose names, columns or comments hold the words, with their columns.",
    )
    async def db_search(database: str, words: str) -> str:
        return await anyio.to_thread.run_sync(search_text, app, database, words)

    if app.metrics.files():

        @server.resource(
            "metrics://catalog",
            name="metrics-catalog",
            title="Metrics catalog",
            mime_type="text/markdown",
            description="The defined metrics (query_metrics), one line each, and their dimensions.",
        )
        async def metrics_catalog() -> str:
            return await anyio.to_thread.run_sync(metrics_catalog_text, app)

        @server.resource(
            "metrics://catalog/{page}",
            name="metrics-catalog-page",
            title="Metrics catalog, a later page",
            mime_type="text/markdown",
            description="The metrics catalog's page 2, 3 … when it is longer than one page.",
        )
        async def metrics_catalog_page(page: str) -> str:
            if not page.isdigit():
                raise ResourceNotFoundError(f"metrics://catalog/{page}: a page is a number (2, 3 …)")
            return await anyio.to_thread.run_sync(metrics_catalog_text, app, int(page))

        @server.resource(
            "metrics://{name}",
            name="metric",
            title="Metric definition",
            mime_type="text/markdown",
            description="One metric: its definition, dimensions, time grains and the SQL it compiles to.",
        )
        async def metric(name: str) -> str:
            return await anyio.to_thread.run_sync(metric_markdown, app, name)

    if "run_analysis" in app.tools:
        _analyses(server, app)

    for name in app.databases.names:  # listed in resources/list, not only as a template

        def read(name: str = name) -> str:
            return schema_markdown(app, name)

        server.resource(
            f"db://{name}/schema",
            name=f"{name}-schema",
            title=f"Schema of database {name}",
            mime_type="text/markdown",
            description=f"Tables and views of {name}: columns, types, row counts, comments, view definitions.",
        )(_threaded(read))

    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> Completion | None:
        if not isinstance(ref, ResourceTemplateReference):
            return None
        completer = completions.get((ref.uri, argument.name))
        if completer is None:
            return None
        prefix = argument.value or ""
        chosen = dict(getattr(context, "arguments", None) or {})
        matches = [v for v in await anyio.to_thread.run_sync(completer, app, chosen) if v.startswith(prefix)]
        return Completion(values=matches[:100], total=len(matches), has_more=len(matches) > 100)


def _threaded(fn: Callable[[], str]) -> Callable[[], Any]:
    async def read() -> str:
        return await anyio.to_thread.run_sync(fn)

    return read


async def read_special(app: App, uri: str, key: str) -> list[ReadResourceContents] | None:
    """Resources a template cannot serve: ``artifact://`` with each artifact's own MIME type, and
    ``ba://metrics`` for the calling session only (``key``: static resources get no request context). None: not
    one of these."""

    if uri.startswith("skill://"):
        from ba_mcp.skills.mcp import read

        return await read(app.skills, uri)
    if uri.startswith("artifact://"):
        content, mime = await anyio.to_thread.run_sync(read_artifact_resource, app, uri[len("artifact://") :])
        return [ReadResourceContents(content=content, mime_type=mime)]
    if uri == "ba://metrics":
        return [ReadResourceContents(content=metrics_report(app, key), mime_type="application/json")]
    if uri == "ba://history":
        return [ReadResourceContents(content=history_markdown(app, key), mime_type="text/markdown")]
    if uri.startswith("db://") and "/search/" in uri:  # the session's own TEMP tables are searched too
        database, _, words = uri[len("db://") :].partition("/search/")
        args = (app, urllib.parse.unquote(database), urllib.parse.unquote(words), key)
        text = await anyio.to_thread.run_sync(search_text, *args)
        return [ReadResourceContents(content=text, mime_type="text/markdown")]
    if uri.startswith("db://") and "/schema/" in uri:
        database, _, table = uri[len("db://") :].partition("/schema/")
        args = (app, urllib.parse.unquote(database), urllib.parse.unquote(table), key)
        text = await anyio.to_thread.run_sync(table_markdown, *args)
        return [ReadResourceContents(content=text, mime_type="text/markdown")]
    if uri.startswith("db://") and uri.endswith("/schema"):  # the session's own TEMP tables are part of it
        database = urllib.parse.unquote(uri[len("db://") : -len("/schema")])
        text = await anyio.to_thread.run_sync(schema_markdown, app, database, key)
        return [ReadResourceContents(content=text, mime_type="text/markdown")]
    return None


def read_artifact_resource(app: App, aid: str) -> tuple[str | bytes, str]:
    """Content and MIME type of ``artifact://<aid>``: tables as CSV text, images as PNG, text as text."""
    if not ARTIFACT_ID.match(aid):
        raise ResourceNotFoundError(f"'{aid[:40]}' is not an artifact id (artifact_ + 12 hex digits)")
    try:
        meta = app.artifacts.get(aid)
        if meta.kind == "table":
            if meta.size > _RESOURCE_TEXT_LIMIT:
                raise ResourceError(
                    f"{aid} is a {meta.size:,}-byte table, too large to send whole; read it with file_reader "
                    "(offset, nrows) instead"
                )
            from ba_mcp.pipeline.encode import encode_table

            _, table = app.artifacts.read_table(aid)
            return encode_table(table, "csv"), "text/csv"
        meta, data = app.artifacts.read_bytes(aid)
    except ToolFailure as failure:
        raise ResourceNotFoundError(failure.message) from None
    if meta.kind == "image":
        return data, meta.mime
    return data.decode("utf-8"), meta.mime


def _analyses(server: MCPServer[Any], app: App) -> None:
    """Saved analyses: analysis://catalog, analysis://{name} and a prompt per analysis saved when the server
    started (one saved later is in the catalog and runs; its prompt comes with the next start)."""

    @server.resource(
        "analysis://catalog",
        name="analysis-catalog",
        title="Saved analyses",
        mime_type="text/markdown",
        description="Analyses saved with save_analysis: name, parameters, steps; run_analysis re-runs one.",
    )
    async def catalog() -> str:
        return await anyio.to_thread.run_sync(analysis_catalog, app)

    @server.resource(
        "analysis://{name}",
        name="analysis",
        title="Saved analysis",
        mime_type="text/markdown",
        description="One saved analysis: parameters, steps, the outputs it recorded and how to re-run it.",
    )
    async def analysis(name: str) -> str:
        return await anyio.to_thread.run_sync(analysis_markdown, app, name)

    @server.resource(
        "analysis://{owner}/{name}",
        name="published-analysis",
        title="Published analysis",
        mime_type="text/markdown",
        description="An analysis another user published to the team: read it, re-run it as yourself.",
    )
    async def published_analysis(owner: str, name: str) -> str:
        return await anyio.to_thread.run_sync(analysis_markdown, app, f"{owner}/{name}")

    # the prompts are the server's, listed to every client: those of the analyses the stdio session (``default``)
    # saved, or every one when artifacts.shared — none on a team server (http.auth), where the operator's analyses
    # are theirs like anyone's: named to nobody else unless published (S-19)
    team = app.settings.http.auth is not None and not app.settings.artifacts.shared
    for name in [] if team else listed(app.workspace.own("analyses"), app.settings.artifacts.shared):
        manifest = read_manifest(app.workspace.own("analyses"), name, app.settings.artifacts.shared)
        server.prompt(
            name=f"rerun-{name}",
            title=f"Re-run {name}",
            description=f"Re-run the saved analysis {name} with new parameters. {manifest.get('description') or ''}",
        )(_rerun_prompt(name))


def _rerun_prompt(name: str) -> Any:
    def prompt(
        values: Annotated[str | None, Field(description="parameters as name=value, comma-separated")] = None,
    ) -> str:
        given = dict(p.split("=", 1) for p in (values or "").split(",") if "=" in p)
        shown = json.dumps({k.strip(): v.strip() for k, v in given.items()})
        return (
            f'Re-run the saved analysis {name} with run_analysis(name="{name}", parameters={shown}), then tell '
            "me what changed against the saved run, output by output."
        )

    return prompt


def _published(app: App) -> list[Published]:
    """The analyses other principals published to the caller's team (none where everyone sees every analysis)."""
    if app.settings.artifacts.shared:
        return []
    return others(app.workspace.dir("published"), callers.principal_of(callers.current()))


def _line(name: str, m: dict[str, Any]) -> str:
    params = ", ".join(f"{n}={s.get('default')!r}" for n, s in (m.get("parameters") or {}).items())
    about = _one_line(m.get("description") or "")
    return f"- {name}: {about} ({len(m.get('steps') or [])} steps; {params or 'no parameters'})"


def _one_line(text: Any) -> str:
    """A text a user wrote (a description, a display name) on one line: it cannot add a line to a listing — an
    entry "by alice" under bob's analysis."""
    return " ".join(str(text).split())


def analysis_catalog(app: App) -> str:
    """The caller's saved analyses (each published one says as what), then those others published to the team,
    each with its owner."""
    folder = app.workspace.own("analyses")
    shared = app.settings.artifacts.shared
    names = listed(folder, shared)
    theirs = _published(app)
    if not names and not theirs:
        return "No saved analyses yet: save_analysis keeps calls of a conversation as one."
    lines = ["Saved analyses (run_analysis(name, parameters) re-runs one; analysis://{name} shows it):"]
    root, me = app.workspace.dir("published"), callers.principal_of(callers.current())
    for name in names:
        mine = None if shared else of(root, me, name)
        lines.append(
            _line(name, read_manifest(folder, name, shared)) + (f" — published as {mine.qualified}" if mine else "")
        )
    if not names:
        lines.append("- none of your own")
    if theirs:
        lines += ["", "Published to the team by others (run_analysis re-runs one as you, on your data; read-only):"]
        lines += [_line(r.qualified, r.manifest) + f" — by {_one_line(r.by)}" for r in theirs]
    return "\n".join(lines)


def analysis_markdown(app: App, name: str) -> str:
    """One analysis the caller may see: their own by ``name``, or one published to the team by ``<handle>/<name>``
    — else the same "unknown" whichever it is."""
    root, me = app.workspace.dir("published"), callers.principal_of(callers.current())
    try:
        m, record = read_analysis(app.workspace.own("analyses"), root, name, me, app.settings.artifacts.shared)
    except ToolFailure as failure:
        raise ResourceNotFoundError(f"{failure.message}; {failure.hint}") from None
    mine = None if app.settings.artifacts.shared or record is not None else of(root, me, name)
    if record is not None:  # whose it is, first; what its owner wrote cannot add a line that says otherwise
        said = f"Published by {_one_line(record.by)} on {record.published}: read-only; a re-run is yours (your data "
        said += "access)."
        lines = [f"# {name}", "", said, "", _one_line(m.get("description") or ""), "", "Parameters:"]
    else:
        said = f"Saved {m.get('saved')}." + (f" Published to the team as {mine.qualified}." if mine else "")
        lines = [f"# {name}", "", str(m.get("description") or ""), "", said, "", "Parameters:"]
    lines += [f"- {n}: {s.get('type')}, default {s.get('default')!r}" for n, s in (m.get("parameters") or {}).items()]
    lines += ["", "Steps:"]
    for s in m.get("steps") or []:
        text = s.get("sql") or s.get("code") or json.dumps(s.get("metrics_query") or s.get("read"))
        first = " ".join(str(text).split())
        lines.append(f"- {s.get('id')} {s.get('tool')}: {first[:100]}{'…' if len(first) > 100 else ''}")
    lines += ["", "Outputs: " + ", ".join(f"{o['name']} ({o['kind']})" for o in m.get("outputs") or [])]
    outside = "" if record is not None else f"; outside: uv run ba-mcp analyses run {name}"
    lines += ["", f'Re-run: run_analysis(name="{name}", parameters={{…}}){outside}']
    return "\n".join(lines)


HISTORY_SHOWN = 50


def history_markdown(app: App, session: str) -> str:
    """``ba://history``: the session's calls, newest first, one line each — the call id (what provenance and
    saved analyses refer to), the time, the tool, ok or the error code, what it wrote, what it was asked."""
    records = list(app.sessions(session).history)[::-1]
    if not records:
        return "No calls yet in this session."
    lines = [f"Calls of this session, newest first ({len(records)}; each result's _meta holds its provenance):"]
    for r in records[:HISTORY_SHOWN]:
        when = time.strftime("%H:%M:%S", time.localtime(r.timestamp))
        outcome = "ok" if r.success else (r.error_code or "error")
        wrote = f" → {', '.join(r.artifacts[:3])}" if r.artifacts else ""
        lines.append(f"- {r.call_id} {when} {r.tool} {outcome}{wrote}: {_asked(r.arguments)}")
    if len(records) > HISTORY_SHOWN:
        lines.append(f"… {len(records) - HISTORY_SHOWN} older calls")
    return "\n".join(lines)


def _asked(arguments: dict[str, Any]) -> str:
    """The gist of a call's arguments on one line (its main text argument, shortened)."""
    shown = {k: v for k, v in arguments.items() if k != "output_level"}
    text = " ".join(json.dumps(shown, ensure_ascii=False, default=str).split())
    return text if len(text) <= 120 else text[:119] + "…"


def metrics_catalog_text(app: App, page: int = 1) -> str:
    try:
        return catalog_text(app.metrics_answer("summary"), app.metrics.budget_chars, page)
    except ToolFailure as failure:
        if failure.type.value == "not_found":
            raise ResourceNotFoundError(f"{failure.message}; {failure.hint}") from None
        raise ResourceError(f"{failure.message} ({failure.hint})" if failure.hint else failure.message) from None


def metric_markdown(app: App, name: str) -> str:
    try:
        return str(app.metrics_answer("describe", name=name)["text"])
    except ToolFailure as failure:
        if failure.type.value == "not_found":
            raise ResourceNotFoundError(f"{failure.message}; {failure.hint}") from None
        raise ResourceError(f"{failure.message} ({failure.hint})" if failure.hint else failure.message) from None


def metrics_report(app: App, session: str) -> str:
    """The metrics of one client session only (S-9): no other session's activity, key or artifacts."""
    with callers.acting_as(session):
        own = app.artifacts.list()
    report: dict[str, Any] = {
        "session": app.sessions(session).usage.report(),
        "artifacts": {"count": len(own), "bytes": sum(m.size for m in own)},
    }
    if app.settings.telemetry.lag_monitor:
        report["event_loop"] = {k: round(v, 1) for k, v in app.loop_lag.items()}
    return json.dumps(report, indent=1)


def files_listing(app: App) -> str:
    """The unified file list (seed 002): uploads, the calling session's code files and artifacts, as markdown."""
    lines = ["# Files in the workspace", ""]
    uploads = app.workspace.uploads()
    lines.append("## Uploads (read with file_reader; path = the id)")
    if not uploads:
        lines.append("- none (put files in the workspace's uploads/ folder)")
    for uid, path, st in uploads:
        kind = path.suffix.lstrip(".").lower() or "file"
        lines.append(f"- [{uid}] {path.name} ({kind}) | {_size(st.st_size)}")
    codes = app.code.list()
    lines += ["", "## Code files"]
    if not codes:
        lines.append("- none yet")
    for meta in codes:
        lines.append(
            f"- [{meta.get('id')}] ({meta.get('language', 'python')}) {meta.get('description', '')} | "
            f"{meta.get('line_count', '?')} lines"
        )
    if app.workspace.read_roots:
        lines += ["", "## Read roots (read-only folders beyond the workspace; file_reader lists a folder path)"]
        for name in app.workspace.read_roots:
            lines += _root_top_level(app, name)
    artifacts = app.artifacts.list()
    lines += ["", "## Artifacts (results kept by the server)"]
    if not artifacts:
        lines.append("- none yet")
    for a in artifacts:
        desc = a.summary or a.title
        lines.append(f"- [{a.id}] {a.kind} from {a.source_tool}: {desc[:160]} | {_size(a.size)}")
    return "\n".join(lines)


READ_ROOT_ENTRIES = 40  # entries of each read root's top level that ba://files shows


def _root_top_level(app: App, name: str) -> list[str]:
    """A read root's top level: its first entries with sizes, and how to list the rest."""
    try:
        listed = app.workspace.directory(f"{name}/")
    except ToolFailure as failure:
        return [f"- {name}/ — not available: {failure.message}"]
    if listed is None:
        return [f"- {name}/ — not available"]
    _, entries, more = listed
    lines = [f"- {name}/ — {len(entries):,}{'+' if more else ''} entries; pass paths as {name}/<path>"]
    for entry in entries[:READ_ROOT_ENTRIES]:
        size = f" | {_size(entry.size)}" if entry.size is not None else ""
        lines.append(f"  - {entry.path} ({entry.kind}){size}")
    if len(entries) > READ_ROOT_ENTRIES or more:
        lines.append(f'  - … the rest: file_reader(path="{name}/", offset={READ_ROOT_ENTRIES})')
    return lines


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def _schema(app: App, database: str, session: str) -> Schema:
    try:
        return app.databases.schema(database, session)
    except ToolFailure as failure:
        raise ResourceNotFoundError(failure.message) from None


def _table_names(app: App, chosen: dict[str, str]) -> list[str]:
    database = chosen.get("database") or ""
    if database not in app.databases.names:
        return []
    try:
        return sorted(app.databases.schema(database, callers.current())["tables"])
    except ToolFailure:
        return []


def _heading(database: str, schema: Schema) -> tuple[str, str]:
    dialect = schema.get("dialect") or "DuckDB"
    heading = f"# Database {database}" + ("" if dialect == "DuckDB" else f" ({dialect}: write SQL in its dialect)")
    return heading, dialect


def table_markdown(app: App, database: str, table: str, session: str = "default") -> str:
    """One table or view of a database (for catalogs too large to show whole)."""
    schema = _schema(app, database, session)
    entry = schema["tables"].get(table)
    if entry is None:
        raise ResourceNotFoundError(
            f"database {database} has no table or view named {table[:100]}; db://{database}/schema lists them"
        )
    heading, _ = _heading(database, schema)
    return "\n".join([heading, "", *table_lines(table, entry, aliases(schema["tables"]).get(table))])


def search_text(app: App, database: str, words: str, session: str = "default") -> str:
    """The relations of a database whose names, columns or comments hold ``words`` (``catalog_search``)."""
    schema = _schema(app, database, session)
    heading, _ = _heading(database, schema)
    return search_markdown(database, heading, schema["tables"], words)


def schema_markdown(app: App, database: str, session: str = "default") -> str:
    schema = _schema(app, database, session)
    heading, dialect = _heading(database, schema)
    lines = [heading, schema["description"], ""]
    alias_views = aliases(schema["tables"])
    for table, entry in schema["tables"].items():
        lines += table_lines(table, entry, alias_views.get(table))
    lines.append(_closing(dialect))
    text = "\n".join(lines)
    if len(text) <= SCHEMA_BUDGET_CHARS:
        return text
    # Too large to read whole: every table by name (nothing left out), each one's columns a resource of its own.
    tables = schema["tables"]
    lines = [
        heading,
        schema["description"],
        "",
        f"{len(tables):,} tables and views — too many to show with their columns here. Each one's columns, "
        f"comments and definition: the resource db://{database}/schema/{{table}} (its table argument completes); "
        f"to find tables by words in their names, columns and comments: query_database(database='{database}', "
        "search='purchase order vendor').",
        "",
    ]
    lines += [f"- {table} ({size_of(entry)})" for table, entry in tables.items()]
    lines.append(_closing(dialect))
    return "\n".join(lines)


def _closing(dialect: str) -> str:
    if dialect == "DuckDB":
        return "Workspace data is queryable too: FROM 'uploads/<file>', FROM upload_<name>, FROM artifact_<id>."
    return (
        "Workspace files are not visible here; a result cut at max_rows is kept whole as an artifact, which a "
        "DuckDB database (e.g. demo) joins with workspace files: FROM artifact_<id>."
    )


def _read_upload(app: App, name: str) -> str | bytes:
    ref = name if name.startswith("upload_") else f"upload_{name}"
    try:
        resolved = app.workspace.resolve(ref)
    except ToolFailure as failure:
        raise ResourceNotFoundError(failure.message) from None
    if resolved.size > _RESOURCE_TEXT_LIMIT:
        raise ResourceError(f"{ref} is {resolved.size:,} bytes; read it with file_reader instead")
    with resolved.open() as f:
        data = f.read(_RESOURCE_TEXT_LIMIT + 1)
    resolved.close()
    mime = mimetypes.guess_type(resolved.filename)[0] or ""
    if mime.startswith("image/") or b"\x00" in data[:8192]:
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data
