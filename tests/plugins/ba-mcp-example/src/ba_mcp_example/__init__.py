"""An example ba-mcp plug-in (docs/writing-an-engine.md, docs/writing-a-tool.md): what its entry points name.

* ``FILEDIR`` — the engine ``filedir``: a folder of CSV and Parquet files, each file a table, read by DuckDB
  (``databases: {lake: {url: "filedir:///lake"}}``; its code in ``folder.py``);
* ``RECORDS`` — the file format ``records``: ``.rec`` files of ``field: value`` records, read as a table
  (``records.py``, run inside ba-mcp's engine worker);
* ``business_days`` — a tool counting the working days of each month between two dates (``business_days.py``);
* ``SKILLS`` — a folder of skills.

This module stays small: the connection and engine workers import it (as the package of ``folder.py``,
``records.py``) too."""

from __future__ import annotations

from pathlib import Path

from ba_mcp import EngineInfo, FormatInfo

FILEDIR = EngineInfo(
    kind="filedir",  # databases.<name>.kind, and the entry point's name
    label="Folder of files",  # how the tool's description, the schema resource and errors name it
    module="ba_mcp_example.folder",  # where its ENGINE is
    schemes=("filedir:",),  # a URL starting so is this engine's
    dialect="duckdb",  # the metrics compiler may write SQL for it
    files=True,  # its database is a folder on this machine, named by its URL's path
)

RECORDS = FormatInfo(
    name="records",  # the entry point's name; what file_reader says it read the file as
    suffixes=(".rec",),  # files ending so are read as it (a built-in format's suffix is refused)
    reader="ba_mcp_example.records:read",  # the function reading one file, in the engine worker
    label="Records (field: value)",
)

SKILLS = Path(__file__).parent / "skills"
