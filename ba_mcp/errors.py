"""The one error vocabulary of ba-mcp (seed 001 ``ToolErrorType``) and its text format (T-E).

The tree::

    ToolFailure(type, code, message, hint, retry_after=None)   what the model reads
      type: ErrorType
        retryable           timeout, rate_limit, resource_error, transient_error
        permanent           permission_denied, invalid_parameters, not_found, validation_error
        needing attention   execution_error, internal_error, dependency_error
      code: a stable UPPER_SNAKE name from ``Code`` (a tool may add its own)

Tools raise ``ToolFailure``. Anything else a tool raises goes first to the tool's own
``Tool.classify_error(exc)`` (an HTTP client's connection error is the web tools' to name), then to
``classify()``; internal errors never carry a stack trace or a filesystem path to the client.
``format_error()`` is the one text of a failure (``server.error_result`` makes it an MCP result).

The worker boundary (``ba_mcp.workers``) has a tree of its own, private to it, translated to ToolFailure at one
point per boundary::

    in the worker    workers.wire.Failure      a refusal the worker decided: sent as a ToolFailure's fields
    the server's     workers.process.WorkerGone   the worker died or closed its socket
                     workers.process.BadBlob      a descriptor that is no sealed, size-checked memory file
                     workers.wire.BadStream       Arrow data that is compressed, malformed or oversized
                     workers.failures.EngineError an engine's own exception (class names, message, SQLSTATE)

``workers.call.Call.ask`` (DuckDB and connection workers) and ``settle`` turn WorkerGone, BadBlob and a Failure
into ToolFailures (a timeout, ENGINE_CRASHED, ENGINE_PROTOCOL, the Failure as sent), ``Call.arrow`` a BadStream;
an EngineError is left to the database's engine (``Database.classify_error``: the engine's vocabulary — SQL
syntax, an unknown table, read-only) or to the work that asked (``workers.work``: BAD_DATA for a file). The
Python sandbox's cell protocol is run_python's one boundary (``tools.run_python._Cell``).
"""

from __future__ import annotations

import enum


class ErrorType(enum.StrEnum):
    # retryable
    TIMEOUT = "timeout"
    RATE_LIMIT = "rate_limit"
    RESOURCE_ERROR = "resource_error"
    TRANSIENT_ERROR = "transient_error"
    # permanent
    PERMISSION_DENIED = "permission_denied"
    INVALID_PARAMETERS = "invalid_parameters"
    NOT_FOUND = "not_found"
    VALIDATION_ERROR = "validation_error"
    # needing attention
    EXECUTION_ERROR = "execution_error"
    INTERNAL_ERROR = "internal_error"
    DEPENDENCY_ERROR = "dependency_error"

    @property
    def retryable(self) -> bool:
        return self in _RETRYABLE


_RETRYABLE = {
    ErrorType.TIMEOUT,
    ErrorType.RATE_LIMIT,
    ErrorType.RESOURCE_ERROR,
    ErrorType.TRANSIENT_ERROR,
}


class Code:
    """Error codes used in more than one place (a code used by one tool alone may stay a literal there)."""

    TIMEOUT = "TIMEOUT"
    CANCELLED = "CANCELLED"
    INTERNAL = "INTERNAL"
    INVALID_ARGUMENTS = "INVALID_ARGUMENTS"
    INVALID_PARAMETERS = "INVALID_PARAMETERS"
    NOT_FOUND = "NOT_FOUND"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    IO_ERROR = "IO_ERROR"
    DECODE_FAILED = "DECODE_FAILED"
    READ_ONLY = "READ_ONLY"
    ARTIFACT_TOO_LARGE = "ARTIFACT_TOO_LARGE"


class ToolFailure(Exception):
    """A failed tool call, as the model will read it.

    ``code`` is a stable UPPER_SNAKE identifier; ``retry_after`` (seconds) is honoured by the
    runner's retry policy when the error is retryable. Its ``message`` and ``hint`` never hold a configured
    database's secret: they pass ``redaction.redact`` whenever they are set (S-1, S-11), whoever sets them.
    """

    def __init__(
        self,
        type: ErrorType,
        code: str,
        message: str,
        hint: str = "",
        *,
        retry_after: float | None = None,
    ) -> None:
        self.message = message
        super().__init__(self.message)
        self.type = type
        self.code = code
        self.hint = hint
        self.retry_after = retry_after

    def __setattr__(self, name: str, value: object) -> None:
        if name in ("message", "hint") and isinstance(value, str):
            from ba_mcp.redaction import redact

            value = redact(value)
        super().__setattr__(name, value)


def invalid(message: str, hint: str = "", code: str = Code.INVALID_PARAMETERS) -> ToolFailure:
    return ToolFailure(ErrorType.INVALID_PARAMETERS, code, message, hint)


def not_found(message: str, hint: str = "", code: str = Code.NOT_FOUND) -> ToolFailure:
    return ToolFailure(ErrorType.NOT_FOUND, code, message, hint)


def denied(message: str, hint: str = "", code: str = Code.PERMISSION_DENIED) -> ToolFailure:
    return ToolFailure(ErrorType.PERMISSION_DENIED, code, message, hint)


def timed_out(message: str, hint: str = "") -> ToolFailure:
    """The one ``timeout`` failure (code TIMEOUT), whoever notices it."""
    return ToolFailure(ErrorType.TIMEOUT, Code.TIMEOUT, message, hint)


def classify(exc: BaseException) -> ToolFailure:
    """Map an unexpected exception to a ToolFailure without leaking its text when it may hold paths."""
    if isinstance(exc, ToolFailure):
        return exc
    if isinstance(exc, TimeoutError):
        return timed_out("the operation timed out", "retry")
    if isinstance(exc, MemoryError):
        return ToolFailure(
            ErrorType.RESOURCE_ERROR,
            Code.OUT_OF_MEMORY,
            "the result did not fit in memory",
            "read fewer rows (nrows) or aggregate first",
        )
    if isinstance(exc, PermissionError):
        return denied("the operating system refused access to the file")
    if isinstance(exc, FileNotFoundError):
        return not_found(
            "the file does not exist (it may have been removed)", "list files with the resource ba://files"
        )
    if isinstance(exc, UnicodeDecodeError):
        return ToolFailure(
            ErrorType.VALIDATION_ERROR,
            Code.DECODE_FAILED,
            f"the content is not valid {exc.encoding} text",
            "pass encoding= explicitly (e.g. latin-1, utf-16), or format= for a binary format",
        )
    if isinstance(exc, OSError):
        return ToolFailure(
            ErrorType.RESOURCE_ERROR, Code.IO_ERROR, "an input/output error occurred while reading", "retry"
        )
    return ToolFailure(
        ErrorType.INTERNAL_ERROR,
        Code.INTERNAL,
        "the server hit an unexpected error; it has been logged",
        "retry once; if it persists, report it with the time of the call",
    )


def format_error(tool: str, failure: ToolFailure) -> str:
    """The one error text format of T-E."""
    lines = [
        f"{tool}: operation failed",
        f"Error Type: {failure.type.value}",
        f"Error Code: {failure.code}",
        f"Error Message: {failure.message}",
    ]
    if failure.hint:
        lines.append(f"Hint: {failure.hint}")
    return "\n".join(lines)
