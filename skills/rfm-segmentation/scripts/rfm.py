"""RFM segments with recency judged against the business's own purchase cycle, not against other customers.

Input: SOURCE, the id of a table artifact with one row per order: customer_id, order_date and revenue (net of
discounts and returns) — any customer column and date column will do (CUSTOMER, DATE, REVENUE name them).
AS_OF (default: the last order date) is the day the segments are for.
Run in run_python as:  SOURCE = "artifact_..."  then this script.
Method (said in the output): recency quintiles are relative — in a base full of long-gone accounts a customer
silent for ten months ranks "recent". So recency is measured in purchase cycles: each repeat customer's own
median gap between orders (their cycle; the business's median gap for one-time buyers and customers with fewer
than three orders), and a customer is active while silent for at most 1.5 cycles, at risk up to 3 cycles,
lapsed beyond (absolute thresholds, stated with the days they mean). Frequency and monetary value are
quintiles among the active and at-risk customers. Segments: Champions (active, F and M >= 4), Loyal (active,
F >= 3), Promising (active, new within 2 cycles), Needs attention (active, the rest), At risk (a valued
customer silent 1.5-3 cycles), Cannot lose (at risk and M >= 4), Lapsed and Lost (lapsed; Lost: > 6 cycles).
B2B and B2C bases differ by their cycles, which is why each is measured on its own.
Output: `rfm` (the cell's value: one row per customer with recency_days, cycle_days, cycles_silent, r_state,
f, m, segment), `segments` (customers, revenue and shares per segment), `cycle_days` (the business's median
gap).
"""

import numpy as np
import pandas as pd

orders = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
columns = [str(c) for c in orders.columns]
customer = globals().get("CUSTOMER") or next(c for c in columns if "customer" in c.lower())
date = globals().get("DATE") or next(
    c for c in columns if "date" in c.lower() or pd.api.types.is_datetime64_any_dtype(orders[c])
)
revenue = globals().get("REVENUE") or next(
    c for c in columns if any(k in c.lower() for k in ("revenue", "amount", "value", "sales"))
)
orders = orders.assign(**{date: pd.to_datetime(orders[date])}).sort_values([customer, date])
as_of = pd.Timestamp(globals().get("AS_OF") or orders[date].max())
orders = orders[orders[date] <= as_of]

gaps = orders.groupby(customer)[date].diff().dt.days.dropna()
gaps = gaps[gaps > 0]
cycle_days = float(gaps.median()) if len(gaps) else float("nan")
per = orders.groupby(customer).agg(
    first_order=(date, "min"), last_order=(date, "max"), orders=(date, "nunique"), revenue=(revenue, "sum")
)
own = orders.groupby(customer)[date].apply(lambda d: d.drop_duplicates().diff().dt.days.median())
per["cycle_days"] = own.where(per.orders >= 3).fillna(cycle_days).clip(lower=1)
per["recency_days"] = (as_of - per.last_order).dt.days
per["tenure_days"] = (as_of - per.first_order).dt.days
per["cycles_silent"] = (per.recency_days / per.cycle_days).round(2)
per["r_state"] = np.select(
    [per.cycles_silent <= 1.5, per.cycles_silent <= 3], ["active", "at risk"], default="lapsed"
)
live = per.r_state != "lapsed"


def quintile(values: pd.Series) -> pd.Series:
    ranks = values.rank(method="min")  # equal values, equal score
    return (1 + np.floor(5 * (ranks - 1) / max(len(values), 1))).astype(int)


per["f"], per["m"] = 0, 0
if live.any():
    per.loc[live, "f"] = quintile(per.orders[live])
    per.loc[live, "m"] = quintile(per.revenue[live])
new = per.tenure_days <= 2 * per.cycle_days
per["segment"] = np.select(
    [
        (per.r_state == "active") & new & (per.orders <= 2),
        (per.r_state == "active") & (per.f >= 4) & (per.m >= 4),
        (per.r_state == "active") & (per.f >= 3),
        per.r_state == "active",
        (per.r_state == "at risk") & (per.m >= 4),
        per.r_state == "at risk",
        per.cycles_silent > 6,
    ],
    ["Promising", "Champions", "Loyal", "Needs attention", "Cannot lose", "At risk", "Lost"],
    default="Lapsed",
)
rfm = per.reset_index()
segments = rfm.groupby("segment").agg(customers=(customer, "count"), revenue=("revenue", "sum"))
segments["customers_pct"] = (100 * segments.customers / segments.customers.sum()).round(1)
segments["revenue_pct"] = (100 * segments.revenue / segments.revenue.sum()).round(1)
segments = segments.sort_values("revenue", ascending=False)

print(
    f"Method: recency in purchase cycles — the business's median gap between a customer's orders is "
    f"{cycle_days:.0f} days (each repeat customer with 3+ orders is measured on their own); active while silent "
    f"<= 1.5 cycles (here <= {1.5 * cycle_days:.0f} days for a typical customer), at risk <= 3 cycles "
    f"({3 * cycle_days:.0f} days), lapsed beyond; F and M are quintiles among the active and at-risk; as of "
    f"{as_of.date()}"
)
print(segments.round(1).to_string())
lapsed = rfm[rfm.r_state == "lapsed"]
print(
    f"{len(lapsed):,} of {len(rfm):,} customers have lapsed (silent for more than 3 of their cycles), with "
    f"{100 * lapsed.revenue.sum() / max(rfm.revenue.sum(), 1e-9):.1f} % of the revenue"
)
rfm
