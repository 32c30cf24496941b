"""Skills: folders with a SKILL.md, loaded from the bundled ``skills/`` and ``skills.paths``
(``loader``), and served over MCP as resources, prompts and the skills extension (``mcp``)."""

from __future__ import annotations

from pathlib import Path

from ba_mcp.settings import SkillsSettings
from ba_mcp.skills.loader import MAX_DEPTH, Skill, SkillFile, Skills, validate_folder

__all__ = ["MAX_DEPTH", "Skill", "SkillFile", "Skills", "bundled_dir", "load_skills", "sources", "validate_folder"]


def bundled_dir() -> Path:
    """The bundled skills: the repository's ``skills/`` (or the copy inside an installed wheel)."""
    packaged = Path(__file__).resolve().parent.parent / "_skills"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[2] / "skills"


def sources(settings: SkillsSettings) -> list[tuple[str, Path]]:
    """(label, directory) to load skills from: configured paths first (they win a name clash), then the
    bundled skills. Labels never show a real path (``paths[0]``, ``bundled``)."""
    found = [(f"skills.paths[{i}]", Path(p).expanduser()) for i, p in enumerate(settings.paths)]
    if settings.bundled:
        found.append(("bundled", bundled_dir()))
    return found


def load_skills(settings: SkillsSettings) -> Skills:
    return Skills.load(sources(settings))
