"""A skill script's inputs are the cell's: no script assigns, at its top level, a name any skill script reads as an
input (``globals().get("NAME")``) - the playbooks share one session, and a value one script left behind was read
as another's input (discount-effectiveness left ALPHA = 0.05, and the next kpi-anomaly-detection run turned its
outage monitor off). PROFILE, the business profile every script shares on purpose, is the one exception."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted((ROOT / "skills").glob("*/scripts/*.py"))


def _inputs(tree: ast.AST) -> set[str]:
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("get", "pop")
        and isinstance(node.func.value, ast.Call)
        and getattr(node.func.value.func, "id", None) == "globals"
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    }


def _assigned(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:  # the top level only: what stays in the session after the cell
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign | ast.AugAssign)
            else []
        )
        for target in targets:
            names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def test_no_script_leaves_a_name_another_reads_as_its_input() -> None:
    trees = {path: ast.parse(path.read_text()) for path in SCRIPTS}
    inputs = {n for t in trees.values() for n in _inputs(t) if n.isupper()} - {"PROFILE"}  # inputs are upper case
    assert {"ALPHA", "START", "BY", "FX"} <= inputs  # the reader finds the inputs
    leaks = {f"{path.relative_to(ROOT)}: {name}" for path, tree in trees.items() for name in _assigned(tree) & inputs}
    assert not leaks, sorted(leaks)
