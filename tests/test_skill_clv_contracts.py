"""customer-lifetime-value on SaaS contracts (issue 61, the saas_contracts archetype's gaps): only paying subscribers
are customers (a trial that never paid is no failed renewal), renewals are counted per contract term and per account
(a 24-month contract billed yearly cannot churn at its yearly invoice), and Stripe's Unix seconds written as text are
read. Driven through the real server over stdio as a model would: the script read with use_skill, run in run_python
on artifacts. Every answer below is counted by hand from the frames built here."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import ClientSession

from tests.conftest import in_process, text_of

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,  # a playbook's method fitted on a hand-computed case: CPU-bound, the slow tier
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="run_python's sandbox is Linux-specific"),
]

SKILL = "customer-lifetime-value"

# Self-serve, monthly (30 days), data end 2026-01-01, every time as Unix seconds written as TEXT (Stripe's export):
# - 10 trials that never paid: started 2025-06-01, trial_end 2025-06-15, canceled that day, no first_paid_at;
# - 10 paying subscriptions: started 2025-01-01, trial_end = first_paid_at = 2025-01-15; 3 cancelled on 2025-02-01
#   (17 days in: their first renewal failed); 7 live (351 days: 12 periods paid), of which one is past_due and one
#   set to cancel at the period's end;
# - 1 trialing now (trial_end 2026-01-08).
TRIALS = """
import pandas as pd
unix = lambda day: str(int(pd.Timestamp(day, tz="UTC").timestamp()))
rows, orders = [], []
def sub(i, status, started, trial_end, cancelled=None, paid=None, pending="false"):
    rows.append(dict(customer_id=f"cus_{i}", subscription_id=f"sub_{i}", status=status, plan="team_monthly",
                     started_at=unix(started), trial_end=unix(trial_end), cancelled_at=cancelled and unix(cancelled),
                     first_paid_at=paid and unix(paid), cancel_at_period_end=pending, period_days=30,
                     next_charge_at=unix("2026-01-10"), margin_per_period=10.0))
for i in range(10):
    sub(i, "canceled", "2025-06-01", "2025-06-15", cancelled="2025-06-15")
for i in range(10, 20):
    gone = i < 13
    status = "canceled" if gone else ("past_due" if i == 13 else "active")
    sub(i, status, "2025-01-01", "2025-01-15", cancelled="2025-02-01" if gone else None, paid="2025-01-15",
        pending="true" if i == 14 else "false")
    orders += [(f"cus_{i}", unix(day), 10.0) for day in pd.date_range("2025-01-15", "2025-02-01" if gone else
               "2025-12-31", freq="30D")]
sub(20, "trialing", "2025-12-25", "2026-01-08")
orders.append(("cus_19", unix("2025-12-31"), 10.0))  # the data's last day: the end is 2026-01-01
STATES = save_artifact(pd.DataFrame(rows))
SOURCE = save_artifact(pd.DataFrame(orders, columns=["customer_id", "order_date", "margin"]))
print(STATES, SOURCE)
"""

# Sales-led, billed yearly (365.25 days), data end 2026-01-01, ISO times with UTC offsets, store in Europe/Berlin.
# Accounts (contract_id) holding two subscriptions (workspaces) each, all started 2023-03-01:
# - A1, A2: 12-month term, live (1,037 days: 3 terms), A3: cancelled 2023-12-01 (its first renewal), A4: cancelled
#   2024-12-01 (641 days: 2 terms, its second renewal);
# - B1: 24-month term (730.5 days) billed yearly, live (2 terms); B2 (one workspace): 24-month term, cancelled
#   2025-01-15 (686 days: at its first term's end).
CONTRACTS = """
import pandas as pd
rows = []
def sub(account, n, term, cancelled=None):
    for k in range(n):
        rows.append(dict(customer_id=account, subscription_id=f"{account}-{k}", contract_id=account,
                         status="canceled" if cancelled else "active", plan="business_annual",
                         started_at="2023-03-01T09:00:00+01:00", cancelled_at=cancelled, period_days=365.25,
                         term_days=term, cancel_at_period_end="false", next_charge_at="2026-03-01T09:00:00+01:00",
                         margin_per_period=100.0))
sub("A1", 2, 365.25); sub("A2", 2, 365.25)
sub("A3", 2, 365.25, "2023-12-01T10:00:00+01:00"); sub("A4", 2, 365.25, "2024-12-01T10:00:00+01:00")
sub("B1", 2, 730.5); sub("B2", 1, 730.5, "2025-01-15T10:00:00+01:00")
orders = [(a, f"{y}-03-01T09:00:00+01:00", 100.0) for a in ["A1", "A2", "B1"] for y in (2023, 2024, 2025)]
orders += [("A3", "2023-03-01T09:00:00+01:00", 100.0), ("A1", "2025-12-31T12:00:00+01:00", 0.0)]
STATES = save_artifact(pd.DataFrame(rows))
SOURCE = save_artifact(pd.DataFrame(orders, columns=["customer_id", "order_date", "margin"]))
print(STATES, SOURCE)
"""


@pytest.fixture(scope="module")
async def s(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClientSession]:
    ws = tmp_path_factory.mktemp("clv_contracts") / "ws"
    (ws / "uploads").mkdir(parents=True)
    async with in_process(ws, None, BA_MCP_TOOLS__RUN_PYTHON__TIMEOUT_S="120") as client:  # the real server, in process
        yield client.session


async def ok(session: ClientSession, tool: str, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    return text_of(result)


async def script(session: ClientSession) -> str:
    read = await ok(session, "use_skill", name=SKILL, path="scripts/clv.py", output_level="full")
    assert "Window:" not in read  # the model reads the whole script in one call
    return read.split("\n", 2)[2].rstrip("\n")


async def value(session: ClientSession, expression: str) -> Any:
    text = await ok(session, "run_python", code=f"print(repr({expression}))", output_level="full")
    return eval(text.split("## stdout\n", 1)[1].strip().split("\n")[0])


async def run(session: ClientSession, data: str, head: str, **edits: str) -> str:
    """The data built (``edits``: a STATES column dropped first), then the script as the model runs it."""
    out = await ok(session, "run_python", code=data)
    states, source = out.split("## stdout\n", 1)[1].split()[:2]
    for drop in edits.values():
        await ok(
            session, "run_python", code=f"DROPPED = save_artifact(load_artifact({states!r}).drop(columns=[{drop!r}]))"
        )
        states = await value(session, "DROPPED")
    code = f"{head}\nSTATES = {states!r}\nSOURCE = {source!r}\n" + await script(session)
    return await ok(session, "run_python", code=code, output_level="standard")


async def test_only_paying_subscribers_face_renewals(s: ClientSession) -> None:
    """The first renewal of team_monthly, counted by hand: 10 paying subscriptions faced it (3 cancelled 17 days
    after their first paid day, ceil(17 / 30) = 1 period paid; 7 live with 12 paid), 7 renewed: 0.7. The 10 trials
    that ended without a paid charge are not customers: left out (counted as failed renewals they would make it
    7 / 20 = 0.35) - by first_paid_at, and the same by the trial_end rule when the export has no first_paid_at.
    The trialing one is valued with the conversion rate 10 paid / 20 trials = 0.5. Look-alikes: the past_due
    subscriber is at risk (p_alive = DUNNING_RECOVERY 0.7, value > 0), not churned; the one set to cancel at the
    period's end gets exactly 0. Times are Unix seconds written as text (Stripe's export)."""
    head = "PROFILE = {'contractual': True, 'store_timezone': 'UTC'}\nDUNNING_RECOVERY = 0.7\nYEARS = 1"
    for rule, edits in (("first_paid_at", {}), ("trial_end", {"drop": "first_paid_at"})):
        text = await run(s, TRIALS, head, **edits)
        first = await value(s, "survival[survival.renewal == 1][['plan', 'at_risk', 'observed']].to_dict('records')")
        assert first == [{"plan": "team_monthly", "at_risk": 10, "observed": 0.7}], text
        assert f"10 ended without a paid charge ({rule})" in await value(s, "assumed"), text
        subs = await value(
            s, "subscriptions.set_index('subscription_id')[['state', 'p_alive', 'value']].to_dict('index')"
        )
        assert len(subs) == 11 and not any(f"sub_{i}" in subs for i in range(10)), subs
        assert subs["sub_20"]["state"] == "trial" and subs["sub_20"]["p_alive"] == pytest.approx(0.5), subs
        assert subs["sub_13"]["state"] == "dunning" and subs["sub_13"]["p_alive"] == 0.7 and subs["sub_13"]["value"] > 0
        assert subs["sub_14"]["state"] == "pending_cancel" and subs["sub_14"]["value"] == 0
        assert subs["sub_14"]["p_alive"] == 0 and subs["sub_10"]["value"] == 0  # a month-1 canceller: gone
        assert (await value(s, "str(load_artifact(SOURCE).order_date.iloc[0])")).isdigit()  # read as written: text


async def test_renewals_are_counted_per_contract_term_and_account(s: ClientSession) -> None:
    """Six accounts (contracts), 11 subscriptions. The first renewal, by hand, per contract at its term's end: A1, A2
    (3 terms), A4 (renewed once, then cancelled 641 days in: ceil(641 / 365.25) = 2) and B1 (24-month term, 1,037
    days: 2 terms) renewed, A3 (275 days) and B2 (686 days of a 730.5-day term) did not: 4 / 6 = 0.667 - not the
    per-subscription, per-yearly-invoice count 9 / 11 = 0.818, which reads B2's second yearly invoice as a renewal
    and counts each account's workspaces twice. The second renewal: A1, A2 renewed, A4 did not: 2 / 3. Value over
    YEARS = 1, undiscounted: B1's next invoice (2026-03-01) falls inside its 24-month term, contracted: exactly 100
    per subscription, no renewal chance (the look-alike of a renewal); A1's on 2026-03-01 is its third renewal:
    100 x (b + 2) / (a + b + 2) with the fitted a, b. ISO times with UTC offsets (store in Europe/Berlin)."""
    head = "PROFILE = {'contractual': True, 'store_timezone': 'Europe/Berlin'}\nYEARS = 1\nDISCOUNT_RATE = 0.0"
    text = await run(s, CONTRACTS, head)
    table = await value(s, "survival[['renewal', 'at_risk', 'observed', 'a', 'b']].to_dict('records')")
    assert [(r["renewal"], r["at_risk"], r["observed"]) for r in table[:2]] == [(1, 6, 0.667), (2, 3, 0.667)], text
    a, b = table[0]["a"], table[0]["b"]
    subs = await value(s, "subscriptions.set_index('subscription_id')[['periods_paid', 'value']].to_dict('index')")
    assert subs["B1-0"] == {"periods_paid": 2, "value": 100.0}, subs
    assert subs["A1-0"]["periods_paid"] == 3
    assert subs["A1-0"]["value"] == pytest.approx(100 * (b + 2) / (a + b + 2), abs=0.05), (subs, a, b)
    assert subs["A3-0"]["value"] == 0 and subs["B2-0"]["value"] == 0
    assert "renewal per contract term" in await value(s, "assumed") and "Europe/Berlin" in text, text
