"""The business-profile step measured on businesses written by someone who never read the skills (issue 61).

Each archetype in bench/archetypes/ (see bench/archetypes/*.md: how it was written, what it plants) writes a
business's raw exports for a seed and the facts of that business (``truth.json``'s ``business``). Per archetype and
seed, the exports go into a fresh workspace as uploads and a real stdio server runs the skill as a model would:
``use_skill(name="business-profile", path="scripts/profile_business.py")``, then the script in ``run_python`` with
every export in ``SOURCES``. Each fact the business has is then **right** (the value the archetype says), **asked**
(left to the user, in ``questions`` — right when the exports cannot say it), **silent** (not stated nor asked: the
exports hold nothing that shows it, e.g. a store-level promotion test with no assignment file), or **wrong** (a value
stated that is not the business's: the one outcome that misleads every method after it).

Facts scored: contractual or not (true, false or mixed: subscriptions beside one-off orders), the currencies, the
unit the experiment randomised (the column named appears in the archetype's description of it), the fiscal
calendar's kind, how its years are named, and its 53-week years.

Run: uv run python bench/bench_profile.py [--seeds 10] [--first 1] [--archetypes a,b]
"""

from __future__ import annotations

import argparse
import ast
import importlib
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.stdio import stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "archetypes"))

from tests.conftest import stdio_params, text_of

ARCHETYPES = ["subscription_marketplace", "retail_454", "b2b_multicurrency", "saas_contracts"]


def _years(values: Any) -> set[int]:
    return {int(m) for v in values or [] for m in re.findall(r"\d{4}", str(v))}


def score(business: dict[str, Any], profile: dict[str, Any], questions: list[str]) -> dict[str, str]:
    """Each fact: right, asked or wrong."""
    asked = " ".join(questions).lower()
    out: dict[str, str] = {}
    truth = business.get("contractual")
    out["contractual"] = "right" if profile.get("contractual") == truth else "wrong"
    want = {str(c).upper() for c in business.get("currencies") or []}
    out["currencies"] = "right" if {str(c).upper() for c in profile.get("currencies") or []} == want else "wrong"
    unit = str(business.get("randomisation_unit") or "")
    if unit and unit.lower() not in ("none", "n/a"):
        said = profile.get("randomisation_unit")
        if said is None:  # no experiment export found: nothing stated, nothing misleading
            out["randomisation_unit"] = "asked" if "randomis" in asked else "silent"
        else:
            stem = str(said).lower().removesuffix("_id")
            out["randomisation_unit"] = "right" if stem and stem in unit.lower() else "wrong"
    fiscal = business.get("fiscal_calendar") or {}
    read = profile.get("fiscal_calendar") or {}
    for key in ("kind", "year_naming"):
        if not fiscal.get(key):
            continue
        if read.get(key) in (None, "") or str(read.get(key)).startswith("weeks"):
            out[f"fiscal {key}"] = "asked" if "fiscal" in asked else "wrong"
        else:
            out[f"fiscal {key}"] = "right" if read.get(key) == fiscal[key] else "wrong"
    if fiscal.get("kind") in ("4-5-4", "4-4-5", "5-4-4"):
        stated = _years(read.get("53_week_years"))
        if not read:
            out["53-week years"] = "asked" if "fiscal" in asked else "wrong"
        else:  # a year the plan shows as 53 weeks must be one; none stated is a miss only if the plan showed them
            out["53-week years"] = "right" if stated <= _years(fiscal.get("53_week_years")) else "wrong"
    return out


async def profile_one(session: ClientSession, sources: dict[str, str]) -> tuple[dict[str, Any], list[str], str]:
    read = await session.call_tool(
        "use_skill", {"name": "business-profile", "path": "scripts/profile_business.py", "output_level": "full"}
    )
    code = text_of(read).split("\n", 2)[2]
    tail = "\nprint('PROFILE:', repr(PROFILE))\nprint('QUESTIONS:', repr(questions))"
    ran = await session.call_tool("run_python", {"code": f"SOURCES = {sources!r}\n{code}{tail}", "timeout": 300})
    said = text_of(ran)
    if ran.is_error:
        return {}, [], said
    profile = ast.literal_eval(next(x for x in said.splitlines() if x.startswith("PROFILE:")).split(":", 1)[1])
    questions = ast.literal_eval(next(x for x in said.splitlines() if x.startswith("QUESTIONS:")).split(":", 1)[1])
    return profile, questions, said


async def run(archetypes: list[str], seeds: list[int]) -> None:
    totals: dict[str, Counter[str]] = {}
    crashes: Counter[str] = Counter()
    for name in archetypes:
        generator = importlib.import_module(name)
        for seed in seeds:
            folder = Path(tempfile.mkdtemp(prefix=f"ba-mcp-profile-{name}-"))
            ws, exports = folder / "ws", folder / "exports"
            exports.mkdir()
            truth = generator.generate(exports, seed)
            (ws / "uploads").mkdir(parents=True)
            sources = {}
            for path in sorted(exports.iterdir()):
                if path.name == "truth.json":
                    continue
                shutil.copy(path, ws / "uploads" / path.name)
                sources[path.name] = f"uploads/{path.name}"
            params = stdio_params(ws, BA_MCP_TOOLS__RUN_PYTHON__MAX_TIMEOUT_S="600")
            started = time.perf_counter()
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                profile, questions, said = await profile_one(session, sources)
            if not profile:
                crashes[name] += 1
                print(f"{name} seed {seed}: CRASH {said[-400:]}")
                continue
            scored = score(truth["business"], profile, questions)
            counts = totals.setdefault(name, Counter())
            for fact, outcome in scored.items():
                counts[outcome] += 1
                counts[f"{fact}: {outcome}"] += 1
            wrong = [f for f, o in scored.items() if o == "wrong"]
            print(f"{name} seed {seed}: {time.perf_counter() - started:.0f} s, wrong: {', '.join(wrong) or 'none'}")
            shutil.rmtree(folder, ignore_errors=True)
    print()
    print(f"{'archetype':<26}{'right':>7}{'asked':>7}{'silent':>7}{'wrong':>7}{'crashes':>9}  wrong facts")
    for name in archetypes:
        c = totals.get(name, Counter())
        facts = sorted({k.rsplit(": ", 1)[0] for k in c if k.endswith(": wrong")})
        line = f"{name:<26}{c['right']:>7}{c['asked']:>7}{c['silent']:>7}{c['wrong']:>7}{crashes[name]:>9}"
        print(f"{line}  {', '.join(facts)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first", type=int, default=1)
    parser.add_argument("--archetypes", default=",".join(ARCHETYPES))
    args = parser.parse_args()
    anyio.run(run, args.archetypes.split(","), list(range(args.first, args.first + args.seeds)))


if __name__ == "__main__":
    main()
