"""The server's side of the connection workers: ADBC connections to configured databases, lent per call by the one
pool (``pool.WorkerPool``), keyed by database.

A connection worker (``worker.connection``, in a confined process) holds one ADBC connection. Connections are kept
per database and shared by sessions (no session state lives in them: each
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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ba_mcp.errors import ErrorType, ToolFailure, timed_out
from ba_mcp.workers.failures import EngineError, worker_failures
from ba_mcp.workers.pool import Call, Handle, WorkerPool, crash_limit
from ba_mcp.workers.spawn import confinement, module_package, ready, spawn

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
    found += conf.expanded()  # what ${VAR} gave: a user name, a host, a token — none is shown
    return sorted({s for s in found if len(s) >= 3}, key=len, reverse=True)


def shown_url(conf: DatabaseSettings) -> str:
    """The URL with its credentials replaced (for the doctor and errors): the password of its user part and the
    value of every query parameter that carries one; where the configuration named variables, as written."""
    if conf.url is None:
        return ""
    # as written when it named variables (``${PGUSER}``: the name, never the value)
    url = conf.written("url") or conf.url.get_secret_value()
    url = re.sub(r"^([a-z+]+://[^:/@]*):[^@]*@", r"\1:***@", url)
    return _SECRET_PARAM.sub(r"\1***", url)


def redact(text: str, conf: DatabaseSettings) -> str:
    for secret in secrets_of(conf):
        text = text.replace(secret, "***")
    return text


class Connections(WorkerPool):
    """The connection workers of one App — the one pool's workers lent per call, keyed by configured database: a
    connection is held by one call at a time (``connection``), then kept idle for the next call to the same
    database, up to the database's slots."""

    kind = "connection"

    def __init__(self, settings: Settings, scratch: Path) -> None:
        super().__init__(settings.engine)
        self.settings = settings
        self.conf = settings.engine
        self.scratch = scratch
        self.info: dict[str, dict[str, Any]] = {}  # what each database said at the last connect (version, role)

    def _options(self, host_file: Path | None, message: dict[str, Any]) -> dict[str, Any]:
        binds = [[p, p] for p in _NETWORK_FILES if os.path.exists(p)] if host_file is None else []
        if host_file is not None:
            binds.append([str(host_file), "/databases/" + host_file.name])
        options = confinement(
            self.conf,
            "connection",
            network=host_file is None,  # a file needs none; a server is reached over the network
            binds=binds,
            keep_capabilities=[2] if host_file is not None else [],  # read the bound file whatever its mode
        )
        outside = module_package(str(message["engine"]))  # an engine registered from outside ba_mcp
        if outside is not None:
            options["packages"] = [*options["packages"], outside[0]]
            message["path"] = outside[1]
        return options

    def _connect(self, name: str, conf: DatabaseSettings, engine: Any, host_file: Path | None) -> Handle:
        message = engine.connect_message(conf, host_file)  # the engine's: the worker knows none
        process = spawn("connection", self.settings.sandbox, self.scratch, self._options(host_file, message), None)
        handle = Handle(process, name=name)
        try:
            ready("connection", process, self.conf.start_timeout_s)

            def refused(exc: EngineError) -> ToolFailure:
                return connect_failure(exc, name, conf, engine)

            try:
                with worker_failures(engine=refused):
                    handle.info = self._call(handle, None, conf).ask(message)[0]
            except ToolFailure as failure:
                if failure.code != "DATABASE_UNAVAILABLE":
                    raise
                time.sleep(0.25)  # a transient failure to connect is tried once more, by the same worker
                with worker_failures(engine=refused):
                    handle.info = self._call(handle, None, conf).ask(message)[0]
        except BaseException:
            process.kill()
            raise
        self.info[name] = dict(handle.info)
        return handle

    def _call(self, handle: Handle, ctx: ToolContext | None, conf: DatabaseSettings) -> Call:
        return Call(
            handle,
            ctx,
            handle.call,
            self.conf.interrupt_grace_s,
            self.conf.max_transfer_mb * 1024 * 1024,
            lambda: self.end_lent(handle),
            self._gone,
            lambda text: redact(text, conf),
        )

    def _gone(self, handle: Handle, stopped: bool) -> ToolFailure:
        if stopped:
            return timed_out(
                "the statement was stopped at its timeout (the database did not stop it in time: its "
                "connection was ended)",
                "filter or aggregate more",
            )
        how = handle.process.exit_description()
        return ToolFailure(
            ErrorType.RESOURCE_ERROR,
            "ENGINE_CRASHED",
            f"the connection worker {how}{crash_limit(how, self.conf, 'engine')}",
            "fetch fewer rows at once (max_rows, LIMIT, an aggregate)",
        )

    @contextlib.contextmanager
    def connection(
        self, name: str, conf: DatabaseSettings, engine: Any, ctx: ToolContext | None, host_file: Path | None = None
    ) -> Iterator[Call]:
        """A connection to database ``name`` for one call (an idle one, or a new one); the caller holds one of
        the database's slots. ``engine`` (a ``databases.connector.ConnectedEngine``) says what the worker's
        ``connect`` holds and reads the database's messages. ``ctx``'s timeout cancels the statement in the
        database, then ends the worker."""
        handle = self.lend(name, lambda: self._connect(name, conf, engine, host_file))
        handle.call += 1
        call = self._call(handle, ctx, conf)
        if ctx is not None:
            ctx.on_cancel(call.cancel)
        try:
            yield call
        finally:
            # a database's error leaves the connection usable (the worker rolls back before the next call)
            self.give_back(handle)


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
