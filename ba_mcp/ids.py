"""The ids a model passes: ``artifact_<12 hex>``, ``code_<12 hex>`` (both content-addressed: the first 12
hex digits of the SHA-256 of the content) and ``upload_<name>`` (a file of ``uploads/``). Every id is
checked against its pattern before any lookup.

An upload's id is an SQL identifier as shown: letters, digits and ``_`` only, so ``FROM upload_data_2020_v1``
reads ``uploads/data-2020.v1.csv`` unquoted (with ``-`` or ``.`` kept, DuckDB reads ``upload_data-2020`` as a
subtraction and ``upload_x.v1`` as table ``v1`` of schema ``upload_x``). The ids shown before (``-`` and ``.``
kept: ``legacy_upload_id_for``) still resolve."""

from __future__ import annotations

import re

ARTIFACT_ID = re.compile(r"^artifact_[0-9a-f]{12}$")
CODE_ID = re.compile(r"^code_[0-9a-f]{12}$")
UPLOAD_ID = re.compile(r"^upload_[A-Za-z0-9_][A-Za-z0-9._-]{0,200}$")


SQL_UPLOAD_ID = re.compile(r"^upload_[A-Za-z0-9_]{1,200}$")  # what upload_id_for gives: an SQL identifier


def _stem(filename: str) -> str:
    return filename.rsplit(".", 1)[0] if "." in filename[1:] else filename


def upload_id_for(filename: str, whole: bool = False) -> str:
    """The id of an upload: ``upload_`` + its file name without the extension (``whole``: with it, for files
    whose stems collide), every character but letters, digits and ``_`` made ``_`` (an SQL identifier)."""
    return "upload_" + re.sub(r"[^A-Za-z0-9_]", "_", filename if whole else _stem(filename))


def legacy_upload_id_for(filename: str) -> str:
    """The id shown for an upload before ids were SQL identifiers (``-`` and ``.`` kept): it still resolves."""
    return "upload_" + re.sub(r"[^A-Za-z0-9._-]", "_", _stem(filename))
