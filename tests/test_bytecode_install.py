"""Issue 65, item 1: no worker compiles Python from source, whatever made the install.

The extension's install is made as Claude Desktop makes it — ``ba-mcp bundle``'s folder, its environment made by
the manifest's own command (``uv run --frozen --no-dev``), which compiles nothing — and the server started from it
compiles what the workers import once, in the background (``ba_mcp.bytecode``). Once its stamp says so, a
``run_python`` cell that imports pandas and scipy.stats finds every module it loaded with current bytecode (the
``.pyc`` beside its source, of the source's time and size, which is what the worker, ``python -I -B``, reads and
cannot write). Slow tier: it makes an environment and compiles it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.conftest import text_of

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

_CHECK = """
import importlib.util, os, sys
import pandas, scipy.stats
stale = []
for module in list(sys.modules.values()):
    origin = getattr(getattr(module, "__spec__", None), "origin", None) or ""
    if not origin.endswith(".py"):
        continue  # built in, frozen, an extension module
    try:
        with open(importlib.util.cache_from_source(origin), "rb") as f:
            head = f.read(16)
        info = os.stat(origin)
        current = (
            int.from_bytes(head[4:8], "little") == 0
            and int.from_bytes(head[8:12], "little") == int(info.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(head[12:16], "little") == info.st_size & 0xFFFFFFFF
        )
    except OSError:
        current = False
    if not current:
        stale.append(origin.rsplit("/", 3)[-3:])
print("CHECKED", len(sys.modules), "STALE", len(stale), stale[:5])
"""


def _allowed() -> list[str]:
    from ba_mcp.settings import load_settings

    return list(load_settings(workspace=Path(tempfile.mkdtemp()), environ={}).sandbox.allowed_imports)


async def test_a_worker_of_an_extension_style_install_compiles_nothing(tmp_path: Path) -> None:
    uv = shutil.which("uv")
    assert uv, "uv is not on PATH"
    folder = tmp_path / "extension"
    made = subprocess.run(
        [sys.executable, "-m", "ba_mcp", "bundle", str(folder)], capture_output=True, text=True, timeout=300
    )
    assert made.returncode == 0, made.stderr
    manifest = json.loads((folder / "manifest.json").read_text())
    args = [a.replace("${__dirname}", str(folder)) for a in manifest["server"]["mcp_config"]["args"]]
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "UV_OFFLINE": "1",  # the lock's packages from uv's warm cache, as test_bundle's offline start has them
        "BA_MCP_WORKSPACE": str(tmp_path / "ws"),
        # the check reads sys.modules and the .pyc files: the operator's list with sys, os and importlib added
        "BA_MCP_SANDBOX__ALLOWED_IMPORTS": json.dumps([*_allowed(), "sys", "os", "importlib"]),
        **{k: os.environ[k] for k in ("UV_CACHE_DIR", "XDG_CACHE_HOME") if k in os.environ},
    }
    params = StdioServerParameters(command=uv, args=args, env=env, cwd=str(tmp_path))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        sites = list((folder / ".venv" / "lib").glob("python3*/site-packages"))
        assert sites, "uv made no environment in the extension's folder"
        pandas = sites[0] / "pandas"
        before = sum(1 for _ in pandas.rglob("*.pyc"))
        stamp = sites[0] / "__pycache__" / "ba-mcp-bytecode.stamp"
        started = time.monotonic()
        while not stamp.is_file():  # the server's background compilation (lowest priority: minutes on a busy box)
            assert time.monotonic() - started < 1800, "the server compiled nothing in 30 minutes"
            await anyio.sleep(2)
        print(f"pandas .pyc files at start: {before}; compiled in the background in {time.monotonic() - started:.0f} s")
        cell = await session.call_tool("run_python", {"code": _CHECK, "timeout": 300})
        text = text_of(cell)
        print(text[:500])  # for the note
        assert not cell.is_error, text
        assert "CHECKED" in text and "STALE 0 " in text, text
