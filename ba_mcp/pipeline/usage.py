"""Usage statistics (T-T, seed 000 ToolTelemetry, seed 001 MetricsCollector). Never shown to the model.

Every call becomes one ``CallRecord``: one JSONL line in ``logs/telemetry-YYYY-MM-DD.jsonl`` and an
update of the in-memory ``Usage`` of its session (per tool: calls, latency, tokens, error and cache-hit
rates — read as the resource ``ba://metrics``). ``Usage`` also aggregates log files for ``ba-mcp stats``, per tool and
per user (a record's ``session`` names its principal: ``callers.principal_of``).
("Usage" in this code base means the semantic layer's business metrics; this is usage.)
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class CallRecord:
    execution_id: str
    session: str
    tool: str
    timestamp: float
    duration_ms: float
    input_tokens: int
    output_tokens: int
    output_level: str
    level_downgraded: bool
    cache_hit: bool
    retries: int
    success: bool
    error_type: str | None = None
    error_code: str | None = None
    artifacts: list[str] = field(default_factory=list)
    # Provenance, kept in the session's history (never written to the telemetry log: arguments are the
    # user's queries and code): the call's arguments as the client sent them, and what produced the result.
    arguments: dict[str, Any] = field(default_factory=dict, repr=False)
    provenance: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def call_id(self) -> str:
        return "call_" + self.execution_id[:12]

    def telemetry(self) -> dict[str, Any]:
        """The record as a telemetry line holds it (no arguments, no provenance: ``asdict`` deep-copied both
        before dropping them — a quarter of a millisecond of every call)."""
        return {name: getattr(self, name) for name in _TELEMETRY_FIELDS}


_TELEMETRY_FIELDS = tuple(f.name for f in fields(CallRecord) if f.name not in ("arguments", "provenance"))


@dataclass
class ToolStats:
    calls: int = 0
    successes: int = 0
    errors: int = 0
    cache_hits: int = 0
    retries: int = 0
    total_ms: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0

    def as_dict(self) -> dict[str, Any]:
        n = self.calls or 1
        return {
            "calls": self.calls,
            "success_rate": round(self.successes / n, 4),
            "error_rate": round(self.errors / n, 4),
            "cache_hit_rate": round(self.cache_hits / n, 4),
            "avg_latency_ms": round(self.total_ms / n, 2),
            "retries": self.retries,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }


class Usage:
    """Per-tool aggregates (seed 001 MetricsCollector); with ``by`` (a record's user: ``ba-mcp stats``), per user
    too."""

    def __init__(self, by: Callable[[CallRecord], str] | None = None) -> None:
        self.tools: dict[str, ToolStats] = {}
        self.errors_by_type: dict[str, int] = {}
        self.by = by
        self.users: dict[str, ToolStats] = {}

    def add(self, rec: CallRecord) -> None:
        groups = [self.tools.setdefault(rec.tool, ToolStats())]
        if self.by is not None:
            groups.append(self.users.setdefault(self.by(rec), ToolStats()))
        for st in groups:
            _count(st, rec)
        if rec.error_type:
            self.errors_by_type[rec.error_type] = self.errors_by_type.get(rec.error_type, 0) + 1

    @property
    def output_tokens(self) -> int:
        return sum(s.output_tokens for s in self.tools.values())

    def report(self) -> dict[str, Any]:
        total = ToolStats()
        for st in self.tools.values():
            for name in ("calls", "successes", "errors", "cache_hits", "retries", "input_tokens", "output_tokens"):
                setattr(total, name, getattr(total, name) + getattr(st, name))
            total.total_ms += st.total_ms
        report = {
            "total": total.as_dict(),
            "tools": {name: st.as_dict() for name, st in sorted(self.tools.items())},
            "errors_by_type": dict(sorted(self.errors_by_type.items())),
        }
        if self.by is not None:
            report["users"] = {name: st.as_dict() for name, st in sorted(self.users.items())}
        return report

    @classmethod
    def from_records(cls, records: Iterable[CallRecord], by: Callable[[CallRecord], str] | None = None) -> Usage:
        m = cls(by)
        for rec in records:
            m.add(rec)
        return m


def _count(st: ToolStats, rec: CallRecord) -> None:
    st.calls += 1
    st.successes += rec.success
    st.errors += not rec.success
    st.cache_hits += rec.cache_hit
    st.retries += rec.retries
    st.total_ms += rec.duration_ms
    st.input_tokens += rec.input_tokens
    st.output_tokens += rec.output_tokens


class TelemetryLog:
    """Appends call records as JSONL; thread-safe."""

    def __init__(self, folder: Path, enabled: bool = True) -> None:
        self.folder = folder
        self.enabled = enabled
        self._lock = threading.Lock()
        self._file: Any = None  # the day's file, kept open (opening it per call cost a fifth of a millisecond)
        self._path: Path | None = None

    def write(self, rec: CallRecord) -> None:
        if not self.enabled:
            return
        line = json.dumps(rec.telemetry(), separators=(",", ":"), default=str) + "\n"
        path = self.folder / f"telemetry-{time.strftime('%Y-%m-%d', time.gmtime(rec.timestamp))}.jsonl"
        try:
            with self._lock:
                if path != self._path or self._file is None:
                    if self._file is not None:
                        self._file.close()
                    self._file, self._path = path.open("a", encoding="utf-8"), path
                self._file.write(line)
                self._file.flush()  # a line is complete on disk before the answer goes out
        except OSError as exc:
            log.warning("telemetry not written: %s", exc.strerror)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
            self._file = self._path = None

    def read(self, since: float | None = None) -> Iterator[CallRecord]:
        """Every record in the log folder (malformed lines skipped), oldest file first."""
        for path in sorted(self.folder.glob("telemetry-*.jsonl")):
            with path.open(encoding="utf-8") as f:
                for line in f:
                    try:
                        rec = CallRecord(**json.loads(line))
                    except (ValueError, TypeError):
                        continue
                    if since is None or rec.timestamp >= since:
                        yield rec
