"""The DuckDB workers: one per session, a spare started in advance, killed at a timeout.

Every piece of untrusted work — SQL from the model, workspace files and downloaded bytes to decode — runs in
a DuckDB worker (``ba_mcp.inside``), a process confined like the Python sandbox (its own namespaces and read-only
minimal root, an unprivileged uid, a memory cgroup and rlimits, seccomp) in which the configured database
files exist only as read-only bind mounts. A session has one worker: its DuckDB connection keeps the
session's TEMP tables and views between calls, and no session can hold more than one worker's worth of the
machine. At a call's timeout the worker's statement is interrupted; a worker that has not answered
``interrupt_grace_s`` later is killed (the session gets a fresh one), so a timeout ends the work instead of
abandoning it. A worker that dies (a crash, an abort, the memory limit) is an ENGINE_CRASHED error naming
what ended it; the server and every other session carry on. (The settings call them the engine workers:
``engine.*``.)
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ba_mcp import registry
from ba_mcp.errors import ErrorType, ToolFailure, timed_out
from ba_mcp.workers.call import Call, crash_limit
from ba_mcp.workers.failures import engine_failure, worker_failures
from ba_mcp.workers.pool import Handle, WorkerPool
from ba_mcp.workers.spawn import confinement, module_package, ready, spawn, unavailable

if TYPE_CHECKING:
    from ba_mcp.settings import Settings
    from ba_mcp.tool import ToolContext
    from ba_mcp.workers.messages import MetricsWork

log = logging.getLogger(__name__)

__all__ = ["DuckWorkers", "file_identity"]

DATABASES_DIR = "/databases"  # where a worker's root shows the configured database files


def file_identity(path: Path) -> str:
    """Changes whenever the file may have changed (a new inode, size or modification time); "" if missing."""
    try:
        st = path.stat()
    except OSError:
        return ""
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


class DuckWorkers(WorkerPool):
    """The DuckDB workers of one App, one per session (its DuckDB keeps the session's TEMP objects). Built with
    what they bind and import: ``paths`` (name -> a configured DuckDB file on this machine), ``prepare`` (makes
    those files exist — the demo — before a worker binds them), ``keeps_state`` (whether a session's worker holds
    what the session made: then it is never renewed) and ``warm`` (modules a spare imports once ready: the file
    readers, the metrics compiler when in use) and ``warm_request`` (the metrics request whose model a spare reads
    ahead: a dbt project's manifest, MetricFlow's parse; None: none)."""

    kind = "engine"

    def __init__(
        self,
        settings: Settings,
        scratch: Path,
        paths: dict[str, Path] | None = None,
        *,
        prepare: Callable[[], None] = lambda: None,
        keeps_state: Callable[[str], bool] = lambda key: True,
        warm: Iterable[str] = (),
        warm_request: Callable[[], MetricsWork] | None = None,
    ) -> None:
        super().__init__(settings.engine, keeps_state)
        self.settings = settings
        self.conf = settings.engine
        self.paths = dict(paths or {})
        self.scratch = scratch
        scratch.mkdir(parents=True, exist_ok=True)
        self.prepare = prepare
        self.warm = list(warm)
        self.warm_request = warm_request

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
        # the packages of the plug-ins' formats (registry.FormatInfo): their readers run here, bound into the root
        outside = [module_package(f.reader.partition(":")[0]) for f in registry.formats() if f.reader]
        options["packages"] = [*options["packages"], *(found[0] for found in outside if found is not None)]
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

    def _ready_spare(self, spare: Handle) -> Handle:
        """The spare once it serves, its read of the metrics model ahead (``preread``, which holds its lock) ended
        first — within the start's own bound (``engine.start_timeout_s``): a call's deadline is off while its worker
        starts, so a read that does not end (a stalled mount) ends with its worker, WORKER_START_TIMEOUT."""
        if not spare.lock.acquire(timeout=self.conf.start_timeout_s):
            raise unavailable("engine", spare.process, TimeoutError(), self.conf.start_timeout_s)
        try:
            return self._ready(spare)
        finally:
            spare.lock.release()

    def prestart(self) -> None:
        """The spare, and (``warm_request``) its read of the metrics model ahead of any call, in the background."""
        super().prestart()
        if self.warm_request is not None:
            threading.Thread(target=self.preread, name="engine-preread", daemon=True).start()

    def preread(self) -> bool:
        """The spare reads the metrics model (``warm_request``: the files and dbt manifests, by their digest) while no
        call has it — at low priority, as a spare is; a call that takes it meanwhile raises it and waits for this
        exchange only (the model it reads is the one a metrics call needs). False when there was nothing to do."""
        import dataclasses

        with self._lock:
            spare = self._spare
        if spare is None or self.warm_request is None:
            return False
        with spare.lock:
            with self._lock:
                if self._spare is not spare:
                    return False  # a call took it first
            try:
                request = dataclasses.replace(self.warm_request(), action="read", warm=True)  # after the warm imports
                self._ready(spare)
                spare.call += 1
                call = Call(
                    spare, None, spare.call, self.conf.interrupt_grace_s, 1 << 20, spare.process.kill, self._gone
                )
                with worker_failures(engine=engine_failure):  # the engine's own error, as a ToolFailure
                    call.ask(request)
            except (ToolFailure, OSError) as exc:
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


_UNITS = {"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def _smallest(limits: list[str]) -> str | None:
    def size(text: str) -> float:
        m = re.match(r"^\s*([\d.]+)\s*([A-Za-z]+)\s*$", text)
        return float(m.group(1)) * _UNITS.get(m.group(2).upper(), 1) if m else float("inf")

    return min(limits, key=size) if limits else None
