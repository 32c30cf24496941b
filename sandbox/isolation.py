"""Confining the worker process: namespaces, a read-only filesystem, an unprivileged user, limits.

``confine(options)`` runs first thing in the worker, while it is single-threaded and before any
user code exists. It applies what the operating system allows and returns the list of protections
that are active, which the worker reports to the server (and ``ba-mcp doctor`` shows):

* a new **network namespace** (only a loopback interface, down): no network at all;
* a new **PID namespace** with its own ``/proc``: the server and other processes are invisible, and
  when the worker (its PID 1) ends, every process it started ends too;
* a new **mount namespace** in which every mount is read-only except the sessions directory;
* an **unprivileged user**: as root, the worker switches to ``options["uid"]`` (default nobody);
  otherwise a user namespace maps the caller's own uid and capabilities are dropped after setup;
* **resource limits** (RLIMIT_AS, RLIMIT_CPU, RLIMIT_NPROC, RLIMIT_FSIZE, no core files).

On Linux a PID namespace needs a fork: the process the server started stays outside as a small
shim that forwards SIGINT/SIGTERM and exits with the worker's status, and the worker continues in
the child. Everything degrades step by step: what cannot be applied is reported, not faked.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import resource
import signal
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MS_STRICTATIME = 1 << 24

_LOCKED_FLAGS = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
    "strictatime": MS_STRICTATIME,
}

PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_NO_NEW_PRIVS = 38
# SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP, SECBIT_KEEP_CAPS_LOCKED, SECBIT_NO_CAP_AMBIENT_RAISE and their locks
_SECURE_NOROOT = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _Libc:
    def __init__(self) -> None:
        self.lib = ctypes.CDLL(None, use_errno=True)

    def call(self, name: str, *args: Any) -> None:
        if getattr(self.lib, name)(*args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{name}: {os.strerror(err)}")


def confine(options: dict[str, Any]) -> list[str]:
    """Apply the isolation ``options`` asks for; return the protections now active.

    Options: ``writable`` (the one directory left writable), ``network`` (True: keep the host
    network), ``uid``/``gid`` (used when running as root), and the limits ``memory_mb``,
    ``cpu_seconds``, ``max_processes``, ``max_file_mb``."""
    active: list[str] = []
    own_count = False  # whether RLIMIT_NPROC counts only the worker's processes
    if sys.platform.startswith("linux") and options.get("max_processes") and os.geteuid() == 0:
        active.append(_join_pids_cgroup(int(options["max_processes"])))
    if sys.platform.startswith("linux"):
        try:
            active += _linux_namespaces(options)
            own_count = True
        except OSError as exc:
            active.append(f"namespaces unavailable ({exc.strerror or exc})")
    elif os.geteuid() == 0:
        _drop_root(options)
        active.append(f"unprivileged user (uid {os.getuid()})")
    active += _limits(options, own_count)
    return active


# -- Linux namespaces -----------------------------------------------------------------------------


def _linux_namespaces(options: dict[str, Any]) -> list[str]:
    libc = _Libc()
    root = os.geteuid() == 0
    base = CLONE_NEWNS | CLONE_NEWPID | (0 if options.get("network") else CLONE_NEWNET)
    uid, gid = os.getuid(), os.getgid()
    # Without a user namespace an unprivileged process can create none of the others.
    libc.call("unshare", base if root else base | CLONE_NEWUSER)
    if not root:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    _fork_into_pid_namespace(options)
    active = ["network namespace (no network)"] if not options.get("network") else []
    libc.call("mount", None, b"/", None, MS_REC | MS_PRIVATE, None)
    try:
        libc.call("mount", b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        active.append("pid namespace (own /proc; processes end with the worker)")
    except OSError as exc:  # e.g. a container that masks parts of /proc: the host's processes stay listed
        active.append(f"pid namespace (processes end with the worker; /proc not replaced: {exc.strerror})")
    failed = _read_only_except(libc, os.path.realpath(options["writable"]))
    active.append(
        "read-only filesystem except the sessions directory"
        + (f" ({len(failed)} mounts could not be made read-only: {', '.join(failed[:3])})" if failed else "")
    )
    _drop_capabilities(libc)
    if root:
        active.append("no capabilities (uid 0 without privileges: it can read files root owns)")
    else:
        active.append(f"user namespace, no capabilities (uid {os.getuid()})")
    return active


def _fork_into_pid_namespace(options: dict[str, Any]) -> None:
    """Fork: the child is PID 1 of the new namespace and returns; this process becomes the shim."""
    pid = os.fork()
    if pid == 0:
        return
    for fd in options.get("close_in_shim", ()):
        with contextlib.suppress(OSError):
            os.close(fd)

    def forward(signum: int, _frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    with contextlib.suppress(OSError):
        _drop_capabilities(_Libc())
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except ChildProcessError:
            os._exit(1)
    if os.WIFSIGNALED(status):
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status))


def pids_cgroup_dirs() -> list[str]:
    """Where a pids cgroup for a worker can be made (cgroup v1 ``pids`` hierarchy, or v2 unified)."""
    found = []
    for line in _mounts_raw():
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        if (fstype == "cgroup" and "pids" in fields[-1].split(",")) or fstype == "cgroup2":
            found.append(fields[4])
    return found


CGROUP_PREFIX = "ba-mcp-sandbox-"


def cgroup_name(pid: int) -> str:
    return f"{CGROUP_PREFIX}{pid}"


def _join_pids_cgroup(limit: int) -> str:
    """Root is exempt from RLIMIT_NPROC, so a pids cgroup bounds its process count instead."""
    for base in pids_cgroup_dirs():
        path = os.path.join(base, cgroup_name(os.getpid()))
        try:
            os.makedirs(path, exist_ok=True)
            _write(os.path.join(path, "pids.max"), str(limit))
            _write(os.path.join(path, "cgroup.procs"), str(os.getpid()))
            return f"processes {limit} (pids cgroup)"
        except OSError:
            with contextlib.suppress(OSError):
                os.rmdir(path)
    return "process count: not limited (root is exempt from RLIMIT_NPROC and no pids cgroup is writable)"


def _read_only_except(libc: _Libc, writable: str) -> list[str]:
    """Bind ``writable`` onto itself, then remount every other mount read-only. Returns failures."""
    libc.call("mount", writable.encode(), writable.encode(), None, MS_BIND | MS_REC, None)
    failed = []
    for target, opts in _mounts():
        if target == writable or target.startswith(writable + "/") or "ro" in opts:
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for opt in opts:
            flags |= _LOCKED_FLAGS.get(opt, 0)
        try:
            libc.call("mount", None, target.encode(), None, flags, None)
        except OSError:
            failed.append(target)
    return failed


def _mounts() -> list[tuple[str, set[str]]]:
    """(mount point, per-mount options) of every mount, parents first."""
    out = []
    for line in _mounts_raw():
        fields = line.split()
        target = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        out.append((target, set(fields[5].split(","))))
    return out


def _mounts_raw() -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
        return f.readlines()


def _drop_root(options: dict[str, Any]) -> None:
    uid, gid = int(options.get("uid", 65534)), int(options.get("gid", 65534))
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def _drop_capabilities(libc: _Libc) -> None:
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    for cap in range(64):  # the bounding set: nothing can be regained through execve
        if libc.lib.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break
    with contextlib.suppress(OSError):  # uid 0 gets no capabilities back on execve or setuid
        libc.call("prctl", PR_SET_SECUREBITS, _SECURE_NOROOT, 0, 0, 0)
    header = Header(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (Data * 2)()
    libc.call("capset", ctypes.byref(header), ctypes.byref(data))
    libc.call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


# -- resource limits ------------------------------------------------------------------------------


def _limits(options: dict[str, Any], own_count: bool) -> list[str]:
    active = []
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if options.get("memory_mb"):
        size = int(options["memory_mb"]) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
        active.append(f"memory (address space) {options['memory_mb']} MB")
    if options.get("cpu_seconds"):
        seconds = int(options["cpu_seconds"])
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))
        active.append(f"CPU time {seconds} s per worker")
    if options.get("max_file_mb"):
        size = int(options["max_file_mb"]) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails with EFBIG instead
        active.append(f"file size {options['max_file_mb']} MB")
    if options.get("max_processes") and os.getuid() != 0:  # root: the pids cgroup, above
        if not own_count:
            # Outside a user namespace the count includes every process of the user, so the limit
            # could stop the worker's own threads.
            active.append("process count: not limited (no user namespace)")
        else:
            n = int(options["max_processes"])
            resource.setrlimit(resource.RLIMIT_NPROC, (n, n))
            active.append(f"processes {n}")
    return active
