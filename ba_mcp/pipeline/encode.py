"""Compact, faithful text encodings of tables for the ``full`` level.

All encodings keep every row and column and distinguish a missing value from an empty string:
CSV writes a missing value as an empty field and an empty string as ``""``; markdown writes missing
as an empty cell and empty strings as ``""``; TOON and JSON write ``null``. Which one the pipeline
uses is ``observation.table_encoding``; ``bench/bench_tokens.py`` measures them against JSON.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

ENCODINGS = ("csv", "markdown", "toon", "json", "json_pretty")


def is_missing(value: Any) -> bool:
    """A scalar null (None, NaN, NaT, pandas NA); containers are never missing."""
    if value is None:
        return True
    if isinstance(value, (str, bytes, list, dict, tuple)) or hasattr(value, "__len__"):
        return False
    try:
        import pandas as pd

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
        return str(value)
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


def _rows(frame: pd.DataFrame) -> Iterator[list[Any]]:
    """Rows as plain values. A datetime column with a time of day on any row keeps it on every row (a
    midnight value printed as a date next to timestamps would read as a different kind of value)."""
    keep_time = {i for i, col in enumerate(frame.columns) if _has_time_of_day(frame[col])}
    for row in frame.itertuples(index=False, name=None):
        yield [v.isoformat() if i in keep_time and not is_missing(v) else cell_value(v) for i, v in enumerate(row)]


def _has_time_of_day(series: pd.Series) -> bool:
    import pandas as pd

    if not pd.api.types.is_datetime64_any_dtype(series):
        return False
    values = series.dropna()
    if values.empty:
        return False
    return bool((values != values.dt.normalize()).any())


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _csv_field(value: Any) -> str:
    if value is None:
        return ""
    text = _text(value)
    if text == "" or any(c in text for c in ',"\n\r') or text != text.strip():
        return '"' + text.replace('"', '""') + '"'
    return text


def encode_csv(frame: pd.DataFrame) -> str:
    lines = [",".join(_csv_field(str(c)) for c in frame.columns)]
    lines.extend(",".join(_csv_field(v) for v in row) for row in _rows(frame))
    return "\n".join(lines)


def _md_field(value: Any) -> str:
    if value is None:
        return ""
    text = _text(value)
    if text == "":
        return '""'
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r\n", "<br>").replace("\n", "<br>")


def encode_markdown(frame: pd.DataFrame) -> str:
    header = "|" + "|".join(_md_field(str(c)) for c in frame.columns) + "|"
    sep = "|" + "|".join("-" for _ in frame.columns) + "|"
    body = ["|" + "|".join(_md_field(v) for v in row) + "|" for row in _rows(frame)]
    return "\n".join([header, sep, *body])


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    cols = [str(c) for c in frame.columns]
    return [dict(zip(cols, row, strict=True)) for row in _rows(frame)]


def encode_toon(frame: pd.DataFrame) -> str:
    import toon_format

    return toon_format.encode(_records(frame))


def encode_json(frame: pd.DataFrame) -> str:
    return json.dumps(_records(frame), ensure_ascii=False, separators=(",", ":"))


def encode_json_pretty(frame: pd.DataFrame) -> str:
    return json.dumps(_records(frame), ensure_ascii=False, indent=2)


ENCODERS: dict[str, Callable[[pd.DataFrame], str]] = {
    "csv": encode_csv,
    "markdown": encode_markdown,
    "toon": encode_toon,
    "json": encode_json,
    "json_pretty": encode_json_pretty,
}


def encode_table(frame: pd.DataFrame, encoding: str) -> str:
    """Encode every row of ``frame`` in one of ``ENCODINGS``."""
    return ENCODERS[encoding](frame)
