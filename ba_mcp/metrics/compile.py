"""A metrics query compiled to one SQL statement, following OSI's foundational semantics (docs/metrics.md).

* Each aggregate of a metric has a **home**: the dataset of its columns from which every other dataset it
  names is reached many-to-one. Aggregates sharing a home and a named filter form a **branch**.
* A branch aggregates its home, LEFT-joined along declared relationships to the datasets its dimensions and
  predicates name (orphan rows under a NULL key, never dropped: OSI T-001, T-010).
* A dimension reached through a one-to-many step (a bridge: actors ← appearances → movies) would repeat home
  rows; the branch then keeps each (home row, group) once before aggregating (symmetric aggregation, T-015).
  Only distributive aggregates (SUM, COUNT, MIN, MAX) are answered so; AVG, COUNT(DISTINCT) and the like are
  refused (T-016): their answer there depends on a grain the query does not say.
* Branches are stitched FULL OUTER on the dimensions (T-011) — the union of their keys, LEFT-joined to each —
  or CROSS joined when there are none (T-012);
  a metric built from other metrics (a ratio) is computed from their aggregates at the query's grain.
* Two relationships between the same datasets, or no path, are errors naming them (T-019, T-013); nothing is
  guessed. Predicates are ANDed (T-028); ORDER BY says NULLS LAST (T-026); the same query gives the same SQL.

Runs in the server for the model's own definitions (``metrics://``, ``ba-mcp metrics``), and in an engine
worker for a query a model sent (its ``where``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlglot import exp

from ba_mcp.errors import ErrorType, ToolFailure
from ba_mcp.metrics import time as time_layer
from ba_mcp.metrics.sql import check_predicate, parse_expression

if TYPE_CHECKING:
    from ba_mcp.metrics.model import Dataset, Field, Metric, Model, Relationship

_DISTRIBUTIVE = (exp.Sum, exp.Min, exp.Max, exp.Count)


@dataclass
class Query:
    metrics: list[str]
    dimensions: list[str] = field(default_factory=list)
    time_grain: str | None = None
    where: list[str] = field(default_factory=list)
    order_by: list[str] = field(default_factory=list)
    limit: int | None = None


@dataclass
class Compiled:
    sql: str
    database: str
    dialect: str
    columns: list[str]
    definitions: list[str]  # one line per metric: what it means
    notes: list[str] = field(default_factory=list)  # what the reader must know of how the numbers were made


# functions that exist only over a window: LAG(revenue) without OVER is one too (the database refuses it at query
# time, so validation refuses it first)
_WINDOW_NAMES = frozenset(
    {"LAG", "LEAD", "ROW_NUMBER", "RANK", "DENSE_RANK", "NTILE", "FIRST_VALUE", "LAST_VALUE", "NTH_VALUE"}
    | {"PERCENT_RANK", "CUME_DIST"}
)
_WINDOW_CLASSES = "Lag Lead RowNumber Rank DenseRank Ntile FirstValue LastValue NthValue PercentRank CumeDist"
_WINDOW_ONLY: tuple[type[exp.Expr], ...] = tuple(
    getattr(exp, n) for n in _WINDOW_CLASSES.split() if isinstance(getattr(exp, n, None), type)
)


def fail(code: str, message: str, hint: str = "") -> ToolFailure:
    return ToolFailure(ErrorType.VALIDATION_ERROR, code, message, hint)


@dataclass
class _Aggregate:
    node: exp.Expr  # the aggregate call, columns still dataset.field
    home: str
    filters: tuple[str, ...]
    alias: str = ""
    time: str = ""  # dataset.field: the time dimension its metric is bucketed by (a grain without a time field)
    non_additive: str = ""  # JSON of its metric's non_additive_dimension: a balance's last value per period


@dataclass
class _Dim:
    field: Field
    name: str  # the output column
    grain: str | None = None
    per_metric: bool = False  # metric time: each branch buckets by its own metrics' time dimension


@dataclass
class _Branch:
    home: str
    filters: tuple[str, ...]
    aggregates: list[_Aggregate] = field(default_factory=list)
    alias: str = ""
    time: str = ""
    non_additive: str = ""


def compile_query(model: Model, query: Query) -> Compiled:
    """One SQL statement for the query: the compiler below, with the time-intelligence layer (``time.py``) over
    it when a metric asked for is a metric of another's values (offset, cumulative, share, conversion)."""
    if any(time_layer.needs_post(model, name) for name in query.metrics):
        return Compiled(*time_layer.post_compiled(model, query, lambda q: _Compiler(model, q)))
    return _Compiler(model, query).compiled()


def probe_query(model: Model, name: str) -> Compiled:
    """The metric compiled alone (what validation and metrics://{name} show): with no grain, else — a metric
    over time (an offset, a running total) needs one — by month; a share by the dimensions it is a share over."""
    metric = model.metrics.get(name)
    of = metric.spec().get("of") if metric is not None and metric.kind() == "share" else None
    dims = [of] if isinstance(of, str) and of != "all" else list(of) if isinstance(of, list) else []
    try:
        return compile_query(model, Query(metrics=[name], dimensions=dims))
    except ToolFailure as failure:
        if failure.code != "NEEDS_TIME_GRAIN":
            raise
        return compile_query(model, Query(metrics=[name], dimensions=dims, time_grain="month"))


@dataclass
class Built:
    """The statement before ORDER BY and LIMIT, with what the time layer builds on."""

    statement: exp.Select
    dims: list[_Dim]
    metrics: list[Metric]
    database: str
    dialect: str


class _Compiler:
    def __init__(self, model: Model, query: Query) -> None:
        self.model = model
        self.query = query
        self.aggregates: dict[tuple[str, tuple[str, ...], str], _Aggregate] = {}

    # -- names ---------------------------------------------------------------------------------------------

    def metric(self, name: str) -> Metric:
        found = self.model.metrics.get(name)
        if found is None:
            also = [m.name for m in self.model.metrics.values() if name.lower() in (s.lower() for s in m.synonyms)]
            close = ", ".join(
                dict.fromkeys([*also, *self.model.close_names(name, list(self.model.metrics)).split(", ")])
            )
            raise fail(
                "UNKNOWN_METRIC",
                f"no metric named {name!r}" + (f" ({name!r} is another name of {', '.join(also)})" if also else ""),
                f"close names: {close}; metrics://catalog lists them",
            )
        return found

    def field(self, ref: str, homes: set[str] | None = None) -> Field:
        """A declared field by ``dataset.field``, or by its bare name when one dataset has it (or, of several,
        one that every home of the query reaches)."""
        dataset, _, name = ref.rpartition(".")
        if dataset:
            ds = self.model.datasets.get(dataset)
            if ds is not None and name in ds.fields:
                return ds.fields[name]
        else:
            matches = [d.fields[ref] for d in self.model.datasets.values() if ref in d.fields]
            if len(matches) > 1 and homes:
                reached = [f for f in matches if all(h == f.dataset or self.paths(h, f.dataset) for h in homes)]
                matches = reached or matches
            if len(matches) == 1:
                return matches[0]
            if len(matches) > 1:
                names = ", ".join(f"{f.dataset}.{f.name}" for f in matches)
                raise fail("AMBIGUOUS_DIMENSION", f"{ref!r} is a field of several datasets: {names}", "name one")
        raise fail(
            "UNKNOWN_DIMENSION",
            f"no field named {ref!r}",
            f"close names: {self.model.close_names(ref, self.model.dimension_names())}",
        )

    def dataset(self, name: str) -> Dataset:
        return self.model.datasets[name]

    # -- metrics into aggregates ------------------------------------------------------------------------------

    def expand(
        self, metric: Metric, outer: tuple[str, ...] = (), stack: tuple[str, ...] = (), time: str = ""
    ) -> exp.Expr:
        """The metric's expression with other metrics' expressions put in, each aggregate marked with its home
        and named filters (``meta``)."""
        if metric.name in stack:
            raise fail("METRIC_CYCLE", f"metrics refer to each other in a circle: {' → '.join([*stack, metric.name])}")
        try:
            tree = parse_expression(metric.expression, self.dialect_for(metric))
        except ValueError as exc:
            raise fail("BAD_METRIC", f"metric {metric.name}: {exc}") from None
        window = tree.find(exp.Window, *_WINDOW_ONLY) or next(
            (f for f in tree.find_all(exp.Anonymous) if str(f.this).upper() in _WINDOW_NAMES), None
        )
        if window is not None:  # it would compile to SQL the database refuses (a window inside GROUP BY's aggregate)
            raise fail(
                "WINDOW_IN_METRIC",
                f"metric {metric.name}: {window.sql()[:60]} is a window function, which a metric's expression cannot "
                "hold: a metric is one aggregate per group",
                "for a change against the previous period, a running total or a share, declare the metric's "
                "offset, cumulative or share in custom_extensions (docs/metrics.md: time intelligence)",
            )
        filters = tuple(sorted({*outer, *([metric.filter] if metric.filter else [])}))
        for name in filters:
            if name not in self.model.filters:
                raise fail("UNKNOWN_FILTER", f"metric {metric.name} names no declared filter {name!r}")
        for agg in list(tree.find_all(exp.AggFunc)):
            if agg.find_ancestor(exp.AggFunc) is not None:
                raise fail(
                    "NESTED_AGGREGATE",
                    f"metric {metric.name}: a nested aggregate ({agg.sql()[:60]} inside another) is not supported yet",
                    "write one aggregate over rows, or a ratio of metrics",
                )
            agg.meta["filters"] = filters
            agg.meta["metric"] = metric.name
            agg.meta["time"] = metric.time_dimension or time  # its own, else the enclosing metric's
        for column in list(tree.find_all(exp.Column)):
            if column.find_ancestor(exp.AggFunc) is None and column.table:
                raise fail(
                    "UNAGGREGATED_FIELD",
                    f"metric {metric.name}: {column.sql()} is outside any aggregate",
                    f"aggregate it (SUM({column.sql()}), MAX(…)), or group by it as a dimension",
                )
            if not column.table and column.name not in self.model.metrics:
                raise fail(
                    "UNKNOWN_METRIC",
                    f"metric {metric.name} refers to {column.name!r}, which is no metric",
                    f"write dataset.field for a field; metrics: "
                    f"{self.model.close_names(column.name, list(self.model.metrics))}",
                )

        def put_in(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.Column) and not node.table:  # a bare name: another metric (OSI's global names)
                ref = self.model.metrics[node.name]
                inner = self.expand(ref, filters, (*stack, metric.name), metric.time_dimension or time)
                return exp.Paren(this=inner)
            return node

        tree = tree.transform(put_in, copy=False)
        return tree

    def dialect_for(self, metric: Metric) -> str:
        """The dialect of the database the metric's datasets live in (sqlglot's general one when unknown)."""
        for ds in self.model.datasets.values():
            if f"{ds.name}." in metric.expression:
                return self.model.dialect_of(ds.database)
        return ""

    def register(self, agg: exp.Expr) -> _Aggregate:
        filters: tuple[str, ...] = tuple(agg.meta.get("filters", ()))
        metric = self.metric(agg.meta["metric"])
        refs = sorted({c.table for c in agg.find_all(exp.Column)})
        for ref in refs:
            if ref not in self.model.datasets:
                raise fail(
                    "UNKNOWN_DATASET",
                    f"metric {metric.name} names {ref!r}, which is no dataset",
                    f"datasets: {self.model.close_names(ref, list(self.model.datasets))}",
                )
        for column in agg.find_all(exp.Column):
            if column.name not in self.dataset(column.table).fields:
                raise fail(
                    "UNKNOWN_FIELD",
                    f"metric {metric.name} names {column.table}.{column.name}, which {column.table} does not declare",
                    f"fields: {self.model.close_names(column.name, list(self.dataset(column.table).fields))}",
                )
        home = self.home(refs, metric, agg)
        time = str(agg.meta.get("time") or "")
        non_additive = json.dumps(metric.non_additive, sort_keys=True) if metric.non_additive else ""
        key = (agg.sql(), filters, time + non_additive)
        if key not in self.aggregates:
            self.aggregates[key] = _Aggregate(agg.copy(), home, filters, time=time, non_additive=non_additive)
        return self.aggregates[key]

    def home(self, refs: list[str], metric: Metric, agg: exp.Expr) -> str:
        if not refs:
            if metric.dataset and metric.dataset in self.model.datasets:
                return metric.dataset
            raise fail(
                "NO_HOME_DATASET",
                f"metric {metric.name}: {agg.sql()} names no dataset to count",
                'write COUNT(dataset.key), or give the metric custom_extensions COMMON {"dataset": "<name>"}',
            )
        for candidate in refs:
            if all(other == candidate or self.many_to_one(candidate, other) for other in refs):
                return candidate
        raise fail(
            "NO_HOME_DATASET",
            f"metric {metric.name}: {agg.sql()[:80]} mixes {', '.join(refs)}, and no one of them reaches the others "
            "many-to-one",
            "aggregate each dataset in a metric of its own and combine the metrics (a ratio of metrics)",
        )

    # -- paths ---------------------------------------------------------------------------------------------

    def many_to_one(self, start: str, goal: str) -> bool:
        """Whether ``goal`` is reached from ``start`` along relationships followed from the many side."""
        seen, todo = {start}, [start]
        while todo:
            node = todo.pop()
            for r in self.model.relationships:
                if r.source == node and r.target not in seen:
                    if r.target == goal:
                        return True
                    seen.add(r.target)
                    todo.append(r.target)
        return False

    def paths(self, start: str, goal: str) -> list[list[tuple[Relationship, bool]]]:
        """Every simple path (relationship, followed from its many side) from ``start`` to ``goal``."""
        found: list[list[tuple[Relationship, bool]]] = []
        budget = [20_000]  # steps: a model dense with relationships must not make a query search forever

        def walk(node: str, visited: set[str], path: list[tuple[Relationship, bool]]) -> None:
            if len(path) > 6:
                return
            budget[0] -= 1
            if budget[0] < 0:
                raise fail(
                    "TOO_MANY_PATHS",
                    f"the relationships between {start} and {goal} are too many to search",
                    "declare fewer relationships (a star of many-to-one steps)",
                )
            for r in self.model.relationships:
                for here, there, forward in ((r.source, r.target, True), (r.target, r.source, False)):
                    if here != node or there in visited:
                        continue
                    step = [*path, (r, forward)]
                    if there == goal:
                        found.append(step)
                    else:
                        walk(there, visited | {there}, step)

        walk(start, {start}, [])
        return found

    def path(self, start: str, goal: str) -> list[tuple[Relationship, bool]]:
        every = self.paths(start, goal)
        if not every:
            raise fail(
                "NO_PATH",
                f"no path joins {start} and {goal}: no declared relationship connects them (directly, through "
                "other datasets, or through a bridge dataset)",
                "declare a relationship between them in the metrics file, or ask for dimensions of datasets "
                f"{start} reaches",
            )
        forward = [p for p in every if all(f for _, f in p)]
        if forward:
            candidates = forward
        else:
            shortest = min(len(p) for p in every)
            candidates = [p for p in every if len(p) == shortest]
        if len(candidates) > 1:
            common = set.intersection(*[{r.name for r, _ in p} for p in candidates])
            names = sorted({r.name for p in candidates for r, _ in p} - common)
            raise fail(
                "AMBIGUOUS_PATH",
                f"ambiguous path from {start} to {goal}: relationships {', '.join(names)} each join them",
                "keep one of these relationships in the metrics file (or a dataset per role), then ask again",
            )
        return candidates[0]

    # -- the statement -----------------------------------------------------------------------------------------

    def compiled(self) -> Compiled:
        built = self.build()
        sql = built.statement.sql(dialect=built.dialect or None)
        columns = [d.name for d in built.dims] + [m.name for m in built.metrics]
        sql += self.order_and_limit(built.dims, built.metrics, built.dialect)
        definitions = [self.definition(m) for m in built.metrics]
        return Compiled(sql, built.database, built.dialect, columns, definitions)

    def build(self) -> Built:
        q = self.query
        if not q.metrics:
            raise fail("EMPTY_QUERY", "a metrics query needs at least one metric", "metrics://catalog lists them")
        metrics = [self.metric(n) for n in dict.fromkeys(q.metrics)]
        trees = {m.name: self.expand(m) for m in metrics}
        for tree in trees.values():
            for agg in list(tree.find_all(exp.AggFunc)):
                registered = self.register(agg)
                agg.meta["aggregate"] = (
                    registered.node.sql(),
                    registered.filters,
                    registered.time + registered.non_additive,
                )
        dims = self.dimensions(metrics)
        databases = {self.dataset(a.home).database for a in self.aggregates.values()}
        databases |= {self.dataset(d.field.dataset).database for d in dims}
        if len(databases) > 1:
            raise fail(
                "MIXED_DATABASES",
                f"the metrics and dimensions asked for live in several databases ({', '.join(sorted(databases))})",
                "ask for metrics of one database per query",
            )
        database = databases.pop()
        dialect = self.model.dialect_of(database)
        predicates = [self.predicate(text, dialect) for text in q.where]
        branches = self.branches()
        ctes: list[tuple[str, exp.Expr]] = []
        for i, branch in enumerate(branches, 1):
            branch.alias = f"b{i}"
            ctes.append((branch.alias, self.branch_select(branch, dims, predicates, dialect)))
        select = self.stitch(branches, dims, trees, metrics, ctes)
        statement = select
        for alias, body in ctes:
            statement = statement.with_(alias, as_=body, copy=False)
        return Built(statement, dims, metrics, database, dialect)

    def definition(self, metric: Metric) -> str:
        text = f"{metric.name} = {metric.expression}"
        if metric.filter:
            text += f" where {self.model.filters.get(metric.filter, metric.filter)}"
        return text

    def dimensions(self, metrics: list[Metric]) -> list[_Dim]:
        q = self.query
        homes = {a.home for a in self.aggregates.values()}
        fields = [self.field(d, homes) for d in dict.fromkeys(q.dimensions)]
        grain = q.time_grain
        if grain is not None:
            from ba_mcp.metrics.model import GRAINS

            if grain not in GRAINS:
                raise fail(
                    "BAD_TIME_GRAIN",
                    f"time_grain {grain!r} is not a grain",
                    f"one of {', '.join(GRAINS)}",
                )
            if not any(f.is_time for f in fields):
                return self.metric_time(fields, grain)
        return self.named_dims(fields, grain)

    def named_dims(self, fields: list[Field], grain: str | None) -> list[_Dim]:
        seen: dict[str, int] = {}
        for f in fields:
            seen[f.name] = seen.get(f.name, 0) + 1
        dims = []
        for f in fields:
            name = f.name if seen[f.name] == 1 else f"{f.dataset}_{f.name}"
            use = grain if (grain and f.is_time) else None
            if use and use not in f.grains:
                raise fail(
                    "BAD_TIME_GRAIN",
                    f"{f.dataset}.{f.name} allows the grains {', '.join(f.grains)}, not {use}",
                    "ask for one of those",
                )
            dims.append(_Dim(f, f"{name}_{use}" if use else name, use))
        return dims

    def dim(self, f: Field, name: str, grain: str | None = None, per_metric: bool = False) -> _Dim:
        return _Dim(f, name, grain, per_metric)

    def metric_time(self, fields: list[Field], grain: str) -> list[_Dim]:
        """A grain with no time field asked for: each aggregate bucketed by its own metric's time dimension (its
        ``time_dimension``, the enclosing metric's, else the one time field its dataset reaches), the branches
        stitched on the bucket — so two metrics with dates of their own each count by their own date."""
        for agg in self.aggregates.values():
            agg.time = agg.time or self.time_of(agg)
        times = sorted({a.time for a in self.aggregates.values()})
        time_fields = [self.field(t) for t in times]
        for f in time_fields:
            if grain not in f.grains:
                raise fail(
                    "BAD_TIME_GRAIN",
                    f"{f.dataset}.{f.name} allows the grains {', '.join(f.grains)}, not {grain}",
                    "ask for one of those",
                )
        dims = self.named_dims(fields, None)
        first = time_fields[0]
        name = f"{first.name}_{grain}" if len(times) == 1 else f"metric_time_{grain}"
        dims.append(_Dim(first, name, grain, per_metric=True))
        return dims

    def time_of(self, agg: _Aggregate) -> str:
        found = [
            f
            for d in self.model.datasets.values()
            for f in d.fields.values()
            if f.is_time and (d.name == agg.home or self.many_to_one(agg.home, d.name))
        ]
        if len(found) == 1:
            return f"{found[0].dataset}.{found[0].name}"
        metric = agg.node.meta.get("metric") or agg.home
        raise fail(
            "NO_TIME_DIMENSION",
            f"time_grain needs a time dimension for {metric}, and the query names none"
            + (f" (candidates: {', '.join(f'{f.dataset}.{f.name}' for f in found)})" if found else ""),
            "add a time field (dimension: {is_time: true}) to dimensions, or give the metric a time_dimension",
        )

    def predicate(self, text: str, dialect: str) -> exp.Expr:
        name = text.strip()
        if name in self.model.filters:
            text = self.model.filters[name]
        try:
            tree = parse_expression(text, dialect)
            check_predicate(tree)
        except ValueError as exc:
            raise fail("BAD_PREDICATE", f"where {text[:120]!r}: {exc}", "predicates compare declared fields") from None
        for column in list(tree.find_all(exp.Column)):
            ref = f"{column.table}.{column.name}" if column.table else column.name
            if not column.table and column.name in self.model.metrics:
                raise fail(
                    "AGGREGATE_IN_WHERE",
                    f"where {text[:120]!r} names the metric {column.name}: where filters rows before they are "
                    "aggregated",
                    "filter the result instead (query_database on the result's artifact, or in run_python)",
                )
            f = self.field(ref, {a.home for a in self.aggregates.values()})
            column.set("table", exp.to_identifier(f.dataset))
            column.set("this", exp.to_identifier(f.name))
        return tree

    def filter_tree(self, name: str, dialect: str) -> exp.Expr:
        return self.predicate(self.model.filters[name], dialect)

    def branches(self) -> list[_Branch]:
        grouped: dict[tuple[str, tuple[str, ...], str, str], _Branch] = {}
        for agg in self.aggregates.values():
            key = (agg.home, agg.filters, agg.time, agg.non_additive)
            branch = grouped.setdefault(
                key, _Branch(agg.home, agg.filters, time=agg.time, non_additive=agg.non_additive)
            )
            agg.alias = f"a{len(branch.aggregates) + 1}"
            branch.aggregates.append(agg)
        return [grouped[k] for k in sorted(grouped)]

    def resolve(self, tree: exp.Expr, dialect: str) -> exp.Expr:
        """``dataset.field`` columns replaced by the field's expression over the dataset's alias."""
        return tree.transform(
            lambda n: (
                self.field_expression(self.dataset(n.table).fields[n.name], dialect) if isinstance(n, exp.Column) else n
            )
        )

    def field_expression(self, f: Field, dialect: str) -> exp.Expr:
        tree = parse_expression(f.expression, self.model.dialect_of(self.dataset(f.dataset).database))
        for column in list(tree.find_all(exp.Column)):
            column.set("table", exp.to_identifier(f.dataset))
        return tree if isinstance(tree, exp.Column) else exp.Paren(this=tree)

    def key_column(self, dataset: Dataset, name: str, dialect: str) -> exp.Expr:
        """A key column of a relationship or primary key: the declared field's expression, else the column."""
        if name in dataset.fields:
            return self.field_expression(dataset.fields[name], dialect)
        return exp.column(name, table=dataset.name)

    def grained(self, dim: _Dim, dialect: str, branch: _Branch | None = None) -> exp.Expr:
        value = self.field_expression(self.dim_field(dim, branch), dialect)
        if not dim.grain:
            return value
        own = self.model.grains.get(dialect, {}).get(dim.grain)  # a dialect sqlglot writes no DATE_TRUNC for
        if own:
            tree = parse_expression(own, dialect)
            return tree.transform(lambda n: value.copy() if isinstance(n, exp.Column) and n.name == "__x__" else n)
        trunc = exp.TimestampTrunc(this=value, unit=exp.Var(this=dim.grain.upper()))
        return exp.Cast(this=trunc, to=exp.DataType.build("DATE"))

    def dim_field(self, dim: _Dim, branch: _Branch | None) -> Field:
        """The field a dimension reads in a branch: metric time is the branch's own time dimension."""
        if dim.per_metric and branch is not None and branch.time:
            return self.field(branch.time)
        return dim.field

    def branch_select(self, branch: _Branch, dims: list[_Dim], predicates: list[exp.Expr], dialect: str) -> exp.Select:
        home = self.dataset(branch.home)
        filters = [self.filter_tree(name, dialect) for name in branch.filters]
        needed: set[str] = set()
        for tree in [*predicates, *filters, *(a.node for a in branch.aggregates)]:
            needed |= {c.table for c in tree.find_all(exp.Column)}
        needed |= {self.dim_field(d, branch).dataset for d in dims}
        joins, fans_out = self.join_tree(home.name, sorted(needed - {home.name}))
        edge = self.non_additive_edge(branch, dims, dialect)
        source = exp.select().from_(edge[0] if edge else self.table(home), copy=False)
        for ds, condition in joins:
            source = source.join(self.table(self.dataset(ds)), on=condition, join_type="left", copy=False)
        where = [self.resolve(p, dialect) for p in (*predicates, *filters)]
        if edge:
            where.append(edge[1])
        dim_values = [self.grained(d, dialect, branch) for d in dims]
        if not fans_out:
            select = source.select(
                *(exp.alias_(v, f"d{i}") for i, v in enumerate(dim_values, 1)),
                *(exp.alias_(self.resolve(a.node, dialect), a.alias) for a in branch.aggregates),
                copy=False,
            )
            if where:
                select = select.where(exp.and_(*where), copy=False)
            return select.group_by(*(v.copy() for v in dim_values), copy=False) if dim_values else select
        # symmetric aggregation: each (home row, group) once, then the aggregates over those rows — right for
        # SUM, COUNT, MIN, MAX and COUNT(DISTINCT …) (distinct values do not care how often a row repeats)
        for a in branch.aggregates:
            if not isinstance(a.node, _DISTRIBUTIVE):
                name = a.node.sql_name() if isinstance(a.node, exp.Func) else a.node.key.upper()
                shown = a.node.sql()
                raise fail(
                    "UNSAFE_REAGGREGATION",
                    f"{name} ({shown}) is a non-distributive aggregate, and the dimensions are reached from "
                    f"{home.name} through {fans_out} (one {home.name} row to many rows there): each {home.name} "
                    "row belongs to several groups, and the answer depends on a grain the query does not say",
                    f"ask by dimensions {home.name} reaches many-to-one, or use a distributive metric (SUM, COUNT, "
                    f"MIN, MAX); nested forms such as {name}({name}(…)) (per-group-member first) are not supported "
                    "yet",
                )
        if not home.primary_key:
            raise fail(
                "NO_PRIMARY_KEY",
                f"{home.name} declares no primary_key, so its rows cannot be counted once per group across the "
                "many-to-many path the dimensions need",
                f"declare primary_key for {home.name}",
            )
        keys = [self.key_column(home, k, dialect) for k in home.primary_key]
        inner = source.select(
            *(exp.alias_(k, f"k{i}") for i, k in enumerate(keys, 1)),
            *(exp.alias_(v, f"d{i}") for i, v in enumerate(dim_values, 1)),
            *(
                exp.alias_(self.resolve(arg, dialect), f"x_{a.alias}_{j}")
                for a in branch.aggregates
                for j, arg in enumerate(self.arguments(a.node))
            ),
            copy=False,
        ).distinct(copy=False)
        if where:
            inner = inner.where(exp.and_(*where), copy=False)
        outer_dims = [exp.column(f"d{i}", table="u") for i in range(1, len(dims) + 1)]
        aggs = []
        for a in branch.aggregates:
            node = a.node.copy()
            for j, arg in enumerate(self.arguments(node)):
                arg.replace(exp.column(f"x_{a.alias}_{j}", table="u"))
            aggs.append(exp.alias_(node, a.alias))
        select = exp.select(*(exp.alias_(c, f"d{i}") for i, c in enumerate(outer_dims, 1)), *aggs, copy=False).from_(
            inner.subquery("u", copy=False), copy=False
        )
        return select.group_by(*(c.copy() for c in outer_dims), copy=False) if outer_dims else select

    def non_additive_edge(self, branch: _Branch, dims: list[_Dim], dialect: str) -> tuple[exp.Expr, exp.Expr] | None:
        """A semi-additive branch (a balance, a stock level): its home rows at the edge of each period — the last
        (``window_choice: max``) or first (``min``) value of the non-additive dimension within the query's time
        bucket, per ``window_groupings`` (each account's own last day) — as (the home table with the edge
        computed, the condition keeping those rows). MetricFlow's ``non_additive_dimension``."""
        if not branch.non_additive:
            return None
        spec = json.loads(branch.non_additive)
        home = self.dataset(branch.home)
        try:
            on = self.field(str(spec.get("name", "")))
            groupings = [self.field(str(g)) for g in spec.get("window_groupings") or []]
        except ToolFailure as failure:
            raise fail("BAD_METRIC", f"non_additive_dimension: {failure.message}", failure.hint) from None
        if on.dataset != home.name or any(g.dataset != home.name for g in groupings):
            raise fail(
                "BAD_METRIC",
                f"non_additive_dimension of {home.name}'s metric names fields of another dataset",
                f"name fields of {home.name}",
            )
        choice = str(spec.get("window_choice", "max")).lower()
        if choice not in ("max", "min"):
            raise fail("BAD_METRIC", f"non_additive_dimension window_choice {choice!r}: max (last) or min (first)")
        value = self.field_expression(on, dialect)
        grain = next((d.grain for d in dims if d.grain), None)
        partition = [self.grained(_Dim(on, "", grain), dialect)] if grain else []
        partition += [self.field_expression(g, dialect) for g in groupings]
        window = exp.Window(
            this=(exp.Max if choice == "max" else exp.Min)(this=value.copy()),
            partition_by=[p.copy() for p in partition] or None,
        )
        inner = (
            exp.select(exp.Star(), exp.alias_(window, "ba_edge"), copy=False)
            .from_(self.table(home), copy=False)
            .subquery(home.name, copy=False)
        )
        return inner, exp.EQ(this=value.copy(), expression=exp.column("ba_edge", table=home.name))

    def arguments(self, node: exp.Expr) -> list[exp.Expr]:
        """The value arguments of an aggregate (COUNT(*) has none)."""
        this = node.this
        if isinstance(this, exp.Distinct):
            return list(this.expressions)
        if this is None or isinstance(this, exp.Star):
            return []
        return [this]

    def table(self, ds: Dataset) -> exp.Table:
        parts = list(ds.table)
        name = parts[-1]
        db = parts[-2] if len(parts) >= 2 else None
        return exp.table_(name, db=db, alias=ds.name)

    def join_tree(self, home: str, targets: list[str]) -> tuple[list[tuple[str, exp.Expr]], str]:
        """The LEFT joins from ``home`` to each target (in a stable order), and the first step followed one-to-many
        ('' when none: each home row stays one row)."""
        reached: dict[str, str] = {home: ""}  # dataset -> the relationship it was reached by
        joins: list[tuple[str, exp.Expr]] = []
        fans_out = ""
        for target in targets:
            for rel, forward in self.path(home, target):
                far = rel.target if forward else rel.source
                if far in reached:
                    if reached[far] != rel.name and far != home:
                        raise fail(
                            "AMBIGUOUS_PATH",
                            f"{far} is reached both by {reached[far]} and by {rel.name}",
                            "keep one relationship between these datasets (or a dataset per role)",
                        )
                    continue
                reached[far] = rel.name
                if not forward and not fans_out:
                    fans_out = f"the relationship {rel.name} ({rel.target} → {rel.source})"
                src, tgt = self.dataset(rel.source), self.dataset(rel.target)
                condition = exp.and_(
                    *(
                        exp.EQ(this=self.key_column(src, a, ""), expression=self.key_column(tgt, b, ""))
                        for a, b in zip(rel.source_columns, rel.target_columns, strict=True)
                    )
                )
                joins.append((far, condition))
        return joins, fans_out

    def stitch(
        self,
        branches: list[_Branch],
        dims: list[_Dim],
        trees: dict[str, exp.Expr],
        metrics: list[Metric],
        ctes: list[tuple[str, exp.Expr]],
    ) -> exp.Select:
        first = branches[0]
        if len(branches) > 1 and not dims:
            homes = [b.home for b in branches]
            for other in homes[1:]:
                if other != homes[0] and not self.paths(homes[0], other):
                    raise fail(
                        "NO_SHARED_DIMENSION",
                        f"{homes[0]} and {other} have no shared dimension: no relationship connects them, so their "
                        "totals have nothing to be read together by",
                        "ask for each metric in a query of its own",
                    )
        n = len(dims)
        if len(branches) > 1 and dims:
            # The FULL OUTER stitch, written as every branch's keys (a UNION: NULL keys meet as one) LEFT-joined to
            # each branch on IS NOT DISTINCT FROM — PostgreSQL cannot FULL JOIN on that condition, and a plain `=`
            # would split the NULL group (the orphan bucket) into one row per branch.
            keys = exp.union(
                *(
                    exp.select(*(exp.column(f"d{i}") for i in range(1, n + 1)), copy=False).from_(b.alias, copy=False)
                    for b in branches
                ),
                distinct=True,
                copy=False,
            )
            ctes.append(("k", keys))
            select = exp.select().from_(exp.table_("k"), copy=False)
            for branch in branches:
                condition = exp.and_(
                    *(
                        exp.NullSafeEQ(
                            this=exp.column(f"d{i}", table="k"), expression=exp.column(f"d{i}", table=branch.alias)
                        )
                        for i in range(1, n + 1)
                    )
                )
                select = select.join(exp.table_(branch.alias), on=condition, join_type="left", copy=False)
            merged = [exp.column(f"d{i}", table="k") for i in range(1, n + 1)]
        else:
            select = exp.select().from_(exp.table_(first.alias), copy=False)
            for branch in branches[1:]:  # no dimensions: one row each
                select = select.join(exp.table_(branch.alias), join_type="cross", copy=False)
            merged = [exp.column(f"d{i}", table=first.alias) for i in range(1, n + 1)]
        outputs: list[exp.Expr] = [exp.alias_(m, dim.name) for m, dim in zip(merged, dims, strict=True)]
        for metric in metrics:

            def to_column(node: exp.Expr) -> exp.Expr:
                if not isinstance(node, exp.AggFunc) or "aggregate" not in node.meta:
                    return node
                sql, filters, time = node.meta["aggregate"]
                registered = self.aggregates[(sql, tuple(filters), time)]
                branch = next(b for b in branches if any(a is registered for a in b.aggregates))
                return exp.column(registered.alias, table=branch.alias)

            tree = trees[metric.name].transform(to_column)
            outputs.append(exp.alias_(tree, metric.name))
        return select.select(*outputs, copy=False)

    def order_and_limit(self, dims: list[_Dim], metrics: list[Metric], dialect: str) -> str:
        names = [d.name for d in dims] + [m.name for m in metrics]
        aliases = {f"{d.field.dataset}.{d.field.name}": d.name for d in dims} | {d.field.name: d.name for d in dims}
        terms = []
        for item in self.query.order_by or [d.name for d in dims]:
            words = item.split()
            direction = "ASC"
            if len(words) == 2 and words[1].upper() in ("ASC", "DESC"):
                direction = words[1].upper()
            elif len(words) != 1:
                raise fail("BAD_ORDER_BY", f"order_by {item[:80]!r}: a column name, then asc or desc", "")
            name = aliases.get(words[0], words[0])
            if name not in names:
                raise fail(
                    "BAD_ORDER_BY",
                    f"order_by {words[0]!r} is not a column of the result",
                    f"columns: {', '.join(names)}",
                )
            terms.append(f"{exp.to_identifier(name).sql(dialect=dialect or None)} {direction} NULLS LAST")
        text = f" ORDER BY {', '.join(terms)}" if terms else ""
        if self.query.limit is not None:
            text += f" LIMIT {int(self.query.limit)}"
        return text
