"""Each method playbook end to end on businesses written by someone who never read the skills (issue 61, item 3).

Per archetype (bench/archetypes/: how each was written and what it plants is in its .md) and seed, the generator
writes the business's raw exports and its truth; the exports go into a fresh workspace as uploads and a real stdio
server serves the playbooks. As a model would, the bench first runs business-profile on every export (the user -
played by the archetype's own facts - answers the questions it asks), then for each method skill the archetype's
recipe (bench/playbooks/<archetype>.py) shapes the exports into the script's input as SKILL.md says, runs the
playbook's own script through ``run_python`` and judges each plant of that skill from what the script said: a truth
found, a look-alike flagged (see bench/playbooks/common.py).

Per skill: truths found (target >= 90 %), look-alikes flagged (target <= 5 %), crashes of the playbook's script
(target 0) and recipe errors (a fault of the bench's shaping code, shown apart; their plants count as not run).

Run: uv run python bench/bench_playbooks.py [--seeds 10] [--first 1] [--archetypes a,b] [--skills x,y] [--jobs 2]
     [--keep DIR] (each run's output and verdicts kept there; a run whose verdicts are kept is not run again: a long
     run is resumed after a stop, or read back whole by running it again; --summarize: the tables of the kept runs
     only, nothing run)
     [--skills-from DIR] (serve the method skills from DIR instead of the bundled ones - e.g. the playbooks before
     issue 61: ``git archive 52b03a8 skills | tar -x -C /tmp/before`` then ``--skills-from /tmp/before/skills``;
     business-profile is always today's, the step every recipe starts with)
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.stdio import stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "archetypes"))

from bench.bench_profile import ARCHETYPES
from bench.playbooks.common import RecipeError, Run, ScriptCrash
from tests.conftest import stdio_params

# what the user answers when business-profile asks: the archetype's own facts, put as a model would write them into
# FACTS (the column an experiment was randomised by, one time-zone key; the archetypes describe them in prose)
ANSWERS = ("contractual", "fiscal_calendar", "reporting_currency", "store_timezone", "randomisation_unit")
_CALENDAR = ("kind", "first_day", "year_naming", "53_week_years")


def _answers(business: dict[str, Any], profile: dict[str, Any]) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for key in ANSWERS:
        said, truth = profile.get(key), business.get(key)
        if truth in (None, "") or (
            said is not None and not (isinstance(said, dict) and said.get("year_naming") is None)
        ):
            continue  # not asked: the profile read it from the data
        if key == "fiscal_calendar":
            truth = {k: truth[k] for k in _CALENDAR if k in truth}
        elif key == "randomisation_unit":
            column = re.search(r"\b(\w+_id)\b", str(truth))
            truth = column.group(1) if column else str(truth).split()[0]
        elif key == "store_timezone":
            zone = re.search(r"\b(UTC|[A-Z][a-z]+/[A-Za-z_]+)\b", str(truth))
            if zone is None:
                continue  # e.g. "per store": no one zone to give
            truth = zone.group(1)
        facts[key] = truth
    return facts


async def one(
    name: str, seed: int, skills: list[str] | None, keep: Path | None, skills_from: Path | None
) -> dict[str, Any]:
    generator = importlib.import_module(name)
    recipes = importlib.import_module(f"bench.playbooks.{name}").RECIPES
    folder = Path(tempfile.mkdtemp(prefix=f"ba-mcp-playbooks-{name}-"))
    ws, exports = folder / "ws", folder / "exports"
    exports.mkdir()
    truth = generator.generate(exports, seed)
    (ws / "uploads").mkdir(parents=True)
    sources = {}
    for path in sorted(exports.iterdir()):
        if path.name != "truth.json":
            shutil.copy(path, ws / "uploads" / path.name)
            sources[path.name] = f"uploads/{path.name}"
    env = {"BA_MCP_TOOLS__RUN_PYTHON__MAX_TIMEOUT_S": "900"}
    if skills_from:
        served = folder / "skills"
        shutil.copytree(skills_from, served)
        shutil.rmtree(served / "business-profile", ignore_errors=True)
        shutil.copytree(
            Path(__file__).resolve().parent.parent / "skills" / "business-profile", served / "business-profile"
        )
        env |= {"BA_MCP_SKILLS__BUNDLED": "false", "BA_MCP_SKILLS__PATHS": f'["{served}"]'}
    params = stdio_params(ws, **env)
    out: dict[str, Any] = {"skills": {}, "seconds": 0.0}
    started = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        run = Run(session, truth, exports)
        await run.script("business-profile", "scripts/profile_business.py", f"SOURCES = {sources!r}")
        if await run.get("questions"):  # the user answers; the profile is read again with their facts
            facts = f"FACTS = {_answers(truth['business'], await run.get('PROFILE'))!r}"
            await run.script("business-profile", "scripts/profile_business.py", f"SOURCES = {sources!r}\n{facts}")
        out["profile"] = await run.get("PROFILE")
        for skill in sorted({p["skill"] for p in truth["plants"]}):
            if skills and skill not in skills:
                continue
            plants = run.plants(skill)
            recipe = recipes.get(skill)
            if recipe is None:
                out["skills"][skill] = {"status": "no recipe", "plants": plants, "verdicts": {}}
                continue
            t0 = time.perf_counter()
            try:
                verdicts, status = await recipe(run), "ran"
            except ScriptCrash as e:
                verdicts, status = {}, "crash"
                run.outputs.append(f"### CRASH {skill}\n{e}")
            except (RecipeError, Exception) as e:  # a bench fault, reported apart
                verdicts, status = {}, "recipe error"
                run.outputs.append(f"### RECIPE ERROR {skill}\n{e}\n{traceback.format_exc()[-1500:]}")
            out["skills"][skill] = {
                "status": status,
                "plants": plants,
                "verdicts": verdicts,
                "seconds": time.perf_counter() - t0,
            }
    out["seconds"] = time.perf_counter() - started
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
        (keep / f"{name}-{seed}.md").write_text("\n\n".join(run.outputs))
        # the verdicts too: a run of many seeds is read back whole (--summarize), or resumed (done runs skipped)
        (keep / f"{name}-{seed}.json").write_text(json.dumps(out, default=str))
    shutil.rmtree(folder, ignore_errors=True)
    return out


def _line(label: str, c: Counter[str]) -> str:
    t, f, lk, fl = c["truths"], c["found"], c["lookalikes"], c["flagged"]
    tp = f"{f}/{t} ({100 * f / t:.0f} %)" if t else "-"
    lp = f"{fl}/{lk} ({100 * fl / lk:.0f} %)" if lk else "-"
    return f"{label:<28}{tp:>16}{lp:>16}{c['crash']:>8}{c['recipe error']:>8}{c['not run']:>9}"


async def run(
    archetypes: list[str],
    seeds: list[int],
    skills: list[str] | None,
    jobs: int,
    keep: Path | None,
    skills_from: Path | None,
    summarize: bool = False,
) -> None:
    per_skill: dict[str, Counter[str]] = {}
    per_archetype: dict[str, Counter[str]] = {}
    misses: Counter[str] = Counter()
    limiter = anyio.Semaphore(jobs)

    async def task(name: str, seed: int) -> None:
        done = keep / f"{name}-{seed}.json" if keep else None
        if done is not None and done.exists():  # resumed: this run's verdicts are kept
            tally(name, seed, json.loads(done.read_text()))
            return
        if summarize:  # read back only: a run not kept is left out of the tables
            return
        async with limiter:
            try:
                result = await one(name, seed, skills, keep, skills_from)
            except Exception as e:  # the whole run failed: the profile or the server
                print(f"{name} seed {seed}: FAILED {e!r}\n{''.join(traceback.format_exception(e))[-2500:]}")
                return
        tally(name, seed, result)

    def tally(name: str, seed: int, result: dict[str, Any]) -> None:
        notes = []
        for skill, r in result["skills"].items():
            for counter in (per_skill.setdefault(skill, Counter()), per_archetype.setdefault(name, Counter())):
                for p in r["plants"]:
                    kind = "truths" if p["kind"] == "truth" else "lookalikes"
                    counter[kind] += 1
                    if r["status"] != "ran" or p["id"] not in r["verdicts"]:
                        counter["not run" if r["status"] != "crash" else "crash plants"] += 1
                    elif r["verdicts"][p["id"]]:
                        counter["found" if kind == "truths" else "flagged"] += 1
                if r["status"] in ("crash", "recipe error"):
                    counter[r["status"]] += 1
            for p in r["plants"]:
                hit = r["verdicts"].get(p["id"])
                if r["status"] == "ran" and (hit is False if p["kind"] == "truth" else hit is True):
                    misses[f"{skill}: {name} {p['class']} ({p['kind']})"] += 1
            if r["status"] != "ran":
                notes.append(f"{skill} {r['status']}")
        print(f"{name} seed {seed}: {result['seconds']:.0f} s {'; '.join(notes)}", flush=True)

    async with anyio.create_task_group() as tg:
        for seed in seeds:
            for name in archetypes:
                tg.start_soon(task, name, seed)
    print(f"\nseeds {seeds[0]}..{seeds[-1]}, archetypes {', '.join(archetypes)}")
    head = f"{'skill':<28}{'truths found':>16}{'look-alikes':>16}{'crashes':>8}{'errors':>8}{'not run':>9}"
    print(head)
    for skill in sorted(per_skill):
        print(_line(skill, per_skill[skill]))
    print()
    print(head.replace("skill      ", "archetype  "))
    for name in archetypes:
        print(_line(name, per_archetype.get(name, Counter())))
    if misses:
        print("\nmissed truths and flagged look-alikes (runs):")
        for what, n in sorted(misses.items()):
            print(f"  {n:>3}  {what}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first", type=int, default=1)
    parser.add_argument("--archetypes", default=",".join(ARCHETYPES))
    parser.add_argument("--skills", default="")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--skills-from", type=Path, default=None)
    parser.add_argument("--summarize", action="store_true", help="the tables of the runs kept in --keep; none run")
    args = parser.parse_args()
    seeds = list(range(args.first, args.first + args.seeds))
    skills = [s for s in args.skills.split(",") if s] or None
    anyio.run(run, args.archetypes.split(","), seeds, skills, args.jobs, args.keep, args.skills_from, args.summarize)


if __name__ == "__main__":
    main()
