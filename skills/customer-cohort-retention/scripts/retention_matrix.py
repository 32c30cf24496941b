"""Retention matrix from cohort activity counts.

Input: SOURCE, the id of a table artifact with the columns cohort ("2024-Q1"), quarters_since, active_customers,
cohort_size (one row per cohort and period since acquisition; cohort_size = customers acquired), data_through
(the last date the data holds: a quarter cut short is left out, never read as a drop) and optionally
cohort_start (the cohort quarter's first day: needed when the quarters are not calendar ones, a fiscal year's).
Run in run_python as:  SOURCE = "artifact_..."  then this script.
Output: the retention matrix in percent (cohorts x periods) as the cell's value; sizes, the average curve
over a fixed set of cohorts, the cohorts compared at period 1, the cohorts far from the others at any period
(`outliers`: a collapse, a campaign) and a heatmap are printed / drawn.
"""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats

CURVE_PERIODS = 8  # the average curve covers periods 0..CURVE_PERIODS, over the cohorts observed that long

counts = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
matrix = counts.pivot_table(index="cohort", columns="quarters_since", values="active_customers", aggfunc="sum")
sizes = counts.groupby("cohort").cohort_size.max().reindex(matrix.index)

# Each cell is a quarter of the calendar: its cohort's first day plus 3 months per period (a fiscal quarter that
# starts in April too, given cohort_start), counted here in months since year 0.
if "cohort_start" in counts.columns:  # the quarter's own first day: fiscal quarters are not calendar ones
    first_day = pd.to_datetime(counts.groupby("cohort").cohort_start.min()).reindex(matrix.index)
else:
    try:
        first_day = pd.Series([pd.Period(c.replace("-", ""), freq="Q").start_time for c in matrix.index], index=matrix.index)
    except ValueError as e:
        raise ValueError(
            f"cohort labels must be calendar quarters like 2024-Q1 (got {list(matrix.index[:2])}); for other labels "
            "(a fiscal FY2025-Q1) give each cohort's first day as a cohort_start column"
        ) from e
starts = first_day.dt.year * 12 + first_day.dt.month - 1
for k in range(int(max(matrix.columns)) + 1):
    if k not in matrix.columns:
        matrix[k] = np.nan
matrix = matrix[sorted(matrix.columns)]
month_of = {(c, k): int(starts[c]) + 3 * int(k) for c in matrix.index for k in matrix.columns}


def first_of(months: int) -> pd.Timestamp:
    return pd.Timestamp(months // 12, months % 12 + 1, 1)


# A period the data covers where nobody of a cohort bought has no row at all: it is 0 %, not missing (a cohort
# that churned completely would otherwise drop out of every average). Covered: up to the newest quarter seen.
newest = max(m for (c, k), m in month_of.items() if pd.notna(matrix.loc[c, k]))
for (c, k), m in month_of.items():
    if pd.isna(matrix.loc[c, k]) and m <= newest:
        matrix.loc[c, k] = 0

# A quarter is complete only if the data runs to its end: otherwise each cohort's cell in it counts a few weeks as a
# quarter (a fall that is only the calendar), and the newest cohort, still being acquired, has had weeks, not a
# quarter, to buy (its period 0 too). Those cells are left out, and said so.
incomplete = ""
cut: list[tuple[str, int]] = []
if "data_through" in counts.columns:
    through = pd.Timestamp(counts.data_through.max()).normalize()
    cut = [(c, k) for (c, k), m in month_of.items() if m <= newest and first_of(m + 3) - pd.Timedelta(days=1) > through]
    for c, k in cut:
        matrix.loc[c, k] = np.nan
    if cut:
        begins = first_of(newest)
        days, span = (through - begins).days + 1, (first_of(newest + 3) - begins).days
        label = f"{begins.year}Q{begins.quarter}" if "cohort_start" not in counts.columns else f"the quarter from {begins.date()}"
        incomplete = (
            f"WARNING: the data ends {through.date()}, {days} of the {span} days of {label}: that quarter's "
            f"{len(cut)} cells (each cohort's newest period, the newest cohort's period 0 too) are left out of the "
            "matrix, the curve and the comparison — an incomplete quarter reads as a drop"
        )
else:
    incomplete = "NOTE: no data_through column: whether the last quarter is complete is unknown (see SKILL.md)"
matrix = matrix.dropna(how="all")  # a cohort whose only quarter is cut short: no retention to show yet
sizes = sizes.reindex(matrix.index)
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

# A cohort far from the others at any period is a finding of its own (a failed campaign, a data gap, a cohort that
# bought once on a promotion and collapsed after), whatever the trend across cohorts says: more than 10 points and
# 3 robust deviations from the other cohorts' median at that period, and beyond chance for its size (a binomial
# test against the others' pooled rate, Bonferroni-corrected over every cell compared, at 1 %).
outliers = {}
compared = [(c, k) for k in retention.columns if k >= 1 and retention[k].notna().sum() >= 4 for c in retention[k].dropna().index]
for k in sorted({k for _, k in compared}):
    column = retention[k].dropna()
    for cohort, level in column.items():
        if cohort in outliers:
            continue  # its first period far off is the one named
        others = column.drop(index=[cohort, *[c for c in outliers if c in column.index]])  # a collapse is no norm
        spread = 1.4826 * float((others - others.median()).abs().median())
        if len(others) < 3 or abs(level - others.median()) <= max(10.0, 3 * spread):
            continue
        rest = list(others.index)
        pooled = float(matrix.loc[rest, k].sum() / sizes[rest].sum())
        active, size = int(matrix.loc[cohort, k]), int(sizes[cohort])
        tail = stats.binom.cdf(active, size, pooled) if level < others.median() else stats.binom.sf(active - 1, size, pooled)
        if tail * len(compared) < 0.01:
            outliers[cohort] = (float(level), float(others.median()), int(k))
for cohort, (level, typical, k) in outliers.items():
    print(
        f"WARNING: cohort {cohort} retains {level:.1f} % at period {k} against {typical:.1f} % for the other cohorts"
        + (" (it collapsed after a normal start)" if k > 1 and level < typical else "")
        + ": a finding of its own (a campaign, a data gap?), not part of 'about the same'"
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
