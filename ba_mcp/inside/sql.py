"""What the engine worker asks DuckDB: a statement's parse, a database's catalog, a stored table's figures.
Runs in the worker only (it imports DuckDB); the server gets plain JSON-able answers."""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from ba_mcp.results import stats_kind

if TYPE_CHECKING:
    from ba_mcp.databases.base import TableInfo, Tables
    from ba_mcp.workers.messages import Analysed

# EXPLAIN [ANALYZE | (FORMAT name)] <statement>: what follows the prefix must parse as one SELECT.
_EXPLAIN = re.compile(r"^\s*explain\s+(?:(analyze)\s+|\(\s*format\s+(json|text|html|graphviz)\s*\)\s+)?", re.I)
# CREATE … AS <query>: where the query a CREATE TABLE/VIEW … AS reads starts.
_CREATE_AS = re.compile(r"\bas\s*(?=\(?\s*(?:select|with|from|values|pivot|unpivot)\b)", re.I)
_EXPLAIN_REFUSAL = (
    "EXPLAIN is allowed only of a single SELECT (EXPLAIN SELECT …, EXPLAIN ANALYZE SELECT …, "
    "EXPLAIN (FORMAT json) SELECT …)"
)


def analyse(con: Any, query: str) -> Analysed:
    """DuckDB's parse of ``query``: its statements' types, the unqualified table names a single SELECT (or
    the query of a CREATE … AS) reads, and the one statement that would run — an EXPLAIN rebuilt around the
    SELECT it explains, so no EXPLAIN of anything else (EXPLAIN ANALYZE COPY …) can run. Raises the
    engine's ParserException for a syntax error."""
    statements = list(con.extract_statements(query))
    kinds = [st.type.name for st in statements]
    out: Analysed = {"op": "analysis", "kinds": kinds, "refs": [], "sql": "", "refusal": ""}
    if len(statements) != 1:
        return out
    sql = statements[0].query
    if kinds[0] == "SELECT":
        out["refs"], out["sql"] = _refs(con, sql), sql
    elif kinds[0] == "EXPLAIN":
        match = _EXPLAIN.match(sql)
        inner = _statements_or_none(con, sql[match.end() :]) if match else None
        if match is None or inner is None or len(inner) != 1 or inner[0].type.name != "SELECT":
            out["refusal"] = _EXPLAIN_REFUSAL
            return out
        prefix = "EXPLAIN ANALYZE " if match.group(1) else "EXPLAIN "
        if match.group(2):
            prefix = f"EXPLAIN (FORMAT {match.group(2).lower()}) "
        out["refs"], out["sql"] = _refs(con, inner[0].query), prefix + inner[0].query
    elif kinds[0] in ("CREATE", "DROP"):
        found = _CREATE_AS.search(sql) if kinds[0] == "CREATE" else None
        refs: list[str] = []
        if found:
            body = sql[found.end() :].strip().rstrip(";").strip()
            while body.startswith("(") and body.endswith(")"):
                body = body[1:-1].strip()
            inner = _statements_or_none(con, body)
            if inner and len(inner) == 1 and inner[0].type.name == "SELECT":
                refs = _refs(con, inner[0].query)
        out["refs"], out["sql"] = refs, sql
    return out


def _statements_or_none(con: Any, sql: str) -> list[Any] | None:
    import duckdb

    try:
        return list(con.extract_statements(sql))
    except duckdb.Error:
        return None


def _refs(con: Any, statement_sql: str) -> list[str]:
    row = _first(con.execute("SELECT json_serialize_sql(?::VARCHAR)", [statement_sql]))
    tree = json.loads(row[0]) if row else {"error": True}
    if tree.get("error"):
        return []
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            unqualified = not node.get("schema_name") and not node.get("catalog_name")
            if node.get("type") == "BASE_TABLE" and isinstance(node.get("table_name"), str) and unqualified:
                found.append(node["table_name"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(tree)
    return list(dict.fromkeys(found))


_FEW = 12


def _first(result: Any) -> Any:
    """The first row of a result, which is read to its end (DuckDB refuses other work on a connection whose
    last result is unfinished)."""
    rows = result.fetchall()
    return rows[0] if rows else None


def catalog(con: Any, alias: str) -> Tables:
    """Tables and views of database ``alias`` with columns, types, row counts, comments, view definitions and
    the values of low-cardinality text columns; then the session's own temporary tables and views."""
    tables: Tables = {}
    for database, temporary in ((alias, False), ("temp", True)):
        info: dict[str, dict[str, Any]] = {
            t: {"kind": "temporary table" if temporary else "table", "comment": c}
            for t, c in con.execute(
                "SELECT table_name, comment FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main' "
                "AND NOT internal",
                [database],
            ).fetchall()
        }
        for view, comment, sql in con.execute(
            "SELECT view_name, comment, sql FROM duckdb_views() WHERE database_name = ? AND schema_name = 'main' "
            "AND NOT internal",
            [database],
        ).fetchall():
            info[view] = {"kind": "temporary view" if temporary else "view", "comment": comment, "definition": sql}
        columns = con.execute(
            "SELECT table_name, column_name, data_type, is_nullable, comment FROM duckdb_columns() "
            "WHERE database_name = ? AND schema_name = 'main' AND NOT internal ORDER BY table_name, column_index",
            [database],
        ).fetchall()
        found: Tables = {}
        for table, column, dtype, nullable, comment in columns:
            entry = found.setdefault(table, _entry(info.get(table, {"kind": "table"})))
            entry["columns"].append(
                {"name": column, "type": dtype, "nullable": bool(nullable), "comment": comment or ""}
            )
        for table, kind, cols, target, target_cols in con.execute(
            "SELECT table_name, constraint_type, constraint_column_names, referenced_table, referenced_column_names "
            "FROM duckdb_constraints() WHERE database_name = ? AND schema_name = 'main' "
            "AND constraint_type IN ('PRIMARY KEY', 'FOREIGN KEY') ORDER BY table_name, constraint_index",
            [database],
        ).fetchall():
            if table not in found:
                continue
            if kind == "PRIMARY KEY":
                found[table]["primary_key"] = list(cols)
            else:
                found[table].setdefault("foreign_keys", []).append(
                    {"columns": list(cols), "references": target, "referenced_columns": list(target_cols)}
                )
        qualified = '"' + database.replace('"', '""') + '".main.'
        for table, entry in found.items():
            name = qualified + '"' + table.replace('"', '""') + '"'
            count = _first(con.execute(f"SELECT count(*) FROM {name}"))
            entry["rows"] = count[0] if count else 0
            if entry["kind"] == "table":
                for col in entry["columns"]:
                    if col["type"] == "VARCHAR" and entry["rows"]:
                        col["values"] = _few_values(con, name, col["name"])
        tables.update(found)
    return tables


def _entry(info: dict[str, Any]) -> TableInfo:
    """A table's or view's entry before its columns are read: its kind, comment and a view's definition."""
    entry: TableInfo = {"kind": str(info["kind"]), "rows": 0, "columns": []}
    if "comment" in info:
        entry["comment"] = info["comment"] or ""
    if "definition" in info:
        entry["definition"] = info["definition"] or ""
    return entry


def _few_values(con: Any, table: str, column: str) -> list[str] | None:
    """The distinct values of a text column when there are at most a dozen (order statuses, segments)."""
    col = '"' + column.replace('"', '""') + '"'
    rows = con.execute(f"SELECT DISTINCT {col} FROM {table} WHERE {col} IS NOT NULL LIMIT {_FEW + 1}").fetchall()
    if len(rows) > _FEW:
        return None
    return sorted(str(r[0]) for r in rows)


def _plain(value: Any) -> Any:
    """A figure as JSON carries it, rendered as every summary line renders cells (``cell_value``)."""
    from ba_mcp.results import cell_value

    return cell_value(value)


def parquet_stats(con: Any, path: str) -> tuple[dict[str, dict[str, Any]], int]:
    """Whole-column figures (count, nulls; min/mean/max/distinct of numbers; min/max of times; distinct and
    the top value of the rest) of a Parquet file, and its row count — streamed by DuckDB, spilling as it needs."""
    import pyarrow.parquet as pq

    schema = pq.read_schema(path)
    source = "read_parquet('" + path.replace("'", "''") + "')"
    aggregates = ["count(*)"]
    plan: list[tuple[str, str, int]] = []
    import pyarrow as pa

    for field_ in schema:
        kind = stats_kind(field_.type)
        col = '"' + field_.name.replace('"', '""') + '"'
        value = f"(CASE WHEN isnan({col}) THEN NULL ELSE {col} END)" if pa.types.is_floating(field_.type) else col
        nans = [f"count(*) FILTER (WHERE isnan({col}))"] if pa.types.is_floating(field_.type) else []
        wanted = {
            "bool": [f"count({value})", f"count({value}) FILTER (WHERE {value})"],
            "number": [f"count({value})", f"min({value})", f"avg({value})", f"max({value})"],
            "time": [f"count({value})", f"min({value})", f"max({value})"],
            "other": [f"count({value})"],
        }[kind]
        if kind in ("number", "other"):
            wanted.append(f"count(DISTINCT {value})")
        plan.append((field_.name, kind, len(aggregates)))
        aggregates += wanted + nans  # a float column's NaNs last: counted apart from its nulls
    row: Any = _first(con.execute(f"SELECT {', '.join(aggregates)} FROM {source}")) or (0,)
    total = int(row[0])
    out: dict[str, dict[str, Any]] = {}
    floats = {f.name for f in schema if pa.types.is_floating(f.type)}
    for i, (name, kind, at) in enumerate(plan):
        count = int(row[at])
        nan = int(row[plan[i + 1][2] - 1] if i + 1 < len(plan) else row[-1]) if name in floats else 0
        stats: dict[str, Any] = {"kind": kind, "count": count, "nulls": total - count - nan}
        if nan:
            stats["nan"] = nan
        if count and kind == "bool":
            stats["true"] = int(row[at + 1])
        elif count and kind == "number":
            stats.update(min=_plain(row[at + 1]), mean=_plain(row[at + 2]), max=_plain(row[at + 3]))
            stats["distinct"] = int(row[at + 4])
        elif count and kind == "time":
            stats.update(min=_plain(row[at + 1]), max=_plain(row[at + 2]))
        elif count:
            stats["distinct"] = int(row[at + 1])
            if stats["distinct"] < count:
                col = '"' + name.replace('"', '""') + '"'
                top = _first(
                    con.execute(
                        f"SELECT {col}, count(*) AS n FROM {source} WHERE {col} IS NOT NULL GROUP BY ALL "
                        "ORDER BY n DESC LIMIT 1"
                    )
                )
                stats["top"] = [_plain(top[0]), int(top[1])] if top else None
        out[name] = stats
    return out, total


_PLAIN_SCAN = {"Table", "Type", "Projections", "Estimated Cardinality"}


def explained(sql: str) -> str:
    """The statement an ``EXPLAIN [ANALYZE] [(options)]`` statement plans — and, with ANALYZE, runs in full — by
    DuckDB's tokens; ``sql`` itself otherwise. Its plan is the one asked about (``EXPLAIN (FORMAT json) EXPLAIN …``
    is no statement DuckDB takes)."""
    import duckdb

    tokens = duckdb.tokenize(sql)
    words = [
        sql[start : tokens[i + 1][0] if i + 1 < len(tokens) else len(sql)].strip()
        for i, (start, _) in enumerate(tokens)
    ]
    i = 0
    if not words or words[0].upper() != "EXPLAIN":
        return sql
    i = 1
    if i < len(words) and words[i] == "(":  # EXPLAIN (ANALYZE, FORMAT …) …
        depth = 0
        while i < len(words):
            depth += (words[i] == "(") - (words[i] == ")")
            i += 1
            if depth == 0:
                break
    if i < len(words) and words[i].upper() in ("ANALYZE", "ANALYSE"):
        i += 1
    return sql[tokens[i][0] :] if i < len(tokens) else sql


def scanned_rows(con: Any, sql: str, params: Any) -> tuple[int | None, list[str]]:
    """The rows DuckDB's plan of ``sql`` reads in its scans, by DuckDB's own estimate (``EXPLAIN (FORMAT json)``,
    nothing runs): a table read sequentially counted whole (its ``estimated_size``: a filter spares no row from being
    read), any other scan (a file's, a table function's, an index lookup) by its estimated cardinality — and the
    scans named with their figures, largest first. ``None`` when the plan gives no figure (then nothing is asked)."""
    rows = con.execute("EXPLAIN (FORMAT json) " + explained(sql), params).fetchall()
    plans = json.loads(rows[0][1]) if rows else []
    found: list[tuple[int, str]] = []
    stack = list(plans if isinstance(plans, list) else [plans])
    while stack:
        node = stack.pop()
        children = node.get("children") or []
        stack.extend(children)
        info = node.get("extra_info") or {}
        if children or not isinstance(info, dict):
            continue
        estimate = _count(info.get("Estimated Cardinality"))
        table = str(info.get("Table") or "")
        # a sequential scan with nothing but its projections is estimated at its table's whole size already; only
        # one that says more (a filter pushed into it) is looked up in the catalog (a query of its own, ~2 ms)
        if table and info.get("Type") == "Sequential Scan" and set(info) - _PLAIN_SCAN:
            whole = _table_rows(con, table)
            estimate = whole if whole is not None else estimate
        if estimate is not None:
            found.append((estimate, table or str(info.get("Function") or node.get("name") or "").strip().lower()))
    if not found:
        return None, []
    found.sort(reverse=True)
    return sum(n for n, _ in found), [f"{what} ≈{n:,} rows" for n, what in found]


def refuse_large_scan(
    con: Any, sql: str, params: Any, bound: Any, relations: Relations | None = None, tree: Any = None
) -> None:
    """A statement whose scans DuckDB expects to read more than ``bound`` rows (``scanned_rows``;
    tools.query_database.confirm_scan_rows) is refused with the figure (``LARGE_SCAN``), before it runs; sent again
    it runs (the tool passes no bound then). A plan without a figure, or one DuckDB cannot give, is not asked.

    With the connection's ``relations`` (``Relations.of``, current), a statement whose parse (``tree``: ``parse``'s,
    or made here) shows it can read no more than ``bound`` rows in all (``readable_rows``) is let through without
    DuckDB's plan: the parse costs a fraction of the plan's ``EXPLAIN`` (P-2). What the parse cannot bound goes to
    the plan as before."""
    if not bound:
        return
    if relations is not None:
        most = readable_rows(parse(con, sql) if tree is None else tree, relations)
        if most is not None and most <= int(bound):
            return
    try:
        scanned, scans = scanned_rows(con, sql, params)
    except Exception:  # the statement's own error follows when it runs
        return
    if scanned is None or scanned <= int(bound):
        return
    from ba_mcp.workers.wire import large_scan

    raise large_scan("DuckDB", scanned, scans, int(bound), " in its scans")


def _count(value: Any) -> int | None:
    try:
        return int(float(str(value)))
    except ValueError:
        return None


def _table_rows(con: Any, table: str) -> int | None:
    """A table's row count as DuckDB's catalog keeps it (``catalog.schema.table``, as the plan names it)."""
    parts = table.split(".")
    if len(parts) != 3:
        return None
    found = con.execute(
        "SELECT estimated_size FROM duckdb_tables() WHERE database_name = ? AND schema_name = ? AND table_name = ?",
        parts,
    ).fetchall()
    return int(found[0][0]) if found and found[0][0] is not None else None


class Relations:
    """What a connection's catalog holds, by lower-case name: the tables with their row counts (``estimated_size``,
    as ``scanned_rows`` counts a table read whole) by ``(catalog, schema)``; the names of its views (a Python object
    registered on it is one), and of those the session's TEMP views whose rows the worker ``known`` (a Parquet file's
    view: its footer's count); the user's functions (a macro's body may read any table, and one may take a built-in
    function's name). Current until the catalog changes: the worker drops it then (``inside.duck``)."""

    def __init__(
        self,
        tables: dict[str, list[tuple[str, str, int]]],
        views: set[str],
        functions: set[str],
        known: dict[str, int] | None = None,
        aggregates: frozenset[str] | None = None,
    ) -> None:
        self.tables, self.views, self.functions = tables, views, functions
        self.known = known or {}
        # DuckDB's aggregate functions (``aggregates``); None: not listed, every function not in ``_ONE_PASS`` is
        # taken for one that may be planned over a CTE
        self.aggregates = aggregates

    @classmethod
    def of(
        cls, con: Any, functions: set[str] | None = None, known: dict[str, tuple[int, str]] | None = None
    ) -> Relations:
        """``con``'s relations (one query, ~1 ms), ``functions`` (``user_functions``, asked when not given) and the
        rows of the TEMP views ``known`` by name, each with the query the worker made it of (``SELECT * FROM
        read_parquet(…)``): counted only while the view of that name is the only one that folds to it and is still
        that query — not one the session has replaced, nor one of two names DuckDB takes for one."""
        tables: dict[str, list[tuple[str, str, int]]] = {}
        views: set[str] = set()
        seen: dict[str, list[tuple[str, str, str]]] = {}
        rows = con.execute(
            "SELECT database_name, schema_name, table_name, estimated_size, '' FROM duckdb_tables() "
            "UNION ALL SELECT database_name, schema_name, view_name, -1, sql FROM duckdb_views() WHERE NOT internal"
        ).fetchall()
        for database, schema, name, size, text in rows:
            if size is None or size < 0:  # a view (or a table without a count: as unknown)
                views.add(name.lower())
                seen.setdefault(name.lower(), []).append((database.lower(), schema.lower(), str(text or "")))
            else:
                tables.setdefault(name.lower(), []).append((database.lower(), schema.lower(), int(size)))
        folded: dict[str, int] = {}
        for name in known or {}:
            folded[name.lower()] = folded.get(name.lower(), 0) + 1
        sized = {
            name.lower(): count
            for name, (count, query) in (known or {}).items()
            if folded[name.lower()] == 1
            and len(found := seen.get(name.lower(), [])) == 1
            and found[0][:2] == ("temp", "main")
            and _made_of(found[0][2], name, query)
        }
        return cls(tables, views, user_functions(con) if functions is None else functions, sized, aggregates(con))

    def rows(self, catalog: str, schema: str, name: str) -> int | None:
        """The most rows a table reference can name (the largest table it may resolve to; unqualified, any catalog's
        and schema's); None when it may name a view or names nothing known (a file DuckDB would scan in its place)."""
        name = name.lower()
        catalog, schema = catalog.lower(), schema.lower()
        places = [(d, s, n) for d, s, n in self.tables.get(name, [])]
        if name in self.known:  # the session's TEMP view of a file whose rows are known: as a table of that many
            places.append(("temp", "main", self.known[name]))
        elif name in self.views:
            return None
        found = [
            n
            for d, s, n in places
            if (not catalog or d == catalog) and (not schema or s == schema or (not catalog and d == schema))
        ]
        return max(found) if found else None


def user_functions(con: Any) -> set[str]:
    """The names of the functions in ``con``'s catalog that are not DuckDB's own (macros: the session's, an
    attached file's) — a listing of every function, ~20-50 ms."""
    rows = con.execute("SELECT function_name FROM duckdb_functions() WHERE NOT internal").fetchall()
    return {str(name).lower() for (name,) in rows}


# The parse's nodes a statement may hold and still be bounded by its parse, whose plan then scans each table it names
# and nothing else: query nodes, joins, VALUES, modifiers, an ORDER BY's terms. Any other node but an expression's
# (``class``) — a derived table, a table function, a PIVOT, anything newer — leaves the statement to the plan, and so
# does a LIMIT or OFFSET (DuckDB may read the table a second time for the rows it keeps: late materialisation).
_BOUNDED = {
    "SELECT_NODE",
    "SET_OPERATION_NODE",
    "JOIN",
    "EMPTY",
    "EXPRESSION_LIST",
    "ORDER_MODIFIER",
    "DISTINCT_MODIFIER",
    "ORDER_DEFAULT",
    "ASCENDING",
    "DESCENDING",
}


# The aggregates DuckDB plans in one pass over what they read, whatever stands beside them (each checked against the
# plan: one scan of the table, no CTE of its input). Another aggregate — a holistic one (median, mode, quantiles,
# list, string_agg, histogram, entropy …) beside another kind, one with FILTER or ORDER BY — may be planned over a
# CTE of its input read once per kind, so a statement holding one goes to the plan (an allow-list: an aggregate
# added to DuckDB later is not in it).
_ONE_PASS = frozenset(
    {
        *("any_value", "arbitrary", "avg", "mean", "favg", "count", "count_star", "count_if", "countif"),
        *("first", "last", "max", "min", "sum", "fsum", "kahan_sum", "sumkahan", "sum_no_overflow", "product"),
        *("bit_and", "bit_or", "bit_xor", "bool_and", "bool_or", "approx_count_distinct"),
        *("stddev", "stddev_pop", "stddev_samp", "var_pop", "var_samp", "variance", "sem", "skewness"),
        *("kurtosis", "kurtosis_pop", "corr", "covar_pop", "covar_samp"),
        *("arg_max", "arg_min", "argmax", "argmin", "max_by", "min_by"),
        *("regr_avgx", "regr_avgy", "regr_count", "regr_intercept", "regr_r2", "regr_slope"),
        *("regr_sxx", "regr_sxy", "regr_syy"),
    }
)
_AGGREGATES: frozenset[str] | None = None  # DuckDB's aggregate functions, listed once per process (~30 ms)


def aggregates(con: Any) -> frozenset[str]:
    """The names of DuckDB's aggregate functions (its own catalog: the user's are ``user_functions``)."""
    global _AGGREGATES
    if _AGGREGATES is None:
        rows = con.execute("SELECT DISTINCT function_name FROM duckdb_functions() WHERE function_type = 'aggregate'")
        _AGGREGATES = frozenset(str(name).lower() for (name,) in rows.fetchall())
    return _AGGREGATES


class _Unbounded(Exception):
    pass


def _made_of(definition: str, name: str, query: str) -> bool:
    """Whether a view's definition as DuckDB keeps it (``duckdb_views().sql``) is ``CREATE TEMP VIEW <name> AS
    <query>;`` — the name as DuckDB writes it, bare or quoted, and no column list."""
    head, tail = "CREATE TEMP VIEW ", f" AS {query};"
    if not (definition.startswith(head) and definition.endswith(tail)):
        return False
    written = definition[len(head) : len(definition) - len(tail)]
    return written in (name, '"' + name.replace('"', '""') + '"')


_PARSED: OrderedDict[str, dict[str, Any]] = OrderedDict()  # the last statements' parses, by their text
# A parse is ~300 times its text in Python objects (an IN list of ids): the kept texts are bounded in all (~10 MB of
# trees), and a long statement is not kept — its parse costs little beside its own run
_PARSED_KEPT, _PARSED_CHARS, _PARSED_LONGEST = 64, 32_000, 4_000


def parse(con: Any, sql: str) -> dict[str, Any]:
    """DuckDB's parse of a SELECT (``json_serialize_sql``: ``error`` set for any other statement). A parse depends on
    the text alone (the session's settings are locked): the last few are kept, so a statement sent again (a page, a
    re-run, a confirmed LARGE_SCAN) is not parsed again — the parse is a query of its own, ~1 ms (P-2). Read-only to
    callers."""
    kept = _PARSED.get(sql)
    if kept is not None:
        _PARSED.move_to_end(sql)
        return kept
    row = _first(con.execute("SELECT json_serialize_sql(?::VARCHAR)", [sql]))
    tree: dict[str, Any] = json.loads(row[0]) if row else {"error": True}
    if len(sql) <= _PARSED_LONGEST:
        _PARSED[sql] = tree
        while len(_PARSED) > _PARSED_KEPT or sum(len(text) for text in _PARSED) > _PARSED_CHARS:
            _PARSED.popitem(last=False)
    return tree


def readable_rows(tree: Any, relations: Relations) -> int | None:
    """The most rows the plan of a statement can scan, from its parse (``json_serialize_sql``'s tree) and the
    catalog's ``relations``: each table it names counted whole, once per reference, a VALUES list by its rows — for
    a statement whose plan scans just those (``scanned_rows`` counts the plan's scans: the same tables, each whole
    or less). None when the parse cannot tell: a name that may be a view or is unknown (a file, a registered
    object), a table function, a derived table, a time-travel read, and what DuckDB plans with scans of its own
    making (``cte_scan``: a CTE, a subquery in an expression — decorrelated through one —, a DISTINCT aggregate);
    a user's function anywhere in the catalog (its body may read any table); a node this walk does not know; a
    parse error."""
    if not isinstance(tree, dict) or tree.get("error") or relations.functions:
        return None
    try:
        return _rows(tree.get("statements"), relations)
    except (_Unbounded, RecursionError):
        return None


def _rows(node: Any, relations: Relations) -> int:
    if isinstance(node, list):
        return sum(_rows(item, relations) for item in node)
    if not isinstance(node, dict):
        return 0
    kind = node.get("type")
    if "class" in node:  # an expression: a subquery in it, or a DISTINCT aggregate, is planned with a CTE
        if node["class"] in ("SUBQUERY", "WINDOW") or node.get("distinct") is True:
            raise _Unbounded(node["class"])
        name = str(node.get("function_name") or "").lower()
        if node["class"] == "FUNCTION" and (relations.aggregates is None or name in relations.aggregates):
            ordered = (node.get("order_bys") or {}).get("orders")
            if name not in _ONE_PASS or node.get("filter") is not None or ordered:
                raise _Unbounded(name)
        constant = 1 if node["class"] == "CONSTANT" else 0  # an IN list's constants may be planned as a scan of them
        return constant + sum(_rows(v, relations) for v in node.values())
    if not isinstance(kind, str):  # a part of a node (a literal, a name, a type)
        return sum(_rows(v, relations) for v in node.values())
    if kind == "BASE_TABLE":
        if node.get("at_clause") is not None:
            raise _Unbounded("AT")
        rows = relations.rows(
            str(node.get("catalog_name") or ""), str(node.get("schema_name") or ""), str(node.get("table_name") or "")
        )
        if rows is None:
            raise _Unbounded(node.get("table_name"))
        return rows
    if kind not in _BOUNDED or (node.get("cte_map") or {}).get("map"):
        raise _Unbounded(kind)
    if len(node.get("group_sets") or []) > 1:  # GROUPING SETS, ROLLUP, CUBE: the input is read once per set
        raise _Unbounded("GROUPING SETS")
    listed = len(node.get("values") or []) if kind == "EXPRESSION_LIST" else 0  # VALUES: its rows are scanned
    return listed + sum(_rows(v, relations) for v in node.values())
