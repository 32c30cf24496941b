"""The bearer-token verifier of the team server (ba_mcp/auth.py), in process: the issuer's metadata and keys served
from memory (no network), tokens signed here with real keys. The algorithm comes from the issuer's key, never from
the token's header; a header ``typ`` other than ``token_types`` is refused (an ID token is no access token);
``allowed_clients`` and ``required_claims``; whatever a token holds, a refusal (``None``: the SDK's 401) logged with
its reason and nothing of the token. The same against a real identity provider and a served server:
tests/test_team_server.py (slow tier)."""

from __future__ import annotations

import base64
import json
import logging
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from ba_mcp.auth import ALGORITHMS, TokenVerifier, algorithms_for_key
from ba_mcp.settings import HttpAuthSettings

pytestmark = pytest.mark.anyio
ISSUER = "https://idp.example.com"
AUDIENCE = "https://ba.example.com/mcp"
RSA_FAMILY = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())


@pytest.mark.parametrize(
    ("jwk", "expected"),
    [
        ({"kty": "RSA"}, RSA_FAMILY),
        ({"kty": "RSA", "alg": "RS256"}, ("RS256",)),
        ({"kty": "RSA", "alg": "PS384"}, ("PS384",)),
        ({"kty": "RSA", "alg": "ES256"}, ()),  # an alg that does not fit the key: the key verifies nothing
        ({"kty": "RSA", "alg": "HS256"}, ()),
        ({"kty": "RSA", "alg": "none"}, ()),
        ({"kty": "RSA", "alg": ["RS256"]}, ()),
        ({"kty": "EC", "crv": "P-256"}, ("ES256",)),
        ({"kty": "EC", "crv": "P-384"}, ("ES384",)),
        ({"kty": "EC", "crv": "P-521"}, ("ES512",)),
        ({"kty": "EC", "crv": "P-256", "alg": "ES256"}, ("ES256",)),
        ({"kty": "EC", "crv": "P-256", "alg": "ES384"}, ()),
        ({"kty": "EC", "crv": "secp256k1"}, ()),
        ({"kty": "EC"}, ()),
        ({"kty": "EC", "crv": ["P-256"]}, ()),  # not even hashable: no exception either
        ({"kty": "OKP", "crv": "Ed25519"}, ("EdDSA",)),
        ({"kty": "OKP", "crv": "Ed448"}, ("EdDSA",)),
        ({"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA"}, ("EdDSA",)),
        ({"kty": "OKP", "crv": "X25519"}, ()),  # a key agreement key
        ({"kty": "oct", "k": "c2VjcmV0"}, ()),  # a shared secret, never
        ({"kty": "oct", "k": "c2VjcmV0", "alg": "HS256"}, ()),
        ({}, ()),
    ],
)
def test_the_algorithms_come_from_the_key(jwk: dict[str, Any], expected: tuple[str, ...]) -> None:
    assert algorithms_for_key(jwk) == expected
    assert set(algorithms_for_key(jwk)) <= set(ALGORITHMS)


def test_the_algorithms_of_real_public_keys() -> None:
    def jwk(public: Any, kind: Any) -> dict[str, Any]:
        exported: dict[str, Any] = kind.to_jwk(public, as_dict=True)
        return exported

    assert algorithms_for_key(jwk(RSA_KEY.public_key(), RSAAlgorithm)) == RSA_FAMILY
    for curve, alg in ((ec.SECP256R1(), "ES256"), (ec.SECP384R1(), "ES384"), (ec.SECP521R1(), "ES512")):
        assert algorithms_for_key(jwk(ec.generate_private_key(curve).public_key(), ECAlgorithm)) == (alg,)
    for okp in (ed25519.Ed25519PrivateKey.generate(), ed448.Ed448PrivateKey.generate()):
        assert algorithms_for_key(jwk(okp.public_key(), OKPAlgorithm)) == ("EdDSA",)


# -- the verifier, its issuer in memory ---------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _raw(header: Any, payload: Any, signature: bytes = b"x" * 64) -> str:
    """A token assembled by hand: any header at all."""
    encode = lambda part: _b64(part if isinstance(part, bytes) else json.dumps(part).encode())  # noqa: E731
    return f"{encode(header)}.{encode(payload)}.{_b64(signature)}"


def _claims(**extra: Any) -> dict[str, Any]:
    now = int(time.time())
    return {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "client_id": "alice", "exp": now + 600, "iat": now} | extra


def _signed(claims: dict[str, Any] | None = None, key: Any = RSA_KEY, alg: str = "RS256", **header: Any) -> str:
    fields = {"kid": "rsa-1", "typ": "at+jwt"} | header
    token = jwt.encode(claims or _claims(), key, algorithm=alg, headers=fields)
    assert json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "==")).get("typ") == fields.get("typ")
    return token


@pytest.fixture
def issuer(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The issuer's metadata and key set served from memory; the URLs asked for, listed."""
    from ba_mcp import auth

    rsa_jwk = RSAAlgorithm.to_jwk(RSA_KEY.public_key(), as_dict=True) | {"kid": "rsa-1", "use": "sig"}
    keys = [
        rsa_jwk,
        {"kty": "oct", "k": _b64(b"a shared secret"), "kid": "oct-1"},  # never a key to verify with
        {**rsa_jwk, "kid": "enc-1", "use": "enc"},
        "not a key",
    ]
    asked: list[str] = []

    async def get_json(url: str) -> dict[str, Any]:
        asked.append(url)
        if url == f"{ISSUER}/.well-known/openid-configuration":
            return {"issuer": ISSUER, "jwks_uri": f"{ISSUER}/jwks"}
        assert url == f"{ISSUER}/jwks", url
        return {"keys": keys}

    monkeypatch.setattr(auth, "_get_json", get_json)
    return asked


def _verifier(**conf: Any) -> TokenVerifier:
    return TokenVerifier(HttpAuthSettings(issuer=ISSUER, audience=AUDIENCE, **conf))


async def test_a_valid_access_token_is_accepted(issuer: list[str]) -> None:
    accepted = await _verifier().verify_token(_signed())
    assert accepted is not None and accepted.subject == "alice" and accepted.client_id == "alice"
    assert issuer == [f"{ISSUER}/.well-known/openid-configuration", f"{ISSUER}/jwks"]


def _forged() -> dict[str, str]:
    """Tokens a red team sends: each one a refusal, never an exception."""
    header_of = {"alg": "RS256", "kid": "rsa-1", "typ": "at+jwt"}
    return {
        # the issuer's RSA key id, an EC signature: PyJWT raised TypeError (a 500) when the header chose the algorithm
        "ES256 under the RSA key id": _signed(key=EC_KEY, alg="ES256"),
        "PS256 by another key": _signed(key=OTHER_RSA_KEY, alg="PS256"),
        "HS256 with the public key as secret": _raw(header_of | {"alg": "HS256"}, _claims()),
        "alg none": _raw(header_of | {"alg": "none"}, _claims(), b""),
        "a header with no fields": _raw({}, _claims()),
        "a header that is a list": _raw([1, 2], _claims()),
        "a header that is not JSON": _raw(b"\xff\xfe{garbage", _claims()),
        "fields of the wrong types": _raw({"alg": 5, "kid": {"a": 1}, "typ": ["at+jwt"]}, _claims()),
        "an alg that is a list": _raw(header_of | {"alg": ["RS256"]}, _claims()),
        "a kid that is a number": _raw(header_of | {"kid": 7}, _claims()),
        "the oct key's id": _raw(header_of | {"alg": "HS256", "kid": "oct-1"}, _claims()),
        "an unknown critical extension": _signed(crit=["zz-secret-ext"]),
        "a payload that is not JSON": _raw(header_of, b"\x00\x01 not json"),
        "a payload that is a list": _raw(header_of, [1]),
        "no exp": _signed({k: v for k, v in _claims().items() if k != "exp"}),
        "an aud that is a number": _signed(_claims(aud=5)),
        "a sub that is an object": _signed(_claims(sub={"a": 1})),
    }


@pytest.mark.parametrize("case", list(_forged()))
async def test_a_forged_or_malformed_token_is_refused_and_logged_without_any_of_it(
    issuer: list[str], case: str, caplog: pytest.LogCaptureFixture
) -> None:
    token = _forged()[case]
    with caplog.at_level(logging.DEBUG, logger="ba_mcp.auth"):
        assert await _verifier().verify_token(token) is None
    refusals = [r for r in caplog.records if r.getMessage().startswith("bearer token refused: ")]
    assert len(refusals) == 1 and refusals[0].exc_info is None, caplog.text  # its reason; no traceback
    logged = caplog.text
    for part in [*token.split("."), "zz-secret-ext"]:
        assert not part or part not in logged, (case, logged)


async def test_the_reason_of_an_algorithm_the_key_does_not_allow_is_logged(
    issuer: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="ba_mcp.auth"):
        assert await _verifier().verify_token(_signed(key=EC_KEY, alg="ES256")) is None
    assert "alg is not one its key allows (RS256, RS384, RS512, PS256, PS384, PS512)" in caplog.text


@pytest.mark.parametrize(
    ("typ", "default", "with_jwt"),
    [
        ("at+jwt", True, True),
        ("AT+JWT", True, True),
        ("application/at+jwt", True, True),
        ("JWT", False, True),  # Entra ID's, Keycloak's access tokens; an ID token
        (None, False, True),  # no typ: a plain JWT (oidc-provider's ID tokens)
        ("logout+jwt", False, False),
        ("application/jwt", False, True),
    ],
)
async def test_the_header_typ_is_one_of_token_types(
    issuer: list[str], typ: str | None, default: bool, with_jwt: bool
) -> None:
    token = _signed(typ=typ)
    assert (await _verifier().verify_token(token) is not None) is default
    accepting_jwt = _verifier(token_types=["at+jwt", "JWT"])
    assert (await accepting_jwt.verify_token(token) is not None) is with_jwt


async def test_an_id_token_for_the_audience_is_refused_by_default(issuer: list[str]) -> None:
    """An ID token whose client id is the server's URL carries iss, aud, exp and sub: only its typ tells it apart."""
    id_token = _signed({k: v for k, v in _claims(nonce="n").items() if k != "client_id"}, typ=None)
    assert await _verifier().verify_token(id_token) is None
    assert await _verifier(token_types=["at+jwt", "JWT"]).verify_token(id_token) is not None


async def test_allowed_clients_name_the_tokens_client(issuer: list[str]) -> None:
    verifier = _verifier(allowed_clients=["alice", "claude"])
    assert await verifier.verify_token(_signed()) is not None
    stranger = _signed(_claims(sub="x1", client_id="x1"))  # a client anybody registered: its own token
    assert await verifier.verify_token(stranger) is None
    by_azp = {k: v for k, v in _claims(sub="dana", azp="claude").items() if k != "client_id"}
    accepted = await verifier.verify_token(_signed(by_azp))
    assert accepted is not None and accepted.client_id == "claude" and accepted.subject == "dana"
    no_client = {k: v for k, v in _claims().items() if k != "client_id"}
    assert await verifier.verify_token(_signed(no_client)) is None


@pytest.mark.parametrize(
    ("required", "claims", "accepted"),
    [
        ({"groups": "ba-analysts"}, {"groups": ["staff", "ba-analysts"]}, True),
        ({"groups": ["ba-analysts", "admins"]}, {"groups": ["admins"]}, True),
        ({"groups": ["ba-analysts"]}, {"groups": ["staff"]}, False),
        ({"groups": ["ba-analysts"]}, {}, False),
        ({"tid": "tenant-1"}, {"tid": "tenant-1"}, True),
        ({"tid": "tenant-1"}, {"tid": "tenant-2"}, False),
        ({"email_verified": True}, {"email_verified": True}, True),
        ({"email_verified": True}, {"email_verified": "true"}, False),
        ({"level": 1}, {"level": True}, False),  # compared as JSON values: true is not 1
        ({"tid": "t", "groups": "g"}, {"tid": "t"}, False),  # every one required
    ],
)
async def test_required_claims(
    issuer: list[str], required: dict[str, Any], claims: dict[str, Any], accepted: bool
) -> None:
    verifier = _verifier(required_claims=required)
    assert (await verifier.verify_token(_signed(_claims(**claims))) is not None) is accepted
