"""Issue 65, item 3: a DuckDB file another program holds locked — a writer, as ``dbt build`` is — is waited out.

A second process (not the server's) opens the file read-write, which takes DuckDB's write lock, and holds it: a
query started meanwhile waits within its timeout and answers once the writer lets go, saying it waited; a lock held
past the timeout is a clear DATABASE_LOCKED naming the program that holds it (never DATABASE_MISSING, never the
``databases`` setting). Slow tier: the writer holds the lock for real seconds."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import in_process, make_workspace, text_of

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

_HOLD = """
import sys, time, duckdb
for attempt in range(300):  # the server's worker lets go of the file after its call: a writer waits for that
    try:
        con = duckdb.connect(sys.argv[1])  # read-write: DuckDB's write lock on the file, as a dbt build holds it
        break
    except duckdb.IOException:
        time.sleep(0.1)
con.execute("INSERT INTO orders VALUES (99, 1.5)")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
con.close()
"""


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    import duckdb

    path = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE orders AS SELECT range AS id, range * 2.0 AS amount FROM range(10)")
    return path


@pytest.fixture
def workspace_(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "wsroot")


@contextlib.contextmanager
def held(path: Path, seconds: float) -> Iterator[subprocess.Popen[str]]:
    """A process of its own holding the file's write lock for ``seconds`` (it has the lock once this yields)."""
    writer = subprocess.Popen([sys.executable, "-c", _HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "locked"
        yield writer
    finally:
        writer.kill()
        writer.wait()


async def test_a_query_waits_out_a_writers_lock_and_says_so(warehouse: Path, workspace_: Path) -> None:
    async with in_process(workspace_, BA_MCP_DATABASES__WAREHOUSE__PATH=str(warehouse)) as client:
        first = await client.call_tool(
            "query_database", {"query": "SELECT count(*) AS n FROM orders", "database": "warehouse"}
        )
        assert not first.is_error, text_of(first)  # the worker is up: what follows is the lock, not a start
        with held(warehouse, 2.0):
            asked = time.monotonic()
            answer = await client.call_tool(
                "query_database",
                # not the first call's text: its answer is in the raw cache, and what is asked here is the file
                {"query": "SELECT count(*) AS rows_now FROM orders", "database": "warehouse", "timeout": 60},
            )
            took = time.monotonic() - asked
        text = text_of(answer)
        print(f"answered after {took:.1f} s: {text[:300]}")  # for the note
        assert not answer.is_error, text
        assert "11" in text  # the writer's row is there: the file was read after the writer let go
        assert "waited" in text and "lock on warehouse.duckdb" in text, text


async def test_a_lock_held_past_the_timeout_is_a_clear_database_locked(warehouse: Path, workspace_: Path) -> None:
    async with in_process(workspace_, BA_MCP_DATABASES__WAREHOUSE__PATH=str(warehouse)) as client:
        with held(warehouse, 60.0) as writer:
            answer = await client.call_tool(
                "query_database", {"query": "SELECT count(*) FROM orders", "database": "warehouse", "timeout": 3}
            )
            text = text_of(answer)
            print(text)  # for the note
            assert answer.is_error
            assert "DATABASE_LOCKED" in text and "locked by another program" in text, text
            assert f"PID {writer.pid}" in text, text  # the program that holds it, as the system tells
            assert "retry when" in text
            assert "DATABASE_MISSING" not in text and "`databases` setting" not in text and "TIMEOUT" not in text
        after = await client.call_tool(
            "query_database", {"query": "SELECT count(*) AS n FROM orders", "database": "warehouse"}
        )
        assert not after.is_error and "11" in text_of(after), text_of(after)  # the writer gone: served again
