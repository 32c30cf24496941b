"""The requests the server sends its engine and connection workers: one frozen dataclass per operation, shared by
both sides of the boundary. The server builds them (never a dict); ``Call.ask`` serialises one at the one boundary
point (``wire``), and the worker reads it back (``request_of``) and answers it by its type (``inside.serve``).

A request names its operation (``op``) and carries only JSON values: the worker's program is started from the same
code, so a field added here is a field both sides know."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, NotRequired, TypedDict, TypeVar

__all__ = [
    "Analyse",
    "Catalog",
    "Connect",
    "Describe",
    "Drop",
    "Extract",
    "MetricsWork",
    "Parse",
    "Placeholders",
    "Query",
    "ReadParquet",
    "Request",
    "Statement",
    "Stats",
    "Store",
    "UnknownRequest",
    "WriteParquet",
    "request_of",
]


class UnknownRequest(ValueError):
    """A message that is no request of this module (an unknown operation, or fields it does not have)."""


# -- the replies (what ``Call.ask`` returns for a request typed with its reply; JSON from the worker, whose Arrow and
# Parquet come as checked blobs beside it) ---------------------------------------------------------------------------


class Analysed(TypedDict):
    """``Analyse``'s reply: DuckDB's parse of the statement."""

    op: str
    kinds: list[str]  # each statement's type
    refs: list[str]  # the table names the one statement reads
    sql: str  # what would run ("": nothing may)
    refusal: str  # why not, when it may not ("": no refusal)


class Result(TypedDict):
    """``Query``'s and ``Statement``'s reply: the first ``max_rows + 1`` rows come as an Arrow stream beside it."""

    op: str
    rows: int  # rows read (at most ``max_rows + 1``)
    more: bool  # the result has more than ``max_rows`` (``Store`` keeps it, ``Drop`` discards it)
    display_types: dict[str, str]  # names of the types Arrow cannot show (intervals, float4, …)
    lock_waited_s: NotRequired[float]  # how long another program's lock on the file was waited out


class Stored(TypedDict):
    """``Store``'s reply: the rows written, whether the whole result was (within the limit), its figures."""

    op: str
    rows: int
    complete: bool
    stats: NotRequired[dict[str, Any]]  # whole-column figures, where the worker counted them
    total: NotRequired[int]


class Described(TypedDict):
    """``Describe``'s and ``Catalog``'s reply: the catalog's tables (``databases.base.TableInfo`` by name)."""

    op: str
    tables: dict[str, Any]


class Figures(TypedDict):
    """``Stats``'s reply: whole-column figures of a stored table, by column, and its rows."""

    op: str
    stats: dict[str, dict[str, Any]]
    total: int


class Done(TypedDict):
    """``Drop``'s reply: the rest of the result discarded."""

    op: str


class Written(TypedDict):
    """``WriteParquet``'s reply: the rows written."""

    op: str
    rows: int


class TableRead(TypedDict):
    """``ReadParquet``'s reply: the rows read (the table comes as an Arrow stream beside it)."""

    op: str
    rows: int


class Parsed(TypedDict):
    """``Parse``'s reply: the raw result as ``wire.encode_raw`` encodes it (its tables' Arrow streams beside it)."""

    op: str
    raw: dict[str, Any]


class Extracted(TypedDict):
    """``Extract``'s reply: the page's title (its text comes beside it, put in ``text`` on this side)."""

    op: str
    title: str | None
    text: NotRequired[str]


class Metered(TypedDict, total=False):
    """``MetricsWork``'s reply (``metrics.catalog.answer``): a compiled query (``compile``: its SQL, database,
    dialect, columns, definitions and notes), a ``summary`` (metrics, dimensions, warnings) or a metric's
    description (``describe``: text); nothing but its op for the spare's ``read``."""

    op: str
    sql: str
    database: str
    dialect: str
    columns: list[Any]
    definitions: list[Any]
    notes: list[str]
    metrics: list[dict[str, Any]]
    dimensions: list[str]
    warnings: list[str]
    text: str


class Placed(TypedDict):
    """``Placeholders``'s reply: the text with the values in place, the names found, what the step's result covers."""

    op: str
    text: str
    found: list[str]
    cut: dict[str, Any]


class Opened(TypedDict, total=False):
    """What a connected engine's ``open`` says of the database (``databases.connector.ConnectedEngine.open``), for
    the doctor and the log: its version; whether the driver holds the connection read-only; the role it connected
    as, that role's privileges and whether it can write, the roles calls may take (``role_from``); how many
    functions a statement may call; whether the engine's own read-only rule is active; what it says of its
    read-only boundary (``detail``) and warnings for the operator (said once per server)."""

    version: str
    read_only_by_driver: bool
    role: str
    privileges: list[str]
    role_can_write: bool
    mapped_roles: list[str]
    allowed_functions: int
    guarded: bool
    detail: str
    warnings: list[str]


class Connected(Opened):
    """``Connect``'s reply: ``Opened``, with its op."""

    op: str


R = TypeVar("R")


@dataclass(frozen=True)
class Request(Generic[R]):
    """One operation a worker answers; subclasses name theirs in ``op`` and their reply as ``R`` (a TypedDict)."""

    op: ClassVar[str] = ""

    def fields(self) -> dict[str, Any]:
        """The request's fields by name (shallow: the values are the request's own)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def wire(self) -> dict[str, Any]:
        """The request as the socket carries it: its fields and its ``op``."""
        return {"op": self.op, **self.fields()}


REQUESTS: dict[str, type[Request[Any]]] = {}

_Kind = TypeVar("_Kind", bound=type[Request[Any]])


def _request(cls: _Kind) -> _Kind:
    assert cls.op and cls.op not in REQUESTS, cls
    REQUESTS[cls.op] = cls
    return cls


def request_of(message: dict[str, Any]) -> Request[Any]:
    """The request a message carries (the worker's side of ``Request.wire``)."""
    kind = REQUESTS.get(str(message.get("op")))
    if kind is None:
        raise UnknownRequest(f"unknown operation {message.get('op')!r}")
    try:
        return kind(**{k: v for k, v in message.items() if k != "op"})
    except TypeError as exc:
        raise UnknownRequest(f"{kind.op}: {exc}") from None


# -- SQL: the session's DuckDB (engine worker) ---------------------------------------------------------


@_request
@dataclass(frozen=True)
class Analyse(Request[Analysed]):
    """DuckDB's parse of a statement: its types, the table names it reads, what would run."""

    op: ClassVar[str] = "analyse"
    sql: str


@_request
@dataclass(frozen=True)
class Query(Request[Result]):
    """A statement on the session's DuckDB connection; workspace files come as descriptors (``files``: one spec
    each, in the descriptors' order), read within the formats' ``bounds``."""

    op: ClassVar[str] = "query"
    database: str
    sql: str
    params: Any
    max_rows: int
    files: list[dict[str, Any]] = field(default_factory=list)
    bounds: dict[str, Any] = field(default_factory=dict)
    scan_bound: int | None = None  # rows a scan DuckDB expects may read unconfirmed (None: any)
    lock_wait_s: float = 0.0  # how long another program's lock on the file (a dbt build) is waited out


@_request
@dataclass(frozen=True)
class Describe(Request[Described]):
    """A configured DuckDB database's catalog, with the session's own TEMP tables and views."""

    op: ClassVar[str] = "describe"
    database: str


@_request
@dataclass(frozen=True)
class Stats(Request[Figures]):
    """Whole-column figures of a stored table (the Parquet file handed over)."""

    op: ClassVar[str] = "stats"


# -- both kinds of worker: a result cut at max_rows -------------------------------------------------------


@_request
@dataclass(frozen=True)
class Store(Request[Stored]):
    """The complete result of the last query, as Parquet into the descriptor handed over, up to ``limit`` bytes."""

    op: ClassVar[str] = "store"
    limit: int


@_request
@dataclass(frozen=True)
class Drop(Request[Done]):
    """The rest of the last query's result, discarded."""

    op: ClassVar[str] = "drop"


# -- Parquet artifacts (engine worker: the server holds no Parquet reader or writer) -------------------------


@_request
@dataclass(frozen=True)
class WriteParquet(Request[Written]):
    """The Arrow stream of the first descriptor written as Parquet into the second."""

    op: ClassVar[str] = "write_parquet"


@_request
@dataclass(frozen=True)
class ReadParquet(Request[TableRead]):
    """A Parquet artifact (the descriptor) as an Arrow stream."""

    op: ClassVar[str] = "read_parquet"


# -- untrusted bytes decoded (engine worker) ------------------------------------------------------------------


@_request
@dataclass(frozen=True)
class Parse(Request[Parsed]):
    """A workspace file or downloaded bytes (the descriptor) read by ``ba_mcp.formats``; ``whole``: all of it as a
    table or NOT_TABULAR, decided in the worker."""

    op: ClassVar[str] = "parse"
    source: dict[str, Any]  # name, size, suffix, kind, ref_id
    format: str
    window: dict[str, Any]  # offset, nrows, sheet
    bounds: dict[str, Any]
    title: str
    encoding: str | None = None
    whole: bool = False
    # a plug-in's format: its reader ("module:function", registry.FormatInfo) and the folder that holds its package
    # (put on the worker's import path; the package itself is bound into the worker's root)
    reader: str = ""
    path: str | None = None


@_request
@dataclass(frozen=True)
class Extract(Request[Extracted]):
    """The readable text of a downloaded page (``kind`` html, in ``charset``) or PDF (the descriptor)."""

    op: ClassVar[str] = "extract"
    kind: str
    url: str
    charset: str | None = None


# -- metrics and saved analyses (engine worker: the model's text is read there) ---------------------------------


@_request
@dataclass(frozen=True)
class MetricsWork(Request[Metered]):
    """Metrics work over the server's metric files (they travel along; read once per ``digest``): ``action``
    summary, describe (``name``), compile (``query``) or read (the model read ahead by a spare)."""

    op: ClassVar[str] = "metrics"
    action: str
    digest: str
    files: list[Any]
    dbt: list[Any]
    renderers: dict[str, Any]
    dialects: dict[str, Any]
    grains: dict[str, Any]
    query: dict[str, Any] | None = None
    name: str | None = None
    warm: bool = False  # the spare's own read ahead (action "read"), not a call: its warm-up imports go on


@_request
@dataclass(frozen=True)
class Placeholders(Request[Placed]):
    """A saved analysis's parameter ``values`` found in a step's SQL, filter or code (one of them) and replaced."""

    op: ClassVar[str] = "placeholders"
    values: dict[str, Any]
    sql: str | None = None
    filter: str | None = None
    code: str | None = None


# -- a configured database's connection (connection worker) ----------------------------------------------------


@_request
@dataclass(frozen=True)
class Connect(Request[Connected]):
    """Open the connection (``databases.connector.ConnectedEngine.connect_message``): the engine's module, its
    driver, URL and options (credentials: over the socket only), the rules it holds at connect. ``uri`` is the URL,
    or what an engine of files sends instead; ``identity`` the file the server opened, ``path`` the folder of an
    engine's package outside ba_mcp."""

    op: ClassVar[str] = "connect"
    engine: str
    driver: str
    uri: Any
    options: dict[str, str]
    allow_privileged_role: bool = False
    allow_writable_role: bool = False
    allow_unguarded_writes: bool = False
    allow_functions: list[str] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    identity: list[int] | None = None  # device and inode
    path: str | None = None


@_request
@dataclass(frozen=True)
class Statement(Request[Result]):
    """The user's one statement inside the engine's read-only frame: ``label`` tells the session apart in the
    database, ``identity`` who the call runs as, ``scan_bound`` the rows a planned scan may read unconfirmed."""

    op: ClassVar[str] = "statement"
    sql: str
    params: Any
    max_rows: int
    timeout_s: float
    label: str = ""
    identity: dict[str, Any] | None = None
    scan_bound: int | None = None


@_request
@dataclass(frozen=True)
class Catalog(Request[Described]):
    """The connected database's catalog (``schemas``: those only), read as ``identity``."""

    op: ClassVar[str] = "catalog"
    schemas: list[str] = field(default_factory=list)
    identity: dict[str, Any] | None = None
