"""A/B (or A/B/n) test readout from per-variant totals.

Input: SOURCE, the id of a table artifact with one row per variant: variant, visitors, conversions and
optionally revenue and revenue_sq (the sum of squared revenue per visitor). CONTROL (default "control")
names the control; EXPECTED_SPLIT the planned share of visitors — the control's share when two variants
(default 0.5), or a {variant: share} mapping; equal shares when not given.
Run in run_python as:  SOURCE = "artifact_..."  then this script.
Method (said in the output): the split checked first (chi-square goodness of fit against the plan: p < 0.001 a
sample ratio mismatch, the test not to be trusted; p < 0.01 suspicious); each variant against the control by a
two-proportion z-test with a 95 % interval for the difference, p-values Holm-corrected across the comparisons
when there are several; revenue per visitor by Welch's test with its interval; the smallest effect the test
could detect at 80 % power.
Output: `readout` (the cell's value: one row per variant), `comparisons`, `significant` (any variant),
`diff_ci` (points, the first variant), `srm_p`, `srm_verdict`, `mde` (points).
"""

import math

import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests

control_name = globals().get("CONTROL", "control")
totals = load_artifact(SOURCE).set_index("variant")  # noqa: F821 - SOURCE and load_artifact come from run_python
assert control_name in totals.index and len(totals) >= 2, "the control and at least one variant are needed"
variants = [v for v in totals.index if v != control_name]
arms = [control_name, *variants]

# The split against the plan, first: a broken assignment voids every comparison below.
planned = globals().get("EXPECTED_SPLIT")
if isinstance(planned, dict):
    shares = [float(planned[a]) for a in arms]
elif planned is not None and len(arms) == 2:
    shares = [float(planned), 1 - float(planned)]
else:
    shares = [1 / len(arms)] * len(arms)
visitors = [float(totals.loc[a, "visitors"]) for a in arms]
n = sum(visitors)
srm_p = float(stats.chisquare(visitors, [n * s / sum(shares) for s in shares]).pvalue)
if srm_p < 0.001:
    srm_verdict = (
        f"SAMPLE RATIO MISMATCH (p = {srm_p:.2g} < 0.001): the split differs from the plan; do not trust this test"
    )
elif srm_p < 0.01:
    srm_verdict = (
        f"SPLIT SUSPICIOUS (p = {srm_p:.2g} < 0.01): check the assignment and logging before trusting the result"
    )
else:
    srm_verdict = f"split as planned (p = {srm_p:.2g})"

c = totals.loc[control_name]
n_c, x_c = float(c.visitors), float(c.conversions)
p_c = x_c / n_c
has_revenue = "revenue" in totals.columns and "revenue_sq" in totals.columns
rows, raw_p = [], []
for name in variants:
    t = totals.loc[name]
    n_t, x_t = float(t.visitors), float(t.conversions)
    p_t = x_t / n_t
    pooled = (x_c + x_t) / (n_c + n_t)
    z = (p_t - p_c) / math.sqrt(pooled * (1 - pooled) * (1 / n_c + 1 / n_t))
    se = math.sqrt(p_c * (1 - p_c) / n_c + p_t * (1 - p_t) / n_t)
    diff = 100 * (p_t - p_c)
    row = {
        "variant": name,
        "visitors": int(n_t),
        "conversion_pct": round(100 * p_t, 2),
        "diff_points": round(diff, 2),
        "ci_low": round(diff - 196 * se, 2),
        "ci_high": round(diff + 196 * se, 2),
        "lift_pct": round(100 * (p_t / p_c - 1), 1) if p_c else float("nan"),
        "p": float(2 * stats.norm.sf(abs(z))),
        "mde_points": round(100 * (1.96 + 0.84) * math.sqrt(pooled * (1 - pooled) * (1 / n_c + 1 / n_t)), 2),
    }
    if has_revenue:
        m_c, m_t = float(c.revenue) / n_c, float(t.revenue) / n_t
        v_c = float(c.revenue_sq) / n_c - m_c**2
        v_t = float(t.revenue_sq) / n_t - m_t**2
        se_rev = math.sqrt(v_c / n_c + v_t / n_t)
        row.update(
            revenue_per_visitor=round(m_t, 2),
            revenue_diff=round(m_t - m_c, 2),
            revenue_ci_low=round(m_t - m_c - 1.96 * se_rev, 2),
            revenue_ci_high=round(m_t - m_c + 1.96 * se_rev, 2),
            revenue_p=float(2 * stats.norm.sf(abs((m_t - m_c) / se_rev))) if se_rev else 1.0,
        )
    rows.append(row)
comparisons = pd.DataFrame(rows)
adjusted = multipletests(comparisons.p, method="holm")[1] if len(rows) > 1 else comparisons.p.to_numpy()
comparisons["p_adjusted"] = adjusted
comparisons["significant"] = (comparisons.p_adjusted < 0.05) & (srm_p >= 0.001)
significant = bool(comparisons.significant.any())
first = comparisons.iloc[0]
diff_ci = (float(first.ci_low), float(first.ci_high))
mde = float(first.mde_points)
control_row = {"variant": control_name, "visitors": int(n_c), "conversion_pct": round(100 * p_c, 2)}
if has_revenue:
    control_row["revenue_per_visitor"] = round(float(c.revenue) / n_c, 2)
readout = pd.concat([pd.DataFrame([control_row]), comparisons], ignore_index=True)

print(
    "Method: the split checked first (chi-square against the plan); each variant against "
    f"{control_name} by a two-proportion z-test, 95 % intervals"
    + (f", p-values Holm-corrected across {len(rows)} comparisons" if len(rows) > 1 else "")
    + ("; revenue per visitor by Welch's test" if has_revenue else "")
)
print(srm_verdict)
for r in comparisons.itertuples():
    verdict = (
        "a significant difference"
        if r.significant
        else f"no significant difference (the test could detect +-{r.mde_points} points)"
    )
    corrected = f", Holm-adjusted p = {r.p_adjusted:.3g}" if len(rows) > 1 else ""
    print(
        f"{r.variant}: conversion {r.diff_points:+.2f} points ({r.lift_pct:+.1f} %), 95 % interval "
        f"{r.ci_low:+.2f} to {r.ci_high:+.2f}, p = {r.p:.3g}{corrected}: {verdict}"
    )
    if has_revenue:
        print(
            f"{r.variant}: revenue per visitor {r.revenue_diff:+.2f} (95 % interval {r.revenue_ci_low:+.2f} to "
            f"{r.revenue_ci_high:+.2f}), p = {r.revenue_p:.3g} (Welch)"
        )
readout
