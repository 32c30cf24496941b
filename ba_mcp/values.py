"""Values as the database shows them (issue 63): one rule per kind of value, applied where a result leaves its engine,
so the text, the structured content, the artifact, a view and an export all read the same value.

* An **interval** as PostgreSQL writes it (its default ``IntervalStyle`` ``postgres``): ``1462 days 14:45:00``,
  ``1 year 2 mons 3 days 04:05:06.5``, ``-1 days -02:00:00``, ``00:00:00`` — for every engine (DuckDB's intervals
  too); a result's interval column is text of that form (``pandas.to_timedelta`` reads one without months). A
  duration (Spark's ``DAY TO SECOND``, a pandas timedelta) is written the same way, its whole days as days.
* A **real** (float4) as its shortest decimal form — the digits psql prints (``4.7``, never ``4.69999980926514``),
  carried on as the double of those digits; a **double** as its shortest round-trip form (up to 17 significant
  digits: ``0.30000000000000004``), never cut.
* A **timestamp with time zone** in the database session's ``TimeZone`` (PostgreSQL's ``current_setting
  ('TimeZone')``, DuckDB's ``TimeZone``), its offset shown: ``2026-08-01T00:00:00+02:00`` (psql:
  ``2026-08-01 00:00:00+02``); a **date** as a date (``2026-08-15``).
* A float that is no number is not a missing value: ``NaN``, ``Infinity``, ``-Infinity`` as psql writes them (and as
  PostgreSQL's own ``to_json`` carries them: JSON has no such number), at every output level; NULL is NULL.
* A **time with time zone** as psql writes it: ``12:34:56+02``, ``12:34:56.5-03:30``.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
from collections.abc import Callable
from typing import Any

_US = 1_000_000


def interval_text(months: int, days: int, nanoseconds: int) -> str:
    """An interval as PostgreSQL's ``IntervalStyle = postgres`` writes it (``EncodeInterval``): years and months
    from the months, then days, then the time as ``[-]HH:MM:SS[.ffffff]`` (shown when not zero, or when nothing
    else is); a part after a negative one carries ``+`` when positive."""
    parts: list[str] = []
    before_negative = False
    years, mons = int(months / 12), months - int(months / 12) * 12  # C's truncating division, as PostgreSQL's
    for value, unit in ((years, "year"), (mons, "mon"), (days, "day")):
        if value == 0:
            continue
        sign = "+" if before_negative and value > 0 else ""
        parts.append(f"{sign}{value} {unit}{'' if value == 1 else 's'}")
        before_negative = value < 0
    micros = int(nanoseconds / 1000)  # PostgreSQL keeps microseconds
    if micros or not parts:
        sign = "-" if micros < 0 else ("+" if before_negative else "")
        whole, fraction = divmod(abs(micros), _US)
        hours, rest = divmod(whole, 3600)
        minutes, seconds = divmod(rest, 60)
        text = f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}"
        if fraction:
            text += f".{fraction:06d}".rstrip("0")
        parts.append(text)
    return " ".join(parts)


def duration_text(value: dt.timedelta) -> str:
    """A duration (no months) as ``interval_text`` writes it: whole days, then the time of day."""
    micros = (value.days * 86_400 + value.seconds) * _US + value.microseconds
    days = int(micros / (86_400 * _US))
    return interval_text(0, days, (micros - days * 86_400 * _US) * 1000)


def non_finite_text(value: Any) -> str | None:
    """A float that is no finite number as psql writes it (``NaN``, ``Infinity``, ``-Infinity``); None for any
    other value."""
    if not isinstance(value, float) or math.isfinite(value):
        return None
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def timetz_text(micros: int, west_s: int) -> str:
    """A ``timetz`` as psql writes it, from PostgreSQL's binary form (microseconds since midnight, the zone's offset in
    seconds WEST of Greenwich): ``12:34:56+02``, ``12:34:56.5-03:30``, ``00:00:00+05:45:10``."""
    whole, fraction = divmod(micros, _US)
    hours, rest = divmod(whole, 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    if fraction:
        text += f".{fraction:06d}".rstrip("0")
    east = -west_s
    oh, rest = divmod(abs(east), 3600)
    om, os_ = divmod(rest, 60)
    text += f"{'-' if east < 0 else '+'}{oh:02d}"
    if om or os_:
        text += f":{om:02d}"
    if os_:
        text += f":{os_:02d}"
    return text


def shortest_real(value: float) -> float:
    """A float4's value (as the double Python holds) as the double of its shortest decimal form: 4.699999809265137
    → 4.7, the digits psql prints for ``real '4.7'``."""
    import struct

    if not math.isfinite(value) or value == 0:
        return value
    bits = struct.pack("<f", value)
    for digits in range(1, 10):  # nine significant digits always tell two float4 values apart
        shorter = float(f"{value:.{digits}g}")
        if struct.pack("<f", shorter) == bits:
            return shorter
    return value


def shown_schema(
    schema: Any, convert: Callable[[Any], Any], time_zone: str | None = None
) -> tuple[Any, Any, dict[str, str]]:
    """A result's Arrow schema and batch converter with every value as the database shows it: intervals as text
    (``interval_text``), float4 as the double of its shortest decimal form, and — given the session's time zone — a
    timestamp with time zone in that zone (the instant unchanged). Columns of other types pass as they are, and a
    schema with none of these keeps ``convert`` itself. Third: the types the observation names for the columns
    changed (an interval's text is an ``interval``, a float4's double a ``float32``)."""
    import pyarrow as pa

    zone = usable_zone(time_zone)
    changes: dict[int, Any] = {}
    named: dict[str, str] = {}
    fields = []
    months: list[int] = []  # YEAR TO MONTH intervals (Spark's): a type pyarrow holds but cannot hand out
    for i, f in enumerate(schema):
        t = f.type
        if t.id == pa.lib.Type_INTERVAL_MONTHS:
            months.append(i)
            changes[i] = pa.string()
            named[f.name] = "interval"
        elif t == pa.month_day_nano_interval() or pa.types.is_duration(t):
            changes[i] = pa.string()
            named[f.name] = "interval"
        elif pa.types.is_float32(t):
            changes[i] = pa.float64()
            named[f.name] = "float32"
        elif pa.types.is_timestamp(t) and t.tz is not None and zone is not None and t.tz != zone:
            changes[i] = pa.timestamp(t.unit, zone)
        fields.append(f.with_type(changes[i]) if i in changes else f)
    if not changes:
        return schema, convert, named
    shown = pa.schema(fields, metadata=schema.metadata)

    def converted(batch: Any) -> Any:
        batch = convert(months_as_counts(batch, months) if months else batch)
        columns = list(batch.columns)
        for i, target in changes.items():
            if i in months:
                counts = columns[i].to_pylist()
                columns[i] = pa.array([None if v is None else interval_text(v, 0, 0) for v in counts], pa.string())
            else:
                columns[i] = shown_column(columns[i], target)
        return pa.RecordBatch.from_arrays(columns, schema=shown)

    return shown, converted, named


def months_as_counts(batch: Any, indices: list[int]) -> Any:
    """``batch`` with its month-interval columns (``indices``) as the int32 month counts they hold. pyarrow knows
    the type (a YEAR TO MONTH interval's) but has no array class for it: any look at such a column raises, so the
    batch is handed over the Arrow C data interface (``ctypes``: no copy) with those fields' format, ``tiM``,
    written as ``i`` (int32) — the same layout: a validity bitmap and 32-bit values."""
    import ctypes

    import pyarrow as pa

    c_schema, c_array = _c_structs()
    schema, array = c_schema(), c_array()
    batch._export_to_c(ctypes.addressof(array), ctypes.addressof(schema))
    for i in indices:
        schema.children[i].contents.format = _INT32
    return pa.RecordBatch._import_from_c(ctypes.addressof(array), ctypes.addressof(schema))


@functools.cache
def _c_structs() -> tuple[Any, Any]:
    """The Arrow C data interface's ``ArrowSchema`` and ``ArrowArray`` (arrow/c/abi.h), as ctypes structures."""
    import ctypes

    class CSchema(ctypes.Structure):
        pass

    CSchema._fields_ = [
        ("format", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("metadata", ctypes.c_char_p),
        ("flags", ctypes.c_int64),
        ("n_children", ctypes.c_int64),
        ("children", ctypes.POINTER(ctypes.POINTER(CSchema))),
        ("dictionary", ctypes.POINTER(CSchema)),
        ("release", ctypes.c_void_p),
        ("private_data", ctypes.c_void_p),
    ]

    class CArray(ctypes.Structure):
        _fields_ = [
            ("length", ctypes.c_int64),
            ("null_count", ctypes.c_int64),
            ("offset", ctypes.c_int64),
            ("n_buffers", ctypes.c_int64),
            ("n_children", ctypes.c_int64),
            ("buffers", ctypes.c_void_p),
            ("children", ctypes.c_void_p),
            ("dictionary", ctypes.c_void_p),
            ("release", ctypes.c_void_p),
            ("private_data", ctypes.c_void_p),
        ]

    return CSchema, CArray


_INT32 = b"i"  # the C data interface's format of int32


def shown_column(column: Any, target: Any) -> Any:
    """One column of ``shown_schema``'s changes as ``target``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = column.type
    if t == pa.month_day_nano_interval():
        texts = [None if v is None else interval_text(v.months, v.days, v.nanoseconds) for v in column.to_pylist()]
        return pa.array(texts, pa.string())
    if pa.types.is_duration(t):  # counts of its unit, as microseconds (PostgreSQL's resolution)
        per = {"s": 1_000_000, "ms": 1_000, "us": 1}.get(t.unit)
        counts = column.cast(pa.int64()).to_pylist()
        micros = [None if v is None else (v * per if per else int(v / 1000)) for v in counts]
        return pa.array(
            [None if v is None else duration_text(dt.timedelta(microseconds=v)) for v in micros], pa.string()
        )
    if pa.types.is_float32(t):
        # Arrow writes a float4 by its shortest decimal form (as psql does); that text read back as a double
        return pc.cast(pc.cast(column, pa.string()), pa.float64())
    return column.cast(target)


def usable_zone(name: str | None) -> str | None:
    """``name`` when Python's zone database knows it (a value shown in it must be read in it), else None."""
    if not name:
        return None
    import zoneinfo

    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None
    return name
