"""The audit trail (S-20): who ran what, kept where no tool reads it. Never shown to the model.

One JSON line per tool call and per refused request, appended to ``audit-YYYY-MM-DD.jsonl`` (the UTC day) in the audit
folder — ``audit.dir``, else ``audit/`` in the platform's state directory (``Settings.audit_dir``), never the
workspace. The folder is 0700 and each file 0600, opened ``O_APPEND`` without following a link: several servers of one
user append to one trail, each line in one write. A day's file past ``max_file_mb`` goes on in
``audit-YYYY-MM-DD.1.jsonl``, ``.2``, …; the files of days older than ``keep_days`` are removed. A folder a tool could
reach — inside or holding the workspace, a read root, the export folder, a skills or metrics folder — stops the start
(``AuditLog.open``); only the operator's configuration sets ``audit:`` (``settings.OPERATOR_ONLY``).

A call's record (``call_entry``): ``time`` (UTC, ISO 8601), ``event: call``, ``principal`` (issuer, subject, display
name and key: never another claim, never the token), ``session``, ``call_id``, ``tool``, ``database`` and ``role`` when
the call named or used them, ``statement`` (the SQL or code as sent), ``executed`` (the SQL the tool ran, when that
differs: a metrics question's compiled statement), ``arguments`` (the others, parameter values among them), ``rows``
and ``bytes`` returned, ``artifacts`` made, ``duration_ms``, ``outcome`` (ok; refused: permission denied; error) with
``error_type``, ``error_code`` and ``error``; ``by`` for a saved analysis's step. A text over ``max_text_kb`` (a 1 MB
code cell) is kept as its head with its SHA-256 and length and ``truncated: true``; nothing is cut silently. A refused
request's record (``AuditLog.refused``): ``event: refused``, the HTTP ``status`` when the transport refused it,
``error_code``, ``reason`` (the token verifier's: never any part of the token), the ``principal`` when one is known,
the request's ``method``, ``path`` and ``client``. Every text passes ``redaction.redact`` (the databases' secrets)
and ``redaction.credentials`` (a password, token or JWT a text carries of its own: the digest is the original's).

``principals.jsonl`` beside the records names each key (key, issuer, subject, display) once per server process: the
names ``ba-mcp artifacts list``, ``analyses list`` and ``stats`` show owners by. ``read``, ``select`` and ``moment``
are ``ba-mcp audit``'s.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ba_mcp import callers, redaction
from ba_mcp.settings import AuditSettings, ConfigError

if TYPE_CHECKING:
    from ba_mcp.pipeline.usage import CallRecord

log = logging.getLogger(__name__)

PRINCIPALS = "principals.jsonl"
_FILE = re.compile(r"^audit-(\d{4}-\d{2}-\d{2})(?:\.(\d{1,6}))?\.jsonl$")
_STATEMENTS = ("query", "code")  # the argument holding a call's statement or code
_KNOWN_KEYS = 10_000  # principals this process named in principals.jsonl, remembered (then named again)
_REFUSED_TYPES = ("permission_denied",)
_CHECK_EVERY = 64 * 1024  # bytes a server writes before it looks at its file's size again (several may append)


def _clean(text: str) -> str:
    """A text as the trail keeps it: without the databases' secrets, nor a credential it carries of its own."""
    return redaction.credentials(redaction.redact(text))


def bounded_text(text: str, limit: int) -> dict[str, Any]:
    """A statement or code as the trail keeps it: its text — the first ``limit`` bytes when longer, marked
    ``truncated`` — its SHA-256 and its length in characters."""
    data = text.encode("utf-8", "surrogatepass")
    kept: dict[str, Any] = {"sha256": hashlib.sha256(data).hexdigest(), "chars": len(text)}
    if len(data) <= limit:
        kept["text"] = _clean(text)
        return kept
    kept["text"] = _clean(data[:limit].decode("utf-8", "ignore"))
    kept["truncated"] = True
    return kept


def bounded_value(value: Any, limit: int) -> Any:
    """Arguments as the trail keeps them: as they are when their JSON is at most ``limit`` bytes, else that JSON's
    head, SHA-256 and length, marked ``truncated``."""
    text = json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
    if len(text) <= limit // 4 or len(text.encode("utf-8", "surrogatepass")) <= limit:
        return _redacted(value)
    return {"json": bounded_text(text, limit)}


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return _clean(value)
    if isinstance(value, Mapping):
        return {str(k): _redacted(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redacted(v) for v in value]
    return value


def _iso(timestamp: float) -> str:
    return dt.datetime.fromtimestamp(timestamp, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def seconds_of(iso: str) -> float:
    """A record's ``time`` as seconds since the epoch."""
    return dt.datetime.fromisoformat(iso).timestamp()


def _who(who: callers.Principal) -> dict[str, str]:
    return {"issuer": who.issuer, "subject": who.subject, "display": who.display, "key": who.key}


def call_entry(
    record: CallRecord,
    who: callers.Principal,
    arguments: Mapping[str, Any],
    provenance: Mapping[str, Any],
    returned: tuple[int | None, int | None] = (None, None),
    limit: int = 64 * 1024,
    by: str | None = None,
    error: str | None = None,
) -> dict[str, Any]:
    """The record of one call: ``arguments`` as the client sent them, ``provenance`` as the tool reported it (both
    taken before the session's history may cut them), ``returned``: (rows, bytes) of the answer, ``error``: the
    failure's message."""
    args = {k: v for k, v in arguments.items() if k != "output_level"}
    entry: dict[str, Any] = {
        "time": _iso(record.timestamp),
        "event": "call",
        "principal": _who(who),
        "session": record.session,
        "call_id": record.call_id,
        "tool": record.tool,
    }
    database = provenance.get("database") or args.get("database")
    if isinstance(database, str) and database:
        entry["database"] = database
    role = provenance.get("role")
    if isinstance(role, str) and role:
        entry["role"] = role
    said = next((k for k in _STATEMENTS if isinstance(args.get(k), str)), None)
    statement = args.pop(said) if said is not None else None
    if statement is not None:
        entry["statement"] = bounded_text(statement, limit)
    ran = provenance.get("sql")
    if isinstance(ran, str) and ran.strip().rstrip(";").strip() != (statement or "").strip().rstrip(";").strip():
        entry["executed"] = bounded_text(ran, limit)
    if isinstance(provenance.get("code_id"), str):
        entry["code_id"] = provenance["code_id"]
    if args:
        entry["arguments"] = bounded_value(args, limit)
    rows, size = returned
    if rows is not None:
        entry["rows"] = rows
    if size is not None:
        entry["bytes"] = size
    if record.artifacts:
        entry["artifacts"] = list(record.artifacts)
    entry["duration_ms"] = record.duration_ms
    if record.success:
        entry["outcome"] = "ok"
    else:
        entry["outcome"] = "refused" if record.error_type in _REFUSED_TYPES else "error"
        entry["error_type"], entry["error_code"] = record.error_type, record.error_code
        if error:
            entry["error"] = _clean(error[:1000])
    if by:
        entry["by"] = by
    return entry


# -- refused requests --------------------------------------------------------------------------------------------

_refusals: ContextVar[list[str] | None] = ContextVar("ba_mcp_refusals", default=None)


def refused_because(reason: str) -> None:
    """The bearer token of the HTTP request being answered was refused, for ``reason`` (the verifier's words, never
    any part of the token): the request's refusal record says so (``RefusedRequests``)."""
    noted = _refusals.get()
    if noted is not None:
        noted.append(reason)


class RefusedRequests:
    """ASGI middleware, the outermost of the HTTP app: each request answered 401 or 403 (the SDK's bearer check:
    no token, a token refused, a scope missing) becomes a refusal record with the verifier's reason — and one the
    transport refuses past it, 403 for an Origin or 421 for a Host that is not this server's (a page elsewhere
    reaching it through DNS rebinding, with a token the browser holds), as that, not as a missing scope."""

    def __init__(self, app: Any, audit: AuditLog) -> None:
        self.app = app
        self.audit = audit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or not self.audit.enabled:
            await self.app(scope, receive, send)
            return
        noted: list[str] = []
        token = _refusals.set(noted)

        async def watched(message: dict[str, Any]) -> None:
            if message.get("type") == "http.response.start" and message.get("status") in (401, 403, 421):
                said = dict(message.get("headers") or []).get(b"www-authenticate", b"")
                self._record(scope, int(message["status"]), noted, b"insufficient_scope" in said)
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            _refusals.reset(token)

    def _record(self, scope: dict[str, Any], status: int, noted: list[str], scope_missing: bool = False) -> None:
        headers = {k.lower(): v for k, v in scope.get("headers") or []}
        bearer = headers.get(b"authorization", b"").lower().startswith(b"bearer ")
        identity = None
        if status in (403, 421):
            if scope_missing:  # the bearer check's 403 (its WWW-Authenticate says so)
                code, reason = "insufficient_scope", "a scope http.auth.required_scopes names is missing"
            else:  # the transport's, past the bearer check: a page elsewhere reaching the server (DNS rebinding)
                code = "forbidden_origin" if status == 403 else "forbidden_host"
                reason = f"its {'Origin' if status == 403 else 'Host'} header names no address of this server"
            token = getattr(scope.get("user"), "access_token", None)
            claims = getattr(token, "claims", None) or {}
            subject = str(getattr(token, "subject", "") or "")
            if subject:
                shown = callers.from_claims("", claims, subject)
                identity = {"issuer": shown.issuer, "subject": shown.subject, "display": shown.display}
        elif noted:
            code, reason = "invalid_token", noted[-1]
        elif bearer:
            code, reason = "invalid_token", "expired, or issued for another resource (the transport's check)"
        else:
            code, reason = "no_token", "no bearer token"
        client = scope.get("client")
        self.audit.refused(
            code,
            reason,
            status=status,
            identity=identity,
            method=str(scope.get("method") or ""),
            path=str(scope.get("path") or ""),
            client=str(client[0]) if client else None,
        )


# -- the trail ----------------------------------------------------------------------------------------------------


def _day(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(timestamp))


def _file_name(day: str, part: int) -> str:
    return f"audit-{day}.jsonl" if part == 0 else f"audit-{day}.{part}.jsonl"


def _open_append(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)


def trail_files(folder: Path) -> list[tuple[str, int, Path]]:
    """The trail's files, oldest first: (UTC day, part, path)."""
    found = []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        m = _FILE.match(name)
        if m:
            found.append((m.group(1), int(m.group(2) or 0), folder / name))
    return sorted(found)


def _holds(outer: Path, inner: Path) -> bool:
    return outer == inner or outer in inner.parents


def check_apart(folder: Path, visible: Iterable[tuple[str, Path]], team: bool = True) -> None:
    """Refuse an audit folder that is, holds or lies in a folder the tools reach (``visible``: its setting, its
    path); links resolved. A server with one principal (``team`` False: stdio, loopback HTTP without ``http.auth``)
    is warned instead: the tools, read-only there, would show its one user their own calls (a user who gave their
    home folder as a read root keeps a working server)."""
    real = Path(os.path.realpath(folder))
    for setting, where in visible:
        other = Path(os.path.realpath(where.expanduser()))
        if _holds(other, real) or _holds(real, other):
            message = (
                f"audit.dir {folder} and {setting} ({where}) hold one another: the tools would reach the audit trail; "
                "choose an audit folder outside every folder the server serves"
            )
            if team:
                raise ConfigError(message)
            log.warning("%s (one user here: served, the trail readable by the tools)", message)


class AuditLog:
    """Appends the audit trail's records; thread-safe. Built by the App (``open``), handed to the runner (calls), the
    server's session middleware (requests over the rate limit) and the HTTP app (``RefusedRequests``)."""

    def __init__(self, conf: AuditSettings, folder: Path) -> None:
        self.conf = conf
        self.enabled = conf.enabled
        self.folder = folder
        self.limit = conf.max_text_kb * 1024
        self._max_file = conf.max_file_mb * 1024 * 1024
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._day = ""
        self._day_start = 0.0  # the UTC day of the open file, in seconds
        self._seen = 0  # the file's size when last looked at
        self._unchecked = 0  # bytes this server wrote to it since
        self._part = 0
        self._known: set[str] = set()
        self._failing = False

    @classmethod
    def open(
        cls, conf: AuditSettings, folder: Path, visible: Iterable[tuple[str, Path]] = (), team: bool = True
    ) -> AuditLog:
        """The trail in ``folder`` (made 0700 when missing, tightened to 0700 when not), refused when a folder the
        tools reach holds it or it holds one (``visible``) or when it cannot be written: ``ConfigError``."""
        trail = cls(conf, folder)
        if not conf.enabled:
            return trail
        check_apart(folder, visible, team)
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            found = os.lstat(folder)
            if not stat.S_ISDIR(found.st_mode):
                raise ConfigError(f"audit.dir {folder} is not a folder (a link is not followed)")
            if stat.S_IMODE(found.st_mode) != 0o700:
                os.chmod(folder, 0o700)
            with trail._lock:
                trail._current(time.time())
        except OSError as exc:
            raise ConfigError(f"audit.dir {folder}: the audit trail cannot be written there ({exc.strerror})") from None
        return trail

    def call(
        self,
        record: CallRecord,
        who: callers.Principal,
        arguments: Mapping[str, Any],
        provenance: Mapping[str, Any],
        returned: tuple[int | None, int | None] = (None, None),
        by: str | None = None,
        error: str | None = None,
    ) -> None:
        """One call's record (``call_entry``)."""
        if self.enabled:
            entry = call_entry(record, who, arguments, provenance, returned, self.limit, by, error)
            self._write(entry, record.timestamp, who)

    def refused(
        self,
        code: str,
        reason: str,
        *,
        status: int | None = None,
        who: callers.Principal | None = None,
        identity: Mapping[str, str] | None = None,
        **request: Any,
    ) -> None:
        """One refused request's record: why (``code``, ``reason``: never any part of a token), who when known."""
        if not self.enabled:
            return
        now = time.time()
        entry: dict[str, Any] = {"time": _iso(now), "event": "refused"}
        if status is not None:
            entry["status"] = status
        entry["error_code"] = code
        entry["reason"] = _clean(reason[:500])
        if who is not None:
            entry["principal"] = _who(who)
            entry["session"] = who.key
        elif identity:
            entry["principal"] = dict(identity)
        entry.update({k: v for k, v in request.items() if v})
        self._write(entry, now, who)

    def close(self) -> None:
        with self._lock:
            self._close()

    # -- writing ------------------------------------------------------------------------------------------------

    def _write(self, entry: dict[str, Any], timestamp: float, who: callers.Principal | None) -> None:
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
        data = line.encode("utf-8", "replace")
        with self._lock:
            try:
                os.write(self._current(timestamp), data)  # the record first: naming its principal cannot lose it
                self._unchecked += len(data)
                self._failing = False
                if who is not None and who.key not in self._known:
                    self._name(who)
            except OSError as exc:
                if not self._failing:  # once until it works again: a full disk is not logged per call
                    log.error("audit record not written in %s: %s", self.folder, exc.strerror)
                self._failing = True

    def _name(self, who: callers.Principal) -> None:
        """The principal's key and name in principals.jsonl (once per process)."""
        if len(self._known) >= _KNOWN_KEYS:
            self._known.clear()
        named = {"key": who.key, "issuer": who.issuer, "subject": who.subject, "display": who.display}
        fd = _open_append(self.folder / PRINCIPALS)
        try:
            # a claim's text holding a lone surrogate (JSON's "\ud800") is written with it replaced, as a record is:
            # no name may keep its principal's calls out of the trail
            os.write(
                fd, (json.dumps(named, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "replace")
            )
        finally:
            os.close(fd)
        self._known.add(who.key)

    def _current(self, timestamp: float) -> int:
        """The file a record of ``timestamp`` goes to (under the lock): its day's latest part, the next once that is
        full. The file's size (other servers append to it too) is looked at again once this server wrote 64 KB, or
        enough to fill it, since."""
        if self._fd is not None and self._day_start <= timestamp < self._day_start + 86400:
            if self._unchecked < _CHECK_EVERY and self._seen + self._unchecked < self._max_file:
                return self._fd
            self._seen, self._unchecked = os.fstat(self._fd).st_size, 0
            if self._seen < self._max_file:
                return self._fd
            self._part += 1
            day = self._day
        else:
            day = _day(timestamp)
            self._day_start = timestamp - timestamp % 86400
        if day != self._day:
            self._purge(day)
            self._day = day
            self._part = max((part for d, part, _ in trail_files(self.folder) if d == day), default=0)
        self._close()
        while True:
            fd = _open_append(self.folder / _file_name(day, self._part))
            self._seen, self._unchecked = os.fstat(fd).st_size, 0
            if self._seen < self._max_file:
                self._fd = fd
                return fd
            os.close(fd)
            self._part += 1

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _purge(self, today: str) -> None:
        """The files of days older than ``keep_days`` before ``today``, removed."""
        if self.conf.keep_days is None:
            return
        oldest = (dt.date.fromisoformat(today) - dt.timedelta(days=self.conf.keep_days)).isoformat()
        for day, _, path in trail_files(self.folder):
            if day < oldest:
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass  # another server of this trail removed it first
                except OSError as exc:
                    log.warning("audit file %s not removed: %s", path.name, exc.strerror)


# -- reading (ba-mcp audit) ----------------------------------------------------------------------------------------


def read(folder: Path, since: float | None = None, until: float | None = None) -> Iterator[dict[str, Any]]:
    """The records in ``folder`` from ``since`` to before ``until`` (seconds), oldest file first; a line that is no
    record is skipped."""
    first = _day(since) if since is not None else ""
    last = _day(until) if until is not None else "9999"
    for day, _, path in trail_files(folder):
        if day < first or day > last:
            continue
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                    at = seconds_of(entry["time"])
                except (ValueError, KeyError, TypeError):
                    continue
                if (since is None or at >= since) and (until is None or at < until):
                    yield entry


def names(folder: Path) -> dict[str, str]:
    """Each principal key the trail has named, with its display name (the latest)."""
    found: dict[str, str] = {}
    try:
        with (folder / PRINCIPALS).open(encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    named = json.loads(line)
                    found[str(named["key"])] = str(named["display"])
                except (ValueError, KeyError, TypeError):
                    continue
    except OSError:
        pass
    return found


def principals_named(folder: Path, user: str) -> list[dict[str, str]]:
    """The principals ``principals.jsonl`` knows that ``user`` names (``matches_user``), one per issuer and subject
    (their latest display name): more than one, and ``user`` does not say whose records to show."""
    found: dict[tuple[str, str], dict[str, str]] = {}
    try:
        with (folder / PRINCIPALS).open(encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    named = json.loads(line)
                    who = {k: str(named[k]) for k in ("key", "issuer", "subject", "display")}
                except (ValueError, KeyError, TypeError):
                    continue
                if matches_user({"principal": who}, user):
                    found[(who["issuer"], who["subject"])] = who
    except OSError:
        pass
    return list(found.values())


def matches_user(entry: Mapping[str, Any], user: str) -> bool:
    """Whether ``user`` names the record's principal: its display name, its name before an ``@``, its subject or its
    key, case aside."""
    who = entry.get("principal") or {}
    wanted = user.strip().lower()
    display = str(who.get("display") or "").lower()
    return wanted in {display, display.split("@", 1)[0], str(who.get("subject") or "").lower(), who.get("key")}


def select(
    entries: Iterable[dict[str, Any]],
    user: str | None = None,
    tool: str | None = None,
    database: str | None = None,
) -> Iterator[dict[str, Any]]:
    """The records of ``user`` (``matches_user``), of ``tool`` and on ``database``."""
    for entry in entries:
        if user is not None and not matches_user(entry, user):
            continue
        if tool is not None and entry.get("tool") != tool:
            continue
        if database is not None and entry.get("database") != database:
            continue
        yield entry


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)$")
_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def moment(text: str, now: float | None = None) -> float:
    """``--since``/``--until`` as seconds: ``today``, ``yesterday`` (local midnight), a date (``2026-05-04``: its local
    midnight), a date and time (ISO 8601; local unless it names its offset) or a duration back from now (``24h``,
    ``7d``, ``30m``, ``90s``, ``2w``). ``ValueError`` names the forms."""
    now = time.time() if now is None else now
    said = text.strip().lower()
    midnight = dt.datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
    if said == "today":
        return midnight.timestamp()
    if said == "yesterday":
        return (midnight - dt.timedelta(days=1)).timestamp()
    m = _DURATION.match(said)
    if m:
        return now - float(m.group(1)) * _UNITS[m.group(2)]
    try:
        return dt.datetime.fromisoformat(text.strip()).timestamp()  # naive: local time
    except ValueError:
        raise ValueError(
            f"{text!r} is no time: give today, yesterday, a date (2026-05-04), a date and time (2026-05-04T09:30) "
            "or a duration back from now (24h, 7d, 30m)"
        ) from None
