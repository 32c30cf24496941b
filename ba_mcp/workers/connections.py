"""The server's side of the connection workers: ADBC connections to configured databases, pooled per database.

A connection worker (``connection.Connector`` in a confined process, see ``engine.main``) holds one ADBC
connection. Connections are pooled per database and shared by sessions (no session state lives in them: each
call is its own rolled-back transaction); how many run at once is bounded by ``databases.<name>.max_concurrent``
(the slots of ``Databases``). Secrets — the URL and driver options — are sent over the worker's socket after it
started, never on its command line or in its environment, and are taken out of every message that comes back.
At a call's timeout the worker cancels the statement in the database; a worker still busy
``engine.interrupt_grace_s`` later is killed, and a connection that died is replaced on the next call.
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
from ba_mcp.sandbox_client import WorkerGone, WorkerProcess
from ba_mcp.workers.pool import EngineError, settle
from sandbox.isolation import parent_name

if TYPE_CHECKING:
    from ba_mcp.settings import DatabaseSettings, Settings
    from ba_mcp.tool import ToolContext

log = logging.getLogger(__name__)

# What a networked worker's root shows of /etc beyond the runtime's: name resolution and CA certificates.
_NETWORK_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/gai.conf", "/etc/ssl", "/etc/pki", "/etc/ca-certificates")


# a URL's query parameter that carries a credential (password=, sslpassword=, token=, client_secret=, …)
_SECRET_PARAM = re.compile(r"([?&;](?:[\w.-]*(?:pass|pwd|secret|token|key|auth|credential)[\w.-]*)=)([^&;#]*)", re.I)


def secrets_of(conf: DatabaseSettings) -> list[str]:
    """Every secret text of a database's settings (the URL, its password — in the user part or a query
    parameter, raw and percent-decoded —, the options' values), longest first."""
    from urllib.parse import unquote

    found: list[str] = []
    if conf.url is not None:
        url = conf.url.get_secret_value()
        found.append(url)
        m = re.match(r"^[a-z+]+://([^:/@]*):([^@]*)@", url)
        if m and m.group(2):
            found.append(m.group(2))
        found += [m.group(2) for m in _SECRET_PARAM.finditer(url) if m.group(2)]
        found += [unquote(s) for s in found[1:]]
    found += [v.get_secret_value() for v in conf.options.values() if v.get_secret_value()]
    return sorted({s for s in found if len(s) >= 3}, key=len, reverse=True)


def shown_url(conf: DatabaseSettings) -> str:
    """The URL with its credentials replaced (for the doctor and errors): the password of its user part and the
    value of every query parameter that carries one."""
    if conf.url is None:
        return ""
    url = re.sub(r"^([a-z+]+://[^:/@]*):[^@]*@", r"\1:***@", conf.url.get_secret_value())
    return _SECRET_PARAM.sub(r"\1***", url)


def redact(text: str, conf: DatabaseSettings) -> str:
    for secret in secrets_of(conf):
        text = text.replace(secret, "***")
    return text


@dataclass
class Connection:
    """One connection worker and what its database said at connect."""

    name: str
    process: WorkerProcess
    info: dict[str, Any] = field(default_factory=dict)
    busy: bool = False
    call: int = 0
    killed: bool = False
    last_used: float = field(default_factory=time.monotonic)


class Connections:
    """The connection workers of one App, pooled per configured database."""

    def __init__(self, settings: Settings, scratch: Path) -> None:
        self.settings = settings
        self.conf = settings.engine
        self.scratch = scratch
        self._idle: dict[str, list[Connection]] = {}
        self._lock = threading.Lock()
        self._all: set[int] = set()
        self._live: list[Connection] = []
        self._closed = False
        self.info: dict[str, dict[str, Any]] = {}  # what each database said at the last connect (version, role)

    def _options(self, name: str, conf: DatabaseSettings, host_file: Path | None) -> dict[str, Any]:
        import ba_mcp.workers as workers_package

        c = self.conf
        binds = [[p, p] for p in _NETWORK_FILES if os.path.exists(p)] if host_file is None else []
        if host_file is not None:
            binds.append([str(host_file), "/databases/" + host_file.name])
        return {
            "kind": "connection",
            "network": host_file is None,  # a file needs none; a server is reached over the network
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
            "packages": [os.path.dirname(workers_package.__path__[0])],
            "binds": binds,
            "keep_capabilities": [2] if host_file is not None else [],  # read the bound file whatever its mode
            "max_transfer_bytes": c.max_transfer_mb * 1024 * 1024,
        }

    def _connect(self, name: str, conf: DatabaseSettings, engine: Any, host_file: Path | None) -> Connection:
        process = WorkerProcess(
            self.settings.sandbox, self.scratch, module="ba_mcp.workers", options=self._options(name, conf, host_file)
        )
        connection = Connection(name, process)
        try:
            process.wait_ready(self.conf.start_timeout_s)
        except (WorkerGone, TimeoutError) as exc:
            output = process.last_output()
            process.kill()
            raise ToolFailure(
                ErrorType.DEPENDENCY_ERROR,
                "ENGINE_UNAVAILABLE",
                f"the connection worker could not start ({exc})" + (f"; it printed: {output[-600:]}" if output else ""),
                "run `ba-mcp doctor` on the server's machine",
            ) from None
        message = engine.connect_message(conf, host_file)  # the engine's: the worker knows none
        try:
            try:
                connection.info = self._ask(connection, None, conf, message)[0]
            except EngineError as exc:
                failure = connect_failure(exc, name, conf, engine)
                if failure.code != "DATABASE_UNAVAILABLE":
                    raise failure from None
                time.sleep(0.25)  # a transient failure to connect is tried once more, by the same worker
                try:
                    connection.info = self._ask(connection, None, conf, message)[0]
                except EngineError as again:
                    raise connect_failure(again, name, conf, engine) from None
        except BaseException:
            process.kill()
            raise
        with self._lock:
            self._live.append(connection)
            self.info[name] = dict(connection.info)
        return connection

    @contextlib.contextmanager
    def connection(
        self, name: str, conf: DatabaseSettings, engine: Any, ctx: ToolContext | None, host_file: Path | None = None
    ) -> Iterator[Session]:
        """A connection to database ``name`` for one call (an idle one, or a new one); the caller holds one of
        the database's slots. ``engine`` (a ``databases.connector.ConnectedEngine``) says what the worker's
        ``connect`` holds and reads the database's messages. ``ctx``'s timeout cancels the statement in the
        database, then ends the worker."""
        with self._lock:
            if self._closed:
                raise ToolFailure(ErrorType.TRANSIENT_ERROR, "SHUTTING_DOWN", "the server is stopping")
            idle = self._idle.setdefault(name, [])
            connection = None
            while idle:
                candidate = idle.pop()
                if candidate.process.alive():
                    connection = candidate
                    break
                self._forget(candidate)
        if connection is None:
            connection = self._connect(name, conf, engine, host_file)
        connection.call += 1
        session = Session(self, connection, conf, ctx, connection.call)
        if ctx is not None:
            ctx.on_cancel(session.cancel)
        try:
            yield session
        finally:
            # a database's error leaves the connection usable (the worker rolls back before the next call);
            # a worker that died, was ended at a timeout or spoke out of turn was discarded where that happened
            connection.busy = False
            connection.last_used = time.monotonic()
            if connection.process.alive() and not connection.killed:
                with self._lock:
                    if not self._closed:
                        self._idle[name].append(connection)
                        connection = None  # type: ignore[assignment]
            if connection is not None:
                self._discard(connection)

    def _forget(self, connection: Connection) -> None:
        with contextlib.suppress(ValueError):
            self._live.remove(connection)

    def _discard(self, connection: Connection) -> None:
        with self._lock:
            self._forget(connection)
            with contextlib.suppress(ValueError):
                self._idle.get(connection.name, []).remove(connection)
        connection.process.kill()

    def _ask(
        self,
        connection: Connection,
        ctx: ToolContext | None,
        conf: DatabaseSettings,
        message: dict[str, Any],
        fds: list[int] | None = None,
    ) -> tuple[dict[str, Any], list[bytes]]:
        process = connection.process
        limit = self.conf.max_transfer_mb * 1024 * 1024
        connection.busy = True
        try:
            if ctx is not None and ctx.cancelled.is_set():
                raise timed_out("the call was stopped at its timeout before it reached the database", "retry")
            process.send(message, fds)
            reply, got = process.receive(None)
        except WorkerGone:
            connection.busy = False
            self._discard(connection)
            if connection.killed or (ctx is not None and ctx.cancelled.is_set()):
                raise timed_out(
                    "the statement was stopped at its timeout (the database did not stop it in time: its "
                    "connection was ended)",
                    "filter or aggregate more, or pass a longer timeout",
                ) from None
            raise ToolFailure(
                ErrorType.RESOURCE_ERROR,
                "ENGINE_CRASHED",
                f"the connection worker {process.exit_description()} — most likely its memory limit "
                f"(engine.memory_mb = {self.conf.memory_mb} MB)",
                "fetch fewer rows at once (max_rows, LIMIT, an aggregate)",
            ) from None
        connection.busy = False
        return settle(reply, got, limit, lambda: self._discard(connection), lambda text: redact(text, conf))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            live, self._live = list(self._live), []
            self._idle.clear()
        threads = [threading.Thread(target=c.process.kill, daemon=True) for c in live]
        for t in threads:
            t.start()
        for t in threads:
            t.join(5)

    def drop_idle(self, name: str) -> None:
        """End the idle connections of database ``name``."""
        with self._lock:
            idle, self._idle[name] = self._idle.get(name, []), []
            for c in idle:
                self._forget(c)
        for c in idle:
            c.process.kill()

    def reap_idle(self, idle_s: float) -> int:
        now = time.monotonic()
        with self._lock:
            stale = [c for idle in self._idle.values() for c in idle if now - c.last_used > idle_s]
            for c in stale:
                self._idle[c.name].remove(c)
                self._forget(c)
        for c in stale:
            c.process.kill()
        return len(stale)


@dataclass
class Session:
    """One call's use of a connection."""

    pool: Connections
    connection: Connection
    conf: DatabaseSettings
    ctx: ToolContext | None
    number: int

    def ask(self, message: dict[str, Any], fds: list[int] | None = None) -> tuple[dict[str, Any], list[bytes]]:
        return self.pool._ask(self.connection, self.ctx, self.conf, message, fds)

    def discard(self) -> None:
        """End this connection (its database connection is gone): the next call gets a new one."""
        self.connection.killed = True
        self.pool._discard(self.connection)

    def cancel(self) -> None:
        """The call's timeout: cancel in the database now; end the worker after the grace if still busy."""
        c = self.connection
        if not c.busy or c.call != self.number:
            return
        c.process.interrupt()
        timer = threading.Timer(self.pool.conf.interrupt_grace_s, self._kill_if_still_busy)
        timer.daemon = True
        timer.start()

    def _kill_if_still_busy(self) -> None:
        c = self.connection
        if c.busy and c.call == self.number:
            c.killed = True
            self.pool._discard(c)


def connect_failure(exc: EngineError, name: str, conf: DatabaseSettings, engine: Any) -> ToolFailure:
    """A connection that could not be made: unreachable, or refused credentials — naming the setting."""
    text = engine.message(exc)
    state = exc.sqlstate
    if state.startswith("28") or "password authentication failed" in text or "authentication" in text.lower():
        return ToolFailure(
            ErrorType.PERMISSION_DENIED,
            "DATABASE_AUTH",
            f"database '{name}' refused the credentials: {text}",
            f"check the user and password in databases.{name}.url ({shown_url(conf)})",
        )
    return ToolFailure(
        ErrorType.DEPENDENCY_ERROR,
        "DATABASE_UNAVAILABLE",
        f"database '{name}' could not be reached: {text}",
        f"check that it is running and databases.{name}.url ({shown_url(conf) or 'its options'}) names it",
    )
