"""Who the server is working for: the client session of the request being served, and what it may read.

Every request is served on behalf of one client session (``sessions.session_key``: ``"default"`` for a stdio
process, a digest of the ``mcp-session-id`` for an HTTP session). The server's middleware sets it for the
request (``acting_as``) and it follows the work into worker threads (context variables are copied into
``anyio.to_thread``), so the stores can decide at the place they read — not in each tool — whose artifacts
and code a request reaches (S-9). Work done outside any request (start-up, clean-up) acts as
``"default"``; an operator's command acts as ``EVERYONE``.
"""

from __future__ import annotations

import contextlib
import getpass
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

DEFAULT = "default"  # a stdio process, stateless HTTP, and work outside any request
EVERYONE = "*"  # the operator (``ba-mcp artifacts …``): sees every session's items; never an owner
MAX_OWNERS = 256  # sessions recorded on one stored item (content-addressed items can be shared); oldest go first
DISPLAY_CLAIMS = ("email", "preferred_username", "upn", "name")  # the first a token carries names its user to people
LOCAL_ISSUER = "local"  # the issuer of a principal no token named: the operator on stdio or loopback HTTP


@dataclass(frozen=True)
class Principal:
    """Who a request is served for, derived once per request from its verified access token (or, without
    ``http.auth``, the operator who started the server): ``issuer`` and ``subject`` identify them, ``display`` names
    them to people (audit trail, ``application_name``, listings), ``claims`` are the token's verified claims (never
    the token itself) for rules such as a database role mapping. ``key`` is where their work is kept (stores,
    workers, history): ``user-<digest>`` with a token, else the client session's key."""

    key: str
    issuer: str
    subject: str
    display: str
    claims: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def authenticated(self) -> bool:
        """Whether an identity provider vouched for the principal (False: the local operator)."""
        return self.issuer != LOCAL_ISSUER


def operator(key: str = DEFAULT) -> Principal:
    """The local operator: whoever runs the server process (stdio, or HTTP without ``http.auth``)."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for the uid (a container)
        name = "operator"
    return Principal(key=key, issuer=LOCAL_ISSUER, subject=name, display=name)


def from_claims(key: str, claims: Mapping[str, Any], subject: str) -> Principal:
    """A token's principal: its subject under its issuer, named by the first display claim it carries (an email its
    provider marks unverified, ``email_verified: false``, names nobody: the user typed it)."""
    display = next(
        (
            str(claims[c])
            for c in DISPLAY_CLAIMS
            if isinstance(claims.get(c), str) and claims[c] and claims.get(f"{c}_verified") is not False
        ),
        subject,
    )
    return Principal(
        key=key,
        issuer=str(claims.get("iss", "")),
        subject=subject,
        display=display,
        claims=MappingProxyType(dict(claims)),
    )


_session: ContextVar[str] = ContextVar("ba_mcp_session", default=DEFAULT)
_principal: ContextVar[Principal | None] = ContextVar("ba_mcp_principal", default=None)


def current() -> str:
    """The session the current request is served for."""
    return _session.get()


def principal() -> Principal:
    """The principal the current request is served for (outside any request, or on stdio: the local operator)."""
    return _principal.get() or operator(current())


@contextlib.contextmanager
def acting_as(session: str, who: Principal | None = None) -> Iterator[None]:
    """Serve the block on behalf of ``session`` (and ``who``, when the request named its principal; else the one
    already current - a saved analysis's run is its caller's)."""
    token = _session.set(session)
    named = _principal.set(who) if who is not None else None
    try:
        yield
    finally:
        if named is not None:
            _principal.reset(named)
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
