"""The playbooks on businesses they never saw (T-S-G): per skill, the share of planted truths found and of
look-alikes wrongly flagged, and the crashes, over many generated businesses.

Each business is drawn from a seed: B2B or B2C, a country (its holidays come from `holidays`), its currency and
VAT, a fiscal year start, a size, the dimensions it has. Per skill it gets a random truth and the look-alike an
analyst falls for, from a family, never one fixed case:

* profitability — a cell of a random pair of dimensions (country x product, channel x segment …) sold below
  cost while both its row and its column earn; look-alike: a cell that covers its costs but not its allocated
  overhead (not a loss-maker);
* rfm-segmentation — regular buyers who stopped ten months ago in a base full of long-gone accounts (they must
  not read as loyal); look-alike: annual buyers eight months into their cycle (they must not read as lapsed);
* discount-effectiveness — a real lift of the quantity per discount point that varies within customers;
  look-alike: no effect, but larger customers get larger discounts (a confound a naive fit reads as lift);
* ab-test-readout — a real lift of 1 to 2 points with enough visitors; look-alike: a sample-ratio mismatch with
  an "effect" (it must not be called significant);
* demand-forecast — a fiscal-year-end peak that moved a month later a year before the data ends (the forecast's
  peak must follow it); look-alike: one month of the last year far above its pattern (no break to report);
* customer-cohort-retention — customers one by one (signup, order rate, lifetime), the data ending 2 to 11
  weeks into a quarter; truth: a promotion's cohort that collapses after a normal first quarter (called out);
  look-alike: the cut quarter's cells, the newest cohort's period 0 among them (never a point), and the other
  cohorts' noise (never called out);
* returns-and-cancellations — a channel returning twice as much of every product; look-alike: a channel selling
  the product most often returned, returning no more of any (compared within product mix, not flagged);
* data-quality-audit — an order export with a long lognormal tail and planted faults: another country's
  currency, shipped before ordered, ordered before signup, two absurd quantities (found, the absurd ones ranked
  first); look-alike: the long tail (no high finding of its hundreds of values);
* budget-vs-actual — a cell 30 % under plan for a fiscal quarter (named the largest miss); look-alike: a renewal
  booked a month late across a quarter's end (one timing shift, neither a miss nor an overrun);
* sales-performance-review — one item's price up 5-15 % (the bridge's price step equals it within 1 %);
  look-alike: buyers moving from Pro to Lite at unchanged prices (no price step);
* customer-lifetime-value — a BG/NBD-like base with nothing changing (the hold-out check supports the model,
  within 20 %); look-alike: three in ten customers stop at the cut-off (the check must warn);
* kpi-anomaly-detection — a one-day outage on a working day (to zero at 14 or 30 orders a day, to 30 % at 100 or
  300), B2B closed at weekends; look-alike: the country's public holidays and events no law lists (a B2B year-end
  shutdown, a B2C Black Friday), every year (they must not be alarms).

Each case is followed through the real server over stdio as a model would: the generated table is an upload,
`run_python` turns it into the artifact the skill's script reads (`SOURCE`), runs the script as the skill says,
then reads its result variables. A skill's script that fails is a crash. `--against REV` runs the scripts of
another revision in the same server, interleaved (a skill without a script there is followed by its SQL).

Run: uv run python bench/bench_skills.py [--businesses 30] [--seed 1000] [--against b3feeb2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
COUNTRIES = {"DE": "EUR", "FR": "EUR", "GB": "GBP", "US": "USD", "NL": "EUR", "ES": "EUR", "IT": "EUR", "PL": "PLN"}
VAT = {"DE": 0.19, "FR": 0.20, "GB": 0.20, "US": 0.0, "NL": 0.21, "ES": 0.21, "IT": 0.22, "PL": 0.23}
LAPSED = {"At risk", "Cannot lose", "Hibernating", "Lapsed", "Lost"}
PROFIT_DIMS = ("country", "product", "channel", "segment")


@dataclass
class Business:
    seed: int
    b2b: bool
    country: str
    currency: str
    fiscal_start: int
    size: float
    rng: np.random.Generator = field(repr=False)

    @property
    def name(self) -> str:
        return f"b{self.seed}"


def business(seed: int) -> Business:
    rng = np.random.default_rng(seed)
    country = str(rng.choice(list(COUNTRIES)))
    return Business(
        seed,
        bool(rng.random() < 0.5),
        country,
        COUNTRIES[country],
        int(rng.choice([1, 4, 7, 10])),
        float(rng.choice([0.3, 1.0, 3.0])),
        rng,
    )


@dataclass
class Case:
    frame: pd.DataFrame
    truth: dict[str, Any]
    lookalike: dict[str, Any]
    settings: dict[str, Any] = field(default_factory=dict)


# -- profitability ---------------------------------------------------------------------------------------------


def profitability(b: Business) -> Case:
    rng = b.rng
    dims = {
        "country": [c for c in COUNTRIES if rng.random() < 0.6] or ["DE", "FR"],
        "product": [f"P{i:02d}" for i in range(int(rng.integers(6, 15)))],
        "channel": ["online", "retail", "partner", "direct"][: int(rng.integers(2, 5))],
        "segment": ["SMB", "Enterprise", "Public"][: int(rng.integers(2, 4))] if b.b2b else ["consumer", "member"],
    }
    if len(dims["country"]) < 2:
        dims["country"] = ["DE", "FR", "GB"]
    grid = pd.MultiIndex.from_product(list(dims.values()), names=list(dims)).to_frame(index=False)
    grid["net_revenue"] = np.round(rng.lognormal(8.0 + np.log(b.size), 0.6, len(grid)), 2)
    rate = {p: rng.uniform(0.18, 0.45) for p in dims["product"]}
    grid["rate"] = grid["product"].map(rate) + rng.normal(0, 0.02, len(grid))
    pairs = list(combinations(dims, 2))
    (ta, tb) = pairs[b.seed % len(pairs)]  # every pair planted equally often over consecutive seeds
    tx, ty = str(rng.choice(dims[ta])), str(rng.choice(dims[tb]))
    loss = (grid[ta] == tx) & (grid[tb] == ty)
    grid.loc[loss, "rate"] = -rng.uniform(0.12, 0.35)
    others = [(a, c) for a, c in pairs if len({a, c} & {ta, tb}) == 1]  # sharing one dimension, other rows
    (la, lb) = others[int(rng.integers(len(others)))]
    candidates = [(x, y) for x in dims[la] for y in dims[lb] if not ((grid[la] == x) & (grid[lb] == y) & loss).any()]
    lx, ly = candidates[int(rng.integers(len(candidates)))]
    thin = (grid[la] == lx) & (grid[lb] == ly)
    grid.loc[thin, "rate"] = rng.uniform(0.02, 0.06)
    grid["gross_margin"] = np.round(grid.net_revenue * grid.rate, 2)
    grid["overhead"] = np.round(grid.net_revenue * 0.12, 2)
    frame = grid.drop(columns="rate")
    return Case(frame, {"pair": (ta, tb), "cell": (tx, ty)}, {"pair": (la, lb), "cell": (lx, ly)})


def profitability_result(names: dict[str, Any]) -> tuple[bool, bool]:
    cells = names["cells"]

    def flagged(target: dict[str, Any]) -> bool:
        (a, b), (x, y) = target["pair"], target["cell"]
        for c in cells:
            dims = c.get("dimensions") or " x ".join(k for k in c if k in PROFIT_DIMS)
            if set(str(dims).split(" x ")) == {a, b} and str(c.get(a)) == x and str(c.get(b)) == y:
                return True
        return False

    return flagged(names["truth"]), flagged(names["lookalike"])


# -- rfm-segmentation ------------------------------------------------------------------------------------------


def rfm(b: Business) -> Case:
    rng = b.rng
    as_of = pd.Timestamp("2025-09-30")
    rows: list[tuple[str, pd.Timestamp, float]] = []
    groups: dict[str, list[str]] = {"churned": [], "annual": []}

    def buyer(cid: str, start: pd.Timestamp, end: pd.Timestamp, gap: float, value: float) -> None:
        day = start
        while day <= end:
            rows.append((cid, day, round(float(rng.lognormal(np.log(value), 0.4)), 2)))
            day = day + pd.Timedelta(days=max(1, int(rng.normal(gap, gap * 0.15))))

    n = int(300 * b.size)
    base_gap = 30.0 if b.b2b else float(rng.choice([45, 60, 90]))
    for i in range(n):  # the base: active buyers and a large share of long-gone accounts
        cid = f"c{i}"
        start = as_of - pd.Timedelta(days=int(rng.integers(400, 1500)))
        gone = rng.random() < 0.45
        end = as_of - pd.Timedelta(days=int(rng.integers(500, 900))) if gone else as_of
        buyer(cid, start, max(end, start), base_gap * rng.uniform(0.7, 1.4), 400 if b.b2b else 60)
    for i in range(max(10, n // 20)):  # the truth: regular buyers silent for about ten months
        cid = f"churned{i}"
        groups["churned"].append(cid)
        buyer(
            cid,
            as_of - pd.Timedelta(days=900),
            as_of - pd.Timedelta(days=int(rng.integers(300, 330))),
            base_gap,
            400 if b.b2b else 60,
        )
    for i in range(max(10, n // 20)):  # the look-alike: annual buyers eight months into their year
        cid = f"annual{i}"
        groups["annual"].append(cid)
        last = as_of - pd.Timedelta(days=int(rng.integers(210, 260)))
        for k in range(int(rng.integers(3, 5)), -1, -1):
            rows.append((cid, last - pd.Timedelta(days=int(365 * k + rng.integers(-10, 10))), 5000.0))
    frame = pd.DataFrame(rows, columns=["customer_id", "order_date", "net_revenue"])
    frame["order_id"] = np.arange(len(frame))
    frame["status"] = "completed"
    return Case(frame, {"customers": groups["churned"]}, {"customers": groups["annual"]})


def rfm_result(names: dict[str, Any]) -> tuple[bool, bool]:
    segment = {str(r["customer_id"]): r["segment"] for r in names["rfm"]}

    def share(ids: list[str]) -> float:
        return sum(segment.get(c) in LAPSED for c in ids) / len(ids)

    return share(names["truth"]["customers"]) >= 0.8, share(names["lookalike"]["customers"]) >= 0.5


# -- discount-effectiveness --------------------------------------------------------------------------------------


def discount(b: Business, lift: bool) -> Case:
    rng = b.rng
    customers = int(rng.integers(60, 200))
    size = rng.lognormal(0, 0.8, customers)
    rows = []
    true_b = np.log(1.10) / 0.10 if lift else 0.0  # +10 % quantity per 10 points
    for c in range(customers):
        for _ in range(int(rng.integers(4, 20))):
            base = 0.03 * np.log1p(size[c]) * 3 if not lift else 0.0  # the confound: big customers, big discounts
            d = float(np.clip(base + rng.choice([0.0, 0.05, 0.10, 0.15]) * (rng.random() < 0.5), 0, 0.4))
            q = rng.poisson(max(0.5, 5 * size[c] * np.exp(true_b * d)))
            rows.append(
                (
                    f"k{c}",
                    f"P{int(rng.integers(8))}",
                    str(rng.choice(["web", "store"])),
                    f"2025-{int(rng.integers(1, 13)):02d}",
                    round(d, 3),
                    int(q) + 1,
                )
            )
    frame = pd.DataFrame(rows, columns=["customer", "product", "channel", "period", "discount", "quantity"])
    if not lift:  # the look-alike: a customer's size raises both the discount and the quantity
        frame["discount"] = np.round(
            frame.discount + 0.05 * np.log1p(frame.customer.str[1:].astype(int).map(dict(enumerate(size)))), 3
        )
    return Case(frame, {"lift_pct": 10.0 if lift else 0.0}, {})


def discount_result(truth: dict[str, Any], lookalike: dict[str, Any]) -> tuple[bool, bool]:
    low, high = truth["lift_ci"]
    found = bool(truth["detectable"]) and low <= 10.0 <= high
    flagged = bool(lookalike["detectable"]) and lookalike["lift_ci"][0] > 0
    return found, flagged


# -- ab-test-readout -------------------------------------------------------------------------------------------


def ab(b: Business, real: bool) -> Case:
    rng = b.rng
    base = rng.uniform(0.02, 0.08)
    n = int(rng.integers(40_000, 120_000))
    if real:
        nc, nt = rng.binomial(2 * n, 0.5), 0
        nt = 2 * n - nc
        lift = rng.uniform(0.012, 0.02)
        cc, ct = rng.binomial(nc, base), rng.binomial(nt, base + lift)
    else:  # a broken split (52/48) with an "effect" riding on it
        nc = int(2 * n * 0.48)
        nt = 2 * n - nc
        cc, ct = rng.binomial(nc, base), rng.binomial(nt, base * 1.15)
    frame = pd.DataFrame({"variant": ["control", "treatment"], "visitors": [nc, nt], "conversions": [cc, ct]})
    return Case(frame, {}, {})


# -- kpi-anomaly-detection ----------------------------------------------------------------------------------------


def kpi(b: Business) -> Case:
    import holidays

    rng = b.rng
    days = pd.date_range("2022-01-01", "2025-10-31", freq="D")
    level = float(rng.choice([14, 30, 100, 300]))  # orders on a working day: low counts to large ones
    t = np.arange(len(days)) / 365.25
    weekday = (
        np.array([1.0, 1.0, 1.0, 1.0, 0.95, 0.05, 0.02]) if b.b2b else np.array([1.0, 1.05, 1.05, 1.0, 1.1, 0.8, 0.7])
    )[days.day_of_week.to_numpy()]
    season = 1 + 0.2 * np.cos(2 * np.pi * (days.day_of_year.to_numpy() - 340) / 365.25)
    mu = level * (1 + rng.uniform(-0.05, 0.2)) ** t * weekday * season
    public = holidays.country_holidays(b.country, years=range(2022, 2026))
    closed = np.isin(days.date, list(public))
    mu[closed] *= 0.05 if b.b2b else 0.5  # the look-alike: the country's holidays, every year
    recurring = [str(d) for d, name in public.items() if pd.Timestamp(d) in set(days)]
    for year in range(2022, 2026):  # and events in no law's calendar: a year-end shutdown, Black Friday
        if b.b2b:
            shut = pd.date_range(f"{year}-12-27", f"{year}-12-30").intersection(days)
            mu[days.isin(shut)] *= 0.1
            recurring += [str(d.date()) for d in shut]
        else:
            friday = pd.Timestamp(year, 11, 1) + pd.offsets.Week(weekday=3) * 4 + pd.Timedelta(days=1)
            mu[days == friday] *= 2.5
            recurring += [str(friday.date())] if friday in days else []
    ordinary = ~closed & ~days.isin(pd.DatetimeIndex(recurring)) & (days > pd.Timestamp("2022-06-30"))
    working = np.flatnonzero((days.day_of_week < 5) & ordinary)
    outage = days[working[int(rng.integers(len(working)))]]
    mu[days == outage] *= 0.0 if level <= 30 else 0.3  # the truth: a one-day outage
    orders = rng.negative_binomial(80, 80 / (80 + mu)) if level >= 100 else rng.poisson(mu)
    frame = pd.DataFrame({"day": days, "order_count": orders})
    return Case(frame, {"day": str(outage.date())}, {"days": sorted(recurring)}, {"COUNTRY": b.country})


def kpi_result(names: dict[str, Any]) -> tuple[bool, bool]:
    low = {p for p, d in zip(names["periods"], names["directions"], strict=True) if d == "low"}
    return names["truth"]["day"] in low, bool(set(names["lookalike"]["days"]) & set(names["periods"]))


# -- demand-forecast ----------------------------------------------------------------------------------------------


def forecast(b: Business, moved: bool) -> Case:
    rng = b.rng
    months = pd.date_range("2020-01-01", periods=72, freq="MS")
    pattern = rng.uniform(80, 110, 12)
    peak = int(rng.integers(12))  # a fiscal-year-end peak, in a month of the business's own
    pattern[peak] *= rng.uniform(1.6, 2.0)
    after = pattern.copy()
    if moved:  # the truth: the peak moved a month later a year before the data ends
        after[peak], after[(peak + 1) % 12] = pattern[(peak + 1) % 12], pattern[peak]
    start = months[48]
    values = np.array([(after if m >= start else pattern)[m.month - 1] for m in months], dtype=float)
    values *= 1000 * b.size * (1 + rng.uniform(-0.03, 0.15)) ** (np.arange(72) / 12) * np.exp(rng.normal(0, 0.04, 72))
    if not moved:  # the look-alike: one month in the last year far above its pattern, a one-off
        values[int(rng.integers(48, 60))] *= rng.uniform(1.6, 1.9)
    frame = pd.DataFrame({"month": months[:60], "value": values[:60]})
    return Case(frame, {"peak": f"{(peak + 1) % 12 + 1:02d}" if moved else f"{peak + 1:02d}"}, {})


def forecast_result(truth: dict[str, Any], lookalike: dict[str, Any]) -> tuple[bool, bool]:
    return truth["peak"] == truth["expected_peak"], bool(lookalike["broken"])


# -- customer-cohort-retention -------------------------------------------------------------------------------------


def cohort(b: Business) -> Case:
    """Customers one by one: a signup day, an order rate, a lifetime; a quarter counts them active when they order
    in it while alive (the part of it the data covers). The data ends 2 to 11 weeks into a quarter."""
    rng = b.rng
    through = pd.Timestamp("2025-07-01") + pd.Timedelta(days=int(rng.integers(14, 78)))
    quarters = int(rng.integers(10, 15))
    first = pd.Period(through, freq="Q") - quarters + 1
    planted = int(rng.integers(1, quarters - 5))  # old enough to be seen four quarters after its first
    rate = (1 / 30 if b.b2b else 1 / 75) * rng.uniform(0.7, 1.3)
    lifetime = rng.uniform(400, 900)  # days; each cohort's within 15 % of it (cohorts differ, a little)
    rows = []
    for i in range(quarters):
        q = first + i
        begins, ends = q.start_time, min(q.end_time.normalize(), through)
        n = int(rng.poisson(rng.uniform(60, 200) * b.size))
        signup = begins + pd.to_timedelta(rng.integers(0, (ends - begins).days + 1, n), unit="D")
        life = rng.exponential(lifetime * rng.uniform(0.85, 1.15), n)
        if i == planted:  # the truth: most of the cohort leaves after its first full quarter (a promotion's buyers)
            gone = rng.random(n) < 0.85
            after_first = ((q + 2).start_time - signup[gone]).days + rng.integers(0, 20, gone.sum())
            life[gone] = np.minimum(life[gone], after_first)
        own = rng.gamma(2.0, rate / 2.0, n)
        for k in range(quarters - i):
            qk = q + k
            lo = np.maximum((qk.start_time - signup).days, 0)
            hi = np.minimum((min(qk.end_time.normalize(), through) - signup).days + 1, life)
            days = np.clip(hi - lo, 0, None)
            active = int((rng.random(n) < 1 - np.exp(-own * days)).sum())
            if active:
                rows.append((f"{q.year}-Q{q.quarter}", begins, k, active, n, through))
    frame = pd.DataFrame(
        rows, columns=["cohort", "cohort_start", "quarters_since", "active_customers", "cohort_size", "data_through"]
    )
    last = pd.Period(through, freq="Q")
    cut = [[f"{(last - k).year}-Q{(last - k).quarter}", k] for k in range(quarters)]
    return Case(frame, {"cohort": f"{(first + planted).year}-Q{(first + planted).quarter}"}, {"cells": cut})


def cohort_result(names: dict[str, Any]) -> tuple[bool, bool]:
    shown = {(c, int(k)) for c, k in names["cells"]}
    planted = names["truth"]["cohort"]
    cut = any((c, int(k)) in shown for c, k in names["lookalike"]["cells"])
    return planted in names["outliers"], cut or bool(set(names["outliers"]) - {planted})


# -- returns-and-cancellations -------------------------------------------------------------------------------------


def returns(b: Business) -> Case:
    """Channels selling products of different return rates: the truth returns twice as much of every product it
    sells; the look-alike sells the most of the product most often returned and returns no more of any."""
    rng = b.rng
    products = [f"P{i}" for i in range(int(rng.integers(4, 9)))]
    rate = {p: float(rng.uniform(0.01, 0.04)) for p in products}
    heavy = products[0]
    rate[heavy] = float(rng.uniform(0.08, 0.14))
    channels = ["online", "retail", "partner", "phone", "marketplace"][: int(rng.integers(3, 6))]
    truth, look = channels[1], channels[2]
    rows = []
    for channel in channels:
        for product in products:
            orders = int(rng.integers(150, 600) * b.size * (6 if channel == look and product == heavy else 1))
            r = rate[product] * (2.0 if channel == truth else 1.0)
            returned = int(rng.binomial(orders, r))
            cancelled = int(rng.binomial(orders - returned, 0.02))
            rows.append((channel, product, orders, orders - returned - cancelled, returned, cancelled))
    frame = pd.DataFrame(rows, columns=["item", "product", "orders", "completed", "returned", "cancelled"])
    return Case(frame, {"item": truth}, {"item": look})


def returns_result(names: dict[str, Any]) -> tuple[bool, bool]:
    flagged = {f["item"] for f in names["flags"] if f["kind"] == "returned"}
    return names["truth"]["item"] in flagged, names["lookalike"]["item"] in flagged


# -- data-quality-audit ------------------------------------------------------------------------------------------


def quality(b: Business) -> Case:
    """An order export with a long natural tail (lognormal quantities: hundreds of values beyond 3 x IQR) and four
    planted faults: rows invoiced in another country's currency, shipped before ordered, ordered before the
    customer signed up, and two absurd quantities. The look-alike: the long tail (not a high finding)."""
    rng = b.rng
    n = int(rng.integers(2000, 6000))
    countries = rng.choice(list(COUNTRIES), n)
    signup = pd.Timestamp("2022-01-01") + pd.to_timedelta(rng.integers(0, 700, n), unit="D")
    ordered = signup + pd.to_timedelta(rng.integers(1, 400, n), unit="D")
    shipped = ordered + pd.to_timedelta(rng.integers(0, 6, n), unit="D")
    quantity = np.ceil(rng.lognormal(1.0, 0.9, n)).astype(int)
    price = np.round(rng.choice([4.99, 12.5, 49.0, 199.0], n) * rng.uniform(0.95, 1.05, n), 2)
    discount = rng.choice([0.0, 0.05, 0.1], n)
    frame = pd.DataFrame(
        {
            "order_id": np.arange(100000, 100000 + n),
            "customer_id": rng.integers(1, n // 3, n),
            "country": countries,
            "currency": [COUNTRIES[c] for c in countries],
            "signup_date": signup.date,
            "order_date": ordered.date,
            "ship_date": shipped.date,
            "quantity": quantity,
            "unit_price": price,
            "discount": discount,
        }
    )
    picks = rng.choice(n, 14, replace=False)
    wrong, early, before, absurd = picks[:4], picks[4:8], picks[8:12], picks[12:]
    other = {"EUR": "USD", "GBP": "EUR", "USD": "EUR", "PLN": "EUR"}
    frame.loc[wrong, "currency"] = frame.loc[wrong, "currency"].map(other)
    frame.loc[early, "ship_date"] = (pd.to_datetime(frame.loc[early, "order_date"]) - pd.Timedelta(days=3)).dt.date
    frame.loc[before, "order_date"] = (pd.to_datetime(frame.loc[before, "signup_date"]) - pd.Timedelta(days=20)).dt.date
    frame.loc[absurd, "quantity"] = frame.loc[absurd, "quantity"] * 1000
    frame["revenue"] = np.round(frame.quantity * frame.unit_price * (1 - frame.discount), 2)
    for c in ("signup_date", "order_date", "ship_date"):
        frame[c] = pd.to_datetime(frame[c])
    return Case(frame, {"absurd": 2}, {})


def quality_result(names: dict[str, Any]) -> tuple[bool, bool]:
    high = [f for f in names["findings"] if f["severity"] == "high"]

    def has(words: str, column: str) -> bool:
        return any(words in f["check"] and column in f["column"] for f in high)

    extreme = [f for f in high if "extreme" in f["check"] and f["column"] == "quantity"]
    top = [float(v) for v in str(extreme[0]["examples"]).split(", ")[:2]] if extreme else []
    found = (
        has("currency", "currency")
        and has("ship_date before order_date", "ship_date")
        and has("order_date before signup_date", "order_date")
        and len(top) == 2
        and min(top) >= 1000  # the two absurd quantities (x 1000) ranked first
    )
    tail_high = any(f["column"] == "quantity" and f["rows"] > 10 for f in high)  # the long tail read as faults
    return found, tail_high


# -- budget-vs-actual ----------------------------------------------------------------------------------------------


def budget(b: Business) -> Case:
    """Monthly plan and actual per region x category over a fiscal year and a half; the data ends inside a month.
    Truth: a cell whose actuals run 30 % below plan for a whole quarter. Look-alike: a renewal booked one month
    late across a quarter's end (a miss, then an overrun of the same size: one timing shift)."""
    rng = b.rng
    start = pd.Timestamp(2024, b.fiscal_start, 1)
    months = pd.date_range(start, periods=18, freq="MS")
    regions = ["North", "South", "East", "West"][: int(rng.integers(2, 5))]
    categories = ["Hardware", "Software", "Services"][: int(rng.integers(2, 4))]
    cells = [(r, c) for r in regions for c in categories]
    truth, look = cells[0], cells[1]
    quarter = int(rng.integers(1, 4))  # the fiscal quarter of the miss (of the first year), 1-3
    rows = []
    plans = {cell: float(rng.uniform(50_000, 200_000) * b.size) for cell in cells}
    for cell in cells:
        for i, month in enumerate(months):
            plan = plans[cell] * (1 + 0.1 * np.sin(i / 2))
            actual = plan * (1 + rng.normal(0, 0.03))
            if cell == truth and quarter * 3 <= i < quarter * 3 + 3:
                actual *= 0.7
            rows.append([month, cell[0], cell[1], round(plan, 0), round(actual, 0)])
    frame = pd.DataFrame(rows, columns=["month", "region", "category", "plan", "actual"])
    late = (frame.region == look[0]) & (frame.category == look[1])
    at = int(rng.integers(1, 5)) * 3 - 1  # a quarter's last month: the renewal planned in it is booked a month late
    renewal = plans[look] * float(rng.uniform(0.8, 1.2))
    frame.loc[late & (frame.month == months[at]), "plan"] += renewal
    frame.loc[late & (frame.month == months[at + 1]), "actual"] += renewal
    frame["data_through"] = months[-1] + pd.Timedelta(days=int(rng.integers(5, 25)))
    return Case(frame, {"cell": list(truth)}, {"cell": list(look)}, {"FISCAL_YEAR_START": b.fiscal_start})


def budget_result(names: dict[str, Any]) -> tuple[bool, bool]:
    largest = names["largest"]
    found = largest is not None and [largest["region"], largest["category"]] == names["truth"]["cell"]
    look = names["lookalike"]["cell"]
    untimed = [f for f in names["untimed"] if [f["region"], f["category"]] == look]
    return found, bool(untimed)


# -- sales-performance-review --------------------------------------------------------------------------------------


def sales(b: Business, real: bool) -> Case:
    """Items at list prices over two years, units moving at random. The truth: one item's price rises 5-15 %
    (the bridge's price step must be that rise on its current units, within 1 %). The look-alike: buyers move from
    the Pro edition to the Lite one at unchanged prices (no price step: mix is volume at prior prices)."""
    rng = b.rng
    n = int(rng.integers(5, 15))
    price = {f"I{i:02d}": float(np.round(rng.lognormal(3.5, 1.0), 2)) for i in range(n)}
    price["Pro"], price["Lite"] = float(rng.uniform(800, 1500)), float(rng.uniform(150, 400))
    rows = []
    raised = "I00"
    rise = float(rng.uniform(0.05, 0.15))
    for item, p0 in price.items():
        q0 = int(rng.integers(200, 2000) * b.size) + 1
        q1 = int(q0 * rng.uniform(0.8, 1.3)) + 1
        p1 = p0
        if real and item == raised:
            p1 = round(p0 * (1 + rise), 2)
        if not real and item in ("Pro", "Lite"):
            q0 = int(1000 * b.size) + 1
            q1 = int(q0 * (0.6 if item == "Pro" else 1.8))
        rows += [(item, "2024", q0, round(q0 * p0, 2)), (item, "2025", q1, round(q1 * p1, 2))]
    frame = pd.DataFrame(rows, columns=["item", "year", "units", "net_revenue"])
    now = frame[(frame.item == raised) & (frame.year == "2025")].iloc[0]
    planted = float(now.net_revenue - now.units * price[raised]) if real else 0.0  # at the new price, less the old
    return Case(frame, {"price_step": planted, "prior": float(frame[frame.year == "2024"].net_revenue.sum())}, {})


def sales_result(truth: dict[str, Any], lookalike: dict[str, Any]) -> tuple[bool, bool]:
    planted = truth["planted"]["price_step"]
    found = abs(truth["price"] - planted) <= 0.01 * planted
    flagged = abs(lookalike["price"]) > 0.005 * lookalike["prior"]  # a mix shift read as a price cut
    return found, flagged


# -- customer-lifetime-value ---------------------------------------------------------------------------------------


def clv(b: Business, real: bool) -> Case:
    """Customers who buy at their own Poisson rate until they drop out (the BG/NBD story), over three years. The
    truth: nothing changes after the hold-out's cut-off, and the model's check must support it (within 20 %).
    The look-alike: three in ten customers stop at the cut-off (a competitor, a price rise): the check must warn."""
    rng = b.rng
    n = int(rng.integers(400, 900))
    start, end = pd.Timestamp("2022-10-01"), pd.Timestamp("2025-09-30")
    cut = end + pd.Timedelta(days=1) - pd.DateOffset(years=1)
    rows = []
    base = 1 / 30 if b.b2b else 1 / 90
    for c in range(n):
        first = start + pd.Timedelta(days=int(rng.integers(0, 700)))
        rate = rng.gamma(2.0, base / 2.0)
        p_drop = rng.beta(1.5, 8.0)
        margin = rng.gamma(4.0, (120 if b.b2b else 15) / 4.0)
        stops = not real and rng.random() < 0.3
        day = first
        while day <= end:
            if stops and day >= cut:
                break
            rows.append((f"c{c}", day, round(float(margin * rng.uniform(0.7, 1.3)), 2)))
            if rng.random() < p_drop:
                break
            day = day + pd.Timedelta(days=max(1, int(rng.exponential(1 / rate))))
    frame = pd.DataFrame(rows, columns=["customer_id", "order_date", "margin"])
    return Case(frame, {}, {})


def clv_result(truth: dict[str, Any], lookalike: dict[str, Any]) -> tuple[bool, bool]:
    return 0.8 <= truth["check_ratio"] <= 1.2, lookalike["check_ratio"] <= 1.2


# -- running -----------------------------------------------------------------------------------------------------

SCRIPTS = {
    "profitability": "skills/profitability/scripts/loss_cells.py",
    "rfm-segmentation": "skills/rfm-segmentation/scripts/rfm.py",
    "discount-effectiveness": "skills/discount-effectiveness/scripts/discount_lift.py",
    "ab-test-readout": "skills/ab-test-readout/scripts/ab_readout.py",
    "kpi-anomaly-detection": "skills/kpi-anomaly-detection/scripts/kpi_anomalies.py",
    "demand-forecast": "skills/demand-forecast/scripts/forecast.py",
    "customer-cohort-retention": "skills/customer-cohort-retention/scripts/retention_matrix.py",
    "returns-and-cancellations": "skills/returns-and-cancellations/scripts/return_outliers.py",
    "data-quality-audit": "skills/data-quality-audit/scripts/profile.py",
    "budget-vs-actual": "skills/budget-vs-actual/scripts/budget_variance.py",
    "sales-performance-review": "skills/sales-performance-review/scripts/price_volume_mix.py",
    "customer-lifetime-value": "skills/customer-lifetime-value/scripts/clv.py",
}
READS = {  # what each script's run is read back as (JSON)
    "profitability": "json.dumps({'cells': loss_cells.head(40).astype(object).where(loss_cells.head(40).notna(), "
    "None).to_dict('records')}, default=str)",
    "rfm-segmentation": "json.dumps({'rfm': rfm[rfm.customer_id.astype(str).isin(IDS)][['customer_id', 'segment']]"
    ".to_dict('records')}, default=str)",
    "discount-effectiveness": "json.dumps({'detectable': bool(detectable), 'lift_ci': [float(x) for x in lift_ci]})",
    "ab-test-readout": "json.dumps({'significant': bool(significant)})",
    "kpi-anomaly-detection": "json.dumps({'periods': list(anomalies.period), 'directions': list(anomalies.direction)})",
    "demand-forecast": "json.dumps({'peak': (globals().get('candidate') if len(forecast) == 0 else forecast)"
    ".sort_values('forecast').month.iloc[-1][-2:], 'broken': globals().get('broken', '')})",
    "customer-cohort-retention": "json.dumps({'outliers': list(outliers), 'cells': [[c, int(k)] for (c, k), v in "
    "retention.stack().items() if v == v]})",
    "returns-and-cancellations": "json.dumps({'flags': flags[['item', 'kind']].to_dict('records')})",
    "data-quality-audit": "json.dumps({'findings': findings.to_dict('records')}, default=str)",
    "budget-vs-actual": "json.dumps({'largest': (None if not len(globals().get('real', [])) else "
    "{'region': worst.region, 'category': worst.category}), 'untimed': [r for r in flags[['region', 'category', "
    "'quarter']].to_dict('records') if (r['region'], r['category'], r['quarter']) not in "
    "globals().get('timed', set())]}, default=str)",
    "sales-performance-review": "json.dumps({'price': float(bridge[bridge.step.isin(['price and discount', "
    "'list price', 'discount'])].revenue.sum()), 'prior': float(bridge.revenue.iloc[0])})",
    "customer-lifetime-value": "json.dumps({'check_ratio': check_ratio})",
}
RFM_SQL = re.compile(r"```sql\n(-- RFM score.*?)```", re.S)


def script_at(revision: str | None, path: str) -> str | None:
    if revision is None:
        return (ROOT / path).read_text() if (ROOT / path).exists() else None
    done = subprocess.run(["git", "show", f"{revision}:{path}"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


class Follower:
    """One real server over stdio; a case's table as an upload, the skill's script run on it in run_python."""

    def __init__(self, session: Any, workspace: Path) -> None:
        self.s = session
        self.ws = workspace
        self.n = 0

    async def python(self, code: str, reset: bool = False) -> tuple[bool, str]:
        result = await self.s.call_tool(
            "run_python", {"code": code, "reset": reset, "output_level": "full", "timeout": 300}
        )
        text = "\n".join(c.text for c in result.content if getattr(c, "text", None))
        return not result.is_error, text

    async def run(self, skill: str, case: Case, script: str | None, revision: str | None) -> dict[str, Any] | None:
        """The script's result variables (READS), or None: it crashed."""
        self.n += 1
        upload = f"case{self.n}"
        case.frame.to_parquet(self.ws / "uploads" / f"{upload}.parquet", index=False)
        settings = "".join(f"{k} = {v!r}\n" for k, v in case.settings.items())
        if script is None and skill == "rfm-segmentation":  # no script at that revision: the skill's SQL
            return await self.rfm_sql(upload, revision, [*case.truth["customers"], *case.lookalike["customers"]])
        assert script is not None
        if skill == "profitability" and "every pair" not in script:  # that revision's skill asked product x channel
            case.frame = case.frame.groupby(["product", "channel"], as_index=False)[
                ["net_revenue", "gross_margin"]
            ].sum()
            case.frame.to_parquet(self.ws / "uploads" / f"{upload}.parquet", index=False)
        ok, text = await self.python(
            f"SOURCE = save_artifact(load_file('upload_{upload}'))\n{settings}{script}", reset=True
        )
        if not ok:
            return None
        ids = [*case.truth.get("customers", []), *case.lookalike.get("customers", [])]
        ok, text = await self.python(f"import json\nIDS = {ids!r}\nprint({READS[skill]})")
        if not ok:
            return None
        return _json_line(text)

    async def rfm_sql(self, upload: str, revision: str | None, ids: list[str]) -> dict[str, Any] | None:
        skill = script_at(revision, "skills/rfm-segmentation/SKILL.md") or ""
        match = RFM_SQL.search(skill)
        if not match:
            return None
        sql = match.group(1).replace("order_facts", f"upload_{upload}")
        result = await self.s.call_tool("query_database", {"query": sql, "output_level": "brief", "max_rows": 1})
        if result.is_error:
            return None
        aid = (result.meta or {}).get("dev.ba-mcp/observation", {}).get("artifact_id")
        ok, text = await self.python(
            f"import json\nframe = load_artifact('{aid}')\nIDS = {ids!r}\n"
            "frame = frame[frame.customer_id.astype(str).isin(IDS)]\n"
            "print(json.dumps({'rfm': frame[['customer_id', 'segment']].to_dict('records')}, default=str))",
            reset=True,
        )
        return _json_line(text) if ok else None


def _json_line(text: str) -> dict[str, Any]:
    """The JSON a read printed (the first line of the stdout section that is an object)."""
    out = text.split("## stdout\n", 1)[-1]
    return dict(json.loads(next(line for line in out.splitlines() if line.startswith("{"))))


async def measure(
    businesses: list[Business], revisions: list[str | None], skills: list[str]
) -> dict[tuple[str, str], list[Any]]:
    from mcp import ClientSession, stdio_client

    from tests.conftest import make_workspace, stdio_params

    root = Path(tempfile.mkdtemp(prefix="ba-bench-skills-"))
    ws = make_workspace(root)
    params = stdio_params(ws, BA_MCP_SANDBOX__SPARE_WORKERS="1", BA_MCP_TOOLS__RUN_PYTHON__MAX_TIMEOUT_S="600")
    outcome: dict[tuple[str, str], list[Any]] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        follower = Follower(session, ws)
        for i, b in enumerate(businesses):
            order = revisions if i % 2 == 0 else list(reversed(revisions))
            cases: dict[str, Callable[[], Any]] = {
                "profitability": lambda b=b: profitability(business(b.seed)),
                "rfm-segmentation": lambda b=b: rfm(business(b.seed)),
                "kpi-anomaly-detection": lambda b=b: kpi(business(b.seed)),
                "customer-cohort-retention": lambda b=b: cohort(business(b.seed)),
                "returns-and-cancellations": lambda b=b: returns(business(b.seed)),
                "data-quality-audit": lambda b=b: quality(business(b.seed)),
                "budget-vs-actual": lambda b=b: budget(business(b.seed)),
            }
            for skill, make in cases.items():
                if skill not in skills:
                    continue
                for revision in order:
                    case = make()  # the same draw for every revision
                    script = script_at(revision, SCRIPTS[skill])
                    got = await follower.run(skill, case, script, revision)
                    key = (skill, revision or "now")
                    if got is None:
                        outcome.setdefault(key, []).append("crash")
                        continue
                    got.update(truth=case.truth, lookalike=case.lookalike)
                    scorer = {
                        "profitability": profitability_result,
                        "rfm-segmentation": rfm_result,
                        "customer-cohort-retention": cohort_result,
                        "kpi-anomaly-detection": kpi_result,
                        "returns-and-cancellations": returns_result,
                        "data-quality-audit": quality_result,
                        "budget-vs-actual": budget_result,
                    }[skill]
                    outcome.setdefault(key, []).append(scorer(got))
            for skill, maker, scorer in (
                ("discount-effectiveness", discount, discount_result),
                ("ab-test-readout", ab, None),
                ("demand-forecast", forecast, forecast_result),
                ("sales-performance-review", sales, sales_result),
                ("customer-lifetime-value", clv, clv_result),
            ):
                if skill not in skills:
                    continue
                for revision in order:
                    script = script_at(revision, SCRIPTS[skill])
                    truth_case = maker(business(b.seed), True)
                    got_truth = await follower.run(skill, truth_case, script, revision)
                    if got_truth is not None:
                        got_truth["expected_peak"] = truth_case.truth.get("peak")
                        got_truth["planted"] = truth_case.truth
                    got_look = await follower.run(skill, maker(business(b.seed + 10_000), False), script, revision)
                    key = (skill, revision or "now")
                    if got_truth is None or got_look is None:
                        outcome.setdefault(key, []).append("crash")
                    elif scorer is not None:
                        outcome.setdefault(key, []).append(scorer(got_truth, got_look))
                    else:
                        outcome.setdefault(key, []).append((got_truth["significant"], got_look["significant"]))
            print(f"business {b.name} ({'B2B' if b.b2b else 'B2C'}, {b.country}, {b.currency}) done", flush=True)
    return outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--businesses", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--against", help="a git revision whose scripts run in the same server, interleaved")
    parser.add_argument("--skills", default=",".join(SCRIPTS), help="the skills measured (comma-separated)")
    args = parser.parse_args()
    businesses = [business(args.seed + i) for i in range(args.businesses)]
    revisions: list[str | None] = [None] + ([args.against] if args.against else [])
    outcome = asyncio.run(measure(businesses, revisions, args.skills.split(",")))
    print(f"\n{args.businesses} businesses, seeds {args.seed}..{args.seed + args.businesses - 1}")
    print(f"{'skill':<24} {'scripts':<10} {'truths found':>13} {'look-alikes flagged':>20} {'crashes':>8}")
    for (skill, revision), results in sorted(outcome.items()):
        done = [r for r in results if r != "crash"]
        crashes = len(results) - len(done)
        found = 100 * sum(f for f, _ in done) / max(len(results), 1)
        flagged = 100 * sum(g for _, g in done) / max(len(done), 1)
        print(f"{skill:<24} {revision:<10} {found:12.0f} % {flagged:19.0f} % {crashes:8d}")


if __name__ == "__main__":
    main()
