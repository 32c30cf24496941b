"""A tool the package does not know (issue 52), written as a newcomer writes one: one module with the tool, its
settings model (its own key, its defaults) and ``build`` — then one ``register_tool`` line. Nothing else is touched:
the settings validate ``tools.tally``, ``ba-mcp config tools`` documents it, the App builds and serves it."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ba_mcp.results import Document
from ba_mcp.settings import ToolSettings
from ba_mcp.tool import Tool, ToolContext, ToolParams
from ba_mcp.tools.services import Services


class TallyParams(ToolParams):
    words: str = Field(description="text whose words to count")


class TallySettings(ToolSettings):
    timeout_s: float = Field(7, gt=0)
    label: str = Field("words", min_length=1, description="What the count is called.")


class Tally(Tool):
    name = "tally"
    title = "Count words"
    description = "Count the words of a text."
    Params = TallyParams
    Settings = TallySettings
    view = "table"

    @classmethod
    def build(cls, services: Services) -> Tally:
        return cls(services.settings.tool(cls.name), services.workspace.root.name)

    def __init__(self, settings: ToolSettings, workspace: str) -> None:
        self.settings = settings
        self.workspace = workspace

    def execute(self, params: Any, ctx: ToolContext) -> Document:
        label = getattr(self.settings, "label")  # noqa: B009
        return Document("tally", f"{len(params.words.split())} {label} (timeout {ctx.timeout:g} s)")
