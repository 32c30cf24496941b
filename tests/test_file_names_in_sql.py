"""Issue 63 item 7: workspace files as SQL sees them.

Files named like a public data-analysis benchmark's (``-``, ``.``, spaces, ``=``, ``+``, an empty header, a repeated
one): the id each tool shows is an SQL identifier and works as shown in query_database (DuckDB), run_python's
``load_file`` and file_reader; a column has one name in all three (pandas' ``Unnamed: 0``); the errors a model meets
list what works in their own text (a host that shows the model only tools cannot read ``ba://files``).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import AsyncIterator
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from mcp import Client, ClientSession, stdio_client

from ba_mcp.errors import ToolFailure
from ba_mcp.formats.csv import header_names, sql_header_names, trim_header
from ba_mcp.ids import SQL_UPLOAD_ID, legacy_upload_id_for, upload_id_for
from ba_mcp.workspace import Workspace
from tests.conftest import in_process, text_of

pytestmark = pytest.mark.anyio

# name -> content: named as the benchmark's files are (InfiAgent-DABench: 35 of 257 questions use a name with - or .,
# 48 a file whose first header is empty)
FILES = {
    "2015-2016-q.v1.csv": "district,score\nA,3\nB,4\nA,5\n",
    "world happiness report.csv": "country,rank\nX,1\nY,2\n",
    "test_data=a+b.csv": "k,v\n1,10\n2,20\n",
    "unnamed_index.csv": ",name,value\n0,ann,1.5\n1,bob,2.5\n2,cy,3.0\n",
    "repeated.csv": "a,a,b, a ,\n1,2,3,4,5\n",
    "keywords.csv": "order,Group,rank\n1,2,3\n",
}

HEADERS = [
    ",name,value",
    "a,a,a.1,,Unnamed: 3, x ,x",
    ",name,,a,a, b ",
    "x,x,x,x.1,",
    ",,",
    "a,b",
]


def pandas_columns(header: str) -> list[str]:
    """What pandas (and so file_reader) calls the columns: read_csv, then trimmed as file_reader trims them."""
    width = len(next(csv.reader([header])))
    frame = pd.read_csv(io.StringIO(header + "\n" + ",".join(["1"] * width) + "\n"))
    return [str(c) for c in trim_header(frame)[0].columns]


# -- the pieces ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [*FILES, "Q3 sales (final).xlsx", "données-2024.csv", "_private.csv", "a.b.c.parquet"])
def test_an_upload_id_is_an_sql_identifier_duckdb_reads_bare(name: str) -> None:
    uid = upload_id_for(name)
    assert SQL_UPLOAD_ID.match(uid), uid
    con = duckdb.connect()
    con.execute(f'CREATE TEMP VIEW "{uid}" AS SELECT 42 AS answer')
    assert con.execute(f"SELECT answer FROM {uid}").fetchall() == [(42,)]  # bare, as shown


@pytest.mark.parametrize("header", HEADERS)
def test_header_names_are_pandas_own(header: str) -> None:
    assert header_names(next(csv.reader([header]))) == pandas_columns(header)


@pytest.mark.parametrize("header", HEADERS)
def test_duckdb_reads_a_header_with_pandas_names(header: str, tmp_path: Path) -> None:
    path = tmp_path / "h.csv"
    width = len(next(csv.reader([header])))
    path.write_text(header + "\n" + ",".join(["1"] * width) + "\n")
    names = sql_header_names(path.read_bytes(), ",")
    option = f", names={names!r}" if names else ""
    got = duckdb.sql(f"SELECT * FROM read_csv('{path}', delim=',', header=true{option})").columns
    assert got == pandas_columns(header)
    if header == "a,b":
        assert names is None  # DuckDB's own names already: nothing passed


def test_a_header_longer_than_the_sample_is_left_to_duckdb() -> None:
    """Names are given only for a whole header line: never a name cut at the sample's end."""
    long = b"," + b",".join(b"c%d" % i for i in range(200_000))  # an empty first name, past 1 MiB
    assert len(long) > 1 << 20
    assert sql_header_names(long[: 1 << 20], ",") is None
    assert sql_header_names(b",c1,c2\n1,2,3\n", ",") == ["Unnamed: 0", "c1", "c2"]


def _workspace(tmp_path: Path) -> Workspace:
    ws = Workspace.open(tmp_path)
    for name, content in FILES.items():
        (tmp_path / "uploads" / name).write_text(content)
    return ws


def test_ids_shown_before_still_resolve_and_are_shown_by_the_sql_id(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    for uid, path, _ in ws.uploads():
        assert SQL_UPLOAD_ID.match(uid) and ws.resolve(uid).filename == path.name
        old = legacy_upload_id_for(path.name)
        resolved = ws.resolve(old)
        assert resolved.filename == path.name and resolved.name == uid, (old, resolved.name)


def test_an_id_resolves_whatever_its_case_as_sql_identifiers_do(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path)
    (tmp_path / "uploads" / "Q3 Sales-EU.csv").write_text("x\n1\n")
    assert ws.resolve("upload_Q3_Sales_EU").filename == "Q3 Sales-EU.csv"
    assert ws.resolve("upload_q3_sales_eu").filename == "Q3 Sales-EU.csv"


def test_files_whose_ids_collide_each_have_an_id_that_resolves(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path)
    for name in ("a-b.csv", "a_b.csv", "sales.csv", "sales.xlsx", "r.v1.csv", "r_v1.csv"):
        (tmp_path / "uploads" / name).write_text("x\n1\n")
    listed = {path.name: uid for uid, path, _ in ws.uploads()}
    assert len(set(listed.values())) == len(listed), listed
    for name, uid in listed.items():
        assert ws.resolve(uid).filename == name, (uid, name)
    assert SQL_UPLOAD_ID.match(listed["sales.csv"]) and SQL_UPLOAD_ID.match(listed["sales.xlsx"])


def test_a_missing_name_lists_the_working_ids_in_its_text(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    for wrong in ("upload_nothing_like_it", "nothing_like_it.csv"):
        with pytest.raises(ToolFailure) as caught:
            ws.resolve(wrong)
        hint = caught.value.hint
        assert "ba://files" not in hint, hint
        for uid, path, _ in ws.uploads():
            assert f"{uid} (uploads/{path.name})" in hint, hint
    empty = Workspace.open(tmp_path / "none")
    with pytest.raises(ToolFailure) as caught:
        empty.resolve("upload_x")
    assert "no uploads" in caught.value.hint


# -- through the tools ----------------------------------------------------------------------------------


def header_of(text: str) -> list[str]:
    """The column names of a table observation: the first line of its CSV rows."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Rows ("))
    return next(csv.reader([lines[start + 1]]))


def listed_ids(files: str) -> dict[str, str]:
    """{file name: id} as ba://files shows them."""
    return {m.group(2): m.group(1) for m in re.finditer(r"^- \[(upload_\S+)\] (.+?) \(", files, re.M)}


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("names") / "ws"
    (root / "uploads").mkdir(parents=True)
    for name, content in FILES.items():
        (root / "uploads" / name).write_text(content)
    return root


@pytest.fixture(scope="module")
async def client(ws: Path) -> AsyncIterator[Client]:
    async with in_process(ws) as c:
        yield c


async def ok(c: Client | ClientSession, tool: str, **args: object) -> str:
    result = await c.call_tool(tool, args)
    assert not result.is_error, text_of(result)
    return text_of(result)


async def test_every_id_shown_works_as_shown_in_sql_and_file_reader(client: Client) -> None:
    files = (await client.read_resource("ba://files")).contents[0].text
    ids = listed_ids(files)
    assert set(ids) == set(FILES), files
    for name, uid in ids.items():
        assert SQL_UPLOAD_ID.match(uid), uid
        rows = FILES[name].count("\n") - 1
        sql = await ok(client, "query_database", query=f"SELECT count(*) AS n FROM {uid}")
        assert sql.splitlines()[-1] == str(rows), sql
        read = await ok(client, "file_reader", path=uid, output_level="full")
        assert header_of(read) == header_of(await ok(client, "query_database", query=f"SELECT * FROM {uid}"))
        by_path = await ok(client, "file_reader", path=f"uploads/{name}")  # the path's observation names the id
        assert uid in by_path.splitlines()[1] or uid == "upload_" + name.rsplit(".", 1)[0], by_path.splitlines()[1]
        quoted = await ok(client, "query_database", query=f"SELECT count(*) AS n FROM 'uploads/{name}'")
        assert quoted.splitlines()[-1] == str(rows)


async def test_an_empty_and_a_repeated_header_have_one_name_in_sql_and_file_reader(client: Client) -> None:
    for name, uid in (("unnamed_index.csv", "upload_unnamed_index"), ("repeated.csv", "upload_repeated")):
        expected = pandas_columns(FILES[name].splitlines()[0])
        assert header_of(await ok(client, "file_reader", path=uid, output_level="full")) == expected
        assert header_of(await ok(client, "query_database", query=f"SELECT * FROM {uid}")) == expected
    summed = await ok(client, "query_database", query='SELECT sum("Unnamed: 0") AS s FROM upload_unnamed_index')
    assert summed.splitlines()[-1] == "3", summed


async def test_a_column_not_found_lists_the_files_columns_as_sql_takes_them(client: Client) -> None:
    result = await client.call_tool("query_database", {"query": "SELECT column00 FROM upload_unnamed_index"})
    text = text_of(result)
    assert result.is_error and 'Columns of upload_unnamed_index: "Unnamed: 0", name, value' in text, text
    listed = re.search(r"Columns of upload_unnamed_index: (.+)", text)
    assert listed is not None
    await ok(client, "query_database", query=f"SELECT {listed.group(1)} FROM upload_unnamed_index")  # as listed


async def test_columns_listed_are_quoted_where_sql_needs_it(client: Client) -> None:
    """A reserved word (order) or a capital letter is listed in double quotes; the list works as written."""
    result = await client.call_tool("query_database", {"query": "SELECT ordr FROM upload_keywords"})
    listed = re.search(r"Columns of upload_keywords: (.+)", text_of(result))
    assert result.is_error and listed is not None and listed.group(1) == '"order", "Group", rank', text_of(result)
    row = await ok(client, "query_database", query=f"SELECT {listed.group(1)} FROM upload_keywords")
    assert row.splitlines()[-1] == "1,2,3", row


async def test_a_table_named_like_an_upload_is_told_its_id(client: Client) -> None:
    """FROM world_happiness_report (the file's name as a table): the error names the upload's id, in its text."""
    result = await client.call_tool("query_database", {"query": "SELECT count(*) FROM world_happiness_report"})
    text = text_of(result)
    assert result.is_error and "did you mean upload_world_happiness_report (uploads/world happiness report.csv)?" in (
        text
    ), text
    await ok(client, "query_database", query="SELECT count(*) FROM upload_world_happiness_report")


async def test_a_missing_or_mistyped_name_says_what_works(client: Client) -> None:
    missing = await client.call_tool("query_database", {"query": "SELECT * FROM upload_nothing_like_it"})
    text = text_of(missing)
    assert missing.is_error and "ba://files" not in text, text
    hinted = re.findall(r"(upload_\w+) \(uploads/", text)
    assert len(hinted) == len(FILES), text
    for uid in hinted:  # each id the error lists works as listed
        await ok(client, "query_database", query=f"SELECT count(*) FROM {uid}")
    # the id as it was shown before (with - and .), written bare: a syntax error whose hint gives the SQL id
    old = legacy_upload_id_for("2015-2016-q.v1.csv")
    bare = await client.call_tool("query_database", {"query": f"SELECT count(*) FROM {old}"})
    assert bare.is_error and "upload_2015_2016_q_v1 for upload_2015-2016-q.v1" in text_of(bare), text_of(bare)
    await ok(client, "query_database", query=f'SELECT count(*) FROM "{old}"')  # quoted, it still resolves


@pytest.mark.slow
async def test_load_file_takes_every_id_shown_with_the_same_column_names(ws: Path) -> None:
    """run_python's load_file, in the sandbox over stdio: each id ba://files shows, and the columns SQL shows."""
    from tests.sandbox_common import sandbox_params

    async with stdio_client(sandbox_params(ws)) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        files = (await s.read_resource("ba://files")).contents[0].text
        ids = listed_ids(files)
        code = "import json\nprint(json.dumps({i: [str(c) for c in load_file(i).columns] for i in IDS}))"
        out = await ok(s, "run_python", code=f"IDS = {sorted(ids.values())!r}\n{code}")
        found = re.search(r"\{.*\}", out)
        assert found is not None, out
        import json

        columns = json.loads(found.group(0))
        for uid in ids.values():
            sql = await ok(s, "query_database", query=f"SELECT * FROM {uid}")
            assert columns[uid] == header_of(sql), (uid, columns[uid], header_of(sql))
        assert columns["upload_unnamed_index"][0] == "Unnamed: 0"
