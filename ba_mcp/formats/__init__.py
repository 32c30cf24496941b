"""One place for formats: bytes in a file (a workspace file held open, or downloaded bytes) + a format
→ a raw result (Table / Document / JsonValue / Image), read with bounds (S-10).

``formats.table`` is the one table of suffixes and media types. One module per family of formats reads
them (``csv``, ``excel``, ``json``, ``parquet``, ``text``); ``Reader`` is all of them, parsing one ``Source``
(anything with a name, a size, a suffix, ``open()`` and a ``path`` that reopens the very same file) within a
``Window`` (offset, nrows, sheet): only what the window needs is read — a 100-row preview of a multi-GB CSV
costs the same as of a small one — and files over ``formats.max_file_bytes`` are read partially.
``table_of`` turns a source into an Arrow table for SQL. A plug-in's format (``registry.FormatInfo``, by a
``ba_mcp.formats`` entry point) is read by its own function, given the reader (``Reading``) as the built-in
families are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ba_mcp.errors import ErrorType, ToolFailure
from ba_mcp.formats.base import ReaderBase, Reading, Source, Window, detect_encoding
from ba_mcp.formats.csv import CsvReading, check_csv_header, parse_iso_dates
from ba_mcp.formats.excel import ExcelReading
from ba_mcp.formats.json import JsonReading
from ba_mcp.formats.parquet import ParquetReading
from ba_mcp.formats.table import (
    ARTIFACT_FORMATS,
    DATA_FILE_SUFFIX,
    FORMATS,
    IMAGE_MIME,
    MEDIA_TYPES,
    TABLE_FORMATS,
    TABLE_SUFFIXES,
    TEXT_MIME,
    format_for,
    known_format,
)
from ba_mcp.formats.text import TextReading
from ba_mcp.results import Table

if TYPE_CHECKING:
    import pyarrow as pa

    from ba_mcp.settings import FormatsSettings

__all__ = [
    "ARTIFACT_FORMATS",
    "DATA_FILE_SUFFIX",
    "FORMATS",
    "IMAGE_MIME",
    "MEDIA_TYPES",
    "TABLE_FORMATS",
    "TABLE_SUFFIXES",
    "TEXT_MIME",
    "Reader",
    "Reading",
    "Source",
    "Window",
    "check_csv_header",
    "detect_encoding",
    "format_for",
    "known_format",
    "parse_iso_dates",
    "table_of",
]


class Reader(CsvReading, ExcelReading, JsonReading, ParquetReading, TextReading, ReaderBase):
    """Reads a Source in one of the formats (``read(fmt)`` dispatches to the family's ``_read_<fmt>``)."""


def table_of(source: Source, settings: FormatsSettings, title: str) -> pa.Table:
    """The whole of a tabular source (JSON records, JSON Lines, a workbook's first sheet) as an Arrow table,
    within the reader's bounds; ``validation_error`` when it is not a table or is read only in part."""

    raw = Reader(source, Window(), settings, title, None).read(format_for(source.suffix))
    if not isinstance(raw, Table) or raw.more:
        raise ToolFailure(
            ErrorType.VALIDATION_ERROR,
            "NOT_TABULAR",
            f"{title} is not a table" if not isinstance(raw, Table) else f"{title} is too large to query whole",
            "query CSV, Parquet, JSON arrays of objects, JSON Lines or Excel files",
        )
    return raw.frame
