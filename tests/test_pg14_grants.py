"""Issue 63, item 1: the first connection works on a database someone else made.

On the run's real PostgreSQL (tests/pg_server.py), database ``legacy`` is given PostgreSQL 14's default grants —
PUBLIC may create in ``public`` (``GRANT CREATE ON SCHEMA public TO PUBLIC``), nothing revoked, as on a database made
on 14 or older, upgraded from it, or restored from such a dump (Pagila's runs ``GRANT ALL ON SCHEMA public TO
PUBLIC``). The read-only recipe of docs/databases.md (``CREATE ROLE ba_reader …; GRANT pg_read_all_data TO
ba_reader``) connects and is served — PostgreSQL itself keeps its READ ONLY transaction from creating anything —
and ``ba-mcp doctor`` (and the server's stderr, once) prints the exact ``REVOKE CREATE ON SCHEMA public FROM
PUBLIC;``. A role that can change data is still refused, naming what it found and the SQL that removes it: each
refusal's SQL is run as the administrator would run it, and the role is then served. The same holds for the roles
``role_from`` maps users to.

Slow: the run's PostgreSQL.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ba_mcp.databases.postgresql import role
from ba_mcp.settings import load_settings
from ba_mcp.workers.wire import Failure
from tests import pg_server
from tests.conftest import in_process, make_workspace, text_of

pytestmark = [pytest.mark.slow]

DB = "legacy"
PASSWORD = "legacy-Secret-63"
REVOKE_PUBLIC = "REVOKE CREATE ON SCHEMA public FROM PUBLIC;"
# each role that can change data, as a company's database has them: what the refusal names
WRITERS: dict[str, tuple[list[str], str]] = {
    "ba_inserter": (["GRANT INSERT ON public.orders TO ba_inserter"], "INSERT on public.orders"),
    "ba_updater": (["GRANT UPDATE (amount) ON public.orders TO ba_updater"], "UPDATE on public.orders"),
    "ba_sequencer": (["GRANT UPDATE ON SEQUENCE public.order_ids TO ba_sequencer"], "UPDATE on public.order_ids"),
    "ba_creator": (["GRANT CREATE ON SCHEMA sales TO ba_creator"], "create objects in schema sales"),
    "ba_schemer": (["GRANT CREATE ON DATABASE legacy TO ba_schemer"], "create schemas in database legacy"),
    "ba_writes_all": (["GRANT pg_write_all_data TO ba_writes_all"], "pg_write_all_data"),
    "ba_bypasser": (["ALTER ROLE ba_bypasser BYPASSRLS"], "BYPASSRLS"),
    "ba_rolemaker": (["ALTER ROLE ba_rolemaker CREATEROLE"], "CREATEROLE"),
}


@pytest.fixture(scope="module")
def pg() -> Iterator[pg_server.Postgres]:
    if not pg_server.available():
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) are not installed")
    server = pg_server.running()
    roles = ["ba_reader", "ba_gate", *WRITERS]
    server.sql(
        *[f"CREATE ROLE {r} LOGIN PASSWORD '{PASSWORD}'" for r in roles],
        "ALTER ROLE ba_gate NOINHERIT",  # it takes its mapped roles, inherits none of them (as tests/pg_server.py's)
        "CREATE ROLE legacy_eu NOLOGIN",
        "CREATE ROLE legacy_clerk NOLOGIN",
        "GRANT legacy_eu, legacy_clerk TO ba_gate",
        f"CREATE DATABASE {DB}",
        database="postgres",
    )
    server.sql(
        "GRANT CREATE ON SCHEMA public TO PUBLIC",  # PostgreSQL 14's default, nothing revoked
        "CREATE SCHEMA sales",
        "GRANT USAGE ON SCHEMA sales TO PUBLIC",
        "CREATE TABLE public.orders (id int PRIMARY KEY, amount numeric(10,2))",
        "INSERT INTO public.orders SELECT i, i * 1.5 FROM generate_series(1, 20) i",
        "CREATE SEQUENCE public.order_ids",
        "CREATE TABLE sales.regions (name text)",
        "INSERT INTO sales.regions VALUES ('north'), ('south')",
        # the docs' recipe, exactly; every other role reads the same way, then holds one power more
        *[f"GRANT pg_read_all_data TO {r}" for r in ["ba_reader", "legacy_eu", "legacy_clerk", *WRITERS]],
        *[grant for grants, _ in WRITERS.values() for grant in grants],
        "GRANT INSERT ON public.orders TO legacy_clerk",
        database=DB,
    )
    yield server


def _role_of(pg: pg_server.Postgres, user: str) -> dict[str, Any]:
    """What the connect's checks say of ``user`` on the legacy database (the engine's own ``role``)."""
    import adbc_driver_postgresql.dbapi as adbc

    with adbc.connect(pg.url(user, DB, PASSWORD), autocommit=True) as con, con.cursor() as cur:
        return role(cur, False, False)


def test_the_docs_recipe_is_served_on_a_database_with_postgresql_14s_grants(pg: pg_server.Postgres) -> None:
    found = _role_of(pg, "ba_reader")
    assert not found["role_can_write"] and not found["privileges"], found
    (warning,) = found["warnings"]
    assert REVOKE_PUBLIC in warning and "PostgreSQL 14" in warning, warning
    # PUBLIC's CREATE is real: the role could create outside a read-only transaction …
    import adbc_driver_postgresql.dbapi as adbc

    with adbc.connect(pg.url("ba_reader", DB, PASSWORD), autocommit=True) as con, con.cursor() as cur:
        cur.execute("SELECT has_schema_privilege('public', 'CREATE')")
        assert cur.fetchone()[0] is True


@pytest.mark.parametrize("user", sorted(WRITERS))
def test_a_role_that_can_change_data_is_refused_naming_it_and_the_sql_that_removes_it(
    pg: pg_server.Postgres, user: str
) -> None:
    with pytest.raises(Failure) as refused:
        _role_of(pg, user)
    failure = refused.value.fields
    said = f"{failure['message']} {failure['hint']}"
    assert failure["code"] == "WRITABLE_ROLE" and WRITERS[user][1] in failure["message"], said
    fix = re.search(r"run as an administrator: (.*?) — or connect", failure["hint"])
    assert fix is not None, said
    sql = fix.group(1)
    assert "PUBLIC" not in sql, sql  # PUBLIC's CREATE is no refusal: only the warning names it
    print(f"{user}: {failure['message']}\n    fix: {sql}")  # for the note
    # the SQL removes it: run as the administrator would, the role is served (with PUBLIC's warning only)
    pg.sql(*[s.strip() for s in sql.split(";") if s.strip()], database=DB)
    found = _role_of(pg, user)
    assert not found["role_can_write"] and REVOKE_PUBLIC in found["warnings"][0], found


def test_a_privileged_role_is_refused_naming_the_sql_that_removes_it(pg: pg_server.Postgres) -> None:
    import adbc_driver_postgresql.dbapi as adbc

    con = adbc.connect(pg.url("filereader"), autocommit=True)  # tests/pg_server.py's member of pg_read_server_files
    with con, con.cursor() as cur, pytest.raises(Failure) as refused:
        role(cur, False, False)
    failure = refused.value.fields
    assert failure["code"] == "PRIVILEGED_ROLE" and "pg_read_server_files" in failure["message"], failure
    assert 'run as an administrator: REVOKE pg_read_server_files FROM "filereader";' in failure["hint"], failure


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("pg14"))


def _env(pg: pg_server.Postgres) -> dict[str, str]:
    return {
        "BA_MCP_TOOLS__QUERY_DATABASE__TIMEOUT_S": "60",
        "BA_MCP_DATABASES__LEGACY__URL": pg.url("ba_reader", DB, PASSWORD),
        "BA_MCP_DATABASES__GATED__URL": pg.url("ba_gate", DB, PASSWORD),
        "BA_MCP_DATABASES__GATED__ROLE_FROM": '{"claim": "sub", "default": "legacy_eu"}',
        "BA_MCP_DATABASES__CLERKS__URL": pg.url("ba_gate", DB, PASSWORD),
        "BA_MCP_DATABASES__CLERKS__ROLE_FROM": '{"claim": "sub", "default": "legacy_clerk"}',
    }


@pytest.mark.anyio
async def test_the_server_serves_it_warns_once_on_stderr_and_creates_nothing(
    pg: pg_server.Postgres, ws: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="ba_mcp.workers.connections")
    async with in_process(ws, ["query_database"], **_env(pg)) as client:

        async def ask(database: str, query: str) -> tuple[bool, str]:
            result = await client.call_tool("query_database", {"database": database, "query": query})
            return bool(result.is_error), text_of(result)

        for _ in range(3):
            failed, said = await ask("legacy", "SELECT count(*) AS orders, sum(amount) AS total FROM orders")
            assert not failed and "20" in said and "315" in said, said
        failed, said = await ask("legacy", "CREATE TABLE public.planted (i int)")
        assert failed, said
        failed, said = await ask("legacy", "SELECT * FROM sales.regions ORDER BY 1")
        assert not failed and "north" in said and "south" in said, said
        # role_from: the mapped role is held to the same checks — PUBLIC's CREATE served, an INSERT grant refused
        failed, said = await ask("gated", "SELECT count(*) AS n FROM orders")
        assert not failed and "20" in said, said
        failed, said = await ask("clerks", "SELECT 1 AS one")
        assert failed and "WRITABLE_ROLE" in said and "legacy_clerk, which role_from maps users to" in said, said
        assert "INSERT on public.orders" in said and "REVOKE INSERT ON public.orders FROM legacy_clerk;" in said, said
        assert PASSWORD not in said
    assert pg.sql("SELECT to_regclass('public.planted') IS NULL", database=DB) == [(True,)]
    warned = [r.getMessage() for r in caplog.records if REVOKE_PUBLIC in r.getMessage()]
    assert len([w for w in warned if w.startswith("database legacy:")]) == 1, warned  # once, however many calls
    assert all(PASSWORD not in w for w in warned)


def test_doctor_prints_the_revoke_and_passes_the_database(pg: pg_server.Postgres, ws: Path) -> None:
    from ba_mcp.doctor import _check_databases

    settings = load_settings(workspace=ws, environ=_env(pg))
    checks = {c.name: c for c in _check_databases(settings, ws, ws / "sessions", False)}
    legacy, gated, clerks = checks["database legacy"], checks["database gated"], checks["database clerks"]
    print(f"doctor: {legacy.detail}")  # for the note
    assert legacy.ok and "role ba_reader" in legacy.detail and "warning: " in legacy.detail, legacy
    assert REVOKE_PUBLIC in legacy.detail and "can write" not in legacy.detail, legacy
    assert gated.ok and REVOKE_PUBLIC in gated.detail, gated
    assert not clerks.ok and "REVOKE INSERT ON public.orders FROM legacy_clerk;" in clerks.detail, clerks
    assert all(PASSWORD not in c.detail for c in checks.values())
