"""Issue 65: the server's background compilation (``ba_mcp.bytecode``) compiles first what a worker imports as it
starts, read from the workers' own sources, and ends with its server however the server ends (killed: SIGKILL to
the server alone, whose group the compilation's session is not in)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from ba_mcp import bytecode

ROOT = Path(__file__).resolve().parent.parent


def test_the_packages_a_worker_imports_at_start_are_read_from_the_workers_code() -> None:
    found = bytecode.worker_imports()
    assert {"numpy", "pandas"} <= set(found[:3]), found  # the Python sandbox's start (sandbox.worker.main)
    assert "pyarrow" in found, found  # the engine worker's start (ba_mcp.inside.main)
    assert found.index("scipy") > found.index("pandas"), found  # named later: the spare's preload of scipy.stats
    assert not {"ba_mcp", "sandbox", "os", "json"} & set(found), found  # neither the project's nor the stdlib's
    assert len(found) < 20, found  # what runs at start, not every import of every module (those come after)


def test_the_compilation_goes_the_workers_imports_then_the_project_then_their_packages_then_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    done: list[Path] = []
    imported: list[str] = []
    monkeypatch.setattr(bytecode.compileall, "compile_dir", lambda folder, **_: done.append(Path(folder)))
    monkeypatch.setattr(bytecode.compileall, "compile_file", lambda path, **_: done.append(Path(path)))
    monkeypatch.setattr(bytecode, "_import_each", lambda modules, _: imported.extend(modules) if not done else None)
    monkeypatch.setattr(bytecode.os, "access", lambda *_: True)
    monkeypatch.setattr(bytecode, "fingerprint", lambda: "changed")  # no stamp written: nothing on disk touched
    bytecode._compile(1)
    # first the modules a worker imports, each imported (compiled as a worker meets them), before any folder
    assert imported[:3] == bytecode.worker_modules()[:3] and "scipy.stats" in imported, imported
    project = bytecode._package_dirs()
    sites = bytecode._site_dirs()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    assert done[: len(project)] == project, done
    first = done[len(project) : done.index(sites[0])]
    names = [p.name for p in first]
    assert names[:2] == bytecode.worker_imports()[:2] and "pandas" in names, names
    assert all(any(p.is_relative_to(s) for s in sites) for p in first), first
    assert done[-1] == stdlib, done


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
