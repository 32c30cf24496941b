"""Customer lifetime value: historic, and a simple predictive model checked on a hold-out period.

Input: SOURCE, the id of a table artifact with one row per customer: customer_id, observed_from (when the
customer could first order: signup or the data's start), cutoff, orders_before, margin_before,
orders_after, margin_after. YEARS (3) and DISCOUNT_RATE (0.1) set the value's horizon and discount.
Run in run_python as:  SOURCE = "artifact_..."  then this script.
Output: `clv` per customer (the cell's value), `holdout` (predicted vs actual in the year after the
cut-off, by decile), `check_ratio` (predicted / actual, in total) and `rank_correlation`.
"""

import numpy as np
import pandas as pd

years = int(globals().get("YEARS", 3))
rate = float(globals().get("DISCOUNT_RATE", 0.1))
data = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
for column in ("orders_before", "margin_before", "orders_after", "margin_after"):
    data[column] = data[column].astype(float)
data["observed_from"] = pd.to_datetime(data.observed_from)
data["cutoff"] = pd.to_datetime(data.cutoff)


def fit_predict(orders: pd.Series, margin: pd.Series, exposure_years: pd.Series) -> pd.Series:
    """Expected margin per year: a gamma-Poisson rate (method of moments) times a shrunk margin per order."""
    seen = exposure_years > 0
    x, t = orders[seen], exposure_years[seen]
    mean_rate = x.sum() / t.sum()
    # between-customer variance of rates, beyond Poisson noise
    spread = max(((x - mean_rate * t) ** 2 - x).sum() / (t**2).sum(), 1e-9)
    alpha, beta = mean_rate**2 / spread, mean_rate / spread
    per_year = (alpha + orders) / (beta + exposure_years.clip(lower=0))
    overall = margin.sum() / max(orders.sum(), 1)
    k = 3.0  # a customer's own margin per order counts as much as 3 average orders once they have 3
    per_order = (k * overall + margin) / (k + orders)
    return per_year * per_order


# Historic value: margin to date
history = data.margin_before + data.margin_after
top = history.sort_values(ascending=False)
top10 = 100 * top.head(max(1, len(top) // 10)).sum() / top.sum()
print(f"historic: {len(data):,} customers, average margin to date {history.mean():,.0f}; top 10 % bring {top10:.0f} %")

# The check: fit before the cut-off, predict the year after, for customers who could order before it
cut = data.cutoff.iloc[0]
exposure = ((cut - data.observed_from).dt.days / 365.25).clip(lower=0)
known = exposure > 0
predicted = fit_predict(data.orders_before, data.margin_before, exposure)[known]
actual = data.margin_after[known]
check_ratio = float(predicted.sum() / actual.sum())
rank_correlation = float(predicted.rank().corr(actual.rank()))
decile = pd.qcut(predicted.rank(method="first"), 10, labels=range(1, 11))
holdout = pd.DataFrame({"decile": decile, "predicted": predicted, "actual": actual}).groupby(
    "decile", observed=True
)[["predicted", "actual"]].sum().round(0)
print(
    f"check: fitted before {cut.date()}, predicted {predicted.sum():,.0f} for the next year; the "
    f"{int(known.sum()):,} customers made {actual.sum():,.0f} (ratio {check_ratio:.2f}); rank correlation "
    f"{rank_correlation:.2f}"
)
if check_ratio > 1.2:
    print(
        f"WARNING: the model over-predicts by {100 * (check_ratio - 1):.0f} %: customers churn or slow down, "
        "which it assumes they do not - read its values as an upper bound"
    )
elif check_ratio < 0.8:
    print(f"WARNING: the model under-predicts by {100 * (1 - check_ratio):.0f} %: customers buy more than before")
else:
    print("the check supports the model: within 20 % in total")

# The value: refit on everything, next year's margin and the discounted value over `years`
end = data.cutoff.iloc[0] + pd.DateOffset(years=1)
exposure_all = ((end - data.observed_from).dt.days / 365.25).clip(lower=0)
next_year = fit_predict(data.orders_before + data.orders_after, history, exposure_all)
factor = sum(1 / (1 + rate) ** y for y in range(1, years + 1))
clv = pd.DataFrame(
    {"customer_id": data.customer_id, "historic_margin": history.round(2), "next_year_margin": next_year.round(2)}
)
clv[f"value_{years}y"] = (next_year * factor).round(2)
clv = clv.sort_values(f"value_{years}y", ascending=False, ignore_index=True)
print(
    f"predicted {years}-year value (discounted at {100 * rate:.0f} %): average {clv[f'value_{years}y'].mean():,.0f}, "
    f"top decile average {clv[f'value_{years}y'].head(max(1, len(clv) // 10)).mean():,.0f}"
)
clv
