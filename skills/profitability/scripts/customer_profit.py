"""Customer profitability: the whale curve and the customers who lose money.

Input: SOURCE, the id of a table artifact with one row per customer: customer_id, revenue, margin and
optionally avg_discount, orders, segment. Run in run_python as:  SOURCE = "artifact_..."  then this script.
PROFILE (optional): reporting_currency, currencies; a `contribution` column is judged instead of margin.
Output: `assumed`, `customers` sorted by margin (the cell's value), `loss_makers` (margin below zero), `peak_pct` (the
whale curve's peak in % of the total margin) and `top20_pct`; a whale curve is drawn.
"""

import matplotlib.pyplot as plt
import numpy as np

PROFILE = globals().get("PROFILE") or {}
customers = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
if "contribution" in customers.columns:  # net revenue - COGS - variable costs: the margin judged
    customers["gross_margin"] = customers.get("margin")
    customers["margin"] = customers["contribution"]
basis = "contribution" if "contribution" in customers.columns else "gross margin (no variable costs in the frame)"
assumed = f"Assumed: customer margin = {basis}; currency {PROFILE.get('reporting_currency') or 'one, as given'}" + (
    "; PROFILE lists several currencies: the frame must be converted already"
    if len(PROFILE.get("currencies") or []) > 1
    else ""
)
print(assumed)
for column in ("revenue", "margin", "avg_discount"):
    if column in customers.columns:
        customers[column] = customers[column].astype(float)
customers = customers.sort_values("margin", ascending=False, ignore_index=True)
total = customers.margin.sum()
cumulative = 100 * customers.margin.cumsum() / total
peak_pct = float(cumulative.max())
top20_pct = float(cumulative.iloc[max(0, int(np.ceil(0.2 * len(customers))) - 1)])
loss_makers = customers[customers.margin < 0].sort_values("margin", ignore_index=True)

print(
    f"{len(customers):,} customers, gross margin {total:,.0f} ({100 * total / customers.revenue.sum():.1f} % of "
    f"revenue); the top 20 % make {top20_pct:.0f} % of it; the curve peaks at {peak_pct:.1f} %"
)
if len(loss_makers):
    print(f"{len(loss_makers)} customer(s) lose money, {loss_makers.margin.sum():,.0f} in all:")
    if "avg_discount" in customers.columns:
        others = customers[customers.margin >= 0]
        typical = (others.avg_discount * others.revenue).sum() / others.revenue.sum()
        print(f"(average discount of the profitable customers: {100 * typical:.1f} %)")
    print(loss_makers.head(20).to_string(index=False))
else:
    print("no customer loses money on gross margin")

fig, ax = plt.subplots(figsize=(8, 4.5))
ax.plot(100 * np.arange(1, len(customers) + 1) / len(customers), cumulative)
ax.axhline(100, color="grey", linewidth=0.8)
ax.set_xlabel("customers, most profitable first (%)")
ax.set_ylabel("cumulative gross margin (% of total)")
ax.set_title("Whale curve")
customers  # noqa: B018 - the cell's value
