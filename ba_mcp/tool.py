"""What a tool is: parameters (a pydantic model), a policy, settings, and ``execute(params, ctx) -> raw
result``.

A tool is constructed once, with the services it needs (workspace, stores, databases, sandboxes…) and its
settings (``tools.<name>``, validated by its ``Settings``): a built-in tool by its ``build`` (the tool table in
``registry`` names it), an embedder's by the embedder. It knows nothing about MCP or formatting and calls no
other tool. ``execute`` may be sync (run in a worker thread) or async (run on the event loop). It raises
``ToolFailure`` for anything the model should read as an error, or lets ``classify_error`` name what its
own libraries raise.
"""

from __future__ import annotations

import contextlib
import contextvars
import enum
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field

from ba_mcp.settings import ToolSettings

T = TypeVar("T")

if TYPE_CHECKING:
    from ba_mcp.errors import ToolFailure
    from ba_mcp.results import RawResult


class CacheMode(enum.Enum):
    NEVER = "never"
    TTL = "ttl"  # valid for ttl_s seconds
    IDENTITY = "identity"  # valid while what the tool read is unchanged (identity in the key)


@dataclass(frozen=True)
class CachePolicy:
    mode: CacheMode = CacheMode.NEVER
    ttl_s: float = 0.0


OutputLevelParam = Literal["brief", "standard", "full"]

OUTPUT_LEVEL_FIELD = Field(None)  # explained once, in the server's instructions


class ToolParams(BaseModel):
    """Base of every tool's parameters: unknown arguments are errors, every tool takes output_level."""

    model_config = ConfigDict(extra="forbid")

    output_level: OutputLevelParam | None = OUTPUT_LEVEL_FIELD


_LOCAL_RETRIES = frozenset({"transient_error", "rate_limit"})
REMOTE_RETRIES = frozenset({"transient_error", "rate_limit", "timeout", "resource_error"})


@dataclass(frozen=True)
class ToolPolicy:
    """``retry_on``: the retryable error types worth retrying for this tool (idempotent tools only). For
    local work a timeout or an out-of-memory repeats deterministically, so a retry only multiplies the
    wait and the load; remote services (``REMOTE_RETRIES``) retry those too."""

    idempotent: bool = True
    retry_on: frozenset[str] = _LOCAL_RETRIES
    cache: CachePolicy = field(default_factory=CachePolicy)
    read_only: bool = True
    open_world: bool = False


@dataclass
class ToolContext:
    """What a running call needs: its session, its timeout (seconds), cancellation and progress.

    When the runner gives up on a call (its timeout), it sets ``cancelled`` and calls every function
    registered with ``on_cancel`` (e.g. a DuckDB cursor's ``interrupt``), from the event loop thread.
    ``progress(done, total, message)`` may be called from a worker thread or, in an async tool, from
    the event loop."""

    session: str
    timeout: float = 30.0
    cancelled: threading.Event = field(default_factory=threading.Event)
    progress: Callable[[float, float | None, str | None], None] = lambda done, total, msg: None
    _on_cancel: list[Callable[[], Any]] = field(default_factory=list)
    memo: dict[str, Any] = field(default_factory=dict)  # what a tool works out once per call (a plan)
    start_s: float = 0.0  # seconds spent waiting for a worker process to start (``worker_start``)
    _start_since: float | None = None
    # told (from any thread) when a worker start begins or ends: the runner moves the call's deadline (``within``)
    moved: Callable[[], None] | None = None

    @contextlib.contextmanager
    def worker_start(self) -> Iterator[None]:
        """The body waits for a worker process to start: that time is not the call's work, so the runner moves the
        call's deadline on by it (a start has its own bound, ``<kind>.start_timeout_s``, and its own error)."""
        self._start_since = time.monotonic()
        self._tell_moved()
        try:
            yield
        finally:
            self.start_s += time.monotonic() - self._start_since
            self._start_since = None
            self._tell_moved()

    @contextlib.contextmanager
    def telling(self, moved: Callable[[], None]) -> Iterator[None]:
        """While it is entered, ``moved()`` is called (from the starting thread) as a worker start begins and ends."""
        self.moved = moved
        try:
            yield
        finally:
            self.moved = None

    def _tell_moved(self) -> None:
        moved = self.moved
        if moved is not None:
            moved()

    def starting(self) -> bool:
        """A worker start is in progress (``worker_start``)."""
        return self._start_since is not None

    def not_counted(self) -> float:
        """Seconds not counted against the timeout so far: worker starts, one in progress up to now."""
        since = self._start_since
        return self.start_s + (time.monotonic() - since if since is not None else 0.0)

    def on_cancel(self, callback: Callable[[], Any]) -> None:
        self._on_cancel.append(callback)
        if self.cancelled.is_set():
            callback()

    def cancel(self) -> None:
        self.cancelled.set()
        for callback in list(self._on_cancel):
            try:
                callback()
            except Exception:
                pass

    def reset(self) -> None:
        """A fresh attempt: not cancelled, nothing registered."""
        self.cancelled.clear()
        self._on_cancel.clear()
        self.start_s = 0.0


class Tool:
    """Subclasses set the class attributes and implement ``execute``. ``settings`` is the tool's section
    of the configuration (the App sets it; a subclass narrows its type). A built-in or plug-in tool's class also
    has the classmethod ``build(services)`` that constructs it (``tools.services.BuiltIn``: it takes the App's
    ``Services``, which live above this room); an embedder's tool is given to the App as an instance."""

    name: ClassVar[str]
    title: ClassVar[str]
    description: str  # a class attribute, or computed per instance from live state (libraries, skills)
    version: ClassVar[str] = "1"
    Params: ClassVar[type[ToolParams]]
    policy: ToolPolicy = ToolPolicy()  # a class attribute, or set per instance from settings (web_search)
    settings: ToolSettings = ToolSettings()
    # What the observer may say about this tool (see pipeline.observe.ToolTraits): the argument that
    # continues a windowed result, and how it reads an artifact ({id}) of which kinds (None: all).
    window_arg: ClassVar[str | None] = None
    artifact_reader: ClassVar[str | None] = None
    artifact_kinds: ClassVar[frozenset[str] | None] = None
    # The MCP Apps view that shows its results to a host that renders views: "table" (a table's pages and chart,
    # figures) or "report" (an analysis's headline and conclusions); None: no view.
    view: ClassVar[str | None] = None
    # Whether tools/list offers the model ``output_level`` for it: True where a result's size varies with the question
    # (tables, documents, code's output); every tool accepts it (``ToolParams``), this says only where it is listed.
    offers_levels: ClassVar[bool] = True
    # The model of its section of the configuration (tools.<name>): ToolSettings, or a subclass with its own keys
    # and defaults (each with a description: that is where they are documented).
    Settings: ClassVar[type[ToolSettings]] = ToolSettings

    def execute(self, params: Any, ctx: ToolContext) -> RawResult | Awaitable[RawResult]:
        """The call: a plain method runs in a worker thread, an ``async def`` on the event loop."""
        raise NotImplementedError

    def deadline_grace(self) -> float:
        """Seconds the runner waits beyond the call's timeout before giving up on it: for tools that
        enforce the timeout themselves and report what happened (run_python)."""
        return 0.0

    def classify_error(self, exc: BaseException) -> ToolFailure | None:
        """The ToolFailure for an exception of this tool's own libraries (an HTTP client's connection
        error, say), or None to leave it to the generic classification."""
        return None

    def cache_identity(self, params: Any, ctx: ToolContext) -> str | None:
        """For CacheMode.IDENTITY: a string that changes whenever what the call reads changes.
        None means: do not cache this call."""
        return None


def execute_bounded(tool: Tool, params: Any, ctx: ToolContext, parent: ToolContext | None = None) -> RawResult:
    """One sync call of ``tool`` the way the runner bounds a live call, for callers that are not the runner (a
    saved analysis's replay): see ``run_bounded``. Raises the tool's ToolFailure, or ``timeout``."""
    raw: Any = run_bounded(lambda: tool.execute(params, ctx), ctx, tool.name, tool.deadline_grace(), parent)
    return cast("RawResult", raw)


def run_bounded(
    work: Callable[[], T], ctx: ToolContext, name: str, grace: float = 0.0, parent: ToolContext | None = None
) -> T:
    """``work`` (a service's call with ``ctx``: a database query, a tool's execute) bounded the way the runner
    bounds a live call: it runs in a thread of its own; at ``ctx.timeout`` plus ``grace`` — or when ``parent`` is
    cancelled — ``ctx`` is cancelled (what the work registered interrupts or kills its worker) and the work is
    waited for, so work that timed out does not keep running behind the caller. Raises what ``work`` raised, or
    ``timeout``."""
    from ba_mcp.errors import timed_out

    box: dict[str, Any] = {}
    # the work acts for whom the caller acts: its session and its principal (a replay's query runs as the caller's
    # database role), as anyio.to_thread would carry them
    acting = contextvars.copy_context()

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:
            box["error"] = exc

    if parent is not None:
        parent.on_cancel(ctx.cancel)
    thread = threading.Thread(target=acting.run, args=(run,), name=f"bounded-{name}", daemon=True)
    thread.start()
    end = time.monotonic() + ctx.timeout + grace
    thread.join(ctx.timeout + grace)
    while thread.is_alive() and (left := end + ctx.not_counted() - time.monotonic()) > 0:
        thread.join(left)  # the time its worker took to start is not the work's (``ToolContext.worker_start``)
    if thread.is_alive() or (parent is not None and parent.cancelled.is_set()):
        ctx.cancel()
        thread.join(30.0)  # the engine is interrupted, then its worker killed: the work ends
        raise timed_out(f"{name} did not finish within {ctx.timeout:g} s")
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value
