"""returns-and-cancellations' method, class by class, on small hand-built frames through the real stdio server:
indirect standardisation on tenure (box number) and on product before naming a plan, store or channel; a bundle
partner told apart from the item that causes the returns; small samples and units credited in lots not flagged;
returned revenue converted with the profile's FX. Each test has a hand-computed answer and a look-alike that must
not be flagged."""

from __future__ import annotations

import math
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

SKILL = "returns-and-cancellations"
RESET = "PROFILE = ITEM = STRATA = MIN_EXPOSURE = MIN_RATIO = ALPHA = FX = MIN_ORDERS = None\nimport pandas as pd\n"


@pytest.fixture(scope="module")
async def s(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClientSession]:
    async with served(tmp_path_factory.mktemp("returns") / "ws") as session:
        yield session


def plain(expression: str) -> str:
    """A list of numpy scalars as plain Python values (their repr)."""
    return f"[v.item() if hasattr(v, 'item') else v for v in {expression}]"


async def run(session: ClientSession, path: str, setup: str) -> str:
    """The script as the model reads it (use_skill), run after ``setup`` (which sets SOURCE and the inputs)."""
    code = await script(session, SKILL, path)
    result = await session.call_tool("run_python", {"code": RESET + setup + "\n" + code, "output_level": "full"})
    return text_of(result)


# plan x box: shipped (paid charges) and returned (refunded). Every plan refunds 10 % of first boxes and 1 % of later
# ones, except REAL (30 % and 3 %); MIX has half its charges on first boxes.
BOXES = """
rows = [("A", "1", 200, 20), ("A", "2+", 2000, 20), ("B", "1", 200, 20), ("B", "2+", 2000, 20),
        ("MIX", "1", 1000, 100), ("MIX", "2+", 1000, 10), ("REAL", "1", 100, 30), ("REAL", "2+", 2000, 60)]
SOURCE = save_artifact(pd.DataFrame(rows, columns=["plan", "box", "shipped", "returned"]))
"""


async def test_a_plan_is_standardised_on_box_number_and_its_first_box_mix_is_not_flagged(s: ClientSession) -> None:
    """By hand: REAL's expected refunds at the other plans' rates by box (first pass, A+B+MIX: box 1 140/1400 = 10 %,
    later 50/5000 = 1 %) = 100 x 0.10 + 2000 x 0.01 = 30; it has 90 -> ratio 3.0, flagged. The look-alike MIX refunds
    110/2000 = 5.5 % raw, three times A's 40/2200 = 1.8 %, only because half its charges are first boxes: against A+B
    (REAL, flagged, left out of the reference) 1000 x 0.10 + 1000 x 0.01 = 110 expected, 110 observed -> ratio 1.00.
    Without a box column a contractual business is refused."""
    text = await run(s, "scripts/return_outliers.py", f"PROFILE = {{'contractual': True}}\nITEM = 'plan'\n{BOXES}")
    assert await value(s, "list(flags.plan)") == "['REAL']", text
    ratios = await value(s, "rates.set_index('plan').standardized_ratio.to_dict()")
    assert ratios == "{'A': 1.0, 'B': 1.0, 'MIX': 1.0, 'REAL': 3.0}", text
    assert float(await value(s, "float(rates.set_index('plan').loc['MIX', 'rate_pct'])")) == 5.5
    assert await value(s, "rates.set_index('plan').loc['MIX', 'reference']") == "'the others except REAL'"
    later = await value(s, "cells[cells.box == '2+'].set_index('plan').rate_pct.to_dict()")
    assert later == "{'A': 1.0, 'B': 1.0, 'MIX': 1.0, 'REAL': 3.0}", text  # the refund rate after the first box
    assert "Assumed: returns counted in orders; contractual = True (PROFILE), tenure driver box" in text, text
    assert await value(s, "assumed") == repr(next(x for x in text.splitlines() if x.startswith("Assumed:")))
    refused = await run(
        s,
        "scripts/return_outliers.py",
        f"PROFILE = {{'contractual': True}}\nITEM = 'plan'\n{BOXES}\n"
        "SOURCE = save_artifact(load_artifact(SOURCE).groupby('plan', as_index=False)[['shipped', 'returned']].sum())",
    )
    assert "REFUSED: PROFILE says the business is contractual" in refused, refused


# store x department, units sold and returned (line-level returns): Apparel returns 10 %, Home 2 % everywhere, except
# S4 (twice both); S3 sells mostly apparel. Channels: the web sells mostly apparel, both channels at the same rates.
STORES = """
rows = [("S1", "Apparel", 1000, 100), ("S1", "Home", 1000, 20), ("S2", "Apparel", 1000, 100), ("S2", "Home", 1000, 20),
        ("S3", "Apparel", 3000, 300), ("S3", "Home", 200, 4), ("S4", "Apparel", 1000, 200), ("S4", "Home", 1000, 40)]
SOURCE = save_artifact(pd.DataFrame(rows, columns=["store", "department", "units_sold", "units_returned"]))
"""
CHANNELS = """
rows = [("ecom", "Apparel", 3000, 300), ("ecom", "Home", 500, 10), ("store", "Apparel", 1000, 100),
        ("store", "Home", 3000, 60)]
SOURCE = save_artifact(pd.DataFrame(rows, columns=["channel", "department", "units_sold", "units_returned"]))
"""


async def test_a_store_with_excess_within_department_is_flagged_and_a_channels_mix_is_not(s: ClientSession) -> None:
    """Units: S4's expected returns at S1-S3's department rates (Apparel 500/5000 = 10 %, Home 44/2200 = 2 %) =
    1000 x 0.10 + 1000 x 0.02 = 120 units; it returned 240 -> ratio 2.0, flagged. The look-alike S3 returns 9.5 %
    (304/3200) against S1's 6 % - its apparel mix: against S1+S2 (S4 left out) 300 + 4 = 304 expected -> 1.0. The web
    returns 8.86 % (310/3500) against the stores' 4 % (160/4000) raw; at the stores' department rates it expects
    3000 x 0.10 + 500 x 0.02 = 310 -> ratio 1.0, not flagged. An order count where the profile says returns are
    line-level is warned about."""
    profile = "PROFILE = {'contractual': False, 'returns_grain': 'line'}\n"
    text = await run(s, "scripts/return_outliers.py", f"{profile}ITEM = 'store'\n{STORES}")
    assert await value(s, "list(flags.store)") == "['S4']", text
    ratios = await value(s, "rates.set_index('store').standardized_ratio.to_dict()")
    assert ratios == "{'S1': 1.0, 'S2': 1.0, 'S3': 1.0, 'S4': 2.0}", text
    assert float(await value(s, "float(rates.set_index('store').loc['S3', 'rate_pct'])")) == 9.5
    assert "returns counted in units (units returned / units sold" in text, text
    assert "within the same departments (indirect standardization" in text, text
    text = await run(s, "scripts/return_outliers.py", f"{profile}ITEM = 'channel'\n{CHANNELS}")
    assert await value(s, "len(flags)") == "0", text
    assert await value(s, "rates.set_index('channel').standardized_ratio.to_dict()") == "{'ecom': 1.0, 'store': 1.0}"
    assert await value(s, "rates.set_index('channel').rate_pct.to_dict()") == "{'ecom': 8.86, 'store': 4.0}"
    text = await run(
        s,
        "scripts/return_outliers.py",
        "PROFILE = {'contractual': False, 'returns_grain': 'line'}\nSOURCE = save_artifact(pd.DataFrame("
        "{'item': ['a', 'b'], 'orders': [100, 100], 'completed': [90, 95], 'returned': [10, 5], 'cancelled': [0, 0]}))",
    )
    assert "WARNING: PROFILE says returns are line-level" in text, text


# one row per transaction line, units 1: C (the defective comforter) and S (its shams) in Bedding with O (other
# bedding). 300 transactions hold C and S: C returned in 90, S returned with it in 81; 100 hold C alone (30
# returned), 100 hold S alone (5 returned), 2,000 hold O alone (100 returned).
BUNDLE = """
rows, n = [], 0
def add(items, count, returned):
    global n
    for i in range(count):
        n += 1
        for item in items:
            rows.append((f"T{n}", item, "Bedding", 1, int(returned(item, i))))
add(["C", "S"], 300, lambda item, i: i < 90 if item == "C" else i < 81)
add(["C"], 100, lambda item, i: i < 30)
add(["S"], 100, lambda item, i: i < 5)
add(["O"], 2000, lambda item, i: i < 100)
LINES = pd.DataFrame(rows, columns=["order_id", "item", "product", "units", "units_returned"])
SOURCE = save_artifact(LINES)
"""


async def test_a_bundle_partner_is_not_named_its_rate_without_the_partner_is_reported(s: ClientSession) -> None:
    """Item level both come out high: C 120/400 = 30 %, S 86/400 = 21.5 % (the others in Bedding: 9.2 %) - step 3
    flags both. Per transaction: C's partner is S (81 of its 120 returns came back with S: 67.5 %); without S it
    returns 30/100 = 30 % against the other items' 186/2400 = 7.75 % (ratio 3.87, z = 7.76) - named. S's partner is
    C (81 of 86 = 94.2 %); without C it returns 5/100 = 5.0 % against 220/2400 = 9.17 % - the look-alike, not named."""
    await ok(s, "run_python", code=RESET + BUNDLE)
    text = await run(
        s,
        "scripts/return_outliers.py",
        "PROFILE = {'contractual': False}\nSOURCE = save_artifact(LINES.rename(columns={'units': 'units_sold'}))",
    )
    assert await value(s, "sorted(flags.item)") == "['C', 'S']", text  # item level: the naive view flags both
    text = await run(
        s, "scripts/order_attribution.py", "PROFILE = {'contractual': False}\nSOURCE = save_artifact(LINES)"
    )
    assert await value(s, "list(named['item'])") == "['C']", text
    table = "attribution.set_index('item')"
    assert await value(s, plain(f"{table}.loc['S', ['partner', 'co_return_pct', 'rate_without_partner_pct']]")) == (
        "['C', 94.2, 5.0]"
    ), text
    assert await value(s, plain(f"{table}.loc['C', ['partner', 'rate_without_partner_pct', 'rest_pct', 'ratio']]")) == (
        "['S', 30.0, 7.75, 3.87]"
    ), text
    assert "S: comes back with C (94 % of its returns); without it returns 5.0 % - a bundle partner" in text, text
    assert "Assumed: returns are line-level" in text, text


# SKU x product group: units sold, units credited as defective (reason Z01) and the credit memos; 18 SKUs credit
# 10 units in 2 memos per 2,000 sold (0.5 %); DEF 110 units in 22 memos per 1,000 (11 %), its revenue in EUR and GBP;
# TINY 4 units in 2 memos of 40 sold (10 %); MICRO 2 units in 1 memo of 20.
CREDITS = """
rows = [(f"K{i:02d}", "Tools", 2000, 10, 2, 50.0, "EUR") for i in range(18)]
rows += [("DEF", "Tools", 600, 66, 13, 1000.0, "EUR"), ("DEF", "Tools", 400, 44, 9, 500.0, "GBP"),
         ("TINY", "Tools", 40, 4, 2, 40.0, "EUR"), ("MICRO", "Tools", 20, 2, 1, 20.0, "EUR")]
SOURCE = save_artifact(pd.DataFrame(rows, columns=["sku", "product_group", "units_sold", "units_returned", "returns",
                                                   "returned_revenue", "currency"]))
"""


async def test_units_credited_in_lots_and_small_samples_are_not_flagged(s: ClientSession) -> None:
    """DEF: 110 units against 1,000 x 186/36,060 (the others' units: 180 + 4 + 2 of 36,000 + 40 + 20) = 5.158
    expected (ratio 21.33); the test counts returns (its units per memo, 110/22 = 5): 22 against 1.03 - flagged.
    The look-alike TINY returns 10 % of 40 units: 4 against 40 x 182/36,020 = 0.2021 (ratio 19.79, DEF left out of
    its reference); in memos (2 units each) 2 against mu = 0.1011, P(Poisson(mu) >= 2) = 1 - e^-mu (1 + mu) =
    0.00477, x 20 tested = 0.0955 > 0.01 - not flagged (counted in units, 4 against 0.2, it would be: 5.5e-5 x 20).
    MICRO (20 units) is under the minimum of 30, not tested. DEF's credited revenue: 1,000 EUR + 500 GBP x 1.2 =
    1,600 EUR; without a GBP rate it is not totalled."""
    profile = "PROFILE = {'contractual': False, 'returns_grain': 'line', 'currencies': ['EUR', 'GBP'], "
    text = await run(
        s,
        "scripts/return_outliers.py",
        f"{profile}'reporting_currency': 'EUR', 'fx': {{'GBP': 1.2}}}}\nITEM = 'sku'\n{CREDITS}",
    )
    assert await value(s, "list(flags.sku)") == "['DEF']", text
    assert await value(s, plain("flags.loc[0, ['standardized_ratio', 'returned_revenue']]")) == "[21.33, 1600.0]"
    tiny = await value(s, plain("rates.set_index('sku').loc['TINY', ['standardized_ratio', 'tested', 'flagged']]"))
    assert tiny == "[19.79, True, False]", text
    assert float(await value(s, "float(rates.set_index('sku').loc['TINY', 'p_corrected'])")) == pytest.approx(
        20 * (1 - math.exp(-40 * 182 / 36020 / 2) * (1 + 40 * 182 / 36020 / 2)), rel=1e-6
    )
    assert await value(s, "bool(rates.set_index('sku').loc['MICRO', 'tested'])") == "False"
    assert "too small to test (< 30 units), not flagged: MICRO" in text, text
    assert "revenue converted to EUR at PROFILE fx" in text and "the test counts returns" in text, text
    text = await run(
        s, "scripts/return_outliers.py", f"{profile}'reporting_currency': 'EUR'}}\nITEM = 'sku'\n{CREDITS}"
    )
    assert "WARNING: returned revenue is in EUR, GBP" in text, text
    assert await value(s, "'returned_revenue' in flags.columns") == "False"
