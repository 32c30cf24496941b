"""dbt's semantic models and metrics, read as they are: a dbt project's ``target/semantic_manifest.json`` (what
``dbt parse`` writes) compiled by **MetricFlow itself** — the engine dbt's ``mf query`` runs — into the SQL of the
database it was built on, which ``query_metrics`` then runs like any metric (SPEC §4.6).

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
                "metrics://catalog lists the metrics and group-by names (entity__dimension, metric_time)",
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
        }

    def definition(self, name: str) -> str:
        metric = self.metrics[name]
        params = metric.type_params
        what = str(metric.type.value)
        if params.measure is not None:
            what += f" of measure {params.measure.name}"
        if params.expr:
            what += f": {params.expr}"
        if params.numerator is not None and params.denominator is not None:
            what += f": {params.numerator.name} / {params.denominator.name}"
        if metric.filter is not None:
            what += " where " + " and ".join(f.where_sql_template.strip() for f in metric.filter.where_filters)
        return f"{name} = {what} (dbt, MetricFlow)"

    def describe(self, name: str) -> str:
        """``metrics://{name}``: the definition and the SQL it compiles to by month."""
        compiled = self.compile({"metrics": [name], "time_grain": "month"})
        metric = self.metrics[name]
        lines = [f"# {name}", "", metric.description or metric.label or "(no description)", ""]
        lines += [f"Definition: {self.definition(name)}", f"Database: {self.database} ({self.dialect})"]
        lines += ["Group by: metric_time (time_grain), entity__dimension names (metrics://catalog)"]
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
