"""Budget (plan) vs actual: the variance and the misses beyond normal variation.

Input: SOURCE, the id of a table artifact with the columns month, region, category, plan, actual (one row
per month and cell; plan 0 for actuals without a plan). Run in run_python as:  SOURCE = "artifact_..."
then this script. Output: the quarterly cells as the cell's value; totals, tables by region and category
and the flagged misses are printed. THRESHOLD (default 4) is how many noise units a miss must exceed.
"""

import numpy as np
import pandas as pd

threshold = float(globals().get("THRESHOLD", 4))
data = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
data["month"] = pd.to_datetime(data["month"])
data[["plan", "actual"]] = data[["plan", "actual"]].astype(float)
data["variance"] = data.actual - data.plan
planned = data[data.plan > 0]
unplanned = data[data.plan <= 0].actual.sum()

# Month-to-month noise: a cell's variance grows with the square root of its plan (many orders of varying
# size); its scale is measured robustly (median absolute deviation) over every planned cell-month.
unit = planned.variance / np.sqrt(planned.plan)
noise = float(1.4826 * (unit - unit.median()).abs().median())

data["quarter"] = data.month.dt.year.astype(str) + "-Q" + data.month.dt.quarter.astype(str)
cells = data.groupby(["quarter", "region", "category"], as_index=False)[["plan", "actual", "variance"]].sum()
cells["variance_pct"] = (100 * cells.variance / cells.plan.where(cells.plan > 0)).round(1)
cells["z"] = (cells.variance / (noise * np.sqrt(cells.plan.where(cells.plan > 0)))).round(1)
flags = cells[cells.z.abs() > threshold].sort_values("variance").reset_index(drop=True)

plan, actual = planned.plan.sum(), planned.actual.sum()
print(f"plan {plan:,.0f}  actual {actual:,.0f}  variance {actual - plan:+,.0f} ({100 * (actual - plan) / plan:+.1f} %)")
if unplanned:
    print(f"unplanned actuals (no plan for their cell): {unplanned:,.0f}")
for by in ("region", "category"):
    table = planned.groupby(by)[["plan", "actual", "variance"]].sum().sort_values("variance")
    table["variance_pct"] = (100 * table.variance / table.plan).round(1)
    print(table.round(0).to_string())
print(f"noise: a cell-month's variance is typically +-{noise:.1f} x sqrt(plan); flagged beyond {threshold:g}x")
if len(flags):
    print("misses beyond normal variation:")
    print(flags.round(1).to_string(index=False))
else:
    print("no miss beyond normal variation: the gaps are within what month-to-month noise explains")
cells
