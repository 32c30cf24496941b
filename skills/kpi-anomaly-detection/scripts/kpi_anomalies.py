"""Anomalies in a KPI series: days (or weeks, months) far from what their season and neighbours predict.

Input: SOURCE, the id of a table artifact with a date column and a number column (the first of each, or
DATE and VALUE naming them), one row per period. ALPHA (0.01) is the chance of a false alarm over the
whole series. Run in run_python as:  SOURCE = "artifact_..."  then this script.
Output: `anomalies` (the cell's value: period, value, expected, direction, p_corrected) and `expected`
(the baseline for every period); a chart marks the anomalies.
"""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats

alpha = float(globals().get("ALPHA", 0.01))
frame = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
date = globals().get("DATE") or next(c for c in frame.columns if "date" in str(c).lower() or "day" in str(c).lower()
                                     or pd.api.types.is_datetime64_any_dtype(frame[c]))
value = globals().get("VALUE") or [c for c in frame.columns if c != date][-1]
s = frame.assign(**{date: pd.to_datetime(frame[date])}).set_index(date)[value].astype(float).sort_index()

# The baseline: the median of the neighbouring periods of the same season - for days, the same weekday
# of the 6 weeks before and after (weekly pattern, and the yearly one as it moves); for weeks or months,
# the 6 periods around. The period itself is left out, so an anomaly does not hide itself.
step = s.index.to_series().diff().median()
daily = step <= pd.Timedelta(days=1)
if daily:
    s = s.asfreq("D", fill_value=0.0)  # a day without a row had none
lag, reach = (7, 6) if daily else (1, 6)
neighbours = pd.concat([s.shift(k * lag) for k in range(-reach, reach + 1) if k], axis=1)
expected = neighbours.median(axis=1).dropna()
observed = s[expected.index]
n = len(expected)

if ((s % 1 == 0) & (s >= 0)).all():  # counts: Poisson, or negative binomial when more spread than Poisson
    ratio = ((observed - expected) ** 2 / expected.clip(lower=0.5)).median() / stats.chi2.median(1)
    dispersion = max(1.0, float(ratio))
    if dispersion <= 1.2:
        low, high = stats.poisson.cdf(observed, expected), stats.poisson.sf(observed - 1, expected)
    else:
        size = expected / (dispersion - 1)
        prob = size / (size + expected)
        low, high = stats.nbinom.cdf(observed, size, prob), stats.nbinom.sf(observed - 1, size, prob)
    p = np.minimum(np.minimum(low, high) * 2, 1.0)
    method = f"counts, dispersion {dispersion:.2f}"
else:  # amounts: the log ratio to the baseline, scaled robustly
    residual = np.log(observed.clip(lower=1e-9)) - np.log(expected.clip(lower=1e-9))
    z = (residual - residual.median()) / (1.4826 * (residual - residual.median()).abs().median())
    p = 2 * stats.norm.sf(np.abs(z))
    method = "amounts, robust z of the log ratio"
p_corrected = np.minimum(np.asarray(p) * n, 1.0)  # Bonferroni: every period is a test
flagged = p_corrected < alpha
anomalies = pd.DataFrame(
    {
        "period": expected.index[flagged].strftime("%Y-%m-%d"),
        "value": observed[flagged].to_numpy(),
        "expected": expected[flagged].round(1).to_numpy(),
        "direction": np.where(observed[flagged] > expected[flagged], "high", "low"),
        "p_corrected": p_corrected[flagged],
    }
)
print(f"{n:,} periods checked ({method}); a false alarm anywhere in the series has a chance of {alpha:g}")
print(anomalies.to_string(index=False) if len(anomalies) else "no anomaly: every period is within its expected range")

fig, ax = plt.subplots(figsize=(10, 4))
ax.plot(s.index, s.to_numpy(), linewidth=0.6, label=str(value))
ax.plot(expected.index, expected.to_numpy(), linewidth=0.8, label="expected")
ax.scatter(pd.to_datetime(anomalies.period), anomalies.value, color="red", zorder=3, label="anomaly")
ax.legend()
ax.set_title(f"{value}: anomalies")
anomalies
