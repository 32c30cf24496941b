"""A saved analysis's run as a memo a manager reads: ``report.html`` (self-contained: no script, no
fetch — styles inline, figures and charts embedded) and ``report.md``, in this order:

1. the title and a headline: the conclusions that no longer hold first, else what changed since the saved run;
2. the conclusions, each with whether it still holds;
3. key figures: the totals of the columns that add up, with their change since the saved run;
4. the charts: the analysis's figures, and a line or bar chart of each table that runs along time or categories;
5. each output titled by what it shows, its change line and its rows trimmed to what matters (the first 10, the
   latest 12 of a time series), numbers for people, a total row only under the columns that add up;
6. the audit trail last: parameters, the steps with their SQL (and the values each statement was bound to) and
   code, the outputs' digests.
"""

from __future__ import annotations

import base64
import html
import math
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ba_mcp.analyses.conclusions import Status, ordered, summary
from ba_mcp.analyses.measures import (
    additive_column,
    change,
    column_total,
    dimension,
    number,
    numeric,
    percent_column,
    temporal,
    time_like,
)
from ba_mcp.analyses.replay import statement_values

if TYPE_CHECKING:
    import pyarrow as pa

SHOWN_ROWS = 10
SERIES_ROWS = 12
KEY_FIGURES = 4


@dataclass
class Shown:
    """One output of the run, as the report shows it."""

    name: str
    kind: str  # table | image
    step: dict[str, Any]  # its step in the manifest
    change: str  # the "what changed" line
    files: str
    frame: pa.Table | None = None
    png: bytes | None = None
    artifact_title: str = ""  # what the step called it (a figure's title, save_artifact(title=…))
    expected: dict[str, Any] = field(default_factory=dict)  # the saved run's facts
    facts: dict[str, Any] = field(default_factory=dict)  # this run's

    @property
    def title(self) -> str:
        return title_of(self)


def title_of(o: Shown) -> str:
    """What an output shows, in words: a figure's own title; a query's leading comment; else its measures by its
    dimensions ("revenue by month and category")."""
    generic = not o.artifact_title or re.fullmatch(
        r"(figure|chart)\s*\d*|s\d+: value|value of the last expression|.*: \d.*rows.*", o.artifact_title, re.I
    )
    if o.kind == "image":
        return o.artifact_title if not generic else f"Figure from step {o.step.get('id')}"
    if o.step.get("tool") == "run_python" and not generic:
        return o.artifact_title
    sql = str(o.step.get("sql") or "")
    comment = re.match(r"\s*--\s*(?:feeds\s+\S+:\s*)?(.+)", sql)
    if comment:
        return comment.group(1).strip().rstrip(".")[:120]
    if o.frame is None:
        return o.name
    measures = [n for n, c in zip(o.frame.column_names, o.frame.columns, strict=True) if not dimension(n, c.type)]
    dims = [n for n, c in zip(o.frame.column_names, o.frame.columns, strict=True) if dimension(n, c.type)]
    what = _words(measures[:3]) or "rows"
    return (what + (" by " + _words(dims[:3]) if dims else "")).replace("_", " ")


def _words(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1] if names else ""


def pretty_name(name: str) -> str:
    return name.replace("-", " ").replace("_", " ").strip().capitalize()


# -- what the report says ----------------------------------------------------------------------------------


def headline(shown: list[Shown], statuses: list[Status], same_parameters: bool) -> str:
    """One or two sentences: the conclusions' state first; else what changed (or that nothing did)."""
    said = summary(statuses)
    broken = [s for s in statuses if not s.holds]
    if broken:
        return said + " " + broken[0].line()
    changed = [o for o in shown if not o.change.startswith("same")]
    if not changed:
        given = "" if same_parameters else " (with other parameters)"
        outputs = f"All {len(shown)} outputs are" if len(shown) > 1 else "The output is"
        return (said + " " if said else "") + f"{outputs} the same as the saved run{given}."
    first = changed[0]
    detail = first.change.removeprefix("changed: ")
    return (said + " " if said else "") + f"{len(changed)} of {len(shown)} outputs changed; {first.title}: {detail}."


def key_figures(shown: list[Shown]) -> list[tuple[str, str, str]]:
    """(label, value now, its change since the saved run) for the columns that add up, first outputs first."""
    figures: list[tuple[str, str, str]] = []
    seen: set[tuple[str, float]] = set()
    for o in reversed(shown):  # the last outputs are the analysis's results; earlier ones feed them
        for column, total in (o.facts.get("totals") or {}).items():
            if (column, float(total)) in seen:
                continue
            seen.add((column, float(total)))
            before = (o.expected.get("totals") or {}).get(column)
            moved = ""
            if before is not None and float(before) != float(total):
                moved = change(float(before), float(total))
            elif before is not None:
                moved = "unchanged"
            label = column.replace("_", " ")
            if o.facts.get("covers"):  # a cut result (LIMIT): the figure says what it covers, never the whole's
                label += f" of the {o.facts['covers']}"
            figures.append((f"{label} ({o.title})", number(total), moved))
            if len(figures) >= KEY_FIGURES:
                return figures
    return figures


def trimmed(frame: pa.Table) -> tuple[pa.Table, str]:
    """The rows worth showing: the latest of a series (its first column runs along time), else the first ones."""
    first = frame.schema.field(0) if frame.num_columns else None
    series = first is not None and time_like(first.name, first.type)
    if series and frame.num_rows > SERIES_ROWS and len(set(frame.column(0).to_pylist())) == frame.num_rows:
        return frame.slice(frame.num_rows - SERIES_ROWS), f"the latest {SERIES_ROWS} of {frame.num_rows:,} rows"
    if frame.num_rows > SHOWN_ROWS:
        return frame.slice(0, SHOWN_ROWS), f"the first {SHOWN_ROWS} of {frame.num_rows:,} rows"
    return frame, ""


_FRACTION = re.compile(r"(^|_)(rate|share|ratio|growth|conversion|churn|retention|margin)(_|$)", re.I)
_GRAINS = ("year", "quarter", "month", "week", "day")


def fraction_column(name: str, column: Any) -> bool:
    """A rate kept as a fraction (a return rate of 0.042, a growth of -0.13): shown as a percentage. Named like a
    rate and never beyond ±1.5 — a rate of 4.2 or a margin in money is left as it is."""
    import pyarrow as pa

    if percent_column(name) or not _FRACTION.search(name) or not numeric(column.type):
        return False
    values = [float(v) for v in column.to_pylist() if v is not None] if not pa.types.is_boolean(column.type) else []
    return bool(values) and all(abs(v) <= 1.5 for v in values)


def column_label(name: str) -> str:
    """A column's name for people: ``metric_time__month`` → Month, ``customer__region`` → Customer region,
    ``order_date_month`` → Order date (month), ``growth_pct`` → Growth (%), ``net_revenue`` → Net revenue."""
    text = name.strip()
    if text.startswith("metric_time"):
        grain = text.rsplit("__", 1)[-1] if "__" in text else "day"
        return grain.capitalize() if grain in _GRAINS else "Date"
    unit = ""
    if m := re.search(r"_(pct|percent|percentage)$", text, re.I):
        text, unit = text[: m.start()], " (%)"
    elif (m := re.search(r"_(" + "|".join(_GRAINS) + r")$", text)) and text[: m.start()].endswith(
        ("date", "_at", "time")
    ):
        text, unit = text[: m.start()], f" ({m.group(1)})"
    words = " ".join(text.replace("__", " ").replace("_", " ").split())
    return (words[:1].upper() + words[1:] + unit) if words else name


def date_labels(values: list[Any]) -> list[str]:
    """Dates labelled by their grain: 2025, 2025-Q1, 2025-03, 2025-03-01 (never 2025-03-01 00:00:00)."""
    import datetime as dt

    days = [v.date() if isinstance(v, dt.datetime) and v.time() == dt.time() else v for v in values]
    if not days or not all(isinstance(d, dt.date) and not isinstance(d, dt.datetime) for d in days):
        return [str(v) for v in values]
    if all(d.day == 1 for d in days):
        if all(d.month == 1 for d in days) and len(days) > 1:
            return [f"{d.year}" for d in days]
        if all(d.month in (1, 4, 7, 10) for d in days) and len(days) > 2:
            return [f"{d.year}-Q{(d.month - 1) // 3 + 1}" for d in days]
        return [f"{d.year}-{d.month:02d}" for d in days]
    return [d.isoformat() for d in days]


def cell(name: str, kind: pa.DataType, value: Any, fraction: bool = False) -> str:
    import pyarrow as pa

    if value is None:
        return ""
    if fraction and isinstance(value, int | float):
        return number(100 * float(value), True)
    if (
        pa.types.is_timestamp(kind)
        and hasattr(value, "time")
        and not any((value.hour, value.minute, value.second, value.microsecond))
    ):
        return str(value.date())  # a day, not midnight
    if numeric(kind) and not dimension(name, kind):
        return number(value, percent_column(name))
    return str(value)


@dataclass
class Shaped:
    """An output's table as both documents show it: headers, the rows worth showing as text, the total row."""

    headers: list[str]
    rows: list[list[str]]
    total: list[str] | None
    note: str


def shaped(frame: pa.Table, covers: str = "") -> Shaped:
    rows, note = trimmed(frame)
    kinds = [rows.schema.field(i).type for i in range(rows.num_columns)]
    fractions = {c: fraction_column(c, frame.column(c)) for c in frame.column_names}
    cells = [
        [cell(c, k, r[c], fractions[c]) for c, k in zip(rows.column_names, kinds, strict=True)]
        for r in rows.to_pylist()
    ]
    total = totals_row(frame) if frame.num_rows > 1 else None
    if total is not None and covers and total[0] == "Total":
        total[0] = f"Total of the {covers}"
    return Shaped([column_label(c) for c in rows.column_names], cells, total, note)


def totals_row(frame: pa.Table) -> list[str] | None:
    """A total under each column that adds up (blank under the others); None when no column adds up."""
    row = []
    for name, column in zip(frame.column_names, frame.columns, strict=True):
        if additive_column(name, column):
            row.append(number(column_total(column)))
        else:
            row.append("")
    if not any(row):
        return None
    row[0] = row[0] or "Total"
    return row


# -- charts (inline SVG, no script) ---------------------------------------------------------------------


def chart(frame: pa.Table, title: str, covers: str = "") -> str:
    """A line chart (the first column runs along time) or a bar chart (categories, as horizontal bars: their
    names whole) of the first column that adds up, summed per value of the first column; '' when the table is
    not one of those shapes."""
    if frame.num_columns < 2 or frame.num_rows < 2:
        return ""
    label = frame.column_names[0]
    measure = next(
        (n for n, c in zip(frame.column_names, frame.columns, strict=True) if additive_column(n, c)),
        None,
    )
    if measure is None or measure == label:
        return ""
    sums: dict[str, float] = {}
    raw = frame.column(label).to_pylist()
    names = dict(zip(raw, date_labels(raw), strict=True)) if temporal(frame.schema.field(label).type) else {}
    for key, value in zip(raw, frame.column(measure).to_pylist(), strict=True):
        shown = names.get(key, str(key))
        sums[shown] = sums.get(shown, 0.0) + float(value or 0)
    series = time_like(label, frame.schema.field(label).type)
    keys = list(sums)[-60:] if series else sorted(sums, key=lambda k: -sums[k])[:15]
    values = [sums[k] for k in keys]
    if len(keys) < 2:
        return ""
    if not series:
        caption = f"{column_label(measure)} by {column_label(label).lower()}" + (f" ({covers})" if covers else "")
        return _bars(keys, values, title, caption)
    width, height, left, bottom, top = 720, 260, 70, 40, 28
    low, high = min(0.0, min(values)), max(values) or 1.0
    span = (high - low) or 1.0

    def y(v: float) -> float:
        return top + (height - top - bottom) * (1 - (v - low) / span)

    step = (width - left - 10) / max(len(keys), 1)
    parts = [
        f'<svg class="chart" role="img" aria-label="{html.escape(title)}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">',
        f'<text x="{left}" y="16" class="chart-title">'
        f"{html.escape(f'{column_label(measure)} by {column_label(label).lower()}')}</text>",
        f'<line x1="{left}" y1="{y(low):.1f}" x2="{width - 10}" y2="{y(low):.1f}" class="axis"/>',
    ]
    for tick in (low, (low + high) / 2, high):
        parts.append(f'<text x="{left - 6}" y="{y(tick) + 4:.1f}" text-anchor="end" class="tick">{number(tick)}</text>')
    points = " ".join(f"{left + step * (i + 0.5):.1f},{y(v):.1f}" for i, v in enumerate(values))
    parts.append(f'<polyline points="{points}" class="line"/>')
    longest = min(max(len(k) for k in keys), 12)
    every = max(1, math.ceil(len(keys) * (longest * 7 + 8) / (width - left - 10)))  # labels never overlap
    for i, k in enumerate(keys):
        if i % every == 0:
            parts.append(
                f'<text x="{left + step * (i + 0.5):.1f}" y="{height - bottom + 16}" text-anchor="middle" '
                f'class="tick">{html.escape(k[:12])}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


LABEL_CHARS = 40  # a category's name shown whole up to this; a longer one ends in … (all of it on hover)


def _bars(keys: list[str], values: list[float], title: str, caption: str) -> str:
    """Categories as horizontal bars, each labelled with its whole name on its left ("Superior Bicycles", never
    "Superior Bic"), its value at the bar's end."""
    longest = min(max(len(k) for k in keys), LABEL_CHARS)
    left, right, top, row = 14 + 7 * longest, 80, 28, 22
    width = max(720, left + 320 + right)
    height = top + row * len(keys) + 8
    low, high = min(0.0, min(values)), max(0.0, max(values))
    span = (high - low) or 1.0

    def x(v: float) -> float:
        return left + (width - left - right) * (v - low) / span

    parts = [
        f'<svg class="chart" role="img" aria-label="{html.escape(title)}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">',
        f'<text x="{left}" y="16" class="chart-title">{html.escape(caption)}</text>',
        f'<line x1="{x(0):.1f}" y1="{top - 4}" x2="{x(0):.1f}" y2="{height - 6}" class="axis"/>',
    ]
    for i, (k, v) in enumerate(zip(keys, values, strict=True)):
        y0 = top + row * i
        shown = k if len(k) <= LABEL_CHARS else k[: LABEL_CHARS - 1] + "…"
        parts.append(
            f'<text x="{left - 6}" y="{y0 + row * 0.65:.1f}" text-anchor="end" class="tick">'
            f"<title>{html.escape(k)}</title>{html.escape(shown)}</text>"
        )
        x0, x1 = min(x(0), x(v)), max(x(0), x(v))
        parts.append(
            f'<rect x="{x0:.1f}" y="{y0 + 3}" width="{x1 - x0:.1f}" height="{row - 6}" class="bar"/>'
            f'<text x="{x1 + 4:.1f}" y="{y0 + row * 0.65:.1f}" class="tick">{number(v)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


# -- the two documents --------------------------------------------------------------------------------------

STYLE = (
    ":root{color-scheme:light dark;--fg:#1d1d1f;--muted:#6e6e73;--line:#d2d2d7;--bg:#fff;--head:#f5f5f7;"
    "--bad:#b3261e;--good:#1b7f3b;--accent:#2f6fde}"
    "@media (prefers-color-scheme:dark){:root{--fg:#f5f5f7;--muted:#a1a1a6;--line:#424245;--bg:#1d1d1f;"
    "--head:#2c2c2e;--bad:#ff8a80;--good:#7ee2a8;--accent:#8ab4ff}}"
    "body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.5em auto;max-width:60em;"
    "padding:0 1em;color:var(--fg);background:var(--bg)}h1{font-size:1.6em;margin:0 0 .2em}"
    "h2{font-size:1.15em;margin:1.6em 0 .5em;border-bottom:1px solid var(--line)}h3{font-size:1em;margin:1.2em 0 .3em}"
    ".subtitle,.meta,.files{color:var(--muted)}.headline{font-size:1.15em;font-weight:600;margin:.6em 0 1em}"
    ".figures{display:flex;flex-wrap:wrap;gap:.6em;margin:0;padding:0;list-style:none}"
    ".figures li{border:1px solid var(--line);border-radius:6px;padding:.4em .8em;min-width:11em}"
    ".figures .value{font-size:1.3em;font-weight:600;display:block}.figures .label,.figures .moved{color:var(--muted);"
    "font-size:.85em}.holds{color:var(--good)}.broken{color:var(--bad);font-weight:600}"
    "table{border-collapse:collapse;margin:.3em 0}td,th{border-bottom:1px solid var(--line);padding:3px 10px;"
    "text-align:right;white-space:nowrap}th{background:var(--head)}td:first-child,th:first-child{text-align:left}"
    "tr.total td{font-weight:600;border-top:2px solid var(--line)}.chart .line{fill:none;stroke:var(--accent);"
    "stroke-width:2}.chart .bar{fill:var(--accent)}.chart .axis{stroke:var(--muted)}.chart text{fill:var(--muted);"
    "font-size:11px}.chart .chart-title{fill:var(--fg);font-size:13px}img{max-width:100%}"
    "pre{background:var(--head);padding:.6em;overflow-x:auto;font-size:12px}details{margin:.4em 0}"
)


def render_html(
    manifest: dict[str, Any],
    values: dict[str, Any],
    shown: list[Shown],
    statuses: list[Status],
    seconds: float,
    same_parameters: bool,
) -> str:
    e = html.escape
    name = str(manifest.get("name") or "analysis")
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'; "
        'img-src data:">',
        f"<title>{e(pretty_name(name))}</title><style>{STYLE}</style></head><body>",
        f"<h1>{e(pretty_name(name))}</h1>",
    ]
    if manifest.get("description"):
        parts.append(f"<p class='subtitle'>{e(str(manifest['description']))}</p>")
    parts.append(f"<p class='headline' id='headline'>{e(headline(shown, statuses, same_parameters))}</p>")
    given = ", ".join(f"{n} = {v}" for n, v in values.items())
    parts.append(
        f"<p class='meta'>Run {e(time.strftime('%Y-%m-%d %H:%M'))} in {seconds:.1f} s"
        + (f" · {e(given)}" if given else "")
        + f" · saved {e(str(manifest.get('saved') or ''))}</p>"
    )
    if statuses:
        parts.append("<h2>Conclusions</h2><ul class='conclusions'>")
        for s in ordered(statuses):
            parts.append(f"<li class='{'holds' if s.holds else 'broken'}'>{e(s.line())}</li>")
        parts.append("</ul>")
    figures = key_figures(shown)
    if figures:
        parts.append("<h2>Key figures</h2><ul class='figures'>")
        for label, value, moved in figures:
            parts.append(
                f"<li><span class='value'>{e(value)}</span><span class='label'>{e(label)}</span>"
                + (f"<br><span class='moved'>since the saved run: {e(moved)}</span>" if moved else "")
                + "</li>"
            )
        parts.append("</ul>")
    charts = []
    for o in shown:
        if o.kind == "image" and o.png:
            data = base64.b64encode(o.png).decode()
            charts.append(f"<figure><img alt='{e(o.title)}' src='data:image/png;base64,{data}'></figure>")
        elif o.frame is not None and (svg := chart(o.frame, o.title, str(o.facts.get("covers") or ""))):
            charts.append(f"<figure>{svg}</figure>")
    if charts:
        parts.append("<h2>Charts</h2>")
        parts.extend(charts)
    parts.append("<h2>Results</h2>")
    for o in shown:
        css = "holds" if o.change.startswith("same") else "broken"
        parts.append(f"<section class='output' id='{e(o.name)}'><h3>{e(o.title)}</h3>")
        parts.append(f"<p class='meta'><span class='{css}'>{e(o.change)}</span> · {e(o.files)}</p>")
        if o.frame is not None:
            t = shaped(o.frame, str(o.facts.get("covers") or ""))
            parts.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in t.headers) + "</tr>")
            parts += ["<tr>" + "".join(f"<td>{e(v)}</td>" for v in row) + "</tr>" for row in t.rows]
            if t.total:
                parts.append("<tr class='total'>" + "".join(f"<td>{e(v)}</td>" for v in t.total) + "</tr>")
            parts.append("</table>")
            if t.note:
                parts.append(f"<p class='files'>Shown: {e(t.note)}; all of them in {e(o.name)}.csv.</p>")
        parts.append("</section>")
    parts.append("<h2>Audit trail</h2>")
    if values:
        parts.append("<p>Parameters: " + ", ".join(f"<code>{e(n)} = {e(repr(v))}</code>" for n, v in values.items()))
        parts.append("</p>")
    for step in manifest.get("steps") or []:
        text = step.get("sql") or step.get("code") or step.get("metrics_query") or step.get("read") or ""
        bound = statement_values(step, values) if step.get("tool") == "query_database" else []
        parts.append(
            f"<details><summary>step {e(str(step.get('id')))} · {e(str(step.get('tool')))}</summary>"
            f"<pre>{e(str(text))}</pre>"
            + (f"<p class='meta'>with {e(', '.join(bound))}</p>" if bound else "")
            + "</details>"
        )
    parts.append("<table><tr><th>output</th><th>sha256</th><th>as saved</th></tr>")
    for o in shown:
        parts.append(
            f"<tr><td>{e(o.name)}</td><td><code>{e(str(o.facts.get('sha256', ''))[:16])}</code></td>"
            f"<td>{'same' if o.change.startswith('same') else 'differs'}</td></tr>"
        )
    parts.append("</table></body></html>")
    return "\n".join(parts)


def render_markdown(
    manifest: dict[str, Any],
    values: dict[str, Any],
    shown: list[Shown],
    statuses: list[Status],
    seconds: float,
    same_parameters: bool,
) -> str:
    name = str(manifest.get("name") or "analysis")
    lines = [f"# {pretty_name(name)}", ""]
    if manifest.get("description"):
        lines += [f"_{manifest['description']}_", ""]
    lines += [f"**{headline(shown, statuses, same_parameters)}**", ""]
    given = ", ".join(f"{n} = {v!r}" for n, v in values.items())
    lines += [f"Run {time.strftime('%Y-%m-%d %H:%M')} in {seconds:.1f} s" + (f" · {given}" if given else ""), ""]
    if statuses:
        lines += ["## Conclusions", "", *[f"- {s.line()}" for s in ordered(statuses)], ""]
    figures = key_figures(shown)
    if figures:
        lines += ["## Key figures", ""]
        lines += [f"- **{v}** {label}" + (f" — since the saved run: {m}" if m else "") for label, v, m in figures]
        lines.append("")
    images = [o for o in shown if o.kind == "image"]
    if images:
        lines += ["## Charts", "", *[f"![{o.title}]({o.name}.png)" for o in images], ""]
    lines += ["## Results", ""]
    for o in shown:
        lines += [f"### {o.title}", "", f"{o.change} · {o.files}", ""]
        if o.frame is not None:
            t = shaped(o.frame, str(o.facts.get("covers") or ""))
            lines += ["| " + " | ".join(t.headers) + " |", "|" + "---|" * len(t.headers)]
            lines += ["| " + " | ".join(row) + " |" for row in t.rows]
            if t.total:
                lines.append("| " + " | ".join(f"**{v}**" if v else "" for v in t.total) + " |")
            if t.note:
                lines += ["", f"Shown: {t.note}; all of them in {o.name}.csv."]
            lines.append("")
    lines += ["## Audit trail", ""]
    lines += [f"- parameter {n} = {v!r}" for n, v in values.items()]
    for step in manifest.get("steps") or []:
        text = step.get("sql") or step.get("code") or step.get("metrics_query") or step.get("read") or ""
        lines += [f"- step {step.get('id')} ({step.get('tool')}):", "", "```", str(text), "```", ""]
        if step.get("tool") == "query_database" and (bound := statement_values(step, values)):
            lines += ["  with " + ", ".join(bound), ""]
    lines += [f"- {o.name}: sha256 {str(o.facts.get('sha256', ''))[:16]}… ({o.change})" for o in shown]
    return "\n".join(lines) + "\n"
