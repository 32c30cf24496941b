"""customer-lifetime-value on contract state (issue 61): subscribers valued from their state and renewal survival by
plan (shifted-beta-geometric, Fader & Hardie 2007), BG/NBD only where there is no contract. Driven through the real
server over stdio as a model would: the script read with use_skill and run in run_python on artifacts."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import ClientSession, stdio_client

from tests.conftest import stdio_params, text_of

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="run_python's sandbox is Linux-specific"),
]

SKILL = "customer-lifetime-value"

# Fader & Hardie (2007), "How to project customer retention", Table 1: of 1,000 customers per segment, those still
# renewing at the start of years 0..7. Their published maximum-likelihood sBG fits: regular a = 0.704, b = 1.182;
# high end a = 0.668, b = 3.806.
ALIVE = {"regular": [1000, 631, 468, 382, 326, 289, 262, 241], "highend": [1000, 869, 743, 653, 593, 551, 517, 491]}
PUBLISHED = {"regular": (0.704, 1.182), "highend": (0.668, 3.806)}

# One cohort that started 2,655 days before the data's end (2026-01-01), billed yearly (period 365 days): a
# customer who cancelled after paying t years did so half-way through year t; the survivors have paid 8 years and
# their next charge is 8 x 365 - 2,655 = 265 days after the end. Four survivors of the regular plan are set apart:
# paused until 400 days after the end, past due, set to cancel at the period's end, and a loyal one. Timestamps
# carry UTC offsets; each subscriber has one order per paid year (so the cancelled look like steady buyers).
CONTRACTS = """
import pandas as pd
ALIVE = {alive!r}
end = pd.Timestamp("2026-01-01")
start = end - pd.Timedelta(days=2655)
stamp = lambda t: (t + pd.Timedelta(hours=15)).strftime("%Y-%m-%dT%H:%M:%S") + "+00:00"
states, orders, n = [], [], 0
for plan, alive in ALIVE.items():
    history = [(t, alive[t - 1] - alive[t]) for t in range(1, 8)] + [(8, alive[7])]
    for paid, count in history:
        for _ in range(count):
            n += 1
            live = paid == 8
            stop = None if live else stamp(start + pd.Timedelta(days=365 * (paid - 0.5)))
            row = dict(customer_id=n, subscription_id=n, plan=plan, status="active" if live else "cancelled",
                       started_at=stamp(start), cancelled_at=stop, pause_until=None, cancel_at_period_end="false",
                       period_days=365, margin_per_period=100.0)
            states.append(row)
            orders += [(n, str((start + pd.Timedelta(days=365 * i)).date()), 100.0) for i in range(paid)]
special = {{1001 - 241: "paused", 1002 - 241: "past_due", 1003 - 241: "pending", 1004 - 241: "loyal"}}
for i, kind in special.items():
    row = states[i - 1]
    assert row["plan"] == "regular" and row["status"] == "active"
    if kind == "paused":
        row.update(status="PAUSED", pause_until=stamp(end + pd.Timedelta(days=400)))
    elif kind == "past_due":
        row.update(status="past_due")
    elif kind == "pending":
        row.update(cancel_at_period_end="true")
orders.append((1000, "2025-12-31", 100.0))  # a survivor on the last day: the end is 2026-01-01
STATES = save_artifact(pd.DataFrame(states))
SOURCE = save_artifact(pd.DataFrame(orders, columns=["customer_id", "order_date", "margin"]))
print(STATES, SOURCE)
"""

# Buyers without a contract: each orders at a steady rate of their own and leaves for good after an order with a
# chance of their own (the demo's churning buyers, smaller).
BUYERS = """
import numpy as np, pandas as pd
rng = np.random.default_rng(5)
rows = []
for c in range(600):
    rate, churn = rng.gamma(2.0, 1.0), rng.beta(2.0, 6.0)
    day = pd.Timestamp("2022-01-01") + pd.Timedelta(days=int(rng.integers(0, 365)))
    while day < pd.Timestamp("2026-01-01"):
        rows.append((c, day.date(), float(rng.gamma(4.0, 10.0))))
        if rng.random() < churn:
            break
        day = day + pd.Timedelta(days=max(1, int(round(rng.exponential(30 / rate)))))
SOURCE = save_artifact(pd.DataFrame(rows, columns=["customer_id", "order_date", "margin"]))
"""


@pytest.fixture(scope="module")
async def s(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClientSession]:
    ws = tmp_path_factory.mktemp("clv") / "ws"
    (ws / "uploads").mkdir(parents=True)
    params = stdio_params(ws, BA_MCP_TOOLS__RUN_PYTHON__TIMEOUT_S="120")
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> tuple[bool, str]:
    result = await session.call_tool(tool, arguments)
    return bool(result.is_error), text_of(result)


async def ok(session: ClientSession, tool: str, **arguments: Any) -> str:
    error, text = await call(session, tool, **arguments)
    assert not error, text
    return text


async def script(session: ClientSession) -> str:
    read = await ok(session, "use_skill", name=SKILL, path="scripts/clv.py", output_level="full")
    assert "Window:" not in read  # the model reads the whole script in one call
    return read.split("\n", 2)[2].rstrip("\n")


async def run(session: ClientSession, head: str) -> tuple[bool, str]:
    return await call(session, "run_python", code=head + "\n" + await script(session), output_level="standard")


async def value(session: ClientSession, expression: str) -> Any:
    text = await ok(session, "run_python", code=f"print(repr({expression}))", output_level="full")
    return eval(text.split("## stdout\n", 1)[1].strip().split("\n")[0])


def expected_value(a: float, b: float, charges: int, recovery: float = 1.0) -> float:
    """sBG by hand: one who has paid n = 8 periods pays period n + k with the product of the renewal chances
    (b + t - 1) / (a + b + t - 1) for t = 8 .. 8 + k - 1; margin 100 a period, no discount."""
    total, survive = 0.0, 1.0
    for t in range(8, 8 + charges):
        survive *= (b + t - 1) / (a + b + t - 1)
        total += survive
    return 100 * recovery * total


async def test_contract_state_first_then_renewal_survival_by_plan(s: ClientSession) -> None:
    """Fader & Hardie's two segments as two plans (1,000 subscribers each, yearly renewals): the fit per plan is their
    published a, b (regular 0.704 / 1.182, high end 0.668 / 3.806). Over YEARS = 3 undiscounted, a survivor's next
    charges fall 265, 630 and 995 days after the end (1,360 is past 1,096): value = 100 x (r8 + r8 r9 + r8 r9 r10),
    r_t = (b + t - 1) / (a + b + t - 1) - 257.6 regular, 268.0 high end. Cancelled (759 + 509 of them, each with one
    order a year, the last up to 6.5 years in): p_alive 0 and value 0. Set to cancel at the period's end: 0. Past due:
    0.7 x 257.6. Look-alike: the subscriber paused until 400 days after the end - silent, but resuming - gets the
    charges from the resume date: 400 and 765 days, 100 x (r8 + r8 r9) = 177.6, not 0."""
    data = await ok(s, "run_python", code=CONTRACTS.format(alive=ALIVE))
    states, source = data.split("## stdout\n", 1)[1].split()[:2]
    head = (
        f"PROFILE = {{'contractual': True, 'store_timezone': 'America/New_York'}}\n"
        f"STATES = {states!r}\nSOURCE = {source!r}\nYEARS = 3\nDISCOUNT_RATE = 0.0\nDUNNING_RECOVERY = 0.7"
    )
    error, text = await run(s, head)
    assert not error, text
    fits = await value(s, "survival.groupby('plan')[['a', 'b']].first().to_dict('index')")
    for plan, (a, b) in PUBLISHED.items():
        assert fits[plan]["a"] == pytest.approx(a, abs=0.002) and fits[plan]["b"] == pytest.approx(b, abs=0.003)
    picked = "subscriptions[subscriptions.subscription_id.isin([760, 761, 762, 763, 2000])]"
    subs = await value(s, f"{picked}.set_index('subscription_id')[['state', 'p_alive', 'value']].to_dict('index')")
    loyal, paused, due, pending = subs[1004 - 241], subs[1001 - 241], subs[1002 - 241], subs[1003 - 241]
    assert loyal["value"] == pytest.approx(expected_value(*PUBLISHED["regular"], 3), abs=0.5)
    assert subs[2000]["value"] == pytest.approx(expected_value(*PUBLISHED["highend"], 3), abs=0.5)  # high end
    assert paused["state"] == "paused" and paused["p_alive"] == 1.0
    assert paused["value"] == pytest.approx(expected_value(*PUBLISHED["regular"], 2), abs=0.5)  # from the resume date
    assert due["state"] == "dunning" and due["p_alive"] == 0.7
    assert due["value"] == pytest.approx(expected_value(*PUBLISHED["regular"], 3, 0.7), abs=0.5)
    assert pending["state"] == "pending_cancel" and pending["value"] == 0 and pending["p_alive"] == 0
    dead = "subscriptions[subscriptions.state == 'cancelled'].value"
    cancelled = await value(s, f"[int({dead}.size), float({dead}.abs().max())]")
    assert cancelled == [759 + 509, 0.0]
    gone = await value(s, "float(clv[clv.status == 'cancelled'].p_alive.max())")
    assert gone == 0.0
    assert await value(s, "set(clv.stream)") == {"contractual"}  # no BG/NBD for a contractual business
    assert "Assumed: contractual = True" in text and "America/New_York" in text, text
    assert (await value(s, "assumed")).startswith("Assumed:")
    strata = await value(s, "holdout_by_status.set_index('stratum')[['predicted', 'actual']].to_dict('index')")
    assert strata["cancelled before the cut-off"] == {"predicted": 0, "actual": 0}, strata  # checked apart


async def test_a_contractual_business_without_states_is_refused(s: ClientSession) -> None:
    """PROFILE says contractual (or mixed) and no STATES: the script refuses rather than give subscribers BG/NBD
    values. Look-alike: the same orders with PROFILE saying non-contractual are not refused (see below)."""
    await ok(
        s,
        "run_python",
        code="import pandas as pd\nSOURCE = save_artifact(pd.DataFrame({'customer_id': [1, 1, 2], "
        "'order_date': ['2025-01-01', '2025-02-01', '2025-03-01'], 'margin': [5.0, 6.0, 7.0]}))",
    )
    for said in (True, "mixed"):
        error, text = await run(s, f"PROFILE = {{'contractual': {said!r}}}\nSTATES = None")
        assert error and "REFUSED" in text and "STATES" in text, text


@pytest.mark.slow  # pymc-marketing's import and four model fits
async def test_a_non_contractual_business_still_gets_bgnbd(s: ClientSession) -> None:
    """Look-alike of the contract trap: 600 buyers without contracts who leave silently (no status to read). With
    PROFILE contractual False they get BG/NBD + Gamma-Gamma, its hold-out check (printed, a finite ratio) and
    p_alive below 0.5 for many; no refusal, no warning about the profile. Without PROFILE the same run warns loudly
    that the contract fact is unknown and says what it assumed."""
    await ok(s, "run_python", code=BUYERS)
    error, text = await run(s, "PROFILE = {'contractual': False}\nSTATES = None\nDISCOUNT_RATE = 0.1")
    assert not error, text
    assert await value(s, "set(clv.stream)") == {"non-contractual"}
    assert 0.5 < await value(s, "check_ratio") < 2 and "check (no-contract buyers)" in text, text
    assert await value(s, "float((clv.p_alive < 0.5).mean())") > 0.2, text
    assert "Assumed: contractual = False (PROFILE) -> non-contractual" in text and "WARNING: PROFILE" not in text
    assert list(await value(s, "list(holdout_by_status.stream)")) == ["non-contractual"]
    error, text = await run(s, "PROFILE = None\nSTATES = None")
    assert not error and "WARNING: PROFILE does not say" in text and "Assumed: contractual = None" in text, text
