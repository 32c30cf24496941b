"""Bytecode for what the workers import, compiled once by the server, out of every call's way (issue 65).

The workers run ``python -I -B`` in a read-only root: they read ``__pycache__/*.pyc`` but never write it. An install
that compiled nothing (uv compiles nothing by default: the extension's ``uv run``, ``uvx``, ``uv pip install``, a
clone's ``uv sync``) would have every worker compile pandas and the rest from source at every start, for ever. So
the server compiles what is missing, once, into the ``__pycache__`` folders beside the sources, where the workers
read it:

* **what**: the project's own packages (``ba_mcp``, ``sandbox``: outside site-packages in an editable install), the
  installed packages (``sysconfig``'s purelib and platlib) and the standard library — not the packages' test
  suites, which no worker imports; only what is missing or stale (``compileall`` without ``force``);
* **once**: a stamp in ``<purelib>/__pycache__/`` records what the last complete run compiled — the interpreter and
  the installed distributions (``fingerprint``); a start that finds the same compiles nothing and starts no process;
* **out of the way**: in a process of its own (``python -I -m ba_mcp.bytecode``) in a session, and so an autogroup,
  of its own at the lowest CPU priority (autogroup and nice 19), started after the handshake and ended with the
  server (``Compiling.close``); what it wrote stays (each file is written whole), so the next start goes on from
  there. One at a time: a lock beside the stamp, which a second server finds held and leaves the work to the first;
* **where it cannot**: a folder the server's user may not write (a system install another user owns) is left as it
  is, and the log says how its owner compiles it (pip compiles at install).

``compile_missing`` is the same work in the calling process, for whoever must have it done before going on (the
test suite's start: its workers read what it compiles).
"""

from __future__ import annotations

import compileall
import contextlib
import fcntl
import hashlib
import logging
import os
import py_compile
import re
import signal
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

STAMP = "ba-mcp-bytecode.stamp"
_LOCK = "ba-mcp-bytecode.lock"
_PROJECT = ("ba_mcp", "sandbox")
_TESTS = r"[/\\]tests?[/\\]"  # a package's test suite (pandas/tests, numpy/…/tests): no worker imports it


def _package_dirs() -> list[Path]:
    """The folders of the project's own packages, wherever they are installed (a checkout, the bundle, a wheel)."""
    here = Path(__file__).resolve().parent
    return [here, here.parent / "sandbox"] if (here.parent / "sandbox").is_dir() else [here]


def _site_dirs() -> list[Path]:
    paths = sysconfig.get_paths()
    return list(dict.fromkeys(Path(paths[k]) for k in ("purelib", "platlib")))


def targets() -> list[tuple[Path, str]]:
    """The folders compiled, first what a worker imports first, each with what is left out of it (a regular
    expression on the file's path)."""
    sites = _site_dirs()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    left_out = _TESTS + r"|[/\\](?:site|dist)-packages[/\\]"  # the interpreter's own installed packages: not ours
    found = [(d, _TESTS) for d in [*_package_dirs(), *sites]] + [(stdlib, left_out)]
    return [(d, rx) for d, rx in found if d.is_dir()]


def fingerprint() -> str:
    """What a complete run compiled, in one digest: the interpreter and the installed distributions (their
    ``.dist-info`` names carry the versions). The project's own packages are not in it: a checkout's are edited all
    day, and the few hundred files are checked at every run (``compile_missing``) for a few milliseconds."""
    digest = hashlib.sha256(f"{sys.version}\n{sys.executable}\n".encode())
    for site in _site_dirs():
        with contextlib.suppress(OSError):
            digest.update("\n".join(sorted(n for n in os.listdir(site) if n.endswith(".dist-info"))).encode())
    return digest.hexdigest()


def _stamp_dir() -> Path:
    return _site_dirs()[0] / "__pycache__"


def compiled() -> bool:
    """Whether the last complete run compiled what is installed now."""
    try:
        return (_stamp_dir() / STAMP).read_text(encoding="ascii").strip() == fingerprint()
    except OSError:
        return False


def writable() -> bool:
    """Whether this user may compile the installed packages (and keep the stamp and the lock beside them)."""
    return os.access(_site_dirs()[0], os.W_OK)


@contextlib.contextmanager
def _locked() -> Iterator[bool]:
    """The one compilation at a time: True when this process holds the lock, False when another does."""
    folder = _stamp_dir()
    folder.mkdir(exist_ok=True)
    fd = os.open(folder / _LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def compile_missing(workers: int = 1) -> None:
    """Compile what is missing or stale in ``targets()`` (with ``workers`` processes) and write the stamp, here and
    now, after another process's run has ended; when the stamp says the rest is done, only the project's packages."""
    if not writable():
        return
    folder = _stamp_dir()
    folder.mkdir(exist_ok=True)
    with open(folder / _LOCK, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        everything = not compiled()
        _compile(workers if everything else 1, everything)


def _compile(workers: int, everything: bool = True) -> None:
    """Compile the project's packages and, with ``everything``, the rest of ``targets()``; then write the stamp."""
    before = fingerprint()
    project = _package_dirs()
    for folder, left_out in targets():
        if os.access(folder, os.W_OK) and (everything or folder in project):
            compileall.compile_dir(
                folder,
                quiet=2,
                rx=re.compile(left_out),
                workers=workers,
                invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP,  # what the workers check, cheaply
            )
    if everything and fingerprint() == before:  # nothing installed meanwhile: what was compiled is what is there
        tmp = _stamp_dir() / f"{STAMP}.{os.getpid()}"
        tmp.write_text(before + "\n", encoding="ascii")
        os.replace(tmp, _stamp_dir() / STAMP)


def _lowest_priority() -> None:
    """This process at the lowest CPU priority: its autogroup (the session ``Popen`` started it in) and its nice."""
    with contextlib.suppress(OSError), open("/proc/self/autogroup", "w", encoding="ascii") as f:
        f.write("19")
    with contextlib.suppress(OSError):
        os.nice(19)


def main() -> int:
    """``python -I -m ba_mcp.bytecode``: the background run (see the module's docstring)."""
    _lowest_priority()
    if writable():
        with _locked() as mine:
            if mine and not compiled():
                _compile(os.cpu_count() or 1)
    return 0


class Compiling:
    """The server's one background compilation: ``start`` it after the handshake (nothing happens when the stamp says
    it is done), ``close`` it with the server."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if self._process is not None:
            return
        if not writable():
            site = _site_dirs()[0]
            log.info(
                "the installed packages (%s) are not writable by this user: each worker compiles what it imports; "
                "their owner compiles them once with: %s -m compileall -q %s",
                site,
                sys.executable,
                site,
            )
            return
        if compiled():
            return
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-m", "ba_mcp.bytecode"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # stdout may be the MCP channel
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # an autogroup of its own, lowered (``_lowest_priority``); killed as a group
            )
        except OSError as exc:
            log.info("bytecode compilation not started: %s", exc)

    def close(self) -> None:
        """End the compilation if it still runs (its pool's processes with it); what it wrote stays."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)


if __name__ == "__main__":
    sys.exit(main())
