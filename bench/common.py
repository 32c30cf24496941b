"""Helpers shared by the benchmarks: spawning servers, timing, reporting."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / ".data"

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}},
}


def env_for(workspace: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    env["BA_MCP_WORKSPACE"] = str(workspace)
    env.update(extra)
    return env


def spawn(args: list[str], env: dict[str, str], cwd: Path = ROOT) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd
    )


AGAINST_HELP = (
    "the Python of another checkout's environment (git worktree add /tmp/before <rev>; cd /tmp/before; "
    "uv sync --frozen --offline; then /tmp/before/.venv/bin/python): its server is measured in the same run, "
    "interleaved — a before/after in one run (its workers import its own code)"
)


def servers(against: str | list[str] | None, label: str = "") -> dict[str, tuple[list[str], Path]]:
    """The ba-mcp servers a bench measures: this checkout's, and (``against``) other checkouts' (one, or a list: a
    bench whose ``--against`` may be given more than once) — by name, each its command and the folder it starts in."""
    found = {"ba-mcp": ([python(), "-m", "ba_mcp"], ROOT)}
    for other in [against] if isinstance(against, str) else against or []:
        interpreter = Path(other).absolute()  # not resolved: the link is what makes it that environment
        checkout = interpreter.parent.parent.parent
        found[f"ba-mcp at {label or checkout.name}"] = ([str(interpreter), "-m", "ba_mcp"], checkout)
    return found


def request(proc: subprocess.Popen[bytes], message: dict) -> dict:
    assert proc.stdin and proc.stdout
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    while True:
        reply = json.loads(proc.stdout.readline())
        if reply.get("id") == message.get("id"):
            return reply


def initialize(proc: subprocess.Popen[bytes], extensions: dict | None = None) -> dict:
    """The handshake (2025-11-25); ``extensions``: the client's declared extensions (MCP Apps, say)."""
    message = INIT
    if extensions:
        message = {**INIT, "params": {**INIT["params"], "capabilities": {"extensions": extensions}}}
    reply = request(proc, message)
    assert proc.stdin
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    proc.stdin.flush()
    return reply


def call(proc: subprocess.Popen[bytes], id_: int, tool: str, arguments: dict) -> tuple[float, dict]:
    started = time.perf_counter()
    reply = request(
        proc, {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    )
    return time.perf_counter() - started, reply


def stop(proc: subprocess.Popen[bytes]) -> None:
    """The server's stdin closed, as a host ends it; it and every process it started gone (the rest killed)."""
    import psutil

    family = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    for p in psutil.wait_procs(family, timeout=30)[1]:
        p.kill()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def p50(values: list[float]) -> float:
    return statistics.median(values)


def report(name: str, value: float, reference: float, unit: str, target: str) -> None:
    ratio = value / reference if reference else float("nan")
    print(f"{name:<58} {value:10.3f} {unit:<4} ref {reference:10.3f} {unit:<4} ratio {ratio:6.3f}   target {target}")


def python() -> str:
    return sys.executable
