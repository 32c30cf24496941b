"""kpi-anomaly-detection (issue 61): the method a senior analyst signs for, driven through a real stdio server."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

import pytest
from mcp import ClientSession

from tests.conftest import ROOT, text_of
from tests.skill_session import ok, served, value

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="run_python's sandbox is Linux-specific"),
]

SCRIPTS = ROOT / "skills" / "kpi-anomaly-detection" / "scripts"
CALENDAR = (SCRIPTS / "business_calendar.py").read_text()
SCRIPT = (SCRIPTS / "kpi_anomalies.py").read_text()


@pytest.fixture(scope="module")
async def s(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClientSession]:
    async with served(tmp_path_factory.mktemp("kpi") / "ws") as session:
        yield session


# Paid charges of a 4-5-4 subscription business (FY starts Sunday 2023-01-29, named by start year, 53 weeks in FY2023),
# one row per charge stamped at 12:00 New York time with its UTC offset (-05:00 / -04:00). Exactly 100 charges a day,
# except every fiscal period's first day 10 and its second day 190 (a stocktake hold, caught up the next day), and an
# outage on Wednesday 2025-06-18: 20, then 170 on 2025-06-19 (its catch-up).
CHARGES = """
import numpy as np, pandas as pd
PROFILE = {"fiscal_calendar": {"kind": "4-5-4", "first_day": "2023-01-29", "year_naming": "start_year",
                               "53_week_years": [2023]}, "store_timezone": "America/New_York"}
days = pd.date_range("2023-01-29", "2025-11-29", freq="D")
starts = set()
start = pd.Timestamp("2023-01-29")
while start <= days[-1]:
    for weeks in [4, 5, 4] * 4:
        starts.add(start)
        start += pd.Timedelta(weeks=weeks + (1 if start == pd.Timestamp("2023-12-31") else 0))
n = np.full(len(days), 100)
for i, d in enumerate(days):
    if d in starts:
        n[i] = 10
    elif d - pd.Timedelta(days=1) in starts:
        n[i] = 190
n[days == "2025-06-18"] = 20
n[days == "2025-06-19"] = 170
local = np.repeat(days, n) + pd.Timedelta(hours=12)
stamps = pd.DatetimeIndex(local).tz_localize("America/New_York").strftime("%Y-%m-%dT%H:%M:%S%z")
SOURCE = save_artifact(pd.DataFrame({"charge_id": range(len(stamps)), "processed_at": stamps}))
"""


async def test_period_start_dips_are_expected_and_the_outage_has_its_catch_up(s: ClientSession) -> None:
    """Hand-computed: every day is 100 charges except the 4-5-4 period starts (10, then 190 the next day) and the
    outage 2025-06-18 (20, then 170). The period starts are fiscal-calendar terms of the model: none is flagged (the
    look-alike - 35 dips to 10 % of normal). The outage is the one anomaly: 20 against 100 expected, ratio 0.2, and
    the same weekday's median over the 8 weeks before is 100 (ratio 0.2). 2025-06-19's 170 restores 70 of the 80
    short (88 %): its catch-up, in `explained`, not a second anomaly. Timestamps carry -04:00 offsets: dated in
    PROFILE's New York time zone, as the Assumed line says."""
    await ok(s, "run_python", code=CHARGES)
    text = text_of(await ok(s, "run_python", code=CALENDAR, output_level="standard"))
    assert "fiscal calendar 4-5-4 from 2023-01-29" in text, text
    text = text_of(await ok(s, "run_python", code=SCRIPT, output_level="standard"))
    assert await value(s, "list(zip(anomalies.period, anomalies.direction))") == "[('2025-06-18', 'low')]", text
    assert await value(s, "float(anomalies.ratio_same_weekday.iloc[0])") == "0.2", text
    assert await value(s, "float(anomalies.same_weekday.iloc[0])") == "100.0", text
    assert await value(s, "anomalies.catch_up.iloc[0]") == "'2025-06-19 (88 % restored)'", text
    assert await value(s, "list(explained.period)") == "['2025-06-19']", text
    assert "days in America/New_York" in text and await value(s, "assumed.startswith('Assumed: ')") == "True", text
    # without the business calendar the period starts are learned (monthly place), still not alarms, and it warns
    await ok(s, "run_python", code="del business_calendar")
    text = text_of(await ok(s, "run_python", code=SCRIPT, output_level="standard"))
    assert "WARNING: no business_calendar" in text, text


# 6 stores, 400 days (2024-01-01 .. 2025-02-03), sales 500 + 100 x store a day; every store closed (0) on US
# Thanksgiving and Christmas Day - a scheduled closure, given in EVENTS; store 3 closed 2024-10-09 and 2024-10-10.
STORES = """
import pandas as pd
days = pd.date_range("2024-01-01", "2025-02-03", freq="D")
rows = []
for store in range(1, 7):
    for d in days:
        sales = 500.0 + 100 * store + 50 * (d.day_of_week == 5)
        if d in (pd.Timestamp("2024-11-28"), pd.Timestamp("2024-12-25")):
            sales = 0.0
        if store == 3 and d in (pd.Timestamp("2024-10-09"), pd.Timestamp("2024-10-10")):
            sales = 0.0
        rows.append((store, d, sales + (d.dayofyear % 7) * 3.0))
SOURCE = save_artifact(pd.DataFrame(rows, columns=["store", "date", "net_sales"]))
PROFILE = {"fiscal_calendar": {"kind": "4-5-4", "first_day": "2024-02-04", "year_naming": "start_year",
                               "53_week_years": []}}
EVENTS = [{"date": "2024-11-28", "name": "Thanksgiving closure", "kind": "closure"},
          {"date": "2024-12-25", "name": "Christmas closure", "kind": "closure"}]
ENTITY = "store"
"""


async def test_a_store_closure_is_found_in_its_own_series_and_scheduled_closures_are_not(s: ClientSession) -> None:
    """Hand-computed: store 3 sells ~800 a day and nothing on 2024-10-09/10: two closed days in its own series
    (finding 'closed (none)'), while the total of six stores drops only 800 of ~5,100 (16 %). The look-alikes:
    Thanksgiving 2024-11-28 and Christmas 2024-12-25, zero in every store, are scheduled closures (EVENTS kind
    closure) - in `explained`, never in `anomalies`."""
    await ok(s, "run_python", code=STORES)
    await ok(s, "run_python", code=CALENDAR, output_level="standard")
    text = text_of(await ok(s, "run_python", code=SCRIPT, output_level="standard"))
    found = "sorted((str(a.store), a.period, a.finding) for a in anomalies.itertuples() if a.store != '(all)')"
    assert await value(s, found) == ("[('3', '2024-10-09', 'closed (none)'), ('3', '2024-10-10', 'closed (none)')]"), (
        text
    )
    assert await value(s, "sorted(set(anomalies.period) & {'2024-11-28', '2024-12-25'})") == "[]", text
    assert await value(s, "int((explained.reason.str.startswith('closed as expected')).sum())") == "14", text


async def test_multi_currency_amounts_are_refused(s: ClientSession) -> None:
    """Amounts in EUR and GBP (VALUE = 'amount', 100 a day each) are not added into one daily series: refused with
    the way out (convert or count). The look-alike: the same frame in one currency runs, and a flat 100 a day has no
    anomaly."""
    frame = (
        "import pandas as pd\n"
        "days = pd.date_range('2025-01-01', '2025-03-31', freq='D')\n"
        "SOURCE = save_artifact(pd.DataFrame({'date': list(days) * 2, 'currency': ['EUR'] * len(days) + ['GBP'] * "
        "len(days), 'amount': 100.0}))\n"
        "ENTITY = None\nbusiness_calendar = None\nVALUE = 'amount'\n"
    )
    await ok(s, "run_python", code=frame)
    result = await s.call_tool("run_python", {"code": SCRIPT})
    assert "convert to one currency first" in text_of(result), text_of(result)
    await ok(s, "run_python", code="SOURCE = save_artifact(load_artifact(SOURCE).query('currency == \"EUR\"'))")
    text = text_of(await ok(s, "run_python", code=SCRIPT, output_level="standard"))
    assert await value(s, "len(anomalies)") == "0", text
