"""The raw-result cache (T-R, seed 004 ToolCachePolicy).

It stores raw results, not observations, so one cached result serves every output level. Keys are
the tool, its version, its canonical arguments (output level and timeout excluded) and, for
tools that read files or databases, the identity and modification state of what they read.
Bounded by entries and approximate bytes, least recently used out first. Thread-safe: lookups
happen in the worker thread that then executes the call on a miss.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from typing import Any

from ba_mcp.results import RawResult, approx_size


def cache_key(tool: str, version: str, arguments: dict[str, Any], identity: str | None) -> str:
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    return f"{tool}@{version}|{canonical}|{identity or ''}"


class RawCache:
    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, tuple[float | None, int, RawResult]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: str) -> RawResult | None:
        with self._lock:
            return self._get(key)

    def _get(self, key: str) -> RawResult | None:
        item = self._items.get(key)
        if item is None:
            return None
        expires, _, raw = item
        if expires is not None and time.monotonic() > expires:
            self._drop(key)
            return None
        self._items.move_to_end(key)
        return raw

    def put(self, key: str, raw: RawResult, ttl_s: float | None) -> None:
        size = approx_size(raw)
        with self._lock:
            self._put(key, raw, size, ttl_s)

    def _put(self, key: str, raw: RawResult, size: int, ttl_s: float | None) -> None:
        if self.max_entries == 0 or size > self.max_bytes:
            return
        if key in self._items:
            self._drop(key)
        expires = time.monotonic() + ttl_s if ttl_s else None
        self._items[key] = (expires, size, raw)
        self._bytes += size
        while len(self._items) > self.max_entries or self._bytes > self.max_bytes:
            self._drop(next(iter(self._items)))

    def _drop(self, key: str) -> None:
        _, size, _ = self._items.pop(key)
        self._bytes -= size

    def __len__(self) -> int:
        return len(self._items)
