"""The house (docs/architecture.md): ba_mcp's imports, read with ``ast``, form no circle and never run from
a lower room to a higher one. Every import counts — at module level, inside functions, and under
``TYPE_CHECKING`` — because each is a dependency someone reading the code must follow."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "ba_mcp"

# Rooms from the ground floor up; a module may import only from its own room or a lower one. The first
# matching prefix names a module's room.
ROOMS: list[tuple[str, int]] = [
    # the ground vocabulary: no imports of the rooms above
    ("ba_mcp.errors", 0),
    ("ba_mcp.databases.registry", 0),  # the table of engines: what settings and the metrics' dialects read
    ("ba_mcp.callers", 0),
    ("ba_mcp.ids", 0),
    ("ba_mcp.results", 0),
    ("ba_mcp.settings", 0),
    ("ba_mcp.pipeline.encode", 0),  # tables as text: pure functions over results
    ("ba_mcp.pipeline.levels", 0),
    ("ba_mcp.pipeline.tokens", 0),
    ("ba_mcp.tool", 1),
    # services: each a room of its own, used by the tools and the pipeline
    ("ba_mcp.workspace", 2),
    ("ba_mcp.stores", 2),
    ("ba_mcp.formats", 2),
    ("ba_mcp.databases", 2),
    ("ba_mcp.demo_data", 2),
    ("ba_mcp.web", 2),
    ("ba_mcp.sandbox_client", 2),
    ("ba_mcp.workers", 2),  # the engine and connection workers: the server's side and the worker's
    ("ba_mcp.analyses.standalone", 7),  # a saved analysis run with an App of its own (the CLI, analysis.py)
    ("ba_mcp.analyses", 3),  # saved analyses: the plan of a conversation's calls, the replay of its steps
    ("ba_mcp.metrics", 2),  # OSI metric files and their compiler (also run in the engine workers)
    ("ba_mcp.skills.mcp", 6),  # the SDK side of the skills (a part of the server)
    ("ba_mcp.skills", 2),
    ("ba_mcp.pipeline.cache", 2),
    ("ba_mcp.pipeline.usage", 2),
    ("ba_mcp.sessions", 2),
    ("ba_mcp.exports", 3),
    # the pipeline above the services, the tools above the pipeline's vocabulary
    ("ba_mcp.pipeline.observe", 3),
    ("ba_mcp.pipeline.runner", 4),
    ("ba_mcp.tools", 4),
    ("ba_mcp.app", 5),
    ("ba_mcp.resources", 6),
    ("ba_mcp.server", 6),
    ("ba_mcp.doctor", 7),
    ("ba_mcp.demo", 7),
    ("ba_mcp.cli", 8),
    ("ba_mcp.__main__", 9),
    ("ba_mcp.version", 0),
    ("ba_mcp", 9),  # the package's __init__: the public surface over every room (imported lazily)
]


def room(module: str) -> int:
    for prefix, rank in ROOMS:
        if module == prefix or module.startswith(prefix + "."):
            return rank
    raise AssertionError(f"{module} is in no room of tests/test_house.py: add it where it belongs")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """The ba_mcp modules ``path`` imports (``from ba_mcp.x import y`` counts as ba_mcp.x.y when that is a
    module, else ba_mcp.x)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = module_name(path)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("ba_mcp")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative
                package = here.split(".")[: -node.level] if path.name != "__init__.py" else here.split(".")
                base = ".".join([*package[: len(package) - (node.level - 1)], *([base] if base else [])])
            if not base.startswith("ba_mcp"):
                continue
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if _is_module(candidate) else base)
    found.discard(here)
    return found


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_no_import_runs_from_a_lower_room_to_a_higher_one() -> None:
    upward = [
        f"{module} (room {room(module)}) imports {target} (room {room(target)})"
        for module, targets in graph().items()
        for target in sorted(targets)
        if room(target) > room(module)
    ]
    assert not upward, "\n".join(upward)


def test_imports_form_no_circle() -> None:
    edges = graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []
    circles: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(edges.get(module, ())):
            if state.get(target) == 1:
                circles.append(" → ".join([*path[path.index(target) :], target]))
            elif target in edges and not state.get(target):
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(edges):
        if not state.get(module):
            visit(module)
    assert not circles, "\n".join(circles)


def test_the_public_surface_names_what_embedders_use() -> None:
    import ba_mcp

    for name in ba_mcp.__all__:
        assert getattr(ba_mcp, name) is not None, name
    assert issubclass(ba_mcp.ToolFailure, Exception) and ba_mcp.Tool.execute is not None


def test_the_ground_floor_knows_nothing_of_mcp() -> None:
    for name in ("errors", "results", "ids", "tool", "settings"):
        text = (PACKAGE / f"{name}.py").read_text(encoding="utf-8")
        assert "from mcp" not in text and "import mcp" not in text, f"ba_mcp/{name}.py imports the MCP SDK"
