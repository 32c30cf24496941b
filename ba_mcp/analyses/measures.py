"""What a saved analysis's table columns are, for people: which numbers add up (an amount, a count: a total
means something) and which do not (a rate, a share, a price, a score, an id, a year: a total is nonsense, so
they are compared as values), which columns name the rows (dimensions), and numbers written for a reader.

The judgement is by the column's Arrow type and its name: ``revenue``, ``orders``, ``variance`` add up;
``margin_pct``, ``conversion_rate``, ``avg_order_value``, ``z``, ``cell_noise``, ``unit_price``, ``year`` do not.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a table is read: the server starts without pyarrow (issue 40)
    import pyarrow as pa

# a name made of these words (separated by _ or space, or a word's end) is not an amount
_NOT_ADDITIVE = re.compile(
    r"(^|[_\s])(pct|percent|percentage|share|rate|ratio|avg|average|mean|median|min|max|minimum|maximum|score|"
    r"z|zscore|index|price|p|pvalue|p_value|growth|yoy|mom|std|sd|stddev|stdev|sigma|noise|spread|volatility|"
    r"rank|decile|quartile|quantile|"
    r"percentile|probability|prob|alive|lift|elasticity|aov|per|cv|correlation|corr|days|age|lat|lon|"
    r"latitude|longitude|id|years?|quarters?|months?|weeks?|day|hours?|number|no)([_\s]|$)",
    re.IGNORECASE,
)
# names of time parts and keys: a number that names a row, not a measure
_DIMENSION = re.compile(
    r"(^|[_\s])(id|key|code|year|quarter|month|week|day|date|hour|period|cohort|decile|rank)([_\s]|$)", re.IGNORECASE
)
_PERCENT = re.compile(r"(^|[_\s])(pct|percent|percentage)([_\s]|$)", re.IGNORECASE)


def numeric(kind: pa.DataType) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind))


def temporal(kind: pa.DataType) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_date(kind) or pa.types.is_timestamp(kind))


def dimension(name: str, kind: pa.DataType) -> bool:
    """A column that names the rows: text, dates, booleans, or a number named like a key or a time part."""
    return not numeric(kind) or bool(_DIMENSION.search(name))


def additive(name: str, kind: pa.DataType) -> bool:
    """A number whose column total means something (an amount or a count)."""
    return numeric(kind) and not _NOT_ADDITIVE.search(name) and not dimension(name, kind)


def additive_column(name: str, column: pa.ChunkedArray | pa.Array) -> bool:
    """``additive`` judged on the values too: fractions between -1 and 1 (a discount of 0.1, a share) are not
    amounts, whatever the column is called."""
    import pyarrow as pa

    if not additive(name, column.type):
        return False
    if pa.types.is_floating(column.type) or pa.types.is_decimal(column.type):
        values = [float(v) for v in column.to_pylist() if v is not None]
        finite = [abs(v) for v in values if not math.isnan(v)]
        whole = all(math.isinf(v) or (not math.isnan(v) and math.floor(v) == v) for v in values)
        if finite and max(finite) <= 1 and not whole:
            return False
    return True


def column_total(column: pa.ChunkedArray | pa.Array) -> Any:
    """The sum of a numeric column's values, as Arrow's ``sum`` gives it (None when it has none; NaN when one is
    NaN) — in Python: the server holds no compute kernels (issue 40). Integers and decimals add up exactly,
    floats with ``math.fsum`` (correctly rounded)."""
    import pyarrow as pa

    values = [v for v in column.to_pylist() if v is not None]
    if not values:
        return None
    return math.fsum(values) if pa.types.is_floating(column.type) else sum(values)


def value_range(column: pa.ChunkedArray | pa.Array) -> tuple[Any, Any] | None:
    """The smallest and largest value of a numeric column, missing values and NaN skipped (as Arrow's min
    and max); None when it has none."""
    values = [v for v in column.to_pylist() if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return (min(values), max(values)) if values else None


def time_like(name: str, kind: pa.DataType) -> bool:
    """A column along which a series runs (a date, or a number or text named like a time part)."""
    return temporal(kind) or bool(re.search(r"(^|_)(year|quarter|month|week|day|date|period)(_|$)", name, re.I))


def percent_column(name: str) -> bool:
    return bool(_PERCENT.search(name))


def number(value: Any, percent: bool = False) -> str:
    """A number for people: thousands separators, no spurious decimals (1,234,567; 12.35; 0.0042), a unit."""
    if value is None:
        return ""
    if isinstance(value, bool) or (not isinstance(value, int | float) and not hasattr(value, "__float__")):
        return str(value)
    x = float(value)
    if math.isnan(x):
        return ""
    if float(x).is_integer() and abs(x) < 1e15:
        text = f"{int(x):,}"
    elif abs(x) >= 100:
        text = f"{x:,.0f}"
    elif abs(x) >= 1:
        text = f"{x:,.2f}".rstrip("0").rstrip(".")
    else:
        text = f"{x:.3g}"
    return f"{text} %" if percent else text


def change(before: float, after: float) -> str:
    """``1,234 → 1,300 (+5.3 %)``: a total's change, with its relative size when it has one."""
    text = f"{number(before)} → {number(after)}"
    if before:
        text += f" ({100 * (after - before) / abs(before):+.1f} %)"
    return text


def covers(rows: int, ordered: bool, offset: int, frame: pa.Table) -> str:
    """What a cut result holds, for people — "top 10 vendors", "first 10 vendors", "vendors 21–30": its rows
    named by its first dimension column (``vendor_name`` → vendor names), "rows" when none names them."""
    name = next((n for n, c in zip(frame.column_names, frame.columns, strict=True) if dimension(n, c.type)), "")
    words = " ".join(name.replace("_", " ").split()).lower()
    words = re.sub(r"\b(name|label|title|id|key|code)$", "", words).strip() or words  # vendor_name -> vendor
    noun = _plural(words) if words else "rows"
    if offset:
        return f"{noun} {offset + 1:,}–{offset + rows:,} only"
    return f"{'top' if ordered else 'first'} {rows:,} {noun} only"


FILTER_SHOWN = 120  # characters of a filter's condition a label shows


def filtered(covered: str, condition: str) -> str:
    """What a filtered result holds, for people: "the rows where region = 'north'" — after what a LIMIT kept
    ("top 10 vendors only, of the rows where …"); a long condition cut at ``FILTER_SHOWN`` characters."""
    condition = " ".join(condition.split())
    if len(condition) > FILTER_SHOWN:
        condition = condition[: FILTER_SHOWN - 1] + "…"
    rows = f"rows where {condition}"
    return f"{covered}, of the {rows}" if covered else rows


def _plural(noun: str) -> str:
    if re.search(r"(s|x|z|ch|sh)$", noun):
        return noun + "es"
    if re.search(r"[^aeiou]y$", noun):
        return noun[:-1] + "ies"
    return noun + "s"
