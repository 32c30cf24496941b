"""The metric files a server serves, and what is said about them.

``Metrics`` (in the server) finds the files — the workspace's ``metrics/``, each read root's ``metrics/`` (a
Claude Code project's ``metrics/*.yml``), ``metrics.paths``, and the demo database's file with the built-in
demo — and keeps their texts, read again when a file changes. It never parses them: the model is read, checked
and compiled in an engine worker (``answer``, the worker's side of the ``metrics`` operation), so sqlglot never
loads into the server. ``catalog_text`` renders the worker's summary for ``metrics://catalog``.
"""

from __future__ import annotations

import difflib
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ba_mcp.metrics.files import digest_of, metric_files, read_sources
from ba_mcp.workers.messages import Metered, MetricsWork

if TYPE_CHECKING:
    from ba_mcp.metrics.model import Model
    from ba_mcp.settings import Settings

DEMO_FILE = Path(__file__).with_name("demo.yml")
DEMO_NAME = "demo metrics (bundled)"  # metrics.demo: true — always served (a name of yours replaces it)
DEMO_UNTIL = "demo metrics (bundled, until a model of yours)"  # null — until your files declare datasets


class Metrics:
    def __init__(
        self,
        settings: Settings,
        workspace_root: Path,
        read_roots: dict[str, Path],
        dialects: dict[str, str],
        grains: dict[str, dict[str, str]] | None = None,
        renderers: dict[str, str] | None = None,
    ) -> None:
        """``dialects``: sqlglot's dialect per configured database whose engine has one, and ``grains`` the time-grain
        SQL of dialects sqlglot writes no DATE_TRUNC for — both from the database registry, which the App reads
        (this room imports nothing of the databases')."""
        self.folders = [workspace_root / "metrics", *(root / "metrics" for root in read_roots.values())]
        self.folders += [p.expanduser() for p in settings.metrics.paths]
        self.dbt = [
            (
                d.database,
                d.project.expanduser() / "target" / "semantic_manifest.json",
                d.database in settings.databases and settings.databases[d.database].path is not None,
            )
            for d in settings.metrics.dbt
        ]
        self.renderers = dict(renderers or {})
        demo = settings.databases.get("demo")
        self.demo = settings.metrics.demo if demo is not None and demo.path is None else False
        self.dialects = dict(dialects)
        self.grains = dict(grains or {})
        self.max_file_bytes = settings.metrics.max_file_bytes
        self.budget_chars = settings.metrics.catalog_budget_chars
        self._lock = threading.Lock()
        self._key: tuple[object, ...] | None = None
        self._sources: list[tuple[str, str]] = []
        self._warnings: list[str] = []
        self.answers: dict[tuple[str, str], Metered] = {}  # (digest, what) -> a worker's answer kept

    def manifests(self) -> tuple[list[tuple[str, str, bool]], list[str]]:
        """The dbt projects' semantic manifests: (database, text, re-point its tables at the database's name), and
        those that could not be read (run `dbt parse` in the project)."""
        found: list[tuple[str, str, bool]] = []
        warnings: list[str] = []
        for database, path, repoint in self.dbt:
            texts, problems = read_sources([path], 64 * 1024 * 1024)
            warnings += [f"{p} (run `dbt parse` in the project)" for p in problems]
            found += [(database, text, repoint) for _, text in texts]
        return found, warnings

    def files(self) -> list[Path]:
        """The files served: yours, and the demo's with the built-in demo database (``metrics.demo``; with null
        the worker leaves it out once your files declare datasets — a model of your own — and keeps it beside files
        that only add metrics over the demo's datasets)."""
        return [*self.osi_files(), *(path for _, path, _ in self.dbt if path.is_file())]

    def osi_files(self) -> list[Path]:
        bundled = [DEMO_FILE] if self.demo is not False else []
        return [*bundled, *metric_files(self.folders)]

    def sources(self) -> tuple[list[tuple[str, str]], list[str]]:
        """The files' (shown name, text), read again when one was added, removed or changed; and the files
        that could not be read."""
        files = self.osi_files()
        key = tuple((str(p), *_stamp(p)) for p in files)
        with self._lock:
            if key != self._key:
                sources, warnings = read_sources(files, self.max_file_bytes)
                demo = DEMO_NAME if self.demo else DEMO_UNTIL
                self._sources = [(demo if Path(n) == DEMO_FILE else n, t) for n, t in sources]
                self._warnings, self._key = warnings, key
            return self._sources, self._warnings

    def validate(self) -> tuple[Model, list[str]]:
        """Strict validation of every file served (this process parses them: for the CLI and the doctor)."""
        from ba_mcp.metrics.load import validate_files

        sources, unreadable = self.sources()
        model, problems = validate_files(sources, self.dialects, self.grains)
        return model, [*unreadable, *problems]

    def request(self, action: str, query: dict[str, Any] | None = None, name: str | None = None) -> MetricsWork:
        """The ``metrics`` request for a DuckDB worker: the files travel with it (read once per digest)."""
        sources, _ = self.sources()
        manifests, _ = self.manifests()
        return MetricsWork(
            action=action,
            digest=digest_of([*sources, *((d, t) for d, t, _ in manifests)], self.dialects, self.grains),
            files=sources,
            dbt=manifests,
            renderers=self.renderers,
            dialects=self.dialects,
            grains=self.grains,
            query=query,
            name=name,
        )


def _stamp(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


# -- the worker's side -------------------------------------------------------------------------------------


def models_of(request: MetricsWork) -> tuple[Model, Any]:
    """The model of a ``metrics`` request's files and its dbt projects (``metrics.dbt.DbtModels``, None without
    any): what the engine worker reads once per digest, and the CLI and the doctor read in their own process."""
    from ba_mcp.metrics.load import load_model

    files = [(str(n), str(t)) for n, t in request.files]
    model = load_model(files, dict(request.dialects), dict(request.grains or {}))
    dbt = None
    if request.dbt:
        from ba_mcp.metrics.dbt import DbtModels

        manifests = [(str(d), str(t), bool(r)) for d, t, r in request.dbt]
        dbt = DbtModels(manifests, dict(request.dialects), dict(request.renderers or {}))
    return model, dbt


def answer(model: Model, request: MetricsWork, dbt: Any = None) -> Metered:
    """The ``metrics`` operation on a model read in the worker: ``compile`` a query, a ``summary`` (names,
    headlines, dimensions, warnings) or ``describe`` one metric. ``dbt``: the dbt projects served
    (``metrics.dbt.DbtModels``), whose metrics MetricFlow compiles."""
    from ba_mcp.metrics.compile import Query, compile_query

    action = request.action
    if action == "read":  # the model read ahead (a spare's warm-up), kept by its digest: nothing asked
        return {}
    if action == "compile":
        query = dict(request.query or {})
        asked = [str(m) for m in query.get("metrics") or []]
        _known(model, dbt, asked)
        project = dbt.project_for(asked) if dbt is not None else None
        if project is not None:
            compiled = project.compile(query)
            return {
                "sql": compiled["sql"],
                "database": compiled["database"],
                "dialect": compiled["dialect"],
                "columns": compiled["columns"],
                "definitions": compiled["definitions"],
                "notes": [*_shadowed(model, project, asked), *compiled.get("notes", [])],
            }
        c = compile_query(model, Query(**query))
        return {
            "sql": c.sql,
            "database": c.database,
            "dialect": c.dialect,
            "columns": c.columns,
            "definitions": c.definitions,
            "notes": c.notes,
        }
    if action == "summary":
        projects = dbt.projects if dbt is not None else []
        return {
            "metrics": [
                {"name": m.name, "headline": m.headline(), "database": _database_of(model, m.name)}
                for m in model.metrics.values()
            ]
            + [
                {"name": name, "headline": p.headline(name), "database": p.database}
                for p in projects
                for name in p.metrics
                if dbt.by_name.get(name) is p
            ],
            "dimensions": [
                f"{f.dataset}.{f.name}" + (" (time)" if f.is_time else "")
                for d in model.datasets.values()
                for f in d.fields.values()
                if f.is_dimension
            ]
            + [d for p in projects for d in p.dimensions()],
            "warnings": [
                *model.warnings,
                *(dbt.warnings if dbt is not None else []),
                *(
                    f"metric {name} is defined by the dbt project on {p.database} and by {_origin(model, name)}: "
                    "the dbt project's is served"
                    for p in projects
                    for name in p.metrics
                    if name in model.metrics and dbt.by_name.get(name) is p
                ),
            ],
        }
    if action == "describe":
        name = str(request.name or "")
        if dbt is not None and name in dbt.by_name:
            return {"text": dbt.by_name[name].describe(name)}
        return {"text": metric_text(model, name)}
    raise ValueError(f"unknown metrics action {action!r}")


def _known(model: Model, dbt: Any, asked: list[str]) -> None:
    """Every metric asked for exists in one of the models served; else the error suggests the closest names of all
    of them (a dbt project's too — not only the bundled demo's)."""
    from ba_mcp.metrics.compile import fail

    served = [*model.metrics, *(dbt.by_name if dbt is not None else {})]
    for name in asked:
        if name in served:
            continue
        also = [m.name for m in model.metrics.values() if name.lower() in (s.lower() for s in m.synonyms)]
        if also:
            continue  # the compiler names the metric it is another name of
        close = difflib.get_close_matches(name, served, n=4, cutoff=0.5)
        raise fail(
            "UNKNOWN_METRIC",
            f"no metric named {name!r}",
            f"close names: {', '.join(close or sorted(served)[:8])}; metrics://catalog lists them",
        )


def _origin(model: Model, name: str) -> str:
    metric = model.metrics.get(name)
    where = str(metric.where if metric is not None else "")  # file:line
    return where.rsplit(":", 1)[0] if where else "the metric files"


def _shadowed(model: Model, project: Any, asked: list[str]) -> list[str]:
    """A note for each metric asked for that two models define: the dbt project's was used, said."""
    return [
        f"{name} is also defined by {_origin(model, name)}; this is the dbt project's on {project.database}"
        for name in asked
        if name in model.metrics and name in project.metrics
    ]


def _database_of(model: Model, name: str) -> str:
    """The database a metric is computed on ('' when it does not compile: its warning says why)."""
    from ba_mcp.metrics.compile import probe_query

    try:
        return probe_query(model, name).database
    except Exception:
        return ""


def catalog_text(summary: Metered, budget_chars: int = 1600, page: int = 1) -> str:
    """``metrics://catalog``: the metrics of each database (one line each), then the group-by names — in pages of
    at most ``budget_chars`` (``metrics://catalog/2`` …), never cut: a page ends at a whole line and says which
    page follows."""
    if not summary["metrics"]:
        return "No metrics are defined. Add OSI files to the workspace's metrics/ folder (ba-mcp metrics validate)."
    databases = list(dict.fromkeys(str(m.get("database") or "") for m in summary["metrics"]))
    lines: list[str] = []
    for database in databases:
        on = f" on {database}" if database else ""
        lines.append(f"Metrics{on}:" if lines else f"Metrics{on} (query_metrics; metrics://{{name}} defines one):")
        lines += [
            f"- {m['name']}: {m['headline']}" if m["headline"] else f"- {m['name']}"
            for m in summary["metrics"]
            if str(m.get("database") or "") == database
        ]
    if summary["dimensions"]:
        lines.append("Dimensions (group by; metrics://{name} lists those of one metric):")
        row: list[str] = []
        for name in summary["dimensions"]:
            if row and len(", ".join([*row, name])) > 110:
                lines.append("  " + ", ".join(row) + ",")
                row = []
            row.append(name)
        lines.append("  " + ", ".join(row))
    pages: list[list[str]] = [[]]
    room = max(200, budget_chars - 60)  # the page's last line says where the next one is
    for line in lines:
        if pages[-1] and len("\n".join([*pages[-1], line])) > room:
            pages.append([])
        pages[-1].append(line)
    if not 1 <= page <= len(pages):
        from ba_mcp.errors import not_found

        raise not_found(f"the metrics catalog has {len(pages)} page(s), not {page}", "read metrics://catalog")
    text = "\n".join(pages[page - 1])
    if page < len(pages):
        text += f"\n(page {page} of {len(pages)}; continued in metrics://catalog/{page + 1})"
    elif len(pages) > 1:
        text += f"\n(page {page} of {len(pages)})"
    return text


def dimensions_of(model: Model, name: str) -> list[str]:
    """The declared dimensions a metric can be grouped by without an error."""
    from ba_mcp.errors import ToolFailure
    from ba_mcp.metrics.compile import Query, compile_query

    found = []
    for ds in model.datasets.values():
        for f in ds.fields.values():
            if not f.is_dimension:
                continue
            try:
                grain = None if not _post(model, name) else "month"
                compile_query(model, Query(metrics=[name], dimensions=[f"{ds.name}.{f.name}"], time_grain=grain))
            except ToolFailure:
                continue
            found.append(f"{ds.name}.{f.name}")
    return found


def _post(model: Model, name: str) -> bool:
    from ba_mcp.metrics.time import needs_post

    return needs_post(model, name)


def metric_text(model: Model, name: str) -> str:
    """``metrics://{name}``: the definition, its dimensions and grains, and the SQL it compiles to."""
    from ba_mcp.errors import not_found
    from ba_mcp.metrics.compile import probe_query

    metric = model.metrics.get(name)
    if metric is None:
        raise not_found(f"no metric named {name!r}", f"close names: {model.close_names(name, list(model.metrics))}")
    compiled = probe_query(model, name)
    lines = [f"# {name}", "", metric.description or "(no description)", "", f"Definition: {compiled.definitions[0]}"]
    if metric.synonyms:
        lines.append(f"Also called: {', '.join(metric.synonyms)}")
    lines.append(f"Database: {compiled.database} ({compiled.dialect})")
    dims = dimensions_of(model, name)
    if dims:
        lines.append(f"Dimensions: {', '.join(dims)}")
    times = [
        f"{f.dataset}.{f.name} ({', '.join(f.grains)})"
        for d in model.datasets.values()
        for f in d.fields.values()
        if f.is_time and f"{f.dataset}.{f.name}" in dims
    ]
    if times:
        lines.append(f"Time grains: {'; '.join(times)}")
    lines += ["", "SQL (no dimensions):", "```sql", compiled.sql, "```"]
    return "\n".join(lines)
