"""ba-mcp: a business-analysis tool server for the Model Context Protocol.

The public surface, for embedding the server or adding a tool (imported on first use, so that
``import ba_mcp`` stays cheap):

* ``load_settings`` / ``Settings`` — the configuration; ``App`` — the application object built from it;
  ``build_server(app)`` — the MCP server (stdio and HTTP through the SDK);
* ``Tool``, ``ToolParams``, ``ToolPolicy``, ``ToolContext`` — what a tool is;
* ``ToolFailure``, ``ErrorType``, ``Code`` — the one error vocabulary;
* ``Table``, ``Document``, ``JsonValue``, ``Image``, ``Composite`` — the raw results a tool returns;
* the plug-in surface (docs/writing-an-engine.md, docs/writing-a-tool.md): ``EngineInfo`` — an engine's line of
  the registry (a ``ba_mcp.engines`` entry point names one); ``ConnectedEngine``, ``LocalEngine``, ``Held`` — an
  engine and what its worker-side hooks receive (a hook refuses with ``ToolFailure``), ``Connect`` and ``Opened``
  — what its ``open`` hook is asked and answers, ``TableInfo``, ``ColumnInfo`` — what its ``catalog`` hook gives;
  ``ToolInfo`` — a tool's line; ``Services`` — what a tool's ``build`` takes; ``ToolSettings`` — a tool's
  ``tools.<name>``; ``FormatInfo`` — a file format's line (a ``ba_mcp.formats`` entry point) and ``Reading`` — what
  its reader is given (docs/writing-a-format.md); ``Plugin`` — an installed plug-in as the configuration found it
  (``Settings.plugin_status``);
* ``TokenCounter`` — offline token counting (``count_tokens``, ``count_message_tokens``,
  ``count_conversation_tokens``, ``model_info``: T-T's library API).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ba_mcp.version import __version__

if TYPE_CHECKING:  # the public names' types, for the type checkers of embedders and plug-ins
    from ba_mcp.app import App
    from ba_mcp.databases.base import ColumnInfo, TableInfo
    from ba_mcp.databases.connector import ConnectedEngine, Held, LocalEngine
    from ba_mcp.errors import Code, ErrorType, ToolFailure
    from ba_mcp.formats.base import Reading
    from ba_mcp.pipeline.tokens import TokenCounter
    from ba_mcp.plugins import Plugin
    from ba_mcp.registry import EngineInfo, FormatInfo, ToolInfo
    from ba_mcp.results import Composite, Document, Image, JsonValue, Table
    from ba_mcp.server import build_server
    from ba_mcp.settings import Settings, ToolSettings, load_settings
    from ba_mcp.tool import Tool, ToolContext, ToolParams, ToolPolicy
    from ba_mcp.tools.services import Services
    from ba_mcp.workers.messages import Connect, Opened

_PUBLIC = {
    "App": "ba_mcp.app",
    "build_server": "ba_mcp.server",
    "load_settings": "ba_mcp.settings",
    "Settings": "ba_mcp.settings",
    "Tool": "ba_mcp.tool",
    "ToolParams": "ba_mcp.tool",
    "ToolPolicy": "ba_mcp.tool",
    "ToolContext": "ba_mcp.tool",
    "ToolFailure": "ba_mcp.errors",
    "ErrorType": "ba_mcp.errors",
    "Code": "ba_mcp.errors",
    "Table": "ba_mcp.results",
    "Document": "ba_mcp.results",
    "JsonValue": "ba_mcp.results",
    "Image": "ba_mcp.results",
    "Composite": "ba_mcp.results",
    "TokenCounter": "ba_mcp.pipeline.tokens",
    "EngineInfo": "ba_mcp.registry",
    "ToolInfo": "ba_mcp.registry",
    "FormatInfo": "ba_mcp.registry",
    "Reading": "ba_mcp.formats.base",
    "Plugin": "ba_mcp.plugins",
    "ConnectedEngine": "ba_mcp.databases.connector",
    "LocalEngine": "ba_mcp.databases.connector",
    "Held": "ba_mcp.databases.connector",
    "Connect": "ba_mcp.workers.messages",
    "Opened": "ba_mcp.workers.messages",
    "TableInfo": "ba_mcp.databases.base",
    "ColumnInfo": "ba_mcp.databases.base",
    "Services": "ba_mcp.tools.services",
    "ToolSettings": "ba_mcp.settings",
}

__all__ = [  # a literal, for the type checkers and linters (each name's module in _PUBLIC)
    "App",
    "Code",
    "ColumnInfo",
    "Composite",
    "Connect",
    "ConnectedEngine",
    "Document",
    "EngineInfo",
    "ErrorType",
    "FormatInfo",
    "Held",
    "Image",
    "JsonValue",
    "LocalEngine",
    "Opened",
    "Plugin",
    "Reading",
    "Services",
    "Settings",
    "Table",
    "TableInfo",
    "TokenCounter",
    "Tool",
    "ToolContext",
    "ToolFailure",
    "ToolInfo",
    "ToolParams",
    "ToolPolicy",
    "ToolSettings",
    "__version__",
    "build_server",
    "load_settings",
]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'ba_mcp' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
