"""Who the server is working for: the client session of the request being served, and what it may read.

Every request is served on behalf of one client session (``sessions.session_key``: ``"default"`` for a stdio
process, a digest of the ``mcp-session-id`` for an HTTP session). The server's middleware sets it for the
request (``acting_as``) and it follows the work into worker threads (context variables are copied into
``anyio.to_thread``), so the stores can decide at the place they read — not in each tool — whose artifacts
and code a request reaches (SPEC S-9). Work done outside any request (start-up, clean-up) acts as
``"default"``; an operator's command acts as ``EVERYONE``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from contextvars import ContextVar

DEFAULT = "default"  # a stdio process, stateless HTTP, and work outside any request
EVERYONE = "*"  # the operator (``ba-mcp artifacts …``): sees every session's items; never an owner
MAX_OWNERS = 256  # sessions recorded on one stored item (content-addressed items can be shared); oldest go first

_session: ContextVar[str] = ContextVar("ba_mcp_session", default=DEFAULT)


def current() -> str:
    """The session the current request is served for."""
    return _session.get()


@contextlib.contextmanager
def acting_as(session: str) -> Iterator[None]:
    """Serve the block on behalf of ``session``."""
    token = _session.set(session)
    try:
        yield
    finally:
        _session.reset(token)


def may_read(owners: Iterable[str], shared: bool = False) -> bool:
    """Whether the current session may read an item owned by ``owners`` (``shared``: every session may)."""
    who = current()
    return shared or who == EVERYONE or who in owners


def with_owner(owners: list[str]) -> list[str] | None:
    """``owners`` with the current session added (None: nothing to add)."""
    who = current()
    if who == EVERYONE or who in owners:
        return None
    return [*owners, who][-MAX_OWNERS:]


def principal_of(session: str) -> str:
    """The principal a session key works for: a saved analysis's run (``<key>~analysis``) is its caller's."""
    return session.split("~", 1)[0]


def new_owners() -> list[str]:
    """The owners of an item the current session makes."""
    who = current()
    return [DEFAULT if who == EVERYONE else who]
