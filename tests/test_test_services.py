"""The test run's own servers (tests/background.py): a killed run's PostgreSQL and Spark Connect are found and ended
by the next run, and a run's hold on the shared Spark lake keeps a second run out rather than breaking both."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import background, pg_server
from tests.conftest import ROOT


def test_a_leftover_process_on_a_lake_is_ended_and_others_are_not(tmp_path: Path) -> None:
    needle = f"databaseName={tmp_path / 'metastore_db'};"
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    leftover = subprocess.Popen([*sleeper, needle], start_new_session=True)  # a daemonized server of a killed run
    bystander = subprocess.Popen([*sleeper, f"databaseName={tmp_path / 'other'};"], start_new_session=True)
    try:
        assert background.end_processes(needle) == [leftover.pid]
        assert leftover.wait(timeout=30) is not None
        assert bystander.poll() is None  # another lake's server is not touched
    finally:
        for p in (leftover, bystander):
            p.kill()
            p.wait()


def test_a_lake_held_by_a_live_run_keeps_a_second_run_out(tmp_path: Path) -> None:
    lock = tmp_path / "lake.run.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"from tests import background; import sys, time\n"
            f"with background.exclusive({str(lock)!r}, 'lake'):\n    print('held', flush=True); time.sleep(600)",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(RuntimeError, match="held by another test run"), background.exclusive(lock, "lake", 0):
            pass
        holder.kill()  # a killed run: the kernel lets its lock go
        holder.wait()
        with background.exclusive(lock, "the lake", timeout_s=60):
            assert lock.read_text() == str(__import__("os").getpid())
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
@pytest.mark.skipif(not pg_server.available(), reason="PostgreSQL's initdb and pg_ctl are not installed")
def test_a_killed_runs_postgresql_is_ended_by_the_next_run() -> None:
    program = textwrap.dedent(
        """
        import time
        from tests import pg_server
        with pg_server.postgres() as pg:
            print(pg.port, pg.folder, flush=True)
            time.sleep(600)
        """
    )
    run = subprocess.Popen([sys.executable, "-c", program], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert run.stdout is not None
    port, folder = run.stdout.readline().split()
    run.kill()  # SIGKILL: its finally never runs, its server lives on
    run.wait()
    socket.create_connection(("127.0.0.1", int(port)), timeout=10).close()  # the leftover still serves
    assert Path(folder) in pg_server.end_leftovers()
    assert not Path(folder).exists()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", int(port)), timeout=10).close()
