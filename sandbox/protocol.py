"""Frames between the server and its worker: a 4-byte big-endian length, then UTF-8 JSON.

The channel is one end of an AF_UNIX socketpair (no listening socket, no path). File descriptors
travel with a frame's header (SCM_RIGHTS): data files the server opened for the worker, and
memory files the worker filled for the server, so neither side reads the other's paths.
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

HEADER = struct.Struct("!I")
MAX_FRAME = 64 * 1024 * 1024
MAX_FDS = 64


# The protections a worker reports in its ready frame, as [id, description] pairs. The ids are the contract
# the server and `ba-mcp doctor` read; the descriptions are for people. A protection the machine did not
# allow is reported with the id DEGRADED and a description saying which and why.
NETWORK_NAMESPACE = "network-namespace"
READ_ONLY_ROOT = "read-only-root"  # the minimal root filesystem, the Python runtime read-only
PRIVATE_DEV = "private-dev"
PID_NAMESPACE = "pid-namespace"
UNPRIVILEGED_USER = "unprivileged-user"
SECCOMP_FILTER = "seccomp-filter"
MEMORY_ALL_PROCESSES = "memory-cgroup"
MEMORY_PER_PROCESS = "memory-rlimit"
PROCESS_COUNT = "process-count"
CPU_TIME = "cpu-time"
CPU_SHARE = "cpu-cgroup"  # at most so many cores' worth of time, for all the worker's processes together
FILE_SIZE = "file-size"
READ_ONLY_FILES = "read-only-files"  # configured data files bound read-only in the worker's own mount namespace
DEGRADED = "degraded"


class ProtocolError(Exception):
    """The peer sent something that is not a frame (or closed the channel mid-frame)."""


def send(sock: socket.socket, message: dict[str, Any], fds: list[int] | tuple[int, ...] = ()) -> None:
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":"), default=str).encode()
    if len(body) > MAX_FRAME:
        raise ProtocolError(f"frame of {len(body)} bytes is over the limit of {MAX_FRAME}")
    data = HEADER.pack(len(body)) + body
    if fds:
        sent = socket.send_fds(sock, [data], list(fds))
        if sent < len(data):
            sock.sendall(data[sent:])
    else:
        sock.sendall(data)


def recv(sock: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """The next frame and the descriptors that came with it. EOFError when the peer is gone."""
    head, fds, _flags, _addr = socket.recv_fds(sock, HEADER.size, MAX_FDS)
    if not head:
        raise EOFError("the peer closed the channel")
    head += _exact(sock, HEADER.size - len(head))
    (size,) = HEADER.unpack(head)
    if size > MAX_FRAME:
        for fd in fds:
            _close(fd)
        raise ProtocolError(f"frame of {size} bytes announced; the limit is {MAX_FRAME}")
    body = _exact(sock, size)
    try:
        message = json.loads(body)
    except ValueError as exc:
        for fd in fds:
            _close(fd)
        raise ProtocolError(f"frame is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError("frame is not a JSON object")
    return message, fds


def _exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n > 0:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise EOFError("the peer closed the channel mid-frame")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _close(fd: int) -> None:
    import os

    try:
        os.close(fd)
    except OSError:
        pass
