"""The boundary call: one call's use of a worker (an engine or a connection worker). ``Call.ask`` sends one typed
request (``messages``), serialised here and nowhere else, and takes its answer through ``settle``: the blobs read
from their sealed memory files, an error answer raised. The worker boundary's exceptions become the caller's
errors here and in ``failures``, nowhere else."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ba_mcp.errors import ErrorType, ToolFailure, timed_out
from ba_mcp.workers.failures import EngineError, worker_failures
from ba_mcp.workers.process import read_blob

if TYPE_CHECKING:
    from ba_mcp.settings import WorkerLimits
    from ba_mcp.tool import ToolContext
    from ba_mcp.workers.messages import R, Request
    from ba_mcp.workers.pool import Handle

__all__ = ["Call", "crash_limit", "settle"]


@dataclass
class Call:
    """One call's use of a worker (an engine or a connection worker): ``ask`` one request at a time, ``cancel`` at
    the call's timeout — interrupt now, kill after ``grace_s`` if the worker is still on this call. The worker
    boundary's exceptions become ToolFailures here and in ``settle``, nowhere else."""

    handle: Handle
    ctx: ToolContext | None
    number: int
    grace_s: float
    max_transfer: int
    discard: Callable[[], None]  # end this worker (dead, killed, or it broke the protocol)
    gone: Callable[[Handle, bool], ToolFailure]  # what its death means (stopped at the timeout, or not)
    clean: Callable[[str], str] = lambda text: text  # what a worker wrote, made fit to show (a connection's secrets)

    def cancel(self) -> None:
        if not self.handle.busy or self.handle.call != self.number:
            return
        self.handle.process.interrupt()
        timer = threading.Timer(self.grace_s, self._kill_if_still_busy)
        timer.daemon = True
        timer.start()

    def _kill_if_still_busy(self) -> None:
        if self.handle.busy and self.handle.call == self.number:
            self.handle.killed = True
            self.discard()

    def arrow(self, blob: bytes) -> Any:
        """An Arrow table the worker sent (uncompressed IPC, sizes checked); anything else ends the worker and is
        ENGINE_PROTOCOL."""
        from ba_mcp.workers.wire import read_arrow

        with worker_failures(end=self.discard):
            return read_arrow(blob, self.max_transfer)

    def ask(self, request: Request[R], fds: list[int] | None = None) -> tuple[R, list[bytes]]:
        """Send one request — serialised here, the one point where a request becomes a message — and wait for its
        answer: (reply, the blobs that came with it). An error answer is raised: ToolFailure as it came, an engine's
        exception as EngineError; a dead worker as a timeout (when the call was cancelled) or the pool's crash
        error."""
        process = self.handle.process
        self.handle.busy = True
        with worker_failures(gone=self._died):
            if self.ctx is not None and self.ctx.cancelled.is_set():
                raise timed_out("the call was stopped at its timeout before it reached the worker", "retry")
            process.send(request.wire(), fds)
            reply, got = process.receive(None)
        self.handle.busy = False
        answer, blobs = settle(reply, got, self.max_transfer, self.discard, self.clean)
        return cast("R", answer), blobs  # the reply its request names (JSON from the worker; its blobs are checked)

    def _died(self, exc: BaseException) -> ToolFailure:
        """The worker ended during the exchange: a timeout when the call was stopped, else the pool's crash error."""
        self.handle.busy = False
        stopped = self.handle.killed or (self.ctx is not None and self.ctx.cancelled.is_set())
        self.discard()
        return self.gone(self.handle, stopped)


def crash_limit(how: str, limits: WorkerLimits, kind: str) -> str:
    """Which limit most likely ended a worker, by how it ended."""
    if "SIGKILL" in how or "SIGABRT" in how or "SIGSEGV" in how:
        return f" — most likely its memory limit ({kind}.memory_mb = {limits.memory_mb} MB)"
    if "SIGXCPU" in how:
        return f" — its CPU time limit ({kind}.cpu_seconds = {limits.cpu_seconds})"
    return ""


def settle(
    reply: dict[str, Any], got: list[int], limit: int, discard: Any, clean: Any = lambda text: text
) -> tuple[dict[str, Any], list[bytes]]:
    """A worker's answer as the server takes it: the blobs that came with it read from their sealed memory files
    (size-checked; anything else ends the worker through ``discard``, ENGINE_PROTOCOL), the descriptors closed,
    and an error answer raised — a ToolFailure as it came, an engine's exception as EngineError — with ``clean``
    applied to what a worker wrote (a connection's secrets)."""
    try:
        with worker_failures(end=discard):
            blobs = [read_blob(fd, limit) for fd in got]
    finally:
        for fd in got:
            with contextlib.suppress(OSError):
                os.close(fd)
    if reply.get("op") == "error":
        if "failure" in reply:
            f = reply["failure"]
            raise ToolFailure(
                ErrorType(f.get("type", "execution_error")),
                str(f.get("code", "ERROR")),
                clean(str(f.get("message", ""))),
                clean(str(f.get("hint") or "")),
            )
        engine = dict(reply.get("engine", {}))
        for key in ("message", "detail"):
            engine[key] = clean(str(engine.get(key, "")))
        raise EngineError(engine)
    return reply, blobs
