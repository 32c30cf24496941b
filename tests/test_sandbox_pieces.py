"""The sandbox's pieces on their own: output capture, the import guardrail, the frame protocol with
descriptors, and the code store."""

from __future__ import annotations

import json
import os
import platform
import socket
from pathlib import Path

import pytest

from ba_mcp.stores.code import CodeStore
from ba_mcp.workspace import Workspace
from sandbox import protocol
from sandbox.policy import ImportPolicyError, guarded_builtins
from sandbox.worker import Capture


def test_capture_keeps_head_and_tail_and_counts_everything() -> None:
    cap = Capture(head=10, tail=5)
    for i in range(1000):
        cap.write(f"{i:04d}\n")
    report = cap.report()
    assert report["total"] == 5000
    assert report["head"] == "0000\n0001\n"
    assert report["tail"] == "0999\n"


def test_capture_of_one_huge_write_is_bounded() -> None:
    cap = Capture(head=100, tail=50)
    cap.write("a" * 10_000_000 + "END")
    report = cap.report()
    assert report["total"] == 10_000_003
    assert len(report["head"]) == 100 and report["tail"].endswith("END") and len(report["tail"]) == 50


def test_capture_refuses_bytes() -> None:
    with pytest.raises(TypeError):
        Capture(10, 10).write(b"bytes")  # type: ignore[arg-type]


def test_import_guardrail_names_the_module_and_leaves_allowed_ones() -> None:
    names = guarded_builtins(["json", "math"])
    namespace = {"__builtins__": names}
    exec("import json, math\nfrom math import sqrt", namespace)
    with pytest.raises(ImportPolicyError, match="'subprocess'"):
        exec("import subprocess", namespace)
    with pytest.raises(ImportPolicyError, match="'os'"):
        exec("from os import path", namespace)
    with pytest.raises(ImportPolicyError, match="'os'"):
        exec("__import__('os.path')", namespace)


def test_import_guardrail_off_allows_everything() -> None:
    namespace = {"__builtins__": guarded_builtins(None)}
    exec("import os", namespace)
    assert "os" in namespace


def test_frames_carry_descriptors_both_ways(tmp_path: Path) -> None:
    a, b = socket.socketpair()
    data = tmp_path / "data.bin"
    data.write_bytes(b"payload")
    fd = os.open(data, os.O_RDONLY)
    try:
        protocol.send(a, {"op": "reply", "id": 1, "text": "é" * 1000}, [fd])
    finally:
        os.close(fd)
    message, fds = protocol.recv(b)
    assert message == {"op": "reply", "id": 1, "text": "é" * 1000}
    assert len(fds) == 1
    with os.fdopen(fds[0], "rb") as f:
        assert f.read() == b"payload"
    a.close()
    with pytest.raises(EOFError):
        protocol.recv(b)


def test_a_garbage_frame_is_a_protocol_error() -> None:
    a, b = socket.socketpair()
    a.sendall(protocol.HEADER.pack(5) + b"hello")
    with pytest.raises(protocol.ProtocolError):
        protocol.recv(b)
    a.sendall(protocol.HEADER.pack(protocol.MAX_FRAME + 1))
    with pytest.raises(protocol.ProtocolError):
        protocol.recv(b)


def test_code_store_is_content_addressed_and_listed_with_metadata(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path / "ws")
    code = "# weekly churn\nchurn = 0.03\nchurn * 100\n"
    store = CodeStore(ws.dir("code"), 64 * 1024 * 1024, 3600)
    first = store.put(code)
    assert first == store.put(code)
    assert first != store.put(code + "\n")
    assert (ws.dir("code") / f"{first}.py").read_text() == code
    meta = json.loads((ws.dir("code") / f"{first}.meta.json").read_text())
    assert meta["description"] == "weekly churn" and meta["line_count"] == 4 and meta["language"] == "python"
    assert ws.resolve(first).kind == "code"


def test_identical_code_stored_concurrently_never_fails(tmp_path: Path) -> None:
    """Issue 11 item 4: one temporary name per process made concurrent identical writes collide."""
    import threading

    store = CodeStore(tmp_path / "code", 64 * 1024 * 1024, 3600)
    errors: list[BaseException] = []
    ids: set[str] = set()

    def writer() -> None:
        for i in range(50):
            try:
                ids.add(store.put(f"x = {i % 5}\n"))
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(ids) == 5
    assert all((tmp_path / "code" / f"{i}.py").is_file() for i in ids)


def test_pandas_nanosecond_times_travel_as_microseconds_unless_a_value_has_nanoseconds() -> None:
    """A DataFrame's datetime64[ns] columns reach the server as microseconds (its resolution: it then needs no
    cast kernel, issue 40) — but a column with a value below a microsecond keeps its nanoseconds."""
    import pandas as pd
    import pyarrow as pa

    from sandbox.worker import _microseconds_when_exact

    frame = pd.DataFrame(
        {
            "when": pd.to_datetime(["2025-01-01 10:00:00.123456", None], format="ISO8601").astype("M8[ns]"),
            "utc": pd.to_datetime(["2025-01-01 10:00", "1969-12-31 23:59:59.5"], format="ISO8601")
            .astype("M8[ns]")
            .tz_localize("UTC"),
            "took": pd.to_timedelta(["1s", "2ms"]).astype("m8[ns]"),
            "exact": pd.to_datetime(["2025-01-01 10:00:00.123456789", "2025-01-02"], format="ISO8601").astype("M8[ns]"),
        }
    )
    table = _microseconds_when_exact(pa.Table.from_pandas(frame, preserve_index=False))
    assert [str(f.type) for f in table.schema] == [
        "timestamp[us]",
        "timestamp[us, tz=UTC]",
        "duration[us]",
        "timestamp[ns]",
    ]
    assert table.column("utc").to_pylist()[1].isoformat() == "1969-12-31T23:59:59.500000+00:00"
    assert table.column("when").null_count == 1


def test_an_ended_worker_is_never_signalled_by_a_number_another_process_may_hold(tmp_path: Path) -> None:
    """A worker's shim once reaped (by a kill, or by alive()'s poll) gives its pid back: a second kill, or a late
    interrupt, must not signal that number — here it is a new group leader's, as a new worker's shim is. (A full
    fast run on this machine, 32,768 ids, saw a new session's engine worker end by SIGKILL at its first call.)"""
    import socket
    import subprocess

    from ba_mcp.workers.process import WorkerProcess

    ended = subprocess.Popen(["true"])
    ended.wait()
    bystander = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        worker = object.__new__(WorkerProcess)
        worker.proc, worker.scratch = ended, tmp_path / "scratch"
        worker.sock, other = socket.socketpair()
        ended.pid = bystander.pid  # the number is now another process's
        worker.kill()
        worker.interrupt()
        assert bystander.poll() is None
        other.close()
    finally:
        bystander.kill()
        bystander.wait()


FOREIGN_CALL = """
import ctypes, mmap, os, sys, threading, time
from sandbox.isolation import _seccomp
if not _seccomp()[1].startswith("seccomp filter"):
    sys.exit(4)  # no libseccomp here
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(bytes.fromhex(sys.argv[1]))
call = ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
threading.Thread(target=call, daemon=True).start()  # a cell's code runs beside the worker's serving thread
time.sleep(5)
sys.exit(7)  # still alive: only the calling thread was killed
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="i386 and x32 system calls are x86_64's")
@pytest.mark.parametrize("code", ["b814000000cd80c3", "b8270000400f05c3"], ids=["i386 int 0x80", "x32 syscall"])
def test_a_foreign_architectures_system_call_ends_the_whole_process(code: str) -> None:
    """The seccomp filter's action for a call of another architecture (libseccomp's bad-arch action) is to end the
    process, not the calling thread (its default), which left a worker hanging until its timeout."""
    import signal
    import subprocess
    import sys

    ended = subprocess.run(
        [sys.executable, "-c", FOREIGN_CALL, code], cwd=Path(__file__).parent.parent, capture_output=True, timeout=60
    )
    if ended.returncode == 4:
        pytest.skip("libseccomp is not available here")
    assert ended.returncode == -signal.SIGSYS, (ended.returncode, ended.stderr[-400:])
