"""Did a code, scheme or promotion given to a group cause the lift? Against a comparison that did not get it.

Input: SOURCE, a table artifact, and DESIGN, how the group came to get the discount:
- "rollout" (default): a code or scheme given to a group from a date. One row per unit treated (customer, account,
  store) and period (week, month, box number), counts summed into it: columns `unit`, `group` (treated / control,
  1 / 0), `period` (a date or a number: box number for a lifecycle), `outcome`; the start as START (the first
  treated period) or a column `start` per unit (staggered: a unit is a comparison until its own start - not yet
  treated); optional `stratum` (lifecycle stage: tenure band, box number, age; the comparison is matched within
  it). Difference-in-differences in ratios, an event study per period and a pre-trend test over the pre-period.
- "seasonal": a holiday promotion. Rows as for a rollout with `period` a date (a day or a week's start), START and
  END the promotion's first and last day; the baseline is the SAME FISCAL WEEKS LAST YEAR (PROFILE
  fiscal_calendar), the comparison a matched untreated group (`group` 0: another department) - never the weeks
  before the promotion; the same comparison over the PRE_WEEKS (default 4) weeks before it is the placebo.
- "randomised" / "self-selected": one row per unit: `unit`, `group`, `outcome` (retained 0/1, orders, units),
  optional `stratum` or `pre_usage` (pre-period usage; cut into deciles). A randomised holdout is the estimate of
  record (strata only add precision); a self-selected discount (customers chose it, or staff picked them) is
  compared only within strata of pre-period usage, and its raw difference is reported as selection, not effect.
Optional: SCHEME (its name, for the output), PROFILE (business-profile), ALPHA (0.05), SEED.
Run in run_python as:  PROFILE = {...}; DESIGN = "rollout"; START = "2025-06-01"; SOURCE = "artifact_..."  then this.
Output: `effects` (one row per scheme: scheme, design, comparison, naive_lift, lift, ci_low, ci_high, pretrend_p,
treated_units, control_units, finding, flagged - flagged = a lift is claimed), `event` (rollout / seasonal: one row
per period: rel_period, estimate, ci_low, ci_high, phase), `assumed` (the business facts assumed; printed as one
line starting "Assumed:"). Lifts are ratios minus one (+0.25 = +25 %); randomised / self-selected lifts are
differences in the outcome's own units (retention points).
"""

import numpy as np
import pandas as pd
from scipy import stats

PROFILE = globals().get("PROFILE") or {}
design = str(globals().get("DESIGN") or "rollout").lower().replace("_", "-")
design = {"randomized": "randomised", "selfselected": "self-selected", "self-selection": "self-selected"}.get(
    design, design
)
start_given, end_given = globals().get("START"), globals().get("END")
scheme_name = str(globals().get("SCHEME") or "the scheme")
pre_weeks = int(globals().get("PRE_WEEKS") or 4)
alpha = float(globals().get("ALPHA") or 0.05)
seed = int(globals().get("SEED") or 0)
if design not in ("rollout", "seasonal", "randomised", "self-selected"):
    raise ValueError(f'DESIGN = "{design}": use "rollout", "seasonal", "randomised" or "self-selected"')

data = load_artifact(SOURCE)  # noqa: F821 - SOURCE and load_artifact come from run_python
data.columns = [str(c).strip().lower() for c in data.columns]
need = {"unit", "group", "outcome"} | ({"period"} if design in ("rollout", "seasonal") else set())
if not need <= set(data.columns):
    raise ValueError(f"the input needs columns {sorted(need)}; it has {list(data.columns)}")
assumed, warnings = [], []

# --- the business facts ---------------------------------------------------------------------------------------
currencies = sorted(data["currency"].dropna().astype(str).unique()) if "currency" in data.columns else []
reporting = PROFILE.get("reporting_currency")
if len(currencies) > 1:
    raise ValueError(
        f"the outcome is in {len(currencies)} currencies ({', '.join(currencies)}): convert it to one (PROFILE "
        "reporting_currency, at the period's rate) or use units / orders, then drop the currency column"
    )
if currencies:
    if reporting and currencies[0] != reporting:
        warnings.append(f"the outcome is in {currencies[0]}, the reporting currency is {reporting}")
    assumed.append(f"outcome in {currencies[0]}")
elif len(PROFILE.get("currencies") or []) > 1:
    assumed.append(
        f"outcome is a count or already in one currency (the business has {', '.join(PROFILE['currencies'])})"
    )

randomised_by = PROFILE.get("randomisation_unit")
if design == "randomised":
    if randomised_by:
        assumed.append(f"randomised by {randomised_by} (PROFILE): `unit` must hold it")
    else:
        warnings.append("the randomisation unit is UNKNOWN (PROFILE randomisation_unit): `unit` is taken to be it")
    if data.groupby("unit")["group"].nunique().max() > 1:
        raise ValueError("the group changes within a unit: `unit` is not what was randomised - aggregate to it")


def _group(col):
    text = col.astype(str).str.strip().str.lower()
    yes = {"1", "1.0", "true", "treated", "treatment", "test", "yes", "t", "exposed", "pilot", "code", "coupon"}
    no = {"0", "0.0", "false", "control", "holdout", "no", "f", "comparison", "untreated", "none", ""}
    unknown = sorted(set(text) - yes - no)
    if unknown:
        raise ValueError(f"`group` values {unknown[:5]} are neither treated (1) nor control (0)")
    return text.isin(yes)


data["treated"] = _group(data["group"])
data["outcome"] = pd.to_numeric(data["outcome"], errors="coerce").fillna(0.0)
rng = np.random.default_rng(seed)
B = 400


def _dates(col):
    """Dates as the business counts its days: offsets parsed in UTC, then the store's time zone (PROFILE)."""
    text = col.astype(str)
    if text.str.contains(r"[+-]\d{2}:?\d{2}$|Z$", regex=True).mean() > 0.5:
        tz = PROFILE.get("store_timezone")
        stamps = pd.to_datetime(text, utc=True, format="mixed")
        if tz:
            assumed.append(f"days counted in {tz} (PROFILE store_timezone)")
            return stamps.dt.tz_convert(tz).dt.tz_localize(None).dt.normalize()
        warnings.append("timestamps carry UTC offsets but the store's time zone is UNKNOWN: days are UTC days")
        return stamps.dt.tz_localize(None).dt.normalize()
    return pd.to_datetime(text, format="mixed").dt.normalize()


def _unit_matrix(frame, cells):
    """{cell name: boolean row mask} -> (units, U x cells matrix of the outcome's sums)."""
    codes, units = pd.factorize(frame["unit"].astype(str))
    out = np.zeros((len(units), len(cells)))
    y = frame["outcome"].to_numpy(float)
    for j, mask in enumerate(cells.values()):
        out[:, j] = np.bincount(codes, weights=np.where(mask, y, 0.0), minlength=len(units))
    return units, out


def _draws(matrix):
    """The cells' totals in the data (row 0) and in B resamples of whole units (the cluster bootstrap)."""
    weights = rng.multinomial(matrix.shape[0], np.full(matrix.shape[0], 1 / matrix.shape[0]), size=B)
    return np.vstack([matrix.sum(axis=0), weights @ matrix])


def _ratio_did(frame, post, pre, strata):
    """Treated post / its counterfactual (treated pre x the comparison's post / pre, within each stratum) - 1,
    per period of each phase; returns (estimate, bootstrap draws)."""
    cells, scale = {}, {}
    t = frame["treated"].to_numpy()
    for s in strata.unique():
        in_s = (strata == s).to_numpy()
        for name, phase in (("post", post), ("pre", pre)):
            periods = max(frame.loc[phase & in_s, "period_key"].nunique(), 1)
            for arm, mask in (("T", t), ("C", ~t)):
                cells[(s, arm, name)] = phase & in_s & mask
                scale[(s, arm, name)] = periods
    _, matrix = _unit_matrix(frame, cells)
    totals = _draws(matrix) / np.array([scale[k] for k in cells])
    col = {k: i for i, k in enumerate(cells)}
    actual = np.zeros(B + 1)
    counterfactual = np.zeros(B + 1)
    for s in strata.unique():
        tp, tq = totals[:, col[(s, "T", "post")]], totals[:, col[(s, "T", "pre")]]
        cp, cq = totals[:, col[(s, "C", "post")]], totals[:, col[(s, "C", "pre")]]
        usable = (tq > 0) & (cq > 0) & (cp > 0)
        actual += np.where(usable, tp, 0.0)
        counterfactual += np.where(usable, tq * cp / np.where(cq > 0, cq, 1), 0.0)
    lift = np.where(counterfactual > 0, actual / np.where(counterfactual > 0, counterfactual, 1) - 1, np.nan)
    return float(lift[0]), lift[1:]


def _ci(draws, estimate):
    draws = draws[np.isfinite(draws)]
    if len(draws) < 20:
        return float("nan"), float("nan"), float("nan")
    low, high = np.quantile(draws, [alpha / 2, 1 - alpha / 2])
    se = float(np.std(np.log1p(np.clip(draws, -0.999, None))))
    effect = abs(np.log1p(max(estimate, -0.999)))
    z = effect / se if se > 0 else (0.0 if effect < 1e-12 else np.inf)
    return float(low), float(high), float(2 * stats.norm.sf(z))


def _trend_p(rel, draws_by_period, estimates):
    """Pre-trend: the slope of log(1 + event estimate) on the period over the pre-period, its bootstrap se."""
    if len(rel) < 2:
        return float("nan")
    x = np.asarray(rel, float) - np.mean(rel)
    logs = np.log1p(np.clip(np.column_stack(draws_by_period), -0.999, None))
    slopes = logs @ x / (x @ x)
    slope = float(np.log1p(np.clip(np.asarray(estimates), -0.999, None)) @ x / (x @ x))
    se = float(np.nanstd(slopes))
    return float(2 * stats.norm.sf(abs(slope) / se)) if se > 0 else (1.0 if abs(slope) < 1e-12 else 0.0)


adj_lift = adj_low = adj_high = float("nan")  # the lift beyond a continued pre-trend (rollout)
every_lift = every_low = every_high = float("nan")  # a standing scheme against every pre-period (the check)
rows, event = [], pd.DataFrame(columns=["rel_period", "estimate", "ci_low", "ci_high", "phase"])
strata = data["stratum"].astype(str) if "stratum" in data.columns else pd.Series("all", index=data.index)
if "stratum" in data.columns:
    assumed.append(f"comparison matched within {data['stratum'].nunique()} strata (`stratum`)")

# --- rollout: difference-in-differences against not-yet / never-treated units, event study, pre-trend ----------
if design == "rollout":
    numeric = pd.api.types.is_numeric_dtype(data["period"])
    data["period_key"] = data["period"] if numeric else _dates(data["period"])
    convert = (lambda v: float(v)) if numeric else (lambda v: _dates(pd.Series([v])).iloc[0])
    if end_given is not None:  # the scheme's last period: what comes after it is neither pre nor post
        data = data[data.period_key <= convert(end_given)].copy()
        strata = strata.loc[data.index]
    if "start" in data.columns:  # staggered: each unit's own start; a later unit is a comparison until then
        starts = data.groupby("unit")["start"].first()
        starts = starts[starts.notna() & (starts.astype(str).str.strip() != "")].map(convert)
    elif start_given is not None:
        starts = pd.Series(convert(start_given), index=data.loc[data.treated, "unit"].unique())
    else:
        raise ValueError("a rollout needs START (the first treated period) or a `start` column per unit")
    if not data.treated.any() or data.treated.all():
        raise ValueError(
            "a rollout needs treated and comparison units (`group` 1 and 0): a before/after on the treated "
            "alone is not a lift (the season and the trend move it too)"
        )
    cohorts = sorted(starts.unique())
    never = set(data.loc[~data.treated, "unit"]) - set(starts.index)
    pieces, event_rows = [], []
    baseline_text = "all pre-period periods"

    def _baseline(part, c):
        """The pre-period the post is compared with. A standing scheme (6 or more dated post periods) on data that
        hold the same periods a year earlier: those (the seasons aligned, the drift of a long history left out -
        the year-on-year difference-in-differences); otherwise every period before the start."""
        global baseline_text
        pre = part.period_key < c
        if numeric:
            return pre
        post_keys = sorted(part.loc[part.period_key >= c, "period_key"].unique())
        year_ago = {pd.Timestamp(k) - pd.DateOffset(years=1) for k in post_keys}
        if len(post_keys) >= 6 and pre.any():
            step = pd.Series(sorted(part.period_key.unique())).diff().median()
            if step >= pd.Timedelta(days=7) and step < pd.Timedelta(days=28):  # weeks: 52 weeks earlier
                year_ago = {pd.Timestamp(k) - pd.Timedelta(weeks=52) for k in post_keys}
            same = pre & part.period_key.isin(year_ago)
            if part.loc[same, "period_key"].nunique() >= 0.75 * len(post_keys):
                baseline_text = "the same periods a year earlier"
                return same
        return pre

    for c in cohorts:
        later = [d for d in cohorts if d > c]
        horizon = data.period_key.max() if never or not later else later[0]
        members = set(starts[starts == c].index)
        comparison = never | set(starts[starts > (horizon if never else c)].index)
        if not never and later:  # no never-treated: units not yet treated, up to the next start
            comparison = set(starts[starts >= later[0]].index)
        window = data.period_key < horizon if (not never and later) else data.period_key <= horizon
        part = data[data.unit.isin(members | comparison) & window].copy()
        part["treated"] = part.unit.isin(members)
        post, pre = (part.period_key >= c), (part.period_key < c)
        if not pre.any() or not post.any() or part.treated.all() or not (~part.treated).any():
            continue
        s = strata.loc[part.index]
        est, draws = _ratio_did(part, post, _baseline(part, c), s)
        pieces.append((c, len(members), len(comparison), est, draws, part, post, pre))
    if not pieces:
        raise ValueError("no cohort has both a pre-period and a comparison: nothing to compare")
    # one cohort (the usual case) or several weighted by their treated units
    weights = np.array([p[1] for p in pieces], float)
    lift = float(np.average([p[3] for p in pieces], weights=weights))
    draws = np.average(np.vstack([p[4] for p in pieces]), axis=0, weights=weights)
    low, high, p_lift = _ci(draws, lift)
    # event study on the first (largest) cohort: every period against the pre-period
    c, n_t, n_c, _, _, part, post, pre = max(pieces, key=lambda p: p[1])
    if baseline_text == "the same periods a year earlier":  # the check: every pre-period as the baseline instead
        every_lift, every_draws = _ratio_did(part, post, pre, strata.loc[part.index])
        every_low, every_high, _ = _ci(every_draws, every_lift)
    periods = sorted(part.period_key.unique())
    first_post = periods.index(min(x for x in periods if x >= c))
    rel_draws, rel_est, rel_k, post_logs = [], [], [], []
    for i, k in enumerate(periods):
        est, d = _ratio_did(part, part.period_key == k, pre, strata.loc[part.index])
        lo, hi, _ = _ci(d, est)
        event_rows.append((i - first_post, est, lo, hi, "post" if k >= c else "pre"))
        if k < c:
            rel_k.append(i - first_post)
            rel_est.append(est)
            rel_draws.append(d)
        else:
            post_logs.append((i - first_post, np.log1p(np.clip(np.r_[est, d], -0.999, None))))
    event = pd.DataFrame(event_rows, columns=["rel_period", "estimate", "ci_low", "ci_high", "phase"])
    pretrend_p = _trend_p(rel_k, rel_draws, rel_est)
    # the lift beyond the pre-trend: the pre-period's event estimates' line (log scale) carried on into the post
    # periods as the counterfactual - the sensitivity of the lift to a trend that would have continued (the linear
    # case of Rambachan & Roth's bounds); in every bootstrap draw alike
    adj_lift, adj_low, adj_high = float("nan"), float("nan"), float("nan")
    if len(rel_k) >= 2 and post_logs:
        x = np.asarray(rel_k, float)
        pre_logs = np.log1p(
            np.clip(np.column_stack([np.r_[e, d] for e, d in zip(rel_est, rel_draws, strict=True)]), -0.999, None)
        )
        xc = x - x.mean()
        slope = pre_logs @ xc / (xc @ xc)
        level = pre_logs.mean(axis=1)
        gaps = [logs - (level + slope * (r - x.mean())) for r, logs in post_logs]
        adj = np.expm1(np.mean(np.column_stack(gaps), axis=1))
        adj_lift = float(adj[0])
        adj_low, adj_high, _ = _ci(adj[1:], adj_lift)
    t_part = part[part.treated]
    naive = t_part.loc[post, "outcome"].sum() / max(t_part.loc[post, "period_key"].nunique(), 1)
    naive = naive / (t_part.loc[pre, "outcome"].sum() / max(t_part.loc[pre, "period_key"].nunique(), 1)) - 1
    comparison_text = ("never-treated units" if never else "units not yet treated") + f", against {baseline_text}"
    treated_units, control_units = int(sum(p[1] for p in pieces)), int(max(p[2] for p in pieces))
    n_pre = len(rel_k)
    if not numeric:
        cal = PROFILE.get("fiscal_calendar") or {}
        assumed.append(f"periods as given ({cal.get('kind') or 'fiscal calendar UNKNOWN'}); start {str(c)[:10]}")
    else:
        assumed.append(f"periods are lifecycle / period numbers; start at {c:g}")

# --- seasonal: the same fiscal weeks last year, against a matched untreated group ----------------------------
elif design == "seasonal":
    if start_given is None or end_given is None:
        raise ValueError("a seasonal promotion needs START and END (its first and last day)")
    cal = PROFILE.get("fiscal_calendar") or {}
    kind, first = cal.get("kind"), cal.get("first_day")
    data["period_key"] = _dates(data["period"])
    start, end = pd.Timestamp(start_given), pd.Timestamp(end_given)
    if kind in ("4-5-4", "4-4-5", "5-4-4") and first:
        listed = {str(y).replace("FY", "").strip() for y in cal.get("53_week_years") or []}
        year_starts = [pd.Timestamp(first)]
        for _ in range(12):
            s = year_starts[-1]
            long = str(s.date()) in listed or str(s.year) in listed or str(s.year + 1) in listed
            year_starts.append(s + pd.Timedelta(weeks=53 if long else 52))
        for _ in range(12):
            s = year_starts[0] - pd.Timedelta(weeks=52)
            long = str(s.date()) in listed or str(s.year) in listed or str(s.year + 1) in listed
            year_starts.insert(0, s - pd.Timedelta(weeks=1) if long else s)

        def last_year(day):
            this = max(s for s in year_starts if s <= day)
            return year_starts[year_starts.index(this) - 1] + (day - this)  # same fiscal week and weekday

        basis = f"the same fiscal weeks last year ({kind} from {first}, 53-week years {sorted(listed) or 'none'})"
    else:
        if kind:
            warnings.append(f"fiscal calendar {kind}: last year is the same weekday 52 weeks earlier")
        else:
            warnings.append(
                "the fiscal calendar is UNKNOWN (PROFILE fiscal_calendar): last year = 52 weeks earlier, the same "
                "weekday - a 53-week year shifts the holiday by a week; run business-profile"
            )

        def last_year(day):
            return day - pd.Timedelta(weeks=52)

        basis = "the same weekdays 52 weeks earlier"
    ly_start, ly_end = last_year(start), last_year(end)
    pre_start = start - pd.Timedelta(weeks=pre_weeks)
    day = data["period_key"]
    if not (day <= ly_start).any():
        raise ValueError(f"no data for last year's window ({ly_start.date()}): the seasonal baseline is missing")
    post, base = day.between(start, end), day.between(ly_start, ly_end)
    pre_ty = day.between(pre_start, start - pd.Timedelta(days=1))
    pre_ly = day.between(last_year(pre_start), ly_start - pd.Timedelta(days=1))
    data["period_key"] = day.dt.strftime("%Y-%m-%d")
    had_control = bool((~data.treated).any())
    if not had_control:
        warnings.append("no untreated comparison group: the lift is against last year only (it includes the trend)")
    if had_control:
        lift, draws = _ratio_did(data, post, base, strata)
        placebo, placebo_draws = _ratio_did(data, pre_ty, pre_ly, strata)
    else:
        cells = {"post": post.to_numpy(), "base": base.to_numpy()}
        _, matrix = _unit_matrix(data, cells)
        totals = _draws(matrix)
        ratio = totals[:, 0] / max(post.sum(), 1) / (totals[:, 1] / max(base.sum(), 1)) - 1
        lift, draws = float(ratio[0]), ratio[1:]
        placebo, placebo_draws = float("nan"), np.full(B, np.nan)
    low, high, p_lift = _ci(draws, lift)
    pretrend_p = _ci(placebo_draws, placebo)[2] if had_control else float("nan")
    t = data[data.treated]
    per_day = lambda m: t.loc[m, "outcome"].sum() / max(t.loc[m, "period_key"].nunique(), 1)  # noqa: E731
    naive = per_day(post[data.treated]) / per_day(pre_ty[data.treated]) - 1
    event = pd.DataFrame(
        [(-1, placebo, *_ci(placebo_draws, placebo)[:2], "pre (placebo)"), (0, lift, low, high, "post")],
        columns=["rel_period", "estimate", "ci_low", "ci_high", "phase"],
    )
    comparison_text = basis + (", against the untreated group" if had_control else "")
    treated_units = int(data.loc[data.treated, "unit"].nunique())
    control_units = int(data.loc[~data.treated, "unit"].nunique())
    n_pre = pre_weeks
    assumed.append(f"baseline = {basis}")

# --- randomised holdout / self-selected discount: per unit, within strata --------------------------------------
else:
    if data["unit"].duplicated().any():
        raise ValueError("one row per unit is needed (randomised / self-selected): aggregate to the unit first")
    covariate, covariate_names, adjustment_text = None, [], ""
    pre_cols = [c for c in data.columns if c.startswith("pre_")] if design == "randomised" else []
    if design == "randomised" and "stratum" not in data.columns and pre_cols:
        # randomised: the covariates adjust, they do not select - one regression on every pre-period covariate given
        # (`pre_*`: the unit's own pre-period outcome, usage, tenure, seats, plan; CUPED / ANCOVA - Lin 2013: the
        # treatment, the centred covariates and their products, HC2 standard errors), never deciles of a few units
        # each, whose noisy within-cell variances widen the interval they are there to narrow
        blocks = []
        for c in pre_cols:
            num = pd.to_numeric(data[c], errors="coerce")
            if num.notna().mean() >= 0.9 and num.nunique() > 2:  # a number: missing ones at the mean, flagged
                if num.isna().any():
                    blocks.append(((num.isna()).astype(float).to_numpy(), f"{c} missing"))
                blocks.append((num.fillna(num.mean()).to_numpy(float), c))
            else:  # a category (plan, region) or a 0/1 flag: one indicator per level but the first
                levels = data[c].astype(str).fillna("")
                for level in sorted(levels.unique())[1:]:
                    blocks.append(((levels == level).astype(float).to_numpy(), f"{c}={level}"))
        blocks = [(v, n) for v, n in blocks if np.nanstd(v) > 0]
        only_bands = pre_cols == ["pre_usage"] and pd.to_numeric(data["pre_usage"], errors="coerce").nunique() <= 10
        if blocks and not only_bands:
            covariate = np.column_stack([v for v, _ in blocks])
            covariate_names = [n for _, n in blocks]
            assumed.append(
                "adjusted for pre-period covariates ("
                + ", ".join(covariate_names)
                + "; Lin's regression): each was measured BEFORE the offer - one measured after it absorbs the effect"
            )
    if covariate is not None:
        pass
    elif "stratum" not in data.columns and "pre_usage" in data.columns:
        usage = pd.to_numeric(data["pre_usage"], errors="coerce")
        if usage.nunique() <= 10:  # already bands: each its own stratum
            strata = usage.astype(str)
        else:  # deciles, ties kept together
            strata = pd.Series(pd.qcut(usage, 10, labels=False, duplicates="drop"), index=data.index).astype(str)
        strata = strata.where(usage.notna(), "unknown")
        assumed.append("strata = deciles of pre-period usage (`pre_usage`)")
    elif "stratum" not in data.columns and design == "self-selected":
        raise ValueError(
            "a self-selected discount is compared only within strata of pre-period usage: give `pre_usage` "
            "(or `stratum`); its raw difference is selection, not effect"
        )
    y, t = data["outcome"].to_numpy(float), data["treated"].to_numpy()
    raw = float(y[t].mean() - y[~t].mean())
    effect, variance, n_t = 0.0, 0.0, 0
    for s in strata.unique() if covariate is None else []:
        m = (strata == s).to_numpy()
        yt, yc = y[m & t], y[m & ~t]
        if len(yt) == 0 or len(yc) == 0:
            continue  # a stratum without both groups compares nothing
        effect += len(yt) * (yt.mean() - yc.mean())
        # a group of one unit in a stratum has no variance of its own to show: the stratum's pooled variance
        # (else the whole group's) stands in for it - a zero there would narrow the interval on no evidence
        pooled = y[m].var(ddof=1) if m.sum() > 2 else y[t if len(yt) == 1 else ~t].var(ddof=1)
        vt = (yt.var(ddof=1) if len(yt) > 1 else pooled) / len(yt)
        vc = (yc.var(ddof=1) if len(yc) > 1 else pooled) / len(yc)
        variance += len(yt) ** 2 * (vt + vc)
        n_t += len(yt)
    if covariate is not None:
        if t.sum() < 2 or (~t).sum() < 2:
            raise ValueError("a randomised comparison needs at least two units in each group")
        xc = covariate - covariate.mean(axis=0)
        k = xc.shape[1]
        # the treatment x covariate products (Lin) while each group has room for them; else the additive ANCOVA
        interact = min(t.sum(), (~t).sum()) > 2 * k + 2
        X = np.column_stack([np.ones_like(y), t.astype(float), xc] + ([t[:, None] * xc] if interact else []))

        def _hc2(X):
            bread = np.linalg.pinv(X.T @ X)
            coef = bread @ X.T @ y
            resid = y - X @ coef
            leverage = np.clip(np.einsum("ij,jk,ik->i", X, bread, X), 0, 0.99)
            cov = bread @ (X.T * (resid**2 / (1 - leverage))) @ X @ bread
            return float(coef[1]), float(np.sqrt(max(cov[1, 1], 0.0)))

        lift, se = _hc2(X)
        _, se_raw = _hc2(X[:, :2])
        adjustment_text = (
            f"adjusted for {k} pre-period covariate{'s' if k > 1 else ''} "
            f"({'Lin' if interact else 'ANCOVA, no interactions: too few units a group'}): standard error "
            f"{se:.3f} against {se_raw:.3f} unadjusted ({100 * (1 - se**2 / se_raw**2):.0f} % of the variance removed)"
            if se_raw > 0
            else ""
        )
    elif n_t == 0:
        raise ValueError("no stratum has both treated and comparison units")
    else:
        lift, se = effect / n_t, np.sqrt(variance) / n_t
    z = stats.norm.ppf(1 - alpha / 2)
    low, high = lift - z * se, lift + z * se
    p_lift = float(2 * stats.norm.sf(abs(lift) / se)) if se > 0 else 0.0
    naive, pretrend_p, n_pre = raw, float("nan"), 0
    comparison_text = ("randomised holdout" if design == "randomised" else "units who did not take it") + (
        ", adjusted for pre-period usage (regression)"
        if covariate_names == ["pre_usage"]
        else f", adjusted for pre-period covariates (regression on {', '.join(covariate_names)})"
        if covariate is not None
        else f", within {strata.nunique()} strata"
    )
    treated_units, control_units = int(t.sum()), int((~t).sum())
    assumed.append(f"the unit is `unit` ({treated_units} treated, {control_units} comparison)")

# --- the finding ---------------------------------------------------------------------------------------------
detectable = bool(np.isfinite(low) and (low > 0 or high < 0))
# power: the smallest true lift this comparison finds 80 % of the time - said beside every "no detectable lift"
z_power = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(0.8)
if design in ("randomised", "self-selected"):
    mde = float(z_power * se)
    shown_mde = lambda v: f"{v:+.3f}"  # noqa: E731
else:
    _d = draws[np.isfinite(draws)]
    mde = float(np.expm1(z_power * np.std(np.log1p(np.clip(_d, -0.999, None))))) if len(_d) >= 20 else float("nan")
    shown_mde = lambda v: f"{100 * v:+.1f} %"  # noqa: E731
pretrend_failed = bool(np.isfinite(pretrend_p) and pretrend_p < alpha)
# a pre-trend vetoes the lift only when carrying it on could explain the lift: when the lift beyond the continued
# trend has the same sign and its interval excludes zero too (a trend running against the effect - a chance
# imbalance of a pilot drawn by lot - takes nothing from it), the lift stands
beyond_trend = bool(
    detectable and np.isfinite(adj_low) and (adj_low > 0 if lift > 0 else adj_high < 0) and adj_lift * lift > 0
)
if pretrend_failed and beyond_trend:
    finding = (
        f"lift, beyond the pre-trend: the groups diverged before the start (p = {pretrend_p:.3g}) but the lift "
        f"holds with that trend carried on ({100 * adj_lift:+.1f} %, interval {100 * adj_low:+.1f} % to "
        f"{100 * adj_high:+.1f} %)"
    )
    if lift < 0:
        finding = finding.replace("lift, beyond", "a detectable FALL, beyond")
elif pretrend_failed:
    finding = (
        f"NOT CLAIMED: the pre-trend test fails (p = {pretrend_p:.3g}) - the groups were already diverging "
        "before the start (selection on a trend), so the difference-in-differences is not an effect"
        + (f"; with that trend carried on the lift is {100 * adj_lift:+.1f} %" if np.isfinite(adj_lift) else "")
        + (
            f"; the trend is read from only {n_pre} pre-periods: a longer pre-period (8 to 12) or last year's same "
            "periods would show whether it is a trend or one unusual period"
            if design == "rollout" and n_pre < 6
            else ""
        )
    )
elif design == "self-selected" and detectable:
    finding = "an effect within strata of pre-period usage (observational: only as good as the strata)"
elif detectable:
    finding = "lift" if lift > 0 else "a detectable FALL"
else:
    finding = "no detectable lift: the interval includes zero"
    if np.isfinite(mde):
        finding += (
            f" - this comparison detects a lift of {shown_mde(mde)} or more 80 % of the time (alpha {alpha:g}); "
            + (
                f"the estimate ({shown_mde(lift)}) is below that: too small a test to tell, not evidence of no effect"
                if abs(lift) < mde
                else "a lift that size would have been seen"
            )
        )
if design == "self-selected":
    finding += f"; the raw difference ({naive:+.3g}) is selection, not effect"
if design in ("rollout", "seasonal") and abs(naive - lift) > 0.1:
    finding += f"; a before/after on the treated alone ({naive:+.0%}) is not the lift"
flagged = bool(detectable and (not pretrend_failed or beyond_trend))
effects = pd.DataFrame(
    [
        {
            "scheme": scheme_name,
            "design": design,
            "comparison": comparison_text,
            "naive_lift": naive,
            "lift": lift,
            "ci_low": low,
            "ci_high": high,
            "p": p_lift,
            "pretrend_p": pretrend_p,
            "mde": mde,
            "lift_beyond_trend": adj_lift,
            "lift_every_pre": every_lift,
            "treated_units": treated_units,
            "control_units": control_units,
            "finding": finding,
            "flagged": flagged,
        }
    ]
)
unit_word = "points" if design in ("randomised", "self-selected") else ""
shown = (lambda v: f"{v:+.3f}") if unit_word else (lambda v: f"{100 * v:+.1f} %")
print(f"{scheme_name} ({design}): {treated_units} treated units against {control_units}: {comparison_text}")
if design in ("rollout", "seasonal"):
    print(
        f"pre-trend test over {n_pre} pre-period {'weeks' if design == 'seasonal' else 'periods'}: "
        f"p = {pretrend_p:.3g}" + (" - FAILED" if pretrend_failed else " (parallel)")
    )
    print(f"naive before/after on the treated: {shown(naive)}")
else:
    print(f"raw difference: {shown(naive)}" + (" (selection, not effect)" if design == "self-selected" else ""))
spread = "units resampled / clustered by unit" if design in ("rollout", "seasonal") else "the variance between units"
print(f"lift: {shown(lift)} (95 % interval {shown(low)} to {shown(high)}, {spread})")
if np.isfinite(every_lift):
    print(
        f"the same against every pre-period (the baseline's check): {shown(every_lift)} (95 % interval "
        f"{shown(every_low)} to {shown(every_high)})"
    )
if design in ("randomised", "self-selected") and adjustment_text:
    print(adjustment_text)
print(f"finding: {finding}")
for w in warnings:
    print(f"WARNING: {w}")
print("Assumed: " + "; ".join(assumed or ["nothing beyond the input's columns"]))
