"""Benchmark data generator: archetype `subscription_marketplace`.

A US/CA/AU pet-food company ("Barkwell Provisions") selling dry food by subscription (Recharge), add-ons and
one-off orders through Shopify, and the 30 lb bag on Amazon (FBA).  Written independently from the archetype brief
and the archetype contract only (see subscription_marketplace.md).

    generate(out: pathlib.Path, seed: int) -> dict

writes the raw exports into `out` and returns (and writes as out/truth.json) the truth dict.  Every `expected`
value is computed by `_expected(...)` from the files as written (read back with pandas, all columns as text), or is
an exact planted parameter where that is the true answer (stated next to it).  `python subscription_marketplace.py`
runs the self-check for seeds 1..10 (re-reads every file, re-asserts every expected value, independent sanity
checks, byte-identical output for the same seed).
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import math
import pathlib
import random
import sys
import tempfile

import numpy as np
import pandas as pd

ARCHETYPE = "subscription_marketplace"
DAY = 86400


def od(y: int, m: int, d: int) -> int:
    return dt.date(y, m, d).toordinal()


def ds(o) -> str:
    return dt.date.fromordinal(int(o)).isoformat()


EPOCH = od(1970, 1, 1)
SIM_START = od(2020, 2, 2)  # company launch (simulated, not exported)
DATA_START = od(2023, 1, 29)  # FY2023 P1 start = first day of every export
DATA_END = od(2025, 12, 2)  # last day in the exports (FY2025 P11 day 3 of 35)
SIM_END = od(2026, 1, 31)  # simulated on to FY2025 end (plan of the unfinished periods, forecast truth)
START_TS = DATA_START * DAY
END_TS = (DATA_END + 1) * DAY - 1
SIM_END_TS = (SIM_END + 1) * DAY - 1
RECENT_FROM = DATA_END - 44  # "last 45 days" = RECENT_FROM .. DATA_END inclusive

PRICE_RISE_DAY = od(2025, 2, 2)  # FY2025 P1 start: CAD and AUD bag prices +5.0 %
PUPPY_START = od(2024, 6, 2)  # PUPPY15 given to puppy subscriptions created from this day, from box 4
CAMP = (od(2024, 6, 28), od(2024, 7, 2), od(2024, 8, 1), od(2024, 8, 9))  # pause campaign: start window, resume window
CAMP_RATE = 0.22
AU_OUT = (od(2025, 5, 12), od(2025, 5, 21))  # AU 3PL flood: AU charges skipped by the merchant (FY2025 P4)
OUTAGE_DAY = od(2025, 6, 18)  # payment gateway outage (Wednesday)
DUP_DAY = od(2025, 4, 15)  # a batch of charges exported twice
TREATS_PROMO = (od(2025, 6, 1), od(2025, 7, 5))  # TREATS20, US only = FY2025 P5
TREATS_PRE = (od(2025, 3, 23), od(2025, 5, 31))  # 10 weeks before, the DiD baseline
AMZ_FEE_CHANGE = od(2025, 1, 15)
N_RECENT_CANCEL = 143
PLAN_STRETCH = 1.03

COUNTRIES = ["US", "CA", "AU"]
CUR = {"US": "USD", "CA": "CAD", "AU": "AUD"}
TAX = {"US": 0.06, "CA": 0.05, "AU": 0.10}
COMPANY = "Barkwell Provisions"

RECIPES = {
    "CHK": "Chicken & Brown Rice Recipe",
    "SAL": "Salmon & Sweet Potato Recipe (Grain-Free)",
    "PUP": "Puppy Chicken & Oat Recipe",
}
SIZES = {"04": ("4 lb bag", 4), "12": ("12 lb bag", 12), "30": ("30 lb bag", 30)}
PRICE_C = {  # subscription list price, cents, before 2025-02-02
    "USD": {
        "CHK-04": 2499,
        "CHK-12": 5299,
        "CHK-30": 8499,
        "SAL-04": 2899,
        "SAL-12": 5999,
        "SAL-30": 9499,
        "PUP-04": 2699,
        "PUP-12": 5599,
        "PUP-30": 8999,
    },
    "CAD": {
        "CHK-04": 3299,
        "CHK-12": 6999,
        "CHK-30": 11299,
        "SAL-04": 3899,
        "SAL-12": 7999,
        "SAL-30": 12699,
        "PUP-04": 3599,
        "PUP-12": 7499,
        "PUP-30": 11999,
    },
    "AUD": {
        "CHK-04": 3699,
        "CHK-12": 7699,
        "CHK-30": 12299,
        "SAL-04": 4199,
        "SAL-12": 8699,
        "SAL-30": 13799,
        "PUP-04": 3899,
        "PUP-12": 8099,
        "PUP-30": 12999,
    },
}
NEW_PRICE_C = {
    cur: {k: ((v * 105 + 50) // 100 if cur != "USD" else v) for k, v in d.items()} for cur, d in PRICE_C.items()
}
TREATS = {
    "TRT-JRK": ("Chicken Jerky Treats", "10 oz pouch", {"USD": 1299, "CAD": 1699, "AUD": 1899}),
    "TRT-DEN": ("Dental Chews", "12 count", {"USD": 1599, "CAD": 2099, "AUD": 2299}),
    "TRT-BIS": ("Peanut Butter Biscuits", "16 oz box", {"USD": 999, "CAD": 1299, "AUD": 1499}),
}
COGS = {
    "CHK-04": 9.10,
    "CHK-12": 22.40,
    "CHK-30": 49.90,
    "SAL-04": 10.80,
    "SAL-12": 26.50,
    "SAL-30": 58.20,
    "PUP-04": 9.90,
    "PUP-12": 24.10,
    "PUP-30": 53.60,
    "TRT-JRK": 4.20,
    "TRT-DEN": 5.10,
    "TRT-BIS": 2.90,
}
AMZ_PRICE = 79.99
AMZ_REFERRAL = 0.15
AMZ_FBA = (19.85, 20.42)
HAZ = [0.10, 0.07, 0.05, 0.04]
HAZ_LATE = 0.045
REASONS = [
    ("Too expensive", 0.25),
    ("Have too much food", 0.20),
    ("Dog didn't like the food", 0.15),
    ("Switching to another brand", 0.15),
    ("Pet passed away", 0.05),
    ("Moving / shipping issues", 0.05),
    ("Other", 0.15),
]
ERRORS = [
    ("card_declined", "Your card has insufficient funds.", 0.45),
    ("card_declined", "Your card has expired.", 0.20),
    ("card_declined", "Your card was declined. (do_not_honor)", 0.20),
    ("card_declined", "Your card was declined.", 0.15),
]
FIRST = [
    "james",
    "mary",
    "john",
    "patricia",
    "robert",
    "jennifer",
    "michael",
    "linda",
    "david",
    "emma",
    "olivia",
    "liam",
    "noah",
    "ava",
    "sophia",
    "lucas",
    "mia",
    "chloe",
    "jack",
    "grace",
    "ethan",
    "zoe",
    "ryan",
    "leah",
    "nathan",
    "ruby",
    "isla",
    "oscar",
    "harper",
    "henry",
]
LAST = [
    "smith",
    "johnson",
    "brown",
    "lee",
    "wilson",
    "martin",
    "taylor",
    "nguyen",
    "walker",
    "white",
    "harris",
    "clark",
    "lewis",
    "young",
    "king",
    "wright",
    "scott",
    "green",
    "baker",
    "adams",
    "campbell",
    "roy",
    "tremblay",
    "gagnon",
    "kelly",
    "murphy",
    "jones",
    "williams",
    "thompson",
    "ryan",
]
DOMAINS = {
    "US": ["gmail.com", "yahoo.com", "outlook.com", "icloud.com"],
    "CA": ["gmail.com", "hotmail.ca", "outlook.com", "icloud.com"],
    "AU": ["gmail.com", "bigpond.com", "outlook.com.au", "icloud.com"],
}
CITIES = {
    "US": [
        ("Austin", "TX"),
        ("Denver", "CO"),
        ("Columbus", "OH"),
        ("Portland", "OR"),
        ("Raleigh", "NC"),
        ("Brooklyn", "NY"),
    ],
    "CA": [("Toronto", "ON"), ("Vancouver", "BC"), ("Calgary", "AB"), ("Ottawa", "ON"), ("Halifax", "NS")],
    "AU": [("Sydney", "NSW"), ("Melbourne", "VIC"), ("Brisbane", "QLD"), ("Perth", "WA"), ("Adelaide", "SA")],
}
PET_NAMES = [
    "Bella",
    "Max",
    "Luna",
    "Charlie",
    "Daisy",
    "Milo",
    "Coco",
    "Rocky",
    "Bailey",
    "Teddy",
    "Ollie",
    "Rosie",
    "Buddy",
    "Molly",
    "Archie",
    "Lola",
    "Cooper",
    "Ruby",
    "Winston",
    "Maple",
]


# --------------------------------------------------------------------------------------------------------------------
# fiscal calendar (retail 4-5-4, year starts on the Sunday nearest 1 February, named by its start year)
# --------------------------------------------------------------------------------------------------------------------
def fy_start(y: int) -> int:
    f = od(y, 2, 1)
    wd = f % 7  # 0 = Sunday
    return f - wd if wd <= 3 else f + (7 - wd)


def fiscal_periods(years) -> list[dict]:
    out = []
    for y in years:
        s, e = fy_start(y), fy_start(y + 1)
        weeks = (e - s) // 7
        pattern = [4, 5, 4] * 4
        if weeks == 53:
            pattern[-1] = 5  # the 53rd week goes to P12
        cur = s
        for i, w in enumerate(pattern):
            out.append(
                {"fy": y, "p": i + 1, "name": f"FY{y} P{i + 1}", "start": cur, "end": cur + 7 * w - 1, "weeks": w}
            )
            cur += 7 * w
        assert cur == e
    return out


PERIODS_ALL = fiscal_periods(range(2019, 2026))
PERIOD_STARTS = {p["start"] for p in PERIODS_ALL}
PERIODS = [p for p in PERIODS_ALL if p["fy"] >= 2023]
P_STARTS = np.array([p["start"] for p in PERIODS_ALL])


def period_of(days: np.ndarray) -> np.ndarray:
    idx = np.searchsorted(P_STARTS, days, side="right") - 1
    names = np.array([p["name"] for p in PERIODS_ALL])
    return names[idx]


# --------------------------------------------------------------------------------------------------------------------
# time formatting (store time zone America/New_York; DST rule of the US since 2007)
# --------------------------------------------------------------------------------------------------------------------
def _dst_mask(ts_local: np.ndarray) -> np.ndarray:
    m = np.zeros(len(ts_local), dtype=bool)
    for y in range(2019, 2028):
        mar1, nov1 = od(y, 3, 1), od(y, 11, 1)
        start = (mar1 + (7 - mar1 % 7) % 7 + 7) * DAY + 2 * 3600
        end = (nov1 + (7 - nov1 % 7) % 7) * DAY + 2 * 3600
        m |= (ts_local >= start) & (ts_local < end)
    return m


def _iso(ts: np.ndarray) -> np.ndarray:
    ts = np.asarray(ts, dtype=np.int64)
    return np.datetime_as_string((ts - EPOCH * DAY).astype("datetime64[s]"), unit="s")


def fmt_recharge(ts) -> np.ndarray:
    ts = np.asarray(ts, dtype=np.int64)
    s = _iso(np.where(ts >= 0, ts, 0))
    off = np.where(_dst_mask(ts), "-04:00", "-05:00")
    r = np.char.add(s.astype("U19"), off)
    return np.where(ts >= 0, r, "")


def fmt_shopify(ts) -> np.ndarray:
    ts = np.asarray(ts, dtype=np.int64)
    s = np.char.replace(_iso(np.where(ts >= 0, ts, 0)).astype("U19"), "T", " ")
    off = np.where(_dst_mask(ts), " -0400", " -0500")
    return np.where(ts >= 0, np.char.add(s, off), "")


def fmt_utc(ts, suffix=" UTC") -> np.ndarray:
    ts = np.asarray(ts, dtype=np.int64)
    s = np.char.replace(_iso(ts).astype("U19"), "T", " ")
    return np.char.add(s, suffix)


def money(c) -> np.ndarray:
    """cents (int array) -> '12.34' strings."""
    c = np.asarray(c, dtype=np.int64)
    sign = np.where(c < 0, "-", "")
    a = np.abs(c)
    return np.char.add(
        np.char.add(np.char.add(sign, (a // 100).astype(str)), "."), np.char.zfill((a % 100).astype(str), 2)
    )


def price_c(sku: str, cur: str, day: int) -> int:
    return (NEW_PRICE_C if day >= PRICE_RISE_DAY else PRICE_C)[cur][sku]


def onetime_c(sku: str, cur: str, day: int) -> int:
    c = int(round(price_c(sku, cur, day) * 1.10))
    return (c // 100) * 100 + 99


def sku_title(sku: str) -> tuple[str, str]:
    if sku in TREATS:
        return TREATS[sku][0], TREATS[sku][1]
    r, s = sku.split("-")
    return RECIPES[r], SIZES[s][0]


def sku_lbs(sku: str) -> int:
    return SIZES[sku.split("-")[1]][1] if sku not in TREATS else 0


# --------------------------------------------------------------------------------------------------------------------
# FX: finance's daily file, business days only, quoted as units of foreign currency per 1 USD
# --------------------------------------------------------------------------------------------------------------------
FX_ANCHORS = {
    "CAD": [
        (SIM_START - 60, 1.33),
        (od(2023, 1, 29), 1.345),
        (od(2024, 2, 1), 1.35),
        (od(2024, 8, 1), 1.37),
        (od(2025, 1, 1), 1.44),
        (od(2025, 6, 1), 1.49),
        (od(2026, 2, 1), 1.52),
    ],
    "AUD": [
        (SIM_START - 60, 1.45),
        (od(2023, 1, 29), 1.44),
        (od(2024, 2, 1), 1.50),
        (od(2024, 8, 1), 1.51),
        (od(2025, 1, 1), 1.61),
        (od(2025, 6, 1), 1.67),
        (od(2026, 2, 1), 1.70),
    ],
}


def make_fx(seed: int) -> dict:
    rng = np.random.default_rng([seed, 11])
    days = np.arange(SIM_START - 60, SIM_END + 1)
    wd = days % 7
    hol = np.array([dt.date.fromordinal(int(d)).strftime("%m-%d") in ("01-01", "12-25") for d in days])
    bd = days[(wd != 0) & (wd != 6) & ~hol]
    fx = {"days": bd}
    for cur, anchors in FX_ANCHORS.items():
        x = np.array([a[0] for a in anchors], dtype=float)
        y = np.array([a[1] for a in anchors])
        base = np.interp(bd, x, y)
        e = rng.normal(0, 0.0035, len(bd))
        ar = np.zeros(len(bd))
        for i in range(1, len(bd)):
            ar[i] = 0.97 * ar[i - 1] + e[i]
        fx[cur] = np.round(base * np.exp(ar), 4)
    return fx


def fx_rate(fx: dict, cur: str, days) -> np.ndarray:
    days = np.asarray(days)
    if cur == "USD":
        return np.ones(len(days))
    i = np.searchsorted(fx["days"], days, side="right") - 1
    return fx[cur][i]


# --------------------------------------------------------------------------------------------------------------------
# customers, pets, subscriptions, charges (Recharge)
# --------------------------------------------------------------------------------------------------------------------
def _acq_rates(days: np.ndarray, country: str) -> np.ndarray:
    base = {"US": 1.30, "CA": 0.60, "AU": 0.37}[country]
    t = (days - SIM_START) / 365.25
    m = 1 + 1.3 * np.exp(-t / 0.9)
    after = np.maximum(0, (days - od(2024, 2, 4)) / 365.25)
    m = m * ((1 + 0.03 * after) if country == "US" else (1 - 0.06 * after))
    months = np.array([dt.date.fromordinal(int(d)).month for d in days])
    m = m * np.where(months == 1, 1.2, 1.0)
    return base * m


def make_customers(seed: int, rng: np.random.Generator, rp: random.Random):
    days = np.arange(SIM_START, SIM_END + 1)
    custs = []
    for country in COUNTRIES:
        n = rng.poisson(_acq_rates(days, country))
        for d, k in zip(days[n > 0], n[n > 0]):
            for _ in range(int(k)):
                custs.append([int(d), country])
    custs.sort(key=lambda r: (r[0], r[1]))
    out = []
    seen: set = set()
    cid = 81_000_000
    for i, (d, country) in enumerate(custs):
        cid += rp.randint(3, 40)
        fn, ln = rp.choice(FIRST), rp.choice(LAST)
        email = f"{fn}.{ln}{rp.randint(1, 999)}@{rp.choice(DOMAINS[country])}"
        while email in seen:
            email = f"{fn}.{ln}{rp.randint(1, 999)}@{rp.choice(DOMAINS[country])}"
        seen.add(email)
        risky = rp.random() < 0.10
        err = ERRORS[min(3, int(np.searchsorted(np.cumsum([e[2] for e in ERRORS]), rp.random())))]
        ct = rp.random() < CAMP_RATE
        out.append(
            {
                "i": i,
                "id": cid,
                "country": country,
                "day": d,
                "ts": d * DAY + rp.randint(7 * 3600, 19 * 3600 - 1),
                "first": fn.title(),
                "last": ln.title(),
                "email": email,
                "city": rp.choice(CITIES[country]),
                "pfail": 0.18 if risky else 0.028,
                "pretry": 0.35 if risky else 0.55,
                "err": err,
                "npets": 1 + int(np.searchsorted([0.72, 0.93], rp.random(), side="right")),
                "camp": ct,
                "camp_start": rp.randint(CAMP[0], CAMP[1]) * DAY + rp.randint(9 * 3600, 17 * 3600),
                "camp_until": rp.randint(CAMP[2], CAMP[3]) * DAY,
            }
        )
    return out


def make_subs(custs, rp: random.Random):
    subs, pets = [], []
    sid, pid = 150_000_000, 3_400_000
    for c in custs:
        for k in range(c["npets"]):
            sid += rp.randint(5, 60)
            pid += rp.randint(1, 9)
            u = rp.random()
            stage = "puppy" if u < 0.20 else ("adult" if u < 0.88 else "senior")
            breed = ["small", "medium", "large"][int(np.searchsorted([0.30, 0.70], rp.random(), side="right"))]
            created = c["ts"] + k * rp.randint(20, 240)
            cday = created // DAY
            if stage == "puppy":
                birth = cday - rp.randint(56, 112)
            elif stage == "adult":
                birth = cday - rp.randint(365, 7 * 365)
            else:
                birth = cday - rp.randint(8 * 365, 12 * 365)
            size = {"small": "04", "medium": "12", "large": "30"}[breed]
            recipe = "CHK" if rp.random() < 0.70 else "SAL"
            u2 = rp.random()
            cad = 2 if u2 < 0.08 else (4 if u2 < 0.80 else 6)
            s = {
                "i": len(subs),
                "id": sid,
                "cust": c["i"],
                "pet": pid,
                "stage": stage,
                "breed": breed,
                "created_ts": created,
                "created_day": cday,
                "birth": birth,
                "grad_day": birth + 365,
                "recipe": recipe,
                "size": size,
                "starter": breed != "small" and stage != "puppy" and rp.random() < 0.45,
                "u": rp.choice([2, 2, 3]),
                "u1": rp.randint(3, 6),
                "u2": rp.randint(8, 11),
                "cad": cad,
                "qty": 2 if (breed == "large" and rp.random() < 0.06) else 1,
                "welcome": rp.random() < 0.6,
                "tod": rp.randint(5 * 3600, 9 * 3600 - 1),
            }
            subs.append(s)
            pets.append(
                {
                    "pet_profile_id": pid,
                    "customer_id": c["id"],
                    "pet_name": rp.choice(PET_NAMES),
                    "breed_size": breed,
                    "birth_date": ds(birth),
                    "life_stage_at_signup": stage,
                    "created_ts": created - rp.randint(60, 900),
                }
            )
    return subs, pets


def sku_for(s: dict, box: int, day: int) -> str:
    if s["stage"] == "puppy":
        if day >= s["grad_day"]:
            return "CHK-" + s["size"]
        if box < s["u1"]:
            return "PUP-04"
        if s["breed"] == "large" and box >= s["u2"]:
            return "PUP-30"
        return "PUP-12"
    if s["starter"] and box < s["u"]:
        return s["recipe"] + "-04"
    return s["recipe"] + "-" + s["size"]


def _pick_reason(rp: random.Random) -> str:
    u, acc = rp.random(), 0.0
    for r, p in REASONS:
        acc += p
        if u < acc:
            return r
    return "Other"


def simulate_charges(subs, custs, fx, rp: random.Random):
    """One record per charge attempt (incl. simulated future rows after DATA_END)."""
    rec = []
    cf = []  # counterfactual revenue of the merchant-skipped AU charges: (day, country, usd)
    gk = 0
    recent_lo, recent_hi = RECENT_FROM * DAY, END_TS
    for s in subs:
        c = custs[s["cust"]]
        country = c["country"]
        cur = CUR[country]
        cadd = s["cad"] * 7
        sched = s["created_ts"]
        box = 0
        first = True
        s["pauses"] = []
        s["cancel_ts"] = None
        s["reason"] = ""
        while sched <= SIM_END_TS:
            day = sched // DAY
            if not first and c["camp"] and s["created_ts"] < c["camp_start"] <= sched < c["camp_until"]:
                s["pauses"].append((c["camp_start"], c["camp_until"]))
                sched = c["camp_until"] + s["tod"]
                continue
            sku = sku_for(s, box + 1, day)
            pc = price_c(sku, cur, day)
            sub_c = pc * s["qty"]
            code, rate = "", 0.0
            if first and s["welcome"]:
                code, rate = "WELCOME20", 0.20
            elif sku.startswith("PUP") and box + 1 >= 4 and s["created_day"] >= PUPPY_START:
                code, rate = "PUPPY15", 0.15
            disc_c = int(round(sub_c * rate))
            tax_c = int(round((sub_c - disc_c) * TAX[country]))
            tot_c = sub_c - disc_c + tax_c
            gk += 1
            base = [
                s["i"],
                s["cust"],
                "",
                "",
                sched,
                -1,
                1,
                "",
                "",
                -1,
                sku,
                s["qty"],
                pc,
                sub_c,
                disc_c,
                code,
                tax_c,
                tot_c,
                0,
                -1,
                gk,
                0,
                0,
            ]
            if first:
                r = list(base)
                r[2], r[3], r[5] = "CHECKOUT", "SUCCESS", sched
                rec.append(r)
                first = False
                t_ok = sched
                s["tod"] = s["tod"]
                sched = day * DAY + s["tod"]
            else:
                if country == "AU" and AU_OUT[0] <= day <= AU_OUT[1]:
                    r = list(base)
                    r[2], r[3], r[22] = "RECURRING", "SKIPPED", 1
                    rec.append(r)
                    cf.append((day, country, (sub_c - disc_c) / 100.0 / float(fx_rate(fx, cur, [day])[0])))
                    sched += cadd * DAY
                    continue
                if rp.random() < 0.04:
                    r = list(base)
                    r[2], r[3] = "RECURRING", "SKIPPED"
                    rec.append(r)
                    sched += cadd * DAY
                    continue
                pday = day + 1 if day in PERIOD_STARTS else day  # stocktake hold on the first day of a period
                t = pday * DAY + sched % DAY
                ok = False
                for att in range(1, 5):
                    if t // DAY == OUTAGE_DAY:
                        fail = rp.random() < 0.85
                        et, em = "processing_error", "Payment gateway timeout (processor unavailable)."
                    else:
                        fail = rp.random() < (c["pfail"] if att == 1 else 1 - c["pretry"])
                        et, em = c["err"][0], c["err"][1]
                    r = list(base)
                    r[2], r[5], r[6] = "RECURRING", t, att
                    if not fail:
                        r[3] = "SUCCESS"
                        rec.append(r)
                        ok = True
                        break
                    r[3], r[7], r[8] = "ERROR", et, em
                    if att < 4:
                        r[9] = (t // DAY + 3) * DAY + 9 * 3600
                    rec.append(r)
                    if att < 4:
                        t = (t // DAY + 3) * DAY + rp.randint(5 * 3600, 9 * 3600)
                if not ok:
                    if not (recent_lo <= t <= recent_hi):
                        s["cancel_ts"] = t + 3600
                        s["reason"] = "Max retries reached"
                        break
                    sched += cadd * DAY
                    continue
                t_ok = t
            box += 1
            rr = rec[-1]
            rr[21] = box
            pr = (0.07 if box == 1 else 0.025 if box == 2 else 0.012) * (2.6 if sku == "SAL-30" else 1.0)
            full_first = False
            if rp.random() < pr:
                full = rp.random() < (0.7 if box == 1 else 0.4)
                rr[18] = tot_c if full else int(round(tot_c * rp.choice([0.25, 0.5])))
                rr[19] = t_ok + int(rp.uniform(2, 21) * DAY)
                full_first = full and box == 1
            h = 0.55 if full_first else (HAZ[box - 1] if box <= 4 else HAZ_LATE)
            if rp.random() < h:
                ct = t_ok + int(rp.uniform(1, cadd - 1) * DAY)
                if not (recent_lo <= ct <= recent_hi):
                    s["cancel_ts"] = ct
                    s["reason"] = "Dog didn't like the food" if full_first else _pick_reason(rp)
                    break
            if rp.random() < 0.025:
                ps = t_ok + int(rp.uniform(1, cadd - 1) * DAY)
                pu = (ps // DAY + 7 * rp.choice([4, 6, 8, 12])) * DAY
                s["pauses"].append((ps, pu))
                sched = pu + s["tod"]
                continue
            sched += cadd * DAY
    cols = [
        "sub",
        "cust",
        "type",
        "status",
        "sched",
        "proc",
        "att",
        "err_type",
        "err",
        "retry",
        "sku",
        "qty",
        "price_c",
        "sub_c",
        "disc_c",
        "code",
        "tax_c",
        "tot_c",
        "ref_c",
        "ref_ts",
        "gk",
        "box",
        "mskip",
    ]
    return pd.DataFrame(rec, columns=cols), cf


def plant_recent_cancels(subs, custs, ch: pd.DataFrame, rp: random.Random):
    """Cancel every subscription of exactly N_RECENT_CANCEL loyal customers within the last 45 days."""
    ev = np.where(ch["proc"] >= 0, ch["proc"], ch["sched"])
    ok = ch["status"].eq("SUCCESS").to_numpy()
    by_cust_subs: dict[int, list] = {}
    for s in subs:
        by_cust_subs.setdefault(s["cust"], []).append(s)
    succ = ch[ok & (ev >= START_TS) & (ev <= END_TS)]
    n_box = succ.groupby("cust").size()
    lo = RECENT_FROM * DAY
    okb = ok & (ev < lo)
    last_ok = pd.Series(ev[okb], index=ch.index[okb]).groupby(ch["cust"][okb]).max()
    cands = []
    for ci in sorted(by_cust_subs):
        ss = by_cust_subs[ci]
        if n_box.get(ci, 0) < 4:
            continue
        if any(s["cancel_ts"] is not None and s["cancel_ts"] <= END_TS for s in ss):
            continue
        if any(s["created_ts"] > (DATA_END - 150) * DAY for s in ss):
            continue
        if any(ps < END_TS and pu > lo - 60 * DAY for s in ss for ps, pu in s["pauses"]):
            continue
        lt = last_ok.get(ci, 0)
        if not (lo - 35 * DAY <= lt < lo):
            continue
        cands.append(ci)
    chosen = sorted(rp.sample(cands, N_RECENT_CANCEL))
    drop = np.zeros(len(ch), dtype=bool)
    cust_arr = ch["cust"].to_numpy()
    for ci in chosen:
        ct = rp.randint(lo + 8 * 3600, END_TS - 6 * 3600)
        reason = _pick_reason(rp)
        for s in by_cust_subs[ci]:
            s["cancel_ts"] = ct + rp.randint(0, 90)
            s["reason"] = reason
        drop |= (cust_arr == ci) & (ev >= ct)
    return ch[~drop].reset_index(drop=True), chosen


# --------------------------------------------------------------------------------------------------------------------
# Shopify orders (add-ons by subscribers, one-off orders by anyone)
# --------------------------------------------------------------------------------------------------------------------
def _bf_days():
    out = set()
    for y in (2023, 2024, 2025):
        nov1 = od(y, 11, 1)
        thu = nov1 + (4 - nov1 % 7) % 7 + 21  # 4th Thursday
        out.update(range(thu + 1, thu + 5))  # Black Friday .. Cyber Monday
    return out


BF_DAYS = _bf_days()


def make_shopify(seed, custs, subs, rng: np.random.Generator, rp: random.Random):
    # active span per subscriber customer
    span = {}
    for s in subs:
        a = s["created_ts"]
        b = s["cancel_ts"] if s["cancel_ts"] is not None else SIM_END_TS
        lo, hi = span.get(s["cust"], (a, b))
        span[s["cust"]] = (min(lo, a), max(hi, b))
    orders = []
    addon_rate = {"US": 1 / 165, "CA": 1 / 180, "AU": 1 / 190}
    MAXM = 2.0
    for ci in sorted(span):
        c = custs[ci]
        a, b = span[ci]
        a, b = max(a, START_TS), min(b, SIM_END_TS)
        if b <= a:
            continue
        n = rng.poisson(addon_rate[c["country"]] * MAXM * (b - a) / DAY)
        if n == 0:
            continue
        ts = np.sort(rng.integers(a, b, n))
        for t in ts:
            d = int(t // DAY)
            m = 1.0
            if c["country"] == "US" and TREATS_PROMO[0] <= d <= TREATS_PROMO[1]:
                m = 1.8
            if d in BF_DAYS:
                m = 2.0
            if rp.random() < m / MAXM:
                tt = d * DAY + rp.randint(6 * 3600, 19 * 3600 - 1)
                if tt <= a:
                    tt = a + rp.randint(600, 3600)
                orders.append(
                    {
                        "ts": tt,
                        "cust": ci,
                        "country": c["country"],
                        "email": c["email"],
                        "kind": "addon",
                        "name": f"{c['first']} {c['last']}",
                        "city": c["city"],
                    }
                )
    # one-off buyers: a pool of non-subscriber emails
    days = np.arange(DATA_START, SIM_END + 1)
    pool = {k: [] for k in COUNTRIES}
    for country, lam in (("US", 1.7), ("CA", 0.65), ("AU", 0.45)):
        mult = np.array([2.5 if d in BF_DAYS else 1.0 for d in days])
        n = rng.poisson(lam * mult)
        for d, k in zip(days[n > 0], n[n > 0]):
            for _ in range(int(k)):
                if pool[country] and rp.random() < 0.25:
                    who = rp.choice(pool[country])
                else:
                    fn, ln = rp.choice(FIRST), rp.choice(LAST)
                    who = (
                        f"{fn}.{ln}{rp.randint(1000, 9999)}@{rp.choice(DOMAINS[country])}",
                        f"{fn.title()} {ln.title()}",
                        rp.choice(CITIES[country]),
                    )
                    pool[country].append(who)
                orders.append(
                    {
                        "ts": int(d) * DAY + rp.randint(6 * 3600, 19 * 3600 - 1),
                        "cust": -1,
                        "country": country,
                        "email": who[0],
                        "kind": "oneoff",
                        "name": who[1],
                        "city": who[2],
                    }
                )
    orders.sort(key=lambda o: (o["ts"], o["email"]))
    lines = []
    num = 24_816 + rp.randint(0, 500)
    oid = 5_012_000_000_000 + rp.randint(0, 10_000_000)
    for o in orders:
        num += 1
        oid += rp.randint(1_000, 90_000)
        d = o["ts"] // DAY
        cur = CUR[o["country"]]
        items = []
        if o["kind"] == "oneoff":
            u = rp.random()
            bag = "CHK-04" if u < 0.5 else ("CHK-12" if u < 0.75 else ("SAL-04" if u < 0.9 else "SAL-12"))
            items.append((bag, 1, onetime_c(bag, cur, d)))
            k = int(np.searchsorted([0.5, 0.85], rp.random(), side="right"))
        else:
            k = 1 + int(np.searchsorted([0.6, 0.9], rp.random(), side="right"))
        for tsku in rp.sample(sorted(TREATS), k):
            items.append((tsku, 1 if rp.random() < 0.7 else 2, TREATS[tsku][2][cur]))
        code, disc_lines = "", [0] * len(items)
        has_treat = any(i[0] in TREATS for i in items)
        if o["country"] == "US" and TREATS_PROMO[0] <= d <= TREATS_PROMO[1] and has_treat and rp.random() < 0.9:
            code = "TREATS20"
            disc_lines = [int(round(q * p * 0.20)) if s in TREATS else 0 for s, q, p in items]
        elif d in BF_DAYS and rp.random() < 0.8:
            code = "BFCM25"
            disc_lines = [int(round(q * p * 0.25)) for s, q, p in items]
        elif o["kind"] == "oneoff" and rp.random() < 0.3:
            code = "WELCOME10"
            disc_lines = [int(round(q * p * 0.10)) for s, q, p in items]
        gross = sum(q * p for s, q, p in items)
        disc = sum(disc_lines)
        subtotal = gross - disc
        thr = {"US": 4900, "CA": 6500, "AU": 7000}[o["country"]]
        ship = 0 if subtotal >= thr else {"US": 795, "CA": 995, "AU": 1195}[o["country"]]
        tax = int(round((subtotal + ship) * TAX[o["country"]]))
        total = subtotal + ship + tax
        u = rp.random()
        fin = "paid" if u < 0.955 else ("refunded" if u < 0.975 else "partially_refunded")
        refunded = total if fin == "refunded" else (int(round(total * 0.3)) if fin == "partially_refunded" else 0)
        for j, (sku, q, p) in enumerate(items):
            lines.append(
                {
                    "num": num,
                    "oid": oid,
                    "ts": o["ts"],
                    "first": j == 0,
                    "email": o["email"],
                    "country": o["country"],
                    "cur": cur,
                    "subtotal": subtotal,
                    "ship": ship,
                    "tax": tax,
                    "total": total,
                    "code": code,
                    "disc": disc,
                    "fin": fin,
                    "refunded": refunded,
                    "sku": sku,
                    "qty": q,
                    "price": p,
                    "ldisc": disc_lines[j],
                    "kind": o["kind"],
                    "bname": o["name"],
                    "city": o["city"],
                    "cust": o["cust"],
                    "accepts": "yes" if rp.random() < 0.6 else "no",
                }
            )
    return pd.DataFrame(lines)


SHOPIFY_COLS = [
    "Name",
    "Email",
    "Financial Status",
    "Paid at",
    "Fulfillment Status",
    "Fulfilled at",
    "Accepts Marketing",
    "Currency",
    "Subtotal",
    "Shipping",
    "Taxes",
    "Total",
    "Discount Code",
    "Discount Amount",
    "Shipping Method",
    "Created at",
    "Lineitem quantity",
    "Lineitem name",
    "Lineitem price",
    "Lineitem compare at price",
    "Lineitem sku",
    "Lineitem requires shipping",
    "Lineitem taxable",
    "Lineitem fulfillment status",
    "Billing Name",
    "Billing City",
    "Billing Province",
    "Billing Country",
    "Shipping Name",
    "Shipping City",
    "Shipping Province",
    "Shipping Country",
    "Cancelled at",
    "Payment Method",
    "Refunded Amount",
    "Vendor",
    "Id",
    "Tags",
    "Source",
    "Lineitem discount",
]


def shopify_frame(L: pd.DataFrame) -> pd.DataFrame:
    f = L["first"].to_numpy()

    def first_only(vals):
        vals = np.asarray(vals).astype(object)
        return np.where(f, vals, "")

    ts = L["ts"].to_numpy()
    names = np.array([sku_title(s)[0] + " - " + sku_title(s)[1] for s in L["sku"]], dtype=object)
    out = pd.DataFrame(
        {
            "Name": np.char.add("#", L["num"].astype(str).to_numpy().astype("U12")),
            "Email": first_only(L["email"]),
            "Financial Status": first_only(L["fin"]),
            "Paid at": first_only(fmt_shopify(ts + 5)),
            "Fulfillment Status": first_only(np.where(L["fin"] == "refunded", "unfulfilled", "fulfilled")),
            "Fulfilled at": first_only(np.where(L["fin"] == "refunded", "", fmt_shopify(ts + 26 * 3600))),
            "Accepts Marketing": first_only(L["accepts"]),
            "Currency": first_only(L["cur"]),
            "Subtotal": first_only(money(L["subtotal"])),
            "Shipping": first_only(money(L["ship"])),
            "Taxes": first_only(money(L["tax"])),
            "Total": first_only(money(L["total"])),
            "Discount Code": first_only(L["code"]),
            "Discount Amount": first_only(money(L["disc"])),
            "Shipping Method": first_only(np.where(L["ship"] == 0, "Free Shipping", "Standard Shipping")),
            "Created at": first_only(fmt_shopify(ts)),
            "Lineitem quantity": L["qty"].astype(str).to_numpy(),
            "Lineitem name": names,
            "Lineitem price": money(L["price"]),
            "Lineitem compare at price": "",
            "Lineitem sku": L["sku"].to_numpy(),
            "Lineitem requires shipping": "true",
            "Lineitem taxable": "true",
            "Lineitem fulfillment status": np.where(L["fin"] == "refunded", "pending", "fulfilled"),
            "Billing Name": first_only(L["bname"]),
            "Billing City": first_only([c[0] for c in L["city"]]),
            "Billing Province": first_only([c[1] for c in L["city"]]),
            "Billing Country": first_only(L["country"]),
            "Shipping Name": first_only(L["bname"]),
            "Shipping City": first_only([c[0] for c in L["city"]]),
            "Shipping Province": first_only([c[1] for c in L["city"]]),
            "Shipping Country": first_only(L["country"]),
            "Cancelled at": "",
            "Payment Method": first_only(np.where(L["kind"] == "addon", "Shopify Payments", "Shopify Payments")),
            "Refunded Amount": first_only(money(L["refunded"])),
            "Vendor": COMPANY,
            "Id": first_only(L["oid"].astype(str)),
            "Tags": first_only(np.where(L["kind"] == "addon", "Subscriber, Subscription Add-on", "")),
            "Source": first_only(np.where(L["kind"] == "addon", "294517", "web")),
            "Lineitem discount": money(L["ldisc"]),
        }
    )
    return out[SHOPIFY_COLS]


# --------------------------------------------------------------------------------------------------------------------
# Amazon settlement report (flat file V2 layout, one settlement after another, US marketplace, FBA)
# --------------------------------------------------------------------------------------------------------------------
AMZ_COLS = [
    "settlement-id",
    "settlement-start-date",
    "settlement-end-date",
    "deposit-date",
    "total-amount",
    "currency",
    "transaction-type",
    "order-id",
    "merchant-order-id",
    "adjustment-id",
    "shipment-id",
    "marketplace-name",
    "amount-type",
    "amount-description",
    "amount",
    "fulfillment-id",
    "posted-date",
    "posted-date-time",
    "order-item-code",
    "merchant-order-item-id",
    "merchant-adjustment-item-id",
    "sku",
    "quantity-purchased",
    "promotion-id",
]


def make_amazon(rng: np.random.Generator, rp: random.Random):
    # 14-day settlement windows aligned so that one ends exactly on DATA_END
    starts = []
    s = DATA_END + 1 - 14
    while s >= od(2024, 3, 1):
        starts.append(s)
        s -= 14
    starts = sorted(starts)
    launch = starts[0]
    s = DATA_END + 1
    while s <= SIM_END:
        starts.append(s)
        s += 14
    rows = []  # dict rows with ts_utc
    prime = set(range(od(2024, 7, 16), od(2024, 7, 18))) | set(range(od(2025, 7, 8), od(2025, 7, 12)))
    for d in range(launch, SIM_END + 1):
        lam = 5.5 * (1 + 0.25 * (d - launch) / 365.0)
        if d in prime:
            lam *= 3.0
        elif d in BF_DAYS:
            lam *= 2.0
        for _ in range(int(rng.poisson(lam))):
            ts = d * DAY + rp.randint(0, DAY - 1)
            q = 2 if rp.random() < 0.08 else 1
            order_id = f"11{rp.randint(1, 4)}-{rp.randint(1000000, 9999999)}-{rp.randint(1000000, 9999999)}"
            item = str(rp.randint(10**13, 10**14 - 1))
            ship = f"D{rp.randint(10**8, 10**9 - 1)}"
            princ = round(AMZ_PRICE * q, 2)
            promo, pid = 0.0, ""
            if d in prime and rp.random() < 0.7:
                promo, pid = -12.00 * q, "PrimeDay Coupon 12OFF"
            elif rp.random() < 0.30:
                promo, pid = -round(0.05 * princ, 2), "Subscribe and Save 5%"
            tax = round(princ * rp.choice([0.0, 0.05, 0.0625, 0.07, 0.0825]), 2)
            comm = -round(AMZ_REFERRAL * (princ + promo), 2)
            fba = -round((AMZ_FBA[1] if d >= AMZ_FEE_CHANGE else AMZ_FBA[0]) * q, 2)
            base = {
                "transaction-type": "Order",
                "order-id": order_id,
                "shipment-id": ship,
                "fulfillment-id": "AFN",
                "order-item-code": item,
                "sku": "CHK-30",
                "quantity-purchased": str(q),
                "ts": ts,
                "marketplace-name": "Amazon.com",
            }
            rows.append({**base, "amount-type": "ItemPrice", "amount-description": "Principal", "amount": princ})
            if tax:
                rows.append({**base, "amount-type": "ItemPrice", "amount-description": "Tax", "amount": tax})
                rows.append(
                    {
                        **base,
                        "amount-type": "ItemWithheldTax",
                        "amount-description": "MarketplaceFacilitatorTax-Principal",
                        "amount": -tax,
                    }
                )
            if promo:
                rows.append(
                    {
                        **base,
                        "amount-type": "Promotion",
                        "amount-description": "Principal",
                        "amount": promo,
                        "promotion-id": pid,
                    }
                )
            rows.append({**base, "amount-type": "ItemFees", "amount-description": "Commission", "amount": comm})
            rows.append(
                {**base, "amount-type": "ItemFees", "amount-description": "FBAPerUnitFulfillmentFee", "amount": fba}
            )
            if rp.random() < 0.04:
                rts = ts + rp.randint(5 * DAY, 35 * DAY)
                adj = str(rp.randint(10**13, 10**14 - 1))
                rb = {
                    "transaction-type": "Refund",
                    "order-id": order_id,
                    "adjustment-id": adj,
                    "fulfillment-id": "AFN",
                    "order-item-code": item,
                    "merchant-adjustment-item-id": "",
                    "sku": "CHK-30",
                    "quantity-purchased": "",
                    "ts": rts,
                    "marketplace-name": "Amazon.com",
                }
                rows.append({**rb, "amount-type": "ItemPrice", "amount-description": "Principal", "amount": -princ})
                if tax:
                    rows.append({**rb, "amount-type": "ItemPrice", "amount-description": "Tax", "amount": -tax})
                    rows.append(
                        {
                            **rb,
                            "amount-type": "ItemWithheldTax",
                            "amount-description": "MarketplaceFacilitatorTax-Principal",
                            "amount": tax,
                        }
                    )
                if promo:
                    rows.append(
                        {
                            **rb,
                            "amount-type": "Promotion",
                            "amount-description": "Principal",
                            "amount": -promo,
                            "promotion-id": pid,
                        }
                    )
                rows.append({**rb, "amount-type": "ItemFees", "amount-description": "Commission", "amount": -comm})
                rows.append(
                    {
                        **rb,
                        "amount-type": "ItemFees",
                        "amount-description": "RefundCommission",
                        "amount": -round(min(5.0, 0.20 * -comm), 2),
                    }
                )
    # account-level fees (no sku): monthly storage and the Professional selling plan
    d = launch
    while d <= SIM_END:
        dd = dt.date.fromordinal(d)
        if dd.day == 8:
            rows.append(
                {
                    "transaction-type": "other-transaction",
                    "amount-type": "other-transaction",
                    "amount-description": "Storage Fee",
                    "amount": -round(rp.uniform(140, 320), 2),
                    "ts": d * DAY + 3 * 3600,
                    "marketplace-name": "",
                }
            )
        if dd.day == 20:
            rows.append(
                {
                    "transaction-type": "other-transaction",
                    "amount-type": "other-transaction",
                    "amount-description": "Subscription Fee",
                    "amount": -39.99,
                    "ts": d * DAY + 4 * 3600,
                    "marketplace-name": "",
                }
            )
        d += 1
    A = pd.DataFrame(rows)
    A["day"] = A["ts"] // DAY
    sidx = np.searchsorted(np.array(starts), A["day"].to_numpy(), side="right") - 1
    A["sidx"] = sidx
    A = A.sort_values(["sidx", "ts", "order-id", "transaction-type"], kind="stable").reset_index(drop=True)
    return A, starts


def amazon_frame(A: pd.DataFrame, starts, rp: random.Random) -> pd.DataFrame:
    """Settlements closed by DATA_END, each headed by its summary row (the V2 flat-file layout)."""
    sids, keep = [], []
    sid = 10_850_000_000 + rp.randint(0, 10_000_000)
    for k, st in enumerate(starts):
        sid += rp.randint(200_000, 900_000)
        sids.append(str(sid))
        keep.append(st + 14 <= DATA_END + 1)
    sids = np.array(sids, dtype=object)
    keep = np.array(keep)
    T = A[keep[A["sidx"].to_numpy()]]
    tstr = fmt_utc(T["ts"].to_numpy())
    rec = pd.DataFrame({c: (T[c].fillna("").astype(str).to_numpy() if c in T.columns else "") for c in AMZ_COLS})
    rec["settlement-id"] = sids[T["sidx"].to_numpy()]
    rec["amount"] = [f"{x:.2f}" for x in T["amount"]]
    rec["posted-date"] = np.array([x[:10] for x in tstr], dtype=object)
    rec["posted-date-time"] = tstr
    rec["_k"] = T["sidx"].to_numpy() * 2 + 1
    rec["_o"] = np.arange(len(rec))
    tot = T.groupby("sidx")["amount"].sum()
    ks = [k for k in range(len(starts)) if keep[k]]
    st_arr = np.array([starts[k] for k in ks], dtype=np.int64)
    head = pd.DataFrame({c: "" for c in AMZ_COLS}, index=range(len(ks)))
    head["settlement-id"] = sids[ks]
    head["settlement-start-date"] = fmt_utc(st_arr * DAY + 7 * 3600)
    head["settlement-end-date"] = fmt_utc((st_arr + 14) * DAY + 7 * 3600)
    head["deposit-date"] = fmt_utc((st_arr + 16) * DAY + 7 * 3600 + 1234)
    head["total-amount"] = [f"{round(float(tot.get(k, 0.0)), 2):.2f}" for k in ks]
    head["currency"] = "USD"
    head["_k"] = np.array(ks) * 2
    head["_o"] = 0
    out = pd.concat([head, rec], ignore_index=True).sort_values(["_k", "_o"], kind="stable")
    return out[AMZ_COLS].reset_index(drop=True)


# --------------------------------------------------------------------------------------------------------------------
# A/B tests (growth team's assignment table: one row per pet profile, randomised by account)
# --------------------------------------------------------------------------------------------------------------------
def _p2(z: float) -> float:
    return math.erfc(abs(z) / math.sqrt(2))


def srm_p(n_t: int, n: int) -> float:
    return _p2((n_t - n / 2) / math.sqrt(n / 4)) if n else 1.0


def ab_stats(acc: np.ndarray, arm: np.ndarray, y: np.ndarray) -> dict:
    """acc: account id per pet row; arm: 1 = treatment per pet row; y: 0/1 outcome per pet row."""
    t, c = arm == 1, arm == 0
    n1, n0 = int(t.sum()), int(c.sum())
    p1, p0 = y[t].mean(), y[c].mean()
    pp = y.mean()
    z_pet = (p1 - p0) / math.sqrt(pp * (1 - pp) * (1 / n1 + 1 / n0))
    _, inv = np.unique(acc, return_inverse=True)
    Ysum = np.bincount(inv, weights=y)
    m = np.bincount(inv).astype(float)
    garm = np.bincount(inv, weights=arm) / m  # arm is constant within an account
    var, mean_acc, k_arm = {}, {}, {}
    for g in (0, 1):
        sel = garm == g
        Y, mm = Ysum[sel], m[sel]
        r = Y.sum() / mm.sum()
        k = int(sel.sum())
        var[g] = ((Y - r * mm) ** 2).sum() / (k * (k - 1)) / mm.mean() ** 2  # delta method (cluster-robust)
        am = Y / mm
        mean_acc[g] = (am.mean(), am.var(ddof=1) / k)
        k_arm[g] = k
    z_cl = (p1 - p0) / math.sqrt(var[0] + var[1])
    z_acc = (mean_acc[1][0] - mean_acc[0][0]) / math.sqrt(mean_acc[1][1] + mean_acc[0][1])
    return {
        "rate_t": float(p1),
        "rate_c": float(p0),
        "lift_pp": float(p1 - p0),
        "p_pet": _p2(z_pet),
        "p_cluster": _p2(z_cl),
        "p_account_means": _p2(z_acc),
        "accounts_t": k_arm[1],
        "accounts_c": k_arm[0],
        "pets_t": n1,
        "pets_c": n0,
    }


def make_ab(seed: int, rp: random.Random):
    rng = np.random.default_rng([seed, 31])
    # ---- test 1: onboarding_v2 (null effect, pets imbalanced by chance, accounts balanced) ----
    n_acc = 6000
    sizes = rng.choice([1, 2, 3, 4], size=n_acc, p=[0.45, 0.30, 0.13, 0.12])
    for _ in range(2000):
        arm = (rng.random(n_acc) < 0.5).astype(int)
        if srm_p(int(arm.sum()), n_acc) > 0.3:
            break
    N = int(sizes.sum())
    for _ in range(5000):
        pt = int(sizes[arm == 1].sum())
        if srm_p(pt, N) < 0.01:
            break
        big_arm = 1 if pt >= N / 2 else 0  # chance imbalance: large households drift into the fuller arm
        i_candidates = np.flatnonzero((arm != big_arm) & (sizes == 4))
        j_candidates = np.flatnonzero((arm == big_arm) & (sizes == 1))
        i, j = rng.choice(i_candidates), rng.choice(j_candidates)
        arm[i], arm[j] = big_arm, 1 - big_arm
    acc_of_pet = np.repeat(np.arange(n_acc), sizes)
    arm_pet = arm[acc_of_pet]
    for k in range(20000):
        r = np.random.default_rng([seed, 32, k])
        acc_y = r.random(n_acc) < 0.30
        shared = r.random(N) < 0.9
        indep = r.random(N) < 0.30
        y = np.where(shared, acc_y[acc_of_pet], indep).astype(int)
        st = ab_stats(acc_of_pet, arm_pet, y)
        if st["lift_pp"] > 0 and st["p_pet"] < 0.045 and st["p_cluster"] > 0.10 and st["p_account_means"] > 0.10:
            break
    else:
        raise RuntimeError("no null draw found")
    acc_ids = 7_000_000 + np.cumsum(rng.integers(1, 30, n_acc))
    pet_ids = 9_100_000 + np.cumsum(rng.integers(1, 12, N))
    a_day = rng.integers(od(2025, 4, 6), od(2025, 6, 29), n_acc)
    a_ts = a_day * DAY + rng.integers(12 * 3600, 27 * 3600, n_acc)  # UTC
    stages = np.array(["puppy", "adult", "senior"])[rng.choice(3, N, p=[0.2, 0.68, 0.12])]
    t1 = pd.DataFrame(
        {
            "test_name": "onboarding_v2",
            "account_id": acc_ids[acc_of_pet],
            "pet_profile_id": pet_ids,
            "variant": np.where(arm_pet == 1, "new_flow", "control"),
            "assigned_at": fmt_utc(a_ts[acc_of_pet] + rng.integers(0, 600, N), "Z"),
            "signup_platform": np.array(["web", "ios_app", "android_app"])[rng.choice(3, n_acc, p=[0.4, 0.3, 0.3])][
                acc_of_pet
            ],
            "pet_life_stage": stages,
            "converted": y,
            "_ts": a_ts[acc_of_pet],
        }
    )
    t1["assigned_at"] = np.char.replace(t1["assigned_at"].to_numpy().astype("U25"), " ", "T")
    # ---- test 2: pricing_page_v3 (real SRM at the account level: treatment lost android-app accounts) ----
    n2 = 3200
    sizes2 = rng.choice([1, 2, 3, 4], size=n2, p=[0.45, 0.30, 0.13, 0.12])
    plat = rng.choice(3, n2, p=[0.4, 0.3, 0.3])  # 0 web 1 ios 2 android
    arm2 = (rng.random(n2) < 0.5).astype(int)
    lost = (arm2 == 1) & (plat == 2) & (rng.random(n2) < 0.45)  # redirect bug: never logged
    keep = ~lost
    sizes2, plat, arm2 = sizes2[keep], plat[keep], arm2[keep]
    n2k = len(sizes2)
    acc2 = np.repeat(np.arange(n2k), sizes2)
    N2 = len(acc2)
    prop = np.array([0.32, 0.30, 0.18])[plat]
    acc_y2 = rng.random(n2k) < prop
    y2 = np.where(rng.random(N2) < 0.9, acc_y2[acc2], rng.random(N2) < prop[acc2]).astype(int)
    acc_ids2 = acc_ids[-1] + 5000 + np.cumsum(rng.integers(1, 30, n2k))
    pet_ids2 = pet_ids[-1] + 5000 + np.cumsum(rng.integers(1, 12, N2))
    a_ts2 = rng.integers(od(2025, 8, 3), od(2025, 9, 28), n2k) * DAY + rng.integers(12 * 3600, 27 * 3600, n2k)
    t2 = pd.DataFrame(
        {
            "test_name": "pricing_page_v3",
            "account_id": acc_ids2[acc2],
            "pet_profile_id": pet_ids2,
            "variant": np.where(arm2[acc2] == 1, "variant_b", "control"),
            "assigned_at": fmt_utc(a_ts2[acc2] + rng.integers(0, 600, N2), "Z"),
            "signup_platform": np.array(["web", "ios_app", "android_app"])[plat][acc2],
            "pet_life_stage": np.array(["puppy", "adult", "senior"])[rng.choice(3, N2, p=[0.2, 0.68, 0.12])],
            "converted": y2,
            "_ts": a_ts2[acc2],
        }
    )
    t2["assigned_at"] = np.char.replace(t2["assigned_at"].to_numpy().astype("U25"), " ", "T")
    ab = pd.concat([t1, t2], ignore_index=True).sort_values(["_ts", "account_id", "pet_profile_id"], kind="stable")
    return ab.drop(columns="_ts").reset_index(drop=True)


# --------------------------------------------------------------------------------------------------------------------
# frames as written (all text)
# --------------------------------------------------------------------------------------------------------------------
CHARGE_COLS = [
    "charge_id",
    "type",
    "status",
    "customer_id",
    "email",
    "subscription_id",
    "scheduled_at",
    "processed_at",
    "currency",
    "subtotal_price",
    "total_discounts",
    "discount_codes",
    "total_tax",
    "total_price",
    "total_refunds",
    "refunded_at",
    "shipping_country",
    "line_item_sku",
    "line_item_title",
    "line_item_variant_title",
    "line_item_quantity",
    "line_item_price",
    "error_type",
    "error",
    "number_times_tried",
    "retry_date",
]


def charges_frame(ch: pd.DataFrame, subs, custs) -> pd.DataFrame:
    sub_id = np.array([s["id"] for s in subs])[ch["sub"].to_numpy()]
    cust = ch["cust"].to_numpy()
    cid = np.array([c["id"] for c in custs])[cust]
    email = np.array([c["email"] for c in custs], dtype=object)[cust]
    country = np.array([c["country"] for c in custs], dtype=object)[cust]
    cur = np.array([CUR[x] for x in country], dtype=object)
    refunded = (
        (ch["ref_ts"].to_numpy() >= 0) & (ch["ref_ts"].to_numpy() <= END_TS) & ch["status"].eq("SUCCESS").to_numpy()
    )
    full = ch["ref_c"].to_numpy() == ch["tot_c"].to_numpy()
    status = np.where(refunded, np.where(full, "REFUNDED", "PARTIALLY_REFUNDED"), ch["status"].to_numpy())
    titles = {k: sku_title(k) for k in PRICE_C["USD"]}
    skus = ch["sku"].to_numpy()
    att = np.where(ch["status"].eq("SKIPPED"), 0, ch["att"].to_numpy())
    return pd.DataFrame(
        {
            "charge_id": ch["charge_id"].astype(str).to_numpy(),
            "type": ch["type"].to_numpy(),
            "status": status,
            "customer_id": cid.astype(str),
            "email": email,
            "subscription_id": sub_id.astype(str),
            "scheduled_at": fmt_recharge(ch["sched"]),
            "processed_at": fmt_recharge(ch["proc"]),
            "currency": cur,
            "subtotal_price": money(ch["sub_c"]),
            "total_discounts": money(ch["disc_c"]),
            "discount_codes": ch["code"].to_numpy(),
            "total_tax": money(ch["tax_c"]),
            "total_price": money(ch["tot_c"]),
            "total_refunds": money(np.where(refunded, ch["ref_c"], 0)),
            "refunded_at": fmt_recharge(np.where(refunded, ch["ref_ts"], -1)),
            "shipping_country": country,
            "line_item_sku": skus,
            "line_item_title": [titles[k][0] for k in skus],
            "line_item_variant_title": [titles[k][1] for k in skus],
            "line_item_quantity": ch["qty"].astype(str).to_numpy(),
            "line_item_price": money(ch["price_c"]),
            "error_type": ch["err_type"].to_numpy(),
            "error": ch["err"].to_numpy(),
            "number_times_tried": att.astype(str),
            "retry_date": fmt_recharge(ch["retry"]),
        }
    )[CHARGE_COLS]


def _days(s: pd.Series) -> np.ndarray:
    """'YYYY-MM-DD...' -> date ordinal."""
    return (
        pd.to_datetime(s.str.slice(0, 10), format="%Y-%m-%d").to_numpy().astype("datetime64[D]").astype(np.int64)
        + EPOCH
    )


def _num(s: pd.Series) -> np.ndarray:
    return pd.to_numeric(s.astype(str).str.replace(r"[$,]", "", regex=True).replace("", np.nan)).to_numpy(float)


def _fx_lookup(fxdf: pd.DataFrame):
    tab = {}
    for cur, g in fxdf.groupby("Quote"):
        d = _days(g["Date"])
        o = np.argsort(d, kind="stable")
        tab[cur] = (d[o], _num(g["Rate"])[o])

    def rate(cur: np.ndarray, day: np.ndarray) -> np.ndarray:
        out = np.ones(len(day))
        for c, (dd, rr) in tab.items():
            m = cur == c
            if m.any():
                out[m] = rr[np.searchsorted(dd, day[m], side="right") - 1]
        return out

    return rate


REV_STATUS = ["SUCCESS", "REFUNDED", "PARTIALLY_REFUNDED"]


def revenue_rows(charges: pd.DataFrame, shop: pd.DataFrame, amz: pd.DataFrame, fxdf: pd.DataFrame) -> pd.DataFrame:
    """Net sales in USD by local day and country, as plan.csv defines it (see truth business.plan_definition)."""
    rate = _fx_lookup(fxdf)
    c = charges.drop_duplicates()
    c = c[c["status"].isin(REV_STATUS)]
    d1 = _days(c["processed_at"])
    loc1 = _num(c["subtotal_price"]) - _num(c["total_discounts"])
    u1 = loc1 / rate(c["currency"].to_numpy(), d1)
    f = shop[shop["Financial Status"] != ""]
    d2 = _days(f["Created at"])
    u2 = _num(f["Subtotal"]) / rate(f["Currency"].to_numpy(), d2)
    a = amz[(amz["transaction-type"] == "Order") & (amz["amount-description"] == "Principal")]
    d3 = _days(a["posted-date"])
    u3 = _num(a["amount"])
    return pd.DataFrame(
        {
            "day": np.concatenate([d1, d2, d3]),
            "country": np.concatenate(
                [c["shipping_country"].to_numpy(), f["Shipping Country"].to_numpy(), np.full(len(a), "US")]
            ),
            "usd": np.concatenate([u1, u2, u3]),
            "stream": np.concatenate(
                [np.full(len(c), "recharge"), np.full(len(f), "shopify"), np.full(len(a), "amazon")]
            ),
        }
    )


def bags_rows(charges: pd.DataFrame, shop: pd.DataFrame, amz: pd.DataFrame) -> pd.DataFrame:
    """Bags of dry food shipped: Recharge charges (paid), Shopify bag lines, Amazon units."""
    c = charges.drop_duplicates()
    c = c[c["status"].isin(REV_STATUS)]
    name_day = {}
    f = shop[shop["Financial Status"] != ""]
    name_day = dict(zip(f["Name"], f["Created at"].str.slice(0, 10)))
    b = shop[~shop["Lineitem sku"].str.startswith("TRT")]
    a = amz[
        (amz["transaction-type"] == "Order")
        & (amz["amount-description"] == "Principal")
        & (amz["amount-type"] == "ItemPrice")
    ]
    return pd.DataFrame(
        {
            "day": np.concatenate([_days(c["processed_at"]), _days(b["Name"].map(name_day)), _days(a["posted-date"])]),
            "bags": np.concatenate(
                [_num(c["line_item_quantity"]), _num(b["Lineitem quantity"]), _num(a["quantity-purchased"])]
            ),
        }
    )


# --------------------------------------------------------------------------------------------------------------------
# generate
# --------------------------------------------------------------------------------------------------------------------
def _write_csv(df: pd.DataFrame, path: pathlib.Path, sep: str = ",") -> None:
    cols = [df[c].astype(object).where(df[c].notna(), "").astype(str).tolist() for c in df.columns]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, delimiter=sep, lineterminator="\n")
        w.writerow(list(df.columns))
        w.writerows(zip(*cols))


def generate(out: pathlib.Path, seed: int) -> dict:
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([seed, 1])
    rp = random.Random(seed * 7919 + 17)
    fx = make_fx(seed)
    custs = make_customers(seed, rng, rp)
    subs, pets = make_subs(custs, rp)
    ch, cf = simulate_charges(subs, custs, fx, rp)
    ch, planted_cust = plant_recent_cancels(subs, custs, ch, rp)

    # ---- charge ids: one id per scheduled charge (shared by its retry attempts), in time order
    ch["ev"] = np.where(ch["proc"] >= 0, ch["proc"], ch["sched"])
    first_ev = ch.groupby("gk")["sched"].transform("min")
    order = pd.DataFrame({"gk": ch["gk"], "fe": first_ev}).drop_duplicates("gk").sort_values(["fe", "gk"])
    ids = 612_000_000 + np.cumsum(rng.integers(1, 25, len(order)))
    ch["charge_id"] = ch["gk"].map(dict(zip(order["gk"], ids)))
    ch = ch.sort_values(["charge_id", "att"], kind="stable").reset_index(drop=True)
    written = (ch["ev"] >= START_TS) & (ch["ev"] <= END_TS)
    chw, chf = ch[written].reset_index(drop=True), ch[ch["ev"] > END_TS].reset_index(drop=True)

    # ---- data-quality faults in charges (planted)
    # refunds dated before the sale: 5 refunded charges get refunded_at before processed_at
    is_ref = (chw["ref_ts"] >= 0) & (chw["ref_ts"] <= END_TS) & (chw["ev"] > START_TS + 30 * DAY)
    rb_idx = sorted(rp.sample(list(np.flatnonzero(is_ref.to_numpy())), 5))
    for i in rb_idx:
        chw.loc[i, "ref_ts"] = chw.loc[i, "proc"] - rp.randint(1 * DAY, 9 * DAY)
    chf_frame = charges_frame(chf, subs, custs)
    C = charges_frame(chw, subs, custs)
    # currency contradicts country: 9 AU charges stamped USD (amounts still in AUD)
    okau = np.flatnonzero(
        (
            C["status"].eq("SUCCESS")
            & C["shipping_country"].eq("AU")
            & (chw["ev"] // DAY != DUP_DAY)
            & (chw["ev"] > START_TS + 60 * DAY)
        ).to_numpy()
    )
    cur_idx = sorted(rp.sample(list(okau), 9))
    C.loc[cur_idx, "currency"] = "USD"
    # a batch exported twice: the first-attempt successes of DUP_DAY processed before 07:30 local
    tod = chw["ev"] % DAY
    dup_mask = (chw["ev"] // DAY == DUP_DAY) & (chw["att"] == 1) & C["status"].eq("SUCCESS") & (tod < 7.5 * 3600)
    dup_idx = np.flatnonzero(dup_mask.to_numpy())
    pos = np.arange(len(C), dtype=float)
    dup_rows = C.iloc[dup_idx].copy()
    dup_pos = pd.Series(np.full(len(dup_idx), dup_idx.max() + 0.5), index=dup_rows.index)
    C = pd.concat([C.assign(_o=pos), dup_rows.assign(_o=dup_pos.to_numpy() + np.arange(len(dup_idx)) * 1e-4)])
    C = C.sort_values("_o", kind="stable").drop(columns="_o").reset_index(drop=True)

    # ---- subscription status at DATA_END
    sub_rows, cust_any = [], {}
    last_sku = ch[ch["ev"] <= END_TS].groupby("sub")["sku"].last()
    last_ev = ch[ch["ev"] <= END_TS].groupby("sub")["ev"].max()
    next_sched = ch[ch["sched"] > END_TS].groupby("sub")["sched"].min()
    for s in subs:
        c = custs[s["cust"]]
        if s["created_ts"] > END_TS:
            continue
        if s["cancel_ts"] is not None and s["cancel_ts"] < START_TS:
            continue
        status, paused_until, cancelled, nxt = "ACTIVE", "", -1, -1
        if s["cancel_ts"] is not None and s["cancel_ts"] <= END_TS:
            status, cancelled = "CANCELLED", s["cancel_ts"]
        else:
            for ps, pu in s["pauses"]:
                if ps <= END_TS < pu:
                    status, paused_until = "PAUSED", ds(pu // DAY)
                    nxt = pu + s["tod"]
            if status == "ACTIVE":
                nxt = int(next_sched.get(s["i"], -1))
        sku = last_sku.get(s["i"], sku_for(s, 1, s["created_day"]))
        upd = max(int(last_ev.get(s["i"], s["created_ts"])), cancelled)
        cust_any.setdefault(s["cust"], []).append(status)
        pt, vt = sku_title(sku)
        sub_rows.append(
            {
                "subscription_id": str(s["id"]),
                "customer_id": str(c["id"]),
                "customer_email": c["email"],
                "pet_profile_id": str(s["pet"]),
                "status": status,
                "product_title": pt,
                "variant_title": vt,
                "sku": sku,
                "price": money([price_c(sku, CUR[c["country"]], DATA_END)])[0],
                "currency": CUR[c["country"]],
                "quantity": str(s["qty"]),
                "order_interval_frequency": str(s["cad"]),
                "order_interval_unit": "week",
                "charge_interval_frequency": str(s["cad"]),
                "_c": s["created_ts"],
                "_u": upd,
                "_x": cancelled,
                "_n": nxt,
                "cancellation_reason": s["reason"] if status == "CANCELLED" else "",
                "paused_until": paused_until,
                "shipping_country": c["country"],
            }
        )
    S = pd.DataFrame(sub_rows)
    S["created_at"] = fmt_recharge(S["_c"])
    S["updated_at"] = fmt_recharge(S["_u"])
    S["cancelled_at"] = fmt_recharge(S["_x"])
    S["next_charge_scheduled_at"] = fmt_recharge(np.where(S["status"] == "CANCELLED", -1, S["_n"]))
    S = S[
        [
            "subscription_id",
            "customer_id",
            "customer_email",
            "pet_profile_id",
            "status",
            "product_title",
            "variant_title",
            "sku",
            "price",
            "currency",
            "quantity",
            "order_interval_frequency",
            "order_interval_unit",
            "charge_interval_frequency",
            "created_at",
            "updated_at",
            "cancelled_at",
            "cancellation_reason",
            "next_charge_scheduled_at",
            "paused_until",
            "shipping_country",
        ]
    ]

    # ---- customers.csv (Recharge customers export)
    first_proc = ch.groupby("cust")["ev"].min()
    crow = []
    for ci in sorted(cust_any):
        c = custs[ci]
        st = cust_any[ci]
        crow.append(
            {
                "customer_id": str(c["id"]),
                "email": c["email"],
                "first_name": c["first"],
                "last_name": c["last"],
                "_c": c["ts"] - 45,
                "billing_city": c["city"][0],
                "billing_province": c["city"][1],
                "billing_country": c["country"],
                "status": "ACTIVE" if any(x != "CANCELLED" for x in st) else "INACTIVE",
                "subscriptions_active_count": str(sum(x != "CANCELLED" for x in st)),
                "subscriptions_total_count": str(len(st)),
                "_f": int(first_proc.get(ci, -1)),
            }
        )
    CU = pd.DataFrame(crow)
    CU["created_at"] = fmt_recharge(CU["_c"])
    CU["first_charge_processed_at"] = fmt_recharge(CU["_f"])
    CU = CU[
        [
            "customer_id",
            "email",
            "first_name",
            "last_name",
            "created_at",
            "billing_city",
            "billing_province",
            "billing_country",
            "status",
            "subscriptions_active_count",
            "subscriptions_total_count",
            "first_charge_processed_at",
        ]
    ]

    # ---- pet profiles (company onboarding app, UTC timestamps in Postgres text style)
    written_pets = set(S["pet_profile_id"])
    P = pd.DataFrame([p for p in pets if str(p["pet_profile_id"]) in written_pets])
    pts = P["created_ts"].to_numpy()
    utc = pts + np.where(_dst_mask(pts), 4, 5) * 3600
    P = pd.DataFrame(
        {
            "pet_profile_id": P["pet_profile_id"].astype(str),
            "customer_id": P["customer_id"].astype(str),
            "pet_name": P["pet_name"],
            "species": "dog",
            "breed_size": P["breed_size"],
            "birth_date": P["birth_date"],
            "life_stage_at_signup": P["life_stage_at_signup"],
            "created_at": fmt_utc(utc, "+00"),
        }
    )

    # ---- Shopify
    L = make_shopify(seed, custs, subs, rng, rp)
    Lw = L[L["ts"] <= END_TS].reset_index(drop=True)
    Lf = L[L["ts"] > END_TS].reset_index(drop=True)
    # orders dated before the customer's signup (planted): 6 add-on orders back-dated
    cand = Lw[(Lw["first"]) & (Lw["kind"] == "addon")]
    cand = cand[
        [custs[ci]["ts"] >= od(2023, 6, 1) * DAY and custs[ci]["ts"] <= (DATA_END - 60) * DAY for ci in cand["cust"]]
    ]
    bs_nums = sorted(rp.sample(sorted(set(cand["num"])), 6))
    for n in bs_nums:
        ci = int(Lw.loc[Lw["num"] == n, "cust"].iloc[0])
        new_ts = (custs[ci]["ts"] // DAY - rp.randint(5, 40)) * DAY + rp.randint(8 * 3600, 18 * 3600)
        Lw.loc[Lw["num"] == n, "ts"] = new_ts
    Lw = Lw.sort_values(["num", "first"], ascending=[False, False], kind="stable").reset_index(drop=True)
    SH = shopify_frame(Lw)
    SHf = shopify_frame(Lf)

    # ---- Amazon
    A, starts = make_amazon(rng, rp)
    AZ = amazon_frame(A, starts, rp)
    Af = A[A["day"] > DATA_END]
    AZf = pd.DataFrame(
        {
            "transaction-type": Af["transaction-type"],
            "amount-description": Af["amount-description"],
            "amount-type": Af["amount-type"],
            "amount": [f"{a:.2f}" for a in Af["amount"]],
            "posted-date": [ds(d) for d in Af["day"]],
            "quantity-purchased": Af["quantity-purchased"].fillna(""),
        }
    )

    # ---- FX file
    fxrows = []
    for i, d in enumerate(fx["days"]):
        if DATA_START - 10 <= d <= DATA_END:
            for cur in ("AUD", "CAD"):
                fxrows.append({"Date": ds(d), "Base": "USD", "Quote": cur, "Rate": f"{fx[cur][i]:.4f}"})
    FX = pd.DataFrame(fxrows)
    FXall = pd.DataFrame(
        [
            {"Date": ds(d), "Base": "USD", "Quote": cur, "Rate": f"{fx[cur][i]:.4f}"}
            for i, d in enumerate(fx["days"])
            if d >= DATA_START - 10
            for cur in ("AUD", "CAD")
        ]
    )

    # ---- plan.csv: rolling forecast = (actual + unplanned AU outage loss) x 1.03 x small noise, per period x country
    rev = revenue_rows(pd.concat([C, chf_frame]), pd.concat([SH, SHf]), pd.concat([AZ, AZf]), FXall)
    rev["period"] = period_of(rev["day"].to_numpy())
    cell = rev.groupby(["period", "country"])["usd"].sum()
    cfs = pd.DataFrame(cf, columns=["day", "country", "usd"])
    cfs["period"] = period_of(cfs["day"].to_numpy())
    cfcell = cfs.groupby(["period", "country"])["usd"].sum()
    prow = []
    for p in PERIODS:
        if p["fy"] < 2024:
            continue
        for country in COUNTRIES:
            base = float(cell.get((p["name"], country), 0.0)) + float(cfcell.get((p["name"], country), 0.0))
            val = base * PLAN_STRETCH * math.exp(rng.normal(0, 0.008))
            prow.append(
                {
                    "Fiscal Year": f"FY{p['fy']}",
                    "Period": f"P{p['p']}",
                    "Country": country,
                    "Plan Revenue (USD)": f"${int(round(val, -2)):,}",
                }
            )
    PL = pd.DataFrame(prow)

    # ---- product costs
    PC = pd.DataFrame(
        [
            {
                "SKU": k,
                "Product": sku_title(k)[0],
                "Variant": sku_title(k)[1],
                "Unit COGS (USD)": f"{v:.2f}",
                "Effective From": "2023-01-29",
            }
            for k, v in COGS.items()
        ]
    )

    AB = make_ab(seed, rp)

    # ---- write
    _write_csv(S, out / "subscriptions.csv")
    _write_csv(C, out / "charges.csv")
    _write_csv(CU, out / "customers.csv")
    _write_csv(P, out / "pet_profiles.csv")
    _write_csv(SH, out / "orders_export.csv")
    _write_csv(AZ, out / "amazon_settlement.tsv", sep="\t")
    _write_csv(FX, out / "fx_rates.csv")
    _write_csv(PL, out / "plan.csv")
    _write_csv(PC, out / "product_costs.csv")
    _write_csv(AB, out / "ab_assignments.csv")

    # ---- internal facts for the truth (the future continuation is never written)
    fut_bags = bags_rows(chf_frame, SHf, AZf)
    wk0 = DATA_END + (7 - DATA_END % 7) % 7  # first Sunday after DATA_END
    if wk0 == DATA_END:
        wk0 += 7
    fb = fut_bags[(fut_bags["day"] >= wk0) & (fut_bags["day"] < wk0 + 28)]
    internal = {
        "forecast_weeks": [ds(wk0), ds(wk0 + 27)],
        "forecast_mean_weekly_bags": float(fb["bags"].sum() / 4.0),
        "recent_cancel_customers": [str(custs[ci]["id"]) for ci in planted_cust],
        "before_signup_orders": ["#" + str(n) for n in bs_nums],
        "refund_before_sale_charge_ids": [str(x) for x in chw.loc[rb_idx, "charge_id"]],
        "currency_mismatch_charge_ids": [str(x) for x in chw.loc[cur_idx, "charge_id"]],
        "duplicate_rows": len(dup_idx),
        "au_outage_usd": float(cfs["usd"].sum()),
    }
    truth = build_truth(out, seed, internal)
    (out / "truth.json").write_text(json.dumps(truth, indent=2, sort_keys=False) + "\n")
    return truth


# --------------------------------------------------------------------------------------------------------------------
# expected values: every number below is computed from the files as written (read back as text)
# --------------------------------------------------------------------------------------------------------------------
def load(out: pathlib.Path) -> dict:
    rd = lambda n, sep=",": pd.read_csv(out / n, dtype=str, keep_default_na=False, sep=sep)  # noqa: E731
    return {
        "subs": rd("subscriptions.csv"),
        "charges": rd("charges.csv"),
        "customers": rd("customers.csv"),
        "pets": rd("pet_profiles.csv"),
        "shop": rd("orders_export.csv"),
        "amz": rd("amazon_settlement.tsv", "\t"),
        "fx": rd("fx_rates.csv"),
        "plan": rd("plan.csv"),
        "costs": rd("product_costs.csv"),
        "ab": rd("ab_assignments.csv"),
    }


def _utc(s: pd.Series) -> pd.Series:
    return pd.to_datetime(s.replace("", None), utc=True, format="ISO8601")


def _period(name: str) -> dict:
    return next(p for p in PERIODS_ALL if p["name"] == name)


def m_budget(F) -> dict:
    rev = revenue_rows(F["charges"], F["shop"], F["amz"], F["fx"])
    rev["period"] = period_of(rev["day"].to_numpy())
    act = rev.groupby(["period", "country"])["usd"].sum()
    pl = F["plan"].copy()
    pl["period"] = pl["Fiscal Year"] + " " + pl["Period"]
    pl["plan"] = _num(pl["Plan Revenue (USD)"])
    pl["actual"] = [float(act.get((p, c), 0.0)) for p, c in zip(pl["period"], pl["Country"])]
    pl["end"] = [_period(p)["end"] for p in pl["period"]]
    pl["start"] = [_period(p)["start"] for p in pl["period"]]
    pl["var"] = pl["actual"] / pl["plan"] - 1
    comp = pl[pl["end"] <= DATA_END]
    miss = comp[(comp["period"] == "FY2025 P4") & (comp["Country"] == "AU")]
    rest = comp[~((comp["period"] == "FY2025 P4") & (comp["Country"] == "AU"))]
    worst = comp.sort_values("var").iloc[0]
    part = pl[pl["period"] == "FY2025 P11"]
    p11 = _period("FY2025 P11")
    elapsed = DATA_END - p11["start"] + 1
    total_days = p11["end"] - p11["start"] + 1
    return {
        "miss_var": float(miss["var"].iloc[0]),
        "miss_actual": float(miss["actual"].iloc[0]),
        "miss_plan": float(miss["plan"].iloc[0]),
        "median_var_rest": float(rest["var"].median()),
        "max_abs_var_rest": float(rest["var"].abs().max()),
        "worst_cell": (worst["period"], worst["Country"]),
        "n_complete_cells": len(comp),
        "p11_naive_var": float(part["actual"].sum() / part["plan"].sum() - 1),
        "p11_prorated_var": float(part["actual"].sum() / (part["plan"].sum() * elapsed / total_days) - 1),
        "p11_elapsed_days": int(elapsed),
        "p11_days": int(total_days),
    }


def m_bridge(F) -> dict:
    c = F["charges"].drop_duplicates()
    c = c[c["status"].isin(REV_STATUS) & c["shipping_country"].isin(["CA", "AU"])]
    c = c[c["currency"] == c["shipping_country"].map(CUR)]
    d = _days(c["processed_at"])
    b0, b1 = _period("FY2024 P1")["start"], _period("FY2024 P10")["end"]
    c0, c1 = _period("FY2025 P1")["start"], _period("FY2025 P10")["end"]
    fxd = F["fx"]
    fdays = _days(fxd["Date"])
    base_avg = {
        cur: float(_num(fxd["Rate"])[(fxd["Quote"] == cur).to_numpy() & (fdays >= b0) & (fdays <= b1)].mean())
        for cur in ("CAD", "AUD")
    }
    rate = _fx_lookup(fxd)
    net = _num(c["subtotal_price"]) - _num(c["total_discounts"])
    qty = _num(c["line_item_quantity"])
    cur = c["currency"].to_numpy()
    usd = net / rate(cur, d)
    base, now = (d >= b0) & (d <= b1), (d >= c0) & (d <= c1)
    dp = np.array([(NEW_PRICE_C[k][s] - PRICE_C[k][s]) / 100.0 for k, s in zip(cur, c["line_item_sku"])])
    avg = np.array([base_avg[k] for k in cur])
    price_eff = float((qty * dp / avg)[now].sum())
    usd_cf = net / avg
    list_loc = _num(c["subtotal_price"])
    # USD average list price per bag in each window (what a naive look at USD prices shows)
    asp0 = float((list_loc / rate(cur, d))[base].sum() / qty[base].sum())
    asp1 = float((list_loc / rate(cur, d))[now].sum() / qty[now].sum())
    return {
        "usd_base": float(usd[base].sum()),
        "usd_now": float(usd[now].sum()),
        "usd_now_at_base_fx": float(usd_cf[now].sum()),
        "price_effect_usd_const_fx": price_eff,
        "fx_effect_usd": float(usd[now].sum() - usd_cf[now].sum()),
        "bags_base": float(qty[base].sum()),
        "bags_now": float(qty[now].sum()),
        "usd_list_per_bag_base": asp0,
        "usd_list_per_bag_now": asp1,
        "base_avg_rate": base_avg,
    }


def m_retention(F) -> dict:
    c = F["charges"].drop_duplicates()
    c = c[c["status"].isin(REV_STATUS)]
    month = c["processed_at"].str.slice(0, 7)
    first = month.groupby(c["customer_id"]).transform("min")
    old = c[first < "2024-06"]
    n = old.assign(m=month[first < "2024-06"]).groupby("m")["customer_id"].nunique()
    ratio = n["2024-07"] / ((n["2024-06"] + n["2024-08"]) / 2)
    # per cohort (first month, 2024-02..2024-06): the same dip appears at ages 5,4,3,2,1
    coh = {}
    for cm in ["2024-02", "2024-03", "2024-04", "2024-05"]:
        g = c[first == cm]
        k = g.assign(m=month[first == cm]).groupby("m")["customer_id"].nunique()
        coh[cm] = float(k["2024-07"] / ((k["2024-06"] + k["2024-08"]) / 2))
    return {"ratio": float(ratio), "by_cohort": coh}


def m_clv(F) -> dict:
    s = F["subs"]
    g = s.assign(nc=(s["status"] != "CANCELLED").astype(int)).groupby("customer_id")
    all_cancel = g["nc"].sum() == 0
    last_cancel = g["cancelled_at"].max().str.slice(0, 10)
    recent = all_cancel & (last_cancel >= ds(RECENT_FROM))
    c = F["charges"].drop_duplicates()
    c = c[c["status"].isin(REV_STATUS)]
    ids = set(recent[recent].index)
    nbox = c[c["customer_id"].isin(ids)].groupby("customer_id").size()
    paused = s[(s["status"] == "PAUSED") & (s["paused_until"] > ds(DATA_END))]
    return {
        "n_recent": int(recent.sum()),
        "median_charges_recent": float(nbox.median()),
        "n_paused_subs": len(paused),
        "n_paused_customers": int(paused["customer_id"].nunique()),
        "recent_ids": sorted(ids),
    }


def m_rfm(F) -> dict:
    c = F["charges"].drop_duplicates().copy()
    c["ev"] = _utc(c["processed_at"].where(c["processed_at"] != "", c["scheduled_at"]))
    c["tried"] = pd.to_numeric(c["number_times_tried"])
    last = c.sort_values(["ev", "tried"], kind="stable").groupby("subscription_id").tail(1)
    s = F["subs"]
    active = set(s.loc[s["status"] == "ACTIVE", "subscription_id"])
    dun = last[(last["status"] == "ERROR") & last["subscription_id"].isin(active)]
    dun_c = set(dun["customer_id"])
    ok = c[c["status"].isin(REV_STATUS)]
    last_ok = ok.groupby("customer_id")["ev"].max()
    end = pd.Timestamp(ds(DATA_END + 1) + "T05:00:00Z")
    rec_days = (end - last_ok).dt.days
    live = set(s.loc[s["status"] != "CANCELLED", "customer_id"])
    stale = [cid for cid in sorted(live) if cid not in dun_c and rec_days.get(cid, 0) > 35]
    stale_paused = set(s.loc[s["status"] == "PAUSED", "customer_id"]) & set(stale)
    return {
        "n_dunning_customers": len(dun_c),
        "n_stale_not_dunning": len(stale),
        "n_stale_paused": len(stale_paused),
        "n_stale_long_cadence": len(stale) - len(stale_paused),
    }


def m_anomaly(F) -> dict:
    c = F["charges"].drop_duplicates()
    c = c[c["status"].isin(REV_STATUS)]
    d = pd.Series(_days(c["processed_at"])).value_counts().sort_index()
    full = pd.Series(0, index=np.arange(DATA_START, DATA_END + 1)).add(d, fill_value=0)

    def ratio(day):
        prev = [full.get(day - 7 * k, np.nan) for k in range(1, 9)]
        return float(full[day] / np.nanmedian(prev))

    starts = [p["start"] for p in PERIODS if DATA_START + 56 <= p["start"] <= DATA_END]
    rs = [ratio(x) for x in starts]
    return {
        "outage_ratio": ratio(OUTAGE_DAY),
        "period_start_ratios_mean": float(np.mean(rs)),
        "n_period_starts": len(starts),
        "period_start_dates": [ds(x) for x in starts],
        "period_start_ratio_max": float(np.max(rs)),
    }


def m_demand(F) -> dict:
    b = bags_rows(F["charges"], F["shop"], F["amz"])
    b["period"] = period_of(b["day"].to_numpy())
    tot = b.groupby("period")["bags"].sum()
    p23, p24 = _period("FY2023 P12"), _period("FY2024 P12")
    t23, t24 = float(tot["FY2023 P12"]), float(tot["FY2024 P12"])
    return {
        "p12_total_change": t24 / t23 - 1,
        "p12_per_week_change": (t24 / p24["weeks"]) / (t23 / p23["weeks"]) - 1,
        "weeks_fy2023_p12": p23["weeks"],
        "weeks_fy2024_p12": p24["weeks"],
        "last4w_mean": float(
            b[(b["day"] > DATA_END - 28 - (DATA_END + 1) % 7) & (b["day"] <= DATA_END - (DATA_END + 1) % 7)][
                "bags"
            ].sum()
            / 4
        ),
    }


def m_dq(F) -> dict:
    sh, ch, cu = F["shop"], F["charges"], F["customers"]
    f = sh[sh["Financial Status"] != ""]
    signup = dict(zip(cu["email"], _utc(cu["created_at"])))
    ot = _utc(f["Created at"].str.replace(r" ([+-]\d\d)(\d\d)$", r"\1:\2", regex=True))
    su = f["Email"].map(signup)
    before = f[(su.notna()) & (ot < su)]
    c = ch.drop_duplicates()
    ra, pa = _utc(c["refunded_at"]), _utc(c["processed_at"])
    rb = c[ra.notna() & (ra < pa)]
    mism = c[c["currency"] != c["shipping_country"].map(CUR)]
    multi = c[c["status"].isin(["ERROR"] + REV_STATUS)].groupby("charge_id").size()
    offs = sorted(set(ch["processed_at"].str.slice(19)) - {""})
    later = sh[sh["Financial Status"] == ""]
    return {
        "before_signup": sorted(before["Name"]),
        "refund_before_sale": sorted(rb["charge_id"]),
        "dup_rows": int(ch.duplicated().sum()),
        "dup_day": sorted(set(ch[ch.duplicated()]["processed_at"].str.slice(0, 10))),
        "currency_mismatch": sorted(mism["charge_id"]),
        "later_lines": len(later),
        "later_lines_blank_email": int((later["Email"] == "").sum()),
        "discount_amount_max": float(_num(f["Discount Amount"]).max()),
        "discount_amount_gt1": int((_num(f["Discount Amount"]) > 1).sum()),
        "offsets": offs,
        "retried_charges": int((multi > 1).sum()),
        "shopify_offsets": sorted(set(f["Created at"].str.slice(20))),
    }


def m_ab(F) -> dict:
    ab = F["ab"]
    res = {}
    for t, treat in (("onboarding_v2", "new_flow"), ("pricing_page_v3", "variant_b")):
        g = ab[ab["test_name"] == t]
        st = ab_stats(
            g["account_id"].to_numpy(),
            (g["variant"] == treat).to_numpy().astype(int),
            pd.to_numeric(g["converted"]).to_numpy(),
        )
        st["srm_p_accounts"] = srm_p(st["accounts_t"], st["accounts_t"] + st["accounts_c"])
        st["srm_p_pets"] = srm_p(st["pets_t"], st["pets_t"] + st["pets_c"])
        st["treat_account_share"] = st["accounts_t"] / (st["accounts_t"] + st["accounts_c"])
        st["pets_per_account"] = (st["pets_t"] + st["pets_c"]) / (st["accounts_t"] + st["accounts_c"])
        res[t] = st
    return res


def m_discount(F) -> dict:
    sh = F["shop"]
    f = sh[sh["Financial Status"] != ""]
    ctry = dict(zip(f["Name"], f["Shipping Country"]))
    day = dict(zip(f["Name"], f["Created at"].str.slice(0, 10)))
    t = sh[sh["Lineitem sku"].str.startswith("TRT")].copy()
    t["c"] = t["Name"].map(ctry)
    t["d"] = _days(t["Name"].map(day))
    t["q"] = _num(t["Lineitem quantity"])

    def units(us, lo, hi):
        m = (t["c"] == "US") if us else t["c"].isin(["CA", "AU"])
        return float(t[m & (t["d"] >= lo) & (t["d"] <= hi)]["q"].sum())

    lo0, hi0 = TREATS_PRE
    lo1, hi1 = TREATS_PROMO
    did = (units(True, lo1, hi1) / units(True, lo0, hi0)) / (units(False, lo1, hi1) / units(False, lo0, hi0)) - 1
    naive_us = units(True, lo1, hi1) / units(True, lo0, hi0) * (hi0 - lo0 + 1) / (hi1 - lo1 + 1) - 1
    # puppies: lbs per paid box, boxes 1-3 vs 4-6, PUPPY15 subscriptions vs puppies who signed up before the programme
    c = F["charges"].drop_duplicates()
    c = c[c["status"].isin(REV_STATUS)].copy()
    c["ts"] = _utc(c["processed_at"])
    c = c.sort_values(["subscription_id", "ts"], kind="stable")
    c["box"] = c.groupby("subscription_id").cumcount() + 1
    firstrow = c[c["box"] == 1]
    pup = set(
        firstrow[(firstrow["type"] == "CHECKOUT") & firstrow["line_item_sku"].str.startswith("PUP")]["subscription_id"]
    )
    c = c[c["subscription_id"].isin(pup)]
    nbox = c.groupby("subscription_id")["box"].max()
    six = set(nbox[nbox >= 6].index)
    c = c[c["subscription_id"].isin(six) & (c["box"] <= 6)].copy()
    c["lbs"] = [sku_lbs(k) for k in c["line_item_sku"]] * _num(c["line_item_quantity"])
    coded = set(c[c["discount_codes"].str.contains("PUPPY15")]["subscription_id"])
    created = dict(zip(F["subs"]["subscription_id"], F["subs"]["created_at"].str.slice(0, 10)))
    ctrl = {s for s in six if created.get(s, "9999") < ds(PUPPY_START)}

    def growth(ids):
        g = c[c["subscription_id"].isin(ids)]
        return float(g[g["box"] >= 4]["lbs"].mean() / g[g["box"] <= 3]["lbs"].mean())

    gc, g0 = growth(coded), growth(ctrl)
    return {
        "treats_did": float(did),
        "treats_naive_us_daily_change": float(naive_us),
        "pup_did": gc / g0 - 1,
        "pup_naive": gc - 1,
        "pup_ctrl_growth": g0 - 1,
        "n_pup_coded": len(coded),
        "n_pup_ctrl": len(ctrl),
    }


def m_refunds(F) -> dict:
    c = F["charges"].drop_duplicates()
    c = c[c["status"].isin(REV_STATUS)].copy()
    c["ts"] = _utc(c["processed_at"])
    c = c.sort_values(["subscription_id", "ts"], kind="stable")
    c["box"] = c.groupby("subscription_id").cumcount() + 1
    new = set(c[(c["box"] == 1) & (c["type"] == "CHECKOUT")]["subscription_id"])
    c = c[c["subscription_id"].isin(new)].copy()
    c["bucket"] = np.minimum(c["box"], 3)
    c["ref"] = c["status"].isin(["REFUNDED", "PARTIALLY_REFUNDED"]).astype(float)
    res = {}
    for plan in ("SAL-30", "PUP-04"):
        # reference: every other plan (for the look-alike also without SAL-30, the plan with the known excess)
        mine = c[c["line_item_sku"] == plan]
        other = c[(c["line_item_sku"] != plan) & ((c["line_item_sku"] != "SAL-30") | (plan == "SAL-30"))]
        br = other.groupby("bucket")["ref"].mean()
        exp_ = (mine["bucket"].map(br)).sum()
        res[plan] = {
            "std_ratio": float(mine["ref"].sum() / exp_),
            "raw_rate": float(mine["ref"].mean()),
            "raw_ratio": float(mine["ref"].mean() / other["ref"].mean()),
            "first_box_share": float((mine["bucket"] == 1).mean()),
            "first_box_share_other": float((other["bucket"] == 1).mean()),
        }
    return res


def m_profit(F) -> dict:
    a = F["amz"]
    a = a[a["transaction-type"] != ""]
    amt = _num(a["amount"])
    cogs = dict(zip(F["costs"]["SKU"], _num(F["costs"]["Unit COGS (USD)"])))
    units_m = (
        (a["transaction-type"] == "Order")
        & (a["amount-type"] == "ItemPrice")
        & (a["amount-description"] == "Principal")
    )
    units = float(_num(a.loc[units_m, "quantity-purchased"]).sum())
    cg = units * cogs["CHK-30"]
    sku_rows = (a["sku"] == "CHK-30").to_numpy()
    princ = (a["amount-description"] == "Principal").to_numpy()
    return {
        "contribution_all": float(amt.sum() - cg),
        "contribution_sku_rows": float(amt[sku_rows].sum() - cg),
        "gross_margin": float(amt[princ].sum() - cg),
        "units": units,
        "cogs_total": float(cg),
        "fees": float(amt[(a["amount-type"] == "ItemFees").to_numpy()].sum()),
        "account_fees": float(amt[(a["transaction-type"] == "other-transaction").to_numpy()].sum()),
    }


def compute_metrics(out: pathlib.Path) -> dict:
    F = load(out)
    return {
        "budget": m_budget(F),
        "bridge": m_bridge(F),
        "retention": m_retention(F),
        "clv": m_clv(F),
        "rfm": m_rfm(F),
        "anomaly": m_anomaly(F),
        "demand": m_demand(F),
        "dq": m_dq(F),
        "ab": m_ab(F),
        "discount": m_discount(F),
        "refunds": m_refunds(F),
        "profit": m_profit(F),
    }


# --------------------------------------------------------------------------------------------------------------------
# truth
# --------------------------------------------------------------------------------------------------------------------
def _r(x, n=4):
    return float(round(float(x), n))


def business_facts() -> dict:
    per = [{"name": p["name"], "start": ds(p["start"]), "end": ds(p["end"])} for p in PERIODS]
    return {
        "name": COMPANY,
        "what": "dry dog food and treats; subscriptions (Recharge), add-ons and one-off orders "
        "(Shopify), the 30 lb Chicken bag on Amazon.com (FBA)",
        "contractual": "mixed",
        "contract_states": ["active", "paused", "skipped", "dunning", "cancelled"],
        "contract_notes": "Recharge subscriptions are contractual (status ACTIVE/PAUSED/CANCELLED; a PAUSED "
        "subscription with paused_until resumes on that date; SKIPPED charges are skipped boxes; "
        "ERROR rows with a retry_date are dunning). Shopify one-off buyers and Amazon buyers are "
        "non-contractual.",
        "fiscal_calendar": {
            "kind": "4-5-4",
            "first_day": ds(fy_start(2023)),
            "year_naming": "start_year",
            "year_start_rule": "Sunday nearest 1 February",
            "53_week_years": [2023],
            "53rd_week_goes_to": "P12 (5 weeks instead of 4)",
            "periods": per,
        },
        "currencies": ["USD", "CAD", "AUD"],
        "reporting_currency": "USD",
        "fx_source": "fx_rates.csv (finance's daily file, business days only, Rate = units of Quote per 1 USD: "
        "USD = local / Rate; weekends and holidays use the last earlier rate)",
        "store_timezone": "America/New_York",
        "data_window": [ds(DATA_START), ds(DATA_END)],
        "data_end_note": "data end mid-period: FY2025 P11 (2025-11-30..2026-01-03) has 3 of 35 days; FY2025 P12 "
        "has a plan but no actuals yet",
        "randomisation_unit": "account (ab_assignments.account_id)",
        "analysis_row_unit": "pet profile",
        "plan_definition": "plan.csv = finance's rolling forecast in USD of net sales per fiscal period x country, "
        "built at actual FX (FX-neutral): Recharge charges with status SUCCESS/REFUNDED/"
        "PARTIALLY_REFUNDED (subtotal_price - total_discounts, by processed_at local date, "
        "shipping_country) + Shopify orders (Subtotal, which is after discounts and before "
        "shipping and tax, by Created at, Shipping Country) + Amazon Order Principal and "
        "Promotion rows (posted-date, US); before refunds; exact duplicate charge rows excluded; "
        "converted at the daily rate of the local date",
        "price_changes": [
            {
                "date": ds(PRICE_RISE_DAY),
                "scope": "all dry-food bags, CAD and AUD list prices (Recharge and Shopify)",
                "change": "+5.0 % (new price = old x 1.05, rounded to the cent)",
            }
        ],
        "channels": {
            "recharge_subscription": {
                "variable_costs": {
                    "payment_processing_pct": 0.029,
                    "payment_fixed_usd": 0.30,
                    "pick_pack_ship_usd_per_box": {"4lb": 6.50, "12lb": 9.80, "30lb": 15.40},
                }
            },
            "shopify_one_off": {
                "variable_costs": {
                    "payment_processing_pct": 0.029,
                    "payment_fixed_usd": 0.30,
                    "pick_pack_ship_usd_per_order": 7.20,
                }
            },
            "amazon_fba": {
                "variable_costs": {
                    "referral_fee_pct": AMZ_REFERRAL,
                    "fulfilment_per_unit": {"until 2025-01-14": AMZ_FBA[0], "from 2025-01-15": AMZ_FBA[1]},
                    "refund_commission": "20 % of the referral fee, max 5.00",
                    "account_fees": "monthly Storage Fee and Subscription Fee 39.99 (no sku; Amazon sells only CHK-30)",
                },
                "marketplace": "Amazon.com, USD, settlement every 14 days",
            },
        },
        "cogs_source": "product_costs.csv (unit COGS in USD per SKU; Amazon returns of food are destroyed, no COGS "
        "recovery)",
        "known_events": [
            {
                "date": ds(CAMP[0]) + ".." + ds(CAMP[1]),
                "what": "'Summer pause' retention campaign: customers were "
                "offered to pause until early August instead of cancelling",
            },
            {"date": ds(AU_OUT[0]) + ".." + ds(AU_OUT[1]), "what": "AU 3PL warehouse flood: AU boxes skipped"},
            {
                "date": "every fiscal period start",
                "what": "warehouse stocktake: recurring charges scheduled on the "
                "first day of a fiscal period are processed the next day (scheduled_at keeps the first day)",
            },
            {
                "date": ds(TREATS_PROMO[0]) + ".." + ds(TREATS_PROMO[1]),
                "what": "TREATS20: 20 % off treats, US only, emailed to US subscribers",
            },
            {
                "date": ds(PUPPY_START),
                "what": "PUPPY15: 15 % off from the 4th box for puppy subscriptions "
                "created from this day (PUP-* plans)",
            },
            {"date": "2024-03-13", "what": "Amazon.com launch of the 30 lb Chicken bag (first settlement)"},
        ],
    }


def files_facts() -> dict:
    return {
        "subscriptions.csv": {
            "system": "Recharge",
            "grain": "one row per subscription (one pet profile each)",
            "layout": "Recharge subscriptions export; only subscriptions active on or after 2023-01-29",
            "columns": {
                "status": "ACTIVE / PAUSED / CANCELLED at the export date",
                "paused_until": "date a PAUSED subscription resumes",
                "order_interval_frequency": "cadence in order_interval_unit (weeks)",
                "price": "current local list price",
                "created_at": "local time with UTC offset",
            },
            "quirks": [
                "timestamps like 2025-03-04T09:12:45-05:00 with -04:00/-05:00 (DST)",
                "sku is the current plan; earlier boxes may have another sku (upgrades)",
            ],
        },
        "charges.csv": {
            "system": "Recharge",
            "grain": "one row per charge attempt (retries share charge_id)",
            "layout": "Recharge charges export, sorted by charge_id",
            "columns": {
                "status": "SUCCESS, ERROR (declined, see error/error_type, retry_date), SKIPPED, "
                "REFUNDED, PARTIALLY_REFUNDED",
                "type": "CHECKOUT = first box (paid at checkout), RECURRING",
                "subtotal_price": "list price x quantity (local currency)",
                "total_discounts": "discount amount (WELCOME20 on first boxes, PUPPY15)",
                "total_refunds": "refunded amount",
                "number_times_tried": "attempt number (0 = skipped)",
                "scheduled_at": "the box's scheduled time; processed_at = this attempt",
            },
            "quirks": [
                "charges before 2023-01-29 are not exported (cohorts before are left-truncated)",
                "dunning retries are separate rows with the same charge_id (not duplicates)",
                "first-day-of-period charges processed the next day",
            ],
        },
        "customers.csv": {
            "system": "Recharge",
            "grain": "one row per subscriber",
            "layout": "customers export",
            "columns": {"created_at": "signup time"},
            "quirks": [],
        },
        "pet_profiles.csv": {
            "system": "company onboarding app (Postgres)",
            "grain": "one row per pet profile",
            "layout": "table dump",
            "columns": {"created_at": "UTC, '+00' suffix"},
            "quirks": ["UTC timestamps while Recharge uses store-local offsets"],
        },
        "orders_export.csv": {
            "system": "Shopify",
            "grain": "one row per line item",
            "layout": "Shopify orders export (newest order first); order-level fields (Email, "
            "Financial Status, Subtotal, Shipping, Taxes, Total, Discount Code, Discount "
            "Amount, Created at, addresses, Tags, Source) only on the order's first line",
            "columns": {
                "Subtotal": "after discounts, before shipping and tax",
                "Discount Amount": "an amount in the order currency, not a rate",
                "Created at": "2025-03-04 09:12:45 -0500",
                "Tags": "'Subscription Add-on' for subscriber add-on orders",
            },
            "quirks": [
                "blank order-level fields on later lines are by design",
                "only add-on and one-off orders (recurring boxes are in charges.csv)",
            ],
        },
        "amazon_settlement.tsv": {
            "system": "Amazon Seller Central",
            "grain": "one row per amount line",
            "layout": "settlement report flat file V2, settlements one after another, each "
            "starting with a summary row (settlement dates, total-amount, currency, "
            "the rest blank)",
            "columns": {"amount": "signed USD", "posted-date": "UTC date", "quantity-purchased": "on Order rows"},
            "quirks": [
                "summary rows are not transactions",
                "Tax and MarketplaceFacilitatorTax-Principal net to zero",
                "account-level Storage Fee / Subscription Fee rows have no sku",
            ],
        },
        "fx_rates.csv": {
            "system": "finance spreadsheet",
            "grain": "business day x currency",
            "layout": "Date, Base=USD, Quote, Rate (Quote per 1 USD)",
            "columns": {},
            "quirks": ["no weekend/holiday rows", "divide local amounts by Rate"],
        },
        "plan.csv": {
            "system": "finance",
            "grain": "fiscal period x country",
            "layout": "FY2024 P1..FY2025 P12",
            "columns": {"Plan Revenue (USD)": "text like $1,234,500"},
            "quirks": ["FY2025 P11 is 3 days old, P12 has not started"],
        },
        "product_costs.csv": {
            "system": "finance",
            "grain": "one row per SKU",
            "layout": "unit COGS in USD",
            "columns": {},
            "quirks": [],
        },
        "ab_assignments.csv": {
            "system": "growth team's experiment table",
            "grain": "one row per pet profile",
            "layout": "test_name, account_id, pet_profile_id, variant, assigned_at (UTC, Z), "
            "signup_platform, pet_life_stage, converted (0/1)",
            "columns": {"account_id": "the randomisation unit"},
            "quirks": ["rows are pets, randomisation was by account (1-4 pets)"],
        },
    }


def build_truth(out: pathlib.Path, seed: int, internal: dict) -> dict:
    M = compute_metrics(out)
    B, BR, RT, CL, RF, AN, DM, DQ, AB, DC, RE, PR = (
        M[k]
        for k in (
            "budget",
            "bridge",
            "retention",
            "clv",
            "rfm",
            "anomaly",
            "demand",
            "dq",
            "ab",
            "discount",
            "refunds",
            "profit",
        )
    )
    assert CL["n_recent"] == N_RECENT_CANCEL
    assert sorted(internal["recent_cancel_customers"]) == CL["recent_ids"]
    assert DQ["before_signup"] == sorted(internal["before_signup_orders"])
    assert DQ["refund_before_sale"] == sorted(internal["refund_before_sale_charge_ids"])
    assert DQ["currency_mismatch"] == sorted(internal["currency_mismatch_charge_ids"])
    assert DQ["dup_rows"] == internal["duplicate_rows"]
    ob, pp = AB["onboarding_v2"], AB["pricing_page_v3"]
    usd_chg = BR["usd_now"] / BR["usd_base"] - 1
    plants = [
        # ---------------- sales-performance-review
        {
            "id": "spr_fx_masks_price_rise",
            "skill": "sales-performance-review",
            "kind": "truth",
            "class": "fx_vs_price",
            "statement": f"CA+AU subscription net sales in USD fell {usd_chg:+.1%} (FY2025 P1-P10 vs FY2024 P1-P10) "
            f"although the only price change was a +5.0 % local-currency rise on {ds(PRICE_RISE_DAY)}: "
            f"price effect +${BR['price_effect_usd_const_fx']:,.0f} at constant FY2024 P1-P10 average FX, "
            f"FX effect ${BR['fx_effect_usd']:,.0f}, the rest volume/mix.",
            "entity": {"country": ["CA", "AU"], "channel": "recharge", "window": "FY2025 P1-P10 vs FY2024 P1-P10"},
            "expected": {
                "metric": "price_effect_usd_constant_fx",
                "value": _r(BR["price_effect_usd_const_fx"], 2),
                "tolerance": {"rel": 0.10},
            },
            "naive_mistake": "reads the USD decline as lower prices or lost demand; misses that prices rose and FX "
            "(weaker CAD/AUD) drove the fall",
        },
        {
            "id": "spr_usd_price_per_bag_fell",
            "skill": "sales-performance-review",
            "kind": "lookalike",
            "class": "fx_translation",
            "statement": f"USD list price per bag in CA+AU fell from ${BR['usd_list_per_bag_base']:.2f} to "
            f"${BR['usd_list_per_bag_now']:.2f}, but that is translation: local list prices rose exactly "
            f"5.0 % and there was no price cut.",
            "entity": {"country": ["CA", "AU"], "metric": "usd price per bag"},
            "expected": {"metric": "local_list_price_change_pct", "value": 0.05, "tolerance": {"abs": 0.002}},
            "naive_mistake": "reports a price cut / discounting in Canada and Australia",
        },
        # ---------------- customer-cohort-retention
        {
            "id": "ret_pause_campaign_period_effect",
            "skill": "customer-cohort-retention",
            "kind": "truth",
            "class": "calendar_period_effect",
            "statement": f"Every cohort's charged-customer count dips in July 2024 (ratio {RT['ratio']:.2f} of the "
            f"June/August mean for customers acquired before June 2024): one calendar-period effect - "
            f"the 'Summer pause' campaign ({ds(CAMP[0])}..{ds(CAMP[1])}, resume in early August) - "
            f"not cohort-specific deterioration.",
            "entity": {"period": "2024-07", "fiscal_period": "FY2024 P6", "cause": "pause campaign"},
            "expected": {
                "metric": "charged_customers_jul2024_vs_mean_jun_aug",
                "value": _r(RT["ratio"]),
                "tolerance": {"abs": 0.03},
            },
            "naive_mistake": "reports several cohorts deteriorating at different ages instead of one period effect",
        },
        {
            "id": "ret_cohort_dips_lookalike",
            "skill": "customer-cohort-retention",
            "kind": "lookalike",
            "class": "cohort_specific_dip",
            "statement": "Cohorts 2024-02..2024-06 each show a dip at a different age (5,4,3,2,1 months) - the same "
            "July 2024 pause campaign on the diagonal, not five cohort problems; they recover in August.",
            "entity": {"cohort": ["2024-02", "2024-03", "2024-04", "2024-05", "2024-06"]},
            "expected": {
                "metric": "dip_ratio_by_cohort",
                "value": {k: _r(v) for k, v in RT["by_cohort"].items()},
                "tolerance": {"abs": 0.08},
            },
            "naive_mistake": "flags five separate cohort retention problems",
        },
        # ---------------- customer-lifetime-value
        {
            "id": "clv_recent_cancels_zero_value",
            "skill": "customer-lifetime-value",
            "kind": "truth",
            "class": "contractual_churn_observed",
            "statement": f"{CL['n_recent']} customers cancelled all their subscriptions in the last 45 days "
            f"({ds(RECENT_FROM)}..{ds(DATA_END)}); they were frequent buyers (median "
            f"{CL['median_charges_recent']:.0f} paid boxes) but their future value is ~0.",
            "entity": {"status": "CANCELLED", "cancelled_from": ds(RECENT_FROM), "customers": CL["recent_ids"]},
            "expected": {"metric": "n_customers_cancelled_last_45d", "value": CL["n_recent"], "tolerance": {"abs": 0}},
            "naive_mistake": "a non-contractual model (BG/NBD style, recency/frequency only) gives them high "
            "expected future value",
        },
        {
            "id": "clv_paused_not_churned",
            "skill": "customer-lifetime-value",
            "kind": "lookalike",
            "class": "paused_with_resume_date",
            "statement": f"{CL['n_paused_subs']} subscriptions ({CL['n_paused_customers']} customers) are PAUSED with "
            f"a paused_until date after {ds(DATA_END)}; they have not charged for weeks but resume - "
            f"not churned.",
            "entity": {"status": "PAUSED"},
            "expected": {
                "metric": "n_subscriptions_paused_with_resume_date",
                "value": CL["n_paused_subs"],
                "tolerance": {"abs": 0},
            },
            "naive_mistake": "counts long-silent paused subscribers as churned / zero value",
        },
        # ---------------- rfm-segmentation
        {
            "id": "rfm_active_in_dunning",
            "skill": "rfm-segmentation",
            "kind": "truth",
            "class": "involuntary_churn_risk",
            "statement": f"{RF['n_dunning_customers']} customers with an ACTIVE subscription whose latest charge "
            f"attempt failed (card declined, retry pending) are the real at-risk segment.",
            "entity": {"segment": "ACTIVE subscription, latest charge attempt ERROR"},
            "expected": {
                "metric": "n_active_customers_in_dunning",
                "value": RF["n_dunning_customers"],
                "tolerance": {"abs": 0},
            },
            "naive_mistake": "RFM on order dates alone ranks them with everyone else (recent, frequent) and misses "
            "the failed payments; it also ranks the 143 just-cancelled customers as champions",
        },
        {
            "id": "rfm_long_cadence_and_paused_lookalike",
            "skill": "rfm-segmentation",
            "kind": "lookalike",
            "class": "cadence_driven_recency",
            "statement": f"{RF['n_stale_not_dunning']} live customers have no paid box for over 35 days: "
            f"{RF['n_stale_paused']} are PAUSED with a resume date and {RF['n_stale_long_cadence']} are on "
            f"6-week cadences (or between boxes) - on schedule, not at risk.",
            "entity": {"segment": "low recency, status ACTIVE/PAUSED, not in dunning"},
            "expected": {
                "metric": "n_live_customers_recency_over_35d_not_dunning",
                "value": RF["n_stale_not_dunning"],
                "tolerance": {"abs": 0},
            },
            "naive_mistake": "labels them 'at risk / hibernating' from calendar recency",
        },
        # ---------------- budget-vs-actual
        {
            "id": "bva_au_p4_miss",
            "skill": "budget-vs-actual",
            "kind": "truth",
            "class": "real_cell_miss",
            "statement": f"The largest miss is AU in FY2025 P4: actual ${B['miss_actual']:,.0f} vs plan "
            f"${B['miss_plan']:,.0f} ({B['miss_var']:+.1%}), caused by the AU warehouse flood "
            f"({ds(AU_OUT[0])}..{ds(AU_OUT[1])}, boxes skipped).",
            "entity": {"country": "AU", "period": "FY2025 P4"},
            "expected": {"metric": "variance_pct", "value": _r(B["miss_var"]), "tolerance": {"abs": 0.04}},
            "naive_mistake": "buries it among uniform -3 % 'misses' or ranks the partial FY2025 P11 first",
        },
        {
            "id": "bva_uniform_plan_stretch",
            "skill": "budget-vs-actual",
            "kind": "lookalike",
            "class": "plan_bias",
            "statement": f"Every other complete cell is about {B['median_var_rest']:+.1%} vs plan: the plan is "
            f"uniformly stretched by ~3 % (plan bias), not {B['n_complete_cells'] - 1} cell misses.",
            "entity": {"cells": "all complete period x country cells except AU FY2025 P4"},
            "expected": {
                "metric": "median_variance_pct",
                "value": _r(B["median_var_rest"]),
                "tolerance": {"abs": 0.01},
            },
            "naive_mistake": "reports dozens of small misses / every country below plan",
        },
        {
            "id": "bva_partial_period",
            "skill": "budget-vs-actual",
            "kind": "lookalike",
            "class": "partial_period",
            "statement": f"FY2025 P11 has only {B['p11_elapsed_days']} of {B['p11_days']} days: raw actual vs the full "
            f"period plan is {B['p11_naive_var']:+.0%}, pro-rata {B['p11_prorated_var']:+.0%}; not a "
            f"miss (FY2025 P12 has not started at all).",
            "entity": {"period": "FY2025 P11"},
            "expected": {
                "metric": "prorated_variance_pct",
                "value": _r(B["p11_prorated_var"]),
                "tolerance": {"abs": 0.10},
            },
            "naive_mistake": f"reports FY2025 P11 {B['p11_naive_var']:+.0%} (and P12 -100 %) as misses",
        },
        # ---------------- kpi-anomaly-detection
        {
            "id": "kpi_gateway_outage",
            "skill": "kpi-anomaly-detection",
            "kind": "truth",
            "class": "one_day_drop",
            "statement": f"On {ds(OUTAGE_DAY)} paid subscription charges fell to {AN['outage_ratio']:.0%} of the "
            f"same-weekday median: a payment gateway outage (processing_error declines).",
            "entity": {"date": ds(OUTAGE_DAY), "metric": "daily paid Recharge charges"},
            "expected": {
                "metric": "paid_charges_ratio_vs_same_weekday_median_8w",
                "value": _r(AN["outage_ratio"]),
                "tolerance": {"abs": 0.08},
            },
            "naive_mistake": "misses it among (or ranks it below) the recurring period-start dips",
        },
        {
            "id": "kpi_period_start_dips",
            "skill": "kpi-anomaly-detection",
            "kind": "lookalike",
            "class": "recurring_calendar_dip",
            "statement": f"Every fiscal period's first day ({AN['n_period_starts']} Sundays) shows paid charges at "
            f"~{AN['period_start_ratios_mean']:.0%} of normal, with a catch-up the next day: the stocktake "
            f"hold, expected, not anomalies.",
            "entity": {"dates": AN["period_start_dates"]},
            "expected": {
                "metric": "mean_ratio_on_period_starts",
                "value": _r(AN["period_start_ratios_mean"]),
                "tolerance": {"abs": 0.06},
            },
            "naive_mistake": "flags each period start as an anomaly",
        },
        # ---------------- demand-forecast
        {
            "id": "fc_weekly_bags",
            "skill": "demand-forecast",
            "kind": "truth",
            "class": "forecast_level",
            "statement": f"Bags shipped (Recharge paid boxes + Shopify bag lines + Amazon units) in the 4 fiscal weeks "
            f"{internal['forecast_weeks'][0]}..{internal['forecast_weeks'][1]} average about "
            f"{internal['forecast_mean_weekly_bags']:.0f} a week; weekly totals must be built on the "
            f"4-5-4 calendar with FY2023's 53rd week in P12.",
            "entity": {"weeks": internal["forecast_weeks"], "unit": "bags per fiscal week (Sun-Sat)"},
            # the simulated continuation of the same process after DATA_END (not exported)
            "expected": {
                "metric": "mean_weekly_bags_next_4_weeks",
                "value": _r(internal["forecast_mean_weekly_bags"], 1),
                "tolerance": {"rel": 0.12},
            },
            "naive_mistake": "trains on fiscal periods of unequal length (or on the partial last week) and "
            "forecasts a drop",
        },
        {
            "id": "fc_53_week_p12",
            "skill": "demand-forecast",
            "kind": "lookalike",
            "class": "53rd_week",
            "statement": f"FY2024 P12 bags are {DM['p12_total_change']:+.0%} vs FY2023 P12, but FY2023 P12 had 5 weeks "
            f"(53-week year): per week the change is {DM['p12_per_week_change']:+.0%}.",
            "entity": {"period": "FY2024 P12 vs FY2023 P12"},
            "expected": {
                "metric": "per_week_change_pct",
                "value": _r(DM["p12_per_week_change"]),
                "tolerance": {"abs": 0.03},
            },
            "naive_mistake": f"reports a {DM['p12_total_change']:+.0%} year-on-year drop in P12",
        },
        # ---------------- data-quality-audit (truths)
        {
            "id": "dq_orders_before_signup",
            "skill": "data-quality-audit",
            "kind": "truth",
            "class": "impossible_date",
            "statement": f"{len(DQ['before_signup'])} Shopify subscriber add-on orders are dated before that "
            f"customer's Recharge signup.",
            "entity": {"file": "orders_export.csv", "orders": DQ["before_signup"]},
            "expected": {
                "metric": "n_orders_before_signup",
                "value": len(DQ["before_signup"]),
                "tolerance": {"abs": 0},
            },
            "naive_mistake": "not checked (no cross-file date check)",
        },
        {
            "id": "dq_refund_before_sale",
            "skill": "data-quality-audit",
            "kind": "truth",
            "class": "impossible_date",
            "statement": f"{len(DQ['refund_before_sale'])} charges have refunded_at before processed_at.",
            "entity": {"file": "charges.csv", "charge_id": DQ["refund_before_sale"]},
            "expected": {
                "metric": "n_refunds_before_sale",
                "value": len(DQ["refund_before_sale"]),
                "tolerance": {"abs": 0},
            },
            "naive_mistake": "not checked",
        },
        {
            "id": "dq_duplicated_charge_batch",
            "skill": "data-quality-audit",
            "kind": "truth",
            "class": "duplicate_rows",
            "statement": f"{DQ['dup_rows']} charge rows processed on {DQ['dup_day'][0]} appear twice (identical in "
            f"every column): a batch exported twice; it also makes that day a false spike.",
            "entity": {"file": "charges.csv", "date": DQ["dup_day"][0]},
            "expected": {"metric": "n_exact_duplicate_rows", "value": DQ["dup_rows"], "tolerance": {"abs": 0}},
            "naive_mistake": "double-counts the batch, or calls the dunning retries (same charge_id) duplicates",
        },
        {
            "id": "dq_currency_country_mismatch",
            "skill": "data-quality-audit",
            "kind": "truth",
            "class": "inconsistent_currency",
            "statement": f"{len(DQ['currency_mismatch'])} AU charges carry currency USD (amounts are AUD prices).",
            "entity": {"file": "charges.csv", "charge_id": DQ["currency_mismatch"]},
            "expected": {
                "metric": "n_currency_country_mismatch",
                "value": len(DQ["currency_mismatch"]),
                "tolerance": {"abs": 0},
            },
            "naive_mistake": "converts them as USD",
        },
        # ---------------- data-quality-audit (look-alikes)
        {
            "id": "dq_shopify_blank_later_lines",
            "skill": "data-quality-audit",
            "kind": "lookalike",
            "class": "layout_blank",
            "statement": f"{DQ['later_lines']} Shopify rows have blank Email/Total/Created at: they are later line "
            f"items of multi-line orders (order fields only on the first line), not missing values.",
            "entity": {
                "file": "orders_export.csv",
                "columns": ["Email", "Financial Status", "Subtotal", "Total", "Created at"],
            },
            "expected": {"metric": "n_later_line_rows", "value": DQ["later_lines"], "tolerance": {"abs": 0}},
            "naive_mistake": "reports ~35 % missing emails/totals/dates",
        },
        {
            "id": "dq_discount_amount_not_rate",
            "skill": "data-quality-audit",
            "kind": "lookalike",
            "class": "unit_misread",
            "statement": f"Discount Amount is a currency amount (max {DQ['discount_amount_max']:.2f}), not a rate; "
            f"values above 1 are valid.",
            "entity": {"file": "orders_export.csv", "column": "Discount Amount"},
            "expected": {
                "metric": "n_discount_amount_above_1",
                "value": DQ["discount_amount_gt1"],
                "tolerance": {"abs": 0},
            },
            "naive_mistake": "flags discounts over 100 %",
        },
        {
            "id": "dq_mixed_utc_offsets",
            "skill": "data-quality-audit",
            "kind": "lookalike",
            "class": "tz_offsets",
            "statement": "Timestamps carry -05:00 and -04:00 (store time zone with DST; Shopify -0500/-0400, pet "
            "profiles +00, A/B 'Z'): all parse correctly, not a fault.",
            "entity": {"file": "charges.csv", "offsets": DQ["offsets"]},
            "expected": {
                "metric": "n_distinct_offsets_in_charges",
                "value": len(DQ["offsets"]),
                "tolerance": {"abs": 0},
            },
            "naive_mistake": "calls mixed offsets inconsistent timestamps",
        },
        {
            "id": "dq_dunning_retries_not_duplicates",
            "skill": "data-quality-audit",
            "kind": "lookalike",
            "class": "grain_misread",
            "statement": f"{DQ['retried_charges']} charge_ids appear on several rows: one row per attempt (dunning "
            f"retries), not duplicates.",
            "entity": {"file": "charges.csv", "column": "charge_id"},
            "expected": {
                "metric": "n_charge_ids_with_retries",
                "value": DQ["retried_charges"],
                "tolerance": {"abs": 0},
            },
            "naive_mistake": "deduplicates on charge_id and drops the successful retry or the error history",
        },
        # ---------------- ab-test-readout
        {
            "id": "ab_onboarding_null_clustered",
            "skill": "ab-test-readout",
            "kind": "truth",
            "class": "cluster_null",
            "statement": f"onboarding_v2 has no demonstrated effect: pets {ob['rate_t']:.1%} vs {ob['rate_c']:.1%}, "
            f"but with accounts as the unit (cluster-robust) p = {ob['p_cluster']:.2f} (account means "
            f"p = {ob['p_account_means']:.2f}).",
            "entity": {"test": "onboarding_v2"},
            "expected": {
                "metric": "p_value_account_clustered",
                "value": _r(ob["p_cluster"]),
                "tolerance": {"abs": 0.03},
            },
            "naive_mistake": f"pet-level two-proportion test p = {ob['p_pet']:.3f}: declares the new flow a winner",
        },
        {
            "id": "ab_onboarding_pet_level_significance",
            "skill": "ab-test-readout",
            "kind": "lookalike",
            "class": "wrong_unit_significance",
            "statement": f"Counting pets as independent gives p = {ob['p_pet']:.3f}; pets in one account share the "
            f"outcome, so this significance is an artefact.",
            "entity": {"test": "onboarding_v2", "unit": "pet"},
            "expected": {"metric": "p_value_pet_level_naive", "value": _r(ob["p_pet"]), "tolerance": {"abs": 0.01}},
            "naive_mistake": "ships onboarding_v2 on a significant lift",
        },
        {
            "id": "ab_pricing_page_srm",
            "skill": "ab-test-readout",
            "kind": "truth",
            "class": "sample_ratio_mismatch",
            "statement": f"pricing_page_v3 has a real sample-ratio mismatch at the account level: "
            f"{pp['accounts_t']} variant_b vs {pp['accounts_c']} control accounts (share "
            f"{pp['treat_account_share']:.3f}, p = {pp['srm_p_accounts']:.1e}); android_app accounts are "
            f"missing from variant_b - the readout is invalid.",
            "entity": {"test": "pricing_page_v3", "unit": "account"},
            "expected": {
                "metric": "treatment_account_share",
                "value": _r(pp["treat_account_share"]),
                "tolerance": {"abs": 0.005},
            },
            "naive_mistake": "reads the lift without an SRM check",
        },
        {
            "id": "ab_onboarding_pet_imbalance",
            "skill": "ab-test-readout",
            "kind": "lookalike",
            "class": "srm_wrong_unit",
            "statement": f"onboarding_v2 pets are split {ob['pets_t']}/{ob['pets_c']} (pet-level chi-square p = "
            f"{ob['srm_p_pets']:.3f}) but accounts {ob['accounts_t']}/{ob['accounts_c']} (p = "
            f"{ob['srm_p_accounts']:.2f}): no SRM at the randomisation unit.",
            "entity": {"test": "onboarding_v2", "unit": "pet"},
            "expected": {
                "metric": "srm_p_value_accounts",
                "value": _r(ob["srm_p_accounts"]),
                "tolerance": {"abs": 0.02},
            },
            "naive_mistake": "declares an SRM in onboarding_v2 from pet counts",
        },
        # ---------------- discount-effectiveness
        {
            "id": "disc_treats20_real_lift",
            "skill": "discount-effectiveness",
            "kind": "truth",
            "class": "real_lift",
            "statement": f"TREATS20 (US only, {ds(TREATS_PROMO[0])}..{ds(TREATS_PROMO[1])}) lifted treat units by "
            f"{DC['treats_did']:+.0%} against CA+AU over the same weeks (difference-in-differences vs the "
            f"10 weeks before).",
            "entity": {"code": "TREATS20", "country": "US", "window": [ds(TREATS_PROMO[0]), ds(TREATS_PROMO[1])]},
            "expected": {"metric": "did_lift_treat_units", "value": _r(DC["treats_did"]), "tolerance": {"abs": 0.08}},
            "naive_mistake": "dismisses it, or measures code users vs non-users",
        },
        {
            "id": "disc_puppy15_lifecycle",
            "skill": "discount-effectiveness",
            "kind": "lookalike",
            "class": "lifecycle_confounding",
            "statement": f"PUPPY15 subscriptions buy {DC['pup_naive']:+.0%} more lbs per box from box 4, but puppies "
            f"who signed up before the programme grew {DC['pup_ctrl_growth']:+.0%} over the same boxes: "
            f"appetite, not the code (difference {DC['pup_did']:+.1%}).",
            "entity": {"code": "PUPPY15", "plan": "PUP-*"},
            "expected": {"metric": "did_lift_lbs_per_box", "value": 0.0, "tolerance": {"abs": 0.10}},
            "naive_mistake": f"credits the code with a {DC['pup_naive']:+.0%} lift",
        },
        # ---------------- returns-and-cancellations
        {
            "id": "ret_sal30_excess_refunds",
            "skill": "returns-and-cancellations",
            "kind": "truth",
            "class": "real_excess",
            "statement": f"SAL-30 (Salmon 30 lb) is refunded {RE['SAL-30']['std_ratio']:.1f}x as often as other plans "
            f"at the same box number (raw rate {RE['SAL-30']['raw_rate']:.1%}).",
            "entity": {"plan": "SAL-30"},
            "expected": {
                "metric": "box_standardised_refund_ratio",
                "value": _r(RE["SAL-30"]["std_ratio"]),
                "tolerance": {"rel": 0.15},
            },
            "naive_mistake": "ranks it below PUP-04 on the raw refund rate, or misses it",
        },
        {
            "id": "ret_pup04_first_box_mix",
            "skill": "returns-and-cancellations",
            "kind": "lookalike",
            "class": "mix_effect",
            "statement": f"PUP-04 has a raw refund rate {RE['PUP-04']['raw_ratio']:.1f}x the others only because "
            f"{RE['PUP-04']['first_box_share']:.0%} of its boxes are first boxes (vs "
            f"{RE['PUP-04']['first_box_share_other']:.0%}); within box number it is no worse "
            f"({RE['PUP-04']['std_ratio']:.2f}x).",
            "entity": {"plan": "PUP-04"},
            "expected": {
                "metric": "box_standardised_refund_ratio",
                "value": _r(RE["PUP-04"]["std_ratio"]),
                "tolerance": {"abs": 0.2},
            },
            "naive_mistake": "flags PUP-04 as a quality problem",
        },
        # ---------------- profitability
        {
            "id": "prof_amazon_30lb_negative",
            "skill": "profitability",
            "kind": "truth",
            "class": "negative_contribution",
            "statement": f"Amazon's 30 lb bag (CHK-30, the only Amazon product) loses ${-PR['contribution_all']:,.0f} "
            f"after referral/FBA/refund fees, account fees and COGS over the data "
            f"(${-PR['contribution_sku_rows']:,.0f} before the account-level storage and subscription "
            f"fees; {PR['units']:.0f} units).",
            "entity": {"channel": "amazon", "sku": "CHK-30", "plan": "30lb"},
            "expected": {
                "metric": "contribution_usd",
                "value": _r(PR["contribution_all"], 2),
                "tolerance": {"abs": abs(PR["account_fees"]) + 1.0},
            },
            "naive_mistake": "profitable on gross margin, so kept or expanded",
        },
        {
            "id": "prof_amazon_gross_margin_positive",
            "skill": "profitability",
            "kind": "lookalike",
            "class": "gross_margin_only",
            "statement": f"On gross margin alone (principal net of promotions and refunds minus COGS) Amazon CHK-30 "
            f"looks profitable: +${PR['gross_margin']:,.0f}.",
            "entity": {"channel": "amazon", "sku": "CHK-30"},
            "expected": {"metric": "gross_margin_usd", "value": _r(PR["gross_margin"], 2), "tolerance": {"rel": 0.03}},
            "naive_mistake": "calls the Amazon 30 lb bag profitable",
        },
    ]
    return {
        "archetype": ARCHETYPE,
        "seed": seed,
        "business": business_facts(),
        "files": files_facts(),
        "plants": plants,
    }


# --------------------------------------------------------------------------------------------------------------------
# self-check:  cd /work/main && uv run python bench/archetypes/subscription_marketplace.py [seeds...]
# --------------------------------------------------------------------------------------------------------------------
def _digest(folder: pathlib.Path) -> str:
    h = hashlib.sha256()
    for f in sorted(folder.iterdir()):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def _close(a, b, tol=1e-6) -> bool:
    if isinstance(a, dict):
        return all(_close(a[k], b[k], tol) for k in a)
    return abs(float(a) - float(b)) <= tol * max(1.0, abs(float(b)))


def _independent_checks(out: pathlib.Path, truth: dict) -> None:
    """Re-derive a few plants with separate, plain pandas code (not the functions that produced the truth)."""
    P = {p["id"]: p for p in truth["plants"]}
    ch = pd.read_csv(out / "charges.csv", dtype=str, keep_default_na=False)
    su = pd.read_csv(out / "subscriptions.csv", dtype=str, keep_default_na=False)
    amz = pd.read_csv(out / "amazon_settlement.tsv", sep="\t", dtype=str, keep_default_na=False)
    pc = pd.read_csv(out / "product_costs.csv")
    # recently cancelled customers (other route: customers with no live subscription, max cancel date in window)
    live = set(su.loc[su["status"] != "CANCELLED", "customer_id"])
    canc = su[~su["customer_id"].isin(live)].copy()
    canc["d"] = pd.to_datetime(canc["cancelled_at"], utc=True, format="ISO8601").dt.tz_convert("America/New_York")
    lastd = canc.groupby("customer_id")["d"].max().dt.date
    assert (
        int((lastd >= dt.date.fromordinal(RECENT_FROM)).sum())
        == P["clv_recent_cancels_zero_value"]["expected"]["value"]
    )
    # duplicated rows (other route: group by every column)
    g = ch.groupby(list(ch.columns), sort=False).size()
    assert int((g - 1).sum()) == P["dq_duplicated_charge_batch"]["expected"]["value"]
    # Amazon contribution (other route: transactions only, COGS from the cost file)
    tx = amz[amz["settlement-start-date"] == ""]
    units = pd.to_numeric(
        tx.loc[
            (tx["transaction-type"] == "Order")
            & (tx["amount-type"] == "ItemPrice")
            & (tx["amount-description"] == "Principal"),
            "quantity-purchased",
        ]
    ).sum()
    cogs = float(pc.loc[pc["SKU"] == "CHK-30", "Unit COGS (USD)"].iloc[0])
    contrib = pd.to_numeric(tx["amount"]).sum() - units * cogs
    assert abs(contrib - P["prof_amazon_30lb_negative"]["expected"]["value"]) < 0.05, contrib
    assert contrib < 0 < P["prof_amazon_gross_margin_positive"]["expected"]["value"]
    # every settlement's total-amount equals the sum of its rows
    amz["a"] = pd.to_numeric(amz["amount"].replace("", "0"))
    s = amz.groupby("settlement-id")["a"].sum()
    t = (
        pd.to_numeric(amz.loc[amz["total-amount"] != "", "total-amount"])
        .groupby(amz.loc[amz["total-amount"] != "", "settlement-id"])
        .sum()
    )
    assert (abs(s - t) < 0.02).all()
    # price rise: every CAD/AUD list price rose by 5.0 % (+-0.05 pp rounding), USD unchanged
    ok = ch[ch["status"].isin(REV_STATUS)]
    lp = ok.assign(p=pd.to_numeric(ok["line_item_price"]), d=ok["processed_at"].str.slice(0, 10))
    for cur in ("CAD", "AUD"):
        x = lp[lp["currency"] == cur]
        before = x[x["d"] < ds(PRICE_RISE_DAY)].groupby("line_item_sku")["p"].median()
        after = x[x["d"] >= ds(PRICE_RISE_DAY)].groupby("line_item_sku")["p"].median()
        r = (after / before - 1).dropna()
        assert ((r - 0.05).abs() < 0.0006).all(), r
    # sanity of the planted structure
    E = {k: v["expected"]["value"] if v["expected"] else None for k, v in P.items()}
    assert E["bva_au_p4_miss"] < -0.2 and abs(E["bva_uniform_plan_stretch"] + 0.029) < 0.012
    assert E["kpi_gateway_outage"] < 0.5 and E["kpi_period_start_dips"] < 0.35
    assert E["ret_pause_campaign_period_effect"] < 0.9
    assert E["ret_sal30_excess_refunds"] > 1.8 and 0.7 < E["ret_pup04_first_box_mix"] < 1.3
    assert E["disc_treats20_real_lift"] > 0.25
    assert E["ab_onboarding_null_clustered"] > 0.10 and E["ab_onboarding_pet_level_significance"] < 0.05
    assert E["ab_onboarding_pet_imbalance"] > 0.3 and E["ab_pricing_page_srm"] < 0.485
    assert E["spr_fx_masks_price_rise"] > 0
    assert E["rfm_active_in_dunning"] >= 3 and E["clv_paused_not_churned"] >= 20
    assert E["fc_53_week_p12"] > -0.10


def _selfcheck(seeds) -> None:
    import time

    for seed in seeds:
        with tempfile.TemporaryDirectory() as d1, tempfile.TemporaryDirectory() as d2:
            t0 = time.process_time()
            w0 = time.time()
            truth = generate(pathlib.Path(d1), seed)
            cpu, wall = time.process_time() - t0, time.time() - w0
            generate(pathlib.Path(d2), seed)
            assert _digest(pathlib.Path(d1)) == _digest(pathlib.Path(d2)), "not byte-identical"
            out = pathlib.Path(d1)
            on_disk = json.loads((out / "truth.json").read_text())
            assert on_disk == json.loads(json.dumps(truth))
            # re-read every file and recompute every expected value
            again = build_truth(
                out,
                seed,
                {
                    "forecast_weeks": ["", ""],
                    "forecast_mean_weekly_bags": 0.0,
                    "recent_cancel_customers": on_disk["plants"][4]["entity"]["customers"],
                    "before_signup_orders": next(p for p in on_disk["plants"] if p["id"] == "dq_orders_before_signup")[
                        "entity"
                    ]["orders"],
                    "refund_before_sale_charge_ids": next(
                        p for p in on_disk["plants"] if p["id"] == "dq_refund_before_sale"
                    )["entity"]["charge_id"],
                    "currency_mismatch_charge_ids": next(
                        p for p in on_disk["plants"] if p["id"] == "dq_currency_country_mismatch"
                    )["entity"]["charge_id"],
                    "duplicate_rows": next(p for p in on_disk["plants"] if p["id"] == "dq_duplicated_charge_batch")[
                        "expected"
                    ]["value"],
                },
            )
            for p_old, p_new in zip(on_disk["plants"], again["plants"]):
                if p_old["id"] == "fc_weekly_bags":
                    continue
                assert p_old["id"] == p_new["id"]
                assert _close(p_old["expected"]["value"], p_new["expected"]["value"]), p_old["id"]
            _independent_checks(out, on_disk)
            rows = sum(
                len(pd.read_csv(f, sep="\t" if f.suffix == ".tsv" else ",", dtype=str))
                for f in out.iterdir()
                if f.suffix in (".csv", ".tsv")
            )
            assert 5_000 <= rows <= 200_000, rows
            skills = {p["skill"] for p in on_disk["plants"]}
            for sk in skills:
                kinds = {p["kind"] for p in on_disk["plants"] if p["skill"] == sk}
                assert kinds == {"truth", "lookalike"}, sk
            assert len(skills) == 12
            print(
                f"seed {seed}: ok  rows={rows}  cpu={cpu:.1f}s wall={wall:.1f}s  "
                + "  ".join(
                    f"{p['id']}={p['expected']['value'] if not isinstance(p['expected']['value'], dict) else '{..}'}"
                    for p in on_disk["plants"]
                    if p["kind"] == "truth"
                )
            )


if __name__ == "__main__":
    _selfcheck([int(a) for a in sys.argv[1:]] or range(1, 11))
