"""customer-cohort-retention (issue 61): the method a senior analyst signs for - subscription survival for contracts
(trials left out), logo retention beside NRR, a cohort x calendar-period view (one period effect, not a finding per
cohort; a cohort effect only when it persists), the business's fiscal calendar, right-censoring. Driven through a
real stdio server as a model would: each script read with use_skill and run in run_python on artifacts."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

import pytest
from mcp import ClientSession

from tests.conftest import text_of
from tests.skill_session import ok, script, served, value

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,  # a playbook's method fitted on a hand-computed case: CPU-bound, the slow tier
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="run_python's sandbox is Linux-specific"),
]

SKILL = "customer-cohort-retention"


@pytest.fixture(scope="module")
async def s(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClientSession]:
    async with served(tmp_path_factory.mktemp("cohorts") / "ws") as session:
        yield session


async def run(s: ClientSession, data: str, path: str = "scripts/retention_matrix.py") -> str:
    await ok(s, "run_python", code=data)
    code = await script(s, SKILL, path)
    return text_of(await ok(s, "run_python", code=code, output_level="standard"))


# Ten subscribers and three trials. Starts carry UTC offsets; the store is in New York. Days from the first paid day
# (2024-01-01) to the stop: A and B 45 (cancelled 2024-02-15), D 200 (2024-07-19); C started 2024-09-22 and is live
# (censored at 100 days); E..J are live (censored at 365, the data ending 2024-12-31). The trials ended unpaid
# after 14 days (converted false). MRR snapshots a year apart, by region: EMEA 4 x 100 -> two gone, two at 250;
# NA 4 x 100 -> 4 x 120; LATAM 4 x 100 -> 4 x 90.
SURVIVAL = """
import pandas as pd
PROFILE = {"contractual": True, "store_timezone": "America/New_York"}
t = lambda day: day + "T15:00:00+00:00"
rows = [("A", t("2024-01-01"), t("2024-02-15"), True), ("B", t("2024-01-01"), t("2024-02-15"), True),
        ("C", t("2024-09-22"), None, True), ("D", t("2024-01-01"), t("2024-07-19"), True)]
rows += [(c, t("2024-01-01"), None, True) for c in "EFGHIJ"]
rows += [(f"T{i}", t("2024-03-01"), t("2024-03-15"), False) for i in range(3)]
SUBSCRIPTIONS = save_artifact(pd.DataFrame(rows, columns=["customer_id", "started_at", "ended_at", "converted"]))
DATA_THROUGH = "2024-12-31"
snap = []
for region, later in (("EMEA", [0, 0, 250, 250]), ("NA", [120] * 4), ("LATAM", [90] * 4)):
    for i, m in enumerate(later):
        snap += [(f"{region}{i}", "2024-06-01", 100.0, region), (f"{region}{i}", "2025-06-01", float(m), region)]
MRR = save_artifact(pd.DataFrame(snap, columns=["customer_id", "at", "mrr", "segment"]))
"""


async def test_subscription_survival_kaplan_meier_leaves_trials_out_and_logo_retention_sits_beside_nrr(
    s: ClientSession,
) -> None:
    """Kaplan-Meier by hand: at 45 days 2 of 10 stop (S = 0.8); C is censored at 100 days; at 200 days 1 of the 7 at
    risk stops (S = 0.8 x 6/7). Months 1 / 3 / 6 (30.4 / 91.3 / 182.6 days): 1.0 / 0.8 / 0.8, at risk 10 / 8 / 7.
    The look-alike: the three unpaid trials counted as customers would make month 1 10/13 - they are left out and
    said so. Logo vs NRR by hand: EMEA keeps 2 of 4 logos (0.5) with NRR 500/400 = 1.25, GRR 200/400 = 0.5 -
    called out; NA's NRR 1.2 with every logo kept (the look-alike of high NRR) is not, nor LATAM's 0.9."""
    text = await run(s, SURVIVAL, "scripts/subscription_survival.py")
    assert "3 trials that never converted are not customers" in text and "Assumed:" in text, text
    km = await value(s, "km[km.segment == 'all'].set_index('month')[['at_risk', 'survival']].to_dict('index')")
    assert eval(km) == {
        1: {"at_risk": 10, "survival": 1.0},
        3: {"at_risk": 8, "survival": 0.8},
        6: {"at_risk": 7, "survival": 0.8},
    }, text
    columns = "['logo_retention', 'nrr', 'grr', 'finding']"
    segments = eval(await value(s, f"segments.set_index('segment')[{columns}].to_dict('index')"))
    assert segments["EMEA"] == {"logo_retention": 0.5, "nrr": 1.25, "grr": 0.5, "finding": segments["EMEA"]["finding"]}
    assert segments["EMEA"]["finding"].startswith("loses logos while its revenue grows")
    assert (segments["NA"]["nrr"], segments["NA"]["finding"]) == (1.2, "")
    assert (segments["LATAM"]["nrr"], segments["LATAM"]["finding"]) == (0.9, "")


# Buyers, calendar months, events with UTC offsets. Eight monthly cohorts 2024-01..2024-08 of 100 customers each:
# customers 0-59 buy on the 15th of every later month (60 %), except June 2024 when only 0-29 do (a store-wide
# outage: 30 %). Cohort 2024-03 is weak: only customers 0-29 buy (30 %), 0-14 in June. Its signups are stamped
# 2024-04-01T02:00+00:00 - 31 March, 22:00 in New York: the March cohort in the store's day.
BUYERS = """
import pandas as pd
PROFILE = {"contractual": False, "store_timezone": "America/New_York"}
rows = []
for c in range(8):
    month = pd.Timestamp("2024-01-01") + pd.DateOffset(months=c)
    signup = "2024-04-01T02:00:00+00:00" if c == 2 else f"{month:%Y-%m}-10T12:00:00-05:00"
    for i in range(100):
        cid = f"{c}-{i}"
        rows.append((cid, signup, f"{month:%Y-%m}-12T12:00:00-05:00"))
        for later in pd.date_range(month + pd.DateOffset(months=1), "2024-10-01", freq="MS"):
            keep = 30 if c == 2 else 60
            if later.month == 6:
                keep //= 2
            if i < keep:
                rows.append((cid, signup, f"{later:%Y-%m}-15T12:00:00-05:00"))
SOURCE = save_artifact(pd.DataFrame(rows, columns=["customer_id", "acquired_at", "active_at"]))
DATA_THROUGH, SUBSCRIPTIONS, GRAIN = "2024-10-31", None, "period"
"""


async def test_a_dip_in_one_calendar_month_is_one_period_effect_and_a_persisting_shortfall_is_a_cohort(
    s: ClientSession,
) -> None:
    """By hand: in calendar 2024-06 each cohort that has both neighbours at ages >= 1 (2024-01..04: 4 cohorts) has
    half its June neighbours' share - pooled 30+30+15+30 = 105 against 210, ratio 0.5, 0.5 with any one left out:
    ONE period effect, 2024-06. The look-alike: each of those cohorts' own June dip (30 % against 60 % at that age)
    is not a cohort effect. The truth: cohort 2024-03 retains 30 % at every age against 60 % for the others - a
    persisting shortfall, flagged at period 1 (30.0 against 60.0). Its signups stamped 1 April 02:00 UTC are 31 March
    in New York: the cohort holds 100."""
    text = await run(s, BUYERS)
    assert "PERIOD EFFECT: 2024-06 (2024-06-01..2024-06-30): activity x0.50" in text, text
    assert await value(s, "period_effects[period_effects.flagged].period.tolist()") == "['2024-06']"
    assert await value(s, "outliers") == "{'2024-03': (30.0, 60.0, 1)}", text
    assert await value(s, "int(sizes['2024-03'])") == "100"
    assert await value(s, "float(retention.loc['2024-01', 5])") == "30.0"  # June shown as it is
    assert await value(s, "findings[['kind', 'entity']].values.tolist()") == str(
        [["period effect", "2024-06"], ["cohort effect", "2024-03"]]
    )
    assert "Assumed: contractual=False; calendar months" in text, text
    # the same events for a business PROFILE says is contractual, without SUBSCRIPTIONS: activity, said loudly
    await ok(s, "run_python", code=BUYERS.replace('"contractual": False', '"contractual": True'))
    code = await script(s, SKILL, "scripts/retention_matrix.py")
    text = text_of(await ok(s, "run_python", code=code, output_level="standard"))
    assert "WARNING: PROFILE says contractual but no SUBSCRIPTIONS given: this is ACTIVITY" in text, text


# Subscriptions, calendar months. Eight monthly cohorts 2023-01..08 of 100 subscriptions (started the 10th). Each
# loses 5 in every month after its first; in 2023-06 (a price rise) 15 instead. Cohort 2023-03 took a coupon:
# 40 leave in its month 2 (2023-05, the free months over) instead of 5. Stops on the 20th; the data ends 2023-10-31.
CONTRACTS = """
import pandas as pd
PROFILE = {"contractual": True, "store_timezone": "UTC"}
rows = []
for c in range(8):
    month = pd.Timestamp("2023-01-01") + pd.DateOffset(months=c)
    n = 0
    for k, later in enumerate(pd.date_range(month, "2023-10-01", freq="MS")):
        if k == 0:
            continue
        leave = 40 if (c == 2 and k == 2) else 15 if later.month == 6 else 5
        for _ in range(leave):
            rows.append((f"{c}-{n}", f"{month:%Y-%m}-10", f"{later:%Y-%m}-20", True))
            n += 1
    rows += [(f"{c}-{i}", f"{month:%Y-%m}-10", None, True) for i in range(n, 100)]
SUBSCRIPTIONS = save_artifact(pd.DataFrame(rows, columns=["customer_id", "started_at", "ended_at", "converted"]))
SOURCE = None
DATA_THROUGH, GRAIN = "2023-10-31", "period"
"""


async def test_subscriptions_a_churn_spike_in_one_month_is_a_period_effect_a_coupon_cohort_is_a_cohort_effect(
    s: ClientSession,
) -> None:
    """Logo retention = subscribed at the month's end: cohort 2023-01 is 100, 95, 90, 85, 80, 65 (June: 15 left),
    60 ... (hand count). June's churn is three times what the same ages show elsewhere, over every cohort that had
    subscribers at risk: ONE period effect, 2023-06, not six weak cohorts (the look-alike: each cohort's own June
    drop). The coupon cohort 2023-03 keeps 55 at month 2 against 90 for the others, and stays short after: a cohort
    effect named at period 2. Its 40 leavers dominate May; with it left out May is ordinary (no period effect)."""
    text = await run(s, CONTRACTS)
    assert await value(s, "retention.loc['2023-01', :6].tolist()") == "[100.0, 95.0, 90.0, 85.0, 80.0, 65.0, 60.0]"
    assert await value(s, "period_effects[period_effects.flagged].period.tolist()") == "['2023-06']", text
    assert await value(s, "outliers") == "{'2023-03': (55.0, 90.0, 2)}", text
    assert "logo retention (subscribed at the period's end)" in text, text
    assert "PERIOD EFFECT: 2023-06 (2023-06-01..2023-06-30): churn x" in text, text


# A 4-5-4 calendar from PROFILE: FY2023 starts Sunday 2023-01-29 and has 53 weeks (to 2024-02-03, its Q4 14 weeks);
# FY2024 starts 2024-02-04. Six fiscal-quarter cohorts FY2023-Q1..FY2024-Q2 of 100 buyers, each acquired on a
# quarter's 2nd week - FY2023-Q4's on 2024-02-01, in the 53rd week - 50 % buying in every later quarter. The data
# ends 2024-09-15, 43 of the 91 days of FY2024-Q3 (2024-08-04..11-02): its cells show 20 %, six weeks of buying.
FISCAL = """
import pandas as pd
PROFILE = {"contractual": False, "fiscal_calendar": {"kind": "4-5-4", "first_day": "2023-01-29",
           "year_naming": "{naming}", "53_week_years": ["2023-01-29"]}}
GRAIN = "quarter"
starts = pd.to_datetime(["2023-01-29", "2023-04-30", "2023-07-30", "2023-10-29", "2024-02-04", "2024-05-05",
                         "2024-08-04"])
rows = []
for c in range(6):
    acquired = pd.Timestamp("2024-02-01") if c == 3 else starts[c] + pd.Timedelta(days=8)
    for i in range(100):
        rows.append((f"{c}-{i}", acquired, acquired))
        for q in range(c + 1, 7):
            if i < (20 if q == 6 else 50):
                rows.append((f"{c}-{i}", acquired, starts[q] + pd.Timedelta(days=20)))
SOURCE = save_artifact(pd.DataFrame(rows, columns=["customer_id", "acquired_at", "active_at"]))
DATA_THROUGH, SUBSCRIPTIONS = "2024-09-15", None
"""


async def test_fiscal_quarters_of_a_454_calendar_and_a_quarter_cut_short_is_not_a_loss(s: ClientSession) -> None:
    """By hand from the 4-5-4 rule: the six cohorts are FY2023-Q1..Q4, FY2024-Q1, Q2 (named by the start year), each
    100 (2024-02-01 is FY2023's 53rd week, in Q4 - a 52-week year would put it in FY2024-Q1). FY2024-Q3 is cut
    short: 43 of 91 days; its cells (20 %) are left out, so every cohort reads 50 % at every complete age, nothing
    is flagged (the look-alike: the youngest cohort FY2024-Q2, observed only in its own quarter and the cut one).
    Named by the end year the same quarters are FY2024-Q1..; a calendar without its year naming is warned about."""
    text = await run(s, FISCAL.replace("{naming}", "start_year"))
    assert await value(s, "sizes.astype(int).to_dict()") == str(
        {f"FY{y}-Q{q}": 100 for y, q in [(2023, 1), (2023, 2), (2023, 3), (2023, 4), (2024, 1), (2024, 2)]}
    ), text
    assert "WARNING: the data ends 2024-09-15, 43 of the 91 days of FY2024-Q3" in text, text
    assert await value(s, "sorted(set(retention.iloc[:, 1:].stack().dropna().tolist()))") == "[50.0]", text
    assert await value(s, "retention.loc['FY2024-Q2'].dropna().tolist()") == "[100.0]"
    assert await value(s, "(outliers, period_effects.flagged.sum())") == "({}, np.int64(0))", text
    assert "fiscal calendar 4-5-4 from 2023-01-29, years named by start_year" in text, text
    await run(s, FISCAL.replace("{naming}", "end_year"))
    assert await value(s, "list(retention.index[:2])") == "['FY2024-Q1', 'FY2024-Q2']"
    text = await run(s, FISCAL.replace('"year_naming": "{naming}", ', ""))
    assert "WARNING: PROFILE's fiscal_calendar does not say how years are named" in text, text
