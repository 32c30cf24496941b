"""PostgreSQL (``postgresql://``, ``postgres://``; ``adbc_driver_postgresql``): read-only by the database and the
role, never by SQL text (S-11, S-14).

* At connect: a superuser or a member of ``pg_read_server_files``/``pg_write_server_files``/
  ``pg_execute_server_program`` is refused (``PRIVILEGED_ROLE``) unless ``allow_privileged_role``; a role that can
  write a table, create objects, use dblink or a foreign server, bypass row-level security, create roles or
  replicate is refused (``WRITABLE_ROLE``) unless ``allow_writable_role`` (dblink_exec commits on a connection of
  its own); each refusal names what it found and the SQL that removes it. PUBLIC's ``CREATE`` on a schema alone
  (PostgreSQL 14's default) is served with a warning naming the ``REVOKE`` (a READ ONLY transaction creates nothing).
* The statement as written: one statement, its trailing ``;`` and comments dropped (the driver runs a query inside
  ``COPY (…) TO STDOUT``); ``SHOW`` and ``EXPLAIN`` (whose statement is vetted as any other) run as plain
  statements. A statement runs only once its plan was read (below): one PostgreSQL cannot explain fails with
  the explain's error and never runs (the driver runs a statement without rows outside ``COPY``: a ``DO`` block
  would); ``DO`` and ``CALL`` are refused by name, ``SHOW`` has no plan and reads a setting.
* Each person as their own role (``role_from``, S-21): every role the mapping names is taken at connect (``SET
  LOCAL ROLE`` in a read-only transaction, rolled back) and held to the same checks — one that does not exist
  (``UNKNOWN_ROLE``), that the connecting role is no member of (``ROLE_NOT_GRANTED``) or that fails them stops the
  database; a call takes only one of those (the server decides which, ``roles.role_for``).
* Each call: ``BEGIN READ ONLY; SET LOCAL statement_timeout; SET LOCAL application_name`` (``ba-mcp <the caller's
  display name> <session digest>``) and, mapped, ``SET LOCAL ROLE`` in one round trip (the
  SELECT that follows fixes the mode: ``SET TRANSACTION READ WRITE`` is refused after any query), the statement's
  plan read first (``EXPLAIN (VERBOSE)``, nothing runs: a plan that reaches other backends is refused —
  every session shares the role), the statement as **one prepared statement**, then ``ROLLBACK`` and ``DISCARD
  ALL`` (session advisory locks, prepared statements, cursors): nothing a call sets, locks or prepares outlives
  it; a connection that cannot be reset ends its worker.
* Results: NUMERIC(p,s) as decimal128(p,s); an unconstrained NUMERIC (``sum``, ``avg``, ``round``, a division's
  result) as decimal128(38, 18) — Spark's JDBC choice: 20 integer digits, 18 decimals, rounded half away from
  zero as PostgreSQL rounds; a value past 10^20 is an error naming the column —; the catalog from
  ``pg_class`` (row estimates, never a scan), comments, view definitions and ``pg_stats``' common values.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import re
import time
from typing import TYPE_CHECKING, Any

from ba_mcp.databases import pg_calls, pg_catalog
from ba_mcp.databases.base import Tables
from ba_mcp.databases.connector import Bound, Columns, ConnectedEngine, Held, plain_schema
from ba_mcp.workers.messages import Connect, Opened

if TYPE_CHECKING:
    import pyarrow as pa

    from ba_mcp.workers.wire import Failure

PRIVILEGED_ROLES = ("pg_read_server_files", "pg_write_server_files", "pg_execute_server_program")
UNVETTED = ("DO", "CALL")  # statements that run code EXPLAIN cannot plan: refused with a message of their own
UNCONSTRAINED = (38, 18)  # precision and scale of a NUMERIC declared without them


def _timetz_text(schema: Any, convert: Any, indices: list[int]) -> tuple[Any, Any]:
    """The schema and converter with each ``timetz`` column (the driver gives its binary form: microseconds since
    midnight and the zone's offset west of Greenwich, big-endian) as psql's text, ``12:34:56+02``."""
    if not indices:
        return schema, convert
    import struct

    import pyarrow as pa

    from ba_mcp.values import timetz_text

    shown = schema
    for i in indices:
        shown = shown.set(i, shown.field(i).with_type(pa.string()))

    def converted(batch: Any) -> Any:
        batch = convert(batch)
        columns = list(batch.columns)
        for i in indices:
            values = columns[i].to_pylist()
            columns[i] = pa.array(
                [None if v is None else timetz_text(*struct.unpack(">qi", v)) for v in values], pa.string()
            )
        return pa.RecordBatch.from_arrays(columns, schema=shown)

    return shown, converted


def _failure(**kwargs: str) -> Failure:
    from ba_mcp.workers.wire import Failure

    return Failure(**kwargs)


class PostgresEngine(ConnectedEngine):
    kind = "postgresql"
    takes_roles = True  # SET LOCAL ROLE in each call's read-only transaction (role_from)

    def open(self, c: Held, request: Connect) -> Opened:
        import threading

        import adbc_driver_postgresql.dbapi as pg

        # the statement's tokenizer and parser (0.2 s to import), loaded while the connection is made and the role read
        threading.Thread(target=_tokenizer, name="tokenizer", daemon=True).start()

        options = dict(request.options or {})
        c.con = pg.connect(request.uri, db_kwargs=options or None, autocommit=True)
        c.cur = c.con.cursor()
        allowed = request.allow_privileged_role, request.allow_writable_role
        reply = role(c.cur, *allowed)
        # the roles calls may take (role_from): each one taken here and held to the same checks (S-21)
        c.extra["roles"] = [str(r) for r in request.roles]
        mapped = [mapped_role(c, name, reply["role"], *allowed) for name in c.extra["roles"]]
        if mapped:
            reply["mapped_roles"] = [m["role"] for m in mapped]
            writers = [m["role"] for m in mapped if m["role_can_write"]]
            if writers:
                reply["detail"] = (reply.get("detail", "") + "; " if reply.get("detail") else "") + (
                    f"the mapped roles {', '.join(writers)} can write (allow_writable_role)"
                )
            # PUBLIC's CREATE (PostgreSQL <= 14) is the database's, whichever role reads it: said once
            warned = [w for m in mapped for w in m.get("warnings", [])]
            reply["warnings"] = list(dict.fromkeys([*reply.get("warnings", []), *warned]))
            if not reply["warnings"]:
                del reply["warnings"]
        c.extra["vet"] = c.con.cursor()  # EXPLAIN of the user's statement: the plain protocol, not COPY
        c.extra["vet"].adbc_statement.set_options(**{"adbc.postgresql.use_copy": "false"})
        c.extra["time_zone"] = session_zone(c.extra["vet"])  # timestamptz shown in it (ba_mcp.values)
        c.extra["allow_functions"] = list(request.allow_functions)
        # what a statement may call (S-14)
        c.extra["calls"] = pg_calls.read_catalog(c.extra["vet"], c.extra["allow_functions"])
        reply["allowed_functions"] = c.extra["calls"].allowed_count
        return reply

    def named(self, c: Held, sql: str, params: dict[str, Any]) -> tuple[str, list[Any]]:
        """``$name`` as ``$1``, ``$2`` … (the same name, the same number), read by PostgreSQL's lexer rules (a
        ``$name`` inside a string or a comment is text)."""
        from sqlglot.dialects.postgres import Postgres
        from sqlglot.tokens import TokenType

        found = Postgres().tokenize(sql)
        numbers: dict[str, int] = {}
        values: list[Any] = []
        out, at = [], 0
        for token, following in itertools.pairwise(found):
            name = following.text
            if not (
                token.token_type == TokenType.PARAMETER
                and following.start == token.end + 1
                and re.fullmatch(r"[A-Za-z_]\w*", name)
            ):
                continue
            if name not in params:
                raise _failure(
                    type="invalid_parameters",
                    code="BAD_PARAMS",
                    message=f"${name} has no value in params",
                    hint=f"params names: {', '.join(sorted(params)) or 'none'}",
                )
            if name not in numbers:
                numbers[name] = len(values) + 1
                values.append(params[name])
            out += [sql[at : token.start], f"${numbers[name]}"]
            at = following.end + 1
        return "".join(out) + sql[at:], values

    def statement(self, c: Held, sql: str) -> str:
        """The one statement of ``sql`` without its trailing ``;`` and comments; more than one is refused. Which
        cursor runs it: SHOW and EXPLAIN the plain protocol's, any other the driver's ``COPY (…)`` (queries only).
        """
        c.extra["explained"], c.extra["shown"] = None, False
        words = _tokens(sql)
        if words is None:  # the tokenizer gave up: PostgreSQL's own parser says what is wrong
            c.running = c.cur
            return sql
        while words and words[-1][0] == ";":
            words.pop()
        if any(w[0] == ";" for w in words):
            raise _failure(
                type="invalid_parameters",
                code="ONE_STATEMENT",
                message="the query holds more than one statement; exactly one is allowed per call",
                hint="send one statement per call",
            )
        if not words:
            c.running = c.cur
            return sql
        first = words[0][0].upper()
        if first in UNVETTED:  # no plan to read: what it calls could reach other sessions (see ``vet``)
            raise _failure(
                type="permission_denied",
                code="NOT_A_QUERY",
                message=f"{first} runs code whose plan cannot be read first: ba-mcp runs queries, SHOW and EXPLAIN",
                hint="send one SELECT",
            )
        c.running = c.extra["vet"] if first in ("SHOW", "EXPLAIN") else c.cur
        c.extra["shown"] = first == "SHOW"
        c.extra["explained"] = _explained(sql, words) if first == "EXPLAIN" else None
        return sql[: words[-1][2] + 1]

    def begin(self, c: Held, timeout_s: float, label: str) -> None:
        """``BEGIN READ ONLY``, the call's timeout, its ``application_name`` (who: the caller's display name and the
        session's digest, for the database's own logs and ``pg_stat_activity``) and, when the caller maps to a role
        (``c.identity["role"]``: one vetted at connect, else refused), ``SET LOCAL ROLE`` — the statement, its
        vetting and its plan then run as that role, and the rollback ends it. The statement cannot take it back:
        it is one statement, and ``SET``/``RESET`` are no query."""
        ms = max(1, int(timeout_s * 1000)) if timeout_s else 0
        c.label = label if label.isalnum() and len(label) <= 16 else ""
        name = application_name(str(c.identity.get("user") or ""), c.label)
        taken = c.identity.get("role")
        if taken is not None and taken not in c.extra.get("roles", []):  # only a role the operator named, vetted
            raise _failure(
                type="permission_denied",
                code="ROLE_NOT_VETTED",
                message=f"the role {str(taken)[:63]} was not vetted when this connection was made",
                hint="name it in databases.<name>.role_from",
            )
        as_role = f"SET LOCAL ROLE {identifier(str(taken))}; " if taken is not None else ""
        c.frame_sql(
            f"BEGIN READ ONLY; SET LOCAL statement_timeout = {ms}; SET LOCAL application_name = '{name}'; "
            f"{as_role}SELECT 1"
        )
        c.in_transaction = True

    def vet(self, c: Held, sql: str, params: Bound, timeout_s: float) -> None:
        """The statement may call only functions, operators, types and views on the allow-list built from the
        database's catalog (``pg_calls``: no SQL run from a string, no other backend reached, no lock, file or
        large object) — every session of ba-mcp shares the role, and a role may end, or read the SQL of, its own
        role's backends. Its calls are read from PostgreSQL's own parse of it. Then its plan is read (``EXPLAIN``,
        nothing runs): a statement PostgreSQL cannot explain does not run."""
        if c.extra.get("shown", False):
            return  # SHOW reads a setting: no plan, nothing called
        if c.extra.get("explained", None):  # EXPLAIN [ANALYZE] runs its statement: that statement is vetted
            sql = c.extra["explained"]
        try:
            calls = pg_calls.calls_of(sql)
        except ValueError:
            calls = None  # PostgreSQL's own parser says what is wrong (the explain below fails)
        if calls is not None:
            catalog = c.extra["calls"]
            if time.monotonic() - catalog.read_at > pg_calls.REFRESH_S:
                catalog = c.extra["calls"] = pg_calls.read_catalog(c.extra["vet"], c.extra["allow_functions"])
                c.extra["paths"] = {}  # each role's search path read again too
            elif pg_calls.unknown(calls, catalog):  # a view or function made since the catalog was read
                pg_calls.read_new(c.extra["vet"], catalog, calls, c.extra["allow_functions"])
            refused = pg_calls.refusal(calls, self._as_role(c, catalog), c.extra["vet"])
            if refused:
                raise _failure(
                    type="permission_denied",
                    code="FUNCTION_NOT_ALLOWED",
                    message=f"the statement uses {refused}, which is not on this database's allow-list: functions "
                    "that run SQL from a string, reach other connections, take locks or read files are refused "
                    "(ba-mcp's sessions share this database's connections)",
                    hint="use built-in date, text, math, JSON, aggregate and window functions; an operator can allow "
                    "an extension's function by name (databases.<name>.allow_functions)",
                )
        # a statement whose plan cannot be read does not run: its error is the explain's (the same words for a
        # query that names no such table; a syntax error for what is no statement PostgreSQL plans)
        # the text form: the same plan, in half the time of the JSON form (no costs)
        c.extra["vet"].execute("EXPLAIN (VERBOSE, COSTS OFF) " + sql, params)
        plan = c.extra["vet"].fetchall()
        bound = c.extra.get("scan_bound")
        if bound:  # the rows its sequential scans read, by the catalog's estimate (issue 63): past the bound, asked
            scanned, tables = scanned_rows(c.extra["vet"], [str(r[0]) for r in plan])
            if scanned > int(bound):
                from ba_mcp.workers.wire import large_scan

                hint = "filter on an indexed column, aggregate fewer rows"
                raise large_scan("PostgreSQL", scanned, tables, int(bound), " in sequential scans", hint)
        if calls is None:  # PostgreSQL planned what its own parser's library could not read: nothing unread runs
            raise _failure(
                type="permission_denied",
                code="FUNCTION_NOT_ALLOWED",
                message="the statement could not be read to check what it calls",
                hint="write it as a plain SELECT",
            )

    def _as_role(self, c: Held, catalog: pg_calls.Catalog) -> pg_calls.Catalog:
        """The allow-list as the call's role resolves names: its own search path (``$user`` is the role taken), read
        under it once per catalog refresh; the rest of the catalog is the same for every role."""
        taken = c.identity.get("role")
        if taken is None:
            return catalog
        paths = c.extra.setdefault("paths", {})
        if taken not in paths:
            c.extra["vet"].execute("SELECT array_to_json(current_schemas(true))::text")
            paths[taken] = [str(s) for s in json.loads(c.extra["vet"].fetchone()[0])]
        return dataclasses.replace(catalog, path=paths[taken])

    def bind(self, c: Held, sql: str, params: Bound, timeout_s: float) -> Bound:
        """Texts bound where the statement wants a date, a timestamp or a number become one (JSON has no dates:
        ``ordered_at >= $1`` with "2025-01-01" would compare a date with text). The types are PostgreSQL's own
        inference, read from the statement prepared (never run) under a name of ours."""
        if not params or not any(isinstance(p, str) for p in params):
            return params
        try:
            c.extra["vet"].execute("PREPARE ba_mcp_types AS " + sql)
            c.extra["vet"].execute(
                "SELECT t::text FROM pg_prepared_statements, unnest(parameter_types) t WHERE name = 'ba_mcp_types'"
            )
            types = [str(r[0]) for r in c.extra["vet"].fetchall()]
            c.extra["vet"].execute("DEALLOCATE ba_mcp_types")
        except Exception:  # the statement's own error follows when it runs
            self.end(c)
            self.begin(c, timeout_s, c.label)
            return params
        return tuple(_typed(i, p, types[i] if i < len(types) else "") for i, p in enumerate(params))

    def end(self, c: Held) -> None:
        if not c.in_transaction:
            return
        c.in_transaction = False
        try:
            c.frame_sql("ROLLBACK")
            # what a rollback leaves: session-level advisory locks, prepared statements, LISTEN, cursors
            c.frame_sql("DISCARD ALL")
        except Exception:
            # a connection whose session state cannot be reset serves no other call: the worker ends (the pool
            # starts a new one), and the database releases whatever it held
            import os

            os._exit(3)

    def columns(self, schema: pa.Schema) -> Columns:
        """NUMERIC as an exact decimal (with a declared precision and scale: that one; unconstrained:
        ``UNCONSTRAINED``); JSON as its text (shown as such); ``timetz`` as psql writes it (``_timetz_text``)."""
        import pyarrow as pa

        from ba_mcp.databases.connector import exact_decimal

        casts: dict[int, Any] = {}
        shown: dict[str, str] = {}
        for i, f in enumerate(schema):
            meta = f.metadata or {}
            kind = meta.get(b"POSTGRESQL:type")
            if kind == b"numeric":
                typmod = int(meta.get(b"POSTGRESQL:typmod", b"-1"))
                if typmod >= 4:
                    precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
                    casts[i] = (
                        pa.decimal128(precision, scale)
                        if precision <= 38
                        else exact_decimal(f.name, (38, min(scale, UNCONSTRAINED[1])))  # as DuckDB reads them
                    )
                else:
                    casts[i] = exact_decimal(f.name, UNCONSTRAINED)
                    shown[f.name] = "numeric"
            elif kind in (b"json", b"jsonb"):
                shown[f.name] = kind.decode()
            elif kind == b"timetz":
                shown[f.name] = "timetz"
        plain, convert, _ = plain_schema(schema, casts)
        zoned = [i for i, f in enumerate(schema) if (f.metadata or {}).get(b"POSTGRESQL:type") == b"timetz"]
        return (*_timetz_text(plain, convert, zoned), shown)

    def catalog(self, c: Held, schemas: list[str]) -> Tables:
        self.begin(c, 30.0, "")
        try:
            return pg_catalog.catalog(c.cur, schemas)
        finally:
            self.end(c)


def session_zone(cur: Any) -> str:
    """The session's ``TimeZone`` (the server's, the database's or the role's default): the driver hands out
    timestamptz in UTC, and psql shows it in this zone."""
    cur.execute("SELECT current_setting('TimeZone')")
    return str(cur.fetchall()[0][0])


_SEQ_SCAN = re.compile(r"Seq Scan on (\S+)")


def scanned_rows(cur: Any, plan: list[str]) -> tuple[int, list[str]]:
    """The rows the sequential scans of an ``EXPLAIN (VERBOSE, COSTS OFF)`` text plan read — each scanned relation
    whole (a filter does not spare a row from being read), by the catalog's estimate (``pg_class.reltuples``, never a
    scan) — and the relations, largest first."""
    names = list(dict.fromkeys(m.group(1) for line in plan for m in [_SEQ_SCAN.search(line)] if m))
    if not names:
        return 0, []
    cur.execute(
        "SELECT n, greatest(c.reltuples, 0)::float8 FROM unnest($1::text[]) n "
        "JOIN pg_class c ON c.oid = to_regclass(n)",
        (names,),
    )
    sizes = sorted(((int(rows), str(name)) for name, rows in cur.fetchall()), reverse=True)
    return sum(rows for rows, _ in sizes), [f"{name} ≈{rows:,} rows" for rows, name in sizes]


def _typed(i: int, value: Any, kind: str) -> Any:
    """A JSON text as the type PostgreSQL infers for parameter ``$i+1`` (a date, a timestamp, a number)."""
    import datetime as dt
    from decimal import Decimal, InvalidOperation

    if not isinstance(value, str):
        return value
    try:
        if kind == "date":
            return dt.date.fromisoformat(value)
        if kind.startswith("timestamp"):
            stamp = dt.datetime.fromisoformat(value)
            if kind == "timestamp with time zone" and stamp.tzinfo is None:
                return stamp.replace(tzinfo=dt.UTC)
            return stamp
        if kind in ("integer", "bigint", "smallint"):
            return int(value)
        if kind in ("numeric", "double precision", "real"):
            return Decimal(value) if kind == "numeric" else float(value)
    except (ValueError, InvalidOperation):
        raise _failure(
            type="invalid_parameters",
            code="BAD_PARAMS",
            message=f"parameter ${i + 1} is used as {kind}, and {value[:40]!r} is not one",
            hint="pass ISO dates (2025-01-31), timestamps (2025-01-31T09:00:00) and plain numbers",
        ) from None
    return value


def _tokenizer() -> None:
    with contextlib.suppress(Exception):
        from sqlglot.dialects.postgres import Postgres

        Postgres().tokenize("SELECT 1")
        pg_calls.calls_of("SELECT 1")  # PostgreSQL's parser (pglast), for the allow-list


def _tokens(sql: str) -> list[tuple[str, int, int]] | None:
    """``sql``'s tokens as (text, start, end) — ``;`` for a statement's end — or None when it cannot be read.
    A command sqlglot keeps whole (``EXPLAIN …``) is split into its word and the tokens after it."""
    from sqlglot.dialects.postgres import Postgres
    from sqlglot.tokens import TokenType

    try:
        found = Postgres().tokenize(sql)
    except Exception:
        return None
    words = [(";" if t.token_type == TokenType.SEMICOLON else t.text, t.start, t.end) for t in found]
    if found and found[0].token_type == TokenType.COMMAND:
        rest_at = found[0].end + 1
        inner = _tokens(sql[rest_at:])
        if inner is None:
            return None
        words = [words[0]] + [(text, start + rest_at, end + rest_at) for text, start, end in inner]
    return words


def _explained(sql: str, words: list[tuple[str, int, int]]) -> str | None:
    """The statement an ``EXPLAIN [ (options) ] [ANALYZE] [VERBOSE]`` explains (and with ANALYZE, runs)."""
    i, depth = 1, 0
    if i < len(words) and words[i][0] == "(":
        while i < len(words):
            depth += {"(": 1, ")": -1}.get(words[i][0], 0)
            i += 1
            if depth == 0:
                break
    while i < len(words) and words[i][0].upper() in ("ANALYZE", "ANALYSE", "VERBOSE"):
        i += 1
    if i >= len(words):
        return None
    return sql[words[i][1] : words[-1][2] + 1]


def role(cur: Any, allow_privileged: bool, allow_writable: bool, mapped: bool = False) -> Opened:
    """The current role's privileges; a privileged role is refused unless allowed by name, and so is a role that can
    change data: write a table or a sequence (a grant, ownership, ``pg_write_all_data``), create objects (in the
    database, or in a schema by a grant of its own or ownership), use dblink / postgres_fdw (a read-only transaction
    does not stop ``dblink_exec`` committing on another connection), bypass row-level security, create roles or
    replicate. Each refusal names what it found and the SQL that removes it. PUBLIC's ``CREATE`` on a schema — the
    default of a database made on PostgreSQL 14 or older, or restored from its dump — is served with a warning
    (``warnings``: the ``REVOKE … FROM PUBLIC`` to run): every statement ba-mcp runs is one vetted SELECT inside a
    READ ONLY transaction, in which PostgreSQL creates nothing. ``mapped``: the role is one ``role_from`` maps users
    to (taken by ``mapped_role``), named so in a refusal."""
    cur.execute(
        "SELECT current_user::text, current_database()::text, r.rolsuper, "
        + ", ".join(f"pg_has_role(current_user, '{r}', 'MEMBER')" for r in PRIVILEGED_ROLES)
        + ", current_setting('server_version'), pg_has_role(current_user, 'pg_write_all_data', 'USAGE'), "
        "(SELECT min(quote_ident(pn.nspname)) FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid "
        "AND d.classid = 'pg_proc'::regclass AND d.deptype = 'e' JOIN pg_extension e ON e.oid = d.refobjid "
        "JOIN pg_namespace pn ON pn.oid = p.pronamespace WHERE e.extname = 'dblink' "
        "AND has_function_privilege(p.oid, 'EXECUTE') AND has_schema_privilege(p.pronamespace, 'USAGE')), "
        "(SELECT min(quote_ident(s.srvname)) FROM pg_foreign_server s WHERE has_server_privilege(s.oid, 'USAGE')), "
        "r.rolbypassrls, r.rolcreaterole, r.rolreplication "
        "FROM pg_roles r WHERE r.rolname = current_user"
    )
    row = cur.fetchone()
    user, database, superuser, *members, version, write_all, dblink, server, bypass, creates_roles, replicates = row
    who = identifier(user)
    named = f"the role {user}, which role_from maps users to," if mapped else f"the role {user}"
    privileges = (["superuser"] if superuser else []) + [r for r, m in zip(PRIVILEGED_ROLES, members, strict=True) if m]
    if privileges and not allow_privileged:
        fixes = ([f"ALTER ROLE {who} NOSUPERUSER;"] if superuser else []) + [
            f"REVOKE {r} FROM {who};" for r in privileges if r != "superuser"
        ]
        raise _failure(
            type="permission_denied",
            code="PRIVILEGED_ROLE",
            message=f"{named} is {' and '.join(privileges)}: a read-only transaction does not stop such a "
            "role from running programs on the database host or reading its files",
            hint=f"run as an administrator: {' '.join(fixes)} — or connect as a read-only role ({READER}), or set "
            "allow_privileged_role: true for this database if you accept that",
        )
    powers: list[tuple[str, str]] = []  # (what the role can do, the SQL that removes it)
    if write_all:
        powers.append(("write every table (a member of pg_write_all_data)", f"REVOKE pg_write_all_data FROM {who};"))
    written = _written(cur)
    if written is not None and not write_all:
        powers.append(written)
    powers += _creates(cur, database, who)
    if dblink:
        powers.append(
            (
                f"use dblink (schema {dblink}: its connections commit outside the read-only transaction)",
                "CREATE SCHEMA dblink_only; ALTER EXTENSION dblink SET SCHEMA dblink_only; (or DROP EXTENSION dblink;)",
            )
        )
    if server:
        powers.append(
            (f"use the foreign server {server} (postgres_fdw)", f"REVOKE USAGE ON FOREIGN SERVER {server} FROM {who};")
        )
    if bypass and not superuser:
        powers.append(("bypass row-level security (BYPASSRLS)", f"ALTER ROLE {who} NOBYPASSRLS;"))
    if creates_roles and not superuser:
        powers.append(("create roles (CREATEROLE)", f"ALTER ROLE {who} NOCREATEROLE;"))
    if replicates and not superuser:
        powers.append(("replicate the database (REPLICATION)", f"ALTER ROLE {who} NOREPLICATION;"))
    public_only = _public_creates(cur)
    if powers and not allow_writable and not (privileges and allow_privileged):
        raise _failure(
            type="permission_denied",
            code="WRITABLE_ROLE",
            message=f"{named} can {'; '.join(p for p, _ in powers)}: ba-mcp serves a role that can only read",
            hint=f"run as an administrator: {' '.join(dict.fromkeys(f for _, f in powers))} — or connect as a "
            f"read-only role ({READER}), or set allow_writable_role: true for this database if you accept that",
        )
    version = str(version).split(" ")[0]  # 15.18, without the packager's note
    found: Opened = {"version": version, "role": user, "privileges": privileges, "role_can_write": bool(powers)}
    if powers:
        found["detail"] = f"the role can write — a read-only role is the safest: {READER}"
    if public_only:
        found["warnings"] = [public_create_warning(database, public_only)]
    return found


READER = "CREATE ROLE ba_reader LOGIN PASSWORD '…'; GRANT pg_read_all_data TO ba_reader;"
# what a role can change a relation with: a table's (and its columns') grants, a sequence's (nextval, setval)
_WRITES = {"table": ("INSERT", "UPDATE", "DELETE", "TRUNCATE"), "sequence": ("UPDATE", "USAGE")}
_USER_SCHEMA = "n.nspname NOT LIKE 'pg\\_%' AND n.nspname <> 'information_schema'"
WRITE_PRIVILEGES = "'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'USAGE'"
CREATE = "'CREATE'"
DATABASE_ACL = "coalesce(d.datacl, acldefault('d', d.datdba))"
SCHEMA_ACL = "coalesce(n.nspacl, acldefault('n', n.nspowner))"


def _grantees(acl: str, privileges: str) -> str:
    """SQL: the JSON array of the roles (``PUBLIC`` for everyone) through whom the current role holds one of
    ``privileges`` in ``acl`` (an ``aclitem[]`` expression, its default already filled in)."""
    return (
        "(SELECT array_to_json(array_agg(DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' "
        f"ELSE quote_ident(pg_get_userbyid(a.grantee)) END))::text FROM aclexplode({acl}) a "
        f"WHERE a.privilege_type IN ({privileges}) AND (a.grantee = 0 OR pg_has_role(a.grantee, 'USAGE')))"
    )


def _written(cur: Any) -> tuple[str, str] | None:
    """The first table or sequence the current role can write (a table-wide or a column's grant, or ownership) —
    how many there are, which privileges, through whom — and the SQL that removes it; None when there is none."""
    table = " OR ".join(
        [f"has_any_column_privilege(c.oid, '{p}')" for p in ("INSERT", "UPDATE")]
        + [f"has_table_privilege(c.oid, '{p}')" for p in ("DELETE", "TRUNCATE")]
    )
    sequence = " OR ".join(f"has_sequence_privilege(c.oid, '{p}')" for p in _WRITES["sequence"])
    held = (
        "CASE WHEN c.relkind = 'S' THEN ARRAY(SELECT p FROM unnest(ARRAY['UPDATE', 'USAGE']) p "
        "WHERE has_sequence_privilege(c.oid, p)) ELSE ARRAY(SELECT p FROM unnest(ARRAY['INSERT', 'UPDATE']) p "
        "WHERE has_any_column_privilege(c.oid, p)) || ARRAY(SELECT p FROM unnest(ARRAY['DELETE', 'TRUNCATE']) p "
        "WHERE has_table_privilege(c.oid, p)) END"
    )
    acl = (
        "coalesce(c.relacl, acldefault(CASE WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::\"char\", c.relowner)) "
        "|| coalesce((SELECT array_agg(x) FROM pg_attribute t, unnest(t.attacl) x WHERE t.attrelid = c.oid), "
        "'{}'::aclitem[])"
    )
    cur.execute(
        "SELECT quote_ident(n.nspname), quote_ident(c.relname), c.relkind = 'S', "
        f"array_to_json({held})::text, pg_has_role(c.relowner, 'USAGE'), "
        f"{_grantees(acl, WRITE_PRIVILEGES)}, count(*) OVER () "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        f"WHERE {_USER_SCHEMA} AND n.nspname NOT LIKE 'pg_toast%' AND ((c.relkind IN ('r', 'p', 'v', 'm', 'f') "
        f"AND ({table})) OR (c.relkind = 'S' AND ({sequence}))) ORDER BY c.relkind = 'S', 1, 2 LIMIT 1"
    )
    row = cur.fetchone()
    if row is None:
        return None
    schema, name, is_sequence, held_json, owns, grantees_json, count = row
    what = "sequence" if is_sequence else "table"
    held_list = json.loads(held_json or "[]")
    grantees = json.loads(grantees_json or "null") or []
    more = f" ({count} tables and sequences in all)" if int(count) > 1 else ""
    if owns:
        return (
            f"write to {what}s it owns (e.g. {schema}.{name}){more}",
            f"connect as a role that owns nothing: {READER}",
        )
    through = ", ".join(grantees) or "a role it is a member of"
    said = f"write to {what}s: {', '.join(held_list)} on {schema}.{name} (granted to {through}){more}"
    on = f"{'SEQUENCE ' if is_sequence else ''}{schema}.{name}"
    revoke = " ".join(f"REVOKE {', '.join(held_list)} ON {on} FROM {g};" for g in grantees)
    if int(count) > 1:
        revoke += " " + " ".join(
            f"REVOKE {', '.join(_WRITES['table'])} ON ALL TABLES IN SCHEMA {schema} FROM {g}; "
            f"REVOKE {', '.join(_WRITES['sequence'])} ON ALL SEQUENCES IN SCHEMA {schema} FROM {g};"
            for g in grantees
        )
    return said, revoke.strip() or f"REVOKE {', '.join(held_list)} ON {on} FROM <the role that grants it>;"


def _creates(cur: Any, database: str, who: str) -> list[tuple[str, str]]:
    """Where the current role can create objects, each with the SQL that removes it: the database (CREATE makes
    schemas: a grant or ownership), a schema it owns or holds CREATE on by a grant of its own — never PUBLIC's alone
    (``_public_creates``)."""
    found: list[tuple[str, str]] = []
    cur.execute(
        "SELECT has_database_privilege(d.oid, 'CREATE'), pg_has_role(d.datdba, 'USAGE'), "
        f"{_grantees(DATABASE_ACL, CREATE)} "
        "FROM pg_database d WHERE d.datname = current_database()"
    )
    creates, owns, grantees_json = cur.fetchone()
    db = identifier(database)
    if creates and owns:
        found.append(
            (f"create schemas in database {database}, which it owns", f"connect as a role that owns nothing: {READER}")
        )
    elif creates:
        grantees = json.loads(grantees_json or "null") or [who]
        found.append(
            (
                f"create schemas in database {database} (CREATE granted to {', '.join(grantees)})",
                " ".join(f"REVOKE CREATE ON DATABASE {db} FROM {g};" for g in grantees),
            )
        )
    for schema, owns, grantees_json in _schema_creates(cur):
        grantees = [g for g in json.loads(grantees_json or "null") or [] if g != "PUBLIC"]
        if owns:
            found.append(
                (f"create objects in schema {schema}, which it owns", f"ALTER SCHEMA {schema} OWNER TO <another role>;")
            )
        elif grantees:
            found.append(
                (
                    f"create objects in schema {schema} (CREATE granted to {', '.join(grantees)})",
                    " ".join(f"REVOKE CREATE ON SCHEMA {schema} FROM {g};" for g in grantees),
                )
            )
    return found


def _schema_creates(cur: Any) -> list[tuple[str, bool, str]]:
    """The schemas the current role can create in: (name, whether it owns it, the JSON array of who grants CREATE)."""
    cur.execute(
        "SELECT quote_ident(n.nspname), pg_has_role(n.nspowner, 'USAGE'), "
        f"{_grantees(SCHEMA_ACL, CREATE)} "
        f"FROM pg_namespace n WHERE {_USER_SCHEMA} AND n.nspname NOT LIKE 'pg_toast%' "
        "AND has_schema_privilege(n.oid, 'CREATE') ORDER BY 1"
    )
    return [(str(s), bool(o), str(g or "")) for s, o, g in cur.fetchall()]


def _public_creates(cur: Any) -> list[str]:
    """The schemas the current role can create in only because PUBLIC may (PostgreSQL ≤ 14's ``public``)."""
    return [
        schema
        for schema, owns, grantees in _schema_creates(cur)
        if not owns and (json.loads(grantees or "null") or []) == ["PUBLIC"]
    ]


def public_create_warning(database: str, schemas: list[str]) -> str:
    """What the doctor and the server's log say of PUBLIC's CREATE: served, and the SQL that closes it."""
    revoke = " ".join(f"REVOKE CREATE ON SCHEMA {s} FROM PUBLIC;" for s in schemas)
    return (
        f"every role may create objects in schema {', '.join(schemas)} of database {database} (PUBLIC's CREATE, "
        "the default of databases made on PostgreSQL 14 or older): served, as ba-mcp runs only vetted SELECTs in "
        f"READ ONLY transactions, which create nothing; to close it, run as the database's owner: {revoke}"
    )


def identifier(name: str) -> str:
    """A role's name as a quoted SQL identifier (taken as written: case and every character kept)."""
    return '"' + name.replace('"', '""') + '"'


APPLICATION_NAME_BYTES = 63  # PostgreSQL keeps no more of application_name (NAMEDATALEN - 1)


def application_name(user: str, label: str) -> str:
    """``ba-mcp <user> <label>`` as a literal's safe content for the database's logs: the user's display name (a
    token's claim — the user's own text) keeps letters, digits, space and ``@._+-`` of ASCII, every other character a
    ``?``, cut so the whole fits PostgreSQL's 63 bytes with the session's digest kept whole."""
    tail = f" {label}" if label else ""
    room = APPLICATION_NAME_BYTES - len("ba-mcp ") - len(tail)
    who = re.sub(r"[^A-Za-z0-9 @._+\-]", "?", user)[:room].strip()
    return "ba-mcp" + (f" {who}" if who else "") + tail


def mapped_role(c: Held, name: str, connecting: str, allow_privileged: bool, allow_writable: bool) -> Opened:
    """Role ``name`` (one ``role_from`` maps users to) taken as a call would take it — ``SET LOCAL ROLE`` inside a
    read-only transaction, rolled back — and held to the connecting role's checks (``role``). A role that does not
    exist (UNKNOWN_ROLE), that the connecting role may not take (ROLE_NOT_GRANTED: it must be a member) or that fails
    a check stops the database from being served, naming the role and the SQL that fixes it."""
    quoted = identifier(name)
    try:
        c.frame_sql(f"BEGIN READ ONLY; SET LOCAL ROLE {quoted}")
    except Exception as exc:
        with contextlib.suppress(Exception):
            c.frame_sql("ROLLBACK")
        state = str(getattr(exc, "sqlstate", "") or "")
        if state == "42704" or "does not exist" in str(exc):
            raise _failure(
                type="permission_denied",
                code="UNKNOWN_ROLE",
                message=f"role_from maps users to the role {name}, which does not exist in this database (a role "
                "is taken as written: case matters)",
                hint=f"create it (CREATE ROLE {quoted} NOLOGIN; GRANT {quoted} TO {identifier(connecting)};) or "
                "correct role_from",
            ) from None
        if state != "42501" and "permission denied" not in str(exc):
            raise  # not the role's doing (the connection): the connect's own error
        raise _failure(
            type="permission_denied",
            code="ROLE_NOT_GRANTED",
            message=f"role_from maps users to the role {name}, which the connecting role {connecting} cannot take: "
            "it must be a member of every mapped role",
            hint=f"GRANT {quoted} TO {identifier(connecting)};",
        ) from None
    try:
        return role(c.cur, allow_privileged, allow_writable, mapped=True)
    finally:
        c.frame_sql("ROLLBACK")


ENGINE = PostgresEngine()
