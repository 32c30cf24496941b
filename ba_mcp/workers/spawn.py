"""Starting a worker, whatever it is for: one ``spawn(kind, …)`` and one set of confinement options.

Every worker — a Python sandbox (``sandbox``), an engine worker (``engine``: DuckDB, the parsers) and a connection
worker (``connection``: one ADBC connection) — is the same confined process (``process.WorkerProcess``: its
own namespaces and minimal root, an unprivileged uid, cgroups beneath the server's, rlimits, seccomp), told what
it may hold by ``confinement()`` from its ``WorkerLimits`` section, started by ``spawn()``: the process, its ready
message within ``start_timeout_s``, and on failure the process killed and one clear error naming the worker.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ba_mcp.errors import ErrorType, ToolFailure
from ba_mcp.workers.failures import worker_failures
from ba_mcp.workers.process import WorkerProcess
from sandbox.isolation import parent_name

if TYPE_CHECKING:
    from ba_mcp.settings import SandboxSettings, WorkerLimits

# what each kind of worker runs, and the error a failed start is
_MODULES = {"sandbox": "sandbox", "engine": "ba_mcp.inside", "connection": "ba_mcp.inside"}
START_TIMEOUT = "WORKER_START_TIMEOUT"  # a worker still starting at its own bound (not the call's timeout)
_UNAVAILABLE = {
    "sandbox": ("SANDBOX_UNAVAILABLE", "the Python worker"),
    "engine": ("ENGINE_UNAVAILABLE", "the engine worker"),
    "connection": ("ENGINE_UNAVAILABLE", "the connection worker"),
}


def confinement(limits: WorkerLimits, kind: str, **specific: Any) -> dict[str, Any]:
    """The options every worker's confinement reads, from its limits; ``specific`` adds or overrides (binds,
    network, capabilities, what the worker serves)."""
    options: dict[str, Any] = {
        "kind": kind,
        "network": False,
        "cgroup_parent": parent_name(os.getpid()),
        "uid": limits.uid,
        "gid": limits.gid,
        "disk_mb": limits.disk_mb,
        "memory_mb": limits.memory_mb,
        "cpu_seconds": limits.cpu_seconds,
        "cpus": limits.cpus or os.cpu_count() or 1,
        "max_transfer_bytes": limits.max_transfer_mb * 1024 * 1024,
    }
    if kind != "sandbox":  # the workers of ba_mcp itself: its package bound into their root
        import ba_mcp.workers as workers_package

        options.update(
            address_space_if_no_cgroup=True,
            max_processes=64,
            max_file_mb=limits.disk_mb,
            packages=[os.path.dirname(workers_package.__path__[0])],
        )
    options.update(specific)
    return options


def module_package(module: str) -> tuple[str, str] | None:
    """Where a module outside ba_mcp that a worker imports by name lives (an engine registered from outside the
    package): its top-level package's folder, to be bound into the worker's root, and the folder that holds it, for
    the worker's import path (``python -I`` reads no PYTHONPATH). None for ba_mcp's own modules. A module that is
    no package's is refused: binding its folder would show the worker whatever lies beside it."""
    import importlib.util

    top = module.split(".")[0]
    if top == "ba_mcp":
        return None
    spec = importlib.util.find_spec(top)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ToolFailure(
            ErrorType.DEPENDENCY_ERROR,
            "ENGINE_UNAVAILABLE",
            f"the engine module {module} is not in a package, so its worker cannot be given it",
            "put the engine's module in a package (a folder with __init__.py) or install it",
        )
    folder = os.path.realpath(locations[0])
    return folder, os.path.dirname(folder)


def spawn(
    kind: str, process_settings: SandboxSettings, scratch: Path, options: dict[str, Any], wait_s: float | None
) -> WorkerProcess:
    """A started worker of ``kind`` with its confinement ``options`` (``confinement``; the environment it may see
    from ``process_settings``), ready within ``wait_s`` seconds (None: not waited for here). A worker that does not
    start is killed and the error names it."""
    process = WorkerProcess(process_settings, scratch, module=_MODULES[kind], options=options)
    if wait_s is not None:
        ready(kind, process, wait_s)
    return process


def ready(kind: str, process: WorkerProcess, wait_s: float) -> dict[str, Any]:
    """Wait for ``process``'s ready message (what its confinement achieved); kill it and say so if none comes."""
    with worker_failures(gone=lambda exc: unavailable(kind, process, exc, wait_s)):
        return process.wait_ready(wait_s)


def unavailable(kind: str, process: WorkerProcess, exc: BaseException, wait_s: float = 0.0) -> ToolFailure:
    """A worker that did not start: killed, and the error naming it (with what it printed). One still starting at its
    own bound (``start_timeout_s``) is WORKER_START_TIMEOUT: a busy machine, not the request — retry."""
    output = process.last_output()
    process.kill()
    code, what = _UNAVAILABLE[kind]
    if isinstance(exc, TimeoutError):
        setting = "sandbox" if kind == "sandbox" else "engine"
        return ToolFailure(
            ErrorType.TIMEOUT,
            START_TIMEOUT,
            f"{what} was still starting after {wait_s:g} s (the call's own timeout was not spent on it)",
            f"retry: the machine is busy and the next start may be quicker; the operator can raise "
            f"{setting}.start_timeout_s",
        )
    return ToolFailure(
        ErrorType.DEPENDENCY_ERROR,
        code,
        f"{what} could not start ({exc})" + (f"; it printed: {output[-600:]}" if output else ""),
        "run `ba-mcp doctor` on the server's machine",
    )
