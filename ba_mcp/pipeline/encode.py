"""Compact, faithful text encodings of tables for the ``full`` level.

Tables are Arrow tables; ``plain_rows`` turns one into plain JSON-able Python values, and every encoder
works on a table's column names and those rows. All encodings keep every row and column and distinguish
a missing value from an empty string: CSV writes a missing value as an empty field and an empty string as
``""``; markdown writes missing as an empty cell and empty strings as ``""``; TOON and JSON write
``null``. Which one the pipeline uses is ``observation.table_encoding``; ``bench/bench_tokens.py``
measures them against JSON.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from array import array
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ba_mcp.results import cell_value, stats_kind
from ba_mcp.values import duration_text, interval_text, non_finite_text, shortest_real

if TYPE_CHECKING:
    import pyarrow as pa

ENCODINGS = ("csv", "markdown", "toon", "json", "json_pretty")

Rows = Sequence[Sequence[Any]]


def python_values(column: pa.ChunkedArray | pa.Array) -> list[Any]:
    """A column's values as Python objects, without pandas: nanosecond times are read as microseconds
    (pyarrow would otherwise hand out pandas Timestamps), map columns as dicts."""
    import pyarrow as pa

    t = column.type
    values = microseconds(column).to_pylist()
    if pa.types.is_map(t):
        return [dict(v) if v is not None else None for v in values]
    return values


def microseconds(column: Any) -> Any:
    """A nanosecond timestamp, duration or time column cast to microseconds (Python's resolution); any
    other column as it is."""
    import pyarrow as pa

    t = column.type
    if not ((pa.types.is_timestamp(t) or pa.types.is_duration(t) or pa.types.is_time64(t)) and t.unit == "ns"):
        return column
    import pyarrow.compute as pc

    if pa.types.is_timestamp(t):
        return pc.cast(column, pa.timestamp("us", t.tz), safe=False)
    return pc.cast(column, pa.duration("us") if pa.types.is_duration(t) else pa.time64("us"), safe=False)


def plain_rows(
    table: pa.Table, *, round_floats: bool = False, max_chars: int | None = None
) -> tuple[list[list[Any]], bool]:
    """Rows of ``table`` as plain values (None for missing). A timestamp column with a time of day on any
    row keeps it on every row (a midnight value printed as a date next to timestamps would read as a
    different kind of value). ``round_floats``: six significant digits (previews; artifacts keep exact
    values); ``max_chars``: text cells cut to that length. Returns the rows and whether any cell was cut."""
    import pyarrow as pa

    columns: list[list[Any]] = []
    cut = False
    for col in table.columns:
        t = col.type
        raw = python_values(col)
        if pa.types.is_timestamp(t) and any(v is not None and v.time() != dt.time() for v in raw):
            columns.append([v.isoformat() if v is not None else None for v in raw])
            continue
        if round_floats and pa.types.is_floating(t):  # NaN and the infinities as psql writes them, never NULL
            columns.append([non_finite_text(v) or cell_value(round_float(v)) for v in raw])
            continue
        if pa.types.is_floating(t):  # exact: the shortest form that reads back as the value (ba_mcp.values)
            columns.append([exact_float(v, float4=pa.types.is_float32(t)) for v in raw])
            continue
        if pa.types.is_duration(t) or t == pa.month_day_nano_interval():
            columns.append([None if v is None else _interval(v) for v in raw])
            continue
        values = [cell_value(v) for v in raw]
        if max_chars is not None and _is_text(t):
            for i, v in enumerate(values):
                if isinstance(v, str) and len(v) > max_chars:
                    values[i] = v[: max_chars - 1] + "…"
                    cut = True
        columns.append(values)
    if not columns:
        return [[] for _ in range(table.num_rows)], cut
    return [list(r) for r in zip(*columns, strict=True)], cut


def exact_float(value: float | None, *, float4: bool = False) -> Any:
    """A float as the database shows it (``ba_mcp.values``): a float4 by its shortest decimal form, a double by
    its shortest round-trip form (up to 17 significant digits, never cut to 15); a whole number as an integer
    (psql writes ``3``); NaN and the infinities as psql writes them (``NaN``, ``Infinity``): a NaN is no NULL."""
    if value is None:
        return None
    if not math.isfinite(value):
        return non_finite_text(value)
    if float4:
        value = shortest_real(value)
    if value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _interval(value: Any) -> str:
    if isinstance(value, dt.timedelta):
        return duration_text(value)
    return interval_text(value.months, value.days, value.nanoseconds)


def _is_text(t: pa.DataType) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(t):
        t = t.value_type
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or t == pa.string_view())


def rounds_any(table: pa.Table) -> bool:
    """Whether ``round_floats`` changes a value of ``table`` (then the observation says the numbers are rounded)."""
    import pyarrow as pa

    for col in table.columns:
        if not pa.types.is_floating(col.type):
            continue
        if any(round_float(v) != v for v in col.to_pylist() if v is not None and math.isfinite(v)):
            return True
    return False


ROUNDED_NOTE = "Numbers above are rounded to 6 significant digits; the exact values: output_level 'full'"


def round_float(value: Any) -> Any:
    """A preview's float: six significant digits, in plain notation where that is readable."""
    if not isinstance(value, float) or not math.isfinite(value) or value == 0:
        return value
    magnitude = math.floor(math.log10(abs(value)))
    if magnitude >= 15 or magnitude < -4:
        return float(f"{value:.6g}")
    return round(value, max(0, 5 - magnitude))


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _csv_field(value: Any) -> str:
    """A CSV cell: NULL for a missing value (a row of them would otherwise read as an empty line), an empty or
    ``NULL`` text quoted."""
    if value is None:
        return "NULL"
    text = _text(value)
    if text in ("", "NULL") or any(c in text for c in ',"\n\r') or text != text.strip():
        return '"' + text.replace('"', '""') + '"'
    return text


def encode_csv(names: Sequence[str], rows: Rows) -> str:
    lines = [",".join(_csv_field(str(c)) for c in names)]
    lines.extend(",".join(_csv_field(v) for v in row) for row in rows)
    return "\n".join(lines)


def _md_field(value: Any) -> str:
    if value is None:
        return "NULL"
    text = _text(value)
    if text in ("", "NULL"):
        return f'"{text}"'
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r\n", "<br>").replace("\n", "<br>")


def encode_markdown(names: Sequence[str], rows: Rows) -> str:
    header = "|" + "|".join(_md_field(str(c)) for c in names) + "|"
    sep = "|" + "|".join("-" for _ in names) + "|"
    body = ["|" + "|".join(_md_field(v) for v in row) + "|" for row in rows]
    return "\n".join([header, sep, *body])


def _records(names: Sequence[str], rows: Rows) -> list[dict[str, Any]]:
    cols = [str(c) for c in names]
    return [dict(zip(cols, row, strict=True)) for row in rows]


def encode_toon(names: Sequence[str], rows: Rows) -> str:
    import toon_format

    return toon_format.encode(_records(names, rows))


def encode_json(names: Sequence[str], rows: Rows) -> str:
    return json.dumps(_records(names, rows), ensure_ascii=False, separators=(",", ":"))


def encode_json_pretty(names: Sequence[str], rows: Rows) -> str:
    return json.dumps(_records(names, rows), ensure_ascii=False, indent=2)


ENCODERS: dict[str, Callable[[Sequence[str], Rows], str]] = {
    "csv": encode_csv,
    "markdown": encode_markdown,
    "toon": encode_toon,
    "json": encode_json,
    "json_pretty": encode_json_pretty,
}


def encode_table(table: pa.Table, encoding: str) -> str:
    """Encode every row of an Arrow table in one of ``ENCODINGS``."""
    return ENCODERS[encoding](table.column_names, plain_rows(table)[0])


PYTHON_STATS_ROWS = 5000  # a column this short is summarised with Python's own objects (see column_stats)


def column_stats(column: pa.ChunkedArray) -> dict[str, Any]:
    """What a column summary says, as data: ``kind`` (bool, number, time, other), ``count`` (values
    present, NaN apart), ``nulls``, ``nan`` (a float column's NaNs, when it has any: no NULL) and the kind's
    figures. The artifact store computes the same figures over a whole stored table with DuckDB
    (``ba_mcp.inside.sql.parquet_stats``); the engine worker uses this one for a stored result small enough to
    hold (``DuckSession.store``).

    A short column — every table the server shows whole — is summarised in Python: Arrow's compute kernels
    are ~10 MB of the server's memory (issue 40), and at a few thousand values Python is as quick. Longer
    ones use the kernels (then loaded). ``tests/test_pipeline_observe.py`` checks the two agree."""
    return _python_stats(column) if len(column) <= PYTHON_STATS_ROWS else _arrow_stats(column)


def _arrow_stats(column: pa.ChunkedArray) -> dict[str, Any]:
    """``column_stats`` with Arrow's compute kernels (see there)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = column.type
    values = pc.drop_null(column)
    present = len(values)
    if pa.types.is_floating(t):
        values = pc.filter(values, pc.invert(pc.is_nan(values)))
    stats: dict[str, Any] = {"kind": stats_kind(t), "count": len(values), "nulls": len(column) - present}
    if present > len(values):
        stats["nan"] = present - len(values)
    if not len(values):
        return stats
    if stats["kind"] == "bool":
        stats["true"] = int(pc.sum(values).as_py() or 0)
    elif stats["kind"] == "number":
        low, high = pc.min_max(values).values()
        # a decimal's mean in its own scale would be rounded (2.25 and 1.10 and 2.25: 1.87): as a double, as DuckDB
        exact = pc.cast(values, pa.float64()) if pa.types.is_decimal(t) else values
        stats.update(min=low.as_py(), mean=float(pc.mean(exact).as_py()), max=high.as_py())
        stats["distinct"] = _distinct(values)
    elif stats["kind"] == "time":
        low, high = pc.min_max(microseconds(values)).values()
        stats.update(min=low.as_py(), max=high.as_py())
    else:
        stats["distinct"] = _distinct(values)
        if stats["distinct"] < len(values):
            stats["top"] = _top(values)
    return stats


def _python_stats(column: pa.ChunkedArray | pa.Array) -> dict[str, Any]:
    """``column_stats`` from the column's Python values (see there)."""
    import collections

    import pyarrow as pa

    t = column.type
    kind = stats_kind(t)
    if pa.types.is_decimal128(t) and t.scale >= 0:
        return _decimal_stats(column)
    raw = python_values(column)
    values = [v for v in raw if v is not None]
    present = len(values)
    if pa.types.is_floating(t):
        values = [v for v in values if not math.isnan(v)]
    stats: dict[str, Any] = {"kind": kind, "count": len(values), "nulls": len(raw) - present}
    if present > len(values):
        stats["nan"] = present - len(values)
    if not values:
        return stats
    if kind == "bool":
        stats["true"] = sum(values)
    elif kind == "number":
        # integers and decimals summed exactly, then divided (Decimal's 28 digits); floats correctly rounded
        exact = math.fsum(values) if pa.types.is_floating(t) else sum(values)
        mean = float(exact / len(values))
        stats.update(min=min(values), mean=mean, max=max(values))
        stats["distinct"] = len(set(values))
    elif kind == "time":
        stats.update(min=min(values), max=max(values))
    else:
        try:
            counts = collections.Counter(values)
            firsts = {key: key for key in counts}
        except TypeError:  # nested cells (lists, structs, maps): compared by their JSON text, as _distinct does
            cells = [cell_value(v) for v in values]
            keyed = [json.dumps(c, sort_keys=True, default=str) for c in cells]
            counts = collections.Counter(keyed)
            firsts = {}
            for key, cell in zip(keyed, cells, strict=True):
                firsts.setdefault(key, cell)
        stats["distinct"] = len(counts)
        if len(counts) < len(values):
            key, n = counts.most_common(1)[0]  # the first seen among equals, as Arrow's value_counts
            stats["top"] = (cell_value(firsts[key]), n)
    return stats


def _decimal_stats(column: pa.ChunkedArray | pa.Array) -> dict[str, Any]:
    """``_python_stats`` of a decimal128 column from its buffers: each value an integer count of its scale's
    units (1.10 at scale 2 is 110) — a Decimal object per value costs ten times as much (a database's NUMERIC
    columns are decimals)."""
    from decimal import Decimal

    import pyarrow as pa

    units: list[int] = []
    nulls = 0
    mask = (1 << 64) - 1
    for chunk in column.chunks if isinstance(column, pa.ChunkedArray) else [column]:
        n, at = len(chunk), chunk.offset
        validity, data = chunk.buffers()[:2]
        words = array("q")
        if data is not None and n:
            words.frombytes(memoryview(data)[at * 16 : (at + n) * 16])  # little-endian: low word, high word
        lows, highs = words[0::2], words[1::2]
        values = [
            low if (high == 0 and low >= 0) or (high == -1 and low < 0) else (high << 64) | (low & mask)
            for low, high in zip(lows, highs, strict=True)
        ]
        if chunk.null_count:
            bits = memoryview(validity)  # type: ignore[arg-type]
            values = [v for i, v in enumerate(values, at) if bits[i >> 3] >> (i & 7) & 1]
            nulls += chunk.null_count
        units.extend(values)
    scale = column.type.scale
    stats: dict[str, Any] = {"kind": "number", "count": len(units), "nulls": nulls}
    if units:
        low, high = min(units), max(units)
        stats.update(
            min=Decimal(low).scaleb(-scale),
            mean=sum(units) / (len(units) * 10**scale),  # correctly rounded: one division of two integers
            max=Decimal(high).scaleb(-scale),
            distinct=len(set(units)),
        )
    return stats


def _distinct(values: pa.ChunkedArray) -> int:
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        return int(pc.count_distinct(values).as_py())
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):  # nested cells (lists, structs)
        return len({json.dumps(cell_value(v), sort_keys=True, default=str) for v in python_values(values)})


def _top(values: pa.ChunkedArray) -> tuple[Any, int] | None:
    """The most frequent value and its count (the first seen among equals); nested cells (lists, structs) are
    compared by their JSON text, as ``_distinct`` counts them."""
    import collections

    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        counts = pc.value_counts(values)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        cells = [cell_value(v) for v in python_values(values)]
        seen = collections.Counter(json.dumps(c, sort_keys=True, default=str) for c in cells)
        key, n = seen.most_common(1)[0]
        return next(c for c in cells if json.dumps(c, sort_keys=True, default=str) == key), n
    best = int(pc.index(counts.field(1), pc.max(counts.field(1))).as_py())
    return cell_value(counts.field(0)[best].as_py()), int(counts.field(1)[best].as_py())
