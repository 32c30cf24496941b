"""The stdio transport's streams on the event loop (ba_mcp.stdio): lines as the SDK's threads read them, answers
written whole and in order without blocking the loop, and which descriptors they serve."""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time

import anyio
import pytest

from ba_mcp.stdio import LineReader, Writer, loop_streams

pytestmark = pytest.mark.anyio


def _feed(fd: int, pieces: list[bytes], pause: float = 0.0) -> threading.Thread:
    def run() -> None:
        for piece in pieces:
            os.write(fd, piece)
            time.sleep(pause)
        os.close(fd)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.parametrize("blocking", [True, False], ids=["blocking", "non-blocking"])
async def test_lines_split_across_reads_a_long_line_bad_bytes_and_a_last_line_without_newline(blocking: bool) -> None:
    read, write = os.pipe()
    os.set_blocking(read, blocking)  # a client may hand over a non-blocking descriptor
    long = b'{"x": "' + b"y" * 3_000_000 + b'"}\n'  # many reads for one line
    pieces = [b'{"a": 1', b'}\n{"b"', b": 2}\r\n", long[:70_000], long[70_000:], b"caf\xc3\xa9 \xff\n", b"tail"]
    feeder = _feed(write, pieces, pause=0.001)
    lines = [line async for line in LineReader(read)]
    feeder.join()
    os.close(read)
    assert lines == ['{"a": 1}\n', '{"b": 2}\r\n', long.decode(), "café \ufffd\n", "tail"]


@pytest.mark.parametrize("blocking", [True, False], ids=["blocking", "non-blocking"])
async def test_an_answer_larger_than_the_pipe_waits_for_its_reader_without_blocking_the_loop(blocking: bool) -> None:
    read, write = os.pipe()
    os.set_blocking(write, blocking)
    text = "".join(f"line {i} é\n" for i in range(200_000))  # ~2.6 MB: far more than a pipe holds (64 KB)
    got = bytearray()
    ticks = 0

    def reader() -> None:
        time.sleep(0.2)  # the writer fills the pipe first and must wait
        while chunk := os.read(read, 7_000):
            got.extend(chunk)
            time.sleep(0.0005)

    thread = threading.Thread(target=reader)
    thread.start()
    writer = Writer(write)

    async def tick() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(tick)
        await writer.write(text)
        await writer.flush()
        await writer.write("end\n")
        tg.cancel_scope.cancel()
    os.close(write)
    thread.join()
    os.close(read)
    assert got.decode() == text + "end\n"
    assert ticks >= 10  # the loop ran other tasks while the writer waited for room in the pipe


def test_pipes_and_sockets_are_served_on_the_loop_other_descriptors_by_the_sdk_threads() -> None:
    read, write = os.pipe()
    left, right = socket.socketpair()
    with tempfile.TemporaryFile() as regular, open(read, "rb", closefd=False) as r, open(write, "wb") as w:
        assert loop_streams(r, w) is not None
        with left.makefile("rb") as sock_in, right.makefile("wb") as sock_out:
            assert loop_streams(sock_in, sock_out) is not None
        assert loop_streams(regular, w) is None  # `ba-mcp serve < requests.jsonl`
        primary, secondary = os.openpty()
        try:
            with open(primary, "rb", closefd=False) as tty:
                assert loop_streams(tty, w) is None  # a terminal keeps the SDK's threads
        finally:
            os.close(primary)
            os.close(secondary)
    os.close(read)
    left.close()
    right.close()
