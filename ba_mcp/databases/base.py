"""One interface, several engines (ARCHITECTURE.md: databases/).

A ``Database`` is one configured connection. Its contract, whatever the engine:

* ``analyse(sql) -> Analysis``: what the engine's own parser says of the text (statement types, the table
  names it reads, the one statement that would run); a syntax error is ``ToolFailure`` SQL_SYNTAX.
* ``run(sql, params, tables, ctx) -> Execution``: the statement executed read-only by the engine's own
  rules, ``tables`` (name → Arrow data) visible to it by name; results come as Arrow record batches from
  ``Execution.reader``. The call's cancellation (``ctx.on_cancel``) stops the statement in the engine.
* ``describe() -> dict``: the catalog (tables, views, columns, types, comments, row counts).
* ``classify_error(exc) -> ToolFailure``: the engine's exceptions in the spec's error vocabulary.
* ``dialect`` names the SQL dialect, ``identity`` changes whenever the data may have changed (cache keys).

``collect()`` turns an Execution into the observation's raw ``Table``, engine-agnostic: at most
``max_rows + 1`` rows in memory, the complete result streamed batch by batch into a table artifact.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ba_mcp.results import Table

if TYPE_CHECKING:
    import pyarrow as pa

    from ba_mcp.errors import ToolFailure
    from ba_mcp.stores.artifacts import ArtifactMeta, ArtifactStore
    from ba_mcp.tool import ToolContext


@dataclass(frozen=True)
class Analysis:
    kinds: tuple[str, ...]  # one statement type name per statement, e.g. ("SELECT",)
    refs: tuple[str, ...]  # unqualified table names of a single read-only statement
    sql: str = ""  # what runs: the one statement as the parser split it (EXPLAIN rebuilt around it)
    refusal: str = ""  # why a lone EXPLAIN is refused (it does not explain exactly one SELECT)


@dataclass
class Execution:
    """A running statement: its result as Arrow batches, names for the types Arrow cannot tell apart, and
    what to call when the result has been read."""

    reader: pa.RecordBatchReader
    display_types: dict[str, str] = field(default_factory=dict)
    close: Callable[[], None] = lambda: None


class Database(Protocol):
    name: str
    dialect: str

    @property
    def identity(self) -> str: ...

    def analyse(self, sql: str) -> Analysis: ...

    def run(self, sql: str, params: Any, tables: Mapping[str, Any], ctx: ToolContext) -> Execution: ...

    def describe(self) -> dict[str, Any]: ...

    def classify_error(self, exc: Exception) -> ToolFailure: ...


def collect(execution: Execution, max_rows: int, artifacts: ArtifactStore, title: str, database: str) -> Table:
    """At most max_rows + 1 rows in memory; the rest, if any, streamed with them into a Parquet artifact
    (within the artifact size limit), and the observation's Table says which."""
    import pyarrow as pa

    reader, types = execution.reader, execution.display_types
    head: list[pa.RecordBatch] = []
    have = 0
    for batch in reader:
        head.append(batch)
        have += batch.num_rows
        if have > max_rows:
            break
    schema = reader.schema
    if have <= max_rows:
        table = pa.Table.from_batches(head, schema=schema)
        return Table(title, table, total_rows=table.num_rows, meta={"database": database}, column_types=types)
    meta, total, complete = _stream_to_artifact(head, reader, schema, artifacts, title)
    first = pa.Table.from_batches(head, schema=schema).slice(0, max_rows)
    if complete:
        note = (
            f"the query returned {total:,} rows; the first {max_rows:,} (max_rows) were fetched and the "
            f"complete result is {meta.id}"
        )
    else:
        note = (
            f"the query returned more than {total:,} rows; the result exceeds the artifact size limit "
            "and was not stored — filter or aggregate in SQL"
        )
    return Table(
        title,
        first,
        column_types=types,
        total_rows=total if complete else None,
        more=not complete,
        notes=[note],
        artifact_id=meta.id if complete else None,
        meta={"database": database, "fetched_rows": max_rows},
    )


def _stream_to_artifact(
    head: list[Any], reader: Any, schema: Any, artifacts: ArtifactStore, title: str
) -> tuple[ArtifactMeta, int, bool]:
    import pyarrow.parquet as pq

    limit = artifacts.max_single_bytes
    state = {"rows": 0, "complete": True}

    def write(path: Path) -> None:
        with pq.ParquetWriter(path, schema, compression="zstd") as writer:
            for batches in (head, reader):
                for batch in batches:
                    writer.write_batch(batch)
                    state["rows"] += batch.num_rows
                    if path.stat().st_size > limit:
                        state["complete"] = False
                        return

    meta = artifacts.put_table_writer(write, title=title, source_tool="query_database")
    return meta, state["rows"], bool(state["complete"])
