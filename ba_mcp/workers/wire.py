"""What crosses between a worker and the server: raw results as a JSON frame plus blobs, and Arrow IPC
streams read with their declared sizes checked before anything is decoded.

A worker is untrusted (it parsed hostile bytes or ran hostile SQL), so the server never inflates what it
sends: an Arrow stream must be uncompressed IPC (its decoded size is then its size in bytes, read in place),
and any message that declares body compression is refused before it is decoded — an 85 KB zstd stream of
2.5 GB is an error, not 2.5 GB in the server.

Also the workers' side of an answer: ``memfile`` (a sealed memory file, the only blob the server takes) and
``Failure`` (an answer that is an error in the error vocabulary (T-E)).
"""

from __future__ import annotations

import dataclasses
import os
import struct
from typing import TYPE_CHECKING, Any

from ba_mcp.results import Composite, Document, Image, JsonValue, RawResult, Table

if TYPE_CHECKING:
    import pyarrow as pa


class BadStream(ValueError):
    """An Arrow stream the server will not decode (compressed, malformed, over its size limit)."""


# -- Arrow IPC, checked ------------------------------------------------------------------------------

_SCHEMA, _DICTIONARY, _BATCH = 1, 2, 3  # Message.header_type (Arrow's Message.fbs)


def _fields(buf: bytes, pos: int) -> Any:
    """Field lookup of the flatbuffer table at ``pos``: i -> absolute position of field i, or None."""
    vtable = pos - struct.unpack_from("<i", buf, pos)[0]
    size = struct.unpack_from("<H", buf, vtable)[0]

    def field(i: int) -> int | None:
        at = 4 + 2 * i
        if at + 2 > size:
            return None
        offset = struct.unpack_from("<H", buf, vtable + at)[0]
        return pos + offset if offset else None

    return field


def _indirect(buf: bytes, at: int) -> int:
    return at + struct.unpack_from("<I", buf, at)[0]


def _compressed(metadata: bytes) -> bool:
    """Whether a record batch or dictionary batch message declares body compression (RecordBatch field 3)."""
    message = _fields(metadata, struct.unpack_from("<I", metadata, 0)[0])
    kind_at, header_at = message(1), message(2)
    kind = metadata[kind_at] if kind_at is not None else 0
    if kind not in (_DICTIONARY, _BATCH) or header_at is None:
        return False
    header = _fields(metadata, _indirect(metadata, header_at))
    if kind == _DICTIONARY:
        data_at = header(1)
        if data_at is None:
            return False
        header = _fields(metadata, _indirect(metadata, data_at))
    return header(3) is not None


def read_arrow(data: bytes | memoryview, limit: int) -> pa.Table:
    """The table an uncompressed Arrow IPC stream holds, read in place. BadStream when it is compressed,
    not a stream, or over ``limit`` bytes."""
    import pyarrow as pa

    if len(data) > limit:
        raise BadStream(f"the stream is {len(data):,} bytes; the limit is {limit:,}")
    try:
        reader = pa.ipc.MessageReader.open_stream(pa.py_buffer(data))
        first = reader.read_next_message()
        if first.type != "schema":
            raise BadStream("the stream does not start with a schema")
        schema = pa.ipc.read_schema(first)
        batches = []
        dictionaries = False
        while True:
            try:
                message = reader.read_next_message()
            except StopIteration:
                break
            if _compressed(bytes(message.metadata)):
                raise BadStream("the stream is compressed; only uncompressed Arrow IPC is accepted")
            if message.type != "record batch":
                dictionaries = True
                break
            batches.append(pa.ipc.read_record_batch(message, schema))
        if dictionaries:  # dictionary-encoded columns: every message checked above and below, then decoded
            reader2 = pa.ipc.MessageReader.open_stream(pa.py_buffer(data))
            for message in reader2:
                if message.type != "schema" and _compressed(bytes(message.metadata)):
                    raise BadStream("the stream is compressed; only uncompressed Arrow IPC is accepted")
            return pa.ipc.open_stream(pa.py_buffer(data)).read_all()
        return pa.Table.from_batches(batches, schema=schema)
    except BadStream:
        raise
    except (pa.ArrowException, OSError, struct.error, IndexError, ValueError) as exc:
        raise BadStream(f"not a readable Arrow stream ({str(exc)[:200]})") from None


def write_arrow(table_or_batches: Any, schema: Any = None) -> bytes:
    """An uncompressed Arrow IPC stream of a table (or of batches with ``schema``)."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    batches = table_or_batches.to_batches() if isinstance(table_or_batches, pa.Table) else table_or_batches
    schema = schema if schema is not None else table_or_batches.schema
    with pa.ipc.new_stream(sink, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def first_rows(reader: Any, convert: Any, schema: Any, max_rows: int) -> tuple[list[Any], int, bool, bytes]:
    """A result's first batches as a worker answers a statement (DuckDB's and every connection's): ``reader``'s
    batches (each through ``convert``) until more than ``max_rows`` rows are read — the batches read, the rows in
    them, whether the result has more than ``max_rows``, and its first ``max_rows + 1`` rows as an Arrow stream
    of ``schema``. The reader is left where it stopped (its rest is stored, or dropped, later)."""
    import pyarrow as pa

    head: list[Any] = []
    have = 0
    for batch in reader:
        head.append(convert(batch))
        have += batch.num_rows
        if have > max_rows:
            break
    return head, have, have > max_rows, write_arrow(pa.Table.from_batches(head, schema=schema).slice(0, max_rows + 1))


# -- raw results ---------------------------------------------------------------------------------------

_KINDS = {"table": Table, "document": Document, "json": JsonValue, "image": Image, "composite": Composite}


def encode_raw(raw: RawResult) -> tuple[dict[str, Any], list[bytes]]:
    """A raw result as a JSON-able dict and the blobs it refers to by index (Arrow streams, image bytes)."""
    blobs: list[bytes] = []

    def enc(value: RawResult) -> dict[str, Any]:
        kind = next(k for k, cls in _KINDS.items() if isinstance(value, cls))
        out: dict[str, Any] = {"kind": kind}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.name == "frame":
                blobs.append(write_arrow(item))
                out["frame"] = len(blobs) - 1
            elif f.name == "data" and kind == "image":
                blobs.append(bytes(item))
                out["data"] = len(blobs) - 1
            elif f.name == "parts":
                out["parts"] = [[label, enc(part)] for label, part in item]
            else:
                out[f.name] = item
        return out

    return enc(raw), blobs


def decode_raw(encoded: dict[str, Any], blobs: list[bytes], limit: int) -> RawResult:
    """The raw result ``encode_raw`` described; Arrow streams are read with ``read_arrow`` (checked)."""
    cls = _KINDS[encoded["kind"]]
    names = {f.name for f in dataclasses.fields(cls)}
    args = {k: v for k, v in encoded.items() if k in names}
    if "frame" in args:
        args["frame"] = read_arrow(blobs[int(args["frame"])], limit)
    if cls is Image:
        args["data"] = blobs[int(args["data"])]
    if cls is Composite:
        args["parts"] = [(label, decode_raw(part, blobs, limit)) for label, part in args.get("parts", [])]
    if cls is Table and args.get("next_args") is not None:
        args["next_args"] = dict(args["next_args"])
    return cls(**args)  # type: ignore[no-any-return]


def memfile(data: bytes, name: str = "blob") -> int:
    """A sealed memory file holding ``data`` (the server reads only sealed ones)."""
    import fcntl

    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SEAL)
    return fd


class Failure(Exception):
    """An answer that is an error in the error vocabulary (T-E) (type, code, message, hint)."""

    def __init__(self, **fields: Any) -> None:
        super().__init__(fields.get("message", ""))
        self.fields = fields


def large_scan(engine: str, scanned: int, relations: list[str], bound: int, scans: str = "", hint: str = "") -> Failure:
    """``LARGE_SCAN``, in the same words for every engine (tools.query_database.confirm_scan_rows): ``engine``'s own
    figure of the rows a statement would read (``scans``: which, e.g. " in sequential scans"), the first relations
    it reads, the bound it is over; the hint says how to read fewer rows (the same statement sent again runs)."""
    return Failure(
        type="validation_error",
        code="LARGE_SCAN",
        message=f"{engine} expects this statement to read about {scanned:,} rows{scans} (of "
        f"{', '.join(relations[:3])}), more than the {bound:,} a query reads unasked "
        "(tools.query_database.confirm_scan_rows)",
        hint=f"{hint or 'filter or aggregate on fewer rows'}, or send the same query again to run it as it is",
    )
