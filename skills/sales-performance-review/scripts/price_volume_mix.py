"""Price / volume / mix bridge of a revenue change between two periods.

Input: SOURCE, the id of a table artifact with one row per item and period — the columns <item>, <period>,
net_revenue, units, as query_metrics(metrics=["net_revenue", "units"], dimensions=[<item>], time_grain=…)
returns them; the last two periods are compared — or one row per item with the columns
    <item>, qty_prior, revenue_prior, qty_current, revenue_current
(the first column names the item). Run in run_python as:  SOURCE = "artifact_..."  then this script.
Output: the bridge as the cell's value, printed too; the steps add up to the change (checked).
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
    numbers = ["qty_prior", "revenue_prior", "qty_current", "revenue_current"]
    d = df.copy()
    d[numbers] = d[numbers].fillna(0).astype(float)
    both = d[(d.qty_prior > 0) & (d.qty_current > 0)]
    only_one = d.drop(both.index)
    q0, q1 = both.qty_prior.sum(), both.qty_current.sum()
    p0 = both.revenue_prior / both.qty_prior  # unit price per item, prior period
    p1 = both.revenue_current / both.qty_current
    avg_price_prior = both.revenue_prior.sum() / q0
    volume = (q1 - q0) * avg_price_prior
    mix = ((both.qty_current / q1 - both.qty_prior / q0) * q1 * p0).sum()
    price = ((p1 - p0) * both.qty_current).sum()
    new_and_lost = only_one.revenue_current.sum() - only_one.revenue_prior.sum()
    prior, current = d.revenue_prior.sum(), d.revenue_current.sum()
    change = current - prior
    gap = prior + volume + mix + price + new_and_lost - current
    assert abs(gap) <= 1e-6 * max(1.0, abs(current)), f"bridge does not add up: off by {gap}"
    steps = [
        ("prior period revenue", prior),
        ("volume", volume),
        ("mix", mix),
        ("price and discount", price),
        ("new and discontinued items", new_and_lost),
        ("current period revenue", current),
    ]
    bridge = pd.DataFrame(steps, columns=["step", "revenue"])
    bridge["share_of_change_pct"] = [None, *(100 * v / change if change else None for _, v in steps[1:5]), None]
    return bridge


bridge = price_volume_mix(two_periods(load_artifact(SOURCE)))  # noqa: F821 - SOURCE and load_artifact come from run_python
print(bridge.round(2).to_string(index=False))
bridge
