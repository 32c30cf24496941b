"""A saved analysis run with no MCP client and no model: ``python analysis.py`` and ``ba-mcp analyses run``.

An App of its own over the analysis's workspace (the same settings, engines, sandbox and boundaries as the
server) replays the steps of ``analysis.yaml`` (``replay.run_steps``: data, never imported code); the outputs
are written beneath ``--out`` (default
``analyses/<name>/runs/<time>/``) — tables as Parquet and CSV, figures as PNG — with ``report.md`` and a
self-contained ``report.html``, and one line per output says whether it is the same as the saved run.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ba_mcp.analyses.manifest import describe_change, read_manifest, typed_values
from ba_mcp.analyses.replay import Output, Replay, StepFailed, run_steps


def main(path: str, argv: list[str] | None = None) -> int:
    """``analysis.py``'s entry point: the parameters of the ``analysis.yaml`` beside it as ``--flags``
    (``--help`` lists them), then a run."""
    from ba_mcp.analyses.manifest import PARAM

    folder = Path(path).resolve().parent
    parameters = read_manifest(folder.parent, folder.name, shared=True).get("parameters") or {}
    parser = argparse.ArgumentParser(
        prog="analysis.py", description=f"Re-run the saved analysis {folder.name} (ba-mcp, no model needed)."
    )
    for name, spec in parameters.items():
        if PARAM.match(str(name)):
            parser.add_argument(
                f"--{name}", default=None, help=f"{spec.get('type', 'text')}, default {spec.get('default')!r}"
            )
    parser.add_argument("--out", default=None, help="where outputs and the report go (default: runs/<time>/)")
    parser.add_argument(
        "--config", type=Path, default=None, help="a ba-mcp YAML configuration (default: ./ba-mcp.yaml if present)"
    )
    args = parser.parse_args(argv)
    given = {n: getattr(args, n) for n in parameters if getattr(args, n, None) is not None}
    return run_folder(folder, given, Path(args.out) if args.out else None, config=args.config)


def run_folder(
    folder: Path,
    given: dict[str, Any],
    out: Path | None = None,
    echo: Callable[[str], None] = print,
    config: Path | None = None,
    open_report: bool = False,
) -> int:
    """Run the analysis in ``folder`` (``<workspace>/analyses/<name>``) with the configuration ``config`` (else
    the ``ba-mcp.yaml`` of the current folder, as every command): 0 when every step ran."""
    from ba_mcp.app import App
    from ba_mcp.errors import ToolFailure
    from ba_mcp.settings import ConfigError, config_sources, load_settings

    manifest = read_manifest(folder.parent, folder.name, shared=True)  # the operator runs it
    values = typed_values(manifest.get("parameters") or {}, given)
    defaults = {n: s.get("default") for n, s in (manifest.get("parameters") or {}).items()}
    operator, project = config_sources(config)
    chosen = config if config is not None else project
    try:
        settings = load_settings(operator, project=project, workspace=folder.parent.parent)
    except ConfigError as exc:
        echo(f"FAILED: {exc}")
        return 2
    for name in manifest.get("databases") or []:
        if name not in settings.databases:
            where = f"in {chosen}" if chosen else "(no --config given, no ba-mcp.yaml here)"
            echo(
                f"FAILED: the analysis reads database {name!r}, which is not configured {where}: pass the "
                f"configuration that defines databases.{name} with --config"
            )
            return 2
    out = out or folder / "runs" / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    app = App(settings, ["query_database", "query_metrics", "file_reader", "run_python"])
    started = time.monotonic()
    try:
        run = Replay(
            app.runner.run_step, app.tools, app.artifacts, f"analysis-{folder.name}", values, progress=_progress(echo)
        )
        try:
            run_steps(run, list(manifest.get("steps") or []))
        except StepFailed as failed:
            echo(f"FAILED at step {failed.step}: {failed.failure.message}")
            return 1
        except ToolFailure as failure:
            echo(f"FAILED: {failure.message}")
            return 1
        lines = write_outputs(app, run.outputs, out, manifest, values, values == defaults, time.monotonic() - started)
    finally:
        app.close()
    for line in lines:
        echo(line)
    echo(f"report: {out / 'report.html'}")
    if open_report:
        import webbrowser

        webbrowser.open((out / "report.html").as_uri())
    return 0


def _progress(echo: Callable[[str], None]) -> Callable[[str, str], None]:
    """Each step as it starts, on stderr: stdout opens with the headline and the conclusions."""
    import sys

    if echo is print:
        return lambda step, text: print(f"step {step}: {text}", file=sys.stderr)
    return lambda step, text: echo(f"step {step}: {text}")


def write_outputs(
    app: Any,
    outputs: list[Output],
    out: Path,
    manifest: dict[str, Any],
    values: dict[str, Any],
    same_parameters: bool,
    seconds: float,
) -> list[str]:
    """Every output into ``out`` (tables as Parquet and CSV, figures as PNG), ``report.md`` and ``report.html``;
    the lines to print: the headline and the conclusions (those that no longer hold first), then one line per
    output saying whether it is the same as the saved run."""
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    from ba_mcp.analyses.conclusions import check, ordered
    from ba_mcp.analyses.report import Shown, headline, render_html, render_markdown

    expected = {o["name"]: o for o in manifest.get("outputs") or []}
    steps = {str(s.get("id")): s for s in manifest.get("steps") or []}
    shown: list[Shown] = []
    tables = {}
    for o in outputs:
        meta = app.artifacts.get(o.artifact_id)
        facts = o.facts()
        item = Shown(
            o.name,
            o.kind,
            steps.get(o.step, {}),
            describe_change(expected.get(o.name), facts, same_parameters),
            "",
            expected=expected.get(o.name) or {},
            facts=facts,
        )
        if o.kind == "table":
            _, frame = app.artifacts.read_table(o.artifact_id)
            pq.write_table(frame, out / f"{o.name}.parquet")
            pcsv.write_csv(frame, out / f"{o.name}.csv")
            item.files, item.frame, tables[o.name] = f"{o.name}.parquet, {o.name}.csv", frame, frame
        else:
            item.png = app.artifacts.data_path(meta).read_bytes()
            (out / f"{o.name}.png").write_bytes(item.png)
            item.files = f"{o.name}.png"
        item.artifact_title = str(meta.title or "")
        shown.append(item)
    statuses = check(list(manifest.get("conclusions") or []), tables)
    lines = [headline(shown, statuses, same_parameters)]
    lines += [f"conclusion {s.line()}" for s in ordered(statuses)]
    lines += [f"{o.name} ({o.title}): {o.change}" for o in shown]
    (out / "report.md").write_text(
        render_markdown(manifest, values, shown, statuses, seconds, same_parameters), encoding="utf-8"
    )
    (out / "report.html").write_text(
        render_html(manifest, values, shown, statuses, seconds, same_parameters), encoding="utf-8"
    )
    return lines
