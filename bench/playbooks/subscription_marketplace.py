"""Recipes for the pet-food subscription business (bench/archetypes/subscription_marketplace.md).

Each recipe follows its SKILL.md literally on these exports and judges the archetype's plants for that skill from
the script's output (see bench/playbooks/common.py).
"""

from __future__ import annotations

from bench.playbooks.common import Recipe, Run, by_class, within


async def ab_test_readout(run: Run) -> dict[str, bool]:
    """One row per pet profile; the unit comes from PROFILE (randomised by account). Each test read on its own."""
    plants = run.plants("ab-test-readout")
    verdicts: dict[str, bool] = {}
    tests = {}
    for test in ("onboarding_v2", "pricing_page_v3"):
        await run.py(
            "ab = load_file('uploads/ab_assignments.csv')\n"
            f"ab_{test} = ab[ab.test_name == {test!r}][['variant', 'account_id', 'pet_profile_id', 'converted']]\n"
            f"print(ab_{test}.variant.value_counts())"
        )
        await run.script("ab-test-readout", "scripts/ab_readout.py", f"SOURCE = ab_{test}")
        tests[test] = await run.get(
            "{'p': float(comparisons.p.iloc[0]), 'significant': bool(significant), 'srm_p': float(srm_p), "
            "'srm_finding': bool(srm_finding), 'unit': unit}"
        )
    onboarding, pricing = tests["onboarding_v2"], tests["pricing_page_v3"]
    for p in by_class(plants, "truth", "cluster_null"):  # null at the account: not significant, p near the truth's
        verdicts[p["id"]] = not onboarding["significant"] and within(onboarding["p"], p)
    for p in by_class(plants, "lookalike", "wrong_unit_significance"):  # the per-pet significance called real
        verdicts[p["id"]] = onboarding["significant"]
    for p in by_class(plants, "truth", "sample_ratio_mismatch"):  # the split reported as a mismatch at the account
        verdicts[p["id"]] = pricing["srm_finding"] and "account" in str(pricing["unit"])
    for p in by_class(plants, "lookalike", "srm_wrong_unit"):  # the pets' imbalance called a mismatch
        verdicts[p["id"]] = onboarding["srm_finding"]
    return verdicts


RECIPES: dict[str, Recipe] = {
    "ab-test-readout": ab_test_readout,
}
