"""Raw result × output level → observation (T-L), with artifacts for whatever is left out.

The observation is plain text for a model: a stable first line ``<tool>: <kind> (<level>)``, then
stable headings. ``structured`` is the machine-readable counterpart (``structuredContent``).
Invariant (T-A): when the observation does not contain the complete result, the result is stored
as an artifact and the observation names its id; nothing is silently dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ba_mcp.errors import ToolFailure
from ba_mcp.pipeline.encode import (
    PYTHON_STATS_ROWS,
    ROUNDED_NOTE,
    cell_value,
    column_stats,
    encode_csv,
    encode_table,
    plain_rows,
    rounds_any,
)
from ba_mcp.pipeline.levels import OutputLevel
from ba_mcp.results import Composite, Document, Image, JsonValue, RawResult, Table

if TYPE_CHECKING:
    import pyarrow as pa

    from ba_mcp.pipeline.tokens import TokenCounter
    from ba_mcp.settings import ObservationSettings
    from ba_mcp.stores.artifacts import ArtifactMeta, ArtifactStore

_INLINE_BYTES_LIMIT = 1024 * 1024  # anything over 1 MB goes to an artifact whatever the level
_ARTIFACT_NOTE_TOKENS = 60  # what the "Truncated: … Complete table: artifact_…" line costs
_SHORT_TEXT_CHARS = 160  # a text this short is its own brief form
_COMPACT_PART_CHARS = 2000  # a composite's part this short is shown as it is, without a size header


@dataclass
class Observation:
    text: str
    structured: dict[str, Any]
    images: list[tuple[bytes, str]] = field(default_factory=list)
    artifacts: list[ArtifactMeta] = field(default_factory=list)
    tokens: int = 0
    counter: TokenCounter | None = None
    provenance: dict[str, Any] = field(default_factory=dict)  # the raw result's, for the call's record
    # the tables shown whole (no artifact to page), by part label ("" for a table result): what an interactive
    # view of the result shows when the client renders one (never in the text)
    whole_tables: list[tuple[str, pa.Table]] = field(default_factory=list)

    def add_note(self, note: str) -> None:
        line = f"\nNote: {note}"
        self.text += line
        if self.counter is not None:
            self.tokens += self.counter.count_tokens(line)


@dataclass
class _Part:
    """An observation body without the first line (so composites can nest parts)."""

    lines: list[str]
    structured: dict[str, Any]
    images: list[tuple[bytes, str]] = field(default_factory=list)
    artifacts: list[ArtifactMeta] = field(default_factory=list)


@dataclass(frozen=True)
class ToolTraits:
    """What the observer may say about a registered tool: the argument that continues a windowed result
    (``offset``, ``start_index``; None when the tool has none) and how it reads an artifact (a template
    with ``{id}``, for the kinds it reads; None when it reads none). The pipeline names no tool itself."""

    window_arg: str | None = None
    artifact_reader: str | None = None
    artifact_kinds: frozenset[str] | None = None  # None: every kind


class Observer:
    """Formats raw results. ``tools`` are the traits of the tools registered on the server, so hints only
    name tools that exist, with their real parameters."""

    def __init__(
        self,
        store: ArtifactStore,
        counter: TokenCounter,
        settings: ObservationSettings,
        tools: Mapping[str, ToolTraits],
        table_stats: Callable[[str], tuple[dict[str, dict[str, Any]], int] | None] | None = None,
    ) -> None:
        self.store = store
        # whole-column figures of a stored table, computed by an engine worker (never in the server)
        self.table_stats: Callable[[str], tuple[dict[str, dict[str, Any]], int] | None] = table_stats or (
            lambda aid: None
        )
        self.counter = counter
        self.settings = settings
        self.tools = dict(tools)
        self._whole_stats: dict[str, tuple[dict[str, dict[str, Any]], int]] = {}

    def observe(self, tool: str, raw: RawResult, level: OutputLevel, notes: list[str] | None = None) -> Observation:
        part = self._part(tool, raw, level)
        lines = [f"{tool}: {_kind(raw)} ({level.value})", *part.lines]
        for note in notes or []:
            lines.append(f"Note: {note}")
        text = "\n".join(line for line in lines if line is not None).rstrip()
        structured = {"level": level.value, **part.structured}
        tokens = self.counter.count_tokens(text)
        whole: list[tuple[str, pa.Table]] = []
        if isinstance(raw, Table) and not part.structured.get("artifact_id"):
            whole.append(("", raw.frame))
        elif isinstance(raw, Composite):
            for (label, sub), shown in zip(raw.parts, part.structured.get("parts", []), strict=False):
                if isinstance(sub, Table) and not shown.get("artifact_id"):
                    whole.append((label, sub.frame))
        return Observation(
            text, structured, part.images, part.artifacts, tokens, self.counter, dict(raw.provenance), whole
        )

    def _part(self, tool: str, raw: RawResult, level: OutputLevel) -> _Part:
        if isinstance(raw, Table):
            part = self._table(tool, raw, level)
        elif isinstance(raw, Document):
            part = self._document(tool, raw, level)
        elif isinstance(raw, JsonValue):
            part = self._json(tool, raw, level)
        elif isinstance(raw, Image):
            part = self._image(tool, raw, level)
        else:
            part = self._composite(tool, raw, level)
        part.lines.extend(f"Note: {n}" for n in raw.notes)
        if level is not OutputLevel.BRIEF:
            part.lines.extend(raw.details)
        if raw.meta:
            part.structured["meta"] = raw.meta
        return part

    # -- artifacts ----------------------------------------------------------------------------

    def _keep(self, tool: str, raw: RawResult) -> ArtifactMeta:
        """Store the complete raw result (or refer to the artifact it was read from or written to). The
        result is this session's — its call's, or a cached result of the same call — so the artifact becomes
        the session's own too (S-9)."""
        if raw.artifact_id:
            return self.store.claim(raw.artifact_id)
        if isinstance(raw, Table):
            return self.store.put_table(raw.frame, title=raw.title, source_tool=tool)
        if isinstance(raw, Document):
            return self.store.put_text(raw.text, title=raw.title, source_tool=tool, mime=raw.mime)
        if isinstance(raw, JsonValue):
            return self.store.put_json(raw.value, title=raw.title, source_tool=tool)
        if isinstance(raw, Image):
            return self.store.put_image(raw.data, title=raw.title, source_tool=tool, mime=raw.mime)
        raise TypeError(f"cannot store {type(raw).__name__} as one artifact")

    def _how_to_read(self, meta: ArtifactMeta) -> str:
        ways = [
            t.artifact_reader.format(id=meta.id)
            for t in self.tools.values()
            if t.artifact_reader and (t.artifact_kinds is None or meta.kind in t.artifact_kinds)
        ]
        ways.append(f"resource {meta.uri}")
        return "; ".join(ways)

    def _source_more(self, tool: str, raw: Table | Document) -> list[str]:
        """The one continuation line, from the result's ``next_args`` (data, not prose from the tool)."""
        if not (raw.more and raw.next_args):
            return []
        args = ", ".join(f"{k}={json.dumps(v)}" for k, v in raw.next_args.items())
        what = "rows follow" if isinstance(raw, Table) else "text follows"
        line = f"More {what} in the source: call {tool} again with {args} (other arguments unchanged)"
        if isinstance(raw, Document) and raw.artifact_id:
            line += (
                f", or read the whole text: {raw.artifact_id} — {self._how_to_read(self.store.claim(raw.artifact_id))}"
            )
        return [line + "."]

    # -- tables -------------------------------------------------------------------------------

    def _table(self, tool: str, raw: Table, level: OutputLevel) -> _Part:
        table = raw.frame
        n, m = table.num_rows, table.num_columns
        columns = [
            {"name": name, "type": raw.column_types.get(name) or _dtype(table.column(i))}
            for i, name in enumerate(table.column_names)
        ]
        structured: dict[str, Any] = {
            "kind": "table",
            "title": raw.title,
            "rows": n,
            "columns": columns,
            "offset": raw.offset,
            "total_rows": raw.total_rows,
            "more_in_source": raw.more,
        }
        if raw.more:
            structured["next_offset"] = raw.offset + n
            if raw.next_args:
                structured["next_args"] = raw.next_args
        extent = f"{n:,} rows × {m} columns"
        prefix_of_stored = bool(raw.artifact_id and raw.total_rows is not None and raw.total_rows > raw.offset + n)
        if raw.offset or raw.more or prefix_of_stored:
            extent += (
                f" (rows {raw.offset:,}–{raw.offset + n - 1:,} {_total(raw)})" if n else f" (offset {raw.offset:,})"
            )
        source_more = self._source_more(tool, raw)

        if level is OutputLevel.FULL:
            body = encode_table(table, self.settings.table_encoding) if n else ""
            head = [f"{raw.title}: {extent}", "Schema: " + ", ".join(f"{c['name']}: {c['type']}" for c in columns)]
            lines = [*head, f"Rows ({self.settings.table_encoding}):", body, *source_more]
            text = "\n".join(lines)
            if self.counter.count_tokens(text) <= self.settings.inline_limit_tokens and len(text) < _INLINE_BYTES_LIMIT:
                stored = self._keep(tool, raw) if prefix_of_stored else None  # rows beyond these live there
                if stored:
                    lines.append(f"Complete result: {stored.id} — {self._how_to_read(stored)}.")
                structured.update(
                    truncated=prefix_of_stored,
                    shown_rows=n,
                    encoding=self.settings.table_encoding,
                    artifact_id=stored.id if stored else None,
                )
                return _Part(lines, structured, artifacts=[stored] if stored else [])
            meta = self._keep(tool, raw)
            part = self._table_standard(raw, extent, columns, meta, structured, source_more)
            part.lines.insert(
                1,
                f"The full table is over the inline limit of {self.settings.inline_limit_tokens:,} tokens; "
                "showing the standard view.",
            )
            return part

        if level is OutputLevel.BRIEF and raw.key_columns and 0 < n <= self.settings.standard_whole_rows:
            return self._table_key_columns(tool, raw, extent, structured, source_more)
        if level is OutputLevel.STANDARD and raw.standard_columns and len(raw.standard_columns) < m:
            return self._table_projected(tool, raw, level, structured)

        if level is OutputLevel.BRIEF:
            kept = self._keep(tool, raw) if n else None
            names = ", ".join(c["name"] for c in columns)
            line = f"{raw.title}: {extent}; columns: {names}"
            if kept:
                line += f"; complete table: {kept.id}"
            structured.update(truncated=bool(n), shown_rows=0, artifact_id=kept.id if kept else None)
            return _Part([line, *source_more], structured, artifacts=[kept] if kept else [])

        shared: dict[str, Any] = {}  # the standard views' parts, worked out once for this observation
        whole = self._whole_at_standard(raw, extent, columns, source_more, shared)
        if whole is not None:  # every row fetched is shown (those asked for, e.g. max_rows=20)
            stored = self._keep(tool, raw) if prefix_of_stored else None
            if stored:
                whole.insert(
                    len(whole) - len(source_more),
                    f"Truncated: {n:,} of {raw.total_rows:,} rows shown. "
                    f"Complete table: {stored.id} — {self._how_to_read(stored)}.",
                )
            structured.update(truncated=stored is not None, shown_rows=n, artifact_id=stored.id if stored else None)
            return _Part(whole, structured, artifacts=[stored] if stored else [])
        _, cut = self._preview(raw, shared)
        kept = self._keep(tool, raw) if (n > self.settings.preview_rows or cut) else None
        return self._table_standard(raw, extent, columns, kept, structured, source_more, shared)

    def _table_key_columns(
        self, tool: str, raw: Table, extent: str, structured: dict[str, Any], source_more: list[str]
    ) -> _Part:
        """Brief view of a table that names its key columns: those columns for every row (a search's titles
        and URLs), the complete table as an artifact when it has more."""
        keys = [c for c in raw.key_columns or [] if c in raw.frame.column_names]
        view = raw.frame.select(keys)
        rows, _ = plain_rows(view, max_chars=self.settings.max_cell_chars)
        kept = self._keep(tool, raw) if raw.frame.num_columns > len(keys) else None
        lines = [f"{raw.title}: {extent}", encode_csv(keys, rows)]
        if kept:
            lines.append(f"Other columns at standard/full; complete table: {kept.id} — {self._how_to_read(kept)}.")
        structured.update(truncated=kept is not None, shown_rows=len(rows), artifact_id=kept.id if kept else None)
        return _Part([*lines, *source_more], structured, artifacts=[kept] if kept else [])

    def _table_projected(self, tool: str, raw: Table, level: OutputLevel, structured: dict[str, Any]) -> _Part:
        """Standard view of a table that names its standard columns: the view of those columns, with the
        complete table (every column) as an artifact."""
        import dataclasses

        keep = [c for c in raw.standard_columns or [] if c in raw.frame.column_names]
        narrow = dataclasses.replace(raw, frame=raw.frame.select(keep), standard_columns=None, notes=[], meta={})
        part = self._table(tool, narrow, level)
        kept = self._keep(tool, raw)
        part.lines.append(f"More columns at full; complete table: {kept.id} — {self._how_to_read(kept)}.")
        part.structured.update(artifact_id=kept.id, truncated=True)
        part.artifacts.append(kept)
        return part

    def _whole_at_standard(
        self, raw: Table, extent: str, columns: list[dict[str, str]], source_more: list[str], shared: dict[str, Any]
    ) -> list[str] | None:
        """A table of at most ``standard_whole_rows`` rows is shown whole at standard — schema and every row,
        no per-column summary (every value is in view; a summary of an already-aggregated table misleads) —
        when that fits the standard budget, or costs no more than the summary view would. None otherwise."""
        table = raw.frame
        n = table.num_rows
        if n > self.settings.standard_whole_rows:
            return None
        rows, _ = plain_rows(table, round_floats=True)
        lines = [
            f"{raw.title}: {extent}",
            "Schema: " + ", ".join(f"{c['name']}: {c['type']}" for c in columns),
            "Rows (csv):" if n else "No rows.",
        ]
        if n:
            lines.append(encode_csv(table.column_names, rows))
            if rounds_any(table):
                lines.append(ROUNDED_NOTE + ".")
        lines.extend(source_more)
        tokens = self.counter.count_tokens("\n".join(lines))
        if tokens <= self.settings.standard_budget_tokens:
            return lines
        summary = self._table_standard(raw, extent, columns, None, {}, source_more, shared).lines
        return lines if tokens <= self.counter.count_tokens("\n".join(summary)) + _ARTIFACT_NOTE_TOKENS else None

    def _table_standard(
        self,
        raw: Table,
        extent: str,
        columns: list[dict[str, str]],
        meta: ArtifactMeta | None,
        structured: dict[str, Any],
        source_more: list[str],
        shared: dict[str, Any] | None = None,
    ) -> _Part:
        table = raw.frame
        n = table.num_rows
        shared = {} if shared is None else shared
        preview, _ = self._preview(raw, shared)
        if "summaries" not in shared:
            shared["summaries"] = self._summaries(raw)
        heading, summaries = shared["summaries"]
        lines = [f"{raw.title}: {extent}", heading]
        lines.extend(f"- {c['name']}: {c['type']} — {summary}" for c, summary in zip(columns, summaries, strict=True))
        if n:
            shown = len(preview)
            lines.append(f"First {shown} rows (csv):" if shown < n else f"All {n} rows (csv):")
            lines.append(encode_csv(table.column_names, preview))
            if rounds_any(table.slice(0, shown)):
                lines.append(ROUNDED_NOTE + (f" or the artifact {meta.id}." if meta else "."))
        if meta:
            total = raw.total_rows if raw.artifact_id and raw.total_rows else n
            lines.append(
                f"Truncated: {len(preview):,} of {total:,} rows shown. "
                f"Complete table: {meta.id} — {self._how_to_read(meta)}."
            )
        lines.extend(source_more)
        structured.update(truncated=meta is not None, shown_rows=len(preview), artifact_id=meta.id if meta else None)
        return _Part(lines, structured, artifacts=[meta] if meta else [])

    def _preview(self, raw: Table, shared: dict[str, Any]) -> tuple[list[list[Any]], bool]:
        """The first ``preview_rows`` rows as plain values (and whether a cell was cut), once per observation."""
        if "preview" not in shared:
            shared["preview"] = plain_rows(
                raw.frame.slice(0, self.settings.preview_rows),
                round_floats=True,
                max_chars=self.settings.max_cell_chars,
            )
        return shared["preview"]

    def _summaries(self, raw: Table) -> tuple[str, list[str]]:
        """The column summaries and the heading that says what they describe. A table that is all of its
        result is summarised itself; a part of a result stored whole (a query cut at max_rows) is summarised
        over the whole stored result (computed by DuckDB over the artifact); any other part says that its
        summaries cover only its own rows."""
        table = raw.frame
        n = table.num_rows
        if not (raw.offset or raw.more or (raw.total_rows is not None and raw.total_rows > n)):
            if raw.artifact_id and n > PYTHON_STATS_ROWS:  # a long table also stored: its figures by a worker
                stored = self._stored_stats(raw.artifact_id)
                if stored is not None and stored[1] == n and set(table.column_names) <= set(stored[0]):
                    return "Columns (name: type — summary):", [format_stats(stored[0][c]) for c in table.column_names]
            return "Columns (name: type — summary):", self._own_summaries(table)
        if raw.artifact_id and raw.total_rows is not None:
            if raw.whole_stats is not None and raw.artifact_id not in self._whole_stats:
                self._whole_stats[raw.artifact_id] = (raw.whole_stats[0], int(raw.whole_stats[1]))
            whole = self._stored_stats(raw.artifact_id)
            if whole is not None and whole[1] == raw.total_rows and set(table.column_names) <= set(whole[0]):
                return (
                    f"Columns (name: type — summary of all {raw.total_rows:,} rows):",
                    [format_stats(whole[0][name]) for name in table.column_names],
                )
        rows = f"rows {raw.offset:,}–{raw.offset + n - 1:,}" if n else "no rows"
        return f"Columns (name: type — summary of {rows} only, not of the whole source):", self._own_summaries(table)

    @staticmethod
    def _own_summaries(table: pa.Table) -> list[str]:
        return [_column_summary(table.column(i)) for i in range(table.num_columns)]

    def _stored_stats(self, aid: str) -> tuple[dict[str, dict[str, Any]], int] | None:
        """``column_stats`` figures of every column of a stored table and its row count (artifacts never
        change: their id is their content's digest, so the figures are kept for the next call)."""
        if aid not in self._whole_stats:
            try:
                self.store.claim(aid)  # the artifact of this session's result (see _keep)
                with self.store.reading(aid) as meta:
                    if meta.kind != "table":
                        return None
                    figures = self.table_stats(aid)
                    if figures is None:
                        return None
                    self._whole_stats[aid] = figures
            except ToolFailure:
                return None
            while len(self._whole_stats) > 64:
                self._whole_stats.pop(next(iter(self._whole_stats)))
        return self._whole_stats[aid]

    # -- documents ----------------------------------------------------------------------------

    def _document(self, tool: str, raw: Document, level: OutputLevel) -> _Part:
        text = raw.text
        words = len(text.split())
        tokens = self.counter.count_tokens(text)
        structured: dict[str, Any] = {
            "kind": "document",
            "title": raw.title,
            "mime": raw.mime,
            "chars": len(text),
            "words": words,
            "tokens": tokens,
            "offset": raw.offset,
            "total_chars": raw.total_chars,
            "more_in_source": raw.more,
        }
        size = f"{len(text):,} characters, {words:,} words, ~{tokens:,} tokens"
        if raw.offset or raw.more:
            size += f" (characters {raw.offset:,}–{raw.offset + len(text):,} of {raw.total_chars or 'more'})"
        source_more = self._source_more(tool, raw)
        if not text.strip():
            structured.update(truncated=False, artifact_id=None)
            return _Part([f"{raw.title}: empty ({size})", *source_more], structured)

        if level is OutputLevel.BRIEF:
            flat = " ".join(text.split())
            if len(flat) <= _SHORT_TEXT_CHARS:  # shorter than naming an artifact would be: the text itself
                structured.update(truncated=False, artifact_id=None)
                return _Part([f"{raw.title} ({len(text):,} characters): {flat}", *source_more], structured)
            first = _first_sentence(text)
            complete = first.strip() == text.strip()
            meta = None if complete else self._keep(tool, raw)
            lines = [f"{raw.title}: {size}", f"Starts: {first}"]
            if meta:
                lines.append(f"Complete text: {meta.id} — {self._how_to_read(meta)}.")
            structured.update(truncated=meta is not None, artifact_id=meta.id if meta else None)
            return _Part([*lines, *source_more], structured, artifacts=[meta] if meta else [])

        budget = (
            (self.settings.whole_limit_tokens if raw.whole else self.settings.inline_limit_tokens)
            if level is OutputLevel.FULL
            else self.settings.document_window_tokens
        )
        if tokens <= budget and len(text) < _INLINE_BYTES_LIMIT:
            structured.update(truncated=False, artifact_id=None, shown_chars=len(text))
            return _Part([f"{raw.title}: {size}", "", text, "", *source_more], structured)

        if raw.tail_matters:
            return self._head_and_tail(tool, raw, budget, size, structured)
        # Cut once, continued once: at the position where the shown part ends (the source's own
        # continuation, further on, would skip what this window read but did not show).
        cut = self.counter.prefix_chars(text, budget)
        meta = self._keep(tool, raw)
        next_offset = raw.offset + cut
        outline = _outline(text, raw.mime)
        lines = [f"{raw.title}: {size}"]
        if outline:
            lines.append("Outline: " + " | ".join(outline))
        window_arg = self.tools.get(tool, ToolTraits()).window_arg
        kept = (
            "the whole text"
            if raw.artifact_id or not (raw.more or raw.offset)
            else f"characters {raw.offset:,}–{raw.offset + len(text):,} as one text"
        )
        goon = (
            f"Truncated: continue with {window_arg}={next_offset} (the same call with that {window_arg}), "
            f"or read {kept}: {meta.id} — {self._how_to_read(meta)}."
            if window_arg
            else f"Truncated: {kept} is {meta.id} — {self._how_to_read(meta)}."
        )
        lines += [
            f"Window: characters {raw.offset:,}–{next_offset:,} (~{budget:,} tokens):",
            "",
            text[:cut],
            "",
            goon,
        ]
        structured.update(
            truncated=True, artifact_id=meta.id, shown_chars=cut, next_offset=next_offset, outline=outline
        )
        return _Part(lines, structured, artifacts=[meta])

    def _head_and_tail(
        self,
        tool: str,
        raw: Document,
        budget: int,
        size: str,
        structured: dict[str, Any],
    ) -> _Part:
        """Program output over the budget: its beginning and its end (which ends with the last line
        printed), half the budget each, and the whole text as an artifact."""
        text = raw.text
        head = self.counter.prefix_chars(text, budget // 2)
        tail = self.counter.prefix_chars(text[::-1], budget // 2)
        tail = min(tail, len(text) - head)
        meta = self._keep(tool, raw)
        lines = [
            f"{raw.title}: {size}",
            "",
            text[:head].rstrip("\n"),
            f"… [{len(text) - head - tail:,} characters not shown] …",
            text[len(text) - tail :].rstrip("\n"),
            "",
            f"Truncated: the whole text is {meta.id} — {self._how_to_read(meta)}.",
        ]
        structured.update(truncated=True, artifact_id=meta.id, shown_chars=head + tail)
        return _Part(lines, structured, artifacts=[meta])

    # -- JSON ---------------------------------------------------------------------------------

    def _json(self, tool: str, raw: JsonValue, level: OutputLevel) -> _Part:
        value = raw.value
        shape = _json_shape(value)
        structured: dict[str, Any] = {"kind": "json", "title": raw.title, "shape": shape}
        compact = json.dumps(value, ensure_ascii=False, default=str)
        if level is OutputLevel.BRIEF:
            complete = len(compact) <= 60
            meta = None if complete else self._keep(tool, raw)
            line = f"{raw.title}: {shape}" + (
                f" = {compact}" if complete else f"; complete JSON: {meta.id}" if meta else ""
            )
            structured.update(truncated=not complete, artifact_id=meta.id if meta else None)
            return _Part([line], structured, artifacts=[meta] if meta else [])
        pretty = json.dumps(value, ensure_ascii=False, indent=2, default=str)
        budget = self.settings.inline_limit_tokens if level is OutputLevel.FULL else self.settings.json_budget_tokens
        if self.counter.count_tokens(pretty) <= budget and len(pretty) < _INLINE_BYTES_LIMIT:
            structured.update(truncated=False, artifact_id=None)
            if level is OutputLevel.FULL:
                structured["value"] = value
            return _Part([f"{raw.title}: {shape}", pretty], structured)
        cut = self.counter.prefix_chars(pretty, budget)
        meta = self._keep(tool, raw)
        lines = [
            f"{raw.title}: {shape}",
            pretty[:cut] + "\n…",
            f"Truncated at ~{budget:,} tokens. Complete JSON: {meta.id} — {self._how_to_read(meta)}.",
        ]
        structured.update(truncated=True, artifact_id=meta.id)
        return _Part(lines, structured, artifacts=[meta])

    # -- images and composites ----------------------------------------------------------------

    def _image(self, tool: str, raw: Image, level: OutputLevel) -> _Part:
        meta = self._keep(tool, raw)
        structured = {
            "kind": "image",
            "title": raw.title,
            "mime": raw.mime,
            "bytes": len(raw.data),
            "artifact_id": meta.id,
        }
        line = f"{raw.title}: {raw.mime}, {len(raw.data):,} bytes; stored as {meta.id} ({meta.uri})"
        images = [] if level is OutputLevel.BRIEF else [(raw.data, raw.mime)]
        return _Part([line], structured, images=images, artifacts=[meta])

    def _composite(self, tool: str, raw: Composite, level: OutputLevel) -> _Part:
        lines = [raw.title] if raw.title else []
        structured: dict[str, Any] = {"kind": "composite", "title": raw.title, "parts": []}
        images: list[tuple[bytes, str]] = []
        artifacts: list[ArtifactMeta] = []
        for label, sub in raw.parts:
            if isinstance(sub, Document) and not sub.more and len(sub.text) <= _COMPACT_PART_CHARS:
                # Short output is shown as it is: a size header would cost more than the text it describes
                lines.append(
                    f"## {label}" + (f" ({sub.title.split('(', 1)[-1].rstrip(')')})" if "(" in sub.title else "")
                )
                lines.append(sub.text.rstrip("\n"))
                lines.extend(f"Note: {n}" for n in sub.notes)
                structured["parts"].append({"label": label, "kind": "document", "chars": len(sub.text)})
                continue
            part = self._part(tool, sub, level)
            lines.append(f"## {label}")
            lines.extend(part.lines)
            structured["parts"].append({"label": label, **part.structured})
            images += part.images
            artifacts += part.artifacts
        return _Part(lines, structured, images, artifacts)


# -- helpers ----------------------------------------------------------------------------------


def _kind(raw: RawResult) -> str:
    return {Table: "table", Document: "document", JsonValue: "json", Image: "image", Composite: "result"}[type(raw)]


def _total(raw: Table) -> str:
    if raw.total_rows is not None:
        return f"of {raw.total_rows:,}"
    return "; more follow" if raw.more else f"of {raw.offset + raw.frame.num_rows:,}"


def _dtype(column: pa.ChunkedArray) -> str:
    """A column's type in the words the observations use (pandas-era names: int64, float64, datetime…)."""
    import pyarrow as pa

    t = column.type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or t == pa.string_view() or pa.types.is_null(t):
        return "string"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_floating(t):
        return f"float{t.bit_width}"
    if pa.types.is_integer(t):
        return str(t)
    if pa.types.is_timestamp(t):
        return f"datetime ({t.tz})" if t.tz else "datetime"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "bytes"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return "list"
    if pa.types.is_struct(t) or pa.types.is_map(t):
        return "struct"
    return str(t)


def _num(value: Any) -> str:
    value = cell_value(value)
    if isinstance(value, float):
        return f"{value:.0f}" if 1e6 <= abs(value) < 1e15 else f"{value:.6g}"
    return str(value)


def _column_summary(column: pa.ChunkedArray) -> str:
    """Nulls, range and mean of numbers, span of dates, distinct count and the top value of the rest (NaN
    counts as missing, as it always has here)."""
    return format_stats(column_stats(column))


def format_stats(stats: Mapping[str, Any]) -> str:
    """A column summary line from ``column_stats``-shaped figures."""
    parts: list[str] = []
    kind, count = stats["kind"], stats["count"]
    if not count:
        pass
    elif kind == "bool":
        parts.append(f"true {stats['true']}, false {count - stats['true']}")
    elif kind == "number":
        parts.append(f"min {_num(stats['min'])}, mean {_num(float(stats['mean']))}, max {_num(stats['max'])}")
        parts.append(f"{stats['distinct']} distinct")
    elif kind == "time":
        parts.append(f"{_num(stats['min'])} → {_num(stats['max'])}")
    else:
        parts.append(f"{stats['distinct']} distinct")
        top = stats.get("top")
        if stats["distinct"] < count and top is not None:
            parts.append(f"top {str(top[0])[:30]!r} ×{top[1]}")
    if stats["nulls"]:
        parts.append(f"{stats['nulls']} nulls")
    if stats.get("nan"):  # a NaN is no NULL: counted apart (its figures are the other values')
        parts.append(f"{stats['nan']} NaN")
    return "; ".join(parts) or "no values"


def _first_sentence(text: str, limit: int = 300) -> str:
    stripped = text.strip()
    match = re.search(r"(.+?[.!?。！？])(\s|$)", stripped[: limit + 1], flags=re.S)
    sentence = match.group(1) if match else stripped.split("\n", 1)[0]
    sentence = " ".join(sentence.split())
    return sentence if len(sentence) <= limit else sentence[: limit - 1] + "…"


def _outline(text: str, mime: str, limit: int = 30) -> list[str]:
    if mime == "text/markdown":
        heads = re.findall(r"^(#{1,4})\s+(.+?)\s*#*$", text, flags=re.M)
        return [("  " * (len(h) - 1)) + t[:80] for h, t in heads[:limit]]
    if mime == "text/x-python":
        return re.findall(r"^(?:async\s+)?(?:def|class)\s+(\w+)", text, flags=re.M)[:limit]
    return []


def _json_shape(value: Any) -> str:
    if isinstance(value, dict):
        keys = list(value)
        shown = ", ".join(map(str, keys[:12])) + (", …" if len(keys) > 12 else "")
        return f"object with {len(keys)} keys: {shown}"
    if isinstance(value, list):
        kinds = {type(v).__name__ for v in value[:100]}
        if value and all(isinstance(v, dict) for v in value[:100]):
            keys = list(dict.fromkeys(k for v in value[:100] for k in v))
            return f"array of {len(value):,} objects with keys: " + ", ".join(map(str, keys[:12]))
        return f"array of {len(value):,} items ({', '.join(sorted(kinds)) or 'empty'})"
    return f"{type(value).__name__} value"
