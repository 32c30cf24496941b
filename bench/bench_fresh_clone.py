"""The README's ``uv run pytest`` on a fresh clone against the same in a clone ``.ci/run`` prepared (issue 65).

Two clones of this repository's committed HEAD (``git clone``) in a folder of their own, on the same machine, one
after the other:

* **readme**: exactly the README's quick start — ``uv run ba-mcp demo``, then ``uv run pytest`` (uv makes the
  environment at the first ``uv run``; nothing compiled beforehand: the run's own start compiles what it must);
* **ci**: prepared as ``.ci/run`` prepares a checkout — ``uv sync --frozen --all-extras --compile-bytecode`` and
  ``uv run python -m compileall -q ba_mcp sandbox tests`` (timed apart) — then ``uv run pytest``.

Reported: each command's wall time and pytest's closing line; with ``--again``, the fresh clone's ``uv run pytest``
once more (what of its first run was done once for the clone). uv's cache is whatever this machine's is (warm on any
machine that ran uv before: say so with the figures). Run it on a quiet machine: it is the fast tier, twice.

Run: python3 bench/bench_fresh_clone.py [--order readme,ci] [--again] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def environ() -> dict[str, str]:
    """This environment without an active virtual environment (a ``uv run`` around this script sets one)."""
    env = dict(os.environ)
    venv = env.pop("VIRTUAL_ENV", None)
    if venv:
        env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not p.startswith(venv))
    for key in ("UV_PROJECT_ENVIRONMENT", "PYTHONPATH", "PYTHONHOME"):
        env.pop(key, None)
    return env


def timed(command: list[str], cwd: Path, log: Path) -> tuple[float, str]:
    """``command`` run in ``cwd``, its output to ``log``: (seconds, its last non-empty line)."""
    started = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(command, cwd=cwd, env=environ(), stdout=out, stderr=subprocess.STDOUT, check=False)
    took = time.perf_counter() - started
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return took, f"exit {done.returncode}: {lines[-1] if lines else ''}"


def readme(clone: Path, logs: Path, again: bool) -> None:
    steps = [("uv run ba-mcp demo", ["uv", "run", "ba-mcp", "demo"]), ("uv run pytest", ["uv", "run", "pytest"])]
    for label, command in steps + [("uv run pytest, again", ["uv", "run", "pytest"])] * again:
        took, last = timed(command, clone, logs / f"readme-{label.split()[-1]}.log")
        print(f"readme  {label:<58} {took:7.1f} s   {last}", flush=True)


def ci(clone: Path, logs: Path, again: bool) -> None:
    for label, command in [
        (
            "uv sync --frozen --all-extras --compile-bytecode",
            ["uv", "sync", "--frozen", "--all-extras", "--compile-bytecode"],
        ),
        (
            "uv run python -m compileall -q ba_mcp sandbox tests",
            ["uv", "run", "python", "-m", "compileall", "-q", "ba_mcp", "sandbox", "tests"],
        ),
        ("uv run pytest", ["uv", "run", "pytest"]),
    ]:
        took, last = timed(command, clone, logs / f"ci-{command[1]}.log")
        print(f"ci      {label:<58} {took:7.1f} s   {last}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--order", default="readme,ci")
    parser.add_argument("--again", action="store_true", help="the fresh clone's uv run pytest a second time")
    parser.add_argument("--keep", action="store_true", help="keep the clones and the logs (printed)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ba-bench-clone-"))
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    print(f"clones of {ROOT} at {head.strip()} in {base}", flush=True)
    try:
        for which in args.order.split(","):
            clone = base / which
            subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
            {"readme": readme, "ci": ci}[which](clone, base, args.again)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
