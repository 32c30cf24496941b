"""ab-test-readout's method, class by class, on small hand-built frames through the real stdio server: the test read
at the unit that was randomised (rows aggregated to the unit, cluster-robust variance, the design effect), the split
checked in those units and reported with its p-value as a finding, and the unit taken from the business profile -
refused when unknown and an id groups rows. Each test has a hand-computed answer and a look-alike that must not be
flagged."""

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

PETS = {"randomisation_unit": "account_id", "analysis_row_unit": "pet_profile_id"}

# accounts(variant, n_accounts, n_converted, pets): every pet of an account shares the account's outcome (ICC = 1)
BUILD = """
import pandas as pd
def accounts(variant, n, converted, pets=2, start=0):
    rows = []
    for i in range(n):
        for p in range(pets if isinstance(pets, int) else pets(i)):
            rows.append({"variant": variant, "account_id": f"{variant}-{start + i}",
                         "pet_profile_id": f"{variant}-{i}-{p}", "converted": int(i < converted)})
    return rows
"""


@pytest.fixture(scope="module")
async def s(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClientSession]:
    ws = tmp_path_factory.mktemp("ab") / "ws"
    (ws / "uploads").mkdir(parents=True)
    lines = ["test_name,account_id,pet_profile_id,variant,assigned_at,converted"]
    for test, offset in (("onboarding_v2", "Z"), ("checkout_v1", "-05:00")):
        for arm, converted in (("control", 30), ("new_flow", 30)):
            for i in range(100):  # 100 accounts an arm, 2 pets each; another test in the same file
                for p in range(2):
                    lines.append(
                        f"{test},{arm[0]}{i},{arm[0]}{i}-{p},{arm},2025-04-0{1 + i % 9}T12:0{p}:00{offset},"
                        f"{'true' if i < converted else 'false'}"
                    )
    (ws / "uploads" / "ab_assignments.csv").write_text("\n".join(lines) + "\n")
    async with served(ws) as session:
        await ok(session, "run_python", code=BUILD)
        yield session


async def readout(session: ClientSession, setup: str) -> str:
    """The script as the model reads it (use_skill), run after ``setup`` (which sets SOURCE and the inputs)."""
    code = await script(session, "ab-test-readout", "scripts/ab_readout.py")
    reset = "PROFILE = UNIT = METRIC = REVENUE = EXPERIMENT = EXPECTED_SPLIT = None\nCONTROL = 'control'\n"
    result = await session.call_tool("run_python", {"code": reset + setup + "\n" + code, "output_level": "full"})
    return text_of(result)


async def test_a_null_significant_per_pet_is_not_significant_per_account(s: ClientSession) -> None:
    """200 accounts an arm, 2 pets each sharing the outcome; 40 vs 56 accounts convert (20 % vs 28 %). By hand, per
    pet (the look-alike, 400 vs 400 rows): pooled 0.24, se = sqrt(0.24 x 0.76 x 2/400) = 0.0302, z = 2.649,
    p = 0.0081 - "significant". Per account (the unit randomised): var = 0.2 x 0.8/199 + 0.28 x 0.72/199, se = 0.0426,
    z = 1.877, p = 0.0606 - not significant. Design effect = 2.01 (2 pets, ICC 1: 1 + (2 - 1) x 1 = 2, times
    k/(k - 1)); 800 rows are worth 398."""
    text = await readout(
        s,
        f"PROFILE = {PETS!r}\n"
        "SOURCE = save_artifact(pd.DataFrame(accounts('control', 200, 40) + accounts('treatment', 200, 56)))",
    )
    assert "Assumed: randomisation unit = account_id (PROFILE), 2.00 rows per unit" in text, text
    assert await value(s, "significant") == "False", text
    assert float(await value(s, "float(comparisons.p.iloc[0])")) == pytest.approx(0.06055, abs=1e-4)
    assert float(await value(s, "p_naive")) == pytest.approx(0.008071, abs=1e-5)
    assert float(await value(s, "design_effect")) == pytest.approx(2.01, abs=0.005)
    assert await value(s, "effective_n") == "398"
    assert "Design effect 2.01" in text and "ICC = 1.00" in text, text
    assert "FINDING: treatment: significant only if rows were independent (per-row p = 0.00807)" in text, text
    assert "split as planned (p = 1) in account_id units" in text, text
    assert await value(s, "assumed") == repr(next(x for x in text.splitlines() if x.startswith("Assumed:")))


async def test_a_real_effect_stays_significant_per_account_and_a_null_arm_does_not(s: ClientSession) -> None:
    """1,000 accounts an arm, 2 pets each. B converts 280 accounts against the control's 200 (+8 points): by hand
    var = (0.2 x 0.8 + 0.28 x 0.72)/999, se = 0.0190, z = 4.205, p = 2.6e-5 (Holm over 2: 5.2e-5) - significant at
    the account. The look-alike C converts 204 (+0.4 points): se = sqrt((0.16 + 0.204 x 0.796)/999) = 0.0180,
    z = 0.223, p = 0.824 - not significant. The unit is given as UNIT (no profile)."""
    text = await readout(
        s,
        "UNIT = 'account_id'\nSOURCE = save_artifact(pd.DataFrame(accounts('control', 1000, 200) + "
        "accounts('B', 1000, 280, start=5000) + accounts('C', 1000, 204, start=9000)))",
    )
    assert "randomisation unit = account_id (user (UNIT))" in text, text
    assert await value(s, "list(comparisons.significant)") == "[True, False]", text
    p_b, p_c = (float(v) for v in (await value(s, "tuple(float(p) for p in comparisons.p)")).strip("()").split(","))
    assert p_b == pytest.approx(2.6117e-5, rel=1e-3) and p_c == pytest.approx(0.8238, abs=1e-3)
    assert float(await value(s, "float(comparisons.p_adjusted.iloc[0])")) == pytest.approx(2 * 2.6117e-5, rel=1e-3)
    low, high = (float(v) for v in (await value(s, "diff_ci")).strip("()").split(","))
    assert low == pytest.approx(8 - 1.96 * 1.9025, abs=0.01) and high == pytest.approx(8 + 1.96 * 1.9025, abs=0.01)
    assert "FINDING" not in text, text


async def test_a_sample_ratio_mismatch_in_accounts_is_reported_with_its_p_value(s: ClientSession) -> None:
    """1,000 control vs 870 treatment accounts planned 50/50: chi-square = 2 x 65^2 / 935 = 9.04, p = 0.0026 -
    suspicious, a finding, and the large lift (20 % vs 35 %) is not called significant. 1,000 vs 850: chi-square =
    2 x 75^2 / 925 = 12.16, p = 0.00049 - a sample ratio mismatch."""
    for treated, verdict in (
        (870, "SPLIT SUSPICIOUS (p = 0.0026 < 0.01)"),
        (850, "SAMPLE RATIO MISMATCH (p = 0.00049 < 0.001)"),
    ):
        text = await readout(
            s,
            f"PROFILE = {PETS!r}\nSOURCE = save_artifact(pd.DataFrame(accounts('control', 1000, 200, pets=lambda i: "
            f"1 + i % 3) + accounts('treatment', {treated}, {int(treated * 0.35)}, pets=lambda i: 1 + i % 3)))",
        )
        assert f"{verdict} in account_id units" in text, text
        assert "FINDING: sample ratio mismatch in account_id units" in text, text
        assert await value(s, "(srm_finding, significant)") == "(True, False)", text
        assert "NOT TRUSTED" in text, text
    assert float(await value(s, "srm_p")) == pytest.approx(0.000488, abs=1e-5)


async def test_rows_imbalanced_in_balanced_accounts_are_no_mismatch(s: ClientSession) -> None:
    """The look-alike: 500 accounts an arm (chi-square 0, p = 1), but 880 control pets (380 accounts with 2, 120
    with 1) against 1,000: per row chi-square = 2 x 60^2 / 940 = 7.66, p = 0.0056 - "suspicious" if rows were the
    unit, and no mismatch at the account. Read per row (UNIT = "row"), the same data is flagged."""
    build = (
        "SOURCE = save_artifact(pd.DataFrame(accounts('control', 500, 100, pets=lambda i: 2 if i < 380 else 1) + "
        "accounts('treatment', 500, 100)))"
    )
    text = await readout(s, f"PROFILE = {PETS!r}\n{build}")
    assert "split as planned (p = 1) in account_id units" in text, text
    assert "SAMPLE RATIO MISMATCH" not in text and "SPLIT SUSPICIOUS" not in text, text
    assert "rows per variant control 880, treatment 1000 (chi-square p = 0.0056)" in text, text
    assert "no split check" in text, text
    assert await value(s, "(srm_p, srm_finding)") == "(1.0, False)", text
    text = await readout(s, f"UNIT = 'row'\n{build}")
    assert "SPLIT SUSPICIOUS (p = 0.0056 < 0.01) in rows" in text, text
    assert "CHECK: the variant also never changes within account_id" in text, text


async def test_the_unit_comes_from_the_profile_or_the_readout_refuses(s: ClientSession) -> None:
    """Rows whose account groups pets within one variant, with no unit known: refused (it names account_id). A
    profile naming a unit the variant changes within (10 of 400 accounts, 2.5 %): refused as contradicted. A table
    whose ids are all unique: read, with a loud warning that rows are assumed independent. The old totals input
    without a unit: a warning too. A file export with two tests and UTC-offset timestamps, read with EXPERIMENT and
    a profile naming the unit in words ("account"): 30 vs 30 of 100 accounts, no difference, split 100/100."""
    null = "SOURCE = save_artifact(pd.DataFrame(accounts('control', 200, 40) + accounts('treatment', 200, 56)))"
    text = await readout(s, null)
    assert "REFUSED: the randomisation unit is unknown" in text and "UNIT = 'account_id'" in text, text
    mixed = (
        "rows = accounts('control', 200, 40) + accounts('treatment', 200, 56)\n"
        "for r in rows[:20:2]: r['variant'] = 'treatment'\n"  # the first pet of 10 control accounts
        "SOURCE = save_artifact(pd.DataFrame(rows))"
    )
    text = await readout(s, f"PROFILE = {PETS!r}\n{mixed}")
    assert "REFUSED: the variant changes within 10 of 400 account_id values (2.5%)" in text, text
    single = (
        "SOURCE = save_artifact(pd.DataFrame(accounts('control', 400, 80, pets=1) + "
        "accounts('treatment', 400, 80, pets=1)).drop(columns='pet_profile_id'))"
    )
    text = await readout(s, single)
    assert "ROWS ARE ASSUMED INDEPENDENT" in text and "randomisation unit = row (assumed)" in text, text
    assert await value(s, "(design_effect, significant)") == "(1.0, False)", text
    totals = (
        "SOURCE = save_artifact(pd.DataFrame({'variant': ['control', 'treatment'], 'visitors': [5000, 5000], "
        "'conversions': [400, 410]}))"
    )
    text = await readout(s, totals)
    assert "WARNING: the randomisation unit is unknown" in text and "Assumed: randomisation unit = visitor" in text
    text = await readout(
        s,
        "PROFILE = {'randomisation_unit': 'account', 'analysis_row_unit': 'pet_profile_id'}\n"
        "SOURCE = 'uploads/ab_assignments.csv'\nEXPERIMENT = 'checkout_v1'\nCONTROL = 'control'",
    )
    assert (
        "randomisation unit = account_id (PROFILE), 2.00 rows per unit; metric converted; experiment checkout_v1"
        in (text)
    ), text
    assert "split as planned (p = 1) in account_id units - control 100 (50.0%), new_flow 100 (50.0%)" in text, text
    assert await value(s, "(float(comparisons.diff_points.iloc[0]), significant)") == "(0.0, False)", text
