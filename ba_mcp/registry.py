"""The tables of what ba-mcp serves, the only places their facts live.

**The database engines**: one table, the only place their facts live — kind, label, the module that
implements it (``databases/<kind>.py``, an ``Engine``), the URL schemes and ADBC driver that select it, the SQL
dialect the metrics compiler writes for it (sqlglot's name).

A configured database's engine is chosen by its ``driver`` first, then its URL's scheme, else DuckDB (a file, or
the embedded demo); a URL no engine claims, with a driver no engine names, is served by the generic ADBC engine.

**Adding an engine** is one module and one line here: write ``databases/<kind>.py`` with an ``ENGINE`` object
(``ConnectedEngine`` from ``databases/connector.py`` gives the defaults of any ADBC driver: override the hooks the
engine needs — the read-only frame, the catalog, its error texts), then ``register(EngineInfo(…))`` below. An engine
outside the package is a plug-in: an installed package's ``ba_mcp.engines`` entry point names its ``EngineInfo``,
read into this table when the operator enables the package (``plugins.py``; docs/writing-an-engine.md). Nothing
else names an engine.

**The file formats**: each format's name and the file suffixes read as it (``FormatInfo``) — the built-in ones,
read by ``formats/`` (whose ``formats.table`` adds media types and the formats of artifacts and downloads), and
those installed packages add by ``ba_mcp.formats`` entry points (``plugins.py``), which never take a built-in's
name or suffix.

**The tools**: one table of names, each with the class that implements it (``"module:Class"``, a ``Tool``). The
class carries everything else: its ``Settings`` (the model of ``tools.<name>``: its knobs, their defaults and
descriptions — ``settings.tool(name)`` validates the section with it), its view (``Tool.view``), and
``build(services)``, which constructs it from the App's services (or returns None when it has nothing to serve).
**Adding a tool** is one module in ``tools/`` and one ``register_tool`` line below (an embedding application's
tool: ``App(settings, [*tool_names(), MyTool()])`` instead; another package's: its ``ba_mcp.tools`` entry point,
``plugins.py``, docs/writing-a-tool.md). Nothing else needs a line: the settings, their
documentation (``ba-mcp config tools``), the App and the views derive from the table and the class.

Ground floor: this module imports nothing of ba_mcp, so the settings and the metrics room read it (the engines'
modules and the tools' classes are imported by name, on first use: ``databases.base.engine_of``, ``tool_class``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class EngineInfo:
    kind: str  # the value of databases.<name>.kind
    label: str  # how people name it: in the tool's description, the schema resource, errors, the doctor
    module: str  # where its Engine lives (its ENGINE object)
    schemes: tuple[str, ...] = ()  # URL prefixes that select it
    driver: str | None = None  # the ADBC driver package it is reached with
    dialect: str | None = None  # sqlglot's dialect for the metrics compiler (None: metrics cannot target it)
    # time grains as SQL (``__x__`` the value) where sqlglot writes no DATE_TRUNC for the dialect
    grains: Mapping[str, str] = field(default_factory=dict)
    commands: tuple[str, ...] = ()  # ba-mcp commands its module adds (``ENGINE.add_commands``)
    # MetricFlow's SQL for it (dbt projects' metrics): "module:Renderer:SqlEngine member" ('' : none)
    metricflow: str = ""
    # its database is a file or a folder on this machine, named by its URL's path (``local_path``; its engine a
    # ``databases.connector.LocalEngine``): a project's file judges the path, not the URL's shape
    files: bool = False
    plugin: str = ""  # the installed package it came from ('' : ba-mcp's own, or an embedder's; ``plugins.py``)


_ENGINES: dict[str, EngineInfo] = {}


@dataclass(frozen=True)
class ToolInfo:
    name: str  # the tool's name: in tools/list, and its settings' section (tools.<name>)
    tool: str  # where its class lives: "module:Class"
    plugin: str = ""  # the installed package it came from ('' : ba-mcp's own; ``plugins.py``)


_TOOLS: dict[str, ToolInfo] = {}


@dataclass(frozen=True)
class FormatInfo:
    """A file format: files whose name ends in one of its ``suffixes`` are read as it, inside the killable engine
    worker. A built-in one is read by its family in ``formats/`` (``_read_<name>``); an installed package's (a
    ``ba_mcp.formats`` entry point names one; ``plugins.py``) by its ``reader``."""

    name: str  # the format's name: file_reader's ``format``, and what a folder's listing says a file is
    suffixes: tuple[str, ...]  # lower-case file name endings with their dot (".rec"); each one format's only
    # a plug-in's "module:function": ``function(reading: ba_mcp.Reading) -> RawResult`` — the source held open, the
    # window, the bounds (``formats:``) and the helpers that make a windowed Table; imported in the worker by name
    # ('' : a built-in format, read by ``formats/``)
    reader: str = ""
    label: str = ""  # how people name it (``ba-mcp plugins``)
    plugin: str = ""  # the installed package it came from ('' : ba-mcp's own; ``plugins.py``)


_FORMATS: dict[str, FormatInfo] = {}


def register_format(info: FormatInfo) -> None:
    """Add (or replace) a file format."""
    _FORMATS[info.name] = info


def unregister_format(name: str) -> None:
    _FORMATS.pop(name, None)


def formats() -> list[FormatInfo]:
    """Every file format read by its suffix: the built-in ones, then the enabled plug-ins'."""
    return list(_FORMATS.values())


def format_info(name: str) -> FormatInfo | None:
    return _FORMATS.get(name)


def format_of(suffix: str) -> FormatInfo | None:
    """The format a file name ending in ``suffix`` (with its dot; any case) is read as, if any."""
    suffix = suffix.lower()
    return next((f for f in _FORMATS.values() if suffix in f.suffixes), None)


def register_tool(info: ToolInfo) -> None:
    """Add (or replace) a built-in tool; tools/list lists them in the order they were registered."""
    _TOOLS[info.name] = info


def unregister_tool(name: str) -> None:
    _TOOLS.pop(name, None)


def tool_names() -> list[str]:
    return list(_TOOLS)


def tool_info(name: str) -> ToolInfo | None:
    return _TOOLS.get(name)


def tool_class(name: str) -> Any:
    """The class of the built-in tool ``name`` (its module imported on first use); KeyError when there is none."""
    import importlib

    module, _, attribute = _TOOLS[name].tool.partition(":")
    return getattr(importlib.import_module(module), attribute)


def register(info: EngineInfo) -> None:
    """Add (or replace) an engine."""
    _ENGINES[info.kind] = info


def unregister(kind: str) -> None:
    _ENGINES.pop(kind, None)


def engines() -> list[EngineInfo]:
    return list(_ENGINES.values())


def info(kind: str) -> EngineInfo:
    return _ENGINES.get(kind) or _ENGINES["adbc"]


def kind_of(url: str, driver: str | None) -> str:
    """The engine of a configured database: by its driver, else its URL's scheme; DuckDB with neither; the
    generic ADBC engine otherwise."""
    if driver:
        return next((e.kind for e in _ENGINES.values() if e.driver == driver), "adbc")
    if not url:
        return "duckdb"
    return next((e.kind for e in _ENGINES.values() if url.startswith(e.schemes)), "adbc")


def local_path(url: str, root: Path) -> Path:
    """The file or folder a file engine's URL names, as the engine opens it: ``scheme:///relative`` (to ``root``),
    ``scheme:////absolute``, percent-decoding undone and ``~`` expanded. A URL with a host part
    (``sqlite://x/…``, ``sqlite://~/…``, ``sqlite://%2Ftmp…``) is refused: a file has no host, and reading the host
    as a path is how such a URL would name any file (BAD_DATABASE_URL, saying the form to use)."""
    import urllib.parse

    from ba_mcp.errors import ErrorType, ToolFailure

    scheme, colon, rest = url.partition(":")
    if not colon:
        scheme, rest = "sqlite", url
    if rest.startswith("//") and not rest.startswith("///"):
        raise ToolFailure(
            ErrorType.INVALID_PARAMETERS,
            "BAD_DATABASE_URL",
            f"names a host ({scheme}://<host>/…), which a {scheme} file has none of",
            f"write {scheme}:///relative/to/the/workspace.db (three slashes) or {scheme}:////absolute/path.db (four)",
        )
    rest = rest[3:] if rest.startswith("///") else rest
    path = Path(urllib.parse.unquote(rest.split("?", 1)[0])).expanduser()
    return path if path.is_absolute() else root / path


def url_problem(url: str, driver: str | None) -> tuple[str, str] | None:
    """Why a configured database's URL reaches no engine — (what is wrong, what to write instead) — or None. Only
    that database is unavailable (the server starts, its other databases and the files work); nothing of the URL
    is quoted: it may hold a password. Without a driver: a URL with no scheme (``127.0.0.1:5432/aw``) or one no
    engine claims; with ``://``: a host with an unbalanced ``[``/``]`` or a port that is no number (one host: a
    libpq URL may list several)."""
    import urllib.parse

    if not url:
        return None
    written = "write postgresql://user:password@host:5432/database (the password percent-encoded) or sqlite:///file.db"
    if not driver and not url.startswith(tuple(schemes())):  # ``host:port/db`` and ``user:pw@host`` read as schemes
        return (
            "its URL has no scheme an engine of ba-mcp takes without a driver (postgresql://…)",
            f"{written}; another database's URL needs driver: (its ADBC driver package)",
        )
    if "://" not in url:
        return None
    try:
        parts = urllib.parse.urlsplit(url)
        netloc = parts.netloc.rpartition("@")[2]
        if "," not in netloc:
            _ = parts.port
    except ValueError as exc:
        what = "an unbalanced [ or ] in its host" if "IPv6" in str(exc) else "a port that is no number"
        return f"its URL cannot be read: {what}", f"{written}; an IPv6 host in brackets: postgresql://u@[::1]:5432/db"
    return None


def schemes() -> list[str]:
    """The URL schemes that need no driver (for the settings' message)."""
    return [s for e in _ENGINES.values() for s in e.schemes]


def dialects(databases: Mapping[str, Any]) -> dict[str, str]:
    """sqlglot's dialect per configured database (``name -> DatabaseSettings``) whose engine has one."""
    found = {name: info(conf.kind).dialect for name, conf in databases.items()}
    return {name: dialect for name, dialect in found.items() if dialect}


def metricflow_renderers() -> dict[str, str]:
    """MetricFlow's renderer per dialect (``module:Class:SqlEngine``), for the engines it writes SQL for."""
    return {e.dialect: e.metricflow for e in _ENGINES.values() if e.dialect and e.metricflow}


def grain_sql() -> dict[str, dict[str, str]]:
    """Time-grain SQL per dialect, for the dialects that need their own."""
    return {e.dialect: dict(e.grains) for e in _ENGINES.values() if e.dialect and e.grains}


for _info in (
    EngineInfo(
        "duckdb",
        "DuckDB",
        "ba_mcp.databases.duckdb",
        dialect="duckdb",
        metricflow="metricflow.sql.render.duckdb_renderer:DuckDbSqlPlanRenderer:DUCKDB",
    ),
    EngineInfo(
        "postgresql",
        "PostgreSQL",
        "ba_mcp.databases.postgresql",
        ("postgresql://", "postgres://"),
        "adbc_driver_postgresql",
        "postgres",
        metricflow="metricflow.sql.render.postgres:PostgresSQLSqlPlanRenderer:POSTGRES",
    ),
    EngineInfo(
        "sqlite",
        "SQLite",
        "ba_mcp.databases.sqlite",
        ("sqlite:",),
        "adbc_driver_sqlite",
        "sqlite",
        files=True,
        grains={
            "day": "DATE(__x__)",
            "week": "DATE(__x__, '-' || ((CAST(STRFTIME('%w', __x__) AS INTEGER) + 6) % 7) || ' days')",
            "month": "DATE(__x__, 'start of month')",
            "quarter": (
                "DATE(__x__, 'start of month', '-' || ((CAST(STRFTIME('%m', __x__) AS INTEGER) - 1) % 3) || ' months')"
            ),
            "year": "DATE(__x__, 'start of year')",
        },
    ),
    EngineInfo(
        "spark",
        "Spark",
        "ba_mcp.databases.spark",
        ("sc://",),
        "adbc_driver_spark",
        "spark",
        commands=("spark-local",),
        metricflow="metricflow.sql.render.databricks:DatabricksSqlPlanRenderer:DATABRICKS",
    ),
    EngineInfo(
        "snowflake",
        "Snowflake",
        "ba_mcp.databases.adbc",
        (),
        "adbc_driver_snowflake",
        "snowflake",
        metricflow="metricflow.sql.render.snowflake:SnowflakeSqlPlanRenderer:SNOWFLAKE",
    ),
    EngineInfo(
        "bigquery",
        "BigQuery",
        "ba_mcp.databases.adbc",
        (),
        "adbc_driver_bigquery",
        "bigquery",
        metricflow="metricflow.sql.render.big_query:BigQuerySqlPlanRenderer:BIGQUERY",
    ),
    EngineInfo("adbc", "ADBC", "ba_mcp.databases.adbc"),  # any other driver (Flight SQL, …): its own name shown
):
    register(_info)


for _tool in (
    ToolInfo("file_reader", "ba_mcp.tools.file_reader:FileReader"),
    ToolInfo("query_database", "ba_mcp.tools.query_database:QueryDatabase"),
    ToolInfo("query_metrics", "ba_mcp.tools.query_metrics:QueryMetrics"),
    ToolInfo("run_python", "ba_mcp.tools.run_python:RunPython"),
    ToolInfo("web_search", "ba_mcp.tools.web_search:WebSearch"),
    ToolInfo("web_reader", "ba_mcp.tools.web_reader:WebReader"),
    ToolInfo("save_analysis", "ba_mcp.tools.analyses:SaveAnalysis"),
    ToolInfo("run_analysis", "ba_mcp.tools.analyses:RunAnalysis"),
    ToolInfo("use_skill", "ba_mcp.tools.use_skill:UseSkill"),
):
    register_tool(_tool)


for _format in (  # the built-in formats, read by the families of ``formats/`` (``text``: a file no suffix names)
    FormatInfo("csv", (".csv",)),
    FormatInfo("tsv", (".tsv", ".tab")),
    FormatInfo("excel", (".xlsx", ".xlsm", ".xls", ".xlsb", ".ods")),
    FormatInfo("json", (".json",)),
    FormatInfo("jsonl", (".jsonl", ".ndjson")),
    FormatInfo("parquet", (".parquet", ".pq")),
    FormatInfo("markdown", (".md", ".markdown")),
    FormatInfo("python", (".py",)),
    FormatInfo("sql", (".sql",)),
    FormatInfo("image", (".png", ".jpg", ".jpeg", ".gif", ".webp")),
    FormatInfo("text", ()),
):
    register_format(_format)
