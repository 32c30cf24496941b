"""Hostile and bad input through an MCP client talking to the server in-process (S-1, S-2, S-6)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from mcp import Client

from tests.conftest import meta_of, text_of

pytestmark = pytest.mark.anyio


def assert_error(result, error_type: str, workspace: Path) -> str:
    text = text_of(result)
    assert result.is_error, text
    lines = text.splitlines()
    assert lines[0] == "file_reader: operation failed"
    assert lines[1] == f"Error Type: {error_type}"
    assert lines[2].startswith("Error Code: ") and lines[3].startswith("Error Message: ")
    # S-1: no real path of the workspace (or of anything else) in what the client sees
    assert str(workspace) not in text and str(workspace.resolve()) not in text
    assert "secret beside the workspace" not in text and "root:x:" not in text
    assert meta_of(result)["error"]["type"] == error_type
    return text


@pytest.mark.parametrize(
    "path",
    [
        "../outside.txt",
        "uploads/../../outside.txt",
        "/etc/passwd",
        "uploads/escape.txt",  # symlink whose target is beside the workspace
        "uploads/passwd_link",  # symlink to /etc/passwd
        "uploads/%2e%2e/%2e%2e/outside.txt",
        "%252e%252e/outside.txt",  # double-encoded
        "uploads/pipe.csv",  # a FIFO: must not hang
        "C:\\Windows\\win.ini",
        "file:///etc/passwd",
    ],
)
async def test_paths_that_leave_the_workspace_are_denied(session: Client, workspace: Path, path: str) -> None:
    result = await session.call_tool("file_reader", {"path": path})
    assert_error(result, "permission_denied", workspace)


async def test_nul_byte_in_path_is_denied(session: Client, workspace: Path) -> None:
    result = await session.call_tool("file_reader", {"path": "uploads/sales.csv\x00.txt"})
    assert_error(result, "permission_denied", workspace)


async def test_device_inside_the_workspace_is_denied(session: Client, workspace: Path) -> None:
    dev = workspace / "uploads" / "zero"
    try:
        os.mknod(dev, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # a /dev/zero twin inside the workspace
    except (PermissionError, OSError):
        os.symlink("/dev/zero", dev)  # without CAP_MKNOD: a link to the device (escapes, so denied too)
    result = await session.call_tool("file_reader", {"path": "uploads/zero"})
    assert_error(result, "permission_denied", workspace)


@pytest.mark.parametrize(
    ("path", "error_type"),
    [
        ("sessions/", "permission_denied"),  # a folder path lists its folder, but never these
        ("logs", "permission_denied"),
        ("upload_nothing_here", "not_found"),
        ("artifact_000000000000", "not_found"),
        ("code_0123456789ab", "not_found"),
        ("artifact_../../x", "invalid_parameters"),
        ("uploads/missing.csv", "not_found"),
    ],
)
async def test_unknown_ids_and_directories(session: Client, workspace: Path, path: str, error_type: str) -> None:
    result = await session.call_tool("file_reader", {"path": path})
    assert_error(result, error_type, workspace)


async def test_binary_file_read_as_text_is_a_clear_error(session: Client, workspace: Path) -> None:
    result = await session.call_tool("file_reader", {"path": "uploads/blob.bin", "format": "text"})
    text = assert_error(result, "validation_error", workspace)
    assert "binary" in text


async def test_file_over_the_size_limit_is_read_partially(session: Client) -> None:
    result = await session.call_tool("file_reader", {"path": "uploads/big.csv"})
    assert not result.is_error
    sc = meta_of(result)
    assert sc["rows"] == 10000 and sc["more_in_source"] and sc["next_offset"] == 10000
    assert "over the 200,000-byte read limit" in text_of(result)
    text = await session.call_tool("file_reader", {"path": "uploads/big.txt"})
    assert not text.is_error and meta_of(text)["more_in_source"]
    assert "only the first 50,000 bytes were read" in text_of(text)


async def test_unknown_tool_gets_the_error_format(session: Client) -> None:
    result = await session.call_tool("drop_everything", {})
    text = text_of(result)
    assert result.is_error
    assert "Error Type: not_found" in text and "UNKNOWN_TOOL" in text and "file_reader" in text


@pytest.mark.parametrize(
    ("arguments", "must_mention"),
    [
        ({"path": 42}, ["path"]),
        ({"path": "uploads/sales.csv", "nrows": "many"}, ["nrows", "integer"]),
        ({"path": "uploads/sales.csv", "nrows": -1}, ["nrows", ">= 1"]),
        ({"path": "uploads/sales.csv", "output_level": "verbose"}, ["output_level", '"brief"', '"standard"', '"full"']),
        ({"path": "uploads/sales.csv", "format": "docx"}, ["format", '"csv"', '"parquet"']),
        ({"path": "uploads/sales.csv", "colour": "red"}, ["colour", "accepted arguments"]),
        ({}, ["'path' is required"]),
        ({"path": "uploads/sales.csv", "encoding": "klingon-8"}, ["klingon-8"]),
    ],
)
async def test_bad_arguments_name_the_field_and_allowed_values(
    session: Client, arguments: dict, must_mention: list[str]
) -> None:
    result = await session.call_tool("file_reader", arguments)
    text = text_of(result)
    assert result.is_error
    assert "Error Type: invalid_parameters" in text, text
    for word in must_mention:
        assert word in text, (word, text)


async def test_ten_megabyte_argument_is_refused_and_the_server_keeps_serving(session: Client) -> None:
    result = await session.call_tool("file_reader", {"path": "x" * (10 * 1024 * 1024)})
    text = text_of(result)
    assert result.is_error and "Error Type: invalid_parameters" in text and "path" in text
    assert len(text) < 2000  # the huge value is not echoed back
    ok = await session.call_tool("file_reader", {"path": "uploads/sales.csv", "output_level": "brief"})
    assert not ok.is_error


@pytest.mark.parametrize("path", ["sessions/default/notes.csv", "logs/telemetry.jsonl", "./sessions/x.csv", "logs"])
async def test_sandbox_scratch_and_logs_are_not_readable(session: Client, workspace: Path, path: str) -> None:
    (workspace / "sessions" / "default").mkdir(parents=True, exist_ok=True)
    (workspace / "sessions" / "default" / "notes.csv").write_text("a\n1\n")
    result = await session.call_tool("file_reader", {"path": path})
    assert_error(result, "permission_denied", workspace)


async def test_a_file_swapped_for_a_symlink_in_a_loop_never_reads_the_target(session: Client, workspace: Path) -> None:
    """The attack of issue 8 item 2: a file flips between a regular file and a symlink to a secret while
    file_reader and query_database read it. The resolver opens once without following links and reads
    that descriptor, so each read sees the regular file or is refused — never the secret."""
    import threading

    secret = workspace.parent / "flip_secret.csv"
    secret.write_text("secret_column\nTOP-SECRET-VALUE\n")
    flip = workspace / "uploads" / "flip.csv"
    tmp_link = workspace / "uploads" / ".flip.link"
    tmp_file = workspace / "uploads" / ".flip.file"
    stop = threading.Event()

    def flipper() -> None:
        while not stop.is_set():
            tmp_file.write_text("a\n1\n")
            os.replace(tmp_file, flip)
            if tmp_link.is_symlink() or tmp_link.exists():
                tmp_link.unlink()
            os.symlink(secret, tmp_link)
            os.replace(tmp_link, flip)

    thread = threading.Thread(target=flipper, daemon=True)
    thread.start()
    seen = {"file": 0, "refused": 0}
    try:
        for i in range(60):
            for tool, args in (
                ("file_reader", {"path": "uploads/flip.csv", "output_level": "full", "nrows": 5 + i}),
                ("query_database", {"query": f"SELECT *, {i} AS i FROM 'uploads/flip.csv'", "output_level": "full"}),
            ):
                result = await session.call_tool(tool, args)
                text = text_of(result)
                assert "TOP-SECRET" not in text and "secret_column" not in text, text
                assert str(workspace) not in text
                seen["refused" if result.is_error else "file"] += 1
    finally:
        stop.set()
        thread.join()
    assert seen["file"] > 0  # the race really ran both ways
