"""Running a saved analysis's steps again, with no model: the manifest's steps (data — ``analysis.yaml``) each
through the same tool the conversation used (query_database, query_metrics, file_reader, run_python — so the
same engines, boundaries and sandbox), run by the server's runner like a live call (``Runner.run_step``: the
arguments validated, the timeout cancels the step's work in its engine or sandbox, the call kept in the run's
session history, usage and telemetry), its parameters bound, the artifact ids of earlier steps replaced by the
ones this run made. Nothing of a saved analysis is ever imported or executed as Python on the host (S-13).

``run_steps`` is what ``ba-mcp analyses run`` and ``analysis.py`` run (``ba_mcp.rerun`` gives the
Replay the tools of an App of its own); the tools ``save_analysis`` (a verifying first run) and ``run_analysis``
use it with the server's tools, in a session of the analysis's own (the conversation's interpreter is never
reset), the call's context as the parent (the call's timeout ends the step that is running).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ba_mcp.errors import ErrorType, ToolFailure, timed_out
from ba_mcp.results import Composite, Image, RawResult, Table
from ba_mcp.tool import ToolContext

if TYPE_CHECKING:
    import pyarrow as pa

    from ba_mcp.stores.artifacts import ArtifactStore
    from ba_mcp.tool import Tool

    # What runs a step: the server's runner's ``Runner.run_step`` (tool, arguments, session, timeout, the parent
    # call's context, what the tool's context carries) — a call like a client's, kept in the session's history.
    StepRunner = Callable[[Tool, dict[str, Any], str, float, ToolContext | None, dict[str, Any]], RawResult]


class StepFailed(Exception):
    """A step that failed, named."""

    def __init__(self, step: str, failure: ToolFailure) -> None:
        super().__init__(f"step {step} failed: {failure.message}")
        self.step = step
        self.failure = failure


@dataclass
class Output:
    step: str
    name: str  # s1_table, s3_figure1 …
    kind: str  # table | image
    artifact_id: str
    sha256: str
    rows: int | None = None
    totals: dict[str, float] = field(default_factory=dict)  # the sums of the columns that add up
    ranges: dict[str, list[float]] = field(default_factory=dict)  # min and max of the other numeric columns
    covers: str = ""  # a cut result (LIMIT, OFFSET): what its rows are — "top 10 vendors only"; "" the whole

    def facts(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "kind": self.kind, "sha256": self.sha256}
        if self.kind == "table":
            data["rows"] = self.rows
            data["totals"] = self.totals
            data["ranges"] = self.ranges
            if self.covers:
                data["covers"] = self.covers
        return data


class Replay:
    """One run of an analysis: ``sql``, ``metrics``, ``read`` and ``python`` steps in order, each returning the
    artifact ids it produced (a table step: its complete table)."""

    def __init__(
        self,
        runner: StepRunner,
        tools: dict[str, Tool],
        artifacts: ArtifactStore,
        session: str,
        values: dict[str, Any],
        progress: Any = None,
        timeout: float = 300.0,
        parent: ToolContext | None = None,
    ) -> None:
        self.run_step = runner
        self.tools = tools
        self.artifacts = artifacts
        self.session = session
        self.values = dict(values)
        self.progress = progress or (lambda step, text: None)
        self.timeout = timeout
        self.parent = parent
        self.outputs: list[Output] = []
        self.ids: dict[str, str] = {}  # an artifact id of the saved run -> the one this run made
        self.started = time.monotonic()
        self._python_steps = 0

    # -- steps ------------------------------------------------------------------------------------------

    def sql(
        self,
        step: str,
        database: str,
        sql: str,
        params: dict[str, Any] | list[Any] | None = None,
        inputs: list[str] | None = None,
        binds: dict[Any, str] | None = None,
        cut: dict[str, Any] | None = None,
    ) -> list[str]:
        """A query_database step: ``$name`` placeholders and the ``params`` entries a parameter binds (``binds``:
        position or key -> parameter) given this run's values; the artifacts of earlier steps it reads are this
        run's."""
        sql = self._inputs(step, sql, inputs)
        bound = bound_params(sql, params, binds, self.values)
        if isinstance(bound, list) and any(f"${name}" in sql for name in self.values):
            raise StepFailed(step, _invalid("positional params and named parameters in one statement"))
        tool = self._tool(step, "query_database")
        raw = self._run(step, tool, {"query": sql, "database": database, "params": bound, "max_rows": 1000})
        made = self._table(step, raw, 1)
        if cut:  # a result the statement cut (LIMIT n with n rows back): its figures cover those rows only
            self._covers(cut, bound, self.artifacts.read_table(made)[1])
        return [made]

    def _covers(self, cut: dict[str, Any] | None, bound: Any, frame: pa.Table) -> None:
        """The last output, a result cut to ``limit`` rows (a LIMIT, a head(n)) that came back with as many, or
        filtered (a WHERE, a mask, ``query()``: ``cut["where"]``): what its rows are ("top 10 vendors only", "the
        rows where region = 'north'"), which every figure of it says. A manifest saved before filters were read
        has no ``where``: its figures are labelled as they were."""
        if not cut:
            return
        from ba_mcp.analyses.measures import covers, filtered

        limit, offset = _given(cut.get("limit"), bound), _given(cut.get("offset"), bound) or 0
        output = self.outputs[-1]
        said = ""
        if isinstance(limit, int) and output.rows is not None and output.rows >= limit > 0:
            said = covers(output.rows, bool(cut.get("ordered")), int(offset), frame)
        if cut.get("where"):
            said = filtered(said, with_values(str(cut["where"]), bound, self.values))
        if said:
            output.covers = said

    def metrics(self, step: str, arguments: dict[str, Any]) -> list[str]:
        """A query_metrics step: each ``${name}`` in its filters written as this run's value, a literal of its type
        (the values were checked against their types before any step: ``typed_values``)."""
        if arguments.get("where"):
            arguments = {**arguments, "where": [self._filled(str(w)) for w in arguments["where"]]}
        raw = self._run(step, self._tool(step, "query_metrics"), arguments)
        return [self._table(step, raw, 1)]

    def _filled(self, text: str) -> str:
        def literal(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in self.values:
                return match.group(0)
            value = self.values[name]
            if isinstance(value, int | float) and not isinstance(value, bool):
                return repr(value)
            return "'" + str(value).replace("'", "''") + "'"

        return re.sub(r"\$\{([a-z_][a-z0-9_]*)\}", literal, text)

    def read(self, step: str, arguments: dict[str, Any]) -> list[str]:
        raw = self._run(step, self._tool(step, "file_reader"), arguments)
        if not isinstance(raw, Table):
            raise StepFailed(step, _invalid("the file read is not a table"))
        if raw.more and not raw.artifact_id and not {"offset", "nrows"} & arguments.keys():
            raise StepFailed(
                step,
                _invalid(
                    "the read gave only the first rows of the file, and more follow: read the rows the analysis "
                    "needs (offset, nrows), or query the whole file with query_database"
                ),
            )
        return [self._table(step, raw, 1, window=True)]  # the rows the step asked for, as the step gave them

    def python(
        self, step: str, code: str, inputs: list[str] | None = None, cut: dict[str, Any] | None = None
    ) -> list[str]:
        """A run_python step: the earlier steps' artifact ids in its code replaced by this run's, the parameters
        given as ``PARAMS``; the first Python step starts a fresh interpreter."""
        code = f"PARAMS = {self.values!r}\n{self._inputs(step, code, inputs)}"
        self._python_steps += 1
        tool = self._tool(step, "run_python")
        raw = self._run(step, tool, {"code": code, "reset": self._python_steps == 1})
        made: list[str] = []
        saved = [h["id"] for h in raw.provenance.get("helpers", []) if h.get("helper") == "save_artifact"]
        for aid in saved:
            made.append(self._add(step, f"{step}_saved{len(made) + 1}", aid))
        figures = 0
        for label, part in raw.parts if isinstance(raw, Composite) else []:
            if label == "value" and isinstance(part, Table):
                meta = self.artifacts.put_table(part.frame, title=f"{step}: value", source_tool="run_analysis")
                made.append(self._add(step, f"{step}_value", meta.id, part.frame))
                self._covers(cut, self.values, part.frame)  # the value is a head(n) / nlargest(n) of a table
            elif isinstance(part, Image):
                figures += 1
                meta = self.artifacts.put_image(part.data, title=part.title, source_tool="run_analysis", mime=part.mime)
                made.append(self._add(step, f"{step}_figure{figures}", meta.id))
        return made

    def link(self, names: dict[str, str]) -> None:
        """Artifact ids of the saved conversation, each the output of this run named (``s1_table``, …): a later
        step's code that names the old id reads this run's."""
        made = {o.name: o.artifact_id for o in self.outputs}
        for old, name in names.items():
            if name in made:
                self.ids[old] = made[name]

    # -- pieces -----------------------------------------------------------------------------------------

    def _inputs(self, step: str, text: str, inputs: list[str] | None) -> str:
        """``text`` with each artifact id of an earlier step replaced by the one this run made."""
        for old in inputs or []:
            if old not in self.ids:
                raise StepFailed(step, _invalid(f"{old} comes from no earlier step"))
            text = text.replace(old, self.ids[old])
        return text

    def _tool(self, step: str, name: str) -> Tool:
        tool = self.tools.get(name)
        if tool is None:
            raise StepFailed(step, _invalid(f"{name} is not served here (tools.{name}.enabled)"))
        return tool

    def _run(self, step: str, tool: Tool, arguments: dict[str, Any]) -> Any:
        self.progress(step, f"{tool.name} …")
        try:
            left = self.timeout - (time.monotonic() - self.started)
            if left <= 0 or (self.parent is not None and self.parent.cancelled.is_set()):
                raise timed_out(f"the analysis did not finish within {self.timeout:g} s")
            arguments = {k: v for k, v in arguments.items() if v is not None}
            # a step's export() refreshes the file it wrote when the analysis was made
            raw = self.run_step(tool, arguments, self.session, left, self.parent, {"replay": True})
        except ToolFailure as failure:
            if failure.type is ErrorType.TIMEOUT:
                failure = timed_out(f"the analysis did not finish within {self.timeout:g} s ({tool.name} stopped)")
            raise StepFailed(step, failure) from None
        return raw

    def _table(self, step: str, raw: Any, n: int, window: bool = False) -> str:
        if not isinstance(raw, Table):
            raise StepFailed(step, _invalid("the step did not give a table"))
        if raw.more and not raw.artifact_id and not window:
            raise StepFailed(step, _invalid("the step's result exceeds the artifact size limit"))
        if raw.artifact_id:
            _, frame = self.artifacts.read_table(raw.artifact_id)
            return self._add(step, f"{step}_table", raw.artifact_id, frame)
        meta = self.artifacts.put_table(raw.frame, title=raw.title, source_tool="run_analysis")
        return self._add(step, f"{step}_table", meta.id, raw.frame)

    def _add(self, step: str, name: str, artifact_id: str, frame: pa.Table | None = None) -> str:
        meta = self.artifacts.get(artifact_id)
        output = Output(step, name, "table" if meta.kind == "table" else meta.kind, artifact_id, meta.sha256)
        if frame is None and meta.kind == "table":
            _, frame = self.artifacts.read_table(artifact_id)
        if frame is not None:
            output.rows = frame.num_rows
            output.totals, output.ranges = _measures(frame)
        self.outputs.append(output)
        return artifact_id


def run_steps(run: Replay, steps: list[Any]) -> None:
    """The steps of a manifest (``analysis.yaml``) in order — data only: each names one of four tools and its
    arguments; anything else is refused, naming the step."""
    for number, step in enumerate(steps, 1):
        if not isinstance(step, dict) or not isinstance(step.get("id"), str | int):
            raise StepFailed(f"#{number}", _invalid("a step of analysis.yaml is not a mapping with an id"))
        sid, tool = str(step["id"]), step.get("tool")
        if tool == "query_database":
            sql, inputs = str(step["sql"]), list(step.get("inputs") or [])
            binds, cut = dict(step.get("binds") or {}), dict(step.get("cut") or {})
            run.sql(sid, str(step["database"]), sql, step.get("params"), inputs, binds, cut)
        elif tool == "query_metrics":
            run.metrics(sid, dict(step["metrics_query"]))
        elif tool == "file_reader":
            run.read(sid, dict(step["read"]))
        elif tool == "run_python":
            run.python(sid, str(step["code"]), list(step.get("inputs") or []), dict(step.get("cut") or {}))
        else:
            raise StepFailed(sid, _invalid(f"a {tool} step cannot be re-run"))
        run.link(dict(step.get("links") or {}))


def bound_params(
    sql: str, params: dict[str, Any] | list[Any] | None, binds: dict[Any, str] | None, values: dict[str, Any]
) -> dict[str, Any] | list[Any] | None:
    """The ``params`` a step's statement runs with: each entry a parameter binds (``binds``: 1-based position or
    ``$name`` key -> parameter) given the run's value — as text where the saved entry was text, so the statement
    binds as it did — and each ``$name`` the SQL carries for a parameter (its literal was in the SQL)."""
    bound: dict[str, Any] | list[Any] | None = params
    if binds and isinstance(params, list):
        bound = list(params)
        for key, name in binds.items():
            at = int(key) - 1
            if name in values and 0 <= at < len(bound):
                bound[at] = _as_entry(params[at], values[name])
    elif binds and isinstance(params, dict):
        bound = {**params, **{k: _as_entry(params.get(k), values[n]) for k, n in binds.items() if n in values}}
    used = {name: value for name, value in values.items() if f"${name}" in sql}
    if used and not isinstance(bound, list):
        bound = {**(bound or {}), **used}
    return bound


def statement_values(step: dict[str, Any], values: dict[str, Any]) -> list[str]:
    """What a query_database step's statement is bound to in a run, for people: ``$1 = '2014-01-01' (since)`` —
    each ``params`` entry (a parameter's named), then each ``$name`` of a parameter the SQL carries."""
    sql = str(step.get("sql") or "")
    params = step.get("params")
    binds = {str(k): n for k, n in dict(step.get("binds") or {}).items()}
    bound = bound_params(sql, params, step.get("binds"), values)
    lines: list[str] = []
    if isinstance(bound, list):
        for i, v in enumerate(bound, 1):
            named = binds.get(str(i))
            lines.append(f"${i} = {v!r}" + (f" ({named})" if named else ""))
    elif isinstance(bound, dict):
        for k, v in bound.items():
            named = binds.get(str(k)) or (k if k in values and f"${k}" in sql else None)
            lines.append(f"${k} = {v!r}" + (" (parameter)" if named == k else f" ({named})" if named else ""))
    return lines


_PLACEHOLDER = re.compile(r"\$(\d+)|\?(\d+)|\$([A-Za-z_]\w*)|PARAMS\[['\"]([A-Za-z_]\w*)['\"]\]")


def with_values(text: str, bound: dict[str, Any] | list[Any] | None, values: dict[str, Any]) -> str:
    """A filter's text with each placeholder (``$1``, ``?1``, ``$name``, ``PARAMS["name"]``) written as the value
    this run bound to it (a text quoted), so a label says what the rows are; one without a value stays as written."""

    def value(match: re.Match[str]) -> str:
        position = match.group(1) or match.group(2)
        name = match.group(3) or match.group(4)
        found: Any = _NONE
        if position and isinstance(bound, list) and 0 < int(position) <= len(bound):
            found = bound[int(position) - 1]
        elif name and isinstance(bound, dict) and name in bound:
            found = bound[name]
        elif name and name in values:
            found = values[name]
        if found is _NONE:
            return match.group(0)
        if isinstance(found, int | float) and not isinstance(found, bool):
            return repr(found)
        return "'" + str(found).replace("'", "''") + "'"

    return _PLACEHOLDER.sub(value, text)


_NONE = object()


def _given(at: Any, bound: dict[str, Any] | list[Any] | None) -> int | None:
    """A LIMIT's or OFFSET's number: as written, or the value its placeholder (``$1``, ``?1``, ``$name``) bound."""
    value: Any = at
    if isinstance(at, str) and at[:1] in ("$", "?"):
        key = at[1:]
        if isinstance(bound, list) and key.isdigit() and 0 < int(key) <= len(bound):
            value = bound[int(key) - 1]
        elif isinstance(bound, dict):
            value = bound.get(key)
    try:
        return int(str(value)) if value is not None and not isinstance(value, bool) else None
    except ValueError:
        return None


def _as_entry(saved: Any, value: Any) -> Any:
    return str(value) if isinstance(saved, str) and not isinstance(value, str) else value


def _measures(frame: pa.Table) -> tuple[dict[str, float], dict[str, list[float]]]:
    """What a changed output is described by: the sum of each column that adds up (an amount, a count), and the
    smallest and largest value of every other numeric column (a rate, a share, a score: never summed)."""
    from ba_mcp.analyses.measures import additive_column, column_total, dimension, numeric, value_range

    totals: dict[str, float] = {}
    ranges: dict[str, list[float]] = {}
    for name, column in zip(frame.column_names, frame.columns, strict=True):
        if not numeric(column.type) or dimension(name, column.type):
            continue
        if additive_column(name, column):
            value = column_total(column)
            totals[name] = round(float(value), 6) if value is not None else 0.0
        elif frame.num_rows:
            span = value_range(column)
            if span is not None:
                ranges[name] = [round(float(span[0]), 6), round(float(span[1]), 6)]
    return totals, ranges


def _invalid(message: str) -> ToolFailure:
    return ToolFailure(ErrorType.VALIDATION_ERROR, "ANALYSIS_STEP", message)
