"""CLV: subscribers from contract state and renewal survival by plan (sBG, Fader & Hardie 2007), BG/NBD + Gamma-Gamma
for buyers without a contract; checked on a hold-out year by contract status. Inputs and outputs: SKILL.md."""

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from scipy.special import betaln, gammaln, hyp2f1

PROFILE = globals().get("PROFILE") or {}
years = int(globals().get("YEARS", 3))
rate = float(globals().get("DISCOUNT_RATE", 0.1))
recovery = globals().get("DUNNING_RECOVERY")
zone = PROFILE.get("store_timezone")
warnings_out = []


def warn(text: str) -> None:
    warnings_out.append(text)
    print("WARNING: " + text)


def when(col: pd.Series) -> pd.Series:
    """Local (tz-naive) times: UTC offsets converted to the store's time zone, Unix seconds (number or text) as UTC."""
    text = col.astype("string").str.strip().replace("", pd.NA)
    num = pd.to_numeric(text, errors="coerce")
    if pd.api.types.is_datetime64_any_dtype(col):
        out = col
    elif text.notna().any() and num.notna().sum() == text.notna().sum() and num.dropna().between(9e8, 2.2e9).all():
        out = pd.to_datetime(num, unit="s", utc=True)
    else:
        if text.str.contains(r"(?:[+-]\d{2}:?\d{2}|Z)$", regex=True, na=False).any():
            out = pd.to_datetime(text, utc=True, format="mixed")
        else:
            out = pd.to_datetime(text, format="mixed")
    if getattr(out.dt, "tz", None) is not None:
        out = out.dt.tz_convert(zone or "UTC").dt.tz_localize(None)
    return out


orders = load_artifact(SOURCE)  # noqa: F821
orders = orders.assign(order_date=when(orders.order_date), margin=orders.margin.astype(float))
end = orders.order_date.max().normalize() + pd.Timedelta(days=1)  # the data's end: the day after its last order
cut = pd.Timestamp(globals().get("CUTOFF") or end - pd.DateOffset(years=1))
horizon = 365.25 * years

# ---- which method: the business's contract facts (PROFILE) and the subscription states (STATES)
said = PROFILE.get("contractual")
said = "mixed" if str(said).lower() == "mixed" else (None if said is None else bool(said))
states_ref = globals().get("STATES")
if states_ref is None and said in (True, "mixed"):
    raise ValueError(
        "REFUSED: PROFILE says the business is contractual"
        + (" (mixed)" if said == "mixed" else "")
        + ": a subscriber's value comes from their contract state. Pass STATES (SKILL.md step 1) and run again."
    )
WORDS = {  # a status as written -> the contract state it means
    "active": "active skipped skip",
    "trial": "trialing trial in_trial",
    "paused": "paused pause",
    "dunning": "past_due unpaid dunning error failed",
    "cancelled": "cancelled canceled expired churned ended",
    "pending_cancel": "pending_cancel non_renewing",
}
RANK = {"active": 0, "paused": 1, "dunning": 2, "trial": 3, "pending_cancel": 4, "cancelled": 5}
RANK["cancelled after the cut-off"] = 5
STATE_WORDS = {word: state for state, words in WORDS.items() for word in words.split()}
ALIASES = {"canceled_at": "cancelled_at", "paused_until": "pause_until", "created_at": "started_at"}
states = None
if states_ref is not None:
    states = load_artifact(states_ref) if isinstance(states_ref, str) else pd.DataFrame(states_ref)  # noqa: F821
    states.columns = [str(c).strip().lower() for c in states.columns]
    states = states.rename(columns={k: v for k, v in ALIASES.items() if v not in states.columns})
    missing = {"customer_id", "status"} - set(states.columns)
    if missing:
        raise ValueError(f"STATES needs the columns {sorted(missing)} (one row per subscription)")
    raw = states.status.astype(str).str.strip().str.lower().str.replace(" ", "_")
    states["state"] = raw.map(STATE_WORDS)
    if states.state.isna().any():
        unknown = sorted(raw[states.state.isna()].unique())[:6]
        warn(f"statuses {unknown} read as active: check them")
        states["state"] = states.state.fillna("active")
    if "cancel_at_period_end" in states.columns:  # Stripe: active, but set to end with the paid period
        pending = states.cancel_at_period_end.astype(str).str.strip().str.lower().isin(["true", "1", "yes"])
        states.loc[pending & states.state.isin(["active", "dunning", "paused"]), "state"] = "pending_cancel"
    if "subscription_id" not in states.columns:
        states["subscription_id"] = np.arange(len(states))
    if "plan" not in states.columns:
        warn("STATES has no plan: one survival curve for every subscription")
        states["plan"] = "all"
    states["plan"] = states.plan.astype(str)
    for c in ("started_at", "cancelled_at", "pause_until", "next_charge_at", "trial_end", "first_paid_at"):
        states[c] = when(states[c]) if c in states.columns else pd.NaT
    states["contract_id"] = states.reindex(columns=["contract_id"]).contract_id.fillna(states.subscription_id)
    if said is False:
        warn("PROFILE says not contractual, but STATES given: subscribers valued by contract")
    elif said is None:
        warn("PROFILE does not say if the business is contractual: STATES given, read as mixed")
    mode = "contractual" if said is True else "mixed"
else:
    mode = "non-contractual"
if said is None and states is None:
    warn("PROFILE does not say if the business is contractual (run business-profile): BG/NBD for all")

subscribers = set(states.customer_id) if states is not None else set()
contract_orders = orders[orders.customer_id.isin(subscribers)]
free_orders = orders[~orders.customer_id.isin(subscribers)]
if mode == "contractual" and len(free_orders):
    warn(f"{free_orders.customer_id.nunique():,} customers have orders but no subscription: not valued")
    free_orders = free_orders.iloc[0:0]


# ---- contractual: state first, then renewal survival by plan (sBG)
def sbg_fit(paid: np.ndarray, churned: np.ndarray, entered=None) -> tuple[float, float]:
    """sBG ML: churn chance per renewal ~ Beta(a, b); cancelled after paying n periods: B(a+1, b+n-1) / B(a, b),
    alive: B(a, b+n-1) / B(a, b); left truncation: / P(T >= entered)."""
    entered = 1.0 if entered is None else np.asarray(entered, float)
    table = pd.DataFrame({"paid": np.asarray(paid, float), "churned": np.asarray(churned, bool), "entered": entered})
    table = table.value_counts().reset_index()  # one term per distinct history
    n, gone, start, count = (table[c].to_numpy() for c in ("paid", "churned", "entered", "count"))

    def nll(p):
        a, b = np.exp(p)
        ll = np.where(gone, betaln(a + 1, b + n - 1), betaln(a, b + n - 1)) - betaln(a, b + start - 1)
        return -(count * ll).sum()

    # bounded: with no spread in churn between subscribers a and b run off together (a geometric)
    tries = [minimize(nll, x, method="L-BFGS-B", bounds=[(-6, 12), (-6, 12)]) for x in ([0, 0], [0, 2], [2, 5])]
    a, b = np.exp(min(tries, key=lambda r: r.fun).x)
    return float(a), float(b)


def renew(a: float, b: float, t) -> np.ndarray:
    t = np.asarray(t, float)
    return (b + t - 1) / (a + b + t - 1)


def tenure(frame: pd.DataFrame, at: pd.Timestamp) -> pd.DataFrame:
    """Terms paid by `at` per contract (cancelled: ceil(days / term), live: floor + 1), rows ended, periods billed."""
    out = frame[frame.started_at < at].copy()
    ended = out.cancelled_at.notna() & (out.cancelled_at < at)
    if at == end:
        ended = ended | out.state.eq("cancelled")
    out["ended"], out["stop"] = ended, out.cancelled_at.where(ended, at).fillna(at)
    unit = out.groupby("contract_id")
    out["begun"], out["unit_ended"] = unit.started_at.transform("min"), unit.ended.transform("all")
    days = (unit.stop.transform("max").where(out.unit_ended, at) - out.begun).dt.total_seconds() / 86400
    out["paid"] = np.where(out.unit_ended, np.ceil(days / out.term).clip(lower=1), np.floor(days / out.term) + 1)
    out["billed"] = np.floor((at - out.started_at).dt.total_seconds() / 86400 / out.period) + 1
    before = ((export_start - out.begun).dt.total_seconds() / 86400).clip(lower=0) if export_start else 0
    out["entered"] = np.minimum(np.floor(before / out.term) + 1, out.paid) if export_start else 1.0
    return out


def units(data: pd.DataFrame) -> pd.DataFrame:
    """One row per contract: renewals counted per term, not per invoice."""
    return data.drop_duplicates("contract_id").assign(ended=lambda d: d.unit_ended)


def fit_plans(data: pd.DataFrame) -> dict:
    """One sBG per plan (30+ contracts, 5+ cancelled); smaller plans share a pooled fit."""
    data = units(data)
    pooled = sbg_fit(data.paid, data.ended, data.entered)
    fits = {}
    for plan, group in data.groupby("plan"):
        if len(group) >= 30 and group.ended.sum() >= 5:
            fits[plan] = sbg_fit(group.paid, group.ended, group.entered)
        else:
            fits[plan] = pooled
    return fits


def future(data: pd.DataFrame, fits: dict, at: pd.Timestamp, until: float, discount: bool) -> pd.DataFrame:
    """Per subscription: expected charges in `until` days after `at`, one a period from the next (charge, resume
    date or period end), each paid if the contract renewed up to its term; and their value."""
    charges, value, within_year = [], [], []
    for row in data.itertuples():
        if row.ended or (at == end and row.state in ("cancelled", "pending_cancel")):
            charges.append(0.0)
            value.append(0.0)
            within_year.append(0.0)
            continue
        a, b = fits[row.plan]
        if row.state == "paused" and pd.notna(row.pause_until) and at == end:
            first = max((row.pause_until - at).total_seconds() / 86400, 0.0)
        elif pd.notna(row.next_charge_at) and row.next_charge_at >= at and at == end:
            first = (row.next_charge_at - at).total_seconds() / 86400
        else:
            first = max(((row.started_at + pd.Timedelta(days=row.period * row.billed)) - at).total_seconds() / 86400, 0)
        times = first + np.arange(0, max(int((until - first) // row.period) + 1, 0)) * row.period
        times = times[times < until]
        step = np.arange(1, len(times) + 1)  # renewals needed by each charge: one each, or at the term's end only
        if row.term > 1.5 * row.period:
            age = ((at - row.begun).total_seconds() / 86400 + times) / row.term
            step = np.clip(np.floor(age + 0.02) + 1 - row.paid, 0, None).astype(int)
        trial = row.state == "trial" and at == end  # the first charge is the conversion, then renewals from 1
        chances = np.r_[1.0, renew(a, b, row.paid - trial + np.arange(max(step.max(initial=0), 1)))]
        chances[1] = 1.0 if trial else chances[1]
        survive = np.cumprod(chances)[step]
        if row.state in ("dunning", "trial") and at == end:
            survive = survive * row.p_alive
        weights = survive / (1 + rate) ** (times / 365.25) if discount else survive
        charges.append(float(survive.sum()))
        value.append(float(row.margin_per_period * weights.sum()))
        within_year.append(float(row.margin_per_period * survive[times < 365.25].sum()))
    return pd.DataFrame({"charges": charges, "value": value, "next_year": within_year}, index=data.index)


subscriptions = pd.DataFrame()
survival = pd.DataFrame()
strata = []
value_by_status = pd.DataFrame()
assumed_contract = ""
if states is not None:
    states = states[~states.customer_id.isna()].copy()
    period_note = "billing period from STATES.period_days"
    if "period_days" not in states.columns:
        gaps = contract_orders.sort_values("order_date").groupby("customer_id").order_date.diff().dt.days
        states["period_days"] = globals().get("PERIOD_DAYS") or float(gaps[gaps > 0].median())
        period_note = f"billing period {states.period_days.iloc[0]:g} days (PERIOD_DAYS, else the median order gap)"
        warn(f"no period_days in STATES: {period_note}")
    states["period"] = states.period_days.astype(float)
    states["term"] = states.term_days.astype(float).fillna(states.period) if "term_days" in states else states.period
    trial = states.state.eq("trial")  # a customer from the first paid charge
    if states.first_paid_at.notna().any():
        never, rule = states.first_paid_at.isna(), "first_paid_at"
    else:
        never, rule = states.cancelled_at.fillna(end) <= states.trial_end + pd.Timedelta(days=1), "trial_end"
    never &= states.state.isin(["cancelled", "pending_cancel"])
    tried = ~trial & (states.trial_end.notna() | states.trial_end.isna().all())
    conversion = 1 - never.sum() / max(tried.sum(), 1)
    start = states.first_paid_at.fillna(states.trial_end).where(~trial)
    states["started_at"] = start.where(start > states.started_at, states.started_at)
    states = states[~never]
    paying = f"{never.sum():,} ended without a paid charge ({rule}): not customers, left out" + (
        f"; trials convert {conversion:.0%}" if states.trial_end.notna().any() else ""
    )
    print(paying)
    if "margin_per_period" in states.columns:
        states["margin_per_period"] = states.margin_per_period.astype(float)
        margin_note = "margin per period from STATES"
    else:  # a first order carries one-offs (a welcome discount, a first box refunded): the later orders, shrunk
        # toward the plan's (credibility: own weight n / (n + k), k = within / between customers' variance)
        ordered = contract_orders.sort_values("order_date", kind="stable")
        later = ordered[ordered.groupby("customer_id").cumcount() > 0].groupby("customer_id").tail(6)
        later = later.groupby("customer_id").margin
        own, count, spread = later.mean(), later.size(), later.var()
        n = states.customer_id.map(count).fillna(0.0)
        per_sub = states.customer_id.map(own)
        fallback = float(per_sub.median()) if per_sub.notna().any() else float(contract_orders.margin.median())
        every = states.customer_id.map(contract_orders.groupby("customer_id").margin.mean())  # first orders too
        plan_margin = per_sub.groupby(states.plan).transform("median")  # a plan nobody renewed yet: all its orders
        plan_margin = plan_margin.fillna(every.groupby(states.plan).transform("median")).fillna(fallback)
        steady = count >= 2
        within = float(spread[steady].mean()) if steady.any() else float("nan")
        between = float(own[steady].var() - within / count[steady].mean()) if steady.sum() > 2 else float("nan")
        k = within / between if between > 0 and within >= 0 else 1.0
        states["margin_per_period"] = ((n * per_sub.fillna(0.0) + k * plan_margin) / (n + k)).fillna(fallback)
        margin_note = (
            f"margin per period: the subscriber's later orders (the first left out), last 6, shrunk to the plan's "
            f"median (weight n / (n + {k:.2g}))"
        )
    if recovery is None:
        recovery = 0.7
        if states.state.eq("dunning").any():
            warn("past-due subscriptions valued with a recovery chance of 0.7 (not measured): set DUNNING_RECOVERY")
    export_start = globals().get("EXPORT_START")
    export_start = pd.Timestamp(export_start) if export_start else None
    first_end = states.cancelled_at.min()
    if export_start is None and (states.started_at < first_end - pd.Timedelta(days=365)).mean() > 0.2:
        export_start = first_end.normalize()
        warn(f"none ended before {export_start.date()}: read as left-truncated there (else set EXPORT_START)")
    if states.started_at.isna().any():
        raise ValueError("STATES needs started_at for every subscription: tenure decides survival")
    now = tenure(states, end)
    now["p_alive"] = now.state.map(
        {"active": 1, "paused": 1, "dunning": float(recovery), "pending_cancel": 0, "cancelled": 0, "trial": conversion}
    )
    fits = fit_plans(now)
    worth = future(now, fits, end, horizon, discount=True)
    keep = "customer_id subscription_id plan status state paid p_alive margin_per_period expected_charges"
    subscriptions = now.assign(
        value=worth.value.round(2), next_year_margin=worth.next_year.round(2), expected_charges=worth.charges.round(3)
    )[[*keep.split(), "next_year_margin", "value"]].rename(columns={"paid": "periods_paid"})
    assert not subscriptions.value[subscriptions.p_alive == 0].any(), "a cancelled subscription was given value"
    rows = []  # observed (Kaplan-Meier) vs fitted renewal rates
    for plan, group in units(now).groupby("plan"):  # per contract: its renewals at the end of each term
        a, b = fits[plan]
        for t in range(1, int(min(group.paid.max(), 12))):
            at_risk = group[(group.paid > t) | (group.ended & (group.paid == t))]  # faced renewal t
            seen, fitted = round(float((at_risk.paid > t).mean()), 3), round(float(renew(a, b, t)), 3)
            rows.append((plan, t, len(at_risk), seen, fitted, round(a, 3), round(b, 3)))
    survival = pd.DataFrame(rows, columns=["plan", "renewal", "at_risk", "observed", "sbg", "a", "b"])
    for plan, group in survival.groupby("plan"):
        gap, one = float((group.observed - group.sbg).abs().mean()), group.iloc[0]
        print(f"survival {plan}: a={one.a}, b={one.b}; renewal 1 {one.observed:.0%} (sBG {one.sbg:.0%}); gap {gap:.1%}")
        if gap > 0.05:
            warn(f"the sBG curve does not fit {plan}")
    value_by_status = (
        subscriptions.groupby("state")
        .agg(subscriptions=("value", "size"), p_alive=("p_alive", "mean"), average_value=("value", "mean"))
        .round(2)
    )
    # the check by contract status: fitted on the states at the cut-off vs made after it
    past = tenure(states, cut)
    past["p_alive"] = 1.0
    if len(past) and past.ended.any() and (~past.ended).any():
        guess = future(past, fit_plans(past), cut, (end - cut).days, discount=False)
        made = contract_orders[contract_orders.order_date >= cut].groupby("customer_id").margin.sum()
        past["predicted"] = guess.charges * past.margin_per_period
        status_now = past.state.where(~past.state.eq("cancelled"), "cancelled after the cut-off")
        past["stratum"] = status_now.where(~past.ended, "cancelled before the cut-off")
        past = past.sort_values("stratum", key=lambda x: x.map(RANK).fillna(9))
        per_customer = past.groupby("customer_id").agg(predicted=("predicted", "sum"), stratum=("stratum", "first"))
        per_customer["actual"] = per_customer.index.map(made).fillna(0.0)
        for stratum, group in per_customer.groupby("stratum"):
            strata.append(("contractual", stratum, len(group), round(group.predicted.sum()), round(group.actual.sum())))
    terms = "renewal per contract term (term_days, contract_id)" if "term_days" in states else "renewal each period"
    assumed_contract = f"{period_note}; {terms}; {paying}; {margin_note}; past-due recovery {float(recovery):g}" + (
        f"; STATES left-truncated at {export_start.date()}" if export_start else ""
    )
    print("value by status:", value_by_status.to_dict("index"))

# ---- non-contractual: BG/NBD (how often, how long) and Gamma-Gamma (margin per order), maximum likelihood
WEEK = 7  # time in weeks: recency, T and the horizons


def rfm(orders: pd.DataFrame, upto: pd.Timestamp) -> pd.DataFrame:
    """Per customer (orders before `upto`, one a day): x repeat days, t_x the last's and T `upto`'s weeks after the
    first, m the mean margin of the repeat days (0 without one)."""
    seen = orders[orders.order_date < upto].assign(day=lambda d: d.order_date.dt.normalize())
    daily = seen.groupby(["customer_id", "day"], as_index=False).margin.sum().sort_values(["customer_id", "day"])
    first = daily.groupby("customer_id").day.transform("min")
    repeat = daily[daily.day > first].groupby("customer_id").margin
    per = daily.groupby("customer_id").agg(first=("day", "min"), last=("day", "max"), days=("day", "size"))
    return pd.DataFrame(
        {
            "customer_id": per.index,
            "x": (per.days - 1).to_numpy(float),
            "t_x": ((per["last"] - per["first"]).dt.days / WEEK).to_numpy(float),
            "T": (((upto - pd.Timedelta(days=1)).normalize() - per["first"]).dt.days / WEEK).to_numpy(float),
            "m": per.index.map(repeat.mean()).fillna(0.0).to_numpy(float),
        }
    ).reset_index(drop=True)


def bgnbd_fit(x, t_x, T) -> tuple[float, float, float, float]:
    """BG/NBD (Fader, Hardie & Lee 2005) by maximum likelihood: purchases at a rate lambda ~ Gamma(r, alpha) while
    alive; after each repeat purchase gone with a chance p ~ Beta(a, b). Returns r, alpha, a, b."""
    table = pd.DataFrame({"x": x, "t_x": t_x, "T": T}).astype(float).round(6).value_counts().reset_index()
    x, t_x, T, count = (table[c].to_numpy(float) for c in ("x", "t_x", "T", "count"))  # one term per history
    some = x > 0
    once, at = np.unique(x, return_inverse=True)  # the Beta and Gamma terms per count of repeat purchases

    def nll(p):
        r, alpha, a, b = np.exp(p)
        head = (gammaln(r + once) - gammaln(r) + r * np.log(alpha))[at]
        stay = (betaln(a, b + once) - betaln(a, b))[at] - (r + x) * np.log(alpha + T)
        gone = (betaln(a + 1, np.maximum(b + once - 1, 1e-12)) - betaln(a, b))[at] - (r + x) * np.log(alpha + t_x)
        return -(count * (head + np.logaddexp(stay, np.where(some, gone, -np.inf)))).sum()

    tries = []
    for scale in (np.log(max(float(np.average(T, weights=count)), 1e-3)), 0.0):  # alpha ~ the weeks observed
        tries.append(minimize(nll, [0.0, scale, 0.0, 0.0], method="L-BFGS-B", bounds=[(-9, 9)] * 4))
        if tries[-1].success:
            break
    r, alpha, a, b = np.exp(min(tries, key=lambda f: f.fun).x)
    return float(r), float(alpha), float(a), float(b)


def bgnbd_alive(params, x, t_x, T) -> np.ndarray:
    """P(alive | x, t_x, T): 1 without a repeat purchase."""
    r, alpha, a, b = params
    x, t_x, T = (np.asarray(v, float) for v in (x, t_x, T))
    odds = np.where(x > 0, a / np.maximum(b + x - 1, 1e-12) * ((alpha + T) / (alpha + t_x)) ** (r + x), 0.0)
    return 1 / (1 + odds)


def bgnbd_expected(params, t, x, t_x, T) -> np.ndarray:
    """E[purchases in (T, T + t] | x, t_x, T] (Fader, Hardie & Lee 2005, eq. 10)."""
    r, alpha, a, b = params
    a = a if abs(a - 1) > 1e-6 else 1 + 1e-6  # the closed form divides by a - 1
    x, t_x, T = (np.asarray(v, float) for v in (x, t_x, T))
    if t <= 0:
        return np.zeros_like(x)
    tail = ((alpha + T) / (alpha + T + t)) ** (r + x) * hyp2f1(r + x, b + x, a + b + x - 1, t / (alpha + T + t))
    return (a + b + x - 1) / (a - 1) * (1 - tail) * bgnbd_alive(params, x, t_x, T)


def gamma_gamma_fit(x, m) -> tuple[float, float, float]:
    """Gamma-Gamma (Fader, Hardie & Lee 2005): a purchase's margin ~ Gamma(p, nu), the customer's nu ~ Gamma(q,
    gamma); fitted by maximum likelihood on the mean m of x repeat purchases. Returns p, q, gamma."""
    x, m = np.asarray(x, float), np.asarray(m, float)

    def nll(w):
        p, q, g = np.exp(w)
        px = p * x
        ll = gammaln(px + q) - gammaln(px) - gammaln(q) + q * np.log(g) + (px - 1) * np.log(m) + px * np.log(x)
        return -(ll - (px + q) * np.log(x * m + g)).sum()

    start = [0.0, np.log(2.0), np.log(max(float(np.mean(m)), 1e-3))]
    p, q, g = np.exp(minimize(nll, start, method="L-BFGS-B", bounds=[(-9, 9), (-9, 9), (-9, 15)]).x)
    return float(p), float(q), float(g)


def gamma_gamma_spend(params, x, m) -> np.ndarray:
    """E[margin per purchase | x, m]: the own mean shrunk toward everyone's, p (gamma + x m) / (p x + q - 1)."""
    p, q, g = params
    x, m = np.asarray(x, float), np.asarray(m, float)
    return p * (g + x * m) / (p * x + q - 1)


stream = free_orders
holdout = pd.DataFrame(columns=["predicted", "actual"])
check_ratio = naive_ratio = rank_correlation = float("nan")
alive = pd.Series(dtype=float)
free_clv = pd.DataFrame()
if stream.customer_id.nunique() >= 20:

    def fit(data: pd.DataFrame):
        buying = bgnbd_fit(data.x, data.t_x, data["T"])
        repeat = data[(data.x > 0) & (data.m > 0)]
        spending = gamma_gamma_fit(repeat.x, repeat.m) if len(repeat) >= 20 else None
        if spending is not None and spending[1] <= 1:
            warn("Gamma-Gamma's q <= 1 (no finite mean margin per order): each customer's own average used")
            spending = None
        return buying, spending

    def margin_per_order(data: pd.DataFrame, spending) -> pd.Series:
        positive = data.m > 0
        spend = pd.Series(np.nan, index=data.index)
        if spending is not None:
            spend = pd.Series(gamma_gamma_spend(spending, data.x, data.m.where(positive, 1.0)), index=data.index)
        first = stream.groupby("customer_id").margin.mean()  # no repeat order: their own average
        spend = spend.where(positive | (data.x == 0), data.m)
        return spend.where(data.x > 0).fillna(data.customer_id.map(first))

    def purchases(buying, data: pd.DataFrame, weeks: float) -> pd.Series:
        return pd.Series(bgnbd_expected(buying, weeks, data.x, data.t_x, data["T"]), index=data.index)

    # the check: fitted before the cut-off vs made after it; naive: each repeats their last year
    train = rfm(stream, cut)
    weeks_after = (end - cut).days / WEEK
    buying, spending = fit(train)
    print("BG/NBD before the cut-off: r={:.3g}, alpha={:.3g}, a={:.3g}, b={:.3g}".format(*buying))
    predicted = purchases(buying, train, weeks_after) * margin_per_order(train, spending)
    after = stream[stream.order_date >= cut].groupby("customer_id").margin.sum()
    actual = train.customer_id.map(after).fillna(0.0)
    year_before = stream[(stream.order_date < cut) & (stream.order_date >= cut - pd.DateOffset(years=1))]
    naive = train.customer_id.map(year_before.groupby("customer_id").margin.sum()).fillna(0.0) * weeks_after / 52.18
    check_ratio = float(predicted.sum() / actual.sum())
    naive_ratio = float(naive.sum() / actual.sum())
    rank_correlation = float(predicted.rank().corr(actual.rank()))
    decile = pd.qcut(predicted.rank(method="first"), 10, labels=range(1, 11))
    holdout = (
        pd.DataFrame({"decile": decile, "predicted": predicted, "actual": actual})
        .groupby("decile", observed=True)[["predicted", "actual"]]
        .sum()
        .round(0)
    )
    strata.append(("non-contractual", "no contract (BG/NBD)", len(train), round(predicted.sum()), round(actual.sum())))
    print(
        f"check (no-contract buyers): fitted before {cut.date()}, predicted {predicted.sum():,.0f}; "
        f"made {actual.sum():,.0f} (ratio {check_ratio:.2f}; rank correlation {rank_correlation:.2f}). "
        f"Naive 'same as their last year': {naive_ratio:.2f}"
    )
    if check_ratio > 1.2:
        print(f"WARNING: the model over-predicts by {check_ratio - 1:.0%}: its values are an upper bound")
    elif check_ratio < 0.8:
        print(f"WARNING: the model under-predicts by {1 - check_ratio:.0%}")
    else:
        print("the check supports the model: within 20 % in total")

    everything = rfm(stream, end)
    buying, spending = fit(everything)
    print("BG/NBD on all: r={:.3g}, alpha={:.3g}, a={:.3g}, b={:.3g}".format(*buying))
    if spending is not None:
        print("Gamma-Gamma: p={:.3g}, q={:.3g}, gamma={:.3g}".format(*spending))
    per_order = margin_per_order(everything, spending)
    cumulative = [purchases(buying, everything, 52.18 * y) for y in range(years + 1)]
    value = sum((cumulative[y] - cumulative[y - 1]) * per_order / (1 + rate) ** y for y in range(1, years + 1))
    alive = pd.Series(bgnbd_alive(buying, everything.x, everything.t_x, everything["T"]), index=everything.index)
    free_clv = everything[["customer_id"]].assign(
        stream="non-contractual", status="no contract", p_alive=alive.round(3)
    )
    free_clv["next_year_margin"] = ((cumulative[1] - cumulative[0]) * per_order).round(2)
    free_clv[f"value_{years}y"] = value.round(2)
elif stream.customer_id.nunique():
    warn(f"only {stream.customer_id.nunique()} buyers without a contract: too few for BG/NBD, not valued")

# ---- per customer: both streams
history = orders.groupby("customer_id").margin.sum()
top = history.sort_values(ascending=False)
top10 = 100 * top.head(max(1, len(top) // 10)).sum() / top.sum()
print(
    f"historic: {len(history):,} customers with orders, average margin to date {history.mean():,.0f}; "
    f"top 10 % bring {top10:.0f} %"
)
parts = [free_clv]
if len(subscriptions):
    subs = subscriptions.assign(gone=1 - subscriptions.p_alive).sort_values("state", key=lambda x: x.map(RANK))
    per = subs.groupby("customer_id").agg(
        status=("state", "first"),
        gone=("gone", "prod"),
        next_year_margin=("next_year_margin", "sum"),
        v=("value", "sum"),
    )
    per = per.assign(stream="contractual", p_alive=(1 - per.gone).round(3)).rename(columns={"v": f"value_{years}y"})
    parts.append(
        per.reset_index()[["customer_id", "stream", "status", "p_alive", "next_year_margin", f"value_{years}y"]]
    )
clv = pd.concat([p for p in parts if len(p)], ignore_index=True)
clv.insert(3, "historic_margin", clv.customer_id.map(history).fillna(0.0).round(2))
clv = clv.sort_values(f"value_{years}y", ascending=False, ignore_index=True)
contract_check_ratio = float("nan")
holdout_by_status = pd.DataFrame(strata, columns=["stream", "stratum", "customers", "predicted", "actual"])
if len(holdout_by_status):
    made_after = holdout_by_status.actual.where(holdout_by_status.actual != 0)
    holdout_by_status["ratio"] = (holdout_by_status.predicted / made_after).round(2)
    contract_rows = holdout_by_status[holdout_by_status.stream == "contractual"]
    print(
        "check by contract status (fitted at the cut-off):",
        contract_rows.set_index("stratum").iloc[:, 1:].to_dict("index"),
    )
    if contract_rows[contract_rows.stratum.str.startswith("cancelled before")].actual.sum() > 0:
        warn("customers cancelled before the cut-off made margin after it: reactivations")
    total = contract_rows.actual.sum()
    contract_check_ratio = float(contract_rows.predicted.sum() / total) if total else float("nan")
    if total:
        print(f"check (contract, all live at the cut-off): predicted / actual {contract_check_ratio:.2f} (the test)")
        if abs(contract_check_ratio - 1) > 0.2:
            warn(f"the survival model is off by {100 * (contract_check_ratio - 1):+.0f} % on the hold-out")
worth_by = clv.groupby("stream")[f"value_{years}y"].agg(["size", "mean"]).round(0).to_dict("index")
print(f"{years}-year value by stream:", worth_by, f"{(clv.p_alive < 0.5).mean():.0%} more likely gone than not")
assumed = (
    f"Assumed: contractual = {said!r} (PROFILE) -> {mode}"
    + (f", subscription states from STATES ({len(subscriptions):,} subscriptions)" if len(subscriptions) else "")
    + f"; store time zone {zone or 'UTC (not given)'}; data end {end.date()}, cut-off {cut.date()}"
    + (f"; {assumed_contract}" if assumed_contract else "")
    + f"; value = gross margin over {years} years discounted at {100 * rate:.0f} % a year"
)
print(assumed)
clv
