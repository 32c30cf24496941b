"""Spark Connect, read-only by a rule in the engine (Spark has no read-only setting).

``ReadOnlyRule.java`` (beside this file) is a check rule loaded through ``spark.sql.extensions``: every plan Spark
analyzes is refused when it holds a command other than SHOW / DESCRIBE / EXPLAIN, a write, EXECUTE IMMEDIATE,
reflect()/java_method(), or a table read from a file path. ``rule_jar()`` builds it with the JDK's ``javac`` and
``jar`` against the jars of the installed pyspark (the ``spark`` extra), once per source version, into the user
cache folder; ``server_command()`` is the ``start-connect-server.sh`` command line that loads it; ``local()``
runs such a server on loopback (``ba-mcp spark-local``, and the tests).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

RULE_CLASS = "ba_mcp.spark.ReadOnlyRule"
SOURCE = Path(__file__).with_name("ReadOnlyRule.java")


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
