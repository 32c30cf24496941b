"""Warm-up at low CPU priority: a worker started ahead of any call (a spare) runs lowered, so the kernel gives the
processes of a call the CPU first, and is raised to normal the moment a call takes it (issue 65).

A worker is only ever lowered by a lever that can raise it again, since the spare becomes a session's worker. Each
lever is pulled where it works; none needs the others:

* **its autogroup** (Linux's ``CONFIG_SCHED_AUTOGROUP``, on by default on desktop distributions): every worker starts
  a session of its own (``start_new_session``), so the kernel weighs its autogroup against other programs' and the
  process's own nice value only against its siblings. The autogroup's nice (``/proc/<pid>/autogroup``) may be set
  between 0 and 19 by the process's owner, in both directions, without privilege;
* **its cpu cgroup's weight**, where the workers have cgroups (the server may make them: root): ``cpu.shares`` 2
  (v1) or ``cpu.weight`` 1 (v2) while lowered, the defaults (1024, 100) after. The worker's cgroup is made here if
  the worker has not made it yet (its shim makes it with ``exist_ok``), so the lowering covers its start-up imports;
* **the processes' nice value**, only where the server may lower it again afterwards (root or CAP_SYS_NICE: without
  them a nice value only goes up).
"""

from __future__ import annotations

import contextlib
import os

from sandbox.isolation import cgroup_dirs, cgroup_name, mount_points, parent_name

LOW_NICE = 19
_CPU_FILES = {"cpu": ("cpu.shares", "2", "1024"), "unified": ("cpu.weight", "1", "100")}


def lower(pid: int) -> None:
    """Lower the worker whose shim is ``pid`` (and what it starts) to the lowest CPU priority that can be undone."""
    _set(pid, low=True)


def restore(pid: int) -> None:
    """Give the worker whose shim is ``pid`` its normal CPU priority again (every lever ``lower`` pulled)."""
    _set(pid, low=False)


def _set(pid: int, low: bool) -> None:
    with contextlib.suppress(OSError), open(f"/proc/{pid}/autogroup", "w", encoding="ascii") as f:
        f.write(str(LOW_NICE if low else 0))
    for path, name, value in _cgroup_files(pid, low):
        with contextlib.suppress(OSError):
            if low:
                os.makedirs(path, exist_ok=True)  # the shim joins it when it gets there
            with open(os.path.join(path, name), "w", encoding="ascii") as f:
                f.write(value)
    if _may_raise():
        for each in [pid, *_descendants(pid)]:
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, each, LOW_NICE if low else 0)


def _cgroup_files(pid: int, low: bool) -> list[tuple[str, str, str]]:
    """(the worker's cgroup folder, the weight file, the value) for each cpu hierarchy the server's workers use."""
    if os.geteuid() != 0:
        return []  # workers get cgroups only where the server can make them
    bases = cgroup_dirs(parent_name(os.getpid()))
    if not all(os.path.isdir(b) for b in bases.values()):
        bases = mount_points()  # as the worker's shim decides (``isolation._join_cgroups``)
    found = []
    for controller, (name, lowered, normal) in _CPU_FILES.items():
        base = bases.get(controller)
        if base is not None and os.path.isdir(base):
            found.append((os.path.join(base, cgroup_name(pid)), name, lowered if low else normal))
    return found


def _may_raise() -> bool:
    """Whether this process may lower a nice value (raise a priority) again: root, or CAP_SYS_NICE (bit 23)."""
    if os.geteuid() == 0:
        return True
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            eff = next((line.split()[1] for line in f if line.startswith("CapEff:")), "0")
        return bool(int(eff, 16) & (1 << 23))
    except (OSError, ValueError):
        return False


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        try:
            with open(f"/proc/{current}/task/{current}/children", encoding="ascii") as f:
                kids = [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            kids = []
        found += kids
        todo += kids
    return found
