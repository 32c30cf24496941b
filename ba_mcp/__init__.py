"""ba-mcp: a business-analysis tool server for the Model Context Protocol."""

__version__ = "0.1.0"
