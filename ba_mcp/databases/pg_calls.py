"""What a PostgreSQL statement may call (S-14): an allow-list built from the database's own catalog, and the
statement's calls read by PostgreSQL's own parser (``pglast``, libpg_query).

Every ba-mcp session shares one role, and PostgreSQL lets a role read the SQL of, or end, its own role's other
backends; several functions run SQL given as a string (``query_to_xml``, ``ts_stat``, …), whose inner statement
never appears in the outer plan. So a statement may call only:

* functions of ``pg_catalog`` and ``information_schema`` that are ordinary functions, aggregates or window
  functions, immutable or stable — plus the few volatile ones analysts use (``KEPT_VOLATILE``: ``random``,
  ``clock_timestamp``, ``gen_random_uuid``, the TABLESAMPLE methods, ``pg_sleep``) — less every family that runs
  SQL from a string, signals or inspects other backends, takes locks, or reads files, settings files or large objects
  (``EXCLUDED``, matched against the names and the bodies of SQL functions);
* functions the operator allowed by name (``databases.<name>.allow_functions``: an extension's, say);
* operators whose function is allowed; casts to types whose input function is allowed (a domain: and whose
  constraints call only allowed functions); views whose definitions (through other views) call only allowed
  functions and operators.

Anything else is refused naming it. The check reads the statement's parse tree, which holds every name the
statement calls — in the target list, the LIMIT, VALUES, window frames, TABLESAMPLE, attribute notation
(``(x).f`` is ``f(x)``) — and the catalog resolves them: an unqualified name through the connection's
``search_path``, every overload of it. The catalog is read at connect and whole again after ``REFRESH_S``; a
function or relation made since is read by name when a statement names it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

# pg_sleep holds its connection no longer than any slow query may (the call's statement_timeout bounds both)
KEPT_VOLATILE = ("random", "clock_timestamp", "gen_random_uuid", "timeofday", "bernoulli", "system", "pg_sleep")
# Families refused even when immutable or stable (most of them are volatile anyway): SQL from a string
# (query/table/cursor/schema/database_to_xml*, ts_stat, ts_rewrite), other backends (pg_stat_*, *backend*,
# blocking pids, lock status), locks (advisory), files and settings files, large objects, notifications, sleeps,
# server administration, dblink.
EXCLUDED = (
    r"(^|_)to_xml|^ts_stat$|^ts_rewrite$|^pg_stat|backend|blocking_pids|^pg_lock_status$|advisory|^pg_read_"
    r"|^pg_ls_|^pg_file|^lo_|^lo(read|write|open|close|creat|import|export|seek|seek64|tell|tell64|truncate"
    r"|truncate64|unlink|get|put|from_bytea)$|^pg_notify$|^pg_sleep_|^set_config$|^pg_reload_conf$|^pg_rotate_"
    r"|^pg_promote$|^pg_create_|^pg_drop_|^pg_replication_|^pg_logical_|^pg_current_logfile|^pg_show_all_"
    r"|^pg_hba_|^pg_ident_|^pg_cursor$|^pg_prepared_|^pg_listening_channels$|^pg_notification_queue|^pg_get_wal"
    r"|^pg_walfile|^pg_control_|^pg_get_shmem|^pg_get_replication|^pg_get_backend|^pg_log_|^dblink"
    r"|^pg_import_system_collations$|^pg_switch_wal$|^pg_backup_|^pg_wal_|^pg_export_snapshot$"
)
REFRESH_S = 300.0

_FUNCTIONS = """
SELECT n.nspname::text, p.proname::text, p.pronargs::int,
  ((n.nspname IN ('pg_catalog', 'information_schema') AND p.prokind IN ('f', 'a', 'w')
    AND (p.provolatile IN ('i', 's') OR p.proname = ANY($1::text[]))
    AND p.proname !~ $2 AND NOT (l.lanname = 'sql' AND p.prosrc ~ $2))
   OR p.proname = ANY($3::text[]))::bool,
  (p.pronargs = 1 AND EXISTS (SELECT 1 FROM pg_type t WHERE t.oid = p.proargtypes[0] AND t.typtype IN ('c', 'p')))::bool
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_language l ON l.oid = p.prolang
WHERE cardinality($4::text[]) = 0 OR p.proname = ANY($4::text[])
"""
# the same test, as a set of function oids, for operators, types and views
_ALLOWED_OIDS = """
allowed AS (
  SELECT p.oid FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_language l ON l.oid = p.prolang
  WHERE (n.nspname IN ('pg_catalog', 'information_schema') AND p.prokind IN ('f', 'a', 'w')
    AND (p.provolatile IN ('i', 's') OR p.proname = ANY($1::text[]))
    AND p.proname !~ $2 AND NOT (l.lanname = 'sql' AND p.prosrc ~ $2))
   OR p.proname = ANY($3::text[]))
"""
_OPERATORS = (
    "WITH "
    + _ALLOWED_OIDS
    + """
SELECT n.nspname::text, o.oprname::text, (o.oprcode::oid IN (SELECT oid FROM allowed))::bool
FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace WHERE cardinality($4::text[]) >= 0
"""
)
_TYPES = (
    "WITH "
    + _ALLOWED_OIDS
    + """
SELECT n.nspname::text, t.typname::text,
  (t.typinput::oid IN (SELECT oid FROM allowed) AND NOT EXISTS (
     SELECT 1 FROM pg_constraint k JOIN pg_depend d ON d.classid = 'pg_constraint'::regclass AND d.objid = k.oid
     WHERE k.contypid = t.oid AND d.refclassid = 'pg_proc'::regclass AND d.refobjid NOT IN (SELECT oid FROM allowed)
  ))::bool
FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE cardinality($4::text[]) >= 0
"""
)
# relations: whether each is a view (a view's definition is checked like a statement when one is read: system views
# record no dependencies in pg_depend, so their definitions are what tells)
_RELATIONS = """
SELECT n.nspname::text, c.relname::text, (c.relkind = 'v')::bool
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
AND (cardinality($4::text[]) = 0 OR c.relname = ANY($4::text[]))
"""
_VIEW = """
SELECT pg_get_viewdef(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind = 'v'
"""
MAX_VIEW_DEPTH = 8


@dataclass
class Catalog:
    """The allow-list of one connection: per name, per schema, whether every object of that name there is allowed."""

    path: list[str] = field(default_factory=list)  # the effective search path (current_schemas(true))
    functions: dict[str, dict[str, bool]] = field(default_factory=dict)
    attribute_functions: set[str] = field(default_factory=set)  # unsafe one-argument functions of a row
    operators: dict[str, dict[str, bool]] = field(default_factory=dict)
    types: dict[str, dict[str, bool]] = field(default_factory=dict)
    relations: dict[str, dict[str, bool]] = field(default_factory=dict)  # True: a view
    views: dict[tuple[str, str], str | None] = field(default_factory=dict)  # a view's verdict (None: allowed)
    allowed_count: int = 0
    read_at: float = 0.0


def read_catalog(cur: Any, allowed_names: list[str]) -> Catalog:
    """The allow-list as the database's catalog gives it (five queries, at connect and every ``REFRESH_S``)."""
    params: tuple[Any, ...] = (list(KEPT_VOLATILE), EXCLUDED, [n.lower() for n in allowed_names], [])
    cat = Catalog(read_at=time.monotonic())
    cur.execute("SELECT array_to_json(current_schemas(true))::text")
    cat.path = [str(s) for s in json.loads(cur.fetchone()[0])]
    _functions(cur, params, cat)
    for query, into in ((_OPERATORS, cat.operators), (_TYPES, cat.types)):
        cur.execute(query, params)
        for schema, name, allowed in _rows(cur):
            _note(into, schema, name, allowed)
    cur.execute(_RELATIONS, params)
    for schema, name, view in _rows(cur):
        cat.relations.setdefault(name, {})[schema] = bool(view)
    return cat


def _functions(cur: Any, params: tuple[Any, ...], cat: Catalog) -> None:
    cur.execute(_FUNCTIONS, params)
    for schema, name, _nargs, allowed, of_a_row in _rows(cur):
        _note(cat.functions, schema, name, allowed)
        cat.allowed_count += bool(allowed)
        if of_a_row and not allowed:
            cat.attribute_functions.add(name)


def read_new(cur: Any, cat: Catalog, calls: Calls, allowed_names: list[str]) -> None:
    """Functions and relations the statement names that the catalog did not hold when it was read — made since
    (a view over pg_stat_activity, a function) — read now, by name. A name still unknown does not exist: the
    database says so when the statement runs."""
    functions = sorted({n[-1] for n in calls.functions if n and n[-1] not in cat.functions})
    relations = sorted({n[-1] for n in calls.relations if n[-1] not in cat.relations} - calls.ctes)
    base = (list(KEPT_VOLATILE), EXCLUDED, [n.lower() for n in allowed_names])
    if functions:
        _functions(cur, (*base, functions), cat)
    if relations:
        cur.execute(_RELATIONS, (*base, relations))
        for schema, name, view in _rows(cur):
            cat.relations.setdefault(name, {})[schema] = bool(view)


def _rows(cur: Any) -> list[tuple[Any, ...]]:
    """The rows of the statement just run, read a column at a time (the DB-API's ``fetchall`` builds each row on its
    own: a third of a second of a connection's start for the ~5,000 rows of the allow-list)."""
    table = cur.fetch_arrow_table()
    return list(zip(*(column.to_pylist() for column in table.columns), strict=True))


def _note(into: dict[str, dict[str, bool]], schema: str, name: str, allowed: bool) -> None:
    per = into.setdefault(name, {})
    per[schema] = per.get(schema, True) and bool(allowed)


@dataclass
class Calls:
    """The names a statement calls or reads, as its parse tree holds them (each a tuple of name parts)."""

    functions: set[tuple[str, ...]] = field(default_factory=set)
    operators: set[tuple[str, ...]] = field(default_factory=set)
    types: set[tuple[str, ...]] = field(default_factory=set)
    relations: set[tuple[str, ...]] = field(default_factory=set)
    attributes: set[str] = field(default_factory=set)  # the last field of x.y: maybe y(x)
    ctes: set[str] = field(default_factory=set)  # names the statement's WITH defines


def calls_of(sql: str) -> Calls:
    """What ``sql`` calls, by PostgreSQL's own parser. A statement it cannot parse raises ``ValueError``."""
    from pglast import parser

    try:
        tree = json.loads(parser.parse_sql_json(sql))
    except Exception as exc:  # pglast.parser.ParseError: PostgreSQL's own words follow when it runs
        raise ValueError(str(exc)) from None
    calls = Calls()
    _walk(tree, calls)
    return calls


def _names(items: Any) -> tuple[str, ...]:
    return tuple(str(i["String"]["sval"]) for i in items or [] if isinstance(i, dict) and "String" in i)


_BETWEEN = {"AEXPR_BETWEEN", "AEXPR_NOT_BETWEEN", "AEXPR_BETWEEN_SYM", "AEXPR_NOT_BETWEEN_SYM"}


def _walk(node: Any, calls: Calls) -> None:
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
            continue
        if not isinstance(item, dict):
            continue
        for kind, body in item.items():
            if isinstance(body, dict):
                if kind == "FuncCall":
                    calls.functions.add(_names(body.get("funcname")))
                elif kind == "A_Expr":
                    if body.get("kind") in _BETWEEN:
                        calls.operators.update({(">=",), ("<=",), (">",), ("<",)})
                    else:
                        calls.operators.add(_names(body.get("name")))
                elif kind == "SubLink" and body.get("operName"):
                    calls.operators.add(_names(body["operName"]))
                elif kind == "SortBy" and body.get("useOp"):
                    calls.operators.add(_names(body["useOp"]))
                elif kind == "TypeName":
                    calls.types.add(_names(body.get("names")))
                elif kind == "RangeVar":
                    schema = body.get("schemaname")
                    calls.relations.add((str(schema), str(body["relname"])) if schema else (str(body["relname"]),))
                elif kind == "RangeTableSample":
                    calls.functions.add(_names(body.get("method")))
                elif kind == "ColumnRef":
                    fields = _names(body.get("fields"))
                    if len(fields) >= 2:
                        calls.attributes.add(fields[-1])
                elif kind == "A_Indirection":
                    calls.attributes.update(_names(body.get("indirection")))
                elif kind == "CommonTableExpr":
                    calls.ctes.add(str(body.get("ctename")))
                elif kind == "typeName" and "names" in body:  # a TypeName held under its field name
                    calls.types.add(_names(body.get("names")))
            stack.append(body)


def refusal(calls: Calls, cat: Catalog, cur: Any, depth: int = 0) -> str | None:
    """What the statement calls that is off the allow-list (a sentence naming it), or None. A view it reads is
    judged by its definition (``pg_get_viewdef``, through ``cur``), like a statement, at any depth."""
    for name in sorted(calls.functions):
        if not _allowed(cat.functions, name, cat.path):
            return f"the function {'.'.join(name)}"
    for name in sorted(calls.operators):
        if name and not _allowed(cat.operators, name, cat.path):
            return f"the operator {'.'.join(name)}"
    for name in sorted(calls.types):
        if name and not _allowed(cat.types, name, cat.path):
            return f"the type {'.'.join(name)} (its input function or a constraint of it)"
    for field_name in sorted(calls.attributes):
        if field_name in cat.attribute_functions:
            return f"the function {field_name} (called as an attribute)"
    for name in sorted(calls.relations):
        if len(name) == 1 and name[0] in calls.ctes:
            continue
        per = cat.relations.get(name[-1], {})
        schemas = [name[-2]] if len(name) > 1 else cat.path
        for schema in [s for s in schemas if per.get(s)]:  # the views the name may reach
            verdict = _view(schema, name[-1], cat, cur, depth)
            if verdict:
                return f"the view {'.'.join(name)} ({verdict})"
    return None


def _view(schema: str, name: str, cat: Catalog, cur: Any, depth: int) -> str | None:
    key = (schema, name)
    if key not in cat.views:
        if depth >= MAX_VIEW_DEPTH:
            return "views nested too deep to check"
        cat.views[key] = "its definition is being checked"  # a cycle refuses
        cur.execute(_VIEW, (schema, name))
        row = cur.fetchone()
        try:
            inner = calls_of(str(row[0])) if row and row[0] else Calls()
            found = refusal(inner, cat, cur, depth + 1)
        except ValueError:
            found = "its definition could not be read"
        cat.views[key] = f"it uses {found.removeprefix('the ')}" if found else None
    return cat.views[key]


def unknown(calls: Calls, cat: Catalog) -> bool:
    """Whether the statement names a function or a relation the catalog did not hold when it was read."""
    named = [n for n in calls.relations if len(n) > 1 or n[0] not in calls.ctes]
    return any(n[-1] not in cat.relations for n in named) or any(
        n and n[-1] not in cat.functions for n in calls.functions
    )


def _allowed(table: dict[str, dict[str, bool]], name: tuple[str, ...], path: list[str]) -> bool:
    """Whether ``name`` (qualified or not) reaches only allowed objects: qualified, those of its schema; else those
    of every schema on the search path. A name the catalog does not hold is left to the database (it does not
    exist: ``read_new`` looked)."""
    if not name:
        return True
    per = table.get(name[-1])
    if per is None:
        return True
    if len(name) >= 2:
        return per.get(name[-2], True)
    return all(per.get(schema, True) for schema in path)
