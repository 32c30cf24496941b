"""Archetype `b2b_multicurrency`: an industrial-supplies distributor (DE01, FR01, GB01) invoicing in EUR and GBP.

Written independently from the brief only (see b2b_multicurrency.md). `generate(out, seed)` writes the raw exports
of an SAP-like ERP, the finance team's FX table, sales leadership's budget workbook and a web A/B-test export, and
returns/writes `truth.json` with the planted findings (truths) and their look-alikes.

How expected values are computed: every file is first built as a typed table (the exact rows that are then
formatted and written); `_metrics()` computes every data-derived expected value from those typed tables — the
same function the self-check runs on the tables parsed back from disk, so a written file that does not parse back
to the same number fails the check. Values that are properties of the planted process (the true discount effects,
the 12-month CLV, the next-quarter demand) come from the planted parameters or from re-simulating the planted
process beyond the export's end (never exported); the self-check compares them with what the files show.

Run `cd /work/main && uv run python bench/archetypes/b2b_multicurrency.py` for the self-check (seeds 1..10).
"""

from __future__ import annotations

import datetime as dt
import io
import json
import math
import pathlib
import re
import sys
import tempfile
import time
import zipfile

import numpy as np
import pandas as pd

ARCHETYPE = "b2b_multicurrency"
START = dt.date(2023, 4, 1)  # first day of FY2024 (fiscal years are named by the year they END)
END = dt.date(2026, 3, 31)  # last day of FY2026 = export cut-off
FUT_END = dt.date(2027, 3, 31)  # planted process simulated to here (not exported): CLV, demand holdout
PAD_END = dt.date(2027, 6, 30)
T_END = (END - START).days
T_FUT = (FUT_END - START).days
NDAYS = (PAD_END - START).days + 1


def _t(d: dt.date) -> int:
    return (d - START).days


def _d(t: int) -> dt.date:
    return START + dt.timedelta(days=int(t))


ENTS = ["DE01", "FR01", "GB01"]
REGION = {"DE01": "Germany", "FR01": "France", "GB01": "United Kingdom"}
TZ = {"DE01": "Europe/Berlin", "FR01": "Europe/Paris", "GB01": "Europe/London"}
PGS = ["Fasteners", "Power Tools", "Safety & PPE", "Abrasives", "Hydraulics", "Welding"]
PG_CODE = {
    "Fasteners": "FAS",
    "Power Tools": "PWT",
    "Safety & PPE": "PPE",
    "Abrasives": "ABR",
    "Hydraulics": "HYD",
    "Welding": "WLD",
}
CODE_PG = {v: k for k, v in PG_CODE.items()}
PG_PRICE = {
    "Fasteners": (8, 40),
    "Power Tools": (120, 600),
    "Safety & PPE": (15, 90),
    "Abrasives": (10, 60),
    "Hydraulics": (40, 300),
    "Welding": (25, 250),
}
PG_KG = {"Fasteners": 4.0, "Power Tools": 3.0, "Safety & PPE": 0.6, "Abrasives": 1.2, "Hydraulics": 2.0, "Welding": 1.5}
DIRECT_PG_W = {
    "Fasteners": 0.24,
    "Power Tools": 0.12,
    "Safety & PPE": 0.17,
    "Abrasives": 0.15,
    "Hydraulics": 0.16,
    "Welding": 0.16,
}
SKU_NAMES = {
    "Fasteners": [
        "Hex bolt M8x40 8.8 zinc (box 200)",
        "Hex nut M10 DIN934 (box 500)",
        "Washer M12 A2 (box 500)",
        "Socket cap screw M6x20 12.9 (box 200)",
        "Threaded rod M12x1000 (10 pc)",
        "Anchor bolt M10x95 (box 50)",
        "Self-drilling screw 4.8x19 (box 500)",
        "Rivet 4.8x12 alu (box 1000)",
        "Spring washer M8 (box 1000)",
        "Wood screw 5x60 (box 200)",
    ],
    "Power Tools": [
        "Cordless drill 18V 2x5Ah",
        "Angle grinder 125mm 1400W",
        "Impact driver 18V",
        "Rotary hammer SDS+ 800W",
        "Circular saw 190mm",
        "Jigsaw 720W",
        "Magnetic drill 1200W",
        "Cordless band saw 18V",
        "Die grinder 500W",
        "Battery pack 18V 8Ah",
    ],
    "Safety & PPE": [
        "Cut-resistant glove level C (12 pr)",
        "Safety goggles clear (10 pc)",
        "Hard hat EN397",
        "Ear defender SNR 30",
        "FFP2 mask (box 20)",
        "Hi-vis vest EN20471 (5 pc)",
        "Safety boot S3",
        "Fall-arrest harness",
        "Chemical glove nitrile (12 pr)",
        "Face shield",
    ],
    "Abrasives": [
        "Flap disc 125mm P80 (10 pc)",
        "Cutting disc 125x1.0 (25 pc)",
        "Grinding disc 125x6 (10 pc)",
        "Sanding belt 75x533 P120 (10 pc)",
        "Fibre disc 125 P36 (25 pc)",
        "Wire cup brush 100mm",
        "Non-woven pad (10 pc)",
        "Sanding roll 115mm P180",
        "Mounted point set",
        "Polishing compound 1kg",
    ],
    "Hydraulics": [
        "Hydraulic hose 1/2in 2SN (per 10 m)",
        "Quick coupling 1/2in ISO A",
        "Ball valve 3/8in 350 bar",
        "Hydraulic fitting kit 80 pc",
        "Pressure gauge 0-400 bar",
        "Hydraulic filter element",
        "Hand pump 700 bar",
        "Hydraulic cylinder 10t",
        "Hose crimp ferrule (50 pc)",
        "Seal kit O-ring 382 pc",
    ],
    "Welding": [
        "MIG wire SG2 1.0mm 15kg",
        "Welding electrode 3.2mm (5 kg)",
        "TIG rod 2.4mm (5 kg)",
        "Auto-darkening helmet",
        "MIG torch 250A 4m",
        "Contact tip M6 1.0 (25 pc)",
        "Welding glove (6 pr)",
        "Earth clamp 400A",
        "Gas regulator Ar/CO2",
        "Welding blanket 2x2m",
    ],
}


# ----------------------------------------------------------------------------------------------------- calendar
def _easter(y: int) -> dt.date:
    a, b, c = y % 19, y // 100, y % 100
    d, e = b // 4, b % 4
    f = (b + 8) // 25
    g = (b - f + 1) // 3
    h = (19 * a + b - d - g + 15) % 30
    i, k = c // 4, c % 4
    l_ = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * l_) // 451
    month = (h + l_ - 7 * m + 114) // 31
    day = ((h + l_ - 7 * m + 114) % 31) + 1
    return dt.date(y, month, day)


def _nth_weekday(y, m, wd, n):
    d = dt.date(y, m, 1)
    d += dt.timedelta(days=(wd - d.weekday()) % 7)
    return d + dt.timedelta(weeks=n - 1)


def _last_weekday(y, m, wd):
    d = dt.date(y + (m == 12), m % 12 + 1, 1) - dt.timedelta(days=1)
    return d - dt.timedelta(days=(d.weekday() - wd) % 7)


def public_holidays(cc: str, y: int) -> dict:
    """National public holidays (DE: nationwide; FR: jours fériés; GB: England & Wales bank holidays)."""
    E, D, td = _easter(y), dt.date, dt.timedelta
    if cc == "DE01":
        return {
            D(y, 1, 1): "Neujahr",
            E - td(2): "Karfreitag",
            E + td(1): "Ostermontag",
            D(y, 5, 1): "Tag der Arbeit",
            E + td(39): "Christi Himmelfahrt",
            E + td(50): "Pfingstmontag",
            D(y, 10, 3): "Tag der Deutschen Einheit",
            D(y, 12, 25): "1. Weihnachtstag",
            D(y, 12, 26): "2. Weihnachtstag",
        }
    if cc == "FR01":
        return {
            D(y, 1, 1): "Jour de l'an",
            E + td(1): "Lundi de Pâques",
            D(y, 5, 1): "Fête du Travail",
            D(y, 5, 8): "Victoire 1945",
            E + td(39): "Ascension",
            E + td(50): "Lundi de Pentecôte",
            D(y, 7, 14): "Fête nationale",
            D(y, 8, 15): "Assomption",
            D(y, 11, 1): "Toussaint",
            D(y, 11, 11): "Armistice",
            D(y, 12, 25): "Noël",
        }
    h = {}
    ny = D(y, 1, 1)
    while ny.weekday() >= 5:
        ny += td(1)
    h[ny] = "New Year's Day"
    h[E - td(2)] = "Good Friday"
    h[E + td(1)] = "Easter Monday"
    h[_nth_weekday(y, 5, 0, 1)] = "Early May bank holiday"
    if y == 2023:
        h[D(2023, 5, 8)] = "Coronation bank holiday"
    h[_last_weekday(y, 5, 0)] = "Spring bank holiday"
    h[_last_weekday(y, 8, 0)] = "Summer bank holiday"
    c1, c2 = D(y, 12, 25), D(y, 12, 26)
    if c1.weekday() == 5:
        c1, c2 = D(y, 12, 27), D(y, 12, 28)
    elif c1.weekday() == 6:
        c1, c2 = D(y, 12, 27), D(y, 12, 26)
    elif c2.weekday() == 5:
        c2 = D(y, 12, 28)
    h[c1], h[c2] = "Christmas Day", "Boxing Day"
    return h


def _shutdown(d: dt.date) -> bool:
    return (d.month == 12 and d.day >= 24) or (d.month == 1 and d.day == 1)


class Cal:
    def __init__(self):
        self.dates = [START + dt.timedelta(i) for i in range(NDAYS)]
        self.month = np.array([d.month for d in self.dates])
        self.year = np.array([d.year for d in self.dates])
        self.wd = np.array([d.weekday() for d in self.dates])
        self.fy = self.year + (self.month >= 4)
        self.fp = (self.month - 4) % 12 + 1
        self.ym = self.year * 100 + self.month
        self.hol = {cc: {} for cc in ENTS}
        for cc in ENTS:
            for y in range(2023, 2028):
                self.hol[cc].update(public_holidays(cc, y))
        self.bday = np.zeros((3, NDAYS), bool)
        for e, cc in enumerate(ENTS):
            for i, d in enumerate(self.dates):
                self.bday[e, i] = d.weekday() < 5 and d not in self.hol[cc] and not _shutdown(d)
        self.bidx = [np.flatnonzero(self.bday[e]) for e in range(3)]
        self.pos = [np.searchsorted(b, np.arange(NDAYS), "left") for b in self.bidx]

    def nb(self, e, t, k=0):
        """k-th business day of entity e on/after day t (vectorised over e, t, k)."""
        if np.isscalar(e) and np.isscalar(t) and np.isscalar(k) and 0 <= t < NDAYS:
            b = self.bidx[int(e)]
            return int(b[min(self.pos[int(e)][int(t)] + int(k), len(b) - 1)])
        e, t, k = np.broadcast_arrays(np.asarray(e), np.asarray(t), np.asarray(k))
        out = np.empty(e.shape, dtype=np.int64)
        for ei in range(3):
            m = e == ei
            if m.any():
                pos = np.searchsorted(self.bidx[ei], t[m], "left") + k[m]
                out[m] = self.bidx[ei][np.minimum(pos, len(self.bidx[ei]) - 1)]
        return out

    def pb(self, e, t):
        """last business day of entity e on/before day t (scalar)."""
        pos = np.searchsorted(self.bidx[e], t, "right") - 1
        return int(self.bidx[e][pos])


def fy_of(d: dt.date) -> int:
    return d.year + (d.month >= 4)


def fq_label(d: dt.date) -> str:
    return f"FY{fy_of(d)}-Q{((d.month - 4) % 12) // 3 + 1}"


SEASON = np.array(
    [  # Jan..Dec demand multipliers per entity (August holidays weaker in the UK)
        [0.96, 1.0, 1.08, 1.0, 1.02, 1.03, 0.96, 0.78, 1.05, 1.07, 1.05, 0.86],
        [0.96, 1.0, 1.08, 1.0, 1.0, 1.03, 0.92, 0.70, 1.06, 1.07, 1.05, 0.86],
        [0.97, 1.0, 1.07, 1.0, 1.02, 1.02, 0.98, 0.92, 1.04, 1.06, 1.05, 0.84],
    ]
)


# --------------------------------------------------------------------------------------------------- formatting
def _fmt_de(x: float, thousands: bool = False) -> str:
    s = f"{abs(x):,.2f}" if thousands else f"{abs(x):.2f}"
    s = s.replace(",", "X").replace(".", ",").replace("X", ".")
    return s + ("-" if x < 0 else "")


def _fmt_en(x: float) -> str:
    return f"{x:.2f}"


def _cust_no(i: int) -> str:
    return f"{i:010d}"


def _write_csv(path: pathlib.Path, df: pd.DataFrame, sep=",", encoding="utf-8"):
    txt = df.to_csv(index=False, sep=sep, lineterminator="\r\n")
    path.write_bytes(txt.encode(encoding))


# --------------------------------------------------------------------------------------------------- generator
def generate(out: pathlib.Path, seed: int) -> dict:
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng([int(seed), 4242])
    cal = Cal()

    # ---- roles of product groups (seed-dependent so the plants move between seeds)
    heavy = str(rng.choice(["Power Tools", "Welding"]))  # partner-heavy (returns mix)
    thin = str(rng.choice([p for p in ["Safety & PPE", "Abrasives", "Welding", "Power Tools"] if p != heavy]))
    rest = [p for p in PGS if p not in (heavy, thin, "Fasteners")]
    vol_pg = str(rng.choice(rest))  # real volume loss FY2026
    short_region_cc = "FR01"
    short_pg = str(rng.choice([p for p in PGS if p not in (vol_pg,)]))
    short_start = int(rng.choice([3, 4, 5]))  # fiscal period the loss starts
    late_pg = str(rng.choice([p for p in PGS if p not in (vol_pg, short_pg)]))
    late_fp = int(rng.choice([4, 5, 6, 7, 8]))  # order month (fiscal period)
    bad_cohort_q = int(rng.integers(2, 8))  # FY2024-Q3 .. FY2025-Q4
    e_pg = {p: i for i, p in enumerate(PGS)}

    # ---- FX: GBP per 1 EUR, monthly average and month-end (GBP weakens through FY2026)
    months = [
        (y, m)
        for y in range(2023, 2028)
        for m in range(1, 13)
        if dt.date(2023, 4, 1) <= dt.date(y, m, 1) <= dt.date(2027, 6, 1)
    ]
    fx_avg, fx_eom = {}, {}
    for i, (y, m) in enumerate(months):
        fy = y + (m >= 4)
        fp = (m - 4) % 12 + 1
        if fy == 2024:
            base = 0.866 - 0.002 * (fp - 6) / 6
        elif fy == 2025:
            base = 0.848 - 0.004 * (fp - 6) / 6
        else:
            base = 0.880 + (0.985 - 0.880) * (fp - 1) / 11 if fy == 2026 else 0.985
        fx_avg[y * 100 + m] = round(base + rng.normal(0, 0.0035), 4)
        fx_eom[y * 100 + m] = round(fx_avg[y * 100 + m] + rng.normal(0.002 if fy == 2026 else 0, 0.004), 4)
    uk_target = float(rng.uniform(-0.08, -0.045))  # planted: UK revenue change in EUR, FY2026 vs FY2025

    # ---- catalogue: 60 SKUs, list prices EUR & GBP per fiscal year, standard costs
    skus, sku_pg, sku_desc, list_eur25 = [], [], [], []
    for p in PGS:
        lo, hi = PG_PRICE[p]
        for k in range(10):
            skus.append(f"{PG_CODE[p]}-{10010 + 17 * k + int(rng.integers(0, 9))}")
            sku_pg.append(e_pg[p])
            sku_desc.append(SKU_NAMES[p][k])
            list_eur25.append(round(float(np.exp(rng.uniform(np.log(lo), np.log(hi)))), 2))
    launch_pg = str(rng.choice([p for p in ["Power Tools", "Hydraulics", "Welding"] if p != heavy]))
    skus.append(f"{PG_CODE[launch_pg]}-20010")
    sku_pg.append(e_pg[launch_pg])
    sku_desc.append(SKU_NAMES[launch_pg][0] + " - Gen 2 (launched Feb 2026)")
    list_eur25.append(list_eur25[e_pg[launch_pg] * 10] * 1.1)
    NS = len(skus)
    sku_pg = np.array(sku_pg)
    list_eur25 = np.array(list_eur25)
    list_gbp25 = np.round(list_eur25 * 0.86 * rng.uniform(0.97, 1.03, NS), 2)
    eur_rise = np.round(rng.uniform(0.035, 0.045, NS), 3)
    gbp_rise = np.round(rng.uniform(0.055, 0.065, NS), 3)
    list_eur26 = np.round(list_eur25 * (1 + eur_rise), 2)
    list_gbp26 = np.round(list_gbp25 * (1 + gbp_rise), 2)
    LIST = np.zeros((NS, 2, 2))  # sku, currency (0 EUR, 1 GBP), regime (0 = FY2024/25, 1 = FY2026+)
    LIST[:, 0, 0], LIST[:, 1, 0], LIST[:, 0, 1], LIST[:, 1, 1] = list_eur25, list_gbp25, list_eur26, list_gbp26
    cost_ratio = np.where(sku_pg == e_pg[thin], rng.uniform(0.675, 0.695, NS), rng.uniform(0.46, 0.54, NS))
    cost25 = np.round(list_eur25 * cost_ratio, 2)
    cost26 = np.round(cost25 * 1.025, 2)
    sku_w = np.array([1 / (k + 1) ** 1.15 for k in range(10)])
    sku_w /= sku_w.sum()
    defect_sku = int(
        rng.choice(
            [i for i in range(60) if sku_pg[i] not in (e_pg[heavy], e_pg["Power Tools"]) and i % 10 in (2, 3, 4)]
        )
    )

    # ---- customers: direct (non-contractual) and partners (resellers, bulk every 2-4 months)
    reps = {
        "DE01": ["M. Becker", "S. Wagner", "T. Hoffmann", "K. Schulz"],
        "FR01": ["C. Martin", "J. Bernard", "L. Dubois"],
        "GB01": ["R. Taylor", "E. Clarke", "D. Evans"],
    }
    channel_mgr = {"DE01": "P. Richter (Channel)", "FR01": "A. Moreau (Channel)", "GB01": "S. Hughes (Channel)"}
    pilot_reps = {
        cc: sorted(str(x) for x in rng.choice(reps[cc], 2 if cc == "DE01" else 1, replace=False)) for cc in ENTS
    }

    cust = {
        k: []
        for k in [
            "seg",
            "ent",
            "created_t",
            "first_t",
            "alive0",
            "lam",
            "g",
            "p",
            "size",
            "disc",
            "campaign",
            "country",
            "rep",
            "cycle",
            "churn_t",
        ]
    }

    def add(seg, ent, created_t, first_t, alive0, lam, g, p, size, disc, campaign, country, rep, cycle, churn_t):
        for k, v in zip(
            cust.keys(),
            [seg, ent, created_t, first_t, alive0, lam, g, p, size, disc, campaign, country, rep, cycle, churn_t],
        ):
            cust[k].append(v)

    def country_for(cc):
        u = rng.random()
        if cc == "DE01":
            return "DE" if u < 0.88 else ("AT" if u < 0.96 else "CH")
        if cc == "FR01":
            return "FR" if u < 0.85 else ("BE" if u < 0.95 else "LU")
        return "GB" if u < 0.92 else "IE"

    def direct_attrs(campaign=False):
        lam = rng.gamma(3.0, 2.0)
        grower = rng.random() < 0.10
        g = rng.normal(0.30, 0.10) if grower else rng.normal(-0.01, 0.04)
        p = rng.gamma(2.0, 3.0) if campaign else rng.gamma(3.0, 0.1)  # drop-out hazard per year
        if campaign:
            lam *= 0.7
        return lam, g, p, float(np.exp(rng.normal(0, 0.35))), round(float(rng.uniform(0, 0.08)) * 200) / 200

    # legacy direct accounts (created 2010 .. Mar 2023)
    for _ in range(1900):
        e = int(rng.choice(3, p=[0.45, 0.25, 0.30]))
        ct = -int(rng.integers(1, 13 * 365))
        lam, g, p, size, disc = direct_attrs()
        add(
            "Direct",
            e,
            ct,
            -1,
            rng.random() < 0.8,
            lam,
            g,
            p,
            size,
            disc,
            False,
            country_for(ENTS[e]),
            str(rng.choice(reps[ENTS[e]])),
            0.0,
            10**9,
        )
    # new direct accounts per month, Apr 2023 .. Mar 2027 (those after Mar 2026 only feed the holdout simulation)
    for y, m in months:
        if dt.date(y, m, 1) > FUT_END:
            break
        t0 = _t(dt.date(y, m, 1))
        q_idx = ((y + (m >= 4)) - 2024) * 4 + ((m - 4) % 12) // 3
        n_new = int(rng.poisson(25))
        n_camp = int(rng.poisson(40)) if q_idx == bad_cohort_q else 0
        for j in range(n_new + n_camp):
            e = int(rng.choice(3, p=[0.42, 0.23, 0.35]))
            ct = int(cal.nb(e, t0 + int(rng.integers(0, 28))))
            camp = j >= n_new or (q_idx == bad_cohort_q and rng.random() < 0.3)
            lam, g, p, size, disc = direct_attrs(camp)
            ft = ct if rng.random() < 0.35 else int(cal.nb(e, ct + int(rng.integers(1, 15))))
            add(
                "Direct",
                e,
                ct,
                ft,
                True,
                lam,
                g,
                p,
                size,
                disc,
                camp,
                country_for(ENTS[e]),
                str(rng.choice(reps[ENTS[e]])),
                0.0,
                10**9,
            )
    # partners
    for j in range(130):
        legacy = j < 112
        e = int(rng.choice(3, p=[0.5, 0.25, 0.25])) if legacy else int(rng.choice(2, p=[0.65, 0.35]))
        ct = -int(rng.integers(200, 15 * 365)) if legacy else int(cal.nb(e, int(rng.integers(30, T_END - 120))))
        cyc = float(rng.uniform(60, 120))
        ft = -1 if legacy else int(cal.nb(e, ct + int(rng.integers(0, 10))))
        add(
            "Partner",
            e,
            ct,
            ft,
            True,
            0.0,
            0.0,
            0.0,
            float(np.exp(rng.normal(0, 0.4))),
            0.25,
            False,
            {"DE01": "DE", "FR01": "FR", "GB01": "GB"}[ENTS[e]] if rng.random() < 0.9 else country_for(ENTS[e]),
            channel_mgr[ENTS[e]],
            cyc,
            10**9,
        )
    C = {k: np.array(v) for k, v in cust.items()}
    n_all = len(C["seg"])
    is_dir = C["seg"] == "Direct"
    partner_idx = np.flatnonzero(~is_dir)
    # lapsed partners: stop ordering between Oct 2024 and Jun 2025 (no order in the last 9+ months)
    lapsed = rng.choice([j for j in partner_idx[:112] if C["ent"][j] < 2], 10, replace=False)
    C["churn_t"][lapsed] = rng.integers(_t(dt.date(2024, 10, 1)), _t(dt.date(2025, 6, 30)), 10)
    # currency: GB01 bills GBP except Irish customers (EUR); DE01 and FR01 bill EUR
    C["cur"] = np.where((C["ent"] == 2) & (C["country"] != "IE"), 1, 0)
    # product-group preferences
    w_dir = np.array([DIRECT_PG_W[p] for p in PGS])
    w_dir[e_pg[heavy]] = 0.05
    w_dir /= w_dir.sum()
    w_par = np.full(6, (1 - 0.40) / 5)
    w_par[e_pg[heavy]] = 0.40
    pref = np.zeros((n_all, 6))
    pref[is_dir] = rng.dirichlet(w_dir * 8, is_dir.sum())
    pref[~is_dir] = rng.dirichlet(w_par * 30, (~is_dir).sum())
    cumpref = np.cumsum(pref, axis=1)
    # high-value direct accounts that stop buying 5-8 months before the cut-off (RFM "at risk")
    top = np.flatnonzero(is_dir & (C["created_t"] < 0) & C["alive0"])
    top = top[np.argsort(-(C["lam"][top] * C["size"][top]), kind="stable")][: max(40, len(top) // 6)]
    forced = rng.choice(top, 36, replace=False)
    force_t = np.full(n_all, 10**9)
    force_t[forced] = rng.integers(T_END - 240, T_END - 165, len(forced))

    # ---- planted programme / calendar dates
    T_VR = _t(dt.date(2025, 4, 1))
    T_LAUNCH = _t(dt.date(2026, 2, 1))
    T_PILOT = _t(dt.date(2025, 7, 1))
    T_TEST0, T_TEST1 = _t(dt.date(2025, 10, 6)), _t(dt.date(2025, 12, 12))
    all_hol = set()
    for cc in ENTS:
        all_hol |= set(cal.hol[cc])
    cands = []
    for t in range(_t(dt.date(2025, 4, 1)), _t(dt.date(2026, 3, 20))):
        d = _d(t)
        if (
            d.weekday() in (1, 2, 3)
            and d.month not in (4, 5, 8, 12, 1)
            and not any((d + dt.timedelta(k)) in all_hol for k in range(-4, 5))
        ):
            cands.append(t)
    T_OUT = int(rng.choice(cands))
    is_pilot_rep = np.array([C["rep"][i] in pilot_reps[ENTS[C["ent"][i]]] for i in range(n_all)]) & is_dir
    vr_growth = np.zeros(n_all, bool)
    pilot = np.zeros(n_all, bool)

    # ---- daily simulation of the direct stream (Pareto/NBD-like: Poisson buying with growth, exponential lifetime)
    def sim_direct(r, t0, t1, alive, hooks):
        idx = np.flatnonzero(is_dir)
        lam, g, p, ent, ft = C["lam"][idx], C["g"][idx], C["p"][idx], C["ent"][idx], C["first_t"][idx]
        ftd = force_t[idx]
        seas = SEASON[ent]
        oc, ot = [], []
        cache = {}
        for t in range(t0, t1 + 1):
            if t in hooks:
                hooks[t](
                    np.concatenate(oc) if oc else np.zeros(0, int),
                    np.concatenate(ot) if ot else np.zeros(0, int),
                    alive,
                )
            alive &= ftd > t
            alive &= ~((ft < t) & (r.random(len(idx)) < p / 365.0))
            bd = cal.bday[ent, t]
            if not bd.any():
                continue
            mk = (cal.ym[t], t >= T_PILOT)
            if mk != cache.get("k"):
                mult = np.where(pilot[idx] & (t >= T_PILOT), 1.20, 1.0)
                cache["rate"] = lam * np.exp(g * min(t, 1278) / 365.0) * seas[:, cal.month[t] - 1] * mult / 250.0
                cache["k"] = mk
            rate = cache["rate"]
            fo = (ft == t) & alive
            buy = (alive & (ft < t) & bd & (r.random(len(idx)) < rate)) | fo
            if buy.any():
                b = np.flatnonzero(buy)
                oc.append(idx[b])
                ot.append(np.full(len(b), t))
        return (np.concatenate(oc), np.concatenate(ot)) if oc else (np.zeros(0, int), np.zeros(0, int))

    snap = {}

    def vr_hook(oc, ot, alive):
        h1 = (ot >= 0) & (ot <= _t(dt.date(2024, 3, 31)))  # FY2024
        h2 = (ot >= _t(dt.date(2024, 4, 1))) & (ot <= _t(dt.date(2025, 3, 31)))  # FY2025
        c1 = np.bincount(oc[h1], minlength=n_all)
        c2 = np.bincount(oc[h2], minlength=n_all)
        idx = np.flatnonzero(is_dir)
        # reps nominate accounts they know to be expanding (their latent growth, judged with noise)
        ok = alive & (c1[idx] >= 2) & (c2[idx] >= 2) & (force_t[idx] > 10**8)
        cand = idx[ok]
        score = C["g"][cand] + rng.normal(0, 0.05, len(cand))
        sel = cand[np.argsort(-score, kind="stable")][:150]
        vr_growth[sel] = True
        pilot[:] = is_pilot_rep & ~vr_growth

    def snap_hook(name):
        def f(oc, ot, alive):
            snap[name] = alive.copy()

        return f

    alive_d = C["alive0"][is_dir].copy()
    rng_d = np.random.default_rng([int(seed), 1])
    dc, dtm = sim_direct(
        rng_d, 0, T_FUT, alive_d, {T_VR: vr_hook, T_TEST0: snap_hook("test"), T_END + 1: snap_hook("end")}
    )

    # ---- partners: bulk orders every 60-120 days (own cycle), lapsed ones stop
    def sim_partners(r, from_state=None):
        oc, ot, gf = [], [], []
        for j in partner_idx:
            e, cyc = int(C["ent"][j]), C["cycle"][j]
            if from_state is None:
                t = int(cal.nb(e, int(r.uniform(0, cyc)))) if C["first_t"][j] < 0 else int(C["first_t"][j])
            else:
                last = from_state.get(j)
                if last is None or C["churn_t"][j] < 10**8:
                    continue
                lo = max(0.8 * cyc, T_END + 1 - last)
                t = int(cal.nb(e, last + int(round(r.uniform(lo, max(lo + 1, 1.2 * cyc))))))
            prev = None if from_state is None else from_state.get(j)
            while t <= T_FUT and t < C["churn_t"][j]:
                oc.append(j)
                ot.append(t)
                gf.append(1.0 if prev is None else min(max((t - prev) / cyc, 0.6), 1.5))
                prev = t
                if t > T_END and r.random() < 0.02:
                    break
                t = int(cal.nb(e, t + int(round(r.uniform(0.8, 1.2) * cyc))))
        return np.array(oc, int), np.array(ot, int), np.array(gf, float)

    rng_p = np.random.default_rng([int(seed), 2])
    pc, ptm, pgf = sim_partners(rng_p)

    # ---- orders table
    O = pd.DataFrame(
        {
            "cust": np.concatenate([dc, pc]),
            "order_t": np.concatenate([dtm, ptm]),
            "gapf": np.concatenate([np.ones(len(dc)), pgf]),
        }
    )
    O["special"] = ""
    # late-booked large order: DE partner, ordered & delivered in fiscal period late_fp, posted next month
    late_y = 2025 if late_fp <= 9 else 2026
    late_m = (late_fp + 2) % 12 + 1
    de_partners = [j for j in partner_idx if C["ent"][j] == 0 and C["churn_t"][j] > 10**8 and C["first_t"][j] < 0]
    late_cust = int(rng.choice(de_partners))
    m_end = dt.date(late_y + (late_m == 12), late_m % 12 + 1, 1) - dt.timedelta(days=1)
    late_deliv = cal.pb(0, _t(m_end))
    late_order_t = cal.pb(0, late_deliv - 3)
    late_post = int(cal.nb(0, _t(m_end) + 1))
    O = pd.concat(
        [O, pd.DataFrame({"cust": [late_cust], "order_t": [late_order_t], "special": ["late"], "gapf": [1.0]})]
    )
    # zero-value sample shipments (free-of-charge orders) to direct accounts
    smp_src = (
        O[(O.special == "") & is_dir[O.cust.values] & (O.order_t <= T_END - 20)]
        .sample(40, random_state=int(seed))
        .copy()
    )
    smp_src["order_t"] = cal.nb(C["ent"][smp_src.cust.values], smp_src.order_t.values + 3)
    smp_src["special"] = "sample"
    O = pd.concat([O, smp_src]).sort_values(["order_t", "cust"], kind="stable").reset_index(drop=True)
    O["ent"] = C["ent"][O.cust.values]
    # the one real outage day: 90 % of that day's order entry slips to the next business day
    out_mask = (O.order_t.values == T_OUT) & (rng.random(len(O)) < 0.9)
    O.loc[out_mask, "order_t"] = cal.nb(O.ent.values[out_mask], T_OUT + 1)
    lag = rng.choice([0, 1, 2, 3, 4], len(O), p=[0.12, 0.45, 0.25, 0.12, 0.06])
    O["deliv_t"] = cal.nb(O.ent.values, O.order_t.values, lag)
    O["post_t"] = O["deliv_t"]
    lm = O.special == "late"
    O.loc[lm, "deliv_t"] = late_deliv
    O.loc[lm, "post_t"] = late_post
    O = O.sort_values(["order_t", "ent", "cust"], kind="stable").reset_index(drop=True)
    O["oid"] = np.arange(len(O))

    # ---- order lines, priced
    def make_lines(r, Od):
        seg_dir = is_dir[Od.cust.values]
        nl = np.where(seg_dir, 1 + r.poisson(0.7, len(Od)), np.minimum(8 + r.poisson(2, len(Od)), 14))
        nl = np.where(Od.special.values == "sample", 1, nl)
        nl = np.where(Od.special.values == "late", 8, nl)
        rep_i = np.repeat(np.arange(len(Od)), nl)
        cu = Od.cust.values[rep_i]
        u = r.random(len(rep_i))
        pg = (u[:, None] > cumpref[cu]).sum(1)
        pg = np.minimum(pg, 5)
        late_rows = Od.special.values[rep_i] == "late"
        pg[late_rows] = e_pg[late_pg]
        k = r.choice(10, len(rep_i), p=sku_w)
        sku = pg * 10 + k
        ordt_ = Od.order_t.values[rep_i]
        sku = np.where(
            (pg == e_pg[launch_pg]) & (ordt_ >= T_LAUNCH) & is_dir[cu] & (r.random(len(rep_i)) < 0.06), NS - 1, sku
        )
        item = np.concatenate([np.arange(1, n + 1) for n in nl]) * 10
        size = C["size"][cu]
        tgt = np.where(
            is_dir[cu],
            size * np.exp(r.normal(np.log(150), 0.6, len(cu))),
            size * Od.gapf.values[rep_i] * np.exp(r.normal(np.log(900), 0.35, len(cu))),
        )
        tgt = np.where(late_rows, 11000 * np.exp(r.normal(0, 0.15, len(cu))), tgt)
        qty = np.maximum(1, np.round(tgt / list_eur25[sku])).astype(int)
        qty = np.where(sku == NS - 1, np.minimum(qty, 2), qty)
        smp = Od.special.values[rep_i] == "sample"
        qty[smp] = r.integers(1, 4, smp.sum())
        post = Od.post_t.values[rep_i]
        regime = (cal.fy[post] >= 2026).astype(int)
        cur = C["cur"][cu]
        lp = LIST[sku, cur, regime]
        disc = C["disc"][cu].copy()
        disc = np.where(~is_dir[cu] & (pg == e_pg[thin]), 0.30, disc)
        vr_on = (vr_growth[cu] & (post >= T_VR)) | (pilot[cu] & (post >= T_PILOT))
        disc = disc + np.where(vr_on, 0.03, 0.0)
        unit = np.round(lp * (1 - disc), 2)
        net = np.round(unit * qty, 2)
        net[smp] = 0.0
        L = pd.DataFrame(
            {
                "oid": Od.oid.values[rep_i],
                "item": item,
                "cust": cu,
                "ent": C["ent"][cu],
                "sku": sku,
                "pg": pg,
                "qty": qty,
                "cur": cur,
                "net": net,
                "post_t": post,
                "order_t": Od.order_t.values[rep_i],
                "deliv_t": Od.deliv_t.values[rep_i],
                "kind": np.where(smp, "sample", "product"),
                "special": Od.special.values[rep_i],
            }
        )
        # the planted demand losses (thinning of lines): volume loss of one product group from FY2026, and the
        # budget's genuine shortfall (one region x product group from fiscal period short_start of FY2026)
        ordt = L.order_t.values
        p_drop = np.where((L.pg.values == e_pg[vol_pg]) & (ordt >= T_VR), 0.30, 0.0)
        s_start = _t(dt.date(2025 if short_start <= 9 else 2026, (short_start + 2) % 12 + 1, 1))
        sh = (L.pg.values == e_pg[short_pg]) & (L.ent.values == ENTS.index(short_region_cc)) & (ordt >= s_start)
        p_drop = np.where(sh, 1 - (1 - p_drop) * (1 - 0.40), p_drop)
        p_drop[L.special.values != ""] = 0.0
        drop = r.random(len(L)) < p_drop
        L["short_drop"] = drop & sh
        return L, drop

    rng_l = np.random.default_rng([int(seed), 3])
    Lall, drop = make_lines(rng_l, O)
    dropped_short = Lall[Lall.short_drop].copy()
    L = Lall[~drop].copy()
    L["item"] = L.groupby("oid").cumcount().add(1).values * 10
    O = O[O.oid.isin(L.oid.unique())].copy()
    # identical repeat orders (two ship-to sites, same day, same material & qty) - legitimate look-alike of duplicates
    one_line = L.groupby("oid").size()
    cand = O[
        (O.special == "") & is_dir[O.cust.values] & (O.post_t <= T_END - 5) & O.oid.isin(one_line[one_line == 1].index)
    ]
    clone_src = cand.sample(15, random_state=int(seed) + 7)
    new_oid = O.oid.max() + 1 + np.arange(15)
    Oc = clone_src.copy()
    Oc["oid"] = new_oid
    Oc["special"] = "clone"
    Lc = L[L.oid.isin(clone_src.oid)].copy()
    Lc["oid"] = Lc.oid.map(dict(zip(clone_src.oid, new_oid)))
    Lc["special"] = "clone"
    O = pd.concat([O, Oc]).sort_values(["order_t", "ent", "cust", "oid"], kind="stable").reset_index(drop=True)
    L = pd.concat([L, Lc])
    # free-of-charge sample lines added to 1.5 % of observed direct orders
    addm = (O.special == "") & is_dir[O.cust.values] & (rng.random(len(O)) < 0.015)
    fl = L[L.oid.isin(O.oid[addm])].groupby("oid").agg(item=("item", "max"), sku=("sku", "first")).reset_index()
    Ls = L.drop_duplicates("oid").set_index("oid").loc[fl.oid].reset_index()
    Ls["item"] = fl["item"].values + 10
    Ls["qty"] = rng.integers(1, 4, len(Ls))
    Ls["net"] = 0.0
    Ls["kind"] = "sample"
    L = pd.concat([L, Ls]).sort_values(["oid", "item"], kind="stable").reset_index(drop=True)

    # observed vs beyond the cut-off
    Lobs = L[L.post_t <= T_END].copy()

    # ---- FX: scale the FY2026 GBP path (its shape drawn above: steady weakening) so that GB01's revenue in EUR
    #      falls by the planted uk_target although GBP list prices rose; volumes do not depend on FX rates.
    gl = Lobs[(Lobs.kind == "product") & (Lobs.ent == 2)]
    g_ym, g_fy = cal.ym[gl.post_t.values], cal.fy[gl.post_t.values]
    gbp = gl.cur.values == 1
    rate_v = np.array([fx_avg[v] for v in g_ym])
    r25 = float(np.sum(np.where(gbp, gl.net.values / rate_v, gl.net.values)[g_fy == 2025]))
    a26 = float(np.sum((gl.net.values / rate_v)[(g_fy == 2026) & gbp]))
    e26 = float(np.sum(gl.net.values[(g_fy == 2026) & ~gbp]))
    k = a26 / ((1 + uk_target) * r25 - e26)
    fy26_months = [y * 100 + m for (y, m) in months if (y + (m >= 4)) == 2026]
    k = min(max(k, 0.87 / np.mean([fx_avg[v] for v in fy26_months])), 1.03 / np.mean([fx_avg[v] for v in fy26_months]))
    for v in fy26_months:
        off = fx_eom[v] - fx_avg[v]
        fx_avg[v] = round(fx_avg[v] * k, 4)
        fx_eom[v] = round(fx_avg[v] + off, 4)
    fy26_gbp = float(np.mean([fx_avg[v] for v in fy26_months]))
    for y, m in months:  # beyond the export: planning assumption = FY2026 average
        if dt.date(y, m, 1) > END:
            fx_avg[y * 100 + m] = round(fy26_gbp, 4)

    # ---- partner rebate settlements: negative lines per partner x product group, posted ~15th after quarter end
    pl = Lobs[(~is_dir[Lobs.cust.values]) & (Lobs.kind == "product")].copy()
    pl["fy"] = cal.fy[pl.post_t.values]
    pl["fq"] = (cal.fp[pl.post_t.values] - 1) // 3
    rb = pl.groupby(["cust", "fy", "fq", "pg", "cur"], as_index=False)["net"].sum()
    rb["rate"] = np.where(rb.pg == e_pg[thin], 0.06, 0.03)
    rb["amt"] = -np.round(rb.net * rb.rate, 2)

    def settle_t(c, fy, fq):
        p_ = 3 * int(fq) + 4  # fiscal period after the quarter's end
        d_ = dt.date(int(fy), 4, 15) if p_ > 12 else dt.date(int(fy) - 1 if p_ <= 9 else int(fy), (p_ + 2) % 12 + 1, 15)
        return int(cal.nb(int(C["ent"][c]), _t(d_))) if d_ <= END else 10**6

    _st = {k: settle_t(*k) for k in set(zip(rb.cust.values, rb.fy.values, rb.fq.values))}
    rb["post_t"] = [_st[k] for k in zip(rb.cust.values, rb.fy.values, rb.fq.values)]
    rb = rb[rb.post_t <= T_END].copy()
    rb["oid"] = 10**7 + rb.groupby(["cust", "fy", "fq"]).ngroup()
    rb["item"] = rb.groupby("oid").cumcount().add(1) * 10
    RB = pd.DataFrame(
        {
            "oid": rb.oid.values,
            "item": rb.item.values,
            "cust": rb.cust.values,
            "ent": C["ent"][rb.cust.values],
            "sku": -1 - rb.pg.values,
            "pg": rb.pg.values,
            "qty": 0,
            "cur": rb.cur.values,
            "net": rb.amt.values,
            "post_t": rb.post_t.values,
            "order_t": -1,
            "deliv_t": -1,
            "kind": "rebate",
            "special": "",
        }
    )
    INV = pd.concat([Lobs.drop(columns=["short_drop"], errors="ignore"), RB], ignore_index=True)

    # ---- document numbers (per company code, in posting order)
    docs = INV.groupby("oid").agg(ent=("ent", "first"), post_t=("post_t", "first")).reset_index()
    docs = docs.sort_values(["ent", "post_t", "oid"], kind="stable")
    docs["doc"] = [
        str(90000000 + 1000000 * e + i) for e, i in zip(docs.ent.values, docs.groupby("ent").cumcount().values + 1)
    ]
    INV["doc"] = INV.oid.map(dict(zip(docs.oid, docs.doc)))
    INV = INV.sort_values(["ent", "doc", "item"], kind="stable").reset_index(drop=True)
    INV["material"] = [skus[s] if s >= 0 else f"REB-{PG_CODE[PGS[-1 - s]]}" for s in INV.sku.values]

    # ---- credit notes (typed), linked to invoice lines
    prod = INV[INV.kind == "product"].reset_index(drop=True)
    r_cn = np.random.default_rng([int(seed), 5])
    n = len(prod)
    par = ~is_dir[prod.cust.values]
    u1, u2, u3, u4 = (r_cn.random(n) for _ in range(4))
    p_def = np.where(prod.sku.values == defect_sku, 0.16, 0.008)
    recs = []
    for reason, hit, lag_lo, lag_hi in [
        ("Z01", u1 < p_def, 10, 90),
        ("Z02", u2 < 0.004, 3, 20),
        ("Z03", u3 < 0.01, 0, 30),
        ("Z05", par & (u4 < 0.22), 30, 100),
    ]:
        ii = np.flatnonzero(hit)
        q = prod.qty.values[ii]
        if reason == "Z01":
            cq = np.maximum(1, np.round(q * r_cn.uniform(0.5, 1.0, len(ii))))
        elif reason == "Z02":
            cq = q.astype(float)
        elif reason == "Z05":
            cq = r_cn.binomial(q, 0.32).astype(float)
        else:
            cq = np.full(len(ii), np.nan)
        unit = np.round(prod.net.values[ii] / prod.qty.values[ii], 2)
        amt = np.where(
            np.isnan(cq),
            np.round(prod.net.values[ii] * r_cn.uniform(0.05, 0.15, len(ii)), 2),
            np.round(unit * np.nan_to_num(cq), 2),
        )
        lagd = r_cn.integers(lag_lo, lag_hi + 1, len(ii))
        if reason == "Z03":
            lagd[r_cn.random(len(ii)) < 0.3] = 0  # same-day price corrections (legitimate)
        pt = cal.nb(prod.ent.values[ii], prod.post_t.values[ii] + lagd)
        keep_ = np.isnan(cq) | (cq > 0)
        recs.append(pd.DataFrame({"src": ii, "reason": reason, "cqty": cq, "amt": amt, "post_t": pt})[keep_])
    # small-sample look-alike: the least-sold SKU gets two defect credit notes on two of its few lines
    small_sku = NS - 1
    ss_lines = np.flatnonzero((prod.sku.values == small_sku) & (prod.post_t.values < T_END - 25))
    ss_pick = r_cn.choice(ss_lines, min(2, len(ss_lines)), replace=False)
    recs.append(
        pd.DataFrame(
            {
                "src": ss_pick,
                "reason": "Z01",
                "cqty": prod.qty.values[ss_pick].astype(float),
                "amt": prod.net.values[ss_pick],
                "post_t": cal.nb(prod.ent.values[ss_pick], prod.post_t.values[ss_pick] + 20),
            }
        )
    )
    CN = pd.concat(recs[:-1], ignore_index=True)
    CN = CN[~((CN.reason == "Z01") & (prod.sku.values[CN.src.values] == small_sku))]
    CN = pd.concat([CN, recs[-1]], ignore_index=True)
    CN = CN[CN.post_t <= T_END].copy()
    CN["doc"] = prod.doc.values[CN.src.values]
    CN["ref_item"] = prod.item.values[CN.src.values]
    CN["cust"] = prod.cust.values[CN.src.values]
    CN["ent"] = prod.ent.values[CN.src.values]
    CN["sku"] = prod.sku.values[CN.src.values]
    CN["cur"] = prod.cur.values[CN.src.values]
    CN["inv_post_t"] = prod.post_t.values[CN.src.values]
    # data-quality fault: credit memos posted before their invoice
    CN = CN.sort_values(["ent", "post_t", "doc", "reason", "ref_item"], kind="stable").reset_index(drop=True)
    CN["cm_key"] = CN.groupby(["doc", "reason", "post_t"], sort=False).ngroup()
    keys = CN.cm_key.unique()
    bad_cm = r_cn.choice(keys[CN.groupby("cm_key").inv_post_t.first().loc[keys].values > 60], 6, replace=False)
    for kk in bad_cm:
        m = CN.cm_key == kk
        e = int(CN.ent[m].iloc[0])
        CN.loc[m, "post_t"] = cal.pb(e, int(CN.inv_post_t[m].iloc[0]) - int(r_cn.integers(2, 40)))
    cmk = CN.groupby("cm_key").agg(ent=("ent", "first"), post_t=("post_t", "first")).reset_index()
    cmk = cmk.sort_values(["ent", "post_t", "cm_key"], kind="stable")
    cmk["cm"] = [
        str(95000000 + 1000000 * e + i) for e, i in zip(cmk.ent.values, cmk.groupby("ent").cumcount().values + 1)
    ]
    CN["cm"] = CN.cm_key.map(dict(zip(cmk.cm_key, cmk.cm)))
    CN = CN.sort_values(["cm", "doc", "ref_item"], kind="stable").reset_index(drop=True)
    CN["item"] = CN.groupby("cm").cumcount().add(1) * 10

    # ---- deliveries (typed): one delivery per order, items = invoice lines (products and samples)
    DL = INV[INV.kind != "rebate"].copy()
    dk = DL.groupby("oid").agg(order_t=("order_t", "first"), ent=("ent", "first")).reset_index()
    dk = dk.sort_values(["order_t", "ent", "oid"], kind="stable")
    dk["so"] = [str(10000001 + i) for i in range(len(dk))]
    dk["dlv"] = [str(80000001 + i) for i in range(len(dk))]
    DL["so"] = DL.oid.map(dict(zip(dk.oid, dk.so)))
    DL["dlv"] = DL.oid.map(dict(zip(dk.oid, dk.dlv)))
    kg = np.array([PG_KG[PGS[p]] for p in DL.pg.values]) * DL.qty.values
    r_fr = np.random.default_rng([int(seed), 6])
    fr = np.where(is_dir[DL.cust.values], 4.0 + 0.30 * kg, 1.5 + 0.06 * kg) * r_fr.uniform(0.85, 1.15, len(DL))
    fr = np.where(DL.special.values == "late", 0.8 + 0.02 * kg, fr)
    DL["freight"] = np.round(fr, 2)
    DL["dlv_date_t"] = DL.deliv_t.values.copy()
    # data-quality fault: deliveries dated before their order (year typos and a few day slips)
    dlv_keys = DL[(DL.kind == "product") & (DL.special == "") & (DL.order_t > 400)].dlv.unique()
    bad_dlv = rng.choice(dlv_keys, 9, replace=False)
    for i, k in enumerate(bad_dlv):
        m = DL.dlv == k
        ot = int(DL.order_t[m].iloc[0])
        DL.loc[m, "dlv_date_t"] = ot - 365 if i < 5 else ot - int(rng.integers(1, 7))
    DL = DL.sort_values(["dlv", "item"], kind="stable").reset_index(drop=True)

    # ---- customers master (typed), created <= cut-off; data-quality fault: created after first invoice
    firstp = INV[INV.kind == "product"].groupby("cust").post_t.min()
    created_rec = C["created_t"].copy()
    cand = []
    for c, fp in firstp.items():
        if is_dir[c] and C["created_t"][c] >= 0 and fp - C["created_t"][c] >= 1:
            d0 = _d(int(C["created_t"][c]))
            q0 = fq_label(d0)
            if fq_label(_d(int(fp) + 25)) == q0 and fp + 25 < T_END:
                cand.append(c)
    bad_created = rng.choice(np.array(cand), 8, replace=False)
    for c in bad_created:
        created_rec[c] = int(firstp[c]) + int(rng.integers(3, 21))
    keep_c = C["created_t"] <= T_END
    # customer numbers: shuffled so segment is not readable from the number
    perm = rng.permutation(n_all)
    cno = np.array([_cust_no(100000 + int(perm[i])) for i in range(n_all)])
    DL["ship_to"] = np.where(
        DL.special.values == "clone", [_cust_no(300000 + int(perm[c])) for c in DL.cust.values], cno[DL.cust.values]
    )

    # ---- typed tables in file vocabulary
    fx_tab = pd.DataFrame(
        [
            {"ym": y * 100 + m, "avg": fx_avg[y * 100 + m], "eom": fx_eom[y * 100 + m]}
            for (y, m) in months
            if dt.date(y, m, 1) <= END
        ]
    )
    cur_code = np.array(["EUR", "GBP"])
    inv_t = pd.DataFrame(
        {
            "doc": INV.doc.values,
            "item": INV.item.values,
            "cc": [ENTS[e] for e in INV.ent.values],
            "cust": cno[INV.cust.values],
            "post": [_d(t) for t in INV.post_t.values],
            "material": INV.material.values,
            "qty": np.where(INV.kind.values == "rebate", np.nan, INV.qty.values.astype(float)),
            "cur": cur_code[INV.cur.values],
            "net": INV.net.values,
        }
    )
    cn_t = pd.DataFrame(
        {
            "cm": CN.cm.values,
            "item": CN.item.values,
            "cc": [ENTS[e] for e in CN.ent.values],
            "post": [_d(t) for t in CN.post_t.values],
            "ref_doc": CN.doc.values,
            "ref_item": CN.ref_item.values,
            "cust": cno[CN.cust.values],
            "material": [skus[s] for s in CN.sku.values],
            "qty": CN.cqty.values,
            "cur": cur_code[CN.cur.values],
            "net": CN.amt.values,
            "reason": CN.reason.values,
        }
    )
    dl_t = pd.DataFrame(
        {
            "dlv": DL.dlv.values,
            "item": DL.item.values,
            "so": DL.so.values,
            "cc": [ENTS[e] for e in DL.ent.values],
            "sold_to": cno[DL.cust.values],
            "ship_to": DL.ship_to.values,
            "material": [skus[s] for s in DL.sku.values],
            "qty": DL.qty.values.astype(float),
            "order_date": [_d(t) for t in DL.order_t.values],
            "deliv_date": [_d(t) for t in DL.dlv_date_t.values],
            "bill_doc": DL.doc.values,
            "bill_item": DL.item.values,
            "freight": DL.freight.values,
        }
    )
    ci = np.flatnonzero(keep_c)
    names = _names(rng, C, ci)
    cu_t = pd.DataFrame(
        {
            "cust": cno[ci],
            "name": names,
            "cc": [ENTS[e] for e in C["ent"][ci]],
            "country": C["country"][ci],
            "seg": C["seg"][ci],
            "created": [_d(t) for t in created_rec[ci]],
            "rep": C["rep"][ci],
            "scheme": np.where(vr_growth[ci], "VR-GROWTH", np.where(pilot[ci], "VR-PILOT", "")),
            "scheme_start": [("2025-04-01" if vr_growth[i] else ("2025-07-01" if pilot[i] else "")) for i in ci],
        }
    )
    cu_t = cu_t.sort_values("cust").reset_index(drop=True)
    price_t = pd.DataFrame(
        [
            {
                "material": skus[s],
                "desc": sku_desc[s],
                "pg": PGS[sku_pg[s]],
                "cur": cur,
                "fy": f"FY{fy}",
                "price": float(LIST[s, ci_, int(fy >= 2026)]),
            }
            for s in range(NS)
            for ci_, cur in enumerate(["EUR", "GBP"])
            for fy in (2024, 2025, 2026)
            if s < 60 or fy == 2026
        ]
    )
    cost_t = pd.DataFrame(
        [
            {
                "material": skus[s],
                "pg": PGS[sku_pg[s]],
                "fy": f"FY{fy}",
                "cost": float(cost25[s] if fy < 2026 else cost26[s]),
            }
            for s in range(NS)
            for fy in (2024, 2025, 2026)
            if s < 60 or fy == 2026
        ]
    )

    # ---- budget FY2026: realistic plan (actuals incl. the shortfall's lost sales, the late order in its month)
    #      x noise, then the uniform sales-leadership stretch of +5 %
    b = Lobs[(Lobs.kind == "product")].copy()
    b = b[(cal.fy[b.post_t.values] == 2026)]
    rate_t = np.array([fx_avg.get(cal.ym[t], 1.0) for t in range(NDAYS)])
    b["eur"] = np.where(b.cur.values == 1, b.net.values / rate_t[b.post_t.values], b.net.values)
    b["fp"] = cal.fp[b.post_t.values]
    act = b.groupby(["ent", "pg", "fp"]).eur.sum()
    ds = dropped_short[(dropped_short.post_t <= T_END) & (cal.fy[dropped_short.post_t.values] == 2026)].copy()
    ds["eur"] = np.where(ds.cur.values == 1, ds.net.values / rate_t[ds.post_t.values], ds.net.values)
    ds["fp"] = cal.fp[ds.post_t.values]
    lost = ds.groupby(["ent", "pg", "fp"]).eur.sum()
    late_eur = float(b[b.special == "late"].eur.sum())
    r_b = np.random.default_rng([int(seed), 7])
    bud = []
    for e in range(3):
        for p in range(6):
            for fp in range(1, 13):
                a = float(act.get((e, p, fp), 0.0)) + float(lost.get((e, p, fp), 0.0))
                if e == 0 and p == e_pg[late_pg]:
                    if fp == late_fp:
                        a += late_eur
                    if fp == late_fp + 1:
                        a -= late_eur
                plan = a * (1 + r_b.normal(0, 0.025)) * 1.05
                bud.append({"region": REGION[ENTS[e]], "pg": PGS[p], "fp": fp, "eur": float(round(plan, -2))})
    bud_t = pd.DataFrame(bud)

    # ---- pricing A/B test export (randomised per account; treatment accounts partly lost from logging -> SRM)
    ab_t, ab_info = _make_ab(seed, C, cno, is_dir, snap["test"], dc, dtm, T_TEST0, T_TEST1, n_all)

    typed = {
        "inv": inv_t,
        "cn": cn_t,
        "dl": dl_t,
        "cust": cu_t,
        "price": price_t,
        "cost": cost_t,
        "fx": fx_tab,
        "budget": bud_t,
        "ab": ab_t,
    }

    # ---- write the files
    dup_days = _write_files(out, rng, typed, cal, seed)
    typed["_dup_days"] = dup_days

    # ---- holdout re-simulation of the planted process (not exported): demand next quarter and direct CLV
    fut = _future(
        seed,
        C,
        is_dir,
        partner_idx,
        snap["end"],
        sim_direct,
        sim_partners,
        make_lines,
        O,
        L,
        pc,
        ptm,
        cal,
        T_END,
        T_FUT,
        fx_avg,
        fy26_gbp,
        pref,
    )

    params = dict(
        heavy=heavy,
        thin=thin,
        vol_pg=vol_pg,
        short_cc=short_region_cc,
        short_pg=short_pg,
        short_start=short_start,
        late_pg=late_pg,
        late_fp=late_fp,
        late_cust=cno[late_cust],
        late_eur=late_eur,
        bad_cohort_q=bad_cohort_q,
        defect_sku=skus[defect_sku],
        small_sku=skus[small_sku],
        t_out=_d(T_OUT).isoformat(),
        pilot_reps=pilot_reps,
        lapsed=sorted(cno[lapsed].tolist()),
        forced=sorted(cno[forced].tolist()),
        fy26_gbp=fy26_gbp,
        ab=ab_info,
        fut=fut,
        n_bad_dlv=len(bad_dlv),
        n_bad_cm=len(bad_cm),
        n_bad_created=len(bad_created),
    )
    truth = _truth(seed, typed, params, cal)
    _CHECKS[int(seed)] = truth.pop("_checks")
    _CHECKS[int(seed)]["P"] = params
    (out / "truth.json").write_text(json.dumps(truth, indent=1, ensure_ascii=False), encoding="utf-8")
    return truth


# ----------------------------------------------------------------------------------------------- helpers
def _names(rng, C, ci):
    de = [
        "Müller",
        "Schmidt",
        "Weber",
        "Fischer",
        "Becker",
        "Hoffmann",
        "Koch",
        "Richter",
        "Klein",
        "Wolf",
        "Schröder",
        "Neumann",
        "Krüger",
        "Braun",
        "Zimmermann",
        "Hartmann",
    ]
    de2 = [
        "Metallbau",
        "Maschinenbau",
        "Industrieservice",
        "Anlagentechnik",
        "Werkzeugbau",
        "Stahlbau",
        "Elektrotechnik",
        "Fördertechnik",
    ]
    fr = [
        "Martin",
        "Bernard",
        "Dubois",
        "Thomas",
        "Robert",
        "Richard",
        "Petit",
        "Durand",
        "Leroy",
        "Moreau",
        "Lefèvre",
        "Girard",
    ]
    fr2 = ["Mécanique", "Industrie", "Maintenance", "Chaudronnerie", "Usinage", "Hydraulique"]
    gb = [
        "Smith",
        "Jones",
        "Taylor",
        "Brown",
        "Williams",
        "Wilson",
        "Evans",
        "Thomas",
        "Roberts",
        "Walker",
        "Hughes",
        "Wright",
    ]
    gb2 = ["Engineering", "Fabrications", "Maintenance", "Industrial Services", "Precision", "Plant Hire"]
    out = []
    for i in ci:
        e, par = int(C["ent"][i]), C["seg"][i] == "Partner"
        if e == 0:
            n = f"{rng.choice(de)} {'Technischer Handel' if par else rng.choice(de2)} {rng.choice(['GmbH', 'GmbH & Co. KG', 'AG', 'e.K.'])}"
        elif e == 1:
            n = f"{rng.choice(fr)} {'Distribution' if par else rng.choice(fr2)} {rng.choice(['SAS', 'SARL', 'SA'])}"
        else:
            n = f"{rng.choice(gb)} {'Industrial Supplies' if par else rng.choice(gb2)} {rng.choice(['Ltd', 'Ltd', 'plc', 'LLP'])}"
        out.append(n)
    return out


def _chi2_p(chi2: float) -> float:
    return math.erfc(math.sqrt(max(chi2, 0.0) / 2))


def _make_ab(seed, C, cno, is_dir, alive_test, dc, dtm, T0, T1, n_all):
    """Quote-page test, randomised per account (50/50 by hash); the treatment page's tracking failed for part of
    the accounts on locked-down corporate browsers (mostly small, low-propensity accounts) -> account-level SRM."""
    didx = np.flatnonzero(is_dir)
    recent = np.zeros(n_all, bool)
    w = (dtm >= T0 - 365) & (dtm < T0)
    recent[np.unique(dc[w])] = True
    elig = didx[alive_test & recent[didx]]
    target_chi2 = 9.55  # p = 0.002 for 1 dof
    for sub in range(200):
        r = np.random.default_rng([int(seed), 8, sub])
        arm = r.random(len(elig)) < 0.5  # True = treatment
        prop = r.beta(2, 5, len(elig))
        nq = 1 + r.poisson(2.2 * np.clip(C["size"][elig], 0.3, 3))
        nC, nT0 = int((~arm).sum()), int(arm.sum())
        N0 = nC + nT0
        # remove k treatment accounts so that (nC - nT)^2 / (nC + nT) ~ target
        best = None
        for k in range(0, nT0):
            nT = nT0 - k
            chi2 = (nC - nT) ** 2 / (nC + nT)
            if nT < nC and (best is None or abs(chi2 - target_chi2) < abs(best[1] - target_chi2)):
                best = (k, chi2)
            if nT < nC and chi2 > target_chi2 + 2:
                break
        k, chi2 = best
        if abs(_chi2_p(chi2) - 0.002) > 0.0006:
            continue
        ti = np.flatnonzero(arm)
        wl = (1 - prop[ti]) ** 4
        lost = r.choice(ti, k, replace=False, p=wl / wl.sum())
        keep = np.ones(len(elig), bool)
        keep[lost] = False
        rows = []
        for i in np.flatnonzero(keep):
            for q in range(nq[i]):
                rows.append((i, q))
        ai = np.array([x[0] for x in rows])
        conv = r.random(len(ai)) < prop[ai]  # no true treatment effect
        tr = arm[ai]
        # quote-level naive z-test
        c1, n1, c0, n0 = conv[tr].sum(), tr.sum(), conv[~tr].sum(), (~tr).sum()
        pp = (c1 + c0) / (n1 + n0)
        z = (c1 / n1 - c0 / n0) / math.sqrt(pp * (1 - pp) * (1 / n1 + 1 / n0))
        p_quote = math.erfc(abs(z) / math.sqrt(2))
        if not (p_quote < 0.05 and z > 0):
            continue
        ts = r.integers(T0, T1 + 1, len(ai))
        sec = r.integers(7 * 3600, 18 * 3600, len(ai))
        order = np.lexsort((sec, ts))
        ai, conv, tr, ts, sec = ai[order], conv[order], tr[order], ts[order], sec[order]
        stamps = []
        for a, t, s in zip(ai, ts, sec):
            e = int(C["ent"][elig[a]])
            d = START + dt.timedelta(days=int(t))
            summer = d < dt.date(2025, 10, 26)
            off = (2 if summer else 1) if e < 2 else (1 if summer else 0)
            stamps.append(f"{d.isoformat()}T{s // 3600:02d}:{(s % 3600) // 60:02d}:{s % 60:02d}+{off:02d}:00")
        cur = np.where(C["cur"][elig[ai]] == 1, "GBP", "EUR")
        val = np.round(np.exp(r.normal(np.log(600), 0.8, len(ai))) * np.where(cur == "GBP", 0.9, 1.0), 2)
        ab = pd.DataFrame(
            {
                "experiment": "quote_page_tiered_pricing_v2",
                "variant": np.where(tr, "tiered_price_display", "control"),
                "account": cno[elig[ai]],
                "quote_id": [f"Q-{2025}-{i + 1:06d}" for i in range(len(ai))],
                "created": stamps,
                "cur": cur,
                "value": val,
                "converted": conv.astype(int),
            }
        )
        info = {
            "n_control_accounts": nC,
            "n_treatment_accounts": nT0 - k,
            "n_eligible": N0,
            "chi2": chi2,
            "p_account": _chi2_p(chi2),
            "p_quote_naive": p_quote,
            "sub": sub,
            "lost_treatment_accounts": k,
        }
        return ab, info
    raise RuntimeError("no A/B realisation met the plant conditions")


def _write_files(out, rng, T, cal, seed):
    inv = T["inv"]
    de = inv[inv.cc == "DE01"].copy()
    fu = inv[inv.cc != "DE01"].copy()
    # DE file: a few days were exported by a user with a thousands separator in the amounts
    de_days = sorted(de.post.unique())
    i0 = int(rng.integers(40, len(de_days) - 40))
    th_days = set(de_days[i0 : i0 + 3])
    th = de.post.isin(th_days).values & (de.net.abs().values >= 1000)
    T["_th_rows"] = int(th.sum())
    T["_th_days"] = sorted(d.isoformat() for d in th_days)
    # duplicates: DE01 documents of two posting days were also pulled into the FR/UK extract
    j0 = int(rng.integers(60, len(de_days) - 60))
    dup_days = [de_days[j0], de_days[j0 + 1]]
    dup = de[de.post.isin(dup_days)].copy()
    de_out = pd.DataFrame(
        {
            "Belegnummer": de.doc.values,
            "Position": de.item.values,
            "Buchungskreis": de.cc.values,
            "Kunde": de.cust.values,
            "Buchungsdatum": [d.strftime("%d.%m.%Y") for d in de.post],
            "Material": de.material.values,
            "Menge": ["" if np.isnan(q) else str(int(q)) for q in de.qty.values],
            "ME": ["" if np.isnan(q) else "ST" for q in de.qty.values],
            "Währung": de.cur.values,
            "Nettobetrag": [_fmt_de(x, bool(t)) for x, t in zip(de.net.values, th)],
        }
    )
    _write_csv(out / "invoices_de.csv", de_out, sep=";", encoding="cp1252")
    fu_all = pd.concat([fu, dup]).sort_values(["cc", "doc", "item"], kind="stable")
    fu_out = pd.DataFrame(
        {
            "Document Number": fu_all.doc.values,
            "Item": fu_all.item.values,
            "Company Code": fu_all.cc.values,
            "Customer": fu_all.cust.values,
            "Posting Date": [d.isoformat() for d in fu_all.post],
            "Material": fu_all.material.values,
            "Quantity": ["" if np.isnan(q) else str(int(q)) for q in fu_all.qty.values],
            "Unit": ["" if np.isnan(q) else "PC" for q in fu_all.qty.values],
            "Currency": fu_all.cur.values,
            "Net Amount": [_fmt_en(x) for x in fu_all.net.values],
        }
    )
    _write_csv(out / "invoices_fr_uk.csv", fu_out)
    T["_dup_rows"] = len(dup)
    T["_dup_docs"] = int(dup.doc.nunique())
    T["_dup_value"] = float(dup.net.sum())
    cn = T["cn"]
    rtext = {
        "Z01": "Defective goods",
        "Z02": "Wrong item shipped",
        "Z03": "Price correction",
        "Z05": "Stock rotation (partner agreement)",
    }
    _write_csv(
        out / "credit_notes.csv",
        pd.DataFrame(
            {
                "Credit Memo": cn.cm.values,
                "Item": cn.item.values,
                "Company Code": cn.cc.values,
                "Posting Date": [d.isoformat() for d in cn.post],
                "Reference Invoice": cn.ref_doc.values,
                "Reference Item": cn.ref_item.values,
                "Customer": cn.cust.values,
                "Material": cn.material.values,
                "Quantity": ["" if np.isnan(q) else str(int(q)) for q in cn.qty.values],
                "Currency": cn.cur.values,
                "Net Amount": [_fmt_en(x) for x in cn.net.values],
                "Reason Code": cn.reason.values,
                "Reason": [rtext[x] for x in cn.reason.values],
            }
        ),
    )
    dl = T["dl"]
    _write_csv(
        out / "deliveries.csv",
        pd.DataFrame(
            {
                "Delivery": dl.dlv.values,
                "Item": dl.item.values,
                "Sales Order": dl.so.values,
                "Sales Org": dl.cc.values,
                "Sold-To": dl.sold_to.values,
                "Ship-To": dl.ship_to.values,
                "Material": dl.material.values,
                "Delivery Qty": [str(int(q)) for q in dl.qty.values],
                "Order Date": [d.isoformat() for d in dl.order_date],
                "Delivery Date": [d.isoformat() for d in dl.deliv_date],
                "Billing Document": dl.bill_doc.values,
                "Billing Item": dl.bill_item.values,
                "Freight Cost EUR": [_fmt_en(x) for x in dl.freight.values],
            }
        ),
    )
    cu = T["cust"]
    _write_csv(
        out / "customers.csv",
        pd.DataFrame(
            {
                "Customer": cu.cust.values,
                "Name": cu.name.values,
                "Company Code": cu.cc.values,
                "Country": cu.country.values,
                "Segment": cu.seg.values,
                "Account Created": [d.isoformat() for d in cu.created],
                "Sales Rep": cu.rep.values,
                "Rebate Scheme": cu.scheme.values,
                "Scheme Start": cu.scheme_start.values,
            }
        ),
    )
    pr = T["price"]
    _write_csv(
        out / "price_list.csv",
        pd.DataFrame(
            {
                "Material": pr.material.values,
                "Description": pr.desc.values,
                "Product Group": pr.pg.values,
                "Currency": pr.cur.values,
                "Fiscal Year": pr.fy.values,
                "List Price": [_fmt_en(x) for x in pr.price.values],
            }
        ),
    )
    co = T["cost"]
    _write_csv(
        out / "item_costs.csv",
        pd.DataFrame(
            {
                "Material": co.material.values,
                "Product Group": co.pg.values,
                "Fiscal Year": co.fy.values,
                "Standard Cost EUR": [_fmt_en(x) for x in co.cost.values],
                "Price Unit": 1,
            }
        ),
    )
    fx = T["fx"]
    rows = []
    for ym, a, e in zip(fx.ym, fx.avg, fx.eom):
        rows.append(
            {
                "Month": f"{ym // 100}-{ym % 100:02d}",
                "Currency": "GBP",
                "Rate Type": "AVG",
                "Rate (GBP per 1 EUR)": f"{a:.4f}",
            }
        )
        rows.append(
            {
                "Month": f"{ym // 100}-{ym % 100:02d}",
                "Currency": "GBP",
                "Rate Type": "EOM",
                "Rate (GBP per 1 EUR)": f"{e:.4f}",
            }
        )
    _write_csv(out / "fx_rates.csv", pd.DataFrame(rows))
    _write_budget(out / "budget_fy2026.xlsx", T["budget"])
    ab = T["ab"]
    _write_csv(
        out / "pricing_test.csv",
        pd.DataFrame(
            {
                "experiment_key": ab.experiment.values,
                "variant_key": ab.variant.values,
                "account_id": ab.account.values,
                "quote_id": ab.quote_id.values,
                "quote_created_at": ab.created.values,
                "currency": ab.cur.values,
                "quote_net_value": [_fmt_en(x) for x in ab.value.values],
                "converted_to_order": ab.converted.values,
            }
        ),
    )
    return [d.isoformat() for d in dup_days]


_CHECKS: dict = {}  # per-seed internal figures for the self-check (not part of truth.json)
MONTH_ABBR = ["Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec", "Jan", "Feb", "Mar"]


def _write_budget(path, bud):
    from openpyxl import Workbook
    from openpyxl.styles import Font

    wb = Workbook()
    ws = wb.active
    ws.title = "Budget FY2026"
    ws["A1"] = "Sales budget FY2026 (1 Apr 2025 - 31 Mar 2026) - net invoiced sales in EUR"
    ws["A1"].font = Font(bold=True, size=12)
    ws["A2"] = "Version: FINAL v3 (approved 14.03.2025) - Sales Leadership"
    hdr = (
        ["Region", "Product group"]
        + [f"P{fp:02d} {MONTH_ABBR[fp - 1]}-{25 if fp <= 9 else 26}" for fp in range(1, 13)]
        + ["FY2026"]
    )
    for j, h in enumerate(hdr, 1):
        ws.cell(row=4, column=j, value=h).font = Font(bold=True)
    r = 5
    grand = np.zeros(12)
    for region in ["Germany", "France", "United Kingdom"]:
        sub = np.zeros(12)
        for pg in PGS:
            v = bud[(bud.region == region) & (bud.pg == pg)].sort_values("fp").eur.values
            ws.cell(row=r, column=1, value=region)
            ws.cell(row=r, column=2, value=pg)
            for j, x in enumerate(v):
                c = ws.cell(row=r, column=3 + j, value=float(x))
                c.number_format = "#,##0"
            c = ws.cell(row=r, column=15, value=f"=SUM(C{r}:N{r})")
            c.number_format = "#,##0"
            sub += v
            r += 1
        ws.cell(row=r, column=1, value=f"Total {region}").font = Font(bold=True)
        for j, x in enumerate(sub):
            c = ws.cell(row=r, column=3 + j, value=float(round(x, 2)))
            c.number_format = "#,##0"
            c.font = Font(bold=True)
        ws.cell(row=r, column=15, value=float(round(sub.sum(), 2))).number_format = "#,##0"
        grand += sub
        r += 2
    ws.cell(row=r, column=1, value="Grand total").font = Font(bold=True)
    for j, x in enumerate(grand):
        ws.cell(row=r, column=3 + j, value=float(round(x, 2))).number_format = "#,##0"
    ws.cell(row=r, column=15, value=float(round(grand.sum(), 2))).number_format = "#,##0"
    ws2 = wb.create_sheet("Notes")
    notes = [
        "Basis: net invoiced sales of product lines (SAP billing, posting date), excluding partner rebate "
        "settlements and credit memos.",
        "Currency: EUR; GB01 translated at monthly average rates.",
        "Fiscal year FY2026 = 1 April 2025 to 31 March 2026; P01 = April 2025, P12 = March 2026.",
        "Regions = company codes: Germany DE01, France FR01, United Kingdom GB01.",
        "Built bottom-up by the regional sales directors, then stretched by sales leadership.",
    ]
    for i, t in enumerate(notes, 1):
        ws2.cell(row=i, column=1, value=t)
    buf = io.BytesIO()
    wb.save(buf)
    # make the workbook byte-identical for a seed: fixed zip timestamps and document properties
    src = zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    dst_buf = io.BytesIO()
    with zipfile.ZipFile(dst_buf, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename == "docProps/core.xml":
                data = re.sub(
                    rb"(<dcterms:(created|modified)[^>]*>)[^<]*(</dcterms:)", rb"\g<1>2025-03-14T09:00:00Z\g<3>", data
                )
            zi = zipfile.ZipInfo(info.filename, date_time=(2025, 3, 14, 9, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            dst.writestr(zi, data)
    path.write_bytes(dst_buf.getvalue())


def _future(
    seed,
    C,
    is_dir,
    partner_idx,
    alive_end,
    sim_direct,
    sim_partners,
    make_lines,
    O,
    L,
    pc,
    ptm,
    cal,
    T_END,
    T_FUT,
    fx_avg,
    fy26_gbp,
    pref,
):
    """Re-simulate the planted process after the cut-off K times (rep 0 = the main run's own continuation).
    Returns E[units posted Apr-Jun 2026] and E[12-month revenue per direct customer] (EUR at the FY2026 average
    GBP rate), over the direct customers who bought before the cut-off."""
    K = 6
    t_q1 = _t(dt.date(2026, 6, 30))
    common = L[(L.order_t <= T_END) & (L.post_t > T_END) & (L.kind == "product")]
    pop = np.unique(L[(L.post_t <= T_END) & (L.kind == "product") & is_dir[L.cust.values]].cust.values)
    units, clv = [], []
    last_partner = {}
    for j, t in zip(pc, ptm):
        if t <= T_END:
            last_partner[j] = max(t, last_partner.get(j, -1))
    for k in range(K):
        if k == 0:
            Lf = L[(L.post_t > T_END) & (L.kind == "product")]
        else:
            r = np.random.default_rng([int(seed), 100 + k])
            dc, dt_ = sim_direct(r, T_END + 1, T_FUT, alive_end.copy(), {})
            pc2, pt2, gf2 = sim_partners(r, from_state=last_partner)
            Od = pd.DataFrame(
                {
                    "cust": np.concatenate([dc, pc2]),
                    "order_t": np.concatenate([dt_, pt2]),
                    "special": "",
                    "gapf": np.concatenate([np.ones(len(dc)), gf2]),
                }
            )
            Od["ent"] = C["ent"][Od.cust.values]
            lag = r.choice([0, 1, 2, 3, 4], len(Od), p=[0.12, 0.45, 0.25, 0.12, 0.06])
            Od["deliv_t"] = cal.nb(Od.ent.values, Od.order_t.values, lag)
            Od["post_t"] = Od.deliv_t
            Od["oid"] = np.arange(len(Od))
            Lk, drop = make_lines(r, Od)
            Lf = pd.concat([common, Lk[~drop]])
        Lf = Lf[Lf.post_t <= T_FUT]
        units.append(float(Lf[Lf.post_t <= t_q1].qty.sum()))
        d = Lf[is_dir[Lf.cust.values] & np.isin(Lf.cust.values, pop)]
        eur = np.where(d.cur.values == 1, d.net.values / fy26_gbp, d.net.values)
        clv.append(float(eur.sum()) / len(pop))
    return {
        "units_q1_fy2027": float(np.mean(units)),
        "units_reps": units,
        "clv12": float(np.mean(clv)),
        "clv_reps": clv,
        "clv_population": int(len(pop)),
    }


# ------------------------------------------------------------------------------------------ metrics (typed tables)
def _metrics(T: dict, P: dict) -> dict:
    """Every data-derived expected value, from the typed tables (generator) or the parsed files (self-check)."""
    M = {}
    TS = pd.Timestamp
    inv = T["inv"].drop_duplicates(["doc", "item"]).copy()
    inv["post"] = pd.to_datetime(inv.post)
    cust = T["cust"].copy()
    cust["created"] = pd.to_datetime(cust.created)
    cust["scheme"] = cust.scheme.fillna("")
    cust = cust.set_index("cust")
    price = T["price"]
    pg_of = dict(zip(price.material, price.pg))
    fx = T["fx"].set_index("ym")
    inv["ym"] = inv.post.dt.year * 100 + inv.post.dt.month
    inv["fy"] = inv.post.dt.year + (inv.post.dt.month >= 4)
    inv["fp"] = (inv.post.dt.month - 4) % 12 + 1
    rate = inv.ym.map(fx.avg)
    inv["eur"] = np.where(inv.cur == "GBP", inv.net / rate, inv.net)
    inv["seg"] = inv.cust.map(cust.seg)
    inv["pg"] = [
        pg_of.get(m, CODE_PG.get(m[4:], "")) if not m.startswith("REB-") else CODE_PG[m[4:]] for m in inv.material
    ]
    is_reb = inv.material.str.startswith("REB-")
    prod = inv[~is_reb & (inv.net != 0)].copy()
    M["n_rebate_lines"] = int(is_reb.sum())
    M["n_zero_value_lines"] = int((~is_reb & (inv.net == 0)).sum())

    # --- bridge FY2026 vs FY2025, GB01
    uk = prod[prod.cc == "GB01"]
    u25, u26 = uk[uk.fy == 2025], uk[uk.fy == 2026]
    g26 = u26[u26.cur == "GBP"].copy()
    prev = {ym: fx.avg.get(ym - 100) for ym in g26.ym.unique()}
    g26["eur_prev"] = g26.net / g26.ym.map(prev)
    M["uk_fx_translation_eur"] = float(g26.eur.sum() - g26.eur_prev.sum())
    r25 = float(u25.eur.sum())
    r26 = float(u26.eur.sum())
    r26c = float(g26.eur_prev.sum() + u26[u26.cur == "EUR"].net.sum())
    M["uk_revenue_fy2025_eur"], M["uk_revenue_fy2026_eur"] = r25, r26
    M["uk_revenue_change_pct_eur"] = 100 * (r26 / r25 - 1)
    M["uk_revenue_change_pct_constant_fx"] = 100 * (r26c / r25 - 1)
    a = u25.groupby(["material", "cur"]).agg(n=("net", "sum"), q=("qty", "sum"))
    b = u26.groupby(["material", "cur"]).agg(n=("net", "sum"), q=("qty", "sum"))
    j = a.add_suffix("25").join(b.add_suffix("26"), how="inner")
    j["p25"], j["p26"] = j.n25 / j.q25, j.n26 / j.q26
    gb = j.xs("GBP", level="cur")
    M["uk_gbp_price_change_pct"] = float(100 * ((gb.p26 - gb.p25) * gb.q26).sum() / (gb.p25 * gb.q26).sum())
    fy25_avg = float(np.mean([fx.avg[ym] for ym in fx.index if fy_of(dt.date(ym // 100, ym % 100, 1)) == 2025]))
    pe = (j.p26 - j.p25) * j.q26
    M["uk_price_effect_eur_constant_fx"] = float(sum(v / (fy25_avg if c == "GBP" else 1.0) for (m, c), v in pe.items()))
    q = prod.groupby(["pg", "fy"]).qty.sum()
    M["units_change_pct_by_pg"] = {pg: float(100 * (q[(pg, 2026)] / q[(pg, 2025)] - 1)) for pg in PGS}

    # --- budget vs actual FY2026
    bud = T["budget"]
    a26 = prod[prod.fy == 2026].copy()
    a26["region"] = a26.cc.map(REGION)
    act = a26.groupby(["region", "pg", "fp"]).eur.sum()
    bb = bud.set_index(["region", "pg", "fp"]).eur
    cells = bb.groupby(level=[0, 1]).sum().to_frame("budget").join(act.groupby(level=[0, 1]).sum().rename("actual"))
    cells["var"] = cells.actual - cells.budget
    cells["bias"] = cells.budget / cells.actual - 1
    M["plan_bias_pct"] = float(100 * cells.bias.median())
    sc = (REGION[P["short_cc"]], P["short_pg"])
    M["shortfall_variance_eur"] = float(cells.loc[sc, "var"])
    M["shortfall_variance_pct"] = float(100 * cells.loc[sc, "var"] / cells.loc[sc, "budget"])
    M["largest_miss_cell"] = list(cells["var"].idxmin())
    M["largest_miss_pct_cell"] = list((cells["var"] / cells.budget).idxmin())
    monthly = bb.to_frame("budget").join(act.rename("actual")).fillna(0)
    monthly["var"] = monthly.actual - monthly.budget
    M["largest_monthly_miss"] = list(monthly["var"].idxmin())
    lc = ("Germany", P["late_pg"])
    M["late_cell_fy_variance_pct"] = float(100 * cells.loc[lc, "var"] / cells.loc[lc, "budget"])
    M["n_cells_missing_2_to_8_pct"] = int(
        ((cells["var"] / cells.budget) < -0.02).sum() - ((cells["var"] / cells.budget) < -0.08).sum()
    )
    late = inv[
        (inv.cust == P["late_cust"]) & (inv.fy == 2026) & (inv.fp == P["late_fp"] + 1) & (inv.pg == P["late_pg"])
    ]
    dl = T["dl"]
    dl = dl.assign(order_date=pd.to_datetime(dl.order_date), deliv_date=pd.to_datetime(dl.deliv_date))
    late_docs = set(
        dl[((dl.deliv_date.dt.month - 4) % 12 + 1 == P["late_fp"]) & (dl.sold_to == P["late_cust"])].bill_doc
    )
    late = late[late.doc.isin(late_docs)]
    M["late_order_eur"] = float(late.eur.sum())
    M["late_order_doc"] = sorted(late.doc.unique().tolist())

    # --- recency: partners and direct
    last = prod.groupby("cust").post.max()
    cnt = prod.groupby("cust").doc.nunique()
    endd = TS(END)
    par = cust[cust.seg == "Partner"].index
    M["lapsed_partners"] = sorted([c for c in par if c in last.index and (endd - last[c]).days >= 274 and cnt[c] >= 2])
    M["partners_in_cycle"] = sorted([c for c in par if c in last.index and 42 <= (endd - last[c]).days <= 84])
    M["at_risk_direct"] = sorted(
        [c for c in P["forced"] if c in last.index and cnt[c] >= 6 and (endd - last[c]).days >= 150]
    )
    firstp = prod.groupby("cust").post.min()
    dirc = cust[cust.seg == "Direct"].index
    M["new_direct"] = sorted([c for c in dirc if c in firstp.index and (endd - firstp[c]).days <= 60])

    # --- cohorts (direct accounts by fiscal quarter of account creation), retention in the next fiscal quarter
    dcu = cust[(cust.seg == "Direct")].copy()
    dcu = dcu[dcu.created >= TS(START)]

    def fql(x):
        return (
            "FY" + (x.dt.year + (x.dt.month >= 4)).astype(str) + "-Q" + (((x.dt.month - 4) % 12) // 3 + 1).astype(str)
        )

    dcu["cq"] = fql(dcu.created)
    pq = prod[prod.seg == "Direct"].copy()
    pq["q"] = fql(pq.post)
    bought = set(zip(pq.cust, pq.q))
    qlabels = [f"FY{y}-Q{k}" for y in (2024, 2025, 2026) for k in (1, 2, 3, 4)]
    ret = {}
    for i, ql in enumerate(qlabels[:-1]):
        members = dcu.index[dcu.cq == ql]
        nxt = qlabels[i + 1]
        ret[ql] = float(100 * np.mean([(c, nxt) in bought for c in members])) if len(members) else float("nan")
    M["cohort_q1_retention_pct"] = ret
    M["cohort_sizes"] = {ql: int((dcu.cq == ql).sum()) for ql in qlabels}

    # --- returns
    cn = T["cn"].copy()
    cn["post"] = pd.to_datetime(cn.post)
    cn["ym"] = cn.post.dt.year * 100 + cn.post.dt.month
    cn["eur"] = np.where(cn.cur == "GBP", cn.net / cn.ym.map(fx.avg), cn.net)
    cn["pg"] = cn.material.map(pg_of)
    cn["seg"] = cn.cust.map(cust.seg)
    z01 = cn[cn.reason == "Z01"].groupby("material").qty.sum()
    units = prod.groupby("material").qty.sum()
    M["defect_rate_pct"] = float(100 * z01.get(P["defect_sku"], 0) / units[P["defect_sku"]])
    M["small_sku_defect_rate_pct"] = float(100 * z01.get(P["small_sku"], 0) / units[P["small_sku"]])
    M["small_sku_units"] = float(units[P["small_sku"]])
    M["small_sku_z01_memos"] = int(cn[(cn.reason == "Z01") & (cn.material == P["small_sku"])].cm.nunique())
    rev_pg_seg = prod.groupby(["pg", "seg"]).eur.sum()
    cn_pg_seg = cn.groupby(["pg", "seg"]).eur.sum()
    rate_ps = (cn_pg_seg / rev_pg_seg).fillna(0)
    w = prod.groupby("seg").eur.sum() / prod.eur.sum()
    overall = cn.eur.sum() / prod.eur.sum()
    h = P["heavy"]
    M["heavy_cn_rate_pct"] = float(100 * cn_pg_seg.xs(h, level="pg").sum() / rev_pg_seg.xs(h, level="pg").sum())
    M["overall_cn_rate_pct"] = float(100 * overall)
    M["heavy_naive_ratio"] = float(M["heavy_cn_rate_pct"] / M["overall_cn_rate_pct"])
    M["heavy_mix_adjusted_ratio"] = float(sum(w[s] * rate_ps[(h, s)] for s in w.index) / overall)
    M["heavy_partner_share_pct"] = float(100 * rev_pg_seg[(h, "Partner")] / rev_pg_seg.xs(h, level="pg").sum())

    # --- profitability FY2026 by segment x product group
    c26map = dict(zip(T["cost"][T["cost"].fy == "FY2026"].material, T["cost"][T["cost"].fy == "FY2026"].cost))
    p26 = prod[prod.fy == 2026].copy()
    p26["cogs"] = p26.qty * p26.material.map(c26map)
    c26 = cn[(cn.post.dt.year + (cn.post.dt.month >= 4)) == 2026].copy()
    restock = c26.reason.isin(["Z02", "Z05"]) & c26.qty.notna()
    c26["cogs_back"] = np.where(restock, c26.qty.fillna(0) * c26.material.map(c26map), 0.0)
    dlv = T["dl"].merge(
        inv[["doc", "item", "fy", "net", "cust"]],
        left_on=["bill_doc", "bill_item"],
        right_on=["doc", "item"],
        how="inner",
    )
    dlv = dlv[(dlv.fy == 2026) & (dlv.net != 0)]
    dlv["pg"] = dlv.material.map(pg_of)
    dlv["seg"] = dlv.cust.map(cust.seg)
    reb = inv[is_reb & (inv.fy == 2026)]
    g = pd.DataFrame({"rev": p26.groupby(["seg", "pg"]).eur.sum(), "cogs": p26.groupby(["seg", "pg"]).cogs.sum()})
    g["cn"] = c26.groupby(["seg", "pg"]).eur.sum()
    g["cogs_back"] = c26.groupby(["seg", "pg"]).cogs_back.sum()
    g["freight"] = dlv.groupby(["seg", "pg"]).freight.sum()
    g["rebate"] = -reb.groupby(["seg", "pg"]).eur.sum()
    g = g.fillna(0)
    g["contrib"] = g.rev - g.cn - (g.cogs - g.cogs_back) - g.freight - g.rebate
    g["margin_pct"] = 100 * g.contrib / g.rev
    g["gross_margin_pct"] = 100 * (g.rev - g.cogs) / g.rev
    g["freight_pct"] = 100 * g.freight / g.rev
    M["profit_table"] = {f"{s}|{p}": {k: float(v) for k, v in row.items()} for (s, p), row in g.iterrows()}
    M["loss_cells"] = [f"{s}|{p}" for (s, p), row in g.iterrows() if row.contrib < 0]
    M["max_freight_cell"] = "|".join(g.freight_pct.idxmax())

    # --- data quality
    d = dl
    M["dq_delivery_before_order"] = int(d[d.deliv_date < d.order_date].dlv.nunique())
    M["dq_same_day_delivery"] = int(d[d.deliv_date == d.order_date].dlv.nunique())
    cr = inv.cust.map(cust.created)
    M["dq_invoice_before_account"] = int(inv[inv.post < cr].doc.nunique())
    M["dq_customers_invoice_before_account"] = int(inv[inv.post < cr].cust.nunique())
    fi = inv[~is_reb].groupby("cust").post.min()
    M["dq_same_day_account_first_invoice"] = int((fi == fi.index.map(cust.created)).sum())
    ip = inv.drop_duplicates("doc").set_index("doc").post
    cnp = cn.drop_duplicates("cm")
    M["dq_credit_before_invoice"] = int((cnp.post.values < cnp.ref_doc.map(ip).values).sum())
    M["dq_credit_same_day_invoice"] = int((cnp.post.values == cnp.ref_doc.map(ip).values).sum())
    # identical repeat orders (different documents, same customer/day/material/qty/amount)
    hd = (
        inv[~is_reb]
        .groupby("doc")
        .agg(
            cust=("cust", "first"),
            post=("post", "first"),
            n=("item", "size"),
            mat=("material", "first"),
            qty=("qty", "first"),
            net=("net", "first"),
        )
    )
    hd = hd[hd.n == 1]
    M["dq_identical_repeat_pairs"] = int(hd.duplicated(["cust", "post", "mat", "qty", "net"]).sum())

    # --- KPI: daily order intake (distinct sales orders by order date)
    oi = d.drop_duplicates("so").groupby("order_date").so.size()
    tout = TS(P["t_out"])
    same_wd = [tout + pd.Timedelta(weeks=k) for k in (-4, -3, -2, -1, 1, 2, 3, 4)]
    base = np.mean([oi.get(x, 0) for x in same_wd])
    M["outage_orders"] = int(oi.get(tout, 0))
    M["outage_baseline"] = float(base)
    M["outage_drop_pct"] = float(100 * (oi.get(tout, 0) / base - 1))
    nxt = tout + pd.Timedelta(days=1)
    M["catch_up_day"] = nxt.date().isoformat()
    M["catch_up_vs_baseline_pct"] = float(
        100 * (oi.get(nxt, 0) / np.mean([oi.get(x + pd.Timedelta(days=1), 0) for x in same_wd]) - 1)
    )

    # --- A/B test
    ab = T["ab"]
    acc = ab.drop_duplicates("account").variant.value_counts()
    nC, nT = int(acc.get("control", 0)), int(acc.get("tiered_price_display", 0))
    chi2 = (nC - nT) ** 2 / (nC + nT)
    M["ab_accounts"] = {"control": nC, "treatment": nT}
    M["ab_srm_p"] = _chi2_p(chi2)
    qc = ab.groupby("variant").converted.agg(["sum", "size"])
    M["ab_quote_conv_pct"] = {k: float(100 * qc.loc[k, "sum"] / qc.loc[k, "size"]) for k in qc.index}
    M["ab_quotes"] = {k: int(qc.loc[k, "size"]) for k in qc.index}

    # --- discounts: naive growth of VR-GROWTH accounts and DiD of VR-PILOT accounts (order counts)
    dprod = prod[prod.seg == "Direct"].copy()
    dprod["scheme"] = dprod.cust.map(cust.scheme).fillna("")
    dcust = cust[cust.seg == "Direct"]

    def orders_in(a, b_):
        x = dprod[(dprod.post >= TS(a)) & (dprod.post <= TS(b_))]
        return x.groupby("cust").doc.nunique()

    o26 = orders_in(dt.date(2025, 4, 1), dt.date(2026, 3, 31))
    rv25 = dprod[dprod.fy == 2025].groupby("cust").eur.sum()
    rv26 = dprod[dprod.fy == 2026].groupby("cust").eur.sum()
    vg = dcust.index[dcust.scheme == "VR-GROWTH"]
    ctrl = dcust.index[(dcust.scheme == "") & (rv25.reindex(dcust.index).fillna(0) > 0)]
    M["vr_growth_accounts"] = len(vg)
    M["vr_growth_naive_rev_growth_pct"] = float(
        100 * (rv26.reindex(vg).fillna(0).sum() / rv25.reindex(vg).fillna(0).sum() - 1)
    )
    M["non_enrolled_rev_growth_pct"] = float(
        100 * (rv26.reindex(ctrl).fillna(0).sum() / rv25.reindex(ctrl).fillna(0).sum() - 1)
    )
    pre = orders_in(dt.date(2024, 7, 1), dt.date(2025, 3, 31))
    post = orders_in(dt.date(2025, 7, 1), dt.date(2026, 3, 31))
    pil = dcust.index[dcust.scheme == "VR-PILOT"]
    non = dcust.index[(dcust.scheme == "") & dcust.cc.isin(["DE01", "FR01", "GB01"])]
    rp = post.reindex(pil).fillna(0).sum() / pre.reindex(pil).fillna(0).sum()
    rn = post.reindex(non).fillna(0).sum() / pre.reindex(non).fillna(0).sum()
    M["vr_pilot_accounts"] = len(pil)
    # selection-aware check of VR-GROWTH: compare with accounts that met the same visible-growth rule but were not enrolled
    c1 = orders_in(dt.date(2023, 4, 1), dt.date(2024, 3, 31)).reindex(dcust.index).fillna(0)
    c2 = orders_in(dt.date(2024, 4, 1), dt.date(2025, 3, 31)).reindex(dcust.index).fillna(0)
    # trend-break check: growth after enrolment vs the same accounts' growth the year before, against non-enrolled
    o26r = o26.reindex(dcust.index).fillna(0)
    ok_ = (c1 >= 2) & (c2 >= 2) & (o26r >= 2) & (dcust.created < TS(dt.date(2023, 4, 1)))
    lb = np.log(o26r.clip(lower=1) / c2.clip(lower=1)) - np.log(c2.clip(lower=1) / c1.clip(lower=1))
    brk = {k_: float(lb[ok_ & (dcust.scheme == v_)].mean()) for k_, v_ in (("in", "VR-GROWTH"), ("out", ""))}
    M["vr_growth_matched_effect_pct"] = float(100 * (np.exp(brk["in"] - brk["out"]) - 1))
    M["vr_pilot_did_orders_pct"] = float(100 * (rp / rn - 1))

    # --- demand history (units of product lines by posting month)
    mu = prod.groupby("ym").qty.sum()
    M["units_by_month"] = {int(k): float(v) for k, v in mu.items()}
    M["dup_rows"] = T.get("_dup_rows")
    return M


def _fq(i):
    return f"FY{2024 + i // 4}-Q{i % 4 + 1}"


def _truth(seed, T, P, cal):
    M = _metrics(T, P)
    fut = P["fut"]
    ab = P["ab"]
    periods = []
    for fy in (2024, 2025, 2026):
        for fp in range(1, 13):
            y, m = (fy - 1, fp + 3) if fp <= 9 else (fy, fp - 9)
            s = dt.date(y, m, 1)
            e = dt.date(y + (m == 12), m % 12 + 1, 1) - dt.timedelta(days=1)
            periods.append({"name": f"FY{fy} P{fp}", "start": s.isoformat(), "end": e.isoformat()})
    hol = {cc: sorted(f"{d.isoformat()} {n}" for d, n in cal.hol[cc].items() if START <= d <= END) for cc in ENTS}
    bq = _fq(P["bad_cohort_q"])
    ret = M["cohort_q1_retention_pct"]
    others = [v for k, v in ret.items() if k != bq and not math.isnan(v)]
    sc_region = REGION[P["short_cc"]]
    late_fp = P["late_fp"]
    lf_month = MONTH_ABBR[late_fp - 1] + f"-{25 if late_fp <= 9 else 26}"
    lt_month = MONTH_ABBR[late_fp] + f"-{25 if late_fp + 1 <= 9 else 26}"
    pt = M["profit_table"]
    loss_key = f"Partner|{P['thin']}"
    fr_key = M["max_freight_cell"]
    units_hist = M["units_by_month"]
    plants = []

    def plant(id_, skill, kind, cls, statement, entity, expected, naive):
        plants.append(
            {
                "id": id_,
                "skill": skill,
                "kind": kind,
                "class": cls,
                "statement": statement,
                "entity": entity,
                "expected": expected,
                "naive_mistake": naive,
            }
        )

    # sales-performance-review
    plant(
        "bridge_uk_fx_translation",
        "sales-performance-review",
        "truth",
        "fx translation",
        f"UK (GB01) revenue in EUR changed {M['uk_revenue_change_pct_eur']:+.1f}% in FY2026 mainly because GBP weakened: "
        f"the FX translation line is {M['uk_fx_translation_eur'] / 1000:,.0f}k EUR (FY2026 GBP sales at FY2026 vs "
        f"same-month FY2025 average rates).",
        {"company_code": "GB01", "region": "United Kingdom", "fiscal_year": "FY2026", "line": "fx translation"},
        {"metric": "fx_translation_effect_eur", "value": round(M["uk_fx_translation_eur"], 2), "tolerance": 0.15},
        "Reports the whole UK decline as lost volume or price erosion, with no FX line.",
    )
    plant(
        "bridge_uk_price_constant_fx",
        "sales-performance-review",
        "truth",
        "price effect at constant FX",
        f"UK prices rose: like-for-like GBP price +{M['uk_gbp_price_change_pct']:.1f}% (list-price rise at the start "
        f"of FY2026), a price effect of +{M['uk_price_effect_eur_constant_fx'] / 1000:,.0f}k EUR at FY2025 rates.",
        {"company_code": "GB01", "region": "United Kingdom", "fiscal_year": "FY2026", "line": "price"},
        {
            "metric": "price_effect_pct_local_currency",
            "value": round(M["uk_gbp_price_change_pct"], 2),
            "tolerance": 1.5,
        },
        "Computes price per unit in EUR at actual rates and reports UK prices down.",
    )
    plant(
        "bridge_volume_loss",
        "sales-performance-review",
        "truth",
        "volume loss",
        f"{P['vol_pg']} lost volume in FY2026: units {M['units_change_pct_by_pg'][P['vol_pg']]:+.1f}% vs FY2025 "
        f"(all regions), the one product group with a real volume decline.",
        {"product_group": P["vol_pg"], "fiscal_year": "FY2026"},
        {"metric": "units_change_pct", "value": round(M["units_change_pct_by_pg"][P["vol_pg"]], 2), "tolerance": 5.0},
        "Hides the group's volume loss inside a company total that is flat after the price rise.",
    )
    plant(
        "bridge_uk_decline_is_fx",
        "sales-performance-review",
        "lookalike",
        "fx-driven decline",
        f"UK revenue is {M['uk_revenue_change_pct_eur']:+.1f}% in EUR but {M['uk_revenue_change_pct_constant_fx']:+.1f}% "
        f"at constant FX: the FX translation line explains "
        f"{100 * M['uk_fx_translation_eur'] / (M['uk_revenue_fy2026_eur'] - M['uk_revenue_fy2025_eur']):.0f}% of the "
        f"EUR decline - not a UK sales collapse.",
        {"company_code": "GB01", "region": "United Kingdom"},
        {
            "metric": "revenue_change_pct_constant_fx",
            "value": round(M["uk_revenue_change_pct_constant_fx"], 2),
            "tolerance": 2.0,
        },
        "Flags the UK as the under-performing region / a demand decline.",
    )
    # budget-vs-actual
    plant(
        "bva_plan_bias",
        "budget-vs-actual",
        "truth",
        "plan bias",
        f"The FY2026 budget carries a uniform stretch: budget is {M['plan_bias_pct']:.1f}% above actuals in the "
        f"median region x product group cell - one plan bias, not a dozen separate misses.",
        {"budget": "budget_fy2026.xlsx", "fiscal_year": "FY2026"},
        {"metric": "plan_bias_pct", "value": round(M["plan_bias_pct"], 2), "tolerance": 1.5},
        "Lists most cells as individual misses of 4-6 % each.",
    )
    plant(
        "bva_largest_miss",
        "budget-vs-actual",
        "truth",
        "genuine shortfall",
        f"The one genuine miss is {sc_region} x {P['short_pg']}: {M['shortfall_variance_eur'] / 1000:,.0f}k EUR "
        f"({M['shortfall_variance_pct']:.1f}%) vs budget for FY2026 (Apr 2025-Mar 2026), far beyond the stretch.",
        {"region": sc_region, "product_group": P["short_pg"], "fiscal_year": "FY2026"},
        {"metric": "fy_variance_vs_budget_eur", "value": round(M["shortfall_variance_eur"], 2), "tolerance": 0.1},
        "Compares calendar 2026 (or maps P01 to January) or ranks months instead of the fiscal-year cell.",
    )
    plant(
        "bva_stretch_cells",
        "budget-vs-actual",
        "lookalike",
        "uniform stretch",
        f"{M['n_cells_missing_2_to_8_pct']} region x product group cells miss budget by 2-8 %; they are the "
        f"leadership stretch of ~5 %, not individual under-performance.",
        {"budget": "budget_fy2026.xlsx", "cells": "all other region x product group"},
        None,
        "Reports each of these cells as a separate miss needing action.",
    )
    plant(
        "bva_late_booked_order",
        "budget-vs-actual",
        "lookalike",
        "timing shift",
        f"Germany x {P['late_pg']} misses FY2026 P{late_fp} ({lf_month}) and beats P{late_fp + 1} ({lt_month}) by one "
        f"large order of {M['late_order_eur'] / 1000:,.0f}k EUR delivered in {lf_month} but posted on "
        f"{', '.join(M['late_order_doc'])} in {lt_month}: a one-month timing shift, not a miss (FY variance "
        f"{M['late_cell_fy_variance_pct']:.1f}%).",
        {
            "region": "Germany",
            "product_group": P["late_pg"],
            "period": f"FY2026 P{late_fp}",
            "customer": P["late_cust"],
        },
        {"metric": "timing_shift_eur", "value": round(M["late_order_eur"], 2), "tolerance": 0.05},
        f"Names Germany x {P['late_pg']} in P{late_fp} as the largest miss of the year.",
    )
    # rfm-segmentation
    plant(
        "rfm_lapsed_partners",
        "rfm-segmentation",
        "truth",
        "lapsed partners",
        f"{len(M['lapsed_partners'])} partners have not ordered for 9+ months although they used to order every "
        f"2-4 months: lost / at risk.",
        {"segment": "Partner", "customers": M["lapsed_partners"]},
        {"metric": "share_flagged_lost_or_at_risk", "value": 1.0, "tolerance": 0.3},
        "Scores partners and direct accounts on one recency scale and misses them among many 'at risk' partners.",
    )
    plant(
        "rfm_partners_in_cycle",
        "rfm-segmentation",
        "lookalike",
        "bulk buying cycle",
        f"{len(M['partners_in_cycle'])} partners last ordered 6-12 weeks ago; within their 2-4-month bulk cycle they "
        f"are not at risk.",
        {"segment": "Partner", "customers": M["partners_in_cycle"]},
        {"metric": "share_flagged_lost_or_at_risk", "value": 0.0, "tolerance": 0.3},
        "A 6-week recency rule flags them as at risk.",
    )
    plant(
        "rfm_direct_at_risk",
        "rfm-segmentation",
        "truth",
        "high-value direct at risk",
        f"{len(M['at_risk_direct'])} formerly frequent, high-spending direct accounts stopped buying 5-8 months "
        f"ago (at risk / can't lose).",
        {"segment": "Direct", "customers": M["at_risk_direct"]},
        {"metric": "share_flagged_lost_or_at_risk", "value": 1.0, "tolerance": 0.3},
        "Ranks them by lifetime monetary value as champions.",
    )
    plant(
        "rfm_new_direct",
        "rfm-segmentation",
        "lookalike",
        "new accounts",
        f"{len(M['new_direct'])} direct accounts made their first purchase in the last 60 days: low frequency "
        f"because they are new, not low-value or lapsing.",
        {"segment": "Direct", "customers": M["new_direct"]},
        {"metric": "share_flagged_lost_or_at_risk", "value": 0.0, "tolerance": 0.3},
        "Puts them in the low-value / hibernating segment.",
    )
    # customer-lifetime-value
    plant(
        "clv_direct_12m",
        "customer-lifetime-value",
        "truth",
        "non-contractual CLV",
        f"Direct accounts (non-contractual; churn unobserved) are worth {fut['clv12']:,.0f} EUR each in the next "
        f"12 months on average (Apr 2026-Mar 2027, GBP at the FY2026 average rate {P['fy26_gbp']:.4f}), over the "
        f"{fut['clv_population']} direct accounts with a purchase to date.",
        {"segment": "Direct", "horizon": "12 months from 2026-04-01"},
        {
            "metric": "mean_12m_forward_revenue_eur_per_direct_customer",
            "value": round(fut["clv12"], 2),
            "tolerance": 0.3,
        },
        "Not computed from the data: re-simulation of the planted buying/drop-out process, mean of 6 runs.",
    )
    plants[-1]["naive_mistake"] = (
        "Average historical annual revenue x an assumed lifetime with every account "
        "treated as alive, partners' contractual bulk stream mixed in."
    )
    plant(
        "clv_partners_not_in_direct_model",
        "customer-lifetime-value",
        "lookalike",
        "wrong stream",
        "Partners are not part of the non-contractual direct CLV: their bulk orders under reseller agreements "
        "would inflate the direct accounts' value if pooled.",
        {"segment": "Partner"},
        None,
        "Fits one BG/NBD-type model on all customers including partners.",
    )
    # customer-cohort-retention
    plant(
        "cohort_weak",
        "customer-cohort-retention",
        "truth",
        "weak cohort",
        f"Direct accounts created in {bq} (a one-off acquisition campaign) retain far worse: "
        f"{ret[bq]:.1f}% bought in the next fiscal quarter vs a median {np.median(others):.1f}% for other cohorts.",
        {"cohort": bq, "segment": "Direct", "cohort_basis": "fiscal quarter of account creation"},
        {"metric": "next_quarter_retention_pct", "value": round(ret[bq], 2), "tolerance": 6.0},
        "Uses calendar quarters or first-order dates and blurs the cohort.",
    )
    plant(
        "cohort_censored_latest",
        "customer-cohort-retention",
        "lookalike",
        "right-censoring",
        "The FY2026-Q4 (Jan-Mar 2026) and FY2026-Q3 cohorts look weak on cumulative retention only because they "
        "have had at most one or two quarters to buy again.",
        {"cohort": "FY2026-Q4", "segment": "Direct"},
        None,
        "Flags the youngest cohorts as declining retention.",
    )
    # returns-and-cancellations
    plant(
        "returns_defect_sku",
        "returns-and-cancellations",
        "truth",
        "defective SKU",
        f"{P['defect_sku']} has a real defect problem: {M['defect_rate_pct']:.1f}% of units credited as defective "
        f"(reason Z01) vs under 1% for other SKUs.",
        {"sku": P["defect_sku"], "reason_code": "Z01"},
        {"metric": "defect_credit_rate_pct_units", "value": round(M["defect_rate_pct"], 2), "tolerance": 3.0},
        "Ranks product groups by credit-note value and never looks at SKU x reason.",
    )
    plant(
        "returns_pg_mix",
        "returns-and-cancellations",
        "lookalike",
        "segment mix",
        f"{P['heavy']} has the highest credit-note rate ({M['heavy_cn_rate_pct']:.1f}% vs {M['overall_cn_rate_pct']:.1f}% "
        f"overall) only because {M['heavy_partner_share_pct']:.0f}% of it is sold to partners, whose agreement allows "
        f"stock-rotation returns (Z05); within each segment its rate is normal.",
        {"product_group": P["heavy"]},
        {"metric": "mix_adjusted_rate_ratio", "value": round(M["heavy_mix_adjusted_ratio"], 3), "tolerance": 0.25},
        f"Flags {P['heavy']} as a quality problem (naive ratio {M['heavy_naive_ratio']:.2f}).",
    )
    plant(
        "returns_small_sample_sku",
        "returns-and-cancellations",
        "lookalike",
        "small sample",
        f"{P['small_sku']} shows a {M['small_sku_defect_rate_pct']:.1f}% defect rate from only "
        f"{M['small_sku_z01_memos']} credit memos on {M['small_sku_units']:.0f} units: not significant.",
        {"sku": P["small_sku"]},
        None,
        "Ranks the SKU first by defect rate.",
    )
    # data-quality-audit
    plant(
        "dq_delivery_before_order",
        "data-quality-audit",
        "truth",
        "impossible dates",
        f"{M['dq_delivery_before_order']} deliveries are dated before their sales order (year typos and slips).",
        {"file": "deliveries.csv", "check": "Delivery Date < Order Date"},
        {"metric": "count_deliveries", "value": M["dq_delivery_before_order"], "tolerance": 0},
        "Not checked; lead times go negative.",
    )
    plant(
        "dq_invoice_before_account",
        "data-quality-audit",
        "truth",
        "orphan timing",
        f"{M['dq_invoice_before_account']} invoices ({M['dq_customers_invoice_before_account']} accounts) are posted "
        f"before the customer's account was created.",
        {"file": "invoices_*.csv + customers.csv", "check": "Posting Date < Account Created"},
        {"metric": "count_invoices", "value": M["dq_invoice_before_account"], "tolerance": 0},
        "Not checked.",
    )
    plant(
        "dq_credit_before_invoice",
        "data-quality-audit",
        "truth",
        "impossible dates",
        f"{M['dq_credit_before_invoice']} credit memos are posted before the invoice they reference.",
        {"file": "credit_notes.csv", "check": "credit Posting Date < invoice Posting Date"},
        {"metric": "count_credit_memos", "value": M["dq_credit_before_invoice"], "tolerance": 0},
        "Not checked.",
    )
    plant(
        "dq_thousands_separator",
        "data-quality-audit",
        "truth",
        "number format",
        f"{T['_th_rows']} amounts in invoices_de.csv (posted {', '.join(T['_th_days'])}) carry a dot thousands "
        f"separator ('1.234,56' = 1234.56) unlike the rest of the file ('1234,56').",
        {"file": "invoices_de.csv", "column": "Nettobetrag", "dates": T["_th_days"]},
        {"metric": "count_rows", "value": T["_th_rows"], "tolerance": 0},
        "Reads 1.234,56 as 1.23456 (or drops the rows as unparseable).",
    )
    plant(
        "dq_cross_file_duplicates",
        "data-quality-audit",
        "truth",
        "duplicates",
        f"{T['_dup_rows']} DE01 invoice lines ({T['_dup_docs']} documents, {T['_dup_value'] / 1000:,.0f}k EUR, posted "
        f"{' and '.join(T['_dup_days'])}) appear in both invoices_de.csv and invoices_fr_uk.csv.",
        {"files": ["invoices_de.csv", "invoices_fr_uk.csv"], "key": "document number + item", "company_code": "DE01"},
        {"metric": "count_duplicate_lines", "value": T["_dup_rows"], "tolerance": 0},
        "Stacks the two files and double-counts the DE01 lines.",
    )
    plant(
        "dq_rebate_lines",
        "data-quality-audit",
        "lookalike",
        "legitimate negatives",
        f"{M['n_rebate_lines']} negative invoice lines (materials REB-*) are partner rebate settlements, not errors.",
        {"material": "REB-*"},
        {"metric": "count_rows", "value": M["n_rebate_lines"], "tolerance": 0},
        "Flags negative invoice amounts as errors or drops them.",
    )
    plant(
        "dq_zero_value_samples",
        "data-quality-audit",
        "lookalike",
        "legitimate zeros",
        f"{M['n_zero_value_lines']} zero-value invoice lines are free sample shipments (delivered, not charged).",
        {"check": "Net Amount = 0"},
        {"metric": "count_rows", "value": M["n_zero_value_lines"], "tolerance": 0},
        "Flags zero amounts as missing prices.",
    )
    plant(
        "dq_identical_repeat_orders",
        "data-quality-audit",
        "lookalike",
        "legitimate repeats",
        f"{M['dq_identical_repeat_pairs']} invoice pairs are identical in customer, day, material, quantity and "
        f"amount but are separate orders for two ship-to sites (different documents and deliveries).",
        {"check": "same customer/day/material/qty/amount, different document"},
        {"metric": "count_pairs", "value": M["dq_identical_repeat_pairs"], "tolerance": 0},
        "De-duplicates on content and deletes real sales.",
    )
    plant(
        "dq_same_day_account",
        "data-quality-audit",
        "lookalike",
        "legitimate same-day",
        f"{M['dq_same_day_account_first_invoice']} accounts were created on the day of their first invoice (new "
        f"account opened at order entry) - not an invoice-before-account fault.",
        {"check": "Account Created = first Posting Date"},
        None,
        "Counts same-day as a timing fault.",
    )
    plant(
        "dq_same_day_delivery_and_credit",
        "data-quality-audit",
        "lookalike",
        "legitimate same-day",
        f"{M['dq_same_day_delivery']} deliveries leave on the order day and {M['dq_credit_same_day_invoice']} price "
        f"corrections are posted on the invoice day: legitimate.",
        {"check": "Delivery Date = Order Date; credit Posting Date = invoice Posting Date"},
        None,
        "Uses <= instead of < and flags them.",
    )
    # kpi-anomaly-detection
    plant(
        "kpi_outage",
        "kpi-anomaly-detection",
        "truth",
        "outage",
        f"{P['t_out']} is a real anomaly in daily order intake: {M['outage_orders']} orders vs ~"
        f"{M['outage_baseline']:.0f} on the same weekday ({M['outage_drop_pct']:.0f}%), an order-entry outage "
        f"across all company codes.",
        {"date": P["t_out"], "metric": "daily order intake (distinct Sales Orders by Order Date)"},
        {"metric": "order_intake_vs_same_weekday_pct", "value": round(M["outage_drop_pct"], 1), "tolerance": 15.0},
        "Buries it among the holiday dips or does not flag it.",
    )
    plant(
        "kpi_catch_up",
        "kpi-anomaly-detection",
        "lookalike",
        "catch-up",
        f"{M['catch_up_day']}: order intake {M['catch_up_vs_baseline_pct']:+.0f}% is the backlog from the outage "
        f"entered the next day - part of the same incident, not a demand spike.",
        {"date": M["catch_up_day"]},
        None,
        "Flags a separate positive anomaly.",
    )
    plant(
        "kpi_holidays",
        "kpi-anomaly-detection",
        "lookalike",
        "holidays",
        "German, French and UK public holidays (e.g. 2025-10-03 Tag der Deutschen Einheit, 2025-08-25 Summer bank "
        "holiday, 2025-04-18 Good Friday) and the Christmas shutdown 24 Dec-1 Jan are expected dips, not anomalies.",
        {"dates": ["2025-04-18", "2025-08-25", "2025-10-03", "2025-12-24..2026-01-01"]},
        None,
        "Flags holiday and shutdown days as anomalies.",
    )
    # discount-effectiveness
    plant(
        "disc_pilot_real",
        "discount-effectiveness",
        "truth",
        "real effect",
        f"The VR-PILOT volume rebate (all direct accounts of the territories drawn by lot: "
        f"{', '.join(r_ for v in P['pilot_reps'].values() for r_ in v)}; from 2025-07-01) raised order frequency: difference-in-differences of orders per account vs the other territories and the "
        f"same months a year earlier {M['vr_pilot_did_orders_pct']:+.1f}% (planted effect +20%).",
        {"scheme": "VR-PILOT", "start": "2025-07-01"},
        {"metric": "order_frequency_uplift_pct", "value": round(M["vr_pilot_did_orders_pct"], 1), "tolerance": 7.0},
        "Dismisses the pilot because its raw revenue growth is smaller than VR-GROWTH's.",
    )
    plant(
        "disc_growth_selection",
        "discount-effectiveness",
        "lookalike",
        "selection",
        f"VR-GROWTH accounts grew revenue {M['vr_growth_naive_rev_growth_pct']:+.0f}% in FY2026 vs "
        f"{M['non_enrolled_rev_growth_pct']:+.0f}% for non-enrolled accounts, but reps enrolled accounts that were "
        f"already growing: the rebate's true effect is 0 (planted).",
        {"scheme": "VR-GROWTH", "start": "2025-04-01"},
        {"metric": "incremental_uplift_pct", "value": 0.0, "tolerance": 15.0},
        "Credits the rebate with the enrolled accounts' growth.",
    )
    # demand-forecast
    plant(
        "forecast_next_quarter",
        "demand-forecast",
        "truth",
        "forecast with backtest",
        f"Expected units invoiced Apr-Jun 2026 (FY2027 Q1): {fut['units_q1_fy2027']:,.0f} (planted process, mean "
        f"of 6 simulations); any forecast must be reported with its backtest error on held-out months.",
        {"series": "monthly invoiced units, product lines", "horizon": "2026-04..2026-06"},
        {"metric": "units_next_3_months", "value": round(fut["units_q1_fy2027"], 0), "tolerance": 0.15},
        "A point forecast with no backtest error, or a straight-line trend through the December dips.",
    )
    plant(
        "forecast_december_dip",
        "demand-forecast",
        "lookalike",
        "seasonality",
        "The December dips are the Christmas shutdown (24 Dec-1 Jan) and year-end seasonality, not a trend break.",
        {"months": ["2023-12", "2024-12", "2025-12"]},
        None,
        "Treats December as a structural decline.",
    )
    plant(
        "forecast_late_order_spike",
        "demand-forecast",
        "lookalike",
        "one-off",
        f"The {lt_month} spike in Germany x {P['late_pg']} is one late-posted bulk order, not a level shift.",
        {"month": lt_month, "product_group": P["late_pg"]},
        None,
        "Extrapolates the spike.",
    )
    # ab-test-readout
    plant(
        "ab_srm",
        "ab-test-readout",
        "truth",
        "sample-ratio mismatch",
        f"The quote-page test is randomised per account 50/50 but logged {M['ab_accounts']['control']} control vs "
        f"{M['ab_accounts']['treatment']} treatment accounts: SRM, chi-square p = {M['ab_srm_p']:.4f}; the "
        f"result cannot be trusted.",
        {"experiment": "quote_page_tiered_pricing_v2", "unit": "account_id"},
        {"metric": "srm_p_value_account_level", "value": round(M["ab_srm_p"], 5), "tolerance": 0.0015},
        "Tests SRM on quote rows or not at all.",
    )
    plant(
        "ab_quote_level_win",
        "ab-test-readout",
        "lookalike",
        "wrong unit + SRM",
        f"Treatment converts {M['ab_quote_conv_pct'].get('tiered_price_display', 0):.1f}% of quotes vs "
        f"{M['ab_quote_conv_pct'].get('control', 0):.1f}% (naive quote-level p = {ab['p_quote_naive']:.3f}); quotes "
        f"are not independent and the missing treatment accounts are the low-propensity ones - not a win.",
        {"experiment": "quote_page_tiered_pricing_v2", "unit": "quote_id"},
        None,
        "Declares the tiered price display a winner.",
    )
    # profitability
    lk = pt[loss_key]
    plant(
        "profit_loss_cell",
        "profitability",
        "truth",
        "loss-making cell",
        f"Partner x {P['thin']} loses money in FY2026: contribution {lk['contrib'] / 1000:,.0f}k EUR "
        f"({lk['margin_pct']:.1f}% of revenue) after freight, partner rebates and returns, despite a "
        f"{lk['gross_margin_pct']:.1f}% gross margin.",
        {"segment": "Partner", "product_group": P["thin"], "fiscal_year": "FY2026"},
        {"metric": "contribution_margin_pct", "value": round(lk["margin_pct"], 2), "tolerance": 3.0},
        "Stops at gross margin (positive) and misses the loss.",
    )
    fk = pt[fr_key]
    plant(
        "profit_freight_heavy",
        "profitability",
        "lookalike",
        "high cost share, still profitable",
        f"{fr_key.replace('|', ' x ')} carries the highest freight share ({fk['freight_pct']:.1f}% of revenue) but "
        f"still earns {fk['margin_pct']:.1f}% contribution.",
        {"segment": fr_key.split("|")[0], "product_group": fr_key.split("|")[1]},
        {"metric": "contribution_margin_pct", "value": round(fk["margin_pct"], 2), "tolerance": 3.0},
        "Flags it as the loss-maker because of its freight ratio.",
    )

    thin_rb = {pg: (0.06 if pg == P["thin"] else 0.03) for pg in PGS}
    files = {
        "invoices_de.csv": {
            "system": "SAP S/4HANA (ALV list export, logon language DE) for company code DE01",
            "grain": "invoice line (Belegnummer + Position)",
            "layout": "';'-separated, cp1252, German headers",
            "columns": {
                "Belegnummer": "billing document",
                "Position": "item (10, 20, ...)",
                "Buchungskreis": "company code",
                "Kunde": "customer number (10 digits, leading zeros)",
                "Buchungsdatum": "posting date DD.MM.YYYY",
                "Material": "SKU or REB-<group> (rebate settlement)",
                "Menge": "quantity (blank on rebate lines)",
                "ME": "unit (ST)",
                "Währung": "document currency",
                "Nettobetrag": "net amount, decimal comma, trailing minus for negatives",
            },
            "quirks": [
                "decimal comma",
                "trailing minus sign (1234,56-)",
                "a few rows with a dot thousands separator (1.234,56)",
                "DD.MM.YYYY dates",
                "cp1252 encoding",
                "zero-value sample lines",
                "negative rebate lines",
            ],
        },
        "invoices_fr_uk.csv": {
            "system": "SAP S/4HANA (ALV export, logon language EN) for FR01 and GB01",
            "grain": "invoice line (Document Number + Item)",
            "layout": "',' separated, UTF-8",
            "columns": {
                "Document Number": "billing document",
                "Item": "item",
                "Company Code": "FR01/GB01 (and DE01 duplicates)",
                "Customer": "customer number",
                "Posting Date": "YYYY-MM-DD",
                "Material": "SKU or REB-<group>",
                "Quantity": "quantity",
                "Unit": "PC",
                "Currency": "EUR or GBP (GB01 bills Irish customers in EUR)",
                "Net Amount": "net amount in document currency",
            },
            "quirks": [
                "DE01 lines of two posting days duplicated from invoices_de.csv (unit PC instead of ST)",
                "GB01 has EUR documents (Irish customers)",
            ],
        },
        "credit_notes.csv": {
            "system": "SAP S/4HANA billing (credit memos)",
            "grain": "credit memo line",
            "layout": "',' separated",
            "columns": {
                "Credit Memo": "document",
                "Reference Invoice": "invoice",
                "Reference Item": "invoice item",
                "Quantity": "blank for price corrections (Z03)",
                "Net Amount": "positive credited amount, document currency",
                "Reason Code": "Z01 defective, Z02 wrong item, Z03 price correction, Z05 stock rotation",
            },
            "quirks": ["amounts positive", "some memos posted before their invoice"],
        },
        "deliveries.csv": {
            "system": "SAP S/4HANA outbound deliveries (LIKP/LIPS)",
            "grain": "delivery item",
            "layout": "',' separated",
            "columns": {
                "Order Date": "sales order date (order intake)",
                "Delivery Date": "goods issue date",
                "Billing Document": "invoice",
                "Freight Cost EUR": "carrier cost allocated to the item by the TMS, EUR for all company codes",
                "Ship-To": "ship-to party (differs from Sold-To for second sites)",
            },
            "quirks": [
                "a few delivery dates before the order date",
                "orders not invoiced by 31.03.2026 are not in the extract",
            ],
        },
        "customers.csv": {
            "system": "SAP customer master (KNA1/KNVV)",
            "grain": "customer",
            "layout": "',' separated",
            "columns": {
                "Segment": "Direct / Partner",
                "Account Created": "YYYY-MM-DD",
                "Rebate Scheme": "VR-GROWTH (chosen by reps, from 2025-04-01), VR-PILOT (territories drawn by lot, from 2025-07-01)",
            },
            "quirks": [
                "includes inactive accounts that never bought in the window",
                "a few accounts created after their first invoice",
            ],
        },
        "price_list.csv": {
            "system": "SAP pricing conditions (PR00) export",
            "grain": "material x currency x fiscal year",
            "layout": "',' separated",
            "columns": {"List Price": "list price per unit in the currency"},
            "quirks": ["FY2024 = FY2025 prices; one rise at the start of FY2026 (EUR ~+4 %, GBP ~+8 %)"],
        },
        "item_costs.csv": {
            "system": "SAP material ledger standard cost",
            "grain": "material x fiscal year",
            "layout": "',' separated",
            "columns": {"Standard Cost EUR": "per unit, EUR group valuation"},
            "quirks": [],
        },
        "fx_rates.csv": {
            "system": "finance team (treasury) rate table",
            "grain": "month x rate type",
            "layout": "long",
            "columns": {
                "Rate (GBP per 1 EUR)": "EUR amount = GBP amount / rate",
                "Rate Type": "AVG (monthly average, use for P&L) or EOM (month end)",
            },
            "quirks": ["quoted GBP per EUR (divide, do not multiply)"],
        },
        "budget_fy2026.xlsx": {
            "system": "Excel workbook by sales leadership",
            "grain": "region x product group x fiscal month",
            "layout": "wide: title rows 1-2, header row 4, P01..P12 columns + FY total formula, subtotal rows per region and a grand total; sheet Notes",
            "columns": {"P01 Apr-25 .. P12 Mar-26": "EUR"},
            "quirks": [
                "subtotal and grand-total rows mixed with the data rows",
                "FY2026 column is a formula",
                "fiscal periods, not calendar months",
            ],
        },
        "pricing_test.csv": {
            "system": "web experimentation platform export",
            "grain": "quote",
            "layout": "',' separated",
            "columns": {
                "account_id": "randomisation unit (customer number)",
                "quote_created_at": "local time with UTC offset",
                "converted_to_order": "0/1",
            },
            "quirks": ["several quotes per account", "treatment accounts partly missing (SRM)"],
        },
    }
    business = {
        "contractual": "mixed",
        "contract_states": [
            "direct: none (non-contractual, buy at will; churn unobserved)",
            "partner: reseller agreement active (discount, quarterly rebate, stock-rotation returns; no order commitment)",
        ],
        "fiscal_calendar": {
            "kind": "calendar-month",
            "first_day": START.isoformat(),
            "year_naming": "end_year",
            "53_week_years": [],
            "periods": periods,
        },
        "currencies": ["EUR", "GBP"],
        "reporting_currency": "EUR",
        "fx_source": "fx_rates.csv (GBP per 1 EUR; AVG for revenue/P&L translation, EOM for balances)",
        "store_timezone": "Europe/Berlin (ERP); entities in Europe/Berlin, Europe/Paris, Europe/London",
        "randomisation_unit": "customer account (pricing_test.csv account_id)",
        "analysis_row_unit": "invoice line (document number + item); quotes in pricing_test.csv",
        "entities": {cc: {"region": REGION[cc], "currency": "GBP" if cc == "GB01" else "EUR"} for cc in ENTS},
        "revenue_definition": "net invoiced product lines (excl. REB-* rebate settlements and zero-value samples), "
        "deduplicated across the two invoice files, EUR at the posting month's AVG rate",
        "budget_basis": "same as revenue_definition (see the workbook's Notes sheet); stretch +5 % applied uniformly",
        "holidays": hol,
        "christmas_shutdown": "24 Dec - 1 Jan, no order entry or deliveries",
        "order_intake": "distinct Sales Order by Order Date in deliveries.csv",
        "channels": {
            "Direct": {
                "variable_costs": {
                    "customer_discount_pct": "0-8 off list (+3 while in a rebate scheme)",
                    "freight": "deliveries.csv Freight Cost EUR (parcel; ~4 EUR + 0.30 EUR/kg)",
                    "returns": "Z01 defective scrapped; Z02 restocked; Z03 price correction",
                }
            },
            "Partner": {
                "variable_costs": {
                    "partner_discount_pct": {pg: (30 if pg == P["thin"] else 25) for pg in PGS},
                    "partner_rebate_pct_of_net": {pg: 100 * v for pg, v in thin_rb.items()},
                    "rebate_settlement": "quarterly REB-<group> negative invoice lines ~15th of the month after quarter end",
                    "freight": "deliveries.csv Freight Cost EUR (pallet; ~1.5 EUR + 0.06 EUR/kg)",
                    "stock_rotation_returns": "Z05, restocked, ~7 % of partner units",
                }
            },
        },
        "profitability_definition": "contribution = revenue - credit memos - standard cost x (units invoiced - units "
        "restocked via Z02/Z05) - freight - partner rebates, FY2026 by posting date",
        "partner_buying_cycle_days": [60, 120],
        "rebate_schemes": {
            "VR-GROWTH": "3 % extra discount from 2025-04-01; accounts chosen by sales reps",
            "VR-PILOT": "3 % extra discount from 2025-07-01 for all direct accounts of territories drawn by lot",
        },
        "demand_history_units_by_month": units_hist,
    }
    return {
        "archetype": ARCHETYPE,
        "seed": int(seed),
        "business": business,
        "files": files,
        "plants": plants,
        "_checks": {
            "largest_miss_cell": M["largest_miss_cell"],
            "largest_miss_pct_cell": M["largest_miss_pct_cell"],
            "largest_monthly_miss": M["largest_monthly_miss"],
            "loss_cells": M["loss_cells"],
            "cohort_retention": ret,
            "ab": ab,
            "uk_eur_pct": M["uk_revenue_change_pct_eur"],
            "units_by_pg": M["units_change_pct_by_pg"],
            "fut": fut,
            "vr_pilot_did": M["vr_pilot_did_orders_pct"],
            "vr_growth_naive": M["vr_growth_naive_rev_growth_pct"],
            "non_enrolled": M["non_enrolled_rev_growth_pct"],
            "late_cell_fy_pct": M["late_cell_fy_variance_pct"],
            "params": {k: v for k, v in P.items() if k not in ("fut", "ab")},
        },
    }


# ------------------------------------------------------------------------------------------------- self-check
def _parse_de_amount(x: str) -> float:
    x = x.strip()
    neg = x.endswith("-")
    v = float(x.rstrip("-").replace(".", "").replace(",", "."))
    return -v if neg else v


def read_back(out: pathlib.Path) -> dict:
    """Parse the written files the way an expert would, into the typed tables `_metrics` takes."""
    out = pathlib.Path(out)
    de = pd.read_csv(out / "invoices_de.csv", sep=";", encoding="cp1252", dtype=str, keep_default_na=False)
    fu = pd.read_csv(out / "invoices_fr_uk.csv", dtype=str, keep_default_na=False)
    th_re = re.compile(r"^\d{1,3}(\.\d{3})+,\d{2}-?$")
    th_mask = de.Nettobetrag.str.match(th_re)
    de_t = pd.DataFrame(
        {
            "doc": de.Belegnummer,
            "item": de.Position.astype(int),
            "cc": de.Buchungskreis,
            "cust": de.Kunde,
            "post": pd.to_datetime(de.Buchungsdatum, format="%d.%m.%Y").dt.date,
            "material": de.Material,
            "qty": pd.to_numeric(de.Menge.replace("", np.nan)),
            "cur": de["Währung"],
            "net": de.Nettobetrag.map(_parse_de_amount),
        }
    )
    fu_t = pd.DataFrame(
        {
            "doc": fu["Document Number"],
            "item": fu.Item.astype(int),
            "cc": fu["Company Code"],
            "cust": fu.Customer,
            "post": pd.to_datetime(fu["Posting Date"]).dt.date,
            "material": fu.Material,
            "qty": pd.to_numeric(fu.Quantity.replace("", np.nan)),
            "cur": fu.Currency,
            "net": fu["Net Amount"].astype(float),
        }
    )
    key_de = set(zip(de_t.doc, de_t.item))
    dup = fu_t[(fu_t.cc == "DE01").values & np.array([k in key_de for k in zip(fu_t.doc, fu_t.item)], bool)]
    inv = pd.concat([de_t, fu_t], ignore_index=True).drop_duplicates(["doc", "item"])
    cn = pd.read_csv(out / "credit_notes.csv", dtype=str, keep_default_na=False)
    cn_t = pd.DataFrame(
        {
            "cm": cn["Credit Memo"],
            "item": cn.Item.astype(int),
            "cc": cn["Company Code"],
            "post": pd.to_datetime(cn["Posting Date"]).dt.date,
            "ref_doc": cn["Reference Invoice"],
            "ref_item": cn["Reference Item"].astype(int),
            "cust": cn.Customer,
            "material": cn.Material,
            "qty": pd.to_numeric(cn.Quantity.replace("", np.nan)),
            "cur": cn.Currency,
            "net": cn["Net Amount"].astype(float),
            "reason": cn["Reason Code"],
        }
    )
    dl = pd.read_csv(out / "deliveries.csv", dtype=str, keep_default_na=False)
    dl_t = pd.DataFrame(
        {
            "dlv": dl.Delivery,
            "item": dl.Item.astype(int),
            "so": dl["Sales Order"],
            "cc": dl["Sales Org"],
            "sold_to": dl["Sold-To"],
            "ship_to": dl["Ship-To"],
            "material": dl.Material,
            "qty": dl["Delivery Qty"].astype(float),
            "order_date": pd.to_datetime(dl["Order Date"]).dt.date,
            "deliv_date": pd.to_datetime(dl["Delivery Date"]).dt.date,
            "bill_doc": dl["Billing Document"],
            "bill_item": dl["Billing Item"].astype(int),
            "freight": dl["Freight Cost EUR"].astype(float),
        }
    )
    cu = pd.read_csv(out / "customers.csv", dtype=str, keep_default_na=False)
    cu_t = pd.DataFrame(
        {
            "cust": cu.Customer,
            "name": cu.Name,
            "cc": cu["Company Code"],
            "country": cu.Country,
            "seg": cu.Segment,
            "created": pd.to_datetime(cu["Account Created"]).dt.date,
            "rep": cu["Sales Rep"],
            "scheme": cu["Rebate Scheme"],
            "scheme_start": cu["Scheme Start"],
        }
    )
    pr = pd.read_csv(out / "price_list.csv", dtype={"Material": str})
    price_t = pd.DataFrame(
        {
            "material": pr.Material,
            "desc": pr.Description,
            "pg": pr["Product Group"],
            "cur": pr.Currency,
            "fy": pr["Fiscal Year"],
            "price": pr["List Price"],
        }
    )
    co = pd.read_csv(out / "item_costs.csv", dtype={"Material": str})
    cost_t = pd.DataFrame(
        {"material": co.Material, "pg": co["Product Group"], "fy": co["Fiscal Year"], "cost": co["Standard Cost EUR"]}
    )
    fx = pd.read_csv(out / "fx_rates.csv")
    fxw = fx.pivot(index="Month", columns="Rate Type", values="Rate (GBP per 1 EUR)").reset_index()
    fx_t = pd.DataFrame({"ym": [int(m[:4]) * 100 + int(m[5:]) for m in fxw.Month], "avg": fxw.AVG, "eom": fxw.EOM})
    from openpyxl import load_workbook

    ws = load_workbook(out / "budget_fy2026.xlsx")["Budget FY2026"]
    hdr = [c.value for c in ws[4]]
    rows = []
    for row in ws.iter_rows(min_row=5, values_only=True):
        if row[0] and row[1] and not str(row[0]).startswith(("Total", "Grand")):
            for j in range(12):
                rows.append({"region": row[0], "pg": row[1], "fp": int(hdr[2 + j][1:3]), "eur": float(row[2 + j])})
    bud_t = pd.DataFrame(rows)
    ab = pd.read_csv(out / "pricing_test.csv", dtype={"account_id": str})
    ab_t = pd.DataFrame(
        {
            "experiment": ab.experiment_key,
            "variant": ab.variant_key,
            "account": ab.account_id,
            "quote_id": ab.quote_id,
            "created": ab.quote_created_at,
            "cur": ab.currency,
            "value": ab.quote_net_value,
            "converted": ab.converted_to_order,
        }
    )
    de_days = sorted(set(de_t.post[th_mask]))
    return {
        "inv": inv,
        "cn": cn_t,
        "dl": dl_t,
        "cust": cu_t,
        "price": price_t,
        "cost": cost_t,
        "fx": fx_t,
        "budget": bud_t,
        "ab": ab_t,
        "_th_rows": int(th_mask.sum()),
        "_th_days": [d.isoformat() for d in de_days],
        "_dup_rows": len(dup),
        "_dup_docs": int(dup.doc.nunique()),
        "_dup_value": float(dup.net.sum()),
        "_dup_days": [d.isoformat() for d in sorted(set(dup.post))],
    }


def _close(a, b, rel=1e-6, ab_=0.011):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= max(ab_, rel * abs(b))
    return a == b


def self_check(seeds=range(1, 11)):
    cal = Cal()
    fails = []
    for seed in seeds:
        with tempfile.TemporaryDirectory() as td:
            t0, c0 = time.perf_counter(), time.process_time()
            truth = generate(pathlib.Path(td), seed)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            ck = _CHECKS[seed]
            P = ck["P"]
            Tb = read_back(pathlib.Path(td))
            again = _truth(seed, Tb, P, cal)
            again.pop("_checks")
            n_rows = sum(
                len(pd.read_csv(f, sep=None, engine="python", encoding="cp1252" if "_de" in f.name else "utf-8"))
                for f in pathlib.Path(td).glob("*.csv")
            )
            M = _metrics(Tb, P)
            disk = json.loads((pathlib.Path(td) / "truth.json").read_text(encoding="utf-8"))

            def check(cond, msg):
                if not cond:
                    fails.append(f"seed {seed}: {msg}")

            check(disk == json.loads(json.dumps(truth)), "truth.json differs from the returned dict")
            for p1, p2 in zip(truth["plants"], again["plants"]):
                e1, e2 = p1["expected"], p2["expected"]
                if e1 is not None:
                    check(_close(e2["value"], e1["value"]), f"{p1['id']}: files give {e2['value']} vs {e1['value']}")
            # plant properties
            sc = [REGION[P["short_cc"]], P["short_pg"]]
            check(M["largest_miss_cell"] == sc, f"largest FY miss {M['largest_miss_cell']} != {sc}")
            check(M["largest_miss_pct_cell"] == sc, f"largest FY % miss {M['largest_miss_pct_cell']} != {sc}")
            check(
                list(M["largest_monthly_miss"]) == ["Germany", P["late_pg"], P["late_fp"]],
                f"largest monthly miss {M['largest_monthly_miss']}",
            )
            check(
                abs(M["late_cell_fy_variance_pct"] + 4.8) < 2.5,
                f"late cell FY variance {M['late_cell_fy_variance_pct']:.1f}",
            )
            check(abs(M["late_order_eur"] - P["late_eur"]) < 1, "late order value")
            check(M["loss_cells"] == [f"Partner|{P['thin']}"], f"loss cells {M['loss_cells']}")
            check(M["uk_revenue_change_pct_eur"] < -1.5, f"UK EUR change {M['uk_revenue_change_pct_eur']:.1f}")
            fx_share = M["uk_fx_translation_eur"] / (M["uk_revenue_fy2026_eur"] - M["uk_revenue_fy2025_eur"])
            check(
                M["uk_revenue_change_pct_constant_fx"] > -4.5 and fx_share > 0.3,
                f"UK const-FX change {M['uk_revenue_change_pct_constant_fx']:.1f}, FX share of decline {fx_share:.2f}",
            )
            check(M["uk_fx_translation_eur"] < 0 < M["uk_price_effect_eur_constant_fx"], "UK FX/price signs")
            u = M["units_change_pct_by_pg"]
            check(
                u[P["vol_pg"]] < -15 and all(v > u[P["vol_pg"]] + 8 for k, v in u.items() if k != P["vol_pg"]),
                f"volume loss not distinct {u}",
            )
            r = M["cohort_q1_retention_pct"]
            bq = _fq(P["bad_cohort_q"])
            check(r[bq] < min(v for k, v in r.items() if k != bq) - 5, f"weak cohort not distinct {r}")
            check(0.0013 <= M["ab_srm_p"] <= 0.0027, f"SRM p {M['ab_srm_p']}")
            check(P["ab"]["p_quote_naive"] < 0.05, "quote-level naive p")
            check(M["outage_drop_pct"] < -60, f"outage drop {M['outage_drop_pct']:.0f}")
            check(M["lapsed_partners"] == P["lapsed"], "lapsed partners differ from the planted ones")
            check(not set(M["partners_in_cycle"]) & set(P["lapsed"]), "cycle partners overlap lapsed")
            check(len(M["at_risk_direct"]) >= 12, f"only {len(M['at_risk_direct'])} at-risk direct accounts")
            check(M["defect_rate_pct"] > 6.5, f"defect rate {M['defect_rate_pct']:.1f}")
            check(
                M["small_sku_z01_memos"] == 2 and M["small_sku_units"] < 80,
                f"small-sample SKU {M['small_sku_z01_memos']} memos / {M['small_sku_units']} units",
            )
            check(
                M["heavy_naive_ratio"] > 1.25 and abs(M["heavy_mix_adjusted_ratio"] - 1) < 0.25,
                f"returns mix {M['heavy_naive_ratio']:.2f}/{M['heavy_mix_adjusted_ratio']:.2f}",
            )
            # sampling noise: the pilot's DiD has a standard error of about 5-6 pp, the trend-break estimate about 8 pp
            check(
                M["vr_pilot_did_orders_pct"] > 5 and abs(M["vr_pilot_did_orders_pct"] - 20) < 13,
                f"pilot DiD {M['vr_pilot_did_orders_pct']:.1f}",
            )
            print(
                f"   VR-GROWTH naive {M['vr_growth_naive_rev_growth_pct']:+.1f} vs non-enrolled {M['non_enrolled_rev_growth_pct']:+.1f}; matched {M['vr_growth_matched_effect_pct']:+.1f}"
            )
            check(M["vr_growth_naive_rev_growth_pct"] - M["non_enrolled_rev_growth_pct"] > 15, "VR-GROWTH naive gap")
            check(
                abs(M["vr_growth_matched_effect_pct"]) < 17,
                f"VR-GROWTH trend-break estimate {M['vr_growth_matched_effect_pct']:.1f}",
            )
            ub = M["units_by_month"]
            naive = (
                sum(ub[202504 + k] for k in range(3))
                * sum(ub[202510 + k] for k in range(3))
                / sum(ub[202410 + k] for k in range(3))
            )
            fexp = ck["fut"]["units_q1_fy2027"]
            ly = sum(ub[202504 + k] for k in range(3))
            sn = sum(ub[202601 + k] for k in range(3)) * ly / sum(ub[202501 + k] for k in range(3))
            med = float(np.median([naive, ly, sn]))
            check(abs(med / fexp - 1) < 0.15, f"simple forecasts (median {med:.0f}) vs expected {fexp:.0f}")
            check(5000 <= n_rows <= 200000, f"rows {n_rows}")
            check(cpu < 20, f"cpu {cpu:.1f}s")
            print(
                f"seed {seed:2d}: rows {n_rows:6d} wall {wall:5.1f}s cpu {cpu:5.1f}s | UK EUR {M['uk_revenue_change_pct_eur']:+.1f}% "
                f"cFX {M['uk_revenue_change_pct_constant_fx']:+.1f}% | miss {sc} {M['shortfall_variance_pct']:.0f}% | "
                f"bias {M['plan_bias_pct']:.1f} | SRM p {M['ab_srm_p']:.4f} | pilot {M['vr_pilot_did_orders_pct']:+.1f} | "
                f"loss {M['loss_cells']} {M['profit_table'][f'Partner|{P[chr(116) + chr(104) + chr(105) + chr(110)]}']['margin_pct']:.1f}% | "
                f"fc naive/exp {naive / fexp:.3f} | cohort {r[bq]:.0f} vs {min(v for k, v in r.items() if k != bq):.0f} | "
                f"outage {M['outage_drop_pct']:.0f}% | clv {ck['fut']['clv12']:.0f}"
            )
    # determinism
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        generate(pathlib.Path(a), 3)
        generate(pathlib.Path(b), 3)
        for f in sorted(pathlib.Path(a).iterdir()):
            if f.read_bytes() != (pathlib.Path(b) / f.name).read_bytes():
                fails.append(f"not byte-identical: {f.name}")
    print("FAILURES:" if fails else "all checks passed", *fails, sep="\n  ")
    return not fails


if __name__ == "__main__":
    ok = self_check([int(a) for a in sys.argv[1:]] or range(1, 11))
    sys.exit(0 if ok else 1)
