"""What no message may show: the credentials of the configured databases (S-1, S-11).

One function, ``redact(text)``, takes every registered secret out of a text — each in its raw, percent-decoded and
percent-encoded forms — and every place a message leaves the server goes through it: a ``ToolFailure``'s message
and hint (tool errors and their hints, the ``db://`` resources, ``ba-mcp doctor``'s failures), what a worker
wrote (``workers.call.settle``), the doctor's lines, and the server's log lines on stderr (``RedactingFormatter``,
installed on the root logger's handlers when secrets are registered).
A new place that shows a driver's message through a ToolFailure or a log line cannot forget it.

The user part of a URL (``scheme://USERINFO@host``) is read the one way no driver can read past: up to the **last**
``@`` of the URL. A password that holds a character a URL reserves (``@ # / ?``) is read differently by different
parsers (libpq stops at the first ``@``), so such a URL is refused before any driver sees it (``unsure``: the
message says to percent-encode the password), and a URL is shown (``masked_url``) with everything up to that last
``@`` masked — the user kept only when it is plainly a user name (``plain_user``), never a token.

Ground floor: imports nothing of ba_mcp.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import quote, unquote

MASK = "***"
_MIN_LENGTH = 3  # shorter texts are no secret worth the damage their replacement does to every message

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://)(.*)$", re.S)
# a user name as people write one (lowercase, at most three digits at its end), or the name of a variable as written
_PLAIN_USER = re.compile(r"(?:[a-z_][a-z_.\-]{0,28}[0-9]{0,3}|\$\{[A-Za-z_][A-Za-z0-9_]*\})")
# a URL's query parameter that carries a credential (password=, sslpassword=, token=, client_secret=, …)
SECRET_PARAM = re.compile(r"([?&;](?:[\w.-]*(?:pass|pwd|secret|token|key|auth|credential)[\w.-]*)=)([^&;#]*)", re.I)
_RESERVED = "@#/?"

PERCENT_ENCODE_HINT = (
    "percent-encode the password (and a user name) in the URL: @ as %40, # as %23, / as %2F, ? as %3F, : as %3A "
    "(python3 -c 'import urllib.parse,getpass; print(urllib.parse.quote(getpass.getpass(), safe=\"\"))'); "
    "an @ elsewhere in the URL as %40"
)


@dataclass(frozen=True)
class Userinfo:
    """A URL's user part as ba-mcp reads it: ``prefix`` (``scheme://``), ``text`` (everything up to the URL's last
    ``@``), ``rest`` (the host and what follows)."""

    prefix: str
    text: str
    rest: str

    @property
    def user(self) -> str:
        return self.text.split(":", 1)[0]

    @property
    def password(self) -> str | None:
        return self.text.split(":", 1)[1] if ":" in self.text else None

    @property
    def unsure(self) -> bool:
        """A reserved character in it: drivers split such a URL elsewhere (libpq at its first ``@``)."""
        return any(c in self.text for c in _RESERVED)


def userinfo_of(url: str) -> Userinfo | None:
    """The user part of ``url`` (None: the URL has none). A URL written without its scheme (``user:pw@host:5432/db``,
    as a connection string is often pasted) is read as the text after ``scheme://`` would be: its user part up to its
    last ``@`` — unless what precedes the first ``:`` or ``@`` is no user name a driver would read (a path such as
    ``data/a@b.db`` holds a ``/`` there, a whole text spaces)."""
    m = _SCHEME.match(url)
    if m:
        prefix, rest = m.groups()
    else:
        prefix, rest = "", url
    at = rest.rfind("@")
    if at < 0:
        return None
    if not m and re.search(r"[/\\\s]", re.split(r"[:@]", rest, maxsplit=1)[0]):
        return None
    return Userinfo(prefix, rest[:at], rest[at + 1 :])


def plain_user(user: str) -> bool:
    """Whether a user part is plainly a user name (shown), not a token or an encoded ``user:password`` (masked)."""
    return len(user) <= 32 and _PLAIN_USER.fullmatch(user) is not None


def unsure(url: str) -> bool:
    """Whether ``url``'s user part holds a character a URL reserves (refused: ``PERCENT_ENCODE_HINT``)."""
    info = userinfo_of(url)
    return info is not None and info.unsure


def masked_url(url: str) -> str:
    """``url`` fit to show: its user part masked up to the last ``@`` (the user kept when it is plainly a user name
    and no reserved character makes the reading unsure), every credential query parameter's value masked."""
    info = userinfo_of(url)
    if info is not None:
        if info.unsure or not plain_user(info.user):
            shown = MASK
        else:
            shown = info.user + (f":{MASK}" if info.password is not None else "")
        url = f"{info.prefix}{shown}@{info.rest}"
    return SECRET_PARAM.sub(r"\1" + MASK, url)


def forms(secret: str) -> set[str]:
    """A secret as a message may carry it: raw, percent-decoded, percent-encoded (of either)."""
    decoded = unquote(secret)
    return {secret, decoded, quote(secret, safe=""), quote(decoded, safe=""), quote(decoded)}


def url_secrets(url: str) -> list[str]:
    """The credentials in ``url``: its user part (whole, unless it is plainly a user name), its password, the
    pieces a driver may show of an unsure one, every credential query parameter's value — in every form."""
    found: set[str] = set()
    info = userinfo_of(url)
    if info is not None:
        text = info.text
        if info.password is not None:
            found.add(info.password)
        if not plain_user(info.user) or info.unsure:
            found.add(text)
        # what a driver that splits elsewhere (at the first @, at a / or #) or decodes first may show
        decoded = unquote(text)
        for candidate in (text, decoded):
            for piece in re.split(r"[@:#/?]", candidate):
                if len(piece) > _MIN_LENGTH and not plain_user(piece):
                    found.add(piece)
            if ":" in candidate and not plain_user(candidate.split(":", 1)[0]):
                found.add(candidate.split(":", 1)[0])
            if ":" in candidate:
                found.add(candidate.split(":", 1)[1])
        first = re.split(r"[@/]", text, maxsplit=1)[0]  # libpq's reading: up to the first @ (or /)
        if ":" in first:
            found.add(first.split(":", 1)[1])
    found |= {m.group(2) for m in SECRET_PARAM.finditer(url) if m.group(2)}
    return _longest_first(s for secret in found for s in forms(secret))


def _longest_first(texts: Iterable[str]) -> list[str]:
    return sorted({t for t in texts if len(t) >= _MIN_LENGTH}, key=len, reverse=True)


class _Registry:
    """The secrets of every database this process serves (added as their configuration is read)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: tuple[str, ...] = ()

    def add(self, secrets: Iterable[str]) -> None:
        with self._lock:
            self._secrets = tuple(_longest_first([*self._secrets, *secrets]))

    def __call__(self) -> tuple[str, ...]:
        return self._secrets


registered = _Registry()


def register(secrets: Iterable[str]) -> None:
    """Secrets no message may show from now on (each in every form: ``forms``); the root logger's handlers (the
    server's stderr) write through ``redact`` from now on."""
    registered.add(s for secret in secrets for s in forms(secret))
    redact_logs()


def redact(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with every registered secret — and every one of ``extra`` — replaced by ``***``, longest first.
    The one redaction: every message that leaves the server goes through it."""
    if not text:
        return text
    for secret in _longest_first([*registered(), *extra]):
        if secret in text:
            text = text.replace(secret, MASK)
    return text


# credentials a text carries of its own (a URL's password, a credential parameter, a bearer token, a JWT): what a
# record that keeps a user's text (the audit trail) masks beyond the configured secrets. Every run is bounded, so a
# long text without a credential costs linear time (no pattern backtracks over more than a few hundred characters).
_TEXT_USERINFO = re.compile(r"(://[^\s:/@'\"`]{0,256}:)[^\s'\"`]{1,512}@")
_TEXT_PARAM = re.compile(
    r"([?&;][\w.\-]{0,64}?(?:pass|pwd|secret|token|key|auth|credential)[\w.\-]{0,64}=)[^&;#\s'\"`]{1,4096}", re.I
)
_TEXT_BEARER = re.compile(
    r"(\bbearer\s{1,8})[A-Za-z0-9._~+/=\-]{16,8192}|(\bbasic\s{1,8})[A-Za-z0-9+/=]{16,8192}", re.I
)
_TEXT_JWT = re.compile(r"\beyJ[A-Za-z0-9_\-]{4,8192}\.[A-Za-z0-9_\-]{4,16384}\.[A-Za-z0-9_\-]{0,8192}")


def credentials(text: str) -> str:
    """``text`` with the credentials it carries of its own masked: a URL's password (``scheme://user:***@``, up to
    the URL's last ``@``), a credential query parameter's value (``?token=***``), a ``Bearer``/``Basic``
    credential and anything shaped like a JWT — the forms a token or a password takes in a statement, code or an
    argument. The configured databases' secrets are ``redact``'s."""
    if not text:
        return text
    # each pattern only where its fixed part is (a substring test in C: a statement without one costs next to nothing)
    if "://" in text:
        text = _TEXT_USERINFO.sub(lambda m: m.group(1) + MASK + "@", text)
    if "=" in text:
        text = _TEXT_PARAM.sub(lambda m: m.group(1) + MASK, text)
    lower = text.lower()
    if "bearer" in lower or "basic" in lower:
        text = _TEXT_BEARER.sub(lambda m: (m.group(1) or m.group(2)) + MASK, text)
    return _TEXT_JWT.sub(MASK, text) if "eyJ" in text else text


class RedactingFormatter(logging.Formatter):
    """A log line (its message and any traceback) with the secrets taken out."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        return redact(self.inner.format(record))


def redact_logs(logger: logging.Logger | None = None) -> None:
    """Every handler of ``logger`` (the root logger by default) writes its lines through ``redact``."""
    for handler in (logger or logging.getLogger()).handlers:
        if not isinstance(handler.formatter, RedactingFormatter):
            handler.setFormatter(RedactingFormatter(handler.formatter))
