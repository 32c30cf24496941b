"""Confining the worker process: namespaces, a minimal root filesystem, an unprivileged user, limits.

``confine(options)`` runs first thing in the worker, while it is single-threaded and before any
user code exists. It applies what the operating system allows and returns the list of protections
that are active, which the worker reports to the server (and ``ba-mcp doctor`` shows):

* **cgroups** of its own (as root): a pids cgroup (process count) and a memory cgroup (all the
  worker's processes together, ``memory_mb``);
* a new **network namespace** (only a loopback interface, down): no network at all, and abstract
  Unix sockets of the host are out of reach (they belong to a network namespace);
* a new **PID namespace** with its own ``/proc``: the server and other processes are invisible, and
  when the worker (its PID 1) ends, every process it started ends too;
* a new **mount namespace** whose root is a fresh, read-only tmpfs holding only what Python needs:
  the interpreter's prefix, the virtual environment, the ``sandbox`` package, ``/usr`` and a few
  files of ``/etc``, all bind-mounted read-only, nosuid, nodev; a private minimal ``/dev`` (null,
  zero, full, random, urandom); a private ``/proc``; and one writable tmpfs of ``disk_mb`` (the
  session directory ``/session``, with ``/tmp`` inside it). Host files, host Unix sockets (docker.sock,
  dbus, ssh-agent), device nodes and the workspace do not exist there;
* an **unprivileged user**: as root, the worker switches to ``options["uid"]`` (default 65534) after
  the mounts; otherwise a user namespace maps the caller's own uid. Every capability is dropped
  (bounding set, securebits, capset) and ``no_new_privs`` is set;
* a **seccomp filter** (via libseccomp) refusing the system calls a sandbox never needs: execve and execveat (no
  program runs but the worker: S-18), mount,
  pivot_root, new namespaces (unshare, setns, clone with namespace flags), ptrace, kernel keyrings,
  bpf, perf events, userfaultfd, module and kexec loading, open_by_handle_at; a system call of another architecture
  (i386's ``int 0x80``, x32's) ends the whole worker at once (SIGSYS);
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
import platform
import resource
import signal
import sys
from typing import Any

from sandbox import protocol as P

Protection = tuple[str, str]  # (an id of sandbox.protocol, what it is)

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWCGROUP = 0x02000000

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
MNT_DETACH = 2

PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_NO_NEW_PRIVS = 38
# SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP, SECBIT_KEEP_CAPS_LOCKED, SECBIT_NO_CAP_AMBIENT_RAISE and their locks
_SECURE_NOROOT = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "arm64": 41}

DEVICES = ("null", "zero", "full", "random", "urandom")
SESSION_DIR = "/session"  # the worker's working directory and HOME, inside its own root
_STAGE = "/tmp"  # where the new root is assembled (a private tmpfs mounted over it first)


class _Libc:
    def __init__(self) -> None:
        self.lib = ctypes.CDLL(None, use_errno=True)

    def call(self, name: str, *args: Any) -> None:
        if getattr(self.lib, name)(*args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{name}: {os.strerror(err)}")

    def mount(self, source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
        enc = [None if v is None else v.encode() for v in (source, target, fstype, data)]
        self.call("mount", enc[0], enc[1], enc[2], flags, enc[3])


def confine(options: dict[str, Any]) -> list[Protection]:
    """Apply the isolation ``options`` asks for; return the protections now active.

    Options: ``network`` (True: keep the host network), ``uid``/``gid`` (used when running as root),
    ``disk_mb`` (size of the writable session tmpfs), and the limits ``memory_mb``, ``cpu_seconds``,
    ``max_processes``, ``max_file_mb``."""
    active: list[Protection] = []
    own_count = False  # whether RLIMIT_NPROC counts only the worker's processes
    linux = sys.platform.startswith("linux")
    options = {**options, "_root": os.geteuid() == 0}
    if linux and os.geteuid() == 0:
        active += _join_cgroups(options)
    if linux:
        try:
            active += _linux_namespaces(options)
            own_count = True
        except OSError as exc:
            active.append((P.DEGRADED, f"namespaces unavailable ({exc.strerror or exc})"))
    elif os.geteuid() == 0:
        _drop_root(options)
        active.append((P.UNPRIVILEGED_USER, f"unprivileged user (uid {os.getuid()})"))
    if options.get("address_space_if_no_cgroup") and any(pid == P.MEMORY_ALL_PROCESSES for pid, _ in active):
        # Engines (DuckDB, Arrow) reserve far more address space than they use: the cgroup bounds what they use.
        options = {**options, "memory_mb": 0}
    active += _limits(options, own_count)
    if linux:
        active.append(_seccomp())
    return active


# -- Linux namespaces and the minimal root -------------------------------------------------------


def _linux_namespaces(options: dict[str, Any]) -> list[Protection]:
    libc = _Libc()
    root = os.geteuid() == 0
    base = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | (0 if options.get("network") else CLONE_NEWNET)
    uid, gid = os.getuid(), os.getgid()
    # Without a user namespace an unprivileged process can create none of the others.
    libc.call("unshare", base if root else base | CLONE_NEWUSER)
    if not root:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    # descriptors of what the new root will show, opened before anything is hidden
    sources = _runtime_sources(options.get("packages", ()))
    sources += _bind_sources(options.get("binds", ()))
    _fork_into_pid_namespace(options)
    active = (
        [(P.NETWORK_NAMESPACE, "network namespace (no network, no host abstract sockets)")]
        if not options.get("network")
        else []
    )
    libc.mount(None, "/", None, MS_REC | MS_PRIVATE)
    _build_root(libc, sources, options)
    active.append(
        (
            P.READ_ONLY_ROOT,
            "minimal root filesystem (Python runtime read-only; no host files, sockets or workspace; "
            f"private /tmp and /session, {int(options.get('disk_mb') or 0)} MB)",
        )
    )
    active.append((P.PRIVATE_DEV, "private /dev (null, zero, full, random, urandom)"))
    try:
        libc.mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        active.append((P.PID_NAMESPACE, "pid namespace (own /proc; processes end with the worker)"))
    except OSError as exc:  # e.g. a container that masks parts of /proc
        active.append((P.PID_NAMESPACE, f"pid namespace (processes end with the worker; no /proc: {exc.strerror})"))
    libc.mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    if options.get("binds"):
        active.append((P.READ_ONLY_FILES, "data files bound read-only (the kernel refuses every write)"))
    os.chdir(SESSION_DIR)
    keep = tuple(options.get("keep_capabilities", ()))
    if root:
        _drop_root(options, keep)
    _drop_capabilities(libc, keep)
    kept = " except reading any file it is handed (CAP_DAC_READ_SEARCH)" if CAP_DAC_READ_SEARCH in keep else ""
    active.append((P.UNPRIVILEGED_USER, f"unprivileged user (uid {os.getuid()}), no capabilities{kept}"))
    return active


def _bind_sources(binds: Any) -> list[tuple[str, int | str]]:
    """(where the new root shows it, O_PATH descriptor) of each data file to bind read-only: ``binds`` is a
    list of [host path, target path]; a file that cannot be opened is left out (the worker reports it)."""
    sources: list[tuple[str, int | str]] = []
    for host, target in binds:
        with contextlib.suppress(OSError):
            sources.append((str(target), os.open(str(host), os.O_PATH | os.O_CLOEXEC)))
    return sources


def _runtime_sources(packages: Any = ()) -> list[tuple[str, int | str]]:
    """(absolute path, O_PATH descriptor — or the link's target for a symbolic link) of everything the
    worker's root shows: the interpreter's prefix, the virtual environment, the sandbox package (and the
    package directories in ``packages``), /usr and the library links, and the few files of /etc that the
    C library and Python read."""
    wanted: list[str] = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin"]
    wanted += ["/etc/ld.so.cache", "/etc/localtime", "/etc/nsswitch.conf", "/etc/fonts"]
    prefixes = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix)}
    wanted += sorted(prefixes)
    package = os.path.dirname(os.path.realpath(__file__))  # the sandbox package, wherever it is installed
    for entry in sys.path:
        real = os.path.realpath(entry) if entry else ""
        if not real or not os.path.isdir(real) or any(real == p or real.startswith(p + "/") for p in prefixes):
            continue
        if package.startswith(real + "/"):
            wanted.append(package)  # an editable install's project root: only the package, not the repository
        elif "site-packages" in real or "dist-packages" in real:
            wanted.append(real)
    for extra in [package, *(os.path.realpath(p) for p in packages)]:
        if not any(extra.startswith(w + "/") for w in wanted):
            wanted.append(extra)
    # Python finds modules by the paths as it was given them; where one runs through a symbolic link (a
    # temp folder's "current" link, a venv's folder linked elsewhere), the new root shows it there too.
    seen = (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, *sys.path, *map(str, packages))
    for given in seen:
        if not given or not os.path.isabs(given) or not os.path.isdir(given):
            continue
        real = os.path.realpath(given)
        covered = any(real == w or real.startswith(w + "/") for w in wanted)
        if given != real and covered and not any(given == w or given.startswith(w + "/") for w in wanted):
            wanted.append(given)
    sources: list[tuple[str, int | str]] = []
    for path in dict.fromkeys(wanted):
        if os.path.islink(path) and path.count("/") == 1:  # /lib -> usr/lib: the same link in the new root
            sources.append((path, os.readlink(path)))
            continue
        with contextlib.suppress(OSError):
            sources.append((path, os.open(path, os.O_PATH | os.O_CLOEXEC)))
    return sources


def _build_root(libc: _Libc, sources: list[tuple[str, int | str]], options: dict[str, Any]) -> None:
    """Assemble the new root on a private tmpfs and pivot into it."""
    uid, gid = _ids(options)
    new = _STAGE
    libc.mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")
    # The one writable place first: the session directory (cwd, HOME) with /tmp inside it, one size
    # limit. A runtime that lives under /tmp (a checkout there) is bound beneath it, read-only.
    os.makedirs(new + SESSION_DIR)
    size = max(int(options.get("disk_mb") or 1024), 1)
    libc.mount("tmpfs", new + SESSION_DIR, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0700,uid={uid},gid={gid},size={size}m")
    os.makedirs(new + SESSION_DIR + "/.tmp", mode=0o1777)
    os.chmod(new + SESSION_DIR + "/.tmp", 0o1777)
    os.makedirs(new + "/tmp")
    libc.mount(new + SESSION_DIR + "/.tmp", new + "/tmp", None, MS_BIND)
    for path, source in sources:
        if path.split("/")[1] in ("dev", "proc", "session"):
            raise OSError(
                errno.EINVAL, f"the Python runtime lies under /{path.split('/')[1]}, which the sandbox replaces"
            )
        target = new + path
        if isinstance(source, str):
            os.symlink(source, target)
            continue
        is_dir = os.path.isdir(f"/proc/self/fd/{source}")
        os.makedirs(target if is_dir else os.path.dirname(target), exist_ok=True)
        if not is_dir:
            open(target, "a").close()
        libc.mount(f"/proc/self/fd/{source}", target, None, MS_BIND | MS_REC)
        _remount_read_only(libc, target)
        os.close(source)
    os.makedirs(new + "/etc", exist_ok=True)
    _write(new + "/etc/passwd", f"root:x:0:0::/:/bin/false\nsandbox:x:{uid}:{gid}::{SESSION_DIR}:/bin/false\n")
    _write(new + "/etc/group", f"root:x:0:\nsandbox:x:{gid}:\n")
    # /dev: a tmpfs of its own with only harmless devices bound in; nothing else can be a device.
    os.makedirs(new + "/dev")
    libc.mount("tmpfs", new + "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
    for name in DEVICES:
        open(f"{new}/dev/{name}", "a").close()
        libc.mount(f"/dev/{name}", f"{new}/dev/{name}", None, MS_BIND)
        libc.mount(None, f"{new}/dev/{name}", None, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1")):
        os.symlink(target, f"{new}/dev/{name}")
    os.symlink("/proc/self/fd/2", f"{new}/dev/stderr")
    os.makedirs(new + "/dev/shm")
    libc.mount("tmpfs", new + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777,size=64m")
    libc.mount(None, new + "/dev", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
    os.makedirs(new + "/proc")
    _pivot(libc, new)


def _pivot(libc: _Libc, new: str) -> None:
    """pivot_root(new, new) then detach the old root: nothing of the host's tree stays reachable."""
    number = _SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise OSError(errno.ENOSYS, f"pivot_root: unknown architecture {platform.machine()}")
    os.chdir(new)
    if libc.lib.syscall(number, b".", b".") != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"pivot_root: {os.strerror(err)}")
    libc.call("umount2", b".", MNT_DETACH)
    os.chdir("/")


def _remount_read_only(libc: _Libc, target: str) -> None:
    """Read-only, nosuid, nodev — keeping the flags the kernel locks on a bind of that mount."""
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
    try:
        libc.mount(None, target, None, flags)
    except OSError:  # locked flags (noexec, atime) of the source must be repeated
        st = os.statvfs(target)
        for bit, flag in ((os.ST_NOEXEC, MS_NOEXEC), (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME)):
            if st.f_flag & bit:
                flags |= flag
        if st.f_flag & os.ST_RELATIME:
            flags |= MS_RELATIME
        libc.mount(None, target, None, flags)


def _fork_into_pid_namespace(options: dict[str, Any]) -> None:
    """Fork: the child is PID 1 of the new namespace and returns; this process becomes the shim, which
    takes the worker's uid (so it may forward signals) and drops every capability."""
    pid = os.fork()
    if pid == 0:
        return
    for fd in options.get("close_in_shim", ()):
        with contextlib.suppress(OSError):
            os.close(fd)

    def forward(signum: int, _frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signum)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # waited for with sigtimedwait below
    with contextlib.suppress(OSError):
        if os.geteuid() == 0:
            _drop_root(options)
        _drop_capabilities(_Libc())
    # The server may die without a word (SIGKILL): the shim then has another parent, and ends the worker
    # (PID 1 of its namespace: every process in it ends with it) instead of leaving it running.
    server = os.getppid()
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
        if done:
            break
        if os.getppid() != server:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        signal.sigtimedwait([signal.SIGCHLD], 0.2)
    if os.WIFSIGNALED(status):
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status))


# -- cgroups --------------------------------------------------------------------------------------

CGROUP_PREFIX = "ba-mcp-sandbox-"


def cgroup_name(pid: int) -> str:
    return f"{CGROUP_PREFIX}{pid}"


CONTROLLERS = ("pids", "memory", "cpu")  # the cgroup v1 controllers a worker is limited by
CPU_PERIOD_US = 100_000
PARENT_PREFIX = "ba-mcp-"  # + the server's pid: the one cgroup holding every worker of that server


def parent_name(server_pid: int) -> str:
    return f"{PARENT_PREFIX}{server_pid}"


def cgroup_dirs(parent: str | None = None) -> dict[str, str]:
    """Where worker cgroups are made, by controller (cgroup v1 hierarchies, or v2 unified): beneath the cgroup
    this process is in (a supervisor's limit on the server holds for its workers too), in ``parent`` when
    given."""
    own = _own_cgroups()
    found: dict[str, str] = {}
    for line in _mounts_raw():
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        options = set(fields[-1].split(","))
        mount_root = fields[3]  # the cgroup path the mount shows as its root
        if fstype == "cgroup":
            for controller in CONTROLLERS:
                if controller in options and controller not in found:
                    found[controller] = _beneath(fields[4], mount_root, own.get(controller, "/"), parent)
        elif fstype == "cgroup2" and "unified" not in found:
            found["unified"] = _beneath(fields[4], mount_root, own.get("", "/"), parent)
    return _one_kind(found)


def _one_kind(found: dict[str, str]) -> dict[str, str]:
    """cgroup v1 controllers where there are any (a hybrid host also mounts an empty v2 hierarchy), else v2."""
    v1 = {k: v for k, v in found.items() if k != "unified"}
    return v1 or found


def mount_points() -> dict[str, str]:
    """The roots of the cgroup hierarchies, by controller."""
    found: dict[str, str] = {}
    for line in _mounts_raw():
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        options = set(fields[-1].split(","))
        if fstype == "cgroup":
            for controller in CONTROLLERS:
                if controller in options:
                    found.setdefault(controller, fields[4])
        elif fstype == "cgroup2":
            found.setdefault("unified", fields[4])
    return _one_kind(found)


def _beneath(mount_point: str, mount_root: str, own: str, parent: str | None) -> str:
    relative = own[len(mount_root) :] if own.startswith(mount_root) else own
    path = os.path.join(mount_point, relative.lstrip("/"))
    return os.path.join(path, parent) if parent else path


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per controller ("" for v2), from /proc/self/cgroup."""
    found: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for controller in controllers.split(",") if controllers else [""]:
                    found[controller] = path
    except (OSError, ValueError):
        pass
    return found


def _join_cgroups(options: dict[str, Any]) -> list[Protection]:
    """Root is exempt from RLIMIT_NPROC, and RLIMIT_AS is per process: a pids and a memory cgroup bound
    the worker and everything it starts together."""
    parent = options.get("cgroup_parent")
    bases = cgroup_dirs(parent) if parent else {}
    if not bases or not all(os.path.isdir(b) for b in bases.values()):
        bases = mount_points()  # the server could not make its parent (cgroup v2 delegation): the hierarchy's root
    size = str(int(options.get("memory_mb") or 0) * 1024 * 1024)
    quota = str(max(1000, int(float(options.get("cpus") or 0) * CPU_PERIOD_US)))
    v1 = {
        "pids": {"pids.max": str(options.get("max_processes"))},
        "memory": {"memory.limit_in_bytes": size},
        "cpu": {"cpu.cfs_period_us": str(CPU_PERIOD_US), "cpu.cfs_quota_us": quota},
    }
    v2 = {
        "pids": {"pids.max": str(options.get("max_processes"))},
        "memory": {"memory.max": size, "memory.swap.max": "0"},
        "cpu": {"cpu.max": f"{quota} {CPU_PERIOD_US}"},
    }
    limits = [c for c, key in (("pids", "max_processes"), ("memory", "memory_mb"), ("cpu", "cpus")) if options.get(key)]
    done: list[str] = []
    for controller in limits:
        base, files = bases.get(controller), v1[controller]
        if base is None and "unified" in bases:
            base, files = bases["unified"], v2[controller]
        if base is None:
            continue
        path = os.path.join(base, cgroup_name(os.getpid()))
        try:
            os.makedirs(path, exist_ok=True)
            present = [name for name in files if os.path.exists(os.path.join(path, name))]
            if not present:  # the controller is not enabled here (cgroup v2 without it in subtree_control)
                raise OSError(f"no {controller} limit files")
            for name in present:
                _write(os.path.join(path, name), files[name])
            _write(os.path.join(path, "cgroup.procs"), str(os.getpid()))
            done.append(controller)
        except OSError:
            with contextlib.suppress(OSError):
                os.rmdir(path)
    out: list[Protection] = []
    if "pids" in limits:
        out.append(
            (P.PROCESS_COUNT, f"processes {options['max_processes']} (pids cgroup)")
            if "pids" in done
            else (
                P.DEGRADED,
                "process count: not limited (root is exempt from RLIMIT_NPROC and no pids cgroup is writable)",
            )
        )
    if "memory" in limits:
        out.append(
            (P.MEMORY_ALL_PROCESSES, f"memory {options['memory_mb']} MB for all the worker's processes (memory cgroup)")
            if "memory" in done
            else (P.DEGRADED, "memory: per process only (no memory cgroup is writable)")
        )
    if "cpu" in limits:
        out.append(
            (P.CPU_SHARE, f"cpu {float(options['cpus']):g} cores for all the worker's processes (cpu cgroup)")
            if "cpu" in done
            else (P.DEGRADED, "cpu: not limited to a share of the cores (no cpu cgroup is writable)")
        )
    return out


def _mounts_raw() -> list[str]:
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
        return f.readlines()


# -- user and capabilities ------------------------------------------------------------------------


def _ids(options: dict[str, Any]) -> tuple[int, int]:
    if os.geteuid() != 0:
        return os.getuid(), os.getgid()
    return int(options.get("uid", 65534)), int(options.get("gid", 65534))


CAP_DAC_READ_SEARCH = 2  # read any file (and search any directory) — of those the process can reach at all
PR_SET_KEEPCAPS = 8


def _drop_root(options: dict[str, Any], keep: tuple[int, ...] = ()) -> None:
    uid, gid = _ids(options)
    if keep:  # permitted capabilities survive the change of uid; _drop_capabilities keeps only ``keep``
        _Libc().call("prctl", PR_SET_KEEPCAPS, 1, 0, 0, 0)
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def _drop_capabilities(libc: _Libc, keep: tuple[int, ...] = ()) -> None:
    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    for cap in range(64):  # the bounding set: nothing can be regained through execve
        if cap in keep:
            continue
        if libc.lib.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == errno.EINVAL:
            break
    with contextlib.suppress(OSError):  # uid 0 gets no capabilities back on execve or setuid
        libc.call("prctl", PR_SET_SECUREBITS, _SECURE_NOROOT, 0, 0, 0)
    header = Header(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (Data * 2)()
    for cap in keep:
        data[cap // 32].effective |= 1 << (cap % 32)
        data[cap // 32].permitted |= 1 << (cap % 32)
    libc.call("capset", ctypes.byref(header), ctypes.byref(data))
    libc.call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


# -- seccomp --------------------------------------------------------------------------------------

# System calls a data-analysis sandbox never needs, refused with EPERM. ``execve``/``execveat`` first (S-18): once
# the worker runs, no other program does — no shell, no compiler, no binary a cell wrote (a library that would shell
# out gets EPERM: ``subprocess`` raises PermissionError, ``os.system`` returns 127).
DENIED_SYSCALLS = (
    "execve",
    "execveat",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "open_by_handle_at",
    "name_to_handle_at",
    "fsopen",
    "fsmount",
    "move_mount",
    "open_tree",
    "syslog",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
    # io_uring reaches the kernel around the filter (its operations are not system calls seccomp sees)
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
)


def _seccomp() -> Protection:
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError, RuntimeError) as exc:  # no libseccomp on this machine
        return (P.DEGRADED, f"seccomp: not active (libseccomp unavailable: {exc})")
    try:
        flt = seccomp.SyscallFilter(seccomp.ALLOW)
        _end_on_foreign_architecture(seccomp, flt)
        eperm = seccomp.ERRNO(errno.EPERM)
        for name in DENIED_SYSCALLS:
            with contextlib.suppress(Exception):  # a call this architecture does not have
                flt.add_rule(eperm, name)
        # New namespaces through clone(2); clone3 passes its flags in memory, so it answers ENOSYS
        # and the C library falls back to clone.
        for flag in (
            CLONE_NEWUSER,
            CLONE_NEWNS,
            CLONE_NEWPID,
            CLONE_NEWNET,
            CLONE_NEWIPC,
            CLONE_NEWUTS,
            CLONE_NEWCGROUP,
        ):
            flt.add_rule(eperm, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
        with contextlib.suppress(Exception):
            flt.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
        flt.load()
    except Exception as exc:
        return (P.DEGRADED, f"seccomp: not active ({exc})")
    return (
        P.SECCOMP_FILTER,
        "seccomp filter (no other program, mount, namespaces, ptrace, keyrings, bpf, perf, io_uring, module loading)",
    )


def _end_on_foreign_architecture(seccomp: Any, flt: Any) -> None:
    """A system call of another architecture than the filter's — i386's ``int 0x80``, an x32 call (``nr |
    0x40000000``) on x86_64 — reaches none of the rules above, which name this architecture's numbers: it ends the
    whole worker at once (SIGSYS), never just its thread. libseccomp's default for it kills the calling thread only,
    so a worker whose cell thread made one stopped answering until its timeout. With a libseccomp or kernel that has
    no "kill the process" (before 2.4 / 4.14) the call fails with ENOSYS instead: refused either way."""
    try:
        flt.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)
    except Exception:
        flt.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.ERRNO(errno.ENOSYS))


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as f:
        f.write(text)


# -- resource limits ------------------------------------------------------------------------------


def _limits(options: dict[str, Any], own_count: bool) -> list[Protection]:
    active: list[Protection] = []
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if options.get("memory_mb"):
        size = int(options["memory_mb"]) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size, size))
        active.append((P.MEMORY_PER_PROCESS, f"memory (address space) {options['memory_mb']} MB per process"))
    if options.get("cpu_seconds"):
        seconds = int(options["cpu_seconds"])
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))
        active.append((P.CPU_TIME, f"CPU time {seconds} s per worker"))
    if options.get("max_file_mb"):
        size = int(options["max_file_mb"]) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an oversized write fails with EFBIG instead
        active.append((P.FILE_SIZE, f"file size {options['max_file_mb']} MB"))
    if options.get("max_processes") and not options.get("_root"):  # started as root: the pids cgroup, above
        if not own_count:
            # Outside a user namespace the count includes every process of the user, so the limit
            # could stop the worker's own threads.
            active.append((P.DEGRADED, "process count: not limited (no user namespace)"))
        else:
            n = int(options["max_processes"])
            resource.setrlimit(resource.RLIMIT_NPROC, (n, n))
            active.append((P.PROCESS_COUNT, f"processes {n}"))
    return active
