"""A saved analysis: the calls of a conversation chosen as steps, their literal values turned into
parameters, written as ``analyses/<name>/`` — ``analysis.yaml`` (steps with their SQL and code, parameters,
databases and inputs used, the expected outputs with their digests: data, never code run on the host) and
``analysis.py`` (one fixed launcher that replays the manifest beside it, parameters as ``--flags``) —
atomically.

``plan`` turns the session's provenance records into steps (no parsing here: finding a parameter's literal in a
step's SQL or code is the engine worker's ``placeholders`` operation, given as ``place``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ba_mcp import callers
from ba_mcp.errors import ErrorType, ToolFailure

_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: the same, ~10x faster
NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
PARAM = re.compile(r"^[a-z_][a-z0-9_]{0,39}$")
REPLAYABLE = ("query_database", "query_metrics", "file_reader", "run_python")

# (kind sql|filter|code, text, values) -> text, the parameters found, what cuts a statement's result (``sql_cut``)
Place = Callable[[str, str, dict[str, Any]], tuple[str, list[str], dict[str, Any]]]


def bad(message: str, hint: str = "", code: str = "BAD_ANALYSIS") -> ToolFailure:
    return ToolFailure(ErrorType.VALIDATION_ERROR, code, message, hint)


@dataclass
class Step:
    id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]  # what the replay passes (sql/code carry the placeholders)
    inputs: list[str] = field(default_factory=list)  # artifact ids of earlier steps its code names
    links: dict[str, str] = field(default_factory=dict)  # artifact id of the conversation -> output name

    def manifest(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "call_id": self.call_id,
            "tool": self.tool,
            **self.arguments,
            "inputs": self.inputs,
            "links": self.links,
        }


@dataclass
class Plan:
    name: str
    description: str
    parameters: dict[str, dict[str, Any]]
    steps: list[Step]
    databases: list[str]
    inputs: list[dict[str, Any]]  # workspace files the steps read (refs with size and time)


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):  # fullmatch: no name ending in a newline
        raise bad(
            f"analysis name {name[:80]!r}: lowercase letters, digits, '-' and '_' (no '/', no '..'), 64 at most",
            "e.g. monthly-review",
            code="BAD_NAME",
        )
    return name


def chosen(history: list[Any], steps: list[str] | str) -> list[Any]:
    """The records ``steps`` names — call ids, artifact ids (the call that wrote it), or ``last:N`` (the last N
    successful replayable calls) — in the order they ran; an unknown id is an error naming it."""
    done = [r for r in history if r.success]
    wanted = [steps] if isinstance(steps, str) else list(steps)
    picked: dict[str, Any] = {}
    for item in wanted:
        item = str(item).strip()
        if m := re.fullmatch(r"last:(\d{1,3})", item):
            n = int(m.group(1))
            recent = [r for r in done if r.tool in REPLAYABLE][-n:] if n else []
            if len(recent) < n:
                raise bad(f"'{item}': this session has {len(recent)} successful calls to save", code="UNKNOWN_STEP")
            picked.update({r.call_id: r for r in recent})
            continue
        found = [r for r in done if r.call_id == item or item in r.artifacts or _saved(r, item)]
        if not found:
            raise bad(
                f"step '{item[:60]}' is no successful call of this session (nor an artifact one wrote)",
                "read ba://history for the call ids, or use last:N",
                code="UNKNOWN_STEP",
            )
        picked[found[-1].call_id] = found[-1]
    records = sorted(picked.values(), key=lambda r: r.timestamp)
    for r in records:
        if r.tool not in REPLAYABLE:
            raise bad(
                f"step {r.call_id} is a {r.tool} call, which a saved analysis cannot re-run",
                f"steps are calls of {', '.join(REPLAYABLE)}",
                code="UNKNOWN_STEP",
            )
    return records


def _saved(record: Any, artifact_id: str) -> bool:
    return any(h.get("id") == artifact_id for h in record.provenance.get("helpers", []))


def plan(name: str, description: str, records: list[Any], parameters: dict[str, Any], place: Place) -> Plan:
    """The steps of ``records`` with ``parameters`` (name -> the literal value it replaces) found in them."""
    for pname, value in parameters.items():
        if not PARAM.match(pname):
            raise bad(f"parameter name {pname!r}: lowercase letters, digits and '_'", code="BAD_PARAMETER")
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise bad(f"parameter {pname}: a text or a number, the literal it replaces", code="BAD_PARAMETER")
    steps: list[Step] = []
    made: dict[str, str] = {}  # artifact id of the conversation -> the step that made it
    found: set[str] = set()
    databases: list[str] = []
    inputs: list[dict[str, Any]] = []
    for i, r in enumerate(records, 1):
        sid = f"s{i}"
        prov = r.provenance
        if prov.get("dropped"):
            raise bad(f"step {r.call_id} cannot be saved: {prov['dropped']}", code="UNKNOWN_STEP")
        args = {k: v for k, v in r.arguments.items() if k not in ("output_level", "timeout", "reset")}
        step = Step(sid, r.call_id, r.tool, {})
        if r.tool == "query_database":
            given = prov.get("params")
            binds = bound_params(given, parameters)  # the engine's own $1 / ? / $name entries a parameter binds
            found.update(binds.values())
            text = str(prov.get("sql") or args.get("query", ""))
            # positional values and a $name placed in the text cannot meet in one statement: a parameter whose
            # literal is in the SQL of a step with a params array is refused, saying how to pass it
            sql, names, cut = place("sql", text, {n: v for n, v in parameters.items() if n not in binds.values()})
            if names and isinstance(given, list):
                raise bad(
                    f"parameter {names[0]}: its value {parameters[names[0]]!r} is written in the SQL of step {sid}, "
                    "which passes its other values as params",
                    f"run the query again with that value as a params entry too (${len(given) + 1}), then save",
                    code="BAD_PARAMETER",
                )
            found.update(names)
            step.arguments = {"database": prov.get("database", "demo"), "sql": sql, "params": given}
            if binds:
                step.arguments["binds"] = binds
            if cut:  # a LIMIT/OFFSET: a figure of this step's result covers what it kept (a top N), not the whole
                step.arguments["cut"] = cut
            databases.append(str(step.arguments["database"]))
        elif r.tool == "query_metrics":
            if args.get("where"):  # a literal inside a filter (ours or MetricFlow's) is a parameter too
                placed = [place("filter", str(w), parameters) for w in args["where"]]
                args = {**args, "where": [w for w, _, _ in placed]}
                found.update(n for _, names, _ in placed for n in names)
            step.arguments = {"metrics_query": args}
            databases.append(str(prov.get("database", "")))
        elif r.tool == "file_reader":
            step.arguments = {"read": args}
        else:  # run_python
            code, names, cut = place("code", str(args.get("code", "")), parameters)
            found.update(names)
            step.arguments = {"code": code}
            if cut:  # the value it ends with is a head(n) / nlargest(n): its figures cover those rows
                step.arguments["cut"] = cut
        for ref in prov.get("read", []):
            ref_id = str(ref.get("ref", ""))
            if ref_id.startswith("artifact_"):
                _needs(made, ref_id, sid)
                step.inputs.append(ref_id)
            else:
                inputs.append({**ref, "step": sid})
        for helper in prov.get("helpers", []):
            if helper.get("helper") == "load_artifact":
                _needs(made, str(helper["id"]), sid)
                step.inputs.append(str(helper["id"]))
        step.links = _links(sid, r)
        made.update({old: sid for old in step.links})
        steps.append(step)
    missing = sorted(set(parameters) - found)
    if missing:
        raise bad(
            f"parameter {missing[0]}: its value {parameters[missing[0]]!r} occurs in no step's SQL, params or code",
            "a parameter names a literal the steps contain (a date, a region, a number) or a value they pass in "
            "params ($1, ?)",
            code="BAD_PARAMETER",
        )
    typed = {p: {"type": type_of(v), "default": v} for p, v in parameters.items()}
    return Plan(name, description, typed, steps, sorted(set(d for d in databases if d)), inputs)


def bound_params(given: Any, parameters: dict[str, Any]) -> dict[Any, str]:
    """The entries of a step's ``params`` that are a parameter's value — position (1 for ``$1`` or the first
    ``?``) or ``$name`` key -> the parameter's name: an equal text, an equal number, or a number's text."""
    entries = list(enumerate(given, 1)) if isinstance(given, list) else list((given or {}).items())
    binds: dict[Any, str] = {}
    for key, entry in entries:
        for name, value in parameters.items():
            if _equal(entry, value):
                binds[key] = name
                break
    return binds


def bound_in(p: Plan, name: str) -> str:
    """Where a parameter binds a step's params entry, for the save's answer: ``; binds s1 $1, s2 $1``."""
    places = [f"{s.id} ${k}" for s in p.steps for k, n in (s.arguments.get("binds") or {}).items() if n == name]
    return "; binds " + ", ".join(places) if places else ""


def _equal(entry: Any, value: Any) -> bool:
    if isinstance(entry, bool) or isinstance(value, bool) or entry is None:
        return False
    if isinstance(entry, str):
        return entry == value if isinstance(value, str) else entry.strip() == str(value)
    return isinstance(entry, int | float) and isinstance(value, int | float) and entry == value


def _needs(made: dict[str, str], artifact_id: str, step: str) -> None:
    if artifact_id not in made:
        raise bad(
            f"step {step} reads {artifact_id}, which no earlier step of the analysis made",
            "add the call that made it to the steps (ba://history names it)",
            code="MISSING_STEP",
        )


def _links(sid: str, record: Any) -> dict[str, str]:
    """The artifacts the conversation's call wrote, each paired with the name of the replay's output."""
    links: dict[str, str] = {}
    wrote = record.provenance.get("wrote", [])
    if record.tool != "run_python":
        for w in wrote[:1]:
            links[w["id"]] = f"{sid}_table"
        return links
    saved = [h["id"] for h in record.provenance.get("helpers", []) if h.get("helper") == "save_artifact"]
    for k, aid in enumerate(saved, 1):
        links[aid] = f"{sid}_saved{k}"
    figures = 0
    for w in wrote:
        if w["id"] in links:
            continue
        kind = w.get("kind")
        if kind == "table":
            links[w["id"]] = f"{sid}_value"
        elif kind == "image":
            figures += 1
            links[w["id"]] = f"{sid}_figure{figures}"
    return links


# -- the folder -------------------------------------------------------------------------------------------


SCRIPT = """#!/usr/bin/env python3
\"\"\"A saved ba-mcp analysis. Its steps, SQL, code and parameters are data in analysis.yaml beside this file;
this launcher reads them and replays them through ba-mcp's engines and sandbox (the same as
`ba-mcp analyses run NAME`). Parameters are --flags: python analysis.py --help lists them.\"\"\"

import sys

from ba_mcp.rerun import main

if __name__ == "__main__":
    sys.exit(main(__file__))
"""


def script() -> str:
    """``analysis.py``: the same launcher for every analysis — nothing the model wrote (a name, a description,
    SQL, code, a literal) is ever Python source; it all stays data in ``analysis.yaml`` (S-13)."""
    return SCRIPT


def write(
    folder: Path,
    p: Plan,
    outputs: list[dict[str, Any]],
    overwrite: bool,
    conclusions: list[dict[str, Any]] | None = None,
) -> Path:
    """``analyses/<name>/`` written whole or not at all: a temporary folder beside it, renamed into place."""
    target = folder / p.name
    if target.exists() and not overwrite:
        raise bad(f"an analysis named {p.name} exists", "choose another name, or pass overwrite: true", code="EXISTS")
    folder.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{p.name}.", dir=folder))
    try:
        (tmp / "analysis.py").write_text(script(), encoding="utf-8")
        os.chmod(tmp / "analysis.py", 0o755)  # a script with a #! line
        manifest = {
            "name": p.name,
            "owner": callers.new_owners()[0],  # the session that saved it (S-9: another session does not see it)
            "by": callers.principal().display,  # who that is, for people (listings, a publication's owner)
            "description": p.description,
            "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "parameters": p.parameters,
            "databases": p.databases,
            "inputs": p.inputs,
            "steps": [s.manifest() for s in p.steps],
            "outputs": outputs,
            "conclusions": conclusions or [],
        }
        (tmp / "analysis.yaml").write_text(
            yaml.safe_dump(manifest, sort_keys=False, allow_unicode=True), encoding="utf-8"
        )
        os.chmod(tmp, 0o755)
        if target.exists():
            old = folder / f".{p.name}.old.{os.getpid()}"
            os.replace(target, old)
            os.replace(tmp, target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def read_manifest(folder: Path, name: str, shared: bool = False) -> dict[str, Any]:
    """The manifest of the analysis ``name`` — when the calling session may see it: the one that saved it, any
    session when ``shared`` (``artifacts.shared``), the operator always (``callers.EVERYONE``). Another session's
    analysis is as unknown as one never saved."""
    check_name(name)
    path = folder / name / "analysis.yaml"
    data = _load(path)
    if data is None or not visible(data, shared):
        raise unknown(name, folder, shared)
    return data


def unknown(name: str, folder: Path, shared: bool = False, published: list[str] | None = None) -> ToolFailure:
    """The one answer for an analysis the caller cannot see — never saved, another's, or no longer published: the
    caller's own analyses and those published to them."""
    hint = "saved: " + (", ".join(listed(folder, shared)) or "none")
    if published:
        hint += "; published: " + ", ".join(published)
    return ToolFailure(ErrorType.NOT_FOUND, "UNKNOWN_ANALYSIS", f"no analysis named {name[:200]}", hint)


def _load(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)
    return data if isinstance(data, dict) else {}


def visible(manifest: dict[str, Any], shared: bool = False) -> bool:
    """Whether the calling session may see (list, read, run, overwrite) an analysis: one saved before owners were
    recorded belongs to the stdio session (``default``)."""
    return callers.may_read([str(manifest.get("owner") or callers.DEFAULT)], shared)


def exists(folder: Path, name: str) -> bool:
    """Whether an analysis named ``name`` is in ``folder`` (the caller's own: a name is each principal's)."""
    return (folder / name).exists()


def move_to_owners(folder: Path, folder_of: Callable[[str], Path]) -> list[str]:
    """Analyses saved in the workspace's ``analyses/`` by a principal who now has a folder of their own
    (``folder_of(owner)``, None for the workspace's), moved there — an analysis saved before each principal had
    one is found where its owner now looks. One already there of that name is left where it is. Returns the
    names moved."""
    moved = []
    for name in listed(folder, shared=True):
        owner = str((_load(folder / name / "analysis.yaml") or {}).get("owner") or callers.DEFAULT)
        target = folder_of(owner)
        if target == folder or (target / name).exists():
            continue
        target.mkdir(parents=True, exist_ok=True)
        os.replace(folder / name, target / name)
        moved.append(name)
    return moved


def listed(folder: Path, shared: bool = False) -> list[str]:
    """The analyses the calling session may see."""
    if not folder.is_dir():
        return []
    names = [p.name for p in folder.iterdir() if NAME.fullmatch(p.name) and (p / "analysis.yaml").is_file()]
    return sorted(n for n in names if visible(_load(folder / n / "analysis.yaml") or {}, shared))


TYPES = ("date", "timestamp", "integer", "number", "text")
_OLD_TYPES = {"str": "text", "int": "integer", "float": "number"}  # manifests written before types were named
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?")


def type_of(value: Any) -> str:
    """A parameter's type, from the literal it replaces: an ISO date or timestamp, an integer, a number, a text."""
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    text = str(value)
    if _DATE.fullmatch(text) and _valid(text, "date"):
        return "date"
    if _TIMESTAMP.fullmatch(text) and _valid(text, "timestamp"):
        return "timestamp"
    return "text"


def _valid(text: str, kind: str) -> bool:
    import datetime as dt

    try:
        if kind == "date":
            dt.date.fromisoformat(text)
        else:
            dt.datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def typed_values(parameters: dict[str, dict[str, Any]], given: dict[str, Any]) -> dict[str, Any]:
    """The run's parameter values: defaults, then ``given`` checked against each parameter's type — before any step
    runs (an unknown name or a value of the wrong type is an error naming it). Dates and timestamps travel as
    their ISO text (bound, or CAST where the step wrote DATE '…')."""
    values = {n: spec.get("default") for n, spec in parameters.items()}
    for n, raw in given.items():
        if n not in parameters:
            raise bad(f"no parameter named {n}", f"parameters: {', '.join(parameters) or 'none'}", code="BAD_PARAMETER")
        kind = str(parameters[n].get("type", "text"))
        kind = _OLD_TYPES.get(kind, kind)
        shown = repr(str(raw)[:40])
        example = {"date": "2025-01-01", "timestamp": "2025-01-01 08:00:00", "integer": "12", "number": "0.5"}
        try:
            if kind == "integer":
                if (isinstance(raw, float) and not raw.is_integer()) or isinstance(raw, bool):
                    raise ValueError
                values[n] = int(str(raw).strip()) if not isinstance(raw, int | float) else int(raw)
            elif kind == "number":
                if isinstance(raw, bool):
                    raise ValueError
                values[n] = float(raw)
            elif kind in ("date", "timestamp"):
                text = str(raw).strip()
                pattern = _DATE if kind == "date" else _TIMESTAMP
                if not (pattern.fullmatch(text) or (kind == "timestamp" and _DATE.fullmatch(text))):
                    raise ValueError
                if not _valid(text, kind):
                    raise ValueError
                values[n] = text
            else:
                values[n] = str(raw)
        except (TypeError, ValueError):
            hint = f"e.g. {n}={example[kind]}" if kind in example else ""
            raise bad(f"parameter {n} is of type {kind}; {shown} is not one", hint, code="BAD_PARAMETER") from None
    return values


def describe_change(expected: dict[str, Any] | None, got: dict[str, Any], same_parameters: bool) -> str:
    """One output's line: ``same``, or what changed (rows, numeric totals) against the saved run."""
    if expected is None:
        return "new (the saved run had no such output)"
    if expected.get("sha256") == got.get("sha256"):
        return "same" if same_parameters else "same as the saved run"
    if got.get("kind") != "table":
        return "changed"
    from ba_mcp.analyses.measures import change, number  # the server's start-up lists analyses, never compares

    parts = []
    if expected.get("rows") != got.get("rows"):
        parts.append(f"rows {expected.get('rows')} → {got.get('rows')}")
    of = f" of the {got['covers']}" if got.get("covers") else ""  # a cut result's total is not the whole's
    # only the columns that add up have totals; the others (rates, shares, scores) are compared as values
    for column, total in (got.get("totals") or {}).items():
        before = (expected.get("totals") or {}).get(column)
        if before is not None and abs(float(before) - float(total)) > 1e-9 * max(1.0, abs(float(before))):
            parts.append(f"{column} total{of} {change(float(before), float(total))}")
    for column, (low, high) in (got.get("ranges") or {}).items():
        was = (expected.get("ranges") or {}).get(column)
        if was is not None and [float(v) for v in was] != [float(low), float(high)]:
            if float(was[0]) == float(was[1]) and low == high:  # one row: the value itself
                parts.append(f"{column} {number(was[0])} → {number(low)}")
            else:
                parts.append(f"{column} from {number(was[0])}..{number(was[1])} to {number(low)}..{number(high)}")
    return "changed: " + ("; ".join(parts) if parts else "values differ, totals and rows the same")


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
