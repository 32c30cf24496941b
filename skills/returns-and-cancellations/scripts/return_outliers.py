"""Items whose return or cancellation rate is above the rest beyond chance.

Input: SOURCE, the id of a table artifact with one row per item: item, orders, completed, returned,
cancelled (counts) and optionally returned_revenue. Run in run_python as:  SOURCE = "artifact_..."  then
this script. Output: `rates` (the cell's value) and `flags`, the items above the rest beyond chance:
corrected p < ALPHA (0.01) by a two-proportion z-test against all other items, with Bonferroni's
correction for every comparison made, and a rate at least 1.5 x the rest's.

Channels, regions or sales reps sell different products, and a channel that sells the scanner-heavy mix returns
more though it returns no more of any product. Given one row per item and product (a `product` column), items
are compared within their product mix: indirect standardization, the epidemiologist's standardized ratio — the
returns an item would have at each product's rate among the other items, summed, against the returns it had
(an exact Poisson test of the excess, Bonferroni-corrected; flagged at a ratio of 1.5 or more).
"""

import math

import pandas as pd

alpha = float(globals().get("ALPHA", 0.01))
data = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
counts = ["orders", "completed", "returned", "cancelled"]
data[counts] = data[counts].astype(float)
# returns among orders that shipped and were kept or sent back; cancellations among all orders
kinds = {"returned": ("returned", ["completed", "returned"]), "cancelled": ("cancelled", ["orders"])}


def upper_p(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2))


mixed = "product" in data.columns and data["product"].nunique() > 1 and "item" in data.columns
if mixed:  # compared within product mix: expected events at each product's rate among the other items
    from scipy import stats

    items = data["item"].unique()
    comparisons = len(items) * len(kinds)
    rows = []
    for kind, (event, base_columns) in kinds.items():
        base = data[base_columns].sum(axis=1)
        for item in items:
            mine = data["item"] == item
            others = data[~mine].assign(base=base[~mine]).groupby("product")[["base", event]].sum()
            rate = (others[event] / others.base.where(others.base > 0)).fillna(
                data[~mine][event].sum() / max(base[~mine].sum(), 1)
            )
            own = data[mine].assign(base=base[mine]).groupby("product")[["base", event]].sum()
            expected = float((own.base * own.index.map(rate).to_numpy()).sum())
            observed = float(own[event].sum())
            n1 = float(own.base.sum())
            if n1 <= 0 or expected <= 0:
                continue
            p_upper = float(stats.poisson.sf(observed - 1, expected))
            rows.append(
                {
                    "item": item,
                    "kind": kind,
                    "orders": int(n1),
                    "events": int(observed),
                    "rate_pct": round(100 * observed / n1, 2),
                    "rest_pct": round(100 * expected / n1, 2),  # the rate its own mix would have elsewhere
                    "standardized_ratio": round(observed / expected, 2),
                    "excess_orders": round(observed - expected, 1),
                    "p_corrected": min(1.0, p_upper * comparisons),
                }
            )
    data = data.groupby("item", as_index=False)[[c for c in data.columns if c not in ("item", "product")]].sum()
else:
    rows = []
    comparisons = len(data) * len(kinds)
for kind, (event, base_columns) in kinds.items() if not mixed else ():
    base = data[base_columns].sum(axis=1)
    for i, item in data.iterrows():
        n1, x1 = base[i], item[event]
        n2, x2 = base.sum() - n1, data[event].sum() - x1
        if n1 <= 0 or n2 <= 0:
            continue
        p1, p2, pooled = x1 / n1, x2 / n2, (x1 + x2) / (n1 + n2)
        se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2)) if 0 < pooled < 1 else 0.0
        z = (p1 - p2) / se if se else 0.0
        rows.append(
            {
                "item": item["item"],
                "kind": kind,
                "orders": int(n1),
                "events": int(x1),
                "rate_pct": round(100 * p1, 2),
                "rest_pct": round(100 * p2, 2),
                "excess_orders": round(x1 - n1 * p2, 1),
                "z": round(z, 2),
                "p_corrected": min(1.0, upper_p(z) * comparisons),
            }
        )
rates = pd.DataFrame(rows)
flags = rates[(rates.p_corrected < alpha) & (rates.rate_pct >= 1.5 * rates.rest_pct)].reset_index(drop=True)
if "returned_revenue" in data.columns:
    revenue = data.set_index("item").returned_revenue.astype(float)
    flags = flags.assign(returned_revenue=flags.item.map(revenue).where(flags.kind == "returned"))

total = data[counts].sum()
if mixed:
    print(
        "Method: each item against the other items within the same products (indirect standardization: the rest_pct "
        "column is the rate its own product mix has elsewhere; an exact Poisson test of the excess, "
        f"Bonferroni-corrected over {comparisons} comparisons)"
    )
print(
    f"returned {100 * total.returned / (total.completed + total.returned):.1f} % of shipped orders, "
    f"cancelled {100 * total.cancelled / total.orders:.1f} % of all orders ({comparisons} comparisons)"
)
if len(flags):
    print("above the rest beyond chance:")
    print(flags.to_string(index=False))
else:
    print("no item returns or cancels more than the rest beyond chance")
rates
