"""A/B test readout from per-variant totals.

Input: SOURCE, the id of a table artifact with one row per variant: variant, visitors, conversions and
optionally revenue and revenue_sq (the sum of squared revenue per visitor). CONTROL (default "control")
names the control, EXPECTED_SPLIT (default 0.5) its planned share of visitors.
Run in run_python as:  SOURCE = "artifact_..."  then this script.
Output: `readout` (the cell's value), `significant`, `diff_ci` (points), `srm_p`, `mde` (points).
"""

import math

import pandas as pd

control_name = globals().get("CONTROL", "control")
expected = float(globals().get("EXPECTED_SPLIT", 0.5))
totals = load_artifact(SOURCE).set_index("variant")  # noqa: F821 - SOURCE and load_artifact come from run_python
assert len(totals) == 2 and control_name in totals.index, "two variants, one of them the control, are needed"
c, t = totals.loc[control_name], totals.drop(index=control_name).iloc[0]
treatment_name = totals.drop(index=control_name).index[0]
n_c, n_t = float(c.visitors), float(t.visitors)
x_c, x_t = float(c.conversions), float(t.conversions)


def two_sided(z: float) -> float:
    return math.erfc(abs(z) / math.sqrt(2))


# Sample ratio mismatch: the split against the plan (chi-square with 1 degree of freedom)
n = n_c + n_t
chi2 = (n_c - n * expected) ** 2 / (n * expected) + (n_t - n * (1 - expected)) ** 2 / (n * (1 - expected))
srm_p = two_sided(math.sqrt(chi2))

p_c, p_t = x_c / n_c, x_t / n_t
pooled = (x_c + x_t) / n
z = (p_t - p_c) / math.sqrt(pooled * (1 - pooled) * (1 / n_c + 1 / n_t))
p_value = two_sided(z)
se = math.sqrt(p_c * (1 - p_c) / n_c + p_t * (1 - p_t) / n_t)
diff = 100 * (p_t - p_c)
diff_ci = (round(diff - 196 * se, 2), round(diff + 196 * se, 2))
mde = round(100 * (1.96 + 0.84) * math.sqrt(pooled * (1 - pooled) * (1 / n_c + 1 / n_t)), 2)
significant = bool(p_value < 0.05 and srm_p >= 0.001)
rows = [
    ("visitors", n_c, n_t),
    ("conversion %", round(100 * p_c, 2), round(100 * p_t, 2)),
]
if "revenue" in totals.columns and "revenue_sq" in totals.columns:
    m = {k: float(v.revenue) / float(v.visitors) for k, v in ((0, c), (1, t))}
    var = {k: (float(v.revenue_sq) / float(v.visitors) - m[k] ** 2) for k, v in ((0, c), (1, t))}
    se_rev = math.sqrt(var[0] / n_c + var[1] / n_t)
    rows.append(("revenue per visitor", round(m[0], 2), round(m[1], 2)))
    revenue_p = two_sided((m[1] - m[0]) / se_rev) if se_rev else 1.0
readout = pd.DataFrame(rows, columns=["measure", control_name, treatment_name])

print(readout.to_string(index=False))
if srm_p < 0.001:
    print(f"SAMPLE RATIO MISMATCH: the split differs from the plan (p = {srm_p:.2g}): do not trust this test")
else:
    print(f"split as planned (p = {srm_p:.2f})")
print(
    f"conversion {diff:+.2f} points ({100 * (p_t / p_c - 1):+.1f} %), 95 % interval {diff_ci[0]:+.2f} to "
    f"{diff_ci[1]:+.2f}, p = {p_value:.3g}: "
    + ("a significant difference" if significant else f"no significant difference (detectable: +-{mde} points)")
)
if "revenue" in totals.columns and "revenue_sq" in totals.columns:
    print(f"revenue per visitor: p = {revenue_p:.3g} (Welch)")
readout
