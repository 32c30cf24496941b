"""The business calendar a KPI is judged against: fiscal periods, public holidays, the business's own events.

Input (all optional but PROFILE): PROFILE from business-profile - its `fiscal_calendar` (kind 4-5-4 / 4-4-5 / 5-4-4 or
calendar-month, first_day, year_naming, 53_week_years; or a `periods` list of {start, end}) and `countries`; COUNTRY
("US" or ["DE", "FR", "GB"], the public holidays of every country the business sells in; SUBDIVISION for a state);
EVENTS - the business's own days: {"Summer sale": ["2024-07-10", "2025-07-09"], "Christmas shutdown":
["2024-12-24..2025-01-01"], "billing day": "monthly:1"} (a name with closure/shutdown/stocktake is a closure) or a
list / frame of rows {date or start/end or rule, name, kind (closure, campaign, billing, holiday), entity (a store's
own closure)}; rules: monthly:1, monthly:-1, quarter_end, fiscal_period_start, fiscal_period_end, fiscal_quarter_end;
SOURCE or START/END for the range. Run in run_python before scripts/kpi_anomalies.py.
Output: `business_calendar` (date, name, kind - public holiday, closure, campaign, billing, event, fiscal - entity),
`fiscal_periods` (start, end, n, year_start) and `assumed`.
"""

import re

import holidays
import numpy as np
import pandas as pd

PROFILE = globals().get("PROFILE") or {}
facts: list[str] = []


def warn(text: str) -> None:
    print("WARNING:", text)


# The range covers the series (SOURCE) and START..END when both are set: a START/END left in the session by another
# script's cell must not cut the calendar short (kpi_anomalies refuses a calendar that does not cover its series).
bounds = []
if globals().get("SOURCE"):
    source = load_artifact(SOURCE)  # noqa: F821 - run_python's helper
    column = globals().get("DATE")
    if column not in source.columns:
        column = next(c for c in source.columns if re.search(r"date|day|time|_at$", str(c), re.I))
    stamps = pd.to_datetime(source[column].astype(str).str[:10], format="mixed")
    bounds += [stamps.min(), stamps.max()]
if globals().get("START"):
    bounds += [pd.Timestamp(START), pd.Timestamp(globals().get("END") or START)]  # noqa: F821
if not bounds:
    raise ValueError("give SOURCE (the series' artifact) or START and END for the calendar's range")
low_all, high_all = min(bounds), max(bounds)
frame = pd.DataFrame({"date": [low_all, high_all]})
date = "date"
fiscal = dict(PROFILE.get("fiscal_calendar") or {})


def fiscal_periods() -> pd.DataFrame:
    """Fiscal periods (start, end, n, year_start): PROFILE's periods list, or its weeks (53rd in P12) or months."""
    listed = fiscal.get("periods")
    if isinstance(listed, list) and listed:
        p = pd.DataFrame(listed)
        p["start"], p["end"] = pd.to_datetime(p["start"]), pd.to_datetime(p["end"])
        p = p.sort_values("start").reset_index(drop=True)
        p["n"] = p.get("n", pd.Series((np.arange(len(p)) % 12) + 1))
        p["year_start"] = p.start.where(p.n == 1).ffill().fillna(p.start.iloc[0])
        return p[["start", "end", "n", "year_start"]]
    kind, first = str(fiscal.get("kind") or ""), fiscal.get("first_day")
    if not first:
        return pd.DataFrame(columns=["start", "end", "n", "year_start"])
    first = pd.Timestamp(first)
    low, high = frame[date].min() - pd.Timedelta(days=400), frame[date].max() + pd.Timedelta(days=400)
    rows = []
    if kind in ("4-5-4", "4-4-5", "5-4-4"):
        weeks = [int(w) for w in kind.split("-")] * 4
        long = {int(y) for y in fiscal.get("53_week_years") or []}
        by_end = fiscal.get("year_naming") == "end_year"

        def length(start: pd.Timestamp) -> int:
            label = (start + pd.Timedelta(weeks=52) - pd.Timedelta(days=1)).year if by_end else start.year
            return 53 if label in long else 52

        starts = [first]
        while starts[0] > low:
            back = starts[0] - pd.Timedelta(weeks=52)
            starts.insert(0, starts[0] - pd.Timedelta(weeks=length(back)))
        while starts[-1] < high:
            starts.append(starts[-1] + pd.Timedelta(weeks=length(starts[-1])))
        for year_start in starts:
            start, extra = year_start, length(year_start) - 52
            for n, w in enumerate(weeks, 1):
                end = start + pd.Timedelta(weeks=w + (extra if n == 12 else 0)) - pd.Timedelta(days=1)
                rows.append((start, end, n, year_start))
                start = end + pd.Timedelta(days=1)
    else:
        for start in pd.date_range(low.to_period("M").to_timestamp(), high, freq="MS"):
            n = (start.month - first.month) % 12 + 1
            year_start = pd.Timestamp(start.year if start.month >= first.month else start.year - 1, first.month, 1)
            rows.append((start, start + pd.offsets.MonthEnd(0), n, year_start))
    return pd.DataFrame(rows, columns=["start", "end", "n", "year_start"])


periods = fiscal_periods()
if fiscal and len(periods):
    naming = fiscal.get("year_naming") or "UNKNOWN naming"
    facts.append(
        f"fiscal calendar {fiscal.get('kind') or 'from its periods list'} from {fiscal.get('first_day') or periods.start.min().date()}"
        f" ({naming}, 53-week years {fiscal.get('53_week_years') or []}): fiscal-period starts and ends are terms of "
        "the model"
    )
else:
    warn("fiscal calendar UNKNOWN (run business-profile, pass PROFILE): fiscal-period starts/ends not modelled, only learned")
fiscal_days: dict[str, pd.DatetimeIndex] = {}
if len(periods):
    quarter_ends = periods.end[periods.n % 3 == 0]
    fiscal_days = {
        "fiscal period day 1": pd.DatetimeIndex(periods.start),
        "fiscal period day 2": pd.DatetimeIndex(periods.start + pd.Timedelta(days=1)),
        "fiscal period last day": pd.DatetimeIndex(periods.end),
        "fiscal quarter last day": pd.DatetimeIndex(quarter_ends),
        "fiscal year day 1": pd.DatetimeIndex(periods.start[periods.n == 1]),
    }


def expand_rule(rule: str, low: pd.Timestamp, high: pd.Timestamp) -> pd.DatetimeIndex:
    """Dates of monthly:1, monthly:-1, quarter_end, fiscal_period_start/_end, fiscal_quarter_end, a..b, a date."""
    months = pd.date_range(low.to_period("M").to_timestamp(), high, freq="MS")
    rule = rule.strip().lower()
    if rule.startswith("monthly:"):
        d = int(rule.split(":")[1])
        return pd.DatetimeIndex([m + pd.offsets.MonthEnd(0) if d < 0 else m + pd.Timedelta(days=d - 1) for m in months])
    if rule == "quarter_end":
        return pd.DatetimeIndex([m + pd.offsets.MonthEnd(0) for m in months if m.month % 3 == 0])
    named = {"fiscal_period_start": "fiscal period day 1", "fiscal_period_end": "fiscal period last day",
             "fiscal_quarter_end": "fiscal quarter last day"}
    if rule in named:
        if not fiscal_days:
            warn(f"event rule {rule} needs PROFILE['fiscal_calendar'], which is UNKNOWN: ignored")
            return pd.DatetimeIndex([])
        return fiscal_days[named[rule]]
    if ".." in rule:
        a, b = rule.split("..")
        return pd.date_range(a.strip(), b.strip(), freq="D")
    return pd.DatetimeIndex([pd.Timestamp(rule)])


given_events = globals().get("EVENTS")
event_rows = []
low_all, high_all = frame[date].min(), frame[date].max()
if isinstance(given_events, dict):
    for name, when in given_events.items():
        for item in [when] if isinstance(when, str) else list(when):
            kind = "closure" if re.search(r"clos|shutdown|stocktake", str(name), re.I) else "event"
            event_rows += [(d, str(name), kind, None) for d in expand_rule(str(item), low_all, high_all)]
elif given_events is not None:
    for row in pd.DataFrame(given_events).to_dict("records"):
        name = str(row.get("name") or row.get("event") or "event")
        spec = row.get("date") or row.get("rule") or f"{row.get('start')}..{row.get('end') or row.get('start')}"
        kind = str(row.get("kind") or "event").lower()
        who = row.get("entity")
        who = None if who is None or (isinstance(who, float) and np.isnan(who)) or who == "" else str(who)
        event_rows += [(d, name, kind, who) for d in expand_rule(str(spec)[:21] if "T" in str(spec) else str(spec),
                                                                  low_all, high_all)]
events = pd.DataFrame(event_rows, columns=["date", "name", "kind", "entity"])
events["date"] = pd.to_datetime(events["date"])
country_given = globals().get("COUNTRY") or PROFILE.get("countries") or "US"
countries = [country_given] if isinstance(country_given, str) else [str(c) for c in country_given]
subdivision = globals().get("SUBDIVISION")
public_names: set[str] = set()
public_rows = []
for code in countries:
    years = range(low_all.year, high_all.year + 1)
    law = holidays.country_holidays(code, subdiv=subdivision if code == countries[0] else None, years=years)
    for d, n in law.items():
        name = f"{code}: {n}" if len(countries) > 1 else str(n)
        public_names.add(name)
        public_rows.append((pd.Timestamp(d), name))
facts.append(f"public holidays of {', '.join(countries)}")
if len(events):
    kinds = events.groupby("kind").name.nunique()
    facts.append("business events: " + ", ".join(f"{k} {v}" for k, v in kinds.items()))




business_calendar = pd.concat(
    [
        pd.DataFrame([(d, n, "public holiday", None) for d, n in public_rows], columns=["date", "name", "kind", "entity"]),
        events,
        pd.DataFrame([(d, n, "fiscal", None) for n, w in fiscal_days.items() for d in w], columns=["date", "name", "kind", "entity"]),
    ]
)
business_calendar = business_calendar[(business_calendar.date >= low_all - pd.Timedelta(days=7))
                                      & (business_calendar.date <= high_all + pd.Timedelta(days=7))]
business_calendar = business_calendar.sort_values("date").reset_index(drop=True)
business_calendar.attrs = {"facts": facts, "range": (f"{low_all:%Y-%m-%d}", f"{high_all:%Y-%m-%d}"), "countries": ", ".join(countries),
                           "fiscal_kind": ("weeks " if str(fiscal.get("kind")).count("-") == 2 else "") + str(fiscal.get("kind"))}
fiscal_periods = periods
assumed = "Assumed: " + "; ".join(facts)
print(assumed)
print(business_calendar.groupby("kind").name.agg(["count", "nunique"]).to_string())
business_calendar
