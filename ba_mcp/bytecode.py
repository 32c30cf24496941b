"""Bytecode for what the workers import, compiled once by the server, out of every call's way (issue 65).

The workers run ``python -I -B`` in a read-only root: they read ``__pycache__/*.pyc`` but never write it. An install
that compiled nothing (uv compiles nothing by default: the extension's ``uv run``, ``uvx``, ``uv pip install``, a
clone's ``uv sync``) would have every worker compile pandas and the rest from source at every start, for ever. So
the server compiles what is missing, once, into the ``__pycache__`` folders beside the sources, where the workers
read it:

* **what**: the project's own packages (``ba_mcp``, ``sandbox``: outside site-packages in an editable install), the
  installed packages (``sysconfig``'s purelib and platlib) and the standard library — not the packages' test
  suites, which no worker imports; only what is missing or stale (``compileall`` without ``force``);
* **first what a worker imports first**: the installed modules the workers' own code imports (``worker_modules``:
  read from the worker programs' sources and the project's modules they import — numpy and pandas for a Python
  sandbox, pyarrow for an engine, then what they import later or preload: scipy.stats, …): those a worker imports
  before it serves (``start_modules``) in one process, in turn (``_import_in_turn``: each compiled once), after which
  the server is told (``STARTED`` on the pipe ``Compiling`` reads: a call that starts a worker may wait for that,
  ``Compiling.first``); then the later ones, a process each, side by side (``_import_each``; what they share is
  compiled by then; a module left out when a submodule of it is listed: ``matplotlib.pyplot`` imports
  ``matplotlib``), after which the server is told again (``IMPORTED``): it starts its spares then, so that they
  import and preload bytecode instead of compiling the same modules from source beside the compilation
  (``Compiling.imported``); then the project's packages, those packages whole, and the rest;
* **once**: a stamp in ``<purelib>/__pycache__/`` records what the last complete run compiled — the interpreter and
  the installed distributions (``fingerprint``); a start that finds the same compiles nothing and starts no process;
* **out of the way**: in a process of its own (``python -I -m ba_mcp.bytecode <server's pid>``) in a session, and
  so an autogroup, of its own at the lowest CPU priority (autogroup and nice 19), started first thing by ``ba-mcp
  serve`` (on another CPU while the server imports: on a new install that is most of its first start; an App built
  otherwise starts it with its spares, after the handshake) and ended with the server: by ``Compiling.close``, or
  — the server killed, or its process group signalled, which this session is not in — by itself, when it sees its
  server gone (``_ends_with``); what it wrote stays (each file is written whole), so the next start goes on from
  there. One at a time: a lock beside the stamp, which a second server finds held and leaves the work to the first;
* **where it cannot**: a folder the server's user may not write (a system install another user owns) is left as it
  is, and the log says how its owner compiles it (pip compiles at install).

``compile_missing`` is the same work in the calling process, for whoever must have it done before going on (the
test suite's start: its workers read what it compiles).
"""

from __future__ import annotations

import ast
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
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

log = logging.getLogger(__name__)

STAMP = "ba-mcp-bytecode.stamp"
_LOCK = "ba-mcp-bytecode.lock"
STARTED = "started"  # the line the background run writes once a worker's start imports are compiled
IMPORTED = "imported"  # ... and once the rest of what the workers import (a spare's preloads) is
_PROJECT = ("ba_mcp", "sandbox")
_MODULE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*\Z")  # a string that may name a module
_WORKERS = ("sandbox", "ba_mcp.inside")  # the worker programs, as the server starts them: python -I -B -m <module>
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


def worker_imports() -> list[str]:
    """The installed packages (top-level names) of ``worker_modules``, in its order."""
    return list(dict.fromkeys(name.partition(".")[0] for name in worker_modules()))


def worker_modules() -> list[str]:
    """``start_modules`` and then the installed modules the workers import later or name (a spare's preloads:
    ``scipy.stats``), in that order."""
    start, later = _worker_modules()
    return [*start, *later]


def start_modules() -> list[str]:
    """The installed modules a worker imports before it serves (numpy and pandas for a Python sandbox, pyarrow for
    an engine), in the order the workers' code names them."""
    return _worker_modules()[0]


def _worker_modules() -> tuple[list[str], list[str]]:
    """The installed modules a worker imports as it starts, in the order the workers' code names them: the import
    statements a module runs when imported (its body's, not its functions' nor ``TYPE_CHECKING``'s) and those of its
    ``main`` (a worker imports its libraries there), of the worker programs (``_WORKERS``' ``__main__``) and of every
    project module they import, followed through the project; and, apart, the installed modules those modules import
    later or name (a spare's preloads: ``scipy.stats``). Read from the sources, nothing imported; the standard
    library's names left out."""
    roots = {d.name: d.parent for d in _package_dirs()}
    queue = [f"{worker}.__main__" for worker in _WORKERS]
    seen: set[str] = set()
    found: list[str] = []
    later: list[str] = []
    named: list[str] = []
    while queue:
        module = queue.pop(0)
        source = _source(roots, module)
        if module in seen or source is None:
            continue
        seen.add(module)
        try:
            tree = ast.parse(source.read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        package = module if source.name == "__init__.py" else module.rpartition(".")[0]
        for node in _run_at_start(tree.body):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's own package
                    parts = package.split(".")
                    base = ".".join([*parts[: len(parts) - node.level + 1], *([base] if base else [])])
                names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
            for name in names:
                top = name.partition(".")[0]
                if top in roots:
                    queue.append(name)
                elif top and top not in sys.stdlib_module_names and name not in found:
                    found.append(name)
        for part in ast.walk(tree):  # what the module imports in its functions, or names as a module to import
            if isinstance(part, ast.Import):
                later += [alias.name for alias in part.names]
            elif isinstance(part, ast.ImportFrom) and not part.level and part.module:
                later.append(part.module)
            elif isinstance(part, ast.Constant) and isinstance(part.value, str) and _MODULE.match(part.value):
                later.append(part.value)
    for name in dict.fromkeys(later):
        top = name.partition(".")[0]
        if top not in roots and top not in sys.stdlib_module_names and name not in found and _installed(top):
            named.append(name)
    return found, named


def _run_at_start(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a module's body that run when it is imported or its worker starts: its own, those of the
    blocks in it, and of its function ``main``; not other functions', classes' or ``if TYPE_CHECKING:``'s."""
    for node in body:
        if isinstance(node, ast.FunctionDef):
            if node.name == "main":
                yield from (n for n in ast.walk(node) if isinstance(n, ast.stmt))
            continue
        if isinstance(node, ast.ClassDef):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        yield node
        for field in ("body", "orelse", "finalbody"):  # an if's, a try's, a with's blocks
            yield from _run_at_start(getattr(node, field, None) or [])
        for handler in getattr(node, "handlers", None) or []:
            yield from _run_at_start(handler.body)


def _source(roots: dict[str, Path], module: str) -> Path | None:
    """The source file of a project module (None: not one, or a name imported from a module)."""
    parts = module.split(".")
    base = roots.get(parts[0])
    if base is None:
        return None
    path = base.joinpath(*parts)
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _installed(name: str) -> Path | None:
    """Where installed package ``name`` is (its folder, or its one file), without importing it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else None


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


def _compile(workers: int, everything: bool = True, say: Callable[[str], None] = lambda what: None) -> None:
    """Compile the project's packages and, with ``everything``, the packages the workers import (``worker_imports``)
    and then the rest of ``targets()``; then write the stamp. ``say(STARTED)`` once what a worker imports before it
    serves (``start_modules``) is compiled — a worker started after it imports bytecode only —, ``say(IMPORTED)`` once
    what the workers import later is too (a spare's preloads: a spare started after it compiles nothing)."""
    before = fingerprint()
    project = _package_dirs()
    found = targets()
    first: list[tuple[Path, str]] = []
    if everything:
        sites = [d for d, _ in found if d not in project]
        start, later = _worker_modules()
        for name in dict.fromkeys(m.partition(".")[0] for m in [*start, *later]):
            where = _installed(name)
            if where is not None and any(where.is_relative_to(site) for site in sites):
                first.append((where, _TESTS))
        dirs = {d for d, _ in first}  # installed in this environment's site-packages: imported, then compiled whole
        _import_in_turn([m for m in start if _installed(m.partition(".")[0]) in dirs])
        say(STARTED)
        _import_each(_outermost([m for m in later if _installed(m.partition(".")[0]) in dirs]), workers)
    else:
        say(STARTED)
    say(IMPORTED)
    ours = [(d, rx) for d, rx in found if d in project]
    files: dict[str, re.Pattern[str]] = {}  # every source, in the folders' order, with what its folder leaves out
    for folder, left_out in [*ours, *first, *[(d, rx) for d, rx in found if d not in project]]:
        if os.access(folder, os.W_OK) and (everything or folder in project):
            rx = re.compile(left_out)
            for path in _sources(folder):
                files.setdefault(path, rx)
    _compile_files(files, workers)
    if everything and fingerprint() == before:  # nothing installed meanwhile: what was compiled is what is there
        tmp = _stamp_dir() / f"{STAMP}.{os.getpid()}"
        tmp.write_text(before + "\n", encoding="ascii")
        os.replace(tmp, _stamp_dir() / STAMP)


def _sources(folder: Path) -> Iterator[str]:
    """The Python sources in ``folder`` (a folder, or a module's file), as ``compileall.compile_dir`` finds them: not
    through a linked folder."""
    if folder.is_file():
        yield str(folder)
        return
    for top, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not os.path.islink(os.path.join(top, d)))
        yield from (os.path.join(top, name) for name in sorted(names) if name.endswith(".py"))


def _compile_one(item: tuple[str, re.Pattern[str]]) -> bool:
    path, rx = item
    # timestamp-checked bytecode: what the workers check; a source already compiled is only looked at
    mode = py_compile.PycInvalidationMode.TIMESTAMP
    return bool(compileall.compile_file(path, rx=rx, quiet=2, invalidation_mode=mode))


def _compile_files(files: dict[str, re.Pattern[str]], workers: int) -> None:
    """Compile what is missing or stale of ``files``, in their order, with ``workers`` processes given the files in
    batches: one pool for all the folders (``compile_dir`` makes one per folder and hands its files one at a time —
    a compiled install took 21 s to look at, against 2 s in one process)."""
    items = list(files.items())
    if workers <= 1 or len(items) < 256:
        for item in items:
            _compile_one(item)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers) as pool:
        for _ in pool.map(_compile_one, items, chunksize=128):
            pass


_IMPORT_IN_TURN = (
    "import contextlib, importlib, sys\n"
    "for m in sys.argv[1:]:\n"
    "    with contextlib.suppress(Exception):\n"
    "        importlib.import_module(m)"
)


def _import_in_turn(modules: list[str]) -> None:
    """Import ``modules`` in one process, in their order: each module they import is compiled once, as a worker
    meets it (numpy once, not again in pandas's process beside it), and written beside its source."""
    if modules:
        with contextlib.suppress(OSError):
            subprocess.run(
                [sys.executable, "-I", "-c", _IMPORT_IN_TURN, *modules],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={**os.environ, "MPLBACKEND": "Agg"},
                check=False,
            )


def _import_each(modules: list[str], workers: int) -> None:
    """Import each of ``modules``, a process each (``workers`` at a time, in their order; what they share was
    compiled before them: ``start_modules``): what a module imports is compiled as it is imported, just that and in
    the order a worker meets it. Nothing is kept of the imports."""
    import time

    queue, running = list(modules), list[subprocess.Popen[bytes]]()
    while queue or running:
        while queue and len(running) < max(1, workers):
            with contextlib.suppress(OSError):
                running.append(
                    subprocess.Popen(
                        [sys.executable, "-I", "-c", _IMPORT_IN_TURN, queue[0]],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        env={**os.environ, "MPLBACKEND": "Agg"},  # matplotlib.pyplot: no display to look for
                    )
                )
            queue.pop(0)
        time.sleep(0.05)
        running = [p for p in running if p.poll() is None]


def _outermost(modules: list[str]) -> list[str]:
    """``modules`` without those another of them imports as its package (``matplotlib`` beside
    ``matplotlib.pyplot``), in their order."""
    return [m for m in modules if not any(other.startswith(f"{m}.") for other in modules)]


def _lowest_priority() -> None:
    """This process at the lowest CPU priority: its autogroup (the session ``Popen`` started it in) and its nice."""
    with contextlib.suppress(OSError), open("/proc/self/autogroup", "w", encoding="ascii") as f:
        f.write("19")
    with contextlib.suppress(OSError):
        os.nice(19)


def _set_priority(leader: int, nice: int) -> None:
    """The compilation (its session: ``leader`` and the processes it started) at autogroup nice ``nice``; where the
    server may change it back (root), the processes' own nice too."""
    with contextlib.suppress(OSError), open(f"/proc/{leader}/autogroup", "w", encoding="ascii") as f:
        f.write(str(nice))
    if os.geteuid() != 0:
        return
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                if os.getsid(int(entry)) == leader:
                    os.setpriority(os.PRIO_PROCESS, int(entry), nice)


def _ends_with(parent: int) -> None:
    """End this process, and its pool's with it, as soon as process ``parent`` (the server that started it) is gone:
    killed, or ended with its process group, which this process's own session is not in. A thread waits on the
    parent's pidfd (or, where there is none, looks at this process's parent every second); then SIGKILL to this
    process's group — its own when it leads it (``Compiling`` starts it in a session of its own), else to itself."""
    import time

    def watch() -> None:
        pidfd = None
        with contextlib.suppress(AttributeError, OSError):
            pidfd = os.pidfd_open(parent)
        if pidfd is not None and os.getppid() == parent:  # the pidfd is the parent's, not a later process's
            import select

            waiting = select.poll()
            waiting.register(pidfd, select.POLLIN)  # readable once the process has ended
            while not waiting.poll(None):
                pass
        else:
            while os.getppid() == parent:
                time.sleep(1)
        if os.getpgid(0) == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="ends-with-server", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    """``python -I -m ba_mcp.bytecode [<the server's pid>]``: the background run (see the module's docstring),
    ended with the server whose pid is given."""
    args = sys.argv[1:] if argv is None else argv
    if args:
        _ends_with(int(args[0]))
    _lowest_priority()
    if writable():
        with _locked() as mine:
            if mine and not compiled():
                _compile(os.cpu_count() or 1, say=_say)
    return 0


def _say(what: str) -> None:
    """Tell the server (this process's stdout, ``Compiling``'s pipe) how far the compilation is (``STARTED``,
    ``IMPORTED``)."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.write(f"{what}\n")
        sys.stdout.flush()


class Compiling:
    """The server's one background compilation: ``start`` it as the server starts (nothing happens when the stamp
    says it is done), ``close`` it with the server. Its first phase compiles what a worker imports before it serves
    (``start_modules``): ``first`` waits for it — the spares' start (the server starts them after it, so that they
    import bytecode, not the sources), at the compilation's low priority; or a call that would start a worker
    meanwhile (``urgent``: the compilation raised to normal priority while the call waits on exactly that)."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._first = threading.Event()
        self._first.set()  # nothing to wait for until a compilation starts
        self._imported = threading.Event()
        self._imported.set()
        self._urgent = 0  # calls waiting for the first phase (the compilation at normal priority meanwhile)
        self._lock = threading.Lock()

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
            process = subprocess.Popen(
                [sys.executable, "-I", "-m", "ba_mcp.bytecode", str(os.getpid())],  # ends with this process
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,  # its first phase's end (``STARTED``), to ``_listen``; not the MCP channel
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # an autogroup of its own, lowered (``_lowest_priority``); killed as a group
            )
        except OSError as exc:
            log.info("bytecode compilation not started: %s", exc)
            return
        self._follow(process)

    def _follow(self, process: subprocess.Popen[bytes]) -> None:
        """``process`` is the compilation: its first phase is waited for until it says it is over."""
        self._process = process
        self._first.clear()
        self._imported.clear()
        threading.Thread(target=self._listen, args=(process,), name="bytecode", daemon=True).start()

    def _listen(self, process: subprocess.Popen[bytes]) -> None:
        """The first phase is over when the compilation says so, or ends (done, killed, another server's to do)."""
        assert process.stdout is not None
        with contextlib.suppress(OSError, ValueError):
            for line in process.stdout:
                if line.strip() == STARTED.encode():
                    self._first.set()
                elif line.strip() == IMPORTED.encode():
                    self._imported.set()
        self._first.set()
        self._imported.set()

    def imported(self, timeout: float | None = None) -> None:
        """Wait (up to ``timeout`` seconds, at the compilation's low priority) until all a worker imports, later too,
        is compiled — a spare's start: it preloads those modules, which it would compile again beside the compilation
        if it came first; at once when no compilation runs."""
        self._imported.wait(timeout)

    def first(self, urgent: bool = False, timeout: float | None = None) -> None:
        """Wait (up to ``timeout`` seconds) until what a worker imports as it starts is compiled; at once when no
        compilation runs. ``urgent``: a call waits — the compilation at normal priority until its first phase is over
        (or the last such call stops waiting), then low again for the rest."""
        if self._first.is_set():
            return
        if not urgent:
            self._first.wait(timeout)
            return
        self._raise(1)
        try:
            self._first.wait(timeout)
        finally:
            self._raise(-1)

    def _raise(self, waiting: int) -> None:
        with self._lock:
            self._urgent += waiting
            process = self._process
            if process is not None and process.poll() is None and self._urgent == (1 if waiting > 0 else 0):
                _set_priority(process.pid, 0 if self._urgent else 19)

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
