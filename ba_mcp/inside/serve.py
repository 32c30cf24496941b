"""The serving loop of a worker program: read a request (``workers.messages``), answer it by its type from the
program's table of handlers, send the answer (an error answer in the spec's vocabulary or as the engine's
exception, an answer over ``max_transfer_bytes`` refused before it is sent)."""

from __future__ import annotations

import contextlib
import os
import select
import socket
import traceback
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias, TypeVar

from ba_mcp.workers.messages import Request, UnknownRequest, request_of
from ba_mcp.workers.wire import Failure
from sandbox import protocol

R = TypeVar("R")
Answer: TypeAlias = tuple[R, list[int]]  # the reply its request names and the descriptors sent with it (memory files)
Handler = Callable[[Any, list[int]], Answer[Any]]  # a request of its type and the descriptors that came with it
Handlers = Mapping[type[Request[Any]], Handler]

__all__ = ["Answer", "Handler", "Handlers", "handles", "serve"]


def handles(kind: type[Request[R]], handler: Callable[[Any, list[int]], Answer[R]]) -> tuple[type[Request[R]], Handler]:
    """An entry of a program's table of handlers: ``kind``'s requests answered by ``handler``, whose reply is the
    one ``kind`` names (checked by the type checker: a handler answering with another reply is an error)."""
    return kind, handler


def _readable(sock: socket.socket, seconds: float) -> bool:
    """Whether the server sent something within ``seconds``: poll, not select, which refuses a descriptor past
    1023 (the socket keeps the number it had in the server, which may hold that many files)."""
    waiting = select.poll()
    waiting.register(sock, select.POLLIN)
    return bool(waiting.poll(max(0.0, seconds) * 1000))


def serve(target: Any, handlers: Handlers, sock: socket.socket, options: dict[str, Any]) -> None:
    """Answer requests until the server closes the channel: each by the handler of its type; an answer over
    ``max_transfer_bytes`` is refused here, before it is sent. ``target`` is the program's state: its ``busy``
    while an operation runs, and what it may have of ``warming``, ``resting``/``rest``, ``attach`` and
    ``after_reply``."""
    while True:
        window = target.resting() if hasattr(target, "resting") else None
        if window is not None and not _readable(sock, window):
            target.rest()  # idle: let go of what other programs may want (a DuckDB file's lock)
        try:
            message, fds = protocol.recv(sock)
        except (EOFError, OSError, protocol.ProtocolError):
            return
        try:
            try:
                request = request_of(message)
            except UnknownRequest as exc:
                raise Failure(type="execution_error", code="BAD_OP", message=str(exc)) from None
            handler = handlers.get(type(request))
            if handler is None:
                raise Failure(type="execution_error", code="BAD_OP", message=f"unknown operation {request.op!r}")
            warming = getattr(target, "warming", None)
            if warming is not None:  # a half-imported package seen from two threads fails (pandas, pyarrow)
                if not getattr(request, "warm", False):  # a call came (not the warm-up's own read): it ends
                    target.warm_stop.set()  # with the module it is importing
                warming.join()
                target.warming = None
            target.busy = True
            if hasattr(target, "attach"):
                target.attach()
            reply, out = handler(request, fds)
        except Failure as exc:
            reply, out = {"op": "error", "failure": exc.fields}, []
        except BaseException as exc:
            reply, out = _error_reply(exc), []
        finally:
            target.busy = False
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
        size = sum(os.fstat(fd).st_size for fd in out)
        limit = int(options.get("max_transfer_bytes") or 0)
        if limit and size > limit:
            for fd in out:
                os.close(fd)
            out = []
            reply = {
                "op": "error",
                "failure": {
                    "type": "resource_error",
                    "code": "RESULT_TOO_LARGE",
                    "message": f"the answer is {size:,} bytes; at most {limit:,} are taken from the engine "
                    "(engine.max_transfer_mb)",
                    "hint": "fetch fewer or narrower rows (max_rows, LIMIT, fewer columns, substr of long text)",
                },
            }
        try:
            protocol.send(sock, reply, out)
        finally:
            for fd in out:
                os.close(fd)
        follow_up, target.after_reply = getattr(target, "after_reply", None), None
        if follow_up is not None:  # work that need not delay the answer (a connection's ROLLBACK)
            target.busy = True
            try:
                follow_up()
            except Exception:
                pass  # the next operation starts with a rollback of its own
            finally:
                target.busy = False


def _error_reply(exc: BaseException) -> dict[str, Any]:
    """An error as the server classifies it: a ToolFailure's fields, or the engine exception's class names."""
    from ba_mcp.errors import ToolFailure

    if isinstance(exc, ToolFailure):
        return {
            "op": "error",
            "failure": {"type": exc.type.value, "code": exc.code, "message": exc.message, "hint": exc.hint},
        }
    classes = [
        c.__name__ for c in type(exc).__mro__ if c.__module__.startswith(("duckdb", "_duckdb", "adbc_driver_manager"))
    ]
    if isinstance(exc, MemoryError):
        classes = ["MemoryError"]
    if isinstance(exc, KeyboardInterrupt):
        classes = ["InterruptException"]
    detail = "" if classes else traceback.format_exception_only(type(exc), exc)[-1][-300:]
    engine = {"classes": classes, "message": str(exc)[:2000], "detail": detail}
    if getattr(exc, "sqlstate", None):  # an ADBC driver's error: the database's own SQLSTATE
        engine["sqlstate"] = str(exc.sqlstate)  # type: ignore[attr-defined]
    elif classes:  # some drivers (Spark's) give it only in the text
        import re

        found = re.search(r"SQLSTATE: ([0-9A-Z]{5})", str(exc))
        if found:
            engine["sqlstate"] = found.group(1)
    return {"op": "error", "engine": engine}
