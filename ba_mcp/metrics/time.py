"""Time intelligence: metrics of other metrics' values, computed over the compiled result (docs/metrics.md).

A metric whose COMMON custom extension names one of these is a *post* metric: its expression names the metric it
is of (``expression: revenue``), and it is computed over the result of the plain metrics at the query's grain
(the compiler's statement, as CTE ``r``) — so every kind is one statement in the database's dialect, written once
in DuckDB's and transpiled by sqlglot. The names and meanings follow MetricFlow's, so dbt models translate:

* ``offset_window: "1 year"`` — the metric's value ``window`` earlier (``1 month``: the previous period at a month
  grain; ``1 year``: the same period last year): a join of ``r`` to itself on the other dimensions and the shifted
  period, so a missing period is NULL, never the row before it. Change and % change are derived metrics over it
  (``revenue - revenue_last_year``).
* ``cumulative: {}`` — the running total from the start; ``{window: "3 months"}`` — rolling over the periods in
  the window (``agg: avg`` averages the periods' values); ``{grain_to_date: year | quarter | month}`` — to date,
  restarting each period, ``fiscal_year_start_month`` shifting years and quarters (April: 4).
* ``share: {of: [dimension, …] | "all"}`` — the value as a share of its total over the named dimensions (the
  others partition it; ``all``: of the grand total).
* ``conversion: {base_entity, base_time, conversion_entity, conversion_time, window, calculation}`` — of the
  entities with a base event in the period, the share with a conversion event within ``window`` after it
  (``calculation: conversions`` counts them).

``non_additive_dimension`` (a balance's last value per period) is a property of a plain metric's aggregate, in
``compile.py``. Derived metrics over post metrics (a year-over-year change) are computed here too.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp

from ba_mcp.errors import ErrorType, ToolFailure
from ba_mcp.metrics.sql import parse_expression

if TYPE_CHECKING:
    from ba_mcp.metrics.model import Metric, Model

# compile.py hands this layer its compiler (``make(query)``), which builds the plain metrics' statement and names
# fields; this module imports nothing of it (the compiler calls in here, not the other way round)
Compiler = Any

POST = ("offset_window", "cumulative", "share", "conversion")
_UNITS = {"day": "day", "week": "week", "month": "month", "quarter": "quarter", "year": "year"}


def fail(code: str, message: str, hint: str = "") -> ToolFailure:
    return ToolFailure(ErrorType.VALIDATION_ERROR, code, message, hint)


def _names(model: Model, metric: Metric) -> list[str]:
    """The metrics an expression names (bare names)."""
    try:
        tree = parse_expression(metric.expression, "")
    except ValueError:
        return []
    return [c.name for c in tree.find_all(exp.Column) if not c.table and c.name in model.metrics]


def needs_post(model: Model, name: str, stack: tuple[str, ...] = ()) -> bool:
    metric = model.metrics.get(name)
    if metric is None or name in stack:
        return False
    if metric.kind() in POST:
        return True
    return any(needs_post(model, n, (*stack, name)) for n in _names(model, metric))


def window_of(text: Any, what: str) -> tuple[int, str]:
    """``"3 months"`` → (3, "month")."""
    m = re.fullmatch(r"\s*(\d{1,4})\s+([a-z]+?)s?\s*", str(text or "").lower())
    if not m or m.group(2) not in _UNITS:
        raise fail("BAD_METRIC", f"{what}: a window is '<n> <day|week|month|quarter|year>', not {text!r}")
    return int(m.group(1)), m.group(2)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _shifted(column: str, n: int, unit: str) -> str:
    """``column`` moved ``n`` units (negative: back), as a DATE (DuckDB's SQL: transpiled after)."""
    if unit == "week":
        n, unit = n * 7, "day"
    if unit == "quarter":
        n, unit = n * 3, "month"
    return f"CAST({column} + INTERVAL '{n}' {unit.upper()} AS DATE)"


def post_compiled(
    model: Model, query: Any, make: Callable[[Any], Compiler]
) -> tuple[str, str, str, list[str], list[str], list[str]]:
    """The query's statement (sql, database, dialect, columns, definitions, notes); ``make(query)`` is a compiler
    of the plain metrics (compile.py's)."""
    return _TimeLayer(model, query, make).compiled()


class _TimeLayer:
    def __init__(self, model: Model, query: Any, make: Callable[[Any], Compiler]) -> None:
        self.model = model
        self.query = query
        self.make = make
        self.ctes: list[tuple[str, str]] = []
        self.joins: list[str] = []
        self.values: dict[str, str] = {}  # metric name -> its value's SQL in the final select

    def metric(self, name: str) -> Metric:
        metric: Metric = self.make(dataclasses.replace(self.query, metrics=[name])).metric(name)
        return metric

    def base_of(self, metric: Metric) -> str:
        """The metric a post metric is of: its expression is that metric's name."""
        name = metric.expression.strip()
        if name not in self.model.metrics or metric.kind() == "conversion":
            raise fail(
                "BAD_METRIC",
                f"metric {metric.name}: a {metric.kind()} metric's expression names the metric it is of, not "
                f"{metric.expression[:60]!r}",
            )
        return name

    def plain_needed(self, names: list[str]) -> list[str]:
        """The plain metrics the compiler must give for the metrics asked for."""
        out: list[str] = []

        def visit(name: str, stack: tuple[str, ...]) -> None:
            metric = self.metric(name)
            if name in stack:
                raise fail("METRIC_CYCLE", f"metrics refer to each other in a circle: {' → '.join([*stack, name])}")
            if metric.kind() == "conversion":
                return
            if metric.kind() in POST:
                visit(self.base_of(metric), (*stack, name))
            elif needs_post(self.model, name):
                for inner in _names(self.model, metric):
                    visit(inner, (*stack, name))
            elif name not in out:
                out.append(name)

        for name in names:
            visit(name, ())
        return out

    def compiled(self) -> tuple[str, str, str, list[str], list[str], list[str]]:
        q = self.query
        asked = [self.metric(n) for n in dict.fromkeys(q.metrics)]
        plain = self.plain_needed([m.name for m in asked])
        conversions = [m for m in asked if m.kind() == "conversion"]
        self.has_plain = bool(plain)
        shown: list[exp.Expr] = []  # filters on the query's time: they choose the periods shown (below)
        notes: list[str] = []
        if plain:
            compiler = self.make(dataclasses.replace(q, metrics=plain))
            built = compiler.build()
            readers = self.history_readers([m.name for m in asked])
            if readers and q.where:
                kept, shown, texts = self.time_filters(compiler, built)
                if shown:
                    compiler = self.make(dataclasses.replace(q, metrics=plain, where=kept))
                    built = compiler.build()
                    notes.append(
                        f"the time filter ({'; '.join(texts)}) chose the periods shown, each by its first day; "
                        f"{', '.join(readers)} read the history before them (a filter on the date applies after "
                        "the offset or window, as in MetricFlow)"
                    )
            dims, database, dialect = built.dims, built.database, built.dialect
            inner: exp.Expr = built.statement
        else:  # conversions only: their own rows
            compiler = self.make(dataclasses.replace(q, metrics=[]))
            dims, database, dialect, inner = [], "", "", exp.select("1")
        if dialect in self.model.grains:  # a dialect without DATE_TRUNC (the registry writes its grains)
            raise fail(
                "NOT_IN_THIS_DIALECT",
                f"time intelligence is not compiled for {dialect} yet (its dates have no DATE_TRUNC)",
                "ask for the plain metric and compute the rest in run_python",
            )
        self.compiler, self.dims = compiler, dims
        self.time = next((d for d in dims if d.grain), None)
        for conversion in conversions:
            database, dialect = self.conversion(conversion, compiler, database, dialect)
        for m in asked:
            self.value_of(m.name, ())
        base = "r" if plain else "c1"
        if plain:
            self.ctes.insert(0, ("r", "SELECT 1"))
        names = [d.name for d in self.dims]
        selected = [f"{base}.{_q(n)} AS {_q(n)}" for n in names]
        selected += [f"{self.values[m.name]} AS {_q(m.name)}" for m in asked]
        text = "WITH " + ", ".join(f"{a} AS ({body})" for a, body in self.ctes)
        text += f" SELECT {', '.join(selected)} FROM {base} " + " ".join(self.joins)
        if shown and self.time is not None:
            period = exp.column(self.time.name, table="r", quoted=True)
            conditions = []
            for tree in shown:
                tree = tree.copy()
                for column in list(tree.find_all(exp.Column)):
                    column.replace(period.copy())
                conditions.append(tree.sql(dialect="duckdb"))
            text += " WHERE " + " AND ".join(f"({c})" for c in conditions)
        statement = sqlglot.parse_one(text, read="duckdb")
        if plain:  # the compiler's statement is CTE r
            for cte in statement.args["with_"].expressions:
                if cte.alias == "r":
                    cte.set("this", inner)
        sql = statement.sql(dialect=dialect or None)
        sql += compiler.order_and_limit(self.dims, asked, dialect)
        definitions = [self.definition(m) for m in asked]
        return sql, database, dialect, names + [m.name for m in asked], definitions, notes

    def history_readers(self, names: list[str]) -> list[str]:
        """The metrics (asked for, or inside those) whose value reads other periods: offsets and cumulatives."""
        found: list[str] = []

        def visit(name: str, stack: tuple[str, ...]) -> None:
            if name in stack:
                return
            metric = self.metric(name)
            kind = metric.kind()
            if kind in ("offset_window", "cumulative"):
                found.append(name)
            if kind in POST and kind != "conversion":
                visit(self.base_of(metric), (*stack, name))
            elif needs_post(self.model, name):
                for inner in _names(self.model, metric):
                    visit(inner, (*stack, name))

        for name in names:
            visit(name, ())
        return list(dict.fromkeys(found))

    def time_filters(self, compiler: Compiler, built: Any) -> tuple[list[str], list[exp.Expr], list[str]]:
        """The query's ``where`` split: those on other fields (they filter rows, kept), and those on the query's
        time field alone (they choose the periods shown, so an offset or a window still reads the periods before
        — a filter that mixes the two cannot be split, and is refused by name)."""
        time = next((d for d in built.dims if d.grain), None)
        if time is None:
            return list(self.query.where), [], []
        home = (time.field.dataset, time.field.name)
        kept: list[str] = []
        shown: list[exp.Expr] = []
        texts: list[str] = []
        for text in self.query.where:
            tree = compiler.predicate(text, built.dialect)
            fields = {(c.table, c.name) for c in tree.find_all(exp.Column)}
            if home not in fields:
                kept.append(text)
            elif fields == {home}:
                shown.append(tree)
                texts.append(" ".join(text.split()))
            else:
                raise fail(
                    "TIME_FILTER_MIXED",
                    f"where {text[:120]!r} filters {time.field.dataset}.{time.field.name} together with other "
                    "fields, and an offset or a window reads periods before those shown",
                    f"give the date filter as a where of its own ({time.field.dataset}.{time.field.name} >= …)",
                )
        return kept, shown, texts

    # -- values ----------------------------------------------------------------------------------------------

    def definition(self, metric: Metric) -> str:
        kind = metric.kind()
        if not kind:
            return str(self.compiler.definition(metric))
        spec = ", ".join(f"{k}: {v}" for k, v in metric.spec().items())
        text = f"{metric.name} = {kind} of {metric.expression}" + (f" ({spec})" if spec else "")
        if kind == "cumulative":  # MetricFlow's period_agg: ours is always the period's end
            text += "; each period's value is the total through its last day (the whole period)"
        return text

    def value_of(self, name: str, stack: tuple[str, ...]) -> str:
        if name in self.values:
            return self.values[name]
        metric = self.metric(name)
        kind = metric.kind()
        if kind == "offset_window":
            value = self.offset(metric)
        elif kind == "cumulative":
            value = self.cumulative(metric)
        elif kind == "share":
            value = self.share(metric)
        elif kind == "conversion":
            value = self.values[name]  # set by conversion()
        elif needs_post(self.model, name):  # a derived metric over post metrics: its expression over their values
            tree = parse_expression(metric.expression, "")
            for column in list(tree.find_all(exp.Column)):
                if not column.table and column.name in self.model.metrics:
                    inner = self.value_of(column.name, (*stack, name))
                    column.replace(exp.Paren(this=sqlglot.parse_one(inner, read="duckdb")))
            value = tree.sql(dialect="duckdb")
        else:
            value = f"r.{_q(name)}"
        self.values[name] = value
        return value

    def need_time(self, metric: Metric) -> Any:
        if self.time is None:
            raise fail(
                "NEEDS_TIME_GRAIN",
                f"{metric.name} is a {metric.kind()} metric: it needs a time_grain (and the periods it compares)",
                "pass time_grain (day, week, month, quarter, year)",
            )
        return self.time

    def others(self) -> list[str]:
        return [d.name for d in self.dims if d is not self.time]

    def same(self, left: str, right: str, names: list[str]) -> list[str]:
        return [f"{left}.{_q(n)} IS NOT DISTINCT FROM {right}.{_q(n)}" for n in names]

    def offset(self, metric: Metric) -> str:
        time = self.need_time(metric)
        n, unit = window_of(metric.spec().get("window"), f"metric {metric.name}: offset_window")
        base = self.base_of(metric)
        alias = f"o{len(self.joins) + 1}"
        on = [
            *self.same(alias, "r", self.others()),
            f"{alias}.{_q(time.name)} = {_shifted('r.' + _q(time.name), -n, unit)}",
        ]
        self.joins.append(f"LEFT JOIN r AS {alias} ON {' AND '.join(on)}")
        return f"{alias}.{_q(base)}"

    def cumulative(self, metric: Metric) -> str:
        time = self.need_time(metric)
        spec = metric.spec()
        base = self.base_of(metric)
        t = _q(time.name)
        on = [*self.same("w", "r", self.others()), f"w.{t} <= r.{t}"]
        if spec.get("window") and spec.get("grain_to_date"):
            raise fail("BAD_METRIC", f"metric {metric.name}: cumulative takes a window or a grain_to_date, not both")
        if spec.get("window"):
            n, unit = window_of(spec["window"], f"metric {metric.name}: cumulative window")
            on.append(f"w.{t} > {_shifted('r.' + t, -n, unit)}")
        elif spec.get("grain_to_date"):
            grain = str(spec["grain_to_date"]).lower()
            if grain not in ("year", "quarter", "month", "week"):
                raise fail("BAD_METRIC", f"metric {metric.name}: grain_to_date is year, quarter, month or week")
            start = int(spec.get("fiscal_year_start_month") or 1)
            if not 1 <= start <= 12:
                raise fail("BAD_METRIC", f"metric {metric.name}: fiscal_year_start_month is 1 … 12")
            shift = start - 1 if grain in ("year", "quarter") else 0

            def period(column: str) -> str:
                moved = _shifted(column, -shift, "month") if shift else column
                return f"DATE_TRUNC('{grain}', {moved})"

            on.append(f"{period('w.' + t)} = {period('r.' + t)}")
        agg = str(spec.get("agg", "sum")).lower()
        if agg not in ("sum", "avg", "min", "max"):
            raise fail("BAD_METRIC", f"metric {metric.name}: cumulative agg is sum, avg, min or max")
        alias = f"c{len(self.ctes) + 1}"
        keys = ", ".join(f"r.{_q(d.name)}" for d in self.dims)
        self.ctes.append(
            (
                alias,
                f"SELECT {keys}, {agg.upper()}(w.{_q(base)}) AS v FROM r LEFT JOIN r AS w ON {' AND '.join(on)} "
                f"GROUP BY {keys}",
            )
        )
        self.joins.append(f"LEFT JOIN {alias} ON {' AND '.join(self.same(alias, 'r', [d.name for d in self.dims]))}")
        return f"{alias}.v"

    def share(self, metric: Metric) -> str:
        base = self.base_of(metric)
        of = metric.spec().get("of", "all")
        if of == "all":
            partition: list[str] = []
        else:
            wanted = [of] if isinstance(of, str) else list(of)
            named = {f"{d.field.dataset}.{d.field.name}": d.name for d in self.dims}
            named |= {d.field.name: d.name for d in self.dims}
            over: set[str] = set()
            for ref in wanted:
                if ref not in named:
                    raise fail(
                        "SHARE_OF_MISSING",
                        f"{metric.name} is a share of its total over {ref}, which the query does not group by",
                        f"add {ref} to dimensions",
                    )
                over.add(named[ref])
            partition = [f"r.{_q(d.name)}" for d in self.dims if d.name not in over]
        window = f"PARTITION BY {', '.join(partition)}" if partition else ""
        return f"r.{_q(base)} / NULLIF(SUM(r.{_q(base)}) OVER ({window}), 0)"

    # -- conversion ----------------------------------------------------------------------------------------

    def conversion(self, metric: Metric, compiler: Compiler, database: str, dialect: str) -> tuple[str, str]:
        """Of the entities with a base event in a period, those with a conversion event within the window after
        one of their base events: a CTE keyed like the query's rows (the base events' period and the base
        dataset's own dimensions)."""
        spec = metric.spec()
        where = f"metric {metric.name}: conversion"
        try:
            fields = {k: compiler.field(str(spec.get(k, ""))) for k in ("base_entity", "base_time")}
            fields |= {k: compiler.field(str(spec.get(k, ""))) for k in ("conversion_entity", "conversion_time")}
        except Exception as exc:
            raise fail(
                "BAD_METRIC",
                f"{where} names base_entity, base_time, conversion_entity, conversion_time "
                f"(dataset.field): {getattr(exc, 'message', exc)}",
            ) from None
        n, unit = window_of(spec.get("window"), f"{where} window")
        calculation = str(spec.get("calculation", "conversion_rate"))
        if calculation not in ("conversion_rate", "conversions"):
            raise fail("BAD_METRIC", f"{where}: calculation is conversion_rate or conversions")
        base_ds = compiler.dataset(fields["base_time"].dataset)
        conv_ds = compiler.dataset(fields["conversion_time"].dataset)
        if fields["base_entity"].dataset != base_ds.name or fields["conversion_entity"].dataset != conv_ds.name:
            raise fail("BAD_METRIC", f"{where}: each entity is a field of its event's dataset")
        own = conv_ds.database
        if database and own != database:
            raise fail("MIXED_DATABASES", f"{metric.name} lives in {own}, the other metrics in {database}")
        dialect = dialect or self.model.dialect_of(own)
        if self.query.where:
            raise fail("WHERE_NOT_APPLIED", f"{metric.name}: where is not applied to a conversion metric yet", "")

        def value(f: Any, alias: str) -> str:
            tree = compiler.field_expression(f, dialect)
            for column in tree.find_all(exp.Column):
                column.set("table", exp.to_identifier(alias))
            return tree.sql(dialect="duckdb")

        if not self.dims:  # conversions only: the query's dimensions, the grain on the base event's time
            fields_asked = [compiler.field(d) for d in dict.fromkeys(self.query.dimensions)]
            dims = compiler.named_dims(fields_asked, None)
            if self.query.time_grain:
                dims.append(
                    compiler.dim(
                        fields["base_time"],
                        f"{fields['base_time'].name}_{self.query.time_grain}",
                        self.query.time_grain,
                        per_metric=True,
                    )
                )
            self.dims = dims
            self.time = next((d for d in dims if d.grain), None)
        keys = []
        for d in self.dims:
            f = fields["base_time"] if d.grain else d.field
            if f.dataset != base_ds.name:
                raise fail(
                    "CONVERSION_DIMENSION",
                    f"{metric.name} is grouped by fields of {base_ds.name} (its base events) only, not "
                    f"{d.field.dataset}",
                    f"ask by {base_ds.name}'s fields and time_grain",
                )
            expr = value(f, "a")
            if d.grain:
                expr = f"CAST(DATE_TRUNC('{d.grain}', {expr}) AS DATE)"
            keys.append((d.name, expr))
        select_keys = ", ".join(f"{e} AS {_q(name)}" for name, e in keys)
        group = ", ".join(str(i) for i in range(1, len(keys) + 1))
        a_time, b_time = value(fields["base_time"], "a"), value(fields["conversion_time"], "b")
        a_entity, b_entity = value(fields["base_entity"], "a"), value(fields["conversion_entity"], "b")
        table_a = compiler.table(base_ds).sql(dialect="duckdb").rsplit(" AS ", 1)[0]
        table_b = compiler.table(conv_ds).sql(dialect="duckdb").rsplit(" AS ", 1)[0]
        alias = f"c{len(self.ctes) + 1}"
        body = (
            f"SELECT {select_keys + ', ' if keys else ''}COUNT(DISTINCT {a_entity}) AS base_n, "
            f"COUNT(DISTINCT CASE WHEN {b_entity} IS NOT NULL THEN {a_entity} END) AS converted_n "
            f"FROM {table_a} AS a LEFT JOIN {table_b} AS b ON {b_entity} = {a_entity} "
            f"AND {b_time} >= {a_time} AND {b_time} <= {_shifted(a_time, n, unit)}"
            + (f" GROUP BY {group}" if keys else "")
        )
        self.ctes.append((alias, body))
        if self.has_plain:
            names = [d.name for d in self.dims]
            self.joins.append(f"LEFT JOIN {alias} ON {' AND '.join(self.same(alias, 'r', names)) or 'TRUE'}")
        elif alias != "c1":
            names = [d.name for d in self.dims]
            self.joins.append(f"FULL JOIN {alias} ON {' AND '.join(self.same(alias, 'c1', names)) or 'TRUE'}")
        self.values[metric.name] = (
            f"{alias}.converted_n"
            if calculation == "conversions"
            else f"CAST({alias}.converted_n AS DOUBLE) / NULLIF({alias}.base_n, 0)"
        )
        return own, dialect
