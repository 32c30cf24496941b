"""The first call of a session against the warm call, per tool (issue 50 item 10; issue 65 item 2).

A host starts the server when it starts, and the first tool call comes seconds later (the user types, the model
thinks): each case is a fresh server over stdio, initialized, left idle for ``--idle`` seconds, then the tool's
first call and a second, warm call with other arguments (no cache hit). Each tool gets a fresh server, so each first
call is the first of its session. Reported: the first call's time, the warm call's, first − warm, and their ratio;
with ``--against`` another checkout's server runs the same cases in the same run, interleaved (before/after).

Conditions (``--conditions``, each in the same rounds):
  checkout  the server as the checkout runs it (its .venv, compiled by whatever made it);
  install   as the Claude Desktop extension installs it: ``ba-mcp bundle`` of the checkout into a folder of its own,
            started with the extension's command, ``uv run --frozen --no-dev --directory <folder> ba-mcp serve`` (the
            folder's own environment, made once before the rounds, as the extension's first start makes it), after
            that first start: a server started once and left idle until its background bytecode compilation has
            written its stamp (the time it took is printed; a revision without it compiles nothing, ever) — every
            later session of an installed extension;
  install-first  the same, but each case on an environment made for it alone (``uv run --frozen --no-dev`` in a
            fresh copy of the bundle's folder, from uv's cache; not timed): the very first session of a new
            install, its server's compilation running in the background while the first call is made;
  burners   the checkout's server beside ``--burners`` CPU burners (``python3 -c 'while 1: pass'``), started before the
            server and ended (by pid) after each case: the first call of a busy machine, against its default timeout.
Targets (issue 65): checkout and install, first ≤ warm + 1.5 s on a quiet machine (install-first is shown, not held
to it); burners, no first call near its
tool's default timeout (the column ``timeout`` shows it).

Run: uv run python bench/bench_first_call.py [--runs 3] [--idle 3]
     [--conditions checkout,install,install-first,burners]
     [--against /tmp/before/.venv/bin/python]
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from common import AGAINST_HELP, call, env_for, initialize, servers, spawn, stop

CASES = {  # tool -> (first call's arguments, the warm call's)
    "file_reader": ({"path": "upload_calls", "output_level": "standard"}, {"path": "upload_calls", "nrows": 500}),
    "query_database": (
        {"query": "SELECT region_name, sum(net_revenue) AS v FROM order_facts GROUP BY 1"},
        {"query": "SELECT channel_name, sum(net_revenue) AS v FROM order_facts GROUP BY 1"},
    ),
    "query_metrics": (
        {"metrics": ["net_revenue"], "time_grain": "month"},
        {"metrics": ["order_count"], "time_grain": "quarter"},
    ),
    "run_python": (
        {"code": "import scipy.stats\nround(float(scipy.stats.norm.cdf(1.0)), 4)"},
        {"code": "import scipy.stats\nround(float(scipy.stats.t.cdf(1.0, 5)), 4)"},
    ),
}
DEFAULT_TIMEOUT = {"file_reader": 30.0, "query_database": 30.0, "query_metrics": 30.0, "run_python": 60.0}


def workspace() -> Path:
    ws = Path(tempfile.mkdtemp(prefix="ba-bench-first-"))
    (ws / "uploads").mkdir()
    lines = ["day,agent,num. calls abandoned ,avg wait"] + [
        f"2024-{1 + i % 12:02d}-{1 + i % 28:02d},agent {i % 17},{i % 23},{(i * 37) % 300 / 10}" for i in range(2000)
    ]
    (ws / "uploads" / "calls.csv").write_text("\n".join(lines) + "\n")
    return ws


def bundled(checkout: Path, python: str, folder: Path) -> Path:
    """The checkout's extension folder (``ba-mcp bundle``, run by the checkout's own Python), no environment yet."""
    if folder.exists():
        shutil.rmtree(folder)
    subprocess.run([python, "-m", "ba_mcp", "bundle", str(folder)], cwd=checkout, check=True, capture_output=True)
    return folder


def extension(folder: Path) -> list[str]:
    """The extension's command, as its manifest has Claude Desktop run it (without ``serve``)."""
    return ["uv", "run", "--frozen", "--no-dev", "--directory", str(folder), "ba-mcp"]


def environment(folder: Path) -> float:
    """The environment ``uv run --frozen --no-dev`` makes in ``folder`` on the extension's first start (from uv's
    cache), made here; seconds."""
    started = time.perf_counter()
    subprocess.run([*extension(folder)[:-1], "python", "-c", "pass"], cwd=folder, check=True, capture_output=True)
    return time.perf_counter() - started


def stamp(folder: Path) -> Path | None:
    """The stamp the server's background compilation writes when it is done (ba_mcp.bytecode), if written."""
    return next(folder.glob(".venv/lib/python*/site-packages/__pycache__/ba-mcp-bytecode.stamp"), None)


def first_start(folder: Path, limit: float = 900.0) -> str:
    """The extension's first start, left idle until its server's background compilation is done (its stamp
    written); what it took, in words. A revision without that compilation compiles nothing: said so."""
    if not (folder / "ba_mcp" / "bytecode.py").exists():
        return "no background compilation in this revision: every worker compiles what it imports, at every start"
    ws = workspace()
    started = time.perf_counter()
    proc = spawn([*extension(folder), "serve"], env_for(ws), folder)
    try:
        initialize(proc)
        while stamp(folder) is None and time.perf_counter() - started < limit:
            time.sleep(0.5)
        took = time.perf_counter() - started
        done = stamp(folder) is not None
    finally:
        stop(proc)
        shutil.rmtree(ws, ignore_errors=True)
    return f"the first start's background compilation {'done' if done else 'NOT done'} after {took:.1f} s"


def installed(checkout: Path, python: str, folder: Path) -> tuple[list[str], Path]:
    """The checkout as the extension installs it, after its first start: its bundle folder, the environment made
    there, and the first start's background compilation waited out. Returns the extension's command and the folder
    it starts in."""
    bundled(checkout, python, folder)
    made = environment(folder)
    print(f"install of {checkout.name} made in {made:.1f} s: {folder}; {first_start(folder)}", flush=True)
    return extension(folder), folder


def fresh_install(template: Path, folder: Path) -> float:
    """A new install for one case: the bundle's folder copied (no environment) and its environment made; seconds."""
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(template, folder, ignore=shutil.ignore_patterns(".venv"))
    return environment(folder)


@contextlib.contextmanager
def burning(count: int) -> Iterator[None]:
    """``count`` CPU burners for the body's time, each ended by its pid."""
    burners = [subprocess.Popen(["python3", "-c", "while 1: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for b in burners:
            b.kill()
        for b in burners:
            b.wait()


def failed(reply: dict) -> str:
    """The error code of a failed call ("" when it answered): a first call that timed out is a figure, not a crash."""
    result = reply.get("result", {})
    if not result.get("isError"):
        return ""
    return str(result.get("_meta", {}).get("dev.ba-mcp/observation", {}).get("error", {}).get("code", "ERROR"))


def one(command: list[str], cwd: Path, tool: str, idle: float) -> tuple[float, float, str]:
    ws = workspace()
    proc = spawn([*command, "serve"], env_for(ws), cwd)
    try:
        initialize(proc)
        time.sleep(idle)
        first_args, warm_args = CASES[tool]
        first, reply = call(proc, 2, tool, first_args)
        error = failed(reply)
        for attempt in range(3):  # a warm call once one has answered (each failure ended the session's worker)
            warm, reply = call(proc, 3 + attempt, tool, warm_args)
            if not failed(reply):
                return first, warm, error
        return first, float("nan"), f"{error or 'ok'}+warm:{failed(reply)}"
    finally:
        stop(proc)
        shutil.rmtree(ws, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--idle", type=float, default=3.0, help="seconds between initialize and the first call")
    parser.add_argument("--tools", default=",".join(CASES))
    parser.add_argument(
        "--conditions", default="checkout", help="checkout, install, install-first, burners (comma-separated)"
    )
    parser.add_argument("--burners", type=int, default=6)
    parser.add_argument("--against", action="append", help=AGAINST_HELP + " (may be given more than once)")
    args = parser.parse_args()
    contenders = servers(args.against)
    tools = args.tools.split(",")
    conditions = args.conditions.split(",")
    commands: dict[tuple[str, str], tuple[list[str], Path]] = {}
    scratch = Path(tempfile.mkdtemp(prefix="ba-bench-install-"))
    templates: dict[str, Path] = {}
    for i, (name, (command, cwd)) in enumerate(contenders.items()):
        for condition in conditions:
            if condition == "install":
                commands[(name, condition)] = installed(cwd, command[0], scratch / f"install-{i}")
            elif condition == "install-first":
                templates[name] = bundled(cwd, command[0], scratch / f"bundle-{i}")
                commands[(name, condition)] = (extension(scratch / f"first-{i}"), scratch / f"first-{i}")
            else:
                commands[(name, condition)] = ([c for c in command if c != "serve"], cwd)
    times: dict[tuple[str, str, str], list[tuple[float, float, str]]] = {
        (c, n, t): [] for n in conditions for c in contenders for t in tools
    }
    try:
        for run in range(args.runs):
            order = list(contenders) if run % 2 == 0 else list(reversed(contenders))
            for condition in conditions:
                for tool in tools:
                    for name in order:
                        command, cwd = commands[(name, condition)]
                        if condition == "install-first":
                            made = fresh_install(templates[name], cwd)
                            print(f"  {name} {condition} {tool}: a new install made in {made:.1f} s (not timed)")
                        with burning(args.burners if condition == "burners" else 0):
                            got = one(command, cwd, tool, args.idle)
                        if condition == "install-first":
                            shutil.rmtree(cwd, ignore_errors=True)
                        times[(name, condition, tool)].append(got)
                        print(f"  {name} {condition} {tool}: first {got[0]:.2f} s, warm {got[1]:.2f} s {got[2]}")
                        sys.stdout.flush()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"first call of a fresh session vs the warm call (median of {args.runs}; idle {args.idle:g} s first)")
    print(
        f"{'server':<24} {'condition':<13} {'tool':<15} {'first ms':>9} {'warm ms':>8} {'first-warm':>10} "
        f"{'first/warm':>10} {'max first':>9} {'timeout':>7}  first calls failed"
    )
    for (name, condition, tool), pairs in times.items():
        first = statistics.median(p[0] for p in pairs) * 1000
        warm = statistics.median([p[1] for p in pairs if p[1] == p[1]] or [float("nan")]) * 1000
        worst = max(p[0] for p in pairs)
        errors = [p[2] for p in pairs if p[2]]
        print(
            f"{name:<24} {condition:<13} {tool:<15} {first:9.1f} {warm:8.1f} {first - warm:10.1f} {first / warm:10.1f} "
            f"{worst:8.1f}s {DEFAULT_TIMEOUT[tool]:6.0f}s  {len(errors)} {' '.join(errors)}"
        )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
