"""Exports: what the analyst keeps leaves the hidden workspace only through ``files.export_dir`` (docs/tools.md).

``Exports.write(artifact_id, path, overwrite=False)`` writes a stored artifact as a file beneath the export
folder: a table as CSV, XLSX, Parquet or Markdown; an image as PNG; a text as Markdown. ``path`` is relative
to the folder (``reports/q3.xlsx``) and judged like every workspace path — absolute paths, ``..``, hidden
names, NUL and control characters are refused — and the file is made beneath a descriptor of the folder with
no symbolic link followed (``openat2`` ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`` for each folder on the way,
created with ``mkdirat``). The content is written to a temporary name in its folder and linked into place:
``link`` refuses an existing name (no file is overwritten unless asked, and no check comes before the write);
``overwrite=True`` renames over it (a link at that name is replaced, never followed). Errors are
``ToolFailure`` in the error format (T-E).
"""

from __future__ import annotations

import errno
import os
import re
import uuid
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from ba_mcp.errors import ErrorType, ToolFailure, denied, invalid
from ba_mcp.workspace import open_beneath

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ba_mcp.stores.artifacts import ArtifactStore

# suffix -> the artifact kinds it can hold
EXPORT_FORMATS: dict[str, frozenset[str]] = {
    ".csv": frozenset({"table"}),
    ".xlsx": frozenset({"table"}),
    ".parquet": frozenset({"table"}),
    ".png": frozenset({"image"}),
    ".md": frozenset({"table", "text", "markdown"}),
}
_XLSX_MAX_ROWS = 1_048_575  # Excel's sheet holds 1,048,576 rows, one of them the header


# names the server reads as its own configuration, wherever they are (S-18)
CONFIGURATION_NAMES = frozenset({"skill.md", "ba-mcp.yaml", "ba-mcp.yml"})


class Exports:
    """The export folder (created on first use) and the writer of artifacts into it. ``protected``: the folders the
    server reads configuration from (skills, metric files, dbt projects) — no export lands in one (S-18), even when
    the export folder holds them. ``own``: the calling principal's export folder when the server keeps principals
    apart (``Workspace.own``), given ``root`` — what one analyst's server writes to; by default ``root`` itself."""

    def __init__(
        self,
        root: Path,
        artifacts: ArtifactStore,
        protected: Sequence[Path] = (),
        own: Callable[[Path], Path] | None = None,
    ) -> None:
        self._root = root
        self._own = own or (lambda root: root)
        self.artifacts = artifacts
        self.protected = [Path(os.path.realpath(p)) for p in protected]

    @property
    def root(self) -> Path:
        """The export folder of the calling principal."""
        return self._own(self._root)

    @property
    def shown_root(self) -> str:
        """How the folder is named to a client: its own name, never its full path."""
        return self.root.name or "exports"

    def write(self, artifact_id: str, path: str, *, overwrite: bool = False) -> str:
        """Write the artifact at ``path`` beneath the export folder; returns the name to show
        (``exports/reports/q3.xlsx``)."""
        relative = _checked(path)
        root = self.root  # the caller's, decided once
        self._not_configuration(root, relative)
        suffix = PurePosixPath(relative).suffix.lower()
        with self.artifacts.reading(artifact_id) as meta:
            if meta.kind not in EXPORT_FORMATS[suffix]:
                kinds = ", ".join(s for s, k in EXPORT_FORMATS.items() if meta.kind in k) or "none"
                raise invalid(
                    f"a {meta.kind} artifact cannot be exported as {suffix}",
                    f"export a {meta.kind} as: {kinds}",
                    code="EXPORT_FORMAT",
                )
            source = self.artifacts.data_path(meta)
            folder_fd, name = self._folder(root, relative)
            try:
                tmp = f".{name}.{uuid.uuid4().hex}.tmp"
                fd = os.open(
                    tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=folder_fd
                )
                try:
                    with os.fdopen(fd, "wb") as out:
                        _convert(meta.kind, source, suffix, out)
                        out.flush()
                        os.fsync(out.fileno())
                    _place(folder_fd, tmp, name, overwrite, relative)
                finally:
                    try:
                        os.unlink(tmp, dir_fd=folder_fd)
                    except FileNotFoundError:
                        pass
            finally:
                os.close(folder_fd)
        return f"{root.name or 'exports'}/{relative}"

    def _not_configuration(self, root: Path, relative: str) -> None:
        """No export writes a file the server would read as configuration: a skill's SKILL.md, a project file, or
        anything in a folder of skills, metric files or a dbt project (an agent rewriting its own configuration)."""
        target = Path(os.path.realpath(root)) / relative  # beneath the root no symbolic link is followed
        inside = next((p for p in self.protected if p == target or p in target.parents), None)
        if PurePosixPath(relative).name.lower() in CONFIGURATION_NAMES or inside is not None:
            raise denied(
                f"'{relative[:100]}' would be read by the server as its own configuration (a skill, metric files or "
                "a dbt project): exports never write there",
                'export into a folder of its own, e.g. "reports/q3.md"',
            )

    def _folder(self, root: Path, relative: str) -> tuple[int, str]:
        """A descriptor of the folder that will hold ``relative`` (made as needed, beneath the export folder
        ``root``, no link followed), and the file's name."""
        fd = self._open_root(root)
        *folders, name = relative.split("/")
        try:
            for part in folders:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                try:
                    nxt = open_beneath(fd, part, directory=True)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.EXDEV, errno.ENOTDIR):
                        raise
                    raise denied(
                        f"'{relative[:200]}' goes through a symbolic link or a file in the export folder",
                        "export beneath the export folder into plain folders",
                    ) from None
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd, name

    def _open_root(self, root: Path) -> int:
        """The export folder itself, opened beneath its parent without following a link (a project that ships
        ``ba-exports`` as a symbolic link does not send exports elsewhere); its parent is the operator's
        choice (``files.export_dir``), made as needed."""
        parent, name = root.parent, root.name
        parent.mkdir(parents=True, exist_ok=True)
        parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            try:
                os.mkdir(name, 0o755, dir_fd=parent_fd)
            except FileExistsError:
                pass
            try:
                return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                raise denied(
                    f"the export folder {name} is a symbolic link or a file, which exports never follow",
                    "make it a plain folder, or point files.export_dir at one",
                ) from None
        finally:
            os.close(parent_fd)


def _checked(path: str) -> str:
    """``path`` as a clean relative path beneath the export folder, or a refusal."""
    if not isinstance(path, str) or not path.strip():
        raise invalid("the export path is empty", 'name a file in the export folder, e.g. "reports/q3.xlsx"')
    if "\x00" in path or any(ord(c) < 32 for c in path):
        raise denied("the export path contains a NUL or control character")
    text = path.strip()
    if text.startswith(("/", "\\", "~")) or re.match(r"^[A-Za-z]:", text) or "\\" in text or "%" in text:
        raise denied(
            "the export path must be relative to the export folder, with / between folders",
            'e.g. "reports/q3.xlsx"; it lands in the export folder (files.export_dir)',
        )
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise denied("'..' is not allowed in export paths", "exports stay inside the export folder")
    if not parts or any(p.startswith(".") for p in parts):
        raise invalid("export paths name a file, without hidden ('.') names", 'e.g. "reports/q3.xlsx"')
    suffix = PurePosixPath(parts[-1]).suffix.lower()
    if suffix not in EXPORT_FORMATS:
        raise invalid(
            f"'{parts[-1][:100]}' has no export format",
            "end the name with " + ", ".join(EXPORT_FORMATS),
            code="EXPORT_FORMAT",
        )
    return "/".join(parts)


def _place(folder_fd: int, tmp: str, name: str, overwrite: bool, shown: str) -> None:
    if overwrite:
        os.rename(tmp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
        return
    try:
        os.link(tmp, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd, follow_symlinks=False)
    except FileExistsError:
        raise ToolFailure(
            ErrorType.VALIDATION_ERROR,
            "EXPORT_EXISTS",
            f"{shown[:200]} already exists in the export folder",
            "choose another name, or pass overwrite=True (ba-mcp artifacts export --overwrite) to replace it",
        ) from None


def _convert(kind: str, source: Path, suffix: str, out: object) -> None:
    """Write the artifact file ``source`` of ``kind`` to the binary stream ``out`` in the format of ``suffix``."""
    import shutil

    if suffix in (".png", ".parquet") or (suffix == ".md" and kind in ("text", "markdown")):
        with source.open("rb") as f:
            shutil.copyfileobj(f, out)  # type: ignore[arg-type]
        return
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(source)
    if suffix == ".csv":
        import pyarrow.csv as pacsv

        with pacsv.CSVWriter(out, parquet.schema_arrow) as writer:
            for batch in parquet.iter_batches(65536):
                writer.write_batch(batch)
        return
    if suffix == ".md":
        from ba_mcp.pipeline.encode import encode_table

        out.write((encode_table(parquet.read(), "markdown") + "\n").encode("utf-8"))  # type: ignore[attr-defined]
        return
    _xlsx(parquet, out)


def _xlsx(parquet: object, out: object) -> None:
    """A table as one sheet, streamed row by row (openpyxl's write-only mode)."""
    from openpyxl import Workbook

    from ba_mcp.pipeline.encode import python_values

    rows = parquet.metadata.num_rows  # type: ignore[attr-defined]
    if rows > _XLSX_MAX_ROWS:
        raise invalid(
            f"the table has {rows:,} rows; an Excel sheet holds {_XLSX_MAX_ROWS:,}",
            "export it as .csv or .parquet, or aggregate it first",
            code="EXPORT_TOO_LARGE",
        )
    book = Workbook(write_only=True)
    sheet = book.create_sheet("data")
    sheet.append(list(parquet.schema_arrow.names))  # type: ignore[attr-defined]
    for batch in parquet.iter_batches(65536):  # type: ignore[attr-defined]
        columns = [python_values(col) for col in batch.columns]
        for row in zip(*columns, strict=True):
            sheet.append([_excel_cell(v) for v in row])
    book.save(out)


def _excel_cell(value: object) -> object:
    """A value openpyxl can write: timezones dropped (Excel has none), nested values as text, a float that is no
    number as psql writes it (``NaN``, ``Infinity``: Excel has no such number, and openpyxl would leave the cell
    empty — a NaN is no NULL)."""
    import datetime as dt
    import json

    from ba_mcp.values import non_finite_text

    if (text := non_finite_text(value)) is not None:
        return text
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.replace(tzinfo=None)
    if isinstance(value, (list, dict, tuple)):
        return json.dumps(value, default=str)
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    return value
