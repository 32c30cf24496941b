"""Retention matrix from cohort activity counts.

Input: SOURCE, the id of a table artifact with the columns cohort, quarters_since, active_customers
(one row per cohort and period since the first order; period 0 = the cohort's size).
Run in run_python as:  SOURCE = "artifact_..."  then this script.
Output: the retention matrix in percent (cohorts x periods) as the cell's value; sizes, the average curve
and a heatmap are printed / drawn.
"""

import matplotlib.pyplot as plt
import pandas as pd

counts = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
matrix = counts.pivot_table(index="cohort", columns="quarters_since", values="active_customers", aggfunc="sum")
sizes = matrix[0]
retention = (matrix.div(sizes, axis=0) * 100).round(1)
assert (retention[0] == 100).all(), "every cohort must be whole in its first period"

# The average curve, weighted by cohort size, over the cohorts observed long enough for each period.
weighted = {}
for period in retention.columns:
    observed = matrix[period].notna()
    weighted[period] = round(100 * matrix.loc[observed, period].sum() / sizes[observed].sum(), 1)
curve = pd.Series(weighted, name="avg_retention_pct")

print("cohort sizes:", sizes.astype(int).to_dict())
print("average retention by periods since first order (%):", curve.to_dict())

fig, ax = plt.subplots(figsize=(9, 5))
im = ax.imshow(retention.values, aspect="auto", cmap="Blues", vmin=0, vmax=100)
ax.set_xticks(range(len(retention.columns)), retention.columns)
ax.set_yticks(range(len(retention.index)), retention.index)
ax.set_xlabel("periods since first order")
ax.set_ylabel("cohort")
ax.set_title("Customer retention by cohort (%)")
fig.colorbar(im, ax=ax)
retention
