"""file_reader (docs/tools.md): read a workspace file, upload, code file or artifact as a table or a document.

Reads only what the call needs: ``nrows``/``offset`` stop the parser early (a 100-row preview of a
multi-GB CSV costs the same as of a small one), and files over ``formats.max_file_bytes`` are read
partially, never whole. All path handling goes through ``Workspace.resolve`` (S-2).
"""

from __future__ import annotations

import codecs
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field

from ba_mcp.errors import ToolFailure, invalid
from ba_mcp.formats import ARTIFACT_FORMATS, Reader, Window, known_format
from ba_mcp.results import RawResult, Table, arrow_array
from ba_mcp.settings import FormatsSettings, ToolSettings
from ba_mcp.tool import CacheMode, CachePolicy, Tool, ToolContext, ToolParams, ToolPolicy
from ba_mcp.workers.work import parse

if TYPE_CHECKING:
    from ba_mcp.stores.artifacts import ArtifactStore
    from ba_mcp.tools.services import Services
    from ba_mcp.workers.duckworkers import DuckWorkers
    from ba_mcp.workspace import Entry, Resolved, Workspace

Format = Literal["auto", "csv", "tsv", "excel", "json", "jsonl", "parquet", "text", "markdown", "python", "sql"]


class FileReaderParams(ToolParams):
    path: Annotated[
        str,
        Field(
            min_length=1,
            max_length=4096,
            description="an id, a path or a folder",
        ),
    ]
    format: Annotated[Format, Field()] = "auto"
    encoding: Annotated[str | None, Field(max_length=40)] = None
    nrows: Annotated[
        int | None,
        Field(ge=1, le=10_000_000, description="rows (or lines) to read"),
    ] = None
    offset: Annotated[int, Field(ge=0, description="first row (or character)")] = 0
    sheet: Annotated[str | int | None, Field(description="Excel sheet: name or 0-based index")] = None


class FileReader(Tool):
    name = "file_reader"
    view = "table"  # the MCP Apps view of its results (views/)
    title = "Read a file"
    description = "Read a file, upload or artifact (ba://files lists them) or list a folder; large files in windows."
    version = "1"
    Params = FileReaderParams
    policy = ToolPolicy(idempotent=True, cache=CachePolicy(CacheMode.IDENTITY))
    window_arg = "offset"
    artifact_reader = 'file_reader(path="{id}")'

    @classmethod
    def build(cls, services: Services) -> FileReader:
        s = services.settings
        return cls(s.tool(cls.name), s.formats, services.workspace, services.artifacts, services.duck_workers)

    def __init__(
        self,
        settings: ToolSettings,
        bounds: FormatsSettings,
        workspace: Workspace,
        artifacts: ArtifactStore,
        duck_workers: DuckWorkers | None = None,
    ) -> None:
        self.settings = settings
        self.duck_workers = duck_workers  # where files are decoded (None: in this process — embedders' trusted files)
        self.bounds = bounds  # the formats: section
        self.workspace = workspace
        self.artifacts = artifacts

    def cache_identity(self, params: FileReaderParams, ctx: ToolContext) -> str | None:
        try:
            resolved = self.workspace.resolve(params.path)
        except ToolFailure:
            return None  # let execute() report it (or list the directory it names: never cached)
        return f"{resolved.kind}:{resolved.name}|{resolved.identity}"

    def execute(self, params: FileReaderParams, ctx: ToolContext) -> RawResult:
        listed = self.workspace.directory(params.path)
        if listed is not None:
            return _listing(*listed, params)
        resolved = self.workspace.resolve(params.path)  # held open: every read below reads this file
        fmt = params.format if params.format != "auto" else _detect_format(resolved, self.artifacts)
        encoding = _check_encoding(params.encoding)
        title = resolved.name if resolved.kind == "path" else f"{resolved.name} ({resolved.filename})"
        if resolved.kind == "path" and resolved.name == f"uploads/{resolved.filename}":
            title = _with_upload_id(title, resolved.filename, self.workspace)
        if resolved.kind in ("artifact", "code"):
            title = resolved.name
        window = Window(offset=params.offset, nrows=params.nrows, sheet=params.sheet)
        if self.duck_workers is not None and fmt != "image":  # an image is passed on as bytes, never decoded here
            raw = parse(self.duck_workers, ctx, resolved, fmt, window, self.bounds, title, encoding)
        else:
            raw = Reader(resolved, window, self.bounds, title, encoding, self.artifacts).read(fmt)
        raw.meta.setdefault("path", resolved.name)
        raw.meta.setdefault("format", fmt)
        raw.meta.setdefault("bytes", resolved.size)
        raw.provenance = {"read": [self.artifacts.read_ref(resolved.name, resolved)], "format": fmt}
        return raw


def _with_upload_id(title: str, filename: str, workspace: Workspace) -> str:
    """An upload read by its path, with the id SQL and load_file take when it is not the file's stem as is
    (``uploads/m=1+b.csv (id upload_m_1_b)``)."""
    uid = workspace.upload_id(filename)
    stem = filename.rsplit(".", 1)[0] if "." in filename[1:] else filename
    return f"{title} (id {uid})" if uid and uid != f"upload_{stem}" else title


def _detect_format(resolved: Resolved, artifacts: ArtifactStore) -> str:
    if resolved.kind == "artifact" and resolved.ref_id:
        kind = artifacts.get(resolved.ref_id).kind
        return ARTIFACT_FORMATS.get(kind, "text")
    return known_format(resolved.suffix) or "text"  # a plug-in's format too (ba_mcp.formats entry points)


def _check_encoding(name: str | None) -> str | None:
    if name is None:
        return None
    try:
        return codecs.lookup(name).name
    except LookupError:
        raise invalid(
            f"unknown encoding '{name[:40]}'", "use a Python codec name such as utf-8, latin-1, cp1252, utf-16, gb18030"
        ) from None


LISTING_PAGE = 200  # entries a listing shows unless nrows asks otherwise


def _listing(shown: str, entries: list[Entry], truncated: bool, params: FileReaderParams) -> Table:
    """A directory as a table: one row per entry (path to pass back, kind, format, bytes, modified), a page of
    ``nrows`` (default LISTING_PAGE) from ``offset``; the title counts what the whole directory holds."""
    import pyarrow as pa

    files = [e for e in entries if e.kind == "file"]
    formats: dict[str, int] = {}
    for e in files:
        fmt = known_format(PurePosixPath(e.path).suffix) or "other"
        formats[fmt] = formats.get(fmt, 0) + 1
    counts = ", ".join(f"{n} {fmt}" for fmt, n in sorted(formats.items(), key=lambda kv: (-kv[1], kv[0])))
    dirs = sum(e.kind == "directory" for e in entries)
    title = f"directory {shown}: {len(files):,} files" + (f" ({counts})" if counts else "") + f", {dirs:,} folders"
    others = len(entries) - len(files) - dirs
    if others:
        title += f", {others:,} other entries (links are not followed)"
    page = entries[params.offset : params.offset + (params.nrows or LISTING_PAGE)]
    more = params.offset + len(page) < len(entries) or truncated
    named = [(known_format(PurePosixPath(e.path).suffix) or "") if e.kind == "file" else "" for e in page]
    frame = pa.Table.from_arrays(
        [
            arrow_array([e.path for e in page], pa.string()),
            arrow_array([e.kind for e in page], pa.string()),
            arrow_array(named, pa.string()),
            arrow_array([e.size for e in page], pa.int64()),
            arrow_array([e.modified_ns // 1000 for e in page], pa.timestamp("us")),
        ],
        names=["path", "kind", "format", "bytes", "modified"],
    )
    notes = [f"the folder holds more than {len(entries):,} entries; only these were read"] if truncated else []
    return Table(
        title,
        frame,
        offset=params.offset,
        total_rows=None if truncated else len(entries),
        more=more,
        next_args={"offset": params.offset + len(page)} if more else None,
        notes=notes,
        meta={"path": shown, "files": len(files), "folders": dirs},
    )
