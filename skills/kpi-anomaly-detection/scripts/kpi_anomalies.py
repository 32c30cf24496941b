"""Anomalies in a KPI series: days (weeks, months) far from what trend, season and the business calendar predict.

SOURCE: a row per period (DATE, VALUE) or per event (rows counted, or VALUE summed). ENTITY: a column (store). PROFILE,
`business_calendar` (scripts/business_calendar.py), COUNTRY. FALSE_ALARMS_PER_YEAR: 1 a side over all series (or ALPHA: 0.01 over the
whole history). DATA_THROUGH or COMPLETE = True: else the last day is taken as incomplete.
Output: `anomalies`, `explained`, `expected`, `calendar`, `assumed`.
"""

import re

import numpy as np
import pandas as pd
import statsmodels.api as sm
from scipy import stats
from sklearn.utils.parallel import _get_threadpool_controller

_get_threadpool_controller().limit(limits=1)

PROFILE = globals().get("PROFILE") or {}
warnings: list[str] = []
facts: list[str] = []


def warn(text: str) -> None:
    warnings.append(text)
    print("WARNING:", text)


frame = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python


def column_input(name: str):
    """DATE / VALUE / ENTITY when it names a column of SOURCE; one left in the session for another table is ignored."""
    given = globals().get(name)
    if given is not None and given not in frame.columns:
        warn(f"{name} = {given!r} is not a column of SOURCE (left from another cell?): ignored")
        return None
    return given


entity = column_input("ENTITY")
date = column_input("DATE") or next(c for c in frame.columns if re.search(r"date|day|time|_at$|period|week|month", str(c), re.I)
                                     or pd.api.types.is_datetime64_any_dtype(frame[c]))
raw_dates = frame[date]
text_dates = raw_dates.astype(str)
zone = globals().get("TIMEZONE") or PROFILE.get("store_timezone")
with_offset = isinstance(raw_dates.dtype, pd.DatetimeTZDtype) or text_dates.str.contains(
    r"(?:[+-]\d{2}:?\d{2}|Z)$", regex=True
).mean() > 0.5
if with_offset:
    instants = pd.to_datetime(raw_dates, utc=True, format="mixed")
    if zone:
        days = instants.dt.tz_convert(zone).dt.tz_localize(None)
        facts.append(f"days in {zone} (timestamps with UTC offsets converted)")
    else:
        days = pd.to_datetime(text_dates.str[:19], format="mixed")
        warn("UTC offsets but the time zone is UNKNOWN: days as written (give PROFILE['store_timezone'])")
else:
    days = pd.to_datetime(raw_dates, format="mixed")
frame = frame.assign(**{date: days})
value = column_input("VALUE")
numbers = [c for c in frame.columns if c not in (date, entity) and pd.api.types.is_numeric_dtype(frame[c])]
keys = [entity, date] if entity else [date]
step_guess = pd.Series(frame[date].sort_values().unique()).diff().median()
is_daily = pd.isna(step_guess) or step_guess <= pd.Timedelta(days=1)
if is_daily:
    frame[date] = frame[date].dt.floor("D")
events_like = frame.duplicated(keys).any()
currency = next((c for c in frame.columns if re.fullmatch(r"(amount_?)?(currency|curr|ccy|w(ä|ae)hrung)", str(c), re.I)), None)
if value is None and (events_like or not numbers):
    frame = frame.assign(rows=1.0)
    value = "rows"
    facts.append("one row per event: rows counted per day")
value = value or numbers[-1]
if currency is not None and value != "rows" and frame[currency].nunique() > 1:
    raise ValueError(f"{value} in several currencies: convert to one currency first (business-profile's fx), or judge a count")
frame[value] = pd.to_numeric(frame[value], errors="coerce").astype(float)
if events_like:
    frame = frame.groupby(keys, as_index=False)[value].sum()
last = frame[date].max()
through = globals().get("DATA_THROUGH")
partial = None
if through or globals().get("COMPLETE"):
    through = pd.Timestamp(through or last)
    facts.append(f"data complete through {through:%Y-%m-%d}")
else:
    through, partial = frame[date][frame[date] < last].max(), (last, frame[value][frame[date] == last].sum())
    facts.append(f"the last period {last:%Y-%m-%d} INCOMPLETE (an export cut mid-day): not tested (else COMPLETE = True)")
frame = frame[frame[date] <= through]

cal = globals().get("business_calendar")
where = str(globals().get("COUNTRY") or "US")
if cal is None:
    warn(f"no business_calendar (run scripts/business_calendar.py first): public holidays of {where} only, fiscal "
         "calendar UNKNOWN")
    import holidays

    years = range(frame[date].min().year, frame[date].max().year + 1)
    law = holidays.country_holidays(where, subdiv=globals().get("SUBDIVISION"), years=years)
    cal = pd.DataFrame([(d, n, "public holiday", None) for d, n in law.items()], columns=["date", "name", "kind", "entity"])
span = cal.attrs.get("range")
if span and (pd.Timestamp(span[0]) > frame[date].min() + pd.Timedelta(days=1) or pd.Timestamp(span[1]) < through):
    raise ValueError(
        f"business_calendar covers {span[0]}..{span[1]}, the series {frame[date].min():%Y-%m-%d}..{through:%Y-%m-%d}: "
        "re-run scripts/business_calendar.py with SOURCE = this series (a START/END left from another cell cut it short)"
    )
cal = cal.assign(date=pd.to_datetime(cal.date))
fiscal_days = {n: pd.DatetimeIndex(g.date) for n, g in cal[cal.kind == "fiscal"].groupby("name")}
events = cal[cal.kind != "fiscal"]
public_names = set(events.name[events.kind == "public holiday"])
facts += list(cal.attrs.get("facts", [f"public holidays of {where}"]))
where = cal.attrs.get("countries", where)
lands = [c.strip() for c in str(where).split(",") if c.strip()]
high_all = through


def nb_size(y: np.ndarray, mu: np.ndarray) -> float:
    """Negative binomial size k (var mu + mu^2/k), robust: median chi-square fit, then moments within 4 sd."""

    def spread(k: float) -> float:
        return float(np.median((y - mu) ** 2 / (mu + mu**2 / k)) - stats.chi2.median(1))

    rough = float("inf")
    if spread(1e9) > 0:
        low, high = 1e-3, 1e9
        for _ in range(100):
            mid = float(np.sqrt(low * high))
            low, high = (mid, high) if spread(mid) <= 0 else (low, mid)
        rough = low
    inside = np.abs(y - mu) <= 4 * np.sqrt(mu + mu**2 / rough)
    if inside.sum() < 3:
        return rough
    excess = float(np.mean(((y - mu) ** 2 - mu)[inside] / np.clip(mu[inside], 1e-9, None) ** 2))
    return 1 / excess if excess > 1e-9 else float("inf")


MONTHLY = ("day 1 of the month", "last day of the month", "last day of a quarter")


def calendar_keys(day: pd.Timestamp) -> list[str]:
    """A day's places: date, n-th/last weekday of its month, US Thanksgiving +-, month start/end, fiscal."""
    name = day.day_name()
    keys = [f"{day:%b} {day.day}", f"{name} #{(day.day - 1) // 7 + 1} of {day:%B}"]
    if day.day + 7 > day.days_in_month:
        keys.append(f"last {name} of {day:%B}")
    thanksgiving = pd.Timestamp(day.year, 11, 1) + pd.offsets.Week(weekday=3) * 4
    after = (day - thanksgiving).days
    if -1 <= after <= 4:
        keys.append({0: "US Thanksgiving", 1: "Black Friday", 4: "Cyber Monday"}.get(after, f"US Thanksgiving {after:+d}"))
    if day.day == 1:
        keys.append(MONTHLY[0])
    if day.day == day.days_in_month:
        keys.append(MONTHLY[1])
        if day.month % 3 == 0:
            keys.append(MONTHLY[2])
    keys += [k for k, when in fiscal_days.items() if day in when]
    return keys


def recurring_offs(index, z, z_base, can_drop, known, places) -> dict:
    """Places where days 3 sd off recur: in >= 2 and 3/4 of the years (monthly places: >= 3 and half)."""
    off = {d: np.sign(r) for d, r in zip(index, z, strict=True) if abs(r) > 3}
    seen = {d: np.sign(r) for d, r in zip(index, z_base, strict=True) if abs(r) > 2.5}
    learned = {}
    for key in {k for d in off for k in calendar_keys(d)} & set(places):
        when = places[key]
        monthly = key in MONTHLY or key.startswith("fiscal")
        for sign in {off[d] for d in when if d in off}:
            unit = (lambda d: d) if monthly else (lambda d: d.year)
            hits = {unit(d) for d in when if seen.get(d) == sign}
            possible = {unit(d) for d in when if sign > 0 or can_drop[d]}
            if len(hits) >= (max(3, 0.5 * len(possible)) if monthly else max(2, 0.75 * len(possible))):
                learned[key] = pd.DatetimeIndex(when)
    chosen: dict[str, pd.DatetimeIndex] = {}
    covered = {d for w in known.values() for d in w}
    for key, when in sorted(learned.items(), key=lambda kv: (-sum(d in off for d in kv[1]) / len(kv[1]), kv[0])):
        hits = {d for d in when if d in off}
        if not hits <= covered:
            chosen[key] = when
            covered |= set(when)
    return chosen


def fit(columns: dict, y: np.ndarray, counts: bool, offset=0.0) -> tuple:
    """Three robust rounds (days 3 sd off left out): expectation, kept, z, sd, variance of its log."""
    X = np.column_stack([np.ones(len(y))] + [np.asarray(v, float) for v in columns.values()])
    X = X[:, np.sort(np.unique(X, axis=1, return_index=True)[1])]
    off = np.broadcast_to(np.asarray(offset, float), y.shape)
    keep = np.ones(len(y), dtype=bool)
    size = float("inf")
    for _ in range(3):
        x = X[:, (X[keep] != 0).any(axis=0)]
        if counts:
            family = sm.families.Poisson() if np.isinf(size) else sm.families.NegativeBinomial(alpha=1 / size)
            result = sm.GLM(y[keep], x[keep], family=family, offset=off[keep]).fit()
            mu = np.exp(x @ result.params + off)
            size = nb_size(y[keep], mu[keep])
            sd = np.sqrt(np.clip(mu + mu**2 / size, 0.5, None))
            residual = (y - mu) / sd
        else:
            log_y = np.log(np.clip(y, 1e-9, None)) - off
            result = sm.RLM(log_y[keep], x[keep], M=sm.robust.norms.HuberT()).fit()
            residual = log_y - x @ result.params
            mu = np.exp(x @ result.params + off)
            scale = 1.4826 * np.median(np.abs(residual[keep] - np.median(residual[keep])))
            sd = np.full(len(y), max(scale, 1e-9))
            residual = residual / sd
        keep = np.abs(residual) <= 3
    unsure = np.clip(np.einsum("ij,jk,ik->i", x, np.asarray(result.cov_params()), x), 0, None)
    return mu, keep, residual, sd, unsure


def bic(columns: dict, y: np.ndarray, counts: bool) -> float:
    """The Bayesian information criterion of a Poisson (counts) or log-normal fit of ``columns``."""
    X = np.column_stack([np.ones(len(y))] + [np.asarray(v, float) for v in columns.values()])
    if counts:
        result = sm.GLM(y, X, family=sm.families.Poisson()).fit()
        return float(-2 * result.llf + X.shape[1] * np.log(len(y)))
    return float(sm.OLS(np.log(np.clip(y, 1e-9, None)), X).fit().bic)


def wave_order(columns: dict, waves: dict, y: np.ndarray, counts: bool) -> dict:
    """The yearly wave's harmonics up to the order with the lowest BIC (0-4) over the trend, weekday and months."""
    options = [{k: v for k, v in waves.items() if int(k.split("_")[1]) <= order} for order in range(len(waves) // 2 + 1)]
    return min(options, key=lambda these: bic({**columns, **these}, y, counts))


def day_model(s: pd.Series, who, total=None) -> dict:
    """Log-linear model; an entity's: the total's expectation as offset, its own trend, weekday, month, holidays."""
    index = s.index
    counts = bool(((s % 1 == 0) & (s >= 0)).all())
    mine = events[events.entity.isna() | (events.entity == (None if who is None else str(who)))]
    closed_days = set(mine.date[mine.kind.str.contains("clos")])
    named = mine.loc[~mine.kind.str.contains("clos"), ["date", "name"]].drop_duplicates()
    calendar = named[(named.date >= index.min()) & (named.date <= index.max())].sort_values("date").reset_index(drop=True)
    zero = set(s.index[s.to_numpy() == 0])
    if len(lands) > 1:  # a public holiday in every country sold in (1 May: DE, FR and GB's May Day) closes the total
        pub = mine[mine.kind == "public holiday"]
        where_off = pub.groupby("date").name.agg(lambda n: {str(x).split(":")[0] for x in n})
        closed_days |= {d for d, off in where_off.items() if set(lands) <= off} & zero
    for name, group in calendar.groupby("name"):
        when = [d for d in group.date if d in s.index]
        if len(when) >= 2 and all(d in zero for d in when):
            closed_days |= set(when)
    closed = index.isin(list(closed_days)) & (s.to_numpy() <= 0.1 * max(float(s[s > 0].median()) if (s > 0).any() else 0, 0))
    fit_index = index[~closed]
    offset = 0.0
    if total is not None:
        offset = np.log(total["expected"].reindex(fit_index))
        fit_index, offset = fit_index[offset.notna().to_numpy()], offset.dropna().to_numpy()
    y = s[fit_index].to_numpy()
    t = (fit_index - index.min()).days.to_numpy(dtype=float)
    columns = {"trend": t / 365.25}
    span = (index.max() - index.min()).days
    for knot in range(91, span - 91, 91):
        columns[f"bend_{knot}"] = np.clip(t - knot, 0, None) / 365.25
    for d in range(1, 7):
        columns[f"weekday_{d}"] = (fit_index.day_of_week == d).astype(float)
    yearly = span / 365.25 >= 2
    if yearly:
        for m in range(2, 13):
            columns[f"month_{m}"] = (fit_index.month == m).astype(float)
        angle = 2 * np.pi * fit_index.day_of_year.to_numpy() / 365.25
        waves = {}
        for k in range(1, 5 if total is None else 1):
            waves[f"sin_{k}"], waves[f"cos_{k}"] = np.sin(k * angle), np.cos(k * angle)
        if waves:  # as many harmonics as the data support (BIC): on a thin series, a wave of four fits last year's noise
            columns.update(wave_order(columns, waves, y, counts))
    plain = dict(columns)
    recurring = calendar.name.value_counts()
    rules = {n for n, g in mine.groupby("name") if len(g) > 12}
    windows: dict[str, dict] = {}
    for name in recurring[recurring >= 2].index:
        when = pd.DatetimeIndex(calendar.date[calendar.name == name])
        windows[name] = {}
        for shift in range(0, 2) if name in rules else range(-2, 5):
            hit = fit_index.isin(when + pd.Timedelta(days=shift))
            if hit.sum() >= 2:
                windows[name][f"{name} {shift:+d}"] = hit.astype(float)
    if total is None:
        # a public holiday's days are terms only as far as the data show them: each holiday's window, its day alone or
        # nothing, by BIC with every other holiday in (seven terms for each of a dozen holidays, fitted on three days
        # each, moved the expectation of the days around them by chance: a Veterans Day +2 "expected" 40 % up)
        for name in [n for n in windows if n in public_names and windows[n]]:
            others = {k: v for n, w in windows.items() if n != name for k, v in w.items()}
            day = {k: v for k, v in windows[name].items() if k.endswith(" +0")}
            windows[name] = min([windows[name], day, {}], key=lambda these: bic({**columns, **others, **these}, y, counts))
    for window in windows.values():
        columns.update(window)
    for name, when in fiscal_days.items() if total is None else []:
        hit = fit_index.isin(when)
        if hit.sum() >= 2:
            columns[name] = hit.astype(float)
    once = calendar[calendar.name.map(recurring).lt(2) & calendar.name.isin(public_names)]
    if len(once) and total is None:
        columns["public holiday seen once"] = fit_index.isin(pd.DatetimeIndex(once.date)).astype(float)
    mu, keep, z, sd, unsure = fit(columns, y, counts, offset)
    learned: dict[str, pd.DatetimeIndex] = {}
    if (yearly or len(fit_index) > 180) and total is None:
        base_mu, _, z_base, base_sd, _ = fit(plain, y, counts)
        can_drop = dict(zip(fit_index, base_mu / base_sd > 2.5 if counts else np.ones(len(y), bool), strict=True))
        places: dict[str, list] = {}
        for day in fit_index:
            for key in calendar_keys(day):
                places.setdefault(key, []).append(day)
        if not yearly:
            places = {k: v for k, v in places.items() if k in MONTHLY or k.startswith("fiscal")}
        for _ in range(3):
            new = {k: w for k, w in recurring_offs(fit_index, z, z_base, can_drop, learned, places).items()
                   if k not in learned and k not in columns}
            if not new:
                break
            learned.update(new)
            for name, when in new.items():
                columns[f"learned: {name}"] = fit_index.isin(when).astype(float)
            mu, keep, z, sd, unsure = fit(columns, y, counts, offset)
    if learned:
        calendar = pd.concat(
            [calendar, pd.DataFrame([(d, f"{n} (learned)") for n, w in learned.items() for d in w], columns=["date", "name"])]
        ).sort_values("date").reset_index(drop=True)
    terms = "trend, weekday" + (", month, yearly wave" if yearly else " (under 2 years: no yearly pattern)")
    seen = f"; learned from the data as recurring: {', '.join(learned)}" if learned else ""
    description = (f"{terms}{', fiscal-period days' if fiscal_days else ''}, {recurring[recurring >= 2].size} "
                   f"recurring holidays and events ({where}){seen}; {int((~keep).sum())} day(s) left out as far off")
    return {"expected": pd.Series(mu, index=fit_index), "unsure": pd.Series(unsure, index=fit_index),
            "counts": counts, "model": description, "calendar": calendar, "learned": learned,
            "closed": pd.Series(s[closed], dtype=float),
            "groups": [np.asarray(v) != 0 for c, v in columns.items() if c not in plain and (np.asarray(v) != 0).sum() >= 12]}


def judge(s: pd.Series, who, total=None) -> dict:
    """A series' expectation and each period's one-sided tail probabilities."""
    if is_daily:
        s = s.asfreq("D", fill_value=0.0)
        out = day_model(s, who, total)
    else:
        neighbours = pd.concat([s.shift(k) for k in range(-6, 7) if k], axis=1)
        expected = neighbours.median(axis=1).dropna()
        out = {"expected": expected, "unsure": pd.Series(0.0, index=expected.index), "counts": bool(((s % 1 == 0) & (s >= 0)).all()),
               "model": "the median of the 6 periods either side", "calendar": pd.DataFrame(columns=["date", "name"]),
               "learned": {}, "closed": pd.Series(dtype=float)}
    expected = out["expected"]
    observed = s[expected.index]
    unsure = out["unsure"].to_numpy()
    if out["counts"]:
        y, mu = observed.to_numpy(), expected.clip(lower=1e-9).to_numpy()
        size = nb_size(y, mu)
        inverse = np.full(len(y), 0.0 if np.isinf(size) else 1 / size)
        for days in out.get("groups", []):  # a monthly term's days (contract starts, period starts): their own spread
            inverse[days] = np.maximum(inverse[days], 1 / nb_size(y[days], mu[days]))
        inverse += unsure
        day_size = np.where(inverse > 0, 1 / np.clip(inverse, 1e-12, None), 1e12)
        prob = day_size / (day_size + expected.to_numpy())
        low, high = stats.nbinom.cdf(observed, day_size, prob), stats.nbinom.sf(observed - 1, day_size, prob)
        out["method"] = "counts, Poisson" if np.isinf(size) else f"counts, negative binomial (size {size:.0f})"
        out["method"] += ", widened by the expectation's own uncertainty"
        out["size"] = size
    else:
        residual = np.log(observed.clip(lower=1e-9)) - np.log(expected.clip(lower=1e-9))
        scale = 1.4826 * (residual - residual.median()).abs().median()
        z = (residual - residual.median()) / np.sqrt(scale**2 + unsure)
        low, high = stats.norm.cdf(z), stats.norm.sf(z)
        out["method"] = "amounts, robust z of the log ratio"
        out["scale"], out["center"] = float(scale), float(residual.median())
    out.update(series=s, observed=observed, low=np.asarray(low), high=np.asarray(high))
    return out


series = {}
if entity:
    for who, part in frame.groupby(entity):
        one = part.set_index(date)[value].sort_index()
        if is_daily:
            one = one.reindex(pd.date_range(one.index.min(), high_all, freq="D"), fill_value=0.0)
        series[who] = one
    series["(all)"] = frame.groupby(date)[value].sum().sort_index()
else:
    series[None] = frame.set_index(date)[value].sort_index()
top = None if None in series else "(all)"
results = {top: judge(series.pop(top), top)}
results.update({who: judge(s, who, results[top] if is_daily else None) for who, s in series.items()})
n = sum(len(r["expected"]) for r in results.values())
per_year = 365.25 / (1 if is_daily else max(step_guess.days, 1))
alpha = float(globals().get("ALPHA", 0.01))
budget = 0.0 if "ALPHA" in globals() else float(globals().get("FALSE_ALARMS_PER_YEAR", 1))
bar = budget / per_year / len(results)
rule = (f"Bonferroni: a false alarm anywhere has a chance of {alpha:g} a side; outages (a drop of 75 % or more, a run "
        f"of zeros) at {budget:g} false alarm a year over the {len(results)} series (p < {bar:.2g}, a daily monitor's)")

rows, explained_rows = [], []
for who, r in results.items():
    expected, observed, s = r["expected"], r["observed"], r["series"]
    p_low, p_high = r["low"].copy(), r["high"]
    if r["counts"]:  # a run of zero days (a store closed) is one event: its chance is the product of its days'
        zero = observed.eq(0).to_numpy()
        run_id = np.cumsum(~zero | (expected.index.to_series().diff().dt.days != 1).to_numpy())
        for g in np.unique(run_id[zero]):
            run = zero & (run_id == g)
            p_low[run] = np.prod(p_low[run])
    names = r["calendar"].assign(period=r["calendar"].date.dt.strftime("%Y-%m-%d")).groupby("period").name.agg(", ".join)
    for d, v in r["closed"].items():
        explained_rows.append({"entity": who, "period": f"{d:%Y-%m-%d}", "value": v, "expected": 0.0,
                               "reason": "closed as expected (scheduled, or a holiday closed every year)"})
    due = (expected >= 1).to_numpy()  # a day with under one expected has nothing to lose: never a drop or an outage
    low_days = set(expected.index[due & ((p_low < alpha / n) | ((p_low < bar) & (observed <= 0.25 * expected).to_numpy()))])
    high_days = set(expected.index[p_high < alpha / n])
    catch = {}
    for d in sorted(low_days):
        shortfall, surplus, after = float(expected[d] - observed[d]), 0.0, []
        for k in (1, 2):
            nxt = d + pd.Timedelta(days=k)
            if nxt not in expected.index or observed[nxt] - expected[nxt] < 0.1 * shortfall or nxt in low_days:
                break
            surplus += float(observed[nxt] - expected[nxt])
            after.append(nxt)
        if after and shortfall > 0 and surplus >= 0.5 * shortfall:
            catch[d] = (after, round(surplus / shortfall, 3))
    caught = {a: d for d, (after, _) in catch.items() for a in after}
    for d in sorted(low_days | high_days | set(caught)):
        if d in caught:
            share = catch[caught[d]][1]
            explained_rows.append({"entity": who, "period": f"{d:%Y-%m-%d}", "value": float(observed[d]),
                                   "expected": round(float(expected[d]), 1),
                                   "reason": f"catch-up of the outage on {caught[d]:%Y-%m-%d} ({100 * share:.0f} % restored)"})
            continue
        same = s[(s.index < d) & (s.index >= d - pd.Timedelta(weeks=8)) & (s.index.day_of_week == d.day_of_week)]
        same = same[~same.index.isin(list(r["closed"].index))]
        typical = float(same.median()) if len(same) else float("nan")
        low_side = d in low_days
        finding = "drop" if low_side else "spike"
        if low_side and observed[d] <= 0.05 * expected[d]:
            finding = "closed (none)" if entity and who != "(all)" else "outage (none)"
        elif low_side and d in catch:
            finding = "outage with catch-up"
        v, e, day = float(observed[d]), float(expected[d]), f"{d:%Y-%m-%d}"
        rows.append([who, day, v, round(e, 1), round(v / e, 3), typical, round(v / typical, 3) if typical else np.nan,
                     "low" if low_side else "high", float((p_low if low_side else p_high)[expected.index.get_loc(d)]),
                     names.get(day, ""), finding, ", ".join(f"{a:%Y-%m-%d}" for a in catch[d][0])
                     + f" ({100 * catch[d][1]:.0f} % restored)" if d in catch else ""])
anomalies = pd.DataFrame(rows, columns=["entity", "period", "value", "expected", "ratio", "same_weekday",
                                        "ratio_same_weekday", "direction", "p", "holiday", "finding", "catch_up"])
explained = pd.DataFrame(explained_rows, columns=["entity", "period", "value", "expected", "reason"])
if entity:
    anomalies = anomalies.rename(columns={"entity": entity}).sort_values([entity, "period"], key=lambda c: c.astype(str))
    explained = explained.rename(columns={"entity": entity})
    expected = pd.concat([pd.DataFrame({entity: who, "period": r["expected"].index, "value": r["observed"].to_numpy(),
                                        "expected": r["expected"].to_numpy()}) for who, r in results.items()])
    main = results["(all)"]
else:
    anomalies, explained = anomalies.drop(columns="entity"), explained.drop(columns="entity")
    main = results[None]
    expected = main["expected"]
anomalies = anomalies.reset_index(drop=True)
anomalies.insert(anomalies.columns.get_loc("p") + 1, "p_corrected", (anomalies.p * n).clip(upper=1.0))
incomplete = None if partial is None else {"period": f"{partial[0]:%Y-%m-%d}", "value": float(partial[1])}
calendar = main["calendar"]
learned_all = sorted({k for r in results.values() for k in r["learned"]})
if any(k in MONTHLY for k in learned_all):
    warn("month starts/ends recur in the data: a billing day or fiscal calendar that PROFILE/EVENTS lack - give it")

typical = float(main["expected"].median())
size = main.get("size")
if main["counts"]:
    if np.isinf(size):
        floor = int(stats.poisson.ppf(max(bar, alpha / n), typical)) - 1
    else:
        floor = int(stats.nbinom.ppf(max(bar, alpha / n), size, size / (size + typical))) - 1
    if floor >= 0:
        detectable = f"a typical period (expected {typical:,.1f}) is flagged at {floor:,} or fewer"
    else:
        detectable = f"NOT DETECTABLE: even a typical period with none (expected {typical:,.1f}) is within chance - judge weeks"
else:
    drop = 1 - float(np.exp(stats.norm.ppf(max(bar, alpha / n)) * main["scale"] + main["center"]))
    detectable = f"a typical period is flagged {100 * drop:.0f} % or more below its expectation"
assumed = "Assumed: " + "; ".join(facts) + (f"; WARNINGS: {len(warnings)}" if warnings else "")
print(assumed)
print(
    f"{n:,} periods checked ({len(results)} series{f': each {entity} and the total' if entity else ''}) against "
    f"{main['model']}; {main['method']}; one-sided tests per direction, the bar: {rule}"
)
if learned_all and entity:
    print(f"learned as recurring: {', '.join(learned_all)}")
print(f"minimum detectable drop: {detectable}" + (f"; not tested: {incomplete} (incomplete)" if incomplete else ""))
print(anomalies.to_string(index=False) if len(anomalies) else "no anomaly: every period is within its expected range")
shut = explained.reason.str.startswith("closed as")
print(f"explained, not flagged: {int(shut.sum())} closed as expected (see `explained`)")
if (~shut).any():
    print(explained[~shut].to_string(index=False, max_rows=30))

anomalies
