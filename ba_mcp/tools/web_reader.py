"""web_reader (docs/tools.md): an async tool on the App's one HTTP client.

It downloads through ``web.fetch.Fetcher`` (the address rule, pinned connections, redirects, robots.txt,
the byte cap, the total timeout) and turns what came back into the result its content deserves: HTML → the
page's main content as markdown (``web.extract``), JSON → a JSON result, CSV/TSV/Excel/Parquet → a table
stored as an artifact (parsed by ``formats``, like a workspace file), PDF → its text, text → a document. One
download serves every window and level of a page (a small in-memory page cache).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Annotated, Any, BinaryIO
from urllib.parse import urlparse

import anyio.to_thread
from pydantic import Field

from ba_mcp.errors import ErrorType, ToolFailure, invalid
from ba_mcp.formats import DATA_FILE_SUFFIX, FORMATS, MEDIA_TYPES
from ba_mcp.results import Document, JsonValue, RawResult, Table
from ba_mcp.settings import ToolSettings
from ba_mcp.tool import REMOTE_RETRIES, CacheMode, CachePolicy, Tool, ToolContext, ToolParams, ToolPolicy
from ba_mcp.web.extract import charset, html_to_markdown, pdf_text, short_url
from ba_mcp.workers.messages import Extract
from ba_mcp.workers.work import extract, parse

if TYPE_CHECKING:
    from ba_mcp.settings import FormatsSettings
    from ba_mcp.stores.artifacts import ArtifactStore
    from ba_mcp.tools.services import Services
    from ba_mcp.web.fetch import Download, Fetcher
    from ba_mcp.workers.duckworkers import DuckWorkers


class WebReaderParams(ToolParams):
    url: Annotated[str, Field(min_length=1, max_length=8192)]
    start_index: Annotated[int, Field(ge=0)] = 0
    max_length: Annotated[int | None, Field(ge=100, le=1_000_000)] = None


_BINARY_PREFIXES = ("image/", "audio/", "video/", "font/")
_BINARY_TYPES = {
    "application/octet-stream",
    "application/zip",
    "application/gzip",
    "application/x-gzip",
    "application/x-tar",
    "application/x-7z-compressed",
    "application/x-rar-compressed",
    "application/vnd.rar",
    "application/x-bzip2",
    "application/x-xz",
    "application/wasm",
    "application/x-msdownload",
    "application/java-archive",
}


@dataclass
class _Page:
    """A downloaded page, turned into what it holds (shared by later windows and levels)."""

    url: str
    kind: str  # text | table | json
    title: str
    text: str = ""
    mime: str = "text/markdown"
    value: Any = None
    table_id: str | None = None
    notes: list[str] = field(default_factory=list)
    whole_id: str | None = None  # the whole text as an artifact, once stored


class WebReaderSettings(ToolSettings):
    max_timeout_s: float = Field(120, gt=0)
    max_length: int = Field(20_000, ge=100, description="Characters of page text per call when it names no max_length.")
    page_cache_entries: int = Field(
        32,
        ge=0,
        description="Downloads kept in memory, so later windows and levels of a page do not download it again.",
    )


class WebReader(Tool):
    name = "web_reader"
    title = "Read a web page"
    description = (
        "Read a page or data file by URL: HTML as markdown, JSON, PDF, text; CSV/Excel/Parquet as a table; long "
        "text in windows."
    )
    Params = WebReaderParams
    Settings = WebReaderSettings
    policy = ToolPolicy(
        idempotent=True,
        # Not a timeout nor a resource error: reading the page is the call's own work (a PDF that parses past
        # the timeout, a page that ends its worker) — doing it again would fail again, and late.
        retry_on=REMOTE_RETRIES - {"timeout", "resource_error"},
        cache=CachePolicy(CacheMode.TTL, ttl_s=600),
        read_only=True,
        open_world=True,
    )
    window_arg = "start_index"

    @classmethod
    def build(cls, services: Services) -> WebReader:
        settings = services.settings.tool(cls.name)
        assert isinstance(settings, WebReaderSettings)
        formats = services.settings.formats
        return cls(settings, services.fetcher, services.artifacts, formats, services.duck_workers)

    def __init__(
        self,
        settings: WebReaderSettings,
        fetcher: Fetcher,
        artifacts: ArtifactStore,
        formats: FormatsSettings,
        duck_workers: DuckWorkers | None = None,
    ) -> None:
        self.settings: WebReaderSettings = settings
        self.duck_workers = duck_workers  # where downloaded bytes are decoded (None: in this process)
        self.fetcher = fetcher
        self.artifacts = artifacts
        self.formats = formats
        self._pages: OrderedDict[str, tuple[float, _Page]] = OrderedDict()
        self._lock = threading.Lock()

    async def execute(self, params: WebReaderParams, ctx: ToolContext) -> RawResult:
        page = self._cached(params.url)
        if page is None:
            download = await self.fetcher.fetch(params.url)
            # abandoned at the timeout: the runner then cancels the call, which ends the worker parsing it
            page = await anyio.to_thread.run_sync(self._understand, download, ctx, abandon_on_cancel=True)
            self._remember(params.url, page)
        raw = await self._result(page, params)
        raw.provenance = {"url": page.url}  # the address read, after redirects
        return raw

    async def _result(self, page: _Page, params: WebReaderParams) -> RawResult:
        if page.kind == "json":
            return JsonValue(page.title, page.value, notes=list(page.notes), meta={"url": page.url})
        if page.kind == "table":
            assert page.table_id is not None
            # the page cache is shared: a page another session read first becomes this session's too
            await anyio.to_thread.run_sync(self.artifacts.claim, page.table_id)
            _, table = await anyio.to_thread.run_sync(self.artifacts.read_table, page.table_id)
            return Table(
                page.title,
                table,
                total_rows=table.num_rows,
                artifact_id=page.table_id,
                notes=list(page.notes),
                meta={"url": page.url},
            )
        return await anyio.to_thread.run_sync(self._window, page, params)

    # -- the page cache ---------------------------------------------------------------------------

    def _cached(self, url: str) -> _Page | None:
        with self._lock:
            known = self._pages.get(url)
            if known and time.monotonic() - known[0] < self.policy.cache.ttl_s:  # as long as the runner's
                self._pages.move_to_end(url)
                return known[1]
        return None

    def _remember(self, url: str, page: _Page) -> None:
        with self._lock:
            self._pages[url] = (time.monotonic(), page)
            while len(self._pages) > self.settings.page_cache_entries:
                self._pages.popitem(last=False)

    # -- windows ----------------------------------------------------------------------------------

    def _window(self, page: _Page, params: WebReaderParams) -> Document:
        text = page.text
        total = len(text)
        start = params.start_index
        if start and start >= total:
            raise invalid(
                f"start_index {start:,} is past the end of the text ({total:,} characters)",
                "start from 0, or from a start_index a previous result named",
            )
        length = params.max_length or self.settings.max_length
        end = min(total, start + length)
        notes = list(page.notes)
        more = end < total
        if (more or start) and page.whole_id is None:  # the observer names it where it cuts
            page.whole_id = self.artifacts.put_text(text, title=page.title, source_tool=self.name, mime=page.mime).id
        return Document(
            page.title,
            text[start:end],
            mime=page.mime,
            offset=start,
            total_chars=total,
            more=more,
            next_args={"start_index": end} if more else None,
            notes=notes,
            meta={"url": page.url},
            artifact_id=page.whole_id if (more or start) else None,
        )

    # -- what the download holds ------------------------------------------------------------------

    def _understand(self, d: Download, ctx: ToolContext) -> _Page:
        if d.status >= 400:
            raise ToolFailure(
                ErrorType.NOT_FOUND
                if d.status in (404, 410)
                else ErrorType.TRANSIENT_ERROR
                if d.status >= 500
                else ErrorType.DEPENDENCY_ERROR,
                f"HTTP_{d.status}",
                f"the server answered HTTP {d.status} for {short_url(d.url)}",
                "check the URL" if d.status < 500 else "the site has a problem; try again later",
            )
        ctype = d.content_type.split(";", 1)[0].strip().lower()
        suffix = PurePosixPath(urlparse(d.url).path).suffix.lower()
        notes = [f"redirected to {short_url(d.url)}"] if d.redirects else []
        capped_note = (
            f"the page is larger than web.max_download_bytes ({self.fetcher.settings.max_download_bytes:,} bytes); "
            "only its beginning was read"
        )
        data_format = FORMATS.get(suffix) if FORMATS.get(suffix) in DATA_FILE_SUFFIX else MEDIA_TYPES.get(ctype)
        if data_format in DATA_FILE_SUFFIX:  # a data file, by its suffix or its media type (the one table)
            self._refuse_capped(d, "data file")
            return self._table(
                d, suffix if FORMATS.get(suffix) == data_format else DATA_FILE_SUFFIX[data_format], notes, ctx
            )
        if ctype in ("application/json", "text/json") or ctype.endswith("+json") or (not ctype and suffix == ".json"):
            self._refuse_capped(d, "JSON document")
            import json

            try:
                value = json.loads(d.body.decode(charset(d.content_type) or "utf-8", "replace"))
            except ValueError as exc:
                raise ToolFailure(
                    ErrorType.DEPENDENCY_ERROR, "BAD_JSON", f"{short_url(d.url)} is not valid JSON ({exc})"
                ) from None
            return _Page(d.url, "json", short_url(d.url), value=value, notes=notes)
        if ctype == "application/pdf" or suffix == ".pdf":
            self._refuse_capped(d, "PDF")
            if self.duck_workers is not None:
                text = extract(self.duck_workers, ctx, d.body, Extract("pdf", d.url))["text"]
            else:
                text = pdf_text(d.body, d.url)
            return _Page(d.url, "text", short_url(d.url), text=text, mime="text/plain", notes=notes)
        if ctype.startswith(_BINARY_PREFIXES) or ctype in _BINARY_TYPES:
            raise ToolFailure(
                ErrorType.VALIDATION_ERROR,
                "BINARY_CONTENT",
                f"{short_url(d.url)} is {ctype} content, not text or data",
                "web_reader reads pages, text, JSON, PDF and data files (CSV, TSV, Excel, Parquet)",
            )
        text = d.body.decode(charset(d.content_type) or "utf-8", "replace")
        if d.capped:
            notes.append(capped_note)
        if ctype in ("text/html", "application/xhtml+xml") or (not ctype and text.lstrip()[:1] == "<"):
            if self.duck_workers is not None:  # HTML parsing of a hostile page runs where it can be killed
                answer = extract(self.duck_workers, ctx, d.body, Extract("html", d.url, charset(d.content_type)))
                title, markdown = answer.get("title"), answer["text"]
            else:
                title, markdown = html_to_markdown(text, d.url)
            return _Page(d.url, "text", title or short_url(d.url), text=markdown, mime="text/markdown", notes=notes)
        if "\x00" in text[:4096]:
            raise ToolFailure(
                ErrorType.VALIDATION_ERROR, "BINARY_CONTENT", f"{short_url(d.url)} is binary content, not text"
            )
        mime = "text/markdown" if ctype == "text/markdown" or suffix == ".md" else "text/plain"
        return _Page(d.url, "text", short_url(d.url), text=text, mime=mime, notes=notes)

    def _refuse_capped(self, d: Download, what: str) -> None:
        if d.capped:
            raise ToolFailure(
                ErrorType.RESOURCE_ERROR,
                "DOWNLOAD_TOO_LARGE",
                f"the {what} at {short_url(d.url)} is larger than web.max_download_bytes "
                f"({self.fetcher.settings.max_download_bytes:,} bytes); a part of it would be wrong",
                "download it another way into uploads/, or raise web.max_download_bytes",
            )

    def _table(self, d: Download, suffix: str, notes: list[str], ctx: ToolContext) -> _Page:
        from ba_mcp.formats import Window, format_for, table_of

        title = short_url(d.url)
        with _MemorySource(d.body, PurePosixPath(urlparse(d.url).path).name or "download", suffix) as source:
            if self.duck_workers is None:
                table = table_of(source, self.formats, title)
            else:
                whole = True  # all of it or NOT_TABULAR, decided in the worker (no partial read is sent)
                raw = parse(
                    self.duck_workers, ctx, source, format_for(suffix), Window(), self.formats, title, None, whole
                )
                assert isinstance(raw, Table)
                table = raw.frame
        meta = self.artifacts.put_table(table, title=title, source_tool=self.name)
        notes = [*notes, f"kept as {meta.id}: query it with query_database (FROM '{meta.id}') or load_artifact"]
        return _Page(d.url, "table", title, table_id=meta.id, notes=notes)


class _MemorySource:
    """Downloaded bytes as a ``formats.Source``: a memfd, read through ``/proc/self/fd/<n>`` like a file."""

    kind = "web"
    ref_id = None

    def __init__(self, data: bytes, name: str, suffix: str) -> None:
        self.fd = os.memfd_create("ba-mcp-download", os.MFD_CLOEXEC)
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]
        self.name = name
        self.size = len(data)
        self.suffix = suffix

    @property
    def path(self) -> Path:
        return Path(f"/proc/self/fd/{self.fd}")

    def open(self) -> BinaryIO:
        f = os.fdopen(os.dup(self.fd), "rb")
        f.seek(0)
        return f

    def __enter__(self) -> _MemorySource:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)
