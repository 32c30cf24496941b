"""``ba-mcp bundle``: the Claude Desktop extension (an MCPB bundle, manifest 0.4, ``server.type: "uv"``) assembled
from a checkout into a folder that ``mcpb pack`` turns into ``ba-mcp.mcpb``.

The folder holds what ``uv run`` needs to install and start the server where Claude Desktop unpacked it — the
project (``pyproject.toml``, ``uv.lock``, ``README.md``), the packages (``ba_mcp``, ``sandbox``), ``config`` and
``skills`` — and nothing else: no virtual environment, no caches, no tests. Its ``manifest.json`` is
``bundle/manifest.json`` with what must never drift from the server filled in here: the version, the tools (the
tool table) and the prompts (the bundled skills a user may invoke). Desktop starts it with the manifest's
``mcp_config`` (``uv run --frozen --no-dev --directory ${__dirname} ba-mcp serve``); the fields the user fills in
(``user_config``) reach the server as ``BA_MCP_*`` variables, and an optional one left blank sets nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ba_mcp import registry
from ba_mcp.version import __version__

CHECKOUT = Path(__file__).resolve().parent.parent
# what the bundle holds of the checkout (folders copied without bytecode or caches)
PARTS = ("pyproject.toml", "uv.lock", "README.md", "ba_mcp", "sandbox", "config", "skills")
_LEFT_OUT = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", ".pytest_cache", ".ruff_cache", "_config")


class BundleError(Exception):
    """The bundle cannot be made (not a checkout, a folder in the way); the message says why."""


def manifest() -> dict[str, Any]:
    """``bundle/manifest.json`` with the version, the tools and the prompts of this checkout."""
    from ba_mcp.settings import load_settings
    from ba_mcp.skills import load_skills

    data: dict[str, Any] = json.loads((CHECKOUT / "bundle" / "manifest.json").read_text(encoding="utf-8"))
    data["version"] = __version__
    tools = []
    for name in registry.tool_names():
        cls = registry.tool_class(name)
        tools.append({"name": name, "description": getattr(cls, "description", None) or cls.title})
    data["tools"] = tools
    settings = load_settings(environ={})
    skills = load_skills(settings.skills.model_copy(update={"paths": [], "bundled": True}))  # the bundled ones
    data["prompts"] = [
        {
            "name": skill.name,
            "description": skill.description,
            "arguments": ["task"],
            "text": f"Follow the ba-mcp skill '{skill.name}' (use_skill) for this task: ${{arguments.task}}",
        }
        for skill in skills
        if skill.user_invocable
    ]
    # a description that depends on what is served (query_metrics: metric files; use_skill: skills) is still listed
    data["tools_generated"] = data["prompts_generated"] = False
    return data


# uv's own build backend: a uv whose version the range holds builds the project itself (no build environment to
# resolve), so the first start needs no network when uv's cache holds the dependencies
_BUILD = """[build-system]
requires = ["uv_build>=0.7.19,<1"]
build-backend = "uv_build"

[tool.uv.build-backend]
module-root = ""
module-name = ["ba_mcp", "sandbox"]
"""


def bundle_pyproject(text: str) -> str:
    """The project as the bundle builds it: the checkout's ``pyproject.toml`` with uv's build backend in place of
    the wheel's (hatchling, which places config and skills inside the package for PyPI). The extension installs the
    project editable, so the server finds ``config/`` and ``skills/`` beside ``ba_mcp/`` as in a checkout; the
    dependencies, and uv.lock, are the checkout's."""
    kept: list[str] = []
    dropping = False
    for line in text.splitlines():
        if line.startswith("["):
            table = line.strip("[] ")
            dropping = table == "build-system" or table.startswith(
                ("tool.hatch", "tool.ruff", "tool.mypy", "tool.pytest")
            )
        if not dropping:
            kept.append(line)
    return "\n".join(kept).rstrip() + "\n\n" + _BUILD


def build(out: Path) -> Path:
    """Assemble the bundle's folder at ``out`` (which must not exist, or be empty); returns it."""
    if not (CHECKOUT / "pyproject.toml").is_file() or not (CHECKOUT / "bundle" / "manifest.json").is_file():
        raise BundleError(f"ba-mcp bundle runs from a checkout of the repository ({CHECKOUT} is not one)")
    if out.exists() and any(out.iterdir()):
        raise BundleError(f"{out} is not empty")
    out.mkdir(parents=True, exist_ok=True)
    for part in PARTS:
        source = CHECKOUT / part
        if source.is_dir():
            shutil.copytree(source, out / part, ignore=_LEFT_OUT, symlinks=False)
        else:
            shutil.copy2(source, out / part)
    (out / "pyproject.toml").write_text(bundle_pyproject((CHECKOUT / "pyproject.toml").read_text()), encoding="utf-8")
    shutil.copy2(CHECKOUT / "bundle" / "icon.png", out / "icon.png")
    (out / "manifest.json").write_text(json.dumps(manifest(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out
