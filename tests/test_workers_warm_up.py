"""Issue 65 item 2: the first call never waits behind warm-up, and a call's timeout measures the call's work.

Unit tests of the pieces, in-process: the pool gives a call the spare still warming (raised to normal priority, never
killed and restarted) and counts the wait for its start apart from the call's work; the engine worker's warm-up stops
at the module in progress when an operation comes; the runner's deadline moves on while a worker starts; the hints of
a timeout tell which of the two it was and how the limit is raised; the spare's CPU priority is lowered and raised
again (its autogroup, where the kernel has them). Sequenced by events, not by the clock.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from ba_mcp.errors import ErrorType
from ba_mcp.pipeline.runner import _timeout_failure, timeout_hint, within
from ba_mcp.settings import SandboxSettings
from ba_mcp.tool import Tool, ToolContext, ToolParams
from ba_mcp.workers import priority
from ba_mcp.workers.pool import Handle, WorkerPool
from ba_mcp.workers.spawn import START_TIMEOUT, unavailable


def _autogroup_nice(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/autogroup", encoding="ascii") as f:
            return int(f.read().split()[-1])
    except (OSError, ValueError):
        return None


class _Process:
    """What the pool asks of a worker process, over a real idle process (its priority is really set)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc, self.pid = proc, proc.pid
        self.started = threading.Event()  # its start-up is over (the ready message)
        self.killed = False

    def alive(self) -> bool:
        return not self.killed

    def kill(self) -> None:
        self.killed = True

    def rss_mb(self) -> float:
        return 0.0


class _Pool(WorkerPool):
    kind = "test"

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        super().__init__(SandboxSettings(spare_workers=1, max_workers=4))
        self.proc = proc
        self.made: list[tuple[Handle, bool]] = []
        self.waiting = threading.Event()  # a call is waiting for a worker's start

    def _make(self, spare: bool) -> Handle:
        handle = Handle(_Process(self.proc))  # type: ignore[arg-type]
        self.made.append((handle, spare))
        return handle

    def _ready(self, handle: Handle) -> Handle:
        self.waiting.set()
        assert handle.process.started.wait(30)  # type: ignore[attr-defined]
        return handle

    def prestart(self) -> None:  # the spare again after a claim: not wanted here
        if not self.made:
            super().prestart()


def test_a_call_takes_the_spare_still_warming_at_normal_priority_and_its_start_is_not_its_time(
    sleeper: subprocess.Popen[bytes],
) -> None:
    pool = _Pool(sleeper)
    pool.prestart()
    [(spare, was_spare)] = pool.made
    assert was_spare and _autogroup_nice(sleeper.pid) in (None, priority.LOW_NICE)
    ctx = ToolContext(session="s", timeout=5)
    got: dict[str, Any] = {}
    call = threading.Thread(target=lambda: got.update(zip(("handle", "fresh"), pool.acquire("s", 5, ctx), strict=True)))
    call.start()
    assert pool.waiting.wait(30)  # the call waits for the spare's start, which still runs ...
    assert len(pool.made) == 1  # ... the spare itself: not killed, no second worker started
    assert _autogroup_nice(sleeper.pid) in (None, 0)  # raised to normal: the call's now
    assert ctx.not_counted() > 0  # the wait is the start's, not the call's work
    spare.process.started.set()  # type: ignore[attr-defined]
    call.join(30)
    assert got == {"handle": spare, "fresh": True}
    assert ctx.start_s > 0 and not spare.process.killed  # type: ignore[attr-defined]


def test_the_spare_is_lowered_and_raised_again_by_its_autogroup(sleeper: subprocess.Popen[bytes]) -> None:
    if _autogroup_nice(sleeper.pid) is None:
        pytest.skip("this kernel has no autogroups (the cgroup weight and nice levers apply instead)")
    priority.lower(sleeper.pid)
    assert _autogroup_nice(sleeper.pid) == priority.LOW_NICE
    priority.restore(sleeper.pid)
    assert _autogroup_nice(sleeper.pid) == 0


def test_the_engine_warm_up_stops_at_the_module_in_progress_when_an_operation_comes(tmp_path: Path) -> None:
    """The first operation waits for the one module being imported, never for the rest of the list."""
    from ba_mcp.inside.main import _import_quietly
    from ba_mcp.inside.serve import serve
    from ba_mcp.workers.messages import Drop
    from sandbox import protocol

    package = tmp_path / "warmpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "gate.py").write_text("import threading\nentered = threading.Event()\nrelease = threading.Event()\n")
    (package / "slow.py").write_text("from warmpkg import gate\ngate.entered.set()\ngate.release.wait(30)\n")
    (package / "later.py").write_text("")
    sys.path.insert(0, str(tmp_path))
    try:
        from warmpkg import gate  # type: ignore[import-not-found]

        class Target:
            busy = False

            def __init__(self) -> None:
                self.warm_stop = threading.Event()
                self.warming = threading.Thread(
                    target=_import_quietly, args=(["warmpkg.slow", "warmpkg.later"], self.warm_stop), daemon=True
                )
                self.warming.start()

            def ping(self, request: Drop, fds: list[int]) -> tuple[dict[str, Any], list[int]]:
                return {"op": "pong", "later": "warmpkg.later" in sys.modules}, []

        target = Target()
        assert gate.entered.wait(30)  # the warm-up is inside its first module
        ours, theirs = socket.socketpair()
        worker = threading.Thread(target=serve, args=(target, {Drop: target.ping}, theirs, {}), daemon=True)
        worker.start()
        protocol.send(ours, Drop().wire(), [])  # any request: the first operation
        assert target.warm_stop.wait(30)  # the operation asked the warm-up to stop ...
        gate.release.set()  # ... and waits only for the module in progress
        reply, _ = protocol.recv(ours)
        assert reply == {"op": "pong", "later": False}  # the rest of the list was never imported
        ours.close()
        worker.join(30)
        theirs.close()
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("warmpkg")]:
            del sys.modules[name]


@pytest.mark.anyio
async def test_the_calls_deadline_moves_on_while_its_worker_starts() -> None:
    """A start longer than the whole timeout does not time the call out; the same wait as the call's work does."""
    ctx = ToolContext(session="s", timeout=0.05)
    start_over = threading.Event()

    def starting_then_working() -> str:
        with ctx.worker_start():
            # the start outlasts the call's deadline several times over; released once the deadline has passed
            assert not start_over.wait(0.3)
        return "answered"

    assert await within(0.05, ctx, lambda: anyio.to_thread.run_sync(starting_then_working)) == "answered"
    assert ctx.start_s >= 0.3

    plain = ToolContext(session="s", timeout=0.05)
    with pytest.raises(TimeoutError):
        await within(0.05, plain, lambda: anyio.to_thread.run_sync(start_over.wait, 0.3, abandon_on_cancel=True))


@pytest.mark.anyio
async def test_a_deadline_that_fires_as_a_start_moves_it_on_is_still_a_timeout() -> None:
    """The deadline cancels the work, and in the same turn of the event loop a start (another thread) moves it on
    past now (a busy machine): anyio's fail_after then raises nothing, and the call is a timeout all the same, not an
    internal error nor an answer."""
    ctx = ToolContext(session="s", timeout=0.05)

    async def cancelled_then_moved() -> str:
        try:
            await anyio.sleep(5)
        finally:  # cancelled by the deadline; a start begins now, as its thread would tell it
            with anyio.CancelScope(shield=True):
                ctx._start_since = time.monotonic()
                assert ctx.moved is not None
                ctx.moved()
                await anyio.sleep(0.01)  # the move runs: no deadline while the start lasts
        return "answered"

    with pytest.raises(TimeoutError):
        await within(0.05, ctx, cancelled_then_moved)
    assert ctx.moved is None  # nothing of the call's is told after it


@pytest.mark.anyio
async def test_a_call_without_a_start_costs_no_task_of_its_own() -> None:
    """The deadline is moved by the start's own thread: a call runs no follower task beside its work."""
    ctx = ToolContext(session="s", timeout=1.0)
    before = len(asyncio.all_tasks())

    async def counts() -> int:
        return len(asyncio.all_tasks())

    assert await within(1.0, ctx, counts) == before


class _WithTimeout(ToolParams):
    timeout: float | None = None


class _TakesTimeout(Tool):
    name, title, description = "takes_timeout", "T", "a tool with a timeout argument"
    Params = _WithTimeout


class _NoTimeout(Tool):
    name, title, description = "file_reader", "F", "a tool without one"
    Params = ToolParams


def test_a_timeout_of_the_work_says_how_long_it_ran_and_how_to_raise_the_limit() -> None:
    failure = _timeout_failure(_TakesTimeout(), 30)
    assert failure.type is ErrorType.TIMEOUT and "work ran 30 s" in failure.message
    ceiling = _TakesTimeout.settings.max_timeout_s
    assert (
        timeout_hint(_TakesTimeout(), 30, failure.hint)
        == f"narrow the request, or pass timeout (seconds) up to {ceiling:g}"
    )
    plain = _timeout_failure(_NoTimeout(), 30)
    hint = timeout_hint(_NoTimeout(), 30, plain.hint)
    assert "takes no timeout argument" in hint and "tools.file_reader.timeout_s" in hint


def test_a_worker_still_starting_at_its_bound_says_retry_not_narrow() -> None:
    class Starting:
        def last_output(self) -> str:
            return ""

        def kill(self) -> None:
            pass

    failure = unavailable("engine", Starting(), TimeoutError(), 60)  # type: ignore[arg-type]
    assert failure.type is ErrorType.TIMEOUT and failure.code == START_TIMEOUT
    assert "still starting after 60 s" in failure.message
    hint = timeout_hint(_TakesTimeout(), None, failure.hint, failure.code)
    assert hint.startswith("retry") and "engine.start_timeout_s" in hint and "narrow" not in hint
    assert "pass timeout" not in hint  # a longer call timeout would not have helped


class _Starts(Tool):
    """Waits for its worker to start (longer than its whole timeout), then works until it is stopped."""

    name, title, description = "starts", "Starts", "a start longer than the timeout, then work past it"
    Params = _WithTimeout

    def __init__(self) -> None:
        self.working = threading.Event()

    def execute(self, params: _WithTimeout, ctx: ToolContext) -> Any:
        with ctx.worker_start():
            assert not ctx.cancelled.wait(0.4)  # the deadline (0.1 s) moved on: not cancelled while starting
        self.working.set()
        ctx.cancelled.wait(30)
        raise TimeoutError


@pytest.mark.anyio
async def test_a_call_whose_work_times_out_after_a_slow_start_says_both(tmp_path: Path) -> None:
    from mcp import Client

    from tests.conftest import text_of
    from tests.test_runner import make_server

    tool = _Starts()
    async with Client(make_server(tmp_path, [tool])) as client:
        result = await client.call_tool("starts", {"timeout": 0.1})
    text = text_of(result)
    assert tool.working.is_set() and result.is_error and "Error Type: timeout" in text
    assert "work ran 0.1 s, its timeout" in text and "s its worker took to start, not counted" in text, text
    assert "narrow the request, or pass timeout (seconds) up to" in text


# -- query_metrics after a dbt build: the model kept by its digest, read ahead by a current spare ----------------------


def test_the_engine_worker_reads_a_metrics_model_again_only_when_its_digest_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A dbt build rewrites the manifest with the same bytes: the same digest, no second read (MetricFlow's parse);
    a changed manifest is a new digest, read again. ``action: read`` (the spare's read ahead) answers nothing else."""

    import ba_mcp.metrics.catalog as catalog
    from ba_mcp.inside.metrics import MetricsModels
    from ba_mcp.metrics.files import digest_of
    from ba_mcp.workers.messages import MetricsWork

    reads: list[str] = []
    monkeypatch.setattr(catalog, "models_of", lambda request: reads.append(request.digest) or (None, None))
    worker = MetricsModels()

    def ask(manifest: str) -> dict[str, Any]:
        digest = digest_of([("shop", manifest)], {"shop": "duckdb"})
        request = MetricsWork(action="read", digest=digest, files=[], dbt=[], renderers={}, dialects={}, grains={})
        reply, _ = worker.answer(request, [])
        return reply

    assert ask('{"metrics": []}') == {"op": "metrics"}
    assert ask('{"metrics": []}') == {"op": "metrics"}
    assert len(reads) == 1  # the same bytes written again: kept
    ask('{"metrics": [{"name": "revenue"}]}')
    assert len(reads) == 2 and reads[0] != reads[1]  # changed: read again


def test_a_spare_whose_database_file_changed_is_replaced_by_a_current_one(sleeper: subprocess.Popen[bytes]) -> None:
    class Files(_Pool):
        changed = False

        def _current(self, handle: Handle) -> bool:
            return handle.alive() and not (self.changed and handle is self.made[0][0])

        def prestart(self) -> None:
            WorkerPool.prestart(self)

    pool = Files(sleeper)
    pool.prestart()
    assert not pool.refresh_spare() and len(pool.made) == 1  # unchanged: kept
    pool.changed = True  # a dbt build rewrote the file the spare binds
    assert pool.refresh_spare()
    [(old, _), (new, spare)] = pool.made
    assert old.process.killed and spare and not new.process.killed  # type: ignore[attr-defined]
    assert _autogroup_nice(sleeper.pid) in (None, priority.LOW_NICE)  # started as a spare is: lowered


# -- a start's own bound: a call that takes the spare while it reads the metrics model ahead --------------------------


class _Hung(_Process):
    """An engine worker whose read of the metrics model ahead (the spare's ``preread``) never answers: a manifest on
    a stalled mount, a parse that does not end (released at the end of the test)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        super().__init__(proc)
        self.release = threading.Event()
        self.asked = threading.Event()

    def send(self, message: Any, fds: Any = None) -> None:
        self.asked.set()

    def receive(self, timeout: float | None) -> tuple[dict[str, Any], list[int]]:
        if not self.release.wait(30 if timeout is None else timeout):
            raise TimeoutError
        from ba_mcp.workers.process import WorkerGone

        raise WorkerGone("ended by the test")

    def interrupt(self) -> None:
        pass

    def exit_description(self) -> str:
        return "ended"

    def last_output(self, chars: int = 0) -> str:
        return ""


@pytest.mark.anyio
async def test_a_call_that_takes_the_spare_during_its_read_ahead_is_still_bounded(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """The wait for the spare's read ahead (``DuckWorkers.preread``, which holds the spare's lock) is the call's worker
    start: its deadline is off meanwhile (``within``), so that wait must end at the start's own bound
    (``engine.start_timeout_s``) — not whenever the read ahead ends, which nothing bounds (``Call.ask`` with no ctx
    waits with ``receive(None)``): a call with no deadline at all."""
    from ba_mcp.errors import ToolFailure
    from ba_mcp.settings import EngineSettings, Settings
    from ba_mcp.workers.duckworkers import DuckWorkers
    from ba_mcp.workers.messages import MetricsWork

    hung = _Hung(sleeper)

    class Engines(DuckWorkers):
        def _make(self, spare: bool) -> Handle:
            return Handle(hung)  # type: ignore[arg-type]

        def _ready(self, handle: Handle) -> Handle:
            return handle

    read = MetricsWork(action="read", digest="d", files=[], dbt=[], renderers={}, dialects={}, grains={})
    settings = Settings(engine=EngineSettings(spare_workers=1, max_workers=4, start_timeout_s=0.5))
    pool = Engines(settings, tmp_path / "scratch", warm_request=lambda: read)
    try:
        pool.prestart()
        assert hung.asked.wait(10)  # the spare reads the model ahead, holding its lock
        ctx = ToolContext(session="s", timeout=0.1)
        failed: BaseException | None = None
        with anyio.move_on_after(5) as guard:
            try:
                await within(
                    0.1, ctx, lambda: anyio.to_thread.run_sync(pool.acquire, "s", 5, ctx, abandon_on_cancel=True)
                )
            except (TimeoutError, ToolFailure) as exc:
                failed = exc
        assert not guard.cancelled_caught, "the call waited 5 s for the read ahead: its start has no bound"
        assert isinstance(failed, ToolFailure) and failed.code == START_TIMEOUT, failed  # the start's own error
        assert hung.killed  # the worker whose read did not end is ended with it
    finally:
        hung.release.set()
        pool.close()
