"""What the model reads is true (issue 19): summaries describe the whole result or say what they cover;
a result is cut in one place and continued in one way; files in a read root can be discovered; results
can be exported where the analyst sees them."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from tests.conftest import ba, in_process, meta_of, text_of

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


def analysis_project(root: Path) -> Path:
    """A read root nobody named the files of: data in folders, a link out of it, a secret beside it."""
    project = root / "nyc"
    (project / "flights").mkdir(parents=True)
    (project / "flights" / "2013.csv").write_text("carrier,dep_delay\nAA,5\nUA,-2\n")
    (project / "airlines.csv").write_text("carrier,name\nAA,American\nUA,United\n")
    (project / "notes.md").write_text("# Notes\n")
    (project / ".hidden").write_text("x")
    (root / "secret").mkdir()
    (root / "secret" / "salaries.csv").write_text("who,salary\nceo,912345\n")
    os.symlink(root / "secret", project / "elsewhere")
    return project


async def test_a_folder_path_lists_the_folder_and_ba_files_shows_each_read_roots_top_level(tmp_path: Path) -> None:
    import json

    project = analysis_project(tmp_path)
    env = {"BA_MCP_FILES__READ_ROOTS": json.dumps({"nyc": str(project)})}
    async with in_process(tmp_path / "ws", ["file_reader"], **env) as client:
        listed = await client.call_tool("file_reader", {"path": "nyc/", "output_level": "full"})
        text = text_of(listed)
        assert not listed.is_error and "directory nyc/: 2 files (1 csv, 1 markdown), 1 folders" in text, text
        assert "nyc/airlines.csv,file,csv,35," in text and "nyc/flights/,directory" in text
        assert "nyc/elsewhere,link" in text and ".hidden" not in text and "salaries" not in text
        assert str(tmp_path) not in text
        inner = text_of(await client.call_tool("file_reader", {"path": "nyc/flights", "output_level": "full"}))
        assert "nyc/flights/2013.csv,file,csv" in inner
        brief = text_of(await client.call_tool("file_reader", {"path": "nyc/", "output_level": "brief"}))
        assert "2 files (1 csv, 1 markdown), 1 folders" in brief
        page = text_of(await client.call_tool("file_reader", {"path": "nyc/", "nrows": 2, "output_level": "full"}))
        assert "offset=2" in page and "nyc/notes.md" not in page  # paginated, continued by offset
        read = await client.call_tool("file_reader", {"path": "nyc/flights/2013.csv", "output_level": "full"})
        assert "AA,5" in text_of(read)
        for escape in ("nyc/elsewhere/", "nyc/../", "nyc/elsewhere/salaries.csv"):
            refused = await client.call_tool("file_reader", {"path": escape})
            assert refused.is_error and "Error Type: permission_denied" in text_of(refused), (escape, text_of(refused))
        files = await client.read_resource("ba://files")
        listing = files.contents[0].text  # type: ignore[union-attr]
        assert "nyc/ — 4 entries" in listing and "nyc/airlines.csv (file) | 35 B" in listing, listing
        assert "nyc/flights/ (directory)" in listing and "salaries" not in listing


# -- exports ------------------------------------------------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="run_python's sandbox is Linux-specific")
async def test_exports_land_in_the_export_folder_only_and_never_overwrite_unasked(tmp_path: Path) -> None:
    from openpyxl import load_workbook

    ws, exports, outside = tmp_path / "ws", tmp_path / "ba-exports", tmp_path / "outside"
    exports.mkdir()
    outside.mkdir()
    (outside / "kept.csv").write_text("untouched\n")
    os.symlink(outside, exports / "away")
    os.symlink(outside / "kept.csv", exports / "link.csv")
    async with in_process(ws, None, BA_MCP_FILES__EXPORT_DIR=str(exports)) as s:

        async def py(code: str) -> str:
            return text_of(await s.call_tool("run_python", {"code": code, "output_level": "full"}))

        made = await py(
            "import pandas as pd\ndf = pd.DataFrame({'region': ['North', 'South'], 'revenue': [10.5, 32.0]})\n"
            "export(df, 'reports/q3.xlsx')"
        )
        assert "ba-exports/reports/q3.xlsx" in made and str(tmp_path) not in made, made
        sheet = load_workbook(exports / "reports" / "q3.xlsx").active
        assert [list(r) for r in sheet.iter_rows(values_only=True)] == [  # type: ignore[union-attr]
            ["region", "revenue"],
            ["North", 10.5],
            ["South", 32.0],
        ]
        again = await py("export(df, 'reports/q3.xlsx')")
        assert "already exists" in again and "overwrite=True" in again, again
        assert "ba-exports/reports/q3.xlsx" in await py("export(df.head(1), 'reports/q3.xlsx', overwrite=True)")
        assert load_workbook(exports / "reports" / "q3.xlsx").active.max_row == 2  # type: ignore[union-attr]
        for escape in ("../escape.csv", "/tmp/escape.csv", "away/x.csv", "reports/../../escape.csv"):
            refused = await py(f"export(df, {escape!r})")
            assert "HelperError" in refused, (escape, refused)
        replaced = await py("export(df, 'link.csv', overwrite=True)")  # the link is replaced, not followed
        assert "ba-exports/link.csv" in replaced and (outside / "kept.csv").read_text() == "untouched\n"
        assert not (exports / "link.csv").is_symlink() and "North" in (exports / "link.csv").read_text()
        assert sorted(p.name for p in outside.iterdir()) == ["kept.csv"] and not (tmp_path / "escape.csv").exists()
        # An artifact (a query result) as CSV, Parquet and Markdown; a figure as PNG.
        query = await s.call_tool("query_database", {"query": "SELECT range AS a FROM range(5)", "max_rows": 1})
        aid = meta_of(query)["artifact_id"]
        for name in ("t.csv", "t.parquet", "t.md"):
            assert f"ba-exports/{name}" in await py(f"export({aid!r}, {name!r})")
        assert (exports / "t.csv").read_text().split() == ['"a"', "0", "1", "2", "3", "4"]
        assert (exports / "t.md").read_text().startswith("|a|\n|-|\n|0|")
        png = await py("import matplotlib.pyplot as plt\nfig = plt.figure()\nplt.plot([1, 2])\nexport(fig, 'c.png')")
        assert "ba-exports/c.png" in png and (exports / "c.png").read_bytes()[:4] == b"\x89PNG"
        assert "cannot be exported as .png" in await py("export(df, 'table.png')")
    # The command line writes an artifact there too.
    stored = next(p.name.split(".")[0] for p in (ws / "artifacts").glob("artifact_*.parquet"))
    env = {"BA_MCP_FILES__EXPORT_DIR": str(exports)}
    cli, twice = (ba("artifacts", "export", stored, "cli/out.csv", workspace=ws, env=env) for _ in range(2))
    assert cli.returncode == 0 and (exports / "cli" / "out.csv").is_file(), cli.stderr
    assert twice.returncode == 1 and "already exists" in twice.stderr


async def test_an_excel_sheet_is_counted_and_typed_as_a_whole_whatever_the_window(tmp_path: Path) -> None:
    from openpyxl import Workbook

    ws = tmp_path / "ws"
    (ws / "uploads").mkdir(parents=True)
    book = Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.append(["flight", "tailnum"])
    for i in range(3322):  # the first rows' tail numbers look like numbers, later ones are text
        sheet.append([i, str(1000 + i) if i < 50 else f"N{i}"])
    book.save(ws / "uploads" / "flights.xlsx")
    async with in_process(ws, ["file_reader"]) as client:
        types = set()
        for window in ({"nrows": 10}, {"nrows": 10, "offset": 3000}, {}):
            result = await client.call_tool("file_reader", {"path": "upload_flights", **window})
            text = text_of(result)
            assert meta_of(result)["total_rows"] == 3322, text
            types.add(next(c["type"] for c in meta_of(result)["columns"] if c["name"] == "tailnum"))
        assert len(types) == 1, types


async def test_a_query_on_a_file_is_named_for_the_file_and_its_errors_point_at_the_file(tmp_path: Path) -> None:
    ws, _ = delays_workspace(tmp_path)
    async with in_process(ws, ["query_database"]) as client:
        on_file = await client.call_tool("query_database", {"query": "SELECT count(*) AS n FROM upload_delays"})
        assert "query on upload_delays: 1 rows" in text_of(on_file), text_of(on_file)
        on_demo = await client.call_tool("query_database", {"query": "SELECT count(*) AS n FROM regions"})
        assert "query on demo: 1 rows" in text_of(on_demo)
        wrong = await client.call_tool("query_database", {"query": "SELECT nope FROM upload_delays"})
        text = text_of(wrong)
        assert wrong.is_error and "DESCRIBE SELECT * FROM upload_delays" in text and "db://demo" not in text, text


async def test_an_export_folder_that_is_a_link_is_never_followed(tmp_path: Path) -> None:
    """Issue 34 item 10: a project shipping `ba-exports` as a symbolic link to another project's folder could
    have `export(…, overwrite=True)` replace that project's README.md."""
    ws, project, other = tmp_path / "ws", tmp_path / "project", tmp_path / "other"
    project.mkdir()
    other.mkdir()
    (other / "README.md").write_text("the other project's readme\n")
    os.symlink(other, project / "ba-exports")
    async with in_process(ws, None, BA_MCP_FILES__EXPORT_DIR=str(project / "ba-exports")) as s:
        result = await s.call_tool("run_python", {"code": "export('planted', 'README.md', overwrite=True)"})
        said = text_of(result)
    assert "symbolic link" in said, said
    assert (other / "README.md").read_text() == "the other project's readme\n"
    assert sorted(p.name for p in other.iterdir()) == ["README.md"]
