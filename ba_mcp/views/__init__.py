"""Results as interactive views in the host: MCP Apps (``io.modelcontextprotocol/ui``, docs/views.md).

When the client declares the extension (``capabilities.extensions["io.modelcontextprotocol/ui"]`` with the
``text/html;profile=mcp-app`` MIME type — in the 2025-11-25 handshake as in 2026-07-28), and only then:

- ``tools/list`` names a view on the tools whose results are tables, figures or a report — ``_meta.ui.resourceUri``
  and the flat ``_meta["ui/resourceUri"]`` that hosts of the earlier draft read (what the official server helper
  ``registerAppTool`` writes) — and lists ``view_rows``, an app-only tool (``visibility: ["app"]``: hosts never show
  it to the model, so it is outside the model's tools/list budget) the view pages, sorts and filters the complete
  artifact with, through the host;
- ``resources/list`` and ``resources/read`` serve the two views, self-contained HTML (``views/view.html``: no
  script, style or font from the network; a CSP that allows only its own inline script, by hash);
- a table a result shows whole (no artifact to page) travels to the view in the result's ``_meta``
  (``dev.ba-mcp/view``), never in its text.

Another client gets exactly what it got before: the same tools/list, resources and result text.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import math
import time
import uuid
from functools import cache
from importlib import resources as package_files
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID, client_supports_apps
from mcp.server.extension import Extension
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.types import CallToolResult, Resource, TextContent, Tool, ToolAnnotations

from ba_mcp import callers
from ba_mcp.errors import ErrorType, ToolFailure, format_error
from ba_mcp.ids import ARTIFACT_ID
from ba_mcp.tool import Tool as BaTool
from ba_mcp.tool import ToolContext, run_bounded

if TYPE_CHECKING:
    import pyarrow as pa

    from ba_mcp.app import App

TABLE_VIEW = "ui://ba-mcp/result.html"
REPORT_VIEW = "ui://ba-mcp/report.html"
VIEWS = {"table": TABLE_VIEW, "report": REPORT_VIEW}  # a tool's ``view`` (``Tool.view``) and its page
ROWS_TOOL = "view_rows"
VIEW_META = "dev.ba-mcp/view"  # a result's _meta key: the tables it shows whole, for the view
PAGE_MAX = 1000
OFFSET_MAX = 10**15  # a row number no artifact reaches (DuckDB's OFFSET is a BIGINT)
FILTER_MAX = 200
NAME_MAX = 10_000  # characters of a column's name (order_by, chart)
INLINE_MAX = 1000  # rows of a whole table sent in a result's _meta


class ViewsExtension(Extension):
    """Advertises MCP Apps in the server's capabilities (kept by the 2026-07-28 handshake; the 2025-11-25 schema
    has no such field, and hosts of that version find a view by the tools' ``_meta``)."""

    identifier = EXTENSION_ID

    def settings(self) -> dict[str, Any]:
        return {"mimeTypes": [APP_MIME_TYPE]}


def supports(ctx: Any) -> bool:
    """Whether the calling client declared MCP Apps (the extension and its HTML MIME type)."""
    try:
        return client_supports_apps(ctx)
    except AttributeError:  # no session (an in-process call): no host to render a view
        return False


def ui_meta(uri: str, visibility: list[str] | None = None) -> dict[str, Any]:
    ui: dict[str, Any] = {"resourceUri": uri}
    if visibility:
        ui["visibility"] = visibility
    return {"ui": ui, "ui/resourceUri": uri}


ROWS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "artifact_id": {"type": "string"},
        "offset": {"type": "integer", "minimum": 0, "maximum": OFFSET_MAX},
        "limit": {"type": "integer", "minimum": 1, "maximum": PAGE_MAX},
        "order_by": {"type": "string"},
        "descending": {"type": "boolean"},
        "filter": {"type": "string", "maxLength": FILTER_MAX},
        "chart": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"x": {"type": "string"}, "y": {"type": "string"}, "series": {"type": "string"}},
            "required": ["x", "y"],
        },
    },
    "required": ["artifact_id"],
}
CHART_POINTS = 500  # distinct x values a chart draws; a longer time axis is bucketed by a coarser grain
CHART_CATEGORIES = 30  # bars of a category axis: the largest, the rest said
CHART_SERIES = 8  # lines or bars per x: the largest, the rest as "other"
_COARSER = {"day": "week", "week": "month", "month": "quarter", "quarter": "year"}
_MEAN_LIKE = ("pct", "percent", "rate", "ratio", "share", "avg", "average", "mean", "median", "per_", "price")


def rows_tool() -> Tool:
    return Tool(
        name=ROWS_TOOL,
        title="Rows of a result (for its view)",
        description="A page of a table artifact, sorted and filtered, for the result's interactive view.",
        input_schema=ROWS_SCHEMA,
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        meta=ui_meta(TABLE_VIEW, ["app"]),
    )


@cache
def page_html(mode: str) -> str:
    """The view's HTML for ``mode`` (``result`` or ``report``): one self-contained page; its CSP admits its own
    inline script by hash and nothing from the network."""
    folder = package_files.files("ba_mcp.views")
    script = (folder / "view.js").read_text(encoding="utf-8")
    style = (folder / "view.css").read_text(encoding="utf-8")
    template = (folder / "view.html").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    csp = (
        f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:; "
        "connect-src 'none'; font-src 'none'; form-action 'none'; base-uri 'none'"
    )
    return (
        template.replace("{{csp}}", csp)
        .replace("{{mode}}", mode)
        .replace("{{style}}", style)
        .replace("{{script}}", script)
    )


PAGES = {TABLE_VIEW: "result", REPORT_VIEW: "report"}


def json_cell(value: Any) -> Any:
    """A cell as JSON: numbers as numbers (an exact decimal as text when a float would round it), dates and
    times in ISO form, bytes as hex."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):  # a NaN is no NULL: psql's word for it (ba_mcp.values), as the text shows it
        from ba_mcp.values import non_finite_text

        return value if math.isfinite(value) else non_finite_text(value)
    if isinstance(value, decimal.Decimal):
        as_float = float(value)
        return as_float if decimal.Decimal(repr(as_float)) == value.normalize() else str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict | list):
        return str(value)
    return str(value)


def json_table(frame: pa.Table, limit: int = INLINE_MAX) -> dict[str, Any]:
    """Columns and rows as JSON, column by column: two columns of one name (``SELECT 1 AS a, 2 AS a``) are two
    cells of each row (rows as dicts would keep one of them)."""
    part = frame.slice(0, limit)
    columns = [{"name": f.name, "type": str(f.type)} for f in frame.schema]
    cells = [[json_cell(v) for v in column.to_pylist()] for column in part.columns]
    rows = [list(row) for row in zip(*cells, strict=True)] if cells else [[] for _ in range(part.num_rows)]
    return {"columns": columns, "rows": rows, "total_rows": frame.num_rows}


def view_tables(tables: list[tuple[str, pa.Table]]) -> dict[str, Any]:
    """The ``_meta`` entry of a result's whole tables: label ("" for a table result) -> columns and rows."""
    return {"tables": [{"label": label, **json_table(frame)} for label, frame in tables]}


def resources() -> list[Resource]:
    """The two views, as resources/list names them to a host that renders views."""
    return [
        Resource(
            uri=uri,
            name=f"ba-mcp {mode} view",
            title="Interactive table and chart" if mode == "result" else "Analysis report",
            mime_type=APP_MIME_TYPE,
        )
        for uri, mode in PAGES.items()
    ]


def page(uri: str) -> ReadResourceContents | None:
    """The view at ``uri`` (resources/read), or None when it is none of them."""
    if uri not in PAGES:
        return None
    return ReadResourceContents(
        content=page_html(PAGES[uri]), mime_type=APP_MIME_TYPE, meta={"ui": {"csp": {}, "prefersBorder": True}}
    )


class Views:
    """The extension's part of tools/list and tools/call, for clients that declared it (see the module's docstring):
    the server's handlers ask it after ``supports(ctx)`` (resources/list and resources/read: ``resources``,
    ``page``)."""

    def __init__(self, app: App, tools: list[BaTool]) -> None:
        self.app = app
        self.viewed = {tool.name: VIEWS[tool.view] for tool in tools if tool.view}  # each tool says its view
        self._schemas: dict[tuple[str, str], list[str]] = {}  # (session, artifact) -> its column names

    def __bool__(self) -> bool:
        return bool(self.viewed)

    def tools(self, listed: list[Tool]) -> list[Tool]:
        """The listing for a host that renders views: each viewed tool names its view, and ``view_rows`` follows."""
        tools = []
        for tool in listed:
            uri = self.viewed.get(tool.name)
            tools.append(tool.model_copy(update={"meta": {**(tool.meta or {}), **ui_meta(uri)}}) if uri else tool)
        return [*tools, rows_tool()]

    async def rows(self, arguments: dict[str, Any]) -> CallToolResult:
        """A page of an artifact the calling session may read: through query_database's engine worker, the
        filter bound as a parameter, identifiers checked against the artifact's columns. A call like any other in
        the audit trail (S-20), however it ends."""
        started, failure, page = time.time(), None, None
        try:
            page = await anyio.to_thread.run_sync(self._page, arguments)
        except ToolFailure as refused:
            failure = refused
        finally:
            self._audited(arguments, page, failure, started)
        if failure is not None:
            return CallToolResult(
                content=[TextContent(type="text", text=format_error(ROWS_TOOL, failure))], is_error=True
            )
        assert page is not None
        if "chart" in page:
            text = f"a chart of {page['source_rows']:,} rows, {len(page['chart']['points']):,} points"
        else:
            text = f"rows {page['offset']:,}–{page['offset'] + len(page['rows']) - 1:,} of {page['total_rows']:,}"
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=page)

    def _audited(
        self, arguments: dict[str, Any], page: dict[str, Any] | None, failure: ToolFailure | None, started: float
    ) -> None:
        """The call's record in the audit trail: the artifact and page asked for, the rows or points returned."""
        from ba_mcp.pipeline.usage import CallRecord

        if failure is None and page is None:  # cancelled before it answered
            failure = ToolFailure(ErrorType.TRANSIENT_ERROR, "CANCELLED", "the call was cancelled before it answered")
        record = CallRecord(
            execution_id=uuid.uuid4().hex,
            session=callers.current(),
            tool=ROWS_TOOL,
            timestamp=started,
            duration_ms=round((time.time() - started) * 1000, 3),
            input_tokens=0,
            output_tokens=0,
            output_level="",
            level_downgraded=False,
            cache_hit=False,
            retries=0,
            success=failure is None,
            error_type=failure.type.value if failure is not None else None,
            error_code=failure.code if failure is not None else None,
        )
        shown = page.get("rows", (page.get("chart") or {}).get("points")) if page is not None else None
        returned = (len(shown) if isinstance(shown, list) else None, None)
        error = failure.message if failure is not None else None
        self.app.audit.call(record, callers.principal(), arguments, {}, returned, error=error)

    def _page(self, arguments: dict[str, Any]) -> dict[str, Any]:
        request = _rows_request(arguments)
        artifact = request["artifact_id"]
        if "chart" in request:
            return self._chart(artifact, request["chart"])
        offset, limit = request["offset"], request["limit"]
        columns = self._columns(artifact)
        where, params = "", None
        needle = request["filter"]
        if needle:
            texts = " OR ".join(f"CAST({_quote(c)} AS VARCHAR) ILIKE $needle" for c in columns)
            where, params = f" WHERE {texts}", {"needle": f"%{needle}%"}
        order = ""
        by = request["order_by"]
        if by is not None:
            if by not in columns:
                raise _bad_request(f"order_by: no column {by[:80]!r} in {artifact}")
            order = f" ORDER BY {_quote(by)} {'DESC' if request['descending'] else 'ASC'} NULLS LAST"
        # One query: the page, and how many rows match (a window count, taken before LIMIT) as one more column —
        # the last one, read and dropped by its position, under a name none of the artifact's columns has.
        total_column = _unused_name("__ba_mcp_total", columns)
        frame = self._query(
            artifact,
            f"SELECT *, count(*) OVER () AS {_quote(total_column)} FROM {artifact}{where}{order} "
            f"LIMIT {limit} OFFSET {offset}",
            params,
        )
        last = frame.num_columns - 1
        if frame.num_rows:
            total = frame.column(last)[0].as_py()
        else:  # past the last row: the count on its own
            total = self._query(artifact, f"SELECT count(*) AS n FROM {artifact}{where}", params).column(0)[0].as_py()
        frame = frame.remove_column(last)
        return {**json_table(frame, limit), "total_rows": int(total), "offset": offset, "artifact_id": artifact}

    def _chart(self, artifact: str, chart: dict[str, Any]) -> dict[str, Any]:
        """The chart of the whole artifact, aggregated in the engine: ``y`` by ``x`` (a sum; a mean for a rate, a
        share or a price), split by ``series``. A time axis longer than CHART_POINTS is bucketed by a coarser grain,
        a category axis keeps its CHART_CATEGORIES largest, a split its CHART_SERIES largest (the rest "other") —
        and ``note`` says so: the chart is never silently of a part."""
        columns = self._columns(artifact)
        x, y, series = chart["x"], chart["y"], chart.get("series") or None
        for key, name in (("x", x), ("y", y), ("series", series)):
            if name is not None and name not in columns:
                raise _bad_request(f"chart.{key}: no column {name[:80]!r} in {artifact}")
        mean = any(part in y.lower() for part in _MEAN_LIKE)
        agg = f"avg({_quote(y)})" if mean else f"sum({_quote(y)})"
        types = self._query(artifact, f"SELECT typeof({_quote(x)}) AS t FROM {artifact} LIMIT 1")
        x_type = str(types.column(0)[0].as_py()) if types.num_rows else ""
        is_time = x_type in ("DATE", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "TIMESTAMP_NS", "TIMESTAMP_MS")
        facts = self._query(
            artifact, f"SELECT count(*) AS n, count(DISTINCT {_quote(x)}) AS d FROM {artifact}"
        ).to_pylist()[0]
        rows, distinct = int(facts["n"]), int(facts["d"])
        x_expr, grain, notes = _quote(x), None, []
        if is_time and distinct > CHART_POINTS:
            grain = "day"
            while grain in _COARSER:
                grain = _COARSER[grain]
                buckets = (
                    self._query(
                        artifact, f"SELECT count(DISTINCT date_trunc('{grain}', {_quote(x)})) AS d FROM {artifact}"
                    )
                    .column(0)[0]
                    .as_py()
                )
                if int(buckets) <= CHART_POINTS:
                    break
            x_expr = f"date_trunc('{grain}', {_quote(x)})"
            notes.append(f"by {grain} ({distinct:,} values of {x} bucketed)")
        s_expr = f"CAST({_quote(series)} AS VARCHAR)" if series else "NULL"
        keep, params = "", None
        if series:
            top = (
                self._query(
                    artifact,
                    f"SELECT {s_expr} AS s FROM {artifact} GROUP BY 1 ORDER BY sum(abs({_quote(y)})) DESC NULLS LAST",
                )
                .column(0)
                .to_pylist()
            )
            if len(top) > CHART_SERIES:  # the largest kept by name (bound: they are the data's own texts)
                params = {"kept": [str(v) for v in top[: CHART_SERIES - 1] if v is not None]}
                s_expr = f"CASE WHEN list_contains($kept, {s_expr}) THEN {s_expr} ELSE 'other' END"
                notes.append(f"the {CHART_SERIES - 1} largest of {len(top)} {series} values, the rest as other")
        if not is_time and distinct > CHART_CATEGORIES:
            keep = (
                f" WHERE {_quote(x)} IN (SELECT {_quote(x)} FROM {artifact} GROUP BY 1 "
                f"ORDER BY sum(abs({_quote(y)})) DESC NULLS LAST LIMIT {CHART_CATEGORIES})"
            )
            notes.append(f"the {CHART_CATEGORIES} largest of {distinct:,} {x} values")
        frame = self._query(
            artifact,
            f"SELECT {x_expr} AS x, {s_expr} AS s, {agg} AS v FROM {artifact}{keep} GROUP BY 1, 2 ORDER BY 1, 2",
            params,
            max_rows=CHART_POINTS * CHART_SERIES,
        )
        points = [[json_cell(r["x"]), r["s"], json_cell(r["v"])] for r in frame.to_pylist()]
        return {
            "chart": {"x": x, "y": y, "series": series, "points": points, "grain": grain, "time": is_time},
            "source_rows": rows,
            "aggregate": "mean" if mean else "sum",
            "note": "; ".join(notes),
            "artifact_id": artifact,
        }

    def _columns(self, artifact: str) -> list[str]:
        """An artifact's column names, asked once (an artifact is content-addressed: it never changes) — but
        asked for each session, so that the engine worker's check of who may read it runs every time."""
        key = (callers.current(), artifact)
        if key not in self._schemas:
            if len(self._schemas) >= 512:
                self._schemas.pop(next(iter(self._schemas)))
            self._schemas[key] = self._query(artifact, f"SELECT * FROM {artifact} LIMIT 0").column_names
        return self._schemas[key]

    def _query(
        self, artifact: str, sql: str, params: dict[str, Any] | None = None, max_rows: int = PAGE_MAX
    ) -> pa.Table:
        """``sql`` (ours: identifiers checked and quoted, values bound) over ``artifact`` on the workspace's
        database, through the database service the tools use (``Database.query``: the engine worker's read-only
        frame, the artifact resolved for the calling session, its timeout interrupting the engine)."""
        from ba_mcp.databases.configured import WORKSPACE

        ctx = ToolContext(session=callers.current(), timeout=30.0)
        database = self.app.databases.get(WORKSPACE)
        files = [(artifact, self.app.workspace.resolve(artifact))]  # not_found for another session's artifact
        raw = run_bounded(
            lambda: database.query(sql, params, max_rows, files, ctx, title=f"view of {artifact}"), ctx, ROWS_TOOL
        )
        if raw.more:
            raise ToolFailure(ErrorType.RESOURCE_ERROR, "BAD_VIEW_REQUEST", f"more than {max_rows:,} rows to draw")
        return raw.frame


def _bad_request(message: str) -> ToolFailure:
    return ToolFailure(
        ErrorType.INVALID_PARAMETERS,
        "BAD_VIEW_REQUEST",
        message,
        f"view_rows takes artifact_id (artifact_ + 12 hex digits), offset (a whole number from 0), limit (1 to "
        f"{PAGE_MAX:,}), order_by (a column's name), descending (true or false), filter (text of at most "
        f"{FILTER_MAX} characters) or chart ({{x, y, series}}: columns' names)",
    )


def _whole(arguments: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    """Argument ``name``: a whole number from ``low`` to ``high`` (2.0 is 2; a text, 1.5, true or 10**20 is not)."""
    value = arguments.get(name)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        shown = repr(value)[:40] if isinstance(value, int | float | str) and not isinstance(value, bool) else None
        raise _bad_request(f"{name} must be a whole number from {low:,} to {high:,}, not {shown or _json_type(value)}")
    return value


def _text(value: Any, name: str, longest: int = NAME_MAX) -> str | None:
    """Argument ``name``'s ``value``: None, or a text of at most ``longest`` characters."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > longest:
        what = f"{len(value):,} characters" if isinstance(value, str) else _json_type(value)
        raise _bad_request(f"{name} must be a text of at most {longest:,} characters, not {what}")
    return value


def _json_type(value: Any) -> str:
    """What a JSON value is, in JSON's words."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return {dict: "an object", list: "an array", str: "a text", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


def _rows_request(arguments: dict[str, Any]) -> dict[str, Any]:
    """view_rows' arguments checked — each of the right type and within its range — before any is used; a bad one
    is an error naming it and what it takes."""
    unknown = sorted(set(arguments) - set(ROWS_SCHEMA["properties"]))
    if unknown:
        raise _bad_request(f"unknown argument {str(unknown[0])[:40]!r}")
    artifact = arguments.get("artifact_id")
    if not isinstance(artifact, str) or not ARTIFACT_ID.match(artifact):
        shown = repr(artifact)[:40] if isinstance(artifact, str) else _json_type(artifact)
        raise _bad_request(f"artifact_id must be an artifact id (artifact_ + 12 hex digits), not {shown}")
    request: dict[str, Any] = {"artifact_id": artifact}
    chart = arguments.get("chart")
    if chart is not None:
        if not isinstance(chart, dict):
            raise _bad_request(f"chart must be an object {{x, y, series}}, not {_json_type(chart)}")
        extra = sorted(set(chart) - {"x", "y", "series"})
        if extra:
            raise _bad_request(f"chart: unknown key {str(extra[0])[:40]!r}")
        request["chart"] = {key: _text(chart.get(key), f"chart.{key}") for key in ("x", "y", "series")}
        for key in ("x", "y"):
            if request["chart"][key] is None:
                raise _bad_request(f"chart.{key} is required: a column's name")
    request["offset"] = _whole(arguments, "offset", 0, 0, OFFSET_MAX)
    request["limit"] = _whole(arguments, "limit", 100, 1, PAGE_MAX)
    request["order_by"] = _text(arguments.get("order_by"), "order_by")
    request["filter"] = _text(arguments.get("filter"), "filter", FILTER_MAX) or ""
    descending = arguments.get("descending")
    if descending is not None and not isinstance(descending, bool):
        shown = repr(descending)[:40] if isinstance(descending, int | float | str) else _json_type(descending)
        raise _bad_request(f"descending must be true or false, not {shown}")
    request["descending"] = bool(descending)
    return request


def _unused_name(name: str, columns: list[str]) -> str:
    """``name``, made longer until no column has it (DuckDB compares names without case)."""
    taken = {c.lower() for c in columns}
    while name.lower() in taken:
        name += "_"
    return name


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
