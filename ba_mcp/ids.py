"""The ids a model passes: ``artifact_<12 hex>``, ``code_<12 hex>`` (both content-addressed: the first 12
hex digits of the SHA-256 of the content) and ``upload_<name>`` (a file of ``uploads/``). Every id is
checked against its pattern before any lookup."""

from __future__ import annotations

import re

ARTIFACT_ID = re.compile(r"^artifact_[0-9a-f]{12}$")
CODE_ID = re.compile(r"^code_[0-9a-f]{12}$")
UPLOAD_ID = re.compile(r"^upload_[A-Za-z0-9][A-Za-z0-9._-]{0,200}$")


def upload_id_for(filename: str) -> str:
    """The id of an upload: ``upload_`` + its file name without the extension, made id-safe."""
    stem = filename.rsplit(".", 1)[0] if "." in filename[1:] else filename
    return "upload_" + re.sub(r"[^A-Za-z0-9._-]", "_", stem)
