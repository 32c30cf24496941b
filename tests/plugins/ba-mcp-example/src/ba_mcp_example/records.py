"""The format ``records`` (``.rec`` files): records of ``field: value`` lines, a blank line between two records,
``#`` lines comments — a table with one row per record and one text column per field (in the order the fields are
first seen; a field a record lacks is empty).

ba-mcp calls ``read`` inside its engine worker, which the server kills at the call's timeout, never in the server:
the bytes are untrusted. ``reading`` (``ba_mcp.Reading``) holds the file open (``source``), the window asked for
(``window.offset``, ``window.nrows``: records) and the bounds; ``row_window`` says how many records to read (all
of a small file, a part of one over ``formats.max_file_bytes``), ``table`` makes the windowed result."""

from __future__ import annotations

import codecs
from collections.abc import Iterator

from ba_mcp import ErrorType, Reading, Table, ToolFailure


def read(reading: Reading) -> Table:
    import pyarrow as pa

    nrows, notes = reading.row_window()
    first, wanted = reading.window.offset, nrows
    rows: list[dict[str, str]] = []
    more = False
    with reading.source.open() as raw:
        encoding = reading.text_encoding(raw.read(reading.bounds.encoding_sample_bytes))
        raw.seek(0)
        text = codecs.getreader(encoding)(raw)
        for index, record in enumerate(_records(text, reading.title)):
            if index < first:
                continue
            if wanted is not None and len(rows) >= wanted:
                more = True
                break
            rows.append(record)
    fields = list(dict.fromkeys(name for row in rows for name in row))
    frame = pa.table({name: pa.array([row.get(name) for row in rows], pa.string()) for name in fields})
    return reading.table(frame, more, notes)


def _records(lines: Iterator[str], title: str) -> Iterator[dict[str, str]]:
    record: dict[str, str] = {}
    for number, line in enumerate(lines, start=1):
        line = line.rstrip("\r\n")
        if not line.strip():
            if record:
                yield record
            record = {}
            continue
        if line.startswith("#"):
            continue
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            raise ToolFailure(
                ErrorType.VALIDATION_ERROR,
                "BAD_RECORD",
                f"line {number} of {title} is no 'field: value' line",
                'fix the line, or read the file with format="text"',
            )
        record[name.strip()] = value.strip()
    if record:
        yield record
