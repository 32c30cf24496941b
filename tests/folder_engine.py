"""A folder-backed engine the package does not know (issue 52): a folder of files a driver reads, written as the
newcomer wrote theirs — one class on ``LocalEngine`` with ``folder = True`` and its ``open``, nothing copied."""

from __future__ import annotations

from typing import Any

from ba_mcp.databases.connector import Held, LocalEngine


class FolderEngine(LocalEngine):
    kind = "csvdir"
    folder = True

    def open(self, c: Held, message: dict[str, Any]) -> dict[str, Any]:
        c.extra["folder"] = self.where(c, message)  # what a driver would be pointed at
        return {"version": ""}


ENGINE = FolderEngine()
