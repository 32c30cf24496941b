"""Issue 50: the analyst's day in the field, each item through a real MCP session the way the analyst met it.

- a conversation at the default level (no call asks for ``brief``) saves with conclusions and re-runs;
- ``dbt run`` on the served DuckDB file succeeds while a session is open, and the next ``query_metrics`` shows
  the rebuilt numbers (the slow tier: dbt builds the project).
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, stdio_client

from tests.conftest import make_workspace, stdio_params, text_of

pytestmark = pytest.mark.anyio

BY_REGION = (
    "SELECT region_name, round(sum(net_revenue), 2) AS revenue FROM order_facts "
    "WHERE status = 'completed' AND order_date >= DATE '2025-01-01' GROUP BY ALL ORDER BY revenue DESC"
)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("field"))


@pytest.fixture(scope="module")
async def s(ws: Path) -> AsyncIterator[ClientSession]:
    async with stdio_client(stdio_params(ws)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def ok(s: ClientSession, tool: str, **args: Any) -> str:
    result = await s.call_tool(tool, args)
    assert not result.is_error, text_of(result)
    return text_of(result)


def csv_rows(text: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Rows ("))
    body = [line for line in lines[start + 2 :] if line and not line.startswith(("Defined:", "Note:", "["))]
    return [line.split(",") for line in body]


async def test_a_conversation_at_the_default_level_saves_with_conclusions_and_re_runs(s: ClientSession) -> None:
    """Item 1: the table was shown whole (no artifact); its conclusions bind to the output by name and by the call
    id the conversation saw in ba://history; the re-run with an earlier period says which no longer hold."""
    shown = await ok(s, "query_database", query=BY_REGION)
    assert "artifact" not in shown.lower(), shown  # shown whole at the default level: the case that failed
    rows = csv_rows(shown)
    leader = rows[0][0]
    history = (await s.read_resource("ba://history")).contents[0].text  # type: ignore[union-attr]
    call = re.findall(r"call_\w+", history)[0]
    saved = await ok(
        s,
        "save_analysis",
        name="regions-2025",
        steps=["last:1"],
        parameters={"since": "2025-01-01"},
        conclusions=[
            {"text": f"{len(rows)} regions sold", "output": "s1_table", "rule": "count"},
            {
                "text": f"{leader} leads",
                "output": call,
                "rule": "rows",
                "key": "region_name",
                "where": [["revenue", ">=", float(rows[0][1]) - 0.01]],
            },
        ],
    )
    assert f"Conclusion recorded: “{leader} leads” (rows of s1_table = ['{leader}'])" in saved, saved
    again = await ok(s, "run_analysis", name="regions-2025")
    assert "All 2 conclusion(s) still hold." in again, again
    earlier = await ok(s, "run_analysis", name="regions-2025", parameters={"since": "2023-01-01"})
    assert (
        "1 of 2 conclusion(s) no longer hold." in earlier and f"NO LONGER HOLDS: “{leader} leads”" in earlier
    )  # more revenue since 2023: the leader's threshold moves


# -- dbt beside ba-mcp (slow: dbt builds the project) -----------------------------------------------------------


def _free(path: Path, within_s: float = 30.0) -> None:
    """Wait until a writer can open ``path`` (DuckDB's lock), as dbt does; fail if the server keeps it."""
    import duckdb

    deadline = time.monotonic() + within_s
    while True:
        try:
            duckdb.connect(str(path)).close()
            return
        except duckdb.IOException as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"the served file stays locked between calls: {exc}") from None
            time.sleep(0.1)


@pytest.mark.slow
async def test_dbt_run_succeeds_while_a_session_is_open_and_the_next_query_sees_it(tmp_path: Path) -> None:
    """Item 2: revenue by year is 300 and 450 (tests/dbt_shop); an order of 1,000 in 2025 is added to the model and
    ``dbt run`` rebuilds the file while the session stays open: 2025 becomes 1,450."""
    import os
    import subprocess
    import sys

    from tests.test_time_metrics import _dbt_build

    project, env = _dbt_build(tmp_path)
    ws = make_workspace(tmp_path)
    params = stdio_params(
        ws,
        BA_MCP_DATABASES__SHOP__PATH=str(tmp_path / "shop.duckdb"),
        BA_MCP_METRICS__DBT=f'[{{"project": "{project}", "database": "shop"}}]',
        BA_MCP_METRICS__DEMO="false",
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()

        async def by_year() -> list[list[str]]:
            return csv_rows(await ok(s, "query_metrics", metrics=["revenue"], time_grain="year", output_level="full"))

        assert await by_year() == [["2024-01-01", "300"], ["2025-01-01", "450"]]
        await ok(s, "query_database", database="shop", query="SELECT count(*) AS n FROM orders")
        model = project / "models" / "orders.sql"
        model.write_text(
            model.read_text().replace(
                "(4, 2, date '2025-02-10', 300.0)",
                "(4, 2, date '2025-02-10', 300.0),\n    (5, 1, date '2025-03-01', 1000.0)",
            )
        )
        _free(tmp_path / "shop.duckdb")
        done = subprocess.run(
            [str(Path(sys.executable).with_name("dbt")), "run"],
            cwd=project,
            env={**env, "PATH": os.environ["PATH"]},
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stdout[-2000:]  # the session is open: its engine holds no lock
        assert await by_year() == [["2024-01-01", "300"], ["2025-01-01", "1450"]]
