"""A server process holding more than 1,023 open files still runs its workers.

A worker's socket keeps the descriptor number it had in the server (``pass_fds``), and the waits on it used
``select()``, which refuses any number past 1023: in a fast-tier run on a fresh clone (issue 65's measurements) eight
``run_python`` calls failed as SANDBOX_UNAVAILABLE, "filedescriptor out of range in select()", raised by the spare's
warm-up loop in the worker; the server's own wait (``Worker.wait_readable``) would have called such a worker gone.
A team server with many connections holds that many. The waits use ``poll()`` now."""

from __future__ import annotations

import contextlib
import os
import resource
from pathlib import Path

import pytest

from tests.conftest import in_process, make_workspace, text_of
from tests.sandbox_common import sandbox_settings

pytestmark = pytest.mark.anyio


async def test_workers_answer_while_the_server_holds_more_than_1023_files(tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 2048:
        pytest.skip(f"the hard limit on open files is {hard}: a process cannot hold 1,100 more")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 2048), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        assert max(held) > 1023
        ws = make_workspace(tmp_path)
        settings = sandbox_settings(BA_MCP_SANDBOX__SPARE_WORKERS="1", BA_MCP_ENGINE__SPARE_WORKERS="1")
        async with in_process(ws, None, **settings) as client:
            python = await client.session.call_tool("run_python", {"code": "print(6 * 7)"})
            assert not python.is_error and "42" in text_of(python), text_of(python)
            query = await client.session.call_tool("query_database", {"query": "SELECT 6 * 7 AS answer"})
            assert not query.is_error and "42" in text_of(query), text_of(query)
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _open_descriptors() -> dict[str, str]:
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
    return found


async def test_a_server_that_ends_leaves_no_folder_open(tmp_path: Path) -> None:
    """Where the descriptors came from: each App held its workspace's folder and each skill's folder (opened at a
    first read beneath them) for good — ~15 a server, 700 in a test process that builds many."""
    ws = make_workspace(tmp_path / "warm")
    tools = ["file_reader", "use_skill"]
    async with in_process(ws, tools) as client:  # what a first server loads once per process (encoders, modules)
        await client.session.call_tool("file_reader", {"path": "uploads/query.sql"})
    before = _open_descriptors()
    for n in range(2):
        ws = make_workspace(tmp_path / str(n))
        async with in_process(ws, tools) as client:
            read = await client.session.call_tool("file_reader", {"path": "uploads/query.sql"})
            assert not read.is_error, text_of(read)
            skill = await client.session.call_tool("use_skill", {"name": "analysis-workflow", "path": "SKILL.md"})
            assert not skill.is_error, text_of(skill)
            held = _open_descriptors()
            assert any(str(ws) in target for target in held.values())  # the workspace's folder, while it serves
    left = {fd: target for fd, target in _open_descriptors().items() if fd not in before}
    assert not [t for t in left.values() if str(tmp_path) in t or "/skills" in t], left
