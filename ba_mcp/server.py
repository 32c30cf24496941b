"""build_server(settings) -> the MCP server: tools, resources, completion, logging level, lifespan.

Every tool is registered as a ``PipelineTool``: the SDK lists it with the schema of the tool's
parameter model, and each call goes straight to ``Runner.call`` so validation, levels, artifacts
and errors are ours, in one format.
"""

from __future__ import annotations

import hashlib
import json
import logging
import mimetypes
import warnings
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
from mcp import MCPDeprecationWarning
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.mcpserver.tools.base import Tool as SdkTool
from mcp.server.mcpserver.utilities.func_metadata import func_metadata
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    Completion,
    EmptyResult,
    ErrorData,
    JSONRPCError,
    ResourceTemplateReference,
    SetLevelRequestParams,
    TextContent,
    ToolAnnotations,
)
from pydantic import ConfigDict, ValidationError

from ba_mcp import __version__
from ba_mcp.app import App, default_tools
from ba_mcp.pipeline.errors import ErrorType, ToolFailure, format_error
from ba_mcp.settings import Settings
from ba_mcp.tools.base import Tool
from ba_mcp.workspace import ARTIFACT_ID

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
ba-mcp gives you business-analysis tools over the user's analysis workspace.

Output levels: every tool takes output_level = brief | standard | full.
- brief: one line (shape, names, an artifact id). Use it when you only need to know what exists.
- standard (default): schema, per-column summary and the first rows of a table; the first window
  of a document; JSON cut at a budget.
- full: everything when it fits the inline limit; otherwise the standard view plus an artifact.
When you do not name a level and the session has used most of its token budget, you get brief.

Artifacts: whenever an observation leaves something out, the complete result is stored and the
observation names its id, artifact_<12 hex>. Pass that id instead of copying data around: read it with
file_reader(path="artifact_…", offset=…, nrows=…) or the resource artifact://artifact_…. Ids of the
user's files are upload_<name>; ba://files lists uploads, code files and artifacts.

Errors come as 'Error Type / Error Code / Error Message / Hint': follow the hint.
"""

_LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
_RESOURCE_TEXT_LIMIT = 10 * 1024 * 1024


def session_key(headers: Mapping[str, str] | None) -> str:
    """The client session a request belongs to, within one App.

    stdio and in-process connections each get their own App (the lifespan runs per connection), so
    they need no key; on HTTP the App is shared and the ``mcp-session-id`` header tells sessions apart.
    Stateless HTTP (no session id) shares one key."""
    sid = headers.get("mcp-session-id") if headers else None
    return http_session_key(sid) if sid else "default"


def http_session_key(session_id: str) -> str:
    """The key of an HTTP session: a digest of its id, so the id (which lets a client speak as that
    session) never reaches logs, metrics or the sandbox."""
    return "http-" + hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()[:16]


class PipelineTool(SdkTool):
    """An SDK tool whose calls go through the ba-mcp pipeline instead of the SDK's argument handling."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    spec: Any = None

    @classmethod
    def wrap(cls, tool: Tool) -> PipelineTool:
        async def _unused() -> None:  # the SDK wants a function; run() below replaces its use
            return None

        annotations = ToolAnnotations(
            title=tool.title,
            read_only_hint=tool.policy.read_only,
            destructive_hint=False,
            idempotent_hint=tool.policy.idempotent,
            open_world_hint=tool.policy.open_world,
        )
        return cls(
            fn=_unused,
            name=tool.name,
            title=tool.title,
            description=tool.description,
            parameters=tool.Params.model_json_schema(),
            fn_metadata=func_metadata(_unused, structured_output=False),
            is_async=True,
            context_kwarg=None,
            annotations=annotations,
            spec=tool,
        )

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        app: App = context.request_context.lifespan_context
        key = session_key(context.headers)

        async def notify(level: str, message: str) -> None:
            """A log message to the client, at or above the level it chose with logging/setLevel."""
            if _LOG_LEVELS.index(level) >= _LOG_LEVELS.index(app.session(key).log_level):
                with warnings.catch_warnings():  # deprecated only in the 2026-07-28 era; hosts still use it
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await context.session.send_log_message(level, message, logger="ba-mcp")

        return await app.runner.call(self.spec, arguments, key, progress=context.report_progress, notify=notify)


class _UnknownToolMiddleware:
    """Unknown tool names get the ba-mcp error format instead of the SDK's bare text."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = frozenset(names)

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call" and isinstance(ctx.params, Mapping):
            name = ctx.params.get("name")
            if isinstance(name, str) and name not in self.names:
                failure = ToolFailure(
                    ErrorType.NOT_FOUND,
                    "UNKNOWN_TOOL",
                    f"there is no tool named '{name[:80]}'",
                    "available tools: " + ", ".join(sorted(self.names)),
                )
                return CallToolResult(
                    content=[TextContent(type="text", text=format_error("ba-mcp", failure))],
                    structured_content={"error": {"type": "not_found", "code": "UNKNOWN_TOOL"}},
                    is_error=True,
                )
        return await call_next(ctx)


class BaServer(MCPServer[App]):
    """MCPServer that knows its current App (set by the lifespan) for resources and completion."""

    app: App | None = None

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        """Artifacts are served with their own MIME type (a template has one fixed type)."""
        uri_s = str(uri)
        if uri_s.startswith("artifact://"):
            app = self._app()
            aid = uri_s[len("artifact://") :]
            content, mime = await anyio.to_thread.run_sync(read_artifact_resource, app, aid)
            return [ReadResourceContents(content=content, mime_type=mime)]
        if uri_s == "ba://metrics":  # per session: the SDK gives static resources no request context
            key = session_key(context.headers if context is not None else None)
            return [ReadResourceContents(content=metrics_report(self._app(), key), mime_type="application/json")]
        return await super().read_resource(uri, context)

    def streamable_http_app(self, **kwargs: Any) -> Any:
        """The SDK's HTTP app, plus: when an HTTP session ends (client DELETE, the SDK's idle timeout),
        its Python worker ends too. The SDK has no public hook for this, so the session manager's
        ``_discard_session`` is wrapped (checked against mcp 2.3)."""
        starlette = super().streamable_http_app(**kwargs)
        manager = getattr(self._lowlevel_server, "_session_manager", None)
        original = getattr(manager, "_discard_session", None)
        if manager is None or original is None:
            log.warning("HTTP session ends cannot be observed; idle sessions' workers end after idle_timeout_s")
            return starlette

        async def discard(session_id: str, transport: Any) -> None:
            await original(session_id, transport)
            if self.app is not None:
                await anyio.to_thread.run_sync(self.app.sandboxes.discard, http_session_key(session_id))

        manager._discard_session = discard
        return starlette

    async def run_stdio_async(self) -> None:
        """stdio, plus an answer to malformed lines: the SDK drops them silently, JSON-RPC wants an error."""
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read_stream, write_stream):
            inner_send, inner_read = anyio.create_memory_object_stream[Any](0)

            async def relay() -> None:
                async with inner_send:
                    async for item in read_stream:
                        if isinstance(item, Exception):
                            await write_stream.send(SessionMessage(_protocol_error(item)))
                        else:
                            await inner_send.send(item)

            async with anyio.create_task_group() as tg:
                tg.start_soon(relay)
                await self._lowlevel_server.run(
                    inner_read, write_stream, self._lowlevel_server.create_initialization_options()
                )
                tg.cancel_scope.cancel()

    def _app(self) -> App:
        if self.app is None:
            raise ResourceError("the server is not running")
        return self.app


def _protocol_error(exc: Exception) -> JSONRPCError:
    """-32700 for a line that is not JSON, -32600 for JSON that is not a JSON-RPC message."""
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    if any(e.get("type") == "json_invalid" for e in errors):
        return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=PARSE_ERROR, message="Parse error: not JSON"))
    raw_id = None
    for err in errors:
        data = err.get("input")
        if isinstance(data, dict) and isinstance(data.get("id"), (str, int)):
            raw_id = data["id"]
            break
    return JSONRPCError(
        jsonrpc="2.0",
        id=raw_id,
        error=ErrorData(code=INVALID_REQUEST, message="Invalid Request: not a JSON-RPC message"),
    )


def build_server(settings: Settings, tools: Iterable[Tool] | None = None) -> BaServer:
    """The MCP server. The App is created in its lifespan, once per connection (stdio) or per server (HTTP)."""
    tool_list = list(tools) if tools is not None else None

    @asynccontextmanager
    async def lifespan(server: MCPServer[App]) -> AsyncIterator[App]:
        app = App(settings, tool_list)
        assert isinstance(server, BaServer)
        server.app = app
        async with anyio.create_task_group() as tg:
            tg.start_soon(_background, app)
            try:
                yield app
            finally:
                tg.cancel_scope.cancel()
                server.app = None
                app.close()

    registered = tool_list if tool_list is not None else default_tools()
    server = BaServer(
        name="ba-mcp",
        title="ba-mcp — business-analysis tools",
        version=__version__,
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        tools=[PipelineTool.wrap(t) for t in registered],
        middleware=[_UnknownToolMiddleware(t.name for t in registered)],
        log_level=settings.log_level,
    )
    _register_resources(server)
    _register_completion(server)
    _register_logging(server)
    return server


async def _background(app: App) -> None:
    """The sandbox's spare worker at once (it loads in its own process), warm-up after the handshake had
    its chance, then periodic artifact cleanup and idle-worker reaping off the event loop."""
    await anyio.to_thread.run_sync(app.start_sandbox, abandon_on_cancel=True)
    await anyio.sleep(0.3)
    await anyio.to_thread.run_sync(app.warm_up, abandon_on_cancel=True)
    while True:
        removed = await anyio.to_thread.run_sync(app.cleanup_artifacts, abandon_on_cancel=True)
        if any(removed.values()):
            log.info("artifact cleanup: %s", removed)
        await anyio.to_thread.run_sync(app.sandboxes.reap_idle, app.settings.run_python.idle_timeout_s)
        await anyio.sleep(app.settings.artifacts.cleanup_interval_s)


# -- resources ----------------------------------------------------------------------------------


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
            from ba_mcp.pipeline.encode import encode_csv

            _, frame = app.artifacts.read_table(aid)
            return encode_csv(frame), "text/csv"
        meta, data = app.artifacts.read_bytes(aid)
    except ToolFailure as failure:
        raise ResourceNotFoundError(failure.message) from None
    if meta.kind == "image":
        return data, meta.mime
    return data.decode("utf-8"), meta.mime


def metrics_report(app: App, session: str) -> str:
    """The metrics of one client session only (S-9): no other session's activity or key."""
    report = {
        "session": app.session(session).metrics.report(),
        "artifacts": {"count": len(app.artifacts.list()), "bytes": app.artifacts.total_bytes()},
    }
    return json.dumps(report, indent=1)


def files_listing(app: App) -> str:
    """The unified file list (seed 002): uploads, code files and artifacts, as markdown."""
    lines = ["# Files in the workspace", ""]
    uploads = app.workspace.uploads()
    lines.append("## Uploads (read with file_reader; path = the id)")
    if not uploads:
        lines.append("- none (put files in the workspace's uploads/ folder)")
    for uid, path, st in uploads:
        kind = path.suffix.lstrip(".").lower() or "file"
        lines.append(f"- [{uid}] {path.name} ({kind}) | {_size(st.st_size)}")
    code_dir = app.workspace.dir("code")
    codes = sorted(code_dir.glob("code_*.meta.json"))
    lines += ["", "## Code files"]
    if not codes:
        lines.append("- none yet")
    for meta_path in codes:
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        lines.append(
            f"- [{meta.get('id')}] ({meta.get('language', 'python')}) {meta.get('description', '')} | "
            f"{meta.get('line_count', '?')} lines"
        )
    artifacts = app.artifacts.list()
    lines += ["", "## Artifacts (results kept by the server)"]
    if not artifacts:
        lines.append("- none yet")
    for a in artifacts:
        desc = a.summary or a.title
        lines.append(f"- [{a.id}] {a.kind} from {a.source_tool}: {desc[:160]} | {_size(a.size)}")
    return "\n".join(lines)


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def _register_resources(server: BaServer) -> None:
    @server.resource(
        "ba://files",
        name="files",
        title="Workspace files",
        mime_type="text/markdown",
        description="Uploads, code files and artifacts with their ids, kinds and sizes.",
    )
    async def files() -> str:
        return await anyio.to_thread.run_sync(files_listing, server._app())

    @server.resource(
        "ba://metrics",
        name="metrics",
        title="Tool metrics",
        mime_type="application/json",
        description="This session's per-tool calls, latency, tokens, success, error and cache-hit rates.",
    )
    async def metrics() -> str:  # served by BaServer.read_resource, which knows the session
        return metrics_report(server._app(), "default")

    @server.resource(
        "artifact://{id}",
        name="artifact",
        title="Artifact",
        description="A stored result by id: tables as CSV, text and JSON as themselves, images as PNG.",
    )
    async def artifact(id: str, ctx: Context[App, Any]) -> str | bytes:
        app: App = ctx.request_context.lifespan_context
        content, _ = await anyio.to_thread.run_sync(read_artifact_resource, app, id)
        return content

    @server.resource(
        "db://{database}/schema",
        name="database-schema",
        title="Database schema",
        mime_type="text/markdown",
        description="Tables and views of a query_database connection, with columns, types and row counts.",
    )
    async def db_schema(database: str, ctx: Context[App, Any]) -> str:
        app: App = ctx.request_context.lifespan_context
        return await anyio.to_thread.run_sync(schema_markdown, app, database)

    @server.resource(
        "upload://{name}",
        name="upload",
        title="Uploaded file",
        description="The raw content of an upload by id (upload_<name>) or file name; at most 10 MB.",
    )
    async def upload(name: str, ctx: Context[App, Any]) -> str | bytes:
        app: App = ctx.request_context.lifespan_context
        return await anyio.to_thread.run_sync(_read_upload, app, name)


def schema_markdown(app: App, database: str) -> str:
    try:
        schema = app.databases.schema(database)
    except ToolFailure as failure:
        raise ResourceNotFoundError(failure.message) from None
    lines = [f"# Database {database}", schema["description"], ""]
    for table, entry in schema["tables"].items():
        lines.append(f"## {table} ({entry['kind']}, {entry['rows']:,} rows)")
        lines += [f"- {c['name']}: {c['type']}{'' if c['nullable'] else ' not null'}" for c in entry["columns"]]
        lines.append("")
    lines.append("Workspace data is queryable too: FROM 'uploads/<file>', FROM upload_<name>, FROM artifact_<id>.")
    return "\n".join(lines)


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


def _register_completion(server: BaServer) -> None:
    @server.completion()
    async def complete(ref: Any, argument: Any, context: Any) -> Completion | None:
        if not isinstance(ref, ResourceTemplateReference) or server.app is None:
            return None
        app = server.app
        prefix = argument.value or ""
        if ref.uri == "artifact://{id}" and argument.name == "id":
            values = [m.id for m in reversed(app.artifacts.list())]
        elif ref.uri == "upload://{name}" and argument.name == "name":
            values = [uid for uid, _, _ in app.workspace.uploads()]
        elif ref.uri == "db://{database}/schema" and argument.name == "database":
            values = app.databases.names
        else:
            return None
        matches = [v for v in values if v.startswith(prefix)]
        return Completion(values=matches[:100], total=len(matches), has_more=len(matches) > 100)


def _register_logging(server: BaServer) -> None:
    async def set_level(ctx: ServerRequestContext[App, Any], params: SetLevelRequestParams) -> EmptyResult:
        app = ctx.lifespan_context
        headers = getattr(ctx.request, "headers", None) if ctx.request is not None else None
        app.session(session_key(headers)).log_level = params.level
        return EmptyResult()

    # The SDK has no public hook for logging/setLevel on MCPServer; the low-level server's is the documented way.
    server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
