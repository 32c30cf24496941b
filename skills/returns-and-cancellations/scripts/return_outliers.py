"""Items whose return or cancellation rate is above the rest beyond chance.

Input: SOURCE, the id of a table artifact with one row per item: item, orders, completed, returned,
cancelled (counts) and optionally returned_revenue. Run in run_python as:  SOURCE = "artifact_..."  then
this script. Output: `rates` (the cell's value) and `flags`, the items above the rest beyond chance:
corrected p < ALPHA (0.01) by a two-proportion z-test against all other items, with Bonferroni's
correction for every comparison made, and a rate at least 1.5 x the rest's.
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


rows = []
comparisons = len(data) * len(kinds)
for kind, (event, base_columns) in kinds.items():
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
