"""Cohort retention on the business's calendar, with a cohort x calendar-period view (one period effect vs a cohort
effect). Run in run_python as:  PROFILE = {...}  SOURCE = "artifact_..."  [SUBSCRIPTIONS = "artifact_..."]  script.
PROFILE (business-profile): contractual, fiscal_calendar, store_timezone; the facts used are printed on the
`Assumed:` line (`assumed`). SOURCE: (a) events, one row per order / paid charge: customer_id, active_at,
acquired_at (optional), segment (optional) - cohorts and periods are built here from PROFILE (GRAIN "period" or
"quarter"; DATA_THROUGH, the exports' last day); or (b) counts from SQL: cohort, quarters_since (or periods_since /
months_since), active_customers, cohort_size, data_through, cohort_start. SUBSCRIPTIONS (contracts): customer_id,
started_at, ended_at (blank while live), converted (false: a trial never paid - left out). Output: `retention`
(%, cohorts x periods since acquisition: logo retention for subscriptions, else activity), `activity`,
`period_effects`, `cohort_effects` (flagged, finding), `outliers`, `findings`, `curve`, `fixed`, `trend`.
"""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats

CURVE_PERIODS = 8  # the average curve: periods 0..8, over the cohorts observed that long
PROFILE = globals().get("PROFILE") or {}
assumed_facts: list[str] = []
warnings_out: list[str] = []

contractual = PROFILE.get("contractual")
subs_in = globals().get("SUBSCRIPTIONS")
grain = str(globals().get("GRAIN") or "period").lower()
tz = PROFILE.get("store_timezone")
calendar = PROFILE.get("fiscal_calendar") or {}


def table(ref):
    return ref if ref is None or isinstance(ref, pd.DataFrame) else load_artifact(ref)  # noqa: F821


def local_day(values) -> pd.Series:
    """The date in the store's day (UTC offsets and Unix seconds converted to the store's time zone)."""
    raw = pd.Series(values)
    if pd.api.types.is_numeric_dtype(raw) and raw.dropna().between(9e8, 2.2e9).all():
        parsed = pd.to_datetime(raw, unit="s", utc=True)
    else:
        text = raw.astype("string")
        offset = text.str.contains(r"(?:[+-]\d{2}:?\d{2}|Z)$", regex=True, na=False).any()
        parsed = pd.to_datetime(raw, utc=True, format="mixed") if offset else pd.to_datetime(raw, format="mixed")
    if getattr(parsed.dt, "tz", None) is not None:
        if tz:
            parsed = parsed.dt.tz_convert(tz)
        elif "store_timezone" not in " ".join(warnings_out):
            warnings_out.append(
                "WARNING: timestamps carry UTC offsets but PROFILE has no store_timezone: dates are taken in UTC"
            )
        parsed = parsed.dt.tz_localize(None)
    return parsed.dt.normalize()


def fiscal_periods(lo: pd.Timestamp, hi: pd.Timestamp) -> pd.DataFrame:
    kind = calendar.get("kind") or "calendar-month"
    naming = calendar.get("year_naming")
    first = pd.Timestamp(calendar.get("first_day") or "2000-01-01")
    rows = []
    if kind in ("4-5-4", "4-4-5", "5-4-4"):
        weeks = [int(w) for w in kind.split("-")] * 4
        near = min((first + pd.offsets.MonthBegin(n)).normalize() for n in (0, 1))  # e.g. Sunday nearest 1 Feb
        near = near if abs((near - first).days) <= 3 else first

        def year_start(y: int) -> pd.Timestamp:  # first's weekday nearest the reference day of year y
            ref = near + pd.DateOffset(years=y - near.year)
            return ref - pd.Timedelta(days=(ref.weekday() - first.weekday() + 3) % 7 - 3)

        long_years = set()
        for y in range(lo.year - 1, hi.year + 2):
            start, nxt = year_start(y), year_start(y + 1)
            label = start.year if naming != "end_year" else (nxt - pd.Timedelta(days=1)).year
            if (nxt - start).days == 371:
                long_years |= {str(start.date()), str(label), f"FY{label}"}
            day = start
            for n, w in enumerate(weeks, 1):
                w += n == 12 and (nxt - start).days == 371  # the 53rd week goes into P12
                rows.append((day, day + pd.Timedelta(days=7 * w - 1), label, n))
                day += pd.Timedelta(days=7 * w)
        given = {str(x) for x in calendar.get("53_week_years") or []}
        if given - long_years:
            warnings_out.append(f"WARNING: PROFILE's 53-week years {sorted(given)} disagree with the calendar's rule "
                                f"({sorted(x for x in long_years if x[:1].isdigit() and '-' in x)}): check it")
    else:
        month0 = first.month
        for y in range(lo.year - 1, hi.year + 2):
            for n in range(12):
                start = pd.Timestamp(y, 1, 1) + pd.DateOffset(months=month0 - 1 + n)
                ystart = pd.Timestamp(y, month0, 1)
                label = ystart.year if naming != "end_year" else (ystart + pd.DateOffset(months=11)).year
                rows.append((start, start + pd.DateOffset(months=1) - pd.Timedelta(days=1), label, n + 1))
    out = pd.DataFrame(rows, columns=["start", "end", "fy", "p"]).drop_duplicates("start").sort_values("start")
    fiscal = bool(calendar) and (kind != "calendar-month" or first.month != 1)
    out["q"] = (out.p - 1) // 3 + 1
    if grain.startswith("q"):
        out = out.groupby(["fy", "q"], as_index=False).agg(start=("start", "min"), end=("end", "max"))
        out["label"] = [f"FY{y}-Q{q}" if fiscal else f"{s.year}-Q{s.quarter}" for y, q, s in zip(out.fy, out.q, out.start)]
    else:
        out["label"] = [f"FY{y}-P{p:02d}" if fiscal else f"{s:%Y-%m}" for y, p, s in zip(out.fy, out.p, out.start)]
    out = out[(out.end >= lo) & (out.start <= hi)].sort_values("start").reset_index(drop=True)
    return out[["label", "start", "end"]]


source = table(globals().get("SOURCE"))
subs = table(subs_in)
events_mode = source is None or "active_customers" not in source.columns

if contractual in (True, "mixed", "true") and subs is None:
    warnings_out.append(
        "WARNING: PROFILE says contractual but no SUBSCRIPTIONS given: this is ACTIVITY (a charge in the period), "
        "not retention - a paused or annual subscriber is not lost"
    )
if contractual is None:
    assumed_facts.append("contractual UNKNOWN (read as activity retention; run business-profile)")
else:
    assumed_facts.append(f"contractual={contractual}")

if events_mode:
    if not calendar:
        assumed_facts.append("calendar months (PROFILE has no fiscal_calendar)")
    else:
        if calendar.get("year_naming") is None:
            warnings_out.append(
                "WARNING: PROFILE's fiscal_calendar does not say how years are named: labelled by the year they start"
            )
        assumed_facts.append(
            f"fiscal calendar {calendar.get('kind')} from {calendar.get('first_day')}, years named by "
            f"{calendar.get('year_naming') or 'start_year (ASSUMED)'}"
        )
    assumed_facts.append(f"store time zone {tz or 'UTC (unknown)'}")
    dates = []
    if source is not None:
        source["active_at"] = local_day(source["active_at"])
        if "acquired_at" in source.columns:
            source["acquired_at"] = local_day(source["acquired_at"])
        dates += [source.active_at.min(), source.active_at.max()]
    if subs is not None:
        subs["started_at"] = local_day(subs["started_at"])
        subs["ended_at"] = local_day(subs["ended_at"]) if "ended_at" in subs.columns else pd.NaT
        dates += [subs.started_at.min(), subs.started_at.max(), subs.ended_at.max()]
    if "DATA_THROUGH" in globals():
        through = pd.Timestamp(DATA_THROUGH).normalize()  # noqa: F821 - from the cell
    else:
        through = max(d for d in dates if pd.notna(d))
        assumed_facts.append(f"data through {through.date()} (the latest date in the exports; else set DATA_THROUGH)")
    data_start = pd.Timestamp(globals().get("DATA_START") or dates[0]).normalize()  # the exports' first day
    periods = fiscal_periods(data_start, through)

    def ord_of(days: pd.Series) -> np.ndarray:
        return np.searchsorted(periods.start.to_numpy(), days.to_numpy(), side="right") - 1

    excluded = ""
    if subs is not None:
        if "converted" in subs.columns:
            conv = subs["converted"].astype(str).str.lower().isin(["true", "1", "yes"])
            trials = int((~conv).sum())
            excluded = f"{trials} trials that never converted are not customers and are left out"
            subs = subs[conv]
        else:
            warnings_out.append("WARNING: no `converted` column: unpaid trials, if any, count as churned customers")
        per = subs.groupby("customer_id").agg(started=("started_at", "min"), ended=("ended_at", "max"))
        live = subs.ended_at.isna().groupby(subs.customer_id).any()
        per.loc[live[live].index, "ended"] = pd.NaT
        per.loc[per.ended > through, "ended"] = pd.NaT  # a stop after the cut is not seen yet
        acquired = per.started
    else:
        acquired = source.groupby("customer_id")[
            "acquired_at" if "acquired_at" in source.columns else "active_at"
        ].min()
        if "acquired_at" not in source.columns:
            acquired = acquired[acquired >= data_start + pd.DateOffset(years=1)]
            excluded = "customers first seen in the data's first year are left out (left-censored: no acquisition date)"
        else:
            acquired = acquired[acquired >= periods.start[0]]
            excluded = f"customers acquired before {periods.start[0].date()} (the data's first period) are left out"
    cohort_ord = pd.Series(ord_of(acquired), index=acquired.index)
    cohort_ord = cohort_ord[cohort_ord >= 0]
    last_ord = int(ord_of(pd.Series([through]))[0])
    labels = periods.label.tolist()
    cohort_names = sorted(set(cohort_ord), key=int)
    size_by_ord = cohort_ord.value_counts()
    span = range(0, last_ord - min(cohort_names) + 1)

    def grid(counts: pd.Series) -> pd.DataFrame:  # {(cohort, period): customers} -> cohort x periods since
        m = pd.DataFrame(np.nan, index=[labels[c] for c in cohort_names], columns=list(span))
        for c in cohort_names:
            for k in range(0, last_ord - c + 1):
                m.loc[labels[c], k] = counts.get((c, c + k), 0)
        return m

    activity_counts = None
    if source is not None:
        ev = source[source.customer_id.isin(cohort_ord.index)][["customer_id", "active_at"]].copy()
        ev["c"] = ev.customer_id.map(cohort_ord)
        ev["p"] = ord_of(ev.active_at)
        activity_counts = grid(ev[ev.p >= ev.c].drop_duplicates(["customer_id", "p"]).groupby(["c", "p"]).size())
    if subs is not None:
        life = per.loc[cohort_ord.index]
        end_ord = pd.Series(np.where(life.ended.isna(), 10**6, ord_of(life.ended.fillna(through))), index=life.index)
        alive = {(c, c + k): int((end_ord[cohort_ord == c] > c + k).sum()) for c in cohort_names for k in span}
        matrix = grid(pd.Series(alive))  # still subscribed at the period's end
        what = "logo retention (subscribed at the period's end)"
    else:
        matrix = activity_counts
        what = "activity retention (an order/charge in the period)"
    sizes = pd.Series([size_by_ord[c] for c in cohort_names], index=matrix.index, dtype=float)
    cohort_ordinal = pd.Series(cohort_names, index=matrix.index)
    period_label = dict(enumerate(labels))
    period_start = dict(enumerate(periods.start))
    period_end = dict(enumerate(periods.end))
    grain_word = "quarter" if grain.startswith("q") else "period"
else:
    # (b) counts from SQL: cohorts 2024-Q1 (FY2025-Q1 with cohort_start)
    counts = source
    since = next(c for c in ("quarters_since", "periods_since", "months_since") if c in counts.columns)
    step = 1 if since == "months_since" else 3
    grain_word = "month" if step == 1 else "quarter"
    what = "activity retention (an order in the period)"
    excluded = ""
    assumed_facts.append("cohorts as labelled by the query" + (" (first days given)" if "cohort_start" in counts else ""))
    matrix = counts.pivot_table(index="cohort", columns=since, values="active_customers", aggfunc="sum")
    sizes = counts.groupby("cohort").cohort_size.max().reindex(matrix.index).astype(float)
    if "cohort_start" in counts.columns:  # the period's own first day: fiscal quarters are not calendar ones
        first_day = pd.to_datetime(counts.groupby("cohort").cohort_start.min()).reindex(matrix.index)
    else:
        try:
            first_day = pd.Series(
                [pd.Period(c.replace("-", ""), freq="Q" if step == 3 else "M").start_time for c in matrix.index],
                index=matrix.index,
            )
        except ValueError as e:
            raise ValueError(f"cohorts must read 2024-Q1 (got {matrix.index[0]}), else give cohort_start") from e
    months = first_day.dt.year * 12 + first_day.dt.month - 1
    base = int(months.min())
    cohort_ordinal = ((months - base) // step).astype(int)
    for k in range(int(max(matrix.columns)) + 1):
        if k not in matrix.columns:
            matrix[k] = np.nan
    matrix = matrix[sorted(matrix.columns)]
    matrix = matrix.loc[cohort_ordinal.sort_values(kind="stable").index]
    cohort_ordinal = cohort_ordinal.reindex(matrix.index)
    sizes = sizes.reindex(matrix.index)

    def first_of(m: int) -> pd.Timestamp:
        return pd.Timestamp(m // 12, m % 12 + 1, 1)

    top = int(cohort_ordinal.max()) + len(matrix.columns) + 1
    period_start = {o: first_of(base + step * o) for o in range(top)}
    period_end = {o: first_of(base + step * (o + 1)) - pd.Timedelta(days=1) for o in range(top)}
    if "cohort_start" in counts.columns or step == 1:
        period_label = {o: (f"the {grain_word} from {period_start[o].date()}" if step == 3 else f"{period_start[o]:%Y-%m}") for o in range(top)}
    else:
        period_label = {o: f"{period_start[o].year}Q{period_start[o].quarter}" for o in range(top)}
    # a covered period where nobody of a cohort bought has no row: 0 %, not missing
    newest = max(int(cohort_ordinal[c]) + int(k) for c in matrix.index for k in matrix.columns if pd.notna(matrix.loc[c, k]))
    for c in matrix.index:
        for k in matrix.columns:
            if pd.isna(matrix.loc[c, k]) and int(cohort_ordinal[c]) + int(k) <= newest:
                matrix.loc[c, k] = 0
    through = pd.Timestamp(counts.data_through.max()).normalize() if "data_through" in counts.columns else None
    last_ord = newest
    activity_counts = matrix

# ---- right-censoring: a period the data does not run to the end of is left out; unobserved cells are no losses ----
incomplete = ""
cells = {(c, k): int(cohort_ordinal[c]) + int(k) for c in matrix.index for k in matrix.columns if pd.notna(matrix.loc[c, k])}
if through is not None:
    cut = [(c, k) for (c, k), o in cells.items() if period_end[o] > through]
    for c, k in cut:
        matrix.loc[c, k] = np.nan
        if activity_counts is not None and c in activity_counts.index:
            activity_counts.loc[c, k] = np.nan
    if cut:
        o = max(cells[x] for x in cut)
        begins, finish = period_start[o], period_end[o]
        days, span_days = (through - begins).days + 1, (finish - begins).days + 1
        incomplete = (
            f"WARNING: the data ends {through.date()}, {days} of the {span_days} days of {period_label[o]}: that "
            f"{grain_word}'s {len(cut)} cells (each cohort's newest period, the newest cohort's period 0 too) are left "
            f"out of the matrix, the curve and the comparison - an incomplete {grain_word} reads as a drop"
        )
else:
    incomplete = "NOTE: no data_through column: whether the last period is complete is unknown (see SKILL.md)"
matrix = matrix.dropna(how="all")  # a cohort whose only period is cut short: no retention to show yet
sizes = sizes.reindex(matrix.index)
cohort_ordinal = cohort_ordinal.reindex(matrix.index)
retention = (matrix.div(sizes, axis=0) * 100).round(1)
assert (retention.fillna(0) <= 100).all().all(), "a cohort cannot have more active customers than members"
activity = (
    (activity_counts.reindex(matrix.index).div(sizes, axis=0) * 100).round(1)
    if activity_counts is not None
    else pd.DataFrame()
)

# ---- the average curve over ONE set of cohorts (those observed CURVE_PERIODS periods), size-weighted ----
last = matrix.notna().iloc[:, ::-1].idxmax(axis=1)
horizon = min(CURVE_PERIODS, int(last.max()))
fixed = last[last >= horizon].index
curve = (matrix.loc[fixed, range(horizon + 1)].sum() / sizes[fixed].sum() * 100).round(1)
curve.name = "avg_retention_pct"

# ---- are newer cohorts worse? period-1 retention across cohorts ----
first = retention[1].dropna() if 1 in retention.columns else pd.Series(dtype=float)
slope = float(np.polyfit(np.arange(len(first)), first.to_numpy(), 1)[0]) if len(first) >= 4 else float("nan")
spread = float(first.std()) if len(first) >= 4 else float("nan")
change = slope * (len(first) - 1)
if np.isnan(slope):
    trend = "too few cohorts to compare"
elif abs(change) <= max(5.0, 1.5 * spread):
    trend = f"newer cohorts retain about the same (period-1 retention {change:+.1f} points oldest to newest)"
else:
    trend = f"newer cohorts retain {'less' if change < 0 else 'more'} (period-1 retention {change:+.1f} points oldest to newest)"

# ---- cohort x calendar period: a dip in ONE calendar period across cohorts is one period effect ----
# Buyers: each cohort's active share in calendar period p against its own p-1 and p+1 (a dip); subscriptions: churn
# in the period against the daily churn all cohorts show at that age x the period's days (a spike); pooled. Flagged: pooled ratio <= 0.9 (churn >= 1.5), beyond Poisson chance (Bonferroni, 1 %), and still
# so with any one cohort left out (one big cohort's collapse is a cohort effect, not a period's).
contract_rows = subs is not None if events_mode else False
if contract_rows:
    at_risk = pd.concat([sizes.rename(-1), matrix], axis=1).shift(axis=1).drop(columns=-1)
    share = 1 - matrix / at_risk  # churn in the period
else:
    at_risk = matrix.notna().mul(sizes, axis=0).where(matrix.notna())
    share = matrix / at_risk
by_period: dict[int, list[tuple[str, float, float]]] = {}
days = {o: (period_end[o] - period_start[o]).days + 1 for o in period_end}
length = pd.DataFrame({k: [days.get(o + k, np.nan) for o in cohort_ordinal] for k in matrix}, index=matrix.index)
hazard = (at_risk - matrix).sum() / (at_risk * length).sum()  # subscriptions: churn a day at each age, all cohorts
for c in matrix.index:
    for k in matrix.columns[0 if contract_rows else 2 : -1]:
        here, near = share.loc[c, k], share.loc[c, [k - 1, k + 1]] if k else share.loc[c, [k + 1]]
        base = hazard[k] * length.loc[c, k] if contract_rows else near.mean()
        if pd.notna(here) and near.notna().all() and at_risk.loc[c, k] > 0:
            by_period.setdefault(int(cohort_ordinal[c]) + k, []).append((c, here * at_risk.loc[c, k], base * at_risk.loc[c, k]))
cols = ["period", "period_start", "period_end", "cohorts", "ratio", "ratio_leave_one_out", "observed", "expected"]
rows = []
for o, items in sorted(by_period.items()):
    obs, exp = np.array([x for _, x, _ in items]), np.array([e for *_, e in items])
    loo = (obs.sum() - obs) / np.maximum(exp.sum() - exp, 1e-9)
    tail = stats.poisson.sf(obs.sum() - 1, exp.sum()) if contract_rows else stats.poisson.cdf(obs.sum(), exp.sum())
    span_o = (period_label[o], period_start[o].date(), period_end[o].date(), len(items))
    rows.append((*span_o, round(obs.sum() / max(exp.sum(), 1e-9), 3), round(loo.min() if contract_rows else loo.max(), 3), obs.sum(), exp.sum(), tail, o))
period_effects = pd.DataFrame(rows, columns=[*cols, "p_value", "ordinal"])
pe = period_effects
far_off = (pe.ratio_leave_one_out >= 1.5) if contract_rows else (pe.ratio_leave_one_out <= 0.9)
pe["flagged"] = (pe.cohorts >= 3) & far_off & (pe.p_value * len(pe) < 0.01)
period_effects["finding"] = np.where(period_effects.flagged, "period effect (one calendar period, all cohorts)", "")

# A flagged period's cells are divided by its ratio (the one without the cohort that moves it most) before cohorts
# are compared: a calendar effect is no cohort's own.
factor = {int(r.ordinal): float(r.ratio_leave_one_out) for r in period_effects.itertuples() if r.flagged}
adjusted = share.copy()
for c in matrix.index:
    for k in matrix.columns:
        o = int(cohort_ordinal[c]) + int(k)
        if o in factor and pd.notna(adjusted.loc[c, k]):
            adjusted.loc[c, k] = min(1.0, adjusted.loc[c, k] / factor[o])
adjusted = 1 - adjusted if contract_rows else adjusted
level = (adjusted.cumprod(axis=1) if contract_rows else adjusted) * 100
level = level.where(matrix.notna())
level_counts = (level / 100).mul(sizes, axis=0)

# ---- cohort effects: short of the other cohorts at the same age in at least TWO complete calendar periods: more
# than 10 points and 3 robust deviations (beyond binomial noise) under their median, and beyond chance (binomial
# against the others' pooled rate, Bonferroni over every cell compared, 1 %) ----
outliers: dict[str, tuple[float, float, int]] = {}
far: dict[str, list[tuple[int, float, float]]] = {}
compared = [(c, k) for k in level.columns if k >= 1 and level[k].notna().sum() >= 4 for c in level[k].dropna().index]
fits: dict[frozenset, tuple[dict, dict, float]] = {}


def two_way(left_out: frozenset) -> tuple[dict, dict, float]:
    """Activity: active ~ cohort size x an age effect x a calendar-period effect (a Poisson log-linear fit by
    alternating means) over the cohorts not left out, and its overdispersion (Pearson chi-square per cell, at least
    1, robust). Cohorts at the same age sit in different calendar periods - a holiday quarter, a slow one - so the spread
    of their shares is mostly the calendar's: a cohort is compared with what its age AND its periods predict."""
    if left_out in fits:
        return fits[left_out]
    obs = {(c, k): float(matrix.loc[c, k]) for c, k in compared if c not in left_out}
    size = {(c, k): float(sizes[c]) for c, k in obs}
    when = {(c, k): int(cohort_ordinal[c]) + int(k) for c, k in obs}
    age = {k: 1.0 for _, k in obs}
    cal = {o: 1.0 for o in when.values()}
    for _ in range(50):
        num, den = {}, {}
        for x, o in when.items():
            num[o] = num.get(o, 0.0) + obs[x]
            den[o] = den.get(o, 0.0) + size[x] * age[x[1]]
        cal = {o: num[o] / den[o] if den[o] > 0 else 1.0 for o in num}
        num, den = {}, {}
        for x, o in when.items():
            num[x[1]] = num.get(x[1], 0.0) + obs[x]
            den[x[1]] = den.get(x[1], 0.0) + size[x] * cal[o]
        age = {k: num[k] / den[k] if den[k] > 0 else 0.0 for k in num}
    chi = [
        (obs[x] - e) ** 2 / max(e * (1 - min(e / size[x], 0.999)), 1e-9)
        for x, e in ((x, size[x] * age[x[1]] * cal[when[x]]) for x in obs)
    ]
    dof = len(obs) - len(age) - len(cal) + 1
    # the median cell's chi-square over chi-square(1)'s median (0.455): one collapsed cohort among them does not
    # inflate the noise every other cohort is judged against
    fits[left_out] = (age, cal, max(1.0, float(np.median(chi)) / 0.455) if dof > 0 else float("nan"))
    return fits[left_out]


# two passes: the second fits the expectation without every cohort the first found off anywhere (a collapsed
# cohort in the fit would be spread over its calendar periods and hide another)
suspects: set = set()
for _pass in (0, 1):
    outliers.clear()
    far.clear()
    for k in sorted({k for _, k in compared}):
        column = level[k].dropna()
        for cohort, value_k in column.items():
            others = column.drop(index=[cohort, *[c for c in outliers if c in column.index]])  # a collapse is no norm
            if len(others) < 3:
                continue
            if not contract_rows:  # activity: against its age and its calendar periods (two_way), beyond overdispersion
                age, cal, phi = two_way(frozenset([cohort, *outliers, *suspects]))
                o = int(cohort_ordinal[cohort]) + int(k)
                if k not in age or o not in cal or not np.isfinite(phi):
                    continue
                size = float(sizes[cohort])
                expected = min(size * age[k] * cal[o], size)
                active, norm = float(matrix.loc[cohort, k]), 100 * expected / size
                value_k = 100 * active / size
                z = (active - expected) / np.sqrt(max(phi * expected * (1 - expected / size), 1e-9))
                if norm - value_k > 10.0 and stats.norm.cdf(z) * len(compared) < 0.01:
                    far.setdefault(cohort, []).append((int(k), float(value_k), float(norm)))
                    if len(far[cohort]) >= 2 and cohort not in outliers:
                        k0, v0, t0 = far[cohort][0]
                        outliers[cohort] = (round(v0, 1), round(t0, 1), k0)
                continue
            if cohort not in outliers and k + 1 in level.columns and pd.notna(level.loc[cohort, k + 1]):
                # contracts: a churn spike at one age - this cohort's cancellations in the period against the other
                # cohorts' at the same age (times the calendar period's factor when it is a period effect), binomial,
                # Bonferroni, 1 %, at least 10 points of the cohort lost beyond them - is a cohort effect when its
                # logo retention is still 10 points short a period later (lost logos do not come back by chance)
                rest = [c for c in others.index if pd.notna(at_risk.loc[c, k])]
                lost = (at_risk - matrix).loc[rest, k].sum()
                rate = min(
                    0.999,
                    lost / max(at_risk.loc[rest, k].sum(), 1e-9) * factor.get(int(cohort_ordinal[cohort]) + int(k), 1.0),
                )
                n_k = int(at_risk.loc[cohort, k])
                d_k = int(round(n_k - matrix.loc[cohort, k]))
                later = level[k + 1].drop(index=[cohort, *[c for c in outliers if c in level.index]]).dropna()
                if (
                    len(later) >= 3
                    and d_k - n_k * rate >= 0.10 * sizes[cohort]
                    and stats.binom.sf(d_k - 1, n_k, rate) * len(compared) < 0.01
                    and later.median() - level.loc[cohort, k + 1] >= 10.0
                ):
                    far[cohort] = [
                        (int(k), float(value_k), float(others.median())),
                        (int(k) + 1, float(level.loc[cohort, k + 1]), float(later.median())),
                    ]
                    outliers[cohort] = (round(float(value_k), 1), round(float(others.median()), 1), int(k))
                    continue
            noise = others.median() * (100 - others.median()) / sizes[others.index].median()  # binomial, points^2
            spread_k = np.sqrt(max(0.0, (1.4826 * float((others - others.median()).abs().median())) ** 2 - noise))
            if others.median() - value_k <= max(10.0, 3 * spread_k):
                continue
            rest = list(others.index)
            pooled = float(level_counts.loc[rest, k].sum() / sizes[rest].sum())
            active, size = int(round(level_counts.loc[cohort, k])), int(sizes[cohort])
            if value_k < others.median() and stats.binom.cdf(active, size, pooled) * len(compared) < 0.01:
                far.setdefault(cohort, []).append((int(k), float(value_k), float(others.median())))
                if len(far[cohort]) >= 2 and cohort not in outliers:
                    k0, v0, t0 = far[cohort][0]
                    outliers[cohort] = (round(v0, 1), round(t0, 1), k0)
    suspects = set(far)

cohort_effects = pd.DataFrame(
    [(c, [k for k, *_ in far.get(c, [])], *(far[c][0][1:] if c in far else (None, None))) for c in level.index],
    columns=["cohort", "far_periods", "retention_pct", "others_median_pct"],
)
cohort_effects["flagged"] = cohort_effects.cohort.isin(list(outliers))
once = cohort_effects.far_periods.str.len() == 1
cohort_effects["finding"] = np.where(cohort_effects.flagged, "cohort effect (persists)", np.where(once, "one period only", ""))

# ---- findings, one table ----
found = [("period effect", r.period, r.ratio, None) for r in pe[pe.flagged].itertuples()]
found += [("cohort effect", c, round(v / 100, 4), k) for c, (v, t, k) in outliers.items()]
findings = pd.DataFrame(found, columns=["kind", "entity", "value", "period"]).assign(flagged=True)

assumed = "Assumed: " + "; ".join(assumed_facts) + f"; measure = {what}" + (f"; {excluded}" if excluded else "")
print(assumed)
for line in warnings_out:
    print(line)
for r in period_effects[period_effects.flagged].itertuples():
    print(
        f"PERIOD EFFECT: {r.period} ({r.period_start}..{r.period_end}): {'churn' if contract_rows else 'activity'} "
        f"x{r.ratio:.2f} of expected over {r.cohorts} cohorts (x{r.ratio_leave_one_out:.2f} without any one): ONE "
        "calendar effect, not a finding per cohort - name what happened in it"
    )
for cohort, (lv, typ, k) in outliers.items():
    print(
        f"WARNING: cohort {cohort} retains {lv:.1f} % at period {k} against {typ:.1f} % for the other cohorts"
        + (" (it collapsed after a normal start)" if k > 1 else "")
        + ", and stays off in later calendar periods: a cohort effect (a campaign, a coupon?), not part of 'about the same'"
    )
if once.any():
    print("off in one calendar period only (not cohort effects):", ", ".join(map(str, cohort_effects.cohort[once])))
if len(sizes) >= 4 and sizes.iloc[0] > 1.5 * sizes.iloc[1:5].median():
    print(
        f"WARNING: the first cohort ({sizes.index[0]}: {int(sizes.iloc[0])}) is over 1.5x the next ones: it holds "
        "customers who bought before the data starts (left-censoring); cohort by signup date"
    )
if incomplete:
    print(incomplete)
print("cohort sizes:", sizes.astype(int).to_dict())
print(
    f"average {what} by periods since acquisition (%), over the {len(fixed)} cohorts observed "
    f"{horizon} periods ({fixed[0]}..{fixed[-1]}):",
    curve.to_dict(),
)
print("cohorts compared:", trend)
if contract_rows:
    print("`activity` (a charge in the period) is beside it: NOT retention for subscriptions (see subscription_survival.py)")

fig, ax = plt.subplots(figsize=(9, 5))
im = ax.imshow(retention.values, aspect="auto", cmap="Blues", vmin=0, vmax=100)
ax.set_xticks(range(len(retention.columns)), retention.columns)
ax.set_yticks(range(len(retention.index)), retention.index)
ax.set_xlabel("periods since acquisition")
ax.set_ylabel("cohort")
ax.set_title(f"{what[0].upper()}{what[1:]} by cohort (%)")
fig.colorbar(im, ax=ax)
retention
