"""The work the tools and services hand a DuckDB worker, by domain: a file to decode (``parse``), a page's text
(``extract``), a Parquet artifact written or read (``DuckParquet``: the server holds no Parquet writer or reader),
a stored table's column figures (``table_stats``), metrics work (``ask_metrics``) and a saved analysis's
placeholders (``placeholders``). Each builds its typed request (``messages``) and reads the answer."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from ba_mcp.errors import ErrorType, ToolFailure
from ba_mcp.workers.failures import EngineError, engine_failure, worker_failures
from ba_mcp.workers.messages import (
    Extract,
    Extracted,
    Metered,
    MetricsWork,
    Parse,
    Placeholders,
    R,
    ReadParquet,
    Request,
    Stats,
    WriteParquet,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from ba_mcp.tool import ToolContext
    from ba_mcp.workers.duckworkers import DuckWorkers

log = logging.getLogger(__name__)

__all__ = [
    "DuckParquet",
    "ask_metrics",
    "extract",
    "parse",
    "placeholders",
    "read_parquet",
    "table_stats",
    "write_parquet",
]


def parse(
    workers: DuckWorkers,
    ctx: ToolContext,
    source: Any,
    fmt: str,
    window: Any,
    bounds: Any,
    title: str,
    encoding: str | None,
    whole: bool = False,
) -> Any:
    """A workspace file (a resolved source, held open) read by ``ba_mcp.formats`` in the session's engine
    worker: the raw result, its Arrow data checked before it is decoded here. A worker that dies while it
    parses (an allocation of a hostile spreadsheet, say) is PARSER_CRASHED. ``whole``: the whole source as a
    table, or NOT_TABULAR — decided in the worker, so no partial read is sent."""
    from ba_mcp import registry
    from ba_mcp.workers.spawn import module_package
    from ba_mcp.workers.wire import decode_raw

    plugin = registry.format_info(fmt)  # a plug-in's format: read by its own function, in the worker too
    reader = plugin.reader if plugin is not None else ""
    outside = module_package(reader.partition(":")[0]) if reader else None
    request = Parse(
        source={
            "name": source.name,
            "size": source.size,
            "suffix": source.suffix,
            "kind": source.kind,
            "ref_id": source.ref_id,
        },
        format=fmt,
        window={"offset": window.offset, "nrows": window.nrows, "sheet": window.sheet},
        bounds=bounds.model_dump(),
        title=title,
        encoding=encoding,
        whole=whole,  # all of it or an error, decided in the worker (nothing partial is sent)
        reader=reader,
        path=outside[1] if outside is not None else None,
    )
    reply, blobs = _decode(workers, ctx, request, source.fd, title[:200], 'check the format (format="text" shows it)')
    with worker_failures():
        return decode_raw(reply["raw"], blobs, workers.conf.max_transfer_mb * 1024 * 1024)


def _decode(
    workers: DuckWorkers, ctx: ToolContext, request: Request[R], fd: int, what: str, hint: str
) -> tuple[R, list[bytes]]:
    """One decoding request in the session's worker: a worker that dies doing it is PARSER_CRASHED, an error
    of the library that decodes is BAD_DATA."""

    def unreadable(exc: EngineError) -> ToolFailure:
        detail = exc.message[:300] or exc.detail
        return ToolFailure(ErrorType.VALIDATION_ERROR, "BAD_DATA", f"{what} could not be read: {detail}", hint)

    with workers.held(ctx.session, ctx) as call:
        try:
            with worker_failures(engine=unreadable):
                return call.ask(request, [fd])
        except ToolFailure as failure:
            if failure.code == "ENGINE_CRASHED":
                raise ToolFailure(failure.type, "PARSER_CRASHED", failure.message, failure.hint) from None
            raise


def write_parquet(workers: DuckWorkers, table: pa.Table, fd: int) -> None:
    """``table`` as Parquet into ``fd``, written by the worker of the session keyed "default" (as
    ``table_stats``): the server holds no Parquet writer (issue 40). Raises when the worker cannot."""
    import pyarrow as pa

    stream = os.memfd_create("table", os.MFD_CLOEXEC)
    try:
        with open(stream, "wb", closefd=False) as out, pa.ipc.new_stream(out, table.schema) as writer:
            writer.write_table(table)  # batch by batch into the memory file: never a second copy in the server
        with workers.held("default", None, wait_s=30) as call:
            reply, _ = call.ask(WriteParquet(), [stream, fd])
    finally:
        os.close(stream)
    if int(reply["rows"]) != table.num_rows:
        raise EngineError({"message": f"the worker wrote {reply['rows']} of {table.num_rows} rows"})


def read_parquet(workers: DuckWorkers, fd: int) -> pa.Table:
    """The table of a Parquet artifact (``fd``), read by the worker of the session keyed "default" and handed
    over as an Arrow stream (checked): the server holds no Parquet reader (issue 40)."""
    from ba_mcp.workers.wire import read_arrow

    with workers.held("default", None, wait_s=30) as call:
        reply, blobs = call.ask(ReadParquet(), [fd])
    table = read_arrow(blobs[0], workers.conf.max_transfer_mb * 1024 * 1024)
    if table.num_rows != int(reply["rows"]):
        raise EngineError({"message": f"the worker read {reply['rows']} rows; the stream holds {table.num_rows}"})
    return table


def table_stats(workers: DuckWorkers, fd: int) -> tuple[dict[str, dict[str, Any]], int] | None:
    """Whole-column figures of a stored table (an open Parquet file), computed in the worker of the session
    keyed "default" (the one session of stdio; over HTTP, a worker of the server's own)."""
    try:
        with workers.held("default", None, wait_s=0.5) as call, worker_failures(engine=engine_failure):
            reply, _ = call.ask(Stats(), [fd])  # stdio's one session: its worker
    except ToolFailure as exc:
        log.warning("column figures of a stored table could not be computed: %s", exc)
        return None
    return reply["stats"], int(reply["total"])


def extract(workers: DuckWorkers, ctx: ToolContext, body: bytes, request: Extract) -> Extracted:
    """A downloaded page or PDF's readable text, extracted in the session's engine worker (``web.extract``);
    a worker that dies or runs past the timeout is an error, not a hung server."""
    import fcntl

    fd = os.memfd_create("page", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view) :]
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
        reply, blobs = _decode(workers, ctx, request, fd, "the page", "try another address")
    finally:
        os.close(fd)
    reply["text"] = blobs[0].decode("utf-8", "replace") if blobs else ""
    return reply


def ask_metrics(workers: DuckWorkers, ctx: ToolContext | None, session: str, request: MetricsWork) -> Metered:
    """Metrics work (``Metrics.request``) in the session's engine worker: the metric files are parsed, a query's
    predicates (text from the model) checked and compiled there, never in the server."""
    with workers.held(session, ctx) as call:
        reply, _ = call.ask(request)
    return reply


def placeholders(
    workers: DuckWorkers, ctx: ToolContext, request: Placeholders
) -> tuple[str, list[str], dict[str, Any]]:
    """A saved analysis's parameters found in a step's SQL, filter or code and replaced, in the session's DuckDB
    worker (the text is the model's): the text, the names found, what the step's result covers (a cut)."""
    with workers.held(ctx.session, ctx) as call:
        reply, _ = call.ask(request)
    return str(reply["text"]), list(reply["found"]), dict(reply.get("cut") or {})


class DuckParquet:
    """The artifact store's Parquet I/O through the DuckDB workers (``write``: a table into a descriptor, ``read``:
    a descriptor's table): the server keeps no Parquet writer or reader of its own (issue 40)."""

    def __init__(self, workers: DuckWorkers) -> None:
        self.workers = workers

    def write(self, table: pa.Table, fd: int) -> None:
        write_parquet(self.workers, table, fd)

    def read(self, fd: int) -> pa.Table:
        return read_parquet(self.workers, fd)
