"""What every archetype's playbook recipes share (bench/bench_playbooks.py).

A recipe is what a model does with a playbook on one business: it reads the skill, shapes the raw exports into the
script's input with pandas in ``run_python`` (the steps of SKILL.md, followed literally), runs the playbook's own
script as ``use_skill`` serves it, and reads what the script says. It then judges each of the archetype's plants for
that skill from the script's own output: a truth is **found** when the output names its entity as a finding (and,
where the plant has an expected value the script measures, the value is within the plant's tolerance); a look-alike
is **flagged** when the output names its entity as a finding. The expected values come from the archetype's
generator, never from the skill.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp import ClientSession

from tests.conftest import text_of


class ScriptCrash(Exception):
    """The playbook's own script failed on the shaped input: a crash of the playbook."""


class RecipeError(Exception):
    """The recipe's own shaping code failed: a fault of the bench, reported apart from the playbook's crashes."""


@dataclass
class Run:
    """One archetype, one seed: a session of the real server over a workspace holding the exports as uploads."""

    session: ClientSession
    truth: dict[str, Any]
    exports: Path  # the generator's folder: names only, the data goes through the server
    outputs: list[str] = field(default_factory=list)

    @property
    def business(self) -> dict[str, Any]:
        return self.truth["business"]

    def plants(self, skill: str) -> list[dict[str, Any]]:
        return [p for p in self.truth["plants"] if p["skill"] == skill]

    async def py(self, code: str, timeout: float = 300) -> str:
        """Shaping code in run_python; its failure is the recipe's."""
        result = await self.session.call_tool("run_python", {"code": code, "timeout": timeout, "output_level": "full"})
        text = text_of(result)
        if result.is_error or "\n## error" in text or text.startswith("error"):
            raise RecipeError(text[-1500:])
        return text

    async def script(self, skill: str, path: str, inputs: str, timeout: float = 300) -> str:
        """The playbook's script exactly as use_skill serves it, after ``inputs`` (assignments of its inputs)."""
        read = await self.session.call_tool("use_skill", {"name": skill, "path": path, "output_level": "full"})
        if read.is_error:
            raise ScriptCrash(text_of(read)[-1500:])
        code = text_of(read).split("\n", 2)[2]
        try:
            compile(code, path, "exec")
        except SyntaxError as e:  # served in part (longer than use_skill's window): the model cannot run it whole
            raise ScriptCrash(f"{skill} {path} is not served whole by use_skill: {e}") from e
        result = await self.session.call_tool(
            "run_python", {"code": f"{inputs}\n{code}", "timeout": timeout, "output_level": "full"}
        )
        text = text_of(result)
        self.outputs.append(f"### {skill} {path}\n{text}")
        if result.is_error or "\n## error" in text:
            raise ScriptCrash(text[-1500:])
        return text

    async def get(self, expression: str) -> Any:
        """A JSON-able value from the session (DataFrames as lists of records)."""
        code = (
            "import json as _j, pandas as _pd\n"
            f"_v = ({expression})\n"
            "if isinstance(_v, _pd.DataFrame): _v = _v.to_dict('records')\n"
            "if isinstance(_v, _pd.Series): _v = _v.to_dict()\n"
            "print('@@' + _j.dumps(_v, default=str))"
        )
        text = await self.py(code)
        line = next(x for x in text.splitlines() if x.startswith("@@"))
        return json.loads(line[2:])


Recipe = Callable[[Run], Awaitable[dict[str, bool]]]


def tolerance(expected: dict[str, Any]) -> float:
    """The absolute tolerance of an expected value. The archetypes write it as {"abs": x}, {"rel": x} or a bare
    number: a bare number below 1 on a value of 10 or more is relative (e.g. 0.2 on 374 members, 0.15 on -213,883
    EUR), otherwise absolute (0.01 on a growth of 0.058, 1.5 on 4.78 percent)."""
    value, tol = expected.get("value"), expected.get("tolerance")
    if not isinstance(value, int | float):
        return 0.0
    if isinstance(tol, dict):
        if "abs" in tol:
            return float(tol["abs"])
        return abs(float(value)) * float(tol.get("rel", 0))
    tol = float(tol or 0)
    return abs(float(value)) * tol if tol < 1 and abs(float(value)) >= 10 else tol


def within(measured: Any, plant: dict[str, Any], scale: float = 1.0) -> bool:
    """The measured value (times ``scale``: a script's percent against a plant's share) is the plant's expected one
    within its tolerance; a plant with no expected value accepts any."""
    expected = plant.get("expected") or {}
    if not isinstance(expected.get("value"), int | float):
        return True
    try:
        m = float(measured) * scale
    except (TypeError, ValueError):
        return False
    return abs(m - float(expected["value"])) <= tolerance(expected) + 1e-9


def by_class(plants: list[dict[str, Any]], kind: str, cls: str) -> list[dict[str, Any]]:
    return [p for p in plants if p["kind"] == kind and p["class"] == cls]
