"""build_server(app) -> the MCP server: the SDK adapter only.

The App is built first (``app.App``); this module adapts it to the SDK: tools/list and tools/call through the SDK's
low-level handlers (``ToolHandlers``: the listing of ``listing`` within its budget, the views' parts, unknown names;
each call straight to ``Runner.call`` so validation, levels, artifacts and errors are ours, in one format), who is
calling derived once per request (``_SessionMiddleware``, which otherwise only observes: the rate limit), the
resources and completions of ``resources.register``, the skills' resources, prompts and extension
(``skills.mcp``), ``logging/setLevel``, the lifespan's background
work, and — in ``SdkInternals``, the one place that touches them — the SDK's private attributes.
"""

from __future__ import annotations

import base64
import collections
import logging
import sys
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, cast

import anyio
import anyio.to_thread
from mcp import MCPDeprecationWarning
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolRequestParams,
    CallToolResult,
    EmptyResult,
    ErrorData,
    ImageContent,
    JSONRPCError,
    ListResourcesResult,
    ListToolsResult,
    LoggingLevel,
    PaginatedRequestParams,
    ResourceLink,
    SetLevelRequestParams,
    TextContent,
)
from mcp.types import Tool as McpTool
from pydantic import ValidationError

from ba_mcp import callers, listing, registry, resources, views
from ba_mcp.app import App
from ba_mcp.auth import principal_key
from ba_mcp.errors import Code, ErrorType, ToolFailure, format_error
from ba_mcp.pipeline.audit import AuditLog, RefusedRequests
from ba_mcp.pipeline.runner import CallOutcome
from ba_mcp.pipeline.sessions import http_session_key, session_key
from ba_mcp.skills import mcp as skills_mcp
from ba_mcp.skills.mcp import SkillsExtension
from ba_mcp.stdio import loop_streams
from ba_mcp.tools.use_skill import UseSkill
from ba_mcp.version import __version__

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
ba-mcp gives you business-analysis tools over the user's analysis workspace.

Output levels — every tool takes output_level:
- brief: one line (shape, names, an artifact id), for knowing what exists.
- standard (default): tables with schema, a summary where it helps and the first rows (a small table
  whole); documents as a first window with an outline; JSON cut at a budget.
- full: everything when it fits the inline limit; otherwise standard plus an artifact.

Artifacts: whenever an observation leaves something out, the complete result is stored and named,
artifact_<12 hex>. Pass the id instead of copying data: file_reader(path="artifact_…"), SELECT … FROM
artifact_…, load_artifact("artifact_…") in run_python, or the resource artifact://artifact_…. Uploads are
upload_<name>; ba://files lists uploads, code files and artifacts.

Errors come as 'Error Type / Error Code / Error Message / Hint': follow the hint.
"""

SKILLS_INSTRUCTIONS = """
Skills are playbooks for analysis tasks (steps, SQL, Python, what to deliver). Before a task that matches
one, load it: use_skill(name) (the list is in that tool's description), or read the resource
skill://<name>/SKILL.md; then follow it.
"""


METRICS_INSTRUCTIONS = """
Metrics: the team's agreed definitions (revenue, margin, orders …) are listed in the resource metrics://catalog.
For a metric defined there, use query_metrics (or metric() in run_python) rather than writing its SQL, and say
how it is defined when you report it.
"""


def instructions(app: App) -> str:
    """The server's instructions: the pipeline's rules, then skills, metrics and read roots when there are any."""
    text = INSTRUCTIONS
    if len(app.skills):
        text += SKILLS_INSTRUCTIONS
    if "query_metrics" in app.tools:
        text += METRICS_INSTRUCTIONS
    if app.workspace.read_roots:
        names = ", ".join(f"{n}/<path>" for n in app.workspace.read_roots)
        first = next(iter(app.workspace.read_roots))
        text += (
            f'\nRead-only folders beyond the workspace: {names}. E.g. file_reader(path="{first}/data/sales.csv"), '
            f"FROM '{first}/data/sales.csv' in query_database, load_file(\"{first}/data/sales.csv\") in run_python.\n"
        )
    return text


_LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


class ToolHandlers:
    """``tools/list`` and ``tools/call``, served by the SDK's low-level handlers for them (``Server(on_list_tools=…,
    on_call_tool=…)``, registered in ``build_server``) — everything the wire says of the tools in one place: each
    tool's definition within the budget (``listing``: built-in, an embedder's or a plug-in's, read from the App's
    tools), the views' ``_meta.ui`` and ``view_rows`` for a host that renders views (``views``), an unknown name in
    the ba-mcp error format (and in the audit trail), and each call handed to ``Runner.call`` with the principal
    the request is served for (``callers.principal()``, derived once per request by ``_SessionMiddleware``)."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.tools = dict(app.tools)
        # a plug-in's tools (as the registry has them now, when the App's tools were just built): they pay first
        self.plugin_tools = {n for n in self.tools if (info := registry.tool_info(n)) is not None and info.plugin}
        self.structured = app.settings.observation.structured_content
        self.views = views.Views(app, list(self.tools.values()))
        self._listing: list[McpTool] | None = None

    def listing(self) -> list[McpTool]:
        """The model's tools/list, fitted to ``tools_list_budget_tokens`` once (the tools are fixed when built)."""
        if self._listing is None:
            use_skill = self.tools.get("use_skill")
            count = self.app.tokens.raw_tokens
            defined = listing.definitions(list(self.tools.values()), self.structured)
            fitted = listing.fit(
                [listing.capped(d, count) if d["name"] in self.plugin_tools else d for d in defined],
                self.app.settings.tools_list_budget_tokens,
                self.app.tokens.raw_tokens,
                use_skill if isinstance(use_skill, UseSkill) else None,
            )
            self._listing = [McpTool.model_validate(d) for d in fitted]
        return self._listing

    async def list_tools(self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None) -> Any:
        tools = self._listing if self._listing is not None else await anyio.to_thread.run_sync(self.listing)
        if self.views and views.supports(ctx):  # app-only view_rows: outside the model's listing and its budget
            tools = self.views.tools(tools)
        return ListToolsResult(tools=tools)

    async def call_tool(self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> Any:
        arguments = dict(params.arguments or {})
        if params.name == views.ROWS_TOOL and self.views and views.supports(ctx):
            return await self.views.rows(arguments)
        tool = self.tools.get(params.name)
        who = callers.principal()
        if tool is None:
            return self.unknown(params.name, who)
        log_level = self.app.sessions(who.key).log_level

        async def notify(level: str, message: str) -> None:
            """A log message to the client, at or above the level it chose with logging/setLevel."""
            if _LOG_LEVELS.index(level) >= _LOG_LEVELS.index(log_level):
                with warnings.catch_warnings():  # deprecated only in the 2026-07-28 era; hosts still use it
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await ctx.session.send_log_message(cast("LoggingLevel", level), message, logger="ba-mcp")

        progress = ctx.session.report_progress
        outcome = await self.app.runner.call(tool, arguments, who, progress=progress, notify=notify)
        return call_result(outcome, self.structured, views.supports(ctx))

    def unknown(self, name: str, who: callers.Principal) -> CallToolResult:
        """A call of a tool that does not exist: the ba-mcp error format, and a refused request in the audit trail."""
        said = f"there is no tool named {name[:80]!r}"
        self.app.audit.refused(Code.UNKNOWN_TOOL, said, who=who, method="tools/call", tool=name[:80])
        failure = ToolFailure(
            ErrorType.NOT_FOUND,
            Code.UNKNOWN_TOOL,
            f"there is no tool named '{name[:80]}'",
            "available tools: " + ", ".join(sorted(self.tools)),
        )
        return error_result("ba-mcp", failure, self.structured)


def public_url_security(audience: str, host: str) -> Any:
    """Host and Origin as the public URL names them (DNS rebinding: a page elsewhere cannot reach the server through a
    name of its own), and the loopback names too when the server listens there (behind a reverse proxy)."""
    import urllib.parse

    from mcp.server.transport_security import TransportSecuritySettings

    public = urllib.parse.urlsplit(audience)
    hosts, origins = [public.netloc], [f"{public.scheme}://{public.netloc}"]
    if host in ("127.0.0.1", "localhost", "::1"):
        hosts += ["127.0.0.1:*", "localhost:*", "[::1]:*"]
        origins += ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def request_principal(request: Any) -> callers.Principal:
    """Who a request is served for (S-19, S-20), derived once per request (by ``_SessionMiddleware``): with
    ``http.auth``, the principal of the access token the SDK verified (``get_access_token()``: its subject under its
    issuer — a user's every session shares their artifacts, analyses, code, history and workers); else the local
    operator, under the request's HTTP session (or stdio's one session)."""
    from mcp.server.auth.middleware.auth_context import get_access_token

    token = get_access_token()
    if token is not None and token.subject:
        claims = token.claims or {}
        key = principal_key(str(claims.get("iss", "")), str(token.subject))
        return callers.from_claims(key, claims, str(token.subject))
    return callers.operator(session_key(getattr(request, "headers", None) if request is not None else None))


class _SessionMiddleware:
    """Who is calling, derived once per request (``request_principal``) and served for (``ba_mcp.callers``: the
    stores answer each with its own artifacts and code, whatever handler reads them — tools, resources,
    completions; the tools' handler hands it to the runner as data). Otherwise it only observes: over HTTP each
    principal may send ``http.requests_per_minute`` requests a minute; beyond, a request is refused until the
    minute has room (and the refusal is in the audit trail). It rewrites no request and answers none."""

    def __init__(self, per_minute: int, audit: AuditLog) -> None:
        self.per_minute = per_minute
        self.audit = audit
        self._recent: dict[str, collections.deque[float]] = {}

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        who = request_principal(ctx.request)
        key = who.key
        if key != "default":  # HTTP: a session's or a user's requests a minute
            now = time.monotonic()
            recent = self._recent.setdefault(key, collections.deque())
            while recent and now - recent[0] > 60:
                recent.popleft()
            if len(recent) >= self.per_minute:
                wait = 60 - (now - recent[0])
                tool = (ctx.params or {}).get("name") if ctx.method == "tools/call" else None
                self.audit.refused(
                    "rate_limited",
                    f"over http.requests_per_minute ({self.per_minute})",
                    who=who,
                    method=ctx.method,
                    tool=tool if isinstance(tool, str) else None,
                )
                raise MCPError(
                    code=-32000,
                    message=f"rate limit: {self.per_minute} requests a minute (http.requests_per_minute); "
                    f"try again in {wait:.0f} s",
                )
            recent.append(now)
            if len(self._recent) > 10_000:  # keys of sessions long gone
                for stale in [k for k, q in self._recent.items() if not q or now - q[-1] > 60]:
                    del self._recent[stale]
        with callers.acting_as(key, who):
            return await call_next(ctx)


class SdkInternals:
    """The one place that uses private parts of the MCP SDK (mcp 2.3), each because no public hook
    exists: the low-level server MCPServer builds (its public ``add_request_handler`` for tools/list, tools/call,
    resources/list and ``logging/setLevel``; serving stdio), the stdio transport's claim of
    fd 0 and 1 (for the streams served on the event loop, ``ba_mcp.stdio``) and the HTTP session
    manager's ``_discard_session`` (to end a session's Python worker with the session).
    ``tests/test_sdk_internals.py`` fails loudly when the SDK changes them."""

    @staticmethod
    def lowlevel(server: MCPServer[Any]) -> Any:
        return server._lowlevel_server

    @staticmethod
    @contextmanager
    def claimed_stdio() -> Iterator[tuple[Any, Any]]:
        """fd 0 and 1 claimed as the SDK's ``stdio_server`` claims them — the wire moved to private duplicates, fd 0
        then reading /dev/null and fd 1 writing to stderr, so what a library prints misses the wire — as binary
        streams of the wire; both restored at the end."""
        from mcp.server import stdio

        stdin, release_in = stdio._claim_fd(0, sys.stdin, "rb", stdio._open_stdin_diversion)
        try:
            stdout, release_out = stdio._claim_fd(1, sys.stdout, "wb", stdio._open_stdout_diversion)
        except BaseException:
            if release_in is not None:
                release_in()
            raise
        try:
            yield stdin, stdout
        finally:
            if release_out is not None:
                release_out()
            if release_in is not None:
                release_in()

    @staticmethod
    def on_http_session_end(server: MCPServer[Any], callback: Any) -> bool:
        """Call ``await callback(session_id)`` after the SDK discards an HTTP session; False when the
        SDK no longer has the hook."""
        manager = getattr(server._lowlevel_server, "_session_manager", None)
        original = getattr(manager, "_discard_session", None)
        if manager is None or original is None:
            return False

        async def discard(session_id: str, transport: Any) -> None:
            await original(session_id, transport)
            await callback(session_id)

        manager._discard_session = discard
        return True


class BaServer(MCPServer[App]):
    """MCPServer that knows its App (for resources whose reading needs the request's session)."""

    initialize_answered: anyio.Event | None = None  # stdio: set by the first message after ``initialize``

    def __init__(self, app: App, **settings: Any) -> None:
        super().__init__(**settings)
        self.app = app

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        shown = views.page(str(uri)) if context is not None and views.supports(context) else None
        if shown is not None:  # a view, to a host that renders views
            return [shown]
        special = await resources.read_special(self.app, str(uri), callers.current())
        if special is not None:
            return special
        return await super().read_resource(uri, context)

    async def list_resources_for(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> Any:
        """resources/list: the server's resources, and the views to a host that renders them."""
        listed = await self.list_resources()
        return ListResourcesResult(resources=[*listed, *(views.resources() if views.supports(ctx) else [])])

    def streamable_http_app(self, **kwargs: Any) -> Any:
        """The SDK's HTTP app, plus: when an HTTP session ends (client DELETE, or no request for
        ``sessions.http_idle_timeout_s``), its Python and engine workers end and what the server kept for it
        (history, usage) is forgotten (S-16)."""
        kwargs["session_idle_timeout"] = self.app.settings.sessions.http_idle_timeout_s
        auth = self.app.settings.http.auth
        if auth is not None and kwargs.get("transport_security") is None:
            kwargs["transport_security"] = public_url_security(auth.audience, kwargs.get("host", "127.0.0.1"))
        starlette = super().streamable_http_app(**kwargs)
        if auth is not None:  # each request the bearer check refuses is in the audit trail, with its reason (S-20)
            starlette.add_middleware(RefusedRequests, audit=self.app.audit)

        def end(key: str) -> None:
            for session in (key, f"{key}~analysis"):  # run_analysis works in a session of its own
                self.app.sandboxes.discard(session)
                self.app.duck_workers.end_session(session)
            self.app.sessions.forget(key)

        async def ended(session_id: str) -> None:
            await anyio.to_thread.run_sync(end, http_session_key(session_id))

        if not SdkInternals.on_http_session_end(self, ended):
            log.warning("HTTP session ends cannot be observed; idle sessions' workers end after idle_timeout_s")
        return starlette

    async def run_stdio_async(self) -> None:
        """stdio, plus an answer to malformed lines (the SDK drops them silently, JSON-RPC wants an error), read and
        written on the event loop when stdin and stdout are pipes or sockets (``ba_mcp.stdio``: no thread hop a
        message), else through the SDK's threads."""
        from mcp.server.stdio import stdio_server

        runner = self.app.runner
        with SdkInternals.claimed_stdio() as (stdin, stdout):
            streams = loop_streams(stdin, stdout, after_write=runner.settle)
            if streams is not None:  # streams given: the SDK leaves fd 0 and 1 to this claim
                with runner.deferred():  # a call's bookkeeping waits until its answer is written
                    await self._serve_stdio(stdio_server(*cast("Any", streams)))
                return
        await self._serve_stdio(stdio_server())

    async def _serve_stdio(self, transport: Any) -> None:
        async with transport as (read_stream, write_stream):
            answered = self.initialize_answered = anyio.Event()
            reading = _AnsweringMalformed(read_stream, write_stream, answered)
            lowlevel = SdkInternals.lowlevel(self)
            await lowlevel.run(reading, write_stream, lowlevel.create_initialization_options())


class _AnsweringMalformed:
    """The stdio transport's read stream as the server reads it, with an answer to each line that is not a JSON-RPC
    message (the SDK's reader passes it on as an exception, which the server would drop) — read in the server's own
    reading task: no relay task, no hop through another stream for every message."""

    def __init__(self, inner: Any, write_stream: Any, answered: anyio.Event) -> None:
        self.inner = inner
        self.write_stream = write_stream
        self.answered = answered

    @property
    def last_context(self) -> Any:  # the sender's context the SDK's stream keeps for each message
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self.inner.receive()
            if not self.answered.is_set() and not _is_initialize(item):
                self.answered.set()  # a client sends the next message once it has its answer
            if not isinstance(item, Exception):
                return item
            await self.write_stream.send(SessionMessage(_protocol_error(item)))

    def __aiter__(self) -> _AnsweringMalformed:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self.inner.close()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> _AnsweringMalformed:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _is_initialize(item: Any) -> bool:
    """Whether a read item (a SessionMessage, or the exception of a line that was none) is ``initialize``."""
    return getattr(getattr(item, "message", None), "method", None) == "initialize"


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


def _auth(app: App) -> dict[str, Any]:
    """With ``http.auth``: the SDK's resource-server pieces (401 and 403 with the protected-resource metadata, RFC
    9728; a session id held only by the principal that opened it) and our token verifier (``ba_mcp.auth``)."""
    conf = app.settings.http.auth
    if conf is None:
        return {}
    from mcp.server.auth.settings import AuthSettings

    from ba_mcp.auth import TokenVerifier

    settings = AuthSettings(
        issuer_url=conf.issuer,  # type: ignore[arg-type]
        resource_server_url=conf.audience,  # type: ignore[arg-type]
        required_scopes=conf.required_scopes or None,
        validate_token_resource=False,  # the verifier checks aud against the audience itself
    )
    return {"auth": settings, "token_verifier": TokenVerifier(conf)}


def build_server(app: App) -> BaServer:
    """The MCP server of ``app``. Its lifespan runs the background work (the spare Python worker,
    warm-up, periodic clean-up) and closes the App when it ends: a server serves one lifespan."""

    @asynccontextmanager
    async def lifespan(server: MCPServer[App]) -> AsyncIterator[App]:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_background, app, server)
                tg.start_soon(_renew_engines, app)
                if app.settings.telemetry.lag_monitor:
                    tg.start_soon(_watch_event_loop, app)
                try:
                    yield app
                finally:
                    tg.cancel_scope.cancel()
        finally:
            # Outside the cancelled task group, and shielded: the workers must end with the server.
            with anyio.CancelScope(shield=True):
                await app.aclose()

    server = BaServer(
        app,
        name="ba-mcp",
        title="ba-mcp — business-analysis tools",
        version=__version__,
        instructions=instructions(app),
        lifespan=lifespan,
        middleware=[_SessionMiddleware(app.settings.http.requests_per_minute, app.audit)],
        log_level=app.settings.log_level,
        extensions=[*([SkillsExtension(app.skills)] if len(app.skills) else []), views.ViewsExtension()],
        **_auth(app),
    )
    resources.register(server, app)
    skills_mcp.register(server, app.skills, "use_skill" in app.tools)
    _register_handlers(server, ToolHandlers(app))
    return server


async def _background(app: App, server: MCPServer[Any]) -> None:
    """The spare workers once the client has its answer to ``initialize`` (over stdio; at once over HTTP):
    starting them is work in a thread that holds the GIL in turns with the handshake (P-1). Then warm-up after
    the handshake had its chance, periodic artifact cleanup and idle-worker reaping off the event loop."""
    answered = getattr(server, "initialize_answered", None)
    if answered is not None:
        with anyio.move_on_after(0.5):  # a client that says nothing more after initialize
            await answered.wait()
    await anyio.to_thread.run_sync(app.start_sandbox, abandon_on_cancel=True)
    await anyio.sleep(0.3)
    await anyio.to_thread.run_sync(app.warm_up, abandon_on_cancel=True)
    while True:
        removed = await anyio.to_thread.run_sync(app.cleanup_artifacts, abandon_on_cancel=True)
        if any(removed.values()):
            log.info("artifact cleanup: %s", removed)
        await anyio.to_thread.run_sync(app.sandboxes.reap_idle, app.settings.sandbox.idle_timeout_s)
        await anyio.to_thread.run_sync(app.duck_workers.reap_idle, app.settings.engine.idle_timeout_s)
        await anyio.to_thread.run_sync(app.connections.reap_idle, app.settings.engine.idle_timeout_s)
        await anyio.sleep(app.settings.artifacts.cleanup_interval_s)


async def _renew_engines(app: App) -> None:
    """Every few seconds, the idle engine workers that grew past their start with nothing of their session's in
    them are replaced (``WorkerPool.renew_grown``)."""
    conf = app.settings.engine
    while True:
        await anyio.sleep(min(5.0, conf.renew_idle_s))
        await anyio.to_thread.run_sync(app.duck_workers.renew_grown, conf.renew_idle_s, conf.renew_growth_mb)


async def _watch_event_loop(app: App) -> None:
    """The lag monitor (P-7): sleep 10 ms, record how late the wake-up came. A late wake-up means
    something held the event loop (or the GIL) that long."""
    lag = app.loop_lag
    while True:
        asked = time.perf_counter()
        await anyio.sleep(0.01)
        late_ms = (time.perf_counter() - asked - 0.01) * 1000
        lag["samples"] += 1
        lag["max_ms"] = max(lag["max_ms"], late_ms)
        if late_ms > 50:
            lag["over_50ms"] += 1


def _register_handlers(server: BaServer, tools: ToolHandlers) -> None:
    """The requests the server answers itself, as the SDK's low-level handlers (``Server.add_request_handler``: the
    documented way for an exact schema, ``_meta`` and ``isError``; MCPServer has no public hook for them): tools/list
    and tools/call (``ToolHandlers``), resources/list (the views for a host that renders them) and logging/setLevel.
    No extension intercepts tools/call (``Extension.intercept_tool_call``), so no interceptor is replaced."""

    async def set_level(ctx: ServerRequestContext[App, Any], params: SetLevelRequestParams) -> EmptyResult:
        app = ctx.lifespan_context
        app.sessions(callers.current()).log_level = params.level
        return EmptyResult()

    lowlevel = SdkInternals.lowlevel(server)
    lowlevel.add_request_handler("tools/list", PaginatedRequestParams, tools.list_tools)
    lowlevel.add_request_handler("tools/call", CallToolRequestParams, tools.call_tool)
    lowlevel.add_request_handler("resources/list", PaginatedRequestParams, server.list_resources_for)
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)


# -- MCP results ------------------------------------------------------------------------------------

META_KEY = "dev.ba-mcp/observation"  # the result's _meta key holding machine-readable metadata


def call_result(outcome: CallOutcome, structured: bool = False, view: bool = False) -> CallToolResult:
    """The MCP result of a call. The observation is the text, which every host gives its model (Claude
    Desktop: the text only; Claude Code: the text unless structuredContent exists); images follow it, and a
    resource link per artifact the call created. Metadata goes under ``_meta``, and into structuredContent
    — beside the full text — only when the operator asks for it (``structured``). For a client that renders
    views (``view``: MCP Apps), the tables shown whole go under ``_meta`` too, for the view, never the text."""
    obs = outcome.observation
    if outcome.failure is not None or obs is None:
        failure = outcome.failure or ToolFailure(ErrorType.INTERNAL_ERROR, Code.INTERNAL, "no result")
        return error_result(outcome.tool, failure, structured, outcome.record.provenance)
    content: list[Any] = [TextContent(type="text", text=obs.text)]
    content += [
        ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=mime) for data, mime in obs.images
    ]
    content += [
        ResourceLink(
            type="resource_link",
            name=a.id,
            title=a.title,
            uri=a.uri,
            mime_type=a.mime,
            size=a.size,
            description=a.summary or f"{a.kind} artifact from {a.source_tool}",
        )
        for a in obs.artifacts
    ]
    meta: dict[str, Any] = {META_KEY: {**obs.structured, "provenance": outcome.record.provenance}}
    if view and obs.whole_tables:
        meta[views.VIEW_META] = views.view_tables(obs.whole_tables)
    return CallToolResult(
        content=content,
        structured_content={"text": obs.text, **obs.structured} if structured else None,
        meta=meta,
        is_error=False,
    )


def error_result(
    tool: str, failure: ToolFailure, structured: bool = False, provenance: dict[str, Any] | None = None
) -> CallToolResult:
    """The MCP result of a failed call: the error text — everything a model needs is in it, since some
    hosts drop ``structuredContent`` of errors (anthropics/claude-code 86032) — and the same facts as data
    under ``_meta`` (and in ``structuredContent`` beside the text when ``structured``)."""
    text = format_error(tool, failure)
    facts: dict[str, Any] = {
        "error": {
            "type": failure.type.value,
            "code": failure.code,
            "message": failure.message,
            "hint": failure.hint,
            "retryable": failure.type.retryable,
        }
    }
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content={"text": text, **facts} if structured else None,
        meta={META_KEY: {**facts, **({"provenance": provenance} if provenance else {})}},
        is_error=True,
    )
