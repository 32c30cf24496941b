"""Typed raw results: what tools return, and the only thing the pipeline formats.

A tool returns one of ``Table``, ``Document``, ``JsonValue``, ``Image`` or ``Composite`` and never
formats text for a model. Common fields: ``title`` (what it is, in the user's terms), ``notes``
(facts the model must know, e.g. "3 rows had extra fields"), ``meta`` (machine-readable extras that
go into ``structuredContent``) and ``artifact_id`` (set when the result *is* a stored artifact read
whole, so the pipeline refers to it instead of storing it again).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class _Base:
    title: str
    notes: list[str] = field(default_factory=list, kw_only=True)
    meta: dict[str, Any] = field(default_factory=dict, kw_only=True)
    artifact_id: str | None = field(default=None, kw_only=True)
    details: list[str] = field(default_factory=list, kw_only=True)  # lines shown at standard and full, not brief
    # what produced it, for the call's provenance (never shown to the model): database, dialect, sql, code id,
    # what it read (refs with identities or digests)
    provenance: dict[str, Any] = field(default_factory=dict, kw_only=True)


@dataclass
class Table(_Base):
    """Rows and columns, as an Arrow table (a pandas DataFrame given here is converted once, so the
    pipeline only ever sees Arrow; ``column_types`` names the columns it had to turn into text).

    ``offset`` is the index of the first row within its source; ``total_rows`` is the size of the
    whole source when known (None: unknown, e.g. a partial read of a large file); ``more`` says the
    source has rows after these, and ``next_args`` are the arguments of the tool's call that continue
    (e.g. ``{"offset": 5000}``), written into the observation by the pipeline.
    """

    frame: pa.Table
    offset: int = 0
    total_rows: int | None = None
    more: bool = False
    next_args: dict[str, Any] | None = None
    column_types: dict[str, str] = field(default_factory=dict)  # display names the Arrow types lose
    key_columns: list[str] | None = None  # shown for every row at brief (e.g. a search's title and url)
    standard_columns: list[str] | None = None  # the standard view's columns (the rest only at full)
    # (figures by column, rows) of the whole stored table ``artifact_id``, when the engine that stored it computed them
    whole_stats: tuple[dict[str, dict[str, Any]], int] | None = None

    def __post_init__(self) -> None:
        import pyarrow as pa

        if not isinstance(self.frame, pa.Table):
            self.frame = arrow_table(self.frame, self.column_types)


@dataclass
class Document(_Base):
    """Text. ``offset`` is the character offset of ``text`` within the whole source, whose length is
    ``total_chars`` when known; ``more`` says text follows and ``next_args`` continue it."""

    text: str
    mime: str = "text/plain"
    offset: int = 0
    total_chars: int | None = None
    more: bool = False
    next_args: dict[str, Any] | None = None
    tail_matters: bool = False  # cut in the middle, not at the end (program output: its last lines explain it)
    whole: bool = False  # useful only whole (a program to run): at ``full`` shown up to ``whole_limit_tokens``


@dataclass
class JsonValue(_Base):
    value: Any


@dataclass
class Image(_Base):
    data: bytes
    mime: str = "image/png"


@dataclass
class Composite(_Base):
    """An ordered list of labelled parts, e.g. run_python's stdout, value and figures."""

    parts: list[tuple[str, RawResult]] = field(default_factory=list)


RawResult: TypeAlias = "Table | Document | JsonValue | Image | Composite"


def approx_size(raw: RawResult) -> int:
    """Bytes a raw result holds in memory, roughly (for cache bounds)."""
    if isinstance(raw, Table):
        return int(raw.frame.nbytes) + 256
    if isinstance(raw, Document):
        return len(raw.text) * 2 + 256
    if isinstance(raw, Image):
        return len(raw.data) + 256
    if isinstance(raw, Composite):
        return sum(approx_size(p) for _, p in raw.parts) + 256
    return len(repr(raw.value)) + 256


def arrow_array(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    """An Arrow array of Python values (text, integers, or integer timestamps) built from its buffers. Not
    ``pa.array(list)``: that asks pyarrow's pandas shim whether the list is array-like, which imports pandas —
    32 MB of a server that otherwise never needs it (issue 40); nor numpy, which the server never loads."""
    import itertools
    from array import array

    import pyarrow as pa

    n = len(values)
    bits = bytearray((n + 7) // 8)
    nulls = 0
    for i, v in enumerate(values):
        if v is None:
            nulls += 1
        else:
            bits[i >> 3] |= 1 << (i & 7)  # Arrow's validity bitmap: least significant bit first
    bitmap = pa.py_buffer(bytes(bits)) if nulls else None
    if pa.types.is_string(kind):
        encoded = [b"" if v is None else str(v).encode("utf-8") for v in values]
        ends = list(itertools.accumulate((len(e) for e in encoded), initial=0))
        if ends[-1] >= 2**31:
            raise ValueError("more than 2 GB of text in one column")
        data = pa.py_buffer(b"".join(encoded))
        return pa.StringArray.from_buffers(n, pa.py_buffer(array("i", ends).tobytes()), data, bitmap, nulls)
    if pa.types.is_integer(kind) or pa.types.is_timestamp(kind):
        numbers = array("q", (0 if v is None else int(v) for v in values))
        return pa.Array.from_buffers(kind, n, [bitmap, pa.py_buffer(numbers.tobytes())], nulls)
    raise TypeError(f"arrow_array builds text, integer and timestamp arrays, not {kind}")


def arrow_table(frame: Any, column_types: dict[str, str] | None = None) -> pa.Table:
    """A pandas DataFrame as an Arrow table. A column Arrow cannot type (mixed ints and text, say) becomes
    text, each value as it would print, and is named ``mixed`` in ``column_types``; nothing is dropped."""
    import pyarrow as pa

    names = [str(c) for c in frame.columns]
    arrays = []
    for i, name in enumerate(names):
        series = frame.iloc[:, i]
        try:
            arrays.append(pa.array(series, from_pandas=True))
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
            texts = []
            for v in series:
                plain = cell_value(v)
                text = plain if isinstance(plain, str) or plain is None else json.dumps(plain, default=str)
                texts.append(text)
            arrays.append(pa.array(texts, type=pa.string()))
            if column_types is not None:
                column_types.setdefault(name, "mixed")
    return pa.Table.from_arrays(arrays, names=names)


def is_missing(value: Any) -> bool:
    """A scalar null (None, NaN, NaT, pandas NA); containers are never missing. Never imports pandas."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, (str, bytes, list, dict, tuple)) or hasattr(value, "__len__"):
        return False
    pd = sys.modules.get("pandas")  # NaT and NA only exist where pandas made them
    if pd is None:
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def cell_value(value: Any) -> Any:
    """A pandas/numpy/arrow cell as a plain JSON-able Python value (None for missing)."""
    if is_missing(value):
        return None
    if hasattr(value, "tolist") and hasattr(value, "__len__"):  # numpy arrays (list columns)
        return cell_value(value.tolist())
    if hasattr(value, "item") and not isinstance(value, (bytes, str)):
        try:
            value = value.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
        return float(f"{value:.15g}")  # 43974.710000000014 -> 43974.71: floating-point noise is not data
    if isinstance(value, dt.datetime) and value.tzinfo is None and value.time() == dt.time():
        return value.date().isoformat()  # a date stored as a timestamp: the time adds tokens, not information
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return exact_number(value)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [cell_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): cell_value(v) for k, v in value.items()}
    if hasattr(value, "tolist"):
        return cell_value(value.tolist())
    return value


def exact_number(value: Decimal) -> Any:
    """An exact decimal as the number it is: an int when whole, a float when the float is that very number
    (``7031022.00`` → 7031022, ``0.07310000`` → 0.0731), else its exact digits as text (no float noise, no
    trailing zeros, no exponent: ``0.000001``)."""
    if not value.is_finite():
        return None
    if value == value.to_integral_value():
        whole = int(value)
        return whole if abs(whole) < 2**53 else str(whole)
    as_float = float(value)
    if Decimal(repr(as_float)) == value and "e" not in repr(as_float):
        return as_float
    text = format(value, "f")  # normalize() would round to the context's 28 digits
    return text.rstrip("0").rstrip(".") if "." in text else text


def stats_kind(t: pa.DataType) -> str:
    """Which figures summarise a column of Arrow type ``t`` (bool, number, time, other)."""
    import pyarrow as pa

    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return "time"
    return "other"
