"""The one table of formats: a file's suffix or a download's media type -> the format it is read as, and
the media types a format is shown with. file_reader, query_database, web_reader, the artifact store, exports
and the skills' files all name formats through it. Which suffix is which format is the registry's table
(``registry.FormatInfo``: the built-in formats and the enabled plug-ins'); ``format_for`` and ``known_format`` see
both, ``FORMATS`` the built-in ones."""

from __future__ import annotations

from ba_mcp import registry

# suffix -> built-in format (the registry's table of formats: ``registry.FormatInfo``)
FORMATS = {suffix: f.name for f in registry.formats() if not f.plugin for suffix in f.suffixes}
ARTIFACT_FORMATS = {"table": "parquet", "text": "text", "markdown": "markdown", "json": "json", "image": "image"}
TEXT_MIME = {"markdown": "text/markdown", "python": "text/x-python", "sql": "application/sql", "text": "text/plain"}
IMAGE_MIME = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


MEDIA_TYPES = {
    "text/csv": "csv",
    "application/csv": "csv",
    "text/tab-separated-values": "tsv",
    "application/json": "json",
    "application/x-ndjson": "jsonl",
    "application/jsonl": "jsonl",
    "application/vnd.apache.parquet": "parquet",
    "application/x-parquet": "parquet",
    "application/parquet": "parquet",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "excel",
    "application/vnd.ms-excel": "excel",
    "text/markdown": "markdown",
    "text/x-python": "python",
    "application/sql": "sql",
    "text/plain": "text",
    "image/png": "image",
    "image/jpeg": "image",
    "image/gif": "image",
    "image/webp": "image",
}
TABLE_FORMATS = frozenset({"csv", "tsv", "excel", "json", "jsonl", "parquet"})
TABLE_SUFFIXES = frozenset(suffix for suffix, fmt in FORMATS.items() if fmt in TABLE_FORMATS)  # SQL reads these


def known_format(suffix: str) -> str | None:
    """The format a file name ending in ``suffix`` is read as — a built-in one or an enabled plug-in's — or None."""
    found = registry.format_of(suffix)
    return found.name if found is not None else None


def format_for(suffix: str = "", media_type: str = "") -> str:
    """The format of a file by its suffix, else its media type; ``text`` when neither is known."""
    by_suffix = known_format(suffix)
    if by_suffix:
        return by_suffix
    return MEDIA_TYPES.get(media_type.split(";")[0].strip().lower(), "text")


# The formats a downloaded data file is read as a table in (JSON is a value of its own), and the suffix that
# tells the table reader which one.
DATA_FILE_SUFFIX = {"csv": ".csv", "tsv": ".tsv", "excel": ".xlsx", "parquet": ".parquet", "jsonl": ".jsonl"}
