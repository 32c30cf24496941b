"""Output levels (T-L) and their resolution."""

from __future__ import annotations

import enum
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
        return LevelChoice(OutputLevel.BRIEF, explicit=False, downgraded=True)
    return LevelChoice(level, explicit=False, downgraded=False)
