"""run_python through real MCP sessions over stdio: the notebook, the helpers, and the hostile list of
S-4. Two servers: one with the shipped import policy, one with the guardrail off (``*``), so the
process boundary is shown to hold on its own."""

from __future__ import annotations

import re
import socket
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import ClientSession, stdio_client

from tests.conftest import make_workspace, stdio_params, text_of

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox's isolation is Linux-specific"),
]

SECRET = "s3cr3t-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def pworkspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("proot"))


def _params(ws: Path, **env: str):
    return stdio_params(
        ws,
        BA_MCP_TOOLS__RUN_PYTHON__SPARE_WORKERS="1",
        BA_MCP_TOOLS__RUN_PYTHON__INTERRUPT_GRACE_S="1",
        BA_MCP_TOOLS__RUN_PYTHON__MEMORY_MB="2048",
        BA_MCP_TOOLS__RUN_PYTHON__MAX_PROCESSES="48",
        BA_MCP_TOOLS__RUN_PYTHON__MAX_FILE_MB="20",
        BA_MCP_TOOLS__RUN_PYTHON__DISK_MB="64",
        BA_MCP_TOOLS__RUN_PYTHON__MAX_TRANSFER_MB="16",
        SERVER_SECRET_TOKEN=SECRET,
        **env,
    )


@pytest.fixture(scope="module")
async def py(pworkspace: Path) -> AsyncIterator[ClientSession]:
    """The shipped configuration (import policy on)."""
    async with stdio_client(_params(pworkspace)) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        yield s


@pytest.fixture(scope="module")
async def raw(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[ClientSession, Path]]:
    """The guardrail off: user code may import os, ctypes, socket — the boundary must still hold."""
    ws = make_workspace(tmp_path_factory.mktemp("rawroot"))
    params = _params(ws, BA_MCP_TOOLS__RUN_PYTHON__ALLOWED_IMPORTS="*")
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        yield s, ws


async def run(session: ClientSession, code: str, **extra):
    return await session.call_tool("run_python", {"code": code, **extra})


def ok(result) -> str:
    assert not result.is_error, text_of(result)
    return text_of(result)


def failed(result, etype: str, code: str | None = None) -> str:
    text = text_of(result)
    assert result.is_error, text
    assert f"Error Type: {etype}" in text, text
    if code:
        assert f"Error Code: {code}" in text, text
    return text


# -- the notebook -----------------------------------------------------------------------------------


async def test_state_persists_between_calls_and_last_expression_is_returned(py: ClientSession) -> None:
    ok(await run(py, "total = 40\nitems = ['a', 'b']"))
    text = ok(await run(py, "total + len(items)"))
    assert text.startswith("run_python: result (standard)")
    assert "## value" in text and "\n42" in text


async def test_stdout_stderr_and_execution_time_are_reported(py: ClientSession) -> None:
    result = await run(py, "import sys\nprint('hello', 3)\nprint('warn', file=sys.stderr)")
    assert result.is_error  # sys is not in the shipped policy
    result = await run(py, "import warnings\nprint('hello', 3)\nwarnings.warn('careful')")
    text = ok(result)
    assert "## stdout" in text and "hello 3" in text
    assert "## stderr" in text and "careful" in text
    assert re.search(r"Ran code_[0-9a-f]{12} in [\d.]+ (ms|s)", text)
    assert result.structured_content["meta"]["execution_ms"] >= 0


async def test_dataframe_value_becomes_a_table_with_the_complete_result_as_an_artifact(py: ClientSession) -> None:
    result = await run(py, "import pandas as pd\npd.DataFrame({'n': range(500), 'sq': [i * i for i in range(500)]})")
    text = ok(result)
    assert "value of the last expression: 500 rows × 2 columns" in text
    aid = re.search(r"Complete table: (artifact_[0-9a-f]{12})", text).group(1)
    back = ok(await py.call_tool("query_database", {"query": f"SELECT sum(sq) AS s FROM {aid}"}))
    assert str(sum(i * i for i in range(500))) in back


async def test_a_grouped_frame_keeps_its_index_as_columns(py: ClientSession) -> None:
    code = "import pandas as pd\ndf = pd.DataFrame({'k': ['a', 'b', 'a'], 'v': [1, 2, 3]})\ndf.groupby('k').v.sum()"
    text = ok(await run(py, code))
    assert "k,v" in text and "a,4" in text and "b,2" in text


async def test_figures_come_back_as_image_content_and_image_artifacts(py: ClientSession) -> None:
    code = (
        "import matplotlib.pyplot as plt\n"
        "fig, ax = plt.subplots()\nax.bar(['a', 'b'], [3, 5])\nax.set_title('Sales by region')\n"
        "plt.figure()\nplt.plot([1, 2, 3])"
    )
    result = await run(py, code)
    text = ok(result)
    images = [c for c in result.content if c.type == "image"]
    assert len(images) == 2 and all(c.mime_type == "image/png" for c in images)
    assert "Sales by region" in text
    links = [c for c in result.content if c.type == "resource_link"]
    assert len(links) == 2 and all(link.mime_type == "image/png" for link in links)
    # figures are closed after capture: the next cell returns none
    again = await run(py, "1 + 1")
    assert not [c for c in again.content if c.type == "image"]


async def test_code_is_stored_under_its_code_id_and_readable_by_file_reader(py: ClientSession) -> None:
    code = "# monthly revenue check\nrevenue = [1, 2, 3]\nsum(revenue)"
    text = ok(await run(py, code))
    code_id = re.search(r"(code_[0-9a-f]{12})", text).group(1)
    read = ok(await py.call_tool("file_reader", {"path": code_id, "output_level": "full"}))
    assert "revenue = [1, 2, 3]" in read
    files = await py.read_resource("ba://files")
    assert code_id in files.contents[0].text and "monthly revenue check" in files.contents[0].text


async def test_reset_starts_a_fresh_interpreter(py: ClientSession) -> None:
    ok(await run(py, "kept = 1"))
    text = ok(await run(py, "'kept' in dir()", reset=True))
    assert "False" in text and "fresh interpreter" in text


async def test_progress_notifications_while_a_long_cell_runs(py: ClientSession) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    code = "import time\nfor i in range(3):\n    progress(i, 3, f'step {i}')\n    time.sleep(0.8)\n'done'"
    result = await py.call_tool("run_python", {"code": code}, progress_callback=on_progress)
    ok(result)
    messages = [m for _, _, m in seen]
    assert "step 0" in messages and "step 2" in messages
    assert any(m and m.startswith("running for") for m in messages)
    seen.clear()
    flood = "for i in range(20000):\n    progress(i, 20000, 'flood')\n'flooded'"
    ok(await py.call_tool("run_python", {"code": flood}, progress_callback=on_progress))
    assert sum(1 for _, _, m in seen if m == "flood") <= 10  # throttled in the worker (issue 8 item 13)


# -- helpers ------------------------------------------------------------------------------------------


async def test_save_artifact_is_queryable_by_other_tools_and_load_artifact_reads_their_results(
    py: ClientSession,
) -> None:
    code = "import pandas as pd\naid = save_artifact(pd.DataFrame({'x': [1, 2, 3]}), title='three rows')\naid"
    aid = re.search(r"artifact_[0-9a-f]{12}", ok(await run(py, code))).group(0)
    assert "6" in ok(await py.call_tool("query_database", {"query": f"SELECT sum(x) FROM {aid}"}))
    queried = ok(await py.call_tool("query_database", {"query": "SELECT 7 AS seven", "output_level": "brief"}))
    qid = re.search(r"artifact_[0-9a-f]{12}", queried).group(0)
    assert "\n7" in ok(await run(py, f"load_artifact('{qid}').seven.sum()"))
    text_id = re.search(r"artifact_[0-9a-f]{12}", ok(await run(py, "save_artifact('some notes')"))).group(0)
    assert "some notes" in ok(await py.call_tool("file_reader", {"path": text_id}))
    json_id = re.search(r"artifact_[0-9a-f]{12}", ok(await run(py, "save_artifact({'a': [1, 2]})"))).group(0)
    assert "[1, 2]" in ok(await run(py, f"load_artifact('{json_id}')"))


async def test_uploads_open_by_id_and_nothing_outside_uploads(py: ClientSession) -> None:
    text = ok(await run(py, "df = load_upload('upload_sales')\ndf.shape"))
    assert re.search(r"\(\d+, \d+\)", text)
    text = ok(await run(py, "with open_upload('upload_report') as f:\n    first = f.read(200)\nlen(first) > 0"))
    assert "True" in text
    for ref in ("../../etc/passwd", "/etc/passwd", "artifact_000000000000", "upload_nope", "upload_escape"):
        text = failed(await run(py, f"open_upload({ref!r})"), "execution_error", "PYTHON_EXCEPTION")
        assert "HelperError" in text
        assert "root:" not in text
    failed(await run(py, "load_artifact('artifact_000000000000')"), "execution_error")


# -- hostile and bad input ---------------------------------------------------------------------------


async def test_endless_loop_is_interrupted_and_state_survives(py: ClientSession) -> None:
    ok(await run(py, "survivor = 'still here'"))
    text = failed(await run(py, "while True:\n    pass", timeout=1), "timeout", "TIMEOUT")
    assert "state" in text and "kept" in text
    assert "still here" in ok(await run(py, "survivor"))


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


async def test_printing_100_mb_is_trimmed_with_the_total_stated(py: ClientSession) -> None:
    result = await run(py, "print('x' * 100_000_000)\nprint('end marker')")
    text = ok(result)
    assert "100,000,012 characters were printed" in text
    assert "end marker" in text
    assert len(text) < 100_000


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
    """seccomp and no capabilities: new namespaces, mounts and ptrace are refused."""
    s, _ = raw
    code = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "results = {\n"
        "  'unshare_user': libc.unshare(0x10000000),\n"
        "  'unshare_net': libc.unshare(0x40000000),\n"
        "  'mount': libc.mount(b'tmpfs', b'/tmp', b'tmpfs', 0, None),\n"
        "  'ptrace': libc.ptrace(16, 1, None, None),\n"
        "}\nresults"
    )
    text = ok(await run(s, code))
    for key in ("unshare_user", "unshare_net", "mount", "ptrace"):
        assert f"'{key}': -1" in text, text


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


async def test_imports_outside_the_policy_are_refused_naming_the_module(py: ClientSession) -> None:
    for module in ("subprocess", "socket", "ctypes", "os.path"):
        text = failed(await run(py, f"import {module}"), "permission_denied", "IMPORT_NOT_ALLOWED")
        assert f"'{module.split('.')[0]}'" in text
    text = failed(await run(py, "from shutil import rmtree"), "permission_denied", "IMPORT_NOT_ALLOWED")
    assert "'shutil'" in text
    assert "2" in ok(await run(py, "import math, statistics\nround(math.sqrt(4))"))


async def test_syntax_error_is_a_validation_error_and_nothing_runs(py: ClientSession) -> None:
    text = failed(await run(py, "marker = 1\ndef broken(:\n    pass"), "validation_error", "SYNTAX_ERROR")
    assert "line 2" in text
    assert "False" in ok(await run(py, "'marker' in dir()"))


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


async def test_ten_megabyte_code_is_refused_clearly(py: ClientSession) -> None:
    code = "x = 1\n" + "# padding\n" * 1_100_000
    text = failed(await run(py, code), "invalid_parameters", "CODE_TOO_LONG")
    assert "11,000,006 characters" in text and "1,000,000" in text
    assert "2" in ok(await run(py, "1 + 1"))


async def test_invalid_arguments_name_the_field(py: ClientSession) -> None:
    text = failed(await run(py, "1", timeout=-1), "invalid_parameters")
    assert "timeout" in text
    text = failed(await py.call_tool("run_python", {}), "invalid_parameters")
    assert "'code' is required" in text


async def test_the_worker_does_not_outlive_the_server(tmp_path: Path) -> None:
    psutil = pytest.importorskip("psutil")
    ws = make_workspace(tmp_path)
    async with stdio_client(_params(ws)) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        ok(await run(s, "1"))
        workers = [p for p in psutil.process_iter(["cmdline"]) if _is_worker_of(p, ws)]
        assert len(workers) >= 2  # the session's worker (shim + PID 1 child) and the spare
    for p in workers:
        p.wait(timeout=10)  # psutil.TimeoutExpired if a worker lived on
        assert not p.is_running()


def _is_worker_of(proc, ws: Path) -> bool:
    """A sandbox process (shim or PID 1 child) whose server serves ``ws``."""
    cmd = proc.info.get("cmdline") or []
    if "sandbox" not in cmd:
        return False
    try:
        return any(p.environ().get("BA_MCP_WORKSPACE") == str(ws) for p in proc.parents())
    except Exception:
        return False


# -- the worker's channel and what comes through it (issue 8 items 6 and 11) ---------------------------

_FIND_WORKER = "w = next(c.cell_contents for c in save_artifact.__closure__ if hasattr(c.cell_contents, '_call'))\n"


def _server_rss(ws: Path) -> int:
    psutil = pytest.importorskip("psutil")
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info.get("cmdline") or []
        if "ba_mcp" in cmd and "serve" in cmd:
            try:
                if p.environ().get("BA_MCP_WORKSPACE") == str(ws):
                    return int(p.memory_info().rss)
            except psutil.Error:
                continue
    raise AssertionError("server process not found")


async def test_descriptors_from_the_worker_must_be_sealed_memory_files_within_the_limit(
    raw: tuple[ClientSession, Path],
) -> None:
    s, ws = raw
    before = _server_rss(ws)
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
    assert _server_rss(ws) - before < 16 * 1024 * 1024  # nothing of those was read
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
        "        os.write(fd, struct.pack('!I', len(body)) + body.encode())\n"
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
