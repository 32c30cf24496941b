"""data-quality-audit's method, class by class, on small hand-built frames through the real stdio server: UTC-aware
parsing of mixed offsets, a multi-row (Shopify) layout, a column's unit before range rules, cross-column and
cross-table date rules, ranking by harm, and the business facts the script assumed. Each test plants a known count
of one fault beside a look-alike that must not be flagged."""

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


@pytest.fixture(scope="module")
async def s(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClientSession]:
    ws = tmp_path_factory.mktemp("dq") / "ws"
    async with served(ws) as session:
        yield session


async def audit(session: ClientSession, setup: str) -> str:
    """The script as the model reads it (use_skill), run after ``setup`` (which sets DF and the inputs)."""
    code = await script(session, "data-quality-audit", "scripts/profile.py")  # the whole script fits the window
    reset = "PROFILE = None\nLAYOUT = None\nRELATED = None\nSOURCE = None\n"
    return text_of(await ok(session, "run_python", code=reset + setup + "\n" + code, output_level="full"))


async def found(session: ClientSession) -> str:
    return await value(session, "sorted(zip(findings.column, findings.check, findings.rows))")


CHARGES = """
import pandas as pd
rows = []
for i in range(20):  # processed in New York time: -05:00 in winter, -04:00 in summer (one store, not a fault)
    day = pd.Timestamp("2025-01-06") + pd.Timedelta(days=17 * i)
    offset = "-04:00" if 3 <= day.month <= 10 else "-05:00"
    rows.append({"charge_id": 900 + i, "processed_at": f"{day.date()}T10:00:00{offset}", "refunded_at": "",
                 "created": int(pd.Timestamp("2023-01-01", tz="UTC").timestamp()) + 86400 * i})
rows[3]["refunded_at"] = "2025-02-28T09:00:00-05:00"  # a later day: fine
# look-alike: earlier on the wall clock (09:45 < 10:00) but later in UTC (14:45Z > 14:00Z)
rows[5]["processed_at"], rows[5]["refunded_at"] = "2025-03-09T10:00:00-04:00", "2025-03-09T09:45:00-05:00"
# faults: refunded an hour before the sale; and 13:30Z before 14:00Z, though 13:30 looks after 09:00
rows[8]["processed_at"], rows[8]["refunded_at"] = "2025-06-10T12:00:00-04:00", "2025-06-10T11:00:00-04:00"
rows[12]["processed_at"], rows[12]["refunded_at"] = "2025-11-03T09:00:00-05:00", "2025-11-03T13:30:00+00:00"
DF = pd.DataFrame(rows)
"""


async def test_mixed_utc_offsets_parse_and_a_refund_before_its_sale_is_found_in_utc(s: ClientSession) -> None:
    """Timestamps carry -05:00, -04:00 and +00:00 (the old script crashed: "Mixed timezones detected"). Compared in
    UTC, 2 refunds precede their sale (rows 8 and 12, by hand: 15:00Z < 16:00Z and 13:30Z < 14:00Z); row 5's refund
    looks earlier on the wall clock but is 45 minutes later in UTC - not flagged. `created` is Unix seconds: dates,
    not numbers with outliers; blank refunded_at is a refund that did not happen, not a missing value."""
    text = await audit(s, CHARGES)
    assert await found(s) == repr([("processed_at / refunded_at", "refunded_at before processed_at", 2)]), text
    assert await value(s, "sorted(findings.examples)") == "['8, 12']"
    assert "Assumed:" in text and "compared in UTC" in await value(s, "assumed")
    assert "created: Unix seconds (UTC)" in await value(s, "assumed")


SHOPIFY = """
import pandas as pd
lines = [  # (order, lines): order-level fields on each order's first line only, as Shopify exports them
    ("#1001", 3), ("#1002", 1), ("#1003", 2), ("#1004", 2), ("#1005", 1), ("#1006", 3), ("#1007", 2)]
rows = []
for n, (name, count) in enumerate(lines):
    for j in range(count):
        first = j == 0
        rows.append({
            "Name": name,
            "Email": f"c{n}@example.com" if first else "",
            "Total": f"{20 + 5 * n:.2f}" if first else "",
            "Created at": (f"2025-0{n + 1}-1{n} 10:00:00 " + ("-0500" if n < 2 else "-0400")) if first else "",
            "Lineitem name": ["Kibble", "Treats", "Chews"][j],
            "Lineitem quantity": 1 + j,
        })
rows[6]["Email"] = ""  # order #1004's first line has no email: truly missing
DF = pd.DataFrame(rows)
"""


async def test_shopify_blank_later_lines_are_the_layout_and_a_missing_first_line_email_is_found(
    s: ClientSession,
) -> None:
    """7 orders on 14 lines; Email, Total and Created at are filled on each order's first line only, so 7 later lines
    are blank by layout - not missing values. One first line (#1004) has no email: 1 missing value, counted once
    per order. Created at mixes -0500 and -0400 (no crash, no format finding)."""
    text = await audit(s, SHOPIFY)
    assert await found(s) == repr([("Email", "missing values (on Name first lines)", 1)]), text
    assumed = await value(s, "assumed")
    assert "several per Name" in assumed and "detected in this file" in assumed
    assert "WARNING: no PROFILE" in text  # the layout was read from this file alone, and it says so
    profile = {
        "files": [{"file": "orders", "grain": "line (several rows per Name)", "first_line_only": "Email, Total"}]
    }
    text = await audit(s, f"PROFILE = {profile!r}\n" + SHOPIFY)
    assert "business-profile" in await value(s, "assumed") and "WARNING: no PROFILE" not in text
    # Created at is not in that layout: its 7 blank later lines are counted now - the profile's word is taken
    assert await found(s) == repr(
        [("Created at", "missing values", 7), ("Email", "missing values (on Name first lines)", 1)]
    ), text
    wrong = {"files": [{"grain": "line (several rows per Name)", "first_line_only": "Email, Lineitem name"}]}
    text = await audit(s, f"PROFILE = {wrong!r}\n" + SHOPIFY)
    assert "WARNING: Lineitem name is said to be on first lines only" in text  # contradicted by the data


DISCOUNTS = """
import pandas as pd
DF = pd.DataFrame({
    "order_id": range(1, 13),
    "Discount Amount": [0, 12.5, 5.0, 0, 30.0, 7.25, 0, 0, 15.0, 2.5, 0, 9.99],  # money: 12.50 is no 1250 %
    "discount_rate": [0, 0.1, 0.05, 0, 0.2, 1.5, 0, 0.1, 0.15, 0, 0.1, 0.05],  # a rate: 1.5 is 150 %
    "discount": [0, 0.1, 0.1, 0, 0.2, 0.05, 0, 0.1, 0.1, 0, 0.1, 0.1],  # unnamed unit, values 0-1: a rate, fine
})
"""


async def test_a_discount_amount_is_money_and_a_rate_of_1_5_is_out_of_range(s: ClientSession) -> None:
    """The unit is inferred before the range rule: "Discount Amount" (name says amount; 7 values above 1) is money,
    not "outside 0-1"; discount_rate holds one 1.5 (row 6, by hand): 1 row outside 0-1; "discount" with values in
    0-1 is a rate within range."""
    text = await audit(s, DISCOUNTS)
    ranged = await value(s, "sorted(zip(findings.column[findings.check == 'discount outside 0-1'], findings.rows))")
    assert ranged == "[('discount_rate', 1)]", text
    assumed = await value(s, "assumed")
    assert "Discount Amount is a amount" in assumed and "discount_rate is a rate" in assumed


ORDERS_AND_CUSTOMERS = """
import pandas as pd
CUSTOMERS = pd.DataFrame({
    "email": [f"c{i}@example.com" for i in range(6)],
    "created_at": [f"2025-03-0{i + 1}T10:00:00-05:00" for i in range(6)],  # signed up 1-6 March, 10:00 New York
})
orders = []
for i in range(6):
    orders += [(f"c{i}@example.com", f"2025-03-{10 + i}T12:00:00-04:00"), (f"c{i}@example.com", "2025-04-02T08:00:00Z")]
orders[0] = ("c0@example.com", "2025-03-01T10:05:00-05:00")  # look-alike: 5 minutes after signup, the same day
orders[2] = ("c1@example.com", "2025-03-02T15:30:00+00:00")  # look-alike: 15:30Z is 10:30 New York, after 10:00
orders[4] = ("c2@example.com", "2025-02-27T09:00:00-05:00")  # fault: three days before c2 signed up
orders[6] = ("c3@example.com", "2025-03-04T14:00:00+00:00")  # fault: 14:00Z is before 10:00 -05:00 (15:00Z)
DF = pd.DataFrame({"order_id": range(1, 13), "email": [e for e, _ in orders], "created_at": [t for _, t in orders]})
RELATED = {"customers": CUSTOMERS}
"""


async def test_orders_before_the_customers_signup_across_two_tables(s: ClientSession) -> None:
    """Orders joined to customers on email: 2 orders precede their customer's signup (by hand: 27 Feb < 3 Mar;
    14:00Z < 15:00Z), while an order 5 minutes after signup and one at 15:30Z (10:30 New York, after 10:00) are
    fine. Without RELATED the same table has nothing to compare with: no finding."""
    text = await audit(s, ORDERS_AND_CUSTOMERS)
    check = "created_at before customers.created_at"
    assert await found(s) == repr([("created_at / customers.created_at", check, 2)]), text
    assert await value(s, "findings.examples.iloc[0]") == "'c2@example.com, c3@example.com'"
    assert "customers joined on email = email" in await value(s, "assumed")
    await audit(s, ORDERS_AND_CUSTOMERS + "RELATED = None")
    assert await value(s, "len(findings)") == "0"


RANKED = """
import pandas as pd
n = 40
DF = pd.DataFrame({
    "order_id": range(1, n + 1),
    "order_date": [str((pd.Timestamp("2025-01-01") + pd.Timedelta(days=i)).date()) for i in range(n)],
    "ship_date": [str((pd.Timestamp("2025-01-03") + pd.Timedelta(days=i)).date()) for i in range(n)],
    "region": ["North"] * 30 + ["north"] * 6 + ["South"] * 4,
    "note_taker": ["Ann"] * 32 + [""] * 8,
})
DF.loc[[4, 17], "ship_date"] = ["2024-12-30", "2025-01-10"]  # shipped before ordered (5 Jan, 18 Jan)
DF.loc[9, "ship_date"] = DF.loc[9, "order_date"]  # look-alike: shipped the day it was ordered
"""


async def test_findings_are_ranked_by_harm_real_faults_first(s: ClientSession) -> None:
    """2 impossible dates (ship before order: harm 2 x 5 = 10) rank above 8 blank note takers (8 x 1) and 6
    misspelled regions (6 x 0.5), though those touch more rows; a same-day shipment is no fault."""
    text = await audit(s, RANKED)
    ranked = await value(s, "list(zip(findings.check, findings.rows, findings.harm))")
    expected = [
        ("ship_date before order_date", 2, 10.0),
        ("missing values", 8, 8.0),
        ("same category spelled differently", 6, 3.0),
    ]
    assert ranked == repr(expected), text


async def test_store_timezone_from_the_profile_reads_local_times(s: ClientSession) -> None:
    """Local times without an offset are read in PROFILE's store_timezone: an order at 23:30 New York on 1 March is
    04:30Z on 2 March, after a 03:00Z signup on 2 March (not flagged); at 21:00 New York (02:00Z) it is before."""
    setup = """
import pandas as pd
RELATED = {"customers": pd.DataFrame({"customer_id": [1, 2], "signup_date": ["2025-03-02T03:00:00Z"] * 2})}
DF = pd.DataFrame({"customer_id": [1, 2, 1, 2], "order_date": ["2025-03-01 23:30", "2025-03-01 21:00",
                                                              "2025-03-05 10:00", "2025-03-06 10:00"]})
PROFILE = {"store_timezone": "America/New_York"}
"""
    text = await audit(s, setup)
    assert await found(s) == repr(
        [("order_date / customers.signup_date", "order_date before customers.signup_date", 1)]
    ), text
    assert "local times without an offset are in America/New_York" in await value(s, "assumed")
