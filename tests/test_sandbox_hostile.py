"""The hostile list of S-4 (issue 8) through a real MCP session over stdio, with the import guardrail off
(``*``): user code may import os, ctypes, socket, so the process boundary is shown to hold on its own."""

from __future__ import annotations

import platform
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, stdio_client

from tests.conftest import make_workspace, server_rss, text_of
from tests.sandbox_common import SECRET, failed, ok, run, sandbox_params

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.slow,  # the sandbox's kernel boundaries, attacked
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox's isolation is Linux-specific"),
]


@pytest.fixture(scope="module")
async def raw(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[ClientSession, Path]]:
    """The guardrail off: user code may import os, ctypes, socket — the boundary must still hold."""
    ws = make_workspace(tmp_path_factory.mktemp("rawroot"))
    params = sandbox_params(ws, BA_MCP_SANDBOX__ALLOWED_IMPORTS="*")
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        yield s, ws


async def test_code_that_ignores_the_interrupt_is_killed_and_the_state_is_lost(
    raw: tuple[ClientSession, Path],
) -> None:
    s, _ = raw
    ok(await run(s, "doomed = 1"))
    code = "while True:\n    try:\n        while True:\n            pass\n    except KeyboardInterrupt:\n        pass"
    text = failed(await run(s, code, timeout=1), "timeout", "TIMEOUT_KILLED")
    assert "killed" in text and "lost" in text
    text = ok(await run(s, "'doomed' in dir()"))
    assert "False" in text and "fresh interpreter" in text


async def test_fork_bomb_is_contained(raw: tuple[ClientSession, Path]) -> None:
    s, _ = raw
    result = await run(s, "import os\nwhile True:\n    os.fork()", timeout=20)
    text = text_of(result)
    assert result.is_error and ("BlockingIOError" in text or "Resource temporarily unavailable" in text), text
    after = ok(await run(s, "import os\nsorted(int(p) for p in os.listdir('/proc') if p.isdigit())"))
    assert "[1]" in after  # the worker is alone again in its PID namespace


async def test_allocating_64_gb_fails_with_memory_error_and_the_worker_lives(raw: tuple[ClientSession, Path]) -> None:
    s, _ = raw
    ok(await run(s, "alive = True"))
    text = failed(await run(s, "block = bytearray(64 * 1024**3)"), "resource_error", "OUT_OF_MEMORY")
    assert "MemoryError" in text
    assert "True" in ok(await run(s, "alive"))


async def test_os_exit_and_segfault_restart_the_worker(raw: tuple[ClientSession, Path]) -> None:
    s, _ = raw
    text = failed(await run(s, "import os\nos._exit(3)"), "execution_error", "WORKER_CRASHED")
    assert "exited with code 3" in text and "state was lost" in text
    assert "fresh interpreter" in ok(await run(s, "1"))
    text = failed(await run(s, "import ctypes\nctypes.string_at(0)"), "execution_error", "WORKER_CRASHED")
    assert "SIGSEGV" in text
    for real in (sys.prefix, sys.base_prefix, str(Path(__file__).parent.parent), "site-packages"):
        assert real not in text, text  # the crash report shows no real path (issue 8 item 12)
    assert "2" in ok(await run(s, "1 + 1"))


async def test_user_code_cannot_read_the_servers_environment(raw: tuple[ClientSession, Path]) -> None:
    s, _ = raw
    code = (
        "import os\nfound = []\n"
        "for pid in os.listdir('/proc'):\n"
        "    try:\n        found.append(open(f'/proc/{pid}/environ', 'rb').read().decode(errors='replace'))\n"
        "    except OSError:\n        pass\n"
        "print(sorted(os.environ))\nprint(found)"
    )
    text = ok(await run(s, code))
    assert SECRET not in text and "SERVER_SECRET_TOKEN" not in text and "BA_MCP_WORKSPACE" not in text
    assert "'PATH'" in text and "'HOME'" in text


async def test_no_network_not_even_loopback(raw: tuple[ClientSession, Path]) -> None:
    s, _ = raw
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        code = f"import socket\ns = socket.socket()\ns.settimeout(3)\ns.connect(('127.0.0.1', {port}))"
        text = failed(await run(s, code), "execution_error")
        assert "OSError" in text or "unreachable" in text
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()


async def test_writes_outside_the_session_directory_fail(raw: tuple[ClientSession, Path]) -> None:
    s, ws = raw
    outside = [ws / "uploads" / "evil.txt", ws / "evil.txt", Path("/evil"), Path("/usr/evil")]
    for path in outside:
        text = failed(await run(s, f"open({str(path)!r}, 'w').write('x')"), "execution_error")
        assert any(w in text for w in ("Read-only file system", "Permission denied", "No such file")), text
        assert not path.exists()
    private_tmp = Path("/tmp") / f"evil-{uuid.uuid4().hex}"  # the sandbox's /tmp is its own
    ok(await run(s, f"open({str(private_tmp)!r}, 'w').write('x')"))
    assert not private_tmp.exists()
    where = ok(await run(s, "open('mine.txt', 'w').write('kept')\nimport os\nos.getcwd()"))
    assert "'/session'" in where and str(ws) not in where  # no real path (S-1)
    assert "kept" in ok(await run(s, "open('mine.txt').read()"))
    assert not list((ws / "sessions").rglob("mine.txt"))  # the session's files never touch the host


async def test_files_over_the_size_limit_cannot_be_written(raw: tuple[ClientSession, Path]) -> None:
    s, _ = raw
    code = "with open('big.bin', 'wb') as f:\n    f.write(b'0' * (25 * 1024 * 1024))"
    text = failed(await run(s, code), "execution_error", "PYTHON_EXCEPTION")
    assert "File too large" in text
    assert "True" in ok(await run(s, "import os\nos.path.getsize('big.bin') <= 20 * 1024 * 1024"))
    assert "ok" in ok(await run(s, "os.remove('big.bin')\n'ok'"))


async def test_the_session_has_a_disk_quota(raw: tuple[ClientSession, Path]) -> None:
    """Issue 8 item 10: 300 files x 4 MiB under a 64 MB quota stop at the quota, not at the host's disk."""
    s, _ = raw
    code = (
        "import os\nos.makedirs('many', exist_ok=True)\nwritten = 0\ntry:\n    for i in range(300):\n"
        "        with open(f'many/{i}.bin', 'wb') as f:\n            f.write(b'1' * (4 * 1024 * 1024))\n"
        "        written += 1\nexcept OSError as exc:\n    print('stopped:', exc)\nwritten"
    )
    text = ok(await run(s, code))
    assert "No space left on device" in text, text
    assert int(text.strip().splitlines()[-1]) < 20
    ok(await run(s, "import shutil\nshutil.rmtree('many')"))


async def test_no_host_devices_only_a_minimal_dev(raw: tuple[ClientSession, Path]) -> None:
    """Issue 8 item 3: the host's /dev (loop devices, kmsg, disks) does not exist in the sandbox."""
    s, _ = raw
    listing = ok(await run(s, "import os\nsorted(os.listdir('/dev'))"))
    assert "'null'" in listing and "'urandom'" in listing
    for name in ("loop0", "loop-control", "kmsg", "sda", "vda", "mem", "kvm", "fuse", "mapper"):
        assert f"'{name}'" not in listing
    for dev in ("/dev/loop0", "/dev/kmsg", "/dev/sda", "/dev/mem", "/dev/loop-control"):
        text = failed(await run(s, f"open({dev!r}, 'rb')"), "execution_error")
        assert "No such file" in text or "Permission denied" in text, text
    made = failed(await run(s, "import os\nos.mknod('zero2', 0o20600, os.makedev(1, 5))"), "execution_error")
    assert "Operation not permitted" in made or "Read-only" in made
    assert "b'\\x00\\x00'" in ok(await run(s, "open('/dev/zero', 'rb').read(2)"))


async def test_host_unix_sockets_are_unreachable(raw: tuple[ClientSession, Path], tmp_path: Path) -> None:
    """Issue 8 item 4: a host AF_UNIX socket (as docker.sock, dbus, ssh-agent would be) and an abstract one."""
    s, _ = raw
    path = tmp_path / "host.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(1)
    listener.settimeout(0.5)
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(b"\0ba-mcp-test-" + uuid.uuid4().hex.encode())
    abstract.listen(1)
    abstract.settimeout(0.5)
    try:
        for address in (str(path), abstract.getsockname()):
            code = f"import socket\nc = socket.socket(socket.AF_UNIX)\nc.settimeout(2)\nc.connect({address!r})"
            text = failed(await run(s, code), "execution_error")
            assert "No such file" in text or "Connection refused" in text or "denied" in text, text
        for sock in (listener, abstract):
            with pytest.raises(TimeoutError):
                sock.accept()
    finally:
        listener.close()
        abstract.close()


async def test_root_only_files_and_the_host_tree_are_out_of_reach(raw: tuple[ClientSession, Path]) -> None:
    """Issue 8 item 5: the worker is an unprivileged uid in a root of its own: no /etc/shadow, no 0600 secret."""
    import os

    s, ws = raw
    secret = ws.parent / "root_only_secret.txt"
    secret.write_text(SECRET)
    os.chmod(secret, 0o600)
    for target in (
        "/etc/shadow",
        str(secret),
        str(ws / "data" / "demo.duckdb"),
        "/root/.bashrc",
        "/proc/1/root/etc/shadow",
    ):
        text = failed(await run(s, f"open({target!r}, 'rb').read()"), "execution_error")
        assert SECRET not in text and "root:" not in text
    who = ok(await run(s, "import os\n(os.getuid(), os.geteuid(), sorted(os.listdir('/')))"))
    assert ("(0," not in who and "'root'" in who) or "'work'" in who  # directories made only to hold the runtime
    assert "'home'" not in who and "'var'" not in who and "'srv'" not in who


async def test_the_kernel_refuses_namespaces_and_mounts(raw: tuple[ClientSession, Path]) -> None:
    """seccomp and no capabilities: new namespaces, mounts, ptrace and io_uring (issue 22 item 7) are refused."""
    s, _ = raw
    code = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "results = {\n"
        "  'unshare_user': libc.unshare(0x10000000),\n"
        "  'unshare_net': libc.unshare(0x40000000),\n"
        "  'mount': libc.mount(b'tmpfs', b'/tmp', b'tmpfs', 0, None),\n"
        "  'ptrace': libc.ptrace(16, 1, None, None),\n"
        "  'io_uring_setup': libc.syscall(425, 8, ctypes.create_string_buffer(120)),\n"
        "}\nresults"
    )
    text = ok(await run(s, code))
    for key in ("unshare_user", "unshare_net", "mount", "ptrace", "io_uring_setup"):
        assert f"'{key}': -1" in text, text


# Machine code run from an executable page: a system call of another architecture than the filter's, then ``ret``.
FOREIGN_SYSCALLS = {
    "i386 int 0x80": "b814000000cd80c3",  # mov eax, 20 (i386 getpid); int 0x80
    "x32 syscall": "b827000040" + "0f05c3",  # mov eax, 0x40000000 | 39 (x32 getpid); syscall
}
MACHINE_CODE = (
    "import ctypes, mmap\n"
    "page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
    "page.write(bytes.fromhex({hex!r}))\n"
    "ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()"
)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="i386 and x32 system calls are x86_64's")
@pytest.mark.parametrize("kind", list(FOREIGN_SYSCALLS))
async def test_a_foreign_architectures_system_call_ends_the_worker_at_once(
    raw: tuple[ClientSession, Path], kind: str
) -> None:
    """Red team: libseccomp's default for a call of another architecture killed only the calling thread, so the
    worker hung until its timeout and the next call was an internal error (WorkerGone, untranslated). The whole
    worker ends at once (SIGSYS), the call says the sandbox stopped a forbidden system call, the next one works."""
    s, _ = raw
    ok(await run(s, "before = 1"))
    started = time.monotonic()
    result = await run(s, MACHINE_CODE.format(hex=FOREIGN_SYSCALLS[kind]), timeout=60)
    text = failed(result, "permission_denied", "FORBIDDEN_SYSCALL")
    assert "TIMEOUT" not in text and "forbidden system call" in text and "state was lost" in text, text
    assert time.monotonic() - started < 20, text  # ended by the kernel, not by the 60 s timeout
    after = ok(await run(s, "'before' in dir(), 1 + 1"))
    assert "(False, 2)" in after and "fresh interpreter" in after, after


@pytest.mark.skipif(platform.machine() != "x86_64", reason="i386 system calls are x86_64's")
async def test_a_call_waiting_for_a_worker_that_was_ended_runs_on_a_fresh_one(raw: tuple[ClientSession, Path]) -> None:
    """A second call of the session waits its turn on the session's worker; the first one's forbidden call ends
    that worker meanwhile: the second runs on a fresh interpreter (it was an internal error: Bad file descriptor)."""
    import anyio

    s, _ = raw
    results: dict[str, Any] = {}

    async def first() -> None:
        code = "import time\ntime.sleep(1.5)\n" + MACHINE_CODE.format(hex=FOREIGN_SYSCALLS["i386 int 0x80"])
        results["first"] = await run(s, code, timeout=60)

    async def second() -> None:
        await anyio.sleep(0.5)  # sent while the first runs: it waits for the worker
        results["second"] = await run(s, "'served after'")

    async with anyio.create_task_group() as group:
        group.start_soon(first)
        group.start_soon(second)
    failed(results["first"], "permission_denied", "FORBIDDEN_SYSCALL")
    text = ok(results["second"])
    assert "served after" in text and "fresh interpreter" in text, text


async def test_memory_is_limited_for_all_the_workers_processes_together(raw: tuple[ClientSession, Path]) -> None:
    """Issue 8 item 10: five children of 600 MB each under memory_mb=2048 cannot all succeed."""
    s, _ = raw
    code = (
        "import os\npids = []\nfor i in range(5):\n    pid = os.fork()\n    if pid == 0:\n"
        "        block = bytearray(600 * 1024 * 1024)\n        import time\n        time.sleep(0.5)\n"
        "        os._exit(0)\n    pids.append(pid)\n"
        "codes = [os.waitpid(p, 0)[1] for p in pids]\nsum(1 for c in codes if c == 0)"
    )
    result = await run(s, code, timeout=60)
    text = text_of(result)
    if result.is_error:  # the kernel chose the worker itself: it is restarted with its state lost
        assert "WORKER_CRASHED" in text and "SIGKILL" in text, text
    else:
        assert int(text.strip().splitlines()[-1]) < 5, text
    assert "2" in ok(await run(s, "1 + 1"))


async def test_sys_exit_does_not_end_the_worker(raw: tuple[ClientSession, Path]) -> None:
    s, _ = raw
    ok(await run(s, "before_exit = 5"))
    assert "sys.exit()" in ok(await run(s, "import sys\nsys.exit()"))
    failed(await run(s, "import sys\nsys.exit(3)"), "execution_error", "PYTHON_EXCEPTION")
    assert "5" in ok(await run(s, "before_exit"))


async def test_closing_stdout_and_raw_writes_do_not_corrupt_the_protocol(raw: tuple[ClientSession, Path]) -> None:
    s, _ = raw
    code = "import os, sys\nsys.stdout.close()\nos.write(1, b'garbage' * 1000)\nos.write(2, b'more')\nos.close(1)"
    await run(s, code)
    assert "fine" in ok(await run(s, "print('fine')"))
    # writing frames into the protocol channel itself: the worker is restarted, the server serves on
    code = (
        "import os\nfor fd in range(3, 12):\n    try:\n"
        "        os.write(fd, b'\\x00\\x00\\x00\\x05hello')\n    except OSError:\n        pass"
    )
    await run(s, code)
    assert "3" in ok(await run(s, "1 + 2"))


_FIND_WORKER = "w = next(c.cell_contents for c in save_artifact.__closure__ if hasattr(c.cell_contents, '_call'))\n"


async def test_descriptors_from_the_worker_must_be_sealed_memory_files_within_the_limit(
    raw: tuple[ClientSession, Path],
) -> None:
    s, ws = raw
    before = server_rss(ws)
    attempts = {
        "/dev/zero": "fd = os.open('/dev/zero', os.O_RDONLY)",
        "unsealed sparse memfd": "fd = os.memfd_create('x')\nos.ftruncate(fd, 19 * 1024 * 1024)",
        "sealed sparse memfd": (
            "import fcntl\nfd = os.memfd_create('x', os.MFD_ALLOW_SEALING)\nos.ftruncate(fd, 19 * 1024 * 1024)\n"
            "fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)"
        ),
    }
    for label, make in attempts.items():
        code = f"import os\n{_FIND_WORKER}{make}\nw._call('save_artifact', fds=[fd], kind='text', title='x')"
        text = failed(await run(s, code), "execution_error", "PYTHON_EXCEPTION")
        assert "HelperError" in text and ("sealed" in text or "at most" in text), (label, text)
    assert server_rss(ws) - before < 16 * 1024 * 1024  # nothing of those was read
    assert "artifact_" in ok(await run(s, "save_artifact('fine')"))


async def test_frames_forged_on_the_workers_channel_are_rejected(raw: tuple[ClientSession, Path]) -> None:
    s, _ = raw
    ok(await run(s, "kept = 1"))
    forge = (
        "import os, stat, json, struct\n"
        "for fd in range(3, 64):\n"
        "    try:\n        if not stat.S_ISSOCK(os.fstat(fd).st_mode):\n            continue\n"
        "    except OSError:\n        continue\n"
        "    for cell in (0, 1, 2, 3, 4, 5, None, 'x'):\n"
        "        out = {'head': 'FORGED', 'tail': '', 'total': 6}\n"
        "        body = json.dumps({'op': 'done', 'cell': cell, 'stdout': out})\n"
        "        try:\n"
        "            os.write(fd, struct.pack('!I', len(body)) + body.encode())\n"
        "        except OSError:\n"  # an unconnected socket an earlier cell left open: not the channel
        "            break\n"
        "import time\ntime.sleep(0.5)"
    )
    result = await run(s, forge)
    text = text_of(result)
    assert result.is_error and "WORKER_PROTOCOL" in text, text
    assert "FORGED" not in text
    assert "fresh interpreter" in ok(await run(s, "'served'"))


async def test_threads_do_not_outlive_their_cell_and_a_failing_repr_is_reported(
    raw: tuple[ClientSession, Path],
) -> None:
    s, _ = raw
    code = (
        "import threading, time\ncounter = [0]\n"
        "def spin():\n    while True:\n        counter[0] += 1\n        time.sleep(0.01)\n"
        "threading.Thread(target=spin, daemon=True).start()\ntime.sleep(0.1)"
    )
    text = ok(await run(s, code))
    assert "1 thread(s) the code started were stopped" in text, text
    first = ok(await run(s, "a = counter[0]\ntime.sleep(0.3)\ncounter[0] - a"))
    assert first.strip().splitlines()[-1] == "0", first
    bad = ok(await run(s, "class Bad:\n    def __repr__(self):\n        raise ValueError('nope')\nBad()"))
    assert "repr() failed: ValueError: nope" in bad
    assert "'still'" in ok(await run(s, "'still'"))  # the same interpreter: state kept
    assert "fresh interpreter" not in ok(await run(s, "counter[0] >= 0"))


async def test_threads_blocked_in_c_do_not_outlive_their_cell(raw: tuple[ClientSession, Path]) -> None:
    """Issue 22 item 6: two threads in hashlib.pbkdf2_hmac (C, no Python instruction to stop at) kept
    burning CPU after the cell returned. The worker is now ended when such threads survive, and says so."""
    import anyio
    import psutil

    from tests.conftest import server_process

    s, ws = raw
    code = (
        "import hashlib, threading\n"
        "for _ in range(2):\n"
        "    threading.Thread(target=hashlib.pbkdf2_hmac, args=('sha256', b'p', b's', 50_000_000)).start()\n"
        "'started'"
    )
    text = ok(await run(s, code))
    assert "did not stop" in text and "interpreter was ended" in text, text
    server = server_process(ws)

    def cpu() -> float:
        total = 0.0
        for p in server.children(recursive=True):
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                continue
        return total

    before = cpu()
    await anyio.sleep(1.0)
    assert cpu() - before < 0.3  # nothing of ours computes any more
    assert "fresh interpreter" in ok(await run(s, "1 + 1"))


async def test_output_larger_than_the_file_size_limit_is_trimmed_and_the_state_kept(
    raw: tuple[ClientSession, Path],
) -> None:
    """Issue 34 item 11: the whole output is handed over in a memory file, which obeys RLIMIT_FSIZE (20 MB here):
    30 MB of output cost the interpreter its state (OSError: File too large) instead of a trimmed result."""
    s, _ = raw
    ok(await run(s, "kept = 41"))
    text = ok(await run(s, "print('é' * 15_000_000)"))
    assert "15,000,001" in text and "artifact_" in text, text[-600:]
    assert "42" in ok(await run(s, "kept + 1"))
