"""Each person as their own database role (S-21): which role a call runs as, decided in the server from its caller.

``databases.<name>.role_from`` (``settings.RoleMappingSettings``) maps a claim of the caller's verified token to a
database role: ``role_for`` reads the claim from ``callers.Principal.claims`` (never the token), tries the exact
keys of ``roles`` and then the patterns (``*``: any run of characters), each in the order written, and falls back to
``default`` — for a caller no key matches and for the local operator, who has no token. With no role at all the call
is refused (``NO_DATABASE_ROLE``), naming the claim and the setting. Only a role the operator's configuration names
can come out of it: a claim's value chooses among them, never names one.

The engine takes the role as data with each call (``ConnectedEngine.identity``): PostgreSQL sets it with ``SET
LOCAL ROLE`` inside the call's read-only transaction, after vetting every mapped role at connect.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ba_mcp.errors import ErrorType, ToolFailure

if TYPE_CHECKING:
    from ba_mcp.callers import Principal
    from ba_mcp.settings import RoleMappingSettings


def unverified(claims: Mapping[str, Any], claim: str) -> bool:
    """Whether the provider says the claim's value is not verified (``email_verified: false``, OpenID Connect's
    ``phone_number_verified``): a value the user typed themselves, which chooses no role."""
    return claims.get(f"{claim}_verified") is False


def claim_values(claims: Mapping[str, Any], claim: str) -> list[str]:
    """The texts a claim holds: a text, a whole number, or a list of them (``groups``); anything else holds none —
    nor does a claim its provider marks unverified (``unverified``)."""
    if unverified(claims, claim):
        return []
    value = claims.get(claim)
    items = value if isinstance(value, list) else [value]
    return [str(v) for v in items if isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))]


def _pattern(key: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if part == "*" else re.escape(part) for part in re.split(r"(\*)", key)), re.S)


def mapped_role(mapping: RoleMappingSettings, values: list[str]) -> str | None:
    """The role ``values`` (a claim's texts) map to: the first exact key holding one of them, else the first pattern
    matching one of them whole, in the order written (None: no key matches)."""
    exact = [(key, role) for key, role in mapping.roles.items() if "*" not in key]
    for key, role in exact:
        if key in values:
            return role
    for key, role in mapping.roles.items():
        if "*" in key and any(_pattern(key).fullmatch(v) for v in values):
            return role
    return None


def role_for(name: str, mapping: RoleMappingSettings, who: Principal) -> str:
    """The database role principal ``who`` runs database ``name``'s calls as. NO_DATABASE_ROLE (permission denied)
    when the mapping names none for them and there is no default."""
    values = claim_values(who.claims, mapping.claim) if who.authenticated else []
    role = mapped_role(mapping, values) if values else None
    if role is None:
        role = mapping.default
    if role is not None:
        return role
    setting = f"databases.{name}.role_from"
    if not who.authenticated:
        raise ToolFailure(
            ErrorType.PERMISSION_DENIED,
            "NO_DATABASE_ROLE",
            f"database '{name}' runs each person's queries as the database role their login's {mapping.claim} maps "
            f"to ({setting}), and this server has no login (stdio, or HTTP without http.auth)",
            f"the operator sets {setting}.default to the role the server's own user queries as",
        )
    held = f"is {values[0][:80]!r}" if len(values) == 1 else f"holds {', '.join(v[:40] for v in values[:5])}"
    said = f"your token's {mapping.claim} claim {held}" if values else f"your token carries no {mapping.claim} claim"
    if unverified(who.claims, mapping.claim):
        said = f"your token's {mapping.claim} is not verified ({mapping.claim}_verified: false)"
    raise ToolFailure(
        ErrorType.PERMISSION_DENIED,
        "NO_DATABASE_ROLE",
        f"database '{name}' runs each person's queries as their own database role, and none is mapped for you: {said}",
        f"ask the server's operator to map it to a role in {setting}.roles",
    )
