"""stdio on the event loop (issue 40): the streams ``BaServer.run_stdio_async`` gives the SDK's stdio transport.

The SDK reads each line and writes each answer in a worker thread (``anyio.wrap_file``): a thread hop for the read,
the write and the flush of every message, each waking a thread and then the loop again — 0.2 ms of a hello-world
round trip of 0.75 ms on this machine. These streams read and write the same descriptors (the private duplicates the
SDK's claim of fd 0 and 1 made, ``SdkInternals.claimed_stdio``) from the loop itself:

* a read waits with the loop's epoll until the descriptor has data, then takes what is there;
* an answer is written in pieces of at most ``PIPE_BUF`` bytes, each once ``poll`` says the descriptor takes that
  many without blocking (a pipe with a free page, a socket with room in its buffer), else after the loop has waited
  for it — a client that stops reading holds up its own answers, never the loop.

Only pipes and sockets (what MCP clients start a server with) are served so; anything else (a terminal, a regular
file as stdin) keeps the SDK's threads (``loop_streams`` says None).
"""

from __future__ import annotations

import os
import select
import stat
from collections.abc import Callable
from typing import Any

import anyio

_READ = 1 << 16
_PIECE = select.PIPE_BUF  # 4,096 on Linux: what a pipe with a free slot, or a socket said writable, takes at once


def _waitable(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def loop_streams(
    stdin: Any, stdout: Any, after_write: Callable[[], None] | None = None
) -> tuple[LineReader, Writer] | None:
    """Loop-driven streams over the claimed binary ``stdin`` and ``stdout``, or None when either is not a pipe or
    a socket. ``after_write`` runs on the loop once each message is written whole."""
    try:
        fds = stdin.fileno(), stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    if not all(_waitable(fd) for fd in fds):
        return None
    return LineReader(fds[0]), Writer(fds[1], after_write)


class LineReader:
    """The lines of a descriptor as text (UTF-8, undecodable bytes replaced, as the SDK reads them), each with its
    newline; the last one without, if the input ends so. Iterated by the SDK's ``stdin_reader``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()
        self.scanned = 0  # the buffer before this holds no newline: a long line is searched once, not per read
        self.ended = False
        self.poll = select.poll()
        self.poll.register(fd, select.POLLIN)

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str:
        while True:
            end = self.buffer.find(b"\n", self.scanned)
            if end >= 0:
                line = bytes(self.buffer[: end + 1])
                del self.buffer[: end + 1]
                self.scanned = 0
                return line.decode("utf-8", "replace")
            self.scanned = len(self.buffer)
            if self.ended:
                if not self.buffer:
                    raise StopAsyncIteration
                line = bytes(self.buffer)
                self.buffer.clear()
                self.scanned = 0
                return line.decode("utf-8", "replace")
            if not self.poll.poll(0):
                await anyio.wait_readable(self.fd)
            try:
                chunk = os.read(self.fd, _READ)  # readable: takes what is there without blocking
            except BlockingIOError:  # a descriptor the client made non-blocking, woken for nothing
                await anyio.wait_readable(self.fd)
                continue
            if chunk:
                self.buffer += chunk
            else:
                self.ended = True


class Writer:
    """Text written to a descriptor as UTF-8 without blocking the loop (``write``); ``flush`` has nothing to do.
    ``after_write``: what runs once a message is out (the runner's bookkeeping of the call it answered: the client
    has its answer while the server counts and logs)."""

    def __init__(self, fd: int, after_write: Callable[[], None] | None = None) -> None:
        self.fd = fd
        self.after_write = after_write
        self.poll = select.poll()
        self.poll.register(fd, select.POLLOUT)

    async def write(self, text: str) -> None:
        view = memoryview(text.encode("utf-8"))
        while view:
            if not self.poll.poll(0):
                await anyio.wait_writable(self.fd)
                continue
            try:
                view = view[os.write(self.fd, view[:_PIECE]) :]
            except BlockingIOError:  # a non-blocking socket with less room than the piece: wait for more
                await anyio.wait_writable(self.fd)
        if self.after_write is not None:
            self.after_write()

    async def flush(self) -> None:
        return None
