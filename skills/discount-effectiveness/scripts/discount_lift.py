"""Does a discount lift the quantity bought? Compared within the same customer, product, channel and period.

Input: SOURCE, the id of a table artifact with one row per sale: discount (a fraction), quantity, and the
columns to compare within - customer, product, channel, period (month) - whichever it has (other columns
are ignored). Run in run_python as:  SOURCE = "artifact_..."  then this script.
Output: `lift_pct` (change in quantity per 10 points of discount, %), `lift_ci` (its 95 % interval),
`detectable` (the interval excludes 0), `identified` (the data has discounts that vary within those groups),
`controls` (what was held fixed) and `model` (the statsmodels fit) - printed as sentences - and `assumed` (the
business facts assumed, printed on a line starting "Assumed:"). PROFILE (business-profile) is read when set: a
`period` must be the business's own period (fiscal, from PROFILE fiscal_calendar) and quantities need no currency.
For a code or scheme given to a group from a date, a holiday promotion or a coupon: scripts/promo_did.py.
"""

import numpy as np
import pandas as pd
import statsmodels.api as sm

PROFILE = globals().get("PROFILE") or {}
sales = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
sales = sales.assign(discount=sales.discount.astype(float), quantity=sales.quantity.astype(float))
sales = sales[sales.quantity > 0].reset_index(drop=True)
controls = [c for c in ("customer", "product", "channel", "period") if c in sales.columns]
missing = [c for c in ("customer", "product", "channel", "period") if c not in sales.columns]

# log(quantity) = customer + product + channel + period effects + b x discount. Every effect is absorbed by
# alternating projections (the within estimator for several fixed effects, as reghdfe / fixest compute it: each
# group's mean subtracted in turn until nothing changes) — by the Frisch-Waugh-Lovell theorem the same b as a
# regression on every dummy, without building a dummy matrix (thousands of products or customers fit in memory).
# b then compares a customer's discounted purchases with their own full-price ones: customers who get bigger
# discounts because they buy more no longer count as a lift. Standard errors are clustered by customer (a
# customer's purchases are not independent), else robust (HC1).
for c in controls:  # a missing group value is a group of its own
    sales[c] = sales[c].astype(str).fillna("(none)")
if "customer" in controls:
    several = sales.customer.map(sales.customer.value_counts()) > 1  # a customer seen once compares with nobody
    sales = sales[several].reset_index(drop=True)
codes = [pd.factorize(sales[c])[0] for c in controls]


def absorbed(values: np.ndarray) -> np.ndarray:
    """``values`` with every group's mean taken out, over all the controls at once (to convergence)."""
    out = values.astype(float) - values.mean()
    for _ in range(500):
        before = out.copy()
        for code in codes:
            sums = np.bincount(code, weights=out)
            counts = np.bincount(code)
            out = out - (sums / np.maximum(counts, 1))[code]
        if np.max(np.abs(out - before)) < 1e-10:
            break
    return out


y = absorbed(np.log(sales.quantity.to_numpy()))
left = absorbed(sales.discount.to_numpy())

# Identification: how much of the discount's variation is left once the groups are held fixed. Discounts set
# per customer (a contract rate) or per product leave nothing to compare: no estimate, whatever its interval.
within_sd = float(left.std())
share = float(left.var() / sales.discount.var()) if sales.discount.var() > 0 else 0.0
identified = bool(within_sd >= 0.005 and share >= 0.02)
model = None
lift_pct, lift_ci = float("nan"), (float("nan"), float("nan"))
if identified:
    X = pd.DataFrame({"discount": left})
    if "customer" in controls:
        model = sm.OLS(y, X).fit(cov_type="cluster", cov_kwds={"groups": pd.factorize(sales.customer)[0]})
    else:
        model = sm.OLS(y, X).fit(cov_type="HC1")
    b, se = float(model.params["discount"]), float(model.bse["discount"])
    lift_pct = float(100 * (np.exp(0.1 * b) - 1))
    lift_ci = tuple(float(100 * (np.exp(0.1 * (b + k * 1.96 * se)) - 1)) for k in (-1, 1))
detectable = bool(identified and (lift_ci[0] > 0 or lift_ci[1] < 0))
print(
    f"{len(sales):,} sales, {100 * (sales.discount > 0).mean():.0f} % discounted; compared within the same "
    f"{', '.join(controls) or 'nothing'}" + (f" (not held fixed: {', '.join(missing)})" if missing else "")
)
print(
    f"the discount varies within those groups by {100 * within_sd:.1f} points (standard deviation; "
    f"{100 * share:.0f} % of its variation)"
)
if not identified:
    print(
        "NOT IDENTIFIABLE: discounts hardly vary within the same customer, product, channel and period, so the "
        "data cannot tell their effect from who gets them - no lift is estimated; a controlled test "
        "(ab-test-readout) can"
    )
else:
    print(
        f"per 10 points of discount the quantity changes by {lift_pct:+.1f} % "
        f"(95 % interval {lift_ci[0]:+.1f} % to {lift_ci[1]:+.1f} %)"
    )
    print("a lift is detectable" if detectable else "no detectable lift: the interval includes zero")

calendar = (PROFILE.get("fiscal_calendar") or {}).get("kind")
assumed = [
    "the discount is a rate (a fraction of the list price), quantity in units",
    f"period = {'the fiscal calendar ' + calendar if calendar else 'as given (fiscal calendar UNKNOWN)'}",
    "discounts vary line by line within the groups held fixed (not a code given to a group from a date)",
]
if "discount" in sales and sales.discount.max() > 1:
    print("WARNING: discounts above 1: an amount, not a rate - divide by the list price first")
print("Assumed: " + "; ".join(assumed))
