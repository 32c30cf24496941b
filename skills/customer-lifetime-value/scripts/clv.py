"""Customer lifetime value: historic, and a buy-till-you-die model (BG/NBD + Gamma-Gamma) checked on a hold-out year.

Input: SOURCE, the id of a table artifact with one row per order: customer_id, order_date and margin (the
order's gross margin). CUTOFF (default: a year before the day after the last order) splits the orders: the
model is fitted before it and checked on the time after it. YEARS (3) and DISCOUNT_RATE (0.1, a year) set the
value's horizon and discount. Run in run_python as:  SOURCE = "artifact_..."  then this script.
Output: `clv` per customer (the cell's value), `holdout` (predicted vs actual after the cut-off, by decile of
the prediction), `check_ratio` (predicted / actual, in total), `rank_correlation`, `naive_ratio` (the same
check for "each customer repeats their last year"), `alive` (each customer's probability of still buying).
"""

import warnings

import numpy as np
import pandas as pd

with warnings.catch_warnings():  # the libraries' import-time notices are not the analysis
    warnings.simplefilter("ignore")
    import pytensor

    # a model this small is fitted fastest without compiling C: 1-2 s instead of ~15 s
    pytensor.config.cxx = ""
    pytensor.config.mode = "FAST_COMPILE"
    from pymc_marketing.clv import BetaGeoModel, GammaGammaModel
    from pymc_marketing.clv.utils import rfm_summary

years = int(globals().get("YEARS", 3))
rate = float(globals().get("DISCOUNT_RATE", 0.1))
orders = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
orders = orders.assign(order_date=pd.to_datetime(orders.order_date), margin=orders.margin.astype(float))
end = orders.order_date.max() + pd.Timedelta(days=1)  # the data's end: the day after its last order
cut = pd.Timestamp(globals().get("CUTOFF") or end - pd.DateOffset(years=1))
WEEK = 7  # time in weeks: recency, T and the horizons


def summary(upto: pd.Timestamp) -> pd.DataFrame:
    """Per customer with an order before `upto`: repeat days (frequency), recency and age (T) in weeks, and the
    average margin of the repeat orders (the Gamma-Gamma model's input)."""
    seen = orders[orders.order_date < upto]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return rfm_summary(
            seen,
            "customer_id",
            "order_date",
            monetary_value_col="margin",
            observation_period_end=upto - pd.Timedelta(days=1),
            time_unit="D",
            time_scaler=WEEK,
        )


def fit(data: pd.DataFrame) -> tuple[BetaGeoModel, GammaGammaModel | None]:
    """BG/NBD for how often and how long customers buy; Gamma-Gamma for their margin per order (MAP fits)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        buying = BetaGeoModel(data=data[["customer_id", "frequency", "recency", "T"]])
        buying.fit(method="map", progressbar=False)
        repeat = data[(data.frequency > 0) & (data.monetary_value > 0)]
        spending = None
        if len(repeat) >= 20:
            spending = GammaGammaModel(data=repeat[["customer_id", "frequency", "monetary_value"]])
            spending.fit(method="map", progressbar=False)
    return buying, spending


def margin_per_order(data: pd.DataFrame, spending: GammaGammaModel | None) -> pd.Series:
    """Expected margin of a customer's future order: Gamma-Gamma's (shrunk toward the average); a customer whose
    repeat orders lost money keeps their own average (the model needs positive values)."""
    positive = data.monetary_value > 0
    spend = pd.Series(np.nan, index=data.index)
    if spending is not None:
        fitted = data.assign(monetary_value=data.monetary_value.where(positive, 1.0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = spending.expected_customer_spend(data=fitted[["customer_id", "frequency", "monetary_value"]])
        spend = pd.Series(np.asarray(expected.mean(("chain", "draw"))), index=data.index)
    first = orders.groupby("customer_id").margin.mean()  # no repeat order: the customer's own average so far
    spend = spend.where(positive | (data.frequency == 0), data.monetary_value)
    return spend.fillna(data.customer_id.map(first))


def purchases(buying: BetaGeoModel, data: pd.DataFrame, weeks: float) -> pd.Series:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = buying.expected_purchases(data=data[["customer_id", "frequency", "recency", "T"]], future_t=weeks)
    return pd.Series(np.asarray(expected.mean(("chain", "draw"))), index=data.index)


# Historic value: margin to date
history = orders.groupby("customer_id").margin.sum()
top = history.sort_values(ascending=False)
top10 = 100 * top.head(max(1, len(top) // 10)).sum() / top.sum()
print(
    f"historic: {len(history):,} customers with orders, average margin to date {history.mean():,.0f}; "
    f"top 10 % bring {top10:.0f} %"
)

# The check: fitted on the orders before the cut-off, the margin predicted for the time after it, against what
# those customers made; and the naive benchmark (each customer repeats their last year before the cut-off)
train = summary(cut)
weeks_after = (end - cut).days / WEEK
buying, spending = fit(train)
predicted = purchases(buying, train, weeks_after) * margin_per_order(train, spending)
after = orders[orders.order_date >= cut].groupby("customer_id").margin.sum()
actual = train.customer_id.map(after).fillna(0.0)
year_before = orders[(orders.order_date < cut) & (orders.order_date >= cut - pd.DateOffset(years=1))]
naive = train.customer_id.map(year_before.groupby("customer_id").margin.sum()).fillna(0.0) * weeks_after / 52.18
check_ratio = float(predicted.sum() / actual.sum())
naive_ratio = float(naive.sum() / actual.sum())
rank_correlation = float(predicted.rank().corr(actual.rank()))
decile = pd.qcut(predicted.rank(method="first"), 10, labels=range(1, 11))
holdout = (
    pd.DataFrame({"decile": decile, "predicted": predicted, "actual": actual})
    .groupby("decile", observed=True)[["predicted", "actual"]]
    .sum()
    .round(0)
)
print(
    f"check: fitted on the orders before {cut.date()}, the model predicted {predicted.sum():,.0f} in margin until "
    f"{(end - pd.Timedelta(days=1)).date()}; the {len(train):,} customers made {actual.sum():,.0f} "
    f"(predicted / actual {check_ratio:.2f}; rank correlation {rank_correlation:.2f}). "
    f"Naive 'same as their last year': {naive_ratio:.2f}"
)
if check_ratio > 1.2:
    print(
        f"WARNING: the model over-predicts by {100 * (check_ratio - 1):.0f} %: customers stopped or slowed down "
        "after the cut-off more than their history showed - read its values as an upper bound"
    )
elif check_ratio < 0.8:
    print(f"WARNING: the model under-predicts by {100 * (1 - check_ratio):.0f} %: customers buy more than before")
else:
    print("the check supports the model: within 20 % in total")

# The value: refitted on every order, each customer's expected margin per year for `years`, discounted
everything = summary(end)
buying, spending = fit(everything)
per_order = margin_per_order(everything, spending)
cumulative = [purchases(buying, everything, 52.18 * y) for y in range(years + 1)]
value = sum((cumulative[y] - cumulative[y - 1]) * per_order / (1 + rate) ** y for y in range(1, years + 1))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    alive = pd.Series(
        np.asarray(
            buying.expected_probability_alive(data=everything[["customer_id", "frequency", "recency", "T"]]).mean(
                ("chain", "draw")
            )
        ),
        index=everything.index,
    )
clv = pd.DataFrame(
    {
        "customer_id": everything.customer_id,
        "historic_margin": everything.customer_id.map(history).round(2),
        "p_alive": alive.round(3),
        "next_year_margin": ((cumulative[1] - cumulative[0]) * per_order).round(2),
        f"value_{years}y": value.round(2),
    }
)
clv = clv.sort_values(f"value_{years}y", ascending=False, ignore_index=True)
params = buying.fit_summary()
print(
    f"predicted {years}-year value (discounted at {100 * rate:.0f} % a year): average "
    f"{clv[f'value_{years}y'].mean():,.0f}, top decile average "
    f"{clv[f'value_{years}y'].head(max(1, len(clv) // 10)).mean():,.0f}; "
    f"{100 * (clv.p_alive < 0.5).mean():.0f} % of customers are more likely gone than still buying"
)
clv
