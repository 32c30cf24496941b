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
    pytest.mark.slow,  # a playbook's method fitted on a hand-computed case: CPU-bound, the slow tier
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


# 3 stores, 2023-01-01 .. 2025-06-30, every day exactly: store A 6 transactions, store B 6, store C 100. Store A closed
# (0) 2024-10-09 and 2024-10-10; store B had one 0 day, 2024-03-05.
LOW_STORES = """
import pandas as pd
days = pd.date_range("2023-01-01", "2025-06-30", freq="D")
rows = [(store, d, float(n)) for store, n in (("A", 6), ("B", 6), ("C", 100)) for d in days]
frame = pd.DataFrame(rows, columns=["store", "date", "transactions"])
shut = (frame.store == "A") & frame.date.isin(pd.to_datetime(["2024-10-09", "2024-10-10"]))
frame.loc[shut | ((frame.store == "B") & (frame.date == "2024-03-05")), "transactions"] = 0.0
SOURCE = save_artifact(frame)
PROFILE = {"fiscal_calendar": {"kind": "calendar-month", "first_day": "2023-01-01"}}
ENTITY, DATE, VALUE, EVENTS, COMPLETE = "store", "date", "transactions", None, True
globals().pop("ALPHA", None)
"""


async def test_a_low_volume_store_closed_two_days_is_one_event_and_one_zero_day_is_chance(s: ClientSession) -> None:
    """Hand-computed: each store's series is judged against the total's calendar with its own level (the light
    per-entity model). Store A sells 6 a day: one day at 0 has Poisson chance e^-6 = 0.0025, above the bar of one
    false alarm a year a side over the 4 series (1 / 365.25 / 4 = 0.00068) - store B's single zero day, the
    look-alike, is NOT flagged. Store A's two closed days are one run: chance e^-12 = 6.1e-6, below the bar - both
    days flagged 'closed (none)', with that p (at least e^-12: each day's expectation is widened by its own
    uncertainty). The total (112 a day, 6 short) is not flagged."""
    await ok(s, "run_python", code=LOW_STORES)
    await ok(s, "run_python", code=CALENDAR, output_level="standard")
    text = text_of(await ok(s, "run_python", code=SCRIPT, output_level="standard"))
    found = "[(a.store, a.period, a.finding) for a in anomalies.itertuples()]"
    assert await value(s, found) == ("[('A', '2024-10-09', 'closed (none)'), ('A', '2024-10-10', 'closed (none)')]"), (
        text
    )
    assert await value(s, "bool(anomalies.p.nunique() == 1 and 6.1e-6 <= anomalies.p.iloc[0] < 6.8e-4)") == "True", text
    assert "p < 0.00068" in text and "data complete through 2025-06-30" in text, text


# Sign-ups of a self-serve product, 2023-01-01 .. 2025-12-31: exactly 9 a day, 27 on the 1st of each month (contracts
# start then: EVENTS "monthly:1"); one outage day 2024-11-19 with 1 sign-up; one slow day 2024-06-12 with 3; and the
# export's last day 2025-12-31 cut mid-day at 0.
SIGNUPS = """
import pandas as pd
days = pd.date_range("2023-01-01", "2025-12-31", freq="D")
n = pd.Series(9.0, index=days)
n[days.day == 1] = 27.0
n["2024-11-19"], n["2024-06-12"], n["2025-12-31"] = 1.0, 3.0, 0.0
SOURCE = save_artifact(pd.DataFrame({"date": days, "signups": n.to_numpy()}))
PROFILE = {"fiscal_calendar": {"kind": "calendar-month", "first_day": "2023-01-01"}, "store_timezone": "UTC"}
ENTITY, DATE, VALUE, EVENTS = None, "date", "signups", {"contract starts": "monthly:1"}
for name in ("ALPHA", "COMPLETE", "DATA_THROUGH"):
    globals().pop(name, None)
"""


async def test_a_low_volume_outage_is_judged_by_its_poisson_tail_against_a_yearly_false_alarm_budget(
    s: ClientSession,
) -> None:
    """Hand-computed: 9 expected, 1 seen: P(X <= 1) = 10 e^-9 = 0.00123 (Poisson), below the outage bar (a drop
    of 75 % or more) of one false alarm a year (1 / 365.25 = 0.00274): 2024-11-19 is the one anomaly (p at least
    0.00123, widened by the expectation's own uncertainty). The look-alikes: the slow day
    (3 of 9: P(X <= 3) = 0.021) and the month starts (27, expected from the contract-start event): not flagged.
    Under the whole-history control (ALPHA = 0.01: p < 0.01 / 1,095 = 9e-6) the same day is within chance - the
    reason the daily monitor's budget is the default."""
    await ok(s, "run_python", code=SIGNUPS)
    await ok(s, "run_python", code=CALENDAR, output_level="standard")
    text = text_of(await ok(s, "run_python", code=SCRIPT, output_level="standard"))
    assert await value(s, "list(zip(anomalies.period, anomalies.value))") == "[('2024-11-19', 1.0)]", text
    assert await value(s, "bool(0.00123 <= anomalies.p.iloc[0] < 0.00274)") == "True", text
    assert "(p < 0.0027" in text, text
    await ok(s, "run_python", code="ALPHA = 0.01")
    text = text_of(await ok(s, "run_python", code=SCRIPT, output_level="standard"))
    assert await value(s, "len(anomalies)") == "0", text


async def test_the_last_day_is_taken_as_incomplete_unless_told(s: ClientSession) -> None:
    """The export's last day, 2025-12-31, has 0 sign-ups (cut mid-day): by default it is left out - in `explained`
    in `incomplete`, never in `anomalies`, and the Assumed line says so. The look-alike of a real outage: told the
    data are complete (COMPLETE = True), the same 0 against 9 expected (P = e^-9 = 0.00012) is flagged."""
    await ok(s, "run_python", code=SIGNUPS)
    await ok(s, "run_python", code=CALENDAR, output_level="standard")
    text = text_of(await ok(s, "run_python", code=SCRIPT, output_level="standard"))
    assert await value(s, "'2025-12-31' in set(anomalies.period)") == "False", text
    assert await value(s, "incomplete") == "{'period': '2025-12-31', 'value': 0.0}", text
    assert "2025-12-31 INCOMPLETE" in text, text
    await ok(s, "run_python", code="COMPLETE = True")
    await ok(s, "run_python", code=SCRIPT, output_level="standard")
    assert await value(s, "[(a.period, a.finding) for a in anomalies.itertuples()][-1]") == (
        "('2025-12-31', 'outage (none)')"
    ), text


# Daily orders of a B2B seller in DE, FR and GB (company codes closed on their own country's public holidays): 60
# orders every weekday, none at weekends; on a public holiday of one or two of the countries 40 or 20; on 1 May 2023
# - Labour Day in DE and FR, and GB's early May bank holiday that year - none (every country closed). An outage on
# Tuesday 2024-10-15: 6. A START / END left in the session by another script's cell (2024-11-29..2024-12-24).
THREE_COUNTRIES = """
import holidays, numpy as np, pandas as pd
days = pd.date_range("2023-01-02", "2025-12-31", freq="D")
off = {c: holidays.country_holidays(c, years=range(2023, 2026)) for c in ("DE", "FR", "GB")}
n = np.array([0 if d.weekday() >= 5 else 60 - 20 * sum(d.date() in h for h in off.values()) for d in days])
n[days == "2024-10-15"] = 6
SOURCE = save_artifact(pd.DataFrame({"date": np.repeat(days, n)}))
PROFILE = {"countries": ["DE", "FR", "GB"]}
START, END = "2024-11-29", "2024-12-24"
"""


async def test_a_day_every_country_is_closed_is_expected_and_a_stale_range_does_not_cut_the_calendar(
    s: ClientSession,
) -> None:
    """By hand: 1 May 2023 is a public holiday in DE, FR and GB (GB's early May bank holiday fell on it), so nothing is
    ordered: expected closed, in `explained`, never an outage (the look-alike: on 1 May 2024 and 2025 GB trades, 20
    orders, so no holiday term alone expects 0). The outage 2024-10-15 (6 where 60 are due, ratio 0.1) is the one
    anomaly (the truth). START/END left from another cell widen the calendar's range, never narrow it: the calendar
    covers 2023-01-02..2025-12-31."""
    await ok(s, "run_python", code=THREE_COUNTRIES)
    await ok(s, "run_python", code="COUNTRY = ['DE', 'FR', 'GB']\n" + CALENDAR, output_level="brief")
    assert await value(s, "business_calendar.attrs['range']") == "('2023-01-02', '2025-12-31')"
    text = text_of(await ok(s, "run_python", code="COMPLETE = True\n" + SCRIPT, output_level="standard"))
    assert await value(s, "list(zip(anomalies.period, anomalies.direction))") == "[('2024-10-15', 'low')]", text
    assert await value(s, "'2023-05-01' in set(explained.period)") == "True", text
    await ok(s, "run_python", code="del COUNTRY, START, END, COMPLETE")
