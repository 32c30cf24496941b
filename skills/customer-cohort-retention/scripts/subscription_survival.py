"""Subscription survival (Kaplan-Meier) and logo retention beside net revenue retention, for contractual businesses.

Run in run_python as:  PROFILE = {...}  SUBSCRIPTIONS = "artifact_..."  [MRR = "artifact_..."]  then this script.
SUBSCRIPTIONS: one row per subscription: customer_id, started_at (the first paid day: a trial's end), ended_at
(blank while live), converted (false: a trial that never paid - not a customer, left out and counted), segment
(optional). Survival is per customer, from the first start to the last stop, censored at DATA_THROUGH (default: the
latest date in the export) while any subscription is live. MRR (optional): customer_id, at (snapshot date), mrr
(reporting currency at ONE constant FX rate), segment; NRR_FROM / NRR_TO pick two snapshots (default: the latest
and a year before). Output: `km` (segment, month, at_risk, survival), `segments` (segment, customers,
logo_retention, nrr, grr, finding), `assumed`.
"""

import numpy as np
import pandas as pd

PROFILE = globals().get("PROFILE") or {}
tz = PROFILE.get("store_timezone")
if PROFILE.get("contractual") in (None, False, "false"):
    print(f"WARNING: PROFILE contractual = {PROFILE.get('contractual')!r}: survival of subscriptions needs contracts")


def table(ref):
    return ref.copy() if isinstance(ref, pd.DataFrame) else load_artifact(ref)  # noqa: F821 - run_python's helper


def local_day(values) -> pd.Series:
    raw = pd.Series(values)
    if pd.api.types.is_numeric_dtype(raw) and raw.dropna().between(9e8, 2.2e9).all():
        parsed = pd.to_datetime(raw, unit="s", utc=True)
    else:
        offset = raw.astype("string").str.contains(r"(?:[+-]\d{2}:?\d{2}|Z)$", regex=True, na=False).any()
        parsed = pd.to_datetime(raw, utc=True, format="mixed") if offset else pd.to_datetime(raw, format="mixed")
    if getattr(parsed.dt, "tz", None) is not None:
        parsed = (parsed.dt.tz_convert(tz) if tz else parsed).dt.tz_localize(None)
    return parsed.dt.normalize()


subs = table(SUBSCRIPTIONS)  # noqa: F821 - from the cell
subs["started_at"] = local_day(subs["started_at"])
subs["ended_at"] = local_day(subs["ended_at"])
through = pd.Timestamp(globals().get("DATA_THROUGH") or max(subs.started_at.max(), subs.ended_at.max())).normalize()
notes = [f"contractual={PROFILE.get('contractual')}", f"store time zone {tz or 'UTC (unknown)'}", f"data through {through.date()}"]
if "converted" in subs.columns:
    paid = subs["converted"].astype(str).str.lower().isin(["true", "1", "yes"])
    notes.append(f"{int((~paid).sum())} trials that never converted are not customers and are left out")
    subs = subs[paid]
else:
    print("WARNING: no `converted` column: unpaid trials, if any, count as churned customers")
per = subs.groupby("customer_id").agg(started=("started_at", "min"), ended=("ended_at", "max"))
live = subs.ended_at.isna().groupby(subs.customer_id).any()
per.loc[live[live].index, "ended"] = pd.NaT
per.loc[per.ended > through, "ended"] = pd.NaT
per["event"] = per.ended.notna()
per["days"] = (per.ended.fillna(through) - per.started).dt.days.clip(lower=0)
per["segment"] = subs.groupby("customer_id").segment.first() if "segment" in subs.columns else "all"
rows = []
for name, g in [("all", per), *(per.groupby("segment") if "segment" in subs.columns else [])]:
    t, e = g.days.to_numpy(), g.event.to_numpy()
    times = np.unique(t[e])
    surv = np.cumprod([1 - ((t == u) & e).sum() / (t >= u).sum() for u in times])
    for month in (1, 3, 6, 12, 24, 36):
        day = month * 30.44
        if (t >= day).sum():
            i = np.searchsorted(times, day, side="right") - 1
            rows.append((name, month, int((t >= day).sum()), round(float(surv[i]) if i >= 0 else 1.0, 4)))
km = pd.DataFrame(rows, columns=["segment", "month", "at_risk", "survival"])

segments = pd.DataFrame(columns=["segment", "customers", "logo_retention", "nrr", "grr", "finding"])
if globals().get("MRR") is not None:
    snap = table(MRR)  # noqa: F821 - from the cell
    snap["at"] = local_day(snap["at"])
    to = pd.Timestamp(globals().get("NRR_TO") or snap["at"].max())
    frm = pd.Timestamp(globals().get("NRR_FROM") or to - pd.DateOffset(years=1))
    a = snap[snap["at"] == frm].groupby("customer_id").agg(mrr=("mrr", "sum"), segment=("segment", "first"))
    a = a[a.mrr > 0]
    if a.empty:
        raise ValueError(f"MRR has no customer paying on {frm.date()}: give NRR_FROM / NRR_TO the snapshots hold")
    a["later"] = snap[snap["at"] == to].groupby("customer_id").mrr.sum().reindex(a.index).fillna(0)
    out = []
    for name, g in [*a.groupby("segment"), ("all", a)]:
        nrr, grr = g.later.sum() / g.mrr.sum(), np.minimum(g.later, g.mrr).sum() / g.mrr.sum()
        out.append((name, len(g), round(float((g.later > 0).mean()), 4), round(float(nrr), 4), round(float(grr), 4)))
    segments = pd.DataFrame(out, columns=["segment", "customers", "logo_retention", "nrr", "grr"])
    # NRR above 100 % with a fifth or more of the logos lost: expansion of the survivors hides the churn
    segments["finding"] = [
        "loses logos while its revenue grows: report both" if s != "all" and n > 1 and lr < 0.8 else ""
        for s, n, lr in zip(segments.segment, segments.nrr, segments.logo_retention)
    ]
    notes.append(f"logo retention and NRR from MRR snapshots {frm.date()} -> {to.date()} at the FX given")
assumed = "Assumed: " + "; ".join(notes)
print(assumed)
print("Kaplan-Meier survival by months since the first paid day:")
print(km.pivot(index="segment", columns="month", values="survival").to_string())
if len(segments):
    print(segments.to_string(index=False))
km
