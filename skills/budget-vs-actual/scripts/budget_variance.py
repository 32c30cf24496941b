"""Budget (plan) vs actual: the variance and the misses beyond normal variation.

Input: SOURCE, the id of a table artifact with the columns month, region, category, plan, actual (one row
per month and cell; plan 0 for actuals without a plan) and data_through (the last date the actuals cover; or
set DATA_THROUGH). Run in run_python as:  SOURCE = "artifact_..." then this script. Output: the quarterly cells
as the cell's value; totals, tables by region and category and the flagged misses and overruns are printed.
THRESHOLD (default 4) is how many noise units a gap must exceed. Only complete months are compared: a month the
data does not cover to its end is left out, plan and actual (said in the output). FISCAL_YEAR_START (the month
the fiscal year starts, 1-12; default 1) makes the quarters fiscal ("FY2025-Q1" = April-June 2024 with April).
A miss and an overrun of the same cell in neighbouring quarters that cancel (within a third of the larger) are
one timing shift — a deal or renewal booked a quarter late or early — said as such, with the year to date beside
them; the largest miss is named first.
"""

import numpy as np
import pandas as pd

threshold = float(globals().get("THRESHOLD", 4))
data = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
data["month"] = pd.to_datetime(data["month"])
data[["plan", "actual"]] = data[["plan", "actual"]].astype(float)

# Completeness: a month is compared only when the actuals cover it to its end (data ending mid-November makes
# November a false miss, December a total one). Its plan leaves with its actual; said below.
through = globals().get("DATA_THROUGH") or (data["data_through"].max() if "data_through" in data.columns else None)
left_out: list[str] = []
if through is not None and pd.notna(through):
    through = pd.Timestamp(through).normalize()
    complete = (data.month + pd.offsets.MonthEnd(0)) <= through
    left_out = sorted(data.loc[~complete, "month"].dt.strftime("%Y-%m").unique())
    left_plan = data.loc[~complete, "plan"].sum()
    data = data[complete].copy()
else:
    print("NOTE: no data_through: every month is compared as if complete (a month cut short reads as a miss)")
data["variance"] = data.actual - data.plan
planned = data[data.plan > 0]
unplanned = data[data.plan <= 0].actual.sum()

# Month-to-month noise: a cell's variance grows with the square root of its plan (many orders of varying
# size); its scale is measured robustly (median absolute deviation) over every planned cell-month.
unit = planned.variance / np.sqrt(planned.plan)
noise = float(1.4826 * (unit - unit.median()).abs().median())

start = int(globals().get("FISCAL_YEAR_START", 1))
shifted = data.month - pd.DateOffset(months=start - 1)  # the fiscal year named by the calendar year it ends in
fiscal_year = shifted.dt.year + (1 if start > 1 else 0)
data["quarter"] = ("FY" if start > 1 else "") + fiscal_year.astype(str) + "-Q" + shifted.dt.quarter.astype(str)
data["fiscal_year"] = fiscal_year
cells = data.groupby(["quarter", "region", "category"], as_index=False).agg(
    plan=("plan", "sum"), actual=("actual", "sum"), variance=("variance", "sum"), months=("month", "nunique")
)
cells["variance_pct"] = (100 * cells.variance / cells.plan.where(cells.plan > 0)).round(1)
cells["z"] = (cells.variance / (noise * np.sqrt(cells.plan.where(cells.plan > 0)))).round(1)
flags = cells[cells.z.abs() > threshold].sort_values("variance").reset_index(drop=True)
misses, overruns = flags[flags.variance < 0], flags[flags.variance > 0]

plan, actual = planned.plan.sum(), planned.actual.sum()
last = data.month.max().strftime("%Y-%m") if len(data) else "-"
print(
    f"through {last}: plan {plan:,.0f}  actual {actual:,.0f}  variance {actual - plan:+,.0f} "
    f"({100 * (actual - plan) / plan:+.1f} %)"
)
if left_out:
    print(
        f"left out as incomplete (the data ends {through.date()}): {', '.join(left_out)} — their plan "
        f"{left_plan:,.0f} is not compared; a quarter is compared on its complete months (column months)"
    )
if unplanned:
    print(f"unplanned actuals (no plan for their cell): {unplanned:,.0f}")
for by in ("region", "category"):
    table = planned.groupby(by)[["plan", "actual", "variance"]].sum().sort_values("variance")
    table["variance_pct"] = (100 * table.variance / table.plan).round(1)
    print(table.round(0).to_string())
print(f"noise: a cell-month's variance is typically +-{noise:.1f} x sqrt(plan); flagged beyond {threshold:g}x")
if len(misses):
    print("misses beyond normal variation:")
    print(misses.round(1).to_string(index=False))
if len(overruns):
    print("overruns beyond normal variation:")
    print(overruns.round(1).to_string(index=False))
if not len(flags):
    print("no miss or overrun beyond normal variation: the gaps are within what month-to-month noise explains")

# Timing: a cell's miss in one quarter and overrun in the next (or the reverse) of about the same size is one
# deal booked late or early, not two findings; the year to date shows that it nets out.
order = sorted(cells.quarter.unique())
timing = []
for (region, category), own in flags.groupby(["region", "category"]):
    for a in own.itertuples():
        nxt = order.index(a.quarter) + 1
        if nxt >= len(order):
            continue
        b = own[own.quarter == order[nxt]]
        if len(b) and np.sign(b.variance.iloc[0]) == -np.sign(a.variance) and abs(a.variance + b.variance.iloc[0]) <= (
            max(abs(a.variance), abs(b.variance.iloc[0])) / 3
        ):
            timing.append((region, category, a.quarter, order[nxt], a.variance, float(b.variance.iloc[0])))
for region, category, q1, q2, v1, v2 in timing:
    print(
        f"TIMING: {region} x {category} {v1:+,.0f} in {q1} and {v2:+,.0f} in {q2} net to {v1 + v2:+,.0f}: one booking "
        "a quarter " + ("late" if v1 < 0 else "early") + ", not a miss and an overrun"
    )
years = planned.assign(fiscal_year=data.loc[planned.index, "fiscal_year"])
for year, part in years.groupby("fiscal_year"):
    label = f"FY{year}" if start > 1 else str(year)
    print(
        f"year to date {label} (through {part.month.max():%Y-%m}): plan {part.plan.sum():,.0f}  actual "
        f"{part.actual.sum():,.0f}  variance {part.actual.sum() - part.plan.sum():+,.0f}"
    )
timed = {(r, c, q) for r, c, q1, q2, _, _ in timing for q in (q1, q2)}
real = misses[[(r.region, r.category, r.quarter) not in timed for r in misses.itertuples()]] if len(misses) else misses
if len(real):
    worst = real.sort_values("variance").iloc[0]
    print(
        f"LARGEST MISS: {worst.region} x {worst.category} in {worst.quarter}, {worst.variance:+,.0f} "
        f"({worst.variance_pct:+.1f} % of its plan)"
    )
cells
