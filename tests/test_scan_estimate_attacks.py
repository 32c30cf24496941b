"""Attacks on LARGE_SCAN's estimate from the parse (issue 63 item 3, issue 65 P-2): statements the parse
(``inside.sql.readable_rows``) bounds under ``confirm_scan_rows`` while DuckDB's own plan (``scanned_rows``: what
LARGE_SCAN asked before) says they read more, and ways a session might make the engine worker's kept catalog
(``Relations``) stale. A hole found is an ``xfail(strict=True)`` test: it passes while the hole is open and fails
(so it is turned into a plain test) once it is closed. The attacks that held are plain tests. In process, fast."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ba_mcp.inside.duck import DuckSession
from ba_mcp.inside.sql import Relations, parse, readable_rows, refuse_large_scan, scanned_rows
from ba_mcp.workers.messages import Query
from ba_mcp.workers.wire import Failure

ROWS = 300_000


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE big AS SELECT range AS id, range % 7 AS k, range % 11 AS a, range % 13 AS b, range % 17 AS c, "
        f"range % 19 AS d, range::VARCHAR AS s FROM range({ROWS})"
    )
    con.execute("CREATE TABLE small AS SELECT range AS id FROM range(10)")
    return con


def _refusal(con: duckdb.DuckDBPyConnection, sql: str, bound: int, relations: Relations | None) -> Any:
    """The LARGE_SCAN failure ``refuse_large_scan`` raises for ``sql`` under ``bound`` (None: it lets it run)."""
    try:
        refuse_large_scan(con, sql, None, bound, relations)
    except Failure as failure:
        return failure.fields
    return None


class Premise(Exception):
    """What a hole's test takes as given no longer holds (DuckDB plans it otherwise): look at the case again."""


# Statements whose plan scans more than the parse counts: DuckDB plans them with scans of its own making (a CTE read
# several times: grouping sets; holistic aggregates of different kinds; the late materialization of ORDER BY …
# LIMIT / LIMIT … OFFSET, which scans the table a second time for the rows it keeps). Each with a bound the parse's
# figure (the table once, ~300,000) is under and the plan's figure is over.
PLAN_SCANS_MORE = [
    # grouping sets: the finest grouping is materialized as a CTE and read once per coarser set (2^n for a CUBE)
    pytest.param("SELECT k, count(*) FROM big GROUP BY CUBE(k, a, b, c, d)", 1_000_000, id="cube"),
    pytest.param("SELECT count(*) FROM big GROUP BY GROUPING SETS ((k), (a))", 500_000, id="grouping-sets"),
    pytest.param("SELECT k, count(*) FROM big GROUP BY ROLLUP(k, id)", 500_000, id="rollup"),
    # holistic aggregates of different kinds: the input as a CTE (__aggregate_cte), read once per kind
    pytest.param(
        "SELECT median(id), mode(k), median(a), quantile_disc(b, 0.3), mad(c), mode(d), median(k), mode(s) FROM big",
        1_000_000,
        id="median-mode-quantile-mad",
    ),
    pytest.param("SELECT k, median(id), mode(a) FROM big GROUP BY k", 500_000, id="median-mode-grouped"),
    pytest.param("SELECT quantile_cont(id, [0.1, 0.5]), mode(a) FROM big", 500_000, id="quantile-list-mode"),
    pytest.param("SELECT k FROM big GROUP BY k HAVING median(id) > 0 AND mode(a) > 0", 500_000, id="having"),
    pytest.param("SELECT mode(k) FILTER (WHERE a = 1), median(id) FROM big", 500_000, id="filtered-mode"),
    pytest.param(
        "SELECT k, median(id) OVER (PARTITION BY k), mode(a) OVER (PARTITION BY k) FROM big", 500_000, id="windows"
    ),
    # late materialization: the table scanned again, joined on rowid to the rows the limit keeps
    pytest.param("SELECT * FROM big ORDER BY k LIMIT 5", 500_000, id="order-by-limit"),
    pytest.param("SELECT id FROM big LIMIT 10 OFFSET 5", 500_000, id="limit-offset"),
    pytest.param("SELECT s FROM big WHERE k = 1 LIMIT 5 OFFSET 10", 500_000, id="filtered-limit-offset"),
]


@pytest.mark.parametrize(("sql", "bound"), PLAN_SCANS_MORE)
def test_a_statement_the_plan_counts_past_the_bound_is_refused_though_its_parse_counts_less(
    con: duckdb.DuckDBPyConnection, sql: str, bound: int
) -> None:
    planned, scans = scanned_rows(con, sql, None)
    if planned is None or planned <= bound:
        raise Premise(f"DuckDB's plan reads {planned} rows of {sql}, not past {bound}: {scans}")
    assert _refusal(con, sql, bound, None) is not None  # the plan alone refuses it, as before the parse bound
    said = _refusal(con, sql, bound, Relations.of(con))
    assert said is not None and said["code"] == "LARGE_SCAN", (sql, readable_rows(parse(con, sql), Relations.of(con)))


def test_the_engine_worker_asks_before_a_cube_whose_plan_reads_past_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _session(tmp_path, monkeypatch)
    sql = "SELECT k, count(*) FROM events GROUP BY CUBE(k, a, b, c, d)"
    assert _query(session, "SELECT count(*) FROM events", 1_000_000) == "ran"  # USE wh; the catalog kept
    planned, _ = scanned_rows(session.con, sql, None)
    if planned is None or planned <= 1_000_000:
        raise Premise(f"DuckDB's plan reads {planned} rows, not past 1,000,000")
    assert _query(session, sql, 1_000_000) == "LARGE_SCAN"


def _session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DuckSession:
    """An engine worker's session (in process) with database ``wh``: table ``events`` of ROWS rows."""
    monkeypatch.chdir(tmp_path)  # its spill folder (duckdb_tmp) goes here
    path = tmp_path / "wh.duckdb"
    made = duckdb.connect(str(path))
    made.execute(
        "CREATE TABLE events AS SELECT range AS id, range % 7 AS k, range % 11 AS a, range % 13 AS b, "
        f"range % 17 AS c, range % 19 AS d FROM range({ROWS})"
    )
    made.close()
    session = DuckSession({"databases": [{"name": "wh", "alias": "wh", "path": str(path)}]})
    session.attach()
    return session


def _query(
    session: DuckSession, sql: str, bound: int | None, files: list[tuple[dict[str, Any], int]] | None = None
) -> str:
    """How the worker answers ``sql`` under ``bound``: ``ran``, or the code it refused it with."""
    files = files or []
    request = Query(database="wh", sql=sql, params=None, max_rows=10, files=[s for s, _ in files], scan_bound=bound)
    try:
        session.query(request, [fd for _, fd in files])
    except Failure as failure:
        return str(failure.fields["code"])
    finally:
        session._drop_pending()
    return "ran"


# Pre-existing (before the parse bound; the plan path): statements the worker runs before, or instead of, asking
# DuckDB's plan
def test_explain_analyze_of_a_large_scan_is_asked_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session(tmp_path, monkeypatch)
    assert _query(session, "SELECT sum(id) FROM events", 100_000) == "LARGE_SCAN"  # the SELECT alone is asked
    assert _query(session, "EXPLAIN ANALYZE SELECT sum(id) FROM events", 100_000) == "LARGE_SCAN"


@pytest.mark.parametrize("verb", ["CREATE", "CREATE OR REPLACE"])
def test_create_table_as_a_large_scan_is_asked_before_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verb: str
) -> None:
    session = _session(tmp_path, monkeypatch)
    said = _query(session, f"{verb} TEMP TABLE copied AS SELECT * FROM events", 100_000)
    made = session.con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'copied'").fetchall()[0][0]
    assert (said, made) == ("LARGE_SCAN", 0)


# --- attacks that held ---------------------------------------------------------------------------------------------

# Shapes the parse bounds: its figure is never under the plan's
HELD_BOUNDED = [
    "SELECT * FROM small CROSS JOIN big",
    "SELECT * FROM small POSITIONAL JOIN big",
    "SELECT * FROM small NATURAL JOIN big",
    "SELECT * FROM small SEMI JOIN big USING (id)",
    "SELECT * FROM small ANTI JOIN big USING (id)",
    "SELECT * FROM big b ASOF JOIN big c ON b.id >= c.id",
    "SELECT * FROM big b JOIN big c ON b.id < c.id",
    "SELECT id FROM small UNION BY NAME SELECT id FROM big",
    "SELECT id FROM small INTERSECT SELECT id FROM big",
    "SELECT id FROM small EXCEPT ALL SELECT id FROM big",
    "SELECT * FROM big UNION SELECT * FROM big",
    "SELECT * FROM big USING SAMPLE 10",
    "SELECT * FROM big TABLESAMPLE 1%",
    "SELECT id FROM big QUALIFY row_number() OVER () < 3",
    "SELECT COLUMNS(*) FROM big",
    "SELECT DISTINCT ON (k) * FROM big",
    "SELECT DISTINCT k, a FROM big",
    "SELECT * FROM big LIMIT 10%",
    "SELECT * FROM big OFFSET 5",
    "SELECT * FROM big b JOIN small USING (id) LIMIT 3 OFFSET 1",
    "SELECT median(id), median(a) FROM big",  # one kind of holistic aggregate: no CTE
    "SELECT list(id ORDER BY a), list(id ORDER BY b) FROM big",
    "SELECT sum(id) OVER (ORDER BY a), sum(id) OVER (ORDER BY b), sum(id) OVER (PARTITION BY c) FROM big",
    "SELECT count(*) FILTER (WHERE k = 1), arg_max(id, k ORDER BY id) FROM big",
    "SELECT range(20000) FROM small",  # a list made per row: no scan
    'SELECT * FROM "BIG"',  # names fold case as DuckDB folds them
    "SELECT * FROM memory.big",
    "SELECT * FROM memory.main.big",
    "SELECT * FROM main.big",
]

# Shapes that go to the plan (the parse cannot bound them)
HELD_TO_THE_PLAN = [
    "SELECT * FROM small, LATERAL (SELECT * FROM big) t",
    "SELECT * FROM small, unnest(range(1000000))",
    "SELECT * FROM generate_series(1, 1000000)",
    "SELECT * FROM small, (VALUES (1)) v(x)",
    "SELECT * FROM small WHERE id IN (SELECT id FROM big)",
    "SELECT * FROM small WHERE EXISTS (FROM big)",
    "SELECT * FROM small WHERE id = ANY([1, 2])",
    "SELECT list(DISTINCT k) FROM big",
    "SELECT string_agg(DISTINCT s) FROM big",
    "PIVOT small ON id IN (1, 2) USING count(*)",
    "UNPIVOT small ON id",
    "DESCRIBE big",
    "SUMMARIZE SELECT * FROM big",
    "SHOW TABLES",
    "SELECT * FROM (DESCRIBE big)",
    "SELECT * FROM duckdb_tables",  # a system view
    "SELECT * FROM information_schema.tables",
    "SELECT * FROM 'elsewhere.parquet'",  # a replacement scan of a file
    "SELECT * FROM big AT (VERSION => 1)",
    "SELECT * FROM temp.big",  # no such table: nothing known
    "EXPLAIN ANALYZE SELECT * FROM big",
    # a recursive CTE inside a set operation's branch, or an expression's subquery
    "SELECT 1 UNION ALL (WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT n FROM r)",
    "SELECT * FROM small LIMIT (SELECT count(*) FROM big)",
    "SELECT list_transform([1, 2], x -> (SELECT count(*) FROM big)) FROM small",
    "SELECT * FROM small ORDER BY (SELECT max(id) FROM big)",
]


def test_the_parse_bounds_joins_set_operations_samples_and_windows_no_less_than_the_plan(
    con: duckdb.DuckDBPyConnection,
) -> None:
    relations = Relations.of(con)
    for sql in HELD_BOUNDED:  # bounded no lower than the plan, or left to the plan (a window, a LIMIT)
        most = readable_rows(parse(con, sql), relations)
        planned = scanned_rows(con, sql, None)[0]
        assert most is None or most >= (planned or 0), (sql, most, planned)


def test_what_reads_through_anything_but_a_table_goes_to_the_plan(con: duckdb.DuckDBPyConnection) -> None:
    relations = Relations.of(con)
    for sql in HELD_TO_THE_PLAN:
        assert readable_rows(parse(con, sql), relations) is None, sql


def test_a_table_out_of_the_search_path_and_a_registered_object_are_never_counted_small(
    con: duckdb.DuckDBPyConnection,
) -> None:
    import pyarrow as pa

    con.execute("CREATE SCHEMA other")
    con.execute("CREATE TABLE other.big AS SELECT range AS id FROM range(500000)")  # same name, another schema
    con.register("small", pa.table({"id": list(range(1000))}))  # a Python object shadowing a table: a view
    relations = Relations.of(con)
    assert readable_rows(parse(con, "SELECT * FROM big"), relations) == 500_000  # the largest of that name
    assert readable_rows(parse(con, "SELECT * FROM other.big"), relations) == 500_000
    assert readable_rows(parse(con, "SELECT * FROM small"), relations) is None  # a view of that name: the plan
    # over the bound by the parse (500,000): the plan decides, which reads memory.main.big (300,000)
    assert _refusal(con, "SELECT * FROM big", 400_000, relations) is None
    said = _refusal(con, "SELECT * FROM other.big", 400_000, relations)
    assert said is not None and "500,000" in said["message"], said


def test_a_session_that_makes_a_name_larger_or_a_function_is_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _session(tmp_path, monkeypatch)
    assert _query(session, "CREATE TEMP TABLE t AS SELECT range AS id FROM range(10)", None) == "ran"
    assert _query(session, "SELECT sum(id) FROM t", 100_000) == "ran"
    assert session.relations is not None  # kept
    steps = [  # (what the session does, a statement whose parse was small before it)
        ("CREATE OR REPLACE TEMP TABLE t AS SELECT range AS id FROM range(200000)", "SELECT sum(id) FROM t"),
        ("DROP TABLE t", "SELECT 1"),
        ("CREATE TABLE memory.main.t AS SELECT range AS id FROM range(200000)", "SELECT sum(id) FROM memory.t"),
        ("CREATE SCHEMA memory.s", "SELECT 1"),
        ("CREATE TABLE memory.s.events AS SELECT range AS id FROM range(10)", "SELECT sum(id) FROM memory.s.events"),
        ("CREATE TEMP VIEW k AS SELECT * FROM range(1000000)", "SELECT sum(range) FROM k"),
        ("CREATE TEMP MACRO one() AS (SELECT count(*) FROM range(100000000000))", "SELECT one()"),
    ]
    expected = ["LARGE_SCAN", "ran", "LARGE_SCAN", "ran", "ran", "LARGE_SCAN", "LARGE_SCAN"]
    said = []
    for change, sql in steps:
        assert _query(session, change, None) == "ran", change  # confirmed (no bound)
        said.append(_query(session, sql, 100_000))
    # memory.s.events: its own 10 rows (wh.main.events, 300,000, is another catalog's)
    assert said == expected, list(zip([s for _, s in steps], said, strict=True))


def test_a_kept_parquet_view_whose_file_is_rewritten_in_place_is_counted_by_its_new_footer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _session(tmp_path, monkeypatch)

    def parquet(rows: int) -> bytes:
        made = tmp_path / f"made{rows}.parquet"
        duckdb.execute(f"COPY (SELECT range AS id FROM range({rows})) TO '{made}' (FORMAT parquet)")
        data = made.read_bytes()
        made.unlink()
        return data

    # the upload, as the worker sees it: a descriptor whose path is not in its root (here: unlinked), which the
    # server opens anew for each call
    path = tmp_path / "sales.parquet"
    upload = os.open(path, os.O_RDWR | os.O_CREAT)
    os.write(upload, parquet(1000))
    path.unlink()
    opened = [upload]

    def named() -> list[tuple[dict[str, Any], int]]:
        fd = os.open(f"/proc/self/fd/{upload}", os.O_RDONLY)
        opened.append(fd)
        spec = {"name": "sales.parquet", "suffix": ".parquet", "size": os.fstat(fd).st_size, "kind": "upload"}
        return [({**spec, "ref_id": None, "table": False}, fd)]

    sql = 'SELECT sum(id) FROM "sales.parquet"'
    try:
        assert _query(session, sql, 100_000, named()) == "ran"
        assert session.kept["sales.parquet"].rows == 1000
        relations = session.relations
        assert _query(session, sql, 100_000, named()) == "ran"
        assert session.relations is relations  # the same file: its view and the catalog kept
        os.ftruncate(upload, 0)  # rewritten in place: the same file (inode), another size and time
        os.pwrite(upload, parquet(200_000), 0)
        assert _query(session, sql, 100_000, named()) == "LARGE_SCAN"
        assert session.kept["sales.parquet"].rows == 200_000
        # the kept view read by another spelling of its name: not the call's file, so its slot is closed
        with pytest.raises(duckdb.Error):
            _query(session, 'SELECT sum(id) FROM "SALES.PARQUET"', 100_000)
    finally:
        session._forget_kept()
        for fd in opened:
            os.close(fd)


def _uploaded(tmp_path: Path, rows: int) -> int:
    """A Parquet file of ``rows`` ids, open as the worker sees an upload: its path not in the worker's root."""
    made = tmp_path / f"made{rows}.parquet"
    duckdb.execute(f"COPY (SELECT range AS id FROM range({rows})) TO '{made}' (FORMAT parquet)")
    fd = os.open(made, os.O_RDONLY)
    made.unlink()
    return fd


def _named(uploads: dict[str, int], opened: list[int], *names: str) -> list[tuple[dict[str, Any], int]]:
    """The call's files as the server hands them to the worker: each upload named, a descriptor of its own."""
    out = []
    for name in names:
        fd = os.open(f"/proc/self/fd/{uploads[name]}", os.O_RDONLY)
        opened.append(fd)
        spec = {"name": name, "suffix": ".parquet", "size": os.fstat(fd).st_size, "kind": "upload"}
        out.append(({**spec, "ref_id": name if name.startswith("upload_") else None, "table": False}, fd))
    return out


def test_a_kept_parquet_views_name_replaced_by_the_session_is_not_counted_by_the_files_footer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ba_mcp.inside.sql import analyse

    session = _session(tmp_path, monkeypatch)
    uploads = {"upload_x": _uploaded(tmp_path, 1000)}
    opened = list(uploads.values())

    def named() -> list[tuple[dict[str, Any], int]]:
        return _named(uploads, opened, "upload_x")

    replace = (
        'CREATE OR REPLACE TEMP VIEW upload_x("as select * from upload_x where 1 or ") AS '
        'SELECT range FROM range(100000000) -- "'
    )
    analysis = analyse(session.con, replace)
    if analysis["refs"] != ["upload_x"]:  # the server then opens the upload for the call, as the statement names it
        raise Premise(f"analyse no longer names the upload in the CREATE: {analysis}")
    sql = "SELECT max(COLUMNS(*)) FROM upload_x"
    try:
        assert _query(session, sql, 100_000, named()) == "ran"  # the upload's view, kept: 1,000 rows
        assert _query(session, replace, 100_000, named()) == "ran"  # a view: reads nothing as it is made
        planned, _ = scanned_rows(session.con, sql, None)
        if planned is None or planned <= 100_000:
            raise Premise(f"DuckDB's plan reads {planned} rows of the replaced view")
        assert _query(session, sql, 100_000, named()) == "LARGE_SCAN"
    finally:
        session._forget_kept()
        for fd in opened:
            os.close(fd)


def test_two_files_whose_names_differ_in_case_are_never_read_as_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB's names ignore case: 'Sales.parquet' and 'sales.parquet' are one view. Both were kept, each counted by
    its own footer while the one view read the file registered last (a wrong count and wrong rows). Now naming one
    lets go of the other's view, and a statement naming both is refused."""
    session = _session(tmp_path, monkeypatch)
    uploads = {"sales.parquet": _uploaded(tmp_path, 1000), "Sales.parquet": _uploaded(tmp_path, 200_000)}
    opened = list(uploads.values())

    def named(*names: str) -> list[tuple[dict[str, Any], int]]:
        return _named(uploads, opened, *names)

    try:
        assert _query(session, 'SELECT max(id) FROM "sales.parquet"', 100_000, named("sales.parquet")) == "ran"
        assert session.kept["sales.parquet"].rows == 1000
        big = 'SELECT sum(id) FROM "Sales.parquet"'
        assert _query(session, big, 100_000, named("Sales.parquet")) == "LARGE_SCAN"  # its own footer: 200,000
        assert "sales.parquet" not in session.kept and session.kept["Sales.parquet"].rows == 200_000
        both = 'SELECT max(id) FROM "Sales.parquet" UNION ALL SELECT max(id) FROM "sales.parquet"'
        assert _query(session, both, None, named("Sales.parquet", "sales.parquet")) == "AMBIGUOUS_FILE_NAME"
    finally:
        session._forget_kept()
        for fd in opened:
            os.close(fd)
