"""Parquet artifacts in a DuckDB worker: the server keeps no Parquet writer or reader of its own (issue 40: 22 MB of
its memory). ``write``: an Arrow stream into an artifact's file; ``read``: an artifact as an Arrow stream."""

from __future__ import annotations

from ba_mcp.inside.serve import Answer
from ba_mcp.workers.messages import ReadParquet, TableRead, WriteParquet, Written
from ba_mcp.workers.wire import memfile, write_arrow

__all__ = ["read", "write"]


def write(request: WriteParquet, fds: list[int]) -> Answer[Written]:
    """The table of an Arrow stream (``fds[0]``, the server's memory file) as a Parquet artifact into ``fds[1]``."""
    import mmap

    import pyarrow as pa
    import pyarrow.parquet as pq

    with mmap.mmap(fds[0], 0, access=mmap.ACCESS_READ) as mapped:
        table = pa.ipc.open_stream(pa.py_buffer(mapped)).read_all()
        with open(fds[1], "wb", closefd=False) as out:
            pq.write_table(table, out, compression="zstd")
        rows = table.num_rows
        del table  # its buffers are the mapping's: released before it closes
    return {"op": "written", "rows": rows}, []


def read(request: ReadParquet, fds: list[int]) -> Answer[TableRead]:
    """A Parquet artifact (``fds[0]``) as an Arrow stream for the server."""
    import pyarrow.parquet as pq

    with open(fds[0], "rb", closefd=False) as source:
        table = pq.ParquetFile(source).read()  # not read_table: it goes through pyarrow.dataset (pandas)
    return {"op": "table", "rows": table.num_rows}, [memfile(write_arrow(table), "table")]
