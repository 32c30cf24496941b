"""The server as an OAuth 2.1 resource server (``http.auth``; the MCP authorization specification): the bearer
tokens of HTTP requests verified, and the principal each one names (S-19).

The SDK's pieces do the protocol — 401 with ``WWW-Authenticate: Bearer resource_metadata=…``, the RFC 9728
protected-resource metadata naming this resource and its authorization server, 403 ``insufficient_scope``, a session
id refused to any principal but the one that opened it. What it does not ship is the verifier, here
(``TokenVerifier``, the SDK's protocol):

* **JWT access tokens** (RFC 9068) are checked against the issuer's keys: an asymmetric signature (never ``none``
  or a shared secret) by an algorithm **the key** allows (``algorithms_for_key``: its ``alg``, else its type's
  family — never the algorithm the token's unverified header names alone), a header ``typ`` among ``token_types``
  (``at+jwt``: an ID token is no access token, RFC 9068 §4), ``iss`` the configured issuer, ``aud`` holding the
  configured audience (RFC 8707: a token issued for another resource is refused), ``exp`` (required) and ``nbf``
  within ``leeway_s``. The issuer's metadata (OpenID Connect discovery, else RFC 8414) and its JWKS are kept
  ``keys_cache_s``; a key id not among them fetches them again at once (a rotation), at most every 10 s (a flood
  of forged key ids costs nothing).
* **Opaque tokens** go to the issuer's introspection endpoint (RFC 7662) when the server has credentials for it
  (``introspection_client_id``/``_secret``); without them an opaque token is refused.
* Either kind then passes the operator's ``allowed_clients`` (the token's ``client_id``, else ``azp``) and
  ``required_claims``, when set: a token some self-registered client obtained for itself names no person.

Every refusal — whatever failed, however malformed the token — is ``Refused``: the SDK answers 401
``invalid_token`` (403 ``insufficient_scope`` is the SDK's, for ``required_scopes`` only); never a 500.
The principal is the token's ``principal_claim`` (``sub``) under its issuer: ``principal_key`` makes the key the
stores, workers and history of that user are kept under. Nothing of a token is logged, not even its header: a
refusal logs its reason, and gives it to the request's record in the audit trail (``pipeline.audit``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio

from ba_mcp.pipeline.audit import refused_because

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken

    from ba_mcp.settings import HttpAuthSettings

log = logging.getLogger(__name__)

# asymmetric algorithms only: a shared-secret (HS*) token would be one anybody holding the key set could forge
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
_RSA = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
_EC = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}
_OKP = {"Ed25519": "EdDSA", "Ed448": "EdDSA"}
_REFETCH_AFTER_S = 10.0
_MAX_DOCUMENT = 1024 * 1024


class Refused(Exception):
    """Why a token is not accepted (logged; never the token)."""


def algorithms_for_key(jwk: Mapping[str, Any]) -> tuple[str, ...]:
    """The signature algorithms a token signed with the issuer's key ``jwk`` may use: its ``alg`` member when it has
    one (and that fits its type), else its type's family — RSA: RS256/384/512 and PS256/384/512; EC: ES256, ES384 or
    ES512 by its curve; OKP Ed25519/Ed448: EdDSA. None for any other key (a shared secret, ``oct``, above all): the
    key then verifies nothing. The token's own header only picks among these."""
    kty, crv, alg = jwk.get("kty"), jwk.get("crv"), jwk.get("alg")
    family: tuple[str, ...] = ()
    if kty == "RSA":
        family = _RSA
    elif kty == "EC" and isinstance(crv, str) and crv in _EC:
        family = (_EC[crv],)
    elif kty == "OKP" and isinstance(crv, str) and crv in _OKP:
        family = (_OKP[crv],)
    if alg is None:
        return family
    return (alg,) if isinstance(alg, str) and alg in family else ()


def _media_type(typ: str) -> str:
    """A ``typ`` compared as RFC 7515 §4.1.9 says: case-insensitive, ``application/`` optional."""
    typ = typ.strip().lower()
    return typ.removeprefix("application/")


# a fixed reason per PyJWT error: their messages may quote the token (its critical header names, its bytes)
_DECODE_REASONS = {
    "ExpiredSignatureError": "expired (exp)",
    "ImmatureSignatureError": "not yet valid (nbf or iat)",
    "InvalidAudienceError": "issued for another resource (aud)",
    "InvalidIssuerError": "another issuer's token (iss)",
    "InvalidSignatureError": "the signature does not verify",
    "InvalidAlgorithmError": "an algorithm its key does not allow",
    "InvalidKeyError": "a key that does not fit the algorithm",
    "DecodeError": "not a well-formed JWT",
}


def _decode_reason(exc: Exception) -> str:
    import jwt

    if isinstance(exc, jwt.MissingRequiredClaimError):
        return f"no {exc.claim} claim"  # one of the claims required here: never the token's
    for kind in type(exc).__mro__:
        if kind.__name__ in _DECODE_REASONS:
            return _DECODE_REASONS[kind.__name__]
    return f"undecodable ({type(exc).__name__})"


def _values(claim: Any) -> list[Any]:
    """A claim's values: a list's items, else the claim itself (``groups: [a, b]`` holds a and b)."""
    return list(claim) if isinstance(claim, list) else [claim]


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values: ``true`` is not ``1``, ``"1"`` is not ``1``."""
    return type(a) is type(b) and a == b


def principal_key(issuer: str, subject: str) -> str:
    """The key of a user's work (stores, workers, history): their subject under their issuer, as a digest."""
    return "user-" + hashlib.sha256(f"{issuer}\0{subject}".encode()).hexdigest()[:16]


class TokenVerifier:
    """Bearer tokens of ``conf.issuer`` for ``conf.audience``, as the SDK's ``TokenVerifier`` protocol asks."""

    def __init__(self, conf: HttpAuthSettings) -> None:
        self.conf = conf
        self._metadata: dict[str, Any] | None = None
        self._keys: dict[str, tuple[Any, tuple[str, ...]]] = {}  # kid -> (jwt.PyJWK, the algorithms it allows)
        self._fetched_at = 0.0
        self._lock = anyio.Lock()

    async def verify_token(self, token: str) -> AccessToken | None:
        from mcp.server.auth.provider import AccessToken

        try:
            claims = await (self._jwt(token) if token.count(".") == 2 else self._introspect(token))
            principal = claims.get(self.conf.principal_claim)
            if not isinstance(principal, str | int) or isinstance(principal, bool) or principal == "":
                raise Refused(f"no {self.conf.principal_claim} claim to name the user")
            self._admitted(claims)
            scope = claims.get("scope", claims.get("scp", ""))
            scopes = scope.split() if isinstance(scope, str) else [str(s) for s in scope or []]
        except Refused as exc:
            log.info("bearer token refused: %s", exc)
            refused_because(str(exc))  # the request's record in the audit trail: the reason, never the token
            return None
        except Exception as exc:  # whatever a token makes fail is its refusal, never a 500
            log.warning("bearer token refused: %s while checking it", type(exc).__name__)
            refused_because(f"{type(exc).__name__} while checking it")
            return None
        exp = claims.get("exp")
        return AccessToken(
            token=token,
            client_id=str(_client_of(claims) or principal),
            scopes=scopes,
            expires_at=int(exp) if isinstance(exp, int | float) else None,
            resource=self.conf.audience,  # checked here (aud): the SDK's own check is off
            subject=str(principal),
            # the verified claims (never the token) for the principal (ba_mcp.callers.Principal): its display name,
            # a database role mapping; iss as configured (one issuer per server)
            claims={**{k: v for k, v in claims.items() if isinstance(k, str)}, "iss": self.conf.issuer},
        )

    def _admitted(self, claims: Mapping[str, Any]) -> None:
        """The operator's ``allowed_clients`` and ``required_claims``, for JWT and introspected tokens alike."""
        conf = self.conf
        if conf.allowed_clients is not None and _client_of(claims) not in conf.allowed_clients:
            raise Refused("its client is not among http.auth.allowed_clients")
        for name, wanted in conf.required_claims.items():
            if name not in claims:
                raise Refused(f"no {name} claim (http.auth.required_claims)")
            accepted = _values(wanted)
            if not any(_same(have, want) for have in _values(claims[name]) for want in accepted):
                raise Refused(f"its {name} claim is not one http.auth.required_claims accepts")

    # -- JWT access tokens ---------------------------------------------------------------------------------------

    async def _jwt(self, token: str) -> dict[str, Any]:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise Refused(f"not a JWT ({_decode_reason(exc)})") from None
        typ = header.get("typ", "JWT")  # no typ: a plain JWT (RFC 7519 §5.1)
        if not isinstance(typ, str) or _media_type(typ) not in {_media_type(t) for t in self.conf.token_types}:
            raise Refused("its header's typ is not one of http.auth.token_types (an ID token is no access token)")
        kid = header.get("kid", "")
        if not isinstance(kid, str):
            raise Refused("its header's kid is not a string")
        key, allowed = await self._key(kid)
        if header.get("alg") not in allowed:
            # the key decides the algorithm; the header may only name one of the key's (S-19: algorithm confusion)
            raise Refused(f"its header's alg is not one its key allows ({', '.join(allowed)})")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key.key,
                algorithms=list(allowed),
                audience=self.conf.audience,
                issuer=self.conf.issuer,
                leeway=self.conf.leeway_s,
                options={"require": ["exp", "iss", "aud"]},
            )
        except Exception as exc:  # PyJWT's errors, and whatever a hostile token makes it raise
            raise Refused(_decode_reason(exc)) from None
        return claims

    async def _key(self, kid: str) -> tuple[Any, tuple[str, ...]]:
        """The issuer's signing key ``kid`` (the only one it has when the token names none) and the algorithms it
        allows."""
        async with self._lock:
            stale = time.monotonic() - self._fetched_at > self.conf.keys_cache_s
            unknown = kid not in self._keys if kid else len(self._keys) != 1
            if stale or (unknown and time.monotonic() - self._fetched_at > _REFETCH_AFTER_S):
                await self._fetch_keys()
        if kid and kid in self._keys:
            return self._keys[kid]
        if not kid and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        raise Refused("signed with a key the issuer does not publish" + ("" if kid else " (no key id)"))

    async def _fetch_keys(self) -> None:
        import jwt

        metadata = await self._issuer_metadata(refresh=True)
        uri = metadata.get("jwks_uri")
        if not isinstance(uri, str):
            raise Refused("the issuer publishes no jwks_uri")
        keys: dict[str, tuple[Any, tuple[str, ...]]] = {}
        published = (await _get_json(uri)).get("keys")
        for entry in published if isinstance(published, list) else []:
            if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                continue
            allowed = algorithms_for_key(entry)
            if not allowed:
                continue  # a shared secret, or a key whose alg does not fit it: it verifies nothing here
            try:
                key = jwt.PyJWK.from_dict(entry, algorithm=allowed[0])
            except Exception:  # a key this library cannot use: the others still serve
                continue
            keys[str(entry.get("kid") or "")] = (key, allowed)
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


def _client_of(claims: Mapping[str, Any]) -> str | None:
    """The client a token was issued to: its ``client_id`` (RFC 9068, RFC 7662), else its ``azp``."""
    client = claims.get("client_id") or claims.get("azp")
    return client if isinstance(client, str) else None


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
