"""The business facts that change which method is right, read from a business's own exports.

Input: SOURCES, the exports to read — {"name": "upload_…" or "artifact_…" or a DataFrame, …} (a list of ids works
too); FACTS (optional), what the user has told you, which wins over anything read here — e.g.
{"fiscal_calendar": {"kind": "4-5-4", "year_naming": "start_year"}, "reporting_currency": "USD",
"store_timezone": "America/New_York", "randomisation_unit": "account_id"}.
Run in run_python as:  SOURCES = {...}  then this script.
What it reads, per export: the grain and layout (one row per line or per order, order-level fields filled on an
order's first line only), timestamps (UTC offsets, Unix seconds, day-first dates), numbers written with decimal
commas, amounts against rates, currencies, contract states (active, paused, skipped, dunning, cancelled), the
unit an experiment was randomised by (the coarsest id its variant never changes within), marketplace fees, and a
fiscal calendar from a plan's own period boundaries (4-5-4 / 4-4-5 / 5-4-4, 53-week years, how years are named).
Output: `profile` (the cell's value: one row per fact — fact, value, evidence, source: data / user / UNKNOWN),
`PROFILE` (the facts as a dict, to hand to every method script: `PROFILE = {...}` before it), `files` (one row
per export: rows, grain, layout, timestamps, amounts, currencies), and `questions` — the facts nobody established,
to ask the user before any method runs. A fact read from the data is a guess with its evidence; one the user gave
is the truth, and a contradiction between them is printed.
"""

import re

import pandas as pd

CONTRACT_STATES = {
    "active": "active",
    "trialing": "trial",
    "trial": "trial",
    "paused": "paused",
    "pause": "paused",
    "skipped": "skipped",
    "skip": "skipped",
    "past_due": "dunning",
    "unpaid": "dunning",
    "dunning": "dunning",
    "error": "dunning",
    "failed": "dunning",
    "cancelled": "cancelled",
    "canceled": "cancelled",
    "expired": "cancelled",
    "churned": "cancelled",
}
CURRENCIES = {"USD", "EUR", "GBP", "CAD", "AUD", "JPY", "CHF", "SEK", "NOK", "DKK", "PLN", "NZD", "MXN", "BRL", "INR"}
_OFFSET = re.compile(r"(?:[+-]\d{2}:?\d{2}|Z)$")
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
_DAYFIRST = re.compile(r"^\d{1,2}\.\d{1,2}\.\d{4}")
_DECIMAL_COMMA = re.compile(r"^-?\d{1,3}(?:\.\d{3})*,\d+$|^-?\d+,\d+$")
_ID = re.compile(r"(^|_|\b)(id|number|no|nr|key)$|_id$|^id_|order.?id|customer|account|workspace|profile", re.I)
_FEE = re.compile(r"\bfees?\b|commission|referral|fba|fulfil+ment fee|payment processing", re.I)
_LINE_KEY = re.compile(r"order|trans|invoice|document|receipt|ticket|charge|bill", re.I)
_VARIANT = re.compile(
    r"^(variant|arm|group|bucket|treatment|cohort_variant|experiment_group)([ _-]?(key|name|id))?$", re.I
)
_RATE = re.compile(r"rate|pct|percent|share|ratio", re.I)
_AMOUNT = re.compile(r"amount|price|total|revenue|sales|cost|fee|discount|net|gross|value", re.I)


def _read(ref):
    """A file as written: every cell text, nothing parsed away; a workbook's sheets each with its header row found
    (a title and notes above the header are common in plans). {name suffix: DataFrame}."""
    if isinstance(ref, pd.DataFrame):
        return {"": ref}
    if str(ref).startswith("artifact_"):
        return {"": load_artifact(ref)}  # noqa: F821 - run_python's helper
    attempts = (
        {"dtype": str, "keep_default_na": False, "sep": None, "engine": "python"},  # CSV/TSV, any separator
        {"dtype": str, "keep_default_na": False, "sep": None, "engine": "python", "encoding": "cp1252"},  # ERP files
        {"sheet_name": None, "header": None, "dtype": str},  # a workbook, every sheet
        {"dtype": False},  # JSON
        {"dtype": False, "lines": True},  # JSON lines named .json
        {},
    )
    for options in attempts:
        try:
            read = load_file(ref, **options)  # noqa: F821 - run_python's helper
        except (TypeError, ValueError, UnicodeDecodeError):
            continue
        if isinstance(read, dict):
            return {f"[{sheet}]": _headed(frame) for sheet, frame in read.items()}
        return {"": read.astype(str).replace({"nan": "", "None": ""}) if "dtype" in options else read}
    raise ValueError(f"{ref}: not a table file load_file can read")


def _headed(frame):
    """A sheet read without a header: the header is the first row most of whose cells are filled."""
    frame = frame.fillna("")
    width = frame.shape[1]
    for i in range(min(len(frame), 20)):
        row = frame.iloc[i].astype(str).str.strip()
        if (row != "").sum() >= max(2, 0.6 * width):
            body = frame.iloc[i + 1 :].reset_index(drop=True)
            body.columns = [c or f"column{j}" for j, c in enumerate(row)]
            body.attrs["title"] = " ".join(frame.iloc[:i].astype(str).agg(" ".join, axis=1)).strip()
            return body
    return frame


def _sources(given):
    items = given.items() if isinstance(given, dict) else ((str(x), x) for x in given)
    out = {}
    for name, ref in items:
        for suffix, frame in _read(ref).items():
            out[name + suffix] = frame
    return out


def _text(col):
    return col.astype(str).str.strip().replace({"nan": "", "None": "", "NaT": ""})


def _timestamps(name, col):
    """What a column of times looks like: UTC offsets (how many distinct), Unix seconds, day-first dates."""
    text = _text(col)
    filled = text[text != ""]
    if filled.empty:
        return None
    head = filled.head(2000)
    if head.str.match(_ISO).mean() > 0.9:
        offsets = head.str.extract(r"([+-]\d{2}:?\d{2}|Z)$")[0].dropna()
        if len(offsets) > 0.9 * len(head):
            return {"kind": "ISO with UTC offset", "offsets": sorted(offsets.unique().tolist())[:6]}
        return {"kind": "ISO without offset (local time: ask for the time zone)", "offsets": []}
    if head.str.match(_DAYFIRST).mean() > 0.9:
        return {"kind": "day-first (DD.MM.YYYY)", "offsets": []}
    if re.search(r"(_at|date|time|period_start|period_end|created|timestamp)$", name, re.I):
        numbers = pd.to_numeric(head, errors="coerce")
        if numbers.notna().mean() > 0.9 and numbers.between(9e8, 2.2e9).mean() > 0.9:
            return {"kind": "Unix seconds (UTC)", "offsets": ["+00:00"]}
        if numbers.notna().mean() > 0.9 and numbers.between(9e11, 2.2e12).mean() > 0.9:
            return {"kind": "Unix milliseconds (UTC)", "offsets": ["+00:00"]}
    return None


def _numbers(col):
    """(values, written with decimal commas?) for a column of numbers, else (None, False)."""
    text = _text(col)
    filled = text[text != ""]
    if filled.empty:
        return None, False
    plain = pd.to_numeric(filled.str.replace(r"^[^\d\-+.,]+|[^\d.,]+$", "", regex=True), errors="coerce")
    comma = filled.str.match(_DECIMAL_COMMA).mean() > 0.5 and plain.isna().mean() > 0.3
    if comma:
        values = pd.to_numeric(filled.str.replace(".", "", regex=False).str.replace(",", ".", regex=False), "coerce")
        return values, True
    if plain.notna().mean() > 0.95:
        return plain, False
    return None, False


def _layout(frame):
    """One row per line or per order: a key repeated on consecutive rows whose other columns are filled on the
    key's first row only (Shopify's order fields), or a key named for orders or documents that repeats."""
    if len(frame) < 2:
        return {"grain": "one row per record", "key": None, "first_line_only": []}
    best = None
    for key in frame.columns[:60]:
        values = frame[key].astype(str).str.strip()
        if values.eq("").any() or values.is_unique:
            continue
        runs = values.ne(values.shift()).sum()  # a line layout keeps an order's lines together
        if runs > 0.8 * values.nunique() * 1.05 + 1 and runs != values.nunique():
            continue
        multi = values.isin(values.value_counts()[lambda c: c > 1].index)
        rows = frame[multi]
        first = ~values[multi].duplicated()
        blank_later = []
        for c in frame.columns:
            if c == key:
                continue
            text = _text(rows[c])
            if (text[first] != "").mean() > 0.9 and (text[~first] != "").mean() < 0.1:
                blank_later.append(str(c))
        named = bool(_LINE_KEY.search(str(key)))
        if not blank_later and not named:
            continue
        score = (len(blank_later), named)
        if best is None or score > best[0]:
            best = (
                score,
                {
                    "key": str(key),
                    "rows_per_key": round(len(values) / values.nunique(), 2),
                    "first_line_only": blank_later,
                },
            )
    if best is None:
        return {"grain": "one row per record", "key": None, "first_line_only": []}
    return {"grain": f"line (several rows per {best[1]['key']})", **best[1]}


def _contract_states(frame):
    found = {}
    for c in frame.columns:
        if not re.search(r"status|state", str(c), re.I):
            continue
        values = _text(frame[c]).str.lower().str.replace(" ", "_")
        states = {CONTRACT_STATES[v] for v in values.unique() if v in CONTRACT_STATES}
        if (len(states) >= 2 and "cancelled" in states) or {"active", "paused"} <= states:
            found[str(c)] = sorted(states)
    return found


def _randomisation(frame):
    """The unit an experiment was randomised by: the coarsest id within which the variant never changes."""
    variant = next((c for c in frame.columns if _VARIANT.match(str(c).strip())), None)
    if variant is None:
        return None
    ids = [c for c in frame.columns if c != variant and _ID.search(str(c))]
    row_unit = next((c for c in ids if frame[c].is_unique), None)
    units = []
    for c in ids:
        if frame[c].is_unique:
            continue
        constant = frame.groupby(c)[variant].nunique()
        if (constant <= 1).mean() >= 0.995 and frame[c].nunique() < len(frame):
            units.append((frame[c].nunique(), str(c)))
    unit = min(units)[1] if units else row_unit
    per_unit = round(len(frame) / frame[unit].nunique(), 2) if unit is not None else None
    return {
        "variant_column": str(variant),
        "row_unit": row_unit,
        "randomisation_unit": unit,
        "rows_per_unit": per_unit,
    }


def _fy_label(text):
    found = re.search(r"\bFY\s?'?(\d{4}|\d{2})\b", text or "", re.I)
    return int(found.group(1)) if found else None


def _year_naming(label, first_day):
    """How years are named, from a label (FY2024) and the first day of that year."""
    if label is None or first_day is None:
        return None
    if label % 100 == first_day.year % 100:
        return "start_year"
    if label % 100 == (first_day.year + 1) % 100:
        return "end_year"
    return None


def _weeks_pattern(weeks):
    head = "-".join(str(int(w)) for w in weeks[:3])
    return head if head in ("4-5-4", "4-4-5", "5-4-4") else None


def _fiscal(name, frame):
    """A fiscal calendar from a plan's own periods: their start and end dates, or their lengths in weeks."""
    cols = {str(c): c for c in frame.columns}
    start = next((c for k, c in cols.items() if re.search(r"start|begin|from", k, re.I)), None)
    end = next((c for k, c in cols.items() if re.search(r"\bend|_end|to$|until", k, re.I)), None)
    weeks = next((c for k, c in cols.items() if re.fullmatch(r"\s*(weeks?|# ?weeks|wks)\s*", k, re.I)), None)
    period = next((c for k, c in cols.items() if re.search(r"period|month|fiscal|^p$", k, re.I)), None)
    label = _fy_label(name) or _fy_label(frame.attrs.get("title", ""))
    if start is not None and end is not None and period is not None:
        s = pd.to_datetime(_text(frame[start]), errors="coerce")
        e = pd.to_datetime(_text(frame[end]), errors="coerce")
        periods = pd.DataFrame({"name": _text(frame[period]), "start": s, "end": e}).dropna()
        periods = periods.drop_duplicates(["start", "end"]).sort_values("start")
        if len(periods) >= 3:
            days = ((periods["end"] - periods["start"]).dt.days + 1).tolist()
            if all(27 <= d <= 31 for d in days):
                kind = "calendar-month"
            else:
                kind = _weeks_pattern([round(d / 7) for d in days]) or "weeks " + "-".join(
                    str(round(d / 7)) for d in days[:3]
                )
            first = periods["start"].iloc[0]
            label = label or _fy_label(periods["name"].iloc[0])
            years = [periods.iloc[i : i + 12] for i in range(0, len(periods), 12)]
            long_years = [
                str(y["start"].iloc[0].date())
                for y in years
                if len(y) == 12 and ((y["end"].iloc[-1] - y["start"].iloc[0]).days + 1) == 371
            ]
            return {
                "kind": kind,
                "first_day": str(first.date()),
                "year_naming": _year_naming(label, first),
                "53_week_years": long_years,
                "periods": len(periods),
                "last_period_end": str(periods["end"].iloc[-1].date()),
            }
    if weeks is not None and period is not None:
        table = pd.DataFrame({"period": _text(frame[period]), "weeks": pd.to_numeric(_text(frame[weeks]), "coerce")})
        table = table.dropna().drop_duplicates("period")
        if len(table) >= 3 and table["weeks"].isin([4, 5]).all():
            total = int(table["weeks"].sum())
            return {
                "kind": _weeks_pattern(table["weeks"].tolist()) or "weeks",
                "first_day": None,
                "year_naming": None,
                "fy_label": label,
                "53_week_years": [label] if total == 53 and label else [],
                "weeks_in_year": total,
                "periods": len(table),
            }
    return None


files, facts, evidence, one_off = [], {}, {}, []
_ONE_OFF = re.compile(r"order|line[ _-]?item", re.I)
_CONTRACT = re.compile(r"subscription|contract|^plan$|plan[ _-]?id", re.I)


def note(fact, value, why):
    if fact not in facts:
        facts[fact], evidence[fact] = value, why


sources = _sources(SOURCES)  # noqa: F821 - SOURCES comes from the cell
currencies_seen = set()
for name, frame in sources.items():
    frame = frame.copy()
    frame.columns = [str(c) for c in frame.columns]
    layout = _layout(frame)
    times = {}
    amounts, rates, comma = [], [], []
    for c in frame.columns:
        t = _timestamps(c, frame[c])
        if t is not None:
            times[c] = t
            continue
        values, with_comma = _numbers(frame[c])
        if values is not None:
            if with_comma:
                comma.append(c)
            if _RATE.search(c) or (re.search(r"discount", c, re.I) and values.between(0, 1).all()):
                rates.append(c)
            elif _AMOUNT.search(c):
                amounts.append(c)
        text = _text(frame[c])
        upper = set(text.str.upper().unique()) & CURRENCIES
        if upper and (re.search(r"currency|curr|ccy", c, re.I) or len(upper) >= 2):
            currencies_seen |= upper
    states = _contract_states(frame)
    if states:
        note("contractual", True, f"{name}: " + "; ".join(f"{c} holds {', '.join(s)}" for c, s in states.items()))
    elif any(_ONE_OFF.search(c) for c in frame.columns) and not any(_CONTRACT.search(c) for c in frame.columns):
        one_off.append(name)  # orders or order lines tied to no subscription: a stream of one-off purchases
    split = _randomisation(frame)
    if split is not None and split["randomisation_unit"]:
        note(
            "randomisation_unit",
            split["randomisation_unit"],
            f"{name}: {split['variant_column']} never changes within {split['randomisation_unit']} "
            f"({split['rows_per_unit']} rows each; one row per {split['row_unit'] or 'row'})",
        )
        note("analysis_row_unit", split["row_unit"], f"{name}: unique per row")
    fees = [c for c in frame.columns if _text(frame[c]).str.contains(_FEE).mean() > 0.05]
    if fees:
        kinds = sorted({v for c in fees for v in _text(frame[c]).unique() if _FEE.search(v)})[:8]
        note("marketplace_fees", kinds, f"{name}: {', '.join(fees)} name fees")
    calendar = _fiscal(name, frame)
    if calendar is not None:
        known = facts.get("fiscal_calendar")
        if known is not None and known.get("53_week_years") is not None and calendar.get("fy_label"):
            known["53_week_years"] = sorted(set(known["53_week_years"]) | set(calendar["53_week_years"]))
        note("fiscal_calendar", calendar, f"{name}: {calendar['periods']} periods of the plan's own")
    offsets = sorted({o for t in times.values() for o in t["offsets"]})
    if len(offsets) > 1:
        note("utc_offsets", offsets, f"{name}: timestamps carry {len(offsets)} UTC offsets (parse with utc=True)")
    if any("without offset" in t["kind"] for t in times.values()):
        note("store_timezone", None, f"{name}: local times without an offset")
    files.append(
        {
            "file": name,
            "rows": len(frame),
            "grain": layout["grain"],
            "first_line_only": ", ".join(layout["first_line_only"]),
            "timestamps": "; ".join(f"{c}: {t['kind']}" for c, t in times.items()),
            "amounts": ", ".join(amounts),
            "rates": ", ".join(rates),
            "decimal_comma": ", ".join(comma),
        }
    )

if currencies_seen:
    note("currencies", sorted(currencies_seen), "currency codes in the exports")
if facts.get("contractual") is True and one_off:
    facts["contractual"] = "mixed"
    evidence["contractual"] += f"; and {', '.join(one_off)} hold orders tied to no subscription (one-off purchases)"
note("contractual", False, "no status column holds contract states (active, paused, cancelled …)")

given = dict(globals().get("FACTS") or {})
PROFILE = {**facts}
contradictions = []
for fact, value in given.items():
    read = facts.get(fact)
    if read not in (None, value) and not isinstance(value, dict):
        contradictions.append(f"{fact}: the user says {value!r}, the data reads {read!r} ({evidence.get(fact)})")
    if isinstance(value, dict) and isinstance(read, dict):
        PROFILE[fact] = {**read, **value}
    else:
        PROFILE[fact] = value

NEEDED = {
    "contractual": "are customers on contracts or subscriptions (renewals, pauses, cancellations)?",
    "fiscal_calendar": "the fiscal calendar: calendar months or 4-5-4 / 4-4-5 / 5-4-4, its first day, and is FY named "
    "by the year it starts or ends?",
    "reporting_currency": "which currency do you report in, and which FX rates (a file, monthly average)?",
    "store_timezone": "the time zone the business counts its days in",
    "randomisation_unit": "what was randomised in each experiment (visitor, account, store)?",
}
questions = []
for fact, ask in NEEDED.items():
    value = PROFILE.get(fact)
    if fact == "reporting_currency" and len(PROFILE.get("currencies") or []) <= 1:
        continue
    if fact == "randomisation_unit" and not any("variant" in str(f).lower() for f in sources) and value is None:
        continue
    if fact == "store_timezone" and "store_timezone" not in facts and "store_timezone" not in given:
        continue
    if value is None or (isinstance(value, dict) and value.get("year_naming") is None):
        questions.append(ask)

profile = pd.DataFrame(
    [
        {
            "fact": f,
            "value": str(v),
            "evidence": "the user" if f in given else evidence.get(f, ""),
            "source": "user" if f in given else ("UNKNOWN" if v is None else "data"),
        }
        for f, v in PROFILE.items()
    ]
)
files = pd.DataFrame(files)
print(files.to_string(index=False))
print("PROFILE =", {k: v for k, v in PROFILE.items()})
for line in contradictions:  # last: what the user must see
    print("CONTRADICTION:", line)
for ask in questions:
    print("ASK THE USER:", ask)
profile  # noqa: B018 - the cell's value
