"""Price / volume / mix bridge of a revenue change between two periods.

Input: SOURCE, the id of a table artifact with one row per item and period — the columns <item>, <period>,
net_revenue, units and optionally list_revenue (before discounts), as query_metrics(metrics=["net_revenue",
"units", "list_revenue"], dimensions=[<item>], time_grain=…) returns them; the last two periods are compared —
or one row per item with the columns
    <item>, qty_prior, revenue_prior, qty_current, revenue_current [, list_prior, list_current]
(the first column names the item). BY (optional) names a column of SOURCE that groups the items (a category:
dimensions=[<group>, <item>]): the bridge is then also given per group. Run in run_python as:
SOURCE = "artifact_..."  then this script.
Output: the bridge as the cell's value, printed too; the steps add up to the change (checked). Volume is
valued at each item's prior price, so the unit an item is counted in (pack or piece) does not move it. With list
revenue, the price step is split: list price (the list price's change, at the prior discount) and discount (the
realised discount's change, at the current list price).
"""

import pandas as pd


BY = globals().get("BY")


def two_periods(df: pd.DataFrame) -> pd.DataFrame:
    """Rows per item and period (net_revenue, units[, list_revenue]) as one row per item: the last two periods
    side by side (and the item's group, with BY)."""
    if "qty_prior" in df.columns:
        return df
    labels = [c for c in df.columns if c != BY]
    item, period = labels[0], labels[1]
    prior, current = sorted(df[period].dropna().unique())[-2:]
    values = ["units", "net_revenue", *(["list_revenue"] if "list_revenue" in df.columns else [])]
    numbers = df.assign(**{v: df[v].astype(float) for v in values})
    wide = numbers.pivot_table(index=item, columns=period, values=values, aggfunc="sum")
    out = pd.DataFrame(
        {
            item: wide.index,
            "qty_prior": wide[("units", prior)].to_numpy(),
            "revenue_prior": wide[("net_revenue", prior)].to_numpy(),
            "qty_current": wide[("units", current)].to_numpy(),
            "revenue_current": wide[("net_revenue", current)].to_numpy(),
        }
    )
    if "list_revenue" in values:
        out["list_prior"] = wide[("list_revenue", prior)].to_numpy()
        out["list_current"] = wide[("list_revenue", current)].to_numpy()
    if BY:
        out[BY] = out[item].map(df.drop_duplicates(item).set_index(item)[BY])
    return out


def price_volume_mix(df: pd.DataFrame) -> pd.DataFrame:
    """Volume is valued at each item's own prior-period price, so it does not depend on the unit an item is
    counted in (a pack or a piece); the mix between items is part of it (a split into more units and mix
    needs a common unit across items)."""
    numbers = ["qty_prior", "revenue_prior", "qty_current", "revenue_current"]
    numbers += [c for c in ("list_prior", "list_current") if c in df.columns]
    d = df.copy()
    d[numbers] = d[numbers].fillna(0).astype(float)
    both = d[(d.qty_prior > 0) & (d.qty_current > 0)]
    new = d[(d.qty_prior <= 0) & (d.qty_current > 0)]
    gone = d[(d.qty_prior > 0) & (d.qty_current <= 0)]
    rest = d.drop(both.index.union(new.index).union(gone.index))  # revenue without units (e.g. fees)
    p0 = both.revenue_prior / both.qty_prior  # unit price per item, prior period
    p1 = both.revenue_current / both.qty_current
    at_prior_prices = (both.qty_current * p0).sum()
    volume = at_prior_prices - both.revenue_prior.sum()
    price = ((p1 - p0) * both.qty_current).sum()
    prior, current = d.revenue_prior.sum(), d.revenue_current.sum()
    other = rest.revenue_current.sum() - rest.revenue_prior.sum()
    if "list_prior" in d.columns and (both.list_prior > 0).all() and (both.list_current > 0).all():
        l0, l1 = both.list_prior / both.qty_prior, both.list_current / both.qty_current  # list price per unit
        r0, r1 = both.revenue_prior / both.list_prior, both.revenue_current / both.list_current  # realised share
        list_price = round(float((both.qty_current * (l1 - l0) * r0).sum()), 2)  # to the cent: no float dust
        discount = price - list_price  # = sum of q1 x l1 x (r1 - r0): the two add up to the price step exactly
        price_steps = [("list price", list_price), ("discount", discount)]
    else:
        price_steps = [("price and discount", price)]
    steps = [
        ("prior period revenue", prior),
        ("volume at prior prices", volume),
        *price_steps,
        ("new items", new.revenue_current.sum()),
        ("discontinued items", 0.0 - gone.revenue_prior.sum()),  # 0.0 - : no "-0.0"
    ]
    if other:
        steps.append(("revenue without units", other))
    steps.append(("current period revenue", current))
    gap = sum(v for _, v in steps[:-1]) - current
    assert abs(gap) <= 1e-6 * max(1.0, abs(current)), f"bridge does not add up: off by {gap}"
    change = current - prior
    bridge = pd.DataFrame(steps, columns=["step", "revenue"])
    bridge["share_of_change_pct"] = [None, *(100 * v / change if change else None for _, v in steps[1:-1]), None]
    bridge.attrs["volume_index"] = 100 * at_prior_prices / both.revenue_prior.sum() if len(both) else None
    return bridge


source = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
if BY and BY not in source.columns:
    print(f"NOTE: BY = {BY!r} names no column of SOURCE: no bridge per group")
    BY = None
items = two_periods(source)
bridge = price_volume_mix(items)
print(bridge.round(2).to_string(index=False))
if bridge.attrs["volume_index"] is not None:
    print(f"volume index, continuing items at prior prices (prior = 100): {bridge.attrs['volume_index']:.1f}")
by_group = None
if BY:  # one total cannot say where the price moved: the same bridge within each group, side by side
    by_group = pd.DataFrame(
        {group: price_volume_mix(part).set_index("step").revenue for group, part in items.groupby(BY, dropna=False)}
    ).T
    print(f"the bridge per {BY} (each row adds up to its own change):")
    print(by_group.round(0).to_string())
bridge
