"""Issue 61: comparable-store sales growth (sales-performance-review, scripts/comp_sales.py) through the real server
(use_skill reads the script, run_python runs it on uploads): a region's growth is its comp stores' growth on the same
fiscal weeks last year (a 53-week prior year restated), new stores shown apart as non-comp, stores closed for a
remodel or for good left out of the periods affected (a two-day storm closure stays in), and the facts it needs
refused when unknown. Every answer is computed by hand in the test's docstring, each with a look-alike that must not
be flagged."""

from __future__ import annotations

import ast
import datetime as dt
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import ClientSession

from tests.conftest import text_of
from tests.skill_session import script, served

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,  # a playbook's method fitted on a hand-computed case: CPU-bound, the slow tier
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="run_python's sandbox is Linux-specific"),
]

SKILL, SCRIPT = "sales-performance-review", "scripts/comp_sales.py"

FY2023 = dt.date(2023, 1, 29)  # NRF: FY2023 2023-01-29..2024-02-03 has 53 weeks; FY2024 starts 2024-02-04
NRF = {
    "fiscal_calendar": {
        "kind": "4-5-4",
        "first_day": "2023-01-29",
        "year_naming": "start_year",
        "53_week_years": ["2023-01-29"],
    }
}
MONTHS = {"fiscal_calendar": {"kind": "calendar-month", "first_day": "2024-01-01", "year_naming": "start_year"}}

# store, region, open_date, weekly sales in FY2023 (weeks 2-53; week 1 is 1,000 for every store then open), in FY2024
CHAIN = [
    ("0101", "North", "2010-03-01", 100, 90),
    ("0102", "North", "2010-03-01", 100, 90),
    ("0103", "North", "2023-12-01", 0, 300),  # opened in FY2023 P10: new in FY2024 P1-P2
    ("0201", "South", "2010-03-01", 100, 100),
    ("0202", "South", "2010-03-01", 100, 100),
    ("0203", "South", "2024-01-07", 0, 50),  # opened in FY2023 P12: new
    ("0301", "East", "2010-03-01", 100, 100),
    ("0302", "East", "2010-03-01", 100, 100),
    ("0303", "East", "2010-03-01", 100, 100),
    ("0304", "East", "2010-03-01", 100, 100),
    ("0305", "East", "2023-01-29", 100, 100),  # opened on FY2023's first day: 12 full periods before FY2024 P1
]


def weekly_chain() -> tuple[str, str]:
    """One row per store and fiscal week (its Sunday) from FY2023 week 1 to FY2024 week 9 (the end of P2); the POS
    store numbers zero-padded, the master's not. FY2023 week 1 is a 1,000 launch week for every store open."""
    rows = ["store,week_start,net_revenue"]
    for store, _region, opened, before, after in CHAIN:
        for w in range(53 + 9):
            day = FY2023 + dt.timedelta(weeks=w)
            if day < dt.date.fromisoformat(opened):
                continue
            sales = 1000 if w == 0 else before if w < 53 else after
            if sales:
                rows.append(f"{store},{day},{sales:.2f}")
    master = ["store_nbr,store_name,region,open_date"]
    master += [f"{int(s)},Store {int(s)},{r},{o}" for s, r, o, _b, _a in CHAIN]
    return "\n".join(rows) + "\n", "\n".join(master) + "\n"


def daily_closures() -> tuple[str, str]:
    """One row per store and day, 2024-01-01..2025-03-31, 100 a day. A (West) closed for a remodel 2025-02-03..16;
    B (West) closed by a storm on 2025-03-10 and 11; C (East) closed for good on 2025-03-01 (close_date); D (East)
    open throughout. Times carry the store's UTC offset (-05:00 East, -08:00 West) at 21:30 local: the local day."""
    zones = {"A": ("West", "America/Los_Angeles"), "B": ("West", "America/Los_Angeles")}
    zones |= {"C": ("East", "America/New_York"), "D": ("East", "America/New_York")}
    rows = ["store,sold_at,net_sales"]
    day = dt.date(2024, 1, 1)
    while day <= dt.date(2025, 3, 31):
        for store, (_region, zone) in zones.items():
            shut = (
                (store == "A" and dt.date(2025, 2, 3) <= day <= dt.date(2025, 2, 16))
                or (store == "B" and day in (dt.date(2025, 3, 10), dt.date(2025, 3, 11)))
                or (store == "C" and day >= dt.date(2025, 3, 1))
            )
            if not shut:
                offset = "-05:00" if zone == "America/New_York" else "-08:00"
                if (day.year == 2024 and 3 <= day.month <= 10) or day >= dt.date(2025, 3, 9):
                    offset = "-04:00" if zone == "America/New_York" else "-07:00"  # summer time (close enough)
                rows.append(f"{store},{day}T21:30:00{offset},100.00")
        day += dt.timedelta(days=1)
    master = ["store,region,time_zone,open_date,close_date"]
    master += [f"{s},{r},{z},2015-05-01,{'2025-03-01' if s == 'C' else ''}" for s, (r, z) in zones.items()]
    return "\n".join(rows) + "\n", "\n".join(master) + "\n"


CHAIN_SALES, CHAIN_STORES = weekly_chain()
DAILY_SALES, DAILY_STORES = daily_closures()


@pytest.fixture(scope="module")
async def s(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClientSession]:
    ws = tmp_path_factory.mktemp("sales_comp") / "ws"
    files = {
        "chain.csv": CHAIN_SALES,
        "chain_stores.csv": CHAIN_STORES,
        "daily.csv": DAILY_SALES,
        "daily_stores.csv": DAILY_STORES,
        "no_open.csv": "store_nbr,region,open_date\n101,North,\n102,North,2010-03-01\n",
        "with_web.csv": CHAIN_SALES + "WEB,2024-03-31,5000.00\n",
    }
    async with served(ws, files) as session:
        yield session


async def comp_of(s: ClientSession, source: str, **variables: Any) -> tuple[bool, str, dict[str, dict[str, Any]]]:
    """The script as the model reads it (checked whole), run on an upload in a fresh namespace: (refused?, what it
    said, `comp` by region)."""
    code = await script(s, SKILL, SCRIPT)  # served whole by use_skill
    names = ("PROFILE", "STORES", "PERIOD", "FISCAL_YEAR", "COMP_PERIODS", "COMP_BY", "CLOSED", "comp", "comp_stores")
    clear = f"for _v in {names!r}:\n    globals().pop(_v, None)\n"
    head = clear + "".join(f"{k} = {v!r}\n" for k, v in {"SOURCE": source, **variables}.items())
    ran = await s.call_tool("run_python", {"code": head + code, "output_level": "standard"})
    said = text_of(ran)
    if ran.is_error or "REFUSED" in said:
        return True, said, {}
    table = await value(s, "comp.set_index('region').round(6).to_dict('index')")
    return False, said, table


async def value(s: ClientSession, expression: str) -> Any:
    ran = await s.call_tool("run_python", {"code": f"print(repr({expression}))", "output_level": "full"})
    return ast.literal_eval(text_of(ran).split("## stdout\n", 1)[1].strip().split("\n")[0].replace("nan", "None"))


async def test_a_region_growing_on_new_stores_with_falling_comps_is_a_comp_decline(s: ClientSession) -> None:
    """FY2024 P1-P2 (weeks 1-9, 2024-02-04..04-06) against FY2023 restated (53 weeks: weeks 2-10, 2023-02-05..04-08;
    unrestated, its 1,000 launch week 1 would be in the base). Comp rule 14 full periods: 103 (open 2023-12-01, first
    full period FY2023 P11) and 203 (2024-01-07, P12 of FY2023) are new; 305 (open on FY2023's first day: 12 full
    periods before P1, 13 before P2) is new too. North: comp 2 stores x 9 weeks x 90 = 1,620 against 2 x 9 x 100 =
    1,800: -10 %; total 1,620 + 103's 9 x 300 = 4,320 against 1,800: +140 %, non-comp +150 pts. South: comp 1,800
    against 1,800: 0 %; total 1,800 + 9 x 50 = 2,250: +25 %. East: comp 3,600 against 3,600. Chain comp (1,620 +
    1,800 + 3,600) / (1,800 + 1,800 + 3,600) = 7,020 / 7,200 = -2.5 %. North is 7.5 points under the chain:
    flagged, a comp decline. The look-alike: South's total (+25 %) is new-store volume, its comp (0 %) 2.5 points
    from the chain's: not flagged, said to be no growth region. With COMP_PERIODS = 12, 305 is comp in both periods
    (12 and 13 full periods): the chain comp (7,020 + 900) / (7,200 + 900) = -2.2222 %."""
    refused, said, comp = await comp_of(
        s, "upload_chain", PROFILE=NRF, STORES="upload_chain_stores", PERIOD=(1, 2), FISCAL_YEAR=2024
    )
    assert not refused, said
    north, south, chain = comp["North"], comp["South"], comp["chain"]
    assert north["comp_growth"] == pytest.approx(-10.0) and north["total_growth"] == pytest.approx(140.0)
    assert north["non_comp_pts"] == pytest.approx(150.0) and north["comp_stores"] == 2
    assert north["flagged"] and "comp decline" in north["finding"], north
    assert chain["comp_growth"] == pytest.approx(-2.5) and chain["comp_current"] == pytest.approx(7020.0)
    assert south["comp_growth"] == pytest.approx(0.0) and south["total_growth"] == pytest.approx(25.0)
    assert south["new_store_inflated"] and not south["flagged"], south
    assert "not a growth region" in south["finding"]
    assert not comp["East"]["flagged"] and comp["East"]["comp_growth"] == pytest.approx(0.0)
    assert "103 (new)" in north["non_comp_stores"] and "305 (new)" in comp["East"]["non_comp_stores"]
    assumed = next(line for line in said.splitlines() if line.startswith("Assumed:"))
    assert "14 full fiscal periods" in assumed and "2024-02-04..2024-03-02 vs 2023-02-05..2023-03-04" in assumed
    assert "FY2023 has 53 weeks" in assumed, assumed
    refused, said, twelve = await comp_of(
        s, "upload_chain", PROFILE=NRF, STORES="upload_chain_stores", PERIOD=(1, 2), FISCAL_YEAR=2024, COMP_PERIODS=12
    )
    assert not refused, said
    assert twelve["chain"]["comp_growth"] == pytest.approx(100 * (7920 / 8100 - 1))
    assert twelve["East"]["non_comp_stores"] == "" and "12 full fiscal periods" in said


async def test_stores_closed_for_a_remodel_or_for_good_leave_the_comp_but_a_storm_day_does_not(
    s: ClientSession,
) -> None:
    """Calendar months, January-March 2025 against January-March 2024, 100 a day, times at 21:30 local with the
    store's offset (in UTC most fall on the next day: the local day is kept). A (West) is closed 3-16 February 2025,
    so the full week 8-14 February has no sales: left out of P2 only. B (West) closed two storm days (10-11 March)
    stays comp in P3. C (East) closed for good on 1 March (close_date): comp in P1-P2, out of P3. West comp: A 3,100
    + 3,100 and B 3,100 + 2,800 + 2,900 = 15,000 against A 3,100 + 3,100 and B 3,100 + 2,900 + 3,100 = 15,300:
    -1.9608 %. East: C 3,100 + 2,800 and D 3,100 + 2,800 + 3,100 = 14,900 against 15,100: -1.3245 %. The look-alike:
    B's storm (P3 -6.5 % for B alone) is not a closure."""
    refused, said, comp = await comp_of(
        s, "upload_daily", PROFILE=MONTHS, STORES="upload_daily_stores", PERIOD=(1, 3), FISCAL_YEAR=2025
    )
    assert not refused, said
    assert comp["West"]["comp_growth"] == pytest.approx(100 * (15000 / 15300 - 1), abs=1e-4)
    assert comp["East"]["comp_growth"] == pytest.approx(100 * (14900 / 15100 - 1), abs=1e-4)
    status = await value(s, "{f'{r.store} P{r.period}': r.status for r in comp_stores.itertuples()}")
    assert status["A P2"] == "closed" and status["A P1"] == status["A P3"] == "comp", status
    assert status["B P3"] == "comp" and status["C P3"] == "closed" and status["C P2"] == "comp", status
    reasons = await value(
        s, "comp_stores.set_index(comp_stores.store + ' P' + comp_stores.period.astype(str)).reason.to_dict()"
    )
    assert "2025-02-08" in reasons["A P2"] and "closed 2025-03-01" in reasons["C P3"]
    assert "local day" in said


async def test_unknown_stores_opening_dates_and_part_periods_are_refused(s: ClientSession) -> None:
    """Refused: no stores master; a row of the web shop ('WEB', not a store in the master); a store without an
    opening date; a rule under a full year (COMP_PERIODS = 11); FY2024 P3, which the data (to the end of P2) do not
    cover; UTC times with no time zones to find the store's day. The look-alike: the POS's zero-padded store numbers
    ('0101') against the master's ('101') are the same stores, run without a word."""
    base = {"PROFILE": NRF, "STORES": "upload_chain_stores", "PERIOD": (1, 2)}
    refused, said, _ = await comp_of(s, "upload_chain", PROFILE=NRF, PERIOD=(1, 2))
    assert refused and "STORES" in said
    refused, said, _ = await comp_of(s, "upload_with_web", **base)
    assert refused and "'WEB'" in said and "not in STORES" in said
    refused, said, _ = await comp_of(s, "upload_chain", **{**base, "STORES": "upload_no_open"})
    assert refused, said
    refused, said, _ = await comp_of(s, "upload_chain", **{**base, "COMP_PERIODS": 11})
    assert refused and "full year" in said
    refused, said, _ = await comp_of(s, "upload_chain", **{**base, "PERIOD": 3, "FISCAL_YEAR": 2024})
    assert refused and "never a part period" in said
    await s.call_tool(
        "run_python",
        {
            "code": "import pandas as pd\nUTC = load_file('upload_daily').assign(sold_at=lambda d: pd.to_datetime("
            "d.sold_at, utc=True).dt.strftime('%Y-%m-%dT%H:%M:%SZ'))\n"
            "NO_TZ = load_file('upload_daily_stores').drop(columns='time_zone')"
        },
    )
    refused, said, _ = await comp_of(s, "upload_daily", PROFILE=MONTHS, STORES="upload_daily_stores", PERIOD=(1, 3))
    assert not refused, said
    code = "SOURCE = UTC\nSTORES = NO_TZ\nPROFILE = " + repr(MONTHS) + "\nPERIOD = (1, 3)\n"
    read = await s.call_tool("use_skill", {"name": SKILL, "path": SCRIPT, "output_level": "full"})
    ran = await s.call_tool("run_python", {"code": code + text_of(read).split("\n", 2)[2]})
    assert "REFUSED" in text_of(ran) and "time_zone" in text_of(ran)
    refused, said, comp = await comp_of(s, "upload_chain", **base)
    assert not refused and comp["North"]["comp_stores"] == 2, said
