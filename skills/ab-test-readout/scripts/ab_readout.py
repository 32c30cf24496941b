"""A/B (or A/B/n) test readout at the unit that was randomised.

Input: SOURCE, the id of a table artifact (or upload) in one of two shapes:
- rows (preferred): one row per analysis row (visitor, pet profile, workspace, quote) with the variant, the id of
  the randomised unit and the outcome(s) - e.g. variant, account_id, pet_profile_id, converted[, revenue]. The
  unit comes from PROFILE["randomisation_unit"] (run business-profile first) or UNIT = "account_id"; UNIT = "row"
  says each row was randomised on its own. METRIC names the 0/1 outcome (default: the one 0/1 column, or
  `converted`), REVENUE an amount per row (default: a column named revenue); EXPERIMENT picks one test when the
  table holds several.
- totals: one row per variant with variant, visitors, conversions and optionally revenue and revenue_sq (the sum
  of squared revenue per visitor) - the totals must count the randomised units.
CONTROL (default "control") names the control; EXPECTED_SPLIT the planned share of units - the control's share
when two variants (default 0.5), or a {variant: share} mapping; equal shares when not given.
Run in run_python as:  PROFILE = {...}  SOURCE = "artifact_..."  then this script.
Method (said in the output): rows are aggregated to the randomised unit. The split is checked at that unit
(chi-square against the plan; its p-value always printed: p < 0.001 a sample ratio mismatch, p < 0.01 suspicious -
both a finding, and no variant is called significant on such a split); row counts per variant are shown but are
not a split check when several rows share a unit. Each variant against the control: the difference in the rate
per row with a cluster-robust (delta-method) variance over units - or the two-proportion z-test when each unit is
one row -, its 95 % interval and p-value, Holm-corrected across several variants; the design effect (clustered /
naive variance, and 1 + (m - 1) x ICC) with the effective sample size, and the p-value rows-as-independent would
have given; revenue per row the same way (Welch when a unit is a row); the smallest effect detectable at 80 % power.
A row-level table whose unit is unknown is refused when an id the variant never changes within shares rows (the
unit cannot be assumed to be the row); with no such id the rows are assumed independent, loudly.
Output: `readout` (the cell's value: one row per variant), `comparisons`, `significant` (any variant),
`diff_ci` (points, the first variant), `p_naive`, `srm_p`, `srm_verdict`, `srm_finding`, `design_effect`,
`effective_n`, `mde` (points), `unit`, `findings`, `assumed`.
"""

import math
import re

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests

PROFILE = globals().get("PROFILE") or {}
control_name = globals().get("CONTROL", "control")
_VARIANT = re.compile(r"^(variant|variant_key|variant_name|arm|group|bucket|treatment_group|experiment_group)$", re.I)
_EXPERIMENT = re.compile(r"^(experiment|experiment_key|experiment_name|experiment_id|test|test_name|test_id)$", re.I)
_IDLIKE = re.compile(
    r"(^|_)(id|key|no|number)$|^id_|account|customer|user|visitor|workspace|profile|device|session|store|"
    r"household|company|member|cookie|client",
    re.I,
)
_TRUE = {"1", "true", "t", "yes", "y", "1.0"}
_FALSE = {"0", "false", "f", "no", "n", "0.0", ""}
findings, warnings_ = [], []


def _load(ref):
    if isinstance(ref, pd.DataFrame):
        return ref.copy()
    if str(ref).startswith("artifact_"):
        return load_artifact(ref)  # noqa: F821 - run_python's helper
    return load_file(ref)  # noqa: F821 - run_python's helper


def _binary(col):
    """A 0/1 column as floats, or None when the column is not 0/1 (booleans and true/false text count)."""
    if col.dtype == bool:
        return col.astype(float)
    text = col.astype(str).str.strip().str.lower().replace({"nan": "", "none": ""})
    if text.isin(_TRUE | _FALSE).all() and text.isin(_TRUE).any():
        return text.isin(_TRUE).astype(float)
    return None


def _verdict(p, unit_word):
    if p < 0.001:
        return (
            f"SAMPLE RATIO MISMATCH (p = {p:.2g} < 0.001) in {unit_word}: the split differs from the plan; do not "
            "trust this test"
        )
    if p < 0.01:
        return (
            f"SPLIT SUSPICIOUS (p = {p:.2g} < 0.01) in {unit_word}: a likely sample ratio mismatch - check the "
            "assignment and logging before trusting the result"
        )
    return f"split as planned (p = {p:.2g}) in {unit_word}"


data = _load(SOURCE)  # noqa: F821 - SOURCE comes from the cell
data.columns = [str(c) for c in data.columns]
variant_col = "variant" if "variant" in data.columns else next((c for c in data.columns if _VARIANT.match(c)), None)
assert variant_col is not None, f"no variant column (variant, arm, group, bucket) among {list(data.columns)}"
data[variant_col] = data[variant_col].astype(str).str.strip()
is_totals = "visitors" in data.columns and "conversions" in data.columns and data[variant_col].is_unique
profile_unit = PROFILE.get("randomisation_unit")
unit_given = globals().get("UNIT")
assumed_facts = []

if is_totals:
    # ---- totals per variant: nothing to aggregate; the totals must already count the randomised units
    totals = data.set_index(variant_col)
    unit = unit_given or profile_unit or "visitor"
    if unit_given is None and profile_unit is None:
        warnings_.append(
            "WARNING: the randomisation unit is unknown (no PROFILE['randomisation_unit'], no UNIT): the totals are "
            "assumed to count randomised units that are independent. If a unit has several rows (pets of an account, "
            "visits of a visitor), feed the rows with the unit's id instead - counting rows inflates significance."
        )
    elif PROFILE.get("analysis_row_unit") and PROFILE.get("analysis_row_unit") != unit:
        warnings_.append(
            f"WARNING: the test was randomised by {unit} but the exports have one row per "
            f"{PROFILE['analysis_row_unit']}: these totals must count {unit}s, not rows - else feed the rows."
        )
    told = "user (UNIT)" if unit_given else "PROFILE" if profile_unit else "assumed"
    assumed_facts.append(f"randomisation unit = {unit} ({told}), one per counted visitor")
    arms_data = {}
    for name, t in totals.iterrows():
        n = float(t["visitors"])
        a = {"units": n, "rows": n, "y": float(t["conversions"]), "clustered": False}
        if "revenue" in totals.columns and "revenue_sq" in totals.columns:
            a["r"], a["r_sq"] = float(t["revenue"]), float(t["revenue_sq"])
        arms_data[name] = a
    has_revenue = "revenue" in totals.columns and "revenue_sq" in totals.columns
    row_counts = None
else:
    # ---- rows: one test, its variant, the unit, the outcome(s)
    experiment = globals().get("EXPERIMENT")
    exp_col = next((c for c in data.columns if _EXPERIMENT.match(c)), None)
    if exp_col is not None:
        if experiment is not None:
            data = data[data[exp_col].astype(str) == str(experiment)]
            assert len(data), f"no rows of experiment {experiment!r} in {exp_col}"
        else:
            tests = data[exp_col].astype(str).unique()
            assert len(tests) == 1, f"{len(tests)} experiments in {exp_col} ({', '.join(tests[:6])}): set EXPERIMENT"
            experiment = tests[0]
    metric = globals().get("METRIC")
    revenue_col = globals().get("REVENUE")
    ids = [c for c in data.columns if c not in (variant_col, exp_col, metric, revenue_col) and _IDLIKE.search(c)]
    if metric is None:
        candidates = [
            c for c in data.columns if c not in (variant_col, exp_col) and c not in ids and _binary(data[c]) is not None
        ]
        named = [c for c in candidates if c.lower() in ("converted", "conversion", "conversions", "converted_to_order")]
        if len(candidates) == 1 or named:
            metric = named[0] if named else candidates[0]
            others = [c for c in candidates if c != metric]
            if others:
                warnings_.append(
                    f"Other 0/1 outcomes ({', '.join(others)}) are secondary: read them with METRIC = '...', "
                    "as exploratory."
                )
        else:
            raise ValueError(
                f"which outcome is the pre-registered metric? 0/1 columns: {candidates or 'none'} - set METRIC = '...'"
            )
    y = _binary(data[metric])
    assert y is not None, f"METRIC {metric!r} is not a 0/1 outcome; give an amount as REVENUE = {metric!r} instead"
    if revenue_col is None and "revenue" in data.columns:
        revenue_col = "revenue"
    rows = pd.DataFrame({"variant": data[variant_col].to_numpy(), "y": y.to_numpy()})
    has_revenue = revenue_col is not None
    if has_revenue:
        rows["r"] = pd.to_numeric(data[revenue_col], errors="coerce").fillna(0.0).to_numpy()

    # the unit: the user's word, else the profile's; never guessed when an id shares rows within one variant
    unit = unit_given or profile_unit
    source_word = "user (UNIT)" if unit_given else "PROFILE"
    if unit is not None and unit != "row" and unit not in data.columns:
        word = re.split(r"[\s(_]", str(unit).strip())[0].lower()
        matches = [c for c in data.columns if c.lower().startswith(word) and c in ids]
        assert len(matches) == 1, f"the randomisation unit {unit!r} is no column of this table ({list(data.columns)})"
        unit = matches[0]
    coarser = []
    for c in ids:
        if c == unit or data[c].is_unique or data[c].isna().any():
            continue
        per = data.groupby(c)[variant_col].nunique()
        if (per <= 1).mean() >= 0.995 and len(data) / len(per) >= 1.05:
            coarser.append((len(per), c, round(len(data) / len(per), 2)))
    coarser.sort()
    if unit is None:
        if coarser:
            n_units, c, m = coarser[0]
            raise ValueError(
                f"REFUSED: the randomisation unit is unknown (no PROFILE['randomisation_unit'], no UNIT) and the "
                f"variant never changes within {c} ({n_units} of them, {m} rows each): if {c} was randomised, its "
                f"rows are not independent and a per-row test overstates significance. Run business-profile, or "
                f"set UNIT = {c!r} (or UNIT = 'row' if each row was randomised on its own)."
            )
        unit = "row"
        source_word = "assumed"
        warnings_.append(
            "WARNING: the randomisation unit is unknown (no PROFILE['randomisation_unit'], no UNIT) and no id in "
            "this table groups rows within one variant: ROWS ARE ASSUMED INDEPENDENT, each randomised on its own. "
            "If a person or account has several rows elsewhere, this readout overstates significance."
        )
    elif coarser and (unit == "row" or coarser[0][0] < data[unit].nunique()):
        warnings_.append(
            f"CHECK: the variant also never changes within {coarser[0][1]}, coarser than {unit} "
            f"({coarser[0][2]} rows each): if {coarser[0][1]} was what was randomised, read with "
            f"UNIT = {coarser[0][1]!r}."
        )
    rows["unit"] = np.arange(len(rows)) if unit == "row" else data[unit].astype(str).to_numpy()
    assert rows["unit"].notna().all(), f"rows without a {unit}"

    # a unit seen in two variants breaks the unit (or the assignment leaked): refuse beyond 1 %, else drop them
    per_unit = rows.groupby("unit")["variant"].nunique()
    mixed = per_unit[per_unit > 1].index
    if len(mixed):
        share = len(mixed) / len(per_unit)
        if share > 0.01:
            raise ValueError(
                f"REFUSED: the variant changes within {len(mixed)} of {len(per_unit)} {unit} values ({share:.1%}): "
                f"{unit} is not the randomisation unit (the profile is contradicted by the data), or the assignment "
                "leaked - find what was randomised first."
            )
        rows = rows[~rows.unit.isin(mixed)]
        findings.append(
            f"{len(mixed)} {unit} values ({share:.2%}) saw both variants and were left out - check the assignment."
        )
    agg = {"m": ("y", "size"), "Y": ("y", "sum"), "Y2": ("y", lambda v: float((v * v).sum()))}
    if has_revenue:
        agg.update(R=("r", "sum"), R2=("r", lambda v: float((v * v).sum())))
    per = rows.groupby(["variant", "unit"]).agg(**agg).reset_index()
    clustered = bool(per.m.max() > 1)
    arms_data = {}
    for name, g in per.groupby("variant"):
        a = {"units": float(len(g)), "rows": float(g.m.sum()), "y": float(g.Y.sum()), "clustered": clustered}
        a["per"] = g
        if has_revenue:
            a["r"], a["r_sq"] = float(g.R.sum()), float(g.R2.sum())
        arms_data[name] = a
    row_counts = {k: a["rows"] for k, a in arms_data.items()}
    assumed_facts.append(
        f"randomisation unit = {unit} ({source_word})"
        + (f", {len(rows) / len(per):.2f} rows per unit" if unit != "row" else "")
        + f"; metric {metric}"
        + (f"; revenue {revenue_col}" if has_revenue else "")
        + (f"; experiment {experiment}" if experiment is not None else "")
    )

assert control_name in arms_data and len(arms_data) >= 2, "the control and at least one variant are needed"
variants = [v for v in arms_data if v != control_name]
arms = [control_name, *variants]
unit_word = "visitors" if is_totals and unit == "visitor" else ("rows" if unit == "row" else f"{unit} units")

# The split against the plan, at the randomised unit, first: a broken assignment voids every comparison below.
planned = globals().get("EXPECTED_SPLIT")
if isinstance(planned, dict):
    shares = [float(planned[a]) for a in arms]
elif planned is not None and len(arms) == 2:
    shares = [float(planned), 1 - float(planned)]
else:
    shares = [1 / len(arms)] * len(arms)
assumed_facts.append("planned split " + "/".join(f"{s / sum(shares):.0%}" for s in shares))
counts = [arms_data[a]["units"] for a in arms]
srm_p = float(stats.chisquare(counts, [sum(counts) * s / sum(shares) for s in shares]).pvalue)
srm_verdict = _verdict(srm_p, unit_word)
srm_finding = srm_p < 0.01
if srm_finding:
    findings.append(
        f"sample ratio mismatch in {unit_word} (chi-square p = {srm_p:.2g} < {0.001 if srm_p < 0.001 else 0.01}): "
        + ", ".join(f"{a} {int(n)}" for a, n in zip(arms, counts, strict=True))
        + " against the plan - the comparisons are not to be trusted until the assignment is explained"
    )
rows_note = None
if row_counts is not None and arms_data[control_name]["clustered"]:
    rc = [row_counts[a] for a in arms]
    rows_p = float(stats.chisquare(rc, [sum(rc) * s / sum(shares) for s in shares]).pvalue)
    rows_note = (
        "rows per variant "
        + ", ".join(f"{a} {int(c)}" for a, c in zip(arms, rc, strict=True))
        + f" (chi-square p = {rows_p:.2g}): "
        + f"rows are not what was randomised, so this is no split check - the split is read in {unit_word}"
    )


def _moments(a):
    """Mean per row, its naive (rows independent) and cluster-robust (delta-method over units) variances, for the
    rate (key y) and revenue (key r)."""
    n = a["rows"]
    out = {}
    for key, col in (("y", "Y"), ("r", "R")):
        if key not in a:
            continue
        mean = a[key] / n
        sq = a["y"] if key == "y" else a["r_sq"]
        naive = max(sq / n - mean**2, 0.0) / n
        if a["clustered"]:
            g = a["per"]
            k = len(g)
            resid = g[col].to_numpy() - mean * g["m"].to_numpy()
            robust = float((resid**2).sum()) / n**2 * k / (k - 1)
        else:
            robust = naive
        out[key] = (mean, naive, robust)
    return out


def _icc(arms_):
    """One-way ANOVA ICC of the 0/1 outcome within units, arms' means apart."""
    k = n = 0
    ssb = ssw = sum_m2 = 0.0
    for a in arms_:
        g = a["per"]
        mean = a["y"] / a["rows"]
        ssb += float((g.m * (g.Y / g.m - mean) ** 2).sum())
        ssw += float((g.Y2 - g.Y**2 / g.m).sum())
        k, n, sum_m2 = k + len(g), n + float(g.m.sum()), sum_m2 + float((g.m**2).sum())
    msb, msw = ssb / (k - len(arms_)), ssw / (n - k) if n > k else 0.0
    m0 = (n - sum_m2 / n) / (k - 1)
    return (msb - msw) / (msb + (m0 - 1) * msw) if msb + (m0 - 1) * msw > 0 else 0.0


c = arms_data[control_name]
mc = _moments(c)
p_c, n_c, x_c = mc["y"][0], c["rows"], c["y"]
rows_out, raw_p = [], []
for name in variants:
    t = arms_data[name]
    mt = _moments(t)
    p_t, n_t, x_t = mt["y"][0], t["rows"], t["y"]
    pooled = (x_c + x_t) / (n_c + n_t)
    pooled_se = math.sqrt(pooled * (1 - pooled) * (1 / n_c + 1 / n_t))
    p_naive_v = float(2 * stats.norm.sf(abs((p_t - p_c) / pooled_se))) if pooled_se else 1.0
    var_naive = mc["y"][1] + mt["y"][1]
    var_robust = mc["y"][2] + mt["y"][2]
    diff = 100 * (p_t - p_c)
    if t["clustered"]:
        se = math.sqrt(var_robust)
        p_value = float(2 * stats.norm.sf(abs((p_t - p_c) / se))) if se else 1.0
        mde_v = 100 * (1.96 + 0.84) * se
    else:
        se = math.sqrt(var_naive)
        p_value = p_naive_v
        mde_v = 100 * (1.96 + 0.84) * pooled_se
    deff = var_robust / var_naive if var_naive else 1.0
    row = {
        "variant": name,
        "units": int(t["units"]),
        "rows": int(n_t),
        "conversion_pct": round(100 * p_t, 2),
        "diff_points": round(diff, 2),
        "ci_low": round(diff - 196 * se, 2),
        "ci_high": round(diff + 196 * se, 2),
        "lift_pct": round(100 * (p_t / p_c - 1), 1) if p_c else float("nan"),
        "p": p_value,
        "p_naive": p_naive_v,
        "design_effect": round(deff, 2),
        "effective_n": round((n_c + n_t) / deff) if deff else int(n_c + n_t),
        "mde_points": round(mde_v, 2),
    }
    if is_totals:
        row["visitors"] = int(n_t)
    if has_revenue:
        m_c_, _, rv_c = mc["r"]
        m_t_, _, rv_t = mt["r"]
        se_rev = math.sqrt(rv_c + rv_t)
        row.update(
            revenue_per_visitor=round(m_t_, 2),
            revenue_diff=round(m_t_ - m_c_, 2),
            revenue_ci_low=round(m_t_ - m_c_ - 1.96 * se_rev, 2),
            revenue_ci_high=round(m_t_ - m_c_ + 1.96 * se_rev, 2),
            revenue_p=float(2 * stats.norm.sf(abs((m_t_ - m_c_) / se_rev))) if se_rev else 1.0,
        )
    rows_out.append(row)
comparisons = pd.DataFrame(rows_out)
adjusted = multipletests(comparisons.p, method="holm")[1] if len(rows_out) > 1 else comparisons.p.to_numpy()
comparisons["p_adjusted"] = adjusted
comparisons["trusted"] = srm_p >= 0.01
comparisons["significant"] = (comparisons.p_adjusted < 0.05) & comparisons.trusted
significant = bool(comparisons.significant.any())
first = comparisons.iloc[0]
diff_ci = (float(first.ci_low), float(first.ci_high))
mde = float(first.mde_points)
p_naive = float(first.p_naive)
clustered_any = bool(c["clustered"])
design_effect = float(first.design_effect)
effective_n = int(first.effective_n)
icc = _icc([arms_data[a] for a in arms]) if clustered_any else 0.0
m_bar = (  # rows per unit, size-weighted (sum m^2 / sum m): with unequal units, 1 + (m - 1) x ICC needs this m
    sum(float((a["per"].m ** 2).sum()) for a in arms_data.values()) / sum(a["rows"] for a in arms_data.values())
    if clustered_any
    else 1.0
)
control_row = {
    "variant": control_name,
    "units": int(c["units"]),
    "rows": int(n_c),
    "conversion_pct": round(100 * p_c, 2),
}
if is_totals:
    control_row["visitors"] = int(n_c)
if has_revenue:
    control_row["revenue_per_visitor"] = round(mc["r"][0], 2)
readout = pd.concat([pd.DataFrame([control_row]), comparisons], ignore_index=True)
unit = str(unit)
assumed = (
    "Assumed: "
    + "; ".join(assumed_facts)
    + ("; units independent of each other" if clustered_any else "; rows independent (each row a randomised unit)")
)
if clustered_any:
    for r in comparisons.itertuples():
        if r.p_naive < 0.05 <= r.p:
            findings.append(
                f"{r.variant}: significant only if rows were independent (per-row p = {r.p_naive:.3g}); at the "
                f"randomised {unit} (cluster-robust) p = {r.p:.3g} - not significant"
            )

print(
    "Method: rows aggregated to the randomised unit; the split checked first (chi-square against the plan, in "
    f"{unit_word}); each variant against {control_name} by "
    + (
        "the difference in rate per row with a cluster-robust (delta-method) variance over units"
        if clustered_any
        else "a two-proportion z-test"
    )
    + ", 95 % intervals"
    + (f", p-values Holm-corrected across {len(rows_out)} comparisons" if len(rows_out) > 1 else "")
    + (
        "; revenue per visitor clustered the same way"
        if has_revenue and clustered_any
        else ("; revenue per visitor by Welch's test" if has_revenue else "")
    )
)
print(assumed)
for line in warnings_:
    print(line)
print(
    srm_verdict + " - " + ", ".join(f"{a} {int(n)} ({n / sum(counts):.1%})" for a, n in zip(arms, counts, strict=True))
)
if rows_note:
    print(rows_note)
if clustered_any:
    print(
        f"Design effect {design_effect:.2f} (variance clustered / naive; by 1 + (m - 1) x ICC, m = {m_bar:.2f} "
        f"size-weighted rows per unit, ICC = {icc:.2f}: {1 + (m_bar - 1) * icc:.2f}): "
        f"{int(sum(row_counts.values()))} rows count as about "
        f"{effective_n} independent ones; per-row (naive) p = {p_naive:.3g} is NOT the test's p-value"
    )
for r in comparisons.itertuples():
    if not r.trusted:
        verdict = "NOT TRUSTED: the split is off (see above); no call until the assignment is explained"
    elif r.significant:
        verdict = "a significant difference"
    else:
        verdict = f"no significant difference (the test could detect +-{r.mde_points} points)"
    corrected = f", Holm-adjusted p = {r.p_adjusted:.3g}" if len(rows_out) > 1 else ""
    print(
        f"{r.variant}: conversion {r.diff_points:+.2f} points ({r.lift_pct:+.1f} %), 95 % interval "
        f"{r.ci_low:+.2f} to {r.ci_high:+.2f}, p = {r.p:.3g}{corrected}: {verdict}"
    )
    if has_revenue:
        print(
            f"{r.variant}: revenue per visitor {r.revenue_diff:+.2f} (95 % interval {r.revenue_ci_low:+.2f} to "
            f"{r.revenue_ci_high:+.2f}), p = {r.revenue_p:.3g} ({'cluster-robust' if clustered_any else 'Welch'})"
        )
for line in findings:
    print("FINDING:", line)
readout  # noqa: B018 - the cell's value
