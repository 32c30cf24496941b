"""The Python sandboxes of one App: one interpreter per client session (``python -I -B -m sandbox``, persistent
like a notebook) and one spare started in advance, so a new session, a reset or a restart does not wait for
Python, numpy and pandas to load. A ``WorkerPool`` like the engine workers': at ``sandbox.max_workers`` the
interpreter idle the longest makes room, and a new session's call waits for one to finish its cell.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ba_mcp.settings import SandboxSettings
from ba_mcp.workers.failures import worker_failures
from ba_mcp.workers.pool import Handle, WorkerPool
from ba_mcp.workers.process import sweep
from ba_mcp.workers.spawn import confinement, spawn, unavailable


def sandbox_options(settings: SandboxSettings) -> dict[str, object]:
    """A Python worker's confinement: its limits, the import guardrail and what of its output it keeps."""
    return confinement(
        settings,
        "sandbox",
        network=settings.network,
        max_processes=settings.max_processes,
        max_file_mb=settings.max_file_mb,
        max_transfer_mb=settings.max_transfer_mb,
        allowed_imports=settings.allowed_imports,
        output_head=settings.output_head_chars,
        output_tail=settings.output_tail_chars,
    )


class Sandboxes(WorkerPool):
    """The Python workers of one App, by session key."""

    kind = "sandbox"

    def __init__(
        self, settings: SandboxSettings, sessions_dir: Path, first: Callable[[bool], None] = lambda urgent: None
    ) -> None:
        super().__init__(settings, first=first)
        self.settings = settings
        self.sessions_dir = sessions_dir
        sessions_dir.mkdir(parents=True, exist_ok=True)
        sweep(sessions_dir)

    def _make(self, spare: bool) -> Handle:
        return Handle(spawn("sandbox", self.settings, self.sessions_dir, sandbox_options(self.settings), None))

    def _ready(self, handle: Handle) -> Handle:
        """Ready and started for its session (its first message, then the session's start)."""
        wait_s = self.settings.start_timeout_s
        with worker_failures(gone=lambda exc: unavailable("sandbox", handle.process, exc, wait_s)):
            handle.process.start(wait_s)
        return handle
