"""The P-1 and P-8 reference: a hello-world MCPServer with one tool, started the same way as ba-mcp.

``--with-libraries`` (P-8's floor): the same server that has also loaded what ba-mcp's server must hold — pyarrow's
core (Arrow tables and IPC streams, without numpy, as ba-mcp runs it; Parquet and the compute kernels are the
engine workers') and the cl100k token vocabulary (ba-mcp's compact counter) — and uses each once per call. No
other ba-mcp code."""

import sys

if "--with-libraries" in sys.argv:
    sys.modules["numpy"] = None  # as `ba-mcp serve` does
    from pathlib import Path

    import pyarrow as pa

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from ba_mcp.pipeline.tokens import TokenCounter
    from ba_mcp.settings import config_dir

    counter = TokenCounter(config_dir() / "token_encoders.yaml")
    counter.load()

from mcp.server import MCPServer

mcp = MCPServer("hello")


@mcp.tool()
def hello(name: str = "world") -> str:
    """Say hello."""
    if "--with-libraries" in sys.argv:
        table = pa.table({"name": [name]})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        rows = pa.ipc.open_stream(sink.getvalue()).read_all().num_rows
        return f"hello {name} ({counter.count_tokens(name)} tokens, {rows} row)"
    return f"hello {name}"


if __name__ == "__main__":
    mcp.run()
