"""Parquet files: read batch by batch up to the window's last row, each row group's declared uncompressed size
checked against ``formats.max_decompressed_bytes`` before a byte of it is decoded."""

from __future__ import annotations

from ba_mcp.errors import ErrorType, ToolFailure
from ba_mcp.formats.base import ReaderBase
from ba_mcp.results import Table

_BATCH_ROWS = 8192


class ParquetReading(ReaderBase):
    def _read_parquet(self) -> Table:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(self.source.path)
        meta = pf.metadata
        total = meta.num_rows
        nrows, notes = self._row_window()
        nrows, notes = self._cell_window(nrows, notes, meta.num_columns)
        start = self.window.offset
        stop = total if nrows is None else min(total, start + nrows)
        groups: list[int] = []
        first_row = row = 0
        for g in range(pf.num_row_groups):
            n = meta.row_group(g).num_rows
            if row + n > start and row < stop:
                if not groups:
                    first_row = row
                groups.append(g)
            row += n
        limit = self.bounds.max_decompressed_bytes
        for g in groups:
            # A column chunk is decoded whole: a 1.5 MB file can declare gigabytes of zeros in one row group.
            chunk = max(
                (meta.row_group(g).column(c).total_uncompressed_size for c in range(meta.num_columns)), default=0
            )
            if chunk > limit:
                raise ToolFailure(
                    ErrorType.RESOURCE_ERROR,
                    "DECOMPRESSED_TOO_LARGE",
                    f"a column of row group {g} of {self.title} declares {chunk:,} bytes uncompressed; at most "
                    f"{limit:,} are decoded at once (formats.max_decompressed_bytes)",
                    "query the file with query_database, which reads it in the engine, or rewrite it with "
                    "smaller row groups",
                )
        batches: list[pa.RecordBatch] = []
        need = stop - first_row
        have = 0
        if groups and need > 0:
            for batch in pf.iter_batches(batch_size=_BATCH_ROWS, row_groups=groups, use_threads=False):
                batches.append(batch)
                have += batch.num_rows
                if have >= need:
                    break
        table = pa.Table.from_batches(batches, schema=pf.schema_arrow) if batches else pf.schema_arrow.empty_table()
        table = table.slice(start - first_row if groups else 0, max(stop - start, 0))
        return self._table(table, stop < total, notes, total=total)
