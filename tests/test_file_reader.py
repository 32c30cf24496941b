"""file_reader formats, levels, artifacts and resources through an MCP client talking to the server in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from mcp.types import ResourceTemplateReference

from tests.conftest import meta_of, text_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def session(default_server: Client) -> Client:
    """The run's shared server in the default configuration (conftest: default_server): these tests only read the
    standard workspace."""
    return default_server


@pytest.fixture
def workspace(standard_workspace: Path) -> Path:
    return standard_workspace


async def read(session: Client, **arguments):
    result = await session.call_tool("file_reader", arguments)
    assert not result.is_error, text_of(result)
    return result


async def test_tool_is_listed_with_schema_annotations_and_description(session: Client) -> None:
    tools = {t.name: t for t in (await session.list_tools()).tools}
    tool = tools["file_reader"]
    props = tool.input_schema["properties"]
    assert tool.input_schema["required"] == ["path"]
    assert set(props) == {"path", "format", "encoding", "nrows", "offset", "sheet", "output_level"}
    assert tool.annotations.read_only_hint is True and tool.annotations.open_world_hint is False
    assert "artifact" in tool.description and "Levels" not in tool.description  # levels: server instructions
    assert props["output_level"]["enum"] == ["brief", "standard", "full"]


async def test_csv_standard_has_schema_summary_preview_and_artifact(session: Client) -> None:
    result = await read(session, path="upload_sales")
    text = text_of(result)
    lines = text.splitlines()
    assert lines[0] == "file_reader: table (standard)"
    assert "50 rows × 5 columns" in lines[1]
    assert "- amount: float64 — min" in text and "1 nulls" in text
    assert "- order_date: datetime" in text  # ISO dates become dates
    sc = meta_of(result)
    assert sc["rows"] == 50 and sc["shown_rows"] == 10 and sc["truncated"] is True
    aid = sc["artifact_id"]
    assert aid.startswith("artifact_") and aid in text
    links = [b for b in result.content if b.type == "resource_link"]
    assert [link.uri for link in links] == [f"artifact://{aid}"]
    # the artifact is the complete table, readable by id through the same tool
    whole = await read(session, path=aid, output_level="full")
    assert meta_of(whole)["rows"] == 50 and meta_of(whole)["truncated"] is False
    assert '"late, partial"' in text_of(whole)  # CSV quoting kept; empty notes stay distinguishable
    resource = await session.read_resource(f"artifact://{aid}")
    assert resource.contents[0].mime_type == "text/csv"
    assert resource.contents[0].text.count("\n") == 50


async def test_brief_is_one_line_with_the_artifact_id(session: Client) -> None:
    result = await read(session, path="uploads/sales.csv", output_level="brief")
    lines = text_of(result).splitlines()
    assert len(lines) == 2
    assert "50 rows × 5 columns" in lines[1] and "order_id, order_date, region, amount, note" in lines[1]
    assert meta_of(result)["artifact_id"] in lines[1]


async def test_full_inlines_every_row_in_csv(session: Client) -> None:
    result = await read(session, path="uploads/sales.csv", output_level="full")
    text = text_of(result)
    assert "Rows (csv):" in text and meta_of(result)["truncated"] is False
    assert meta_of(result).get("artifact_id") is None  # complete inline: nothing stored
    assert len([line for line in text.splitlines() if line[:1].isdigit()]) == 50
    assert not [b for b in result.content if b.type == "resource_link"]


async def test_nrows_and_offset_window_a_csv(session: Client) -> None:
    result = await read(session, path="uploads/sales.csv", offset=45, nrows=3, output_level="full")
    sc = meta_of(result)
    assert (sc["offset"], sc["rows"], sc["more_in_source"], sc["next_offset"]) == (45, 3, True, 48)
    assert "offset=48" in text_of(result)
    last = await read(session, path="uploads/sales.csv", offset=48, nrows=10, output_level="full")
    assert meta_of(last)["rows"] == 2 and meta_of(last)["more_in_source"] is False


async def test_ragged_rows_keep_their_extra_values(session: Client) -> None:
    result = await read(session, path="uploads/ragged.csv", output_level="full")
    text = text_of(result)
    assert "extra_1" in text and "extra_2" in text and "more fields than the header" in text
    assert "4,5,6,7,8" in text and "9,10,NULL,NULL" in text


async def test_latin1_and_utf16_are_detected(session: Client) -> None:
    latin = await read(session, path="uploads/latin1.csv", output_level="full")
    assert "Málaga" in text_of(latin) and "Zürich" in text_of(latin)
    assert meta_of(latin)["meta"]["encoding"] in ("cp1252", "iso8859-1", "latin-1", "cp1250")
    utf16 = await read(session, path="uploads/utf16.txt")
    assert "Résumé of Q3" in text_of(utf16) and meta_of(utf16)["meta"]["encoding"] == "utf-16"
    forced = await read(session, path="uploads/latin1.csv", encoding="latin-1", output_level="full")
    assert "François" in text_of(forced)


async def test_empty_file(session: Client) -> None:
    result = await read(session, path="uploads/empty.csv")
    assert "empty" in text_of(result) and meta_of(result)["rows"] == 0


async def test_excel_sheets(session: Client, workspace: Path) -> None:
    first = await read(session, path="uploads/book.xlsx")
    assert meta_of(first)["meta"]["sheets"] == ["Revenue", "Costs"]
    assert meta_of(first)["rows"] == 12 and "'Costs'" in text_of(first)
    costs = await read(session, path="uploads/book.xlsx", sheet="Costs", output_level="full")
    assert "salaries,42000" in text_of(costs)
    by_index = await read(session, path="uploads/book.xlsx", sheet=1, output_level="brief")
    assert "2 rows × 2 columns" in text_of(by_index)
    missing = await session.call_tool("file_reader", {"path": "uploads/book.xlsx", "sheet": "Profit"})
    assert missing.is_error and "Revenue" in text_of(missing) and "not_found" in text_of(missing)


async def test_json_tabular_and_not(session: Client) -> None:
    table = await read(session, path="uploads/records.json", output_level="full")
    assert meta_of(table)["kind"] == "table" and meta_of(table)["rows"] == 30
    assert "geo.lat" in text_of(table) and '"[""x"",""y""]"' in text_of(table)
    doc = await read(session, path="uploads/config.json")
    assert meta_of(doc)["kind"] == "json"
    assert "object with 3 keys: name, targets, owners" in text_of(doc)
    full = await read(session, path="uploads/config.json", output_level="full")
    assert meta_of(full)["value"]["targets"] == {"q1": 10, "q2": 12}


async def test_jsonl_and_parquet_windows(session: Client) -> None:
    jl = await read(session, path="uploads/events.jsonl", offset=10, nrows=5, output_level="full")
    assert meta_of(jl)["rows"] == 5 and meta_of(jl)["more_in_source"]
    assert text_of(jl).splitlines()[4].startswith("seq,kind") and "10,view" in text_of(jl)
    pq = await read(session, path="uploads/facts.parquet", offset=250, nrows=120, output_level="brief")
    sc = meta_of(pq)
    assert (sc["rows"], sc["total_rows"], sc["offset"], sc["next_offset"]) == (120, 1000, 250, 370)
    full = await read(session, path="uploads/facts.parquet", offset=995, output_level="full")
    assert "995,497.5" in text_of(full) and meta_of(full)["more_in_source"] is False


async def test_markdown_is_windowed_with_outline_and_continuation(session: Client) -> None:
    result = await read(session, path="uploads/report.md")
    sc = meta_of(result)
    text = text_of(result)
    assert sc["kind"] == "document" and sc["truncated"] is True and sc["tokens"] > 2000
    assert "Outline: Quarterly report |   Summary |   Appendix" in text
    nxt = sc["next_offset"]
    assert f"offset={nxt}" in text and sc["artifact_id"] in text
    more = await read(session, path="uploads/report.md", offset=nxt, nrows=2)
    assert meta_of(more)["offset"] == nxt
    brief = await read(session, path="uploads/report.md", output_level="brief")
    assert "Starts: # Quarterly report" in text_of(brief)


async def test_code_and_sql_are_documents(session: Client) -> None:
    py = await read(session, path="uploads/script.py", output_level="full")
    assert meta_of(py)["mime"] == "text/x-python" and "def total" in text_of(py)
    sql = await read(session, path="uploads/query.sql", output_level="full")
    assert "GROUP BY region" in text_of(sql)


async def test_sheet_on_a_csv_is_an_error(session: Client) -> None:
    result = await session.call_tool("file_reader", {"path": "uploads/sales.csv", "sheet": "x"})
    assert result.is_error and "Excel" in text_of(result)


async def test_resources_files_metrics_and_completion(session: Client) -> None:
    listed = {r.uri for r in (await session.list_resources()).resources}
    assert {"ba://files", "ba://metrics"} <= listed
    templates = {t.uri_template for t in (await session.list_resource_templates()).resource_templates}
    assert {"artifact://{id}", "upload://{name}"} <= templates
    await read(session, path="upload_sales", output_level="brief")
    files = (await session.read_resource("ba://files")).contents[0].text
    assert "[upload_sales] sales.csv (csv)" in files and "[artifact_" in files
    metrics = json.loads((await session.read_resource("ba://metrics")).contents[0].text)
    reader = metrics["session"]["tools"]["file_reader"]
    assert reader["calls"] > 5 and reader["cache_hit_rate"] > 0
    done = await session.complete(
        ResourceTemplateReference(uri="upload://{name}"), {"name": "name", "value": "upload_sa"}
    )
    assert done.completion.values == ["upload_sales"]
    arts = await session.complete(
        ResourceTemplateReference(uri="artifact://{id}"), {"name": "id", "value": "artifact_"}
    )
    assert arts.completion.values and all(v.startswith("artifact_") for v in arts.completion.values)
    upload = await session.read_resource("upload://upload_sales")
    assert upload.contents[0].text.startswith("order_id,order_date")
