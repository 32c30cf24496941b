"""The server's side of the connection workers: ADBC connections to configured databases, lent per call by the one
pool (``pool.WorkerPool``), keyed by database.

A connection worker (``inside.connection``, in a confined process) holds one ADBC connection. Connections are kept
per database and shared by sessions (no session state lives in them: each
call is its own rolled-back transaction); how many run at once is bounded by ``databases.<name>.max_concurrent``
(the slots of ``Databases``). Secrets — the URL and driver options — are sent over the worker's socket after it
started, never on its command line or in its environment, and are taken out of every message that comes back.
At a call's timeout the worker cancels the statement in the database; a worker still busy
``engine.interrupt_grace_s`` later is killed, and a connection that died is replaced on the next call.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ba_mcp import redaction
from ba_mcp.errors import ErrorType, ToolFailure, timed_out
from ba_mcp.workers.call import Call, crash_limit
from ba_mcp.workers.failures import EngineError, worker_failures
from ba_mcp.workers.pool import Handle, WorkerPool, start_of
from ba_mcp.workers.spawn import confinement, module_package, ready, spawn

if TYPE_CHECKING:
    from ba_mcp.settings import DatabaseSettings, Settings
    from ba_mcp.tool import ToolContext

log = logging.getLogger(__name__)

# What a networked worker's root shows of /etc beyond the runtime's: name resolution and CA certificates.
_NETWORK_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/gai.conf", "/etc/ssl", "/etc/pki", "/etc/ca-certificates")


def secrets_of(conf: DatabaseSettings) -> list[str]:
    """Every secret text of a database's settings, longest first: the URL whole, its user part and password (up to
    the URL's last ``@``) and its credential query parameters — each raw, percent-decoded and encoded
    (``redaction.url_secrets``) —, the options' values, and what ``${VAR}`` gave (a user name, a host, a token)."""
    found: list[str] = []
    if conf.url is not None:
        url = conf.url.get_secret_value()
        found += [url, *redaction.url_secrets(url)]
    found += [v.get_secret_value() for v in conf.options.values() if v.get_secret_value()]
    found += conf.expanded()  # what ${VAR} gave: a user name, a host, a token — none is shown
    return sorted({s for s in found if len(s) >= 3}, key=len, reverse=True)


def register_secrets(conf: DatabaseSettings) -> None:
    """The database's credentials, taken out of every message this process shows from now on (``redaction``): its
    URL's user part, password and credential parameters, its options' values. (What ``${VAR}`` gave a host or a
    database name is taken out of this database's own messages only: ``redact``.)"""
    url = conf.url.get_secret_value() if conf.url is not None else ""
    options = [v.get_secret_value() for v in conf.options.values() if v.get_secret_value()]
    redaction.register([*(redaction.url_secrets(url) if url else []), *options])


def shown_url(conf: DatabaseSettings) -> str:
    """The URL fit to show (for the doctor and errors; ``redaction.masked_url``): its user part masked up to the
    URL's last ``@`` — the user kept only when it is plainly a user name — and the value of every query parameter
    that carries a credential; where the configuration named variables, as written."""
    if conf.url is None:
        return ""
    # as written when it named variables (``${PGUSER}``: the name, never the value)
    return redaction.masked_url(conf.written("url") or conf.url.get_secret_value())


def redact(text: str, conf: DatabaseSettings) -> str:
    """``text`` without any secret of ``conf`` (nor any registered one): ``redaction.redact``."""
    return redaction.redact(text, secrets_of(conf))


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
        self._warned: set[tuple[str, str]] = set()  # the connect's warnings already logged
        for conf in settings.databases.values():  # no message of this process shows their credentials
            register_secrets(conf)

    def _options(self, host_file: Path | None, engine: str) -> tuple[dict[str, Any], str | None]:
        """The worker's confinement, and the folder of ``engine``'s package when it is outside ba_mcp (bound into
        the worker's root, put on its path at connect)."""
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
        outside = module_package(engine)  # an engine registered from outside ba_mcp
        if outside is None:
            return options, None
        options["packages"] = [*options["packages"], outside[0]]
        return options, outside[1]

    def _connect(
        self, name: str, conf: DatabaseSettings, engine: Any, host_file: Path | None, ctx: ToolContext | None = None
    ) -> Handle:
        bad_url = url_refusal(name, conf)
        if bad_url is not None:
            raise bad_url
        # the file as the server opened it: its real path is bound, and the worker opens it only if it is that file
        opened = open_host_file(name, conf, host_file, bool(getattr(engine, "folder", False)))
        real = opened[0] if opened is not None else None
        message = engine.connect_message(conf, real)  # the engine's: the worker knows none
        options, path = self._options(real, message.engine)
        identity = list(opened[1]) if opened is not None else None
        message = dataclasses.replace(message, identity=identity, path=path)
        process = spawn("connection", self.settings.sandbox, self.scratch, options, None)
        handle = Handle(process, name=name)
        try:
            with start_of(ctx):  # the worker's start is not the call's work (the connect that follows is)
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
        for warning in handle.info.get("warnings") or []:  # said once per server, on stderr (the doctor says it too)
            if (name, warning) not in self._warned:
                self._warned.add((name, warning))
                log.warning("database %s: %s", name, redact(str(warning), conf))
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
        handle = self.lend(name, lambda: self._connect(name, conf, engine, host_file, ctx))
        handle.call += 1
        call = self._call(handle, ctx, conf)
        if ctx is not None:
            ctx.on_cancel(call.cancel)
        try:
            yield call
        finally:
            # a database's error leaves the connection usable (the worker rolls back before the next call)
            self.give_back(handle)


def url_refusal(name: str, conf: DatabaseSettings) -> ToolFailure | None:
    """BAD_DATABASE_URL for a URL whose user part holds a character a URL reserves (``redaction.unsure``): drivers
    split it elsewhere (libpq at its first ``@``) and would show the rest of the password; no driver is given it."""
    if not redaction.unsure(conf.url.get_secret_value() if conf.url is not None else ""):
        return None
    return ToolFailure(
        ErrorType.INVALID_PARAMETERS,
        "BAD_DATABASE_URL",
        f"the user or password in databases.{name}.url holds a character a URL reserves (@ # / ?), so drivers read "
        "it differently — percent-encode the password",
        redaction.PERCENT_ENCODE_HINT,
    )


def open_host_file(
    name: str, conf: DatabaseSettings, host_file: Path | None, folder: bool
) -> tuple[Path, list[int]] | None:
    """The database's file (or folder) on this machine as the server opens it for the worker to bind: its real path
    and its identity (device, inode) — None for a server over the network. An unapproved project file's database
    (``conf.beneath()``) is opened beneath the project's folder following no symbolic link at any step
    (``workspace.open_beneath``: ``openat2`` with ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS``), so a link in the project
    to ``~/.ssh/…`` — made before or after the configuration was read — is refused; the operator's is opened as
    configured (links followed). The worker binds the real path and opens what it bound only when it is this very
    file (``LocalEngine.where``): a link swapped in between is refused there."""
    if host_file is None:
        return None
    from ba_mcp.workspace import open_beneath

    what = "folder" if folder else "file"
    folder_of = conf.beneath()
    try:
        if folder_of is None:
            fd = os.open(host_file, os.O_PATH | os.O_CLOEXEC | (os.O_DIRECTORY if folder else 0))
        else:
            relative = os.path.relpath(host_file, folder_of)
            if relative == ".." or relative.startswith("../") or os.path.isabs(relative):
                raise OSError(errno.EXDEV, "outside the project")
            root = os.open(folder_of, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                fd = open_beneath(root, relative, directory=folder)
            finally:
                os.close(root)
    except OSError as exc:
        why = {
            errno.ELOOP: "is a symbolic link or lies beneath one, which a project file's database may not",
            errno.EXDEV: "lies outside the project",
            errno.ENOENT: "does not exist",
            errno.ENOTDIR: f"is not a {what}",
        }.get(exc.errno or 0, f"cannot be opened ({exc.strerror})")
        hint = (
            f"the project's ba-mcp.yaml names it: put the {what} itself inside the project, or approve the file "
            "(ba-mcp config trust)"
            if folder_of is not None
            else f"check databases.{name}.url"
        )
        raise ToolFailure(
            ErrorType.PERMISSION_DENIED if folder_of is not None else ErrorType.DEPENDENCY_ERROR,
            "DATABASE_FILE_REFUSED" if folder_of is not None else "DATABASE_MISSING",
            f"the {what} of database '{name}' {why}",
            hint,
        ) from None
    try:
        found = os.fstat(fd)
        real = Path(os.readlink(f"/proc/self/fd/{fd}"))
    finally:
        os.close(fd)
    if not (stat.S_ISDIR(found.st_mode) if folder else stat.S_ISREG(found.st_mode)):
        raise ToolFailure(
            ErrorType.DEPENDENCY_ERROR,
            "DATABASE_MISSING",
            f"the {what} of database '{name}' is not a {'folder' if folder else 'regular file'}",
            f"check databases.{name}.url",
        )
    return real, [found.st_dev, found.st_ino]


def connect_failure(exc: EngineError, name: str, conf: DatabaseSettings, engine: Any) -> ToolFailure:
    """A connection that could not be made: unreachable, or refused credentials — naming the setting."""
    text = engine.message(exc)
    state = exc.sqlstate
    lower = text.lower()
    if state.startswith("28") or "authentication" in lower or "no password supplied" in lower:
        return ToolFailure(
            ErrorType.PERMISSION_DENIED,
            "DATABASE_AUTH",
            f"database '{name}' refused the credentials: {text}",
            f"check the user and password in databases.{name}.url ({shown_url(conf)})",
        )
    if conf.driver and ("dlopen() failed" in text or "could not load" in lower or "no module named" in lower):
        return ToolFailure(  # the driver is not installed: only this database is unavailable
            ErrorType.DEPENDENCY_ERROR,
            "DATABASE_UNAVAILABLE",
            f"database '{name}' is unavailable: its driver {conf.driver} is not installed here "
            f"(databases.{name}.driver): {text[:300]}",
            f"install the driver's package into ba-mcp's environment (its extra: uv sync --extra …) or correct "
            f"databases.{name}.driver",
        )
    return ToolFailure(
        ErrorType.DEPENDENCY_ERROR,
        "DATABASE_UNAVAILABLE",
        f"database '{name}' could not be reached: {text}",
        f"check that it is running and databases.{name}.url ({shown_url(conf) or 'its options'}) names it",
    )
