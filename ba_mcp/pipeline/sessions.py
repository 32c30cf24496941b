"""Client sessions: what the server keeps per session, and the key a request belongs to.

stdio and in-process connections each get their own App (the lifespan runs per connection), so they need
no key: everything is session ``"default"``. On HTTP the App is shared and the ``mcp-session-id`` header
tells sessions apart; its key is a digest of the id, so the id (which lets a client speak as that session)
never reaches logs, usage statistics or the sandbox. Stateless HTTP (no session id) shares one key.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ba_mcp.pipeline.levels import RecentTokens
from ba_mcp.pipeline.usage import CallRecord, Usage
from ba_mcp.settings import SessionsSettings


@dataclass
class SessionState:
    """What the server keeps per client session: its usage (and so its token use), its log level, the
    token budget's sliding window, and the provenance of its latest calls — bounded (S-16): at most
    ``history_calls`` calls and ``history_bytes`` in all, a call's arguments kept only up to
    ``history_call_bytes``."""

    key: str
    limits: SessionsSettings = field(default_factory=SessionsSettings)
    usage: Usage = field(default_factory=Usage)
    log_level: str = "warning"
    recent: RecentTokens = field(default_factory=RecentTokens)
    history: deque[CallRecord] = field(default_factory=deque)
    _sizes: deque[int] = field(default_factory=deque)
    _kept_bytes: int = 0

    def remember(self, record: CallRecord) -> None:
        """Keep ``record`` in the history, within the limits: arguments (and the SQL or code they hold) over
        ``history_call_bytes`` are dropped from it, their size noted; the oldest calls go first."""
        size = _size(record.arguments) + _size(record.provenance)
        if size > self.limits.history_call_bytes:
            record.arguments = {}
            record.provenance = {
                "call_id": record.call_id,
                "tool": record.tool,
                "dropped": f"its arguments ({size:,} bytes) were too large to keep (sessions.history_call_bytes)",
                **{k: v for k, v in record.provenance.items() if k in ("error", "wrote")},
            }
            size = _size(record.provenance)
        self.history.append(record)
        self._sizes.append(size)
        self._kept_bytes += size
        while self.history and (
            len(self.history) > self.limits.history_calls or self._kept_bytes > self.limits.history_bytes
        ):
            self.history.popleft()
            self._kept_bytes -= self._sizes.popleft()


def _size(value: Any) -> int:
    try:
        return len(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return len(repr(value))


class Sessions:
    """The sessions of one App, created on first use and forgotten when they end (an HTTP session closed or
    idle past ``sessions.http_idle_timeout_s``)."""

    def __init__(self, limits: SessionsSettings | None = None) -> None:
        self.limits = limits or SessionsSettings()
        self._states: dict[str, SessionState] = {}
        self._lock = threading.Lock()

    def __call__(self, key: str) -> SessionState:
        with self._lock:
            state = self._states.get(key)
            if state is None:
                state = self._states[key] = SessionState(key, self.limits)
            return state

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._states)

    def forget(self, key: str) -> None:
        with self._lock:
            self._states.pop(key, None)


def session_key(headers: Mapping[str, Any] | None) -> str:
    """The client session a request belongs to, within one App."""
    sid = headers.get("mcp-session-id") if headers else None
    return http_session_key(str(sid)) if sid else "default"


def http_session_key(session_id: str) -> str:
    """The key of an HTTP session: a digest of its id."""
    return "http-" + hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()[:16]
