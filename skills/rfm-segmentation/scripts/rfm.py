"""RFM segments on the business's own facts: contract state first, recency in each customer's own buying cycle.

Input: SOURCE, the artifact of SKILL.md step 1 (one row per customer: customer_id, last_order, recency_days,
tenure_days, cycle_days, seasonal, orders, revenue, r; the scores of the non-contractual purchases); PROFILE, from
business-profile; STATES (when PROFILE["contractual"] is true or "mixed"): one row per subscription -
customer_id, status as written (active, paused, past_due, cancelled …), pause_until (a paused one's resume date),
last_charge_status (the status of its latest charge attempt: ERROR / failed / declined = dunning); optional
AS_OF (the data's end; default the last order of SOURCE).
Method: a subscriber is classified by contract state before any RFM - Dunning (a live subscription whose latest
charge attempt failed, or past due: involuntary churn risk, flagged), Paused (a resume date ahead: not lapsing),
Active subscriber (on their cadence: not lapsing, whatever their recency), Cancelled (gone; counted apart).
Everyone else is scored on their purchases: R in their own cycles (from step 1: own median gap, a year for a
seasonal buyer, else the business's), F and M quintiles by rank over the scored customers only, equal values
sharing a score (checked). Flagged: Dunning, and the customers silent beyond 1.5 of their own cycles (At risk,
Cannot lose, Hibernating; Lost beyond 6 cycles) who are not New.
Output: `rfm` (one row per customer: contract_state, recency, cycles_silent, seasonal, r, f, m, segment, finding,
flagged), `segments` (per segment: customers, share, revenue, flagged), `flagged` (the rows to act on),
`warnings_out`, `assumed` (the `Assumed:` line).
"""

import numpy as np
import pandas as pd

PROFILE = globals().get("PROFILE") or {}
warnings_out = []


def warn(text):
    warnings_out.append(text)
    print("WARNING: " + text)


def local_dates(col, zone):
    """Days in the store's time zone: UTC offsets converted, Unix seconds as UTC, tz-naive as written."""
    if pd.api.types.is_numeric_dtype(col) and col.notna().any() and col.dropna().between(9e8, 2.2e9).all():
        out = pd.to_datetime(col, unit="s", utc=True)
    elif pd.api.types.is_datetime64_any_dtype(col):
        out = col
    else:
        text = col.astype("string").str.strip().replace({"": pd.NA, "nan": pd.NA, "None": pd.NA})
        offset = text.str.contains(r"(?:[+-]\d{2}:?\d{2}|Z)$", regex=True, na=False).any()
        out = pd.to_datetime(text, utc=bool(offset), format="mixed", errors="coerce")
    if getattr(out.dt, "tz", None) is not None:
        out = out.dt.tz_convert(zone or "UTC").dt.tz_localize(None)
    return out.dt.normalize()


def quintile(values):
    """1-5 by rank, equal values one score (rank 'min': ties never split)."""
    if values.empty:
        return values.astype(int)
    return (1 + np.floor(5 * (values.rank(method="min") - 1) / len(values))).astype(int)


def segment_of(row):
    r, f, m = row.r, row.f, row.m
    if row.tenure_days <= 180:
        return "New"
    if r >= 4 and f >= 4 and m >= 4:
        return "Champions"
    if r >= 4 and f >= 3:
        return "Loyal"
    if r == 5:
        return "Promising"
    if r == 4:
        return "Needs attention"
    if r == 3 and m >= 4:
        return "Cannot lose"
    if r == 3:
        return "At risk"
    return "Hibernating" if r == 2 else "Lost"


# ---- the scores of step 1
scored = load_artifact(SOURCE) if isinstance(SOURCE, str) else pd.DataFrame(SOURCE)  # noqa: F821
scored.columns = [str(c).strip().lower() for c in scored.columns]
need = {"customer_id", "recency_days", "tenure_days", "cycle_days", "orders", "revenue", "r"}
if "order_date" in scored.columns and "r" not in scored.columns:
    raise ValueError(
        "SOURCE is one row per order: run SKILL.md step 1's SQL on it first (order_facts replaced by its artifact id)"
        " and pass that query's artifact"
    )
if need - set(scored.columns):
    raise ValueError(f"SOURCE needs the columns of step 1: {sorted(need - set(scored.columns))} are missing")
scored["customer_id"] = scored.customer_id.astype(str)
if "seasonal" not in scored.columns:
    scored["seasonal"] = False
scored["seasonal"] = scored.seasonal.fillna(False).astype(bool)
zone = PROFILE.get("store_timezone")
if "last_order" in scored.columns:
    last = local_dates(scored.last_order, zone)
    as_of_data = (last + pd.to_timedelta(scored.recency_days, unit="D")).max()
else:
    as_of_data = None
as_of = pd.Timestamp(globals().get("AS_OF")) if globals().get("AS_OF") else as_of_data

# ---- ties: equal recency (in the same cycle) must share R; F and M are re-scored below, by rank
split = scored.groupby(["recency_days", "cycle_days"]).r.nunique()
if (split > 1).any():
    warn(f"{int((split > 1).sum())} equal recencies were split across R scores: step 1 was changed - rerun it as written")

# ---- contract state first
said = PROFILE.get("contractual")
said = "mixed" if str(said).lower() == "mixed" else (None if said is None else bool(said))
states_ref = globals().get("STATES")
if said in (True, "mixed") and states_ref is None:
    raise ValueError(
        "REFUSED: PROFILE says the business is contractual"
        + (" (mixed)" if said == "mixed" else "")
        + " - a subscriber on a 6-week cadence or a scheduled pause is not lapsing, and one whose card failed is at "
        "risk whatever their recency. Pass STATES = an artifact with one row per subscription (customer_id, status, "
        "pause_until, last_charge_status) and run again."
    )
if said is None:
    warn(
        "PROFILE does not say whether customers are on contracts or subscriptions (run business-profile first): "
        "every customer is scored as a buyer without a contract"
        + ("; STATES was given, so contract states are applied anyway" if states_ref is not None else "")
    )
WORDS = {
    "active": "active trialing trial skipped skip",
    "paused": "paused pause",
    "dunning": "past_due unpaid dunning",
    "cancelled": "cancelled canceled expired churned ended",
}
STATE_WORDS = {w: s for s, words in WORDS.items() for w in words.split()}
FAILED = {"error", "failed", "failure", "declined", "card_declined", "past_due", "unpaid"}
contract = pd.DataFrame(columns=["customer_id", "contract_state", "resume_date"])
if states_ref is not None and said is False:
    warn(
        "PROFILE says the business is not contractual, but STATES was given: NOT applied - an agreement that bills "
        "nothing does not keep a customer buying (a partner with a live agreement who stopped ordering is lapsing); "
        "every customer is scored on purchases. If subscriptions bill, fix PROFILE['contractual'] and run again"
    )
    states_ref = None
if states_ref is not None:
    states = load_artifact(states_ref) if isinstance(states_ref, str) else pd.DataFrame(states_ref)  # noqa: F821
    states.columns = [str(c).strip().lower() for c in states.columns]
    states = states.rename(columns={"paused_until": "pause_until", "resume_date": "pause_until"})
    if {"customer_id", "status"} - set(states.columns):
        raise ValueError("STATES needs customer_id and status (one row per subscription)")
    states["customer_id"] = states.customer_id.astype(str)
    raw = states.status.astype(str).str.strip().str.lower().str.replace(" ", "_")
    states["state"] = raw.map(STATE_WORDS)
    unknown = sorted(set(raw[states.state.isna()]))
    if unknown:
        warn(f"statuses {unknown} are not contract states I know: read as active - check them")
        states["state"] = states.state.fillna("active")
    if "last_charge_status" in states.columns:
        failed = states.last_charge_status.astype(str).str.strip().str.lower().str.replace(" ", "_").isin(FAILED)
        states.loc[failed & states.state.eq("active"), "state"] = "dunning"
    else:
        warn("STATES has no last_charge_status: dunning is read from the status alone (Recharge keeps ACTIVE)")
    resume = local_dates(states["pause_until"], zone) if "pause_until" in states.columns else pd.Series(pd.NaT)
    states["resume_date"] = resume.reindex(states.index)
    if as_of is not None:
        stale = states.state.eq("paused") & ~(states.resume_date > as_of)
        states.loc[stale, "state"] = "paused_open"  # no resume date ahead: not on a schedule
    rank = {"dunning": 0, "active": 1, "paused": 2, "paused_open": 3, "cancelled": 4}
    states["rank"] = states.state.map(rank)
    contract = (
        states.sort_values(["customer_id", "rank", "resume_date"])
        .drop_duplicates("customer_id")[["customer_id", "state", "resume_date"]]
        .rename(columns={"state": "contract_state"})
    )

# ---- one row per customer: subscribers by contract state, everyone else by RFM
rfm = scored.merge(contract, on="customer_id", how="outer")
rfm["contract_state"] = rfm.contract_state.fillna("none")
rfm["seasonal"] = rfm.seasonal.fillna(False).astype(bool)
base = rfm.contract_state.isin(["none", "cancelled"]) & rfm.orders.notna()
rfm["f"] = pd.NA
rfm["m"] = pd.NA
rfm.loc[base, "f"] = quintile(rfm.loc[base, "orders"].astype(float))
rfm.loc[base, "m"] = quintile(rfm.loc[base, "revenue"].astype(float))
rfm["cycles_silent"] = (rfm.recency_days / rfm.cycle_days).round(2)
rfm["segment"] = None
rfm.loc[base, "segment"] = rfm[base].apply(segment_of, axis=1)
CONTRACT_SEGMENTS = {
    "dunning": "Dunning",
    "active": "Active subscriber",
    "paused": "Paused",
    "paused_open": "Paused (no resume date)",
    "cancelled": "Cancelled",
}
by_contract = ~rfm.contract_state.eq("none") & ~(rfm.contract_state.eq("cancelled") & base)
rfm.loc[by_contract, "segment"] = rfm.loc[by_contract, "contract_state"].map(CONTRACT_SEGMENTS)
FINDINGS = {
    "Dunning": "involuntary churn risk: latest charge failed",
    "Cannot lose": "at risk: valuable, silent 1.5-3 of own cycles",
    "At risk": "at risk: silent 1.5-3 of own cycles",
    "Hibernating": "lapsed: silent 3-6 of own cycles",
    "Lost": "lost: silent over 6 of own cycles",
}
rfm["finding"] = rfm.segment.map(FINDINGS).fillna("")
rfm["flagged"] = rfm.finding.ne("")
columns = ["customer_id", "contract_state", "resume_date", "recency_days", "tenure_days", "cycle_days",
           "cycles_silent", "seasonal", "orders", "revenue", "r", "f", "m", "segment", "finding", "flagged"]
rfm = rfm[columns].sort_values(["flagged", "revenue"], ascending=[False, False]).reset_index(drop=True)

# ---- the checks: ties kept together, and no segment holding more than half the customers
for value, score in (("orders", "f"), ("revenue", "m")):
    part = rfm[rfm.f.notna()]
    if (part.groupby(value)[score].nunique() > 1).any():
        warn(f"equal {value} were split across {score.upper()} scores")
segments = (
    rfm.groupby("segment", dropna=False)
    .agg(customers=("customer_id", "size"), revenue=("revenue", "sum"), flagged=("flagged", "any"),
         avg_recency_days=("recency_days", "mean"), avg_cycles_silent=("cycles_silent", "mean"))
    .reset_index()
)
segments["customers_pct"] = (100 * segments.customers / segments.customers.sum()).round(1)
segments["revenue_pct"] = (100 * segments.revenue / segments.revenue.sum()).round(1)
segments = segments.sort_values("customers", ascending=False).reset_index(drop=True)
big = segments[segments.customers_pct > 50]
for _, row in big.iterrows():
    warn(
        f"'{row.segment}' holds {row.customers_pct} % of the customers (more than half): the segments do not separate "
        "this base - say so; for a base under ~500 customers consider terciles"
    )
flagged = rfm[rfm.flagged].reset_index(drop=True)

# ---- what it assumed
currencies = PROFILE.get("currencies") or []
reporting = PROFILE.get("reporting_currency")
if len(currencies) > 1 and not reporting:
    warn(
        f"the exports hold {', '.join(currencies)} and PROFILE has no reporting_currency: M compares amounts in "
        "different currencies unless step 1's revenue was converted - convert at the order month's rate"
    )
seasonal_n = int(rfm.seasonal.sum())
assumed = (
    f"Assumed: contractual = {said if said is not None else 'UNKNOWN (scored as non-contractual)'}"
    f"{' (STATES: ' + str(int(rfm.contract_state.ne('none').sum())) + ' subscribers by contract state)' if states_ref is not None else ''}; "
    f"revenue in {reporting or (currencies[0] if len(currencies) == 1 else 'UNKNOWN currency')}; "
    f"time zone {zone or 'as written'}; as of {as_of.date() if as_of is not None else 'the last order'}; "
    f"recency in own cycles (median cycle {rfm.cycle_days.median():.0f} days; {seasonal_n} seasonal buyers on a "
    "yearly cycle); F and M quintiles by rank over the non-contractual customers, ties together; New = first "
    "order within 180 days"
)
print(assumed)
print(segments.to_string(index=False))
print(f"flagged: {len(flagged)} of {len(rfm)} customers ({', '.join(f'{k} {v}' for k, v in flagged.segment.value_counts().items())})")
segments  # noqa: B018 - the cell's value
