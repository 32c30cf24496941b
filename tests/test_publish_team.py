"""Issue 62, part 3, end to end: a team server over streamable HTTP (``http.auth``, a real identity provider:
tests/idp_server.py), the run's PostgreSQL with row-level security (tests/pg_server.py's ``regional`` database, each
user mapped to a role by ``databases.regional.role_from``).

Alice saves an analysis (a query, then Python on its result) and publishes it; bob finds it in the catalog as
alice's, reads it (``analysis://<handle>/<name>``, completion) and re-runs it **as bob**: its query runs as his role
(his rows only, ``application_name`` his), its Python in his sandbox (its export lands in his folder), what it
makes is his. He cannot change it: its qualified name is no name of his, and saving his own analysis of that name
leaves hers as it was. Once alice unpublishes it, bob learns of it exactly what he learnt before it was published —
by name, by resource, by listing, by completion. Fast, in-process pieces: tests/test_publish.py."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.types import ResourceTemplateReference

from ba_mcp.auth import principal_key
from ba_mcp.workspace import home_name
from tests import pg_server
from tests.conftest import free_port, http_serve, make_workspace, meta_of, text_of
from tests.idp_server import identity_provider, token
from tests.test_team_server import session_as

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

SALES = (
    "SELECT region, count(*) AS n, sum(amount) AS total, current_user AS role, "
    "current_setting('application_name') AS app FROM sales GROUP BY region ORDER BY region"
)
PYTHON = "t = load_artifact('{aid}')\nexport(t, 'regional.csv', overwrite=True)\nt[['region', 'total']]"


@dataclass
class Team:
    issuer: str
    url: str
    workspace: Path
    pg: pg_server.Postgres

    def token(self, user: str) -> str:
        return token(self.issuer, user, self.url)

    def home(self, user: str) -> Path:
        return self.workspace / "users" / home_name(principal_key(self.issuer, user))


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    if not pg_server.available():
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) are not installed")
    base = tmp_path_factory.mktemp("publish")
    pg = pg_server.running()
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    ws = make_workspace(base)
    with identity_provider(base / "key.json") as issuer:
        env = {
            "BA_MCP_HTTP__AUTH__ISSUER": issuer,
            "BA_MCP_HTTP__AUTH__AUDIENCE": url,
            "BA_MCP_HTTP__AUTH__REQUIRED_SCOPES": '["ba-mcp"]',
            "BA_MCP_DATABASES__REGIONAL__URL": pg.url("rls_reader", "regional"),
            "BA_MCP_DATABASES__REGIONAL__ROLE_FROM": json.dumps(
                {"claim": "sub", "roles": {"alice": "rls_eu", "bob": "rls_us"}}
            ),
            "BA_MCP_SANDBOX__ALLOWED_IMPORTS": "*",
        }
        with http_serve(ws, port=port, **env) as served:
            assert served == url
            yield Team(issuer, url, ws, pg)


async def _call(session: ClientSession, tool: str, **args: Any) -> tuple[bool, str, Any]:
    result = await session.call_tool(tool, dict(args))
    return bool(result.is_error), text_of(result), result


async def _ok(session: ClientSession, tool: str, **args: Any) -> tuple[str, Any]:
    failed, said, result = await _call(session, tool, **args)
    assert not failed, said
    return said, result


async def _seen(session: ClientSession, qualified: str) -> dict[str, str]:
    """What a user learns of ``qualified`` by every path: the tool, the resources, the listing, the completions."""
    handle = qualified.partition("/")[0]
    seen = {"run": repr((await _call(session, "run_analysis", name=qualified))[:2])}
    try:
        read = await session.read_resource(f"analysis://{qualified}")  # type: ignore[arg-type]
        seen["resource"] = getattr(read.contents[0], "text", "")
    except Exception as unknown:  # the SDK's error for an unknown resource
        seen["resource"] = f"unknown: {unknown}"
    catalog = await session.read_resource("analysis://catalog")  # type: ignore[arg-type]
    seen["catalog"] = getattr(catalog.contents[0], "text", "")
    template = ResourceTemplateReference(uri="analysis://{owner}/{name}")
    owners = await session.complete(template, {"name": "owner", "value": ""})
    names = await session.complete(template, {"name": "name", "value": ""}, context_arguments={"owner": handle})
    own = await session.complete(ResourceTemplateReference(uri="analysis://{name}"), {"name": "name", "value": ""})
    seen["completion"] = f"{owners.completion.values} {names.completion.values} {own.completion.values}"
    return seen


def _region_total(team: Team, region: str) -> int:
    return int(team.pg.sql(f"SELECT sum(amount) FROM sales WHERE region = '{region}'", database="regional")[0][0])


async def test_bob_reruns_alices_published_analysis_as_himself_and_it_is_unknown_once_unpublished(team: Team) -> None:
    eu, us = _region_total(team, "eu"), _region_total(team, "us")
    async with session_as(team.token("alice"), team.url) as alice:
        said, queried = await _ok(alice, "query_database", database="regional", query=SALES, output_level="brief")
        assert "1 rows" in said, said  # her region's
        said, _ = await _ok(alice, "run_python", code=PYTHON.format(aid=meta_of(queried)["artifact_id"]))
        assert re.search(rf"\beu\b.*\b{eu}\b", said) and not re.search(r"\bus\b", said), said
        said, _ = await _ok(
            alice, "save_analysis", name="regional-sales", steps="last:2", description="alice's regional look"
        )
        assert "Saved analysis regional-sales" in said, said
    alices = team.home("alice") / "analyses" / "regional-sales" / "analysis.yaml"
    alices_export = team.home("alice") / "exports" / "regional.csv"
    assert alices.is_file() and "eu" in alices_export.read_text() and "us" not in alices_export.read_text()

    async with session_as(team.token("bob"), team.url) as bob:
        await _ok(bob, "query_database", database="regional", query="SELECT 'bob-own' AS mine")
        await _ok(bob, "save_analysis", name="regional-sales", steps="last:1", description="bob's own")
        before = await _seen(bob, "alice/regional-sales")
    assert "UNKNOWN_ANALYSIS" in before["run"] and before["resource"].startswith("unknown"), before
    assert "alice" not in before["catalog"] and "alice's" not in before["run"], before

    async with session_as(team.token("alice"), team.url) as alice:
        said, _ = await _ok(alice, "save_analysis", name="regional-sales", publish=True)
    found = re.search(r"to the team as (\S+/regional-sales)", said)
    assert found, said
    qualified = found.group(1)
    assert qualified == "alice/regional-sales"  # the provider's tokens name alice by her subject alone
    kept = alices.read_bytes(), next((team.workspace / "published").rglob("regional-sales.json")).read_bytes()

    artifacts = team.workspace / "artifacts"
    existing = {p.name for p in artifacts.glob("*.meta.json")}
    async with session_as(team.token("bob"), team.url) as bob:
        seen = await _seen(bob, qualified)  # its run_analysis re-runs it as bob
        assert f"{qualified}: alice's regional look" in seen["catalog"] and "— by alice" in seen["catalog"], seen
        assert "- regional-sales: bob's own" in seen["catalog"], seen  # his own beside it
        assert "Published by alice" in seen["resource"] and "SELECT region, count(*)" in seen["resource"], seen
        assert seen["completion"] == "['alice'] ['regional-sales'] ['regional-sales']", seen

        said, result = await _ok(bob, "run_analysis", name=qualified)  # as bob: his role, his rows
        assert "Run as you (bob)" in said and "is alice's" in said, said
        assert re.search(rf"\bus\b.*\b{us}\b.*\brls_us\b.*ba-mcp bob\b", said), said
        assert not re.search(r"\beu\b", said) and str(eu) not in said and "rls_eu" not in said, said
        made = [p for p in artifacts.glob("*.meta.json") if p.name not in existing]
        assert made, result
        bobs = principal_key(team.issuer, "bob")
        for meta in made:  # what the runs made is bob's, never alice's
            owners = json.loads(meta.read_text())["owners"]
            assert set(owners) <= {bobs, f"{bobs}~analysis"}, (meta.name, owners)
        bobs_export = team.home("bob") / "exports" / "regional.csv"  # its Python ran in bob's sandbox, as bob
        assert "us" in bobs_export.read_text() and "eu" not in bobs_export.read_text()
        assert "us" not in alices_export.read_text()

        # he cannot change it: its name is no name of his; his own of that name is his
        failed, said, _ = await _call(bob, "save_analysis", name=qualified, steps="last:1", overwrite=True)
        assert failed and "BAD_NAME" in said, said
        said, _ = await _ok(
            bob, "save_analysis", name="regional-sales", steps="last:1", description="bob's own", overwrite=True
        )
        assert "published" not in said.lower(), said  # his own was never published
        failed, said, _ = await _call(bob, "save_analysis", name="regional-sales", publish=False)
        assert not failed and "was not published" in said, said
    assert (alices.read_bytes(), next((team.workspace / "published").rglob("regional-sales.json")).read_bytes()) == kept

    async with session_as(team.token("alice"), team.url) as alice:
        said, _ = await _ok(alice, "save_analysis", name="regional-sales", publish=False)
        assert "Unpublished regional-sales" in said, said
        said, _ = await _ok(alice, "run_analysis", name="regional-sales")  # hers still, on her rows
        assert re.search(rf"\beu\b.*\b{eu}\b.*\brls_eu\b.*ba-mcp alice\b", said), said

    async with session_as(team.token("bob"), team.url) as bob:
        assert await _seen(bob, qualified) == before
