"""query_metrics right after a dbt build (issue 65 item 3): the dbt project's DuckDB file and its semantic manifest
rewritten while the server runs, as `dbt build` rewrites them, then the next query_metrics — against the same query
before the build, and against a build that changed the manifest (a metric's description: a new digest).

tests/dbt_shop is built once with dbt-duckdb (`dbt run`, `dbt parse`) into a scratch folder; each round is a fresh
server over stdio with it configured (`metrics.dbt`), a warm query_metrics, then the "build": the database file
rewritten in place (a new modification time, as dbt's writes give it) and the manifest written again — the same bytes
(`dbt build` on an unchanged project writes the same semantic manifest) or with one description changed — and
``--after`` seconds later (the user's next question) the next query_metrics.

Run: uv run python bench/bench_rebuild.py [--runs 3] [--after 8] [--against /tmp/before/.venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import AGAINST_HELP, ROOT, call, env_for, initialize, servers, spawn, stop

QUERY = {"metrics": ["revenue"], "time_grain": "month", "timeout": 240}  # measured, not cut at the default 30 s


def build(folder: Path) -> Path:
    project = folder / "tiny_shop"
    shutil.copytree(ROOT / "tests" / "dbt_shop", project)
    (project / "profiles.yml").write_text(
        f"tiny:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n      path: {folder / 'shop.duckdb'}\n"
    )
    env = {**os.environ, "DBT_PROFILES_DIR": str(project), "DO_NOT_TRACK": "1", "DBT_SEND_ANONYMOUS_USAGE_STATS": "0"}
    for command in ("run", "parse"):
        subprocess.run([str(Path(sys.executable).with_name("dbt")), command], cwd=project, env=env, check=True)
    return project


def rebuild(folder: Path, project: Path, changed: bool) -> None:
    """What `dbt build` leaves: the database file rewritten in place, the semantic manifest written again."""
    database = folder / "shop.duckdb"
    with open(database, "r+b") as f:  # the same bytes, written again: a new modification time, same inode
        data = f.read()
        f.seek(0)
        f.write(data)
    path = project / "target" / "semantic_manifest.json"
    manifest = json.loads(path.read_text())
    if changed:
        manifest["metrics"][0]["description"] = f"changed at {time.time()}"
    path.write_text(json.dumps(manifest))


def one(command: list[str], cwd: Path, folder: Path, project: Path, after: float, changed: bool) -> tuple[float, float]:
    ws = Path(tempfile.mkdtemp(prefix="ba-bench-rebuild-"))
    env = env_for(
        ws,
        BA_MCP_DATABASES__SHOP__PATH=str(folder / "shop.duckdb"),
        BA_MCP_METRICS__DBT=json.dumps([{"project": str(project), "database": "shop"}]),
        BA_MCP_METRICS__DEMO="false",
    )
    proc = spawn([*command, "serve"], env, cwd)
    try:
        initialize(proc)
        time.sleep(3)
        _, reply = call(proc, 2, "query_metrics", QUERY)  # the session's worker holds the model
        assert not reply.get("result", {}).get("isError"), reply
        before, reply = call(proc, 3, "query_metrics", {**QUERY, "time_grain": "quarter"})
        assert not reply.get("result", {}).get("isError"), reply
        rebuild(folder, project, changed)
        time.sleep(after)
        took, reply = call(proc, 4, "query_metrics", {**QUERY, "time_grain": "year"})
        assert not reply.get("result", {}).get("isError"), reply
        return before, took
    finally:
        stop(proc)
        shutil.rmtree(ws, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--after", type=float, default=8.0, help="seconds from the build to the next query")
    parser.add_argument("--against", help=AGAINST_HELP)
    args = parser.parse_args()
    contenders = servers(args.against)
    folder = Path(tempfile.mkdtemp(prefix="ba-bench-dbt-"))
    try:
        project = build(folder)
        times: dict[tuple[str, bool], list[tuple[float, float]]] = {
            (n, c): [] for c in (False, True) for n in contenders
        }
        for run in range(args.runs):
            order = list(contenders) if run % 2 == 0 else list(reversed(contenders))
            for changed in (False, True):
                for name in order:
                    command, cwd = contenders[name]
                    times[(name, changed)].append(one(command, cwd, folder, project, args.after, changed))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"query_metrics {args.after:g} s after a build vs before it (median of {args.runs})")
    print(f"{'server':<28} {'manifest':<10} {'before ms':>10} {'after build ms':>15}")
    for (name, changed), pairs in times.items():
        before = statistics.median(p[0] for p in pairs) * 1000
        after = statistics.median(p[1] for p in pairs) * 1000
        print(f"{name:<28} {'changed' if changed else 'same':<10} {before:10.1f} {after:15.1f}")


if __name__ == "__main__":
    main()
