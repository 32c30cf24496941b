"""Periods of the business's own calendar from rows per day or event: complete or not, one currency, artefacts out.

Input: SOURCE (artifact, upload or DataFrame) with a date column (DATE names it, else `date`/`month`/`week`/`period`,
else the first) and a value column (VALUE, else `value`, else the second): one row per day or per event (dates, or
timestamps with UTC offsets: converted to PROFILE['store_timezone'] before a day is taken). PROFILE (business-profile):
`fiscal_calendar` {kind 4-5-4/4-4-5/5-4-4/calendar-month, first_day, year_naming, 53_week_years}, `store_timezone`,
`reporting_currency`. Optional: GRAIN ("month"; "week": fiscal weeks from first_day's weekday; "fiscal_period": 4-5-4
periods, per week), DATA_START / DATA_END (the days the export covers; else its first and last date), EXCLUDE
({"2025-02-20": "SCIM sync"}: artefact days, replaced by the mean of the days around them), FX ({currency: units per
1 reporting currency}) when a `currency` column holds several (refused without it).
Output: `periods` (the cell's value: period, start, end, days, days_in_period, complete, weeks, value, per_week,
yoy_pct, flag, note, grain - a partial first or last period flagged `partial` with its days, never forecast from; a
53-week year's P12 / W53 flagged `53-week` and compared per week), `ahead` (the next periods after the last complete
one: period, start, end, weeks), `assumed` (printed `Assumed: …`). Then run forecast.py with SOURCE = periods.
"""

import re

import numpy as np
import pandas as pd

PROFILE = globals().get("PROFILE") or {}
assumed = []
WEEK_KINDS = {"4-5-4": [4, 5, 4], "4-4-5": [4, 4, 5], "5-4-4": [5, 4, 4]}


class Refused(Exception):
    pass


def refuse(why):
    raise Refused("REFUSED: " + why)


def _load(ref):
    if isinstance(ref, pd.DataFrame):
        return ref.copy()
    if str(ref).startswith("artifact_"):
        return load_artifact(ref)  # noqa: F821 - run_python's helper
    return load_file(ref)  # noqa: F821 - an upload


# ------------------------------------------------------------------------------------------------ the input
data = _load(SOURCE)  # noqa: F821 - SOURCE comes from the cell
cols = [str(c) for c in data.columns]
data.columns = cols
named = {k: globals().get(k) for k in ("DATE", "VALUE")}
for k, given in named.items():
    if given is not None and str(given) not in cols:
        print(f"WARNING: {k} = {given!r} is not a column of SOURCE (left from another cell?): ignored")
        named[k] = None
date_column = named["DATE"] or next((c for c in ("month", "date", "week", "period") if c in cols), cols[0])
value_column = named["VALUE"] or ("value" if "value" in cols else next(c for c in cols if c != date_column))
cal = dict(PROFILE.get("fiscal_calendar") or {})
kind = cal.get("kind")
grain = globals().get("GRAIN") or ("week" if kind in WEEK_KINDS else "month")
if grain not in ("month", "week", "fiscal_period"):
    refuse(f"GRAIN = {grain!r}: month, week or fiscal_period")

# timestamps: UTC offsets converted to the store's time zone before a date is taken
raw_dates = data[date_column]
text = raw_dates.astype(str).str.strip()
has_offset = text.str.contains(r"(?:[+-]\d{2}:?\d{2}|Z)$", regex=True).mean() > 0.5 and text.str.len().max() > 10
tz = PROFILE.get("store_timezone") or globals().get("TIMEZONE")
if has_offset:
    if tz:
        dates = pd.to_datetime(text, utc=True, format="mixed").dt.tz_convert(tz).dt.tz_localize(None)
        assumed.append(f"timestamps with UTC offsets converted to {tz} before a day is taken")
    else:
        wall = text.str.replace(r"\s*(?:[+-]\d{2}:?\d{2}|Z)$", "", regex=True)
        dates = pd.to_datetime(wall, format="mixed")
        assumed.append("timestamps taken at their own local clock (store_timezone unknown)")
        print(
            "WARNING: the timestamps carry UTC offsets and PROFILE['store_timezone'] is unknown: each is dated "
            "by its own local clock as written; give store_timezone to count days in the store's zone"
        )
elif pd.api.types.is_datetime64_any_dtype(raw_dates):
    dates = pd.to_datetime(raw_dates)
    if getattr(dates.dt, "tz", None) is not None:
        dates = dates.dt.tz_convert(tz or "UTC").dt.tz_localize(None)
else:
    dates = pd.to_datetime(text, format="mixed")
values = pd.to_numeric(data[value_column], errors="coerce")

# currencies: a sum over several currencies means nothing until converted
currency_column = next((c for c in cols if re.fullmatch(r"(?i)currency|currency_code|ccy", c)), None)
if currency_column is not None and data[currency_column].nunique() > 1:
    fx = globals().get("FX") or PROFILE.get("fx")
    seen = sorted(data[currency_column].astype(str).unique())
    reporting = PROFILE.get("reporting_currency")
    if not isinstance(fx, dict) or not reporting:
        refuse(
            f"the value column mixes currencies ({', '.join(seen)}): give PROFILE['reporting_currency'] and FX "
            "({currency: units per 1 reporting currency}), or convert in the query first"
        )
    rates = data[currency_column].astype(str).map(lambda c: 1.0 if c == reporting else fx.get(c))
    if rates.isna().any():
        refuse(f"no FX rate for {sorted(set(data[currency_column][rates.isna()].astype(str)))}")
    values = values / rates.astype(float)
    assumed.append(f"{', '.join(seen)} converted to {reporting} at FX {fx}")
elif currency_column is not None:
    assumed.append(f"one currency: {data[currency_column].iloc[0]}")

frame = pd.DataFrame({"date": dates.dt.normalize(), "value": values}).dropna(subset=["date"])
if frame.value.isna().any():
    refuse(f"{int(frame.value.isna().sum())} values of {value_column!r} are not numbers")
# per-period input: one row per date, every date a period start (month starts for months)
per_date = frame.groupby("date").value.sum()
month_starts = bool((per_date.index.day == 1).all())
gaps = np.diff(per_date.index.values).astype("timedelta64[D]").astype(int) if len(per_date) > 1 else np.array([])
aggregated = bool(frame.date.is_unique) and (
    (grain == "month" and month_starts and len(gaps) and gaps.min() >= 28)
    or (grain == "week" and len(gaps) and set(gaps) == {7})
)


# ------------------------------------------------------------------------------------------------ the calendar
def fiscal_years(first_date, last_date):
    """[(label, start, weeks)] covering the dates, from the calendar's first day and its 53-week years."""
    if not cal.get("first_day"):
        refuse(
            f"PROFILE['fiscal_calendar'] is {kind} but its first_day is unknown: the fiscal weeks cannot be cut "
            "(their weekday and the year's start). Give it (business-profile FACTS)."
        )
    naming = cal.get("year_naming")
    if naming not in ("start_year", "end_year"):
        assumed.append("fiscal years named by their start year (year_naming unknown)")
        print("WARNING: PROFILE['fiscal_calendar']['year_naming'] unknown: years named by the year they start in")
    long_years = cal.get("53_week_years")
    if long_years is None:
        print("WARNING: PROFILE['fiscal_calendar']['53_week_years'] unknown: no 53-week year assumed")
        long_years = []
    marks = {str(x) for x in long_years}

    def label(start):
        return start.year + (1 if naming == "end_year" else 0)

    def weeks(start):
        return 53 if (str(start.date()) in marks or str(label(start)) in marks) else 52

    start = pd.Timestamp(cal["first_day"])
    while start > first_date:
        start = start - pd.Timedelta(weeks=52)
        if weeks(start) == 53:
            start = start - pd.Timedelta(weeks=1)
    years = []
    while start <= last_date:
        years.append((label(start), start, weeks(start)))
        start = start + pd.Timedelta(weeks=weeks(start))
    return years


def calendar(first_date, last_date):
    """The periods covering the dates: label, start, end (inclusive), weeks (week calendars)."""
    rows = []
    if grain == "month":
        for p in pd.period_range(first_date.to_period("M"), last_date.to_period("M"), freq="M"):
            rows.append((f"{p.start_time:%Y-%m}", p.start_time, p.end_time.normalize(), np.nan))
        return pd.DataFrame(rows, columns=["period", "start", "end", "weeks"])
    if kind not in WEEK_KINDS:
        if grain == "fiscal_period":
            refuse(f"GRAIN = 'fiscal_period' needs a 4-5-4 / 4-4-5 / 5-4-4 fiscal_calendar (PROFILE says {kind!r})")
        weekday = int(globals().get("WEEK_START", 0))
        assumed.append(f"weeks start on weekday {weekday} (0 = Monday): no week calendar in PROFILE")
        print(f"WARNING: no fiscal week calendar in PROFILE: weeks start on weekday {weekday} (WEEK_START, 0 = Monday)")
        start = first_date - pd.Timedelta(days=(first_date.weekday() - weekday) % 7)
        while start <= last_date:
            rows.append((f"week of {start:%Y-%m-%d}", start, start + pd.Timedelta(days=6), 1.0))
            start += pd.Timedelta(weeks=1)
        return pd.DataFrame(rows, columns=["period", "start", "end", "weeks"])
    for fy, start, n in fiscal_years(first_date, last_date):
        if grain == "week":
            for w in range(n):
                s = start + pd.Timedelta(weeks=w)
                rows.append((f"FY{fy} W{w + 1:02d}", s, s + pd.Timedelta(days=6), 1.0))
        else:
            lengths = WEEK_KINDS[kind] * 4
            lengths[-1] += n - 52  # the 53rd week goes into P12
            s = start
            for p, length in enumerate(lengths):
                rows.append((f"FY{fy} P{p + 1:02d}", s, s + pd.Timedelta(weeks=length) - pd.Timedelta(days=1), length))
                s += pd.Timedelta(weeks=length)
    return pd.DataFrame(rows, columns=["period", "start", "end", "weeks"])


if aggregated:
    first_date, last_date = per_date.index[0], per_date.index[-1]
else:
    first_date = pd.Timestamp(globals().get("DATA_START") or per_date.index[0])
    last_date = pd.Timestamp(globals().get("DATA_END") or per_date.index[-1])
    if not globals().get("DATA_END") and len(gaps) and (gaps % 7 == 0).all():  # rows per week: the last covers 7 days
        last_date = last_date + pd.Timedelta(days=6)
    if not globals().get("DATA_END"):
        assumed.append(f"the data ends on its last dated row, {last_date:%Y-%m-%d} (DATA_END not given)")
table = calendar(first_date, last_date)
table = table[(table.end >= first_date) & (table.start <= last_date)].reset_index(drop=True)

# known artefact days (a sync glitch, a double load): replaced by the mean of the days around them
excluded = {pd.Timestamp(k): v for k, v in (globals().get("EXCLUDE") or {}).items()}
daily = per_date.copy()
if excluded and not aggregated:
    full = daily.reindex(pd.date_range(first_date, last_date, freq="D"), fill_value=0.0)
    for day, why in excluded.items():
        around = full[(full.index >= day - pd.Timedelta(days=7)) & (full.index <= day + pd.Timedelta(days=7))]
        around = around[~around.index.isin(list(excluded))]
        print(f"excluded {day:%Y-%m-%d} ({why}): {full.get(day, 0):,.0f} replaced by {around.mean():,.1f}")
        full[day] = around.mean()
    daily = full
    assumed.append("artefact days excluded: " + ", ".join(f"{d:%Y-%m-%d} ({w})" for d, w in excluded.items()))

if aggregated:
    table["value"] = per_date.reindex(table.start).to_numpy()
    table["days"] = np.nan
    data_end = globals().get("DATA_END")
    length = (table.end - table.start).dt.days + 1
    table["days"] = length
    if data_end:
        table["days"] = np.clip((pd.Timestamp(data_end) - table.start).dt.days + 1, 0, length)
    table["complete"] = table.days >= length
    if table.value.isna().any():
        refuse(f"periods missing from the series: {', '.join(table.period[table.value.isna()])} - fill or explain them")
else:
    where = np.searchsorted(table.start.values, daily.index.values, side="right") - 1
    table["value"] = pd.Series(daily.values).groupby(where).sum().reindex(range(len(table)), fill_value=0.0).values
    observed_start = table.start.where(table.start >= first_date, first_date)
    observed_end = table.end.where(table.end <= last_date, last_date)
    table["days"] = (observed_end - observed_start).dt.days + 1
    table["complete"] = table.days == (table.end - table.start).dt.days + 1
table["days_in_period"] = (table.end - table.start).dt.days + 1
table["flag"], table["note"] = "", ""
for i in table.index[~table.complete]:
    table.loc[i, "flag"] = "partial"
    table.loc[i, "note"] = (
        f"{table.days[i]:.0f} of {table.days_in_period[i]} days ({100 * table.days[i] / table.days_in_period[i]:.0f} "
        "% elapsed): dropped, not forecast from"
    )
    print(
        f"PARTIAL PERIOD dropped: {table.period[i]} ({table.start[i]:%Y-%m-%d}..{table.end[i]:%Y-%m-%d}) "
        f"has {table.days[i]:.0f} of {table.days_in_period[i]} days - not a drop in demand, not forecast from"
    )
if aggregated and not globals().get("DATA_END") and len(table) >= 7:
    recent = table.value.iloc[-7:-1].median()
    if table.value.iloc[-1] < 0.6 * recent:
        print(
            f"WARNING: the last period ({table.period.iloc[-1]}) is {100 * table.value.iloc[-1] / recent:.0f} % of "
            "the six before it: if it is not complete, pass DATA_END (the last day the data covers) or drop it"
        )
complete = table[table.complete]
if complete.index.size and (complete.index.to_numpy() != np.arange(complete.index[0], complete.index[-1] + 1)).any():
    refuse("an incomplete period in the middle of the history: the export has a gap (DATA_START/DATA_END?)")
per_week = grain == "fiscal_period"  # periods of 4 and 5 weeks (and a 53-week P12): forecast per week
if per_week:
    table["per_week"] = table.value / table.weeks
    assumed.append(f"{kind} fiscal periods forecast per week and restated to their own weeks (53-week P12: 5)")
else:
    table["per_week"] = np.nan
for i in table.index[table.weeks.eq(5) & table.period.str.endswith("P12")] if per_week else []:
    if i - 12 in table.index or i + 12 in table.index:
        table.loc[i, "flag"] = (table.flag[i] + " 53-week").strip()
        table.loc[i, "note"] += "5-week P12 (53-week year): compared per week, not in total"
if grain == "week" and kind in WEEK_KINDS:
    for i in table.index[table.period.str.endswith("W53")]:
        table.loc[i, "flag"] = (table.flag[i] + " 53-week").strip()
        table.loc[i, "note"] += "the 53rd week: compared with the calendar-aligned week (restated), not a growth signal"

table["yoy_pct"] = np.nan
m = 52 if grain == "week" else 12
base = table.per_week if per_week else table.value
for i in complete.index:
    if i - m in complete.index:
        table.loc[i, "yoy_pct"] = round(100 * (base[i] / base[i - m] - 1), 1)
for i in table.index[table.flag.str.contains("53-week")] if per_week else []:
    for j in (i - 12, i + 12):
        if j in complete.index and i in complete.index:
            a, b = (j, i) if j < i else (i, j)
            total, week = 100 * (table.value[b] / table.value[a] - 1), 100 * (table.per_week[b] / table.per_week[a] - 1)
            print(
                f"53-WEEK YEAR: {table.period[b]} vs {table.period[a]} is {total:+.1f} % in total but {week:+.1f} % "
                f"per week ({table.weeks[b]:.0f} vs {table.weeks[a]:.0f} weeks) - the per-week change is the signal"
            )
last_end = complete.end.iloc[-1] if len(complete) else table.end.iloc[-1]
ahead = calendar(last_end + pd.Timedelta(days=1), last_end + pd.Timedelta(days=2200))
ahead = ahead[ahead.start > last_end].head(60).reset_index(drop=True)
table["grain"] = grain
periods = table[
    [
        "period",
        "start",
        "end",
        "days",
        "days_in_period",
        "complete",
        "weeks",
        "value",
        "per_week",
        "yoy_pct",
        "flag",
        "note",
        "grain",
    ]
]
assumed.insert(
    0, f"grain {grain} ({kind or 'no fiscal calendar'}{', ' + str(cal.get('first_day')) if kind in WEEK_KINDS else ''})"
)
print(
    f"{len(complete)} complete {grain} periods ({complete.period.iloc[0]} to {complete.period.iloc[-1]}) "
    f"of {len(table)}"
)
print("Assumed: " + "; ".join(assumed))
periods  # noqa: B018 - the cell's value
