"""run_python (docs/tools.md): run code in the session's persistent, sandboxed Python worker.

The tool stores the code (``code_<id>``, seed 002's code store), sends it to the session's worker
(``ba_mcp.workers.sandboxes``), serves the worker's helper requests (load/save artifacts, open uploads,
progress) while the cell runs, enforces the wall-clock timeout (interrupt, then kill and restart),
and turns the worker's answer into a raw result: stdout/stderr, the last expression's value,
figures. It knows nothing about formatting or MCP.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import time
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic import Field, ValidationError

from ba_mcp.errors import Code, ErrorType, ToolFailure, denied, invalid
from ba_mcp.ids import upload_id_for
from ba_mcp.metrics.query import MetricsQuery
from ba_mcp.results import Composite, Document, Image, RawResult, Table, arrow_array
from ba_mcp.settings import SandboxSettings, ToolSettings
from ba_mcp.tool import CacheMode, CachePolicy, ToolContext, ToolParams, ToolPolicy
from ba_mcp.tool import Tool as BaseTool
from ba_mcp.tools.query_metrics import QueryMetricsSettings
from ba_mcp.workers.failures import worker_failures
from ba_mcp.workers.process import BadBlob, WorkerProcess, map_blob, read_blob
from ba_mcp.workers.wire import read_arrow

if TYPE_CHECKING:
    from ba_mcp.databases import Databases
    from ba_mcp.exports import Exports
    from ba_mcp.metrics.catalog import Metrics
    from ba_mcp.stores.artifacts import ArtifactStore
    from ba_mcp.stores.code import CodeStore
    from ba_mcp.tools.services import Services
    from ba_mcp.workers.pool import Handle
    from ba_mcp.workers.sandboxes import Sandboxes
    from ba_mcp.workspace import Workspace

_PROGRESS_EVERY_S = 1.0


log = logging.getLogger("ba_mcp.run_python")


class RunPythonParams(ToolParams):
    code: str
    timeout: float | None = Field(None, gt=0, description="seconds (default 60)")
    reset: bool = Field(False, description="start a fresh interpreter first")


class RunPythonSettings(ToolSettings):
    timeout_s: float = Field(60, gt=0)
    max_timeout_s: float = Field(600, gt=0)
    code_store_max_bytes: int = Field(
        64 * 1024**2,
        ge=1024**2,
        description="The code store (code/, ids code_<12 hex>): its size in bytes; over it, the least recently used "
        "files go first.",
    )
    code_ttl_hours: float = Field(168, gt=0, description="How long the code store keeps a file no one used.")
    max_code_chars: int = Field(
        1_000_000, ge=1000, description="Longest `code` accepted, in characters (longer: invalid_parameters)."
    )


class RunPython(BaseTool):
    name = "run_python"
    view = "table"  # the MCP Apps view of its results (views/)
    title = "Run Python"
    Params = RunPythonParams
    Settings = RunPythonSettings
    policy = ToolPolicy(idempotent=False, read_only=False, cache=CachePolicy(mode=CacheMode.NEVER))
    artifact_reader = 'run_python: load_artifact("{id}")'

    @classmethod
    def build(cls, services: Services) -> RunPython:
        s = services.settings
        settings, metrics = s.tool(cls.name), s.tool("query_metrics")
        assert isinstance(settings, RunPythonSettings)
        return cls(
            settings,
            s.sandbox,
            services.workspace,
            services.artifacts,
            services.code,
            services.sandboxes,
            services.exports,
            # metric(): query_metrics' numbers, bounded as that tool's (its max_rows), while that tool is served
            (services.metrics, services.databases, metrics.max_rows)
            if isinstance(metrics, QueryMetricsSettings) and metrics.enabled and services.metrics.files()
            else None,
            read_limit=s.formats.max_file_bytes,
        )

    def __init__(
        self,
        settings: RunPythonSettings,
        sandbox: SandboxSettings,
        workspace: Workspace,
        artifacts: ArtifactStore,
        code: CodeStore,
        sandboxes: Sandboxes,
        exports: Exports | None = None,
        metrics: tuple[Metrics, Databases, int] | None = None,
        read_limit: int | None = None,
    ) -> None:
        self.settings: RunPythonSettings = settings
        self.read_limit = read_limit  # formats.max_file_bytes: load_file reads a larger file only in part
        # metric(name, by=…, grain=…): query_metrics' numbers as a DataFrame (the catalog, the databases, max_rows)
        self.metrics = metrics
        self.sandbox = sandbox  # the sandbox: section (limits, capture, the import guardrail)
        self.exports = exports
        self.workspace = workspace
        self.artifacts = artifacts
        self.code = code
        self.sandboxes = sandboxes
        self.libraries = available_libraries(sandbox.allowed_imports)
        read_roots = list(workspace.read_roots)
        helper = "; metric(name, by=[…], grain=None) → DataFrame of query_metrics" if metrics else ""
        self.description = (
            "Python in a sandboxed interpreter that persists per session; returns the last expression's value (a "
            "DataFrame as a table artifact) and matplotlib figures.\n"
            "Helpers: load_file(id_or_path, **pandas_kw) → DataFrame (upload_<name>"
            f"{''.join(', ' + n + '/<path>' for n in read_roots)}); open_file(id_or_path, mode); "
            "load_artifact(id); save_artifact(obj, title=None) → artifact id; "
            "export(obj_or_id, 'reports/q3.xlsx') → the analyst's file"
            f"{helper}.\n"
            "No network; long output keeps its head and tail.\n"
            f"Libraries: {', '.join(self.libraries[:6])}{' …' if len(self.libraries) > 6 else ''} and a safe "
            "standard library; nothing else (a guardrail)."
        )

    def deadline_grace(self) -> float:
        """Extra seconds the runner allows beyond the call's timeout: the tool interrupts, waits and
        kills on its own, and reports which of these happened."""
        return self.sandbox.interrupt_grace_s + 15

    def execute(self, params: RunPythonParams, ctx: ToolContext) -> RawResult:
        tool = self
        settings = self.settings
        if len(params.code) > settings.max_code_chars:
            raise invalid(
                f"'code' is {len(params.code):,} characters; the limit is {settings.max_code_chars:,}",
                "send smaller cells; put data in an upload and read it with load_file "
                "(the limit is the tools.run_python.max_code_chars setting)",
                code="CODE_TOO_LONG",
            )
        code_id = self.code.put(params.code)
        sandboxes = tool.sandboxes
        if params.reset:
            sandboxes.discard(ctx.session)
        for turn in range(2):
            handle, fresh = sandboxes.acquire(ctx.session, ctx.timeout, ctx)  # a start is not the cell's time
            try:
                with handle.lock:
                    if turn == 0 and not handle.alive():
                        # The session's earlier call ended this worker (a crash, its timeout) while this call waited
                        # for its turn: nothing of this call ran there, so it runs on the fresh one instead.
                        sandboxes.discard(ctx.session, handle)
                        continue
                    return self._run(params, ctx, handle, fresh, code_id)
            finally:
                sandboxes.release(handle)
        raise AssertionError("unreachable: the second turn runs or raises")

    def _run(self, params: RunPythonParams, ctx: ToolContext, handle: Handle, fresh: bool, code_id: str) -> RawResult:
        worker = handle.process
        tool = self
        sandboxes = tool.sandboxes
        notes: list[str] = []
        if fresh and sandboxes.evicted(ctx.session):
            notes.append(
                "fresh interpreter: this session's idle interpreter was ended to make room for another session "
                "(sandbox.max_workers); variables from earlier calls are gone"
            )
        elif fresh:
            notes.append("fresh interpreter: no variables from earlier calls")
            missing = _missing_protections(worker, self.sandbox.network)
            if missing:  # for the operator, not the model (T-L): the log and `ba-mcp doctor`
                log.warning("%s", missing)
        handle.last_used = time.monotonic()
        cell = _Cell(tool, ctx, worker, code_id, params.code, ctx.timeout)
        reply, fds = cell.run()
        handle.last_used = time.monotonic()
        with worker_failures(broken=cell.violation):
            raw = _result(tool, reply, fds, code_id, notes, worker)
        raw.provenance = {"code_id": code_id, "helpers": cell.helpers}
        if (reply.get("threads") or {}).get("running"):
            sandboxes.discard(ctx.session)  # threads blocked in C would burn CPU until RLIMIT_CPU
        return raw


class _Cell:
    """One cell on one worker: send it, serve helper calls, enforce the timeout."""

    def __init__(
        self, tool: RunPython, ctx: ToolContext, worker: WorkerProcess, code_id: str, code: str, timeout: float
    ):
        self.tool, self.ctx, self.worker = tool, ctx, worker
        self.code_id, self.code, self.timeout = code_id, code, timeout
        self.helpers: list[dict[str, Any]] = []  # what the cell's helpers read and wrote (provenance)

    def run(self) -> tuple[dict[str, Any], list[int]]:
        """Send the cell and serve the worker until it answers. Every frame must carry this cell's random
        token and have the shape its kind allows; anything else (frames forged by user code, which shares
        the worker's process and could write to the channel) ends the worker."""
        worker, ctx = self.worker, self.ctx
        worker.cells += 1
        self.token = secrets.token_hex(16)
        grace = self.tool.sandbox.interrupt_grace_s
        started = time.monotonic()
        interrupted_at: float | None = None
        reason = ""
        next_progress = started + _PROGRESS_EVERY_S
        with worker_failures(gone=lambda exc: self._crashed()):
            worker.send({"op": "exec", "cell": self.token, "code": self.code, "filename": f"{self.code_id}.py"})
        while True:
            now = time.monotonic()
            if interrupted_at is None and (now - started >= self.timeout or ctx.cancelled.is_set()):
                reason = "cancelled" if ctx.cancelled.is_set() else "timeout"
                worker.interrupt()
                interrupted_at = now
            if interrupted_at is not None and now - interrupted_at >= grace:
                self._lost(reason, started)
            wake = min(next_progress, started + self.timeout, (interrupted_at or now) + grace)
            with worker_failures(gone=lambda exc: self._crashed()):
                readable = worker.wait_readable(max(0.0, min(wake - now, 0.5)))
            if not readable:
                if time.monotonic() >= next_progress and interrupted_at is None:
                    elapsed = time.monotonic() - started
                    ctx.progress(round(elapsed, 1), self.timeout, f"running for {elapsed:.0f} s")
                    next_progress += _PROGRESS_EVERY_S
                continue
            with worker_failures(gone=lambda exc: self._crashed()):
                message, fds = worker.receive(None)
            problem = _frame_problem(message, fds, self.token)
            if problem:
                _close_all(fds)
                self.violation(problem)
            op = message.get("op")
            if op == "done":
                error = message.get("error") or {}
                if error.get("interrupted") and interrupted_at is not None:
                    _close_all(fds)
                    self._interrupted(reason, started)
                return message, fds
            if op == "progress":
                ctx.progress(float(message.get("done") or 0), message.get("total"), message.get("message"))
            else:
                self._serve_call(message, fds)

    # -- endings ------------------------------------------------------------------------------

    def violation(self, problem: str) -> NoReturn:
        self.tool.sandboxes.discard(self.ctx.session)
        raise ToolFailure(
            ErrorType.EXECUTION_ERROR,
            "WORKER_PROTOCOL",
            f"the Python worker broke the sandbox's protocol ({problem}) — code that writes to the worker's "
            "channel does this; the worker was ended and its state was lost",
            f"do not use the sandbox's own descriptors; re-run the set-up cells; code stored as {self.code_id}",
        )

    def _interrupted(self, reason: str, started: float) -> NoReturn:
        elapsed = time.monotonic() - started
        if reason == "cancelled":
            raise ToolFailure(ErrorType.EXECUTION_ERROR, Code.CANCELLED, "the run was cancelled; variables are kept")
        raise ToolFailure(
            ErrorType.TIMEOUT,
            Code.TIMEOUT,
            f"the code was interrupted after {elapsed:.1f} s (timeout {self.timeout:g} s); "
            "the interpreter's state (variables, imports) was kept",
            f"work on a sample first (code stored as {self.code_id})",
        )

    def _lost(self, reason: str, started: float) -> NoReturn:
        self.tool.sandboxes.discard(self.ctx.session)
        elapsed = time.monotonic() - started
        what = "was cancelled" if reason == "cancelled" else f"ran past its timeout of {self.timeout:g} s"
        raise ToolFailure(
            ErrorType.TIMEOUT if reason == "timeout" else ErrorType.EXECUTION_ERROR,
            "TIMEOUT_KILLED" if reason == "timeout" else Code.CANCELLED,
            f"the code {what} and did not stop when interrupted ({elapsed:.1f} s); the worker was killed and "
            "restarted, so all variables and imports were lost",
            f"re-run the cells that set up your data; code stored as {self.code_id}",
        )

    def _crashed(self) -> NoReturn:
        how = self.worker.exit_description()
        output = self.worker.last_output(600)
        self.tool.sandboxes.discard(self.ctx.session)
        if "SIGSYS" in how:  # seccomp ended the worker: a system call of another architecture (int 0x80, x32)
            raise ToolFailure(
                ErrorType.PERMISSION_DENIED,
                "FORBIDDEN_SYSCALL",
                "the sandbox stopped the code: it made a forbidden system call (one of another architecture, such "
                "as i386's int 0x80 or an x32 call), so the Python worker was ended; it was restarted and its "
                "state was lost",
                f"the next call gets a fresh interpreter; re-run the set-up cells; code stored as {self.code_id}",
            )
        message = f"the Python worker {how} while running the code; it was restarted and its state was lost"
        if output:
            message += f". Its last output: {output}"
        raise ToolFailure(
            ErrorType.EXECUTION_ERROR,
            "WORKER_CRASHED",
            message,
            f"the next call gets a fresh interpreter; re-run the set-up cells; code stored as {self.code_id}",
        )

    # -- helper calls -------------------------------------------------------------------------

    def _noted(self, helper: str, artifact_id: str) -> None:
        """An artifact a helper read or wrote, with its content digest (provenance)."""
        self.helpers.append(
            {"helper": helper, "id": artifact_id, "sha256": self.tool.artifacts.get(artifact_id).sha256}
        )

    def _serve_call(self, message: dict[str, Any], fds: list[int]) -> None:
        call_id, method, args = message.get("id"), message.get("method"), message.get("args") or {}
        reply: dict[str, Any] = {"op": "reply", "id": call_id}
        out_fds: list[int] = []
        try:
            with worker_failures(broken=lambda problem: ToolFailure(ErrorType.EXECUTION_ERROR, "BAD_BLOB", problem)):
                self._serve(method, args, fds, reply, out_fds)
        except ToolFailure as failure:
            reply["error"] = failure.message + (f" ({failure.hint})" if failure.hint else "")
        except (OSError, ValueError) as exc:
            reply["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            _close_all(fds)
        try:
            with worker_failures(gone=lambda exc: self._crashed()):
                self.worker.send(reply, out_fds)
        finally:
            _close_all(out_fds)

    def _serve(
        self, method: Any, args: dict[str, Any], fds: list[int], reply: dict[str, Any], out_fds: list[int]
    ) -> None:
        """One helper request of the cell's code: its answer into ``reply``, the descriptors it sends back into
        ``out_fds``."""
        if method == "load_artifact":
            reply["kind"], fd = _open_artifact(self.tool, str(args.get("ref", "")))
            out_fds.append(fd)
            self._noted(method, str(args.get("ref", "")))
        elif method == "metric":
            reply["kind"], fd = _metric(self.tool, args, self.ctx)
            out_fds.append(fd)
            self.helpers.append({"helper": method, "query": {k: v for k, v in args.items() if v}})
        elif method == "open_upload":
            reply["name"], fd = _open_upload(self.tool.workspace, str(args.get("ref", "")))
            reply["size"], reply["limit"] = os.fstat(fd).st_size, self.tool.read_limit
            out_fds.append(fd)
            self.helpers.append({"helper": "open_file", "ref": str(args.get("ref", ""))})
        elif method == "save_artifact" and fds:
            reply["artifact_id"] = _save(self.tool, args, fds[0])
            self._noted(method, reply["artifact_id"])
        elif method == "export":
            reply["path"] = _export(self.tool, args, fds[0] if fds else None, bool(self.ctx.memo.get("replay")))
            self.helpers.append({"helper": method, "path": reply["path"]})
        else:
            reply["error"] = f"unknown helper request {method!r}"


# -- helpers' server side ---------------------------------------------------------------------------


def _open_artifact(tool: RunPython, ref: str) -> tuple[str, int]:
    if not ref.startswith("artifact_"):
        raise invalid(f"'{ref[:60]}' is not an artifact id", "artifact ids look like artifact_0123456789ab")
    with tool.artifacts.reading(ref) as meta:
        fd = os.open(tool.artifacts.data_path(meta), os.O_RDONLY | os.O_CLOEXEC)
    return ("text" if meta.kind == "markdown" else meta.kind), fd


def _metric(tool: RunPython, args: dict[str, Any], ctx: ToolContext) -> tuple[str, int]:
    """metric(): a query_metrics call from the cell (same compile, same engine, same numbers); the complete
    result as a table artifact of the session, opened for the worker."""
    if tool.metrics is None:
        raise denied("metrics are not available on this server", "query_metrics is disabled or no metric file exists")
    wanted = {k: args[k] for k in ("metrics", "dimensions", "time_grain", "where", "order_by", "limit") if args.get(k)}
    try:
        question = MetricsQuery.model_validate(wanted)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        raise invalid(f"metric(): {problems}", "metric(name, by=['region'], grain='month', where=[…])") from None
    catalog, databases, max_rows = tool.metrics
    table = databases.metrics_table(catalog, question.model_dump(), max_rows, ctx)
    if table.more and not table.artifact_id:
        raise ToolFailure(
            ErrorType.RESOURCE_ERROR,
            "RESULT_TOO_LARGE",
            "the metric's result exceeds the artifact size limit",
            "ask by fewer dimensions, a coarser grain, or a where",
        )
    artifact_id = (
        table.artifact_id or tool.artifacts.put_table(table.frame, title=table.title, source_tool="query_metrics").id
    )
    return _open_artifact(tool, artifact_id)


def _open_upload(workspace: Workspace, ref: str) -> tuple[str, int]:
    resolved = workspace.resolve(ref)
    if resolved.kind not in ("upload", "root") and not resolved.name.startswith("uploads/"):
        raise denied(
            f"'{ref[:80]}' is not an upload or a file of a read root",
            "open_file opens files of uploads/ and of the configured read roots; use load_artifact for artifacts",
        )
    fd = os.open(resolved.path, os.O_RDONLY | os.O_CLOEXEC)  # the very file resolved, with its own offset
    resolved.close()
    return resolved.filename, fd


def _export(tool: RunPython, args: dict[str, Any], fd: int | None, replay: bool = False) -> str:
    """export(obj_or_artifact, path): an object is stored as an artifact first (content-addressed), then the
    artifact is written beneath the export folder. In a replay of a saved analysis (saving it, re-running it) the
    step's export refreshes its file: the file is that analysis's output."""
    if tool.exports is None:
        raise denied("exports are not available on this server")
    artifact_id = _save(tool, args, fd) if fd is not None else str(args.get("ref", ""))
    if not artifact_id.startswith("artifact_"):
        raise invalid(f"'{artifact_id[:60]}' is not an artifact id", "pass an object or an artifact id")
    overwrite = bool(args.get("overwrite")) or replay
    return tool.exports.write(artifact_id, str(args.get("path", "")), overwrite=overwrite)


def _transfer_limit(tool: RunPython) -> int:
    return min(tool.artifacts.max_single_bytes, tool.sandbox.max_transfer_mb * 1024 * 1024)


def _save(tool: RunPython, args: dict[str, Any], fd: int) -> str:
    data = read_blob(fd, _transfer_limit(tool))
    kind = args.get("kind")
    title = str(args.get("title") or f"saved from run_python ({kind})")[:200]
    if kind == "table":
        meta = tool.artifacts.put_table(
            _arrow_table(data, _transfer_limit(tool)), title=title, source_tool="run_python"
        )
    elif kind == "text":
        meta = tool.artifacts.put_text(data.decode("utf-8"), title=title, source_tool="run_python")
    elif kind == "json":
        meta = tool.artifacts.put_json(json.loads(data), title=title, source_tool="run_python")
    elif kind == "image":
        meta = tool.artifacts.put_image(data, title=title, source_tool="run_python", mime=str(args.get("mime")))
    else:
        raise ValueError(f"cannot store kind {kind!r}")
    return meta.id


STREAMED_VALUE_BYTES = 8 * 1024 * 1024  # a table value larger than this is stored by the tool, not held whole
HEAD_ROWS = 1000  # the rows of such a value the observation is made from (the complete one is the artifact)


def _value_table(tool: RunPython, data: memoryview) -> Table:
    """The value of the last expression: a small table as it is; a large one written to its artifact straight from
    the worker's memory file (never copied whole into the server), with a copy of its first rows for the
    observation — which summarises the complete artifact."""
    import pyarrow as pa

    table = _arrow_table(data, _transfer_limit(tool))
    title = "value of the last expression"
    if len(data) <= STREAMED_VALUE_BYTES:
        return Table(title, table, total_rows=table.num_rows)
    total = table.num_rows
    meta = tool.artifacts.put_table(table, title=title, source_tool="run_python")
    head = table.take(arrow_array(range(min(HEAD_ROWS, total)), pa.int64()))  # a copy: the mapping can go
    del table
    pa.default_memory_pool().release_unused()  # the Parquet writer's buffers go back to the system
    return Table(title, head, total_rows=total, artifact_id=meta.id)


def _arrow_table(data: bytes | memoryview, limit: int) -> Any:
    """A table the worker sent: uncompressed Arrow IPC only, its declared sizes checked before decoding (an
    85 KB zstd stream can inflate to gigabytes)."""

    def refused(problem: str) -> ToolFailure:
        return ToolFailure(
            ErrorType.RESOURCE_ERROR,
            "BAD_VALUE",
            f"the table the worker sent was refused: {problem}",
            "return a smaller DataFrame (head(), an aggregate), or save it with save_artifact",
        )

    with worker_failures(broken=refused):
        return read_arrow(data, limit)


# -- the answer -------------------------------------------------------------------------------------


def _result(
    tool: RunPython, reply: dict[str, Any], fds: list[int], code_id: str, notes: list[str], worker: WorkerProcess
) -> RawResult:
    error = reply.get("error")
    value = reply.get("value")
    try:
        # a table value is mapped, not copied: a large one is stored from the worker's pages (S-16)
        table_blob = map_blob(fds.pop(0), _transfer_limit(tool)) if value and value.get("kind") == "table" else None
        blobs = [read_blob(fd, _transfer_limit(tool)) for fd in fds]
    finally:
        _close_all(fds)
    stdout, stderr = _stream(reply.get("stdout")), _stream(reply.get("stderr"))
    kept: dict[str, str] = {}
    whole_output: dict[str, tuple[str, str]] = {}  # label -> (the whole output, its artifact)
    for label in ("stdout", "stderr"):
        whole = (reply.get(label) or {}).get("whole")
        if whole:
            text = blobs.pop(0).decode("utf-8", "replace")
            stored = tool.artifacts.put_text(text, title=f"{label} of {code_id}", source_tool="run_python")
            complete = "the whole output" if whole.get("complete") else f"its first {len(text):,} characters"
            kept[label] = f'{complete} is {stored.id} (file_reader(path="{stored.id}"))'
            if whole.get("complete"):
                whole_output[label] = (text, stored.id)
    if error:
        raise _failure(error, stdout, stderr, code_id, tool.libraries, kept)
    parts: list[tuple[str, RawResult]] = []
    for label, (text, note) in (("stdout", stdout), ("stderr", stderr)):
        if label in whole_output:  # cut once, by the observer, which names the one artifact holding it all
            text, stored_id = whole_output[label]
            parts.append((label, Document(label, text, tail_matters=True, artifact_id=stored_id)))
        elif text:
            notes_here = [note] if note else []
            if label in kept:
                notes_here.append(kept[label])
            parts.append((label, Document(label, text, notes=notes_here, tail_matters=True)))
    if value and value.get("kind") == "table" and table_blob is not None:
        parts.append(("value", _value_table(tool, table_blob)))
        del table_blob
    elif value and value.get("kind") == "text":
        shown = value["text"]
        more = [f"the value's repr is {value['total']:,} characters; the first {len(shown):,} are shown"]
        parts.append(
            ("value", Document(f"value ({value['type']})", shown, notes=more if value["total"] > len(shown) else []))
        )
    for i, fig in enumerate(reply.get("figures") or [], 1):
        if fig.get("error"):
            notes.append(f"figure {i} could not be drawn: {str(fig['error'])[:200]}")
            continue
        data = blobs.pop(0)
        if not data.startswith(b"\x89PNG\r\n\x1a\n"):
            raise BadBlob("a figure is not a PNG image")
        parts.append((f"figure {i}", Image(str(fig.get("title") or f"Figure {i}"), data)))
    threads = reply.get("threads") or {}
    if threads.get("stopped"):
        notes.append(f"{threads['stopped']} thread(s) the code started were stopped when it finished")
    if threads.get("running"):
        notes.append(
            f"{threads['running']} thread(s) the code started did not stop (blocked outside Python): the "
            "interpreter was ended to stop them, so the next call starts a fresh one (variables are gone)"
        )
    if reply.get("note"):
        notes.append(reply["note"])
    if reply.get("ended_processes"):
        notes.append(f"{reply['ended_processes']} process(es) the code started were ended when it finished")
    if worker.noise_total:
        raw = worker.last_output(2000)
        notes.append(
            f"output written straight to file descriptors 1/2 is not captured as stdout "
            f"({worker.noise_total:,} bytes so far); its end: {raw[-300:]!r}"
        )
        worker.noise_total = 0
        worker.noise.clear()
    ms = float(reply.get("ms") or 0)
    title = f"Ran {code_id} in {_duration(ms)}" + ("" if parts else " (no output)")
    meta = {"code_id": code_id, "execution_ms": ms}
    return Composite(title, parts, notes=notes, meta=meta)


def _stream(report: dict[str, Any] | None) -> tuple[str, str]:
    """Text of one captured stream and a note when the sandbox kept only its head and tail."""
    if not report or not report.get("total"):
        return "", ""
    head, tail, total = report.get("head", ""), report.get("tail", ""), int(report["total"])
    kept = len(head) + len(tail)
    if kept >= total:
        return head + tail, ""
    omitted = total - kept
    text = f"{head}\n… [{omitted:,} characters omitted] …\n{tail}"
    return text, (
        f"{total:,} characters were printed; the sandbox kept the first {len(head):,} and the last {len(tail):,}"
    )


ANALYST_LIBRARIES = (
    "pandas",
    "numpy",
    "scipy",
    "statsmodels",
    "sklearn",
    "matplotlib",
    "seaborn",
    "plotly",
    "pyarrow",
    "duckdb",
    "openpyxl",
    "xlrd",
    "xlsxwriter",
    "holidays",
)


def available_libraries(allowed: list[str] | str) -> list[str]:
    """The analyst's libraries that are both allowed and installed (found on the path without importing them, and
    whatever this process loaded: the server marks numpy absent for itself, the sandbox has it)."""
    from importlib.machinery import PathFinder

    return [
        name
        for name in ANALYST_LIBRARIES
        if (allowed == "*" or name in allowed) and PathFinder.find_spec(name) is not None
    ]


def _failure(
    error: dict[str, Any],
    stdout: tuple[str, str],
    stderr: tuple[str, str],
    code_id: str,
    libraries: list[str],
    kept: dict[str, str] | None = None,
) -> ToolFailure:
    etype = str(error.get("type"))
    detail = str(error.get("traceback") or "").rstrip()
    printed = ""
    for label, (text, note) in (("stdout", stdout), ("stderr", stderr)):
        if text:  # the output's end, which the exception cut short, is what explains it
            shown = text if len(text) <= 3000 else "…" + text[-3000:]
            printed += f"\n{label} before the error ({note or f'{len(text):,} characters'}):\n{shown}"
            if kept and label in kept:
                printed += f"\n({label}: {kept[label]})"
    if error.get("syntax"):
        return ToolFailure(
            ErrorType.VALIDATION_ERROR,
            "SYNTAX_ERROR",
            f"{etype}: {error.get('message')}\n{detail}",
            f"fix the code and run it again (nothing was run); code stored as {code_id}",
        )
    if etype == "ImportPolicyError":
        return denied(
            str(error.get("message")),
            f"use the installed libraries ({', '.join(libraries)}) or the safe standard library; "
            "an administrator can extend sandbox.allowed_imports",
            code="IMPORT_NOT_ALLOWED",
        )
    if error.get("memory"):
        return ToolFailure(
            ErrorType.RESOURCE_ERROR,
            Code.OUT_OF_MEMORY,
            f"{etype}: {error.get('message')} (the sandbox's memory limit)\n{detail}{printed}",
            f"work on fewer rows or columns, or in chunks; the interpreter keeps its state; code stored as {code_id}",
        )
    hint = f"fix the code and run it again; variables set before the error are kept; code stored as {code_id}"
    missing = re.search(r"No such file or directory: '(?:\./)?(uploads/[^']+)'", str(error.get("message")))
    if etype == "FileNotFoundError" and missing:
        upload = upload_id_for(missing.group(1).split("/", 1)[1])
        hint = (
            f'the workspace\'s files are not files of the sandbox: read it with load_file("{upload}") '
            f'(a DataFrame) or open_file("{upload}"); ' + hint
        )
    return ToolFailure(
        ErrorType.EXECUTION_ERROR, "PYTHON_EXCEPTION", f"{etype}: {error.get('message')}\n{detail}{printed}", hint
    )


def _missing_protections(worker: WorkerProcess, network_allowed: bool) -> str:
    """What the worker could not apply of what it should have (by the protection ids it reported)."""
    from sandbox import protocol

    ids = {str(p[0]) for p in (worker.ready or {}).get("protections", []) if isinstance(p, list) and p}
    missing = []
    if not network_allowed and protocol.NETWORK_NAMESPACE not in ids:
        missing.append("network isolation")
    if protocol.READ_ONLY_ROOT not in ids:
        missing.append("a read-only filesystem")
    if not missing:
        return ""
    return f"this machine does not allow {' or '.join(missing)} for the sandbox (see `ba-mcp doctor`)"


def _frame_problem(message: dict[str, Any], fds: list[int], token: str) -> str:
    """Why a frame from the worker is not one the running cell may send ('' when it is)."""
    op = message.get("op")
    if message.get("cell") != token:
        return f"a {str(op)[:20]!r} frame that does not carry the running cell's token"
    if op == "progress":
        ok = isinstance(message.get("done"), int | float) and not fds
        return "" if ok else "a malformed progress frame"
    if op == "call":
        method = message.get("method")
        if not isinstance(message.get("id"), int) or not isinstance(message.get("args"), dict):
            return "a malformed helper call"
        allowed = {1} if method == "save_artifact" else {0, 1} if method == "export" else {0}
        return "" if len(fds) in allowed else "a helper call with unexpected descriptors"
    if op == "done":
        value = message.get("value") or {}
        figures = message.get("figures") or []
        shapes = isinstance(value, dict) and isinstance(figures, list) and all(isinstance(f, dict) for f in figures)
        if not shapes:
            return "a malformed answer"
        streams = sum(1 for k in ("stdout", "stderr") if isinstance(message.get(k), dict) and message[k].get("whole"))
        wanted = (1 if value.get("kind") == "table" else 0) + streams + sum(1 for f in figures if not f.get("error"))
        return "" if len(fds) == wanted else "an answer with unexpected descriptors"
    return f"an unknown frame {str(op)[:20]!r}"


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _duration(ms: float) -> str:
    return f"{ms:.1f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"
