"""Issue 62, part 1: each person queries as their own database role (S-21, ``databases.<name>.role_from``).

Fast: the mapping (exact keys, patterns, list claims, the default, refusals naming the claim and the setting, a
claim's value never naming a role of its own), the settings (validated; a project file cannot set it), the frame a
call opens (``SET LOCAL ROLE`` quoted, only a vetted role, ``application_name`` safe and within 63 bytes).

Slow (the run's PostgreSQL — ``tests/pg_server.py``'s ``regional`` database, row-level security by region —, the
identity provider and a team server over streamable HTTP): alice and bob send the same query and get their own rows;
an unmapped user is refused; the statement cannot take the role back; grants differ per person; a function on the
role's own ``$user`` schema is judged on that role's search path; the DBA sees who in ``pg_stat_activity``. On the
operator's side (no token): the default role, or a refusal; a mapped role that can write, bypass row-level security,
does not exist or cannot be taken stops the database, naming it; the doctor lists the mapped roles.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Any

import pytest
from mcp import ClientSession

from ba_mcp import callers
from ba_mcp.databases.postgresql import ENGINE, application_name, identifier
from ba_mcp.databases.roles import claim_values, mapped_role, role_for
from ba_mcp.errors import ToolFailure
from ba_mcp.settings import ConfigError, RoleMappingSettings, load_settings
from tests import pg_server
from tests.conftest import free_port, http_serve, in_process, make_workspace, meta_of, text_of

MAPPING = RoleMappingSettings(
    claim="email",
    roles={"alice@example.com": "analyst_alice", "*@eu.example.com": "analyst_eu", "ops-*": "ops"},
)


def _user(**claims: Any) -> callers.Principal:
    return callers.from_claims("user-x", {"iss": "https://idp.example.com", **claims}, str(claims.get("sub", "u")))


# -- the mapping -------------------------------------------------------------------------------------------------


def test_a_claim_chooses_among_the_operators_roles_exact_keys_first_then_patterns() -> None:
    assert role_for("wh", MAPPING, _user(email="alice@example.com")) == "analyst_alice"
    assert role_for("wh", MAPPING, _user(email="bob@eu.example.com")) == "analyst_eu"
    # an exact key wins over a pattern that also matches, whatever the order written
    both = RoleMappingSettings(claim="email", roles={"*@example.com": "everyone", "alice@example.com": "alice_role"})
    assert role_for("wh", both, _user(email="alice@example.com")) == "alice_role"
    assert role_for("wh", both, _user(email="zoe@example.com")) == "everyone"
    # a pattern matches the whole value; `.` and other characters are literal
    for value in ("bob@eu.example.com.evil.net", "bob@euXexample.com", "x@EU.example.com"):
        with pytest.raises(ToolFailure) as refused:
            role_for("wh", MAPPING, _user(email=value))
        assert refused.value.code == "NO_DATABASE_ROLE", value


def test_a_list_claim_such_as_groups_maps_by_the_first_key_written_that_it_holds() -> None:
    groups = RoleMappingSettings(claim="groups", roles={"finance": "fin_reader", "sales": "sales_reader"})
    assert role_for("wh", groups, _user(groups=["sales", "finance"])) == "fin_reader"
    assert role_for("wh", groups, _user(groups=["sales", "other"])) == "sales_reader"
    assert claim_values({"n": 7, "b": True, "l": ["a", 3, None, {"x": 1}]}, "l") == ["a", "3"]
    assert claim_values({"b": True}, "b") == [] and claim_values({}, "missing") == []


def test_an_unmapped_person_is_refused_naming_the_claim_and_the_setting_unless_there_is_a_default() -> None:
    with pytest.raises(ToolFailure) as refused:
        role_for("warehouse", MAPPING, _user(email="mallory@example.org"))
    failure = refused.value
    assert failure.code == "NO_DATABASE_ROLE" and failure.type.value == "permission_denied"
    assert "mallory@example.org" in failure.message and "email" in failure.message
    assert "databases.warehouse.role_from.roles" in failure.hint
    with pytest.raises(ToolFailure) as refused:
        role_for("warehouse", MAPPING, _user(sub="no-email"))
    assert "carries no email claim" in refused.value.message
    defaulted = MAPPING.model_copy(update={"default": "guest"})
    assert role_for("warehouse", defaulted, _user(email="mallory@example.org")) == "guest"


def test_the_operator_without_a_token_gets_the_default_or_a_clear_refusal() -> None:
    operator = callers.operator()
    with pytest.raises(ToolFailure) as refused:
        role_for("warehouse", MAPPING, operator)
    assert refused.value.code == "NO_DATABASE_ROLE" and "no login" in refused.value.message
    assert "databases.warehouse.role_from.default" in refused.value.hint
    # the operator's claims are not consulted (it has none a provider vouched for), even if a key would match
    named = callers.Principal(
        "default", callers.LOCAL_ISSUER, "alice", "alice", MappingProxyType({"email": "alice@example.com"})
    )
    assert role_for("warehouse", MAPPING.model_copy(update={"default": "op"}), named) == "op"


def test_a_claims_value_never_names_a_role_of_its_own() -> None:
    """Only roles the operator wrote can come out: a claim that spells another role's name chooses nothing."""
    for value in ("ops", "analyst_eu", "postgres", '"; RESET ROLE; --', "*"):
        with pytest.raises(ToolFailure):
            role_for("wh", MAPPING, _user(email=value))
    assert mapped_role(MAPPING, ["ops-team"]) == "ops" and mapped_role(MAPPING, ["ops"]) is None
    assert set(MAPPING.all_roles()) == {"analyst_alice", "analyst_eu", "ops"}


# -- the settings ------------------------------------------------------------------------------------------------


def test_role_from_is_validated_and_read_from_the_environment() -> None:
    env = {
        "BA_MCP_DATABASES__WH__URL": "postgresql://r@db.example.com/x",
        "BA_MCP_DATABASES__WH__ROLE_FROM": json.dumps({"claim": "sub", "roles": {"alice": "a_role"}, "default": None}),
    }
    conf = load_settings(environ=env).databases["wh"].role_from
    assert conf is not None and conf.roles == {"alice": "a_role"} and conf.default is None
    bad = [
        ({"claim": "sub"}, "at least one"),
        ({"claim": "sub", "roles": {"a": "x" * 64}}, "63 bytes"),
        ({"claim": "sub", "default": ""}, "no database role name"),
        ({"claim": "", "default": "r"}, "claim"),
        ({"claim": "sub", "default": "r", "pattern": ".*"}, "unknown key"),
    ]
    for value, said in bad:
        with pytest.raises(ConfigError) as refused:
            load_settings(environ={**env, "BA_MCP_DATABASES__WH__ROLE_FROM": json.dumps(value)})
        assert "databases.wh.role_from" in str(refused.value) and said in str(refused.value), (value, refused.value)


def test_a_project_file_cannot_map_its_users_to_roles(tmp_path: Path) -> None:
    """S-17: role_from is the operator's (which roles a database's users take); an unapproved ba-mcp.yaml's is named
    and ignored."""
    project = tmp_path / "ba-mcp.yaml"
    project.write_text(
        "databases:\n  theirs:\n    url: postgresql://r@db.example.com/x\n"
        "    role_from: {claim: sub, default: postgres}\n"
    )
    settings = load_settings(project=project, environ={})
    assert settings.databases["theirs"].role_from is None
    assert settings.project_file is not None
    assert any("databases.theirs.role_from" in item for item in settings.project_file.ignored)


# -- the frame of a call -----------------------------------------------------------------------------------------


class _Held:
    """What PostgresEngine.begin writes to: the frame's SQL, recorded."""

    def __init__(self, identity: dict[str, Any], vetted: list[str]) -> None:
        self.identity = identity
        self.extra: dict[str, Any] = {"roles": vetted}
        self.label = ""
        self.in_transaction = False
        self.sent: list[str] = []

    def frame_sql(self, sql: str) -> None:
        self.sent.append(sql)


def test_the_frame_takes_a_vetted_role_quoted_and_names_the_caller_safely() -> None:
    held = _Held({"user": "Zoë O'Brien'; DROP TABLE x; --", "role": 'odd "role"'}, ['odd "role"'])
    ENGINE.begin(held, 5.0, "a1b2c3d4")  # type: ignore[arg-type]
    (sql,) = held.sent
    assert sql.startswith("BEGIN READ ONLY; SET LOCAL statement_timeout = 5000; ")
    assert 'SET LOCAL ROLE "odd ""role"""; SELECT 1' in sql
    name = re.search(r"application_name = '([^']*)';", sql)
    assert name and name.group(1) == "ba-mcp Zo? O?Brien?? DROP TABLE x? -- a1b2c3d4", sql
    # a role the connection did not vet is never set, whatever the server sends
    held = _Held({"user": "bob", "role": "postgres"}, ["analyst_eu"])
    with pytest.raises(Exception, match="not vetted") as refused:
        ENGINE.begin(held, 5.0, "a1b2c3d4")  # type: ignore[arg-type]
    assert getattr(refused.value, "fields", {}).get("code") == "ROLE_NOT_VETTED" and held.sent == []
    # no mapping: the connecting role, no SET ROLE
    held = _Held({"user": "root"}, [])
    ENGINE.begin(held, 0, "a1b2c3d4")  # type: ignore[arg-type]
    assert "ROLE" not in held.sent[0] and "application_name = 'ba-mcp root a1b2c3d4'" in held.sent[0]


def test_application_name_keeps_the_session_digest_within_postgresqls_63_bytes() -> None:
    long = application_name("a.very.long.display.name.of.somebody@a-subsidiary.example.com", "a1b2c3d4")
    assert len(long.encode()) <= 63 and long.endswith(" a1b2c3d4") and long.startswith("ba-mcp a.very.long")
    assert application_name("", "a1b2c3d4") == "ba-mcp a1b2c3d4"
    assert application_name("名前", "") == "ba-mcp ??"
    assert identifier("Analyst") == '"Analyst"' and identifier('a"b') == '"a""b"'


def test_a_database_whose_engine_takes_no_roles_serves_nobody_with_role_from(tmp_path: Path) -> None:
    """A DuckDB file cannot run a call as another role: with role_from it refuses every call rather than serve
    everyone alike."""
    from ba_mcp.databases.configured import Databases

    env = {
        "BA_MCP_DATABASES__FILED__PATH": "data/nothing.duckdb",
        "BA_MCP_DATABASES__FILED__ROLE_FROM": json.dumps({"claim": "sub", "default": "r"}),
    }
    settings = load_settings(workspace=tmp_path, environ=env)
    databases = Databases(settings, None, SimpleNamespace(), None)  # type: ignore[arg-type]  # get() needs neither
    with pytest.raises(ToolFailure) as refused:
        databases.get("filed")
    assert refused.value.code == "DATABASE_UNAVAILABLE" and "databases.filed.role_from" in refused.value.message
    assert "cannot run a call as another database role" in refused.value.message


# -- a real PostgreSQL with row-level security -------------------------------------------------------------------

REGIONAL = "SELECT current_user AS role, region, count(*) AS n, sum(amount) AS total FROM sales GROUP BY 1, 2"


@dataclass
class Team:
    issuer: str
    url: str
    pg: pg_server.Postgres

    def token(self, user: str) -> str:
        from tests.idp_server import token

        return token(self.issuer, user, self.url)


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    from tests.idp_server import identity_provider

    if not pg_server.available():
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) are not installed")
    base = tmp_path_factory.mktemp("roles")
    pg = pg_server.running()
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with identity_provider(base / "key.json") as issuer:
        env = {
            "BA_MCP_HTTP__AUTH__ISSUER": issuer,
            "BA_MCP_HTTP__AUTH__AUDIENCE": url,
            "BA_MCP_HTTP__AUTH__REQUIRED_SCOPES": '["ba-mcp"]',
            "BA_MCP_HTTP__AUTH__INTROSPECTION_CLIENT_ID": "ba-mcp-server",
            "BA_MCP_HTTP__AUTH__INTROSPECTION_CLIENT_SECRET": "ba-mcp-server-secret",
            "BA_MCP_DATABASES__REGIONAL__URL": pg.url("rls_reader", "regional"),
            # alice by name, bob by a pattern; the provider's client "opaque" is nobody's
            "BA_MCP_DATABASES__REGIONAL__ROLE_FROM": json.dumps(
                {"claim": "sub", "roles": {"alice": "rls_eu", "b*": "rls_us"}}
            ),
            "BA_MCP_TOOLS__QUERY_DATABASE__TIMEOUT_S": "60",
        }
        with http_serve(make_workspace(base), port=port, **env) as served:
            assert served == url
            yield Team(issuer, url, pg)


async def _ask(session: ClientSession, query: str, database: str = "regional") -> tuple[bool, str, dict[str, Any]]:
    result = await session.call_tool("query_database", {"database": database, "query": query})
    return bool(result.is_error), text_of(result), meta_of(result)


def _expected(pg: pg_server.Postgres, region: str) -> tuple[int, int]:
    """What the region's rows are, as the table's owner counts them (row-level security does not bind the owner)."""
    n, total = pg.sql(f"SELECT count(*), sum(amount) FROM sales WHERE region = '{region}'", database="regional")[0]
    return int(n), int(total)


@pytest.mark.slow
@pytest.mark.anyio
async def test_alice_and_bob_send_the_same_query_and_each_gets_their_own_rows(team: Team) -> None:
    from tests.test_team_server import session_as

    seen: dict[str, str] = {}
    for user, role, region in (("alice", "rls_eu", "eu"), ("bob", "rls_us", "us")):
        async with session_as(team.token(user), team.url) as session:
            failed, said, meta = await _ask(session, REGIONAL)
            assert not failed, said
            n, total = _expected(team.pg, region)
            assert re.search(rf"\b{role}\b.*\b{region}\b.*\b{n}\b.*\b{total}\b", said), said
            other = "us" if region == "eu" else "eu"
            assert not re.search(rf"\b{other}\b", said) and str(_expected(team.pg, other)[1]) not in said, said
            # the call's provenance says which database and role it ran as (for the audit trail)
            assert meta["provenance"]["database"] == "regional" and meta["provenance"]["role"] == role, meta
            failed, said, _ = await _ask(session, "SELECT current_setting('application_name') AS app, current_user")
            assert not failed, said
            found = re.search(r"ba-mcp (\S+) ([0-9a-f]{8})", said)
            assert found and found.group(1) == user, said
            seen[user] = found.group(2)
    assert seen["alice"] != seen["bob"]  # each user's own session digest


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_dba_sees_who_runs_a_statement_in_pg_stat_activity(team: Team) -> None:
    from tests.test_team_server import session_as

    async with session_as(team.token("alice"), team.url) as alice:
        running = asyncio.ensure_future(_ask(alice, "SELECT pg_sleep(2) AS slept, 'alice at work' AS what"))
        found: list[Any] = []
        deadline = time.monotonic() + 20
        while not found and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            found = team.pg.sql(
                "SELECT usename::text, application_name FROM pg_stat_activity WHERE query LIKE '%alice at work%' "
                "AND pid <> pg_backend_pid()"
            )
        failed, said, _ = await running
    assert not failed, said
    assert found, "the statement never showed in pg_stat_activity"
    (login, app), *_ = found
    assert login == "rls_reader" and re.fullmatch(r"ba-mcp alice [0-9a-f]{8}", app), found


@pytest.mark.slow
@pytest.mark.anyio
async def test_an_unmapped_user_is_refused_and_reads_no_schema(team: Team) -> None:
    from tests.test_team_server import session_as

    async with session_as(team.token("opaque"), team.url) as nobody:
        failed, said, _ = await _ask(nobody, REGIONAL)
        assert failed and "NO_DATABASE_ROLE" in said and "sub claim is 'opaque'" in said, said
        assert "databases.regional.role_from.roles" in said and "rls_" not in said, said
        with pytest.raises(Exception) as refused:
            await nobody.read_resource("db://regional/schema")  # type: ignore[arg-type]
        assert "NO_DATABASE_ROLE" in str(refused.value) or "none is mapped" in str(refused.value), refused.value
    async with session_as(team.token("alice"), team.url) as alice:
        schema = await alice.read_resource("db://regional/schema")  # type: ignore[arg-type]
        assert "sales" in json.dumps(schema.model_dump(mode="json")), schema


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_statement_cannot_take_another_role_and_grants_differ_per_person(team: Team) -> None:
    from tests.test_team_server import session_as

    async with session_as(team.token("bob"), team.url) as bob:
        for attack in (
            "RESET ROLE",
            "SET ROLE rls_eu",
            "SET ROLE NONE",
            "SET LOCAL ROLE rls_bypass",
            "SET SESSION AUTHORIZATION DEFAULT",
            "SELECT set_config('role', 'rls_eu', true)",
            "SELECT 1; SET ROLE rls_eu",
            "SELECT * FROM sales; RESET ROLE",
            "EXPLAIN ANALYZE SELECT set_config('role', 'rls_bypass', false)",
        ):
            failed, said, _ = await _ask(bob, attack)
            assert failed, (attack, said)
        failed, said, _ = await _ask(bob, REGIONAL)  # still himself, on the same pooled connections
        assert not failed and "rls_us" in said and not re.search(r"\beu\b", said), said
        # the database's own grants decide: bob's role may not read the rep column; alice's may
        failed, said, _ = await _ask(bob, "SELECT rep FROM sales")
        assert failed and "ACCESS_DENIED" in said and "permission denied" in said, said
    async with session_as(team.token("alice"), team.url) as alice:
        failed, said, _ = await _ask(alice, "SELECT rep FROM sales ORDER BY id LIMIT 1")
        assert not failed and "rep 1" in said, said
        # rls_eu's own schema is on its search path ($user): its function is judged there, off the allow-list
        for call in ("SELECT peek()", "SELECT rls_eu.peek()"):
            failed, said, _ = await _ask(alice, call)
            assert failed and "FUNCTION_NOT_ALLOWED" in said and "peek" in said, (call, said)
    assert team.pg.sql("SELECT count(*) FROM sales", database="regional")[0][0] == 30


# -- the operator's side: no token -------------------------------------------------------------------------------


def _operator_env(pg: pg_server.Postgres, **role_from: dict[str, Any]) -> dict[str, str]:
    env = {"BA_MCP_TOOLS__QUERY_DATABASE__TIMEOUT_S": "60"}
    for name, mapping in role_from.items():
        env[f"BA_MCP_DATABASES__{name.upper()}__URL"] = pg.url("rls_reader", "regional")
        env[f"BA_MCP_DATABASES__{name.upper()}__ROLE_FROM"] = json.dumps(mapping)
    return env


OPERATOR_DATABASES: dict[str, dict[str, Any]] = {
    "ops": {"claim": "sub", "roles": {"alice": "rls_eu"}, "default": "rls_us"},
    "nodefault": {"claim": "sub", "roles": {"alice": "rls_eu"}},
    "writable": {"claim": "sub", "roles": {"alice": "rls_eu"}, "default": "rls_writer"},
    "bypass": {"claim": "sub", "default": "rls_bypass"},
    "stranger": {"claim": "sub", "default": "rls_stranger"},
    "missing": {"claim": "sub", "default": "rls_nobody"},
}


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_operator_runs_as_the_default_role_and_bad_mapped_roles_stop_the_database(tmp_path: Path) -> None:
    if not pg_server.available():
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) are not installed")
    pg = pg_server.running()
    ws = make_workspace(tmp_path)
    async with in_process(ws, ["query_database"], **_operator_env(pg, **OPERATOR_DATABASES)) as client:

        async def ask(database: str, query: str = REGIONAL) -> tuple[bool, str]:
            result = await client.call_tool("query_database", {"database": database, "query": query})
            return bool(result.is_error), text_of(result)

        failed, said = await ask("ops")
        assert not failed and "rls_us" in said and not re.search(r"\beu\b", said), said
        assert str(_expected(pg, "us")[1]) in said, said
        failed, said = await ask("nodefault")
        assert failed and "NO_DATABASE_ROLE" in said and "role_from.default" in said, said
        refusals = {
            "writable": ("WRITABLE_ROLE", "rls_writer, which role_from maps users to", "write to tables"),
            "bypass": ("WRITABLE_ROLE", "rls_bypass", "bypass row-level security"),
            "stranger": ("ROLE_NOT_GRANTED", "rls_stranger", 'GRANT "rls_stranger" TO "rls_reader"'),
            "missing": ("UNKNOWN_ROLE", "rls_nobody", "does not exist"),
        }
        for database, words in refusals.items():
            failed, said = await ask(database, "SELECT 1 AS one")
            assert failed and all(w in said for w in words), (database, said)
            assert pg_server.PASSWORDS["rls_reader"] not in said
    from ba_mcp.doctor import _check_databases

    settings = load_settings(workspace=ws, environ=_operator_env(pg, ops=OPERATOR_DATABASES["ops"]))
    (check,) = [c for c in _check_databases(settings, ws, ws / "sessions", False) if c.name == "database ops"]
    assert check.ok and "role rls_reader" in check.detail and "mapped roles rls_eu, rls_us" in check.detail, check
