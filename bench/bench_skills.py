"""The playbooks on businesses they never saw (SPEC T-S-G): per skill, the share of planted truths found and of
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
* kpi-anomaly-detection — a one-day outage on a working day (to zero at 14 or 30 orders a day, to 30 % at 100 or
  300), B2B closed at weekends; look-alike: the country's public holidays, every year (they must not be alarms).

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
    working = np.flatnonzero((days.day_of_week < 5) & ~closed & (days > pd.Timestamp("2022-06-30")))
    outage = days[working[int(rng.integers(len(working)))]]
    mu[days == outage] *= 0.0 if level <= 30 else 0.3  # the truth: a one-day outage
    orders = rng.negative_binomial(80, 80 / (80 + mu)) if level >= 100 else rng.poisson(mu)
    frame = pd.DataFrame({"day": days, "order_count": orders})
    recurring = sorted(str(d) for d, name in public.items() if pd.Timestamp(d) in set(days))
    return Case(frame, {"day": str(outage.date())}, {"days": recurring}, {"COUNTRY": b.country})


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


# -- running -----------------------------------------------------------------------------------------------------

SCRIPTS = {
    "profitability": "skills/profitability/scripts/loss_cells.py",
    "rfm-segmentation": "skills/rfm-segmentation/scripts/rfm.py",
    "discount-effectiveness": "skills/discount-effectiveness/scripts/discount_lift.py",
    "ab-test-readout": "skills/ab-test-readout/scripts/ab_readout.py",
    "kpi-anomaly-detection": "skills/kpi-anomaly-detection/scripts/kpi_anomalies.py",
    "demand-forecast": "skills/demand-forecast/scripts/forecast.py",
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
                    scorer = {"profitability": profitability_result, "rfm-segmentation": rfm_result}.get(
                        skill, kpi_result
                    )
                    outcome.setdefault(key, []).append(scorer(got))
            for skill, maker, scorer in (
                ("discount-effectiveness", discount, discount_result),
                ("ab-test-readout", ab, None),
                ("demand-forecast", forecast, forecast_result),
            ):
                if skill not in skills:
                    continue
                for revision in order:
                    script = script_at(revision, SCRIPTS[skill])
                    truth_case = maker(business(b.seed), True)
                    got_truth = await follower.run(skill, truth_case, script, revision)
                    if got_truth is not None:
                        got_truth["expected_peak"] = truth_case.truth.get("peak")
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
