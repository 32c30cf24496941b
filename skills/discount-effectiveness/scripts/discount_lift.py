"""Does a discount lift the quantity bought? Compared within the same product and channel.

Input: SOURCE, the id of a table artifact with one row per sale: product, channel, discount (a fraction)
and quantity (other columns are ignored). Run in run_python as:  SOURCE = "artifact_..."  then this script.
Output: `lift_pct` (change in quantity per 10 points of discount, %), `lift_ci` (its 95 % interval),
`detectable` (the interval excludes 0) and `model` (the statsmodels fit) - printed as a sentence.
"""

import numpy as np
import statsmodels.formula.api as smf

sales = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
sales = sales.assign(discount=sales.discount.astype(float), quantity=sales.quantity.astype(float))
sales = sales[sales.quantity > 0]
# log(quantity) = product effect + channel effect + b x discount: b compares discounted with full-price
# sales of the same product in the same channel; robust (HC1) standard errors
model = smf.ols("np.log(quantity) ~ discount + C(product) + C(channel)", data=sales).fit(cov_type="HC1")
b, se = float(model.params["discount"]), float(model.bse["discount"])
lift_pct = float(100 * (np.exp(0.1 * b) - 1))
lift_ci = tuple(float(100 * (np.exp(0.1 * (b + k * 1.96 * se)) - 1)) for k in (-1, 1))
detectable = bool(lift_ci[0] > 0 or lift_ci[1] < 0)
share = 100 * (sales.discount > 0).mean()
print(f"{len(sales):,} sales, {share:.0f} % discounted; per 10 points of discount the quantity changes by "
      f"{lift_pct:+.1f} % (95 % interval {lift_ci[0]:+.1f} % to {lift_ci[1]:+.1f} %)")
print("a lift is detectable" if detectable else "no detectable lift: the interval includes zero")
