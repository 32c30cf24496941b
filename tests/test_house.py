"""The house (docs/architecture.md): ba_mcp's imports, read with ``ast``, form no circle and never run from
a lower room to a higher one. Every import counts — at module level, inside functions, and under
``TYPE_CHECKING`` — because each is a dependency someone reading the code must follow."""

from __future__ import annotations

import ast
import functools
import re
import typing
from pathlib import Path

import pytest

from ba_mcp import registry
from tests.conftest import ROOT

PACKAGE = ROOT / "ba_mcp"

# Rooms from the ground floor up; a module may import only from its own room or a lower one. The first
# matching prefix names a module's room.
ROOMS: list[tuple[str, int]] = [
    # the ground vocabulary: no imports of the rooms above
    ("ba_mcp.errors", 0),
    ("ba_mcp.registry", 0),  # the table of database engines: settings and the metrics' dialects read it
    ("ba_mcp.plugins", 0),  # installed packages' engines, tools and skills, read into the registry (settings)
    ("ba_mcp.callers", 0),
    ("ba_mcp.redaction", 0),  # secrets taken out of every message that leaves (errors, logs, the doctor)
    ("ba_mcp.ids", 0),
    ("ba_mcp.results", 0),
    ("ba_mcp.values", 0),  # values as the database shows them: intervals, floats, time zones (issue 63)
    ("ba_mcp.settings", 0),
    ("ba_mcp.pipeline.encode", 0),  # tables as text: pure functions over results
    ("ba_mcp.pipeline.levels", 0),
    ("ba_mcp.pipeline.tokens", 0),
    ("ba_mcp.pipeline.bpe", 0),
    ("ba_mcp.tool", 1),
    # services: each a room of its own, used by the tools and the pipeline
    ("ba_mcp.workspace", 2),
    ("ba_mcp.stores", 2),
    ("ba_mcp.formats", 2),
    ("ba_mcp.databases", 2),
    ("ba_mcp.demo_data", 2),
    ("ba_mcp.bytecode", 2),  # what the workers import, compiled once in the background (issue 65)
    ("ba_mcp.web", 2),
    ("ba_mcp.workers.messages", 1),  # the typed requests both sides of the worker boundary share
    ("ba_mcp.workers", 2),  # the server's side of the worker processes: start, confine, pool, call, translate failures
    ("ba_mcp.inside", 2),  # the programs run inside the DuckDB and connection workers (never imported here)
    ("ba_mcp.rerun", 7),  # a saved analysis run with an App of its own (the CLI, analysis.py)
    ("ba_mcp.analyses", 3),  # saved analyses: the plan of a conversation's calls, the replay of its steps
    ("ba_mcp.metrics", 2),  # OSI metric files and their compiler (also run in the engine workers)
    ("ba_mcp.skills.mcp", 6),  # the SDK side of the skills (a part of the server)
    ("ba_mcp.skills", 2),
    ("ba_mcp.pipeline.cache", 2),
    ("ba_mcp.pipeline.usage", 2),
    ("ba_mcp.pipeline.audit", 2),  # the audit trail (S-20): who ran what, where no tool reads it
    ("ba_mcp.pipeline.sessions", 2),
    ("ba_mcp.exports", 3),
    # the pipeline above the services, the tools above the pipeline's vocabulary
    ("ba_mcp.pipeline.observe", 3),
    ("ba_mcp.pipeline.runner", 4),
    ("ba_mcp.tools", 4),
    ("ba_mcp.app", 5),
    ("ba_mcp.listing", 5),  # the tools as tools/list carries them, within the budget (a part of the server)
    ("ba_mcp.resources", 6),
    ("ba_mcp.views", 6),  # MCP Apps: the views of results and the protocol they need (a part of the server)
    ("ba_mcp.server", 6),
    ("ba_mcp.auth", 6),  # the bearer tokens of HTTP requests and the principal they name (a part of the server)
    ("ba_mcp.stdio", 6),  # the stdio transport's streams on the event loop (a part of the server)
    ("ba_mcp.doctor", 7),
    ("ba_mcp.bundle", 7),  # the Claude Desktop extension assembled from a checkout
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


@functools.cache
def _tree(path: Path) -> ast.Module:
    """``path``'s syntax tree, parsed once a run: the rules below walk the same modules, and none changes a tree."""
    return ast.parse(path.read_text(encoding="utf-8"))


def imports_of(path: Path) -> set[str]:
    """The ba_mcp modules ``path`` imports (``from ba_mcp.x import y`` counts as ba_mcp.x.y when that is a
    module, else ba_mcp.x)."""
    tree = _tree(path)
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
    return {module: set(targets) for module, targets in _graph().items()}


@functools.cache
def _graph() -> dict[str, frozenset[str]]:  # read once a run; graph() hands out copies
    return {module_name(p): frozenset(imports_of(p)) for p in sorted(PACKAGE.rglob("*.py"))}


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
    """Each public name is the very object its module defines (not a copy or a stand-in), and a Tool that does not
    implement execute says so."""
    import importlib

    import ba_mcp

    for name in ba_mcp.__all__:
        if name == "__version__":
            assert ba_mcp.__version__ == importlib.import_module("ba_mcp.version").__version__
            continue
        module = importlib.import_module(ba_mcp._PUBLIC[name])
        assert getattr(ba_mcp, name) is getattr(module, name), name
    assert issubclass(ba_mcp.ToolFailure, Exception)
    with pytest.raises(NotImplementedError):
        ba_mcp.Tool().execute(None, None)  # type: ignore[arg-type]


def test_the_ground_floor_knows_nothing_of_mcp() -> None:
    for name in ("errors", "results", "ids", "tool", "settings"):
        text = (PACKAGE / f"{name}.py").read_text(encoding="utf-8")
        assert "from mcp" not in text and "import mcp" not in text, f"ba_mcp/{name}.py imports the MCP SDK"


def test_plugins_reach_ba_mcp_through_its_public_surface_only() -> None:
    """The plug-in seam (issue 64 item 4): the plug-in package in the tests imports ``ba_mcp``'s public names
    (``ba_mcp.__all__``) and no module of ba_mcp, so what a plug-in builds on is what ``__init__`` promises; the
    loader reads the registry alone (it runs while the settings load) and every group it reads is documented."""
    import ba_mcp
    from ba_mcp import plugins

    plugin_files = sorted((ROOT / "tests" / "plugins").rglob("*.py"))
    assert plugin_files, "no plug-in package in tests/plugins"
    reached = []
    for path in plugin_files:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ba_mcp"):
                if node.module != "ba_mcp":
                    reached.append(f"{path.relative_to(ROOT)} imports {node.module}")
                reached += [
                    f"{path.relative_to(ROOT)}: {a.name} is not public"
                    for a in node.names
                    if a.name not in ba_mcp.__all__
                ]
            elif isinstance(node, ast.Import):
                reached += [
                    f"{path.relative_to(ROOT)} imports {a.name}" for a in node.names if a.name.startswith("ba_mcp")
                ]
    assert not reached, "\n".join(reached)
    assert imports_of(PACKAGE / "plugins.py") == {"ba_mcp.registry"}
    public = ("EngineInfo", "ConnectedEngine", "LocalEngine", "Held", "ToolFailure", "Services", "Tool", "Plugin")
    for name in (*public, "FormatInfo", "Reading"):
        assert name in ba_mcp.__all__, name
    guides = ("writing-an-engine.md", "writing-a-tool.md", "writing-a-format.md")
    guide = "".join((ROOT / "docs" / name).read_text() for name in guides)
    assert all(group in guide for group in plugins.GROUPS), plugins.GROUPS


def _package(module: str) -> str:
    """The package a module belongs to: ``ba_mcp.<sub>`` for a subpackage's modules, the module itself otherwise."""
    parts = module.split(".")
    if len(parts) >= 2 and (PACKAGE / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module


def test_packages_form_no_circle() -> None:
    """The rooms at package level too: no package imports one that imports it back (through any modules)."""
    edges: dict[str, set[str]] = {}
    for module, targets in graph().items():
        for target in targets:
            a, b = _package(module), _package(target)
            if a != b:
                edges.setdefault(a, set()).add(b)
    circles = []
    for start in sorted(edges):
        seen, stack = set(), [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(edges.get(node, ())):
                if nxt == start:
                    circles.append(" → ".join([*path, nxt]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    assert not circles, "\n".join(sorted(set(circles)))


def _engine_words() -> re.Pattern[str]:
    """Every engine's names, read from the registry (its kind, label, URL scheme, ADBC driver) and the ADBC drivers
    the project offers as extras (pyproject): an engine added there is checked here without a word of this test.
    DuckDB, the default engine every room uses, and the generic ADBC engine's own kind are not engine names here."""
    from ba_mcp import registry

    words: set[str] = set()
    for engine in registry.engines():
        if engine.kind in ("duckdb", "adbc"):
            continue
        words |= {engine.kind, engine.label.lower()}
        words |= {scheme.split(":")[0] for scheme in engine.schemes if len(scheme.split(":")[0]) >= 4}
        words |= {engine.driver.removeprefix("adbc_driver_")} if engine.driver else set()
    pyproject = (ROOT / "pyproject.toml").read_text()
    words |= set(re.findall(r'"adbc-driver-([a-z]+)', pyproject)) - {"manager"}
    return re.compile("|".join(sorted(map(re.escape, words), key=len, reverse=True)), re.IGNORECASE)


def _engine_modules() -> set[Path]:
    """The modules that implement engines (the registry's module of each): the only places an engine is named."""
    from ba_mcp import registry

    return {ROOT / (engine.module.replace(".", "/") + ".py") for engine in registry.engines()}


ENGINE_WORDS = _engine_words()


def _engine_names(path: Path) -> list[str]:
    """Where a module names an engine: in an identifier or a string that is not a docstring (prose may mention
    them; code may not)."""
    tree = _tree(path)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
        and isinstance(node.body[0].value.value, str)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value
        elif isinstance(node, ast.Name):
            text = node.id
        elif isinstance(node, ast.Attribute):
            text = node.attr
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.alias)):
            text = node.name
        else:
            continue
        if ENGINE_WORDS.search(text):
            found.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}: {text[:60]!r}")
    return found


def test_no_module_outside_its_engine_and_the_registry_names_an_engine() -> None:
    """Adding an engine is one module in databases/ and one registry line: nothing else knows engines by name."""
    allowed = {PACKAGE / "registry.py"} | _engine_modules()
    assert {"postgres", "spark", "sqlite", "flightsql", "snowflake", "bigquery"} <= {
        w.lower() for w in ENGINE_WORDS.pattern.split("|")
    }, ENGINE_WORDS.pattern
    named = [hit for path in sorted(PACKAGE.rglob("*.py")) if path not in allowed for hit in _engine_names(path)]
    assert not named, "\n".join(named)


def test_the_registry_says_which_engines_open_files_as_their_engines_do() -> None:
    """The project-file gate (settings, the ground floor) reads ``EngineInfo.files`` rather than the engines: it holds
    exactly for the engines whose databases are files on this machine (``LocalEngine``)."""
    from ba_mcp.databases.base import engine_of
    from ba_mcp.databases.connector import LocalEngine

    for info in registry.engines():
        assert info.files == isinstance(engine_of(info.kind), LocalEngine), info.kind


BOUNDARY_EXCEPTIONS = {"EngineError", "WorkerGone", "BadBlob", "BadStream"}


def test_the_worker_boundary_has_one_translation_point() -> None:
    """Issue 52: a worker's failures (it ended, broke the protocol, or its engine raised) become the caller's errors
    in ``workers/failures.py`` alone (``worker_failures``); no other module catches them. (``wire.read_arrow`` lets
    its own BadStream through while it turns the libraries' errors into one: that is where it is made.)"""
    allowed = {PACKAGE / "workers" / "failures.py"}
    sites = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in allowed:
            continue
        for node in ast.walk(_tree(path)):
            if not isinstance(node, ast.ExceptHandler) or node.type is None:
                continue
            names = {n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(node.type) if isinstance(n, ast.Attribute)}
            reraised = len(node.body) == 1 and isinstance(node.body[0], ast.Raise) and node.body[0].exc is None
            if names & BOUNDARY_EXCEPTIONS and not reraised:
                sites.append(f"{path.relative_to(ROOT)}:{node.lineno}: except {ast.unparse(node.type)}")
    assert not sites, "\n".join(sites)


def test_the_worker_programs_are_a_room_of_their_own() -> None:
    """Issues 52 and 64: the code that runs inside the DuckDB and connection workers (``ba_mcp.inside``) takes nothing
    of the server's side of workers but their protocol (``workers.wire``) and the typed requests both sides share
    (``workers.messages``), and nothing in the server imports it: the server starts it as a program
    (``python -m ba_mcp.inside``) and speaks to it over the socket."""
    edges = graph()
    inside = {m for m in edges if m == "ba_mcp.inside" or m.startswith("ba_mcp.inside.")}
    assert {"ba_mcp.inside.duck", "ba_mcp.inside.connection", "ba_mcp.inside.main", "ba_mcp.inside.__main__"} <= inside
    shared = {"ba_mcp.workers.wire", "ba_mcp.workers.messages"}
    takes = sorted(
        f"{m} imports {t}" for m in inside for t in edges[m] if t.startswith("ba_mcp.workers") and t not in shared
    )
    assert not takes, "\n".join(takes)
    imported = sorted(f"{m} imports {t}" for m, ts in edges.items() if m not in inside for t in ts if t in inside)
    assert not imported, "\n".join(imported)
    assert not [p for p in (PACKAGE / "worker").glob("*.py")], "ba_mcp/worker/ is gone: the programs are ba_mcp.inside"


@pytest.mark.anyio
async def test_a_built_in_tool_is_one_module_and_one_line(tmp_path: Path) -> None:
    """Issue 52 item 5: a new tool is a module (tests/tally_tool.py) and one line of the tool table — its settings
    (``tools.tally``: validated with its own model, its defaults, an error naming its key), its documentation
    (``ba-mcp config tools``), its construction (``build``) and its listing follow from them, nothing else edited."""
    from mcp import Client

    from ba_mcp import registry
    from ba_mcp.app import App
    from ba_mcp.cli import tool_settings_yaml
    from ba_mcp.server import build_server
    from ba_mcp.settings import ConfigError, load_settings
    from tests.conftest import text_of

    registry.register_tool(registry.ToolInfo("tally", "tests.tally_tool:Tally"))
    try:
        bad = tmp_path / "bad.yaml"
        bad.write_text("tools:\n  tally: {label: ''}\n")
        with pytest.raises(ConfigError, match=r"tools\.tally\.label"):
            load_settings(bad, workspace=tmp_path / "ws", environ={})
        good = tmp_path / "good.yaml"
        good.write_text("tools:\n  tally: {label: tokens}\n")
        settings = load_settings(good, workspace=tmp_path / "ws", environ={})
        assert settings.tool("tally").timeout_s == 7  # the tool's own default
        listed = tool_settings_yaml(settings)
        assert "  tally:\n" in listed and "# What the count is called.\n    label: " in listed, listed
        app = App(settings, ["file_reader", "tally"])
        try:
            async with Client(build_server(app)) as client:
                assert [t.name for t in (await client.list_tools()).tools] == ["file_reader", "tally"]
                result = await client.call_tool("tally", {"words": "one two three"})
                assert "3 tokens (timeout 7 s)" in text_of(result), text_of(result)
        finally:
            await app.aclose()
    finally:
        registry.unregister_tool("tally")


# -- construct, don't patch (issue 64) ------------------------------------------------------------------------

# ``x.y = …`` in ba_mcp/ where ``x`` is not ``self``/``cls`` nor a local the same function built (``x = X(…)``):
# another object's attribute set from outside. Services are given what they need when they are built; what is left
# are records of state that one owner keeps (a worker's Handle, a call's record, a result being made), each named
# here with its reason — by module and the object assigned to.
STATE_RECORDS: dict[tuple[str, str], str] = {
    ("ba_mcp/workers/pool.py", "handle"): "a worker's Handle: the pool's record of the worker it keeps",
    ("ba_mcp/workers/duckworkers.py", "handle"): "a worker's Handle: the pool's record of the worker it keeps",
    ("ba_mcp/workers/duckworkers.py", "spare"): "a worker's Handle: the spare's call number (its read ahead)",
    ("ba_mcp/workers/pool.py", "fresh"): "a worker's Handle: the pool's record of the worker it keeps",
    ("ba_mcp/workers/call.py", "self.handle"): "a worker's Handle: a call marks the worker busy, killed",
    ("ba_mcp/tools/run_python.py", "handle"): "a worker's Handle: its use by the sandbox's session",
    ("ba_mcp/tools/run_python.py", "worker"): "the sandbox's session state (cells run, noise seen)",
    ("ba_mcp/inside/serve.py", "target"): "the serving loop's protocol with its program: busy, warming, after_reply",
    ("ba_mcp/databases/connector.py", "c"): "the connection worker's state (Held), kept by its engine's hooks",
    ("ba_mcp/databases/postgresql.py", "c"): "the connection worker's state (Held), kept by its engine's hooks",
    ("ba_mcp/databases/spark.py", "c"): "the connection worker's state (Held), kept by its engine's hooks",
    ("ba_mcp/databases/sqlite.py", "c"): "the connection worker's state (Held), kept by its engine's hooks",
    ("ba_mcp/databases/pg_calls.py", "cat"): "a catalog record being counted",
    ("ba_mcp/databases/configured.py", "table"): "the result being made: its details",
    ("ba_mcp/tools/web_reader.py", "raw"): "the result being made: its provenance",
    ("ba_mcp/tools/web_reader.py", "page"): "the page being read: the id of its whole table",
    ("ba_mcp/tools/query_database.py", "failure"): "the error being raised: its hint",
    ("ba_mcp/analyses/replay.py", "output"): "a replayed step's output record: what it covers",
    ("ba_mcp/pipeline/runner.py", "record"): "the call's record: its tokens, counted once the answer is made",
    ("ba_mcp/pipeline/sessions.py", "record"): "a history record: trimmed when kept",
    ("ba_mcp/pipeline/usage.py", "st"): "a tool's usage counters",
    ("ba_mcp/stores/artifacts.py", "fresh"): "an artifact's metadata record, re-read and rewritten as one step",
    ("ba_mcp/metrics/compile.py", "branch"): "a query plan's node being compiled",
    ("ba_mcp/metrics/compile.py", "agg"): "a query plan's node being compiled",
    ("ba_mcp/metrics/load.py", "model"): "the metrics model being read: its warnings",
    ("ba_mcp/metrics/model.py", "reader.model"): "the metrics model being read: its grains",
    ("ba_mcp/metrics/model.py", "self.model"): "the metrics model being read: its warnings",
    ("ba_mcp/settings.py", "settings.databases[name]"): "a database's settings being validated: what was written",
    ("ba_mcp/server.py", "app.sessions(callers.current())"): "a session's state: the log level it asked for",
    ("ba_mcp/pipeline/runner.py", "scope"): "anyio's cancel scope: its deadline moved on while a worker starts",
    ("ba_mcp/cli.py", "args"): "the parsed command line (argparse's namespace)",
    ("ba_mcp/values.py", "schema.children[i].contents"): "an exported Arrow C schema, its format rewritten in place",
    ("ba_mcp/values.py", "CSchema"): "a ctypes structure that points to itself: its fields declared after it",
    (
        "ba_mcp/app.py",
        "tool",
    ): "an embedder's Tool instance takes its tools.<name> settings when served (Tool's contract)",
}


def _built_here(function: ast.AST) -> set[str]:
    """The names a function binds to an object it builds (``x = X(…)``, ``with X(…) as x``)."""
    names: set[str] = set()
    for node in ast.walk(function):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif (
            isinstance(node, ast.withitem)
            and isinstance(node.context_expr, ast.Call)
            and isinstance(node.optional_vars, ast.Name)
        ):
            names.add(node.optional_vars.id)
    return names


def _attribute_targets(node: ast.Assign | ast.AugAssign | ast.AnnAssign) -> list[ast.Attribute]:
    stack: list[ast.expr] = list(node.targets) if isinstance(node, ast.Assign) else [node.target]
    found = []
    while stack:
        target = stack.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            stack += target.elts
        elif isinstance(target, ast.Starred):
            stack.append(target.value)
        elif isinstance(target, ast.Attribute):
            found.append(target)
    return found


def patches() -> list[tuple[str, str, int, str]]:
    """Every ``x.y = …`` in ba_mcp/ on another object: (module path, the object, line, the target)."""
    return list(_patches())


@functools.cache
def _patches() -> tuple[tuple[str, str, int, str], ...]:  # found once a run; patches() hands out a copy
    found: list[tuple[str, str, int, str]] = []
    for path in sorted(PACKAGE.rglob("*.py")):

        def visit(node: ast.AST, function: ast.AST | None, where: str = str(path.relative_to(ROOT))) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    visit(child, child, where)
                    continue
                if isinstance(child, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                    for target in _attribute_targets(child):
                        base = target.value
                        if isinstance(base, ast.Name) and (
                            base.id in ("self", "cls") or (function is not None and base.id in _built_here(function))
                        ):
                            continue
                        found.append((where, ast.unparse(base), child.lineno, ast.unparse(target)))
                visit(child, function, where)

        visit(_tree(path), None)
    return tuple(found)


def test_no_service_is_patched_after_construction() -> None:
    """Issue 64: every service receives what it needs when it is built (a constructor argument or a small protocol
    object), so the import graph shows the dependency; nothing sets another object's attribute afterwards but the
    records of state named in STATE_RECORDS — and each of those is still in use."""
    found = patches()
    unnamed = [f"{w}:{line}: {target} = …" for w, base, line, target in found if (w, base) not in STATE_RECORDS]
    assert not unnamed, "set from outside after construction (give it to the constructor):\n" + "\n".join(unnamed)
    unused = sorted(set(STATE_RECORDS) - {(w, base) for w, base, _, _ in found})
    assert not unused, f"STATE_RECORDS names what no module does any more: {unused}"


def test_the_check_for_patching_sees_a_patch() -> None:
    """The check itself: a service's behaviour set from outside is found, a local built in place or ``self`` is not."""
    code = "def wire(app, store):\n    store.writer = app.write\n    self.x = 1\n    made = Thing()\n    made.y = 2\n"
    tree = ast.parse(code)
    function = tree.body[0]
    assert isinstance(function, ast.FunctionDef)
    hits = [
        ast.unparse(t)
        for node in ast.walk(function)
        if isinstance(node, ast.Assign)
        for t in _attribute_targets(node)
        if not (isinstance(t.value, ast.Name) and t.value.id in ({"self", "cls"} | _built_here(function)))
    ]
    assert hits == ["store.writer"]


# -- the worker requests are typed (issue 64) -----------------------------------------------------------------


def test_worker_requests_are_typed_and_answered_by_type() -> None:
    """One frozen dataclass per operation (``workers.messages``), shared by both sides: nothing in ba_mcp sends a
    dict across the boundary (``ask`` takes a Request; no ``{"op": …}`` is built outside the workers' answers, the
    start handshake and the Python sandbox's own protocol), every request is answered by its type in exactly one
    worker program's table, and a request goes over the wire and back unchanged."""
    import dataclasses

    from ba_mcp.workers import messages

    dict_asks = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(_tree(path)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "ask"
                and node.args
                and (
                    isinstance(node.args[0], ast.Dict)
                    or (isinstance(node.args[0], ast.Call) and ast.unparse(node.args[0].func) == "dict")
                )
            ):
                dict_asks.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not dict_asks, dict_asks
    op_dicts_allowed = {
        PACKAGE / "workers" / "messages.py",  # the one point a request becomes a message
        PACKAGE / "workers" / "process.py",  # the start handshake ("start", "ready"): not an operation
        PACKAGE / "tools" / "run_python.py",  # the Python sandbox's own protocol (the ``sandbox`` package)
    }
    op_dicts = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in op_dicts_allowed and PACKAGE / "inside" not in path.parents  # the workers' answers
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "op" for k in node.keys)
    ]
    assert not op_dicts, op_dicts

    # every table entry is made by ``inside.serve.handles``, whose signature has the type checker hold the handler's
    # reply to the one its request names (``Request[<reply>]``)
    handled: list[str] = []
    for path in sorted((PACKAGE / "inside").glob("*.py")):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Dict):
                assert not any(isinstance(k, ast.Name) and k.id in messages.__all__ for k in node.keys), path
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "handles":
                handled.append(ast.unparse(node.args[0]))
    kinds = {cls.__name__ for cls in messages.REQUESTS.values()}
    # Store and Drop: each program keeps its own cut result, so both tables answer them
    assert sorted(handled) == sorted([*kinds, "Store", "Drop"]), sorted(handled)
    for cls in messages.REQUESTS.values():
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls  # type: ignore[attr-defined]
        # its reply is typed: a TypedDict of this module, not a bare dict
        (reply,) = typing.get_args(cls.__orig_bases__[0])  # type: ignore[attr-defined]
        assert typing.is_typeddict(reply) and reply.__module__ == messages.__name__, (cls, reply)
    request = messages.Query("demo", "SELECT ?", [1], 10, [{"name": "t", "suffix": ".csv"}], {"max_rows": 5})
    assert messages.request_of(request.wire()) == request
    with pytest.raises(messages.UnknownRequest):
        messages.request_of({"op": "query", "sql": "SELECT 1", "nonsense": 1})


# -- the house in numbers (for the note) ------------------------------------------------------------


def house_counts() -> dict[str, int]:
    """Rooms (ROOMS entries holding a module), floors (their distinct ranks), modules, import arrows, circles
    (module cycles found), upward arrows, and the patches named in STATE_RECORDS."""
    edges = graph()
    used = {prefix for m in edges for prefix, _ in ROOMS if m == prefix or m.startswith(prefix + ".")}
    rooms = [(p, r) for p, r in ROOMS if p in used]
    upward = sum(1 for m, ts in edges.items() for t in ts if room(t) > room(m))
    state: dict[str, int] = {}
    circles = 0

    def visit(module: str) -> None:
        nonlocal circles
        state[module] = 1
        for target in sorted(edges.get(module, ())):
            if state.get(target) == 1:
                circles += 1
            elif target in edges and not state.get(target):
                visit(target)
        state[module] = 2

    for module in sorted(edges):
        if not state.get(module):
            visit(module)
    return {
        "rooms": len(rooms),
        "floors": len({r for _, r in rooms}),
        "modules": len(edges),
        "arrows": sum(len(ts) for ts in edges.values()),
        "circles": circles,
        "upward": upward,
        "patched": len(patches()),
    }


def test_the_house_in_numbers() -> None:
    counts = house_counts()
    print("house:", ", ".join(f"{k} {v}" for k, v in counts.items()))
    assert counts["circles"] == 0 and counts["upward"] == 0, counts
    assert counts["rooms"] >= counts["floors"] > 1, counts
