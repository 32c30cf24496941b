"""The one pool of worker processes: kept one per key (a session's DuckDB or Python worker) or lent per call (a
configured database's connections); started, reaped, renewed and ended here. What a worker is made of is its
kind's (``duckworkers``, ``sandboxes``, ``connections``); one call's use of a worker is ``call.Call``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ba_mcp.errors import ErrorType, ToolFailure
from ba_mcp.workers import priority
from ba_mcp.workers.process import WorkerProcess

if TYPE_CHECKING:
    from ba_mcp.settings import WorkerLimits
    from ba_mcp.tool import ToolContext

log = logging.getLogger(__name__)

__all__ = ["Handle", "WorkerPool", "start_of"]


@dataclass(eq=False)
class Handle:
    """One worker as a pool keeps it: the process and the state of the calls it serves."""

    process: WorkerProcess
    lock: threading.Lock = field(default_factory=threading.Lock)  # one call at a time
    users: int = 0  # calls that acquired it and have not released it: never evicted or reaped meanwhile
    busy: bool = False  # a request is in flight
    call: int = 0  # the current call's number (a late kill timer must not end the next call)
    killed: bool = False  # ended at a timeout
    last_used: float = field(default_factory=time.monotonic)
    identities: dict[str, str] = field(default_factory=dict)  # engine: its database files' identities at start
    protections: list[list[str]] = field(default_factory=list)  # what its confinement achieved (its ready message)
    info: dict[str, Any] = field(default_factory=dict)  # connection: what its database said at connect
    name: str = ""  # connection: its database
    baseline_mb: float | None = None  # its memory when its session first had it (``WorkerPool.renew_grown``)

    def alive(self) -> bool:
        return self.process.alive()

    def idle(self) -> bool:
        return not self.users and not self.busy and not self.lock.locked()


class WorkerPool:
    """The one pool of worker processes, in two ways of keeping them:

    * **one worker per key** — a client session's (the Python sandbox, the engine workers): ``acquire`` and
      ``release``, with one spare started ahead, at most ``limits.max_workers`` alive: at the cap the worker idle
      the longest makes room (its session is told when it returns), and a call waits, up to its own timeout, for
      one to become idle when none is; never a refusal while any worker will be free in time. Subclasses say how
      a worker is made (``_make``), when it serves (``_ready``) and whether it still fits (``_current``).
    * **workers lent per call** — several per key (a configured database's connections): ``lend`` an idle one or
      a new one (``make``), ``give_back`` when the call is done; how many at once is the caller's (its slots).

    Either way idle workers are reaped (``reap_idle``), a key's end ends its workers, ``discard`` ends one, and
    ``close`` ends them all at once."""

    kind = "worker"

    def __init__(
        self,
        limits: WorkerLimits,
        keeps_state: Callable[[str], bool] = lambda key: True,
        first: Callable[[bool], None] = lambda urgent: None,
    ) -> None:
        self.limits = limits
        self._workers: dict[str, Handle] = {}
        self._spare: Handle | None = None
        self._starting: dict[str, threading.Lock] = {}
        self._reserved = 0  # workers being started: counted against max_workers before they are listed
        self._evicted: set[str] = set()  # sessions whose idle worker made room for another session
        self.keeps_state = keeps_state  # whether a key's worker holds what it made (then it is never renewed)
        self._idle: dict[str, list[Handle]] = {}  # lent workers waiting for their key's next call
        self._lent: set[Handle] = set()  # lent workers alive (idle or in a call)
        self._lock = threading.Lock()
        self._closed = False
        # what every worker's start waits for (a new install's bytecode for what a worker imports:
        # ``bytecode.Compiling``): the spare's at low priority, ``first(False)``; a call's that starts a worker,
        # ``first(True)`` (the call waits on exactly that)
        self._first = first

    # -- what a pool is made of -----------------------------------------------------------------------------

    def _make(self, spare: bool) -> Handle:
        """A new worker (not yet waited for); a spare is started ahead of its session."""
        raise NotImplementedError

    def _ready(self, handle: Handle) -> Handle:
        """``handle`` once it serves; a ToolFailure naming the worker when it does not start."""
        raise NotImplementedError

    def _current(self, handle: Handle) -> bool:
        """Whether a kept worker still fits (alive; an engine worker: its database files unchanged)."""
        return handle.alive()

    # -- workers ----------------------------------------------------------------------------------------------

    def prestart(self) -> None:
        """Start the spare worker if there should be one and there is none (once its start need not wait: ``first``)."""
        with self._lock:
            if self._closed or self.limits.spare_workers == 0 or self._spare is not None:
                return
        self._first(False)
        try:
            spare = self._make(spare=True)
        except (OSError, RuntimeError, ToolFailure) as exc:
            log.warning("could not start a %s worker: %s", self.kind, exc)
            return
        priority.lower(spare.process.pid)  # warm-up yields to calls: raised again when a call takes it (_acquire)
        with self._lock:
            if self._closed or self._spare is not None:
                spare.process.kill()
                return
            self._spare = spare

    def acquire(self, key: str, wait_s: float = 0.0, ctx: ToolContext | None = None) -> tuple[Handle, bool]:
        """The worker of ``key``, started when it has none (``fresh``: it has no state yet), counted as in use
        until ``release``. Concurrent first calls of a key wait for the one worker being started. A call never
        waits behind warm-up: it takes the spare as it is (ready, or still starting: then raised to normal priority
        and waited for), or a new worker; the time a start takes is ``ctx``'s ``worker_start`` (not the call's
        work: its timeout does not run meanwhile; the start has its own bound, ``start_timeout_s``)."""
        with self._lock:
            starting = self._starting.setdefault(key, threading.Lock())
        if not starting.acquire(blocking=False):
            with start_of(ctx):  # another call of the key is starting its worker: this one waits for that start
                starting.acquire()
        try:
            return self._acquire(key, time.monotonic() + wait_s, ctx)
        finally:
            starting.release()

    def _acquire(self, key: str, deadline: float, ctx: ToolContext | None = None) -> tuple[Handle, bool]:
        ended: list[Handle] = []
        while True:
            with self._lock:
                handle = self._workers.get(key)
                if handle is not None and (handle.busy or self._current(handle)):
                    handle.users += 1
                    return handle, False
                if handle is not None:
                    ended.append(self._workers.pop(key))
                full = len(self._workers) + self._reserved >= self.limits.max_workers
                if full:
                    idle = [(w.last_used, k) for k, w in self._workers.items() if w.idle()]
                    if idle:
                        _, victim = min(idle)
                        ended.append(self._workers.pop(victim))
                        self._evicted.add(victim)
                        full = False
                if not full:
                    self._reserved += 1
                    spare, self._spare = self._spare, None
                    break
            if time.monotonic() >= deadline:
                for h in ended:
                    h.process.kill()
                raise ToolFailure(
                    ErrorType.RESOURCE_ERROR,
                    "TOO_MANY_WORKERS",
                    f"all {self.limits.max_workers} {self.kind} workers of this server were busy with other "
                    "sessions until the timeout",
                    f"try again in a moment, or raise {self.kind}.max_workers",
                )
            time.sleep(0.05)  # every worker is starting or in a call: one becomes idle when it ends
        for h in ended:
            h.process.kill()
        try:
            if spare is not None and not self._current(spare):
                spare.process.kill()
                spare = None
            if spare is not None:
                priority.restore(spare.process.pid)  # a call's now: its warm-up no longer yields
            with start_of(ctx):
                if spare is None:
                    self._first(True)
                fresh = self._ready_spare(spare) if spare is not None else self._ready(self._make(spare=False))
        finally:
            with self._lock:
                self._reserved -= 1
        fresh.baseline_mb = fresh.process.rss_mb()
        with self._lock:
            self._workers[key] = fresh
            fresh.users += 1
        threading.Thread(target=self.prestart, name=f"{self.kind}-spare", daemon=True).start()
        return fresh, True

    def _ready_spare(self, spare: Handle) -> Handle:
        """The spare once it serves; a warm-up exchange still talking to it (``DuckWorkers.preread``) ends first."""
        with spare.lock:
            return self._ready(spare)

    def refresh_spare(self) -> bool:
        """Replace the spare when it no longer fits (an engine's database file changed: a dbt build), at low priority
        like any spare, so the next call — a session whose worker the change ended — takes a warm one."""
        with self._lock:
            spare = self._spare
            if spare is None or spare.users or spare.lock.locked() or self._current(spare):
                return False
            self._spare = None
        spare.process.kill()
        self.prestart()
        return True

    def release(self, handle: Handle) -> None:
        """The call that acquired ``handle`` is done with it: it may make room for another session again."""
        with self._lock:
            handle.users = max(0, handle.users - 1)
            handle.last_used = time.monotonic()

    def renew_grown(self, idle_s: float, growth_mb: float) -> int:
        """End the workers idle for ``idle_s`` seconds whose memory grew more than ``growth_mb`` past what they
        had when their session took them, when the session keeps nothing in them (``keeps_state``): an engine's
        allocator keeps much of what its queries freed (issue 40: 108 -> 230 MB after TPC-H's 22 queries twice),
        and the session's next call takes the spare instead, as if nothing had happened."""
        now = time.monotonic()
        with self._lock:
            idle = [(k, w) for k, w in self._workers.items() if w.idle() and now - w.last_used > idle_s]
        grown = [
            (k, w)
            for k, w in idle
            if w.baseline_mb is not None and not self.keeps_state(k) and w.process.rss_mb() > w.baseline_mb + growth_mb
        ]
        with self._lock:
            ended = [self._workers.pop(k) for k, w in grown if self._workers.get(k) is w and w.idle()]
        for handle in ended:
            log.info(
                "%s worker renewed: %.0f MB (%.0f MB when its session took it)",
                self.kind,
                handle.process.rss_mb(),
                handle.baseline_mb or 0,
            )
            handle.process.kill()
        return len(ended)

    def evicted(self, key: str) -> bool:
        """Whether the key's idle worker was ended to make room for another session (asked once)."""
        with self._lock:
            if key in self._evicted:
                self._evicted.discard(key)
                return True
            return False

    def discard(self, key: str, handle: Handle | None = None) -> None:
        """End the key's worker (``handle``: only if it is still that one); the next call gets a fresh one."""
        with self._lock:
            current = self._workers.get(key)
            if current is not None and (handle is None or current is handle):
                self._workers.pop(key)
        target = handle or current
        if target is not None:
            target.process.kill()

    def end_session(self, key: str) -> None:
        """The session ended: its worker (and what it held) goes with it."""
        self.discard(key)

    # -- workers lent per call --------------------------------------------------------------------------------

    def lend(self, key: str, make: Callable[[], Handle]) -> Handle:
        """An idle worker of ``key`` (a dead one is dropped on the way), else a new one from ``make``, held by the
        calling call until ``give_back``."""
        handle = None
        with self._lock:
            self._check_open()
            idle = self._idle.setdefault(key, [])
            while idle and handle is None:
                candidate = idle.pop()
                if candidate.alive():
                    handle = candidate
                else:
                    self._lent.discard(candidate)
        if handle is None:
            handle = make()
            with self._lock:
                if self._closed:
                    handle.process.kill()
                    self._check_open()
                self._lent.add(handle)
        handle.name = key
        return handle

    def give_back(self, handle: Handle) -> None:
        """The call is done with a lent worker: kept idle for its key's next call while it is alive and was not
        ended (a worker that died, was ended at a timeout or spoke out of turn was discarded where that happened)."""
        handle.busy = False
        handle.last_used = time.monotonic()
        with self._lock:
            if handle.alive() and not handle.killed and not self._closed and handle in self._lent:
                self._idle.setdefault(handle.name, []).append(handle)
                return
        self.end_lent(handle)

    def end_lent(self, handle: Handle) -> None:
        """End a lent worker now (it died, or must not serve again)."""
        handle.killed = True
        with self._lock:
            self._lent.discard(handle)
            with contextlib.suppress(ValueError):
                self._idle.get(handle.name, []).remove(handle)
        handle.process.kill()

    def drop_idle(self, key: str) -> None:
        """End the idle lent workers of ``key``."""
        with self._lock:
            idle, self._idle[key] = self._idle.get(key, []), []
            self._lent.difference_update(idle)
        for handle in idle:
            handle.process.kill()

    def _check_open(self) -> None:
        if self._closed:
            raise ToolFailure(ErrorType.TRANSIENT_ERROR, "SHUTTING_DOWN", "the server is stopping")

    # -- both -------------------------------------------------------------------------------------------------

    def reap_idle(self, idle_s: float) -> int:
        """End the workers without a call for ``idle_s`` seconds: sessions' (HTTP sessions; stdio's is kept) and
        idle lent ones."""
        now = time.monotonic()
        with self._lock:
            stale = [k for k, w in self._workers.items() if k != "default" and now - w.last_used > idle_s and w.idle()]
            handles = [self._workers.pop(k) for k in stale]
            for idle in self._idle.values():
                old = [h for h in idle if now - h.last_used > idle_s]
                for h in old:
                    idle.remove(h)
                    self._lent.discard(h)
                handles += old
        for h in handles:
            h.process.kill()
        return len(handles)

    def close(self) -> None:
        """Kill every worker at once: nothing they do is worth waiting for at shutdown."""
        with self._lock:
            self._closed = True
            handles = list(self._workers.values()) + ([self._spare] if self._spare else []) + list(self._lent)
            self._workers.clear()
            self._spare = None
            self._lent.clear()
            self._idle.clear()
        threads = [threading.Thread(target=h.process.kill, daemon=True) for h in handles]
        for t in threads:
            t.start()
        for t in threads:
            t.join(5)


def start_of(ctx: ToolContext | None) -> contextlib.AbstractContextManager[None]:
    """Where a call waits for a worker to start: not counted against its timeout (``ToolContext.worker_start``)."""
    return ctx.worker_start() if ctx is not None else contextlib.nullcontext()
