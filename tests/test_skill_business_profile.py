"""Issue 61 item 1: the business-profile skill reads the facts that decide a method from a business's own exports,
through the real server (use_skill, then its script in run_python), each with a hand-built answer and a look-alike
that must not be read as the fact: a Shopify line export's order fields on the first line only (not missing values),
timestamps with two UTC offsets, contract states (a plain order status is none; mixed when a shop's orders are tied
to no subscription, not when the charges name theirs), the unit an experiment randomised (an account, not the pet
rows; a visitor when each row is one), a 4-5-4 fiscal year named by its start year from a plan's own period dates (a
calendar-month plan is one), and what it cannot know asked of the user."""

from __future__ import annotations

import ast
import datetime as dt
from collections.abc import AsyncIterator

import pytest
from mcp import ClientSession

from tests.conftest import text_of
from tests.skill_session import served

pytestmark = pytest.mark.anyio

SHOPIFY = """Name,Email,Created at,Currency,Total,Discount Amount,Lineitem name,Lineitem price
#1001,ann@example.com,2025-03-08 10:00:00 -0500,USD,52.00,5.00,Kibble 4lb,30.00
#1001,,,,,,Treats,12.00
#1001,,,,,,Chew toy,15.00
#1002,bo@example.com,2025-03-10 09:30:00 -0400,CAD,20.00,0.00,Treats,20.00
#1003,cy@example.com,2025-03-11 18:05:00 -0400,USD,41.00,0.00,Kibble 4lb,30.00
#1003,,,,,,Treats,11.00
"""
SUBSCRIPTIONS = """subscription_id,customer_id,status,created_at
s1,c1,ACTIVE,2024-01-02T10:00:00-05:00
s2,c2,PAUSED,2024-02-02T10:00:00-05:00
s3,c3,CANCELLED,2024-03-02T10:00:00-05:00
s4,c4,ACTIVE,2024-04-02T10:00:00-04:00
"""
CHARGES = """charge_id,subscription_id,customer_id,status,processed_at,line_item_sku,total_price
ch1,s1,c1,SUCCESS,2025-01-02T10:00:00-05:00,KIB-04,30.00
ch2,s2,c2,SUCCESS,2025-01-03T10:00:00-05:00,KIB-12,55.00
"""
PETS_BY_ACCOUNT = "pet_profile_id,account_id,variant,converted\n" + "".join(
    f"p{i},a{i // 2},{'treatment' if (i // 2) % 2 else 'control'},{i % 3 == 0}\n" for i in range(40)
)
VISITORS = "visitor_id,variant,converted\n" + "".join(
    f"v{i},{'treatment' if i % 2 else 'control'},{i % 5 == 0}\n" for i in range(40)
)
PLAIN_ORDERS = """order_id,status,order_date,discount,revenue
o1,completed,2025-01-02,0.10,90.00
o2,returned,2025-01-03,0.00,40.00
o3,completed,2025-01-04,0.25,75.00
"""


def plan_454(first: dt.date, year: int) -> str:
    rows, start = ["fiscal_period,period_start,period_end,planned_sales"], first
    for i, weeks in enumerate([4, 5, 4] * 4):
        end = start + dt.timedelta(weeks=weeks) - dt.timedelta(days=1)
        rows.append(f"FY{year} P{i + 1},{start},{end},{1000 + i}")
        start = end + dt.timedelta(days=1)
    return "\n".join(rows) + "\n"


def plan_months(year: int) -> str:
    rows = ["fiscal_period,period_start,period_end,planned_sales"]
    for m in range(1, 13):
        end = (dt.date(year + (m == 12), m % 12 + 1, 1)) - dt.timedelta(days=1)
        rows.append(f"FY{year} M{m},{dt.date(year, m, 1)},{end},{2000 + m}")
    return "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
async def s(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClientSession]:
    ws = tmp_path_factory.mktemp("profile") / "ws"
    files = {
        "shop.csv": SHOPIFY,
        "subscriptions.csv": SUBSCRIPTIONS,
        "charges.csv": CHARGES,
        "pets_ab.csv": PETS_BY_ACCOUNT,
        "visitors_ab.csv": VISITORS,
        "plain_orders.csv": PLAIN_ORDERS,
        "plan_454.csv": plan_454(dt.date(2024, 2, 4), 2024),
        "plan_months.csv": plan_months(2025),
    }
    async with served(ws, files) as session:
        yield session


async def profile_of(s: ClientSession, sources: dict[str, str], facts: dict[str, object] | None = None) -> dict:
    read = await s.call_tool(
        "use_skill", {"name": "business-profile", "path": "scripts/profile_business.py", "output_level": "full"}
    )
    code = text_of(read).split("\n", 2)[2]
    head = f"SOURCES = {sources!r}\n" + (f"FACTS = {facts!r}\n" if facts else "")
    tail = "\nprint('PROFILE:', repr(PROFILE))\nprint('QUESTIONS:', repr(questions))"
    ran = await s.call_tool("run_python", {"code": head + code + tail})
    said = text_of(ran)
    assert not ran.is_error, said
    line = next(x for x in said.splitlines() if x.startswith("PROFILE:"))
    profile = ast.literal_eval(line.split(":", 1)[1].strip())
    profile["_said"] = said
    line = next(x for x in said.splitlines() if x.startswith("QUESTIONS:"))
    profile["_questions"] = ast.literal_eval(line.split(":", 1)[1].strip())
    return profile


async def test_a_subscription_business_with_a_line_export_and_a_test_by_account(s: ClientSession) -> None:
    got = await profile_of(
        s,
        {
            "shop": "upload_shop",
            "subscriptions": "upload_subscriptions",
            "ab": "upload_pets_ab",
            "plan": "upload_plan_454",
        },
    )
    said = got["_said"]
    # subscriptions beside a web shop's orders tied to no subscription: one-off buyers too
    assert got["contractual"] == "mixed", said
    assert got["randomisation_unit"] == "account_id" and got["analysis_row_unit"] == "pet_profile_id"
    assert got["currencies"] == ["CAD", "USD"]
    assert got["utc_offsets"] == ["-0400", "-0500"]
    calendar = got["fiscal_calendar"]
    assert calendar["kind"] == "4-5-4" and calendar["first_day"] == "2024-02-04", calendar
    assert calendar["year_naming"] == "start_year" and calendar["53_week_years"] == [], calendar
    # the line layout: order fields on an order's first line only are the layout, not missing values
    shop = next(x for x in said.splitlines() if x.strip().startswith("shop "))
    assert "line (several rows per Name)" in shop and "Email" in shop and "Total" in shop, shop
    assert any("report in" in q for q in got["_questions"]), got["_questions"]  # two currencies: which one?


async def test_a_subscriptions_own_charges_are_no_one_off_stream(s: ClientSession) -> None:
    """Line items of charges that name their subscription are the contracts' billing: contractual, not mixed."""
    got = await profile_of(s, {"subscriptions": "upload_subscriptions", "charges": "upload_charges"})
    assert got["contractual"] is True, got["_said"]


async def test_look_alikes_are_not_read_as_the_facts(s: ClientSession) -> None:
    got = await profile_of(
        s, {"orders": "upload_plain_orders", "ab": "upload_visitors_ab", "plan": "upload_plan_months"}
    )
    assert got["contractual"] is False  # completed / returned are no contract states
    assert got["randomisation_unit"] == "visitor_id"  # one row per visitor: the row is the unit
    assert got["fiscal_calendar"]["kind"] == "calendar-month"
    orders = next(x for x in got["_said"].splitlines() if x.strip().startswith("orders "))
    assert "one row per record" in orders and "discount" in orders.split("one row per record")[1], orders


async def test_what_the_user_says_wins_and_a_contradiction_is_printed(s: ClientSession) -> None:
    got = await profile_of(
        s,
        {"subscriptions": "upload_subscriptions", "plan": "upload_plan_454"},
        {"contractual": False, "reporting_currency": "USD", "fiscal_calendar": {"year_naming": "end_year"}},
    )
    assert got["contractual"] is False and got["reporting_currency"] == "USD"
    assert got["fiscal_calendar"]["year_naming"] == "end_year" and got["fiscal_calendar"]["kind"] == "4-5-4"
    assert "CONTRADICTION: contractual" in got["_said"]
