"""dbt's semantic models and metrics, read as they are: a dbt project's ``target/semantic_manifest.json`` (what
``dbt parse`` writes) compiled by **MetricFlow itself** — the engine dbt's ``mf query`` runs — into the SQL of the
database it was built on, which ``query_metrics`` then runs like any metric (docs/metrics.md).

Why MetricFlow and not our compiler: measured on dbt Labs' jaffle-shop (bench/bench_dbt.py), MetricFlow compiles a
query in about 10 ms once imported (1.3 s, once per engine worker), and every metric kind dbt has — simple with
Jinja filters, ratio, derived with offsets, cumulative with its time-spine semantics, conversion, median — answers
exactly as ``mf query`` does, by construction; translating them into our model would re-implement MetricFlow and
drift from it. Runs in the engine worker (the ``metrics`` operation), never in the server: the manifest is data
from the project, and what a model sends (``where``) is MetricFlow's filter syntax, rendered into one SELECT that
the database's own read-only boundary then runs. Needs the ``dbt`` extra (``metricflow``).
"""

from __future__ import annotations

import json
from typing import Any

from ba_mcp.errors import ErrorType, ToolFailure


def _fail(code: str, message: str, hint: str = "") -> ToolFailure:
    return ToolFailure(ErrorType.VALIDATION_ERROR, code, message, hint)


def _window(window: Any) -> str:
    count = int(window.count)
    unit = str(getattr(window, "granularity", "")).lower().removeprefix("timegranularity.")
    return f"{count} {unit}" + ("s" if count != 1 and not unit.endswith("s") else "")


def _grain(group_by: list[str]) -> str | None:
    """The metric_time grain a query groups by (None: none)."""
    for name in group_by:
        parts = str(name).split("__")
        if parts[0] == "metric_time":
            return parts[1] if len(parts) > 1 else "day"
    return None


class _Renderer:
    """The SqlClient MetricFlow plans with: its engine and renderer (the registry's ``metricflow``); it never runs
    SQL (ba-mcp does)."""

    def __init__(self, renderer: str) -> None:
        import importlib

        from metricflow.protocols.sql_client import SqlEngine

        module, cls, engine = renderer.split(":")
        self._renderer = getattr(importlib.import_module(module), cls)()
        self._engine = getattr(SqlEngine, engine)

    @property
    def sql_engine_type(self) -> Any:
        return self._engine

    @property
    def sql_plan_renderer(self) -> Any:
        return self._renderer

    def render_bind_parameter_key(self, key: str) -> str:
        return f"${key}"

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ba-mcp runs the SQL MetricFlow writes; MetricFlow runs none")

    query = execute = dry_run = _refuse

    def close(self) -> None:
        pass


def _relations_on(data: Any, database: str) -> None:
    """Every table the manifest names, re-pointed at ``database`` (a DuckDB file is ATTACHed under its configured
    name, whatever file name dbt built it as)."""
    if isinstance(data, dict):
        if {"alias", "schema_name", "relation_name"} <= set(data):
            data["database"] = database
            data["relation_name"] = ".".join(
                '"' + str(p).replace('"', '""') + '"' for p in (database, data["schema_name"], data["alias"])
            )
        for value in data.values():
            _relations_on(value, database)
    elif isinstance(data, list):
        for value in data:
            _relations_on(value, database)


class DbtProject:
    """One semantic manifest, on one configured database."""

    def __init__(self, database: str, dialect: str, text: str, renderer: str, repoint: bool) -> None:
        try:
            from metricflow.engine.metricflow_engine import MetricFlowEngine
            from metricflow_semantics.model.dbt_manifest_parser import parse_manifest_from_dbt_generated_manifest
            from metricflow_semantics.model.semantic_manifest_lookup import SemanticManifestLookup
        except ImportError:
            raise _fail(
                "DBT_NOT_INSTALLED",
                "a dbt semantic manifest needs MetricFlow",
                "install the extra: uv sync --extra dbt",
            ) from None
        if not renderer:
            raise _fail("NOT_IN_THIS_DIALECT", f"MetricFlow writes no SQL for database {database} ({dialect})")
        data = json.loads(text)
        if repoint:
            _relations_on(data, database)
        manifest = parse_manifest_from_dbt_generated_manifest(manifest_json_string=json.dumps(data))
        self.database, self.dialect, self.manifest = database, dialect, manifest
        self.engine = MetricFlowEngine(SemanticManifestLookup(manifest), _Renderer(renderer))
        self.metrics = {m.name: m for m in manifest.metrics}

    def dimensions(self) -> list[str]:
        """The group-by names a model writes (``customer__customer_type``; ``metric_time`` with a grain)."""
        out = ["metric_time (time)"]
        for model in self.manifest.semantic_models:
            primary = next((e.name for e in model.entities if str(e.type.value) == "primary"), None)
            if primary is None:
                continue
            for dim in model.dimensions:
                time = " (time)" if str(dim.type.value) == "time" else ""
                out.append(f"{primary}__{dim.name}{time}")
        return out

    def compile(self, query: dict[str, Any]) -> dict[str, Any]:
        from metricflow.engine.metricflow_engine import MetricFlowQueryRequest

        plain = [str(w) for w in query.get("where") or [] if "{{" not in str(w)]
        if plain:  # it would reach the database as SQL over columns MetricFlow's statement does not have
            raise _fail(
                "BAD_FILTER",
                f"where {plain[0][:80]!r} is plain SQL; a dbt metric's where is MetricFlow's filter syntax",
                "{{ Dimension('customer__region') }} = 'north', {{ TimeDimension('metric_time', 'day') }} >= "
                "'2025-01-01', {{ Entity('customer') }} = 3; metrics://{name} lists the metric's group-by names",
            )
        group_by = list(query.get("dimensions") or [])
        grain = query.get("time_grain")
        if grain and not any(g.split("__")[0] == "metric_time" for g in group_by):
            group_by.append(f"metric_time__{grain}")
        order = []
        for item in query.get("order_by") or group_by:  # by the group-by columns unless told
            words = str(item).split()
            descending = len(words) == 2 and words[1].lower() == "desc"
            order.append(("-" if descending else "") + words[0])
        try:
            result = self.engine.explain(
                MetricFlowQueryRequest.create(
                    metric_names=list(query["metrics"]),
                    group_by_names=group_by or None,
                    where_constraints=list(query.get("where") or []) or None,
                    order_by_names=order or None,
                    limit=query.get("limit"),
                )
            )
        except Exception as exc:  # MetricFlow's own words: an unknown metric, a dimension it cannot reach
            text = " ".join(str(exc).split())[:600]
            raise _fail(
                "BAD_METRICS_QUERY",
                f"MetricFlow cannot answer this: {text}",
                "metrics://{name} lists the metric's group-by names (entity__dimension, metric_time)",
            ) from None
        sql = result.sql_statement.sql
        import sqlglot

        try:
            tree = sqlglot.parse_one(sql, read=self.dialect)
            columns = list(tree.named_selects) if isinstance(tree, sqlglot.exp.Query) else []
        except Exception:
            columns = [*group_by, *query["metrics"]]
        return {
            "sql": sql,
            "database": self.database,
            "dialect": self.dialect,
            "columns": columns,
            "definitions": [self.definition(name) for name in query["metrics"]],
            "notes": self.notes(list(query["metrics"]), _grain(group_by)),
        }

    def definition(self, name: str) -> str:
        """What the metric means in one line: its kind and measure or expression, each input metric with its
        offset, window or grain-to-date and filter, and a cumulative metric's period rule (MetricFlow's own
        words: ``offset_window``, ``grain_to_date``, ``period_agg``)."""
        return f"{name} = {self._meaning(name, ())} (dbt, MetricFlow)"

    def _meaning(self, name: str, stack: tuple[str, ...]) -> str:
        metric = self.metrics[name]
        params = metric.type_params
        kind = str(metric.type.value)
        what = kind
        if params.measure is not None:
            what += f" of measure {self._measure(params.measure.name)}"
        if kind == "cumulative":
            what += "; " + self._cumulative(metric)
        if params.expr and params.measure is None:  # a simple metric's expr repeats its measure's
            what += f": {params.expr}"
        if params.numerator is not None and params.denominator is not None:
            what += f": {self._input(params.numerator)} / {self._input(params.denominator)}"
        if params.conversion_type_params is not None:
            c = params.conversion_type_params
            what += (
                f": of entities {c.entity} with {self._measure(getattr(c.base_measure, 'name', ''))}, those with "
                f"{self._measure(getattr(c.conversion_measure, 'name', ''))}"
                + (f" within {_window(c.window)}" if c.window is not None else "")
                + f" ({c.calculation.value})"
            )
        if metric.filter is not None:
            what += " where " + " and ".join(f.where_sql_template.strip() for f in metric.filter.where_filters)
        if kind == "derived" and params.metrics and name not in stack:
            inputs = [self._input(i, (*stack, name)) for i in params.metrics]
            what += "; with " + "; ".join(inputs)
        return what

    def _measure(self, name: str) -> str:
        for model in self.manifest.semantic_models:
            for measure in model.measures:
                if measure.name == name:
                    return f"{name} ({measure.agg.value} of {measure.expr or name})"
        return name

    def _input(self, item: Any, stack: tuple[str, ...] = ()) -> str:
        """An input metric as a derived or ratio metric names it: ``alias = name 1 year earlier where …``."""
        text = item.name
        if getattr(item, "offset_window", None) is not None:
            text += f" {_window(item.offset_window)} earlier (offset_window)"
        if getattr(item, "offset_to_grain", None) is not None:
            text += f" at the start of the {item.offset_to_grain} (offset_to_grain)"
        if item.filter is not None:
            text += " where " + " and ".join(f.where_sql_template.strip() for f in item.filter.where_filters)
        alias = getattr(item, "alias", None)
        inner = self.metrics.get(item.name)
        if stack and inner is not None and str(inner.type.value) != "simple" and item.name not in stack:
            text += f" [{item.name}: {self._meaning(item.name, stack)}]"
        return f"{alias} = {text}" if alias else text

    def _cumulative(self, metric: Any) -> str:
        params = metric.type_params
        c = params.cumulative_type_params
        window = (c.window if c is not None else None) or params.window
        to_date = (c.grain_to_date if c is not None else None) or params.grain_to_date
        if window is not None:
            span = f"over the trailing {_window(window)} (window)"
        elif to_date is not None:
            span = f"to date from the start of each {to_date} (grain_to_date)"
        else:
            span = "over all history"
        return f"{span}; {self.period_rule(metric)}"

    def period_agg(self, metric: Any) -> str:
        c = metric.type_params.cumulative_type_params
        return str(c.period_agg.value) if c is not None and c.period_agg is not None else "first"

    def period_rule(self, metric: Any) -> str:
        agg = self.period_agg(metric)
        said = {"first": "its first day's", "last": "its last day's", "average": "the average of its days'"}
        return f"at a grain above a day, each period's value is {said.get(agg, agg)} (period_agg: {agg})"

    def notes(self, metrics: list[str], grain: str | None) -> list[str]:
        """What a reader must know of the numbers: a cumulative metric (asked for or inside one) whose periods take
        one day's value, not the period's whole."""
        if not grain or grain == "day":
            return []
        out: list[str] = []
        seen: set[str] = set()

        def visit(name: str) -> None:
            metric = self.metrics.get(name)
            if metric is None or name in seen:
                return
            seen.add(name)
            if str(metric.type.value) == "cumulative":
                agg = self.period_agg(metric)
                day = {"first": "first day", "last": "last day"}.get(agg)
                said = f"the value on each {grain}'s {day}" if day else f"the {agg} of the {grain}'s daily values"
                out.append(
                    f"{name} is {said} (MetricFlow's period_agg: {agg}, as the dbt project declares or defaults)"
                    + (f", not the total through the {grain}'s end" if agg == "first" else "")
                )
            inputs = [*(metric.type_params.metrics or []), metric.type_params.numerator, metric.type_params.denominator]
            for item in inputs:
                if item is not None:
                    visit(item.name)

        for name in metrics:
            visit(name)
        return out

    def group_bys(self, name: str) -> list[str]:
        """The names the metric can be grouped by (``customer__region``; ``metric_time`` with a grain), as
        MetricFlow reaches them from the metric."""
        names: list[str] = []
        for dim in self.engine.simple_dimensions_for_metrics([name]):
            dunder = str(dim.dunder_name)
            if dim.name == "metric_time":
                dunder = "metric_time (time_grain)"
            elif str(dim.type.value) == "time":
                dunder = dunder.rsplit("__", 1)[0] if dunder.count("__") > 1 else dunder
                dunder += " (time)"
            names.append(dunder)
        return list(dict.fromkeys(names))

    def describe(self, name: str) -> str:
        """``metrics://{name}``: the definition, its group-by names and the SQL it compiles to by month."""
        compiled = self.compile({"metrics": [name], "time_grain": "month"})
        metric = self.metrics[name]
        lines = [f"# {name}", "", metric.description or metric.label or "(no description)", ""]
        lines += [f"Definition: {self.definition(name)}", f"Database: {self.database} ({self.dialect})"]
        try:
            dims = self.group_bys(name)
        except Exception:  # MetricFlow could not list them: the catalog's names still apply
            dims = []
        lines.append("Group by: " + (", ".join(dims) if dims else "metric_time (time_grain); metrics://catalog"))
        lines.append(
            "where: MetricFlow's filter syntax, {{ Dimension('customer__region') }} = 'north', "
            "{{ TimeDimension('metric_time', 'day') }} >= '2025-01-01'"
        )
        lines += ["", "SQL (by month):", "```sql", compiled["sql"], "```"]
        return "\n".join(lines)

    def headline(self, name: str) -> str:
        text = " ".join((self.metrics[name].description or self.metrics[name].label or "").split())
        return text.split(". ")[0].rstrip(".")


class DbtModels:
    """The dbt projects a server serves, by metric name."""

    def __init__(
        self, manifests: list[tuple[str, str, bool]], dialects: dict[str, str], renderers: dict[str, str]
    ) -> None:
        """``manifests``: (database, manifest text, whether its tables are re-pointed at the database's name — a
        file ATTACHed under it)."""
        self.projects: list[DbtProject] = []
        self.warnings: list[str] = []
        for database, text, repoint in manifests:
            dialect = dialects.get(database, "")
            try:
                self.projects.append(DbtProject(database, dialect, text, renderers.get(dialect, ""), repoint))
            except ToolFailure as failure:
                self.warnings.append(f"dbt manifest of database {database}: {failure.message}")
            except Exception as exc:
                self.warnings.append(f"dbt manifest of database {database}: {' '.join(str(exc).split())[:300]}")
        self.by_name: dict[str, DbtProject] = {}
        for project in self.projects:
            for name in project.metrics:
                if name in self.by_name:
                    self.warnings.append(
                        f"metric {name} is defined by the dbt projects of {self.by_name[name].database} and "
                        f"{project.database}: the first is served"
                    )
                    continue
                self.by_name[name] = project

    def project_for(self, metrics: list[str]) -> DbtProject | None:
        """The dbt project answering these metrics (None: none of them is dbt's)."""
        found = {self.by_name[m] for m in metrics if m in self.by_name}
        if not found:
            return None
        if len(found) > 1 or (len(found) == 1 and any(m not in self.by_name for m in metrics)):
            raise _fail(
                "MIXED_MODELS",
                "the metrics asked for come from different models (a dbt project and another, or two projects)",
                "ask for the metrics of one model per query",
            )
        return found.pop()
