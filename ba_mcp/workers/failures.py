"""The worker boundary's one translation point: what a worker's failure means to its caller, decided here and
nowhere else (httpx's ``map_httpcore_exceptions`` is the model: the transport's exceptions are mapped in one
place to the caller's errors). Every call across the boundary — to an engine worker, a connection worker or a
Python sandbox — runs inside ``worker_failures``, which turns:

* a worker that ended (crash, kill, the memory limit) or never started (``WorkerGone``, a start's ``TimeoutError``)
  into what ``gone`` says — the pool's crash error, ``unavailable`` at a start, a sandbox's crash;
* a worker that broke the protocol (``BadBlob``: a descriptor that is no sealed memory file within its limit;
  ``BadStream``: an Arrow stream that is not one) into what ``broken`` says, by default ENGINE_PROTOCOL — after
  ``end`` ended that worker (nothing it sends is trusted again);
* an engine's own exception in the worker (``EngineError``: a SQL error, a file a library cannot decode) into
  what ``engine`` says — the caller's domain names it (SQL_SYNTAX, BAD_DATA, a database's failure);

and lets a ToolFailure (already the model's words) pass. A caller that gives no translation for a kind lets that
exception pass on: it is then a bug the runner's generic classification reports as an internal error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from ba_mcp.errors import ErrorType, ToolFailure
from ba_mcp.workers.process import BadBlob, WorkerGone
from ba_mcp.workers.wire import BadStream


class EngineError(Exception):
    """An engine exception raised in the worker: its class names (most specific first) and message."""

    def __init__(self, info: dict[str, Any]) -> None:
        super().__init__(info.get("message", ""))
        self.classes: list[str] = list(info.get("classes", []))
        self.message: str = str(info.get("message", ""))
        self.detail: str = str(info.get("detail", ""))
        self.sqlstate: str = str(info.get("sqlstate", ""))  # a database's own error code (ADBC drivers)


def protocol_error(problem: str) -> ToolFailure:
    """A worker that sent what the protocol does not allow (it was ended)."""
    return ToolFailure(ErrorType.EXECUTION_ERROR, "ENGINE_PROTOCOL", problem)


def engine_failure(exc: EngineError) -> ToolFailure:
    """An engine's exception in work of the server's own (no domain to name it): its message, an execution error."""
    return ToolFailure(ErrorType.EXECUTION_ERROR, "ENGINE_ERROR", exc.message or exc.detail)


@contextlib.contextmanager
def worker_failures(
    *,
    gone: Callable[[BaseException], BaseException] | None = None,
    broken: Callable[[str], BaseException] = protocol_error,
    end: Callable[[], None] | None = None,
    engine: Callable[[EngineError], BaseException] | None = None,
) -> Iterator[None]:
    """Run the body (one exchange with a worker) with its failures translated (see the module's docstring)."""
    try:
        yield
    except ToolFailure:
        raise
    except EngineError as exc:
        if engine is None:
            raise
        raise engine(exc) from None
    except (BadBlob, BadStream) as exc:
        if end is not None:
            end()
        raise broken(str(exc)) from None
    except (WorkerGone, TimeoutError) as exc:
        if gone is None:
            raise
        raise gone(exc) from None
