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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ba_mcp.errors import ErrorType, ToolFailure, timed_out
from ba_mcp.sandbox_client import BadBlob, WorkerGone, WorkerProcess, read_blob
from sandbox.isolation import parent_name

if TYPE_CHECKING:
    from ba_mcp.settings import Settings
    from ba_mcp.tool import ToolContext

log = logging.getLogger(__name__)

__all__ = ["Call", "EngineError", "Engines", "Handle", "ask_metrics", "file_identity", "settle"]

DATABASES_DIR = "/databases"  # where a worker's root shows the configured database files


def file_identity(path: Path) -> str:
    """Changes whenever the file may have changed (a new inode, size or modification time); "" if missing."""
    try:
        st = path.stat()
    except OSError:
        return ""
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


@dataclass
class Handle:
    """One engine worker and what it was started with."""

    process: WorkerProcess
    identities: dict[str, str]  # the database files' identities when it was started (a change restarts it)
    lock: threading.Lock = field(default_factory=threading.Lock)
    call: int = 0  # the current call's number (a late kill timer must not end the next call)
    busy: bool = False
    last_used: float = field(default_factory=time.monotonic)
    protections: list[list[str]] = field(default_factory=list)


class Engines:
    """The engine workers of one App, by session key."""

    def __init__(self, settings: Settings, database_paths: dict[str, Path], scratch: Path) -> None:
        self.settings = settings
        self.conf = settings.engine
        self.paths = database_paths  # name -> the configured file on this machine
        self.scratch = scratch
        scratch.mkdir(parents=True, exist_ok=True)
        self._workers: dict[str, Handle] = {}
        self._spare: Handle | None = None
        self._starting: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self._closed = False
        self.prepare = lambda: None  # makes the database files exist (the demo) before a worker binds them
        self.warm: list[str] = []  # modules a worker imports once it is ready (the metrics compiler, when in use)

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
        import ba_mcp.workers as workers_package

        c = self.conf
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
        options = {
            "network": False,
            "cgroup_parent": parent_name(os.getpid()),
            "uid": c.uid,
            "gid": c.gid,
            "disk_mb": c.disk_mb,
            "memory_mb": c.memory_mb,
            "address_space_if_no_cgroup": True,
            "max_processes": 64,
            "max_file_mb": c.disk_mb,
            "cpu_seconds": c.cpu_seconds,
            "cpus": c.cpus or os.cpu_count() or 1,
            "packages": [os.path.dirname(workers_package.__path__[0])],  # ba_mcp, where Python imports it from
            "binds": binds,
            "keep_capabilities": [2],  # CAP_DAC_READ_SEARCH: read the files it is handed, whatever their mode
            "databases": databases,
            "max_transfer_bytes": c.max_transfer_mb * 1024 * 1024,
            "threads": max((d.threads for d in db_conf), default=2),
            "memory_limit": _smallest([d.memory_limit for d in db_conf]) or "2GB",
        }
        return options, identities

    def _spawn(self, spare: bool = False) -> Handle:
        """A new worker; a spare (started ahead of its session, idle until one takes it) also imports
        ``warm`` once ready, where a worker started for a waiting call would delay that call."""
        self.prepare()
        options, identities = self._options()
        options["warm"] = list(self.warm) if spare else []
        process = WorkerProcess(self.settings.sandbox, self.scratch, module="ba_mcp.workers", options=options)
        return Handle(process, identities)

    def _ready(self, handle: Handle) -> Handle:
        try:
            ready = handle.process.wait_ready(self.conf.start_timeout_s)
        except (WorkerGone, TimeoutError) as exc:
            output = handle.process.last_output()
            handle.process.kill()
            raise ToolFailure(
                ErrorType.DEPENDENCY_ERROR,
                "ENGINE_UNAVAILABLE",
                f"the engine worker could not start ({exc})" + (f"; it printed: {output[-600:]}" if output else ""),
                "run `ba-mcp doctor` on the server's machine",
            ) from None
        handle.protections = ready.get("protections", [])
        return handle

    def prestart(self) -> None:
        """Start the spare worker if there should be one and there is none."""
        with self._lock:
            if self._closed or self.conf.spare_workers == 0 or self._spare is not None:
                return
        try:
            spare = self._spawn(spare=True)
        except (OSError, RuntimeError) as exc:
            log.warning("could not start an engine worker: %s", exc)
            return
        with self._lock:
            if self._closed or self._spare is not None:
                spare.process.kill()
                return
            self._spare = spare

    def _current(self, handle: Handle) -> bool:
        return handle.process.alive() and all(file_identity(self.paths[n]) == i for n, i in handle.identities.items())

    def acquire(self, session: str) -> Handle:
        """The session's worker (started when it has none, or when a database file changed since)."""
        with self._lock:
            starting = self._starting.setdefault(session, threading.Lock())
        with starting:
            with self._lock:
                handle = self._workers.get(session)
                if handle is not None and (handle.busy or self._current(handle)):
                    return handle
                if handle is not None:
                    self._workers.pop(session)
                if len(self._workers) >= self.conf.max_workers:
                    self._evict_idle_locked()
                if len(self._workers) >= self.conf.max_workers:
                    running = sum(h.busy for h in self._workers.values())
                    raise ToolFailure(
                        ErrorType.RESOURCE_ERROR,
                        "TOO_MANY_WORKERS",
                        f"all {self.conf.max_workers} engine workers of this server are busy with other sessions "
                        f"({running} running a statement, {len(self._workers) - running} finishing a call)",
                        "try again shortly, or raise engine.max_workers",
                    )
                spare, self._spare = self._spare, None
            if handle is not None:
                handle.process.kill()
            if spare is not None and not self._current(spare):
                spare.process.kill()
                spare = None
            fresh = self._ready(spare or self._spawn())
            with self._lock:
                self._workers[session] = fresh
            threading.Thread(target=self.prestart, name="engine-spare", daemon=True).start()
            return fresh

    def _evict_idle_locked(self) -> None:
        """Make room by ending the least recently used worker that is not in a call."""
        idle = [(h.last_used, key) for key, h in self._workers.items() if not h.busy and not h.lock.locked()]
        if idle:
            _, key = min(idle)
            self._workers.pop(key).process.kill()

    # -- calling ------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def session(self, session: str, ctx: ToolContext | None, wait_s: float | None = None) -> Iterator[Call]:
        """The session's worker, held for one call (calls of a session take turns); ``ctx``'s timeout
        interrupts, then kills, what the worker is doing. ``wait_s``: give up (ENGINE_BUSY) when the session's
        worker is not free within that many seconds."""
        handle = self.acquire(session)
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
            call = Call(self, session, handle, ctx, handle.call)
            if ctx is not None:
                ctx.on_cancel(call.cancel)
            yield call
        finally:
            handle.busy = False
            handle.last_used = time.monotonic()
            handle.lock.release()

    def end_session(self, session: str) -> None:
        """The session ended: its worker (and what its TEMP objects held) goes with it."""
        with self._lock:
            handle = self._workers.pop(session, None)
        if handle is not None:
            handle.process.kill()

    def discard(self, session: str, handle: Handle) -> None:
        with self._lock:
            if self._workers.get(session) is handle:
                self._workers.pop(session)
        handle.process.kill()

    def reap_idle(self, idle_s: float) -> int:
        now = time.monotonic()
        with self._lock:
            stale = [
                k for k, h in self._workers.items() if now - h.last_used > idle_s and not h.busy and not h.lock.locked()
            ]
            handles = [self._workers.pop(k) for k in stale]
        for h in handles:
            h.process.kill()
        return len(stale)

    def protections(self) -> list[list[str]]:
        """The boundary in force, as a started worker reports it (starts the spare if needed)."""
        self.prestart()
        with self._lock:
            spare = self._spare
        if spare is None:
            return []
        return self._ready(spare).protections

    def close(self) -> None:
        """Kill every worker at once: nothing they do is worth waiting for at shutdown."""
        with self._lock:
            self._closed = True
            handles = list(self._workers.values()) + ([self._spare] if self._spare else [])
            self._workers.clear()
            self._spare = None
        threads = [threading.Thread(target=h.process.kill, daemon=True) for h in handles]
        for t in threads:
            t.start()
        for t in threads:
            t.join(5)


@dataclass
class Call:
    """One call's use of a session's worker."""

    engines: Engines
    session: str
    handle: Handle
    ctx: ToolContext | None
    number: int
    killed: bool = False

    def cancel(self) -> None:
        """The call's timeout: interrupt now, kill after the grace if the worker is still on this call."""
        if not self.handle.busy or self.handle.call != self.number:
            return
        self.handle.process.interrupt()
        timer = threading.Timer(self.engines.conf.interrupt_grace_s, self._kill_if_still_busy)
        timer.daemon = True
        timer.start()

    def _kill_if_still_busy(self) -> None:
        if self.handle.busy and self.handle.call == self.number:
            self.killed = True
            self.engines.discard(self.session, self.handle)

    def ask(self, message: dict[str, Any], fds: list[int] | None = None) -> tuple[dict[str, Any], list[bytes]]:
        """Send one request and wait for its answer: (reply, the blobs that came with it). An error answer is
        raised: ToolFailure as it came, an engine error as EngineError; a dead worker as a timeout (when the
        call was cancelled) or ENGINE_CRASHED."""
        process = self.handle.process
        limit = self.engines.conf.max_transfer_mb * 1024 * 1024
        self.handle.busy = True
        try:
            if self.ctx is not None and self.ctx.cancelled.is_set():
                raise timed_out("the call was stopped at its timeout before it reached the engine", "retry")
            process.send(message, fds)
            reply, got = process.receive(None)
        except WorkerGone:
            self.handle.busy = False
            raise self._gone() from None
        self.handle.busy = False
        return settle(reply, got, limit, lambda: self.engines.discard(self.session, self.handle))

    def _gone(self) -> ToolFailure:
        process = self.handle.process
        self.engines.discard(self.session, self.handle)
        if self.killed or (self.ctx is not None and self.ctx.cancelled.is_set()):
            return timed_out(
                "the work was stopped at its timeout (its engine was ended; TEMP tables of this session are gone)",
                "filter or aggregate more, read a smaller window, or pass a longer timeout",
            )
        how = process.exit_description()
        limit = ""
        if "SIGKILL" in how or "SIGABRT" in how or "SIGSEGV" in how:
            limit = (
                f" — most likely its memory limit (engine.memory_mb = {self.engines.conf.memory_mb} MB, "
                "DuckDB's databases.<name>.memory_limit)"
            )
        elif "SIGXCPU" in how:
            limit = f" — its CPU time limit (engine.cpu_seconds = {self.engines.conf.cpu_seconds})"
        output = process.last_output(1200)
        return ToolFailure(
            ErrorType.RESOURCE_ERROR,
            "ENGINE_CRASHED",
            f"the engine worker {how}{limit}; the server and other sessions are unaffected, this session's "
            "TEMP tables are gone" + (f" (it printed: {output})" if output else ""),
            "read less at once (nrows, a LIMIT, an aggregate), or raise the limit it names",
        )


class EngineError(Exception):
    """An engine exception raised in the worker: its class names (most specific first) and message."""

    def __init__(self, info: dict[str, Any]) -> None:
        super().__init__(info.get("message", ""))
        self.classes: list[str] = list(info.get("classes", []))
        self.message: str = str(info.get("message", ""))
        self.detail: str = str(info.get("detail", ""))
        self.sqlstate: str = str(info.get("sqlstate", ""))  # a database's own error code (ADBC drivers)


def settle(
    reply: dict[str, Any], got: list[int], limit: int, discard: Any, clean: Any = lambda text: text
) -> tuple[dict[str, Any], list[bytes]]:
    """A worker's answer as the server takes it: the blobs that came with it read from their sealed memory files
    (size-checked; anything else ends the worker through ``discard``, ENGINE_PROTOCOL), the descriptors closed,
    and an error answer raised — a ToolFailure as it came, an engine's exception as EngineError — with ``clean``
    applied to what a worker wrote (a connection's secrets)."""
    try:
        blobs = [read_blob(fd, limit) for fd in got]
    except BadBlob as exc:
        discard()
        raise ToolFailure(ErrorType.EXECUTION_ERROR, "ENGINE_PROTOCOL", str(exc)) from None
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
                str(f.get("hint") or ""),
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
    from ba_mcp.workers.wire import BadStream, decode_raw

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
    try:
        return decode_raw(reply["raw"], blobs, engines.conf.max_transfer_mb * 1024 * 1024)
    except BadStream as exc:
        raise ToolFailure(ErrorType.EXECUTION_ERROR, "ENGINE_PROTOCOL", str(exc)) from None


def _decode(
    engines: Engines, ctx: ToolContext, message: dict[str, Any], fd: int, what: str, hint: str
) -> tuple[dict[str, Any], list[bytes]]:
    """One decoding request in the session's worker: a worker that dies doing it is PARSER_CRASHED, an error
    of the library that decodes is BAD_DATA."""
    with engines.session(ctx.session, ctx) as call:
        try:
            return call.ask(message, [fd])
        except ToolFailure as failure:
            if failure.code == "ENGINE_CRASHED":
                raise ToolFailure(failure.type, "PARSER_CRASHED", failure.message, failure.hint) from None
            raise
        except EngineError as exc:
            detail = exc.message[:300] or exc.detail
            raise ToolFailure(
                ErrorType.VALIDATION_ERROR, "BAD_DATA", f"{what} could not be read: {detail}", hint
            ) from None


def table_stats(engines: Engines, fd: int) -> tuple[dict[str, dict[str, Any]], int] | None:
    """Whole-column figures of a stored table (an open Parquet file), computed in the worker of the session
    keyed "default" (the one session of stdio; over HTTP, a worker of the server's own)."""
    try:
        with engines.session("default", None, wait_s=0.5) as call:  # stdio's one session: its worker
            reply, _ = call.ask({"op": "stats"}, [fd])
    except (ToolFailure, EngineError) as exc:
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
    with engines.session(session, ctx) as call:
        reply, _ = call.ask(message)
    return reply
