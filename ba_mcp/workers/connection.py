"""The connection worker: one ADBC connection to a configured database (PostgreSQL, SQLite, any ADBC driver),
in a process the server kills.

Started like the engine worker (``python -I -B -m ba_mcp.workers`` with ``"kind": "connection"`` in its
options) and confined the same way — minus the network namespace when the database is reached over the
network. The driver, URL and options (credentials) arrive over the socket in ``connect``, never on the command
line or in the environment. Operations:

* ``connect`` — open the connection; for PostgreSQL, refuse a privileged role (superuser, or a member of
  ``pg_read_server_files``/``pg_write_server_files``/``pg_execute_server_program``) unless allowed, and report
  the server's version and the role's privileges;
* ``run`` — the user's one statement, read-only by the database's own rules (see ``_Postgres.begin``), its first
  ``max_rows + 1`` rows back as Arrow; ``store`` streams the rest into the artifact's descriptor as Parquet,
  ``drop`` discards it; the transaction is always rolled back;
* ``describe`` — the catalog (tables, views, columns, comments, row estimates from the catalog).

A SIGINT (the call's timeout) cancels the running statement in the database (ADBC cancel).
"""

from __future__ import annotations

import contextlib
import socket
from typing import Any

from ba_mcp.workers.wire import Failure, memfile, write_arrow

PRIVILEGED_ROLES = ("pg_read_server_files", "pg_write_server_files", "pg_execute_server_program")
# functions that reach other backends: ending or signalling them, reading their statements (pg_stat_activity is
# pg_stat_get_activity in a plan), and dblink's connections
OTHER_SESSIONS = (
    r"\b(pg_terminate_backend|pg_cancel_backend|pg_signal_backend|pg_stat_get_activity|pg_stat_get_backend_\w+"
    r"|pg_stat_statements\w*|dblink\w*)\b"
)


class Connector:
    """Serves one database connection (opened on ``connect``)."""

    def __init__(self, sock: socket.socket, options: dict[str, Any]) -> None:
        self.sock = sock
        self.options = options
        self.con: Any = None
        self.cur: Any = None  # the user's statements
        self.frame: Any = None  # our own: BEGIN READ ONLY …, ROLLBACK
        self.vet: Any = None  # PostgreSQL: our EXPLAIN of the user's statement
        self.label = ""  # the calling session's, as application_name
        self.sqlite_uri = ""
        self.used = False  # SQLite: a statement ran on this connection since it was opened
        self.dialect = ""
        self.busy = False  # set by the serving loop while an operation runs
        self.pending: Any = None  # (reader, head batches, schema) of a result cut at max_rows
        self.in_transaction = False
        self.after_reply: Any = None  # what the serving loop runs once the answer is sent
        self.spark_session = ""
        self.spark_uri = ""
        self.spark_client: Any = None

    def interrupt(self) -> None:
        if self.busy and self.cur is not None:
            if self.dialect == "spark":  # ADBC's cancel stops only this client: the job would run on
                self._interrupt_spark()
            self.cur.adbc_cancel()

    def _prepare_interrupts(self) -> None:
        """Spark: a Spark Connect client attached to our session, made in advance (its import takes a while),
        to interrupt the session's operations in the cluster at a timeout."""
        import threading

        def attach() -> None:
            try:
                from pyspark.sql.connect.client import SparkConnectClient

                separator = "" if self.spark_uri.rstrip("/").count("/") > 2 else "/"
                self.spark_client = SparkConnectClient(
                    f"{self.spark_uri.rstrip('/')}{separator};session_id={self.spark_session}"
                )
            except Exception as exc:  # reported when an interrupt is needed
                self.spark_client = exc

        self.spark_client = None
        threading.Thread(target=attach, name="spark-client", daemon=True).start()

    def _interrupt_spark(self) -> None:
        import time

        deadline = time.monotonic() + 10
        while self.spark_client is None and time.monotonic() < deadline:
            time.sleep(0.05)
        client = self.spark_client
        if client is not None and not isinstance(client, Exception):
            client.interrupt_all()

    # -- operations ----------------------------------------------------------------------------------

    def op_connect(self, message: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        import adbc_driver_manager.dbapi as dbapi

        driver, uri, options = message["driver"], message["uri"], dict(message.get("options") or {})
        self.dialect = message["dialect"]
        if driver == "adbc_driver_postgresql":
            import adbc_driver_postgresql.dbapi as pg

            self.con = pg.connect(uri, db_kwargs=options or None, autocommit=True)
        elif driver == "adbc_driver_sqlite":
            import urllib.parse

            import adbc_driver_sqlite.dbapi as lite

            # the file bound read-only into this process's root (its own path where there is no mount namespace),
            # opened read-only and immutable: SQLite writes nothing, not even a journal or a lock
            path = uri["target"] if self.options.get("confined") else uri["host"]
            uri = f"file:{urllib.parse.quote(path)}?mode=ro&immutable=1"
            self.sqlite_uri = uri
            self.con = lite.connect(uri, autocommit=True)
        elif self.dialect == "spark":
            import uuid

            # a Spark session of our own choosing: at a timeout its operations are interrupted in the cluster
            self.spark_session = str(uuid.uuid4())
            self.spark_uri = uri
            kwargs = {"uri": uri, "adbc.spark.session_id": self.spark_session, **options}
            self.con = dbapi.connect(driver=_driver_location(driver), db_kwargs=kwargs, autocommit=True)
        else:
            kwargs = {"uri": uri, **options} if uri else options
            self.con = dbapi.connect(driver=_driver_location(driver), db_kwargs=kwargs, autocommit=True)
        self.cur = self.con.cursor()
        info = {k: v for k, v in self.con.adbc_get_info().items() if isinstance(v, (str, int))}
        reply: dict[str, Any] = {"op": "connected", "vendor": info.get("vendor_name", ""), "version": ""}
        if self.dialect == "postgresql":
            reply.update(
                _postgres_role(
                    self.cur, bool(message.get("allow_privileged_role")), bool(message.get("allow_writable_role"))
                )
            )
            self.vet = self.con.cursor()  # EXPLAIN of the user's statement: plain protocol, not COPY
            self.vet.adbc_statement.set_options(**{"adbc.postgresql.use_copy": "false"})
        elif self.dialect == "spark":
            reply.update(_spark_guard(self.cur, bool(message.get("allow_unguarded_writes"))))
            self._prepare_interrupts()
        else:
            reply["version"] = str(info.get("vendor_version", ""))
        if self.dialect == "adbc":  # another driver: read-only only where it offers it (and by the user's role)
            try:
                self.con.adbc_connection.set_options(**{"adbc.connection.readonly": "true"})
                reply["read_only_by_driver"] = True
            except Exception:
                reply["read_only_by_driver"] = False
        return reply, []

    def op_run(self, message: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        import pyarrow as pa

        try:
            self._end()
            self._begin(float(message.get("timeout_s") or 0), str(message.get("label") or ""))
        except Exception as exc:  # before the statement: the connection is gone (a restart, an idle timeout)
            raise Failure(
                type="transient_error",
                code="CONNECTION_LOST",
                message="the connection to the database was lost: " + str(exc).split("\n")[0][:300],
                hint="retry",
            ) from None
        params = message.get("params")
        if isinstance(params, dict):
            raise Failure(
                type="invalid_parameters",
                code="BAD_PARAMS",
                message=f"{self.dialect} takes positional parameters ($1, $2, …), not named ones",
                hint="pass params as an array, in the order of $1, $2, …",
            )
        if self.dialect == "postgresql":
            self._vet(message["sql"], tuple(params) if params else None, float(message.get("timeout_s") or 0))
        self.used = True
        self.cur.execute(message["sql"], tuple(params) if params else None)
        reader = self.cur.fetch_record_batch()
        if not len(reader.schema):  # a statement without rows (SET, LOCK …): it ran, and is rolled back with the call
            with contextlib.suppress(Exception):
                reader.close()
            self._end()
            done = pa.table({"result": pa.array(["done (rolled back at the end of the call)"], pa.string())})
            return {"op": "result", "rows": 1, "more": False, "display_types": {}}, [memfile(write_arrow(done))]
        schema, convert = _plain_schema(reader.schema)
        max_rows = int(message["max_rows"])
        head: list[Any] = []
        have = 0
        for batch in reader:
            head.append(convert(batch))
            have += batch.num_rows
            if have > max_rows:
                break
        more = have > max_rows
        if more:
            self.pending = (reader, head, schema, convert)
        else:
            with contextlib.suppress(Exception):
                reader.close()
            self.after_reply = self._end  # rolled back once the answer is on its way (off the call's path)
        blob = write_arrow(pa.Table.from_batches(head, schema=schema).slice(0, max_rows + 1))
        return {"op": "result", "rows": have, "more": more, "display_types": _display_types(reader.schema)}, [
            memfile(blob)
        ]

    def op_store(self, message: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        """The complete result of the last ``run`` as Parquet into the descriptor given, batch by batch (memory
        bounded by a batch), stopping past ``limit`` bytes."""
        import pyarrow.parquet as pq

        if self.pending is None:
            raise Failure(type="execution_error", code="NOTHING_TO_STORE", message="no result is waiting")
        reader, head, schema, convert = self.pending
        self.pending = None
        limit = int(message["limit"])
        rows, complete = 0, True
        try:
            with open(fds[0], "wb", closefd=False) as out, pq.ParquetWriter(out, schema, compression="zstd") as writer:
                for batch in head:
                    writer.write_batch(batch)
                    rows += batch.num_rows
                for batch in reader:
                    writer.write_batch(convert(batch))
                    rows += batch.num_rows
                    if out.tell() > limit:
                        complete = False
                        break
        finally:
            with contextlib.suppress(Exception):
                reader.close()
            self._end()
        return {"op": "stored", "rows": rows, "complete": complete}, []

    def op_drop(self, message: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        if self.pending is not None:
            with contextlib.suppress(Exception):
                self.pending[0].close()
            self.pending = None
        self._end()
        return {"op": "dropped"}, []

    def op_describe(self, message: dict[str, Any], fds: list[int]) -> tuple[dict[str, Any], list[int]]:
        self._end()
        schemas = list(message.get("schemas") or [])
        if self.dialect == "postgresql":
            self._begin(30.0)
            try:
                tables = _postgres_catalog(self.cur, schemas)
            finally:
                self._end()
        elif self.dialect == "sqlite":
            tables = _sqlite_catalog(self.cur)
        elif self.dialect == "spark":
            tables = _spark_catalog(self.cur, schemas)
        else:
            tables = _adbc_catalog(self.con)
        return {"op": "catalog", "tables": tables}, []

    # -- the read-only frame of a call -----------------------------------------------------------------

    def _begin(self, timeout_s: float, label: str = "") -> None:
        """PostgreSQL: a READ ONLY transaction whose mode is fixed by a first query of ours (``SET TRANSACTION
        READ WRITE`` is refused after any query), with the call's timeout as ``statement_timeout`` and the
        calling session's label as ``application_name`` (an operator tells sessions apart in pg_stat_activity);
        always rolled back and the connection's session state discarded (``_end``), so nothing the statement
        sets, locks or prepares outlives the call. Our own fixed text goes in one round trip; the user's
        statement is then one prepared statement (it cannot carry a second one)."""
        if self.dialect != "postgresql":
            return
        ms = max(1, int(timeout_s * 1000)) if timeout_s else 0
        self.label = label if label.isalnum() and len(label) <= 16 else ""
        name = "ba-mcp" + (f" {self.label}" if self.label else "")
        self._frame(
            f"BEGIN READ ONLY; SET LOCAL statement_timeout = {ms}; SET LOCAL application_name = '{name}'; SELECT 1"
        )
        self.in_transaction = True

    def _vet(self, sql: str, params: tuple[Any, ...] | None, timeout_s: float) -> None:
        """PostgreSQL: the statement's plan (``EXPLAIN (VERBOSE)``, nothing runs) may call no function that reaches
        other connections — every session of ba-mcp shares the role, and a role may end, or read the SQL of, its
        own role's backends (S-14). A statement PostgreSQL cannot explain is left to fail on its own."""
        import re

        try:
            self.vet.execute("EXPLAIN (VERBOSE, FORMAT JSON) " + sql, params)
            plan = str(self.vet.fetchall())
        except Exception:
            self._end()  # the explain failed: the transaction is aborted; the statement's own error follows
            self._begin(timeout_s, self.label)
            return
        found = re.search(OTHER_SESSIONS, plan)
        if found:
            raise Failure(
                type="permission_denied",
                code="OTHER_SESSIONS",
                message=f"{found.group(0)} reaches other connections to the database (their statements, or ending "
                "them), and every ba-mcp session shares this role: it is not allowed",
                hint="query the tables; an operator sees sessions by their application_name (ba-mcp …)",
            )

    def _frame(self, sql: str) -> None:
        """Our own fixed text, on a statement of its own: the user's cursor remembers its last query (and would
        run a changed statement's text for an equal one), and only this text may hold several statements."""
        if self.frame is None:
            self.frame = self.con.cursor()  # kept: its statement lives as long as the cursor
        self.frame.adbc_statement.set_sql_query(sql)
        self.frame.adbc_statement.execute_update()

    def _end(self) -> None:
        if self.pending is not None:
            with contextlib.suppress(Exception):
                self.pending[0].close()
            self.pending = None
        if self.dialect == "sqlite" and self.used:
            # SQLite keeps TEMP objects, ATTACHed files and PRAGMAs on the connection: every call gets a fresh one
            import adbc_driver_sqlite.dbapi as lite

            self.used = False
            with contextlib.suppress(Exception):
                self.cur.close()
                self.con.close()
            self.con = lite.connect(self.sqlite_uri, autocommit=True)
            self.cur = self.con.cursor()
        if self.dialect == "postgresql" and self.in_transaction:
            self.in_transaction = False
            try:
                self._frame("ROLLBACK")
                # what a rollback leaves: session-level advisory locks, prepared statements, LISTEN, cursors
                self._frame("DISCARD ALL")
            except Exception:
                # a connection whose session state cannot be reset serves no other call: the worker ends (the
                # pool starts a new one), and the database releases whatever it held
                import os

                os._exit(3)


def _driver_location(driver: str) -> str:
    """An ADBC driver package's shared library (``adbc_driver_flightsql`` → its ``_driver_path()``), else the name
    as given: a driver manifest's name or a library's path, which the driver manager finds itself."""
    import importlib

    try:
        module = importlib.import_module(driver)
    except ImportError:
        return driver
    locate = getattr(module, "_driver_path", None)
    return str(locate()) if callable(locate) else driver


def _spark_guard(cur: Any, allow_unguarded: bool) -> dict[str, Any]:
    """Spark: the server's version, and whether ba-mcp's read-only rule — this version of it, the allow-list of
    read plan nodes — is active: probed with statements the rule refuses and that change nothing where they run
    (dropping a table that does not exist; EXECUTE IMMEDIATE of a SELECT, which an older rule let through)."""
    import uuid

    cur.execute("SELECT split(version(), ' ')[0] AS v")
    version = str(cur.fetchone()[0])
    guarded = True
    for probe in (f"DROP TABLE IF EXISTS ba_mcp_probe_{uuid.uuid4().hex}", "EXECUTE IMMEDIATE 'SELECT 1'"):
        try:
            cur.execute(probe)
            if cur.description:
                cur.fetchall()
            guarded = False
        except Exception as exc:
            if "BA_MCP_READ_ONLY" not in str(exc):
                raise
    if not guarded and not allow_unguarded:
        raise Failure(
            type="permission_denied",
            code="UNGUARDED_SPARK",
            message="this Spark Connect server runs without ba-mcp's read-only rule (or with an older version of it): "
            "Spark has no read-only setting, so a statement could write (tables, files, jars) or run programs",
            hint="start it with the rule (README: Beyond one machine — `ba-mcp spark-local` or the flags it prints), "
            "or set allow_unguarded_writes: true for this database if you accept that",
        )
    return {"version": version, "guarded": guarded}


def _postgres_role(cur: Any, allow_privileged: bool, allow_writable: bool) -> dict[str, Any]:
    """The role's privileges; a privileged role is refused unless allowed by name, and so is a role that can write a
    table, create objects or use dblink / postgres_fdw (a read-only transaction does not stop ``dblink_exec``
    committing on another connection)."""
    user_tables = (
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') "
        "AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'"
    )
    written = " OR ".join(f"has_table_privilege(c.oid, '{p}')" for p in ("INSERT", "UPDATE", "DELETE", "TRUNCATE"))
    cur.execute(
        "SELECT current_user::text, r.rolsuper, "
        + ", ".join(f"pg_has_role(current_user, '{role}', 'MEMBER')" for role in PRIVILEGED_ROLES)
        + ", current_setting('server_version'), "
        f"(SELECT min(quote_ident(n.nspname) || '.' || quote_ident(c.relname)) {user_tables} AND ({written})), "
        "CASE WHEN has_database_privilege(current_database(), 'CREATE') THEN 'database ' || current_database() "
        "ELSE (SELECT 'schema ' || min(n.nspname) FROM pg_namespace n WHERE n.nspname NOT LIKE 'pg\\_%' "
        "AND n.nspname <> 'information_schema' AND has_schema_privilege(n.oid, 'CREATE')) END, "
        "(SELECT min(e.extname) FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass "
        "AND d.deptype = 'e' JOIN pg_extension e ON e.oid = d.refobjid WHERE e.extname = 'dblink' "
        "AND has_function_privilege(p.oid, 'EXECUTE') AND has_schema_privilege(p.pronamespace, 'USAGE')), "
        "(SELECT min(s.srvname) FROM pg_foreign_server s WHERE has_server_privilege(s.oid, 'USAGE')) "
        "FROM pg_roles r WHERE r.rolname = current_user"
    )
    row = cur.fetchone()
    user, superuser, *members, version, table, creates, dblink, server = row
    privileges = (["superuser"] if superuser else []) + [r for r, m in zip(PRIVILEGED_ROLES, members, strict=True) if m]
    if privileges and not allow_privileged:
        raise Failure(
            type="permission_denied",
            code="PRIVILEGED_ROLE",
            message=f"the role {user} is {' and '.join(privileges)}: a read-only transaction does not stop such a "
            "role from running programs on the database host or reading its files",
            hint="connect as a read-only role (see `ba-mcp doctor`), or set allow_privileged_role: true for this "
            "database if you accept that",
        )
    powers = (
        ([f"write to tables (e.g. {table})"] if table else [])
        + ([f"create objects in {creates}"] if creates else [])
        + (["use dblink (its connections commit outside the read-only transaction)"] if dblink else [])
        + ([f"use the foreign server {server} (postgres_fdw)"] if server else [])
    )
    if powers and not allow_writable and not (privileges and allow_privileged):
        raise Failure(
            type="permission_denied",
            code="WRITABLE_ROLE",
            message=f"the role {user} can {'; '.join(powers)}: ba-mcp serves a role that can only read",
            hint="connect as a read-only role (README: CREATE ROLE ba_reader …; GRANT pg_read_all_data), or set "
            "allow_writable_role: true for this database if you accept that",
        )
    version = str(version).split(" ")[0]  # 15.18, without the packager's note
    return {"version": version, "role": user, "privileges": privileges, "role_can_write": bool(powers)}


def _plain_schema(schema: Any) -> tuple[Any, Any]:
    """The result's schema as plain Arrow types the server and Parquet read the same way: NUMERIC with a
    declared precision and scale as an exact decimal, other extension types (unconstrained NUMERIC, JSON) as
    their text; and the function converting a batch to it."""
    import pyarrow as pa

    fields, casts = [], {}
    for i, field in enumerate(schema):
        target = field.type.storage_type if isinstance(field.type, pa.ExtensionType) else field.type
        meta = field.metadata or {}
        if meta.get(b"POSTGRESQL:type") == b"numeric":
            typmod = int(meta.get(b"POSTGRESQL:typmod", b"-1"))
            if typmod >= 4:
                precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
                target = pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
        if target != field.type:
            casts[i] = target
        fields.append(pa.field(field.name, target, field.nullable))
    plain = pa.schema(fields)
    if not casts:
        return plain, lambda batch: batch

    def convert(batch: Any) -> Any:
        columns = []
        for i, column in enumerate(batch.columns):
            if i in casts:
                storage = column.storage if isinstance(column, pa.ExtensionArray) else column
                column = storage.cast(casts[i]) if storage.type != casts[i] else storage
            columns.append(column)
        return pa.RecordBatch.from_arrays(columns, schema=plain)

    return plain, convert


def _display_types(schema: Any) -> dict[str, str]:
    """Database types Arrow cannot show (unconstrained NUMERIC arrives as its exact text)."""
    shown = {}
    for field in schema:
        meta = field.metadata or {}
        if meta.get(b"POSTGRESQL:type") == b"numeric" and int(meta.get(b"POSTGRESQL:typmod", b"-1")) < 4:
            shown[field.name] = "numeric (exact, as text)"
        elif meta.get(b"POSTGRESQL:type") in (b"json", b"jsonb"):
            shown[field.name] = meta[b"POSTGRESQL:type"].decode()
    return shown


def _rows(cur: Any, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    cur.execute(sql, params)
    return list(cur.fetchall())


def _postgres_catalog(cur: Any, schemas: list[str]) -> dict[str, Any]:
    """Tables and views of the schemas asked for (else every schema but the system's): kinds, row estimates
    from ``pg_class.reltuples`` (never a scan), comments, view definitions, columns, common values from
    ``pg_stats``."""
    where = "n.nspname = ANY($1)" if schemas else "n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')"
    params = (schemas,) if schemas else None
    relations = _rows(
        cur,
        "SELECT c.oid::bigint, n.nspname::text, c.relname::text, c.relkind::text, c.reltuples::float8, "
        "obj_description(c.oid, 'pg_class'), "
        "CASE WHEN c.relkind IN ('v', 'm') THEN pg_get_viewdef(c.oid, true) END "
        f"FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {where} "
        "AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname NOT LIKE 'pg_temp%' ORDER BY 2, 3",
        params,
    )
    if not relations:
        return {}
    oids = [r[0] for r in relations]
    columns: dict[int, list[dict[str, Any]]] = {}
    for oid, name, typ, notnull, comment in _rows(
        cur,
        "SELECT a.attrelid::bigint, a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull, "
        "col_description(a.attrelid, a.attnum) FROM pg_attribute a "
        "WHERE a.attrelid = ANY($1::bigint[]::oid[]) AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attrelid, a.attnum",
        (oids,),
    ):
        entry: dict[str, Any] = {"name": name, "type": typ, "nullable": not notnull}
        if comment:
            entry["comment"] = comment
        columns.setdefault(oid, []).append(entry)
    common: dict[tuple[str, str, str], list[str]] = {}
    with contextlib.suppress(Exception):
        for schema, table, column, values in _rows(
            cur,
            "SELECT schemaname::text, tablename::text, attname::text, most_common_vals::text FROM pg_stats "
            "WHERE most_common_vals IS NOT NULL AND n_distinct > 0 AND n_distinct <= 20",
        ):
            common[(schema, table, column)] = _pg_array(values)[:20]
    kinds = {"r": "table", "p": "table", "v": "view", "m": "materialized view", "f": "foreign table"}
    out: dict[str, Any] = {}
    for oid, schema, name, kind, estimate, comment, definition in relations:
        qualified = name if schema == "public" else f"{schema}.{name}"
        cols = columns.get(oid, [])
        for col in cols:
            values = common.get((schema, name, col["name"]))
            if values:
                col["values"] = values
        out[qualified] = {
            "kind": kinds.get(kind, kind),
            "rows": max(0, int(estimate or 0)),
            "rows_estimated": True,
            "comment": comment or "",
            "definition": definition or "",
            "columns": cols,
        }
    return out


def _pg_array(text: str) -> list[str]:
    """The elements of a PostgreSQL array literal ``{a,"b c"}`` as text."""
    import csv
    import io

    inner = text[1:-1] if text.startswith("{") and text.endswith("}") else text
    return [v for v in next(csv.reader(io.StringIO(inner), escapechar="\\"), [])]


def _sqlite_catalog(cur: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, name, sql in _rows(
        cur, "SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'"
    ):
        cols = [
            {"name": c[1], "type": c[2] or "", "nullable": not c[3]}
            for c in _rows(cur, f"SELECT * FROM pragma_table_info('{name.replace(chr(39), chr(39) * 2)}')")
        ]
        rows = 0
        if kind == "table":
            with contextlib.suppress(Exception):
                found = _rows(cur, "SELECT stat FROM sqlite_stat1 WHERE tbl = ? LIMIT 1", (name,))
                rows = int(str(found[0][0]).split()[0]) if found else 0
        out[name] = {
            "kind": kind,
            "rows": rows,
            "rows_estimated": True,
            "comment": "",
            "definition": sql if kind == "view" else "",
            "columns": cols,
        }
    return out


def _spark_catalog(cur: Any, schemas: list[str]) -> dict[str, Any]:
    """Spark's catalog through SHOW and DESCRIBE (what the read-only rule lets through; nothing is scanned, so
    no row counts): the namespaces asked for (else every one), their tables and views, columns and comments."""
    out: dict[str, Any] = {}
    namespaces = schemas or [str(r[0]) for r in _rows(cur, "SHOW NAMESPACES")]
    for namespace in namespaces:
        quoted = "`" + namespace.replace("`", "``") + "`"
        for row in _rows(cur, f"SHOW TABLES IN {quoted}"):
            name, temporary = str(row[1]), bool(row[2]) if len(row) > 2 else False
            if temporary:
                continue
            table = f"{quoted}.`{name.replace('`', '``')}`"
            columns, kind, comment, section = [], "table", "", "columns"
            for col_name, data_type, col_comment in _rows(cur, f"DESCRIBE TABLE EXTENDED {table}"):
                if not col_name or str(col_name).startswith("#"):  # the columns end; other sections follow
                    if section == "columns" or str(col_name).startswith("# "):
                        section = "detail" if str(col_name).startswith("# Detailed") else "other"
                    continue
                if section == "detail":
                    if col_name == "Type" and str(data_type).upper() == "VIEW":
                        kind = "view"
                    elif col_name == "Comment":
                        comment = str(data_type)
                    continue
                if section != "columns":
                    continue
                entry: dict[str, Any] = {"name": col_name, "type": data_type, "nullable": True}
                if col_comment:
                    entry["comment"] = col_comment
                columns.append(entry)
            qualified = name if namespace == "default" else f"{namespace}.{name}"
            out[qualified] = {
                "kind": kind,
                "rows": None,
                "rows_estimated": True,
                "comment": comment,
                "definition": "",
                "columns": columns,
            }
    return out


def _adbc_catalog(con: Any) -> dict[str, Any]:
    """Any ADBC driver: the driver's own catalog (tables and columns; no row counts)."""
    out: dict[str, Any] = {}
    objects = con.adbc_get_objects(depth="all").read_all().to_pylist()
    for catalog in objects:
        for schema in catalog.get("catalog_db_schemas") or []:
            for table in schema.get("db_schema_tables") or []:
                name = table["table_name"]
                if schema.get("db_schema_name"):
                    name = f"{schema['db_schema_name']}.{name}"
                out[name] = {
                    "kind": str(table.get("table_type") or "table").lower(),
                    "rows": 0,
                    "rows_estimated": True,
                    "comment": "",
                    "definition": "",
                    "columns": [
                        {"name": c["column_name"], "type": c.get("xdbc_type_name") or "", "nullable": True}
                        for c in table.get("table_columns") or []
                    ],
                }
    return out
