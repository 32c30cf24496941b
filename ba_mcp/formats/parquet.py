"""Parquet files."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ba_mcp.formats.base import ReaderBase
from ba_mcp.results import Table

if TYPE_CHECKING:
    pass


class ParquetReading(ReaderBase):
    def _read_parquet(self) -> Table:
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(self.source.path)
        total = pf.metadata.num_rows
        nrows, notes = self._row_window()
        start = self.window.offset
        stop = total if nrows is None else min(total, start + nrows)
        groups: list[int] = []
        first_row = row = 0
        for g in range(pf.num_row_groups):
            n = pf.metadata.row_group(g).num_rows
            if row + n > start and row < stop:
                if not groups:
                    first_row = row
                groups.append(g)
            row += n
        table = pf.read_row_groups(groups) if groups else pf.schema_arrow.empty_table()
        table = table.slice(start - first_row if groups else 0, max(stop - start, 0))
        return self._table(table, stop < total, notes, total=total)
