"""data-quality-audit, the faults of raw business exports (issue 61, second round), each beside a look-alike that must
not be flagged, on small hand-built frames through the real stdio server: a time-zone key given as prose, numbers
in SAP's format (decimal comma, trailing minus) with a few rows in another, a negative level beside negative deltas
and rebates, documents sent twice beside identical repeat orders, negative units with no return reason beside
returns, and a register clock not moved at the DST change beside a store with no DST."""

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
    ws = tmp_path_factory.mktemp("dq_more") / "ws"
    async with served(ws) as session:
        yield session


async def audit(session: ClientSession, setup: str, cross: bool = False) -> str:
    """profile.py as the model reads it (whole), then cross_checks.py in the same session when ``cross``."""
    code = await script(session, "data-quality-audit", "scripts/profile.py")
    reset = "PROFILE = None\nLAYOUT = None\nRELATED = None\nSOURCE = None\n"
    text = text_of(await ok(session, "run_python", code=reset + setup + "\n" + code, output_level="full"))
    if cross:
        more = await script(session, "data-quality-audit", "scripts/cross_checks.py")
        text += text_of(await ok(session, "run_python", code=more, output_level="full"))
    return text


async def found(session: ClientSession) -> str:
    return await value(session, "sorted(zip(findings.column, findings.check, findings.rows))")


PROSE_ZONE = """
import pandas as pd
DF = pd.DataFrame({"order_id": range(1, 11), "order_date": [f"2025-03-{d:02d} 10:00" for d in range(1, 11)],
                   "ship_date": [f"2025-03-{d:02d} 12:00" for d in range(2, 12)]})
DF.loc[3, "ship_date"] = "2025-03-03 09:00"  # shipped the day before it was ordered (4 March)
PROFILE = {"store_timezone": "Central time (Milwaukee); Arizona stores have no DST"}
"""


async def test_a_time_zone_given_as_prose_is_refused_loudly_not_a_traceback(s: ClientSession) -> None:
    """The zone is prose, no zoneinfo key: the audit warns and reads the local times as written (no crash); the one
    shipment before its order (3 March < 4 March) is still found. The look-alike: a real key is used and named."""
    text = await audit(s, PROSE_ZONE)
    assert "WARNING: store_timezone 'Central time (Milwaukee); Arizona stores have no DST' is no time-zone key" in text
    assert await found(s) == repr([("order_date / ship_date", "ship_date before order_date", 1)]), text
    await audit(s, PROSE_ZONE.replace("Central time (Milwaukee); Arizona stores have no DST", "America/Chicago"))
    assert await found(s) == repr([("order_date / ship_date", "ship_date before order_date", 1)])
    assert "local times without an offset are in America/Chicago" in await value(s, "assumed")


SAP_AMOUNTS = """
import pandas as pd
amounts = [f"{100 + 37 * i},{i % 100:02d}" for i in range(30)]  # 100,00 .. 1173,29: decimal comma, no grouping
amounts += ["1523,40", "2210,05", "56,73-", "1250,00-", "0,00", "0,00"]  # rebates (trailing minus), free samples
amounts += ["1.234,56", "2.005,10", "1.499,00"]  # three rows written with a dot thousands separator
DF = pd.DataFrame({"Belegnummer": [str(90000001 + i) for i in range(len(amounts))], "Nettobetrag": amounts})
"""


async def test_numbers_written_in_another_format_are_counted_not_rebates_or_zeros(s: ClientSession) -> None:
    """39 amounts in SAP's format: decimal comma, no thousands separator (1523,40), negatives with a trailing
    minus (56,73-) and two free samples at 0,00. By hand: exactly 3 rows carry a dot thousands separator
    (1.234,56) - read as 1.23456 or dropped. The rebates and the zeros are look-alikes: no finding."""
    text = await audit(s, SAP_AMOUNTS)
    assert await found(s) == repr([("Nettobetrag", "numbers written in another format", 3)]), text
    assert await value(s, "findings.examples.iloc[0]") == "'1.234,56, 2.005,10, 1.499,00'"


SEATS = """
import pandas as pd
delta = [5, -2, 3, -1, 4, -3, 2, 1, -2, 6, -1, 2]
after, level = [], 10
for d in delta:
    level += d
    after.append(level)
DF = pd.DataFrame({"event_id": [f"sc_{i}" for i in range(12)], "delta": delta, "seats_after": after,
                   "amount": [49.0 * d for d in delta]})  # a seat removed is credited: a negative amount
DF.loc[[7, 9], "seats_after"] = [-3, -8]  # a sync wrote negative seat counts
"""


async def test_a_negative_level_is_found_and_negative_deltas_and_credits_are_not(s: ClientSession) -> None:
    """seats_after is a level (a count of seats): 2 rows below 0 (set by hand) are faults. delta (-2, -1, ...)
    is a change and amount (-98.0, ...) a credit: both legitimately negative, not flagged."""
    text = await audit(s, SEATS)
    negative = "[(f.column, f.rows) for f in findings.itertuples() if f.check == 'negative values']"
    assert await value(s, negative) == "[('seats_after', 2)]", text
    assert await value(s, "sorted(set(findings.column))") == "['seats_after']", text  # (and its 2 outliers)


POS = """
import pandas as pd
rows = []
for t in range(1, 101):  # 100 transactions of 2 lines at register 1; units > 0
    for line in (1, 2):
        rows.append({"Store": "0402", "Register": 1, "Trans ID": f"T{t:04d}", "Line": line,
                     "SKU": f"SKU-{(t * line) % 9}", "Units": 1 + (t + line) % 3, "Return Reason": ""})
for t in (5, 6, 7):  # the register-1 file re-sent as register 2: the same three transactions, every line
    rows += [dict(r, Register=2) for r in rows if r["Trans ID"] == f"T{t:04d}" and r["Register"] == 1]
for t in (101, 102):  # look-alike: two identical orders (same SKU, units) under their own transaction ids
    rows.append({"Store": "0402", "Register": 1, "Trans ID": f"T{t:04d}", "Line": 1, "SKU": "SKU-1", "Units": 2,
                 "Return Reason": ""})
for t in range(103, 118):  # 15 returns: negative units; 12 with a reason, 3 without
    rows.append({"Store": "0402", "Register": 1, "Trans ID": f"T{t:04d}", "Line": 1, "SKU": "SKU-2", "Units": -1,
                 "Return Reason": "DEFECTIVE" if t < 115 else ""})
DF = pd.DataFrame(rows)
"""


async def test_documents_sent_twice_per_document_and_negative_units_without_a_reason(s: ClientSession) -> None:
    """By hand: 3 transactions (2 lines each) sent again under register 2 - 6 lines whose (Trans ID, Line) repeats,
    3 documents; 15 negative-unit lines, 12 with a return reason (returns), 3 without (the fault). Look-alikes: two
    identical orders under different transaction ids, and the 12 returns with a reason."""
    text = await audit(s, POS, cross=True)
    keep = "findings[findings.check.str.contains('twice|composite|negative')]"
    assert await value(s, f"sorted(zip({keep}.column, {keep}.check, {keep}.rows))") == repr(
        sorted(
            [
                ("Trans ID", "documents sent twice (a Trans ID with its Lines repeated)", 3),
                ("Trans ID, Line", "duplicate composite keys", 12),  # both copies of the 6 lines
                ("Units", "negative units with no Return Reason", 3),
            ]
        )
    ), text


DST = """
import pandas as pd
rows = []
for day in pd.date_range("2024-09-01", "2025-05-31", freq="D"):
    for store in ("0304", "0305", "0406"):  # 0406: Phoenix, no DST - its local times are right all year
        shift = 1 if store == "0304" and pd.Timestamp("2024-11-03") <= day <= pd.Timestamp("2025-03-08") else 0
        for k, hour in enumerate((10, 12, 14, 16)):
            at = day + pd.Timedelta(hours=hour + shift, minutes=7 * k)
            rows.append({"Store": store, "Trans ID": f"{store}{day:%y%m%d}{k}", "Line": 1,
                         "Trans Date Time": at.strftime("%m/%d/%Y %H:%M"), "Units": 1})
DF = pd.DataFrame(rows)
PROFILE = {"store_timezone": "America/Chicago"}
"""


async def test_a_register_clock_not_moved_at_the_dst_change_is_found_not_a_store_without_dst(
    s: ClientSession,
) -> None:
    """Store 0304's times are one hour late from the fall-back day (3 Nov 2024) to the day before spring forward
    (8 Mar 2025): by hand 126 days x 4 lines = 504 lines, the whole season between two DST changes of
    America/Chicago. Store 0406 (Phoenix) keeps its local hours all year and store 0305 is right: neither named."""
    text = await audit(s, DST, cross=True)
    dst = await value(s, "[(f.column, f.rows, f.check) for f in findings.itertuples() if 'DST' in f.check]")
    assert dst.startswith("[('Trans Date Time / Store', 504, 'local times shifted +0.7 h at Store 0304 from "), text
    assert "2024-11-03 to 2025-03-08" in dst, dst
    assert await value(s, "bool(findings.examples.str.contains('0406|0305').any())") == "False", text


GIFT_RETURNS = """
import pandas as pd
rows = []
for i in range(60):
    gift = i % 5 == 0  # 12 gift-receipt returns: no original transaction to link, by design
    rows.append({"return_id": f"R{i:03d}", "receipt_type": "GIFT RECEIPT" if gift else "RECEIPT",
                 "orig_trans_id": None if gift else f"T{i:04d}", "units": 1,
                 "reason": ["DAMAGED", "CHANGED MIND", "SIZE"][i % 3],
                 "rep": None if i in (7, 13, 22, 31, 44, 46, 53, 57, 58, 59, 3, 9) else "Ann"})
DF = pd.DataFrame(rows)
"""


async def test_a_field_blank_exactly_on_one_kind_of_row_is_the_layout_not_a_missing_value(s: ClientSession) -> None:
    """60 returns: orig_trans_id is blank on exactly the 12 GIFT RECEIPT rows (receipt_type never blank, GIFT
    RECEIPT never with an id) - a gift receipt has no original transaction: one low finding saying so, not a medium
    "missing values" (the look-alike). rep is blank on 12 rows spread over every kind (reasons, both receipt types)
    - a real gap: medium "missing values", 12 rows (the truth beside it)."""
    await audit(s, GIFT_RETURNS + "SOURCE = save_artifact(DF)")
    rows = await value(s, "sorted(zip(findings.severity, findings.column, findings.check, findings.rows))")
    assert (
        "('low', 'orig_trans_id', 'blank exactly when receipt_type is GIFT RECEIPT (by design? confirm)', 12)" in rows
    )
    assert "('medium', 'rep', 'missing values', 12)" in rows, rows
    assert "'orig_trans_id', 'missing values'" not in rows, rows
