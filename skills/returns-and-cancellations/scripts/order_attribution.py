"""Which items an order's return is attributable to, at order level: an item bought mostly together with a
high-return item shows a high return rate of its own (item-level tests confound co-purchase) — the order-level
model separates them.

Input: SOURCE, the id of a table artifact with one row per shipped order and item it holds: order_id, item,
returned (true/false: the order's status). Run in run_python as:  SOURCE = "artifact_..."  then this script.
Method (said in the output): a linear probability model of "the order was returned" on one indicator per item
(items on at least MIN_ORDERS orders, default 30), robust (HC1) standard errors; an item is named when its
coefficient is positive, Holm-corrected p < ALPHA (0.01) and it raises the return probability by at least half
the base rate. Each coefficient holds the order's other items fixed: a bystander of a high-return item gets
about zero.
Output: `attribution` (the cell's value: every item's coefficient, interval and p), `named` (the items named).
"""

import pandas as pd
import statsmodels.api as sm
from statsmodels.stats.multitest import multipletests

alpha = float(globals().get("ALPHA", 0.01))
min_orders = int(globals().get("MIN_ORDERS", 30))
lines = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
lines["returned"] = lines.returned.astype(bool)
held = pd.crosstab(lines.order_id, lines["item"]).clip(upper=1)
returned = lines.groupby("order_id").returned.max().reindex(held.index).astype(float)
kept = [c for c in held.columns if held[c].sum() >= min_orders]
X = sm.add_constant(held[kept].astype(float), has_constant="add")
fit = sm.OLS(returned, X).fit(cov_type="HC1")
base = float(returned.mean())
attribution = pd.DataFrame(
    {
        "item": kept,
        "orders": [int(held[c].sum()) for c in kept],
        "effect_points": [round(100 * fit.params[c], 2) for c in kept],
        "ci_low": [round(100 * fit.conf_int().loc[c, 0], 2) for c in kept],
        "ci_high": [round(100 * fit.conf_int().loc[c, 1], 2) for c in kept],
        "p": [float(fit.pvalues[c]) for c in kept],
    }
)
attribution["p_holm"] = multipletests(attribution.p, method="holm")[1] if len(attribution) else []
attribution = attribution.sort_values("effect_points", ascending=False).reset_index(drop=True)
named = attribution[
    (attribution.effect_points > 0) & (attribution.p_holm < alpha) & (attribution.effect_points >= 50 * base)
].reset_index(drop=True)

print(
    f"Method: a linear probability model of an order's return on the items it holds ({len(held):,} shipped "
    f"orders, {len(kept)} items on >= {min_orders} orders, robust errors, Holm-corrected): each item's effect "
    "holds the order's other items fixed"
)
print(f"base return rate {100 * base:.1f} % of shipped orders")
print(attribution.head(10).round(4).to_string(index=False))
if len(named):
    print(f"returns attributable to: {', '.join(named['item'])}")
else:
    print("no item raises an order's return probability beyond chance once its basket is held fixed")
attribution
