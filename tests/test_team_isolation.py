"""Issue 60: nothing one user owns reaches another, and each user has a fair share of a database — tested through
real HTTP sessions against a real identity provider (tests/idp_server.py) and the run's PostgreSQL.

Alice saves an analysis and exports a file; bob, logged in as himself, finds neither by any path: ``file_reader``
(reads and listings, the ``users/`` folder by name and percent-encoded), a file path in ``query_database``,
``load_file`` in ``run_python``, the ``analysis://`` resources and their completion. Bob may name his own analysis and
export like alice's, and ``overwrite`` replaces only his own file. Four long queries of alice's leave bob an answer.
Slow tier: the provider, the server and PostgreSQL are processes."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.types import ResourceTemplateReference

from tests import pg_server
from tests.conftest import free_port, http_serve, make_workspace, text_of
from tests.idp_server import identity_provider, token
from tests.test_team_server import session_as

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


@dataclass
class Served:
    issuer: str
    url: str
    workspace: Path
    pg: pg_server.Postgres

    def token(self, user: str) -> str:
        return token(self.issuer, user, self.url)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("isolation")
    pg = pg_server.running()
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    ws = make_workspace(base)
    with identity_provider(base / "key.json") as issuer:
        env = {
            "BA_MCP_HTTP__AUTH__ISSUER": issuer,
            "BA_MCP_HTTP__AUTH__AUDIENCE": url,
            "BA_MCP_HTTP__AUTH__REQUIRED_SCOPES": '["ba-mcp"]',
            "BA_MCP_DATABASES__SHOP__URL": pg.url(),
            "BA_MCP_DATABASES__SHOP__MAX_CONCURRENT": "4",  # one user's share: 2 (half, with http.auth)
            "BA_MCP_TOOLS__QUERY_DATABASE__TIMEOUT_S": "60",
        }
        with http_serve(ws, port=port, **env) as served_url:
            assert served_url == url
            yield Served(issuer, url, ws, pg)


async def _text(session: ClientSession, tool: str, **args: object) -> tuple[bool, str]:
    result = await session.call_tool(tool, dict(args))
    return bool(result.is_error), text_of(result)


async def test_another_users_analyses_exports_and_names_are_unknown_by_every_path(served: Served) -> None:
    async with session_as(served.token("alice"), served.url) as alice:
        failed, said = await _text(alice, "query_database", query="SELECT 'alice-only' AS who, 42 AS n")
        assert not failed, said
        failed, said = await _text(
            alice, "save_analysis", name="weekly-sales", steps="last:1", description="alice's plan"
        )
        assert not failed, said
        code = "import pandas as pd\nprint(export(pd.DataFrame({'who': ['alice-q3']}), 'alice/q3.csv'))"
        ran = await alice.call_tool("run_python", {"code": code})
        said = text_of(ran)
        assert not ran.is_error and "exports/alice/q3.csv" in said, said
        code_ids = set(re.findall(r"code_[0-9a-f]{12}", json.dumps(ran.model_dump(mode="json"))))
        assert code_ids, ran  # the code she ran, kept by id
        failed, said = await _text(alice, "file_reader", path=sorted(code_ids)[0])
        assert not failed and "alice-q3" in said, said
        failed, said = await _text(alice, "file_reader", path="exports/alice/q3.csv")
        assert not failed and "alice-q3" in said, said
        failed, said = await _text(alice, "file_reader", path="analyses/weekly-sales/analysis.yaml")
        assert not failed and "alice's plan" in said, said

    homes = [p.name for p in (served.workspace / "users").iterdir()]
    assert len(homes) == 1, homes  # alice's folder: her analyses and exports live there, not in the shared root
    alice_home = homes[0]
    assert not (served.workspace / "analyses" / "weekly-sales").exists()
    assert not (served.workspace / "exports" / "alice").exists()

    async with session_as(served.token("bob"), served.url) as bob:
        # reads and listings through file_reader
        for path in (
            "analyses/weekly-sales/analysis.yaml",
            "exports/alice/q3.csv",
            f"users/{alice_home}/exports/alice/q3.csv",
            f"users%2F{alice_home}%2Fanalyses%2Fweekly-sales%2Fanalysis.yaml",
            f"users/{alice_home}/",
            "users/",
        ):
            failed, said = await _text(bob, "file_reader", path=path)
            assert failed and "alice" not in said.replace(path, ""), (path, said)
            assert "alice's plan" not in said and "alice-q3" not in said, said
        for code_id in code_ids:  # her code, by its id
            failed, said = await _text(bob, "file_reader", path=code_id)
            assert failed and "alice-q3" not in said, said
        for folder in ("analyses/", "exports/"):
            failed, said = await _text(bob, "file_reader", path=folder)
            assert "weekly-sales" not in said and "q3.csv" not in said, said
        # a file path in SQL, load_file in run_python
        failed, said = await _text(bob, "query_database", query="SELECT * FROM 'exports/alice/q3.csv'")
        assert failed and "alice-q3" not in said, said
        failed, said = await _text(bob, "run_python", code="print(load_file('exports/alice/q3.csv'))")
        assert failed or "alice-q3" not in said, said
        # resources and completion
        catalog = await bob.read_resource("analysis://catalog")  # type: ignore[arg-type]
        assert "weekly-sales" not in str(catalog.contents[0])
        with pytest.raises(Exception):  # noqa: B017 - the SDK raises its error type for an unknown resource
            await bob.read_resource("analysis://weekly-sales")  # type: ignore[arg-type]
        completed = await bob.complete(
            ResourceTemplateReference(uri="analysis://{name}"), {"name": "name", "value": "week"}
        )
        assert "weekly-sales" not in completed.completion.values
        failed, said = await _text(bob, "run_analysis", name="weekly-sales")
        assert failed and "alice" not in said, said

        # a query alice ran, sent by bob: computed for him, never her cached result (whose hit would tell him)
        failed, said = await _text(bob, "query_database", query="SELECT 'alice-only' AS who, 42 AS n")
        assert not failed, said
        usage = json.loads(getattr((await bob.read_resource("ba://metrics")).contents[0], "text", "{}"))
        assert usage["session"]["total"]["cache_hit_rate"] == 0, usage
        # bob's own names: the same analysis name and the same export path are his to take
        failed, said = await _text(bob, "query_database", query="SELECT 'bob-only' AS who")
        assert not failed, said
        failed, said = await _text(bob, "save_analysis", name="weekly-sales", steps="last:1", description="bob's")
        assert not failed and "EXISTS" not in said, said
        code = "import pandas as pd\nprint(export(pd.DataFrame({'who': ['bob-q3']}), 'alice/q3.csv', overwrite=True))"
        failed, said = await _text(bob, "run_python", code=code)
        assert not failed and "exports/alice/q3.csv" in said, said
        failed, said = await _text(bob, "file_reader", path="exports/alice/q3.csv")
        assert not failed and "bob-q3" in said and "alice-q3" not in said, said
        completed = await bob.complete(
            ResourceTemplateReference(uri="analysis://{name}"), {"name": "name", "value": "week"}
        )
        assert completed.completion.values == ["weekly-sales"], completed
        mine = await bob.read_resource("analysis://weekly-sales")  # type: ignore[arg-type]
        text = getattr(mine.contents[0], "text", "")
        assert "bob's" in text and "alice's plan" not in text, text

    async with session_as(served.token("alice"), served.url) as alice:  # alice's are untouched
        failed, said = await _text(alice, "file_reader", path="exports/alice/q3.csv")
        assert not failed and "alice-q3" in said and "bob-q3" not in said, said
        shown = await alice.read_resource("analysis://weekly-sales")  # type: ignore[arg-type]
        assert "alice's plan" in getattr(shown.contents[0], "text", ""), shown
        failed, said = await _text(alice, "run_analysis", name="weekly-sales")
        assert not failed and "alice-only" in said, said


async def test_one_users_long_queries_leave_another_user_an_answer(served: Served) -> None:
    sleep = "SELECT pg_sleep(20) AS slept"

    async def alice_call(session: ClientSession) -> tuple[bool, str]:
        return await _text(session, "query_database", database="shop", query=sleep, timeout=60)

    async with (
        session_as(served.token("alice"), served.url) as a1,
        session_as(served.token("alice"), served.url) as a2,
        session_as(served.token("alice"), served.url) as a3,
        session_as(served.token("alice"), served.url) as a4,
        session_as(served.token("bob"), served.url) as bob,
    ):
        long = [asyncio.ensure_future(alice_call(s)) for s in (a1, a2, a3, a4)]
        running = 0
        for _ in range(100):  # alice's share of the database's connections is busy
            running = served.pg.sql(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%pg_sleep(20)%' "
                "AND pid <> pg_backend_pid()"
            )[0][0]
            if running >= 2:
                break
            await asyncio.sleep(0.1)
        assert running == 2, running  # her share: 2 of 4, the other two of her calls wait
        asked = time.monotonic()
        failed, said = await _text(bob, "query_database", database="shop", query="SELECT count(*) AS n FROM orders")
        assert not failed, said
        # answered while alice's first pair still slept: bob never waited for her queries
        assert not any(f.done() for f in long), f"bob answered after {time.monotonic() - asked:.1f} s"
        results = await asyncio.gather(*long)
        assert all(not failed for failed, _ in results), results  # alice's waited their turn, none lost
