"""The metric files the server serves, found and read — without parsing them (the engine workers do that,
``ba_mcp.metrics.model``): listing a folder's files, reading them confined (S-2), and the key of what was read.
Kept apart from the model so the server's start-up never loads the parser."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import stat
from pathlib import Path


def digest_of(
    files: list[tuple[str, str]], dialects: dict[str, str], grains: dict[str, dict[str, str]] | None = None
) -> str:
    """What a model is read from, as a key (the server's and a worker's copy of a model agree on it)."""
    return hashlib.sha256(json.dumps([files, sorted(dialects.items()), grains or {}]).encode()).hexdigest()[:16]


def metric_files(folders: list[Path]) -> list[Path]:
    """The ``*.yml``/``*.yaml`` entries of each folder (or the file itself), in a stable order — looked at, not
    followed: a folder that is a symbolic link is not listed, and an entry that is a link or no regular file is
    listed for ``read_sources`` to refuse by name."""
    found: list[Path] = []
    for folder in folders:
        try:
            mode = os.lstat(folder).st_mode
        except OSError:
            continue
        if stat.S_ISREG(mode):
            found.append(folder)
        elif stat.S_ISDIR(mode):
            with contextlib.suppress(OSError):
                found += sorted(p for p in folder.iterdir() if p.suffix in (".yml", ".yaml"))
    return found


def read_sources(paths: list[Path], limit: int = 1024 * 1024) -> tuple[list[tuple[str, str]], list[str]]:
    """The texts of metric files, each opened beneath its folder with no symbolic link followed (neither the file
    nor its folder), a regular file only, read up to ``limit`` bytes from that descriptor (S-2): a file over the
    limit, a link, a device or FIFO, or an unreadable file is a warning naming it, not a failure."""
    from ba_mcp.workspace import open_beneath

    sources, warnings = [], []
    for path in paths:
        try:
            folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                fd = open_beneath(folder, path.name)
            finally:
                os.close(folder)
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    warnings.append(f"{path}: not a regular file, not read")
                    continue
                data = f.read(limit + 1)
            if len(data) > limit:
                warnings.append(f"{path}: over {limit:,} bytes, not read")
                continue
            sources.append((str(path), data.decode("utf-8")))
        except OSError as exc:
            why = "a symbolic link, not followed" if exc.errno in (errno.ELOOP, errno.EXDEV) else exc.strerror
            warnings.append(f"{path}: cannot be read ({why})")
        except UnicodeDecodeError:
            warnings.append(f"{path}: cannot be read (not UTF-8 text)")
    return sources, warnings
