"""use_skill: skills for hosts whose models can only call tools (Claude Desktop).

Its description carries level 1 — how to use it, then the catalog (name and description of every skill
the model may invoke) within ``skills.catalog_budget_tokens``, names only beyond. ``use_skill(name)``
returns level 2: the skill's SKILL.md body, the list of its supporting files (not their content) and,
after it, every skill it requires; ``use_skill(name, path)`` returns level 3: one file. What the skill
asks of the host (``allowed-tools``, ``model``, ``disable-model-invocation``) is reported as its
context modifier. Skill content is returned as data; nothing of it runs here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from ba_mcp.results import Document, Image, JsonValue, RawResult
from ba_mcp.settings import LevelName, ToolSettings
from ba_mcp.skills.loader import clean_path, is_text, mime_type
from ba_mcp.tool import CacheMode, CachePolicy, Tool, ToolContext, ToolParams, ToolPolicy

if TYPE_CHECKING:
    from ba_mcp.skills import Skill, Skills
    from ba_mcp.tools.services import Services


class UseSkillParams(ToolParams):
    name: str | None = None  # None: every skill the model may use, with its description
    path: str | None = None  # a file the skill names; None: its instructions


USAGE = (
    "Analysis playbooks: load the one a task fits with use_skill(name) and follow it; use_skill(name, path) "
    "reads its files."
)


class UseSkillSettings(ToolSettings):
    timeout_s: float = Field(10, gt=0)
    max_timeout_s: float = Field(30, gt=0)
    # A skill's instructions are read whole: standard would show only their first window.
    default_level: LevelName | None = "full"


class UseSkill(Tool):
    name = "use_skill"
    title = "Use a skill"
    Params = UseSkillParams
    Settings = UseSkillSettings
    policy = ToolPolicy(cache=CachePolicy(CacheMode.NEVER))
    offers_levels = False  # a skill's instructions are read whole (default_level: full)

    @classmethod
    def build(cls, services: Services) -> UseSkill | None:
        """None when no skill is the model's to use: no tool, nor its description."""
        if not services.skills.model_skills():
            return None
        return cls(services.settings.tool(cls.name), services.skills, services.settings.skills.catalog_budget_tokens)

    def __init__(self, settings: ToolSettings, skills: Skills, catalog_budget_tokens: int) -> None:
        self.settings = settings
        self.skills = skills
        self.catalog_budget = catalog_budget_tokens
        self.description = self.describe(catalog_budget_tokens)

    def describe(self, catalog_budget_tokens: int | None) -> str:
        """The description with the skills that fit ``catalog_budget_tokens`` (estimated) as ``name: when``
        lines, the rest by name; None: no catalog, only how to list it (``listing.fit`` fits the description into
        the tools/list budget: ``tools_list_budget_tokens``)."""
        if catalog_budget_tokens is None:
            return f"{USAGE} use_skill() lists the {len(self.skills.model_skills())} skills, each with when to use it."
        lines, names_only = self.skills.catalog(catalog_budget_tokens)
        parts = [USAGE, "Skills:", *lines]
        if names_only:
            parts.append("More skills (use_skill returns their description): " + ", ".join(names_only))
        return "\n".join(parts)

    def execute(self, params: Any, ctx: ToolContext) -> RawResult:
        if params.name is None:
            return self._catalog()
        if params.path is None:
            return self._instructions(params.name)
        return self._file(self.skills.get(params.name, for_model=True), params.path)

    def _catalog(self) -> Document:
        """Every skill the model may use, with its whole description (what the listing may leave out)."""
        lines = [f"- {s.name}: {s.description}" for s in self.skills.model_skills()]
        return Document("skills", "\n".join(["Skills (load one with use_skill(name)):", *lines]), mime="text/markdown")

    def _instructions(self, name: str) -> Document:
        chain = self.skills.chain(name, for_model=True)
        root = chain[0]
        sections = [_section(root, "Skill")]
        if len(chain) > 1:
            sections.insert(1, f"Requires: {', '.join(s.name for s in chain[1:])} (their instructions follow)")
        sections += [_section(s, "Required skill") for s in chain[1:]]
        modifier = root.context_modifier()
        meta = {
            "skill": root.name,
            "uri": root.uri(),
            "requires": [s.name for s in chain[1:]],
            "files": [f.path for f in root.files if f.path != root.skill_file],
            "context_modifier": modifier,
        }
        return Document(
            f"skill {root.name}",
            "\n\n---\n\n".join(sections),
            mime="text/markdown",
            meta=meta,
            notes=_modifier_notes(modifier),
        )

    def _file(self, skill: Skill, path: str) -> RawResult:
        relative = clean_path(path)
        data = skill.read(relative)
        mime = mime_type(relative)
        if is_text(mime, data):
            # a script is run as written: shown whole at full (whole_limit_tokens), never cut at the inline limit
            script = relative.startswith("scripts/") or mime in ("text/x-python", "application/x-sh", "application/sql")
            return Document(f"{skill.name}/{relative}", data.decode("utf-8"), mime=mime, whole=script)
        if mime in ("image/png", "image/jpeg", "image/gif", "image/webp"):
            return Image(f"{skill.name}/{relative}", data, mime=mime)
        return JsonValue(
            f"{skill.name}/{relative}",
            {
                "file": relative,
                "mime": mime,
                "bytes": len(data),
                "resource": skill.uri(relative),
                "note": "a binary file: read the resource to get its bytes",
            },
        )


def _section(skill: Skill, label: str) -> str:
    files = [f for f in skill.files if f.path != skill.skill_file]
    lines = [f"# {label}: {skill.name}", skill.description, "", skill.body.strip(), ""]
    if files:
        lines.append(f'Supporting files (read one with use_skill(name="{skill.name}", path="…")):')
        lines += [f"- {f.path} ({f.size:,} bytes)" for f in files]
    else:
        lines.append("Supporting files: none")
    return "\n".join(lines)


def _modifier_notes(modifier: dict[str, Any]) -> list[str]:
    notes = []
    if modifier.get("allowed_tools"):
        notes.append("The skill asks for these tools: " + " ".join(modifier["allowed_tools"]))
    if modifier.get("model"):
        notes.append(f"The skill asks for the model {modifier['model']}")
    return notes
