"""A real PostgreSQL for the tests: ``initdb`` into a temporary folder and ``pg_ctl start`` on 127.0.0.1 with a free
port (as the ``postgres`` OS user when the tests run as root), with the roles and data the tests need.

Roles: ``postgres`` (superuser), ``owner`` (owns the tables: it CAN write), ``analyst`` (``pg_read_all_data``
only), ``filereader`` (a member of ``pg_read_server_files``), ``rls_reader`` and the roles it may take
(``_regional``: database ``regional``, row-level security). Database ``shop``: ``customers``, ``orders`` (with a
NUMERIC(12,2) amount), ``big`` (3,000,000 rows, made on request), a view, comments, a sequence, statistics;
database ``linked``: dblink installed, a ``ledger`` table. One server per run (``service``, started in the
background by tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests import background

PASSWORDS = {
    "postgres": "super-Secret-1",
    "owner": "owner-Secret-2",
    "analyst": "analyst-Secret-3",
    "filereader": "fr-S4",
    "rls_reader": "rls-Secret-5",
}


def available() -> bool:
    return shutil.which("initdb") is not None and shutil.which("pg_ctl") is not None


@dataclass
class Postgres:
    port: int
    folder: str

    def url(self, role: str = "analyst", database: str = "shop", password: str | None = None) -> str:
        secret = PASSWORDS[role] if password is None else password
        return f"postgresql://{role}:{secret}@127.0.0.1:{self.port}/{database}"

    def connect(self, role: str = "postgres", database: str = "shop") -> Any:
        import adbc_driver_postgresql.dbapi as pg

        return pg.connect(self.url(role, database), autocommit=True)

    def sql(self, *statements: str, role: str = "postgres", database: str = "shop") -> list[Any]:
        """Run statements as ``role``; the rows of the last one."""
        with self.connect(role, database) as con, con.cursor() as cur:
            rows: list[Any] = []
            for statement in statements:
                cur.execute(statement)
                rows = cur.fetchall() if cur.description else []
            return rows


def _as_postgres(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


@contextlib.contextmanager
def postgres() -> Iterator[Postgres]:
    folder = tempfile.mkdtemp(prefix="ba-mcp-pg-")
    background.owned(Path(folder))  # a killed run's server is ended by the next run (end_leftovers)
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(folder, user.pw_uid, user.pw_gid)
    secret = os.path.join(folder, "pw")
    with open(secret, "w") as f:
        f.write(PASSWORDS["postgres"] + "\n")
    if os.geteuid() == 0:
        os.chown(secret, user.pw_uid, user.pw_gid)
    data = os.path.join(folder, "data")
    init = ["initdb", "-D", data, "-U", "postgres", "--auth=scram-sha-256", "--pwfile", secret, "-E", "UTF8"]
    subprocess.run(_as_postgres([*init, "--no-sync"]), check=True, capture_output=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60"
    start = ["pg_ctl", "-D", data, "-w", "-l", os.path.join(folder, "log"), "-o", options, "start"]
    subprocess.run(_as_postgres(start), check=True, capture_output=True)
    server = Postgres(port, folder)
    try:
        _populate(server)
        yield server
    finally:
        subprocess.run(_as_postgres(["pg_ctl", "-D", data, "-m", "immediate", "stop"]), capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def end_leftovers() -> list[Path]:
    """The servers of runs that were killed (their owner is gone): stopped, their folders removed."""

    def stop(folder: Path) -> None:
        if (folder / "data" / "postmaster.pid").exists():
            stop = ["pg_ctl", "-D", str(folder / "data"), "-m", "immediate", "stop"]
            subprocess.run(_as_postgres(stop), capture_output=True, timeout=60)

    return background.end_leftovers("ba-mcp-pg-*", stop)


def running() -> Postgres:
    """The run's PostgreSQL, started in the background when the run began (tests/background.py); a test fails,
    saying why, when it did not start."""
    import pytest

    from tests import background

    state = background.wait("postgres")
    if "error" in state:
        pytest.fail(f"the run's PostgreSQL did not start: {state['error']}")
    return Postgres(int(state["port"]), str(state["folder"]))


@contextlib.contextmanager
def service(folder: Path) -> Iterator[dict[str, Any]]:
    """The run's PostgreSQL (tests/background.py): its port and folder."""
    del folder
    with postgres() as server:
        yield {"port": server.port, "folder": server.folder}


def _populate(pg: Postgres) -> None:
    p = PASSWORDS
    pg.sql(
        f"CREATE ROLE owner LOGIN PASSWORD '{p['owner']}'",
        f"CREATE ROLE analyst LOGIN PASSWORD '{p['analyst']}'",
        f"CREATE ROLE filereader LOGIN PASSWORD '{p['filereader']}'",
        "GRANT pg_read_all_data TO analyst",
        "GRANT pg_read_server_files TO filereader",
        "CREATE DATABASE shop OWNER owner",
        database="postgres",
    )
    pg.sql(
        "CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, segment text)",
        "COMMENT ON TABLE customers IS 'Who buys'",
        "COMMENT ON COLUMN customers.segment IS 'consumer or business'",
        "INSERT INTO customers SELECT i, 'customer ' || i, CASE WHEN i % 3 = 0 THEN 'business' ELSE 'consumer' END "
        "FROM generate_series(1, 30) i",
        "CREATE TABLE orders (id int PRIMARY KEY, customer_id int REFERENCES customers, amount numeric(12,2), "
        "ordered_at date, status text)",
        "INSERT INTO orders SELECT i, 1 + i % 30, round((i * 7.31) % 500, 2), date '2025-01-01' + (i % 365), "
        "CASE WHEN i % 10 = 0 THEN 'returned' ELSE 'completed' END FROM generate_series(1, 1000) i",
        "CREATE VIEW revenue_by_segment AS SELECT c.segment, sum(o.amount) AS revenue FROM orders o "
        "JOIN customers c ON c.id = o.customer_id GROUP BY 1",
        "CREATE SEQUENCE ticket",
        "CREATE TABLE audit (note text)",
        "CREATE FUNCTION scribble() RETURNS int VOLATILE LANGUAGE sql AS $$ INSERT INTO audit VALUES ('x'); "
        "SELECT 1 $$",
        "CREATE PROCEDURE wipe() LANGUAGE sql AS $$ DELETE FROM orders $$",
        "ANALYZE",
        role="owner",
    )
    _regional(pg)
    # a database with dblink installed (its functions are PUBLIC's to execute): S-14's attack
    pg.sql("CREATE DATABASE linked OWNER owner", database="postgres")
    pg.sql("CREATE EXTENSION dblink", database="linked")
    pg.sql("CREATE TABLE ledger (note text)", role="owner", database="linked")


def _regional(pg: Postgres) -> None:
    """Each person as their own role (S-21, tests/test_databases_roles.py): database ``regional``, reached as
    ``rls_reader`` (it inherits nothing: NOINHERIT), which may take ``rls_eu``, ``rls_us`` (no grant on ``sales.rep``),
    ``rls_writer`` (can INSERT) and ``rls_bypass`` (BYPASSRLS) — not ``rls_stranger``. Row-level security gives each
    region's role its own rows of ``sales``; schema ``rls_eu`` (on that role's ``$user`` search path) holds a function
    off the allow-list."""
    pg.sql(
        f"CREATE ROLE rls_reader LOGIN NOINHERIT PASSWORD '{PASSWORDS['rls_reader']}'",
        "CREATE ROLE rls_eu NOLOGIN",
        "CREATE ROLE rls_us NOLOGIN",
        "CREATE ROLE rls_writer NOLOGIN",
        "CREATE ROLE rls_bypass NOLOGIN BYPASSRLS",
        "CREATE ROLE rls_stranger NOLOGIN",
        "GRANT rls_eu, rls_us, rls_writer, rls_bypass TO rls_reader",
        "CREATE DATABASE regional OWNER owner",
        database="postgres",
    )
    pg.sql(
        "CREATE TABLE sales (id int PRIMARY KEY, region text NOT NULL, amount int NOT NULL, rep text)",
        "INSERT INTO sales SELECT i, CASE WHEN i % 3 = 0 THEN 'us' ELSE 'eu' END, i * 10, 'rep ' || i "
        "FROM generate_series(1, 30) i",
        "ALTER TABLE sales ENABLE ROW LEVEL SECURITY",
        "CREATE POLICY own_region ON sales USING (region = split_part(current_user, '_', 2))",
        "GRANT SELECT ON sales TO rls_eu, rls_writer, rls_bypass",
        "GRANT SELECT (id, region, amount) ON sales TO rls_us",
        "GRANT INSERT ON sales TO rls_writer",
        "CREATE SCHEMA rls_eu",
        "GRANT USAGE ON SCHEMA rls_eu TO rls_eu",
        "CREATE FUNCTION rls_eu.peek() RETURNS text STABLE LANGUAGE sql AS $$ SELECT 'peeked' $$",
        "ANALYZE",
        role="owner",
        database="regional",
    )


def make_big(pg: Postgres, rows: int = 3_000_000) -> None:
    """A table of ``rows`` rows (id, a number, a label), made once."""
    pg.sql(
        "CREATE TABLE IF NOT EXISTS big AS SELECT i AS id, (i % 1000) * 1.5 AS value, 'label ' || (i % 97) AS label "
        f"FROM generate_series(1, {rows}) i",
        "ANALYZE big",
        role="owner",
    )


def fingerprint(pg: Postgres) -> list[Any]:
    """What a hostile statement could change: every table's content digest, the sequence, roles' settings."""
    return pg.sql(
        "SELECT (SELECT md5(string_agg(o::text, ',' ORDER BY id)) FROM orders o), "
        "(SELECT md5(string_agg(c::text, ',' ORDER BY id)) FROM customers c), "
        "(SELECT count(*) FROM audit), (SELECT last_value FROM ticket), "
        "(SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace), "
        "(SELECT string_agg(rolname || rolsuper::text, ',' ORDER BY rolname) FROM pg_roles WHERE rolname !~ '^pg_'), "
        "(SELECT coalesce(string_agg(setconfig::text, ','), '') FROM pg_db_role_setting)"
    )
