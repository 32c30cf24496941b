"""Services a test run starts once, early, in the background: the real PostgreSQL and Spark Connect.

``pytest_configure`` (tests/conftest.py) runs ``Service.start`` in the process that hands out the work — the xdist
controller, or the only process — so a server starts while the first tests run. Its state (what the tests need to
reach it, or why it did not start) is a JSON file named by an environment variable the test processes inherit;
a test's fixture waits for it (``wait``). ``stop`` ends the server when the run ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
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
