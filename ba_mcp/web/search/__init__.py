"""Web search: one interface (``base.Provider``), one class per provider (``providers``), and the ``Searcher``
that runs them (spacing, 429s, errors)."""

from ba_mcp.web.search.base import Hit, choose
from ba_mcp.web.search.searcher import Searcher

__all__ = ["Hit", "Searcher", "choose"]
