"""Which items an order's returns are attributable to: an item bought together with a high-return item (a bundle
partner) comes back with it and shows a high return rate of its own, though it causes none.

Input: SOURCE, the id of a table artifact with one row per shipped order (transaction) and item it holds: order_id,
item, optional product (department or category: in line-level mode an item is compared with the other items of its
product), and either returned (true/false) or units and units_returned (line-level returns: credit notes or return
lines with quantities, linked to the original order). PROFILE (business-profile's dict) is read; MIN_ORDERS (30),
ALPHA (0.01), MIN_RATIO (1.5). Run in run_python as:  PROFILE = {...}  SOURCE = "artifact_..."  then this script.
Method (said in the output):
- order-level status (returned is the same on every line of an order): a linear probability model of "the order
  was returned" on one indicator per item (items on at least MIN_ORDERS orders), robust (HC1) errors, Holm-corrected;
  named when the effect is positive, p_holm < ALPHA and at least half the base rate. Each coefficient holds the
  order's other items fixed: a bystander gets about zero.
- line-level returns (which line came back is known): each item's partner is the item most often returned in the
  same order as it; the item's return rate in the orders WITHOUT its partner is compared with the other items' rate
  (of its product, given a product column) by a two-proportion test, Holm-corrected; named when p_holm < ALPHA and
  that rate is at least MIN_RATIO x the others'. An item that only comes back with its partner is not named (its
  rate without the partner is reported).
Output: `attribution` (the cell's value: every item - orders, rate_pct, partner, co_return_pct,
rate_without_partner_pct, rest_pct, effect_points or ratio, p_holm, named), `named` (the items named) and `assumed`
(printed as `Assumed:`).
"""

import math

import numpy as np
import pandas as pd
from statsmodels.stats.multitest import multipletests

PROFILE = globals().get("PROFILE") or {}
alpha = float(globals().get("ALPHA") or 0.01)
min_orders = int(globals().get("MIN_ORDERS") or 30)
min_ratio = float(globals().get("MIN_RATIO") or 1.5)
lines = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
lines["item"] = lines["item"].astype(str)
by_product = "product" in lines.columns  # each item compared with the other items of its product (department)
if by_product:
    lines["product"] = lines["product"].astype(str)
warnings = []
if {"units", "units_returned"} <= set(lines.columns):
    lines["units"] = lines.units.astype(float)
    lines["units_returned"] = lines.units_returned.astype(float).clip(lower=0)
    lines["returned"] = lines.units_returned > 0
    level = "line"
else:
    lines["returned"] = lines.returned.astype(bool)
    level = "line" if (lines.groupby("order_id").returned.nunique() > 1).any() else "order"
    lines["units"], lines["units_returned"] = 1.0, lines.returned.astype(float)
if PROFILE.get("contractual") is True:
    warnings.append(
        "NOTE: PROFILE says contractual: a subscription box or invoice holds one plan - attribution across items "
        "only applies to orders that hold several products"
    )
grain = str(PROFILE.get("returns_grain") or "").lower()
if grain in ("line", "units", "unit") and level == "order":
    warnings.append(
        "WARNING: PROFILE says returns are line-level but every line of an order has the same status: feed "
        "units and units_returned per line (which line came back), not the order's status"
    )
held = pd.crosstab(lines.order_id, lines["item"]).clip(upper=1)
order_returned = lines.groupby("order_id").returned.max().reindex(held.index)
returned_items = pd.crosstab(lines[lines.returned].order_id, lines[lines.returned]["item"]).clip(upper=1)
returned_items = returned_items.reindex(index=held.index, columns=held.columns, fill_value=0)
kept = [c for c in held.columns if held[c].sum() >= min_orders]


def partner_of(item):
    """The item most often returned in the same order as `item` was returned, and the share of those returns."""
    mine = returned_items[item] > 0 if level == "line" else (held[item] > 0) & order_returned
    if mine.sum() == 0:
        return None, 0.0
    co = (returned_items[mine] if level == "line" else held[mine]).drop(columns=[item]).mean()
    if co.empty or co.max() <= 0:
        return None, 0.0
    return co.idxmax(), float(co.max())


rows = []
for item in kept:
    on = lines["item"] == item
    partner, share = partner_of(item)
    rate = lines.units_returned[on].sum() / max(lines.units[on].sum(), 1)
    row = {
        "item": item,
        "orders": int(held[item].sum()),
        "rate_pct": round(100 * rate, 2),
        "partner": partner,
        "co_return_pct": round(100 * share, 1),
    }
    if partner is not None:
        without = on & ~lines.order_id.isin(held.index[held[partner] > 0])
        row["orders_without_partner"] = int(lines.order_id[without].nunique())
        n1 = float(lines.units[without].sum())
        row["rate_without_partner_pct"] = round(100 * lines.units_returned[without].sum() / n1, 2) if n1 else np.nan
    else:
        without = on
        row["orders_without_partner"] = row["orders"]
        row["rate_without_partner_pct"] = row["rate_pct"]
    if level == "line":  # the item's own rate, its partner's orders left out, against the other items' lines
        rest = ~on & (lines["product"] == lines["product"][on].iloc[0]) if by_product else ~on
        n1, x1 = float(lines.units[without].sum()), float(lines.units_returned[without].sum())
        n2, x2 = float(lines.units[rest].sum()), float(lines.units_returned[rest].sum())
        row["rest_pct"] = round(100 * x2 / max(n2, 1), 2)
        row["ratio"] = round((x1 / n1) / (x2 / n2), 2) if n1 and n2 and x2 else np.nan
        pooled = (x1 + x2) / (n1 + n2) if n1 + n2 else 0
        se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2)) if n1 and n2 and 0 < pooled < 1 else 0
        z = (x1 / n1 - x2 / n2) / se if se else 0.0
        row["p"] = 0.5 * math.erfc(z / math.sqrt(2))
        row["tested"] = row["orders_without_partner"] >= min_orders
    rows.append(row)
attribution = pd.DataFrame(rows)
base = float(order_returned.mean())

if level == "order":
    import statsmodels.api as sm

    X = sm.add_constant(held[kept].astype(float), has_constant="add")
    fit = sm.OLS(order_returned.astype(float), X).fit(cov_type="HC1")
    ci = fit.conf_int()
    attribution["effect_points"] = [round(100 * fit.params[c], 2) for c in kept]
    attribution["ci_low"] = [round(100 * ci.loc[c, 0], 2) for c in kept]
    attribution["ci_high"] = [round(100 * ci.loc[c, 1], 2) for c in kept]
    attribution["p"] = [float(fit.pvalues[c]) for c in kept]
    attribution["p_holm"] = multipletests(attribution.p, method="holm")[1] if len(attribution) else []
    attribution["named"] = (
        (attribution.effect_points > 0) & (attribution.p_holm < alpha) & (attribution.effect_points >= 50 * base)
    )
    attribution = attribution.sort_values("effect_points", ascending=False).reset_index(drop=True)
    method = (
        f"Method: a linear probability model of an order's return on the items it holds ({len(held):,} shipped "
        f"orders, {len(kept)} items on >= {min_orders} orders, robust errors, Holm-corrected): each item's effect "
        "holds the order's other items fixed"
    )
else:
    within = "the other items of its product" if by_product else "every other item's"
    tested = attribution.tested if len(attribution) else pd.Series(dtype=bool)
    attribution["p_holm"] = np.nan
    if tested.any():
        attribution.loc[tested, "p_holm"] = multipletests(attribution.p[tested], method="holm")[1]
    attribution["named"] = tested & (attribution.p_holm < alpha) & (attribution.ratio >= min_ratio)
    attribution = attribution.sort_values("rate_pct", ascending=False).reset_index(drop=True)
    method = (
        f"Method: line-level returns ({len(held):,} orders): each item's return rate in the orders without its "
        f"partner (the item most often returned with it) against {within} ({len(kept)} items on >= "
        f"{min_orders} orders, a two-proportion test, Holm-corrected, named at >= {min_ratio} x)"
    )
named = attribution[attribution.named].reset_index(drop=True)
known = "which line came back is known" if level == "line" else "one status per order"
assumed = (
    f"Assumed: returns are {level}-level ({known}"
    f"; PROFILE returns_grain {PROFILE.get('returns_grain')!r}); contractual = {PROFILE.get('contractual')} (PROFILE); "
    f"minimum {min_orders} orders per item"
)
for line in warnings:
    print(line)
print(assumed)
print(method)
print(f"base return rate {100 * base:.1f} % of shipped orders")
print(attribution.head(12).drop(columns=["p"]).round(4).to_string(index=False))
bystanders = attribution[~attribution.named & attribution.partner.notna() & (attribution.co_return_pct >= 50)]
for b in bystanders.itertuples():
    print(
        f"{b.item}: comes back with {b.partner} ({b.co_return_pct:.0f} % of its returns); without it returns "
        f"{b.rate_without_partner_pct} % - a bundle partner, not named"
    )
if len(named):
    print(f"returns attributable to: {', '.join(named['item'])}")
else:
    print("no item raises returns beyond chance once its basket (its partner) is held fixed")
attribution  # noqa: B018 - the cell's value
