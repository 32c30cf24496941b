"""Plug-ins: database engines, tools, file formats and skill folders from installed packages, read into the same
tables the built-ins are in (``registry``), and only those the operator enabled.

A plug-in is an installed distribution (``pip install ba-mcp-example``, a dependency of the environment) that
declares entry points in the groups below; nothing of it is imported until the operator names it in ``plugins:``
of their own configuration (``plugins: [ba-mcp-example]``, or ``BA_MCP_PLUGINS='["ba-mcp-example"]'``). A project
file cannot name one, approved or not: loading code is the operator's alone (``settings.OPERATOR_ONLY``).

The groups, each entry point's name and what it points at:

* ``ba_mcp.engines`` — name: the engine's kind; object: a ``registry.EngineInfo`` of that kind, whose ``module``
  holds the ``ENGINE`` (a ``databases.connector.ConnectedEngine``, usually a ``LocalEngine``). The engine answers
  through the connection workers like the built-in ones (its package is bound into the worker's root), read-only by
  its own rule (``begin``/``vet``: its statements refused before they run).
* ``ba_mcp.tools`` — name: the tool's name; object: its class (a ``tool.Tool``: ``Params``, ``Settings``,
  ``build(services)``, ``execute``). It is built by the App and called through the runner like every tool (output
  levels, artifacts, the audit trail, timeouts); ``tools.<name>`` configures it.
* ``ba_mcp.formats`` — name: the format's name; object: a ``registry.FormatInfo`` of that name, whose ``reader``
  (``"module:function"``, its module in a package) reads a file of one of its ``suffixes`` into a raw result. It
  runs where the built-in formats are parsed: in the session's engine worker, which the server kills at the call's
  timeout (its package is bound into the worker's root), never in the server; ``file_reader`` reads such a file by
  its suffix. A suffix or a name a built-in format has is refused.
* ``ba_mcp.skills`` — name: anything; object: a folder (``pathlib.Path`` or ``str``) holding skill folders, read
  as if it were in ``skills.paths``.

A plug-in that cannot be loaded — not installed, an import that fails (or exits), an import that registers an
engine, a tool or a format itself (the tables are put back as they were), an object of the wrong kind, a name a built-in
already has — is *unavailable* with the reason (``Plugin.problem``): nothing of it is registered, the
server starts without it and says why (its log, ``ba-mcp plugins``, ``ba-mcp doctor``). It never replaces a
built-in engine, tool or format.

Ground floor: this module imports only the registry (settings reads it while the configuration is loaded).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from ba_mcp import registry

ENGINES = "ba_mcp.engines"
TOOLS = "ba_mcp.tools"
SKILLS = "ba_mcp.skills"
FORMATS = "ba_mcp.formats"
GROUPS = (ENGINES, TOOLS, FORMATS, SKILLS)


@dataclass(frozen=True)
class Plugin:
    """An installed plug-in package as this configuration found it."""

    name: str  # the distribution's name, normalized (ba-mcp-example)
    version: str = ""  # '' : not installed
    provides: tuple[str, ...] = ()  # "engine csvdir", "tool row_count", "format rec", "skills <folder>"
    enabled: bool = False  # named in the operator's ``plugins:``
    problem: str = ""  # why it is unavailable ('' : loaded, or not enabled)

    @property
    def loaded(self) -> bool:
        return self.enabled and not self.problem


@dataclass(frozen=True)
class Loaded:
    """What enabling the operator's plug-ins gave: every installed plug-in (and every one named but not installed),
    and the skill folders the loaded ones add."""

    plugins: tuple[Plugin, ...] = ()
    skill_folders: tuple[Path, ...] = field(default=())


def normalize(name: str) -> str:
    """A distribution's name as installers compare them (PEP 503): ``BA_MCP.Example`` is ``ba-mcp-example``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed() -> dict[str, list[EntryPoint]]:
    """The installed distributions with entry points in ba-mcp's groups, by normalized name (nothing imported)."""
    found: dict[str, list[EntryPoint]] = {}
    every = entry_points()  # one look at the installed distributions (each group's own would read them all again)
    for group in GROUPS:
        for ep in every.select(group=group):
            if ep.dist is not None:
                found.setdefault(normalize(ep.dist.name), []).append(ep)
    return found


def enable(names: Sequence[str]) -> Loaded:
    """Load the plug-ins ``names`` (the operator's ``plugins:``) into the registry's tables; every other installed
    one is listed, not loaded. The tables hold the plug-ins of the configuration loaded last (a process serves one
    configuration; a second one loaded in it — a test's, an embedder's — takes out the plug-ins it does not name).
    A plug-in is loaded whole or not at all: the first entry point that fails makes it unavailable, with the
    reason, and none of its entry points is registered."""
    wanted = [normalize(n) for n in names]
    available = installed()
    for served in registry.engines():
        if served.plugin:
            registry.unregister(served.kind)
    for named in registry.tool_names():
        if (listed := registry.tool_info(named)) is not None and listed.plugin:
            registry.unregister_tool(named)
    for fmt in registry.formats():
        if fmt.plugin:
            registry.unregister_format(fmt.name)
    plugins: list[Plugin] = []
    folders: list[Path] = []
    for name in sorted(set(available) | set(wanted)):
        eps = available.get(name, [])
        provides = tuple(f"{_WHAT[ep.group]} {ep.name}" for ep in eps)
        if not eps:
            problem = "not installed here (install the package into ba-mcp's environment, or correct the name)"
            plugins.append(Plugin(name, "", (), True, problem))
            continue
        dist = eps[0].dist
        version = dist.version if dist is not None else ""
        if name not in wanted:
            plugins.append(Plugin(name, version, provides, False))
            continue
        before = _tables()
        try:
            engines, tools, formats, skills = _load(name, eps)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # whatever a package's import raises (SystemExit too): that plug-in only
            _restore(before)
            plugins.append(Plugin(name, version, provides, True, _reason(exc)))
            continue
        if _tables() != before:  # its import registered (or took out) an engine or a tool itself
            _restore(before)
            problem = (
                "its import changed ba-mcp's engines, tools or formats itself; a plug-in declares them by entry points"
            )
            plugins.append(Plugin(name, version, provides, True, problem))
            continue
        for info in engines:
            registry.register(info)
        for tool in tools:
            registry.register_tool(tool)
        for fmt in formats:
            registry.register_format(fmt)
        folders += skills
        plugins.append(Plugin(name, version, provides, True))
    return Loaded(tuple(plugins), tuple(folders))


class PluginError(Exception):
    """An entry point that does not hold what its group asks for (the message says what and where)."""


_WHAT = {ENGINES: "engine", TOOLS: "tool", FORMATS: "format", SKILLS: "skills"}


def _load(
    plugin: str, eps: Iterable[EntryPoint]
) -> tuple[list[registry.EngineInfo], list[registry.ToolInfo], list[registry.FormatInfo], list[Path]]:
    """Every entry point of the plug-in ``plugin``, imported and checked (nothing registered yet): its engines,
    tools and formats marked as its own."""
    engines: list[registry.EngineInfo] = []
    tools: list[registry.ToolInfo] = []
    formats: list[registry.FormatInfo] = []
    skills: list[Path] = []
    for ep in eps:
        where = f"{ep.group} entry point {ep.name!r} ({ep.value})"
        obj = ep.load()
        if ep.group == ENGINES:
            if not isinstance(obj, registry.EngineInfo) or obj.kind != ep.name:
                raise PluginError(f"{where} is not a registry.EngineInfo of kind {ep.name!r}")
            if obj.kind in {e.kind for e in registry.engines()}:
                raise PluginError(f"{where}: an engine of kind {obj.kind!r} is already served")
            engine = getattr(importlib.import_module(obj.module), "ENGINE", None)
            if engine is None or not callable(getattr(engine, "database", None)):
                raise PluginError(f"{where}: its module {obj.module} has no ENGINE (a ConnectedEngine)")
            engines.append(replace(obj, plugin=plugin))
        elif ep.group == TOOLS:
            needs = ("Params", "Settings", "build", "execute")
            if (
                not isinstance(obj, type)
                or getattr(obj, "name", None) != ep.name
                or not all(hasattr(obj, a) for a in needs)
            ):
                raise PluginError(f"{where} is not a Tool class named {ep.name!r}")
            if ep.name in registry.tool_names():
                raise PluginError(f"{where}: a tool named {ep.name!r} is already served")
            tools.append(registry.ToolInfo(ep.name, ep.value, plugin))
        elif ep.group == FORMATS:
            formats.append(replace(_format(obj, ep.name, where, formats), plugin=plugin))
        else:
            if not isinstance(obj, str | Path) or not Path(obj).is_dir():
                raise PluginError(f"{where} is not a folder of skills")
            skills.append(Path(obj))
    return engines, tools, formats, skills


def _format(obj: object, name: str, where: str, taken: list[registry.FormatInfo]) -> registry.FormatInfo:
    """A ``ba_mcp.formats`` entry point's object, checked: a FormatInfo named as its entry point, with a name and
    suffixes no format has (built-in, served, or another of the same plug-in's) and a reader that is a function in a
    package."""
    if not isinstance(obj, registry.FormatInfo) or obj.name != name:
        raise PluginError(f"{where} is not a registry.FormatInfo named {name!r}")
    if registry.format_info(name) is not None:
        raise PluginError(f"{where}: a format named {name!r} is already read")
    others = {s for f in [*registry.formats(), *taken] for s in f.suffixes}
    for suffix in obj.suffixes or ("",):
        if not re.fullmatch(r"\.[a-z0-9][a-z0-9_.-]{0,30}", suffix):
            raise PluginError(f"{where}: {suffix!r} is no file suffix (lower case, with its dot: '.rec')")
        if suffix in others:
            raise PluginError(f"{where}: files ending in {suffix} are already read as another format")
    module, colon, function = obj.reader.partition(":")
    if not (colon and module and function):
        raise PluginError(f"{where}: its reader {obj.reader!r} is not 'module:function'")
    imported = importlib.import_module(module)
    if not callable(getattr(imported, function, None)):
        raise PluginError(f"{where}: its module {module} has no function {function!r}")
    if "." not in module and not hasattr(imported, "__path__"):
        raise PluginError(f"{where}: its reader's module {module} is in no package (the worker is given packages)")
    return obj


_Tables = tuple[dict[str, registry.EngineInfo], dict[str, registry.ToolInfo], dict[str, registry.FormatInfo]]


def _tables() -> _Tables:
    """The registry's tables as they are (to put back what a plug-in's import did to them)."""
    tools = {name: info for name in registry.tool_names() if (info := registry.tool_info(name)) is not None}
    return {e.kind: e for e in registry.engines()}, tools, {f.name: f for f in registry.formats()}


def _restore(tables: _Tables) -> None:
    """The registry's tables as ``tables`` holds them, in their order (tools/list's, the URL prefixes')."""
    engines, tools, formats = tables
    for info in registry.engines():
        registry.unregister(info.kind)
    for name in registry.tool_names():
        registry.unregister_tool(name)
    for fmt in registry.formats():
        registry.unregister_format(fmt.name)
    for info in engines.values():
        registry.register(info)
    for tool in tools.values():
        registry.register_tool(tool)
    for fmt in formats.values():
        registry.register_format(fmt)


def _reason(exc: BaseException) -> str:
    """Why a plug-in did not load, in one line (an import's own message: which module, which name)."""
    text = " ".join(str(exc).split())[:300]
    return text if isinstance(exc, PluginError) else f"{type(exc).__name__}: {text}"
