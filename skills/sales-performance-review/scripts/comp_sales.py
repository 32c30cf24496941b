"""Comparable-store ("comp") sales growth by region, the retail rule: a region's growth is read on the stores that
traded in both years, and new stores' sales are shown apart (non-comp), never as the region's growth.

Input: SOURCE, the id of a table artifact with one row per store and day or week — columns store, date (the local
business day, or the week's first day) and net_revenue (sales on the business's basis, stores only: the web is not a
store) — and STORES, the stores master (an artifact, an upload or a DataFrame) with the store's id, open_date and
optionally close_date and region. COMP_BY (default "region") names the grouping column of SOURCE or STORES.
PROFILE (from business-profile) gives fiscal_calendar: on a 4-5-4 / 4-4-5 / 5-4-4 calendar the periods are cut from
first_day and 53_week_years; on calendar months (or none stated: a warning) the periods are months, the year starting
in first_day's month. PERIOD = 8 compares that period ((1, 8): periods 1 to 8; None: the whole year), FISCAL_YEAR =
2025 names the current year (default: the latest one whose periods are complete).
The rule: a store is comp in a fiscal period once it has been open COMP_PERIODS full fiscal periods before it
(default 14; at least 12, a full year: the base period last year is then whole). It is left out of the comp for a
period when it is closed in it or in its base: close_date (permanent) on or before the period's end, a week with no
sales (remodel, closure), or a CLOSED entry [(store, first_day, last_day), ...]. The base of a period is the same
fiscal weeks last year: a 53-week prior year is shifted one week (its weeks 2-53), a 53-week current year's 53rd week
is left out.
Output: `comp`, one row per group and a "chain" row: comp_current, comp_prior, comp_growth (%), total_current,
total_prior, total_growth (%), non_comp_current, non_comp_prior, non_comp_pts (points of total growth from non-comp
stores), comp_stores, non_comp_stores, new_store_inflated, flagged (comp growth COMP_MATERIAL points (default 3) off the
chain comp) and finding. `comp_stores`: one row per store and period (status comp / new / closed, reason, current,
prior). `comp_by_period`: comp growth per group and period. `assumed`: the rule, calendar and windows.
"""

import re

import pandas as pd

PROFILE = globals().get("PROFILE") or {}
comp_by = globals().get("COMP_BY") or "region"
period_given = globals().get("PERIOD")
fiscal_year_given = globals().get("FISCAL_YEAR")
comp_periods = int(globals().get("COMP_PERIODS") or 14)
MATERIAL = float(globals().get("COMP_MATERIAL") or 3.0)
closed_given = globals().get("CLOSED") or []
WEEK_CALENDARS = {"4-5-4": [4, 5, 4], "4-4-5": [4, 4, 5], "5-4-4": [5, 4, 4]}
assumed = []


class Refused(ValueError):
    """A fact the comp needs is unknown or contradicted: no comp rather than a wrong one."""


def refuse(why):
    raise Refused("REFUSED: " + why)


def as_frame(ref):
    if ref is None or isinstance(ref, pd.DataFrame):
        return ref
    if str(ref).startswith("artifact_"):
        return load_artifact(ref)  # noqa: F821 - run_python's helper
    return load_file(ref)  # noqa: F821 - an upload (upload_…) or a file path


def column(df, pattern, what, required=True):
    hit = next((c for c in df.columns if re.search(pattern, str(c), re.I)), None)
    if hit is None and required:
        refuse(f"{what}: no column matching {pattern!r} in {list(df.columns)}")
    return hit


def store_id(s):
    """Store numbers as text, zero padding dropped (POS '0107' = master '107')."""
    s = s.astype(str).str.strip()
    return s.where(~s.str.fullmatch(r"\d+"), s.str.lstrip("0").replace("", "0"))


# ---------------------------------------------------------------------------------------------- the periods
def all_periods(cal, first, last):
    """[(fiscal year, period, start, end exclusive, weeks of the year or 0)] covering first..last."""
    kind, out = cal.get("kind"), []
    naming = cal.get("year_naming") or "start_year"
    if kind in WEEK_CALENDARS:
        if not cal.get("first_day"):
            refuse(f"PROFILE['fiscal_calendar'] is {kind} but its first_day is unknown: the fiscal weeks cannot be cut")
        if cal.get("year_naming") not in ("start_year", "end_year"):
            print("WARNING: PROFILE['fiscal_calendar']['year_naming'] unknown: years named by the year they start in")
        if cal.get("53_week_years") is None:
            print("WARNING: PROFILE['fiscal_calendar']['53_week_years'] unknown: no 53-week year assumed")
        marks = {str(x) for x in cal.get("53_week_years") or []}

        def label(start):
            return start.year + (1 if naming == "end_year" else 0)

        def weeks(start):
            return 53 if (str(start.date()) in marks or str(label(start)) in marks) else 52

        start = pd.Timestamp(cal["first_day"])
        while start > first - pd.Timedelta(weeks=60):
            start -= pd.Timedelta(weeks=52)
            start -= pd.Timedelta(weeks=weeks(start) - 52)
        while start <= last:
            n, s = weeks(start), start
            for p, w in enumerate(WEEK_CALENDARS[kind] * 4, 1):
                w += 1 if (p == 12 and n == 53) else 0
                out.append((label(start), p, s, s + pd.Timedelta(weeks=w), n))
                s += pd.Timedelta(weeks=w)
            start = s
        return out
    if kind not in (None, "calendar-month"):
        refuse(f"PROFILE['fiscal_calendar']['kind'] = {kind!r}: not a calendar this script knows")
    if kind is None:
        print("WARNING: PROFILE['fiscal_calendar'] unknown: periods are calendar months, years from January")
    m0 = pd.Timestamp(cal["first_day"]).month if cal.get("first_day") else 1
    start = pd.Timestamp(first.year - 2, m0, 1)
    while start <= last:
        for p in range(1, 13):
            s = start + pd.DateOffset(months=p - 1)
            out.append(
                (start.year + (1 if naming == "end_year" and m0 != 1 else 0), p, s, s + pd.DateOffset(months=1), 0)
            )
        start += pd.DateOffset(years=1)
    return out


def base_window(periods, fy, p):
    """The same fiscal weeks (or month) a year before period p of fy: a 53-week prior year shifted one week."""
    this = next(x for x in periods if x[:2] == (fy, p))
    prev = [x for x in periods if x[0] == fy - 1]
    if not prev:
        return None
    if this[4]:  # a week calendar: the period's weeks of a 52-week year
        y0 = next(x for x in periods if x[:2] == (fy, 1))[2]
        w0 = (this[2] - y0).days // 7
        w1 = min(w0 + (this[3] - this[2]).days // 7, 52)
        shift = 1 if prev[0][4] == 53 else 0
        return (
            prev[0][2] + pd.Timedelta(weeks=w0 + shift),
            prev[0][2] + pd.Timedelta(weeks=w1 + shift),
            this[2] + pd.Timedelta(weeks=w1 - w0),
        )
    base = next(x for x in prev if x[1] == p)
    return base[2], base[3], this[3]


# ---------------------------------------------------------------------------------------------- run
source = as_frame(SOURCE).copy()  # noqa: F821 - SOURCE comes from the cell
master = as_frame(globals().get("STORES"))
if master is None:
    refuse("STORES (the stores master with each store's open_date) is not given: comp status cannot be read")
s_col = column(source, r"^(store|store_?(nbr|no|id|number)|location|shop|site)$", "SOURCE's store")
d_col = column(source, r"date|day|week|time|_at$", "SOURCE's date")
v_col = column(source, r"^(net_revenue|net_sales|sales|revenue|net)$", "SOURCE's sales")
m = pd.DataFrame(
    {
        "store": store_id(
            master[column(master, r"^(store|store_?(nbr|no|id|number)|location|shop|site)$", "STORES' store")]
        )
    }
)
m["open"] = pd.to_datetime(master[column(master, r"open", "STORES' open_date")].astype(str), errors="coerce")
close_col = column(master, r"clos", "", required=False)
m["close"] = pd.to_datetime(master[close_col].astype(str), errors="coerce") if close_col else pd.NaT
tz_col = column(master, r"time_?zone|^tz$", "", required=False)
raw = source[d_col].astype(str).str.strip()
stores_in = store_id(source[s_col])
unknown = sorted(set(stores_in) - set(m.store))
if unknown:
    refuse(
        f"stores {unknown[:10]} are not in STORES: their comp status is unknown (the web or a warehouse is not a "
        "store: leave its rows out; a store missing from the master: add its open_date)"
    )
if raw.str.contains(r"\d[T ]\d\d:\d\d.*(?:[+-]\d\d:?\d\d|Z|UTC)$").any():  # times with an offset: the local day
    ts = pd.to_datetime(raw, utc=True, errors="coerce", format="mixed")
    if tz_col:
        zone = stores_in.map(dict(zip(m.store, master[tz_col].astype(str), strict=True)))
        day = pd.Series(pd.NaT, index=raw.index, dtype="datetime64[ns]")
        for z, idx in zone.groupby(zone).groups.items():
            day[idx] = ts[idx].dt.tz_convert(z).dt.tz_localize(None).dt.normalize()
        assumed.append(f"times with offsets turned into each store's local day ({tz_col})")
    elif raw.str.contains(r"(?:Z|UTC|[+-]00:?00)$").any():
        refuse(f"{d_col} holds UTC times and STORES has no time_zone: a store's day is its local day - give the zones")
    else:
        day = pd.to_datetime(raw.str[:10], errors="coerce")
        print(f"WARNING: {d_col} has offsets and STORES no time_zone: the wall-clock day as written taken as local")
        assumed.append("the wall-clock day of each time (offset as written) as the store's local day")
else:
    day = pd.to_datetime(raw, errors="coerce")
source = pd.DataFrame(
    {
        "store": stores_in,
        "date": day,
        "net": pd.to_numeric(source[v_col], errors="coerce").fillna(0.0),
        **({"group": source[comp_by].astype(str)} if comp_by in source.columns else {}),
    }
)
if source.date.isna().any():
    refuse(f"{d_col}: {int(source.date.isna().sum())} values are not dates (one row per store and day or week)")
if "group" not in source.columns:
    if comp_by in master.columns:
        source["group"] = source.store.map(dict(zip(m.store, master[comp_by].astype(str), strict=True)))
    else:
        print(f"NOTE: COMP_BY = {comp_by!r} is a column of neither SOURCE nor STORES: the chain only")
        source["group"] = "all stores"
no_open = sorted(m[m.open.isna() & m.store.isin(source.store)].store)
if no_open:
    refuse(f"stores {no_open[:10]} have no open_date in STORES: comp status unknown - give their opening dates")
if comp_periods < 12:
    refuse(f"COMP_PERIODS = {comp_periods}: a store is comp after a full year open (12 periods or more)")

days = pd.Series(sorted(source.date.unique()))
grain = int(days.diff().dt.days.min()) if len(days) > 1 else 1
reach = days.iloc[-1] + pd.Timedelta(days=grain)  # the first day the data do not cover
cal = PROFILE.get("fiscal_calendar") or {}
periods = all_periods(cal, days.iloc[0], days.iloc[-1])
wanted = (
    list(range(1, 13))
    if period_given is None
    else [int(period_given)]
    if isinstance(period_given, int | str)
    else list(range(int(period_given[0]), int(period_given[-1]) + 1))
)
what = "year" if period_given is None else f"P{wanted[0]}" + (f"-P{wanted[-1]}" if len(wanted) > 1 else "")
ends = {fy: max(x[3] for x in periods if x[0] == fy and x[1] == wanted[-1]) for fy in {x[0] for x in periods}}
if fiscal_year_given is None:
    done = [fy for fy, e in ends.items() if e <= reach and any(x[0] == fy - 1 for x in periods)]
    if not done:
        refuse(f"no complete fiscal {what} in the data (up to {(reach - pd.Timedelta(days=1)).date()})")
    fiscal_year_given = max(done)
fiscal_year_given = int(fiscal_year_given)
if fiscal_year_given not in ends or ends[fiscal_year_given] > reach:
    refuse(
        f"FY{fiscal_year_given} {what} is not complete in the data (up to {(reach - pd.Timedelta(days=1)).date()}): "
        "never a part period against a whole one"
    )
index = {x[:2]: i for i, x in enumerate(periods)}
starts = pd.Series([x[2] for x in periods])
closed = [(store_id(pd.Series([str(c[0])]))[0], pd.Timestamp(c[1]), pd.Timestamp(c[2])) for c in closed_given]
rows, notes = [], []
by_store = m.drop_duplicates("store").set_index("store")
group_of = source.drop_duplicates("store").set_index("store").group


def silent_weeks(w0, w1):
    """{store: the first full week of w0..w1 with no sales} (a closure: remodel, fire), on day or week rows."""
    part = source[(source.date >= w0) & (source.date < w1)]
    n = (w1 - w0).days // 7
    weekly = part.groupby([part.store, (part.date - w0).dt.days // 7]).net.sum().unstack(fill_value=0.0)
    weekly = weekly.reindex(columns=range(n), fill_value=0.0)
    return {
        st: w0 + pd.Timedelta(weeks=int(row[row <= 0].index[0])) for st, row in weekly.iterrows() if (row <= 0).any()
    }


for p in wanted:
    this = periods[index[(fiscal_year_given, p)]]
    b0, b1, c1 = base_window(periods, fiscal_year_given, p) or (None, None, None)
    if b0 is None or b0 < days.iloc[0]:
        refuse(f"FY{fiscal_year_given} P{p}: its base a year before is not in the data (data start {days.iloc[0].date()})")
    c0 = this[2]
    notes.append(
        f"P{p} {c0.date()}..{(c1 - pd.Timedelta(days=1)).date()} vs {b0.date()}..{(b1 - pd.Timedelta(days=1)).date()}"
    )
    cur = source[(source.date >= c0) & (source.date < c1)].groupby("store").net.sum()
    pri = source[(source.date >= b0) & (source.date < b1)].groupby("store").net.sum()
    silent = {**silent_weeks(b0, b1), **silent_weeks(c0, c1)} if grain <= 7 else {}
    for st in sorted(set(cur.index) | set(pri.index)):
        info = by_store.loc[st]
        after = (starts >= info.open).values
        status, reason = "comp", f"open {info.open.date()}"
        if not after.any() or index[(fiscal_year_given, p)] - int(after.argmax()) < comp_periods:
            status, reason = "new", f"opened {info.open.date()}: under {comp_periods} full periods open"
        elif pd.notna(info.close) and info.close < c1:
            status, reason = "closed", f"closed {info.close.date()}"
        elif any(s == st and a < w1 and b >= w0 for s, a, b in closed for w0, w1 in ((b0, b1), (c0, c1))):
            status, reason = "closed", "CLOSED for part of the period or its base"
        elif st in silent:
            status, reason = "closed", f"no sales in the week of {silent[st].date()}"
        g = group_of[st]
        rows.append((st, g, fiscal_year_given, p, status, reason, cur.get(st, 0.0), pri.get(st, 0.0)))
comp_stores = pd.DataFrame(
    rows, columns=["store", comp_by, "fiscal_year", "period", "status", "reason", "current", "prior"]
)


def pct(a, b):
    return 100 * (a / b - 1) if b else float("nan")


def summarise(part):
    c = part[part.status == "comp"]
    n = part[part.status != "comp"]
    tot_p = part.prior.sum()
    return {
        "comp_current": c.current.sum(),
        "comp_prior": c.prior.sum(),
        "comp_growth": pct(c.current.sum(), c.prior.sum()),
        "total_current": part.current.sum(),
        "total_prior": tot_p,
        "total_growth": pct(part.current.sum(), tot_p),
        "non_comp_current": n.current.sum(),
        "non_comp_prior": n.prior.sum(),
        "non_comp_pts": 100 * (n.current.sum() - n.prior.sum()) / tot_p if tot_p else float("nan"),
        "comp_stores": c.store.nunique(),
        "non_comp_stores": ", ".join(f"{s} ({r})" for s, r in n.drop_duplicates("store")[["store", "status"]].values),
    }


chain = summarise(comp_stores)
out = []
for g, part in comp_stores.groupby(comp_by):
    r = {comp_by: g, **summarise(part)}
    r["new_store_inflated"] = r["total_growth"] - r["comp_growth"] > MATERIAL
    gap = r["comp_growth"] - chain["comp_growth"]
    r["flagged"] = abs(gap) >= MATERIAL
    if gap <= -MATERIAL:
        r["finding"] = f"comp decline {r['comp_growth']:+.1f} % (chain comp {chain['comp_growth']:+.1f} %)"
        if r["new_store_inflated"]:
            r["finding"] += (
                f"; its total {r['total_growth']:+.1f} % only because of non-comp stores ({r['non_comp_pts']:+.1f} pts)"
            )
    elif gap >= MATERIAL:
        r["finding"] = f"comp growth {r['comp_growth']:+.1f} %, ahead of the chain comp {chain['comp_growth']:+.1f} %"
        if r["new_store_inflated"]:
            r["finding"] += (
                f"; its total {r['total_growth']:+.1f} % adds non-comp stores ({r['non_comp_pts']:+.1f} pts)"
            )
    elif r["new_store_inflated"]:
        r["finding"] = (
            f"total {r['total_growth']:+.1f} % is new-store volume ({r['non_comp_pts']:+.1f} pts); comp "
            f"{r['comp_growth']:+.1f} % in line with the chain {chain['comp_growth']:+.1f} %: not a growth {comp_by}"
        )
    else:
        r["finding"] = f"comp {r['comp_growth']:+.1f} %, in line with the chain"
    out.append(r)
out.append(
    {
        comp_by: "chain",
        **chain,
        "new_store_inflated": chain["total_growth"] - chain["comp_growth"] > MATERIAL,
        "flagged": False,
        "finding": "chain comp",
    }
)
comp = pd.DataFrame(out)
comp_by_period = (
    comp_stores[comp_stores.status == "comp"]
    .groupby([comp_by, "period"])[["current", "prior"]]
    .sum()
    .assign(comp_growth=lambda t: 100 * (t.current / t.prior - 1))
    .reset_index()
)
kind = cal.get("kind") or "calendar months (not stated)"
assumed.append(
    f"comp rule: a store is comp in a period once open {comp_periods} full fiscal periods; closed stores (close_date, "
    f"a week without sales, CLOSED) left out for the periods affected; the base = the same fiscal weeks last year"
)
assumed.append(f"{kind} calendar, FY{fiscal_year_given} {what}: " + "; ".join(notes))
if any(x[0] == fiscal_year_given - 1 and x[4] == 53 for x in periods):
    assumed.append(f"FY{fiscal_year_given - 1} has 53 weeks: its base restated, shifted one week")
if any(x[0] == fiscal_year_given and x[4] == 53 for x in periods) and 12 in wanted:
    assumed.append(f"FY{fiscal_year_given} has 53 weeks: its 53rd week left out")
print(comp.round(2).to_string(index=False))
for r in out[:-1]:
    if r["flagged"] or r["new_store_inflated"]:
        print(f"{r[comp_by]}: {r['finding']}")
print("Assumed: " + "; ".join(assumed))
comp  # noqa: B018 - the cell's value
