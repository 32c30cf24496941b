"""A saved analysis's conclusions, re-checked on every run (docs/saved-analyses.md).

When saving, the model may attach conclusions, each a sentence bound to one output table and a rule — data,
never code (S-13): the rule reads the output with pyarrow, its filter is a list of ``[column, op, literal]``.

- ``count``: how many rows match ``where`` ("2 cells miss plan by more than 5 %");
- ``rows``: which rows match ``where``, named by their ``key`` column or columns ("West and North are flagged");
- ``value``: one cell (``column`` in the row ``row`` selects, ``{"region": "West"}``; or the column's total when
  it adds up, or the only row), within ``tolerance`` ("revenue grew to 7.3 M");
- ``sign``: that cell's sign ("the gap is negative").

Saving records what each rule reads on the verifying run (``expected``); a re-run reads it again and says whether
the conclusion still holds: the same count, the same rows, the value within its tolerance, the same sign.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ba_mcp.analyses.measures import additive_column, number
from ba_mcp.errors import ErrorType, ToolFailure

if TYPE_CHECKING:
    import pyarrow as pa

RULES = ("count", "rows", "value", "sign")
OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "=": operator.eq, "==": operator.eq}
OPS["!="] = operator.ne
KEYS = {"text", "output", "rule", "column", "where", "key", "row", "tolerance", "expected"}


def bad(message: str, hint: str = "") -> ToolFailure:
    return ToolFailure(
        ErrorType.VALIDATION_ERROR,
        "BAD_CONCLUSION",
        message,
        hint
        or 'e.g. {"text": "2 cells miss plan by > 5 %", "output": "<artifact id>", "rule": "count", '
        '"where": [["variance_pct", "<", -5]]}; rules: count, rows (with key), value, sign (with column, row)',
    )


def normalise(items: list[Any], outputs: list[str], links: dict[str, str]) -> list[dict[str, Any]]:
    """The conclusions as given, checked for shape: each output named by its output name or the conversation's
    artifact id (``links`` maps those to names)."""
    made: list[dict[str, Any]] = []
    for number_, item in enumerate(items, 1):
        if not isinstance(item, dict) or not str(item.get("text") or "").strip():
            raise bad(f"conclusion {number_}: an object with a text, an output and a rule")
        unknown = sorted(set(item) - KEYS)
        if unknown:
            raise bad(f"conclusion {number_}: unknown key {unknown[0]!r}")
        output = str(item.get("output") or "")
        output = links.get(output, output)
        if output not in outputs:
            raise bad(
                f"conclusion {number_}: output {item.get('output')!r} is none of the analysis's tables",
                f"outputs: {', '.join(outputs)} (or the artifact id or call id the conversation saw)",
            )
        rule = str(item.get("rule") or "")
        if rule not in RULES:
            raise bad(f"conclusion {number_}: rule {rule!r} is not one of {', '.join(RULES)}")
        where = item.get("where") or []
        if not isinstance(where, list) or not all(
            isinstance(w, list | tuple) and len(w) == 3 and str(w[1]) in OPS for w in where
        ):
            raise bad(f"conclusion {number_}: where is a list of [column, op, value] with op one of {', '.join(OPS)}")
        entry: dict[str, Any] = {"text": str(item["text"]).strip()[:300], "output": output, "rule": rule}
        if where:
            entry["where"] = [[str(c), str(o), v] for c, o, v in where]
        if item.get("column") is not None:
            entry["column"] = str(item["column"])
        if item.get("key") is not None:  # one column or several that together name a row
            key = item["key"]
            entry["key"] = [str(k) for k in key] if isinstance(key, list) else str(key)
        if item.get("row") is not None:
            if not isinstance(item["row"], dict) or not item["row"]:
                raise bad(f"conclusion {number_}: row names one row by its columns, {{'region': 'West'}}")
            entry["row"] = {str(k): v for k, v in item["row"].items()}
        if item.get("tolerance") is not None:
            entry["tolerance"] = abs(float(item["tolerance"]))
        if rule == "rows" and "key" not in entry:
            raise bad(f"conclusion {number_}: a rows rule names the column that names each row (key)")
        if rule in ("value", "sign") and "column" not in entry:
            raise bad(f"conclusion {number_}: a {rule} rule names the column it reads")
        made.append(entry)
    return made


def read(conclusion: dict[str, Any], frame: pa.Table) -> Any:
    """What the rule reads on ``frame``: a count, a sorted list of row names, a number or a sign."""
    rows = frame.to_pylist()
    names = set(frame.column_names)
    keys = conclusion.get("key") or []
    keys = [keys] if isinstance(keys, str) else list(keys)
    for column in (
        [w[0] for w in conclusion.get("where", [])]
        + keys
        + ([conclusion["column"]] if "column" in conclusion else [])
        + list(conclusion.get("row", {}))
    ):
        if column not in names:
            raise bad(
                f"conclusion {conclusion['text']!r}: the output has no column {column!r}",
                f"columns: {', '.join(frame.column_names)}",
            )
    matched = [r for r in rows if all(_holds(r[c], op, v) for c, op, v in conclusion.get("where", []))]
    rule = conclusion["rule"]
    if rule == "count":
        return len(matched)
    if rule == "rows":
        return sorted({" / ".join(str(r[k]) for k in keys) for r in matched})
    column = conclusion["column"]
    if "row" in conclusion:
        picked = [r for r in matched if all(_same(r[k], v) for k, v in conclusion["row"].items())]
        if len(picked) != 1:
            raise bad(f"conclusion {conclusion['text']!r}: its row matches {len(picked)} rows of the output, not one")
        value = picked[0][column]
    elif len(matched) == 1:
        value = matched[0][column]
    elif additive_column(column, frame.column(column)):
        value = sum(float(r[column] or 0) for r in matched)
    else:
        raise bad(f"conclusion {conclusion['text']!r}: {column} does not add up; name the row it reads (row)")
    if value is None:
        return None
    value = float(value)
    if rule == "sign":
        return "positive" if value > 0 else "negative" if value < 0 else "zero"
    return round(value, 9)


def _same(cell: Any, wanted: Any) -> bool:
    if isinstance(wanted, int | float) and not isinstance(wanted, bool) and isinstance(cell, int | float):
        return float(cell) == float(wanted)
    return str(cell) == str(wanted)


def _holds(cell: Any, op: str, literal: Any) -> bool:
    if cell is None:
        return False
    if isinstance(literal, int | float) and not isinstance(literal, bool):
        try:
            return bool(OPS[op](float(cell), float(literal)))
        except (TypeError, ValueError):
            return False
    return bool(OPS[op](str(cell), str(literal)))


@dataclass
class Status:
    conclusion: dict[str, Any]
    holds: bool
    now: Any
    error: str = ""

    def line(self) -> str:
        text, was = self.conclusion["text"], self.conclusion.get("expected")
        if self.error:
            return f"cannot check: “{text}” — {self.error}"
        if self.holds:
            return f"holds: “{text}” ({_shown(self.now)})"
        return f"NO LONGER HOLDS: “{text}” — now {_shown(self.now)}, was {_shown(was)}"

    def reading(self) -> str:
        """The line of a run that nothing is compared with (another's published analysis, run on the caller's data):
        what the rule reads, no verdict."""
        text = self.conclusion["text"]
        if self.error:
            return f"cannot check: “{text}” — {self.error}"
        return f"reads: “{text}” — {_shown(self.now)} on this run"


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(value) if value else "none"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return number(value)
    return str(value)


def check(conclusions: list[dict[str, Any]], tables: dict[str, pa.Table]) -> list[Status]:
    """Each recorded conclusion read again on this run's outputs: whether it still holds."""
    statuses = []
    for c in conclusions:
        frame = tables.get(str(c.get("output")))
        if frame is None:
            statuses.append(Status(c, False, None, f"this run made no output {c.get('output')}"))
            continue
        try:
            now = read(c, frame)
        except ToolFailure as failure:
            statuses.append(Status(c, False, None, failure.message))
            continue
        was = c.get("expected")
        if c["rule"] == "value" and isinstance(now, float) and isinstance(was, int | float):
            tolerance = float(c.get("tolerance") or 0) or 1e-9 * max(1.0, abs(float(was)))
            holds = abs(now - float(was)) <= tolerance
        else:
            holds = now == was
        statuses.append(Status(c, bool(holds), now))
    return statuses


def summary(statuses: list[Status]) -> str:
    """The headline of a run's conclusions: those that no longer hold first."""
    if not statuses:
        return ""
    broken = [s for s in statuses if not s.holds]
    if not broken:
        return f"All {len(statuses)} conclusion(s) still hold."
    return f"{len(broken)} of {len(statuses)} conclusion(s) no longer hold."


def ordered(statuses: list[Status]) -> list[Status]:
    return [s for s in statuses if not s.holds] + [s for s in statuses if s.holds]
