"""What a reader reads: a ``Source`` (a workspace file held open, or downloaded bytes in a memory file) within a
``Window``; ``ReaderBase`` holds them with the bounds (``formats:``) and the helpers every family shares — and is
what a plug-in's format is given (``Reading``, ``ba_mcp.Reading``): ``source``, ``window``, ``bounds``, ``title``,
``encoding``, and ``row_window``, ``text_encoding``, ``table`` to read within the bounds and answer a window."""

from __future__ import annotations

import codecs
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from ba_mcp import registry
from ba_mcp.errors import Code, ErrorType, ToolFailure, invalid
from ba_mcp.results import Composite, Document, Image, JsonValue, RawResult, Table

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from ba_mcp.settings import FormatsSettings
    from ba_mcp.stores.artifacts import ArtifactStore


class Source(Protocol):
    """A file to parse, held open. ``path`` reopens that very file (``/proc/self/fd/<n>``)."""

    @property
    def name(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def suffix(self) -> str: ...
    @property
    def path(self) -> Path: ...
    @property
    def kind(self) -> str: ...
    @property
    def ref_id(self) -> str | None: ...
    def open(self) -> BinaryIO: ...


@dataclass(frozen=True)
class Window:
    """What part of the source to read: rows (tables) or characters (text) from ``offset``; ``nrows``
    rows (tables) or lines (text); ``sheet`` for workbooks."""

    offset: int = 0
    nrows: int | None = None
    sheet: str | int | None = None


class ReaderBase:
    """What every family's reader shares: the source, the window, the bounds, and the helpers."""

    def __init__(
        self,
        resolved: Source,
        window: Window,
        settings: FormatsSettings,
        title: str,
        encoding: str | None,
        artifacts: ArtifactStore | None = None,
    ) -> None:
        self.source = resolved
        self.window = window
        self.bounds = settings
        self.title = title
        self.encoding = encoding
        self.artifacts = artifacts
        self.large = resolved.size > settings.max_file_bytes
        self.cell_note = ""  # said only when the cell cap really cut the read

    def read(self, fmt: str, reader: str = "") -> RawResult:
        """The source read as ``fmt``: a built-in family's ``_read_<fmt>``, or a plug-in format's function
        (``reader``, "module:function" — given with the request in a worker, whose registry holds no plug-in —
        else the registry's)."""
        info = registry.format_info(fmt)
        reader = reader or (info.reader if info is not None else "")
        method = _plugin_reader(self, reader) if reader else getattr(self, f"_read_{fmt}", None)
        if method is None:
            raise invalid(f"format '{fmt}' is not supported")
        if self.window.sheet is not None and fmt != "excel":
            raise invalid("'sheet' applies to Excel files only", f"this file is read as {fmt}")
        raw: RawResult = method()
        if not isinstance(raw, Table | Document | JsonValue | Image | Composite):
            raise ToolFailure(
                ErrorType.EXECUTION_ERROR,
                "FORMAT_PLUGIN",
                f"the reader of format {fmt!r} returned no result ({type(raw).__name__})",
                "ask the operator: the plug-in that adds the format is broken",
            )
        return raw

    # -- what a plug-in's format uses too -------------------------------------------------------

    def row_window(self) -> tuple[int | None, list[str]]:
        """The rows (or records) to read — the window's ``nrows``, else all of them, or ``formats.partial_rows`` of
        a file over ``formats.max_file_bytes`` — and the notes explaining a partial read."""
        return self._row_window()

    def text_encoding(self, sample: bytes | None = None) -> str:
        """The encoding to decode the source with: the call's ``encoding``, else the one its first bytes show
        (BINARY_FILE when they look binary)."""
        return self._text_encoding(sample)

    def table(self, frame: pd.DataFrame | pa.Table, more: bool, notes: list[str], total: int | None = None) -> Table:
        """The window's rows (``frame``, read from ``window.offset``) as the raw Table every reader returns:
        ``more`` when rows follow it (the continuation from the next offset), ``total`` rows when known."""
        return self._table(frame, more, notes, total)

    # -- shared helpers ------------------------------------------------------------------------

    def _row_window(self) -> tuple[int | None, list[str]]:
        """The number of rows to read and the notes explaining a partial read."""
        if self.window.nrows is not None:
            return self.window.nrows, []
        if self.large:
            return self.bounds.partial_rows, [
                f"the file is {self.source.size:,} bytes, over the {self.bounds.max_file_bytes:,}-byte read limit: "
                "only "
                f"{self.bounds.partial_rows:,} rows were read"
            ]
        return None, []

    def _cell_window(self, nrows: int | None, notes: list[str], columns: int) -> tuple[int | None, list[str]]:
        """Rows to read so that at most ``max_cells`` cells are read in one call."""
        cap = max(1, self.bounds.max_cells // max(columns, 1))
        if nrows is None or nrows > cap:
            self.cell_note = (
                f"a call reads at most {self.bounds.max_cells:,} cells ({cap:,} rows of {columns:,} columns); "
                "continue with offset and nrows"
            )
            return cap, notes
        return nrows, notes

    def _table(
        self, frame: pd.DataFrame | pa.Table, more: bool, notes: list[str], total: int | None = None, **meta: Any
    ) -> Table:
        offset = self.window.offset
        if total is None and not more:
            total = offset + len(frame)
        next_args = {"offset": offset + len(frame)} if more else None
        artifact_id = self.source.ref_id if (self.source.kind == "artifact" and offset == 0 and not more) else None
        if more and self.cell_note:
            notes = [*notes, self.cell_note]
        return Table(
            self.title,
            frame,
            offset=offset,
            total_rows=total,
            more=more,
            next_args=next_args,
            notes=notes,
            meta=meta,
            artifact_id=artifact_id,
        )

    def _decode_failed(self, encoding: str) -> ToolFailure:
        return ToolFailure(
            ErrorType.VALIDATION_ERROR,
            Code.DECODE_FAILED,
            f"{self.title} is not valid {encoding} text",
            "pass encoding= (e.g. latin-1, cp1252, utf-16)",
        )

    def _sample(self) -> bytes:
        with self.source.path.open("rb") as f:
            return f.read(self.bounds.encoding_sample_bytes)

    def _text_encoding(self, sample: bytes | None = None) -> str:
        if self.encoding:
            return self.encoding
        sample = self._sample() if sample is None else sample
        enc = detect_encoding(sample)
        if enc is None:
            raise ToolFailure(
                ErrorType.VALIDATION_ERROR,
                "BINARY_FILE",
                f"{self.title} looks like a binary file, not text",
                "pass format= for a binary format (parquet, excel), or encoding= if it is text in an unusual encoding",
            )
        return enc

    # -- tables ---------------------------------------------------------------------------------


Reading = ReaderBase  # the name a plug-in's format knows it by (``ba_mcp.Reading``)


def _plugin_reader(reading: ReaderBase, reader: str) -> Callable[[], Any]:
    """A plug-in format's function (``"module:function"``, imported by name: in a worker, from the package bound
    into its root) applied to ``reading``."""
    import importlib

    module, _, name = reader.partition(":")
    function = getattr(importlib.import_module(module), name)
    return lambda: function(reading)


def detect_encoding(sample: bytes) -> str | None:
    """The text encoding of a sample, or None when it looks binary.

    BOMs decide first; then strict UTF-8 (allowing a sequence cut at the end of the sample);
    then charset-normalizer's best guess."""
    for bom, name in (
        (codecs.BOM_UTF32_LE, "utf-32"),
        (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if sample.startswith(bom):
            return name
    if not sample:
        return "utf-8"
    if b"\x00" in sample:
        return None
    try:
        codecs.getincrementaldecoder("utf-8")().decode(sample, final=False)
        return "utf-8"
    except UnicodeDecodeError:
        pass
    import charset_normalizer

    best = charset_normalizer.from_bytes(sample).best()
    if best is None:
        return None
    # Short Latin-script samples decode cleanly in many code pages and the detector's tie-break is
    # arbitrary (cp775, cp1250…). Windows-1252, the most common of them in business files, wins then.
    if all(a.startswith(("Latin", "Basic Latin", "General Punctuation", "Control")) for a in best.alphabets):
        try:
            sample.decode("cp1252")
            return "cp1252"
        except UnicodeDecodeError:
            pass
    return codecs.lookup(best.encoding).name
