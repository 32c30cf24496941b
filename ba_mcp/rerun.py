"""A saved analysis run with no MCP client and no model: ``python analysis.py`` and ``ba-mcp analyses run``.

An App of its own over the analysis's workspace (the same settings, engines, sandbox and boundaries as the
server) replays the steps of ``analysis.yaml`` (``replay.run_steps``: data, never imported code); the outputs
are written beneath ``--out`` (default
``analyses/<name>/runs/<time>/``) — tables as Parquet and CSV, figures as PNG — with ``report.md`` and a
self-contained ``report.html``, and one line per output says whether it is the same as the saved run.
"""

from __future__ import annotations

import argparse
import base64
import html
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
                f"--{name}", default=None, help=f"{spec.get('type', 'str')}, default {spec.get('default')!r}"
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
) -> int:
    """Run the analysis in ``folder`` (``<workspace>/analyses/<name>``) with the configuration ``config`` (else
    the ``ba-mcp.yaml`` of the current folder, as every command): 0 when every step ran."""
    from ba_mcp.app import App
    from ba_mcp.errors import ToolFailure
    from ba_mcp.settings import ConfigError, config_file, load_settings

    manifest = read_manifest(folder.parent, folder.name, shared=True)  # the operator runs it
    values = typed_values(manifest.get("parameters") or {}, given)
    defaults = {n: s.get("default") for n, s in (manifest.get("parameters") or {}).items()}
    chosen = config_file(config)
    try:
        settings = load_settings(chosen, workspace=folder.parent.parent)
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
        run = Replay(app.tools, app.artifacts, f"analysis-{folder.name}", values, progress=_progress(echo))
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
    return 0


def _progress(echo: Callable[[str], None]) -> Callable[[str, str], None]:
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
    the lines that say, per output, whether it is the same as the saved run."""
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    expected = {o["name"]: o for o in manifest.get("outputs") or []}
    rows: list[tuple[Output, str, str]] = []  # output, its file(s), its change line
    for o in outputs:
        meta = app.artifacts.get(o.artifact_id)
        if o.kind == "table":
            _, frame = app.artifacts.read_table(o.artifact_id)
            pq.write_table(frame, out / f"{o.name}.parquet")
            pcsv.write_csv(frame, out / f"{o.name}.csv")
            files = f"{o.name}.parquet, {o.name}.csv"
        else:
            (out / f"{o.name}.png").write_bytes(app.artifacts.data_path(meta).read_bytes())
            files = f"{o.name}.png"
        rows.append((o, files, describe_change(expected.get(o.name), o.facts(), same_parameters)))
    lines = [f"{o.name}: {change}" for o, _, change in rows]
    (out / "report.md").write_text(_markdown(app, manifest, values, rows, seconds), encoding="utf-8")
    (out / "report.html").write_text(_html(app, manifest, values, rows, seconds), encoding="utf-8")
    return lines


def _markdown(app: Any, manifest: dict[str, Any], values: dict[str, Any], rows: list[Any], seconds: float) -> str:
    lines = [f"# {manifest.get('name')}", "", str(manifest.get("description") or ""), ""]
    lines += ["## Parameters", "", *[f"- {n} = {v!r}" for n, v in values.items()], ""]
    lines += [f"Run on {time.strftime('%Y-%m-%d %H:%M')} in {seconds:.1f} s.", "", "## Outputs", ""]
    for o, files, change in rows:
        lines += [f"### {o.name} — {change}", "", f"Files: {files}", ""]
        if o.kind == "table":
            _, frame = app.artifacts.read_table(o.artifact_id)
            head = frame.slice(0, 20).to_pylist()
            columns = frame.column_names
            lines.append("| " + " | ".join(columns) + " |")
            lines.append("|" + "---|" * len(columns))
            lines += ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in head]
            if frame.num_rows > 20:
                lines.append(f"\n… {frame.num_rows - 20:,} more rows in {o.name}.csv")
        else:
            lines.append(f"![{o.name}]({o.name}.png)")
        lines.append("")
    return "\n".join(lines)


def _html(app: Any, manifest: dict[str, Any], values: dict[str, Any], rows: list[Any], seconds: float) -> str:
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{e(str(manifest.get('name')))}</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}th{background:#eee}"
        ".same{color:#070}.changed{color:#a40}</style></head><body>",
        f"<h1>{e(str(manifest.get('name')))}</h1><p>{e(str(manifest.get('description') or ''))}</p>",
        "<h2>Parameters</h2><ul>",
        *[f"<li><code>{e(n)}</code> = <code>{e(repr(v))}</code></li>" for n, v in values.items()],
        f"</ul><p>Run on {e(time.strftime('%Y-%m-%d %H:%M'))} in {seconds:.1f} s.</p><h2>Outputs</h2>",
    ]
    for o, files, change in rows:
        css = "same" if change.startswith("same") else "changed"
        parts.append(
            f"<section class='output' id='{e(o.name)}'><h3>{e(o.name)} — <span class='{css}'>{e(change)}</span></h3>"
        )
        parts.append(f"<p>Files: {e(files)}</p>")
        if o.kind == "table":
            _, frame = app.artifacts.read_table(o.artifact_id)
            columns = frame.column_names
            parts.append("<table><tr>" + "".join(f"<th>{e(c)}</th>" for c in columns) + "</tr>")
            for r in frame.slice(0, 50).to_pylist():
                parts.append("<tr>" + "".join(f"<td>{e(str(r[c]))}</td>" for c in columns) + "</tr>")
            parts.append("</table>")
            if frame.num_rows > 50:
                parts.append(f"<p>… {frame.num_rows - 50:,} more rows in {e(o.name)}.csv</p>")
        else:
            data = app.artifacts.data_path(app.artifacts.get(o.artifact_id)).read_bytes()
            parts.append(f"<img alt='{e(o.name)}' src='data:image/png;base64,{base64.b64encode(data).decode()}'>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)
