"""One tool call through the pipeline (docs/architecture.md):

validate → resolve level → cache → execute (timeout, retries; off the event loop) → observe → usage,
telemetry and a provenance record. The runner sequences; it does not render MCP (``server.py`` turns a
``CallOutcome`` into a CallToolResult) and is handed its services, not the App. Every failure becomes a
``ToolFailure``; nothing a tool raises escapes, so the server never stops because of a call.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import math
import random
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
import anyio.from_thread
import anyio.to_thread
from opentelemetry import trace
from pydantic import ValidationError

from ba_mcp import callers
from ba_mcp.errors import Code, ErrorType, ToolFailure, classify, format_error, invalid, timed_out
from ba_mcp.pipeline.audit import AuditLog
from ba_mcp.pipeline.cache import RawCache, cache_key
from ba_mcp.pipeline.levels import LevelChoice, OutputLevel, resolve_level
from ba_mcp.pipeline.observe import Observation, Observer
from ba_mcp.pipeline.sessions import Sessions
from ba_mcp.pipeline.tokens import TokenCounter
from ba_mcp.pipeline.usage import CallRecord, TelemetryLog
from ba_mcp.results import approx_size
from ba_mcp.settings import Settings
from ba_mcp.tool import CacheMode, Tool, ToolContext, execute_bounded

if TYPE_CHECKING:
    from ba_mcp.results import RawResult

log = logging.getLogger(__name__)

_NOT_CACHE_ARGS = ("output_level", "timeout")
# Below Claude Code's inline limits (MAX_MCP_OUTPUT_TOKENS 25,000; results over 50,000 characters go to a
# file), with room for the host's own framing.
HOST_MAX_TOKENS = 24_000
HOST_MAX_CHARS = 48_000

Notify = Callable[[str, str], Awaitable[None]]
Observe = Callable[["RawResult"], Observation]
Lookup = Callable[[], "tuple[str | None, RawResult | None]"]
_T = TypeVar("_T")


@dataclass
class CallOutcome:
    """What a call came to: its observation, or the failure the model reads, and its record (usage,
    telemetry and provenance: the tool, its arguments, the artifacts it created)."""

    tool: str
    observation: Observation | None
    failure: ToolFailure | None
    record: CallRecord


@dataclass
class _Done:
    key: str | None
    raw: RawResult
    observation: Observation
    cache_hit: bool


@dataclass
class _Outcome:
    observation: Observation
    retries: int
    cache_hit: bool


class Runner:
    """Runs calls with the services it is given: settings, the observer, the raw-result cache, telemetry,
    the token counter, the sessions and the audit trail (a record of every call, S-20)."""

    def __init__(
        self,
        settings: Settings,
        observer: Observer,
        cache: RawCache,
        telemetry: TelemetryLog,
        tokens: TokenCounter,
        sessions: Sessions,
        audit: AuditLog,
    ) -> None:
        self.settings = settings
        self.observer = observer
        self.cache = cache
        self._warm_lock = threading.Lock()
        self._began = False  # a call has begun: warm-up imports no more (``warm_import``)
        self.telemetry = telemetry
        self.tokens = tokens
        self.sessions = sessions
        self.audit = audit
        # A call's bookkeeping (its input tokens, usage, telemetry line) when the transport settles it once the
        # answer is written (``deferring``: stdio on the event loop, ``settle``), else at the call's end.
        self.deferring = False
        self.unsettled: list[Callable[[], None]] = []

    async def call(
        self,
        tool: Tool,
        arguments: dict[str, Any],
        who: callers.Principal,
        progress: Any = None,
        notify: Notify | None = None,
    ) -> CallOutcome:
        """Run one call for ``who`` (the principal the request is served for: the server derives it once per request
        and hands it here); always returns a CallOutcome (with ``failure`` set when it failed).

        ``progress(done, total, message)`` and ``notify(level, message)`` are the client's channels
        (progress notifications and log messages); both optional. The call acts for ``who.key``
        (``ba_mcp.callers``): the stores show it its own artifacts and code, and what it stores is its own."""
        self.settle()  # what earlier calls left unsettled (an answer never written) goes first, in order
        with callers.acting_as(who.key, who):
            return await self._call(tool, arguments, who, progress, notify)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """While it is entered, a call's bookkeeping waits until the transport settles it (``settle``, once the
        answer is written: stdio on the event loop); at its end what waits is settled."""
        self.deferring = True
        try:
            yield
        finally:
            self.deferring = False
            self.settle()

    def settle(self) -> None:
        """The bookkeeping (tokens, usage, telemetry) of the calls answered since the last time, on the event loop
        like the calls: once an answer is written over stdio, before the next call, and when the App closes."""
        while self.unsettled:
            pending, self.unsettled = self.unsettled, []
            for bookkeeping in pending:
                try:
                    bookkeeping()
                except Exception:
                    log.exception("a call's bookkeeping failed")

    def warm_import(self, modules: list[str]) -> None:
        """Import ``modules`` ahead of the first call (a background thread) — unless a call has begun: two threads
        importing one package with circular imports (pyarrow) can see it half-initialised, so the warm-up and the
        first call never import at the same time (``_first_call``). A call that begins meanwhile waits for the one
        module being imported, never for the rest of the list: warm-up yields to calls."""
        import importlib

        for module in modules:
            with self._warm_lock:
                if self._began:
                    return
                importlib.import_module(module)

    def _first_call(self) -> None:
        with self._warm_lock:  # waits for a warm-up import in progress
            self._began = True

    async def _call(
        self, tool: Tool, arguments: dict[str, Any], who: callers.Principal, progress: Any, notify: Notify | None
    ) -> CallOutcome:
        if not self._began:
            await anyio.to_thread.run_sync(self._first_call)
        started = time.perf_counter()
        session = who.key
        record = _new_record(tool, arguments, session)
        state = self.sessions(session)
        observation: Observation | None = None
        failure: ToolFailure | None = None
        cancelled: BaseException | None = None
        params: Any = None
        ctx: ToolContext | None = None
        try:
            params = self._validate(tool, arguments)
            settings = self.settings
            recent = state.recent.within(settings.budget_window_s)
            choice = resolve_level(
                params.output_level,
                tool.settings.default_level,
                settings.default_output_level,
                recent,
                settings.session_token_budget,
                settings.budget_downgrade_ratio,
            )
            timeout = self.timeout_for(tool, getattr(params, "timeout", None))
            ctx = ToolContext(session=session, timeout=timeout, progress=self._progress_bridge(progress))
            observe = self._observer_for(tool, choice, recent)
            outcome = await self._execute_cached(tool, params, ctx, notify, observe)
            record.cache_hit, record.retries = outcome.cache_hit, outcome.retries
            observation = outcome.observation
            level = str(observation.structured.get("level") or choice.level.value)
            record.output_level = level
            record.level_downgraded = choice.downgraded and level == OutputLevel.BRIEF.value
            if record.level_downgraded:
                await _tell(notify, "info", f"{tool.name}: output level downgraded to brief (token budget)")
            if outcome.retries:
                observation.add_note(f"succeeded after {outcome.retries} retr{'y' if outcome.retries == 1 else 'ies'}")
            record.success = True
            record.output_tokens = observation.tokens
            state.recent.add(observation.tokens)
            record.artifacts = [a.id for a in observation.artifacts]
        except Exception as exc:
            failure = _failure_of(tool, exc)
        except BaseException as exc:  # cancelled (the client's notifications/cancelled, its connection gone): the
            # call ran as far as it did and is kept like any other (S-20: no client keeps a call out of the trail)
            cancelled = exc
            failure = ToolFailure(ErrorType.TRANSIENT_ERROR, "CANCELLED", "the call was cancelled before it answered")
        if failure is not None:
            if failure.type is ErrorType.TIMEOUT:
                failure.hint = timeout_hint(tool, getattr(failure, "timeout", None), failure.hint, failure.code)
                if ctx is not None and ctx.start_s >= 0.05 and failure.code != "WORKER_START_TIMEOUT":
                    failure.message += f" (plus {ctx.start_s:.1f} s its worker took to start, not counted)"
            record.success = False
            record.error_type, record.error_code = failure.type.value, failure.code
        record.duration_ms = round((time.perf_counter() - started) * 1000, 3)
        record.provenance = provenance = _provenance(record, observation)
        if observation is None and isinstance(getattr(params, "database", None), str):
            provenance = {"database": params.database, **provenance}  # a refused statement's database, for the audit
        state.remember(record)  # before the answer: it may cut the provenance the answer shows

        def bookkeeping() -> None:
            record.input_tokens = self.tokens.count_tokens(json.dumps(arguments, default=str)[:200_000])
            if failure is not None:
                record.output_tokens = self.tokens.count_tokens(format_error(tool.name, failure))
            state.usage.add(record)
            self.telemetry.write(record)
            error = failure.message if failure is not None else None
            self.audit.call(record, who, arguments, provenance, _returned(observation), error=error)

        span = trace.get_current_span()
        if cancelled is not None:  # no answer will be written: kept now, then the cancellation goes on
            bookkeeping()
            raise cancelled
        if self.deferring and not span.is_recording():
            self.unsettled.append(bookkeeping)  # out of the answer's way: settled once it is written
        else:
            bookkeeping()
            _annotate_span(span, record)
        return CallOutcome(tool.name, observation, failure, record)

    def run_step(
        self,
        tool: Tool,
        arguments: dict[str, Any],
        session: str,
        timeout: float,
        parent: ToolContext | None = None,
        memo: dict[str, Any] | None = None,
    ) -> RawResult:
        """One call made by the server itself, not by a client — a saved analysis's step — run the runner's way:
        its arguments validated as a client's are, bounded by ``timeout`` (and ``parent``'s cancellation: the work
        in its engine or sandbox is stopped, not abandoned), and kept like every call: in ``session``'s history
        (``ba://history``), its usage and the telemetry log. Returns the raw result (the caller makes its own
        outputs of it: no observation, no cache); raises the tool's ToolFailure. Sync: for a worker thread."""
        started = time.perf_counter()
        record = _new_record(tool, arguments, session)
        failure: ToolFailure | None = None
        raw: RawResult | None = None
        try:
            params = self._validate(tool, arguments)
            ctx = ToolContext(session=session, timeout=timeout)  # acting for whom the caller acts (its stores' owner)
            ctx.memo.update(memo or {})
            raw = execute_bounded(tool, params, ctx, parent)
            record.success = True
            artifact = getattr(raw, "artifact_id", None)
            record.artifacts = [artifact] if artifact else []
        except Exception as exc:
            failure = _failure_of(tool, exc)
        if failure is not None:
            record.error_type, record.error_code = failure.type.value, failure.code
        record.duration_ms = round((time.perf_counter() - started) * 1000, 3)
        record.provenance = provenance = {**_provenance(record, None), "by": "saved analysis"}
        if failure is None:
            record.provenance.pop("error", None)
            record.provenance.update(getattr(raw, "provenance", None) or {})
        state = self.sessions(session)
        state.remember(record)
        record.input_tokens = self.tokens.count_tokens(json.dumps(arguments, default=str)[:200_000])
        state.usage.add(record)
        self.telemetry.write(record)
        rows = getattr(getattr(raw, "frame", None), "num_rows", None)
        error = failure.message if failure is not None else None
        self.audit.call(record, callers.principal(), arguments, provenance, (rows, None), "saved analysis", error)
        if failure is not None:
            raise failure
        assert raw is not None
        return raw

    def _observer_for(self, tool: Tool, choice: LevelChoice, recent: int) -> Observe:
        """The observation of a raw result at the chosen level — a level lower when it is over what hosts
        show inline, brief when the token budget says so (unless the result is small)."""
        settings = self.settings
        observer = self.observer

        def observe_at(raw: RawResult) -> Observation:
            if choice.downgraded and choice.asked is not None:
                # A small result is not worth a downgrade: brief plus the follow-up call it invites
                # would cost more than the observation asked for. Only a result small in memory is
                # observed at the asked level to find out; a large one goes straight to brief.
                if approx_size(raw) <= settings.downgrade_floor_tokens * 16:
                    asked = observer.observe(tool.name, raw, choice.asked)
                    if asked.tokens <= settings.downgrade_floor_tokens:
                        return asked
                note = (
                    f"level is brief because this session received {recent:,} observation tokens in the "
                    f"last {settings.budget_window_s / 60:.0f} minutes "
                    f"({recent / settings.session_token_budget:.0%} of its budget); pass output_level to choose another"
                )
                return observer.observe(tool.name, raw, OutputLevel.BRIEF, [note])
            return observer.observe(tool.name, raw, choice.level)

        def observe(raw: RawResult) -> Observation:
            obs = observe_at(raw)
            if len(obs.text) <= HOST_MAX_CHARS and obs.tokens <= HOST_MAX_TOKENS:
                return obs
            # Claude Code cuts results over 25,000 tokens and moves those over 50,000 characters to a
            # file: a smaller level, with everything left out in artifacts, reaches every host whole.
            lower = OutputLevel.STANDARD if obs.structured.get("level") == "full" else OutputLevel.BRIEF
            return observer.observe(
                tool.name,
                raw,
                lower,
                [f"shown at {lower.value}: the {obs.structured.get('level')} view was over what hosts show inline"],
            )

        return observe

    # -- steps --------------------------------------------------------------------------------

    def _validate(self, tool: Tool, arguments: dict[str, Any]) -> Any:
        try:
            return tool.Params.model_validate(arguments)
        except ValidationError as exc:
            failure = invalid_arguments(tool, exc)
        # raised outside the handler: the failure holds no reference to the ValidationError (and so to the
        # arguments it quotes, megabytes perhaps) that only the cycle collector would free
        raise failure

    async def _execute_cached(
        self, tool: Tool, params: Any, ctx: ToolContext, notify: Notify | None, observe: Observe
    ) -> _Outcome:
        policy = tool.policy.cache
        caching = policy.mode is not CacheMode.NEVER and bool(self.settings.cache.max_entries)

        def lookup() -> tuple[str | None, RawResult | None]:
            """The cache key of this call (None: not cacheable) and the cached raw result, if any."""
            if not caching:
                return None, None
            identity = tool.cache_identity(params, ctx) if policy.mode is CacheMode.IDENTITY else None
            if policy.mode is CacheMode.IDENTITY and identity is None:
                return None, None
            who = callers.principal_of(ctx.session)
            if not self.settings.artifacts.shared and who != callers.DEFAULT:  # one user's results are theirs (S-19)
                identity = f"{identity or ''}|{who}"
            key = cache_key(tool.name, tool.version, params.model_dump(exclude=set(_NOT_CACHE_ARGS)), identity)
            return key, self.cache.get(key)

        done, retries = await self._execute_with_retries(tool, params, ctx, notify, observe, lookup)
        if done.key is not None and not done.cache_hit:
            self.cache.put(done.key, done.raw, policy.ttl_s if policy.mode is CacheMode.TTL else None)
        return _Outcome(done.observation, retries, done.cache_hit)

    async def _execute_with_retries(
        self, tool: Tool, params: Any, ctx: ToolContext, notify: Notify | None, observe: Observe, lookup: Lookup
    ) -> tuple[_Done, int]:
        retry = self.settings.retry
        timeout = ctx.timeout
        attempt = 0
        while True:
            try:
                return await self._execute_once(tool, params, ctx, timeout, observe, lookup), attempt
            except Exception as exc:
                if isinstance(exc, ToolFailure):
                    failure = exc
                elif isinstance(exc, TimeoutError):
                    failure = _timeout_failure(tool, timeout)
                else:
                    named = _tool_classification(tool, exc)
                    if named is None:
                        raise
                    failure = named
                worth_it = failure.type.retryable and failure.type.value in tool.policy.retry_on
                if not (tool.policy.idempotent and worth_it and attempt < retry.max_retries):
                    raise failure from None
                delay = retry_delay(retry.base_ms, retry.factor, retry.max_ms, attempt, failure.retry_after)
                attempt += 1
                log.info("retrying %s in %.2fs after %s", tool.name, delay, failure.code)
                await _tell(notify, "warning", f"{tool.name}: {failure.code}, retry {attempt} in {delay:.1f} s")
                await anyio.sleep(delay)

    async def _execute_once(
        self, tool: Tool, params: Any, ctx: ToolContext, timeout: float, observe: Observe, lookup: Lookup
    ) -> _Done:
        """Cache lookup, execute, observe — for sync tools all in one worker-thread hop."""
        ctx.reset()

        def finish(key: str | None, hit: RawResult | None, raw: RawResult | None) -> _Done:
            result = hit if hit is not None else raw
            assert result is not None
            return _Done(key, result, observe(result), hit is not None)

        async def work() -> _Done:
            if inspect.iscoroutinefunction(tool.execute):
                key, hit = await anyio.to_thread.run_sync(lookup)
                raw = None if hit is not None else await cast("Awaitable[RawResult]", tool.execute(params, ctx))
                return await anyio.to_thread.run_sync(finish, key, hit, raw)

            def run() -> _Done:
                key, hit = lookup()
                return finish(key, hit, None if hit is not None else cast("RawResult", tool.execute(params, ctx)))

            return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)

        try:
            return await within(timeout + tool.deadline_grace(), ctx, work)
        except TimeoutError:
            ctx.cancel()  # interrupts what the tool registered; a late result is discarded
            raise

    def timeout_for(self, tool: Tool, asked: float | None) -> float:
        """The call's timeout: what it asked for, else the tool's default; more than the tool's ceiling
        (``tools.<name>.max_timeout_s``) is refused, never quietly cut."""
        conf = tool.settings
        if asked is None:
            return conf.timeout_s
        if float(asked) > conf.max_timeout_s:
            raise invalid(
                f"timeout {float(asked):g} s is over {tool.name}'s ceiling of {conf.max_timeout_s:g} s",
                f"pass a timeout of at most {conf.max_timeout_s:g} (the operator sets tools.{tool.name}.max_timeout_s)",
            )
        return float(asked)

    def _progress_bridge(self, progress: Any) -> Any:
        """``ctx.progress`` for either kind of tool: from a worker thread it waits for the notification to
        be sent; on the event loop (an async tool) it schedules it, since the loop cannot wait on itself."""
        if progress is None:
            return lambda done, total, msg: None
        pending: set[asyncio.Task[Any]] = set()

        def report(done: float, total: float | None, message: str | None) -> None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            try:
                if loop is None:
                    anyio.from_thread.run(progress, done, total, message)
                    return
                task = loop.create_task(progress(done, total, message))
                pending.add(task)
                task.add_done_callback(pending.discard)
            except Exception:
                log.debug("progress not delivered", exc_info=True)

        return report


async def within(seconds: float, ctx: ToolContext, work: Callable[[], Awaitable[_T]]) -> _T:
    """``work()`` bounded like ``anyio.fail_after(seconds)`` (TimeoutError), except that the time ``ctx`` spends
    waiting for a worker process to start (``ToolContext.worker_start``) moves the deadline on: a call's timeout
    measures the call's work, and a start has its own bound and error (issue 65). The start tells ``ctx.moved`` from
    its thread as it begins (no deadline while it lasts) and ends (the deadline moved on by its time); no task of its
    own per call."""
    answered: list[_T] = []
    loop = asyncio.get_running_loop()
    with anyio.fail_after(seconds) as scope:
        end = scope.deadline

        def move() -> None:  # on the event loop
            scope.deadline = math.inf if ctx.starting() else end + ctx.not_counted()

        def moved() -> None:  # from the thread a worker starts in
            with contextlib.suppress(RuntimeError):  # the loop is closed: nothing waits for this call any more
                loop.call_soon_threadsafe(move)

        with ctx.telling(moved):
            move()  # a start already under way
            answered.append(await work())
    if not answered:  # the deadline cancelled the work, then a start moved it on: fail_after kept quiet (anyio
        raise TimeoutError  # raises only when the time is past the deadline as it is at the end); the call timed out
    return answered[0]


def retry_delay(base_ms: float, factor: float, max_ms: float, attempt: int, retry_after: float | None) -> float:
    """Seconds before retry ``attempt`` (0-based): exponential backoff capped at ``max_ms`` with up to
    20 % jitter added (never removed), and never sooner than a server's ``Retry-After`` — a floor that
    neither jitter nor the cap may lower."""
    backoff = min(base_ms * factor**attempt, max_ms) / 1000 * (1 + 0.2 * random.random())
    return max(backoff, retry_after or 0.0)


def _new_record(tool: Tool, arguments: dict[str, Any], session: str) -> CallRecord:
    """The record of a call as it begins (its outcome filled in as it ends)."""
    return CallRecord(
        execution_id=uuid.uuid4().hex,
        session=session,
        tool=tool.name,
        timestamp=time.time(),
        duration_ms=0.0,
        input_tokens=0,
        output_tokens=0,
        output_level="",
        level_downgraded=False,
        cache_hit=False,
        retries=0,
        success=False,
        arguments=dict(arguments),
    )


def _returned(observation: Observation | None) -> tuple[int | None, int | None]:
    """What an answer returned, for the audit trail: the rows of its tables (None: no table) and its bytes (text and
    images)."""
    if observation is None:
        return None, None
    tables = [observation.structured, *observation.structured.get("parts", [])]
    counts = [p["rows"] for p in tables if p.get("kind") == "table" and isinstance(p.get("rows"), int)]
    size = len(observation.text.encode("utf-8", "replace")) + sum(len(data) for data, _ in observation.images)
    return (sum(counts) if counts else None), size


def _provenance(record: CallRecord, observation: Observation | None) -> dict[str, Any]:
    """What produced a call's result: the call, its arguments as sent (output_level aside), what the tool
    reported (database, dialect, SQL, code, what it read), and the artifacts it wrote with their digests."""
    made: dict[str, Any] = {
        "call_id": record.call_id,
        "tool": record.tool,
        "arguments": {k: v for k, v in record.arguments.items() if k != "output_level"},
    }
    if observation is None:
        made["error"] = record.error_code
        return made
    made.update(observation.provenance)
    made["wrote"] = [{"id": a.id, "kind": a.kind, "sha256": a.sha256} for a in observation.artifacts]
    return made


def _failure_of(tool: Tool, exc: Exception) -> ToolFailure:
    """What a call's exception tells the model: a ToolFailure as raised, else the tool's own classification of
    its libraries' errors, else the generic one (logged: an exception nobody named is a bug)."""
    if isinstance(exc, ToolFailure):
        return exc
    named = _tool_classification(tool, exc)
    if named is None:
        log.exception("tool %s failed unexpectedly", tool.name)
    return named or classify(exc)


def _tool_classification(tool: Tool, exc: BaseException) -> ToolFailure | None:
    try:
        return tool.classify_error(exc)
    except Exception:
        log.debug("classify_error of %s failed", tool.name, exc_info=True)
        return None


async def _tell(notify: Notify | None, level: str, message: str) -> None:
    if notify is None:
        return
    try:
        await notify(level, message)
    except Exception:
        log.debug("log message not delivered", exc_info=True)


def _timeout_failure(tool: Tool, timeout: float) -> ToolFailure:
    """The call's own work ran its whole timeout (the time a worker took to start is not counted: ``_call`` says how
    long it was, whichever layer noticed the timeout)."""
    return timed_out(f"{tool.name}'s work ran {timeout:g} s, its timeout, without finishing", "narrow the request")


def timeout_hint(tool: Tool, timeout: float | None, hint: str, code: str = "TIMEOUT") -> str:
    """A timeout's hint (what the layer that noticed it advises) with what the call itself can do, naming only
    what the tool accepts: its ``timeout`` parameter up to the ceiling, else the operator's setting (the model cannot
    raise it: said so). A worker still starting at its own bound (``WORKER_START_TIMEOUT``) keeps its hint: retry —
    a longer timeout would not have helped."""
    hint = hint or "narrow the request"
    if code == "WORKER_START_TIMEOUT":
        return hint
    if "timeout" in tool.Params.model_fields:
        return f"{hint}, or pass timeout (seconds) up to {tool.settings.max_timeout_s:g}"
    return (
        f"{hint}; this tool takes no timeout argument: its limit ({tool.settings.timeout_s:g} s) is the operator's "
        f"setting tools.{tool.name}.timeout_s"
    )


def invalid_arguments(tool: Tool, exc: ValidationError) -> ToolFailure:
    """``invalid_parameters`` naming each bad field and, where the schema has them, its allowed values."""
    schema = tool.Params.model_json_schema()
    props = schema.get("properties", {})
    problems, hints = [], []
    for err in exc.errors()[:5]:
        field = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        top = str(err["loc"][0]) if err["loc"] else ""
        if err["type"] == "extra_forbidden":
            problems.append(f"unknown argument '{field}'")
            hints.append("accepted arguments: " + ", ".join(props))
            continue
        if err["type"] == "missing":
            problems.append(f"'{field}' is required")
            continue
        problems.append(f"'{field}': {err['msg']}")
        allowed = _allowed(props.get(top, {}))
        if allowed:
            hints.append(f"{top} must be {allowed}")
    return ToolFailure(
        ErrorType.INVALID_PARAMETERS,
        Code.INVALID_ARGUMENTS,
        "; ".join(problems),
        "; ".join(dict.fromkeys(hints)) or "see the tool's input schema",
    )


def _allowed(prop: dict[str, Any]) -> str:
    options = [prop, *prop.get("anyOf", [])]
    for opt in options:
        if "enum" in opt:
            return "one of " + ", ".join(json.dumps(v) for v in opt["enum"])
    kinds = [o.get("type") for o in options if o.get("type") and o.get("type") != "null"]
    bounds = []
    for opt in options:
        if "minimum" in opt:
            bounds.append(f">= {opt['minimum']}")
        if "maximum" in opt:
            bounds.append(f"<= {opt['maximum']}")
        if "maxLength" in opt:
            bounds.append(f"at most {opt['maxLength']} characters")
    if kinds:
        return "a " + " or ".join(dict.fromkeys(kinds)) + (f" ({', '.join(bounds)})" if bounds else "")
    return ""


def _annotate_span(span: Any, rec: CallRecord) -> None:
    if not span.is_recording():
        return
    span.set_attributes(
        {
            "ba_mcp.execution_id": rec.execution_id,
            "ba_mcp.output_level": rec.output_level,
            "ba_mcp.level_downgraded": rec.level_downgraded,
            "ba_mcp.input_tokens": rec.input_tokens,
            "ba_mcp.output_tokens": rec.output_tokens,
            "ba_mcp.cache_hit": rec.cache_hit,
            "ba_mcp.retries": rec.retries,
            "ba_mcp.success": rec.success,
            "ba_mcp.artifact_ids": rec.artifacts,
            **({"ba_mcp.error_type": rec.error_type} if rec.error_type else {}),
        }
    )
