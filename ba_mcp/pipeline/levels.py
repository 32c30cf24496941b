"""Output levels (T-L) and their resolution."""

from __future__ import annotations

import collections
import enum
import threading
import time
from dataclasses import dataclass


class OutputLevel(enum.StrEnum):
    BRIEF = "brief"
    STANDARD = "standard"
    FULL = "full"


@dataclass(frozen=True)
class LevelChoice:
    level: OutputLevel
    explicit: bool
    downgraded: bool
    asked: OutputLevel | None = None  # the level it would have been, when downgraded


def resolve_level(
    explicit: str | None,
    tool_default: str | None,
    global_default: str,
    tokens_used: int,
    budget: int,
    downgrade_ratio: float,
) -> LevelChoice:
    """First match wins: the call's level, the tool's default, the global default. A level that was not
    asked for explicitly becomes ``brief`` once the session has received more than
    ``downgrade_ratio`` × ``budget`` observation tokens (seed 001 get_effective_output_level)."""
    if explicit is not None:
        return LevelChoice(OutputLevel(explicit), explicit=True, downgraded=False)
    level = OutputLevel(tool_default or global_default)
    if level is not OutputLevel.BRIEF and tokens_used > downgrade_ratio * budget:
        return LevelChoice(OutputLevel.BRIEF, explicit=False, downgraded=True, asked=level)
    return LevelChoice(level, explicit=False, downgraded=False)


class RecentTokens:
    """Observation tokens a session received within the last ``window_s`` seconds — the budget's measure.
    A sliding window, so one long-lived process (Claude Desktop keeps its server running across many
    conversations) is never starved: old results stop counting as they age out."""

    def __init__(self) -> None:
        self._events: collections.deque[tuple[float, int]] = collections.deque()
        self._total = 0
        self._lock = threading.Lock()

    def add(self, tokens: int, now: float | None = None) -> None:
        with self._lock:
            self._events.append((time.monotonic() if now is None else now, tokens))
            self._total += tokens

    def within(self, window_s: float, now: float | None = None) -> int:
        now = time.monotonic() if now is None else now
        with self._lock:
            while self._events and now - self._events[0][0] > window_s:
                self._total -= self._events.popleft()[1]
            return self._total
