"""The server's side of the engine workers: one per session, a spare started in advance, killed at a timeout.

Every piece of untrusted work — SQL from the model, workspace files and downloaded bytes to decode — runs in
an engine worker (``engine``), a process confined like the Python sandbox (its own namespaces and read-only
minimal root, an unprivileged uid, a memory cgroup and rlimits, seccomp) in which the configured database
files exist only as read-only bind mounts. A session has one worker: its DuckDB connection keeps the
session's TEMP tables and views between calls, and no session can hold more than one worker's worth of the
machine. At a call's timeout the worker's statement is interrupted; a worker that has not answered
``interrupt_grace_s`` later is killed (the session gets a fresh one), so a timeout ends the work instead of
abandoning it. A worker that dies (a crash, an abort, the memory limit) is an ENGINE_CRASHED error naming
what ended it; the server and every other session carry on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ba_mcp.errors import ErrorType, ToolFailure, timed_out
from ba_mcp.workers import priority
from ba_mcp.workers.failures import EngineError, engine_failure, worker_failures
from ba_mcp.workers.process import WorkerProcess, read_blob
from ba_mcp.workers.spawn import confinement, ready, spawn

if TYPE_CHECKING:
    import pyarrow as pa

    from ba_mcp.settings import Settings, WorkerLimits
    from ba_mcp.tool import ToolContext

log = logging.getLogger(__name__)

__all__ = [
    "Call",
    "EngineError",
    "Engines",
    "Handle",
    "WorkerPool",
    "ask_metrics",
    "file_identity",
    "settle",
    "start_of",
]

DATABASES_DIR = "/databases"  # where a worker's root shows the configured database files


def file_identity(path: Path) -> str:
    """Changes whenever the file may have changed (a new inode, size or modification time); "" if missing."""
    try:
        st = path.stat()
    except OSError:
        return ""
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


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

    def __init__(self, limits: WorkerLimits) -> None:
        self.limits = limits
        self._workers: dict[str, Handle] = {}
        self._spare: Handle | None = None
        self._starting: dict[str, threading.Lock] = {}
        self._reserved = 0  # workers being started: counted against max_workers before they are listed
        self._evicted: set[str] = set()  # sessions whose idle worker made room for another session
        self.keeps_state: Callable[[str], bool] = lambda key: True  # whether a key's worker holds what it made
        self._idle: dict[str, list[Handle]] = {}  # lent workers waiting for their key's next call
        self._lent: set[Handle] = set()  # lent workers alive (idle or in a call)
        self._lock = threading.Lock()
        self._closed = False

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
        """Start the spare worker if there should be one and there is none."""
        with self._lock:
            if self._closed or self.limits.spare_workers == 0 or self._spare is not None:
                return
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
        """The spare once it serves; a warm-up exchange still talking to it (``Engines.preread``) ends first."""
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

    def ask(self, message: dict[str, Any], fds: list[int] | None = None) -> tuple[dict[str, Any], list[bytes]]:
        """Send one request and wait for its answer: (reply, the blobs that came with it). An error answer is
        raised: ToolFailure as it came, an engine's exception as EngineError; a dead worker as a timeout (when the
        call was cancelled) or the pool's crash error."""
        process = self.handle.process
        self.handle.busy = True
        with worker_failures(gone=self._died):
            if self.ctx is not None and self.ctx.cancelled.is_set():
                raise timed_out("the call was stopped at its timeout before it reached the worker", "retry")
            process.send(message, fds)
            reply, got = process.receive(None)
        self.handle.busy = False
        return settle(reply, got, self.max_transfer, self.discard, self.clean)

    def _died(self, exc: BaseException) -> ToolFailure:
        """The worker ended during the exchange: a timeout when the call was stopped, else the pool's crash error."""
        self.handle.busy = False
        stopped = self.handle.killed or (self.ctx is not None and self.ctx.cancelled.is_set())
        self.discard()
        return self.gone(self.handle, stopped)


def start_of(ctx: ToolContext | None) -> contextlib.AbstractContextManager[None]:
    """Where a call waits for a worker to start: not counted against its timeout (``ToolContext.worker_start``)."""
    return ctx.worker_start() if ctx is not None else contextlib.nullcontext()


def crash_limit(how: str, limits: WorkerLimits, kind: str) -> str:
    """Which limit most likely ended a worker, by how it ended."""
    if "SIGKILL" in how or "SIGABRT" in how or "SIGSEGV" in how:
        return f" — most likely its memory limit ({kind}.memory_mb = {limits.memory_mb} MB)"
    if "SIGXCPU" in how:
        return f" — its CPU time limit ({kind}.cpu_seconds = {limits.cpu_seconds})"
    return ""


class Engines(WorkerPool):
    """The engine workers of one App, one per session (its DuckDB keeps the session's TEMP objects)."""

    kind = "engine"

    def __init__(self, settings: Settings, database_paths: dict[str, Path], scratch: Path) -> None:
        super().__init__(settings.engine)
        self.settings = settings
        self.conf = settings.engine
        self.paths = database_paths  # name -> the configured file on this machine
        self.scratch = scratch
        scratch.mkdir(parents=True, exist_ok=True)
        self.prepare = lambda: None  # makes the database files exist (the demo) before a worker binds them
        self.warm: list[str] = []  # modules a worker imports once it is ready (the metrics compiler, when in use)
        # the metrics request whose model a spare reads ahead (a dbt project's manifest: MetricFlow's parse), or None
        self.warm_request: Callable[[], dict[str, Any]] | None = None

    # -- starting -----------------------------------------------------------------------------------

    def _aliases(self) -> dict[str, str]:
        used: set[str] = set()
        out: dict[str, str] = {}
        for name in sorted(self.paths):
            alias = re.sub(r"[^A-Za-z0-9_]", "_", name)[:50] or "db"
            while alias in used or alias.lower() in ("memory", "temp", "system"):
                alias += "_"
            used.add(alias)
            out[name] = alias
        return out

    def _options(self) -> tuple[dict[str, Any], dict[str, str]]:
        databases, binds, identities = [], [], {}
        for name, alias in self._aliases().items():
            host = self.paths[name]
            target = f"{DATABASES_DIR}/{alias}.duckdb"
            identities[name] = file_identity(host)
            databases.append({"name": name, "alias": alias, "path": target, "host_path": str(host)})
            if host.is_file():
                binds.append([str(host), target])
                wal = host.with_name(host.name + ".wal")
                if wal.is_file():
                    binds.append([str(wal), target + ".wal"])
        db_conf = list(self.settings.databases.values())
        options = confinement(
            self.conf,
            "engine",
            binds=binds,
            keep_capabilities=[2],  # CAP_DAC_READ_SEARCH: read the files it is handed, whatever their mode
            databases=databases,
            threads=max((d.threads for d in db_conf), default=2),
            memory_limit=_smallest([d.memory_limit for d in db_conf]) or "2GB",
        )
        return options, identities

    def _make(self, spare: bool) -> Handle:
        """A new worker; a spare (started ahead of its session, idle until one takes it) also imports ``warm``
        once ready, where a worker started for a waiting call would delay that call."""
        self.prepare()
        options, identities = self._options()
        options["warm"] = list(self.warm) if spare else []
        return Handle(spawn("engine", self.settings.sandbox, self.scratch, options, None), identities=identities)

    def _ready(self, handle: Handle) -> Handle:
        handle.protections = ready("engine", handle.process, self.conf.start_timeout_s).get("protections", [])
        return handle

    def prestart(self) -> None:
        """The spare, and (``warm_request``) its read of the metrics model ahead of any call, in the background."""
        super().prestart()
        if self.warm_request is not None:
            threading.Thread(target=self.preread, name="engine-preread", daemon=True).start()

    def preread(self) -> bool:
        """The spare reads the metrics model (``warm_request``: the files and dbt manifests, by their digest) while no
        call has it — at low priority, as a spare is; a call that takes it meanwhile raises it and waits for this
        exchange only (the model it reads is the one a metrics call needs). False when there was nothing to do."""
        with self._lock:
            spare = self._spare
        if spare is None or self.warm_request is None:
            return False
        with spare.lock:
            with self._lock:
                if self._spare is not spare:
                    return False  # a call took it first
            try:
                message = {**self.warm_request(), "action": "read", "warm": True}  # after the warm imports
                self._ready(spare)
                spare.call += 1
                Call(spare, None, spare.call, self.conf.interrupt_grace_s, 1 << 20, spare.process.kill, self._gone).ask(
                    message
                )
            except (ToolFailure, EngineError, OSError) as exc:
                log.info("the spare engine worker did not read the metrics model ahead: %s", exc)
                return False
        return True

    def renew_grown(self, idle_s: float, growth_mb: float) -> int:
        """``WorkerPool.renew_grown``; first the spare, replaced when its database files changed (``refresh_spare``)."""
        self.refresh_spare()
        return super().renew_grown(idle_s, growth_mb)

    def _current(self, handle: Handle) -> bool:
        return handle.alive() and all(file_identity(self.paths[n]) == i for n, i in handle.identities.items())

    # -- calling ------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def held(self, session: str, ctx: ToolContext | None, wait_s: float | None = None) -> Iterator[Call]:
        """The session's worker, held for one call (calls of a session take turns); ``ctx``'s timeout
        interrupts, then kills, what the worker is doing. ``wait_s``: give up (ENGINE_BUSY) when the session's
        worker is not free within that many seconds."""
        handle, _ = self.acquire(session, ctx.timeout if ctx is not None else self.conf.start_timeout_s, ctx)
        try:
            started = time.monotonic()
            while not handle.lock.acquire(timeout=0.05):
                if wait_s is not None and time.monotonic() - started > wait_s:
                    raise ToolFailure(ErrorType.TRANSIENT_ERROR, "ENGINE_BUSY", "the session's engine is busy")
                if ctx is not None and ctx.cancelled.is_set():
                    raise timed_out(
                        "the session's earlier call still held its engine until the timeout",
                        "retry shortly; the earlier call is being stopped",
                    )
            try:
                handle.call += 1
                call = Call(
                    handle,
                    ctx,
                    handle.call,
                    self.conf.interrupt_grace_s,
                    self.conf.max_transfer_mb * 1024 * 1024,
                    lambda: self.discard(session, handle),
                    self._gone,
                )
                if ctx is not None:
                    ctx.on_cancel(call.cancel)
                yield call
            finally:
                handle.busy = False
                handle.last_used = time.monotonic()
                handle.lock.release()
        finally:
            self.release(handle)

    def _gone(self, handle: Handle, stopped: bool) -> ToolFailure:
        if stopped:
            return timed_out(
                "the work was stopped at its timeout (its engine was ended; TEMP tables of this session are gone)",
                "filter or aggregate more, or read a smaller window",
            )
        how = handle.process.exit_description()
        limit = crash_limit(how, self.conf, "engine")
        if "memory" in limit:
            limit = limit[:-1] + ", DuckDB's databases.<name>.memory_limit)"
        output = handle.process.last_output(1200)
        return ToolFailure(
            ErrorType.RESOURCE_ERROR,
            "ENGINE_CRASHED",
            f"the engine worker {how}{limit}; the server and other sessions are unaffected, this session's "
            "TEMP tables are gone" + (f" (it printed: {output})" if output else ""),
            "read less at once (nrows, a LIMIT, an aggregate), or raise the limit it names",
        )

    def protections(self) -> list[list[str]]:
        """The boundary in force, as a started worker reports it (starts the spare if needed)."""
        self.prestart()
        with self._lock:
            spare = self._spare
        if spare is None:
            return []
        return self._ready_spare(spare).protections


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


_UNITS = {"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def _smallest(limits: list[str]) -> str | None:
    def size(text: str) -> float:
        m = re.match(r"^\s*([\d.]+)\s*([A-Za-z]+)\s*$", text)
        return float(m.group(1)) * _UNITS.get(m.group(2).upper(), 1) if m else float("inf")

    return min(limits, key=size) if limits else None


# -- the work the tools hand over ------------------------------------------------------------------------


def parse(
    engines: Engines,
    ctx: ToolContext,
    source: Any,
    fmt: str,
    window: Any,
    bounds: Any,
    title: str,
    encoding: str | None,
    whole: bool = False,
) -> Any:
    """A workspace file (a resolved source, held open) read by ``ba_mcp.formats`` in the session's engine
    worker: the raw result, its Arrow data checked before it is decoded here. A worker that dies while it
    parses (an allocation of a hostile spreadsheet, say) is PARSER_CRASHED. ``whole``: the whole source as a
    table, or NOT_TABULAR — decided in the worker, so no partial read is sent."""
    from ba_mcp.workers.wire import decode_raw

    message = {
        "op": "parse",
        "source": {
            "name": source.name,
            "size": source.size,
            "suffix": source.suffix,
            "kind": source.kind,
            "ref_id": source.ref_id,
        },
        "format": fmt,
        "window": {"offset": window.offset, "nrows": window.nrows, "sheet": window.sheet},
        "bounds": bounds.model_dump(),
        "title": title,
        "encoding": encoding,
        "whole": whole,  # all of it or an error, decided in the worker (nothing partial is sent)
    }
    reply, blobs = _decode(engines, ctx, message, source.fd, title[:200], 'check the format (format="text" shows it)')
    with worker_failures():
        return decode_raw(reply["raw"], blobs, engines.conf.max_transfer_mb * 1024 * 1024)


def _decode(
    engines: Engines, ctx: ToolContext, message: dict[str, Any], fd: int, what: str, hint: str
) -> tuple[dict[str, Any], list[bytes]]:
    """One decoding request in the session's worker: a worker that dies doing it is PARSER_CRASHED, an error
    of the library that decodes is BAD_DATA."""

    def unreadable(exc: EngineError) -> ToolFailure:
        detail = exc.message[:300] or exc.detail
        return ToolFailure(ErrorType.VALIDATION_ERROR, "BAD_DATA", f"{what} could not be read: {detail}", hint)

    with engines.held(ctx.session, ctx) as call:
        try:
            with worker_failures(engine=unreadable):
                return call.ask(message, [fd])
        except ToolFailure as failure:
            if failure.code == "ENGINE_CRASHED":
                raise ToolFailure(failure.type, "PARSER_CRASHED", failure.message, failure.hint) from None
            raise


def write_parquet(engines: Engines, table: pa.Table, fd: int) -> None:
    """``table`` as Parquet into ``fd``, written by the worker of the session keyed "default" (as
    ``table_stats``): the server holds no Parquet writer (issue 40). Raises when the worker cannot."""
    import pyarrow as pa

    stream = os.memfd_create("table", os.MFD_CLOEXEC)
    try:
        with open(stream, "wb", closefd=False) as out, pa.ipc.new_stream(out, table.schema) as writer:
            writer.write_table(table)  # batch by batch into the memory file: never a second copy in the server
        with engines.held("default", None, wait_s=30) as call:
            reply, _ = call.ask({"op": "write_parquet"}, [stream, fd])
    finally:
        os.close(stream)
    if int(reply["rows"]) != table.num_rows:
        raise EngineError({"message": f"the worker wrote {reply['rows']} of {table.num_rows} rows"})


def read_parquet(engines: Engines, fd: int) -> pa.Table:
    """The table of a Parquet artifact (``fd``), read by the worker of the session keyed "default" and handed
    over as an Arrow stream (checked): the server holds no Parquet reader (issue 40)."""
    from ba_mcp.workers.wire import read_arrow

    with engines.held("default", None, wait_s=30) as call:
        reply, blobs = call.ask({"op": "read_parquet"}, [fd])
    table = read_arrow(blobs[0], engines.conf.max_transfer_mb * 1024 * 1024)
    if table.num_rows != int(reply["rows"]):
        raise EngineError({"message": f"the worker read {reply['rows']} rows; the stream holds {table.num_rows}"})
    return table


def table_stats(engines: Engines, fd: int) -> tuple[dict[str, dict[str, Any]], int] | None:
    """Whole-column figures of a stored table (an open Parquet file), computed in the worker of the session
    keyed "default" (the one session of stdio; over HTTP, a worker of the server's own)."""
    try:
        with engines.held("default", None, wait_s=0.5) as call, worker_failures(engine=engine_failure):
            reply, _ = call.ask({"op": "stats"}, [fd])  # stdio's one session: its worker
    except ToolFailure as exc:
        log.warning("column figures of a stored table could not be computed: %s", exc)
        return None
    return reply["stats"], int(reply["total"])


def extract(engines: Engines, ctx: ToolContext, body: bytes, request: dict[str, Any]) -> dict[str, Any]:
    """A downloaded page or PDF's readable text, extracted in the session's engine worker (``web.extract``);
    a worker that dies or runs past the timeout is an error, not a hung server."""
    import fcntl

    fd = os.memfd_create("page", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view) :]
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
        reply, blobs = _decode(engines, ctx, {"op": "extract", **request}, fd, "the page", "try another address")
    finally:
        os.close(fd)
    reply["text"] = blobs[0].decode("utf-8", "replace") if blobs else ""
    return reply


def ask_metrics(engines: Engines, ctx: ToolContext | None, session: str, message: dict[str, Any]) -> dict[str, Any]:
    """Metrics work (``Metrics.request``) in the session's engine worker: the metric files are parsed, a query's
    predicates (text from the model) checked and compiled there, never in the server."""
    with engines.held(session, ctx) as call:
        reply, _ = call.ask(message)
    return reply
