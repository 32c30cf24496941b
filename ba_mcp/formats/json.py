"""JSON documents and JSON Lines: a list of records becomes a table, anything else a JSON value."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ba_mcp.errors import ErrorType, ToolFailure, invalid
from ba_mcp.formats.csv import parse_iso_dates
from ba_mcp.formats.text import TextReading
from ba_mcp.results import JsonValue, RawResult

if TYPE_CHECKING:
    import pandas as pd


class JsonReading(TextReading):
    def _read_json(self) -> RawResult:
        if self.large:
            doc = self._read_text(mime="application/json")
            doc.notes.append(
                "the JSON file is over the read limit, so it is shown as text (JSON cannot be parsed in part)"
            )
            return doc
        encoding = self._text_encoding()
        try:
            value = json.loads(self.source.path.read_text(encoding=encoding))
        except json.JSONDecodeError as exc:
            raise ToolFailure(
                ErrorType.VALIDATION_ERROR,
                "BAD_JSON",
                f"{self.title} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
                'read it with format="text" to look at it',
            ) from None
        except RecursionError:
            raise ToolFailure(
                ErrorType.VALIDATION_ERROR,
                "BAD_JSON",
                f"{self.title} is JSON nested too deeply to read (thousands of levels)",
                'read it with format="text" to look at it',
            ) from None
        except UnicodeDecodeError:
            raise self._decode_failed(encoding) from None
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            nrows = self.window.nrows
            end = None if nrows is None else self.window.offset + nrows
            records = value[self.window.offset : end]
            more = end is not None and end < len(value)
            return self._table(_records_frame(records), more, [], total=len(value), encoding=encoding)
        if self.window.offset or self.window.nrows:
            raise invalid(
                "offset and nrows apply to JSON arrays of objects (tables) only",
                "this JSON is not a list of records; read it without them",
            )
        artifact_id = self.source.ref_id if self.source.kind == "artifact" else None
        return JsonValue(self.title, value, artifact_id=artifact_id, meta={"encoding": encoding})

    def _read_jsonl(self) -> RawResult:
        encoding = self._text_encoding()
        nrows, notes = self._row_window()
        records: list[Any] = []
        more = False
        with self.source.path.open("r", encoding=encoding) as f:
            lines = ((i, line) for i, line in enumerate(f, start=1) if line.strip())
            for index, (lineno, line) in enumerate(lines):
                if index < self.window.offset:
                    continue
                if nrows is not None and len(records) >= nrows:
                    more = True
                    break
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ToolFailure(
                        ErrorType.VALIDATION_ERROR,
                        "BAD_JSONL",
                        f"line {lineno} of {self.title} is not valid JSON ({exc.msg})",
                        'fix the line, or read the file with format="text"',
                    ) from None
        if records and all(isinstance(r, dict) for r in records):
            return self._table(_records_frame(records), more, notes, encoding=encoding)
        if more:
            notes.append(f"more lines follow from offset={self.window.offset + len(records)}")
        return JsonValue(self.title, records, notes=notes, meta={"encoding": encoding})

    # -- documents and images ---------------------------------------------------------------------


def _records_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Records as a flat table: nested objects become dotted columns, lists become JSON text."""
    import pandas as pd

    frame = parse_iso_dates(pd.json_normalize(records, max_level=2))
    for col in frame.columns:
        if frame[col].map(lambda v: isinstance(v, (list, dict))).any():
            frame[col] = frame[col].map(
                lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":")) if isinstance(v, (list, dict)) else v
            )
    return frame
