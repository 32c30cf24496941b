"""Budget (plan) vs actual: the variance and the misses beyond normal variation.

Input: SOURCE, the id of a table artifact with the columns month, region, category, plan, actual (one row
per month and cell; plan 0 for actuals without a plan) and data_through (the last date the actuals cover; or
set DATA_THROUGH). Run in run_python as:  SOURCE = "artifact_..." then this script. Output: the quarterly cells
as the cell's value; totals, tables by region and category and the flagged misses and overruns are printed.
THRESHOLD (default 4) is how many noise units a gap must exceed. Only complete months are compared: a month the
data does not cover to its end is left out, plan and actual (said in the output).
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

data["quarter"] = data.month.dt.year.astype(str) + "-Q" + data.month.dt.quarter.astype(str)
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
cells
