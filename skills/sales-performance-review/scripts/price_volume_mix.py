"""Price / volume / mix bridge of a revenue change between two periods, at constant currency with an FX line, on
the business's own fiscal calendar (53-week years restated).

Input: SOURCE, the id of a table artifact with one row per item and period — the columns <item>, <period>,
net_revenue, units and optionally list_revenue (before discounts) and currency, as query_metrics(metrics=
["net_revenue", "units", "list_revenue"], dimensions=[<item>], time_grain=…) returns them; the last two periods are
compared — or one row per item with the columns
    <item>, qty_prior, revenue_prior, qty_current, revenue_current [, list_prior, list_current] [, currency]
(the first column names the item). BY (optional) names a column of SOURCE that groups the items (a category:
dimensions=[<group>, <item>]; or "currency"): the bridge is then also given per group.
PROFILE (from business-profile) decides the rest:
- currencies / reporting_currency: amounts in SOURCE are in each row's own (local) currency, named by a `currency`
  column. With more than one currency, FX = "artifact_…" (or a DataFrame) gives the rates — columns currency, rate
  and period (SOURCE's period values, or "prior"/"current") or date (each rate in the period it falls in; the rates
  of a period are averaged) — and FX_DIRECTION says how they are quoted: "reporting_per_local" (USD per 1 AUD:
  multiply) or "local_per_reporting" (GBP per 1 EUR: divide). Without them the bridge refuses: a price and an
  exchange rate cannot be told apart in one currency's totals.
- fiscal_calendar: on a 4-5-4 / 4-4-5 / 5-4-4 calendar SOURCE has one row per item and day or week (<item>, <date>,
  …) and the script cuts the fiscal periods itself from first_day and 53_week_years: PERIOD = 12 compares that
  period ((1, 10): periods 1 to 10; None: the whole year), FISCAL_YEAR = 2024 names the current year (default: the latest complete one). A
  53-week year is restated: its 53rd week is left out when it is the current year; when it is the prior year, the
  prior year is shifted one week (weeks 2-53: P12 on its last 4 weeks), so both sides have the same weeks.
Run in run_python as:  PROFILE = {...}  [FX = "artifact_…"  FX_DIRECTION = "…"  PERIOD = 12]  SOURCE = "artifact_..."
then this script.
Output: the bridge as the cell's value, printed too; the steps add up to the reported change (checked). Every step
but FX is at the prior period's rates (constant currency): prices are compared in local currency, valued at the
prior rates; FX translation = current revenue at current rates - current revenue at prior rates. Volume is valued
at each item's prior price, so the unit an item is counted in (pack or piece) does not move it. With list revenue,
the price step is split: list price (the list price's change, at the prior discount) and discount (the realised
discount's change, at the current list price). `by_currency` (several currencies): each currency's change in local
currency, its like-for-like price change and its FX line. `assumed`: the business facts the bridge rests on.
"""

import re

import pandas as pd

PROFILE = globals().get("PROFILE") or {}
by_given = globals().get("BY")
fx_given = globals().get("FX")
fx_direction = globals().get("FX_DIRECTION") or (PROFILE.get("fx") or {}).get("direction")
period_given = globals().get("PERIOD")
fiscal_year_given = globals().get("FISCAL_YEAR")
REPORTING = globals().get("REPORTING_CURRENCY") or PROFILE.get("reporting_currency")
WEEK_CALENDARS = {"4-5-4": [4, 5, 4], "4-4-5": [4, 4, 5], "5-4-4": [5, 4, 4]}
assumed = []


class Refused(ValueError):
    """A fact the bridge needs is unknown or contradicted: no bridge rather than a wrong one."""


def refuse(why):
    raise Refused("REFUSED: " + why)


def as_frame(ref):
    if ref is None or isinstance(ref, pd.DataFrame):
        return ref
    if str(ref).startswith("artifact_"):
        return load_artifact(ref)  # noqa: F821 - run_python's helper
    return load_file(ref)  # noqa: F821 - an upload (upload_…) or a file path


# ---------------------------------------------------------------------------------------------- fiscal calendar
def fiscal_years(cal, first_date, last_date):
    """[(label, start, weeks)] covering the dates, from the calendar's first day and its 53-week years."""
    if not cal.get("first_day"):
        refuse(
            f"PROFILE['fiscal_calendar'] is {cal.get('kind')} but its first_day is unknown: the fiscal weeks "
            "cannot be cut. Give the first day of a fiscal year (business-profile FACTS)."
        )
    naming = cal.get("year_naming")
    if naming not in ("start_year", "end_year"):
        assumed.append("fiscal years named by their start year (year_naming not stated)")
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
    while start > first_date:  # back to the year holding the first date
        start = start - pd.Timedelta(weeks=52)
        if weeks(start) == 53:
            start = start - pd.Timedelta(weeks=1)
    years = []
    while start <= last_date:
        years.append((label(start), start, weeks(start)))
        start = start + pd.Timedelta(weeks=weeks(start))
    return years


def period_weeks(pattern, period):
    """The weeks (1-based) of a period (or a range of periods, (1, 10)) in a 52-week year; None: the whole year."""
    if period is None:
        return list(range(1, 53))
    first_p, last_p = (period, period) if isinstance(period, int | str) else tuple(period)
    first_p, last_p = int(first_p), int(last_p)
    lengths = pattern * 4
    if not 1 <= first_p <= last_p <= 12:
        refuse(f"PERIOD = {period!r}: a fiscal period is 1..12 (or a range (first, last))")
    first = sum(lengths[: first_p - 1]) + 1
    return list(range(first, sum(lengths[:last_p]) + 1))


def fiscal_two_periods(df, item, date_col, cal):
    """Rows per item and day or week cut into the current and prior fiscal windows, 53-week years restated."""
    dates = pd.to_datetime(df[date_col].astype(str), errors="coerce", utc=False)
    if dates.isna().any():
        refuse(
            f"{date_col}: {int(dates.isna().sum())} values are not dates: on a {cal['kind']} calendar SOURCE "
            "needs one row per item and day or week"
        )
    dates = dates.dt.tz_localize(None) if getattr(dates.dt, "tz", None) is not None else dates
    distinct = pd.Series(sorted(dates.unique()))
    grain = int(distinct.diff().dt.days.min()) if len(distinct) > 1 else 1
    if grain > 7:
        refuse(
            f"PROFILE says a {cal['kind']} calendar but SOURCE's {date_col} steps {grain} days (calendar months or "
            "years are not fiscal periods): query it by day or week (time_grain='day' or 'week')"
        )
    years = fiscal_years(cal, distinct.iloc[0], distinct.iloc[-1])
    by_label = {lab: (start, n) for lab, start, n in years}
    reach = distinct.iloc[-1] + pd.Timedelta(days=grain - 1)  # the last day the data cover
    wanted = period_weeks(WEEK_CALENDARS[cal["kind"]], period_given)
    what = (
        "year" if period_given is None else f"P{period_given}" if isinstance(period_given, int | str) else f"P{period_given[0]}-P{period_given[-1]}"
    )

    def window(lab, role):
        start, n = by_label[lab]
        shift = 1 if (role == "prior" and n == 53) else 0  # a 53-week prior year: shifted a week
        return start + pd.Timedelta(weeks=wanted[0] - 1 + shift), start + pd.Timedelta(weeks=wanted[-1] + shift)

    if fiscal_year_given is not None:
        current = int(fiscal_year_given)
        if current not in by_label:
            refuse(f"FISCAL_YEAR = {current}: not in the data ({', '.join(str(y[0]) for y in years)})")
    else:
        complete = [lab for lab, _, _ in years if window(lab, "current")[1] - pd.Timedelta(days=1) <= reach]
        if not complete:
            refuse(f"no complete fiscal {what} in the data (up to {reach.date()})")
        current = complete[-1]
    prior = current - 1
    if prior not in by_label:
        refuse(f"FY{prior} is not in the data: nothing to compare FY{current} with")
    c0, c1 = window(current, "current")
    p0, p1 = window(prior, "prior")
    if c1 - pd.Timedelta(days=1) > reach:
        refuse(
            f"FY{current} {what} runs to {(c1 - pd.Timedelta(days=1)).date()} but the "
            f"data end {reach.date()}: never a part period against a whole one"
        )
    if distinct.iloc[0] > p0:
        refuse(f"the data start {distinct.iloc[0].date()}, after the prior window's first day {p0.date()}")
    notes = [
        f"{cal['kind']} calendar from {cal['first_day']}; FY{current} {what} {c0.date()}.."
        f"{(c1 - pd.Timedelta(days=1)).date()} vs FY{prior} {what} {p0.date()}..{(p1 - pd.Timedelta(days=1)).date()}"
        f" ({len(wanted)} weeks each)"
    ]
    if by_label[current][1] == 53:
        notes.append(f"FY{current} has 53 weeks: its 53rd week is left out")
    if by_label[prior][1] == 53:
        notes.append(f"FY{prior} has 53 weeks: restated, shifted one week (its weeks {wanted[0] + 1}-{wanted[-1] + 1})")
        start, _ = by_label[prior]  # the unrestated period, for the record
        raw = period_weeks(WEEK_CALENDARS[cal["kind"]], period_given)
        raw_end = start + pd.Timedelta(weeks=53 if raw[-1] == 52 else raw[-1])
        raw_rev = df.net_revenue.astype(float)[(dates >= start + pd.Timedelta(weeks=raw[0] - 1)) & (dates < raw_end)]
        cur_rev = df.net_revenue.astype(float)[(dates >= c0) & (dates < c1)]
        if raw_rev.sum():
            print(
                f"unrestated (FY{prior} {what} with its 53rd week): change "
                f"{100 * (cur_rev.sum() / raw_rev.sum() - 1):+.1f} % - not comparable, weeks differ"
            )
    assumed.extend(notes)
    side = pd.Series(None, index=df.index, dtype=object)
    side[(dates >= p0) & (dates < p1)] = "prior"
    side[(dates >= c0) & (dates < c1)] = "current"
    windows = {"prior": (p0, p1), "current": (c0, c1)}
    return df.assign(**{date_col: side}).dropna(subset=[date_col]), windows


# ---------------------------------------------------------------------------------------------- shaping
def two_periods(df, item, period, currency):
    """Rows per item and period (net_revenue, units[, list_revenue]) as one row per item (and currency): the last
    two periods side by side (and the item's group, with by_given)."""
    keys = [item] + ([currency] if currency else [])
    found = set(df[period].dropna().unique())
    if found >= {"prior", "current"}:  # the fiscal windows cut above
        prior, current = "prior", "current"
    else:
        found = sorted(found)
        if len(found) < 2:
            refuse(f"{period} has {len(found)} period(s): a bridge needs two")
        prior, current = found[-2:]
    values = ["units", "net_revenue", *(["list_revenue"] if "list_revenue" in df.columns else [])]
    numbers = df.assign(**{v: df[v].astype(float) for v in values})
    wide = numbers.pivot_table(index=keys, columns=period, values=values, aggfunc="sum")
    index = wide.index.to_frame(index=False)
    out = pd.DataFrame({k: index[k].to_numpy() for k in keys})

    def col(v, p):
        return wide[(v, p)].to_numpy() if (v, p) in wide.columns else 0.0

    out["qty_prior"], out["revenue_prior"] = col("units", prior), col("net_revenue", prior)
    out["qty_current"], out["revenue_current"] = col("units", current), col("net_revenue", current)
    if "list_revenue" in values:
        out["list_prior"], out["list_current"] = col("list_revenue", prior), col("list_revenue", current)
    if by_given and by_given not in keys:
        out[by_given] = out[item].map(df.drop_duplicates(item).set_index(item)[by_given])
    return out, (prior, current)


def rates_for(fx, currencies, labels, windows):
    """{currency: (rate_prior, rate_current)} as multipliers to the reporting currency."""
    fx = fx.copy()
    fx.columns = [str(c).strip().lower() for c in fx.columns]
    if not {"currency", "rate"} <= set(fx.columns):
        refuse(f"FX needs the columns currency and rate (and period or date); it has {list(fx.columns)}")
    direction = fx_direction or (fx["direction"].dropna().iloc[0] if "direction" in fx.columns else None)
    multiply = {"reporting_per_local": True, "multiply": True, "local_per_reporting": False, "divide": False}
    if direction not in multiply:
        refuse(
            f"FX_DIRECTION = {direction!r}: say how the rates are quoted - 'reporting_per_local' ({REPORTING} per 1 "
            f"unit of local currency: multiply) or 'local_per_reporting' (local per 1 {REPORTING}: divide)"
        )
    fx["currency"] = fx["currency"].astype(str).str.strip().str.upper()
    fx["rate"] = pd.to_numeric(fx["rate"], errors="coerce")
    side = pd.Series(None, index=fx.index, dtype=object)
    if "period" in fx.columns:
        text = fx["period"].astype(str).str.strip()
        for role, lab in zip(("prior", "current"), labels, strict=True):
            side[text.isin([role, str(lab)])] = role
        how = "rates per period"
    elif "date" in fx.columns or "month" in fx.columns:
        when = pd.to_datetime(fx["date" if "date" in fx.columns else "month"].astype(str), errors="coerce")
        if windows is None:
            starts = [pd.Timestamp(str(lab)) for lab in labels]
            windows = {"prior": (starts[0], starts[1]), "current": (starts[1], starts[1] + (starts[1] - starts[0]))}
        for role, (a, b) in windows.items():
            side[(when >= a) & (when < b)] = role
        how = "rates dated within each period, averaged"
    else:
        refuse("FX needs a period column (SOURCE's period values, or prior/current) or a date column")
    fx["side"] = side
    table = fx.dropna(subset=["side", "rate"]).groupby(["currency", "side"]).rate.mean().unstack()
    out = {}
    for c in currencies:
        if c == REPORTING:
            out[c] = (1.0, 1.0)
            continue
        if c not in table.index or table.loc[c].isna().any() or {"prior", "current"} - set(table.columns):
            refuse(f"FX has no {c} rate for both periods ({labels[0]}, {labels[1]}): every currency needs one")
        r0, r1 = float(table.loc[c, "prior"]), float(table.loc[c, "current"])
        out[c] = (r0, r1) if multiply[direction] else (1 / r0, 1 / r1)
    quoted = "multiplied" if multiply[direction] else "divided"
    assumed.append(f"FX: {how} ({direction}: local amounts {quoted}), prior-period rates for constant currency")
    return out


# ---------------------------------------------------------------------------------------------- the bridge
def price_volume_mix(df):
    """Every step but fx_given at the prior period's rates: volume is valued at each item's own prior-period price, so
    it does not depend on the unit an item is counted in (a pack or a piece); the mix between items is part of it.
    Prices are compared in local currency (valued at the prior rate); fx_given = current revenue x (current - prior
    rate)."""
    numbers = ["qty_prior", "revenue_prior", "qty_current", "revenue_current"]
    numbers += [c for c in ("list_prior", "list_current") if c in df.columns]
    d = df.copy()
    d[numbers] = d[numbers].fillna(0).astype(float)
    r0 = d["rate_prior"] if "rate_prior" in d.columns else pd.Series(1.0, index=d.index)
    r1 = d["rate_current"] if "rate_current" in d.columns else r0
    fx_line = float((d.revenue_current * (r1 - r0)).sum())
    reported = float((d.revenue_current * r1).sum())
    for c in numbers:  # constant currency: amounts at the prior period's rate
        if not c.startswith("qty"):
            d[c] = d[c] * r0
    both = d[(d.qty_prior > 0) & (d.qty_current > 0)]
    new = d[(d.qty_prior <= 0) & (d.qty_current > 0)]
    gone = d[(d.qty_prior > 0) & (d.qty_current <= 0)]
    rest = d.drop(both.index.union(new.index).union(gone.index))  # revenue without units (e.g. fees)
    p0 = both.revenue_prior / both.qty_prior  # unit price per item, prior period
    p1 = both.revenue_current / both.qty_current
    at_prior_prices = (both.qty_current * p0).sum()
    volume = at_prior_prices - both.revenue_prior.sum()
    price = ((p1 - p0) * both.qty_current).sum()
    prior, current = d.revenue_prior.sum(), d.revenue_current.sum()
    other = rest.revenue_current.sum() - rest.revenue_prior.sum()
    if "list_prior" in d.columns and (both.list_prior > 0).all() and (both.list_current > 0).all():
        l0, l1 = both.list_prior / both.qty_prior, both.list_current / both.qty_current  # list price per unit
        s0 = both.revenue_prior / both.list_prior  # realised share of list, prior period
        list_price = round(float((both.qty_current * (l1 - l0) * s0).sum()), 2)  # to the cent: no float dust
        discount = (
            price - list_price
        )  # = sum of q1 x l1 x (s1 - s0), s1 the current share: the two add up to the price step exactly
        price_steps = [("list price", list_price), ("discount", discount)]
    else:
        price_steps = [("price and discount", price)]
    steps = [
        ("prior period revenue", prior),
        ("volume at prior prices", volume),
        *price_steps,
        ("new items", new.revenue_current.sum()),
        ("discontinued items", 0.0 - gone.revenue_prior.sum()),  # 0.0 - : no "-0.0"
    ]
    if other:
        steps.append(("revenue without units", other))
    if "rate_prior" in d.columns:
        steps.append(("FX translation", fx_line))
    steps.append(("current period revenue", reported))
    gap = sum(v for _, v in steps[:-1]) - reported
    assert abs(gap) <= 1e-6 * max(1.0, abs(reported)), f"bridge does not add up: off by {gap}"
    change = reported - prior
    bridge = pd.DataFrame(steps, columns=["step", "revenue"])
    bridge["share_of_change_pct"] = [None, *(100 * v / change if change else None for _, v in steps[1:-1]), None]
    bridge.attrs["volume_index"] = 100 * at_prior_prices / both.revenue_prior.sum() if len(both) else None
    bridge.attrs["price_index"] = 100 * both.revenue_current.sum() / at_prior_prices if at_prior_prices else None
    bridge.attrs["constant_currency_current"] = current
    return bridge


# ---------------------------------------------------------------------------------------------- run
source = as_frame(SOURCE)  # noqa: F821 - SOURCE comes from the cell
if by_given and by_given not in source.columns:
    print(f"NOTE: BY = {by_given!r} names no column of SOURCE: no bridge per group")
    by_given = None
CURRENCY = next((c for c in source.columns if re.fullmatch(r"(currency|currency_code|ccy|curr)", str(c), re.I)), None)
labels = [c for c in source.columns if c not in (by_given, CURRENCY)]
item = labels[0]
wide_input = "qty_prior" in source.columns
cal = PROFILE.get("fiscal_calendar") or {}
windows = None
if not wide_input and cal.get("kind") in WEEK_CALENDARS:
    source, windows = fiscal_two_periods(source, item, labels[1], cal)
elif cal.get("kind") not in (None, "calendar-month"):
    refuse(f"PROFILE['fiscal_calendar']['kind'] = {cal.get('kind')!r}: not a calendar this bridge knows")
else:
    if period_given is not None or fiscal_year_given is not None:
        print("NOTE: PERIOD / FISCAL_YEAR are read on a week calendar only: SOURCE's own periods are compared")
    if cal.get("kind") == "calendar-month" and cal.get("first_day") and not wide_input:
        first = pd.Timestamp(cal["first_day"])
        starts = pd.to_datetime(source[labels[1]].astype(str), errors="coerce").dropna()
        if first.month != 1 and len(starts) and (starts.dt.month == 1).all() and (starts.dt.day == 1).all():
            print(
                f"WARNING: the fiscal year starts on {first:%d %b} but SOURCE's periods start on 1 January: "
                "calendar years are not fiscal years - query the fiscal year's dates"
            )
    if not wide_input:
        assumed.append(f"periods as SOURCE gives them ({labels[1]}; calendar months/years)")

if wide_input:
    items, period_labels = source.copy(), ("prior", "current")
else:
    items, period_labels = two_periods(source, item, labels[1], CURRENCY)
if not wide_input and windows is None:
    assumed.append(f"compared {period_labels[0]} with {period_labels[1]}")

# currencies: local amounts, a constant-currency bridge with its own fx_given line, or refused
listed = [str(c).upper() for c in (PROFILE.get("currencies") or [])]
seen = sorted(items[CURRENCY].astype(str).str.strip().str.upper().unique()) if CURRENCY else []
if CURRENCY:
    items[CURRENCY] = items[CURRENCY].astype(str).str.strip().str.upper()
if listed and seen and set(seen) - set(listed):
    print(f"WARNING: SOURCE has currencies {seen} that PROFILE['currencies'] ({listed}) does not list")
by_currency = None
if not CURRENCY and len(listed) > 1:
    refuse(
        f"PROFILE['currencies'] lists {listed} but SOURCE has no currency column: give amounts in each row's "
        "own currency with a `currency` column (and FX rates), or the FX moves are read as price changes"
    )
if len(seen) > 1 or (seen and REPORTING and seen != [REPORTING]):
    if not REPORTING:
        refuse(f"SOURCE is in {seen} but the reporting currency is unknown: set PROFILE['reporting_currency']")
    if fx_given is None:
        refuse(
            f"SOURCE is in {seen}, reported in {REPORTING}, and no FX rates were given: set FX = 'artifact_…' "
            "(currency, rate, period or date) and fx_direction - without them an exchange-rate move is read as "
            "a price change"
        )
    rates = rates_for(as_frame(fx_given), seen, period_labels, windows)
    items["rate_prior"] = items[CURRENCY].map(lambda c: rates[c][0])
    items["rate_current"] = items[CURRENCY].map(lambda c: rates[c][1])
    assumed.append(
        f"amounts in local currency ({', '.join(seen)}), reported in {REPORTING}; every step but "
        "FX at prior-period rates"
    )
else:
    one = seen[0] if seen else (listed[0] if len(listed) == 1 else REPORTING)
    assumed.append(f"one currency ({one or 'not stated'}): no FX line")
    print(f"single currency ({one or 'none stated in PROFILE or SOURCE'}): no FX line")

bridge = price_volume_mix(items)
print(bridge.round(2).to_string(index=False))
if bridge.attrs["volume_index"] is not None:
    print(f"volume index, continuing items at prior prices (prior = 100): {bridge.attrs['volume_index']:.1f}")
if bridge.attrs["price_index"] is not None:
    print(f"price index, like-for-like at constant currency (prior = 100): {bridge.attrs['price_index']:.1f}")
if "rate_prior" in items.columns:  # each currency in its own money: what the prices did where they were set
    rows = []
    for c, part in items.groupby(CURRENCY):
        local = part.drop(columns=["rate_prior", "rate_current"])
        b = price_volume_mix(local).set_index("step").revenue
        cont = local[(local.qty_prior > 0) & (local.qty_current > 0)].astype({"qty_prior": float})
        lfl = (cont.revenue_current.sum() / (cont.qty_current * cont.revenue_prior / cont.qty_prior).sum() - 1) * 100
        row = {
            "currency": c,
            "prior_local": b.iloc[0],
            "current_local": b.iloc[-1],
            "change_local_pct": 100 * (b.iloc[-1] / b.iloc[0] - 1) if b.iloc[0] else None,
            "price_change_local_pct": lfl,
        }
        if "list_prior" in cont.columns and (cont.list_prior > 0).all():
            row["list_price_change_local_pct"] = 100 * (
                (cont.list_current).sum() / (cont.qty_current * cont.list_prior / cont.qty_prior).sum() - 1
            )
        r0, r1 = part.rate_prior.iloc[0], part.rate_current.iloc[0]
        row.update(
            {
                "rate_prior": r0,
                "rate_current": r1,
                "rate_change_pct": 100 * (r1 / r0 - 1),
                "fx_translation": float((part.revenue_current.astype(float) * (r1 - r0)).sum()),
            }
        )
        rows.append(row)
    by_currency = pd.DataFrame(rows).set_index("currency")
    print(f"per currency, in local money (rates: {REPORTING} per 1 unit):")
    print(by_currency.round(3).to_string())
by_group = None
if by_given:  # one total cannot say where the price moved: the same bridge within each group, side by side
    by_group = pd.DataFrame(
        {group: price_volume_mix(part).set_index("step").revenue for group, part in items.groupby(by_given, dropna=False)}
    ).T
    print(f"the bridge per {by_given} (each row adds up to its own change):")
    print(by_group.round(0).to_string())
print("Assumed: " + "; ".join(assumed))
bridge
