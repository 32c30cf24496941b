"""save_analysis and run_analysis: a conversation's calls kept as a re-runnable analysis, and one
re-run from the conversation.

save_analysis picks the session's calls (call ids, artifact ids, ``last:N``), finds each parameter's literal in
their SQL or code (in the session's engine worker: the text is the model's), runs the steps once — through the
same tools, in a session of the analysis's own, so the conversation's interpreter is left alone — and writes
``analyses/<name>/`` with the outputs' digests; ``publish`` shares one with the team, or stops sharing it
(``ba_mcp.analyses.published``). run_analysis runs the saved steps again with new parameters — the caller's own
analysis, or one published to them (``<handle>/<name>``), always as the caller: their session, workers and database
identity.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, field_validator

from ba_mcp import callers
from ba_mcp.errors import ErrorType, ToolFailure
from ba_mcp.results import Composite, Document, Image, RawResult, Table
from ba_mcp.settings import ToolSettings
from ba_mcp.tool import CacheMode, CachePolicy, Tool, ToolContext, ToolParams, ToolPolicy
from ba_mcp.workers.messages import Placeholders
from ba_mcp.workers.work import placeholders

if TYPE_CHECKING:
    from ba_mcp.analyses.replay import Replay
    from ba_mcp.pipeline.sessions import Sessions
    from ba_mcp.stores.artifacts import ArtifactStore
    from ba_mcp.tools.services import Served, Services
    from ba_mcp.workers.duckworkers import DuckWorkers


class SaveAnalysisParams(ToolParams):
    name: str
    steps: Annotated[list[str], Field(default_factory=list, description="call ids (ba://history) or 'last:N'")]
    parameters: Annotated[dict[str, Any], Field(default_factory=dict)]
    description: str = ""
    overwrite: bool = False
    conclusions: Annotated[list[dict[str, Any]], Field(default_factory=list)]  # analysis-workflow says how
    publish: bool | None = None  # true: the team reads and re-runs it; false: no longer; no steps: the saved one

    @field_validator("steps", mode="before")
    @classmethod
    def _one(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("parameters")
    @classmethod
    def _literals(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name, literal in value.items():
            if not isinstance(literal, str | int | float) or isinstance(literal, bool):
                raise ValueError(f"parameter {name}: a text or a number, the literal it replaces")
        return value


class RunAnalysisParams(ToolParams):
    name: str
    parameters: Annotated[dict[str, Any], Field(default_factory=dict)]
    timeout: float | None = Field(None, gt=0, description="seconds")


class AnalysesSettings(ToolSettings):
    """Both run every step within their timeout."""

    timeout_s: float = Field(300, gt=0)
    max_timeout_s: float = Field(1800, gt=0)


class _Analyses(Tool):
    """What both tools need: the caller's analyses/ (each principal's own folder on a server that keeps them
    apart), the published ones (the workspace's published/), the sibling tools, the artifact store."""

    policy = ToolPolicy(idempotent=False, read_only=False, cache=CachePolicy(CacheMode.NEVER))
    Settings = AnalysesSettings

    @classmethod
    def build(cls, services: Services) -> _Analyses:
        return cls(
            services.settings.tool(cls.name),
            lambda: services.workspace.own("analyses"),  # the caller's own: names are each principal's
            services,  # the tools served and their runner, known once all are built
            services.artifacts,
            services.duck_workers,
            services.sessions,
            services.settings.artifacts.shared,
            services.workspace.dir("published"),
        )

    def __init__(
        self,
        settings: ToolSettings,
        folder: Callable[[], Path],
        served: Served,
        artifacts: ArtifactStore,
        duck_workers: DuckWorkers,
        sessions: Sessions,
        shared: bool = False,
        published: Path | None = None,
    ) -> None:
        self.settings = settings
        self.folder = folder
        # the tools served and the server's runner: a step is a call like a client's (history, usage, telemetry)
        self.served = served
        self.artifacts = artifacts
        self.duck_workers = duck_workers
        self.sessions = sessions
        self.shared = shared  # artifacts.shared: every session sees every session's analyses
        self.published = published  # analyses published to the team (None: none are, none can be)

    def replay(self, ctx: ToolContext, values: dict[str, Any]) -> Replay:
        """A run in a session of the analysis's own (its interpreter, its engine worker; what it stores is that
        session's until the observer hands the outputs a call returns to the caller)."""
        from ba_mcp.analyses.replay import Replay  # the analyses' modules load on their first call, not at start-up

        session = f"{ctx.session}~analysis"
        served = self.served
        return Replay(
            served.runner.run_step, served.tools, self.artifacts, session, values, timeout=ctx.timeout, parent=ctx
        )

    def steps(self, run: Replay, steps: list[dict[str, Any]]) -> None:
        from ba_mcp.analyses.replay import run_steps

        with callers.acting_as(run.session):
            run_steps(run, steps)

    def deadline_grace(self) -> float:
        return 5.0


class SaveAnalysis(_Analyses):
    name = "save_analysis"
    title = "Save an analysis"
    description = (
        "Save calls as an analysis that re-runs without you; parameters: {name: literal to vary}; conclusions: skill "
        "analysis-workflow; publish: share with the team."
    )
    Params = SaveAnalysisParams
    offers_levels = False  # its answer is what was saved, a few lines

    def execute(self, params: SaveAnalysisParams, ctx: ToolContext) -> RawResult:
        from ba_mcp.analyses.manifest import bad, bound_in, check_name, chosen, exists, plan, read_manifest, write
        from ba_mcp.analyses.replay import StepFailed

        name = check_name(params.name)
        folder = self.folder()
        if not params.steps:
            if params.publish is None:
                raise bad("no steps given", "steps: call ids from ba://history, or 'last:N'", code="UNKNOWN_STEP")
            manifest = read_manifest(folder, name, self.shared)  # the caller's own, or unknown
            said = self._publication(name, manifest, params.publish, ctx)
            return Document(f"analysis {name}", said, meta={"analysis": name})
        if exists(folder, name):
            try:
                read_manifest(folder, name, self.shared)
            except ToolFailure:  # another session's: never overwritten, whatever was asked
                raise bad(f"an analysis named {name} exists", "choose another name", code="EXISTS") from None
            if not params.overwrite:
                hint = "choose another name, or pass overwrite: true"
                if params.publish is not None:
                    flag = str(params.publish).lower()
                    hint += f'; to publish it as saved: save_analysis(name="{name}", publish={flag}), no steps'
                raise bad(f"an analysis named {name} exists", hint, code="EXISTS")
        records = chosen(list(self.sessions(ctx.session).history), params.steps)
        p = plan(name, params.description, records, dict(params.parameters), self._placer(ctx))
        run = self.replay(ctx, {n: spec["default"] for n, spec in p.parameters.items()})
        try:
            self.steps(run, [s.manifest() for s in p.steps])
        except StepFailed as failed:
            raise ToolFailure(
                failed.failure.type,
                "STEP_FAILED",
                f"the analysis was not saved: step {failed.step} failed when run again: {failed.failure.message}",
                failed.failure.hint,
            ) from None
        outputs = [o.facts() for o in run.outputs]
        conclusions = self._conclusions(params.conclusions, p, run)
        target = write(folder, p, outputs, params.overwrite, conclusions)
        lines = [
            f"Saved analysis {name} in analyses/{name}/ (analysis.py, analysis.yaml): {len(p.steps)} steps "
            f"({', '.join(f'{s.id} {s.tool}' for s in p.steps)}), run once to record its outputs.",
            "Parameters: "
            + (
                ", ".join(
                    f"{n} ({s['type']}, default {s['default']!r}{bound_in(p, n)})" for n, s in p.parameters.items()
                )
                or "none"
            ),
            "Outputs: " + ", ".join(f"{o['name']} ({o['kind']})" for o in outputs),
            *[
                f"Conclusion recorded: “{c['text']}” ({c['rule']} of {c['output']} = {c['expected']!r})"
                for c in conclusions
            ],
            f"Re-run without a model: uv run ba-mcp analyses run {name}"
            + "".join(f" --param {n}=…" for n in p.parameters)
            + f'; here: run_analysis(name="{name}", parameters={{…}}).',
        ]
        del target
        if params.publish is not None or self._is_published(name, ctx):  # a copy published follows what is saved
            manifest = read_manifest(folder, name, self.shared)
            lines.append(self._publication(name, manifest, params.publish is not False, ctx))
        return Document(f"analysis {name}", "\n".join(lines), meta={"analysis": name})

    def _is_published(self, name: str, ctx: ToolContext) -> bool:
        from ba_mcp.analyses.published import of

        return self.published is not None and of(self.published, callers.principal_of(ctx.session), name) is not None

    def _publication(self, name: str, manifest: dict[str, Any], publish: bool, ctx: ToolContext) -> str:
        """Publish the caller's analysis ``name`` to the team (or refresh its published copy), or unpublish it."""
        from ba_mcp.analyses.published import publish as publish_
        from ba_mcp.analyses.published import unpublish

        owner = callers.principal_of(ctx.session)
        if self.shared:
            return (
                "Every user already reads and runs every analysis of this server (artifacts.shared): none is published."
            )
        if self.published is None:
            raise ToolFailure(ErrorType.VALIDATION_ERROR, "NO_TEAM", "this server publishes no analyses")
        if not publish:
            if unpublish(self.published, owner, name):
                return f"Unpublished {name}: unknown to every other user again; it stays saved for you."
            return f"{name} was not published."
        record = publish_(self.published, owner, callers.principal().display, manifest)
        alone = (
            " (this server's one user is you: it matters once the workspace serves a team)"
            if owner == callers.DEFAULT
            else ""
        )
        return (
            f"Published {name} to the team as {record.qualified}{alone}: every user may read it "
            f"(analysis://{record.qualified}) and re-run it as themselves — their own data access — "
            f'(run_analysis(name="{record.qualified}")); none may change it. Your run\'s figures are not shared. '
            f'Saving {name} again updates it; save_analysis(name="{name}", publish=false) unpublishes it.'
        )

    def _conclusions(self, items: list[dict[str, Any]], p: Any, run: Replay) -> list[dict[str, Any]]:
        """The conclusions given, each bound to an output (by its name or the conversation's artifact id) and with
        what its rule reads on this verifying run recorded as ``expected``."""
        if not items:
            return []
        from ba_mcp.analyses.conclusions import normalise, read

        links = {old: name for step in p.steps for old, name in step.links.items()}
        with callers.acting_as(run.session):  # the verifying run's outputs are its session's, shown or not
            tables = {o.name: self.artifacts.read_table(o.artifact_id)[1] for o in run.outputs if o.kind == "table"}
        for step in p.steps:  # a call id (ba://history) names its call's first table, whatever level showed it
            first = next((o.name for o in run.outputs if o.step == step.id and o.kind == "table"), None)
            if first:
                links.setdefault(step.call_id, first)
        made = normalise(items, list(tables), links)
        for c in made:
            c["expected"] = read(c, tables[c["output"]])
        return made

    def _placer(self, ctx: ToolContext) -> Callable[[str, str, dict[str, Any]], tuple[str, list[str], dict[str, Any]]]:
        def place(kind: str, text: str, values: dict[str, Any]) -> tuple[str, list[str], dict[str, Any]]:
            if not values and kind == "filter":  # SQL and code are always read: whether their result is cut (top N)
                return text, [], {}
            return placeholders(self.duck_workers, ctx, Placeholders(values, **{kind: text}))

        return place


class RunAnalysis(_Analyses):
    name = "run_analysis"
    view = "report"  # the MCP Apps view of its results (views/)
    title = "Run a saved analysis"
    description = "Re-run a saved analysis (analysis://catalog) with new parameters; says what changed."
    Params = RunAnalysisParams

    def execute(self, params: RunAnalysisParams, ctx: ToolContext) -> RawResult:
        from ba_mcp.analyses.conclusions import check, ordered, summary
        from ba_mcp.analyses.manifest import describe_change, read_manifest, typed_values
        from ba_mcp.analyses.published import read as read_published
        from ba_mcp.analyses.replay import StepFailed

        if self.published is None:
            manifest, record = read_manifest(self.folder(), params.name, self.shared), None
        else:  # the caller's own, or one published to them (<handle>/<name>): run as the caller either way
            owner = callers.principal_of(ctx.session)
            manifest, record = read_published(self.folder(), self.published, params.name, owner, self.shared)
        parameters = manifest.get("parameters") or {}
        values = typed_values(parameters, dict(params.parameters))
        defaults = {n: s.get("default") for n, s in parameters.items()}
        run = self.replay(ctx, values)
        try:
            self.steps(run, list(manifest.get("steps") or []))
        except StepFailed as failed:
            raise ToolFailure(
                failed.failure.type, "STEP_FAILED", f"step {failed.step} failed: {failed.failure.message}"
            ) from None
        expected = {o["name"]: o for o in manifest.get("outputs") or []}
        changes = [
            f"{o.name}: {describe_change(expected.get(o.name), o.facts(), values == defaults)}" for o in run.outputs
        ]
        parts: list[tuple[str, RawResult]] = []
        tables = {}
        for o in run.outputs:
            meta = self.artifacts.claim(o.artifact_id)  # this call made it: the caller's now
            if o.kind == "table":
                _, frame = self.artifacts.read_table(o.artifact_id)
                tables[o.name] = frame
                parts.append((o.name, Table(o.name, frame, total_rows=frame.num_rows, artifact_id=o.artifact_id)))
            elif o.kind == "image":
                data = self.artifacts.data_path(meta).read_bytes()
                parts.append((o.name, Image(o.name, data, artifact_id=o.artifact_id)))
        statuses = check(list(manifest.get("conclusions") or []), tables)
        if record is not None:  # another's analysis on the caller's data: the owner's figures are not theirs to see
            changes = [
                f"Run as you ({callers.principal().display}): {record.qualified} is {record.by}'s, published to the "
                "team; the figures of their run are not shared, so nothing is compared.",
                *[f"conclusion {s.reading()}" for s in statuses],
                *[f"{o.name}: " + (f"{o.rows} rows" if o.kind == "table" else o.kind) for o in run.outputs],
            ]
        elif statuses:  # the conclusions lead, those that no longer hold first
            changes = [summary(statuses), *[f"conclusion {s.line()}" for s in ordered(statuses)], *changes]
        parts.insert(0, ("summary", Document("what changed", "\n".join(changes))))
        shown = ", ".join(f"{n}={v!r}" for n, v in values.items())
        return Composite(
            f"analysis {params.name}" + (f" ({shown})" if shown else ""), parts, meta={"analysis": params.name}
        )
