"""A public dbt semantic layer as published, answered by query_metrics and by MetricFlow's own `mf query`.

dbt Labs' jaffle-shop (its models, semantic models and metrics as published; its seeds generated with `jafgen`,
as the project's README does) built into a DuckDB file with dbt-duckdb, its packages (dbt_utils, dbt_date) from
their public repositories' snapshots as local packages (dbt's hub is not reachable here). Then every metric the
project defines, by `metric_time` at day, month and year and by month and one other dimension, through the real
server over stdio (`query_metrics`, the project configured as `metrics.dbt`) and through `mf query` on the same
file: the rows must be equal (numbers to 1e-9 relative).

Run (the snapshots come from the workplace's `fetch` tool, or any clone):
  uv run python bench/bench_dbt.py --repo /work/.mirror/dbt-labs+jaffle-shop/repo \\
      --package dbt_utils=/work/.mirror/dbt-labs+dbt-utils/repo \\
      --package dbt_date=/work/.mirror/godatadriven+dbt-date/repo
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
RAW = ("raw_customers", "raw_items", "raw_orders", "raw_products", "raw_stores", "raw_supplies")


def export(git_dir: Path, target: Path) -> None:
    """The snapshot's files (a bare repository): each blob present written out (absent large blobs skipped)."""
    listing = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "-r", "HEAD"], capture_output=True, text=True, check=True
    ).stdout
    for line in listing.splitlines():
        meta, path = line.split("\t", 1)
        blob = meta.split()[2]
        data = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "blob", blob], capture_output=True)
        if data.returncode == 0:
            (target / path).parent.mkdir(parents=True, exist_ok=True)
            (target / path).write_bytes(data.stdout)


def build(work: Path, repo: Path, packages: dict[str, Path]) -> dict[str, str]:
    project = work / "jaffle-shop"
    export(repo, project)
    (project / "packages.yml").write_text("packages:\n" + "".join(f"  - local: ../pk/{name}\n" for name in packages))
    (project / "package-lock.yml").unlink(missing_ok=True)
    for name, git_dir in packages.items():
        export(git_dir, work / "pk" / name)
    (project / "profiles.yml").write_text(
        f"default:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n      path: {work / 'jaffle.duckdb'}\n"
        "      threads: 2\n"
    )
    subprocess.run([str(BIN / "jafgen"), "1"], cwd=work, check=True, capture_output=True)
    import duckdb

    con = duckdb.connect(str(work / "jaffle.duckdb"))
    con.execute("CREATE SCHEMA IF NOT EXISTS raw")
    for table in RAW:
        con.execute(f"CREATE TABLE raw.{table} AS SELECT * FROM read_csv_auto('{work}/jaffle-data/{table}.csv')")
    con.close()
    env = {**os.environ, "DBT_PROFILES_DIR": str(project), "DO_NOT_TRACK": "1", "DBT_SEND_ANONYMOUS_USAGE_STATS": "0"}
    for command in (["deps"], ["run"], ["parse"]):
        done = subprocess.run([str(BIN / "dbt"), *command], cwd=project, env=env, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"dbt {command[0]} failed:\n{done.stdout[-3000:]}")
    return env


def mf_query(project: Path, env: dict[str, str], metric: str, group_by: list[str]) -> list[list[str]]:
    out = project / "mf.csv"
    done = subprocess.run(
        [str(BIN / "mf"), "query", "--metrics", metric, "--group-by", ",".join(group_by), "--csv", str(out)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"mf query {metric} by {group_by}: {done.stdout[-800:]} {done.stderr[-800:]}")
    rows = list(csv.reader(out.read_text().splitlines()))
    return rows[1:]


def other_dimension(project: Path, env: dict[str, str], metric: str) -> str | None:
    done = subprocess.run(
        [str(BIN / "mf"), "list", "dimensions", "--metrics", metric],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    names = re.findall(r"•\s*(\S+)", done.stdout)
    plain = [n for n in names if "metric_time" not in n and not n.endswith(("_at", "_date"))]
    return plain[0] if plain else None


def same(a: str, b: str) -> bool:
    if a in ("", "NULL", "None") and b in ("", "NULL", "None"):
        return True
    try:
        x, y = float(a), float(b)
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)
    except ValueError:
        return a[:10] == b[:10] if re.match(r"\d{4}-\d\d-\d\d", a) else a == b


def key(row: list[str]) -> list[str]:
    return [v[:10] if re.match(r"\d{4}-\d\d-\d\d", v) else v for v in row]


async def ours(work: Path, project: Path, queries: list[tuple[str, list[str], str | None]]) -> list[list[list[str]]]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    config = work / "ba-mcp.yaml"
    config.write_text(
        json.dumps(
            {
                "workspace": str(work / "ws"),
                "databases": {"jaffle": {"path": str(work / "jaffle.duckdb")}},
                "metrics": {"dbt": [{"project": str(project), "database": "jaffle"}]},
                "observation": {"inline_limit_tokens": 2_000_000},
                "tools": {"query_metrics": {"max_rows": 100_000}},
            }
        )
    )
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ba_mcp", "serve", "--config", str(config)], env=dict(os.environ)
    )
    answers = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        for metric, dims, grain in queries:
            args: dict[str, Any] = {"metrics": [metric], "output_level": "full", "timeout": 300}
            if grain:
                args["time_grain"] = grain
            if dims:
                args["dimensions"] = dims
            result = await s.call_tool("query_metrics", args)
            text = "\n".join(c.text for c in result.content if hasattr(c, "text"))
            if result.is_error:
                raise RuntimeError(f"query_metrics {metric} {dims} {grain}: {text}")
            kept = re.search(r"Complete table: (artifact_[0-9a-f]{12})", text)
            if kept:  # more rows than a host shows inline: the complete table, as the artifact resource's CSV
                body = (await s.read_resource(f"artifact://{kept.group(1)}")).contents[0].text  # type: ignore[union-attr]
                answers.append(list(csv.reader(io.StringIO(body)))[1:])
                continue
            lines = text.splitlines()
            start = next(i for i, line in enumerate(lines) if line.startswith("Rows ("))
            count = int(re.search(r": ([\d,]+) rows", text).group(1).replace(",", ""))  # type: ignore[union-attr]
            reader = csv.reader(io.StringIO("\n".join(lines[start + 1 :])))
            next(reader, None)
            answers.append([row for _, row in zip(range(count), reader, strict=False)])
    return answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, required=True, help="jaffle-shop's git directory (a snapshot)")
    parser.add_argument("--package", action="append", default=[], help="NAME=GIT_DIR of a dbt package")
    parser.add_argument("--work", type=Path, help="where to build (default: a temporary folder)")
    args = parser.parse_args()
    packages = {p.split("=", 1)[0]: Path(p.split("=", 1)[1]) for p in args.package}
    work = args.work or Path(tempfile.mkdtemp(prefix="ba-mcp-dbt-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    started = time.monotonic()
    env = build(work, args.repo, packages)
    project = work / "jaffle-shop"
    built = time.monotonic() - started
    manifest = json.loads((project / "target" / "semantic_manifest.json").read_text())
    metrics = sorted(m["name"] for m in manifest["metrics"])
    queries: list[tuple[str, list[str], str | None]] = []
    reference: list[list[list[str]]] = []
    mf_started = time.monotonic()
    for metric in metrics:
        for grain in ("day", "month", "year"):
            queries.append((metric, [], grain))
            reference.append(mf_query(project, env, metric, [f"metric_time__{grain}"]))
        dim = other_dimension(project, env, metric)
        if dim:
            queries.append((metric, [dim], "month"))
            reference.append(mf_query(project, env, metric, ["metric_time__month", dim]))
    mf_s = time.monotonic() - mf_started
    ours_started = time.monotonic()
    answers = asyncio.run(ours(work, project, queries))
    ours_s = time.monotonic() - ours_started
    equal, unequal = 0, []
    for (metric, dims, grain), want, got in zip(queries, reference, answers, strict=True):
        want_rows, got_rows = sorted(want, key=key), sorted(got, key=key)
        if len(want_rows) == len(got_rows) and all(
            len(w) == len(g) and all(same(a, b) for a, b in zip(w, g, strict=True))
            for w, g in zip(want_rows, got_rows, strict=True)
        ):
            equal += 1
        else:
            unequal.append((metric, dims, grain, want_rows[:2], got_rows[:2]))
    print(
        f"jaffle-shop built in {built:.1f} s ({len(metrics)} metrics); mf query: {mf_s:.1f} s for {len(queries)} "
        f"queries; query_metrics over stdio: {ours_s:.1f} s"
    )
    print(f"equal to MetricFlow: {equal} of {len(queries)} queries")
    for item in unequal:
        print("  differs:", item)
    sys.exit(0 if not unequal else 1)


if __name__ == "__main__":
    main()
