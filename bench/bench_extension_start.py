"""The Claude Desktop extension's first start with an empty uv cache (issue 65 item 4), and the install's size.

The extension as a user gets it: ``ba-mcp bundle`` of the checkout into a folder of its own (what ``mcpb pack``
zips and Claude Desktop unpacks), started with the command Claude Desktop computes from its manifest —
``getMcpConfigForManifest`` of @anthropic-ai/mcpb (tests/mcpb, when installed; else the manifest's ``mcp_config``
with ``${__dirname}`` and the blank fields substituted) — with only the manifest's environment, PATH, HOME, LANG and
``UV_CACHE_DIR`` set to a new empty folder, the package registry reachable: uv downloads and installs every package
before the server can start. Reported, from the spawn: ``initialize`` answered, ``tools/list`` answered, the first
``query_database`` on the demo answered and the first ``run_python`` answered (each call's own time too); the bytes
the machine received meanwhile (``/proc/net/dev``: run it on a quiet machine), the cache's size after, and the
environment made: its site-packages' size and its packages (``.dist-info`` folders). Then the reference, in the same
run: the same folder started again (environment made, cache warm), spawn → ``initialize``. Behind a TLS-inspecting
proxy (this machine's registry is reached through one), ``--system-certs`` sets ``UV_SYSTEM_CERTS=1`` in the server's
environment: what the README tells such a user to set (``system-certs = true`` in uv's settings file).

``--against``: another checkout's extension, the same steps after this one's (each with its own empty cache).

``--compile-bytecode``: ``UV_COMPILE_BYTECODE=1`` beside them, as the manifest's ``env`` could set it (uv compiles
every package it installs before the server starts).

Run: uv run python bench/bench_extension_start.py [--system-certs] [--compile-bytecode]
     [--against /tmp/before/.venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench_first_call import stop
from common import AGAINST_HELP, ROOT, call, initialize, request, servers, spawn


def received() -> int:
    """Bytes received by this network namespace's interfaces but loopback, so far."""
    total = 0
    for line in Path("/proc/net/dev").read_text().splitlines()[2:]:
        name, counters = line.split(":", 1)
        if name.strip() != "lo":
            total += int(counters.split()[0])
    return total


def size_mb(folder: Path) -> float:
    done = subprocess.run(["du", "-sk", str(folder)], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[0]) / 1024


def desktop_config(folder: Path, user_config: dict[str, str], mcpb: Path) -> dict:
    """The command and environment Claude Desktop runs for the unpacked extension in ``folder`` (``mcpb``: the
    folder of tests/mcpb with its node_modules installed)."""
    if (mcpb / "node_modules" / "@anthropic-ai" / "mcpb").is_dir() and shutil.which("node"):
        done = subprocess.run(
            ["node", "desktop_config.mjs", str(folder), json.dumps(user_config)],
            cwd=mcpb,
            capture_output=True,
            text=True,
            check=True,
        )
        config: dict = json.loads(done.stdout)
        return config
    mcp = json.loads((folder / "manifest.json").read_text())["server"]["mcp_config"]
    text = json.dumps(mcp).replace("${__dirname}", str(folder))
    for key in ("workspace", "data_folder", "database_url"):
        text = text.replace("${user_config." + key + "}", user_config.get(key, ""))
    fallback: dict = json.loads(text)
    return fallback


def first_start(
    name: str,
    checkout: Path,
    python: str,
    scratch: Path,
    mcpb: Path,
    system_certs: bool,
    compile_bytecode: bool = False,
) -> None:
    folder = scratch / "extension"
    subprocess.run([python, "-m", "ba_mcp", "bundle", str(folder)], cwd=checkout, check=True, capture_output=True)
    cache = scratch / "uv-cache"
    cache.mkdir()
    config = desktop_config(folder, {"workspace": str(scratch / "workspace")}, mcpb)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    env.update(config.get("env", {}))
    env["UV_CACHE_DIR"] = str(cache)
    if system_certs:
        env["UV_SYSTEM_CERTS"] = "1"
    if compile_bytecode:  # what the manifest's env could set: uv compiles what it installs, before the server starts
        env["UV_COMPILE_BYTECODE"] = "1"
    command = [shutil.which(config["command"]) or config["command"], *config["args"]]
    got_before = received()
    started = time.perf_counter()
    proc = spawn(command, env, scratch)
    marks: list[tuple[str, float, float]] = []  # (what, seconds since the spawn, its own seconds)
    try:
        initialize(proc)
        marks.append(("initialize answered", time.perf_counter() - started, float("nan")))
        own = time.perf_counter()
        request(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        marks.append(("tools/list answered", time.perf_counter() - started, time.perf_counter() - own))
        for i, (tool, arguments) in enumerate(
            [
                ("query_database", {"query": "SELECT count(*) AS orders FROM orders"}),
                ("run_python", {"code": "print(1)"}),
            ],
            start=3,
        ):
            took, reply = call(proc, i, tool, arguments)
            ok = "" if not reply["result"].get("isError") else " FAILED: " + json.dumps(reply["result"])[:300]
            marks.append((f"first {tool} answered{ok}", time.perf_counter() - started, took))
    finally:
        stop(proc)
    got = received() - got_before
    site = next((folder / ".venv" / "lib").glob("python*/site-packages"))
    packages = len(list(site.glob("*.dist-info")))
    pyc = sum(1 for _ in site.glob("pandas/**/*.pyc"))
    print(
        f"{name}: the extension's first start with an empty uv cache{' (UV_SYSTEM_CERTS=1)' * system_certs}"
        f"{' (UV_COMPILE_BYTECODE=1)' * compile_bytecode}"
    )
    for what, since, own_time in marks:
        print(
            f"  {what}: {since:.1f} s after the spawn"
            + (f" (the call {own_time:.2f} s)" if own_time == own_time else "")
        )
    print(
        f"  received {got / 1e6:.0f} MB meanwhile; uv's cache after: {size_mb(cache):.0f} MB; the environment: "
        f"site-packages {size_mb(site):.0f} MB, {packages} packages; pandas .pyc when it stopped: {pyc}"
    )
    started = time.perf_counter()
    proc = spawn(command, env, scratch)
    try:
        initialize(proc)
        print(
            f"  reference: the same extension's next start (environment made), initialize in "
            f"{time.perf_counter() - started:.1f} s"
        )
    finally:
        stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--against", help=AGAINST_HELP)
    parser.add_argument("--system-certs", action="store_true", help="UV_SYSTEM_CERTS=1 for uv (README: a proxy)")
    parser.add_argument(
        "--compile-bytecode", action="store_true", help="UV_COMPILE_BYTECODE=1, as the manifest's env could set it"
    )
    parser.add_argument("--mcpb", default=str(ROOT / "tests" / "mcpb"), help="tests/mcpb with node_modules installed")
    args = parser.parse_args()
    for name, (command, cwd) in servers(args.against).items():
        scratch = Path(tempfile.mkdtemp(prefix="ba-bench-extension-"))
        try:
            first_start(name, cwd, command[0], scratch, Path(args.mcpb), args.system_certs, args.compile_bytecode)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
