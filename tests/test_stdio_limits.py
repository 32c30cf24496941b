"""Bounded work on untrusted input, through a real MCP session over stdio (issue 8 items 7, 8, 10, 13;
S-7, S-10): decompression bombs, enormous lines and columns, deep JSON, queries past their timeout,
the artifact store's cap on write, the code store's cap, and clear errors for broken data in SQL.
Each hostile call is followed by a check that the server keeps serving and gave its memory back."""

from __future__ import annotations

import json
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import ClientSession, stdio_client

from tests.conftest import server_rss, stdio_params, text_of
from tests.sandbox_common import failed

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # hostile input over a real stdio process

MB = 1024 * 1024


def _xlsx_bomb(path: Path, rows: int, cols: int = 10) -> None:
    """A valid workbook whose one sheet holds rows × cols cells: a few hundred KB that inflate to tens of MB."""
    files = {
        "[Content_Types].xml": (
            '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
            'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
            'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/'
            'workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
            '<Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-'
            'officedocument.spreadsheetml.worksheet+xml"/></Types>'
        ),
        "_rels/.rels": (
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/'
            '2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/'
            '2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>'
        ),
        "xl/workbook.xml": (
            '<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="http://schemas.openxmlformats.org/'
            'spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
            '<sheets><sheet name="Bomb" sheetId="1" r:id="rId1"/></sheets></workbook>'
        ),
        "xl/_rels/workbook.xml.rels": (
            '<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/'
            '2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/'
            '2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>'
        ),
    }
    letters = [chr(65 + i) for i in range(cols)]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for name, text in files.items():
            z.writestr(name, text)
        with z.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as f:
            f.write(
                b'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="http://schemas.openxmlformats.org/'
                b'spreadsheetml/2006/main"><sheetData>'
            )
            header = "".join(f'<c r="{c}1" t="inlineStr"><is><t>col{c}</t></is></c>' for c in letters)
            f.write(f'<row r="1">{header}</row>'.encode())
            chunk = []
            for r in range(2, rows + 2):
                cells = "".join(f'<c r="{c}{r}"><v>{r}</v></c>' for c in letters)
                chunk.append(f'<row r="{r}">{cells}</row>')
                if len(chunk) == 2000:
                    f.write("".join(chunk).encode())
                    chunk.clear()
            f.write("".join(chunk).encode())
            f.write(b"</sheetData></worksheet>")


@pytest.fixture(scope="module")
def limits_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("limits") / "ws"
    up = ws / "uploads"
    up.mkdir(parents=True)
    _xlsx_bomb(up / "bomb.xlsx", rows=400_000)  # 4 M cells, ~60 MB of XML
    (up / "wide.csv").write_text(",".join(f"c{i}" for i in range(1_000_000)) + "\n" + "1," * 999_999 + "1\n")
    (up / "oneline.txt").write_text("x" * (20 * MB))
    (up / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (up / "dup.csv").write_text("a,a,b\n1,2,3\n4,5,6\n")
    (up / "malformed.csv").write_text("a,b\n1,2\n3,4,5,6\n7,8\n")
    (up / "corrupt.parquet").write_bytes(b"PAR1" + b"\x00garbage" * 1000 + b"PAR1")
    (up / "a.csv").write_text("k\n1\n2\n")
    return ws


@pytest.fixture(scope="module")
async def limits_server(limits_workspace: Path) -> AsyncIterator[ClientSession]:
    params = stdio_params(
        limits_workspace,
        BA_MCP_TOOLS__QUERY_DATABASE__TIMEOUT_S="1",
        BA_MCP_TOOLS__QUERY_DATABASE__CONFIRM_SCAN_ROWS=str(10**15),  # the hostile queries meet their timeout
        BA_MCP_DATABASES__DEMO__MEMORY_LIMIT="512MB",
        BA_MCP_TOOLS__FILE_READER__TIMEOUT_S="10",
        BA_MCP_ARTIFACTS__MAX_BYTES=str(4 * MB),
        BA_MCP_FORMATS__MAX_DECOMPRESSED_BYTES=str(16 * MB),
        BA_MCP_TOOLS__RUN_PYTHON__CODE_STORE_MAX_BYTES=str(2 * MB),
        BA_MCP_SANDBOX__SPARE_WORKERS="0",
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        yield s


async def test_an_xlsx_decompression_bomb_is_streamed_or_refused(
    limits_server: ClientSession, limits_workspace: Path
) -> None:
    before = server_rss(limits_workspace)
    head = await limits_server.call_tool(
        "file_reader", {"path": "uploads/bomb.xlsx", "nrows": 5, "output_level": "full"}
    )
    text = text_of(head)
    assert not head.is_error, text
    assert "colA" in text and "\n2," in text  # the first rows, streamed
    whole = await limits_server.call_tool("file_reader", {"path": "uploads/bomb.xlsx", "output_level": "brief"})
    text = text_of(whole)
    if whole.is_error:
        assert "DECOMPRESSED" in text or "TOO_MANY_CELLS" in text, text
    else:
        assert "partial" in text or "read" in text, text
    sql = await limits_server.call_tool("query_database", {"query": "SELECT count(*) FROM 'uploads/bomb.xlsx'"})
    assert sql.is_error or "rows" in text_of(sql)
    assert server_rss(limits_workspace) - before < 400 * MB


async def test_enormous_lines_and_columns_are_bounded(limits_server: ClientSession, limits_workspace: Path) -> None:
    before = server_rss(limits_workspace)
    for _ in range(3):
        wide = await limits_server.call_tool(
            "file_reader", {"path": "uploads/wide.csv", "nrows": 5, "output_level": "brief"}
        )
        failed(wide, "validation_error", "TOO_MANY_COLUMNS")
        line = await limits_server.call_tool("file_reader", {"path": "uploads/oneline.txt", "output_level": "brief"})
        assert not line.is_error, text_of(line)
        full = await limits_server.call_tool("file_reader", {"path": "uploads/oneline.txt", "output_level": "full"})
        assert not full.is_error and len(text_of(full)) < 100_000
    assert server_rss(limits_workspace) - before < 300 * MB
    assert not (await limits_server.call_tool("file_reader", {"path": "uploads/a.csv"})).is_error


async def test_deep_json_and_broken_data_in_sql_get_clear_errors(limits_server: ClientSession) -> None:
    deep = await limits_server.call_tool("file_reader", {"path": "uploads/deep.json"})
    assert "nested" in failed(deep, "validation_error", "BAD_JSON")
    for query, code in (
        ("SELECT * FROM 'uploads/malformed.csv'", "BAD_DATA"),
        ("SELECT * FROM 'uploads/corrupt.parquet'", "BAD_DATA"),
        ("SELECT * FROM 'uploads/deep.json'", None),
    ):
        result = await limits_server.call_tool("query_database", {"query": query})
        text = text_of(result)
        assert result.is_error and "internal_error" not in text, text
        if code:
            assert f"Error Code: {code}" in text, text
    dup = await limits_server.call_tool(
        "query_database", {"query": "SELECT * FROM 'uploads/dup.csv'", "output_level": "full"}
    )
    text = text_of(dup)
    assert "internal_error" not in text, text
    if not dup.is_error:
        assert "a" in text and "b" in text
    twice = await limits_server.call_tool(
        "query_database",
        {
            "query": "SELECT x.k, y.k AS k2 FROM 'uploads/a.csv' x JOIN 'uploads//a.csv' y USING (k)",
            "output_level": "full",
        },
    )
    assert not twice.is_error, text_of(twice)
    assert "1,1" in text_of(twice) and "2,2" in text_of(twice)


async def test_queries_past_their_timeout_stop_and_give_their_memory_back(
    limits_server: ClientSession, limits_workspace: Path
) -> None:
    """Ten hostile queries in a row: each is interrupted at its timeout (or stopped by the memory limit), and
    they do not accumulate memory: DuckDB keeps its buffers up to its memory_limit (512 MB here), no more."""
    import anyio

    hostile = (
        "SELECT string_agg(repeat('x', 100000), ',') FROM range(200000)",
        "SELECT count(*) FROM range(100000000000) a, range(10) b WHERE a.range % 7 = b.range",
    )

    async def timed_out(sql: str) -> None:
        result = await limits_server.call_tool("query_database", {"query": sql})
        text = text_of(result)
        assert result.is_error and ("Error Type: timeout" in text or "OUT_OF_MEMORY" in text), text
        assert "SET threads" not in text  # DuckDB's advice names settings no query may change

    for sql in hostile:
        await timed_out(sql)
    await anyio.sleep(1.0)
    warmed = server_rss(limits_workspace)
    for sql in 4 * hostile:  # with the warm-up round, ten hostile calls in a row
        await timed_out(sql)
    await anyio.sleep(1.0)
    assert server_rss(limits_workspace) - warmed < 512 * MB
    assert not (await limits_server.call_tool("query_database", {"query": "SELECT 1"})).is_error


async def test_the_artifact_store_cap_holds_on_every_write(
    limits_server: ClientSession, limits_workspace: Path
) -> None:
    store = limits_workspace / "artifacts"

    def stored() -> int:
        return sum(p.stat().st_size for p in store.glob("artifact_*") if not p.name.endswith(".meta.json"))

    for i in range(8):
        sql = f"SELECT range AS i, md5((range + {i * 1000003})::VARCHAR) AS h FROM range(30000)"
        result = await limits_server.call_tool(
            "query_database", {"query": sql, "max_rows": 10, "output_level": "brief"}
        )
        assert not result.is_error, text_of(result)
        assert stored() <= 4 * MB
    big = await limits_server.call_tool(
        "query_database",
        {"query": "SELECT md5(range::VARCHAR) || md5((range*7)::VARCHAR) AS h FROM range(2000000)", "max_rows": 10},
    )
    text = text_of(big)
    assert "exceeds the artifact size limit" in text or "ARTIFACT_TOO_LARGE" in text, text
    assert stored() <= 4 * MB


async def test_the_code_store_is_capped(limits_server: ClientSession, limits_workspace: Path) -> None:
    code_dir = limits_workspace / "code"
    for i in range(12):
        result = await limits_server.call_tool("run_python", {"code": f"# cell {i}\nx = {i}\n" + "#" * (300 * 1024)})
        assert not result.is_error, text_of(result)
    total = sum(p.stat().st_size for p in code_dir.iterdir() if p.is_file())
    assert total <= 2 * MB
    assert json.loads((code_dir / next(p.name for p in code_dir.glob("*.meta.json"))).read_text())["id"]
