"""The worker: a persistent namespace that runs cells sent by the server.

Started as ``python -I -B -m sandbox '<options JSON>'`` with the protocol socket at the descriptor
named in the options, stdin on /dev/null and stdout/stderr on a pipe the server drains (so raw
writes to fd 1/2 can never reach the protocol). Life cycle:

1. ``confine`` (see ``isolation``), then import numpy and pandas, then send ``ready`` with the
   active protections;
2. wait for ``start`` (the session's directory: cwd, HOME, TMPDIR) — a spare worker waits here;
3. for each ``exec``: run the cell, send ``done`` with captured output, the last expression's value,
   figures and the error if any. During a cell the helpers send ``call`` frames and read ``reply``.

Messages the server sends: start, exec, reply. Messages the worker sends: ready, progress, call,
done. Values and figures travel as descriptors of memory files (Arrow IPC streams, PNG bytes).
"""

from __future__ import annotations

import ast
import collections
import contextlib
import ctypes
import fcntl
import importlib
import io
import json
import linecache
import os
import select
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
from typing import Any

from sandbox import protocol
from sandbox.isolation import SESSION_DIR, confine
from sandbox.policy import ImportPolicyError, guarded_builtins

_VALUE_CHARS = 20_000
_PROGRESS_EVERY_S = 0.25  # progress() frames beyond one per this interval are dropped
_THREAD_GRACE_S = 0.5
# a spare's first preload waits this long for a session that claims it at once (a pool's first call), no longer:
# the preloads are what a first cell would otherwise import itself
_FIRST_PRELOAD_MS = 250


class Capture(io.TextIOBase):
    """A text stream that keeps the first ``head`` and the last ``tail`` characters and counts all."""

    def __init__(self, head: int, tail: int, keep: int = 16 * 1024 * 1024) -> None:
        self.head_limit, self.tail_limit = head, tail
        self.keep_limit = keep  # the whole output is kept up to this many characters (for an artifact)
        self.kept: list[str] = []
        self.kept_len = 0
        self.head: list[str] = []
        self.head_len = 0
        self.tail: collections.deque[str] = collections.deque()
        self.tail_len = 0
        self.total = 0

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        self.total += len(s)
        if self.kept_len < self.keep_limit:
            piece = s[: self.keep_limit - self.kept_len]
            self.kept.append(piece)
            self.kept_len += len(piece)
        room = self.head_limit - self.head_len
        if room > 0:
            self.head.append(s[:room])
            self.head_len += min(room, len(s))
            s = s[room:]
        if s:
            self.tail.append(s)
            self.tail_len += len(s)
            while self.tail and self.tail_len - len(self.tail[0]) >= self.tail_limit:
                self.tail_len -= len(self.tail.popleft())
        return self.total

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def report(self) -> dict[str, Any]:
        head = "".join(self.head)
        tail = "".join(self.tail)
        kept_tail = tail[-self.tail_limit :] if self.tail_limit else ""
        return {"head": head, "tail": kept_tail, "total": self.total}

    def whole(self) -> tuple[str, bool] | None:
        """The whole output (or its first ``keep_limit`` characters, False) when head and tail left some out."""
        if self.total <= len("".join(self.head)) + min(self.tail_len, self.tail_limit):
            return None
        return "".join(self.kept), self.kept_len >= self.total


class Worker:
    def __init__(self, sock: socket.socket, options: dict[str, Any]) -> None:
        self.sock = sock
        self.options = options
        self.pid = os.getpid()
        allowed = options.get("allowed_imports")
        self.namespace: dict[str, Any] = {
            "__name__": "__main__",
            "__builtins__": guarded_builtins(None if allowed in (None, "*") else allowed),
        }
        self.namespace.update(self._helpers())
        self.calls = 0
        self.started = False
        self.cell: str | None = None  # the token of the running cell, echoed in every frame about it
        self.last_progress = 0.0

    # -- the loop -----------------------------------------------------------------------------

    def serve(self) -> None:
        allowed = self.options.get("allowed_imports")
        # only what the session's code may import itself; scipy.stats first, ahead of matplotlib: a first cell most
        # often reads and tests numbers before it plots them (a spare given a session 3 s after the handshake had
        # not reached it: the cell imported it, ~1.3 s; bench/bench_first_call.py)
        preloads = [
            _preload_matplotlib if m == "matplotlib" else _preload(m)
            for m in ("scipy.stats", "matplotlib", "sklearn.base")
            if allowed is None or allowed == "*" or m.split(".")[0] in allowed
        ]
        first = len(preloads)
        while True:
            try:
                # a spare (no session yet) imports what a session's first code most often needs while it waits,
                # one library at a time, each only while no request is waiting; a worker serving a session never
                # spends CPU between its answers (its code imports what it uses)
                if preloads and not self.started:
                    # poll, not select: the socket's number is the spawning process's, past 1023 in one that holds
                    # many files (select() refuses it: the spare died, SANDBOX_UNAVAILABLE)
                    waiting = select.poll()
                    waiting.register(self.sock, select.POLLIN)
                    ready = waiting.poll(_FIRST_PRELOAD_MS if len(preloads) == first else 0)
                    if not ready:
                        preloads.pop(0)()
                        continue
                message, fds = protocol.recv(self.sock)
            except KeyboardInterrupt:
                continue  # an interrupt that arrived between cells
            except (EOFError, OSError, protocol.ProtocolError):
                return
            for fd in fds:
                os.close(fd)
            op = message.get("op")
            if op == "start":
                self._start(message)
            elif op == "exec" and self.started:
                try:
                    self._exec(message)
                except KeyboardInterrupt:  # landed outside the cell: still answer
                    protocol.send(self.sock, {"op": "done", "cell": message.get("cell"), "error": _interrupted()})
                finally:
                    self.cell = None

    def _start(self, message: dict[str, Any]) -> None:
        # Confined: the private session tmpfs (with /tmp inside it). Otherwise the directory the server
        # started the worker in.
        cwd = SESSION_DIR if self.options.get("confined") else os.getcwd()
        os.chdir(cwd)
        tmp = "/tmp" if self.options.get("confined") else os.path.join(cwd, ".tmp")
        os.makedirs(tmp, exist_ok=True)
        os.makedirs(os.path.join(cwd, ".matplotlib"), exist_ok=True)
        os.environ.update({"HOME": cwd, "TMPDIR": tmp, "MPLCONFIGDIR": os.path.join(cwd, ".matplotlib")})
        tempfile.tempdir = tmp
        self.started = True
        protocol.send(self.sock, {"op": "started"})

    def _exec(self, message: dict[str, Any]) -> None:
        cell = self.cell = message.get("cell")
        threads_before = set(threading.enumerate())
        code, filename = message["code"], message.get("filename", "<cell>")
        out = Capture(self.options.get("output_head", 20000), self.options.get("output_tail", 5000))
        err = Capture(self.options.get("output_head", 20000), self.options.get("output_tail", 5000))
        started = time.perf_counter()
        value: Any = None
        error: dict[str, Any] | None = None
        exit_note = None
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
        try:
            tree = ast.parse(code, filename, "exec")
            linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, filename, "exec"), self.namespace)
            if last is not None:
                value = eval(compile(last, filename, "eval"), self.namespace)
        except SystemExit as exc:
            code_ = exc.code
            if code_ in (None, 0):
                exit_note = "the code called sys.exit(); the interpreter keeps running"
            else:
                error = _error(exc, filename)
        except KeyboardInterrupt:
            error = _interrupted()
        except SyntaxError as exc:
            error = {
                "type": type(exc).__name__,
                "message": f"{exc.msg} (line {exc.lineno}, column {exc.offset})",
                "traceback": "".join(traceback.format_exception_only(type(exc), exc)),
                "syntax": True,
            }
        except BaseException as exc:
            error = _error(exc, filename)
        finally:
            sys.stdout, sys.stderr = saved
            if os.getpid() != self.pid:  # a forked child must never answer on the channel
                os._exit(0)
        elapsed = time.perf_counter() - started
        reply: dict[str, Any] = {"op": "done", "cell": cell, "ms": round(elapsed * 1000, 3)}
        reply["stdout"], reply["stderr"] = out.report(), err.report()
        fds: list[int] = []
        if error:
            reply["error"] = error
        if exit_note:
            reply["note"] = exit_note
        if value is not None and error is None:
            reply["value"], fd = _describe_safely(value)
            if fd is not None:
                fds.append(fd)
        for name, stream in (("stdout", out), ("stderr", err)):  # descriptors in this order: value, stdout, stderr
            whole = stream.whole()
            if whole is not None:
                data, complete = _within_file_limit(whole[0].encode("utf-8", "replace"), self.options)
                reply[name]["whole"] = {"complete": whole[1] and complete}
                fds.append(_memfile(data))
        stopped, running = _stop_threads(threads_before)
        if stopped or running:
            reply["threads"] = {"stopped": stopped, "running": running}
        figures, figure_fds = _figures()
        reply["figures"] = figures
        fds += figure_fds
        reply["ended_processes"] = _end_other_processes()
        try:
            protocol.send(self.sock, reply, fds)
        finally:
            for fd in fds:
                os.close(fd)

    # -- helpers visible to user code ---------------------------------------------------------

    def _call(self, method: str, fds: list[int] | None = None, **args: Any) -> tuple[dict[str, Any], list[int]]:
        self.calls += 1
        call_id = self.calls
        message = {"op": "call", "cell": self.cell, "id": call_id, "method": method, "args": args}
        protocol.send(self.sock, message, fds or [])
        while True:
            message, got = protocol.recv(self.sock)
            if message.get("op") == "reply" and message.get("id") == call_id:
                if message.get("error"):
                    for fd in got:
                        os.close(fd)
                    raise HelperError(message["error"])
                return message, got
            for fd in got:
                os.close(fd)

    def _helpers(self) -> dict[str, Any]:
        worker = self

        def load_artifact(artifact_id: str) -> Any:
            """Load an artifact of the workspace: a table as a pandas DataFrame, text as str, JSON as
            Python values, an image as bytes."""
            reply, fds = worker._call("load_artifact", ref=str(artifact_id))
            with os.fdopen(fds[0], "rb") as f:
                kind = reply["kind"]
                if kind == "table":
                    return _frame(f)
                data = f.read()
            if kind == "json":
                return json.loads(data)
            if kind == "text":
                return data.decode("utf-8")
            return data

        def save_artifact(obj: Any, title: str | None = None) -> str:
            """Store ``obj`` as an artifact and return its id (usable by every tool, e.g.
            ``SELECT … FROM artifact_…``). DataFrame/Series → table, str → text, bytes → image
            (PNG/JPEG), a matplotlib figure → PNG, anything JSON-serialisable → JSON."""
            meta, fd = _blob(obj)
            try:
                reply, _ = worker._call("save_artifact", fds=[fd], title=title, **meta)
            finally:
                os.close(fd)
            return str(reply["artifact_id"])

        def export(obj: Any, path: str, overwrite: bool = False) -> str:
            """Write ``obj`` (a DataFrame, Series, figure, str, PNG bytes — or an artifact id) as a file the
            analyst keeps, beneath the server's export folder: ``path`` ends in .csv, .xlsx, .parquet, .png
            or .md (``"reports/q3.xlsx"``). An existing file is replaced only with ``overwrite=True``.
            Returns the file's name in the export folder."""
            args: dict[str, Any] = {"path": str(path), "overwrite": bool(overwrite)}
            if isinstance(obj, str) and obj.startswith("artifact_"):
                reply, _ = worker._call("export", ref=obj, **args)
                return str(reply["path"])
            meta, fd = _blob(obj)
            try:
                reply, _ = worker._call("export", fds=[fd], **meta, **args)
            finally:
                os.close(fd)
            return str(reply["path"])

        def open_file(upload_id: str, mode: str = "r", encoding: str | None = None) -> Any:
            """Open a file for reading: an upload (``upload_<name>`` or ``uploads/<file>``) or a file of a
            read root the server was given (``project/<path>``)."""
            if mode not in ("r", "rb"):
                raise ValueError("uploads open read-only: mode must be 'r' or 'rb'")
            _, fds = worker._call("open_upload", ref=str(upload_id))
            if mode == "rb":
                return os.fdopen(fds[0], "rb")
            return os.fdopen(fds[0], "r", encoding=encoding or "utf-8-sig")

        def load_file(upload_id: str, **read_options: Any) -> Any:
            """Read a table file (csv, tsv, xlsx/xls, parquet, json, jsonl) — an upload or a read root's file,
            as for ``open_file`` — as a DataFrame; ``read_options`` go to the pandas reader."""
            import pandas as pd

            reply, fds = worker._call("open_upload", ref=str(upload_id))
            suffix = os.path.splitext(reply["name"])[1].lower()
            limit = reply.get("limit")
            if limit and reply.get("size", 0) > limit and "nrows" not in read_options:
                os.close(fds[0])
                raise ValueError(
                    f"{reply['name']} is {reply['size'] / 1024**2:,.0f} MB, over the server's read limit of "
                    f"{limit / 1024**2:,.0f} MB (formats.max_file_bytes): pass nrows=… to read its first rows, or "
                    "aggregate it with query_database (SELECT … FROM 'uploads/…') and load_artifact the result"
                )
            with os.fdopen(fds[0], "rb") as f:
                if suffix in (".csv", ".txt", ".tsv"):  # header names as SQL and file_reader give them: trimmed
                    sep = {"sep": "\t"} if suffix == ".tsv" else {}
                    frame = pd.read_csv(f, **{**sep, **read_options})
                    names = [c.strip() if isinstance(c, str) else c for c in frame.columns]
                    return frame.set_axis(names, axis=1) if len(set(names)) == len(names) else frame
                if suffix in (".xlsx", ".xlsm", ".xls"):
                    return pd.read_excel(f, **read_options)
                if suffix == ".parquet":
                    return _frame(f) if not read_options else pd.read_parquet(f, **read_options)
                if suffix == ".jsonl":
                    return pd.read_json(f, lines=True, **read_options)
                if suffix == ".json":
                    return pd.read_json(f, **read_options)
            raise ValueError(f"load_file reads table files; use open_file for {reply['name']}")

        def metric(
            name: Any,
            by: Any = None,
            grain: str | None = None,
            where: Any = None,
            order_by: Any = None,
            limit: int | None = None,
        ) -> Any:
            """A declared metric (or a list of them) by dimensions as a pandas DataFrame: the numbers
            query_metrics gives (metrics://catalog lists the metrics and dimensions)."""

            def listed(value: Any) -> list[str]:
                return [value] if isinstance(value, str) else [str(v) for v in (value or [])]

            _, fds = worker._call(
                "metric",
                metrics=listed(name),
                dimensions=listed(by),
                time_grain=grain,
                where=listed(where),
                order_by=listed(order_by),
                limit=limit,
            )
            with os.fdopen(fds[0], "rb") as f:
                return _frame(f)

        def progress(done: float, total: float | None = None, message: str | None = None) -> None:
            """Report progress of a long cell to the client (shown as an MCP progress notification);
            at most four reports a second reach it."""
            now = time.monotonic()
            if now - worker.last_progress < _PROGRESS_EVERY_S:
                return
            worker.last_progress = now
            frame = {"op": "progress", "cell": worker.cell, "done": float(done), "total": total}
            frame["message"] = None if message is None else str(message)[:200]
            protocol.send(worker.sock, frame)

        return {
            "load_artifact": load_artifact,
            "save_artifact": save_artifact,
            "export": export,
            "open_file": open_file,
            "load_file": load_file,
            "metric": metric,
            "open_upload": open_file,  # the first names of load_file/open_file, kept for existing code
            "load_upload": load_file,
            "progress": progress,
        }


class HelperError(Exception):
    """A helper's request was refused by the server (unknown id, not a file of the workspace…)."""


HelperError.__module__ = "builtins"  # tracebacks say "HelperError: …"
_OWN_FILES = os.path.dirname(os.path.abspath(__file__)) + os.sep


# -- values, figures, errors ------------------------------------------------------------------------


def _frame(f: Any) -> Any:
    """A Parquet table as a pandas DataFrame whose exact decimals (a database's NUMERIC, a DuckDB sum) are
    float64: a numeric dtype pandas computes with, not a column of Decimal objects."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(f)
    for i, field in enumerate(table.schema):
        if pa.types.is_decimal(field.type):
            table = table.set_column(i, field.name, table.column(i).cast(pa.float64()))
    return table.to_pandas()


def _describe_safely(value: Any) -> tuple[dict[str, Any], int | None]:
    """``_describe``, but a value whose ``repr`` (or conversion) raises is reported, not fatal."""
    try:
        return _describe(value)
    except BaseException as exc:  # a hostile __repr__ may raise anything, even SystemExit
        try:
            why = f"{type(exc).__name__}: {str(exc)[:200]}"
        except BaseException:
            why = type(exc).__name__
        return {"kind": "text", "type": type(value).__name__, "text": f"<repr() failed: {why}>", "total": 0}, None


def _stop_threads(before: set[threading.Thread]) -> tuple[int, int]:
    """Threads the cell started may not outlive it: each gets SystemExit raised at its next Python
    instruction. Returns (stopped, still running — e.g. blocked in C code)."""
    started = [t for t in threading.enumerate() if t not in before and t.is_alive() and t.ident is not None]
    for t in started:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident or 0), ctypes.py_object(SystemExit))
    deadline = time.monotonic() + _THREAD_GRACE_S
    for t in started:
        t.join(max(0.0, deadline - time.monotonic()))
    running = sum(1 for t in started if t.is_alive())
    return len(started) - running, running


def _describe(value: Any) -> tuple[dict[str, Any], int | None]:
    """The last expression's value: tables travel as Arrow IPC, matplotlib objects are left to the
    figure capture, everything else is its repr (trimmed, with the total length)."""
    if _is_matplotlib(value):
        return {"kind": "figure"}, None
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(value, pd.DataFrame | pd.Series):
        meta, fd = _blob(value)
        return meta, fd
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.generic):
        value = value.item()  # 7, not np.int64(7)
    text = repr(value)
    return {"kind": "text", "type": type(value).__name__, "text": text[:_VALUE_CHARS], "total": len(text)}, None


def _is_matplotlib(value: Any) -> bool:
    items = value if isinstance(value, list | tuple) and value else [value]
    return all(type(v).__module__.startswith("matplotlib.") for v in items)


def _blob(obj: Any) -> tuple[dict[str, Any], int]:
    """Write ``obj`` into a memory file; returns (description, descriptor at offset 0)."""
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(obj, pd.DataFrame | pd.Series):
        return _table_blob(obj)
    if _is_matplotlib(obj) and hasattr(obj, "savefig"):
        buf = io.BytesIO()
        obj.savefig(buf, format="png", dpi=100, bbox_inches="tight")
        return {"kind": "image", "mime": "image/png"}, _memfile(buf.getvalue())
    if isinstance(obj, bytes | bytearray):
        mime = "image/png" if obj[:8] == b"\x89PNG\r\n\x1a\n" else "image/jpeg" if obj[:3] == b"\xff\xd8\xff" else ""
        if not mime:
            raise ValueError("save_artifact stores bytes only as PNG or JPEG images")
        return {"kind": "image", "mime": mime}, _memfile(bytes(obj))
    if isinstance(obj, str):
        return {"kind": "text"}, _memfile(obj.encode("utf-8"))
    try:
        data = json.dumps(obj, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"save_artifact cannot store a {type(obj).__name__}: pass a DataFrame, Series, str, "
            f"PNG/JPEG bytes, a matplotlib figure or JSON-serialisable data ({exc})"
        ) from None
    return {"kind": "json"}, _memfile(data)


def _table_blob(obj: Any) -> tuple[dict[str, Any], int]:
    import pandas as pd
    import pyarrow as pa

    frame = obj.to_frame(name=obj.name if obj.name is not None else "value") if isinstance(obj, pd.Series) else obj
    # An unnamed integer index is row positions (a filtered or sorted frame's): not data. A named one, or one
    # of labels (a groupby's keys, dates), becomes columns.
    positional = frame.index.nlevels == 1 and frame.index.name is None and pd.api.types.is_integer_dtype(frame.index)
    if not positional:
        frame = frame.reset_index()
    names: list[str] = []
    seen: dict[str, int] = {}
    for col in frame.columns:
        name = "_".join(str(c) for c in col if str(c)) if isinstance(col, tuple) else str(col)
        seen[name] = seen.get(name, 0) + 1
        names.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
    frame = frame.set_axis(names, axis=1)
    try:
        table = pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        frame = frame.copy()
        for col in frame.columns:
            if frame[col].dtype == object:
                frame[col] = frame[col].map(lambda v: v if v is None else str(v))
        table = pa.Table.from_pandas(frame, preserve_index=False)
    table = _microseconds_when_exact(table)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    meta = {"kind": "table", "rows": table.num_rows, "columns": table.num_columns}
    return meta, _memfile(sink.getvalue().to_pybytes())


def _microseconds_when_exact(table: Any) -> Any:
    """pandas' nanosecond times (its default unit) as microseconds — Python's resolution, what the server shows
    and what DuckDB keeps — wherever no value has a part below a microsecond (a safe cast: it refuses to cut).
    The server then needs no cast kernel to read them (issue 40); a column that does have nanoseconds stays."""
    import pyarrow as pa

    for i, field in enumerate(table.schema):
        t = field.type
        if not ((pa.types.is_timestamp(t) or pa.types.is_duration(t) or pa.types.is_time64(t)) and t.unit == "ns"):
            continue
        if pa.types.is_timestamp(t):
            target = pa.timestamp("us", t.tz)
        else:
            target = pa.duration("us") if pa.types.is_duration(t) else pa.time64("us")
        try:
            column = table.column(i).cast(target)  # safe: ArrowInvalid when a value would lose its nanoseconds
        except pa.ArrowInvalid:
            continue
        table = table.set_column(i, pa.field(field.name, target, field.nullable, field.metadata), column)
    return table


_SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE


def _within_file_limit(data: bytes, options: dict[str, Any]) -> tuple[bytes, bool]:
    """``data`` cut (at a character's edge) to what this process may write to a file (RLIMIT_FSIZE, which
    memory files obey too: a longer write would fail and lose the interpreter) and the server takes from it
    (``max_transfer_mb``), and whether it is whole."""
    limits = [int(options.get(k) or 0) * 1024 * 1024 for k in ("max_file_mb", "max_transfer_mb")]
    limit = min([n for n in limits if n] or [0])
    if not limit or len(data) < limit:
        return data, True
    return data[: limit - 1].decode("utf-8", "ignore").encode("utf-8"), False


def _memfile(data: bytes) -> int:
    """A sealed memory file holding ``data``: the server accepts only these (their size cannot change
    after it checked it)."""
    fd = os.memfd_create("ba-blob", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _figures() -> tuple[list[dict[str, Any]], list[int]]:
    """Every open matplotlib figure as PNG; all figures are closed afterwards."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return [], []
    figures: list[dict[str, Any]] = []
    fds: list[int] = []
    try:
        for num in plt.get_fignums():
            fig = plt.figure(num)
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
            titles = [ax.get_title() for ax in fig.get_axes() if ax.get_title()]
            suptitle = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else ""
            figures.append({"title": suptitle or "; ".join(titles) or f"Figure {num}", "mime": "image/png"})
            fds.append(_memfile(buf.getvalue()))
    except Exception as exc:  # a figure that cannot be drawn is reported, the others are kept
        figures.append({"error": f"{type(exc).__name__}: {str(exc)[:200]}"})
    finally:
        plt.close("all")
    return figures, fds


def _error(exc: BaseException, filename: str) -> dict[str, Any]:
    """The exception with the traceback cut to the user's frames (the cell and what it called)."""
    if isinstance(exc, ImportPolicyError):
        return {"type": "ImportPolicyError", "message": str(exc), "module": exc.name, "traceback": ""}
    stack = traceback.extract_tb(exc.__traceback__)
    first = next((i for i, f in enumerate(stack) if f.filename == filename), len(stack))
    frames = [f for f in stack[first:] if not f.filename.startswith(_OWN_FILES)]
    lines = ["Traceback (most recent call last):\n"]
    library: list[str] = []

    def flush() -> None:  # library frames become one line naming their packages, never their paths
        if library:
            names = ", ".join(dict.fromkeys(library))
            lines.append(f"  … {len(library)} frame(s) inside {names}\n")
            library.clear()

    user = 0
    for frame in frames:
        if frame.filename == filename:
            flush()
            lines.extend(traceback.format_list([frame]))
            user += 1
        else:
            library.append(_package_of(frame.filename))
    flush()
    lines += traceback.format_exception_only(type(exc), exc)
    return {
        "type": type(exc).__name__,
        "message": str(exc)[:2000],
        "traceback": "".join(lines)[-8000:],
        "library_frames": len(frames) - user,
        "memory": isinstance(exc, MemoryError),
    }


def _package_of(path: str) -> str:
    """The package a frame's file belongs to (``pandas``, ``json``), without the path."""
    parts = path.replace("\\", "/").split("/")
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            rest = parts[parts.index(marker) + 1 :]
            return rest[0].removesuffix(".py") if rest else "a library"
    for i, part in enumerate(parts):
        if part.startswith("python3") and i + 1 < len(parts):
            return parts[i + 1].removesuffix(".py")
    return os.path.basename(path).removesuffix(".py") or "a library"


def _interrupted() -> dict[str, Any]:
    return {"type": "KeyboardInterrupt", "message": "interrupted", "traceback": "", "interrupted": True}


def _end_other_processes() -> int:
    """As PID 1 of the worker's namespace, end every process the cell left behind (a fork bomb,
    a background child) and reap them. Returns how many were signalled. Outside a PID namespace
    this does nothing: ``kill(-1)`` would reach the user's other processes."""
    if os.getpid() != 1:
        return 0
    ended = 0
    for _ in range(100):
        pids = [p for p in os.listdir("/proc") if p.isdigit() and p != "1"]
        if not pids:
            break
        ended = max(ended, len(pids))
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        time.sleep(0.005)
    return ended


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _preload(module: str) -> Any:
    def load() -> None:
        with contextlib.suppress(Exception):
            importlib.import_module(module)

    return load


def _preload_matplotlib() -> None:
    with contextlib.suppress(Exception):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot


# -- entry point ------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    options = json.loads(argv[0])
    fd = int(options["fd"])
    protections = confine({**options, "close_in_shim": [fd]})
    options["confined"] = any(pid == protocol.READ_ONLY_ROOT for pid, _ in protections)
    sock = socket.socket(fileno=fd)
    os.register_at_fork(after_in_child=lambda: _close_quietly(sock.detach()))
    import faulthandler

    faulthandler.enable()
    started = time.perf_counter()
    import numpy  # noqa: F401
    import pandas  # noqa: F401

    worker = Worker(sock, options)
    protocol.send(
        sock,
        {
            "op": "ready",
            "pid": os.getpid(),
            "protections": protections,
            "import_ms": round((time.perf_counter() - started) * 1000, 1),
        },
    )
    signal.signal(signal.SIGINT, signal.default_int_handler)
    worker.serve()
    return 0
