"""Issue 65: the server's background compilation (``ba_mcp.bytecode``) compiles first what a worker imports as it
starts, read from the workers' own sources, and ends with its server however the server ends (killed: SIGKILL to
the server alone, whose group the compilation's session is not in)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from ba_mcp import bytecode
from ba_mcp.settings import SandboxSettings
from ba_mcp.tool import ToolContext
from ba_mcp.workers.pool import Handle, WorkerPool

ROOT = Path(__file__).resolve().parent.parent


def test_the_packages_a_worker_imports_at_start_are_read_from_the_workers_code() -> None:
    found = bytecode.worker_imports()
    assert {"numpy", "pandas"} <= set(found[:3]), found  # the Python sandbox's start (sandbox.worker.main)
    assert "pyarrow" in found, found  # the engine worker's start (ba_mcp.inside.main)
    assert found.index("scipy") > found.index("pandas"), found  # named later: the spare's preload of scipy.stats
    assert not {"ba_mcp", "sandbox", "os", "json"} & set(found), found  # neither the project's nor the stdlib's
    assert len(found) < 20, found  # what runs at start, not every import of every module (those come after)


def test_the_compilation_goes_the_workers_imports_then_the_project_then_their_packages_then_the_rest(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    done: list[Path] = []
    imported: list[str] = []
    # each folder's sources (one stands for them all), compiled in one batch in the folders' order
    monkeypatch.setattr(bytecode, "_sources", lambda folder: iter([str(folder / "__init__.py")]))
    monkeypatch.setattr(bytecode, "_compile_files", lambda files, _: done.extend(Path(f).parent for f in files))
    monkeypatch.setattr(bytecode, "_import_in_turn", lambda modules: imported.extend(modules) if not done else None)
    monkeypatch.setattr(bytecode, "_import_each", lambda modules, _: imported.extend(modules) if not done else None)
    monkeypatch.setattr(bytecode.os, "access", lambda *_: True)
    monkeypatch.setattr(bytecode, "fingerprint", lambda: "changed")
    # the run ends by writing its stamp: here, not in the environment's site-packages (a stamp of "changed" there
    # had every later start of this environment compile everything again — the test suite's own start, 25-40 s)
    monkeypatch.setattr(bytecode, "_stamp_dir", lambda: tmp_path)
    said: list[tuple[str, int]] = []
    bytecode._compile(1, say=lambda what: said.append((what, len(imported))))
    # first the modules a worker imports, each imported (compiled as a worker meets them), before any folder
    assert imported[:3] == bytecode.worker_modules()[:3] and "scipy.stats" in imported, imported
    # ... and the server told once those a worker imports before it serves are (a call may start a worker then),
    # and once the rest the workers import are (its spares start then: they preload scipy.stats, …)
    [(started, at_start), (imported_, everything)] = said
    assert (started, imported_) == (bytecode.STARTED, bytecode.IMPORTED) and everything == len(imported), said
    assert at_start == len(bytecode.start_modules()) and {"numpy", "pandas", "pyarrow"} <= set(imported[:at_start])
    assert "scipy.stats" not in imported[:at_start] and "scipy.stats" in imported, imported  # a preload: after
    assert "matplotlib.pyplot" in imported and "matplotlib" not in imported  # its package comes with it
    project = bytecode._package_dirs()
    sites = bytecode._site_dirs()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    assert done[: len(project)] == project, done
    first = done[len(project) : done.index(sites[0])]
    names = [p.name for p in first]
    assert names[:2] == bytecode.worker_imports()[:2] and "pandas" in names, names
    assert all(any(p.is_relative_to(s) for s in sites) for p in first), first
    assert done[-1] == stdlib, done
    assert (tmp_path / bytecode.STAMP).read_text(encoding="ascii") == "changed\n"  # the stamp, where it was sent


def test_the_start_imports_are_imported_in_one_process_in_their_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy is compiled once, by the process that imports pandas after it — not by two processes side by side."""
    runs: list[list[str]] = []
    monkeypatch.setattr(bytecode.subprocess, "run", lambda args, **_: runs.append(list(args)))
    bytecode._import_in_turn(["numpy", "pandas", "pyarrow"])
    [args] = runs
    assert args[-3:] == ["numpy", "pandas", "pyarrow"] and "-B" not in args  # it writes what it compiles


class _Pool(WorkerPool):
    """A pool whose workers are nothing: what is made, and in which order with what its start waits for."""

    kind = "test"

    def __init__(self, log: list[str], pid: int, first: Callable[[bool], None]) -> None:
        super().__init__(SandboxSettings(spare_workers=1, max_workers=4), first=first)
        self.log, self.pid = log, pid

    def _make(self, spare: bool) -> Handle:
        self.log.append("spare made" if spare else "worker made")
        process = SimpleNamespace(pid=self.pid, alive=lambda: True, kill=lambda: None, rss_mb=lambda: 0.0)
        return Handle(process)  # type: ignore[arg-type]

    def _ready(self, handle: Handle) -> Handle:
        return handle


def test_a_spare_starts_after_the_compilations_first_phase_and_a_call_meanwhile_waits_for_it_raised(
    sleeper: subprocess.Popen[bytes],
) -> None:
    """A new install: the spare waits for what the workers import to be compiled (at its low priority); a call that
    comes meanwhile starts its worker after the same phase, asking for it urgently — not from the sources beside it."""
    log: list[str] = []
    phase = threading.Event()

    def first(urgent: bool) -> None:
        log.append(f"first urgent={urgent}")
        assert phase.wait(30)

    pool = _Pool(log, sleeper.pid, first)  # the workers' priority is set on a process of the test's own
    spare = threading.Thread(target=pool.prestart)
    spare.start()
    got: list[tuple[Handle, bool]] = []
    call = threading.Thread(target=lambda: got.append(pool.acquire("s", 5, ToolContext(session="s", timeout=5))))
    deadline = time.monotonic() + 30
    while log != ["first urgent=False"]:
        assert time.monotonic() < deadline, log
        time.sleep(0.01)
    call.start()
    while len(log) < 2:
        assert time.monotonic() < deadline, log
        time.sleep(0.01)
    assert log == ["first urgent=False", "first urgent=True"]  # nothing made from the sources meanwhile
    phase.set()
    spare.join(30)
    call.join(30)
    assert got and got[0][1], got  # the call's own fresh worker
    assert {"spare made", "worker made"} <= set(log[2:]), log
    assert log.index("worker made") > log.index("first urgent=True")
    pool.close()


def test_a_call_waiting_for_the_first_phase_raises_the_compilation_and_lowers_it_after() -> None:
    """The compilation runs at autogroup nice 19; while a call waits for its first phase it runs at 0, and at 19 again
    once that phase is over (the rest never at a call's priority)."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import sys, time; sys.stdin.readline(); print({bytecode.STARTED!r}, flush=True); time.sleep(120)",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        if _autogroup(process.pid) is None:
            pytest.skip("no autogroups on this kernel")
        Path(f"/proc/{process.pid}/autogroup").write_text("19")
        compiling = bytecode.Compiling()
        compiling._follow(process)
        waiter = threading.Thread(target=compiling.first, kwargs={"urgent": True, "timeout": 60})
        waiter.start()
        deadline = time.monotonic() + 30
        while _autogroup(process.pid) != 0:
            assert time.monotonic() < deadline, _autogroup(process.pid)
            time.sleep(0.01)
        assert waiter.is_alive()  # still waiting for the phase
        assert process.stdin is not None
        process.stdin.write(b"go\n")
        process.stdin.flush()
        waiter.join(30)
        assert not waiter.is_alive() and _autogroup(process.pid) == 19
        compiling.first(urgent=True)  # over: returns at once, the compilation left low
        assert _autogroup(process.pid) == 19
        assert not compiling._imported.is_set()  # the spares' wait (all the workers import) is not over yet ...
        process.kill()
        compiling.imported(timeout=30)  # ... until the compilation says so, or ends
        assert compiling._imported.is_set()
    finally:
        process.kill()
        process.wait()


def _autogroup(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/autogroup").read_text().split()[-1])
    except (OSError, ValueError):
        return None


def _group(leader: int) -> list[int]:
    """The live (not zombie) processes of process group ``leader``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == leader and fields[0] != "Z":
            found.append(int(entry))
    return found


@pytest.mark.slow
def test_the_compilation_ends_when_its_server_is_killed(tmp_path: Path) -> None:
    """A new environment (the checkout on its path, pandas's sources copied in, nothing compiled): a process starts
    the compilation as the server does, and is killed (SIGKILL, it alone); the compilation and its pool's processes
    are gone soon after, its work not finished."""
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "checkout.pth").write_text(f"{ROOT}\n")
    import pandas

    source = Path(pandas.__file__).parent
    shutil.copytree(source, site / "pandas", ignore=shutil.ignore_patterns("__pycache__", "*.so", "tests"))
    parent = subprocess.Popen(
        [
            str(python),
            "-I",
            "-c",
            "import time; from ba_mcp.bytecode import Compiling; c = Compiling(); c.start(); "
            "print(c._process.pid if c._process else 0, flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        leader = int(parent.stdout.readline())
        assert leader, "the compilation did not start"
        deadline = time.monotonic() + 60
        while len(_group(leader)) < 2:  # its pool at work (two processes at least: it and a compiler)
            assert time.monotonic() < deadline and _group(leader), "the compilation ended before its pool started"
            time.sleep(0.1)
        stamp = site / "__pycache__" / bytecode.STAMP
        assert not stamp.exists()
        parent.kill()  # SIGKILL to the server alone (its group would not reach the compilation's session anyway)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 30
        while _group(leader):
            assert time.monotonic() < deadline, f"still running 30 s after its server was killed: {_group(leader)}"
            time.sleep(0.1)
        assert not stamp.exists()  # cut short, not finished
    finally:
        parent.kill()
        for pid in _group(leader) if "leader" in locals() else []:
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("workers", [1, 2])
def test_every_source_is_compiled_once_in_one_batch_but_what_its_folder_leaves_out(
    tmp_path: Path, workers: int
) -> None:
    """``_compile_files``: many files (a pool given them in batches) or few (in process): each source gets the bytecode
    the workers check (timestamp), what the folder's expression leaves out gets none, and a second pass writes
    nothing."""
    import importlib.util

    (tmp_path / "pkg" / "tests").mkdir(parents=True)
    sources = [tmp_path / "pkg" / f"m{i}.py" for i in range(300)]
    for i, source in enumerate(sources):
        source.write_text(f"VALUE = {i}\n")
    left = tmp_path / "pkg" / "tests" / "test_x.py"
    left.write_text("X = 1\n")
    rx = re.compile(bytecode._TESTS)
    found = dict.fromkeys(bytecode._sources(tmp_path / "pkg"), rx)
    assert set(found) == {str(p) for p in [*sources, left]}
    bytecode._compile_files(found, workers)
    cached = [Path(importlib.util.cache_from_source(str(p))) for p in sources]
    assert all(c.exists() for c in cached)
    assert all(int.from_bytes(c.read_bytes()[4:8], "little") == 0 for c in cached)  # flags 0: timestamp-checked
    assert not Path(importlib.util.cache_from_source(str(left))).exists()
    before = {c: c.stat().st_mtime_ns for c in cached}
    bytecode._compile_files(found, workers)
    assert {c: c.stat().st_mtime_ns for c in cached} == before  # compiled already: only looked at
