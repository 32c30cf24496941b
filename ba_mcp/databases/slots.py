"""The query slots of one database, shared fairly between principals (S-19).

A database runs at most ``max_concurrent`` of ba-mcp's queries at once, and one principal at most ``per_principal``
of them, so one user's long queries leave room for everyone else's. A caller who must wait joins one queue; when a
slot frees, the waiter served next is the one whose principal has the fewest queries in flight (the first to come
among equals), so a principal who keeps the database busy never jumps ahead of one who has nothing running.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ba_mcp.errors import ToolFailure, timed_out

REPORT_MARGIN_S = 0.5  # a wait for a slot gives up this long before the call's own deadline, to say why


def slot_wait(timeout: float) -> float:
    """How long a call with ``timeout`` waits for a slot: a little less than its whole timeout, so that a wait that
    came to nothing ends with the failure saying whose work held the database, not the call's generic timeout."""
    return max(0.0, timeout - REPORT_MARGIN_S)


@dataclass(eq=False)
class _Waiter:
    principal: str
    since: float = field(default_factory=time.monotonic)


class FairSlots:
    """``total`` queries at once, at most ``per_principal`` of them one principal's (None: no bound of its own)."""

    def __init__(self, total: int, per_principal: int | None = None) -> None:
        self.total = total
        self.per_principal = min(per_principal or total, total)
        self._cond = threading.Condition()
        self._running: dict[str, int] = {}
        self._waiting: list[_Waiter] = []

    def running(self, principal: str | None = None) -> int:
        """Queries in flight: all of them, or one principal's."""
        with self._cond:
            if principal is None:
                return sum(self._running.values())
            return self._running.get(principal, 0)

    def acquire(self, principal: str, timeout: float, cancelled: Callable[[], bool] = lambda: False) -> bool:
        """Take a slot for ``principal``, waiting at most ``timeout`` seconds (and no longer once ``cancelled()``
        says so). False: none was had."""
        deadline = time.monotonic() + timeout
        me = _Waiter(principal)
        with self._cond:
            self._waiting.append(me)
            try:
                while self._next() is not me:
                    left = deadline - time.monotonic()
                    if left <= 0 or cancelled():
                        return False
                    self._cond.wait(min(left, 0.05))
                self._running[principal] = self._running.get(principal, 0) + 1
                return True
            finally:
                self._waiting.remove(me)
                self._cond.notify_all()  # the next in line may be someone else now

    def release(self, principal: str) -> None:
        with self._cond:
            left = self._running.get(principal, 0) - 1
            if left > 0:
                self._running[principal] = left
            else:
                self._running.pop(principal, None)
            self._cond.notify_all()

    def _next(self) -> _Waiter | None:
        """The waiter to serve now, if a slot is free for one: of those whose principal is under their share, the
        one whose principal has the fewest queries running, the longest waiting among equals."""
        if sum(self._running.values()) >= self.total:
            return None
        eligible = [w for w in self._waiting if self._running.get(w.principal, 0) < self.per_principal]
        if not eligible:
            return None
        return min(eligible, key=lambda w: (self._running.get(w.principal, 0), w.since))

    def busy(self, database: str, principal: str, waited: float) -> ToolFailure:
        """The failure of a caller who waited ``waited`` seconds for a slot and got none, saying whose work held
        the database."""
        settings_hint = f"databases.{database}.max_concurrent = {self.total}"
        if self.per_principal < self.total:
            settings_hint += f", max_concurrent_per_user = {self.per_principal}"
        with self._cond:
            mine = self._running.get(principal, 0)
            others = sum(self._running.values()) - mine
        if mine >= self.per_principal and mine:
            message = (
                f"your own {mine} quer{'y' if mine == 1 else 'ies'} on {database} held your share of its connections "
                f"for {waited:.0f} s ({settings_hint})"
            )
            hint = "wait for your running queries to finish, then retry"
        else:
            message = (
                f"database {database} was busy with other users' work for {waited:.0f} s: {others} of its "
                f"{self.total} connections in use ({settings_hint}); your query never started"
            )
            hint = "retry shortly: your query was not the slow one"
        return timed_out(message, hint)
