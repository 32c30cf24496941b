"""One place for formats: bytes in a file (a workspace file held open, or downloaded bytes) + a format
→ a raw result (Table / Document / JsonValue / Image), read with bounds (S-10).

``FORMATS`` is the one table of suffixes and media types, used by file_reader, query_database, the
artifact store and web_reader. ``Reader`` parses one ``Source`` (anything with a name, a size, a suffix,
``open()`` and a ``path`` that reopens the very same file) within a ``Window`` (offset, nrows, sheet):
only what the window needs is read — a 100-row preview of a multi-GB CSV costs the same as of a small
one — and files over ``max_file_bytes`` are read partially. ``table_of`` turns a source into an Arrow
table for SQL; ``memory_source`` wraps bytes (e.g. a download) as a source.
"""

from __future__ import annotations

import codecs
import io
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from ba_mcp.errors import ErrorType, ToolFailure, invalid, not_found
from ba_mcp.results import Document, Image, JsonValue, RawResult, Table

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


FORMATS = {  # suffix -> format
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".xlsx": "excel",
    ".xlsm": "excel",
    ".xls": "excel",
    ".xlsb": "excel",
    ".ods": "excel",
    ".json": "json",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".md": "markdown",
    ".markdown": "markdown",
    ".py": "python",
    ".sql": "sql",
    ".png": "image",
    ".jpg": "image",
    ".jpeg": "image",
    ".gif": "image",
    ".webp": "image",
}
ARTIFACT_FORMATS = {"table": "parquet", "text": "text", "markdown": "markdown", "json": "json", "image": "image"}
_TEXT_MIME = {"markdown": "text/markdown", "python": "text/x-python", "sql": "application/sql", "text": "text/plain"}
_IMAGE_MIME = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
_MAX_IMAGE_BYTES = 20 * 1024 * 1024


MEDIA_TYPES = {
    "text/csv": "csv",
    "text/tab-separated-values": "tsv",
    "application/json": "json",
    "application/x-ndjson": "jsonl",
    "application/jsonl": "jsonl",
    "application/vnd.apache.parquet": "parquet",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "excel",
    "application/vnd.ms-excel": "excel",
    "text/markdown": "markdown",
    "text/x-python": "python",
    "application/sql": "sql",
    "text/plain": "text",
    "image/png": "image",
    "image/jpeg": "image",
    "image/gif": "image",
    "image/webp": "image",
}
TABLE_FORMATS = frozenset({"csv", "tsv", "excel", "json", "jsonl", "parquet"})


def format_for(suffix: str = "", media_type: str = "") -> str:
    """The format of a file by its suffix, else its media type; ``text`` when neither is known."""
    by_suffix = FORMATS.get(suffix.lower())
    if by_suffix:
        return by_suffix
    return MEDIA_TYPES.get(media_type.split(";")[0].strip().lower(), "text")


class Reader:
    def __init__(
        self,
        resolved: Source,
        window: Window,
        settings: FormatsSettings,
        title: str,
        encoding: str | None,
        artifacts: ArtifactStore | None = None,
    ) -> None:
        self.r = resolved
        self.p = window
        self.s = settings
        self.title = title
        self.encoding = encoding
        self.artifacts = artifacts
        self.large = resolved.size > settings.max_file_bytes
        self.cell_note = ""  # said only when the cell cap really cut the read

    def read(self, fmt: str) -> RawResult:
        method = getattr(self, f"_read_{fmt}", None)
        if method is None:
            raise invalid(f"format '{fmt}' is not supported")
        if self.p.sheet is not None and fmt != "excel":
            raise invalid("'sheet' applies to Excel files only", f"this file is read as {fmt}")
        raw: RawResult = method()
        return raw

    # -- shared helpers ------------------------------------------------------------------------

    def _row_window(self) -> tuple[int | None, list[str]]:
        """The number of rows to read and the notes explaining a partial read."""
        if self.p.nrows is not None:
            return self.p.nrows, []
        if self.large:
            return self.s.partial_rows, [
                f"the file is {self.r.size:,} bytes, over the {self.s.max_file_bytes:,}-byte read limit: only "
                f"{self.s.partial_rows:,} rows were read"
            ]
        return None, []

    def _cell_window(self, nrows: int | None, notes: list[str], columns: int) -> tuple[int | None, list[str]]:
        """Rows to read so that at most ``max_cells`` cells are read in one call."""
        cap = max(1, self.s.max_cells // max(columns, 1))
        if nrows is None or nrows > cap:
            self.cell_note = (
                f"a call reads at most {self.s.max_cells:,} cells ({cap:,} rows of {columns:,} columns); "
                "continue with offset and nrows"
            )
            return cap, notes
        return nrows, notes

    def _table(
        self, frame: pd.DataFrame | pa.Table, more: bool, notes: list[str], total: int | None = None, **meta: Any
    ) -> Table:
        offset = self.p.offset
        if total is None and not more:
            total = offset + len(frame)
        next_args = {"offset": offset + len(frame)} if more else None
        artifact_id = self.r.ref_id if (self.r.kind == "artifact" and offset == 0 and not more) else None
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
            "DECODE_FAILED",
            f"{self.title} is not valid {encoding} text",
            "pass encoding= (e.g. latin-1, cp1252, utf-16)",
        )

    def _sample(self) -> bytes:
        with self.r.path.open("rb") as f:
            return f.read(self.s.encoding_sample_bytes)

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

    def _read_csv(self, sep: str = ",") -> Table:
        import pandas as pd

        if self.r.size == 0:
            return self._table(pd.DataFrame(), False, ["the file is empty (0 bytes)"])
        encoding = self._text_encoding()
        with self.r.open() as f:
            columns = check_csv_header(f, sep, encoding, self.s, self.title)
        nrows, notes = self._row_window()
        nrows, notes = self._cell_window(nrows, notes, columns)
        want = None if nrows is None else nrows + 1  # one extra row tells whether more follow
        skip = range(1, self.p.offset + 1) if self.p.offset else None
        try:
            frame = pd.read_csv(
                self.r.path, sep=sep, encoding=encoding, nrows=want, skiprows=skip, encoding_errors="strict"
            )
        except pd.errors.EmptyDataError:
            return self._table(pd.DataFrame(), False, ["the file has no header row or data"], encoding=encoding)
        except pd.errors.ParserError:
            frame, ragged_note = self._read_ragged(sep, encoding, want)
            notes.append(ragged_note)
        except UnicodeDecodeError:
            raise self._decode_failed(encoding) from None
        more = want is not None and len(frame) > (nrows or 0)
        if more:
            frame = frame.iloc[:nrows]
        return self._table(parse_iso_dates(frame), more, notes, encoding=encoding)

    def _read_tsv(self) -> Table:
        return self._read_csv(sep="\t")

    def _read_ragged(self, sep: str, encoding: str, want: int | None) -> tuple[pd.DataFrame, str]:
        """Rows with more fields than the header: keep every value in extra columns extra_1, extra_2…"""
        import csv

        import pandas as pd

        with self.r.path.open("r", encoding=encoding, newline="") as f:
            reader = csv.reader(f, delimiter=sep)
            header = next(reader, [])
            rows_iter = itertools.islice(reader, self.p.offset, None if want is None else self.p.offset + want)
            rows = list(rows_iter)
        width = max([len(header), *(len(r) for r in rows)])
        long_rows = [i + self.p.offset + 2 for i, r in enumerate(rows) if len(r) > len(header)]
        names = header + [f"extra_{i}" for i in range(1, width - len(header) + 1)]
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(names)
        writer.writerows(rows)
        buf.seek(0)
        frame = pd.read_csv(buf)
        shown = ", ".join(map(str, long_rows[:10])) + (" …" if len(long_rows) > 10 else "")
        note = (
            f"{len(long_rows)} row(s) have more fields than the header (file lines {shown}); their extra "
            f"values are kept in columns {', '.join(names[len(header) :])}"
        )
        return frame, note

    def _read_excel(self) -> Table:
        import pandas as pd
        import python_calamine

        inflated = self._inflated_size()
        if inflated > self.s.max_decompressed_bytes:
            if self.r.suffix in (".xlsx", ".xlsm"):
                return self._read_excel_streamed(inflated)
            raise ToolFailure(
                ErrorType.RESOURCE_ERROR,
                "DECOMPRESSED_TOO_LARGE",
                f"{self.title} inflates to {inflated:,} bytes, over the {self.s.max_decompressed_bytes:,}-byte limit",
                "export the sheet as CSV or Parquet, or raise formats.max_decompressed_bytes",
            )
        try:
            workbook = python_calamine.CalamineWorkbook.from_path(str(self.r.path))
        except Exception:
            raise self._bad_excel() from None
        sheets = list(workbook.sheet_names)
        name = self._sheet_name(sheets)
        nrows, notes = self._row_window()
        # calamine holds the whole sheet in memory whatever the window (its size is bounded above), so the
        # whole sheet is typed once and the window cut from it: a column's type and the row count are the
        # sheet's, not the window's.
        whole = pd.read_excel(self.r.path, sheet_name=name, engine="calamine")
        start = min(self.p.offset, len(whole))
        end = len(whole) if nrows is None else min(len(whole), start + nrows)
        frame = whole.iloc[start:end].reset_index(drop=True)
        more = end < len(whole)
        if len(sheets) > 1:
            notes.append(f"workbook sheets: {', '.join(map(repr, sheets))}; this is {name!r} (choose with sheet=)")
        self.title = f"{self.title} [sheet {name}]"
        return self._table(frame, more, notes, total=len(whole), sheet=name, sheets=sheets)

    def _inflated_size(self) -> int:
        """The declared decompressed size of a zipped workbook (xlsx, xlsm, ods); 0 for other files.
        Python's zipfile never inflates a member past its declared size, and calamine reads only small ones."""
        import zipfile

        with self.r.open() as f:
            if f.read(4) != b"PK\x03\x04":
                return 0
            try:
                with zipfile.ZipFile(f) as z:
                    return sum(i.file_size for i in z.infolist())
            except (zipfile.BadZipFile, OSError):
                return 0

    def _read_excel_streamed(self, inflated: int) -> Table:
        """A large workbook read row by row with openpyxl's sheet parser straight from the zip: only the rows
        asked for, at most ``max_cells`` cells, whatever the sheet holds (a missing ``<dimension>`` makes
        openpyxl's read-only workbook scan the whole sheet first, so it is not used)."""
        import zipfile

        import pandas as pd
        from openpyxl.reader.strings import read_string_table
        from openpyxl.reader.workbook import WorkbookParser
        from openpyxl.worksheet._reader import WorkSheetParser

        try:
            with self.r.open() as f, zipfile.ZipFile(f) as z:
                names = set(z.namelist())
                book = (
                    "xl/workbook.xml"
                    if "xl/workbook.xml" in names
                    else next(n for n in names if n.endswith("workbook.xml"))
                )
                parser = WorkbookParser(z, book)
                parser.parse()
                targets = {sheet.name: rel.target.lstrip("/") for sheet, rel in parser.find_sheets()}
                name = self._sheet_name(list(targets))
                shared: list[Any] = []
                if "xl/sharedStrings.xml" in names:
                    if z.getinfo("xl/sharedStrings.xml").file_size > self.s.max_decompressed_bytes:
                        raise ToolFailure(
                            ErrorType.RESOURCE_ERROR,
                            "DECOMPRESSED_TOO_LARGE",
                            f"the shared strings of {self.title} inflate past the "
                            f"{self.s.max_decompressed_bytes:,}-byte limit",
                            "export the sheet as CSV or Parquet",
                        )
                    with z.open("xl/sharedStrings.xml") as strings:
                        shared = read_string_table(strings)
                with z.open(targets[name]) as sheet:
                    return self._stream_rows(WorkSheetParser(sheet, shared, data_only=True).parse(), name, inflated, pd)
        except ToolFailure:
            raise
        except Exception:
            raise self._bad_excel() from None

    def _bad_excel(self) -> ToolFailure:
        return ToolFailure(
            ErrorType.VALIDATION_ERROR,
            "BAD_EXCEL",
            f"{self.title} is not a readable Excel file",
            "check the file, or pass format= if it is another format",
        )

    def _sheet_name(self, sheets: list[str]) -> str:
        sheet = self.p.sheet if self.p.sheet is not None else 0
        if isinstance(sheet, int) or (isinstance(sheet, str) and sheet.isdigit() and sheet not in sheets):
            index = int(sheet)
            if not 0 <= index < len(sheets):
                raise not_found(f"sheet index {index} does not exist", f"sheets: {', '.join(map(repr, sheets))}")
            return sheets[index]
        if sheet in sheets:
            return str(sheet)
        raise not_found(f"no sheet named {str(sheet)[:60]!r}", f"sheets: {', '.join(map(repr, sheets))}")

    def _stream_rows(self, parsed: Any, name: str, inflated: int, pd: Any) -> Table:
        def values(cells: list[dict[str, Any]], width: int | None) -> list[Any]:
            out: list[Any] = [None] * (width or max((c["column"] for c in cells), default=0))
            for c in cells:
                if c["column"] <= len(out):
                    out[c["column"] - 1] = c["value"]
            return out

        first = next(parsed, None)
        raw_header = values(first[1], None) if first else []
        if len(raw_header) > self.s.max_columns:
            raise _too_many_columns(self.title, len(raw_header), self.s.max_columns)
        header = [str(v) if v is not None else f"column_{i + 1}" for i, v in enumerate(raw_header)]
        asked, notes = self._row_window()
        capped, notes = self._cell_window(asked if asked is not None else self.s.partial_rows, notes, len(header))
        nrows = capped or 0
        notes.append(
            f"the workbook inflates to {inflated:,} bytes (over {self.s.max_decompressed_bytes:,}), so it was "
            "streamed: only the rows asked for were read (dates show as Excel serial numbers)"
        )
        picked = [
            values(cells, len(header))
            for _, cells in itertools.islice(parsed, self.p.offset, self.p.offset + nrows + 1)
        ]
        more = len(picked) > nrows
        body = picked[:nrows]
        self.title = f"{self.title} [sheet {name}]"
        frame = pd.DataFrame(body, columns=header)
        return self._table(frame, more, notes, total=None if more else self.p.offset + len(body), sheet=name)

    def _read_parquet(self) -> Table:
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(self.r.path)
        total = pf.metadata.num_rows
        nrows, notes = self._row_window()
        start = self.p.offset
        stop = total if nrows is None else min(total, start + nrows)
        groups: list[int] = []
        first_row = row = 0
        for g in range(pf.num_row_groups):
            n = pf.metadata.row_group(g).num_rows
            if row + n > start and row < stop:
                if not groups:
                    first_row = row
                groups.append(g)
            row += n
        table = pf.read_row_groups(groups) if groups else pf.schema_arrow.empty_table()
        table = table.slice(start - first_row if groups else 0, max(stop - start, 0))
        return self._table(table, stop < total, notes, total=total)

    def _read_json(self) -> RawResult:
        if self.large:
            doc = self._read_text(mime="application/json")
            doc.notes.append(
                "the JSON file is over the read limit, so it is shown as text (JSON cannot be parsed in part)"
            )
            return doc
        encoding = self._text_encoding()
        try:
            value = json.loads(self.r.path.read_text(encoding=encoding))
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
            nrows = self.p.nrows
            end = None if nrows is None else self.p.offset + nrows
            records = value[self.p.offset : end]
            more = end is not None and end < len(value)
            return self._table(_records_frame(records), more, [], total=len(value), encoding=encoding)
        if self.p.offset or self.p.nrows:
            raise invalid(
                "offset and nrows apply to JSON arrays of objects (tables) only",
                "this JSON is not a list of records; read it without them",
            )
        artifact_id = self.r.ref_id if self.r.kind == "artifact" else None
        return JsonValue(self.title, value, artifact_id=artifact_id, meta={"encoding": encoding})

    def _read_jsonl(self) -> RawResult:
        encoding = self._text_encoding()
        nrows, notes = self._row_window()
        records: list[Any] = []
        more = False
        with self.r.path.open("r", encoding=encoding) as f:
            lines = ((i, line) for i, line in enumerate(f, start=1) if line.strip())
            for index, (lineno, line) in enumerate(lines):
                if index < self.p.offset:
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
            notes.append(f"more lines follow from offset={self.p.offset + len(records)}")
        return JsonValue(self.title, records, notes=notes, meta={"encoding": encoding})

    # -- documents and images ---------------------------------------------------------------------

    def _read_text(self, mime: str | None = None) -> Document:
        """A window of at most ``partial_text_bytes`` characters from ``offset``, decoded incrementally:
        however long the file or its lines, no more than the window (and what precedes it) is read."""
        fmt_mime = mime or "text/plain"
        partial = self.large
        byte_limit = self.s.partial_text_bytes if partial else self.r.size
        window_chars = self.s.partial_text_bytes
        want_chars = self.p.offset + window_chars + 1  # one more tells whether text follows the window
        notes: list[str] = []
        with self.r.open() as f:
            sample = f.read(min(self.s.encoding_sample_bytes, byte_limit))
            if not sample:
                return Document(self.title, "", mime=fmt_mime, total_chars=0, notes=["the file is empty (0 bytes)"])
            encoding = self._text_encoding(sample)
            decoder = codecs.getincrementaldecoder(encoding)()
            pieces: list[str] = []
            have = 0
            read = len(sample)
            chunk = sample
            try:
                while True:
                    text_piece = decoder.decode(chunk, final=False)
                    pieces.append(text_piece)
                    have += len(text_piece)
                    if have >= want_chars or read >= byte_limit:
                        break
                    chunk = f.read(min(1024 * 1024, byte_limit - read))
                    if not chunk:
                        break
                    read += len(chunk)
                at_end = read >= self.r.size and have < want_chars
                if at_end:
                    pieces.append(decoder.decode(b"", final=True))
            except UnicodeDecodeError:
                raise self._decode_failed(encoding) from None
        text = "".join(pieces)
        if text.startswith("\ufeff"):
            text = text[1:]
        if partial:
            notes.append(
                f"the file is {self.r.size:,} bytes, over the {self.s.max_file_bytes:,}-byte read limit: "
                f"only the first {byte_limit:,} bytes were read"
            )
        if self.p.offset > len(text):
            raise invalid(f"offset {self.p.offset} is past the end of the text ({len(text):,} characters read)")
        window = text[self.p.offset : self.p.offset + window_chars]
        more = partial or not at_end or len(text) > self.p.offset + len(window)
        total = len(text) if at_end and not partial else None
        if self.p.nrows is not None:
            lines = window.splitlines(keepends=True)
            if len(lines) > self.p.nrows:
                window = "".join(lines[: self.p.nrows])
                more = True
        artifact_id = self.r.ref_id if (self.r.kind == "artifact" and not self.p.offset and not more) else None
        next_args = {"offset": self.p.offset + len(window)} if more else None
        return Document(
            self.title,
            window,
            mime=fmt_mime,
            offset=self.p.offset,
            total_chars=total,
            more=more,
            next_args=next_args,
            notes=notes,
            meta={"encoding": encoding},
            artifact_id=artifact_id,
        )

    def _read_markdown(self) -> Document:
        return self._read_text(_TEXT_MIME["markdown"])

    def _read_python(self) -> Document:
        return self._read_text(_TEXT_MIME["python"])

    def _read_sql(self) -> Document:
        return self._read_text(_TEXT_MIME["sql"])

    def _read_image(self) -> Image:
        if self.r.size > _MAX_IMAGE_BYTES:
            raise ToolFailure(
                ErrorType.RESOURCE_ERROR,
                "IMAGE_TOO_LARGE",
                f"the image is {self.r.size:,} bytes; at most {_MAX_IMAGE_BYTES:,} are read",
            )
        if self.r.kind == "artifact" and self.r.ref_id and self.artifacts is not None:
            meta, data = self.artifacts.read_bytes(self.r.ref_id)
            return Image(self.title, data, mime=meta.mime, artifact_id=meta.id)
        mime = _IMAGE_MIME.get(self.r.suffix, "image/png")
        return Image(self.title, self.r.path.read_bytes(), mime=mime)


def check_csv_header(f: Any, sep: str, encoding: str, settings: FormatsSettings, title: str) -> int:
    """The number of columns of a delimited file, read from its first line only; refuses a first line over
    ``max_line_bytes`` (not a table, or a hostile one) and more than ``max_columns`` columns (S-10)."""
    import csv

    head = f.read(settings.max_line_bytes + 1)
    end = head.find(b"\n")
    if end < 0 and len(head) > settings.max_line_bytes:
        raise ToolFailure(
            ErrorType.VALIDATION_ERROR,
            "LINE_TOO_LONG",
            f"the first line of {title} is over {settings.max_line_bytes:,} bytes long",
            'this does not look like a delimited table; read it with format="text"',
        )
    line = head[: end if end >= 0 else len(head)].decode(encoding.replace("-sig", ""), errors="replace")
    columns = len(next(csv.reader([line], delimiter=sep), []))
    if columns > settings.max_columns:
        raise _too_many_columns(title, columns, settings.max_columns)
    return columns


def _too_many_columns(title: str, columns: int, limit: int) -> ToolFailure:
    return ToolFailure(
        ErrorType.VALIDATION_ERROR,
        "TOO_MANY_COLUMNS",
        f"{title} has {columns:,} columns; at most {limit:,} are read",
        "select the columns you need in another tool first, or raise formats.max_columns",
    )


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


_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$")


def parse_iso_dates(frame: pd.DataFrame) -> pd.DataFrame:
    """Text columns whose every value is an ISO date or timestamp become datetime columns.

    A column is converted only when no value would be lost (every non-null value parses)."""
    import pandas as pd

    for col in frame.columns:
        series = frame[col]
        if not (series.dtype == object or str(series.dtype) in ("str", "string")):
            continue
        sample = series.dropna().head(20)
        if sample.empty or not all(isinstance(v, str) and _ISO_DATE.match(v) for v in sample):
            continue
        parsed = pd.to_datetime(series, format="ISO8601", errors="coerce")
        if int(parsed.isna().sum()) == int(series.isna().sum()):
            frame[col] = parsed
    return frame


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
