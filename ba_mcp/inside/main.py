"""A worker program's start: ``python -I -B -m ba_mcp.inside '<options JSON>'`` confines itself
(``sandbox.isolation.confine``: its own mount, PID and network namespaces, a minimal read-only root, the
configured database files bound read-only, an unprivileged uid, a memory cgroup and rlimits, seccomp), then serves
as what its options say: a DuckDB worker (``duck``: the session's DuckDB, and the decoders, Parquet, metrics and
placeholders beside it) or a connection worker (``connection``: one database connection). Each answers the
requests of its table (``serve``) by their type."""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
from typing import Any

from ba_mcp.inside import decoding, parquet, placeholders
from ba_mcp.inside.connection import Connector
from ba_mcp.inside.duck import DuckSession
from ba_mcp.inside.metrics import MetricsModels
from ba_mcp.inside.serve import Handlers, handles, serve
from ba_mcp.workers.messages import Extract, MetricsWork, Parse, Placeholders, ReadParquet, WriteParquet
from sandbox import protocol
from sandbox.isolation import confine

__all__ = ["duck_handlers", "main", "run"]


def duck_handlers(session: DuckSession) -> Handlers:
    """What a DuckDB worker answers: SQL on the session's DuckDB, and the work beside it by domain."""
    return {
        **session.handlers(),
        **dict(
            [
                handles(Parse, decoding.parse),
                handles(Extract, decoding.extract),
                handles(WriteParquet, parquet.write),
                handles(ReadParquet, parquet.read),
                handles(MetricsWork, MetricsModels().answer),
                handles(Placeholders, placeholders.place),
            ]
        ),
    }


def main(argv: list[str]) -> int:
    options = json.loads(argv[0])
    fd = int(options["fd"])
    protections = confine({**options, "close_in_shim": [fd]})
    options["confined"] = any(pid == protocol.READ_ONLY_ROOT for pid, _ in protections)
    if not options["confined"]:  # no mount namespace: the databases are opened where they are
        for db in options.get("databases", []):
            db["path"] = db["host_path"]
    sock = socket.socket(fileno=fd)
    faulthandler.enable()
    if options.get("kind") == "connection":
        return _serve_connection(sock, options, protections)
    # SIGINT is taken by a thread of its own (DuckDB's threads, started later, inherit the mask): it
    # interrupts the statement running in the main thread.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    started = time.perf_counter()
    import pyarrow  # noqa: F401

    session = DuckSession(options)
    _on_sigint(session.interrupt)
    protocol.send(
        sock,
        {
            "op": "ready",
            "pid": os.getpid(),
            "protections": protections,
            "missing": session.missing,
            "import_ms": round((time.perf_counter() - started) * 1000, 1),
        },
    )
    if options.get("warm"):  # what the first calls will import (the metrics compiler: ~0.5 s), off the call's path
        modules = list(options["warm"])
        session.warm_up(lambda stop: _import_quietly(modules, stop))
    serve(session, duck_handlers(session), sock, options)
    return 0


def _on_sigint(interrupt: Any) -> None:
    """SIGINT (the call's timeout; blocked in every thread) taken by a thread of its own, which calls ``interrupt``."""

    def interrupts() -> None:
        while True:
            signal.sigwait({signal.SIGINT})
            with contextlib.suppress(Exception):
                interrupt()

    threading.Thread(target=interrupts, name="interrupts", daemon=True).start()


def _import_quietly(modules: list[str], stop: threading.Event) -> None:
    """The spare's warm-up: ``modules`` imported in turn (the server keeps the spare at low CPU priority until a call
    takes it: ``workers.priority``) until the first operation stops it — that call waits for the module in progress
    only, never for the rest (the metrics compiler a file's call does not need)."""
    import importlib

    for module in modules:
        if stop.is_set():
            return
        with contextlib.suppress(Exception):
            importlib.import_module(module)


def _serve_connection(sock: socket.socket, options: dict[str, Any], protections: list[Any]) -> int:
    """A connection worker (``connection.Connector``): SIGINT cancels the running statement in the database."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    connector = Connector(options)
    _on_sigint(connector.interrupt)
    protocol.send(sock, {"op": "ready", "pid": os.getpid(), "protections": protections, "missing": {}})
    serve(connector, connector.handlers(), sock, options)
    return 0


def run(argv: list[str]) -> None:
    """``main``, ending the process without the interpreter's teardown (DuckDB's bindings print a page of
    reference-leak warnings at exit, which would bury the one line that says what went wrong)."""
    try:
        code = main(argv)
    except BaseException:
        traceback.print_exc(limit=6)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run(sys.argv[1:])
