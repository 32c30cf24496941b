"""Text (plain, markdown, Python, SQL) as documents windowed by characters or lines, and images."""

from __future__ import annotations

import codecs
from typing import TYPE_CHECKING

from ba_mcp.errors import ErrorType, ToolFailure, invalid
from ba_mcp.formats.base import ReaderBase
from ba_mcp.formats.table import IMAGE_MIME, TEXT_MIME
from ba_mcp.results import Document, Image

MAX_IMAGE_BYTES = 20 * 1024 * 1024

if TYPE_CHECKING:
    pass


class TextReading(ReaderBase):
    def _read_text(self, mime: str | None = None) -> Document:
        """A window of at most ``partial_text_bytes`` characters from ``offset``, decoded incrementally:
        however long the file or its lines, no more than the window (and what precedes it) is read."""
        fmt_mime = mime or "text/plain"
        partial = self.large
        byte_limit = self.bounds.partial_text_bytes if partial else self.source.size
        window_chars = self.bounds.partial_text_bytes
        want_chars = self.window.offset + window_chars + 1  # one more tells whether text follows the window
        notes: list[str] = []
        with self.source.open() as f:
            sample = f.read(min(self.bounds.encoding_sample_bytes, byte_limit))
            if not sample:
                return Document(self.title, "", mime=fmt_mime, total_chars=0, notes=["the file is empty (0 bytes)"])
            encoding = self._text_encoding(sample)
            decoder = codecs.getincrementaldecoder(encoding)()
            pieces: list[str] = []
            have = 0
            read = len(sample)
            chunk = sample
            try:
                while True:
                    text_piece = decoder.decode(chunk, final=False)
                    pieces.append(text_piece)
                    have += len(text_piece)
                    if have >= want_chars or read >= byte_limit:
                        break
                    chunk = f.read(min(1024 * 1024, byte_limit - read))
                    if not chunk:
                        break
                    read += len(chunk)
                at_end = read >= self.source.size and have < want_chars
                if at_end:
                    pieces.append(decoder.decode(b"", final=True))
            except UnicodeDecodeError:
                raise self._decode_failed(encoding) from None
        text = "".join(pieces)
        if text.startswith("\ufeff"):
            text = text[1:]
        if partial:
            notes.append(
                f"the file is {self.source.size:,} bytes, over the {self.bounds.max_file_bytes:,}-byte read limit: "
                f"only the first {byte_limit:,} bytes were read"
            )
        if self.window.offset > len(text):
            raise invalid(f"offset {self.window.offset} is past the end of the text ({len(text):,} characters read)")
        window = text[self.window.offset : self.window.offset + window_chars]
        more = partial or not at_end or len(text) > self.window.offset + len(window)
        total = len(text) if at_end and not partial else None
        if self.window.nrows is not None:
            lines = window.splitlines(keepends=True)
            if len(lines) > self.window.nrows:
                window = "".join(lines[: self.window.nrows])
                more = True
        artifact_id = (
            self.source.ref_id if (self.source.kind == "artifact" and not self.window.offset and not more) else None
        )
        next_args = {"offset": self.window.offset + len(window)} if more else None
        return Document(
            self.title,
            window,
            mime=fmt_mime,
            offset=self.window.offset,
            total_chars=total,
            more=more,
            next_args=next_args,
            notes=notes,
            meta={"encoding": encoding},
            artifact_id=artifact_id,
        )

    def _read_markdown(self) -> Document:
        return self._read_text(TEXT_MIME["markdown"])

    def _read_python(self) -> Document:
        return self._read_text(TEXT_MIME["python"])

    def _read_sql(self) -> Document:
        return self._read_text(TEXT_MIME["sql"])

    def _read_image(self) -> Image:
        if self.source.size > MAX_IMAGE_BYTES:
            raise ToolFailure(
                ErrorType.RESOURCE_ERROR,
                "IMAGE_TOO_LARGE",
                f"the image is {self.source.size:,} bytes; at most {MAX_IMAGE_BYTES:,} are read",
            )
        if self.source.kind == "artifact" and self.source.ref_id and self.artifacts is not None:
            meta, data = self.artifacts.read_bytes(self.source.ref_id)
            return Image(self.title, data, mime=meta.mime, artifact_id=meta.id)
        mime = IMAGE_MIME.get(self.source.suffix, "image/png")
        return Image(self.title, self.source.path.read_bytes(), mime=mime)
