"""The server as an OAuth 2.1 resource server (``http.auth``; the MCP authorization specification): the bearer
tokens of HTTP requests verified, and the principal each one names (S-19).

The SDK's pieces do the protocol — 401 with ``WWW-Authenticate: Bearer resource_metadata=…``, the RFC 9728
protected-resource metadata naming this resource and its authorization server, 403 ``insufficient_scope``, a session
id refused to any principal but the one that opened it. What it does not ship is the verifier, here
(``TokenVerifier``, the SDK's protocol):

* **JWT access tokens** (RFC 9068) are checked against the issuer's keys: an asymmetric signature (never ``none``
  or a shared secret), ``iss`` the configured issuer, ``aud`` holding the configured audience (RFC 8707: a token
  issued for another resource is refused), ``exp`` (required) and ``nbf`` within ``leeway_s``. The issuer's
  metadata (OpenID Connect discovery, else RFC 8414) and its JWKS are kept ``keys_cache_s``; a key id not among
  them fetches them again at once (a rotation), at most every 10 s (a flood of forged key ids costs nothing).
* **Opaque tokens** go to the issuer's introspection endpoint (RFC 7662) when the server has credentials for it
  (``introspection_client_id``/``_secret``); without them an opaque token is refused.

The principal is the token's ``principal_claim`` (``sub``) under its issuer: ``principal_key`` makes the key the
stores, workers and history of that user are kept under. Nothing of a token is logged: a refusal logs its reason.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import urllib.parse
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken

    from ba_mcp.settings import HttpAuthSettings

log = logging.getLogger(__name__)

# asymmetric algorithms only: a shared-secret (HS*) token would be one anybody holding the key set could forge
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
_REFETCH_AFTER_S = 10.0
_MAX_DOCUMENT = 1024 * 1024


class Refused(Exception):
    """Why a token is not accepted (logged; never the token)."""


def principal_key(issuer: str, subject: str) -> str:
    """The key of a user's work (stores, workers, history): their subject under their issuer, as a digest."""
    return "user-" + hashlib.sha256(f"{issuer}\0{subject}".encode()).hexdigest()[:16]


class TokenVerifier:
    """Bearer tokens of ``conf.issuer`` for ``conf.audience``, as the SDK's ``TokenVerifier`` protocol asks."""

    def __init__(self, conf: HttpAuthSettings) -> None:
        self.conf = conf
        self._metadata: dict[str, Any] | None = None
        self._keys: dict[str, Any] = {}  # kid -> jwt.PyJWK
        self._fetched_at = 0.0
        self._lock = anyio.Lock()

    async def verify_token(self, token: str) -> AccessToken | None:
        from mcp.server.auth.provider import AccessToken

        try:
            claims = await (self._jwt(token) if token.count(".") == 2 else self._introspect(token))
            principal = claims.get(self.conf.principal_claim)
            if not isinstance(principal, str | int) or principal == "":
                raise Refused(f"no {self.conf.principal_claim} claim to name the user")
        except Refused as exc:
            log.info("bearer token refused: %s", exc)
            return None
        scope = claims.get("scope", claims.get("scp", ""))
        scopes = scope.split() if isinstance(scope, str) else [str(s) for s in scope or []]
        exp = claims.get("exp")
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id") or claims.get("azp") or principal),
            scopes=scopes,
            expires_at=int(exp) if isinstance(exp, int | float) else None,
            resource=self.conf.audience,  # checked here (aud): the SDK's own check is off
            subject=str(principal),
            claims={"iss": self.conf.issuer},
        )

    # -- JWT access tokens ---------------------------------------------------------------------------------------

    async def _jwt(self, token: str) -> dict[str, Any]:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise Refused(f"not a JWT ({exc})") from None
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise Refused(f"algorithm {alg!r} is not accepted (asymmetric signatures only)")
        key = await self._key(str(header.get("kid") or ""))
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key.key,
                algorithms=[alg],
                audience=self.conf.audience,
                issuer=self.conf.issuer,
                leeway=self.conf.leeway_s,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            raise Refused(f"{type(exc).__name__}: {exc}") from None
        return claims

    async def _key(self, kid: str) -> Any:
        """The issuer's signing key ``kid`` (the only one it has when the token names none)."""
        async with self._lock:
            stale = time.monotonic() - self._fetched_at > self.conf.keys_cache_s
            unknown = kid not in self._keys if kid else len(self._keys) != 1
            if stale or (unknown and time.monotonic() - self._fetched_at > _REFETCH_AFTER_S):
                await self._fetch_keys()
        if kid and kid in self._keys:
            return self._keys[kid]
        if not kid and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        raise Refused(f"signed with a key the issuer does not publish ({kid or 'no key id'})")

    async def _fetch_keys(self) -> None:
        import jwt

        metadata = await self._issuer_metadata(refresh=True)
        uri = metadata.get("jwks_uri")
        if not isinstance(uri, str):
            raise Refused("the issuer publishes no jwks_uri")
        keys: dict[str, Any] = {}
        for entry in (await _get_json(uri)).get("keys", []):
            if entry.get("use", "sig") != "sig":
                continue
            try:
                key = jwt.PyJWK.from_dict(entry)
            except jwt.PyJWTError:
                continue  # a key type this library cannot use: the others still serve
            keys[str(entry.get("kid") or "")] = key
        self._keys, self._fetched_at = keys, time.monotonic()

    async def _issuer_metadata(self, refresh: bool = False) -> dict[str, Any]:
        """OpenID Connect discovery, else RFC 8414's well-known URI; its ``issuer`` must be the configured one."""
        if self._metadata is not None and not refresh:
            return self._metadata
        issuer = self.conf.issuer.rstrip("/")
        parts = urllib.parse.urlsplit(issuer)
        candidates = [
            f"{issuer}/.well-known/openid-configuration",
            f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server{parts.path}",
        ]
        problems = []
        for url in candidates:
            try:
                found = await _get_json(url)
            except Refused as exc:
                problems.append(str(exc))
                continue
            if str(found.get("issuer", "")).rstrip("/") != issuer:
                raise Refused(f"the metadata at {url} names issuer {found.get('issuer')!r}, not {self.conf.issuer}")
            self._metadata = found
            return found
        raise Refused("the issuer's metadata could not be read: " + "; ".join(problems))

    # -- opaque tokens ------------------------------------------------------------------------------------------

    async def _introspect(self, token: str) -> dict[str, Any]:
        import httpx2 as httpx

        conf = self.conf
        if not conf.introspection_client_id or conf.introspection_client_secret is None:
            raise Refused("an opaque token, and no introspection credentials (http.auth.introspection_client_id)")
        endpoint = (await self._issuer_metadata()).get("introspection_endpoint")
        if not isinstance(endpoint, str):
            raise Refused("an opaque token, and the issuer has no introspection endpoint")
        auth = (conf.introspection_client_id, conf.introspection_client_secret.get_secret_value())
        form = {"token": token, "token_type_hint": "access_token"}
        claims = await _json_of(httpx.Request("POST", endpoint, data=form), auth)
        if claims.get("active") is not True:
            raise Refused("inactive (introspection)")
        now = time.time()
        if isinstance(claims.get("exp"), int | float) and claims["exp"] < now - conf.leeway_s:
            raise Refused("expired (introspection)")
        if "iss" in claims and str(claims["iss"]).rstrip("/") != conf.issuer.rstrip("/"):
            raise Refused("another issuer's token (introspection)")
        audience = claims.get("aud")
        audiences = [audience] if isinstance(audience, str) else list(audience or [])
        if conf.audience not in audiences:
            raise Refused("issued for another resource (introspection: aud)")
        if "sub" not in claims and claims.get("client_id"):
            claims["sub"] = claims["client_id"]  # a client's own token (client credentials): RFC 9068 §2.2's sub
        return claims


async def _get_json(url: str) -> dict[str, Any]:
    import httpx2 as httpx

    return await _json_of(httpx.Request("GET", url, headers={"Accept": "application/json"}))


async def _json_of(request: Any, auth: tuple[str, str] | None = None) -> dict[str, Any]:
    """The JSON object the issuer answers ``request`` with (the body read capped, as every remote body is)."""
    import httpx2 as httpx

    from ba_mcp.errors import ToolFailure
    from ba_mcp.web.fetch import capped_body

    where = str(request.url)
    try:
        async with httpx.AsyncClient(timeout=10, follow_redirects=False, auth=auth) as client:
            response = await client.send(request, stream=True)
            try:
                body, cut = await capped_body(response, _MAX_DOCUMENT)
            finally:
                await response.aclose()
    except (httpx.HTTPError, ToolFailure) as exc:
        raise Refused(f"{where}: {type(exc).__name__}") from None
    if response.status_code != 200 or cut:
        raise Refused(f"{where}: HTTP {response.status_code}" + (" (over 1 MB)" if cut else ""))
    try:
        found = json.loads(body)
    except ValueError:
        raise Refused(f"{where}: not JSON") from None
    if not isinstance(found, dict):
        raise Refused(f"{where}: not a JSON object")
    return found
