"""Untrusted bytes decoded in a DuckDB worker: a workspace file or a download read by ``ba_mcp.formats``
(``parse``), a downloaded page's or PDF's readable text (``extract``)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ba_mcp.inside.serve import Answer
from ba_mcp.workers.messages import Extract, Extracted, Parse, Parsed
from ba_mcp.workers.wire import encode_raw, memfile

__all__ = ["FdSource", "extract", "parse"]


@dataclass
class FdSource:
    """A file handed over as a descriptor (``ba_mcp.formats.Source``)."""

    name: str
    size: int
    suffix: str
    kind: str
    ref_id: str | None
    fd: int

    @property
    def path(self) -> Path:
        return Path(f"/proc/self/fd/{self.fd}")

    def open(self) -> Any:
        return open(self.path, "rb")


def parse(request: Parse, fds: list[int]) -> Answer[Parsed]:
    from ba_mcp.formats import Reader, Window
    from ba_mcp.settings import FormatsSettings

    if request.path and request.path not in sys.path:  # a plug-in format's package, bound into this root
        sys.path.append(request.path)
    s = request.source
    source = FdSource(s["name"], s["size"], s["suffix"], s["kind"], s.get("ref_id"), fds[0])
    window = Window(**(request.window or {}))
    reader = Reader(source, window, FormatsSettings(**request.bounds), request.title, request.encoding)
    raw = reader.read(request.format, request.reader)
    if request.whole:  # a downloaded data file is kept whole or not at all: checked before it is sent
        from ba_mcp.errors import ErrorType, ToolFailure
        from ba_mcp.results import Table

        if not isinstance(raw, Table) or raw.more:
            title = request.title
            raise ToolFailure(
                ErrorType.VALIDATION_ERROR,
                "NOT_TABULAR",
                f"{title} is not a table" if not isinstance(raw, Table) else f"{title} is too large to read whole",
                "query CSV, Parquet, JSON arrays of objects, JSON Lines or Excel files",
            )
    encoded, blobs = encode_raw(raw)
    return {"op": "raw", "raw": encoded}, [memfile(b) for b in blobs]


def extract(request: Extract, fds: list[int]) -> Answer[Extracted]:
    from ba_mcp.web.extract import extract_in_worker

    with open(fds[0], "rb", closefd=False) as f:
        f.seek(0)
        body = f.read()
    result = extract_in_worker(body, request.kind, request.url, request.charset)
    text = str(result["text"]).encode("utf-8", "surrogatepass")
    return {"op": "extracted", "title": result.get("title")}, [memfile(text)]
