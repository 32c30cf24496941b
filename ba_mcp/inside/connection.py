"""The connection worker: one ADBC connection to a configured database, in a process the server kills.

Started like the DuckDB worker (``python -I -B -m ba_mcp.inside`` with ``"kind": "connection"`` in its
options: ``main``) and confined the same way — minus the network namespace when the database is reached over the
network. The driver, URL and options (credentials) arrive over the socket in ``connect``, never on the command
line or in the environment. This program knows no engine: ``connect`` names the engine's module (the registry's
entry), whose ``ENGINE`` hooks (``databases.connector.ConnectedEngine``) open the connection, frame each call
read-only, type the results and read the catalog. Operations:

* ``Connect`` — open the connection; the engine checks what it must (a role's privileges, a read-only rule) and
  reports the server's version;
* ``Statement`` — the user's one statement inside the engine's read-only frame (``begin``, ``vet``), its first
  ``max_rows + 1`` rows back as Arrow; ``Store`` streams the rest into the artifact's descriptor as Parquet,
  ``Drop`` discards it; the frame is always closed (``end``) — after the answer is sent when it can be;
* ``Catalog`` — the catalog.

A SIGINT (the call's timeout) cancels the running statement (the engine's ``interrupt``).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import types
from typing import Any

from ba_mcp.inside.serve import Answer, Handlers, handles
from ba_mcp.values import shown_schema
from ba_mcp.workers.messages import (
    Catalog,
    Connect,
    Connected,
    Described,
    Done,
    Drop,
    Result,
    Statement,
    Store,
    Stored,
)
from ba_mcp.workers.wire import Failure, first_rows, memfile, write_arrow


class Connector:
    """Serves one database connection (opened on ``connect``). The engine's hooks receive it as
    ``databases.connector.Held`` and keep their state here: ``con``, ``cur`` (the user's statements), ``frame`` (our
    own fixed text), ``in_transaction``, and in ``extra`` what an engine adds (a second cursor, a session id)."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        self.engine: Any = None
        self.con: Any = None
        self.cur: Any = None
        self.frame: Any = None
        self.running: Any = None  # the cursor running the call's statement (the engine's ``statement`` picks it)
        self.label = ""  # the calling session's digest
        self.identity: dict[str, Any] = {}  # who the call runs as (user, role): data the server sent with it
        self.busy = False  # set by the serving loop while an operation runs
        self.pending: Any = None  # (reader, head batches, schema, convert) of a result cut at max_rows
        self.in_transaction = False
        self.after_reply: Any = None  # what the serving loop runs once the answer is sent
        self.extra: dict[str, Any] = {}  # the engine's own state (databases/connector.py: Held)

    def interrupt(self) -> None:
        if self.busy and self.cur is not None and self.engine is not None:
            self.engine.interrupt(self)

    # -- operations ----------------------------------------------------------------------------------

    def handlers(self) -> Handlers:
        return dict(
            [
                handles(Connect, self.connect),
                handles(Statement, self.statement),
                handles(Store, self.store),
                handles(Drop, self.drop),
                handles(Catalog, self.catalog),
            ]
        )

    def connect(self, request: Connect, fds: list[int]) -> Answer[Connected]:
        path = request.path  # the folder of an engine's package outside ba_mcp (bound into this root)
        if path and path not in sys.path:
            sys.path.append(str(path))
        light_imports()  # before the driver: what a connection needs, and no more
        self.engine = importlib.import_module(str(request.engine)).ENGINE
        info = self.engine.open(self, request)
        return {"op": "connected", "version": "", **info}, []

    def statement(self, request: Statement, fds: list[int]) -> Answer[Result]:
        import pyarrow as pa

        timeout_s = float(request.timeout_s or 0)
        try:
            self._end()
            self.identity = dict(request.identity or {})
            self.engine.begin(self, timeout_s, str(request.label or ""))
        except Failure:  # the engine refused the call's frame (a role it was not given at connect)
            raise
        except Exception as exc:  # before the statement: the connection is gone (a restart, an idle timeout)
            raise Failure(
                type="transient_error",
                code="CONNECTION_LOST",
                message="the connection to the database was lost: " + str(exc).split("\n")[0][:300],
                hint="retry",
            ) from None
        params, sql = request.params, str(request.sql)
        if isinstance(params, dict):  # $name placeholders (a saved analysis binds its parameters by name)
            sql, params = self.engine.named(self, sql, params)
        bound = tuple(params) if params else None
        sql = self.engine.statement(self, sql)
        bound = self.engine.bind(self, sql, bound, timeout_s)  # typed first: the plan vetted is the one that runs
        self.extra["scan_bound"] = request.scan_bound  # rows a planned scan may read unconfirmed (None: any)
        self.engine.vet(self, sql, bound, timeout_s)
        self.running.execute(sql, bound)
        reader = self.running.fetch_record_batch()
        if not len(reader.schema):  # a statement without rows (SET, LOCK …, a void function): it ran, and is undone
            for _ in reader:  # read to its end: a failure (a timeout, an error) surfaces here, never "done"
                pass
            with contextlib.suppress(Exception):
                reader.close()
            self._end()
            done = pa.table({"result": pa.array(["done (rolled back at the end of the call)"], pa.string())})
            return {"op": "result", "rows": 1, "more": False, "display_types": {}}, [memfile(write_arrow(done))]
        schema, convert, shown = self.engine.columns(reader.schema)
        # values as the database shows them: intervals, float4, timestamptz in the session's zone (ba_mcp.values)
        schema, convert, named = shown_schema(schema, convert, self.extra.get("time_zone"))
        shown = {**named, **shown}
        head, have, more, blob = first_rows(reader, convert, schema, int(request.max_rows))
        if more:
            self.pending = (reader, head, schema, convert)
        else:
            with contextlib.suppress(Exception):
                reader.close()
            self.after_reply = self._end  # the frame closed once the answer is on its way (off the call's path)
        return {"op": "result", "rows": have, "more": more, "display_types": shown}, [memfile(blob)]

    def store(self, request: Store, fds: list[int]) -> Answer[Stored]:
        """The complete result of the last ``statement`` as Parquet into the descriptor given, batch by batch (memory
        bounded by a batch), stopping past ``limit`` bytes."""
        import pyarrow.parquet as pq

        if self.pending is None:
            raise Failure(type="execution_error", code="NOTHING_TO_STORE", message="no result is waiting")
        reader, head, schema, convert = self.pending
        self.pending = None
        limit = int(request.limit)
        rows, complete = 0, True
        try:
            with open(fds[0], "wb", closefd=False) as out, pq.ParquetWriter(out, schema, compression="zstd") as writer:
                for batch in head:
                    writer.write_batch(batch)
                    rows += batch.num_rows
                for batch in reader:
                    writer.write_batch(convert(batch))
                    rows += batch.num_rows
                    if out.tell() > limit:
                        complete = False
                        break
        finally:
            with contextlib.suppress(Exception):
                reader.close()
            self._end()
        return {"op": "stored", "rows": rows, "complete": complete}, []

    def drop(self, request: Drop, fds: list[int]) -> Answer[Done]:
        self._end()
        return {"op": "dropped"}, []

    def catalog(self, request: Catalog, fds: list[int]) -> Answer[Described]:
        self._end()
        self.identity = dict(request.identity or {})
        return {"op": "catalog", "tables": self.engine.catalog(self, list(request.schemas or []))}, []

    # -- the frame of a call -----------------------------------------------------------------------------

    def frame_sql(self, sql: str) -> None:
        """Our own fixed text, on a statement of its own: the user's cursor remembers its last query (and would
        run a changed statement's text for an equal one), and only this text may hold several statements."""
        if self.frame is None:
            self.frame = self.con.cursor()  # kept: its statement lives as long as the cursor
        self.frame.adbc_statement.set_sql_query(sql)
        self.frame.adbc_statement.execute_update()

    def _end(self) -> None:
        if self.pending is not None:
            with contextlib.suppress(Exception):
                self.pending[0].close()
            self.pending = None
        if self.engine is not None:
            self.engine.end(self)


def light_imports() -> None:
    """What a connection needs of pyarrow, and not pandas (issue 63: a first catalog read waited 13.9 s at load ~10,
    most of it this worker's start). Two of pyarrow's ways pull in pandas (2-3 s on a quiet machine):

    * the ADBC driver manager's DB-API imports ``pyarrow.dataset`` at its top — for one thing a read-only connection
      never does (ingesting a Dataset) — and that module imports pandas: it is a stand-in until a name of it is read
      (``_OnFirstUse``; the standard library's ``LazyLoader`` loads on the import system's own look at ``__spec__``
      in Python 3.11);
    * pyarrow, asked for an array of Python values (every bound parameter, every text column we build), first imports
      pandas to see whether they are pandas': its one look is answered "not installed" here. pandas itself stays
      importable, and pyarrow's pandas conversions (``to_pandas``, ``from_pandas``) import it when asked."""
    if "pandas" in sys.modules:  # an engine that needs it (a client library) has it already: nothing to spare
        return
    import pyarrow as pa

    if "pyarrow.dataset" not in sys.modules:
        stand_in = _OnFirstUse("pyarrow.dataset")
        sys.modules["pyarrow.dataset"] = stand_in
        setattr(pa, "dataset", stand_in)  # noqa: B010 — as the import system binds a submodule on its package
    absent = _Absent("pandas")
    sys.meta_path.insert(0, absent)
    try:
        pa.array([0])  # pyarrow's one look for pandas, answered
    finally:
        sys.meta_path.remove(absent)


class _OnFirstUse(types.ModuleType):
    """A module's stand-in: the first name read of it imports the real module (which replaces it in ``sys.modules``
    and on its package) and answers from it."""

    def __getattr__(self, name: str) -> Any:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), name)


class _Absent:
    """An import finder under which one package cannot be imported (``light_imports``, while pyarrow looks)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == self.name or name.startswith(self.name + "."):
            raise ImportError(f"{name} is not used in a connection worker")
