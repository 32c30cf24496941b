"""Client sessions: what the server keeps per session, and the key a request belongs to.

stdio and in-process connections each get their own App (the lifespan runs per connection), so they need
no key: everything is session ``"default"``. On HTTP the App is shared and the ``mcp-session-id`` header
tells sessions apart; its key is a digest of the id, so the id (which lets a client speak as that session)
never reaches logs, usage statistics or the sandbox. Stateless HTTP (no session id) shares one key.
"""

from __future__ import annotations

import hashlib
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ba_mcp.pipeline.levels import RecentTokens
from ba_mcp.pipeline.usage import CallRecord, Usage

HISTORY = 200  # provenance records a session keeps (the latest calls)


@dataclass
class SessionState:
    """What the server keeps per client session: its usage (and so its token use), its log level, the
    token budget's sliding window, and the provenance of its latest calls."""

    key: str
    usage: Usage = field(default_factory=Usage)
    log_level: str = "warning"
    recent: RecentTokens = field(default_factory=RecentTokens)
    history: deque[CallRecord] = field(default_factory=lambda: deque(maxlen=HISTORY))


class Sessions:
    """The sessions of one App, created on first use."""

    def __init__(self) -> None:
        self._states: dict[str, SessionState] = {}
        self._lock = threading.Lock()

    def __call__(self, key: str) -> SessionState:
        with self._lock:
            state = self._states.get(key)
            if state is None:
                state = self._states[key] = SessionState(key)
            return state

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._states)


def session_key(headers: Mapping[str, Any] | None) -> str:
    """The client session a request belongs to, within one App."""
    sid = headers.get("mcp-session-id") if headers else None
    return http_session_key(str(sid)) if sid else "default"


def http_session_key(session_id: str) -> str:
    """The key of an HTTP session: a digest of its id."""
    return "http-" + hashlib.sha256(session_id.encode("utf-8", "replace")).hexdigest()[:16]
