"""Spark through Spark Connect (``sc://``; ``adbc_driver_spark``): the query runs in the cluster, in Spark SQL.

**Spark has no read-only setting**, so ba-mcp ships one in the engine: ``ReadOnlyRule.java`` (beside this file), a
``spark.sql.extensions`` class with a check rule — an allow-list of read plan nodes plus SHOW / DESCRIBE / EXPLAIN,
no UDF or reflection anywhere, no table read from a file path — and a parser wrapper refusing EXECUTE IMMEDIATE and
scripting. At connect the worker probes for it with statements that change nothing (an older rule let the second
through) and refuses an endpoint without it (``UNGUARDED_SPARK``) unless ``allow_unguarded_writes``. ADBC's
cancel stops only the client, so each connection works in a Spark session of its own choosing, interrupted in the
cluster at a timeout by a Spark Connect client attached to it. Spark's SQLSTATE is read from its message text.

The local server: ``rule_jar()`` builds the rule with the JDK's ``javac`` and ``jar`` against the installed
pyspark's jars, once per source version, into the user cache folder; ``server_command()`` is the
``start-connect-server.sh`` command line that loads it; ``local()`` runs such a server on loopback (``ba-mcp
spark-local`` — the command this engine adds — and the tests).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ba_mcp.databases.base import ColumnInfo, Tables
from ba_mcp.databases.connector import Bound, ConnectedEngine, Held, driver_location, rows
from ba_mcp.errors import Code, ToolFailure, denied
from ba_mcp.workers.messages import Connect, Opened

RULE_CLASS = "ba_mcp.spark.ReadOnlyRule"  # the Java package (a cluster's spark.sql.extensions names it)
SOURCE = Path(__file__).with_name("ReadOnlyRule.java")
_REFUSED = "BA_MCP_READ_ONLY"  # how the rule's refusals start


class SparkEngine(ConnectedEngine):
    kind = "spark"

    # -- the server's side ------------------------------------------------------------------------------

    def message(self, exc: Any) -> str:
        raw = exc.message or exc.detail
        if "[Spark]" not in raw:
            return super().message(exc)
        # INTERNAL: [Spark] [ERROR_CLASS] text SQLSTATE: 42P01; … Vendor code: 13
        text = re.sub(r"^.*?\[Spark\]\s*", "", raw, flags=re.S)
        text = re.sub(r"\s*Vendor code: \d+\s*$", "", text)
        return re.sub(r"\s*SQLSTATE: \w+;?.*$", "", text, flags=re.S).strip()[:600]

    def failure(self, text: str, sqlstate: str) -> ToolFailure | None:
        if _REFUSED in text:  # the rule's refusal
            return denied(
                text.replace(f"{_REFUSED}: ", ""),
                "use SELECT (SHOW, DESCRIBE and EXPLAIN run too); results over max_rows are kept as artifacts",
                code=Code.READ_ONLY,
            )
        return None

    def add_commands(self, sub: Any, common: Any) -> None:
        p = sub.add_parser("spark-local", help="run a local Spark Connect server with the read-only rule (spark extra)")
        p.add_argument("--port", type=int, default=15002, help="the loopback port (default 15002)")
        p.add_argument("--dir", type=Path, default=Path("spark-local"), help="its metastore and warehouse folder")
        p.add_argument("--unguarded", action="store_true", help="without the rule, to create the tables it will serve")
        p.add_argument("--print-flags", action="store_true", help="print the command line for a cluster, then exit")
        p.set_defaults(func=serve_locally)

    # -- the connection worker's side -------------------------------------------------------------------

    def open(self, c: Held, request: Connect) -> Opened:
        import uuid

        import adbc_driver_manager.dbapi as dbapi

        # a Spark session of our own choosing: at a timeout its operations are interrupted in the cluster
        c.extra["spark_session"] = str(uuid.uuid4())
        c.extra["spark_uri"] = request.uri
        kwargs = {
            "uri": request.uri,
            "adbc.spark.session_id": c.extra["spark_session"],
            **(request.options or {}),
        }
        c.con = dbapi.connect(driver=driver_location(request.driver), db_kwargs=kwargs, autocommit=True)
        c.cur = c.con.cursor()
        reply = guard(c.cur, request.allow_unguarded_writes)
        self._attach_interrupter(c)
        return reply

    def _attach_interrupter(self, c: Held) -> None:
        """A Spark Connect client attached to our session, made in advance (its import takes a while), to
        interrupt the session's operations in the cluster at a timeout."""
        import threading

        def attach() -> None:
            try:
                from pyspark.sql.connect.client import SparkConnectClient

                uri, session = c.extra["spark_uri"].rstrip("/"), c.extra["spark_session"]
                separator = "" if uri.count("/") > 2 else "/"
                c.extra["spark_client"] = SparkConnectClient(f"{uri}{separator};session_id={session}")
            except Exception as exc:  # reported when an interrupt is needed
                c.extra["spark_client"] = exc

        c.extra["spark_client"] = None
        threading.Thread(target=attach, name="spark-client", daemon=True).start()

    def interrupt(self, c: Held) -> None:
        deadline = time.monotonic() + 10  # ADBC's cancel stops only this client: the job would run on
        while c.extra.get("spark_client", None) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        client = c.extra.get("spark_client", None)
        if client is not None and not isinstance(client, Exception):
            client.interrupt_all()
        c.cur.adbc_cancel()

    def vet(self, c: Held, sql: str, params: Bound, timeout_s: float) -> None:
        """A query whose scans Spark expects to read more rows than the call's bound (tools.query_database.
        confirm_scan_rows) is refused with Spark's figure (``LARGE_SCAN``); sent again it runs. The figure is Spark's
        own (``EXPLAIN COST``, nothing runs): the ``rowCount`` of each relation its optimized plan reads — which
        Spark gives for ``range()`` and, with its cost-based optimizer on, for tables whose statistics it holds
        (``ANALYZE TABLE … COMPUTE STATISTICS``). A plan without one is not asked: no refusal without a figure."""
        bound = c.extra.get("scan_bound")
        if not bound or not re.match(r"\s*(\(\s*)*(select|with|from|values|table)\b", sql, re.I):
            return
        explain = c.extra.get("explain") or c.con.cursor()
        c.extra["explain"] = explain
        try:
            explain.execute("EXPLAIN COST " + sql, params)
            row = explain.fetchone()
        except Exception:  # the statement's own error follows when it runs
            return
        if row is None:
            return
        plan = str(row[0])
        scanned, relations = planned_rows(plan)
        if scanned is None or scanned <= int(bound):
            return
        from ba_mcp.workers.wire import large_scan

        raise large_scan(
            "Spark", scanned, relations, int(bound), hint="filter on a partition column, aggregate fewer rows"
        )

    def catalog(self, c: Held, schemas: list[str]) -> Tables:
        """Spark's catalog through SHOW and DESCRIBE (what the read-only rule lets through; nothing is scanned, so
        no row counts): the namespaces asked for (else every one), their tables and views, columns and comments."""
        out: Tables = {}
        namespaces = schemas or [str(r[0]) for r in rows(c.cur, "SHOW NAMESPACES")]
        for namespace in namespaces:
            quoted = "`" + namespace.replace("`", "``") + "`"
            for row in rows(c.cur, f"SHOW TABLES IN {quoted}"):
                name, temporary = str(row[1]), bool(row[2]) if len(row) > 2 else False
                if temporary:
                    continue
                table = f"{quoted}.`{name.replace('`', '``')}`"
                columns: list[ColumnInfo] = []
                kind, comment, section = "table", "", "columns"
                for col_name, data_type, col_comment in rows(c.cur, f"DESCRIBE TABLE EXTENDED {table}"):
                    if not col_name or str(col_name).startswith("#"):  # the columns end; other sections follow
                        if section == "columns" or str(col_name).startswith("# "):
                            section = "detail" if str(col_name).startswith("# Detailed") else "other"
                        continue
                    if section == "detail":
                        if col_name == "Type" and str(data_type).upper() == "VIEW":
                            kind = "view"
                        elif col_name == "Comment":
                            comment = str(data_type)
                        continue
                    if section != "columns":
                        continue
                    entry = ColumnInfo(name=str(col_name), type=str(data_type), nullable=True)
                    if col_comment:
                        entry["comment"] = str(col_comment)
                    columns.append(entry)
                qualified = name if namespace == "default" else f"{namespace}.{name}"
                out[qualified] = {
                    "kind": kind,
                    "rows": None,
                    "rows_estimated": True,
                    "comment": comment,
                    "definition": "",
                    "columns": columns,
                }
        return out


_STATISTICS = re.compile(r"Statistics\(([^)]*)\)")
_ROW_COUNT = re.compile(r"rowCount=([0-9.]+(?:E[+-]?[0-9]+)?)", re.I)


def planned_rows(plan: str) -> tuple[int | None, list[str]]:
    """The rows the leaves of an ``EXPLAIN COST`` optimized logical plan read, by Spark's ``rowCount`` (the relations
    named with their figures, largest first); ``None`` when no leaf has one (Spark gave only sizes)."""
    logical = plan.split("== Physical Plan ==", 1)[0].splitlines()
    lines = [line for line in logical[1:] if line.strip()]
    depth = [len(line) - len(line.lstrip(" :+-|")) for line in lines]
    found: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        if i + 1 < len(lines) and depth[i + 1] > depth[i]:
            continue  # a node with children: not a leaf
        node = line.lstrip(" :+-|")
        count = _ROW_COUNT.search(next(iter(_STATISTICS.findall(node)), ""))
        if count is None or node.startswith("OneRowRelation"):
            continue
        name = re.sub(r"[\[,(].*$", "", re.sub(r"^(Relation|HiveTableRelation)\s+", "", node)).strip()
        found.append((int(float(count.group(1))), name))
    if not found:
        return None, []
    found.sort(reverse=True)
    return sum(n for n, _ in found), [f"{name} ≈{n:,} rows" for n, name in found]


def guard(cur: Any, allow_unguarded: bool) -> Opened:
    """The server's version, and whether ba-mcp's read-only rule — this version of it, the allow-list of read plan
    nodes — is active: probed with statements the rule refuses and that change nothing where they run (dropping a
    table that does not exist; EXECUTE IMMEDIATE of a SELECT, which an older rule let through)."""
    import uuid

    from ba_mcp.workers.wire import Failure

    cur.execute("SELECT split(version(), ' ')[0] AS v")
    version = str(cur.fetchone()[0])
    guarded = True
    for probe in (f"DROP TABLE IF EXISTS ba_mcp_probe_{uuid.uuid4().hex}", "EXECUTE IMMEDIATE 'SELECT 1'"):
        try:
            cur.execute(probe)
            if cur.description:
                cur.fetchall()
            guarded = False
        except Exception as exc:
            if _REFUSED not in str(exc):
                raise
    if not guarded and not allow_unguarded:
        raise Failure(
            type="permission_denied",
            code="UNGUARDED_SPARK",
            message="this Spark Connect server runs without ba-mcp's read-only rule (or with an older version of it): "
            "Spark has no read-only setting, so a statement could write (tables, files, jars) or run programs",
            hint="start it with the rule (docs/databases.md: Beyond one machine — `ba-mcp spark-local` or the flags it "
            "prints), "
            "or set allow_unguarded_writes: true for this database if you accept that",
        )
    detail = (
        "ba-mcp's read-only rule is active"
        if guarded
        else "WITHOUT ba-mcp's read-only rule (allow_unguarded_writes: true): any statement can write"
    )
    return {"version": version, "guarded": guarded, "detail": detail}


# -- a local Spark Connect server with the rule -------------------------------------------------------------


class SparkUnavailable(RuntimeError):
    """What is missing to build the rule or run a local Spark Connect (the message says what to install)."""


def spark_home() -> Path:
    """The installed pyspark's folder: its jars and ``sbin/start-connect-server.sh``."""
    try:
        import pyspark
    except ImportError:
        raise SparkUnavailable("pyspark is not installed: uv sync --extra spark") from None
    home = Path(pyspark.__file__).parent
    if not (home / "sbin" / "start-connect-server.sh").is_file():
        raise SparkUnavailable(f"{home} has no sbin/start-connect-server.sh (pyspark 4.x from PyPI has it)")
    return home


def rule_jar(cache: Path | None = None) -> Path:
    """The rule's jar, built when its source changed (``javac`` and ``jar`` of a JDK 17)."""
    from platformdirs import user_cache_dir

    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:12]
    folder = cache or Path(user_cache_dir("ba-mcp")) / "spark"
    jar = folder / f"ba-mcp-spark-readonly-{digest}.jar"
    if jar.is_file():
        return jar
    javac, jar_tool = shutil.which("javac"), shutil.which("jar")
    if not javac or not jar_tool:
        raise SparkUnavailable(
            "a JDK (javac, jar) is needed to build the read-only rule: apt-get install openjdk-17-jdk"
        )
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as build:
        classpath = str(spark_home() / "jars" / "*")
        done = subprocess.run(
            [javac, "-nowarn", "-source", "17", "-target", "17", "-cp", classpath, "-d", build, str(SOURCE)],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise SparkUnavailable(f"the read-only rule did not compile: {done.stderr[-1200:]}")
        partial = folder / f".{jar.name}.{os.getpid()}"
        subprocess.run([jar_tool, "cf", str(partial), "-C", build, "ba_mcp"], check=True, capture_output=True)
        os.replace(partial, jar)
    return jar


def server_command(port: int, workdir: Path, guarded: bool = True, host: str = "127.0.0.1") -> list[str]:
    """``start-connect-server.sh`` in the foreground on ``host:port`` with the read-only rule (unless not
    ``guarded``), a Hive metastore and warehouse in ``workdir``, no web UI, SQL scripting off."""
    home = spark_home()
    command = [
        str(home / "sbin" / "start-connect-server.sh"),
        "--wait",
        "--master",
        "local[2]",
        "--conf",
        f"spark.connect.grpc.binding.address={host}",
        "--conf",
        f"spark.connect.grpc.binding.port={port}",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.scripting.enabled=false",
        "--conf",
        "spark.sql.catalogImplementation=hive",
        "--conf",
        f"spark.sql.warehouse.dir={workdir / 'warehouse'}",
        "--conf",
        f"spark.hadoop.javax.jdo.option.ConnectionURL=jdbc:derby:;databaseName={workdir / 'metastore_db'};create=true",
        "--driver-java-options",
        f"-Dderby.system.home={workdir}",
    ]
    if guarded:
        command += ["--jars", str(rule_jar()), "--conf", f"spark.sql.extensions={RULE_CLASS}"]
    return command


@dataclass
class LocalSpark:
    port: int
    workdir: Path
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"


@contextlib.contextmanager
def local(
    workdir: Path, port: int = 0, guarded: bool = True, start_timeout_s: float = 120, log: Path | None = None
) -> Iterator[LocalSpark]:
    """A Spark Connect server on 127.0.0.1 (``port`` 0: a free one) until the block ends; its metastore and
    warehouse live in ``workdir`` (so a later server on the same folder sees the same tables)."""
    if not port:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
    workdir.mkdir(parents=True, exist_ok=True)
    home = spark_home()
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_PID_DIR": str(workdir),
        "SPARK_LOG_DIR": str(workdir),
        "SPARK_NO_DAEMONIZE": "1",
    }
    out = open(log or workdir / "spark.log", "ab")  # noqa: SIM115 - kept for the server's life
    process = subprocess.Popen(
        server_command(port, workdir, guarded),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=workdir,
        # the kernel's death signal follows the starting thread: asked for only from the main thread
        preexec_fn=_end_with_parent if threading.current_thread() is threading.main_thread() else None,
    )
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SparkUnavailable(
                        f"Spark Connect did not start: {(workdir / 'spark.log').read_text(errors='replace')[-1500:]}"
                    ) from None
                time.sleep(0.2)
        yield LocalSpark(port, workdir, process)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        out.close()


def _end_with_parent() -> None:
    """In the server's process before it runs: it is sent SIGTERM when the process that started it dies, however
    that one ends (even SIGKILL)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class _Stopped(Exception):
    pass


def _stop(signum: int, frame: Any) -> None:
    raise _Stopped(signum)


def serve_locally(args: argparse.Namespace) -> int:
    """``ba-mcp spark-local``: a Spark Connect server on 127.0.0.1 with ba-mcp's read-only rule, until Ctrl-C,
    SIGTERM or SIGHUP — each ends the server too (a shell's background job ignores SIGINT unless it is asked for:
    it is)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop)
    try:
        if args.print_flags:
            sys.stdout.write(" ".join(server_command(args.port or 15002, args.dir.expanduser().absolute())) + "\n")
            return 0
        with local(args.dir.expanduser().absolute(), port=args.port, guarded=not args.unguarded) as server:
            rule = "without the read-only rule (setting up tables)" if args.unguarded else "with the read-only rule"
            sys.stdout.write(
                f"Spark Connect {rule} at {server.url}; tables and metastore in {args.dir}. Ctrl-C stops it.\n"
                f'Point ba-mcp at it: databases: {{lake: {{url: "{server.url}", driver: adbc_driver_spark}}}}\n'
            )
            sys.stdout.flush()
            try:
                server.process.wait()
            except (KeyboardInterrupt, _Stopped):
                pass
    except _Stopped:
        return 0
    except SparkUnavailable as exc:
        sys.stderr.write(f"ba-mcp spark-local: {exc}\n")
        return 2
    return 0


ENGINE = SparkEngine()
