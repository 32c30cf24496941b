"""Issue 61: the sales-performance-review bridge on the business's own facts (PROFILE), through the real server
(use_skill reads the script, run_python runs it on uploads): a constant-currency bridge with an FX translation line
(a local-currency price rise while the currency weakens is a price rise, not a cut; a real price cut in one currency
at a stable rate is one), a single currency with no FX line and several currencies without rates refused, and a
53-week year's last period compared on comparable weeks. Every answer is computed by hand in the test's docstring,
each with a look-alike that must not be reported."""

from __future__ import annotations

import ast
import datetime as dt
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import ClientSession

from tests.conftest import text_of
from tests.skill_session import served

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,  # a playbook's method fitted on a hand-computed case: CPU-bound, the slow tier
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="run_python's sandbox is Linux-specific"),
]

SKILL, SCRIPT = "sales-performance-review", "scripts/price_volume_mix.py"


def sales(prices: dict[tuple[str, str, int], float], units: int = 100) -> str:
    """One row per item, year and currency, as query_metrics returns them plus a currency column; list revenue is
    net / 0.8 (the same 20 % off in both years: no discount move)."""
    rows = ["product,order_date_year,currency,net_revenue,units,list_revenue"]
    for (product, currency, year), price in prices.items():
        net = units * price
        rows.append(f"{product},{year}-01-01,{currency},{net:.2f},{units},{net / 0.8:.2f}")
    return "\n".join(rows) + "\n"


def monthly_rates(levels: dict[tuple[str, int], float]) -> str:
    """USD per 1 unit of local currency, one row a month; each year's months alternate level -/+ 0.01, so the
    year's average is the level itself."""
    rows = ["date,currency,rate"]
    for (currency, year), level in levels.items():
        for m in range(1, 13):
            rows.append(f"{year}-{m:02d}-01,{currency},{level + (0.01 if m % 2 else -0.01):.4f}")
    return "\n".join(rows) + "\n"


# USD/CAD/AUD: local prices +5 % in CA and AU (20 -> 21), US flat; CAD 0.75 -> 0.70 USD, AUD 0.70 -> 0.65 USD
RISE = sales(
    {
        ("Bag", "CAD", 2024): 20.0,
        ("Bag", "AUD", 2024): 20.0,
        ("Bag", "USD", 2024): 15.0,
        ("Bag", "CAD", 2025): 21.0,
        ("Bag", "AUD", 2025): 21.0,
        ("Bag", "USD", 2025): 15.0,
    }
)
RISE_FX = monthly_rates({("CAD", 2024): 0.75, ("CAD", 2025): 0.70, ("AUD", 2024): 0.70, ("AUD", 2025): 0.65})
# the look-alike: a real CAD price cut (20 -> 19) at a stable rate; AUD and USD flat
CUT = sales(
    {
        ("Bag", "CAD", 2024): 20.0,
        ("Bag", "AUD", 2024): 20.0,
        ("Bag", "USD", 2024): 15.0,
        ("Bag", "CAD", 2025): 19.0,
        ("Bag", "AUD", 2025): 20.0,
        ("Bag", "USD", 2025): 15.0,
    }
)
CUT_FX = monthly_rates({("CAD", 2024): 0.75, ("CAD", 2025): 0.75, ("AUD", 2024): 0.70, ("AUD", 2025): 0.70})
ONE_CURRENCY = sales({("Bag", "CAD", 2024): 20.0, ("Bag", "CAD", 2025): 21.0})
NO_CURRENCY = "product,order_date_year,net_revenue,units\nBag,2024-01-01,2000,100\nBag,2025-01-01,2100,100\n"
MULTI = {"currencies": ["AUD", "CAD", "USD"], "reporting_currency": "USD"}

FY2023 = dt.date(2023, 1, 29)  # NRF: FY2023 2023-01-29..2024-02-03 has 53 weeks; FY2024 2024-02-04..2025-02-01
CALENDAR_454 = {
    "kind": "4-5-4",
    "first_day": "2023-01-29",
    "year_naming": "start_year",
    "53_week_years": ["2023-01-29"],
}


def weekly() -> str:
    """One row per week (its Sunday): 10 tees at 10.00 = 100 a week, except FY2023's week 1 (100 tees: 1,000, a
    launch week) and FY2024's P12 (weeks 49-52: 11 tees, 110 a week)."""
    rows = ["product,week_start,net_revenue,units"]
    for w in range(53 + 52):
        day = FY2023 + dt.timedelta(weeks=w)
        units = 100 if w == 0 else 11 if 53 + 48 <= w < 53 + 52 else 10
        rows.append(f"Tee,{day},{units * 10:.2f},{units}")
    return "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
async def s(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClientSession]:
    ws = tmp_path_factory.mktemp("sales_review") / "ws"
    files = {
        "rise.csv": RISE,
        "rise_fx.csv": RISE_FX,
        "cut.csv": CUT,
        "cut_fx.csv": CUT_FX,
        "one_currency.csv": ONE_CURRENCY,
        "no_currency.csv": NO_CURRENCY,
        "weekly.csv": weekly(),
    }
    async with served(ws, files) as session:
        yield session


async def bridge_of(s: ClientSession, source: str, **variables: Any) -> tuple[bool, str, dict[str, float]]:
    """The script as the model reads it, run on an upload in a fresh namespace of variables: (refused?, what it
    said, the bridge's steps)."""
    read = await s.call_tool("use_skill", {"name": SKILL, "path": SCRIPT, "output_level": "full"})
    code = text_of(read).split("\n", 2)[2]
    clear = "for _v in ('PROFILE', 'FX', 'FX_DIRECTION', 'PERIOD', 'FISCAL_YEAR', 'BY', 'bridge', 'by_currency'):\n"
    clear += "    globals().pop(_v, None)\n"
    head = clear + "".join(f"{k} = {v!r}\n" for k, v in {"SOURCE": source, **variables}.items())
    ran = await s.call_tool("run_python", {"code": head + code, "output_level": "standard"})
    said = text_of(ran)
    if ran.is_error or "REFUSED" in said:
        return True, said, {}
    steps = await s.call_tool(
        "run_python",
        {"code": "print(repr(bridge.set_index('step').revenue.round(6).to_dict()))", "output_level": "full"},
    )
    table = ast.literal_eval(text_of(steps).split("## stdout\n", 1)[1].strip().split("\n")[0])
    return False, said, table


async def value(s: ClientSession, expression: str) -> Any:
    ran = await s.call_tool("run_python", {"code": f"print(repr({expression}))", "output_level": "full"})
    return ast.literal_eval(text_of(ran).split("## stdout\n", 1)[1].strip().split("\n")[0])


async def test_a_local_price_rise_in_weakening_currencies_is_a_price_rise_and_an_fx_loss(s: ClientSession) -> None:
    """100 bags a year in each currency. Prior (2024, at 2024's average rates, USD per 1): CA 2,000 CAD x 0.75 =
    1,500; AU 2,000 AUD x 0.70 = 1,400; US 1,500: 4,400. Current (2025 at 2025's): CA 2,100 x 0.70 = 1,470; AU 2,100 x
    0.65 = 1,365; US 1,500: 4,335. Reported change -65. Volume 0; price at prior rates = 100 x 1 CAD x 0.75 + 100 x
    1 AUD x 0.70 = +145 (all list price: the same 20 % off); FX = 2,100 x (0.70 - 0.75) + 2,100 x (0.65 - 0.70) =
    -210; 4,400 + 145 - 210 = 4,335. Look-alike: bridged in USD alone the same sales show a -65 "price cut"
    (15.00 -> 14.70 and 14.00 -> 13.65 USD a bag): here no price step is negative and each local price rose 5 %."""
    refused, said, steps = await bridge_of(
        s, "upload_rise", PROFILE=MULTI, FX="upload_rise_fx", FX_DIRECTION="reporting_per_local"
    )
    assert not refused, said
    assert steps["prior period revenue"] == pytest.approx(4400.0)
    assert steps["current period revenue"] == pytest.approx(4335.0)
    assert steps["volume at prior prices"] == pytest.approx(0.0, abs=1e-6)
    assert steps["list price"] == pytest.approx(145.0) and steps["discount"] == pytest.approx(0.0, abs=1e-6)
    assert steps["FX translation"] == pytest.approx(-210.0)
    assert sum(v for k, v in steps.items() if k != "current period revenue") == pytest.approx(4335.0)
    local = await value(s, "by_currency[['price_change_local_pct', 'fx_translation']].round(6).to_dict('index')")
    assert local["CAD"] == {"price_change_local_pct": pytest.approx(5.0), "fx_translation": pytest.approx(-105.0)}
    assert local["AUD"] == {"price_change_local_pct": pytest.approx(5.0), "fx_translation": pytest.approx(-105.0)}
    assert local["USD"]["fx_translation"] == 0.0
    assumed = next(line for line in said.splitlines() if line.startswith("Assumed:"))
    assert "reported in USD" in assumed and "reporting_per_local" in assumed, assumed
    # the same rates quoted the other way (local per 1 USD) give the same bridge
    inverse = (
        RISE_FX.splitlines()[0]
        + "\n"
        + "".join(f"{d},{c},{1 / float(r)!r}\n" for d, c, r in (line.split(",") for line in RISE_FX.splitlines()[1:]))
    )
    await s.call_tool(
        "run_python",
        {"code": f"import io, pandas as pd\nINVERSE = save_artifact(pd.read_csv(io.StringIO({inverse!r})))"},
    )
    artifact = await value(s, "INVERSE")
    refused, said, flipped = await bridge_of(s, "upload_rise", PROFILE=MULTI, FX=artifact, FX_DIRECTION="divide")
    assert not refused, said
    # a month's rate inverted and averaged is not the average inverted: within a cent of the same bridge
    assert flipped["list price"] == pytest.approx(145.0, abs=1.0) and flipped["FX translation"] < -200, flipped


async def test_a_real_price_cut_in_one_currency_at_a_stable_rate_is_a_price_cut(s: ClientSession) -> None:
    """CAD bags 20 -> 19 at 0.75 USD in both years, AUD and USD flat. Prior 1,500 + 1,400 + 1,500 = 4,400;
    current 1,900 x 0.75 + 1,400 + 1,500 = 4,325: -75, all price: 100 x -1 CAD x 0.75 = -75, FX 0; CAD's local price
    -5 %, AUD's 0 %. The look-alike here is the other way: AUD, whose rate and price held, shows no price move."""
    refused, said, steps = await bridge_of(
        s, "upload_cut", PROFILE=MULTI, FX="upload_cut_fx", FX_DIRECTION="reporting_per_local"
    )
    assert not refused, said
    assert steps["list price"] == pytest.approx(-75.0) and steps["FX translation"] == pytest.approx(0.0, abs=1e-6)
    assert steps["current period revenue"] == pytest.approx(4325.0)
    local = await value(s, "by_currency.price_change_local_pct.round(6).to_dict()")
    assert local["CAD"] == pytest.approx(-5.0) and local["AUD"] == pytest.approx(0.0, abs=1e-9), local


async def test_one_currency_has_no_fx_line_and_several_without_rates_are_refused(s: ClientSession) -> None:
    """One currency (CAD, reported in CAD): 2,000 -> 2,100, all price (+100), and no FX line - said so. Refused:
    three currencies with no FX rates; rates whose direction is not stated; a three-currency PROFILE over a source
    with no currency column (its totals mix currencies). The look-alike: the demo-like source with no currency
    and no PROFILE runs as one currency."""
    refused, said, steps = await bridge_of(
        s, "upload_one_currency", PROFILE={"currencies": ["CAD"], "reporting_currency": "CAD"}
    )
    assert not refused, said
    assert "FX translation" not in steps and steps["list price"] == pytest.approx(100.0), steps
    assert "no FX line" in next(line for line in said.splitlines() if line.startswith("Assumed:"))
    refused, said, _ = await bridge_of(s, "upload_rise", PROFILE=MULTI)
    assert refused and "no FX rates" in said, said
    refused, said, _ = await bridge_of(s, "upload_rise", PROFILE=MULTI, FX="upload_rise_fx")
    assert refused and "FX_DIRECTION" in said, said
    refused, said, _ = await bridge_of(s, "upload_no_currency", PROFILE=MULTI)
    assert refused and "no currency column" in said, said
    refused, said, steps = await bridge_of(s, "upload_no_currency")
    assert not refused and steps["price and discount"] == pytest.approx(100.0), said
    assert "one currency (not stated)" in said


async def test_a_53_week_years_p12_is_compared_on_four_comparable_weeks(s: ClientSession) -> None:
    """4-5-4, FY2023 has 53 weeks (its P12: weeks 49-53, five). FY2024 P12 (weeks 49-52): 4 x 110 = 440. FY2023
    restated (shifted a week, weeks 50-53): 4 x 100 = 400, so +40 (+10 %), all volume (11 vs 10 tees at 10.00).
    The look-alike: against the unrestated five-week P12 (500) it looks like -12 %, a January collapse - printed
    as not comparable, never the bridge. The whole year, restated the same way (weeks 2-53, leaving out the 1,000
    launch week): prior 47 x 100 + 100 + 400 = 5,200, current 48 x 100 + 440 = 5,240. A 4-5-4 PROFILE over calendar
    years is refused."""
    profile = {"fiscal_calendar": CALENDAR_454, "currencies": ["USD"], "reporting_currency": "USD"}
    refused, said, steps = await bridge_of(s, "upload_weekly", PROFILE=profile, PERIOD=12)
    assert not refused, said
    assert steps["prior period revenue"] == pytest.approx(400.0), steps
    assert steps["current period revenue"] == pytest.approx(440.0)
    assert steps["volume at prior prices"] == pytest.approx(40.0)
    assert "-12.0 %" in said and "not comparable" in said, said
    assumed = next(line for line in said.splitlines() if line.startswith("Assumed:"))
    assert "2025-01-05..2025-02-01" in assumed and "2023-12-31..2024-01-27" not in assumed, assumed
    assert "2024-01-07..2024-02-03" in assumed and "53 weeks" in assumed, assumed
    refused, said, steps = await bridge_of(s, "upload_weekly", PROFILE=profile)
    assert not refused, said
    assert steps["prior period revenue"] == pytest.approx(5200.0) and steps["current period revenue"] == 5240.0
    refused, said, _ = await bridge_of(s, "upload_rise", PROFILE={"fiscal_calendar": CALENDAR_454})
    assert refused and "not fiscal periods" in said, said
