"""Services a test run starts once, early, in the background: the real PostgreSQL and Spark Connect.

``pytest_configure`` (tests/conftest.py) runs ``Service.start`` in the process that hands out the work — the xdist
controller, or the only process — so a server starts while the first tests run. Its state (what the tests need to
reach it, or why it did not start) is a JSON file named by an environment variable the test processes inherit;
a test's fixture waits for it (``wait``). ``stop`` ends the server when the run ends.

A killed run ends nothing: its servers are found and ended by the next run (``end_processes``, ``end_leftovers``),
never left to block it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

Starter = Callable[[Path], AbstractContextManager[dict[str, Any]]]


def variable(name: str) -> str:
    return f"BAMCP_TEST_{name.upper()}_STATE"  # not BA_MCP_*: the tests' hermetic environment drops those


class Service:
    """``start(folder)`` is a context manager yielding the service's state while it runs."""

    def __init__(self, name: str, start: Starter, folder: Path) -> None:
        self.name = name
        self.folder = folder
        self.state = folder / f"{name}.json"
        self._start = start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{name}-for-tests", daemon=True)

    def start(self) -> None:
        os.environ[variable(self.name)] = str(self.state)
        self._thread.start()

    def _run(self) -> None:
        try:
            with self._start(self.folder) as state:
                self._write(state)
                self._stop.wait()
        except BaseException as exc:
            self._write({"error": f"{type(exc).__name__}: {str(exc)[-1500:]}"})

    def _write(self, data: dict[str, Any]) -> None:
        partial = self.state.with_suffix(".part")
        partial.write_text(json.dumps(data))
        os.replace(partial, self.state)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        os.environ.pop(variable(self.name), None)


def wait(name: str, timeout_s: float = 600) -> dict[str, Any]:
    """The state of the run's service ``name``: what reaches it, or ``{"error": …}``."""
    path = os.environ.get(variable(name))
    if not path:
        return {"error": f"no {name} was started for this run (tests/conftest.py starts it)"}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(FileNotFoundError, ValueError):
            state: dict[str, Any] = json.loads(Path(path).read_text())
            return state
        time.sleep(0.1)
    return {"error": f"{name} did not start within {timeout_s:g} s"}


@contextlib.contextmanager
def exclusive(lock: Path, what: str, timeout_s: float = 900) -> Iterator[None]:
    """``what`` held by this run alone until the block ends (a file lock the kernel lets go when a run dies): another
    run's tests on the same machine wait for it, then fail saying why."""
    lock = Path(lock)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as held:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{what} is held by another test run for over {timeout_s:g} s") from None
                time.sleep(0.5)
        held.write(str(os.getpid()))
        held.flush()
        yield


def end_processes(needle: str) -> list[int]:
    """End every process (and its process group) whose command line holds ``needle``: SIGTERM, then SIGKILL after
    10 s. Returns the pids found."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                found.append(int(entry.name))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(os.getpgid(pid), sig)
        deadline = time.monotonic() + 10
        while sig == signal.SIGTERM and time.monotonic() < deadline and any(_alive(p) for p in found):
            time.sleep(0.2)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def owned(folder: Path) -> None:
    """Mark ``folder`` (a server's, in the temporary directory) as this process's: ``end_leftovers`` of a later run
    ends its server once this process is gone."""
    (folder / "owner").write_text(f"{os.getpid()} {_started(os.getpid())}")


def _started(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def end_leftovers(pattern: str, stop: Callable[[Path], None]) -> list[Path]:
    """The folders in the temporary directory matching ``pattern`` whose owner (``owned``) is gone: ``stop(folder)``
    ends their server, then they are removed. A folder without an owner file is left alone (it may be starting)."""
    import shutil
    import tempfile

    ended = []
    for folder in Path(tempfile.gettempdir()).glob(pattern):
        with contextlib.suppress(OSError, ValueError):
            pid, started = (folder / "owner").read_text().split()
            if _alive(int(pid)) and _started(int(pid)) == started:
                continue
            with contextlib.suppress(Exception):
                stop(folder)
            shutil.rmtree(folder, ignore_errors=True)
            ended.append(folder)
    return ended
