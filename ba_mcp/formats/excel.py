"""Excel and ODS workbooks: the declared inflated size checked first; large .xlsx streamed row by row."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from ba_mcp.errors import ErrorType, ToolFailure, not_found
from ba_mcp.formats.base import ReaderBase
from ba_mcp.formats.csv import too_many_columns
from ba_mcp.results import Table

if TYPE_CHECKING:
    pass


class ExcelReading(ReaderBase):
    def _read_excel(self) -> Table:
        import pandas as pd
        import python_calamine

        inflated = self._inflated_size()
        if inflated > self.bounds.max_decompressed_bytes:
            if self.source.suffix in (".xlsx", ".xlsm"):
                return self._read_excel_streamed(inflated)
            raise ToolFailure(
                ErrorType.RESOURCE_ERROR,
                "DECOMPRESSED_TOO_LARGE",
                f"{self.title} inflates to {inflated:,} bytes, "
                f"over the {self.bounds.max_decompressed_bytes:,}-byte limit",
                "export the sheet as CSV or Parquet, or raise formats.max_decompressed_bytes",
            )
        try:
            workbook = python_calamine.CalamineWorkbook.from_path(str(self.source.path))
        except Exception:
            raise self._bad_excel() from None
        sheets = list(workbook.sheet_names)
        name = self._sheet_name(sheets)
        nrows, notes = self._row_window()
        # calamine holds the whole sheet in memory whatever the window (its size is bounded above), so the
        # whole sheet is typed once and the window cut from it: a column's type and the row count are the
        # sheet's, not the window's.
        whole = pd.read_excel(self.source.path, sheet_name=name, engine="calamine")
        start = min(self.window.offset, len(whole))
        end = len(whole) if nrows is None else min(len(whole), start + nrows)
        frame = whole.iloc[start:end].reset_index(drop=True)
        more = end < len(whole)
        if len(sheets) > 1:
            notes.append(f"workbook sheets: {', '.join(map(repr, sheets))}; this is {name!r} (choose with sheet=)")
        self.title = f"{self.title} [sheet {name}]"
        return self._table(frame, more, notes, total=len(whole), sheet=name, sheets=sheets)

    def _inflated_size(self) -> int:
        """The declared decompressed size of a zipped workbook (xlsx, xlsm, ods); 0 for other files.
        Python's zipfile never inflates a member past its declared size, and calamine reads only small ones."""
        import zipfile

        with self.source.open() as f:
            if f.read(4) != b"PK\x03\x04":
                return 0
            try:
                with zipfile.ZipFile(f) as z:
                    return sum(i.file_size for i in z.infolist())
            except (zipfile.BadZipFile, OSError):
                return 0

    def _read_excel_streamed(self, inflated: int) -> Table:
        """A large workbook read row by row with openpyxl's sheet parser straight from the zip: only the rows
        asked for, at most ``max_cells`` cells, whatever the sheet holds (a missing ``<dimension>`` makes
        openpyxl's read-only workbook scan the whole sheet first, so it is not used)."""
        import zipfile

        import pandas as pd
        from openpyxl.reader.strings import read_string_table
        from openpyxl.reader.workbook import WorkbookParser
        from openpyxl.worksheet._reader import WorkSheetParser

        try:
            with self.source.open() as f, zipfile.ZipFile(f) as z:
                names = set(z.namelist())
                book = (
                    "xl/workbook.xml"
                    if "xl/workbook.xml" in names
                    else next(n for n in names if n.endswith("workbook.xml"))
                )
                parser = WorkbookParser(z, book)
                parser.parse()
                targets = {sheet.name: rel.target.lstrip("/") for sheet, rel in parser.find_sheets()}
                name = self._sheet_name(list(targets))
                shared: list[Any] = []
                if "xl/sharedStrings.xml" in names:
                    if z.getinfo("xl/sharedStrings.xml").file_size > self.bounds.max_decompressed_bytes:
                        raise ToolFailure(
                            ErrorType.RESOURCE_ERROR,
                            "DECOMPRESSED_TOO_LARGE",
                            f"the shared strings of {self.title} inflate past the "
                            f"{self.bounds.max_decompressed_bytes:,}-byte limit",
                            "export the sheet as CSV or Parquet",
                        )
                    with z.open("xl/sharedStrings.xml") as strings:
                        shared = read_string_table(strings)
                with z.open(targets[name]) as sheet:
                    return self._stream_rows(WorkSheetParser(sheet, shared, data_only=True).parse(), name, inflated, pd)
        except ToolFailure:
            raise
        except Exception:
            raise self._bad_excel() from None

    def _bad_excel(self) -> ToolFailure:
        return ToolFailure(
            ErrorType.VALIDATION_ERROR,
            "BAD_EXCEL",
            f"{self.title} is not a readable Excel file",
            "check the file, or pass format= if it is another format",
        )

    def _sheet_name(self, sheets: list[str]) -> str:
        sheet = self.window.sheet if self.window.sheet is not None else 0
        if isinstance(sheet, int) or (isinstance(sheet, str) and sheet.isdigit() and sheet not in sheets):
            index = int(sheet)
            if not 0 <= index < len(sheets):
                raise not_found(f"sheet index {index} does not exist", f"sheets: {', '.join(map(repr, sheets))}")
            return sheets[index]
        if sheet in sheets:
            return str(sheet)
        raise not_found(f"no sheet named {str(sheet)[:60]!r}", f"sheets: {', '.join(map(repr, sheets))}")

    def _stream_rows(self, parsed: Any, name: str, inflated: int, pd: Any) -> Table:
        def values(cells: list[dict[str, Any]], width: int | None) -> list[Any]:
            out: list[Any] = [None] * (width or max((c["column"] for c in cells), default=0))
            for c in cells:
                if c["column"] <= len(out):
                    out[c["column"] - 1] = c["value"]
            return out

        first = next(parsed, None)
        raw_header = values(first[1], None) if first else []
        if len(raw_header) > self.bounds.max_columns:
            raise too_many_columns(self.title, len(raw_header), self.bounds.max_columns)
        header = [str(v) if v is not None else f"column_{i + 1}" for i, v in enumerate(raw_header)]
        asked, notes = self._row_window()
        capped, notes = self._cell_window(asked if asked is not None else self.bounds.partial_rows, notes, len(header))
        nrows = capped or 0
        notes.append(
            f"the workbook inflates to {inflated:,} bytes (over {self.bounds.max_decompressed_bytes:,}), so it was "
            "streamed: only the rows asked for were read (dates show as Excel serial numbers)"
        )
        picked = [
            values(cells, len(header))
            for _, cells in itertools.islice(parsed, self.window.offset, self.window.offset + nrows + 1)
        ]
        more = len(picked) > nrows
        body = picked[:nrows]
        self.title = f"{self.title} [sheet {name}]"
        frame = pd.DataFrame(body, columns=header)
        return self._table(frame, more, notes, total=None if more else self.window.offset + len(body), sheet=name)
