"""What a built-in tool's ``build`` may take: the App's services, by name (the App is one). A tool takes the ones it
needs and hands them to its constructor, so the constructor still says what the tool depends on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ba_mcp.databases import Databases
    from ba_mcp.exports import Exports
    from ba_mcp.metrics.catalog import Metrics
    from ba_mcp.pipeline.runner import Runner
    from ba_mcp.pipeline.sessions import Sessions
    from ba_mcp.settings import Settings
    from ba_mcp.skills import Skills
    from ba_mcp.stores.artifacts import ArtifactStore
    from ba_mcp.stores.code import CodeStore
    from ba_mcp.tool import Tool
    from ba_mcp.web.fetch import Fetcher
    from ba_mcp.web.search import Searcher
    from ba_mcp.workers.duckworkers import DuckWorkers
    from ba_mcp.workers.sandboxes import Sandboxes
    from ba_mcp.workspace import Workspace


class Served(Protocol):
    """The tools served and the runner that calls them — known once every tool is built, so a tool that calls other
    tools (run_analysis replays saved steps through the runner) is given this and reads it when called, never when
    built."""

    tools: dict[str, Tool]
    runner: Runner


class BuiltIn(Protocol):
    """A tool's class as the App builds it (a built-in's, named in ``registry``'s tool table, or a plug-in's):
    ``build`` constructs the tool from the App's services — taking what it needs — or gives None when it has nothing
    to serve (no metric file, no skill). The App calls it once, for the tools whose ``tools.<name>.enabled`` is
    true. (A classmethod: the class object is what satisfies this.)"""

    def build(self, services: Services) -> Tool | None: ...


class Services(Served, Protocol):
    settings: Settings
    workspace: Workspace
    artifacts: ArtifactStore
    code: CodeStore
    exports: Exports
    duck_workers: DuckWorkers  # the DuckDB workers: where untrusted bytes are decoded
    databases: Databases
    metrics: Metrics
    sandboxes: Sandboxes
    fetcher: Fetcher
    searcher: Searcher
    skills: Skills
    sessions: Sessions
