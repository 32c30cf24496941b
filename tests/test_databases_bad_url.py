"""Issue 63, item 2: one bad database never takes the server down.

A configured database whose URL reaches no engine — no scheme (``127.0.0.1:55433/aw``, as pasted into Claude
Desktop's field), a scheme no engine takes without a driver, an unbalanced ``[``, a port that is no number, a
password holding a character a URL reserves — is listed as unavailable with the reason: in its call's error, in
``db://``, in ``ba-mcp doctor`` and in query_database's description, while the files, the demo and every other
database work. Nothing of the URL is shown (it may hold a password). The extension as Claude Desktop starts it:
tests/test_bundle.py (slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ba_mcp import registry
from tests.conftest import ba, in_process, text_of

pytestmark = pytest.mark.anyio

PASSWORD = "p@ss#word"
BAD_URLS = {
    "no scheme": ("127.0.0.1:55433/aw", "no scheme"),
    "no scheme, with a user": (f"analyst:{PASSWORD}@127.0.0.1:55433/aw", "no scheme"),
    "unknown scheme": ("mysqlx://analyst@db.example.com/aw", "no scheme"),
    "unbalanced bracket": ("postgresql://analyst@[::1:55433/aw", "unbalanced"),
    "port not a number": ("postgresql://analyst@127.0.0.1:55x33/aw", "port"),
    "reserved characters in the password": (f"postgresql://analyst:{PASSWORD}@127.0.0.1:55433/aw", "percent-encode"),
}


@pytest.mark.parametrize("case", sorted(BAD_URLS))
def test_each_bad_url_is_judged_without_quoting_it(case: str) -> None:
    from ba_mcp.settings import load_settings

    url, said = BAD_URLS[case]
    settings = load_settings(environ={"BA_MCP_DATABASES__WAREHOUSE__URL": url})  # the configuration loads
    problem = settings.databases["warehouse"].unavailable()
    assert problem is not None, case
    text = " ".join(problem)
    assert said in text, text
    assert "55433" not in text and "analyst" not in text and "ss#w" not in text and "p@ss" not in text, text


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://analyst:s3cret@127.0.0.1:55433/aw",
        "postgresql://analyst:p%40ss%23word@db.example.com/aw?sslmode=require",
        "postgresql://analyst@h1:5432,h2:5433/aw",  # libpq's several hosts
        "postgresql://analyst@[::1]:5432/aw",
        "postgres:///aw?host=/var/run/postgresql",
        "sqlite:////home/me/shop.db",
        "sqlite:///shop.db",
        "sc://spark.example.com:15002",
    ],
)
def test_good_urls_are_not_judged_bad(url: str) -> None:
    assert registry.url_problem(url, None) is None
    from ba_mcp.settings import load_settings

    settings = load_settings(environ={"BA_MCP_DATABASES__WAREHOUSE__URL": url})
    assert settings.databases["warehouse"].unavailable() is None


def test_a_driver_takes_any_scheme() -> None:
    assert registry.url_problem("grpc://flight.example.com:32010", "adbc_driver_flightsql") is None


@pytest.mark.parametrize("case", ["no scheme", "reserved characters in the password"])
async def test_the_server_serves_everything_else_and_says_why_the_database_is_unavailable(
    case: str, workspace: Path
) -> None:
    url, said = BAD_URLS[case]
    async with in_process(workspace, BA_MCP_DATABASES__WAREHOUSE__URL=url) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        description = tools["query_database"].description or ""
        assert "warehouse (" in description and "unavailable:" in description and said in description, description
        demo = await client.call_tool("query_database", {"query": "SELECT count(*) AS n FROM orders"})
        assert not demo.is_error, text_of(demo)
        read = await client.call_tool("file_reader", {"path": "uploads/sales.csv"})
        assert not read.is_error, text_of(read)
        failed = await client.call_tool("query_database", {"query": "SELECT 1", "database": "warehouse"})
        assert failed.is_error and "DATABASE_UNAVAILABLE" in text_of(failed) and said in text_of(failed)
        assert "databases.warehouse.url" in text_of(failed), text_of(failed)
        with pytest.raises(Exception, match=said) as raised:
            await client.read_resource("db://warehouse/schema")
        shown = [text_of(failed), description, str(raised.value)]
        assert not any(piece in text for text in shown for piece in ("ss#word", "p@ss", "55433")), shown


@pytest.mark.slow  # a server or command-line process of its own: the slow tier (the fast tier stays in process)
def test_doctor_lists_the_database_as_unavailable_and_the_rest_healthy(tmp_path: Path) -> None:
    url = f"postgresql://analyst:{PASSWORD}@127.0.0.1:55433/aw"
    done = ba("doctor", workspace=tmp_path / "ws", env={"BA_MCP_DATABASES__WAREHOUSE__URL": url})
    out = done.stdout + done.stderr
    line = next(line for line in out.splitlines() if "database warehouse" in line)
    assert "unavailable" in line and "percent-encode" in line, line
    assert "ss#word" not in out and "p@ss" not in out
    done = ba("doctor", workspace=tmp_path / "ws", env={"BA_MCP_DATABASES__WAREHOUSE__URL": "127.0.0.1:55433/aw"})
    out = done.stdout + done.stderr
    line = next(line for line in out.splitlines() if "database warehouse" in line)
    assert "unavailable" in line and "no scheme" in line and "55433" not in line, line
    assert "configuration" in out and done.returncode == 0, out[-2000:]


async def test_a_driver_not_installed_leaves_only_that_database_unavailable(workspace: Path) -> None:
    env = {"BA_MCP_DATABASES__LAKE__DRIVER": "adbc_driver_nosuch", "BA_MCP_DATABASES__LAKE__URL": "grpc://127.0.0.1:9"}
    async with in_process(workspace, **env) as client:
        failed = await client.call_tool("query_database", {"query": "SELECT 1", "database": "lake"})
        said = text_of(failed)
        assert failed.is_error and "DATABASE_UNAVAILABLE" in said and "adbc_driver_nosuch is not installed" in said
        assert "install the driver" in said, said
        demo = await client.call_tool("query_database", {"query": "SELECT count(*) AS n FROM orders"})
        assert not demo.is_error, text_of(demo)
