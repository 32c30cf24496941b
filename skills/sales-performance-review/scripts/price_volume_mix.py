"""Price / volume / mix bridge of a revenue change between two periods.

Input: SOURCE, the id of a table artifact with one row per item and period — the columns <item>, <period>,
net_revenue, units, as query_metrics(metrics=["net_revenue", "units"], dimensions=[<item>], time_grain=…)
returns them; the last two periods are compared — or one row per item with the columns
    <item>, qty_prior, revenue_prior, qty_current, revenue_current
(the first column names the item). Run in run_python as:  SOURCE = "artifact_..."  then this script.
Output: the bridge as the cell's value, printed too; the steps add up to the change (checked). Volume is
valued at each item's prior price, so the unit an item is counted in (pack or piece) does not move it.
"""

import pandas as pd


def two_periods(df: pd.DataFrame) -> pd.DataFrame:
    """Rows per item and period (net_revenue, units) as one row per item: the last two periods side by side."""
    if "qty_prior" in df.columns:
        return df
    item, period = df.columns[0], df.columns[1]
    prior, current = sorted(df[period].dropna().unique())[-2:]
    wide = df.assign(net_revenue=df.net_revenue.astype(float), units=df.units.astype(float)).pivot_table(
        index=item, columns=period, values=["units", "net_revenue"], aggfunc="sum"
    )
    return pd.DataFrame(
        {
            item: wide.index,
            "qty_prior": wide[("units", prior)].to_numpy(),
            "revenue_prior": wide[("net_revenue", prior)].to_numpy(),
            "qty_current": wide[("units", current)].to_numpy(),
            "revenue_current": wide[("net_revenue", current)].to_numpy(),
        }
    )


def price_volume_mix(df: pd.DataFrame) -> pd.DataFrame:
    """Volume is valued at each item's own prior-period price, so it does not depend on the unit an item is
    counted in (a pack or a piece); the mix between items is part of it (a split into more units and mix
    needs a common unit across items)."""
    numbers = ["qty_prior", "revenue_prior", "qty_current", "revenue_current"]
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
    steps = [
        ("prior period revenue", prior),
        ("volume at prior prices", volume),
        ("price and discount", price),
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


items = two_periods(load_artifact(SOURCE))  # noqa: F821 - SOURCE and load_artifact come from run_python
bridge = price_volume_mix(items)
print(bridge.round(2).to_string(index=False))
if bridge.attrs["volume_index"] is not None:
    print(f"volume index, continuing items at prior prices (prior = 100): {bridge.attrs['volume_index']:.1f}")
bridge
