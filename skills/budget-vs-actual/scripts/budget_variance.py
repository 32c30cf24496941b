"""Budget (plan) vs actual: the variance, the plan's own bias, and the cell misses beyond their own noise.

Input: SOURCE, the id of a table artifact with plan and actual per period and cell: the columns plan, actual,
the cell's dimensions (any text columns: region, category; department; segment …; or set DIMENSIONS), and the
period in one of three forms — the plan's own period_start and period_end (dates; best: a 4-5-4 period is as
long as the plan says), or fiscal_year and period (FY2025 / P4, dates taken from PROFILE's fiscal calendar), or
month (calendar months). data_through (a column, or DATA_THROUGH) is the last day the actuals cover.
PROFILE (from business-profile) gives fiscal_calendar {kind, first_day, year_naming start_year/end_year,
53_week_years}. Run in run_python as:  PROFILE = {...}  SOURCE = "artifact_..."  then this script.

Method:
- Completeness from the plan's own period ends: a period is judged only when its end is on or before
  data_through. A period under way is never a miss — it is left out and shown pro-rata (elapsed days of its
  own length); a period not started is left out. Quarters and years are compared on their complete periods.
- The plan's bias, reported once: the median across cells of actual / plan - 1 (each cell over its complete
  periods; across cell-periods when there are fewer than 5 cells). When it is beyond chance and at least
  BIAS_MIN (1 %), it is the plan's (a uniform stretch), said in one PLAN BIAS line, and each cell is judged
  against plan x (1 + bias) — `residual` — not against the raw plan.
- Noise from the cells' historical forecast error: residual / sqrt(plan) per cell-period; its robust scale
  (MAD) over all cells, and each cell's own (the spread of its period-to-period changes outside the periods
  judged), shrunk toward the pooled one — a lumpy cell is not a miss for being lumpy. A cell-quarter (and a
  cell's year to date) is flagged only when |residual| is beyond THRESHOLD (4) noise units AND at least
  MATERIALITY (5 %) of its plan (and MATERIALITY_ABS, default 0).
- A miss and an overrun of the same cell in neighbouring quarters that cancel (within a third) are one TIMING
  shift. The largest real miss is named on the plan's own dimensions (LARGEST MISS), with its worst period.
- Fiscal years are labelled as the company names them (year_naming: by the calendar year they start or end in).
Output: `cells` (quarter x cell) as the cell's value; kept: `flags`, `misses`, `overruns`, `period_cells`,
`year_cells`, `noise`, `bias`, `left_out`, `partial`, `timing`, `largest`, `assumed`, `planned`.
"""

import itertools

import numpy as np
import pandas as pd

PROFILE = globals().get("PROFILE") or {}
threshold = 4  # noise units a gap must exceed (THRESHOLD overrides; a saved analysis may make it a parameter)
threshold = float(globals().get("THRESHOLD", threshold))
materiality = float(globals().get("MATERIALITY", 0.05))
materiality_abs = float(globals().get("MATERIALITY_ABS", 0))
bias_min = float(globals().get("BIAS_MIN", 0.01))
cal = dict(PROFILE.get("fiscal_calendar") or {})
kind = cal.get("kind")
naming = cal.get("year_naming")
warnings: list[str] = []

data = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
data.columns = [str(c) for c in data.columns]
for c in ("plan", "actual"):
    data[c] = pd.to_numeric(data[c].astype(str).str.replace(r"[^\d.\-eE]", "", regex=True), errors="coerce").fillna(0)
KNOWN = {"month", "period", "fiscal_year", "period_start", "period_end", "data_through", "plan", "actual", "weeks"}
dims = list(
    globals().get("DIMENSIONS")
    or [
        c
        for c in data.columns
        if c not in KNOWN
        and not pd.api.types.is_numeric_dtype(data[c])
        and not pd.api.types.is_datetime64_any_dtype(data[c])
    ]
)
if not dims:
    data["cell"], dims = "all", ["cell"]
data[dims] = data[dims].fillna("(none)").astype(str)


def _weeks(k):
    return [int(w) for w in k.split("-")] * 4 if k in ("4-5-4", "4-4-5", "5-4-4") else None


def _long(start, label_start, label_end):
    listed = {str(y).replace("FY", "").strip() for y in cal.get("53_week_years") or []}
    return str(start.date()) in listed or str(label_start if naming == "start_year" else label_end) in listed


def fiscal_label(start, end):
    """A fiscal year's name: by the calendar year it starts in or ends in, as the company names it."""
    if start.month == 1 and start.day <= 7 and end.year == start.year:
        return str(start.year)  # the calendar year: no naming question
    return f"FY{start.year if naming == 'start_year' else end.year}"


def calendar_periods():
    """Every period of the company's calendar (PROFILE), 15 years each side of its first day."""
    first = pd.Timestamp(cal["first_day"])
    pattern = _weeks(kind)
    rows = []
    if pattern is None:  # calendar months from the first day's month
        for y in range(-15, 16):
            start = first + pd.DateOffset(years=y)
            end = start + pd.DateOffset(years=1) - pd.Timedelta(days=1)
            label = fiscal_label(start, end)
            for n in range(12):
                s = start + pd.DateOffset(months=n)
                rows.append((label, n + 1, s, s + pd.offsets.MonthEnd(0), start))
        return pd.DataFrame(rows, columns=["fy", "n", "start", "end", "fy_start"])
    starts = [first]
    for _ in range(15):  # forward: a year is 53 weeks when the profile lists it
        s = starts[-1]
        e52 = s + pd.Timedelta(weeks=52) - pd.Timedelta(days=1)
        starts.append(s + pd.Timedelta(weeks=53 if _long(s, s.year, e52.year) else 52))
    for _ in range(15):
        s = starts[0] - pd.Timedelta(weeks=52)
        starts.insert(0, s - pd.Timedelta(weeks=1) if _long(s - pd.Timedelta(weeks=1), s.year, s.year + 1) else s)
    for s, nxt in itertools.pairwise(starts):
        label = fiscal_label(s, nxt - pd.Timedelta(days=1))
        weeks = list(pattern)
        weeks[-1] += (nxt - s).days // 7 - sum(pattern)  # the 53rd week goes to the last period
        at = s
        for n, w in enumerate(weeks):
            rows.append((label, n + 1, at, at + pd.Timedelta(weeks=w) - pd.Timedelta(days=1), s))
            at += pd.Timedelta(weeks=w)
    return pd.DataFrame(rows, columns=["fy", "n", "start", "end", "fy_start"])


can_generate = bool(kind and cal.get("first_day"))
if not kind:
    warnings.append(
        "the fiscal calendar is UNKNOWN (PROFILE fiscal_calendar: run business-profile first) — periods are taken "
        "from the data as they are"
    )
if naming is None:
    warnings.append(
        "how fiscal years are named is UNKNOWN (PROFILE fiscal_calendar.year_naming) — labels assume the year "
        "they END in; ask the user"
    )

# The periods: the plan's own start and end dates first; else the company's calendar; else calendar months.
period_source = "months (calendar)"
if {"period_start", "period_end"} <= set(data.columns):
    period_source = "period start and end dates"
    data["start"] = pd.to_datetime(data["period_start"]).dt.normalize()
    data["end"] = pd.to_datetime(data["period_end"]).dt.normalize()
    lengths = ((data["end"] - data["start"]).dt.days + 1).unique()
    if (kind == "calendar-month" and (lengths > 31).any()) or (_weeks(kind) and (lengths < 28).any()):
        warnings.append(f"CONTRADICTION: PROFILE says {kind} but the plan's periods last {sorted(lengths)} days")
    if can_generate:
        known = calendar_periods()
        found = data[["start"]].drop_duplicates().merge(known, on="start", how="left")
        if found["fy"].isna().any():
            warnings.append("CONTRADICTION: some of the plan's periods do not start on a period of PROFILE's calendar")
        data = data.merge(found[["start", "fy", "n", "fy_start"]], on="start", how="left")
    if "fiscal_year" in data.columns:  # the plan's own year names win
        named = data["fiscal_year"].astype(str).str.strip()
        data["fy"] = np.where(named.str.upper().str.startswith("FY"), named.str.upper(), "FY" + named)
    if "fy" not in data.columns or data["fy"].isna().any():
        raise ValueError("the fiscal year of each period is unknown: give fiscal_year or PROFILE fiscal_calendar")
    if "n" not in data.columns or data["n"].isna().any():
        data["n"] = data.groupby("fy")["start"].rank(method="dense").astype(int)
    data["label"] = data["fy"] + " P" + data["n"].astype(int).astype(str)
elif {"fiscal_year", "period"} <= set(data.columns):
    period_source = "names, dated by PROFILE's calendar"
    if not can_generate or naming is None:
        raise ValueError(
            "the plan names its periods (fiscal_year, period) without dates: their start and end come from the "
            "fiscal calendar, which is UNKNOWN — run business-profile and pass PROFILE with fiscal_calendar "
            "{kind, first_day, year_naming, 53_week_years}, or give period_start and period_end"
        )
    named = data["fiscal_year"].astype(str).str.strip().str.upper()
    data["fy"] = np.where(named.str.startswith("FY"), named, "FY" + named)
    data["n"] = data["period"].astype(str).str.extract(r"(\d+)")[0].astype(int)
    data = data.merge(calendar_periods(), on=["fy", "n"], how="left")
    if data["start"].isna().any():
        raise ValueError("some (fiscal_year, period) are not in PROFILE's calendar: check year_naming")
    data["label"] = data["fy"] + " P" + data["n"].astype(str)
else:
    data["start"] = pd.to_datetime(data["month"]).dt.to_period("M").dt.start_time
    data["end"] = data["start"] + pd.offsets.MonthEnd(0)
    if _weeks(kind):
        warnings.append(
            f"CONTRADICTION: PROFILE says a {kind} calendar but the plan is by calendar month — compared by month"
        )
    from_profile = pd.Timestamp(cal["first_day"]).month if can_generate and kind == "calendar-month" else 1
    first_month = int(globals().get("FISCAL_YEAR_START") or from_profile)
    fy_start = pd.to_datetime(
        {
            "year": data["start"].dt.year - (data["start"].dt.month < first_month).astype(int),
            "month": first_month,
            "day": 1,
        }
    )
    data["fy_start"] = fy_start
    data["fy"] = [fiscal_label(s, s + pd.DateOffset(years=1) - pd.Timedelta(days=1)) for s in fy_start]
    data["n"] = (data["start"].dt.month - first_month) % 12 + 1
    data["label"] = data["start"].dt.strftime("%Y-%m")
    kind = kind or "calendar-month"
data["quarter"] = data["fy"] + "-Q" + ((data["n"].astype(int) - 1) // 3 + 1).astype(str)

# Completeness from the plan's own period ends.
through = globals().get("DATA_THROUGH") or (data["data_through"].max() if "data_through" in data.columns else None)
left_out: list[str] = []
partial = pd.DataFrame(columns=["period", "elapsed_days", "days", "plan", "actual", "pro_rata_variance_pct"])
if through is not None and pd.notna(through):
    through = pd.Timestamp(through).tz_localize(None).normalize()
    data["complete"] = data["end"] <= through
    under_way = data[(data["start"] <= through) & ~data["complete"]]
    if len(under_way):
        partial = under_way.groupby("label", as_index=False).agg(
            start=("start", "min"), end=("end", "max"), plan=("plan", "sum"), actual=("actual", "sum")
        )
        partial["days"] = (partial["end"] - partial["start"]).dt.days + 1
        partial["elapsed_days"] = (through - partial["start"]).dt.days + 1
        expected = partial["plan"] * partial["elapsed_days"] / partial["days"]
        partial["pro_rata_variance_pct"] = (100 * (partial["actual"] / expected.where(expected > 0) - 1)).round(1)
        partial = partial.rename(columns={"label": "period"})[
            ["period", "elapsed_days", "days", "plan", "actual", "pro_rata_variance_pct"]
        ]
    left = data[~data["complete"]]
    left_out = sorted(left["label"].unique(), key=lambda x: data.loc[data.label == x, "start"].min())
    left_plan = left["plan"].sum()
    data = data[data["complete"]].copy()
else:
    warnings.append(
        "no data_through: every period is compared as if complete (a period under way reads as a miss) — give "
        "data_through"
    )
data["variance"] = data.actual - data.plan
planned = data[data.plan > 0].copy()
unplanned = data[data.plan <= 0].actual.sum()

# The plan's bias: the median variance across cells (each cell over its complete periods; with fewer than 5 cells,
# across cell-periods), reported once when it is beyond chance and material.
by_cell = planned.groupby(dims)[["actual", "plan"]].sum()
ratio = by_cell.actual / by_cell.plan - 1 if len(by_cell) >= 5 else planned.actual / planned.plan - 1
median = float(ratio.median()) if len(ratio) else 0.0
spread = float(1.4826 * (ratio - median).abs().median()) if len(ratio) else 0.0
se = 1.2533 * spread / np.sqrt(max(len(ratio), 1))
bias = median if abs(median) >= bias_min and abs(median) > 2 * se else 0.0
data["residual"] = data.actual - data.plan * (1 + bias)
planned["residual"] = data.loc[planned.index, "residual"]

# Noise: the cells' historical forecast error, residual / sqrt(plan) per cell-period. Pooled: its robust scale over
# every cell-period. A cell's own: the spread of its period-to-period changes outside the periods judged (a level
# shift moves one change, not the spread; the miss judged does not widen its own yardstick), shrunk toward the
# pooled one by a year of changes (12): a dozen changes measure a spread only roughly.
planned["unit"] = planned.residual / np.sqrt(planned.plan)
noise = float(1.4826 * (planned.unit - planned.unit.median()).abs().median()) if len(planned) else 0.0
histories = {
    (key if isinstance(key, tuple) else (key,)): part.sort_values("start")[["label", "unit"]]
    for key, part in planned.groupby(dims)
}


def cell_noise(key, judged_labels):
    history = histories[key]
    changes = history[~history.label.isin(judged_labels)].unit.diff().dropna()
    if len(changes) < 5:
        return noise
    own = 1.4826 * (changes - changes.median()).abs().median() / np.sqrt(2)
    return float(np.sqrt((len(changes) * own**2 + 12 * noise**2) / (len(changes) + 12)))


def judged(frame, keys, leave_out=True):
    out = frame.groupby(keys, as_index=False).agg(
        plan=("plan", "sum"),
        actual=("actual", "sum"),
        variance=("variance", "sum"),
        residual=("residual", "sum"),
        periods=("label", "nunique"),
        start=("start", "min"),
        labels=("label", lambda x: set(x)),
    )
    out["cell_noise"] = [
        cell_noise(tuple(r[d] for d in dims), r["labels"] if leave_out else set()) for _, r in out.iterrows()
    ]
    out = out.drop(columns="labels")
    out["variance_pct"] = (100 * out.variance / out.plan.where(out.plan > 0)).round(1)
    out["residual_pct"] = (100 * out.residual / out.plan.where(out.plan > 0)).round(1)
    out["z"] = (out.residual / (out.cell_noise * np.sqrt(out.plan.where(out.plan > 0)))).round(1)
    out["flag"] = (
        (out.z.abs() > threshold)
        & (out.residual.abs() >= materiality * out.plan)
        & (out.residual.abs() >= materiality_abs)
    )
    return out


period_cells = judged(planned, ["label", "fy", *dims])
cells = judged(planned, ["quarter", "fy", *dims]).sort_values(["start", *dims]).reset_index(drop=True)
cells["months" if kind == "calendar-month" else "periods"] = cells.pop("periods")
year_cells = judged(planned, ["fy", *dims], leave_out=False)
flags = cells[cells.flag].sort_values("residual").reset_index(drop=True)
misses, overruns = flags[flags.residual < 0], flags[flags.residual > 0]

plan, actual = planned.plan.sum(), planned.actual.sum()
last = planned.sort_values("end")["label"].iloc[-1] if len(planned) else "-"
cell_name = " x ".join(dims)
assumed = (
    f"Assumed: fiscal calendar {kind or 'UNKNOWN'}"
    + (f" from {cal['first_day']}" if cal.get("first_day") else "")
    + f", years named by their {'start' if naming == 'start_year' else 'end'} year"
    + ("" if naming else " (UNKNOWN: ask)")
    + (f", 53-week years {cal['53_week_years']}" if cal.get("53_week_years") else "")
    + "; periods from the plan's own "
    + period_source
    + f"; data through {through.date() if through is not None and pd.notna(through) else 'UNKNOWN'}"
    + f"; cells are {cell_name}; a miss is beyond {threshold:g} noise units and {100 * materiality:g} % of its plan"
)
for line in warnings:
    print("WARNING:", line)
print(assumed)
print(
    f"through {last}: plan {plan:,.0f}  actual {actual:,.0f}  variance {actual - plan:+,.0f} "
    f"({100 * (actual - plan) / plan:+.1f} %)"
)
if left_out:
    print(
        f"left out as incomplete (the data ends {through.date()}): {', '.join(left_out)} — their plan "
        f"{left_plan:,.0f} is not compared; a quarter is compared on its complete periods"
    )
for p in partial.itertuples():
    print(
        f"PARTIAL: {p.period} is under way ({p.elapsed_days} of {p.days} days elapsed): not a miss, not judged; "
        f"pro rata actual {p.actual:,.0f} vs plan {p.plan * p.elapsed_days / p.days:,.0f} "
        f"({p.pro_rata_variance_pct:+.1f} %, days elapsed only: timing within a period is not even)"
    )
if unplanned:
    print(f"unplanned actuals (no plan for their cell): {unplanned:,.0f}")
if bias:
    print(
        f"PLAN BIAS: actuals run {100 * bias:+.1f} % against plan in the median of {len(ratio)} "
        + ("cells" if len(by_cell) >= 5 else "cell-periods")
        + f" (+-{100 * se:.1f} %) — the plan's bias (a uniform stretch), reported once; every cell is judged "
        f"against plan x {1 + bias:.3f}"
    )
else:
    print(
        f"no plan bias: the median cell-period variance is {100 * median:+.1f} % (+-{100 * se:.1f} %: within "
        f"chance, or below {100 * bias_min:g} %)"
    )
for by in dims:
    table = planned.groupby(by)[["plan", "actual", "variance", "residual"]].sum().sort_values("residual")
    table["variance_pct"] = (100 * table.variance / table.plan).round(1)
    print(table.round(0).to_string())
print(
    f"noise: a cell-period's residual is typically +-{noise:.1f} x sqrt(plan) (a noisier cell: its own); flagged "
    f"beyond {threshold:g}x and {100 * materiality:g} % of plan"
)
show = ["quarter", *dims, "plan", "actual", "variance", "residual", "residual_pct", "z"]
if len(misses):
    print("misses beyond normal variation:")
    print(misses[show].round(1).to_string(index=False))
if len(overruns):
    print("overruns beyond normal variation:")
    print(overruns[show].round(1).to_string(index=False))
if not len(flags):
    print("no miss or overrun beyond normal variation: the gaps are within what the cells' forecast error explains")

# Timing: a cell's miss in one quarter and overrun in the next (or the reverse) of about the same size is one
# deal booked late or early, not two findings; the year to date shows that it nets out.
order = list(cells.sort_values("start").quarter.unique())
timing = []
for key, own_flags in flags.groupby(dims):
    key = key if isinstance(key, tuple) else (key,)
    for a in own_flags.itertuples():
        nxt = order.index(a.quarter) + 1
        if nxt >= len(order):
            continue
        b = own_flags[own_flags.quarter == order[nxt]]
        if (
            len(b)
            and np.sign(b.residual.iloc[0]) == -np.sign(a.residual)
            and abs(a.residual + b.residual.iloc[0]) <= (max(abs(a.residual), abs(b.residual.iloc[0])) / 3)
        ):
            timing.append((" x ".join(key), a.quarter, order[nxt], a.residual, float(b.residual.iloc[0])))
for name, q1, q2, v1, v2 in timing:
    print(
        f"TIMING: {name} {v1:+,.0f} in {q1} and {v2:+,.0f} in {q2} net to {v1 + v2:+,.0f}: one booking "
        "a quarter " + ("late" if v1 < 0 else "early") + ", not a miss and an overrun"
    )
for year, part in planned.groupby("fy", sort=False):
    print(
        f"year to date {year} (through {part.sort_values('end')['label'].iloc[-1]}): plan {part.plan.sum():,.0f}  "
        f"actual {part.actual.sum():,.0f}  variance {part.actual.sum() - part.plan.sum():+,.0f}"
    )
year_misses = year_cells[year_cells.flag & (year_cells.residual < 0)].sort_values("residual")
if len(year_misses):
    print("year-to-date misses beyond noise (after the plan's bias):")
    print(year_misses[["fy", *dims, "plan", "actual", "residual", "residual_pct", "z"]].round(1).to_string(index=False))

# The largest real miss: the cell whose flagged shortfall is largest over its year, with its worst quarter and
# its worst period — named on the plan's own dimensions.
timed = {(n, q) for n, q1, q2, _, _ in timing for q in (q1, q2)}
real = misses[[(" x ".join(str(getattr(r, d)) for d in dims), r.quarter) not in timed for r in misses.itertuples()]]
largest = None
if len(real):
    ytd = year_cells.set_index(["fy", *dims]).residual
    real = real.assign(ytd=[ytd.get(tuple([r.fy, *[getattr(r, d) for d in dims]])) for r in real.itertuples()])
    largest = real.sort_values(["ytd", "residual"]).iloc[0]
    name = " x ".join(str(largest[d]) for d in dims)
    within = period_cells[
        (period_cells.fy == largest.fy)
        & np.logical_and.reduce([period_cells[d] == largest[d] for d in dims])
        & period_cells.label.isin(planned[planned.quarter == largest.quarter].label)
    ].sort_values("residual")
    worst = within.iloc[0]
    print(
        f"LARGEST MISS: {name} in {largest.quarter}, {largest.residual:+,.0f} against the plan"
        + (" after its bias" if bias else "")
        + f" ({largest.residual_pct:+.1f} % of its plan; raw {largest.variance:+,.0f}); worst period {worst.label} "
        f"{worst.residual:+,.0f} ({worst.residual_pct:+.1f} %); year to date {largest.fy} {largest.ytd:+,.0f}"
    )
cells  # noqa: B018 - the cell's value
