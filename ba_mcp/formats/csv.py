"""CSV and TSV: the header checked against the bounds before any parsing, rows read only as far as the window needs."""

from __future__ import annotations

import io
import itertools
import re
from typing import TYPE_CHECKING, Any

from ba_mcp.errors import ErrorType, ToolFailure
from ba_mcp.formats.base import ReaderBase
from ba_mcp.results import Table

if TYPE_CHECKING:
    import pandas as pd

    from ba_mcp.settings import FormatsSettings


class CsvReading(ReaderBase):
    def _read_csv(self, sep: str = ",") -> Table:
        import pandas as pd

        if self.source.size == 0:
            return self._table(pd.DataFrame(), False, ["the file is empty (0 bytes)"])
        encoding = self._text_encoding()
        with self.source.open() as f:
            columns = check_csv_header(f, sep, encoding, self.bounds, self.title)
        nrows, notes = self._row_window()
        nrows, notes = self._cell_window(nrows, notes, columns)
        want = None if nrows is None else nrows + 1  # one extra row tells whether more follow
        skip = range(1, self.window.offset + 1) if self.window.offset else None
        try:
            frame = pd.read_csv(
                self.source.path, sep=sep, encoding=encoding, nrows=want, skiprows=skip, encoding_errors="strict"
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
        frame, trimmed = trim_header(frame)
        if trimmed:  # as SQL names them (DuckDB's reader trims them): one name for a column in every tool
            notes.append(f"column names trimmed of surrounding spaces, as SQL reads them: {trimmed}")
        return self._table(parse_iso_dates(frame), more, notes, encoding=encoding)

    def _read_tsv(self) -> Table:
        return self._read_csv(sep="\t")

    def _read_ragged(self, sep: str, encoding: str, want: int | None) -> tuple[pd.DataFrame, str]:
        """Rows with more fields than the header: keep every value in extra columns extra_1, extra_2…"""
        import csv

        import pandas as pd

        with self.source.path.open("r", encoding=encoding, newline="") as f:
            reader = csv.reader(f, delimiter=sep)
            header = next(reader, [])
            rows_iter = itertools.islice(
                reader, self.window.offset, None if want is None else self.window.offset + want
            )
            rows = list(rows_iter)
        width = max([len(header), *(len(r) for r in rows)])
        long_rows = [i + self.window.offset + 2 for i, r in enumerate(rows) if len(r) > len(header)]
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


def trim_header(frame: Any) -> tuple[Any, str]:
    """``frame`` with its text column names stripped of surrounding spaces (unless two would then be equal), and
    which were: ``'num. calls abandoned ' → 'num. calls abandoned'``."""
    names = [str(c).strip() if isinstance(c, str) else c for c in frame.columns]
    changed = [(c, n) for c, n in zip(frame.columns, names, strict=True) if c != n]
    if not changed or len(set(names)) != len(names):
        return frame, ""
    frame = frame.set_axis(names, axis=1)
    return frame, ", ".join(f"{c!r} → {n!r}" for c, n in changed[:5]) + (" …" if len(changed) > 5 else "")


def header_names(fields: list[str]) -> list[str]:
    """The column names pandas gives a header row's ``fields`` (an empty one is ``Unnamed: <position>``, a repeated
    one ``<name>.1``, … — ``pandas.io.common.mangle_dupe_names``), trimmed as ``trim_header`` trims them: the one
    name file_reader, run_python's load_file and SQL (``sql_header_names``) give a column."""
    names = [f"Unnamed: {i}" if field == "" else field for i, field in enumerate(fields)]
    unnamed = [i for i, field in enumerate(fields) if field == ""]
    counts: dict[str, int] = {}
    for i in [i for i in range(len(names)) if i not in set(unnamed)] + unnamed:  # named columns keep their names
        col = old = names[i]
        count = counts.get(col, 0)
        while count > 0:
            counts[old] = count + 1
            col = f"{old}.{count}"
            count = count + 1 if col in names else counts.get(col, 0)
        names[i] = col
        counts[col] = count + 1
    stripped = [n.strip() for n in names]
    return stripped if len(set(stripped)) == len(stripped) else names


def sql_header_names(first_line: bytes, sep: str) -> list[str] | None:
    """The names SQL must give a UTF-8 delimited file's columns so that they are pandas' and file_reader's, when
    DuckDB's reader would name some otherwise — an empty header (DuckDB: ``column0``, pandas: ``Unnamed: 0``) or a
    repeated one (``a_1`` against ``a.1``); None when DuckDB's own names are the same (or the line is not plain)."""
    import csv

    if b"\n" not in first_line and len(first_line) >= 1 << 20:  # a header past the sample: never names cut short
        return None
    line = first_line.split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8", errors="replace").removeprefix("\ufeff")
    if line.count('"') % 2:  # a quoted header running over lines: left to DuckDB
        return None
    fields = next(csv.reader([line], delimiter=sep), [])
    plain = [f.strip() for f in fields]
    if all(plain) and len(set(plain)) == len(plain):
        return None
    names = header_names(fields)
    return names if all(names) else None


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
        raise too_many_columns(title, columns, settings.max_columns)
    return columns


def too_many_columns(title: str, columns: int, limit: int) -> ToolFailure:
    return ToolFailure(
        ErrorType.VALIDATION_ERROR,
        "TOO_MANY_COLUMNS",
        f"{title} has {columns:,} columns; at most {limit:,} are read",
        "select the columns you need in another tool first, or raise formats.max_columns",
    )


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
