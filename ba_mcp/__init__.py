"""ba-mcp: a business-analysis tool server for the Model Context Protocol.

The public surface, for embedding the server or adding a tool (imported on first use, so that
``import ba_mcp`` stays cheap):

* ``load_settings`` / ``Settings`` — the configuration; ``App`` — the application object built from it;
  ``build_server(app)`` — the MCP server (stdio and HTTP through the SDK);
* ``Tool``, ``ToolParams``, ``ToolPolicy``, ``ToolContext`` — what a tool is;
* ``ToolFailure``, ``ErrorType``, ``Code`` — the one error vocabulary;
* ``Table``, ``Document``, ``JsonValue``, ``Image``, ``Composite`` — the raw results a tool returns;
* ``TokenCounter`` — offline token counting (``count_tokens``, ``count_message_tokens``,
  ``count_conversation_tokens``, ``model_info``: T-T's library API).
"""

from __future__ import annotations

import importlib
from typing import Any

from ba_mcp.version import __version__

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
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'ba_mcp' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
