"""The P-1 reference: a hello-world MCPServer with one tool, started the same way as ba-mcp."""

from mcp.server import MCPServer

mcp = MCPServer("hello")


@mcp.tool()
def hello(name: str = "world") -> str:
    """Say hello."""
    return f"hello {name}"


if __name__ == "__main__":
    mcp.run()
