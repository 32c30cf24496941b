"""Metric definitions: Open Semantic Interchange (OSI 1.0) files read into one model (docs/metrics.md).

Two shapes of file are read: the OSI 1.0 file (``semantic_model:`` a list of models, expressions as
``{dialects: [{dialect, expression}]}``) and the bare model of OSI's compliance fixtures (``name``,
``datasets``, ``relationships``, ``metrics`` at the top, expressions as strings). Every model of every file
joins one namespace. What OSI 1.0 lacks sits under ``custom_extensions`` (vendor ``COMMON``, ``data`` a JSON
object), so a file stays valid OSI:

* on a model: ``{"filters": {"completed": "orders.status = 'completed'"}, "database": "demo"}`` — named
  filters, and the database of sources that name none;
* on a field: ``{"time_grains": ["month", "year"]}`` — the grains a time dimension allows (default: all);
* on a metric: ``{"filter": "completed", "time_dimension": "orders.order_date", "dataset": "orders"}`` — a
  named filter applied to the metric's rows, the time dimension ``grain`` uses, the dataset ``COUNT(*)``
  counts.

``read_model`` reads; ``ba_mcp.metrics.load`` adds the check that each metric compiles: ``load_model`` is lenient
(a broken metric is skipped with a warning, the rest is served), ``validate_files`` strict (every problem, as
``file:line: message``). Expressions are parsed with sqlglot in
the dialect of the database their dataset lives in. Metric files are configuration, like settings: they are
read by the server; what a model sends at query time is checked by ``compile.py`` in an engine worker.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

GRAINS = ("day", "week", "month", "quarter", "year")
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

_MODEL_KEYS = {"name", "description", "ai_context", "datasets", "relationships", "metrics", "custom_extensions"}
_DATASET_KEYS = {
    "name",
    "source",
    "primary_key",
    "unique_keys",
    "description",
    "ai_context",
    "fields",
    "custom_extensions",
    "role",
}
_FIELD_KEYS = {"name", "expression", "dimension", "label", "description", "ai_context", "custom_extensions", "type"}
_RELATIONSHIP_KEYS = {"name", "from", "to", "from_columns", "to_columns", "ai_context", "custom_extensions"}
_METRIC_KEYS = {"name", "expression", "description", "ai_context", "custom_extensions"}
_EXTENSION_KEYS = {
    "model": {"filters", "database"},
    "field": {"time_grains"},
    "metric": {
        "filter",
        "time_dimension",
        "dataset",
        # time intelligence (metrics/time.py), named as MetricFlow names them
        "offset_window",
        "cumulative",
        "share",
        "non_additive_dimension",
        "conversion",
    },
}


class MetricsError(Exception):
    """A problem with a metrics file, located: ``file:line: message``."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


@dataclass(frozen=True)
class Field:
    dataset: str
    name: str
    expression: str  # over the dataset's own columns
    is_time: bool = False
    is_dimension: bool = True
    description: str = ""
    grains: tuple[str, ...] = GRAINS
    where: str = ""


@dataclass(frozen=True)
class Dataset:
    name: str
    database: str
    table: tuple[str, ...]  # the table within its database: (schema, table) or (table,)
    primary_key: tuple[str, ...]
    fields: dict[str, Field]
    description: str = ""
    where: str = ""


@dataclass(frozen=True)
class Relationship:
    name: str
    source: str  # OSI's ``from``: the many side
    target: str  # OSI's ``to``: the one side
    source_columns: tuple[str, ...]
    target_columns: tuple[str, ...]
    where: str = ""


@dataclass(frozen=True)
class Metric:
    name: str
    expression: str  # over dataset.field and other metrics' names
    description: str = ""
    synonyms: tuple[str, ...] = ()
    filter: str | None = None  # a named filter's name
    time_dimension: str | None = None  # dataset.field
    dataset: str | None = None  # what COUNT(*) counts
    where: str = ""
    # time intelligence: {"offset_window" | "cumulative" | "share" | "conversion": spec} — a metric of another
    # metric's values (metrics/time.py); ``non_additive`` is a property of an aggregate (a balance's last value)
    transform: tuple[tuple[str, Any], ...] = ()
    non_additive: dict[str, Any] | None = None  # {name, window_choice: max|min, window_groupings}

    def kind(self) -> str:
        return self.transform[0][0] if self.transform else ""

    def spec(self) -> dict[str, Any]:
        return dict(self.transform[0][1]) if self.transform and isinstance(self.transform[0][1], dict) else {}

    def headline(self) -> str:
        """The description's first sentence (a line of a catalog)."""
        text = " ".join(self.description.split())
        first = re.split(r"(?<=[.;])\s", text, maxsplit=1)[0]
        return first.rstrip(".;")


@dataclass
class Model:
    datasets: dict[str, Dataset] = field(default_factory=dict)
    relationships: list[Relationship] = field(default_factory=list)
    metrics: dict[str, Metric] = field(default_factory=dict)
    filters: dict[str, str] = field(default_factory=dict)
    dialects: dict[str, str] = field(default_factory=dict)  # database -> sqlglot dialect (from the registry)
    grains: dict[str, dict[str, str]] = field(default_factory=dict)  # dialect -> grain -> SQL where DATE_TRUNC fails
    warnings: list[str] = field(default_factory=list)
    files: list[tuple[str, str]] = field(default_factory=list)  # (shown name, text): what a worker re-reads

    def close_names(self, name: str, names: list[str]) -> str:
        close = difflib.get_close_matches(name, names, n=4, cutoff=0.5)
        return ", ".join(close or sorted(names)[:8])

    def dimension_names(self) -> list[str]:
        return [f"{d.name}.{f.name}" for d in self.datasets.values() for f in d.fields.values()]

    def dialect_of(self, database: str) -> str:
        return self.dialects.get(database, "duckdb")


# -- reading ---------------------------------------------------------------------------------------------


class _Lines(dict[str, Any]):
    line = 0


class _Loader(yaml.SafeLoader):
    """YAML mappings that remember their line (for file:line messages)."""


def _mapping(loader: _Loader, node: yaml.MappingNode) -> _Lines:
    loader.flatten_mapping(node)
    out = _Lines({str(k): v for k, v in loader.construct_mapping(node, deep=True).items()})
    out.line = node.start_mark.line + 1
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)  # type: ignore[arg-type]


def read_model(
    sources: list[tuple[str, str]],
    dialects: dict[str, str],
    strict: bool,
    grains: dict[str, dict[str, str]] | None = None,
) -> tuple[Model, list[str]]:
    """The model of ``sources`` ((shown name, text) pairs) as written — each metric not yet compiled
    (``ba_mcp.metrics.load`` does that) — and its problems as ``file:line: message``; ``dialects`` maps each
    configured database to its sqlglot dialect. ``strict`` also reports unknown keys and ambiguous paths."""
    reader = _Reader(sources, dialects, strict=strict)
    reader.model.grains = dict(grains or {})
    return reader.model, reader.problems


class _Reader:
    def __init__(self, sources: list[tuple[str, str]], dialects: dict[str, str], strict: bool) -> None:
        self.strict = strict
        self.problems: list[str] = []
        self.model = Model(dialects=dict(dialects), files=list(sources))
        # a bundled file (its name ends in "(bundled)": the demo's) yields to the user's own: read last, and left
        # out whole when it would redefine one of their names
        ordered = sorted(sources, key=lambda source: BUNDLED in source[0])
        for name, text in ordered:
            self._file(name, text)
        self._check_graph()
        self.model.warnings = list(self.problems)

    def problem(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")

    # -- the file and its models ------------------------------------------------------------------------

    def _file(self, name: str, text: str) -> None:
        try:
            data = yaml.load(text, Loader=_Loader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            self.problem(f"{name}:{mark.line + 1 if mark else 1}", f"not valid YAML ({getattr(exc, 'problem', exc)})")
            return
        if data is None:
            return
        if BUNDLED in name and name.endswith(YIELDS) and self.model.datasets:
            return  # a model of your own (datasets of yours): the demo's metrics step aside (metrics.demo: null)
        if BUNDLED in name:
            taken = sorted(_names(data) & {*self.model.datasets, *self.model.metrics, *self.model.filters})
            if taken:
                self.problems.append(
                    f"{name}: left out, as your metric files define {', '.join(taken[:6])} too "
                    "(metrics.demo: false leaves it out without this warning)"
                )
                return
        if not isinstance(data, dict):
            self.problem(f"{name}:1", "a metrics file holds a mapping (semantic_model: […] or a bare model)")
            return
        if "semantic_model" in data:
            extra = set(data) - {"semantic_model", "version"}
            if extra and self.strict:
                self.problem(f"{name}:{_line(data)}", f"unknown keys {sorted(extra)} beside semantic_model")
            models = data["semantic_model"]
            if not isinstance(models, list):
                self.problem(f"{name}:{_line(data)}", "semantic_model is a list of models")
                return
            for model in models:
                self._model(name, model)
        else:
            self._model(name, data)

    def _model(self, file: str, data: Any) -> None:
        where = f"{file}:{_line(data)}"
        if not isinstance(data, dict):
            self.problem(where, "a model is a mapping")
            return
        self._keys(where, data, _MODEL_KEYS, "model")
        ext = self._extension(where, data, "model")
        default_db = ext.get("database")
        for fname, text in (ext.get("filters") or {}).items():
            if not NAME.match(str(fname)) or not isinstance(text, str):
                self.problem(where, f"filter {fname!r}: a name and a predicate text")
                continue
            self.model.filters[str(fname)] = text
        for item in _list(data.get("datasets"), where, "datasets", self):
            self._dataset(file, item, default_db)
        for item in _list(data.get("relationships"), where, "relationships", self):
            self._relationship(file, item)
        for item in _list(data.get("metrics"), where, "metrics", self):
            self._metric(file, item)

    def _named(self, file: str, data: Any, kind: str, keys: set[str], taken: Any) -> tuple[str, str] | None:
        """Where an item is (file:line) and its name — or None, its problem noted: no valid name, or a name
        already taken; unknown keys are noted (strict)."""
        where = f"{file}:{_line(data)}"
        if not isinstance(data, dict) or not _name_ok(data.get("name")):
            self.problem(where, f"a {kind} needs a name (letters, digits, _)")
            return None
        name = str(data["name"])
        self._keys(where, data, keys, f"{kind} {name}")
        if name in taken:
            first = getattr(taken[name], "where", "")
            self.problem(
                where,
                f"{kind} {name} is defined twice"
                + (f": here and at {first}" if first else "")
                + " — rename one (each name is one metric, whatever its database)",
            )
            return None
        return where, name

    def _dataset(self, file: str, data: Any, default_db: str | None) -> None:
        named = self._named(file, data, "dataset", _DATASET_KEYS, self.model.datasets)
        if named is None:
            return
        where, name = named
        source = data.get("source")
        if not isinstance(source, str) or not source.strip():
            self.problem(where, f"dataset {name}: source names a table, database.schema.table")
            return
        if re.match(r"^\s*(select|with)\b", source, re.I):
            self.problem(where, f"dataset {name}: a query as source is not supported yet; name a table or a view")
            return
        parts = tuple(p.strip().strip('"') for p in source.split("."))
        if any(not p for p in parts) or len(parts) > 3:
            self.problem(where, f"dataset {name}: source {source!r} is database.schema.table or database.table")
            return
        if len(parts) >= 2 and parts[0] in self.model.dialects:
            database, table = parts[0], parts[1:]
        elif default_db:
            database, table = str(default_db), parts
        else:
            known = ", ".join(sorted(self.model.dialects)) or "none"
            self.problem(
                where,
                f"dataset {name}: source {source!r} names no configured database (configured: {known}); "
                "write database.schema.table",
            )
            return
        if database not in self.model.dialects:
            self.problem(where, f"dataset {name}: database {database!r} is not configured")
            return
        dialect = self.model.dialect_of(database)
        fields: dict[str, Field] = {}
        for item in _list(data.get("fields"), where, f"fields of {name}", self):
            got = self._field(file, name, item, dialect)
            if got is not None:
                if got.name in fields:
                    self.problem(f"{file}:{_line(item)}", f"field {name}.{got.name} is defined twice")
                fields[got.name] = got
        key = data.get("primary_key") or []
        if not isinstance(key, list) or not all(isinstance(k, str) for k in key):
            self.problem(where, f"dataset {name}: primary_key is a list of columns")
            key = []
        self.model.datasets[name] = Dataset(
            name,
            database,
            table,
            tuple(key),
            fields,
            _text(data.get("description")),
            where,
        )

    def _field(self, file: str, dataset: str, data: Any, dialect: str) -> Field | None:
        where = f"{file}:{_line(data)}"
        if not isinstance(data, dict) or not _name_ok(data.get("name")):
            self.problem(where, f"a field of {dataset} needs a name (letters, digits, _)")
            return None
        name = str(data["name"])
        self._keys(where, data, _FIELD_KEYS, f"field {dataset}.{name}")
        expression = self._expression(where, data.get("expression", name), dialect, f"field {dataset}.{name}")
        if expression is None:
            return None
        dimension = data.get("dimension")
        is_time = isinstance(dimension, dict) and bool(dimension.get("is_time"))
        ext = self._extension(where, data, "field")
        grains = ext.get("time_grains") or list(GRAINS)
        bad = [g for g in grains if g not in GRAINS]
        if bad:
            self.problem(where, f"field {dataset}.{name}: unknown time grains {bad} (allowed: {', '.join(GRAINS)})")
            grains = [g for g in grains if g in GRAINS]
        return Field(
            dataset,
            name,
            expression,
            is_time=is_time,
            is_dimension=dimension is not None,
            description=_text(data.get("description")),
            grains=tuple(grains),
            where=where,
        )

    def _relationship(self, file: str, data: Any) -> None:
        where = f"{file}:{_line(data)}"
        if not isinstance(data, dict) or not _name_ok(data.get("name")):
            self.problem(where, "a relationship needs a name")
            return
        name = str(data["name"])
        self._keys(where, data, _RELATIONSHIP_KEYS, f"relationship {name}")
        source, target = str(data.get("from")), str(data.get("to"))
        cols_from, cols_to = data.get("from_columns"), data.get("to_columns")
        for end in (source, target):
            if end not in self.model.datasets:
                close = self.model.close_names(str(end), list(self.model.datasets))
                self.problem(where, f"relationship {name}: unknown dataset {end!r} (datasets: {close})")
                return
        if (
            not isinstance(cols_from, list)
            or not isinstance(cols_to, list)
            or not cols_from
            or len(cols_from) != len(cols_to)
        ):
            self.problem(where, f"relationship {name}: from_columns and to_columns are lists of the same length")
            return
        for end, cols in ((source, cols_from), (target, cols_to)):
            fields = self.model.datasets[end].fields
            missing = [c for c in cols if c not in fields]
            if missing and self.strict:
                self.problem(where, f"relationship {name}: {end} declares no field {', '.join(map(str, missing))}")
        if any(r.name == name for r in self.model.relationships):
            self.problem(where, f"relationship {name} is defined twice")
            return
        if self.model.datasets[source].database != self.model.datasets[target].database:
            self.problem(where, f"relationship {name}: {source} and {target} live in different databases")
            return
        self.model.relationships.append(
            Relationship(name, source, target, tuple(map(str, cols_from)), tuple(map(str, cols_to)), where)
        )

    def _metric(self, file: str, data: Any) -> None:
        named = self._named(file, data, "metric", _METRIC_KEYS, self.model.metrics)
        if named is None:
            return
        where, name = named
        expression = self._raw_expression(where, data.get("expression"), f"metric {name}")
        if expression is None:
            return
        ext = self._extension(where, data, "metric")
        ai = data.get("ai_context")
        synonyms = tuple(map(str, ai.get("synonyms") or [])) if isinstance(ai, dict) else ()
        kinds = [k for k in ("offset_window", "cumulative", "share", "conversion") if k in ext]
        if len(kinds) > 1:
            self.problem(where, f"metric {name}: one of offset_window, cumulative, share, conversion (not {kinds})")
            return
        transform: tuple[tuple[str, Any], ...] = ()
        if kinds:
            spec = ext[kinds[0]]
            if kinds[0] == "offset_window" and isinstance(spec, str):
                spec = {"window": spec}
            if not isinstance(spec, dict):
                self.problem(where, f"metric {name}: {kinds[0]} is an object (docs/metrics.md: time intelligence)")
                return
            transform = ((kinds[0], _frozen(spec)),)
        non_additive = ext.get("non_additive_dimension")
        if non_additive is not None and not isinstance(non_additive, dict):
            self.problem(where, f"metric {name}: non_additive_dimension is an object {{name, window_choice}}")
            return
        self.model.metrics[name] = Metric(
            name,
            expression,
            _text(data.get("description")),
            synonyms,
            ext.get("filter"),
            ext.get("time_dimension"),
            ext.get("dataset"),
            where,
            transform,
            _frozen(non_additive) if non_additive else None,
        )

    # -- pieces ----------------------------------------------------------------------------------------

    def _keys(self, where: str, data: dict[str, Any], allowed: set[str], what: str) -> None:
        unknown = sorted(set(data) - allowed)
        if unknown and self.strict:
            self.problem(where, f"{what}: unknown keys {unknown} (allowed: {', '.join(sorted(allowed))})")

    def _extension(self, where: str, data: dict[str, Any], kind: str) -> dict[str, Any]:
        """The COMMON custom extension's data (a JSON object, or a mapping)."""
        merged: dict[str, Any] = {}
        for ext in data.get("custom_extensions") or []:
            if not isinstance(ext, dict) or ext.get("vendor_name") != "COMMON":
                continue
            raw = ext.get("data")
            try:
                value = json.loads(raw) if isinstance(raw, str) else raw
            except ValueError:
                self.problem(where, "custom_extensions: data is a JSON object")
                continue
            if not isinstance(value, dict):
                self.problem(where, "custom_extensions: data is a JSON object")
                continue
            unknown = sorted(set(value) - _EXTENSION_KEYS[kind])
            if unknown and self.strict:
                self.problem(where, f"custom_extensions of a {kind}: unknown keys {unknown}")
            merged.update(value)
        return merged

    def _raw_expression(self, where: str, value: Any, what: str) -> str | None:
        """The expression text: a string, or the ANSI_SQL (else the first) of an OSI dialects object."""
        if isinstance(value, str) and value.strip():
            return value.strip()
        entries = value.get("dialects") if isinstance(value, dict) else value if isinstance(value, list) else None
        if isinstance(entries, list):
            texts = {
                str(e.get("dialect", "ANSI_SQL")).upper(): e.get("expression")
                for e in entries
                if isinstance(e, dict) and isinstance(e.get("expression"), str)
            }
            if texts:
                return str(texts.get("ANSI_SQL") or next(iter(texts.values()))).strip()
        self.problem(where, f"{what}: expression is a text or {{dialects: [{{dialect, expression}}]}}")
        return None

    def _expression(self, where: str, value: Any, dialect: str, what: str) -> str | None:
        text = self._raw_expression(where, value, what)
        if text is None:
            return None
        from ba_mcp.metrics.sql import parse_expression

        try:
            parse_expression(text, dialect)
        except ValueError as exc:
            self.problem(where, f"{what}: {exc}")
            return None
        return text

    # -- across the model ------------------------------------------------------------------------------

    def _check_graph(self) -> None:
        """Two relationships between the same datasets are ambiguous paths (strict: an error; a query that
        needs that step names both); a cycle of relationships makes paths undecidable."""
        pairs: dict[frozenset[str], list[Relationship]] = {}
        for r in self.model.relationships:
            pairs.setdefault(frozenset((r.source, r.target)), []).append(r)
        if self.strict:
            for rels in pairs.values():
                if len(rels) > 1:
                    names = " and ".join(r.name for r in rels)
                    self.problem(rels[-1].where, f"ambiguous path: {names} both join {rels[0].source}–{rels[0].target}")
        # a cycle along many-to-one steps (a → b → … → a)
        edges: dict[str, set[str]] = {}
        for r in self.model.relationships:
            edges.setdefault(r.source, set()).add(r.target)
        state: dict[str, int] = {}

        def visit(node: str, path: list[str]) -> None:
            state[node] = 1
            for nxt in sorted(edges.get(node, ())):
                if state.get(nxt) == 1:
                    cycle = " → ".join([*path[path.index(nxt) :], nxt]) if nxt in path else f"{node} → {nxt}"
                    self.problem(self.model.datasets[nxt].where, f"relationships form a cycle: {cycle}")
                elif nxt not in state:
                    visit(nxt, [*path, nxt])
            state[node] = 2

        for node in sorted(edges):
            if node not in state:
                visit(node, [node])


BUNDLED = "(bundled"  # a file shipped with ba-mcp (the demo's): "… (bundled)", or "… (bundled" + YIELDS
YIELDS = ", until a model of yours)"  # left out when your files declare datasets of their own


def _names(data: Any) -> set[str]:
    """The dataset, metric and filter names a file's data defines (for the bundled file's yielding)."""
    models = data.get("semantic_model") if isinstance(data, dict) and "semantic_model" in data else [data]
    names: set[str] = set()
    for model in models if isinstance(models, list) else []:
        if not isinstance(model, dict):
            continue
        for key in ("datasets", "metrics"):
            items = model.get(key)
            names |= (
                {str(i.get("name")) for i in items or [] if isinstance(i, dict)} if isinstance(items, list) else set()
            )
    return names


def _line(data: Any) -> int:
    return getattr(data, "line", 1) or 1


def _name_ok(value: Any) -> bool:
    return isinstance(value, str) and bool(NAME.match(value))


class _FrozenDict(dict[str, Any]):
    """A spec mapping that can sit in a frozen dataclass (hashable by its JSON)."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(json.dumps(self, sort_keys=True, default=str))


def _frozen(spec: dict[str, Any]) -> _FrozenDict:
    return _FrozenDict(spec)


def _text(value: Any) -> str:
    return " ".join(str(value).split()) if isinstance(value, str) else ""


def _list(value: Any, where: str, what: str, reader: _Reader) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        reader.problem(where, f"{what} is a list")
        return []
    return value
