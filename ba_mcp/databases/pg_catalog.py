"""A PostgreSQL database's catalog as a model needs it (db://{database}/schema, query_database's search).

Read in the connection worker, in the call's read-only frame, from the system catalogs only (never a scan):

* every table, view, materialized view and foreign table of the schemas asked for, with its row estimate
  (``pg_class.reltuples``), comment, columns (a domain-typed column shows its base type: ``"Name"`` is
  ``character varying(50) (domain "Name")``), keys and the common values ``pg_stats`` keeps;
* **a table with children is one entry**: the partitions of a declarative ``PARTITION BY`` table and the children
  of an ``INHERITS`` parent are folded into their parent (``children``), whose row estimate is the whole's and whose
  note says that querying the parent reads them all — so a model never reads an empty parent as an empty table nor
  unions the children with it;
* **an alias view** (one relation's columns under other names, nothing filtered, joined or computed: AdventureWorks'
  ``pu.poh``) says which relation it aliases (``alias_of``).
"""

from __future__ import annotations

import contextlib
from typing import Any, TypedDict

from ba_mcp.databases.base import ColumnInfo, ForeignKey, TableInfo, Tables
from ba_mcp.databases.connector import rows

_KINDS = {"r": "table", "p": "table", "v": "view", "m": "materialized view", "f": "foreign table"}


def catalog(cur: Any, schemas: list[str]) -> Tables:
    """Tables and views of the schemas asked for (else every schema but the system's), children folded into their
    parents, alias views labelled, domains with their base types."""
    where = "n.nspname = ANY($1)" if schemas else "n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')"
    params = (schemas,) if schemas else None
    relations = rows(
        cur,
        "SELECT c.oid::bigint, n.nspname::text, c.relname::text, c.relkind::text, c.reltuples::float8, "
        "obj_description(c.oid, 'pg_class'), "
        "CASE WHEN c.relkind IN ('v', 'm') THEN pg_get_viewdef(c.oid, true) END, "
        "CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) END "
        f"FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {where} "
        "AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname NOT LIKE 'pg_temp%' ORDER BY 2, 3",
        params,
    )
    if not relations:
        return {}
    oids = [r[0] for r in relations]
    columns: dict[int, list[ColumnInfo]] = {}
    for oid, name, typ, notnull, comment, base in rows(
        cur,
        "SELECT a.attrelid::bigint, a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull, "
        "col_description(a.attrelid, a.attnum), "
        "CASE WHEN t.typtype = 'd' THEN format_type(t.typbasetype, t.typtypmod) END "
        "FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid "
        "WHERE a.attrelid = ANY($1::bigint[]::oid[]) AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attrelid, a.attnum",
        (oids,),
    ):
        entry: ColumnInfo = {
            "name": name,
            "type": f"{base} (domain {typ})" if base else typ,
            "nullable": not notnull,
        }
        if comment:
            entry["comment"] = comment
        columns.setdefault(oid, []).append(entry)
    common: dict[tuple[str, str, str], list[str]] = {}
    with contextlib.suppress(Exception):
        for schema, table, column, values in rows(
            cur,
            "SELECT schemaname::text, tablename::text, attname::text, most_common_vals::text FROM pg_stats "
            "WHERE most_common_vals IS NOT NULL AND n_distinct > 0 AND n_distinct <= 20",
        ):
            common[(schema, table, column)] = _array(values)[:20]
    keys = _keys(cur, oids)
    parent_of = {
        int(child): int(parent)
        for child, parent in rows(
            cur,
            "SELECT inhrelid::bigint, inhparent::bigint FROM pg_inherits WHERE inhrelid = ANY($1::bigint[]::oid[])",
            (oids,),
        )
    }
    names = {oid: (name if schema == "public" else f"{schema}.{name}") for oid, schema, name, *_ in relations}
    out: Tables = {}
    for oid, schema, name, kind, estimate, comment, definition, partkey in relations:
        cols = columns.get(oid, [])
        for col in cols:
            values = common.get((schema, name, col["name"]))
            if values:
                col["values"] = values
        relation: TableInfo = {
            "kind": _KINDS.get(kind, kind),
            "rows": max(0, int(estimate or 0)),
            "rows_estimated": True,
            "comment": comment or "",
            "definition": definition or "",
            "columns": cols,
        }
        relation.update(keys.get(oid, {}))
        if partkey:
            relation["partitioned"] = f"PARTITION BY {partkey}"
        alias = alias_of(definition) if kind == "v" and definition else None
        if alias:
            relation["alias_of"] = alias
        out[names[oid]] = relation
    return fold(out, {names[c]: names[p] for c, p in parent_of.items() if c in names and p in names})


def fold(tables: Tables, parent_of: dict[str, str]) -> Tables:
    """Each child (a partition, an inheriting table) folded into its topmost parent: the parent lists its children
    and holds the row estimate of the whole (a declarative parent keeps no rows of its own; an ``INHERITS`` parent
    may: its own plus its children's); the children are no entries of their own."""

    def top(name: str) -> str:
        seen = {name}
        while name in parent_of and parent_of[name] not in seen:
            name = parent_of[name]
            seen.add(name)
        return name

    children: dict[str, list[str]] = {}
    for child in parent_of:
        children.setdefault(top(child), []).append(child)
    for parent, kids in children.items():
        entry = tables[parent]
        own = 0 if entry.get("partitioned") else int(entry["rows"] or 0)
        entry["rows"] = own + sum(int(tables[kid]["rows"] or 0) for kid in kids)
        entry["children"] = sorted(kids)
        how = "partitions" if entry.get("partitioned") else "tables inheriting from it"
        entry["note"] = (
            f"{len(kids)} {how} ({_span(sorted(kids))}) are folded in: query {parent} — it reads their rows "
            "(never union them with it)"
        )
    return {name: entry for name, entry in tables.items() if name not in parent_of}


def _span(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 3 else f"{names[0]} … {names[-1]}"


def alias_of(definition: str) -> str | None:
    """The relation a view only renames (``SELECT a AS id, a, b … FROM one_relation``: plain columns of one relation,
    nothing filtered, joined, grouped, sorted, limited or computed), as the catalog names it; None for any other."""
    try:
        from pglast import parse_sql

        parsed = parse_sql(definition)
    except Exception:
        return None
    if len(parsed) != 1 or type(parsed[0].stmt).__name__ != "SelectStmt":
        return None
    select: Any = parsed[0].stmt
    used = {slot for slot in select.__slots__ if getattr(select, slot, None) not in (None, (), False)}
    if not used <= {"targetList", "fromClause", "op", "limitOption", "all"} or _setop(select) != "SETOP_NONE":
        return None
    source: Any = select.fromClause or ()
    if len(source) != 1 or type(source[0]).__name__ != "RangeVar":
        return None
    if not all(type(t.val).__name__ == "ColumnRef" for t in select.targetList or ()):
        return None
    schema = source[0].schemaname
    return source[0].relname if schema in (None, "public") else f"{schema}.{source[0].relname}"


def _setop(select: Any) -> str:
    op = getattr(select, "op", None)
    return str(getattr(op, "name", op) or "SETOP_NONE")


def _keys(cur: Any, oids: list[int]) -> dict[int, TableKeys]:
    keys: dict[int, TableKeys] = {}
    for oid, kind, cols, target_schema, target, target_cols in rows(
        cur,
        "SELECT k.conrelid::bigint, k.contype::text, "
        "(SELECT array_agg(a.attname::text ORDER BY u.i) FROM unnest(k.conkey) WITH ORDINALITY u(n, i) "
        "JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.n), "
        "tn.nspname::text, t.relname::text, "
        "(SELECT array_agg(a.attname::text ORDER BY u.i) FROM unnest(k.confkey) WITH ORDINALITY u(n, i) "
        "JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = u.n) "
        "FROM pg_constraint k LEFT JOIN pg_class t ON t.oid = k.confrelid "
        "LEFT JOIN pg_namespace tn ON tn.oid = t.relnamespace "
        "WHERE k.conrelid = ANY($1::bigint[]::oid[]) AND k.contype IN ('p', 'f') ORDER BY k.conrelid, k.conname",
        (oids,),
    ):
        entry = keys.setdefault(oid, {})
        if kind == "p":
            entry["primary_key"] = list(cols or [])
        else:
            named = target if target_schema == "public" else f"{target_schema}.{target}"
            entry.setdefault("foreign_keys", []).append(
                {"columns": list(cols or []), "references": named, "referenced_columns": list(target_cols or [])}
            )
    return keys


class TableKeys(TypedDict, total=False):
    """A relation's keys (``TableInfo``'s)."""

    primary_key: list[str]
    foreign_keys: list[ForeignKey]


def _array(text: str) -> list[str]:
    """The elements of a PostgreSQL array literal ``{a,"b c"}`` as text."""
    import csv
    import io

    inner = text[1:-1] if text.startswith("{") and text.endswith("}") else text
    return [v for v in next(csv.reader(io.StringIO(inner), escapechar="\\"), [])]
