"""rfm-segmentation (issue 61): contract state before RFM, recency in each customer's own buying cycle (B2B cycles,
seasonal buyers), ties kept together and the more-than-half warning. Driven through the real server over stdio as a
model would: step 1's SQL (read with use_skill) on an artifact of orders, then scripts/rfm.py in run_python."""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator

import pytest
from mcp import ClientSession

from tests.conftest import meta_of, text_of
from tests.skill_session import ok, script, served, value

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,  # a playbook's method fitted on a hand-computed case: CPU-bound, the slow tier
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="run_python's sandbox is Linux-specific"),
]

SKILL = "rfm-segmentation"
FENCE = re.compile(r"```sql\n(.*?)```", re.S)


@pytest.fixture(scope="module")
async def s(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClientSession]:
    async with served(tmp_path_factory.mktemp("rfm") / "ws") as session:
        yield session


# orders as (customer, days before END, revenue); END is the data's last order day
HEAD = """
import pandas as pd
END = pd.Timestamp("{end}")
rows = []
def add(customer, days_ago, revenue=100.0):
    rows.append((str(customer), len(rows) + 1, END - pd.Timedelta(days=days_ago), "completed", revenue))
"""
TAIL = """
ORDERS = save_artifact(pd.DataFrame(rows, columns=["customer_id", "order_id", "order_date", "status", "net_revenue"]))
print(ORDERS)
"""


async def scored(s: ClientSession, orders: str, end: str = "2025-12-31", **variables: object) -> str:
    """Step 1's SQL on the orders, then the script with ``variables`` (PROFILE, STATES …) set first."""
    await ok(s, "run_python", code=HEAD.format(end=end) + orders + TAIL)
    artifact = (await value(s, "ORDERS")).strip("'")
    loaded = text_of(await ok(s, "use_skill", name=SKILL, output_level="full"))
    step1 = FENCE.findall(loaded.split("\n---\n\n# Required skill:")[0])[0]
    result = await ok(s, "query_database", query=step1.replace("order_facts", artifact), output_level="brief")
    source = meta_of(result)["artifact_id"]
    code = await script(s, SKILL, "scripts/rfm.py")
    head = "".join(f"{k} = {v}\n" for k, v in {"STATES": None, "AS_OF": None, **variables}.items())
    return text_of(await ok(s, "run_python", code=f"{head}SOURCE = {source!r}\n{code}", output_level="standard"))


async def segment_of(s: ClientSession, customer: str) -> str:
    row = f"rfm.set_index('customer_id').loc['{customer}']"
    return await value(s, f"[{row}.segment, bool({row}.flagged)]")


ONE_OFF_BUYERS = """
for c in range(1, 21):  # 20 one-off buyers, every 30 days, the last ones recently
    for k in range(8):
        add(c, c + 30 * k, 50.0 + c)
"""

SUBSCRIBERS = """
# S1 active on a 6-week box, their last one-off add-on 200 days ago; S2 active but the latest charge failed;
# S3 paused until February (a UTC offset); S4 paused, its resume date long past; S5 cancelled, no one-off orders
add("S1", 200, 30.0)
add("S2", 20, 30.0)
STATES = save_artifact(pd.DataFrame({
    "customer_id": ["S1", "S2", "S3", "S4", "S5", "S5"],
    "status": ["ACTIVE", "ACTIVE", "PAUSED", "PAUSED", "CANCELLED", "CANCELLED"],
    "pause_until": [None, None, "2026-02-01T09:00:00-05:00", "2025-10-01T09:00:00-04:00", None, None],
    "last_charge_status": ["SUCCESS", "ERROR", "SKIPPED", "SUCCESS", "SUCCESS", "ERROR"],
}))
"""
MIXED = "{'contractual': 'mixed', 'store_timezone': 'America/New_York', 'currencies': ['USD']}"


async def test_subscribers_by_contract_state_before_rfm(s: ClientSession) -> None:
    """A mixed business: S2's subscription is ACTIVE but its latest charge attempt is ERROR - Dunning, flagged (the
    one involuntary churn risk). The look-alikes: S1 has not bought one-off for 200 days (RFM would call them lost:
    the one-off buyers' cycle is 30 days) but is an active subscriber - not flagged; S3 is paused until 2026-02-01
    (a UTC offset, after the data's end 2025-12-30) - Paused, not flagged; S4's resume date passed - Paused (no
    resume date); S5's subscriptions are both cancelled - Cancelled, not scored. The one-off buyers' F and M are
    ranked among themselves: 20 customers, so subscribers' add-ons take no quintile places."""
    text = await scored(s, ONE_OFF_BUYERS + SUBSCRIBERS, PROFILE=MIXED, STATES="STATES")
    assert "Assumed: contractual = mixed" in text and "time zone America/New_York" in text, text
    assert await segment_of(s, "S2") == "['Dunning', True]", text
    assert await segment_of(s, "S1") == "['Active subscriber', False]", text
    assert await segment_of(s, "S3") == "['Paused', False]", text
    assert await segment_of(s, "S4") == "['Paused (no resume date)', False]", text
    assert await segment_of(s, "S5") == "['Cancelled', False]", text
    assert await value(s, "int(rfm.f.notna().sum())") == "20", text
    assert await value(s, "sorted(flagged.customer_id[flagged.contract_state != 'none'])") == "['S2']", text


async def test_a_contractual_business_without_states_is_refused(s: ClientSession) -> None:
    """PROFILE says mixed and no STATES is given: the script stops rather than call subscribers lapsing. Without a
    PROFILE it warns loudly and scores everyone as a buyer without a contract."""
    await ok(s, "run_python", code=HEAD.format(end="2025-12-31") + ONE_OFF_BUYERS + TAIL)
    artifact = (await value(s, "ORDERS")).strip("'")
    loaded = text_of(await ok(s, "use_skill", name=SKILL, output_level="full"))
    step1 = FENCE.findall(loaded.split("\n---\n\n# Required skill:")[0])[0]
    result = await ok(s, "query_database", query=step1.replace("order_facts", artifact), output_level="brief")
    source = meta_of(result)["artifact_id"]
    code = await script(s, SKILL, "scripts/rfm.py")
    refused = await s.call_tool(
        "run_python", {"code": f"PROFILE = {MIXED}\nSTATES = None\nSOURCE = {source!r}\n{code}"}
    )
    assert "REFUSED: PROFILE says the business is contractual (mixed)" in text_of(refused), text_of(refused)
    text = text_of(await ok(s, "run_python", code=f"PROFILE = {{}}\nSOURCE = {source!r}\n{code}"))
    assert "WARNING: PROFILE does not say whether customers are on contracts" in text, text
    assert "Assumed: contractual = UNKNOWN" in text, text


B2B = """
for c in range(1, 21):  # 20 direct accounts, monthly buyers
    for k in range(12):
        add(f"D{c}", c - 1 + 30 * k, 500.0)
for k in range(5):
    add("P1", 60 + 90 * k, 20000.0)  # a partner on a 90-day cycle, 60 days since the last bulk order
for k in range(4):
    add("P2", 400 + 90 * k, 20000.0)  # a partner on the same cycle, silent 400 days
add("N1", 20, 800.0)  # a new account: one purchase, 20 days ago
"""


async def test_recency_in_the_partners_own_buying_cycle(s: ClientSession) -> None:
    """By hand: P1's gaps are all 90 days (own cycle 90), recency 60 = 0.67 cycles: R 5, not flagged, though 60
    days is twice the base's 30-day cycle (the look-alike). P2's own cycle is 90, recency 400 = 4.44 cycles: R 2,
    Hibernating, flagged. N1's first order was 20 days ago: New, not at risk. EUR and GBP in the profile with EUR
    the reporting currency: revenue read as EUR, no currency warning; without it, a warning."""
    profile = "{'contractual': False, 'currencies': ['EUR', 'GBP'], 'reporting_currency': 'EUR'}"
    text = await scored(s, B2B, PROFILE=profile)
    p1 = "rfm.set_index('customer_id').loc['P1']"
    assert await value(s, f"[float({p1}.cycle_days), int({p1}.r), bool({p1}.flagged)]") == "[90.0, 5, False]", text
    assert await segment_of(s, "P2") == "['Hibernating', True]", text
    assert await value(s, "float(rfm.set_index('customer_id').loc['P2', 'cycles_silent'])") == "4.44", text
    assert await segment_of(s, "N1") == "['New', False]", text
    assert "revenue in EUR" in text and "currency" not in "".join(re.findall(r"WARNING:.*", text)), text
    text = await scored(s, B2B, PROFILE="{'contractual': False, 'currencies': ['EUR', 'GBP']}")
    assert "WARNING: the exports hold EUR, GBP and PROFILE has no reporting_currency" in text, text


PARTNER_AGREEMENTS = """
STATES = save_artifact(pd.DataFrame({"customer_id": ["P1", "P2"], "status": ["ACTIVE", "ACTIVE"]}))
"""


async def test_a_partners_live_agreement_does_not_hide_that_they_stopped_ordering(s: ClientSession) -> None:
    """A business that is not contractual, with the partners' reseller agreements passed as STATES (both ACTIVE): an
    agreement bills nothing, so P2, silent 4.44 of its own 90-day cycles, is still Hibernating and flagged (read as an
    'Active subscriber' it would be hidden - the look-alike is P1, on its cycle, not flagged). The script says it did
    not apply STATES."""
    profile = "{'contractual': False, 'currencies': ['EUR'], 'reporting_currency': 'EUR'}"
    text = await scored(s, B2B + PARTNER_AGREEMENTS, PROFILE=profile, STATES="STATES")
    assert "STATES was given: NOT applied" in text, text
    assert await segment_of(s, "P2") == "['Hibernating', True]", text
    assert (await segment_of(s, "P1")).endswith("False]"), text


TIES = """
for c in range(1, 5):  # 4 customers with 2 orders
    add(f"A{c}", 10 + c, 100.0)
    add(f"A{c}", 40 + c, 100.0)
for c in range(1, 13):  # 12 identical customers: 3 orders on the same days, 300 in all
    for k in range(3):
        add(f"T{c}", 5 + 30 * k, 100.0)
for c in range(1, 5):  # 4 customers with 5 orders
    for k in range(5):
        add(f"B{c}", c + 30 * k, 100.0)
"""


async def test_equal_recency_frequency_and_value_share_one_score(s: ClientSession) -> None:
    """20 customers; the 12 T customers are identical (3 orders on the same days, 300). By rank with ties kept
    together: T's order count ranks 5th of 20 (after the four 2-order customers), F = 1 + floor(5 x 4 / 20) = 2 for
    all twelve (ntile would spread them over F 1-4); M the same: revenue 300 ranks 5th, M = 2; R 5 for all (5 days
    since the last order, a 30-day cycle). None is flagged."""
    text = await scored(s, TIES, PROFILE="{'contractual': False}")
    tied = "rfm[rfm.customer_id.str.startswith('T')]"
    assert await value(s, f"sorted({tied}[['r', 'f', 'm']].astype(int).drop_duplicates().values.tolist())") == (
        "[[5, 2, 2]]"
    ), text
    assert await value(s, f"int({tied}.flagged.sum())") == "0", text
    assert "split" not in text, text


SEASONAL = """
for c in range(1, 21):  # 20 regular monthly buyers, up to the end
    for k in range(30):
        add(f"R{c}", c + 30 * k, 40.0)
for c in range(1, 6):  # 5 holiday-only buyers: Nov 25 and Dec 15 of 2023 and 2024
    for day in ("2023-11-25", "2023-12-15", "2024-11-25", "2024-12-15"):
        add(f"H{c}", (END - pd.Timestamp(day)).days, 120.0)
for day in ("2022-11-25", "2022-12-15", "2023-11-25", "2023-12-15"):
    add("H9", (END - pd.Timestamp(day)).days, 120.0)  # a holiday buyer who skipped the 2024 season
for k in range(20):
    add("L1", (END - pd.Timestamp("2025-03-31")).days + 30 * k, 300.0)  # 20 monthly orders, none since March
"""


async def test_seasonal_buyers_are_on_a_yearly_cycle(s: ClientSession) -> None:
    """Data to 2025-10-15. The H buyers bought only on 25 Nov and 15 Dec, in 2023 and 2024: seasonal, cycle 365;
    recency 304 days = 0.83 of their year: R 5, not flagged (by their own median gap of 20 days it would be 15
    cycles: Lost). H9 skipped the 2024 season: recency 670 = 1.84 years, R 3, flagged. L1 bought monthly (20
    orders) until 2025-03-31: 198 days = 6.6 cycles, flagged (Lost), the lapsed high-value truth."""
    text = await scored(s, SEASONAL, end="2025-10-15", PROFILE="{'contractual': False}")
    holiday = "rfm[rfm.customer_id.str.match(r'H[1-5]$')]"
    h = f"zip({holiday}.cycle_days, {holiday}.r, {holiday}.flagged)"
    triples = await value(s, f"sorted({{(float(c), int(r), bool(f)) for c, r, f in {h}}})")
    assert triples == "[(365.0, 5, False)]", text
    h9 = "rfm.set_index('customer_id').loc['H9']"
    assert await value(s, f"[int({h9}.r), bool({h9}.flagged)]") == "[3, True]", text
    assert await segment_of(s, "L1") == "['Lost', True]", text
    assert "5 seasonal buyers" in text or "6 seasonal buyers" in text, text


HALF = """
for c in range(1, {lost} + 1):  # lost: two orders 430 and 400 days ago (gap 30: the business's cycle)
    add(f"L{{c}}", 430)
    add(f"L{{c}}", 400)
for c in range(1, 11 - {lost}):  # recent: orders 220, 190 and 5 days ago
    for d in (220, 190, 5):
        add(f"C{{c}}", d)
"""


async def test_a_segment_over_half_the_customers_is_warned(s: ClientSession) -> None:
    """6 of 10 customers silent 400 days, 13 cycles of the business's 30: Lost holds 60 % - the warning. The
    look-alike: 5 of 10 Lost is exactly half - no warning."""
    text = await scored(s, HALF.format(lost=6), PROFILE="{'contractual': False}")
    assert "WARNING: 'Lost' holds 60.0 % of the customers (more than half)" in text, text
    text = await scored(s, HALF.format(lost=5), PROFILE="{'contractual': False}")
    assert "more than half" not in text, text
    assert await value(s, "segments.set_index('segment').customers.to_dict()['Lost']") == "5", text
