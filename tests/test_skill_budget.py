"""budget-vs-actual (issue 61): the method a senior FP&A analyst signs for, driven through a real stdio server."""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator

import pytest
from mcp import ClientSession

from tests.conftest import ROOT, text_of
from tests.skill_session import ok, served, value

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,  # a playbook's method fitted on a hand-computed case: CPU-bound, the slow tier
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="run_python's sandbox is Linux-specific"),
]

SCRIPT = (ROOT / "skills" / "budget-vs-actual" / "scripts" / "budget_variance.py").read_text()


@pytest.fixture(scope="module")
async def s(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClientSession]:
    ws = tmp_path_factory.mktemp("budget") / "ws"
    (ws / "uploads").mkdir(parents=True)
    shutil.copy(ROOT / "ba_mcp" / "samples" / "sales_2025.csv", ws / "uploads" / "sales_2025.csv")
    async with served(ws) as session:
        yield session


# A 4-5-4 plan by fiscal period names (no dates: they come from PROFILE's calendar). FY2025 starts on Sunday
# 2025-02-02 (named by its start year), so P11 runs 2025-11-30 .. 2026-01-03 (5 weeks) and P12 2026-01-04 .. 01-31.
# Six cells (3 countries x 2 groups), base 100,000 a period; the noise e = 1 % x ((period + cell) % 5 - 2) sums to
# zero over any 5 consecutive periods of a cell, so each cell's P1-P10 ratio is exactly (1 + stretch)^-1 - 1.
FRAME = """
import pandas as pd
PROFILE = {{"fiscal_calendar": {{"kind": "4-5-4", "first_day": "2023-01-29", "year_naming": "start_year",
                                "53_week_years": [2023]}}}}
rows = []
cells = [(country, group) for country in ("US", "CA", "AU") for group in ("Food", "Treats")]
for p in range(1, 13):
    for c, (country, group) in enumerate(cells):
        base = 100000.0
        actual = base * (1 + 0.01 * ((p + c) % 5 - 2))
        if {miss} and (country, group) == ("CA", "Treats") and p == 4:
            actual -= 30000.0  # a real miss: a lost retailer in P4
        if p == 11:
            actual = base * {elapsed} / 35  # P11 under way, on pace
        if p == 12:
            actual = 0.0
        rows.append(("FY2025", f"P{{p}}", country, group, base * {stretch}, actual))
frame = pd.DataFrame(rows, columns=["fiscal_year", "period", "country", "group", "plan", "actual"])
SOURCE = save_artifact(frame.assign(data_through=pd.Timestamp("{through}")))
"""


async def run(s: ClientSession, miss: bool = False, stretch: float = 1.0, through: str = "2025-11-30") -> str:
    """The frame (P11 holding one day of actuals, on pace) and the script on it."""
    await ok(s, "run_python", code=FRAME.format(miss=miss, stretch=stretch, through=through, elapsed=1))
    return text_of(await ok(s, "run_python", code=SCRIPT, output_level="standard"))


async def test_a_period_one_day_old_is_not_a_miss(s: ClientSession) -> None:
    """Completeness from the plan's own period ends: the data ends on 2025-11-30, day 1 of the 35 of FY2025 P11
    (a 5-week period of the 4-5-4 year that starts 2025-02-02). P11 holds one day of actuals, 100,000 / 35 = 2,857 a
    cell: against its full plan it reads -97 %, pro rata (1 of 35 days) exactly 0 %. Not a miss, not judged; P12
    has not started. Look-alike of a real miss: the same one day of actuals with the data running through P11's
    end (2026-01-03) is a complete period 97 % short — flagged in FY2025-Q4."""
    text = await run(s)
    assert "PARTIAL: FY2025 P11 is under way (1 of 35 days elapsed)" in text and "(+0.0 %" in text, text
    assert await value(s, "left_out") == "['FY2025 P11', 'FY2025 P12']", text
    assert await value(s, "len(flags)") == "0", text
    assert "LARGEST MISS" not in text and "through FY2025 P10" in text, text
    assert await value(s, "sorted(set(data.end.dt.strftime('%Y-%m-%d')[data.label == 'FY2025 P10']))") == (
        "['2025-11-29']"
    )
    text = await run(s, through="2026-01-03")
    assert "PARTIAL" not in text, text
    assert await value(s, "sorted({f.quarter for f in misses.itertuples()})") == "['FY2025-Q4']", text
    assert await value(s, "len(misses)") == "6", text


async def test_a_uniform_stretch_is_one_bias_line_not_cell_misses(s: ClientSession) -> None:
    """Every cell's plan is 3 % above what it sells (plan 103,000, actual 100,000 x (1 + e), e summing to zero over
    P1-P10): each cell's actual / plan - 1 is 1 / 1.03 - 1 = -2.91 %, so the median across the six cells is
    -2.9 %: one PLAN BIAS line, and against plan x 0.971 every cell's residual is within its noise — no miss.
    Look-alike: the same plan without the stretch has no bias line."""
    text = await run(s, stretch=1.03)
    assert text.count("PLAN BIAS") == 1 and "PLAN BIAS: actuals run -2.9 % against plan" in text, text
    assert "against plan x 0.971" in text, text
    assert await value(s, "round(bias, 4)") == "-0.0291", text
    assert await value(s, "len(flags)") == "0", text
    assert float(await value(s, "float(cells.residual_pct.abs().max())")) < 2.5, text
    text = await run(s)
    assert "PLAN BIAS" not in text and "no plan bias" in text, text
    assert await value(s, "bias") == "0.0", text


async def test_the_real_miss_is_named_after_the_plans_bias(s: ClientSession) -> None:
    """On the 3 % stretch, CA x Treats loses 30,000 in P4. The bias stays -2.91 % (five of six cells at exactly
    that; the median of six is the mean of the 3rd and 4th). Judged against plan x (1/1.03) = 100,000 a period, the
    cell's FY2025-Q2 (P4-P6, cell index 3: e = 0, +1 %, +2 %) residual is 100,000 x 3 % - 30,000 = -27,000
    (-8.7 % of its 309,000 plan; raw -36,000); its worst period P4 is 0 - 30,000 = -30,000. Named LARGEST MISS
    with those values; no other cell is flagged (their residuals are the +-2 % noise only)."""
    text = await run(s, miss=True, stretch=1.03)
    assert await value(s, "[(f.quarter, f.country, f.group) for f in flags.itertuples()]") == (
        "[('FY2025-Q2', 'CA', 'Treats')]"
    ), text
    assert "LARGEST MISS: CA x Treats in FY2025-Q2, -27,000 against the plan after its bias (-8.7 % of its plan" in (
        text
    ), text
    assert "raw -36,000); worst period FY2025 P4 -30,000" in text, text
    assert text.count("PLAN BIAS") == 1, text


PLAN_53 = """
import pandas as pd
PROFILE = {{"fiscal_calendar": {{"kind": "4-5-4", "first_day": "2023-01-29", "year_naming": "{naming}",
                                "53_week_years": {long}}}}}
rows = []
for year, period in [("{y0}", "P10"), ("{y0}", "P11"), ("{y0}", "P12"), ("{y1}", "P1")]:
    for cell in ("A", "B", "C", "D", "E", "F"):
        rows.append((year, period, cell, 1000.0, 1000.0))
SOURCE = save_artifact(pd.DataFrame(rows, columns=["fiscal_year", "period", "store", "plan", "actual"]).assign(
    data_through=pd.Timestamp("2024-01-27")))
"""


async def test_fiscal_years_named_as_the_company_names_them_with_a_53_week_year(s: ClientSession) -> None:
    """The retail year that starts on Sunday 2023-01-29 and ends 2024-02-03 has 53 weeks; its P12 takes the 53rd
    week: 2023-12-31 .. 2024-02-03, 35 days. Named by its start year it is FY2023 (53-week years [2023]), by its end
    year FY2024 ([2024]). With the data through 2024-01-27, P12 is day 28 of 35: PARTIAL, labelled FY2023 P12 or
    FY2024 P12, and its quarter FY2023-Q4 or FY2024-Q4; the next year's P1 starts 2024-02-04 (not 01-28, which a
    52-week year would give). Look-alike: a plan by names with no calendar in PROFILE is refused, not guessed."""
    await ok(s, "run_python", code=PLAN_53.format(naming="start_year", long="[2023]", y0="FY2023", y1="FY2024"))
    text = text_of(await ok(s, "run_python", code=SCRIPT, output_level="standard"))
    assert "PARTIAL: FY2023 P12 is under way (28 of 35 days elapsed)" in text, text
    assert await value(s, "sorted(cells.quarter.unique())") == "['FY2023-Q4']", text
    assert "year to date FY2023 (through FY2023 P11)" in text, text
    assert await value(s, "assumed.startswith('Assumed: fiscal calendar 4-5-4')") == "True", text
    assert "years named by their start year" in text, text
    calendar = "calendar_periods().set_index(['fy', 'n']).start.dt.strftime('%Y-%m-%d')"
    assert await value(s, f"{calendar}.loc[('FY2024', 1)]") == "'2024-02-04'", text
    await ok(s, "run_python", code=PLAN_53.format(naming="end_year", long="[2024]", y0="FY2024", y1="FY2025"))
    text = text_of(await ok(s, "run_python", code=SCRIPT, output_level="standard"))
    assert "PARTIAL: FY2024 P12 is under way (28 of 35 days elapsed)" in text, text
    assert await value(s, "sorted(cells.quarter.unique())") == "['FY2024-Q4']", text
    assert "years named by their end year" in text, text
    await ok(s, "run_python", code=PLAN_53.format(naming="start_year", long="[2023]", y0="FY2023", y1="FY2024"))
    result = await s.call_tool("run_python", {"code": "PROFILE = {}\n" + SCRIPT})
    assert result.is_error or "fiscal calendar, which is UNKNOWN" in text_of(result), text_of(result)
    assert "fiscal calendar, which is UNKNOWN" in text_of(result), text_of(result)
