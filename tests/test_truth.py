"""What the model reads is true (issue 19): summaries describe the whole result or say what they cover;
a result is cut in one place and continued in one way; files in a read root can be discovered; results
can be exported where the analyst sees them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import in_process, meta_of, text_of

pytestmark = pytest.mark.anyio


def summary_line(text: str, column: str) -> str:
    match = re.search(rf"^- {column}: [^—]+— (.*)$", text, flags=re.M)
    assert match, text
    return match.group(1)


def delays_workspace(root: Path) -> tuple[Path, list[int]]:
    """5,000 flights whose first 1,000 are the long delays: a prefix that is nothing like the whole."""
    ws = root / "ws"
    (ws / "uploads").mkdir(parents=True)
    delays = [270 + (i % 131) for i in range(1000)] + [i % 101 for i in range(4000)]
    lines = ["flight,carrier,dep_delay"] + [f"{i},{'AA' if i < 1000 else 'UA'},{d}" for i, d in enumerate(delays)]
    (ws / "uploads" / "delays.csv").write_text("\n".join(lines) + "\n")
    return ws, delays


async def test_a_query_cut_at_max_rows_is_summarised_over_its_whole_result(tmp_path: Path) -> None:
    ws, delays = delays_workspace(tmp_path)
    async with in_process(ws, ["query_database", "file_reader"]) as client:
        result = await client.call_tool(
            "query_database", {"query": "SELECT * FROM upload_delays ORDER BY flight", "max_rows": 1000}
        )
        text = text_of(result)
        assert not result.is_error and "summary of all 5,000 rows" in text, text
        mean = sum(delays) / len(delays)
        assert summary_line(text, "dep_delay").startswith(f"min 0, mean {mean:.6g}, max 400"), text
        assert summary_line(text, "carrier").startswith("2 distinct; top 'UA' ×4000"), text
        assert summary_line(text, "flight").startswith("min 0, mean 2499.5, max 4999; 5000 distinct")
        # A window of a file (the rest not read) says that its summaries cover only its rows.
        window = await client.call_tool("file_reader", {"path": "upload_delays", "nrows": 100})
        text = text_of(window)
        assert "summary of rows 0–99 only" in text and summary_line(text, "dep_delay").startswith("min 270"), text
        # A result shown whole keeps its plain heading.
        small = await client.call_tool("query_database", {"query": "SELECT * FROM upload_delays LIMIT 60"})
        assert "Columns (name: type — summary):" in text_of(small)


async def test_rows_asked_for_are_shown_whole_with_the_complete_result_named_once(tmp_path: Path) -> None:
    ws, _ = delays_workspace(tmp_path)
    async with in_process(ws, ["query_database", "file_reader"]) as client:
        result = await client.call_tool("query_database", {"query": "SELECT * FROM upload_delays", "max_rows": 20})
        text = text_of(result)
        rows = text.split("Rows (csv):\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert rows[0] == "flight,carrier,dep_delay" and len([r for r in rows[1:] if r[:1].isdigit()]) == 20, text
        (aid,) = set(re.findall(r"artifact_[0-9a-f]{12}", text))
        assert "20 of 5,000 rows shown" in text and meta_of(result)["artifact_id"] == aid
        stored = await client.call_tool("file_reader", {"path": aid, "output_level": "brief"})
        assert "5,000 rows" in text_of(stored)
