"""A worker process as the server sees it, whatever it is for (a Python sandbox, an engine or a connection worker).

``WorkerProcess`` is one worker: the child process (``python -I -B -m sandbox`` or ``-m ba_mcp.inside``) with
its confinement options, its protocol socket, and a thread draining its stdout/stderr (whatever user code writes
to fd 1/2 directly, and the worker's own fatal errors), of which the last few KB are kept for crash reports.
Descriptors from a worker are taken only as sealed, size-checked memory files (``read_blob``, ``map_blob``). The
workers' cgroups live beneath the server's own (``make_worker_cgroup``); ``sweep`` clears what a killed server
left behind. Started by ``spawn.spawn``, kept by ``pool.WorkerPool``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ba_mcp.settings import SandboxSettings
from sandbox import protocol
from sandbox.isolation import (
    CGROUP_PREFIX,
    PARENT_PREFIX,
    SESSION_DIR,
    cgroup_dirs,
    cgroup_name,
    mount_points,
    parent_name,
)

log = logging.getLogger(__name__)

_NOISE_KEPT = 4096
_PATH = re.compile(r"(?<![\w.~:/])(?:/[\w.@+-]+){2,}/?")  # an absolute path of two or more parts


class WorkerGone(Exception):
    """The worker process ended (crash, kill, OOM) or broke the protocol."""


class BadBlob(Exception):
    """A descriptor from the worker that is not a sealed memory file within the size limit."""


_REQUIRED_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE


def read_blob(fd: int, limit: int) -> bytes:
    """The bytes of a memory file the worker sent, read only if it is sealed (its size can no longer
    change) and at most ``limit`` bytes long. Anything else — a descriptor of /dev/zero, a pipe, an
    unsealed or oversized (even sparse) memory file — is refused before a byte is read (S-4)."""
    size = sealed_size(fd, limit)
    data = os.pread(fd, size, 0)
    if len(data) != size:
        raise BadBlob("the memory file is shorter than it says")
    return data


def map_blob(fd: int, limit: int) -> memoryview:
    """A memory file the worker sent, checked like ``read_blob`` and mapped read-only instead of copied: a large
    value is read in place (its pages are the memory file's) and let go when the last view of it goes."""
    import mmap

    size = sealed_size(fd, limit)
    if size == 0:
        return memoryview(b"")
    return memoryview(mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ))


def sealed_size(fd: int, limit: int) -> int:
    """The size of a sealed memory file of at most ``limit`` bytes (BadBlob for anything else)."""
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:
        raise BadBlob("the worker sent a descriptor that is not a sealed memory file") from None
    if seals & _REQUIRED_SEALS != _REQUIRED_SEALS:
        raise BadBlob("the worker sent a memory file that is not sealed")
    size = os.fstat(fd).st_size
    if size > limit:
        raise BadBlob(f"the object is {size:,} bytes; at most {limit:,} bytes are taken from the sandbox")
    return size


class WorkerProcess:
    """A confined worker process: ``module`` (``sandbox``, or ``ba_mcp.inside``) run as ``python -I -B -m <module>
    '<options>'`` with its confinement ``options`` (``spawn.confinement``; the protocol descriptor is added) and
    only the environment variables ``settings.env_allowlist`` lets through."""

    def __init__(self, settings: SandboxSettings, sessions_dir: Path, module: str, options: dict[str, Any]) -> None:
        self.settings = settings
        # Where the process starts. Confined, the worker pivots into its own root and never sees it; only
        # when the OS refuses the namespaces does the worker work here (an opaque, per-worker name).
        # named for the server's pid, so the next start can tell what a killed server left behind (``sweep``)
        self.scratch = sessions_dir / f"{os.getpid()}-{secrets.token_hex(12)}"
        self.scratch.mkdir(mode=0o700)
        ours, theirs = socket.socketpair()
        options = {**options, "fd": theirs.fileno()}
        env = {name: os.environ[name] for name in settings.env_allowlist if name in os.environ}
        env.update(
            MPLBACKEND="Agg",
            MPLCONFIGDIR=f"{SESSION_DIR}/.matplotlib",  # private to the worker (its own tmpfs)
            HOME=SESSION_DIR,
            PYTHONIOENCODING="utf-8",
        )
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-B", "-m", module, json.dumps(options)],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.scratch,
                env=env,
            )
        except OSError:
            shutil.rmtree(self.scratch, ignore_errors=True)
            raise
        finally:
            theirs.close()
        self.sock = ours
        self.ready: dict[str, Any] | None = None
        self.cells = 0
        self.noise = bytearray()
        self.noise_total = 0
        threading.Thread(target=self._drain, name=f"sandbox-output-{self.proc.pid}", daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with contextlib.suppress(OSError):
            while chunk := os.read(fd, 65536):
                self.noise_total += len(chunk)
                self.noise += chunk
                del self.noise[:-_NOISE_KEPT]

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        if self.ready is None:
            message = self.receive(timeout)
            if message[0].get("op") != "ready":
                raise WorkerGone(f"unexpected first message {message[0].get('op')!r}")
            self.ready = message[0]
        return self.ready

    def start(self, timeout: float) -> None:
        self.wait_ready(timeout)
        self.send({"op": "start"})
        message, _ = self.receive(timeout)
        if message.get("op") != "started":
            raise WorkerGone("the worker did not start its session")

    def send(self, message: dict[str, Any], fds: list[int] | None = None) -> None:
        try:
            protocol.send(self.sock, message, fds or [])
        except OSError as exc:
            raise WorkerGone(str(exc)) from None

    def receive(self, timeout: float | None) -> tuple[dict[str, Any], list[int]]:
        self.sock.settimeout(timeout)
        try:
            return protocol.recv(self.sock)
        except TimeoutError:
            raise
        except (EOFError, OSError, protocol.ProtocolError) as exc:
            raise WorkerGone(str(exc)) from None

    def wait_readable(self, timeout: float) -> bool:
        """Whether the worker has sent something (or closed its end) within ``timeout`` seconds; a socket already
        closed here (the worker was ended by another call) is WorkerGone."""
        try:  # poll, not select: select() refuses a descriptor past 1023 (a server holding many connections)
            waiting = select.poll()
            waiting.register(self.sock, select.POLLIN)
            readable = waiting.poll(max(0.0, timeout) * 1000)
        except (OSError, ValueError) as exc:  # ValueError: a closed socket's fileno() is -1
            raise WorkerGone(str(exc)) from None
        return bool(readable)

    def interrupt(self) -> None:
        if self.proc.returncode is not None:  # reaped: its pid may be another process's now (see kill)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGINT)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss_mb(self) -> float:
        """The resident memory of the worker and what it started (the shim's descendants), in MB."""
        total, todo = 0, _children(self.proc.pid) if self.proc.returncode is None else []
        while todo:
            pid = todo.pop()
            todo += _children(pid)
            try:
                with open(f"/proc/{pid}/status", encoding="ascii") as f:
                    total += next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
            except (OSError, ValueError):
                continue
        return total / 1024

    def kill(self) -> None:
        """End the worker and everything it started (its process group and PID namespace). The worker (the
        shim's child) goes first, so the shim reaps it and no zombie waits for the host's init."""
        # Signals go by number only while the shim is not yet reaped (``returncode`` None: its pid, and so its
        # group's, is still held by it, a zombie at worst). Once reaped — by an earlier kill, or by alive()'s
        # poll() — the number may be a new process's: on a machine with 32,768 ids and busy threads it was, and a
        # second kill of an ended worker SIGKILLed another session's new worker (its shim, a group leader).
        children = _children(self.proc.pid) if self.proc.returncode is None else []
        for child in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL)
        if children:  # a worker still starting has no child yet: nothing for the shim to reap, no wait
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=0.5)
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.warning("sandbox worker %s did not end after SIGKILL", self.proc.pid)
        self.sock.close()
        if self.proc.stdout is not None:
            with contextlib.suppress(OSError):
                self.proc.stdout.close()
        remove_cgroups([self.proc.pid])
        shutil.rmtree(self.scratch, ignore_errors=True)

    def exit_description(self) -> str:
        """How the process ended, in the user's terms (waits briefly for it to be reaped)."""
        try:
            code = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "stopped answering"
        if code > 128:  # the shim reports a signal as 128 + its number
            code = -(code - 128)
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            meaning = {
                "SIGSEGV": "a segmentation fault",
                "SIGKILL": "killed (for example by the out-of-memory killer)",
                "SIGABRT": "aborted",
                "SIGXCPU": "its CPU time limit",
                "SIGBUS": "a bus error",
                "SIGSYS": "a system call the sandbox forbids",  # seccomp ended it (a foreign architecture's call)
            }.get(name, name)
            return f"ended by {name} ({meaning})" if meaning != name else f"ended by {name}"
        return f"exited with code {code}"

    def last_output(self, limit: int = 1200) -> str:
        """The end of what the process wrote to fd 1/2, with file paths cut to their last part (S-1: a
        crash report must not show where the server, Python or the workspace live)."""
        text = bytes(self.noise[-limit:]).decode("utf-8", "replace").strip()
        return _PATH.sub(lambda m: ".../" + m.group(0).rstrip("/").rsplit("/", 1)[-1], text)


def _children(pid: int) -> list[int]:
    """The direct children of ``pid`` (Linux /proc; empty where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
            return [int(c) for c in f.read().split()]
    except (OSError, ValueError):
        return []


def _worker_cgroup_bases() -> set[str]:
    """Where this server's workers have cgroups: its parent beneath its own cgroup, or (where that parent
    could not be made) the hierarchies' roots."""
    return set(cgroup_dirs(parent_name(os.getpid())).values()) | set(mount_points().values())


def remove_cgroups(pids: list[int] | None = None, wait_s: float = 2.0) -> None:
    """Remove the cgroups of ended workers (``pids=None``: of every worker no longer running).
    A cgroup can only be removed once its last process is gone, so this retries for ``wait_s``."""
    for base in _worker_cgroup_bases():
        if pids is None:
            try:
                pids_found = [n[len(CGROUP_PREFIX) :] for n in os.listdir(base) if n.startswith(CGROUP_PREFIX)]
            except OSError:
                continue
            targets = [cgroup_name(int(p)) for p in pids_found if p.isdigit() and not _running(int(p))]
        else:
            targets = [cgroup_name(pid) for pid in pids]
        for name in targets:
            _rmdir(os.path.join(base, name), wait_s)


def _rmdir(path: str, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    while os.path.isdir(path):
        try:
            os.rmdir(path)
        except OSError:
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)


def make_worker_cgroup(memory_bytes: int, processes: int) -> None:
    """The cgroup every worker of this server is made in, beneath the server's own (a supervisor's limit on
    the server — systemd's MemoryMax, a container's — holds for its workers too), with a memory and process
    limit over all of them together. Where it cannot be made (not root, cgroup v2 without delegation) the
    workers' own limits still apply."""
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        return
    limits = {
        "memory": {"memory.limit_in_bytes": str(memory_bytes)},
        "pids": {"pids.max": str(processes)},
        "cpu": {},  # each worker has its own share (sandbox.cpus, engine.cpus); the parent only holds them
        "unified": {"memory.max": str(memory_bytes), "pids.max": str(processes)},
    }
    for controller, path in cgroup_dirs(parent_name(os.getpid())).items():
        try:
            os.makedirs(path, exist_ok=True)
            if controller == "unified":
                with open(os.path.join(os.path.dirname(path), "cgroup.subtree_control"), "w") as f:
                    f.write("+memory +pids +cpu")
                with open(os.path.join(path, "cgroup.subtree_control"), "w") as f:
                    f.write("+memory +pids +cpu")
            for name, value in limits[controller].items():
                if os.path.exists(os.path.join(path, name)):
                    with open(os.path.join(path, name), "w") as f:
                        f.write(value)
        except OSError as exc:
            log.info("the workers' cgroup %s could not be made: %s", path, exc.strerror)
            with contextlib.suppress(OSError):
                os.rmdir(path)


# What each App alive in this process bounds its workers to (memory bytes, processes): the process has one
# workers' cgroup, and two Apps in it (an embedding application's, a test's) share it — each App's own numbers
# re-made it for everyone, and the first to close removed it under the other's workers.
_BOUNDS: dict[int, tuple[int, int]] = {}
_BOUNDS_LOCK = threading.Lock()


def bound_workers(owner: object, memory_bytes: int, processes: int, ceiling: int) -> None:
    """Count ``owner``'s workers in the process's one workers' cgroup: its limits are the sum over the Apps alive
    in the process (memory at most ``ceiling``: the server's own limit, 80 % of the machine)."""
    with _BOUNDS_LOCK:
        _BOUNDS[id(owner)] = (memory_bytes, processes)
        make_worker_cgroup(min(sum(m for m, _ in _BOUNDS.values()), ceiling), sum(n for _, n in _BOUNDS.values()))


def unbound_workers(owner: object, ceiling: int) -> None:
    """``owner`` closed: the cgroup is removed with the last App of the process, else bound to the others' sum."""
    with _BOUNDS_LOCK:
        if _BOUNDS.pop(id(owner), None) is None:
            return
        if not _BOUNDS:
            remove_worker_cgroup()
        else:
            make_worker_cgroup(min(sum(m for m, _ in _BOUNDS.values()), ceiling), sum(n for _, n in _BOUNDS.values()))


def own_memory_limit() -> int | None:
    """The memory limit on the cgroup this process is in (a supervisor's), or None when there is none."""
    for controller, path in cgroup_dirs().items():
        name = "memory.limit_in_bytes" if controller == "memory" else "memory.max" if controller == "unified" else ""
        if not name:
            continue
        try:
            with open(os.path.join(path, name), encoding="ascii") as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:
            return int(text)
    return None


def remove_worker_cgroup() -> None:
    """Remove this server's workers' cgroup once its workers are gone (at shutdown)."""
    for path in cgroup_dirs(parent_name(os.getpid())).values():
        _rmdir(path, 0.5)


def sweep(sessions_dir: Path) -> None:
    """Remove what the workers of a server that was killed left: their cgroups (beneath a dead server's
    parent cgroup, or at a hierarchy's root) and their starting folders (named ``<server pid>-<random>``;
    anything of a server still running is left alone)."""
    remove_cgroups(None, wait_s=0)
    for base in set(cgroup_dirs().values()):
        try:
            parents = [n for n in os.listdir(base) if n.startswith(PARENT_PREFIX) and n[len(PARENT_PREFIX) :].isdigit()]
        except OSError:
            continue
        for name in parents:
            if _running(int(name[len(PARENT_PREFIX) :])):
                continue
            parent = os.path.join(base, name)
            with contextlib.suppress(OSError):
                for child in os.listdir(parent):
                    if child.startswith(CGROUP_PREFIX):
                        _rmdir(os.path.join(parent, child), 0)
            _rmdir(parent, 0)
    with contextlib.suppress(OSError):
        for entry in sessions_dir.iterdir():
            owner = entry.name.split("-", 1)[0]
            if owner.isdigit() and int(owner) != os.getpid() and not _running(int(owner)):
                shutil.rmtree(entry, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
