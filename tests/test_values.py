"""Issue 63, item 4: values as the database shows them — intervals, float4/float8 at ``full``, a timestamp with time
zone on a session that is not in UTC, dates — against each engine's own client: psql for PostgreSQL, DuckDB's
Python API, Python's sqlite3.

The one rule (``ba_mcp/values.py``, docs/databases.md): an interval as PostgreSQL writes it; a float by its shortest
round-trip form (a float4 by its own); a timestamp with time zone in the session's zone, written ISO 8601 with its
offset (psql writes ``2026-08-01 00:00:00+02`` for our ``2026-08-01T00:00:00+02:00``: ``_as_psql`` is that one
difference, and nothing else is mapped); a date as a date.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import re
import sqlite3
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from mcp import ClientSession, stdio_client

from ba_mcp.pipeline.encode import ENCODINGS, encode_table, plain_rows
from ba_mcp.values import duration_text, interval_text, shortest_real
from tests import pg_server
from tests.conftest import make_workspace, stdio_params, text_of

ARTIFACT = re.compile(r"artifact_[0-9a-f]{12}")
DATABASE = "shown_values"  # made on the run's PostgreSQL, its sessions in Europe/Berlin
DUCKDB_ZONE = "America/New_York"  # the server's own zone, so DuckDB's sessions run in neither UTC nor Berlin

# each column once per kind of value the issue names; the same text goes to psql
PG_SQL = (
    "SELECT DATE_TRUNC('month', date '2026-08-15') AS month_start, "
    "timestamptz '2026-01-15 12:30:00+00' AS winter, "
    "date '2026-08-15' AS day, "
    "interval '1462 days 14:45:00' AS took, "
    "interval '1 year 2 months 3 days 4:05:06.5' AS mixed, "
    "interval '-1 days -02:00' AS back, "
    "interval '36 hours' AS hours, "
    "interval '-14 months +3 days' AS signs, "
    "interval '0' AS nothing, "
    "real '4.7' AS r, "
    "real '123456.789' AS r2, "
    "double precision '0.1' + double precision '0.2' AS d, "
    "double precision '1.7976931348623157e308' AS d2, "
    "double precision '43974.710000000014' AS d3, "
    "timetz '12:34:56.5+02' AS tz, "
    "timetz '01:02:03-03:30' AS tz2, "
    "time '12:34:56' AS clock, "  # a look-alike that was right before: unchanged
    "double precision 'NaN' AS nan, "
    "double precision 'Infinity' AS inf, "
    "real '-Infinity' AS ninf, "
    "CAST(NULL AS double precision) AS missing"  # a NULL stays NULL beside the NaN
)


def _as_psql(ours: str) -> str:
    """Our ISO 8601 timestamptz as psql writes it: a space for the ``T``, the offset's ``:00`` minutes dropped."""
    return re.sub(r"([+-]\d\d):00$", r"\1", ours.replace("T", " ", 1))


def _csv_rows(text: str, header: str) -> list[dict[str, str]]:
    """The CSV rows of a full-level observation (after its ``Rows (csv):`` line)."""
    body = text.split("Rows (csv):\n", 1)[1]
    lines = body.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return list(csv.DictReader(io.StringIO("\n".join(lines[start:end]))))


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = make_workspace(tmp_path_factory.mktemp("values"))
    lite = ws / "data" / "values.db"
    lite.parent.mkdir(exist_ok=True)
    con = sqlite3.connect(lite)
    con.executescript(
        "CREATE TABLE m (d REAL, day TEXT, at TEXT); "
        "INSERT INTO m VALUES (0.1 + 0.2, '2026-08-15', '2026-08-01 00:00:00+02'), (43974.710000000014, NULL, NULL), "
        "(4.7, '2026-08-16', NULL);"
    )
    con.commit()
    con.close()
    return ws


@pytest.fixture(scope="module")
def pg() -> pg_server.Postgres:
    server = pg_server.running()
    if not server.sql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'", database="postgres"):
        server.sql(
            f"CREATE DATABASE {DATABASE} OWNER owner",
            f"ALTER DATABASE {DATABASE} SET TimeZone = 'Europe/Berlin'",
            database="postgres",
        )
    return server


@pytest.fixture(scope="module")
async def client(ws: Path, pg: pg_server.Postgres) -> AsyncIterator[ClientSession]:
    env = {
        "BA_MCP_DATABASES__BERLIN__URL": pg.url("analyst", DATABASE),
        "BA_MCP_DATABASES__LITE__URL": "sqlite:///data/values.db",
        "BA_MCP_TOOLS__QUERY_DATABASE__TIMEOUT_S": "120",
        "TZ": DUCKDB_ZONE,  # the server's local zone: DuckDB's sessions run in it (PostgreSQL's are its own)
    }
    with open("/dev/null", "w") as errlog:
        async with (
            stdio_client(stdio_params(ws, **env), errlog=errlog) as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            yield s


async def _full(s: ClientSession, **args: Any) -> str:
    result = await s.call_tool("query_database", {"output_level": "full", **args})
    text = text_of(result)
    assert not result.is_error, text
    return text


def _psql(pg: pg_server.Postgres, sql: str) -> dict[str, str]:
    """psql's own text of one row (unaligned, with its header), as the analyst's role."""
    out = subprocess.run(
        ["psql", pg.url("analyst", DATABASE), "-X", "-A", "-F", "\t", "-P", "footer=off", "-c", sql],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return dict(zip(out[0].split("\t"), out[1].split("\t"), strict=True))


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.skipif(not pg_server.available(), reason="PostgreSQL binaries (initdb, pg_ctl) are not installed")
async def test_postgresql_values_read_as_psql_writes_them(client: ClientSession, pg: pg_server.Postgres) -> None:
    psql = _psql(pg, PG_SQL)
    assert psql["month_start"] == "2026-08-01 00:00:00+02"  # the session is in Berlin: psql's own answer
    text = await _full(client, database="berlin", query=PG_SQL)
    assert "took: interval" in text and "r: float32" in text and "d: float64" in text, text  # the types named
    ours = _csv_rows(text, "month_start,")[0]
    assert set(ours) == set(psql)
    for name in ("month_start", "winter"):  # in the session's zone, its offset shown
        assert _as_psql(ours[name]) == psql[name], (name, ours[name], psql[name])
        assert dt.datetime.fromisoformat(ours[name]) == dt.datetime.fromisoformat(psql[name])
    same = ("day", "took", "mixed", "back", "hours", "signs", "nothing", "r", "r2", "d", "d2", "d3")
    for name in (*same, "tz", "tz2", "clock", "nan", "inf", "ninf"):
        assert ours[name] == psql[name], (name, ours[name], psql[name])  # character for character
    assert (ours["tz"], ours["nan"], ours["ninf"]) == ("12:34:56.5+02", "NaN", "-Infinity")
    assert ours["missing"] == "NULL" and psql["missing"] == ""  # psql's unaligned NULL is empty; a NaN is no NULL
    # a NaN is no NULL at the preview level either (rounded numbers)
    preview = await client.call_tool(
        "query_database", {"database": "berlin", "query": PG_SQL, "output_level": "standard"}
    )
    assert not preview.is_error, text_of(preview)
    assert "NaN" in text_of(preview) and "-Infinity" in text_of(preview) and "12:34:56.5+02" in text_of(preview)
    # every encoding the model reads: the structured rows of the json encoding hold the same values
    # and a result cut at max_rows is stored (an interval cannot be Parquet as Arrow's triple) with them
    many = (
        "SELECT g AS n, interval '1 day 02:00' * g AS took, real '4.7' * g AS r, "
        "DATE_TRUNC('month', date '2026-08-15') + g * interval '1 month' AS month_start "
        "FROM generate_series(1, 40) g ORDER BY g"
    )
    text = await _full(client, database="berlin", query=many, max_rows=5)
    kept = ARTIFACT.search(text)
    assert kept, text
    stored = await _full(client, query=f"SELECT CAST(took AS VARCHAR) AS took, r, month_start FROM {kept.group(0)}")
    reference = subprocess.run(
        ["psql", pg.url("analyst", DATABASE), "-X", "-A", "-F", "\t", "-t", "-c", many],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    rows = _csv_rows(stored, "took,")
    assert len(rows) == len(reference) == 40
    for row, line in zip(rows, reference, strict=True):
        _, took, r, month_start = line.split("\t")
        assert row["took"] == took and row["r"] == r, (row, line)
        assert dt.datetime.fromisoformat(row["month_start"]) == dt.datetime.fromisoformat(month_start)


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.skipif(not pg_server.available(), reason="PostgreSQL binaries (initdb, pg_ctl) are not installed")
async def test_duckdb_values_read_as_duckdb_writes_them(client: ClientSession) -> None:
    import duckdb

    sql = (
        "SELECT TIMESTAMPTZ '2026-08-01 00:00:00+02' AS stamp, DATE '2026-08-15' AS day, "
        "INTERVAL '1462 days 14:45:00' AS took, INTERVAL '-1 days -02:00:00' AS back, "
        "INTERVAL '14 months 3 days 04:05:06.5' AS mixed, "
        "CAST(4.7 AS REAL) AS r, CAST(0.1 AS DOUBLE) + CAST(0.2 AS DOUBLE) AS d, "
        "CAST('NaN' AS DOUBLE) AS n, CAST('-inf' AS REAL) AS ninf, CAST(NULL AS DOUBLE) AS missing"
    )
    text = await _full(client, query=sql)
    assert "took: interval" in text and "r: float32" in text, text
    ours = _csv_rows(text, "stamp,")[0]
    con = duckdb.connect()
    con.execute(f"SET TimeZone = '{DUCKDB_ZONE}'")  # the zone the server's DuckDB runs in
    zone = con.execute("SELECT current_setting('TimeZone')").fetchall()[0][0]
    cast = ", ".join(f'CAST("{c}" AS VARCHAR)' for c in _columns(sql))
    texts = con.execute(f"SELECT {cast} FROM ({sql})").fetchall()[0]
    values = con.execute(sql).fetchall()[0]
    duck = dict(zip(_columns(sql), texts, strict=True))
    native = dict(zip(_columns(sql), values, strict=True))
    # DuckDB's own text for these; an interval's unit words as the one rule writes them (PostgreSQL's)
    for name in ("day", "r", "d"):
        assert ours[name] == duck[name], (name, ours[name], duck[name])
    for name in ("took", "back", "mixed"):
        assert ours[name] == _postgres_units(duck[name]), (name, ours[name], duck[name])
    assert float(ours["r"]) == shortest_real(native["r"]) and float(ours["d"]) == native["d"]
    # DuckDB writes nan and -inf; the one rule psql's words for the same values — and NULL stays NULL
    assert (ours["n"], ours["ninf"], ours["missing"]) == ("NaN", "-Infinity", "NULL"), ours
    assert math.isnan(native["n"]) and float(duck["ninf"]) == float(ours["ninf"]) == -math.inf
    assert native["missing"] is None
    # the session's zone, New York's summer offset shown
    stamp = dt.datetime.fromisoformat(ours["stamp"])
    assert stamp.utcoffset() == dt.timedelta(hours=-4), ours["stamp"]
    assert stamp == native["stamp"] and stamp.utcoffset() == native["stamp"].utcoffset(), (ours, native, zone)
    assert _as_psql(ours["stamp"]) == duck["stamp"]


def _postgres_units(duckdb_text: str) -> str:
    """DuckDB's interval text with PostgreSQL's unit words: ``mon``/``mons``, and the plural for any count but 1
    (DuckDB writes ``-1 day``, PostgreSQL ``-1 days``); its numbers and time as DuckDB wrote them."""

    def unit(m: re.Match[str]) -> str:
        word = {"year": "year", "month": "mon", "day": "day"}[m.group(2)]
        return f"{m.group(1)} {word}{'' if m.group(1) == '1' else 's'}"

    return re.sub(r"(-?\d+) (year|month|day)s?\b", unit, duckdb_text)


def _columns(sql: str) -> list[str]:
    return re.findall(r" AS (\w+)(?=,|$)", sql)


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.skipif(not pg_server.available(), reason="PostgreSQL binaries (initdb, pg_ctl) are not installed")
async def test_sqlite_values_read_as_sqlite3_reads_them(client: ClientSession, ws: Path) -> None:
    ours = _csv_rows(await _full(client, database="lite", query="SELECT d, day, at FROM m ORDER BY rowid"), "d,")
    con = sqlite3.connect(ws / "data" / "values.db")
    theirs = con.execute("SELECT d, day, at FROM m ORDER BY rowid").fetchall()
    con.close()
    assert len(ours) == len(theirs) == 3
    for row, (d, day, at) in zip(ours, theirs, strict=True):
        assert row["d"] == repr(d), (row, d)  # 0.30000000000000004, 43974.710000000014: never cut to 15 digits
        assert row["day"] == (day if day is not None else "NULL") and row["at"] == (at if at is not None else "NULL")


# -- the rule itself, in every encoding ---------------------------------------------------------------------------


def test_one_table_reads_the_same_in_every_encoding() -> None:
    from ba_mcp.values import shown_schema

    table = pa.table(
        {
            "took": pa.array([pa.MonthDayNano([0, 1462, 53_100_000_000_000]), None], pa.month_day_nano_interval()),
            "span": pa.array([dt.timedelta(days=-1, hours=22), dt.timedelta(microseconds=500)], pa.duration("us")),
            "r": pa.array([4.7, 123456.789], pa.float32()),
            "d": pa.array([0.1 + 0.2, 3.0], pa.float64()),
            "at": pa.array([dt.datetime(2026, 7, 31, 22, tzinfo=dt.UTC), None], pa.timestamp("us", "UTC")),
        }
    )
    schema, convert, named = shown_schema(table.schema, lambda b: b, "Europe/Berlin")
    assert named == {"took": "interval", "span": "interval", "r": "float32"}
    shown = pa.Table.from_batches([convert(b) for b in table.to_batches()], schema=schema)
    rows, _ = plain_rows(shown)
    took, span, r, d, at = rows[0]
    assert took == interval_text(0, 1462, 53_100_000_000_000) == "1462 days 14:45:00"
    assert span == duration_text(dt.timedelta(hours=-2)) == "-02:00:00"
    assert rows[1][1] == "00:00:00.0005"
    assert (r, rows[1][2]) == (4.7, 123456.79)  # float4's shortest forms, as psql prints real
    assert (d, rows[1][3]) == (0.30000000000000004, 3)
    assert at == "2026-08-01T00:00:00+02:00"
    # a table that never left an engine (a pandas result) reads the same: intervals, durations and float4 by the rule
    raw_rows, _ = plain_rows(table)
    assert [row[:4] for row in raw_rows] == [row[:4] for row in rows]
    for encoding in ENCODINGS:
        text = encode_table(shown, encoding)
        for shown_value in ("1462 days 14:45:00", "-02:00:00", "4.7", "123456.79", "0.30000000000000004", "+02:00"):
            assert shown_value in text, (encoding, shown_value, text)
        assert "4.699999" not in text and "0.3," not in text and "[0," not in text, (encoding, text)
    assert json.loads(encode_table(shown, "json"))[0]["d"] == 0.1 + 0.2


def test_a_nan_is_no_null_at_any_level_in_any_encoding(tmp_path: Path) -> None:
    nan, inf = float("nan"), float("inf")
    table = pa.table(
        {
            "d": pa.array([nan, None, inf, -inf, 0.1 + 0.2], pa.float64()),
            "r": pa.array([nan, None, -inf, inf, 4.7], pa.float32()),
        }
    )
    words = [["NaN", "NaN"], [None, None], ["Infinity", "-Infinity"], ["-Infinity", "Infinity"]]
    for round_floats in (False, True):  # full, and the previews' six significant digits
        rows, _ = plain_rows(table, round_floats=round_floats)
        assert rows[:4] == words, (round_floats, rows)
        assert rows[4] == ([0.3, 4.7] if round_floats else [0.30000000000000004, 4.7])
    for encoding in ENCODINGS:
        text = encode_table(table, encoding)
        assert "NaN" in text and "-Infinity" in text and "nan" not in text.replace("NaN", ""), (encoding, text)
    records = json.loads(encode_table(table, "json"))  # valid JSON: the words as strings, as PostgreSQL's to_json
    assert [r["d"] for r in records[:4]] == ["NaN", None, "Infinity", "-Infinity"]
    assert "NULL" in encode_table(table, "csv").splitlines()[2]  # the NULL row stays NULL
    from ba_mcp.views import json_table  # the view's rows (MCP Apps): the same words

    assert json_table(table)["rows"][:4] == [
        ["NaN", "NaN"],
        [None, None],
        ["Infinity", "-Infinity"],
        ["-Infinity", "Infinity"],
    ]
    from ba_mcp.exports import _excel_cell  # an Excel export: Excel has no NaN, so psql's words

    assert [_excel_cell(v) for v in (nan, inf, -inf, None, 1.5)] == ["NaN", "Infinity", "-Infinity", None, 1.5]
    # a column's summary counts its NaNs apart from its NULLs (in Python, with Arrow's kernels, and with DuckDB)
    import duckdb
    import pyarrow.parquet as pq

    from ba_mcp.inside.sql import parquet_stats
    from ba_mcp.pipeline.encode import _arrow_stats, _python_stats
    from ba_mcp.pipeline.observe import format_stats

    column = pa.chunked_array([[nan, None, 1.0, 3.0, nan]])
    for stats in (_python_stats(column), _arrow_stats(column)):
        assert (stats["count"], stats["nulls"], stats["nan"], stats["mean"]) == (2, 1, 2, 2.0), stats
    assert "1 nulls" in format_stats(_python_stats(column)) and "2 NaN" in format_stats(_python_stats(column))
    path = tmp_path / "nan.parquet"
    pq.write_table(pa.table({"d": column, "n": [1, 2, None, 4, 5]}), path)
    stored, _ = parquet_stats(duckdb.connect(), str(path))
    assert (stored["d"]["nulls"], stored["d"]["nan"], stored["n"]["nulls"]) == (1, 2, 1) and "nan" not in stored["n"]


def test_a_year_to_month_interval_reads_as_the_other_intervals() -> None:
    """Spark's YEAR TO MONTH arrives as Arrow's month interval, a type pyarrow holds but has no array class for (any
    look at the column raises): shown as every interval is (``interval_text``), in every encoding."""
    import ctypes

    from ba_mcp.values import _c_structs, shown_schema

    counts = pa.record_batch([pa.array([14, -3, None, 0], pa.int32()), pa.array([1, 2, 3, 4])], names=["ym", "n"])
    c_schema, c_array = _c_structs()
    schema, array = c_schema(), c_array()
    counts._export_to_c(ctypes.addressof(array), ctypes.addressof(schema))
    schema.children[0].contents.format = b"tiM"  # the format Spark's driver gives (interval, months)
    batch = pa.RecordBatch._import_from_c(ctypes.addressof(array), ctypes.addressof(schema))
    assert str(batch.schema.field("ym").type) == "month_interval"
    with pytest.raises(KeyError):
        batch.column(0)  # what crashed a query before
    shown, convert, named = shown_schema(batch.schema, lambda b: b)
    assert named == {"ym": "interval"} and shown.field("ym").type == pa.string()
    table = pa.Table.from_batches([convert(batch)], schema=shown)
    assert table.column("ym").to_pylist() == ["1 year 2 mons", "-3 mons", None, "00:00:00"]
    assert table.column("n").to_pylist() == [1, 2, 3, 4]  # the other columns as they were
    assert interval_text(14, 0, 0) == "1 year 2 mons"  # the one rule: PostgreSQL's words
    for encoding in ENCODINGS:
        assert "1 year 2 mons" in encode_table(table, encoding)


def test_timetz_text_is_psqls() -> None:
    from ba_mcp.values import timetz_text

    # PostgreSQL's binary timetz: microseconds since midnight, the offset in seconds WEST of Greenwich
    assert timetz_text(45_296_500_000, -7200) == "12:34:56.5+02"
    assert timetz_text(3_723_000_000, 12_600) == "01:02:03-03:30"
    assert timetz_text(0, 0) == "00:00:00+00"
    assert timetz_text(86_399_999_999, -20_710) == "23:59:59.999999+05:45:10"


def test_interval_text_is_postgresqls_encoding_of_each_part() -> None:
    # sign rules of EncodeInterval: a positive part after a negative one carries "+"; the time its own sign
    assert interval_text(-14, 3, 0) == "-1 years -2 mons +3 days"
    assert interval_text(0, -1, 7_200_000_000_000) == "-1 days +02:00:00"
    assert interval_text(1, 1, 0) == "1 mon 1 day"
    assert interval_text(0, 0, 0) == "00:00:00"
    assert interval_text(0, 0, 129_600_000_000_000) == "36:00:00"  # hours past a day stay hours


SPARK_SQL = (
    "SELECT date_trunc('MONTH', DATE'2026-08-15') AS month_start, DATE'2026-08-15' AS day, "
    "INTERVAL '1462 14:45:00' DAY TO SECOND AS took, CAST(4.7 AS FLOAT) AS r, "
    "CAST(0.1 AS DOUBLE) + CAST(0.2 AS DOUBLE) AS d, CAST(43974.710000000014 AS DOUBLE) AS d3, "
    "INTERVAL '1-2' YEAR TO MONTH AS ym, INTERVAL '-0-3' YEAR TO MONTH AS back, "
    "CAST('NaN' AS DOUBLE) AS nan, CAST('-Infinity' AS DOUBLE) AS ninf"
)


@pytest.fixture(scope="module")
def berlin_spark(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A guarded Spark Connect of this module's own whose sessions run in Europe/Berlin (its JVM's zone): the run's
    shared one is left in the machine's."""
    import os

    from ba_mcp.databases import spark
    from tests import spark_server

    why = spark_server.available()
    if why:
        pytest.fail(why)
    saved = os.environ.get("TZ")
    os.environ["TZ"] = "Europe/Berlin"  # read by the JVM spark.local starts (it copies this environment)
    try:
        server = spark.local(tmp_path_factory.mktemp("berlin-spark"), guarded=True, start_timeout_s=300)
        running = server.__enter__()
    finally:
        if saved is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = saved
    try:
        yield running
    finally:
        server.__exit__(None, None, None)


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.anyio
async def test_spark_values_read_as_spark_shows_them(berlin_spark: Any, tmp_path: Path) -> None:
    import time

    from tests import spark_server

    casts = ", ".join(f"CAST({c} AS STRING) AS {c}" for c in _columns(SPARK_SQL))
    texts = spark_server.sql(berlin_spark.url, f"SELECT {casts} FROM ({SPARK_SQL})")[0]
    zone = spark_server.sql(berlin_spark.url, "SELECT current_timezone()")[0][0]
    theirs = dict(zip(_columns(SPARK_SQL), texts, strict=True))
    assert zone == "Europe/Berlin" and theirs["month_start"] == "2026-08-01 00:00:00"  # Spark's own, in Berlin
    env = {
        "BA_MCP_DATABASES__LAKE__URL": berlin_spark.url,
        "BA_MCP_DATABASES__LAKE__DRIVER": "adbc_driver_spark",
        "BA_MCP_TOOLS__QUERY_DATABASE__TIMEOUT_S": "120",
        "BA_MCP_TOOLS__QUERY_DATABASE__CONFIRM_SCAN_ROWS": "1000000",
    }
    ws = make_workspace(tmp_path)
    with open("/dev/null", "w") as errlog:
        async with (
            stdio_client(stdio_params(ws, **env), errlog=errlog) as (read, write),
            ClientSession(read, write) as s,
        ):
            await s.initialize()
            deadline = time.monotonic() + 180
            while True:  # the server's first Spark session
                result = await s.call_tool(
                    "query_database", {"database": "lake", "query": SPARK_SQL, "output_level": "full"}
                )
                if not result.is_error or time.monotonic() > deadline:
                    break
            text = text_of(result)
            assert not result.is_error, text
            # a scan Spark expects past the bound (its EXPLAIN COST rowCount) is asked first, then runs
            big = {"database": "lake", "query": "SELECT count(*) AS n FROM range(5000000)", "output_level": "full"}
            asked = await s.call_tool("query_database", big)
            assert asked.is_error and "LARGE_SCAN" in text_of(asked), text_of(asked)
            assert "Spark expects this statement to read about 5,000,000 rows" in text_of(asked), text_of(asked)
            again = await s.call_tool("query_database", big)
            assert not again.is_error and "5000000" in text_of(again), text_of(again)
    ours = _csv_rows(text, "month_start,")[0]
    # Spark writes a session timestamp without its offset: ours is the same wall clock, with Berlin's offset
    stamp = dt.datetime.fromisoformat(ours["month_start"])
    assert stamp.replace(tzinfo=None) == dt.datetime.fromisoformat(theirs["month_start"]), (ours, theirs)
    assert stamp.utcoffset() == dt.timedelta(hours=2), ours
    for name in ("day", "r", "d", "d3", "nan", "ninf"):  # Spark writes NaN and -Infinity as psql does
        assert ours[name] == theirs[name], (name, ours[name], theirs[name])
    # YEAR TO MONTH (which crashed a query): Spark writes INTERVAL '1-2' YEAR TO MONTH, the one rule its months
    for name in ("ym", "back"):
        sign, years, months = re.fullmatch(r"INTERVAL '(-?)(\d+)-(\d+)' YEAR TO MONTH", theirs[name]).groups()  # type: ignore[union-attr]
        assert ours[name] == interval_text(int(f"{sign}{int(years) * 12 + int(months)}"), 0, 0), (ours, theirs)
    assert (ours["ym"], ours["back"]) == ("1 year 2 mons", "-3 mons")
    # Spark writes INTERVAL '1462 14:45:00' DAY TO SECOND; the one rule writes PostgreSQL's form of the same span
    days, clock = re.fullmatch(r"INTERVAL '(\d+) ([\d:.]+)' DAY TO SECOND", theirs["took"]).groups()  # type: ignore[union-attr]
    assert ours["took"] == f"{days} days {clock}", (ours["took"], theirs["took"])
