"""Retention matrix from cohort activity counts.

Input: SOURCE, the id of a table artifact with the columns cohort ("2024-Q1"), quarters_since, active_customers,
cohort_size (one row per cohort and period since acquisition; cohort_size = customers acquired) and data_through
(the last date the data holds: a last calendar quarter cut short is left out, never read as a drop).
Run in run_python as:  SOURCE = "artifact_..."  then this script.
Output: the retention matrix in percent (cohorts x periods) as the cell's value; sizes, the average curve
over a fixed set of cohorts, the cohorts compared at period 1 and a heatmap are printed / drawn.
"""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

CURVE_PERIODS = 8  # the average curve covers periods 0..CURVE_PERIODS, over the cohorts observed that long

counts = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
matrix = counts.pivot_table(index="cohort", columns="quarters_since", values="active_customers", aggfunc="sum")
sizes = counts.groupby("cohort").cohort_size.max().reindex(matrix.index)

# A period the data covers where nobody of a cohort bought has no row at all: it is 0 %, not missing (a cohort
# that churned completely would otherwise drop out of every average). Covered: up to the newest calendar quarter.
starts = pd.Series([pd.Period(c.replace("-", ""), freq="Q") for c in matrix.index], index=matrix.index)
for k in range(int(max(matrix.columns)) + 1):
    if k not in matrix.columns:
        matrix[k] = np.nan
matrix = matrix[sorted(matrix.columns)]
newest_seen = max(starts[c] + int(k) for c in matrix.index for k in matrix.columns if pd.notna(matrix.loc[c, k]))
for c in matrix.index:
    for k in matrix.columns:
        if pd.isna(matrix.loc[c, k]) and starts[c] + int(k) <= newest_seen:
            matrix.loc[c, k] = 0

# The last calendar quarter is complete only if the data runs to its end: otherwise every cohort's newest cell
# counts a few weeks as a quarter (a fall that is only the calendar). Those cells are left out, and said so.
incomplete = ""
if "data_through" in counts.columns:
    through = pd.Timestamp(counts.data_through.max()).normalize()
    calendar = {(c, k): starts[c] + int(k) for c in matrix.index for k in matrix.columns}
    newest = max(q for (c, k), q in calendar.items() if pd.notna(matrix.loc[c, k]))
    end = newest.end_time.normalize()
    if through < end:
        days, span = (through - newest.start_time).days + 1, (end - newest.start_time).days + 1
        cut = [(c, k) for (c, k), q in calendar.items() if q == newest and k > 0]
        for c, k in cut:
            matrix.loc[c, k] = np.nan
        incomplete = (
            f"WARNING: the data ends {through.date()}, {days} of the {span} days of {newest}: that quarter's "
            f"{len(cut)} cells (each cohort's newest period) are left out of the matrix, the curve and the "
            "comparison — an incomplete quarter reads as a drop"
        )
else:
    incomplete = "NOTE: no data_through column: whether the last quarter is complete is unknown (see SKILL.md)"
retention = (matrix.div(sizes, axis=0) * 100).round(1)
assert (retention.fillna(0) <= 100).all().all(), "a cohort cannot have more active customers than members"

# The average curve over ONE set of cohorts (those observed for CURVE_PERIODS periods), weighted by size: pooling
# each period over whichever cohorts reach it mixes different cohorts into one line and invents a trend.
last = matrix.notna().iloc[:, ::-1].idxmax(axis=1)  # the last period each cohort was observed
horizon = min(CURVE_PERIODS, int(last.max()))
fixed = last[last >= horizon].index
curve = (matrix.loc[fixed, range(horizon + 1)].sum() / sizes[fixed].sum() * 100).round(1)
curve.name = "avg_retention_pct"

# Are newer cohorts worse? Compare period 1 across cohorts that have it: the slope per cohort.
first = retention[1].dropna() if 1 in retention.columns else pd.Series(dtype=float)
slope = float(np.polyfit(np.arange(len(first)), first.to_numpy(), 1)[0]) if len(first) >= 4 else float("nan")
spread = float(first.std()) if len(first) >= 4 else float("nan")
change = slope * (len(first) - 1)  # the fitted change from the oldest to the newest cohort, in points
if np.isnan(slope):
    trend = "too few cohorts to compare"
elif abs(change) <= max(5.0, 1.5 * spread):
    trend = f"newer cohorts retain about the same (period-1 retention {change:+.1f} points oldest to newest)"
else:
    word = "less" if change < 0 else "more"
    trend = f"newer cohorts retain {word} (period-1 retention {change:+.1f} points oldest to newest)"

# A cohort far from the others at period 1 is a finding of its own (a failed campaign, a data gap), whatever the
# trend across cohorts says: more than 10 points and 3 robust deviations from the other cohorts' median.
outliers = {}
if len(first) >= 4:
    for cohort, level in first.items():
        others = first.drop(index=cohort)
        spread = 1.4826 * float((others - others.median()).abs().median())
        if abs(level - others.median()) > max(10.0, 3 * spread):
            outliers[cohort] = (float(level), float(others.median()))
for cohort, (level, typical) in outliers.items():
    print(
        f"WARNING: cohort {cohort} retains {level:.1f} % at period 1 against {typical:.1f} % for the other cohorts: "
        "a finding of its own (a campaign, a data gap?), not part of 'about the same'"
    )

# Left-censoring: a first cohort far larger than the next ones holds customers who existed before the data.
if len(sizes) >= 4 and sizes.iloc[0] > 1.5 * sizes.iloc[1:5].median():
    print(
        f"WARNING: the first cohort ({sizes.index[0]}: {int(sizes.iloc[0])}) is over 1.5x the next ones: it holds "
        "customers who bought before the data starts (left-censoring); cohort by signup date, or leave out "
        "the customers first seen in the first periods"
    )
if incomplete:
    print(incomplete)
print("cohort sizes:", sizes.astype(int).to_dict())
print(
    f"average retention by periods since acquisition (%), over the {len(fixed)} cohorts observed "
    f"{horizon} periods ({fixed[0]}..{fixed[-1]}):",
    curve.to_dict(),
)
print("cohorts compared:", trend)

fig, ax = plt.subplots(figsize=(9, 5))
im = ax.imshow(retention.values, aspect="auto", cmap="Blues", vmin=0, vmax=100)
ax.set_xticks(range(len(retention.columns)), retention.columns)
ax.set_yticks(range(len(retention.index)), retention.index)
ax.set_xlabel("periods since acquisition")
ax.set_ylabel("cohort")
ax.set_title("Customer retention by cohort (%)")
fig.colorbar(im, ax=ax)
retention
