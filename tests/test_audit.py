"""Issue 62 item 2, the audit trail (S-20; ba_mcp/pipeline/audit.py): a record of every tool call through the real
server in process (the operator's, as on stdio), a refused statement with its outcome and code, a long code cell kept
as its head and digest, files 0600 in a 0700 folder no tool reaches (file_reader, SQL file paths), a folder the tools
reach refused at start, a project file that cannot turn it off or move it, rotation by size and by day, retention,
several writers, the refusal records of the HTTP layer and the rate limit, and the commands that read it: ``ba-mcp
audit``, ``stats`` by user, owners in ``artifacts list`` and ``analyses list``. Over real HTTP with a real identity
provider and database: tests/test_audit_http.py (slow tier)."""

from __future__ import annotations

import datetime as dt
import getpass
import hashlib
import json
import os
import stat
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from mcp import Client

from ba_mcp import callers
from ba_mcp.app import App
from ba_mcp.cli import main
from ba_mcp.pipeline import audit
from ba_mcp.pipeline.audit import AuditLog, RefusedRequests, refused_because
from ba_mcp.pipeline.usage import CallRecord, TelemetryLog
from ba_mcp.settings import AuditSettings, ConfigError, load_settings, trust_project
from tests.conftest import in_process, make_workspace, text_of

pytestmark = pytest.mark.anyio
QUERY = "SELECT region, count(*) AS n FROM 'uploads/sales.csv' GROUP BY 1 ORDER BY 1"


def records(folder: Path) -> list[dict[str, Any]]:
    return list(audit.read(folder))


def cli(*argv: str) -> tuple[int, str, str]:
    """``ba-mcp <argv>`` in this process: its exit code, stdout and stderr."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as ended:
        main(list(argv))
    return int(ended.value.code or 0), out.getvalue(), err.getvalue()


@dataclass
class Served:
    client: Client
    folder: Path  # the audit trail's
    workspace: Path


@pytest.fixture(scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    base = tmp_path_factory.mktemp("audited")
    ws, folder = make_workspace(base), base / "state" / "audit"
    client = in_process(ws, BA_MCP_AUDIT__DIR=str(folder))
    async with client:
        yield Served(client, folder, ws)


def _calls(folder: Path, tool: str) -> list[dict[str, Any]]:
    return [r for r in records(folder) if r.get("event") == "call" and r["tool"] == tool and not r.get("by")]


# -- a record per call ---------------------------------------------------------------------------------------------


async def test_every_tools_call_is_one_record_naming_the_operator(served: Served) -> None:
    c, folder = served.client, served.folder
    calls: dict[str, dict[str, Any]] = {
        "file_reader": {"path": "uploads/sales.csv"},
        "query_database": {"query": QUERY},
        "query_metrics": {"metrics": ["net_revenue"]},
        "run_python": {"code": "x = 6 * 7\nprint(x)"},
        "use_skill": {"name": "kpi-anomaly-detection"},
        "web_reader": {"url": "http://127.0.0.1:9/page"},  # a private address: refused, and recorded
        "web_search": {"query": "retail benchmarks"},  # the tests' search endpoint is a closed port: an error
    }
    for tool, arguments in calls.items():
        await c.call_tool(tool, arguments)
    step = _calls(folder, "query_database")[-1]["call_id"]  # its id in the trail is its id in the history
    saved = await c.call_tool("save_analysis", {"name": "audited", "steps": [step]})
    assert not saved.is_error, text_of(saved)
    ran = await c.call_tool("run_analysis", {"name": "audited"})
    assert not ran.is_error, text_of(ran)
    served_tools = {t.name for t in (await c.list_tools()).tools}
    assert served_tools == {*calls, "save_analysis", "run_analysis"}, served_tools
    me = getpass.getuser()
    for tool in served_tools:
        found = _calls(folder, tool)
        assert len(found) >= 1, tool
        entry = found[-1]
        assert entry["principal"] == {"issuer": "local", "subject": me, "display": me, "key": "default"}, entry
        assert entry["session"] == "default" and entry["call_id"].startswith("call_"), entry
        assert isinstance(entry["duration_ms"], float) and entry["outcome"] in ("ok", "refused", "error"), entry
        assert dt.datetime.fromisoformat(entry["time"]).tzinfo is not None, entry
    query = _calls(folder, "query_database")[-1]
    assert query["statement"] == {
        "sha256": hashlib.sha256(QUERY.encode()).hexdigest(),
        "chars": len(QUERY),
        "text": QUERY,
    }
    assert query["database"] == "demo" and query["rows"] == 3 and query["bytes"] > 0 and query["outcome"] == "ok"
    python = _calls(folder, "run_python")[-1]
    assert python["statement"]["text"] == calls["run_python"]["code"] and python["code_id"].startswith("code_"), python
    metrics = _calls(folder, "query_metrics")[-1]
    assert metrics["arguments"]["metrics"] == ["net_revenue"], metrics
    assert metrics["outcome"] == "ok" and "SELECT" in metrics["executed"]["text"].upper(), metrics
    reader = _calls(folder, "file_reader")[-1]
    assert reader["arguments"] == {"path": "uploads/sales.csv"} and reader["rows"] == 50 and reader["artifacts"]
    web = _calls(folder, "web_reader")[-1]
    assert web["outcome"] in ("refused", "error") and web["error_code"] and web["error"], web
    # the saved analysis's replay: each step recorded too, as its caller's, marked as a saved analysis's
    steps = [r for r in records(folder) if r.get("by") == "saved analysis"]
    assert steps and all(r["principal"]["display"] == me for r in steps), steps
    assert any(r["tool"] == "query_database" and r["statement"]["text"] == QUERY for r in steps), steps
    named = audit.names(folder)
    assert named == {"default": me}, named


async def test_a_refused_statement_is_recorded_with_its_outcome_code_and_database(served: Served) -> None:
    c, folder = served.client, served.folder
    for sql, code in (
        ("DELETE FROM order_facts", "READ_ONLY"),
        ("SELECT * FROM read_text('/etc/passwd')", None),
    ):
        result = await c.call_tool("query_database", {"query": sql})
        assert result.is_error, text_of(result)
        entry = next(r for r in reversed(_calls(folder, "query_database")) if r["statement"]["text"] == sql)
        assert entry["outcome"] == "refused" and entry["error_type"] == "permission_denied", entry
        assert entry["database"] == "demo" and entry["error"], entry
        if code:
            assert entry["error_code"] == code, entry


async def test_a_long_code_cell_is_kept_as_its_head_and_digest_and_says_so(served: Served) -> None:
    code = "x = 1  # " + "y" * 1_200_000
    result = await served.client.call_tool("run_python", {"code": code})
    assert result.is_error  # over max_code_chars: refused, and recorded all the same
    entry = _calls(served.folder, "run_python")[-1]
    kept = entry["statement"]
    assert kept["truncated"] is True and kept["chars"] == len(code), {k: v for k, v in kept.items() if k != "text"}
    assert kept["sha256"] == hashlib.sha256(code.encode()).hexdigest()
    assert code.startswith(kept["text"]) and len(kept["text"].encode()) == 64 * 1024
    assert entry["error_code"] == "INVALID_ARGUMENTS" or entry["error_type"] == "invalid_parameters", entry
    biggest = max(p.stat().st_size for _, _, p in audit.trail_files(served.folder))
    assert biggest < 2 * 1024 * 1024  # the record is bounded, not the cell


async def test_the_trail_is_files_0600_in_a_0700_folder(served: Served) -> None:
    await served.client.call_tool("query_database", {"query": "SELECT 1"})
    assert stat.S_IMODE(served.folder.stat().st_mode) == 0o700
    files = [p for p in served.folder.iterdir()]
    assert any(p.name.startswith("audit-") for p in files) and any(p.name == audit.PRINCIPALS for p in files), files
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files), [oct(p.stat().st_mode) for p in files]


async def test_no_tool_reads_the_trail_by_a_path(served: Served) -> None:
    c, folder = served.client, served.folder
    await c.call_tool("query_database", {"query": "SELECT 'marker-for-the-trail' AS m"})
    trail = audit.trail_files(folder)[-1][2]
    relative = os.path.relpath(trail, served.workspace)
    attempts = [
        ("file_reader", {"path": str(trail)}),
        ("file_reader", {"path": relative}),
        ("file_reader", {"path": f"file://{trail}"}),
        ("query_database", {"query": f"SELECT * FROM read_json_auto('{trail}')"}),
        ("query_database", {"query": f"SELECT * FROM '{trail}'"}),
        ("query_database", {"query": f"SELECT * FROM read_text('{relative}')"}),
        ("run_python", {"code": f"print(open({str(trail)!r}).read())"}),
    ]
    for tool, arguments in attempts:
        result = await c.call_tool(tool, arguments)
        shown = text_of(result)
        assert result.is_error and "marker-for-the-trail" not in shown, (tool, arguments, shown[:300])
        assert "principal" not in shown and "sha256" not in shown, (tool, arguments, shown[:300])


def test_a_folder_the_tools_reach_cannot_hold_the_trail(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    cases = [
        {"audit": {"dir": ws / "logs" / "audit"}},  # in the workspace
        {"audit": {"dir": outside / "audit"}, "files": {"read_roots": {"shared": outside}}},  # in a read root
        {"audit": {"dir": tmp_path}},  # holding the workspace
        {"audit": {"dir": outside / "audit"}, "files": {"export_dir": outside}},  # in the export folder
    ]
    team = {"auth": {"issuer": "https://idp.example.com", "audience": "https://ba.example.com/mcp"}}
    for case in cases:
        settings = load_settings(workspace=ws, environ={}, http=team, **case)
        with pytest.raises(ConfigError) as refused:
            App(settings)
        assert "audit.dir" in str(refused.value) and "the tools would reach" in str(refused.value), refused.value


async def test_one_user_whose_read_root_holds_the_trail_is_warned_and_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Without http.auth the server has one principal (stdio, an extension): a read root that holds the default trail
    (a user who gave their home folder) is warned about, not a server that will not start; the trail is written."""
    ws = make_workspace(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    settings = load_settings(
        workspace=ws, environ={}, audit={"dir": home / ".local" / "state" / "audit"}, files={"read_roots": {"me": home}}
    )
    with caplog.at_level("WARNING", logger="ba_mcp.pipeline.audit"):
        app = App(settings)
    try:
        assert "the tools would reach the audit trail" in caplog.text and "one user here" in caplog.text, caplog.text
        assert (home / ".local" / "state" / "audit").is_dir()
    finally:
        await app.aclose()


def test_a_project_file_cannot_turn_the_trail_off_move_it_or_trim_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "repo" / "ba-mcp.yaml"
    project.parent.mkdir()
    project.write_text(
        yaml.safe_dump(
            {"audit": {"enabled": False, "dir": str(tmp_path / "moved"), "keep_days": 1}, "log_level": "INFO"}
        )
    )
    defaults = AuditSettings()
    for approved in (False, True):
        if approved:
            trust_project(project)
        settings = load_settings(project=project, environ={})
        state = settings.project_file
        assert state is not None and state.approved is approved
        assert settings.audit == defaults, settings.audit
        assert sorted(state.refused) == sorted(
            f"audit.{k} — the operator's alone (set it in your own configuration)"
            for k in ("enabled", "dir", "keep_days")
        ), state.refused
        assert "the operator's alone" in state.advice() and "audit.enabled" in state.advice(), state.advice()
        assert (settings.log_level == "INFO") is approved  # the rest of the file as approval says
    # said on stderr when a command starts in the project
    monkeypatch.chdir(project.parent)
    monkeypatch.setenv("BA_MCP_AUDIT__DIR", str(tmp_path / "operator"))
    _, _, err = cli("audit")
    assert "audit.enabled — the operator's alone" in err, err
    # the operator's own sources set it
    assert load_settings(environ={"BA_MCP_AUDIT__ENABLED": "false"}).audit.enabled is False
    assert load_settings(audit={"keep_days": 30}).audit.keep_days == 30


# -- the trail's files ---------------------------------------------------------------------------------------------


def _record(timestamp: float, statement: str = "SELECT 1", tool: str = "query_database", **fields: Any) -> CallRecord:
    rec = CallRecord(
        execution_id=os.urandom(8).hex(),
        session=fields.pop("session", "default"),
        tool=tool,
        timestamp=timestamp,
        duration_ms=1.5,
        input_tokens=0,
        output_tokens=0,
        output_level="standard",
        level_downgraded=False,
        cache_hit=False,
        retries=0,
        success=fields.pop("success", True),
        arguments={"query": statement, **fields.pop("arguments", {})},
        **fields,
    )
    return rec


def _person(name: str, key: str | None = None) -> callers.Principal:
    return callers.from_claims(
        key or f"user-{name}", {"iss": "https://idp.example", "email": f"{name}@example.com"}, name
    )


def test_a_days_file_past_its_size_goes_on_in_the_next_and_each_day_has_its_own(tmp_path: Path) -> None:
    trail = AuditLog.open(AuditSettings(max_file_mb=1, max_text_kb=64), tmp_path / "audit")
    big = "SELECT '" + "z" * 200_000 + "'"
    noon = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC).timestamp()
    for i in range(40):
        trail.call(_record(noon + i, big), _person("alice"), {"query": big}, {"database": "demo"})
    trail.call(_record(noon + 86400, "SELECT 2"), _person("alice"), {"query": "SELECT 2"}, {})
    trail.close()
    files = [(day, part) for day, part, _ in audit.trail_files(tmp_path / "audit")]
    march_first = [part for day, part in files if day == "2026-03-01"]
    assert march_first == list(range(len(march_first))) and len(march_first) >= 2, files
    assert ("2026-03-02", 0) in files, files
    for day, part, path in audit.trail_files(tmp_path / "audit"):
        if day == "2026-03-01" and part < max(march_first):
            assert 1024 * 1024 <= path.stat().st_size < 1024 * 1024 + 70 * 1024, (path.name, path.stat().st_size)
    assert len(records(tmp_path / "audit")) == 41  # none lost, each line whole


def test_files_of_days_older_than_keep_days_are_removed(tmp_path: Path) -> None:
    folder = tmp_path / "audit"
    folder.mkdir()
    today = dt.datetime.now(dt.UTC).date()
    old = [f"audit-{today - dt.timedelta(days=40)}.jsonl", f"audit-{today - dt.timedelta(days=31)}.2.jsonl"]
    kept = [f"audit-{today - dt.timedelta(days=30)}.jsonl", f"audit-{today - dt.timedelta(days=1)}.jsonl", "notes.txt"]
    for name in old + kept:
        (folder / name).write_text("")
    AuditLog.open(AuditSettings(keep_days=30), folder).close()
    left = {p.name for p in folder.iterdir()}
    assert not left & set(old) and set(kept) <= left, left
    AuditLog.open(AuditSettings(keep_days=None), folder).close()
    assert set(kept) <= {p.name for p in folder.iterdir()}


def test_several_writers_append_whole_lines_to_one_trail(tmp_path: Path) -> None:
    folder = tmp_path / "audit"
    writers = [AuditLog.open(AuditSettings(), folder) for _ in range(2)]
    now = time.time()

    def write(trail: AuditLog, who: str) -> None:
        for i in range(200):
            statement = f"SELECT {i} -- {who} " + "w" * (i * 37 % 3000)
            trail.call(_record(now, statement), _person(who), {"query": statement}, {})

    threads = [threading.Thread(target=write, args=(t, n)) for t, n in zip(writers * 2, "abcd", strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for trail in writers:
        trail.close()
    lines = [line for _, _, p in audit.trail_files(folder) for line in p.read_text().splitlines()]
    assert len(lines) == 800 and all(json.loads(line)["event"] == "call" for line in lines)


def test_the_databases_secrets_never_reach_the_trail(tmp_path: Path) -> None:
    from ba_mcp import redaction

    redaction.register(["pw-Secret-42"])
    trail = AuditLog.open(AuditSettings(), tmp_path / "audit")
    statement = "SELECT 'pw-Secret-42'"
    trail.call(
        _record(time.time(), statement, success=False),
        _person("alice"),
        {"query": statement, "params": ["pw-Secret-42"]},
        {},
        error="pw-Secret-42 refused",
    )
    trail.close()
    text = "".join(p.read_text() for _, _, p in audit.trail_files(tmp_path / "audit"))
    assert "pw-Secret-42" not in text and "***" in text, text


# -- refused requests ----------------------------------------------------------------------------------------------


async def test_each_refused_http_request_is_recorded_with_its_reason_never_its_token(tmp_path: Path) -> None:
    trail = AuditLog.open(AuditSettings(), tmp_path / "audit")
    secret = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"

    class Token:
        subject = "carol"
        claims: ClassVar[dict[str, str]] = {"iss": "https://idp.example", "preferred_username": "carol"}

    async def transport(scope: dict[str, Any], receive: Any, send: Any) -> None:
        """What the SDK's bearer check does: the verifier's refusal, a 401 or 403; else the request served."""
        headers = dict(scope["headers"])
        said = headers.get(b"authorization", b"")
        if said == b"Bearer " + secret.encode():
            refused_because("the signature does not verify")
            status = 401
        elif said == b"Bearer scope-less":
            scope["user"] = type("User", (), {"access_token": Token()})()
            status = 403
        elif said:
            status = 200
        else:
            status = 401
        said = [(b"www-authenticate", b'Bearer error="insufficient_scope"')] if status == 403 else []  # the SDK's
        await send({"type": "http.response.start", "status": status, "headers": said})
        await send({"type": "http.response.body", "body": b"{}"})

    app = RefusedRequests(transport, trail)
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    for authorization in (secret, None, "scope-less", "fine"):
        headers = [(b"authorization", f"Bearer {authorization}".encode())] if authorization else []
        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers, "client": ("127.0.0.9", 5)}
        await app(scope, None, send)
    trail.close()
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [401, 401, 403, 200]
    found = records(tmp_path / "audit")
    assert [(r["status"], r["error_code"], r["reason"]) for r in found] == [
        (401, "invalid_token", "the signature does not verify"),
        (401, "no_token", "no bearer token"),
        (403, "insufficient_scope", "a scope http.auth.required_scopes names is missing"),
    ], found
    assert all(r["event"] == "refused" and r["client"] == "127.0.0.9" and r["path"] == "/mcp" for r in found)
    assert found[2]["principal"] == {"issuer": "https://idp.example", "subject": "carol", "display": "carol"}
    text = "".join(p.read_text() for _, _, p in audit.trail_files(tmp_path / "audit"))
    assert all(piece not in text for piece in (secret, *secret.split("."))), text


async def test_a_request_over_the_rate_limit_is_recorded_as_refused(tmp_path: Path) -> None:
    from mcp.shared.exceptions import MCPError

    from ba_mcp.server import _SessionMiddleware

    trail = AuditLog.open(AuditSettings(), tmp_path / "audit")
    limit = _SessionMiddleware(1, trail)

    class Request:
        scope: ClassVar[dict[str, Any]] = {}
        headers: ClassVar[dict[str, str]] = {"mcp-session-id": "s-1"}

    class Ctx:
        method = "tools/call"
        params: ClassVar[dict[str, Any]] = {"name": "query_database", "arguments": {}}
        request = Request()

    async def served(ctx: Any) -> str:
        return "served"

    assert await limit(Ctx(), served) == "served"  # type: ignore[arg-type]
    with pytest.raises(MCPError):
        await limit(Ctx(), served)  # type: ignore[arg-type]
    trail.close()
    [entry] = records(tmp_path / "audit")
    assert entry["error_code"] == "rate_limited" and entry["tool"] == "query_database", entry
    assert entry["method"] == "tools/call" and entry["principal"]["key"].startswith("http-"), entry


# -- reading it: ba-mcp audit, stats, owners ---------------------------------------------------------------------


@pytest.fixture
def trail_of_a_team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A trail with alice's and bob's calls yesterday and three days ago, and a refused token: the operator's
    configuration names its folder."""
    folder = tmp_path / "audit"
    monkeypatch.setenv("BA_MCP_AUDIT__DIR", str(folder))
    monkeypatch.setenv("BA_MCP_WORKSPACE", str(tmp_path / "ws"))
    monkeypatch.chdir(tmp_path)
    trail = AuditLog.open(AuditSettings(), folder)
    yesterday_noon = audit.moment("yesterday") + 12 * 3600
    earlier = yesterday_noon - 2 * 86400
    alice, bob = _person("alice"), _person("bob")
    for when, who, sql, database in [
        (earlier, alice, "SELECT 'three days ago'", "shop"),
        (yesterday_noon, alice, "SELECT 'alice yesterday on shop'", "shop"),
        (yesterday_noon + 60, alice, "SELECT 'alice yesterday on demo'", "demo"),
        (yesterday_noon + 120, bob, "SELECT 'bob yesterday'", "shop"),
    ]:
        trail.call(
            _record(when, sql, session=who.key), who, {"query": sql}, {"database": database, "role": "analyst_eu"}
        )
    trail.call(_record(yesterday_noon + 180, session=alice.key, tool="run_python"), alice, {"code": "print(1)"}, {})
    trail.refused("invalid_token", "expired (exp)", status=401, method="POST", path="/mcp", client="10.0.0.7")
    trail.close()
    yield folder


def test_ba_mcp_audit_answers_what_alice_ran_yesterday(trail_of_a_team: Path) -> None:
    code, out, err = cli("audit", "--user", "alice", "--since", "yesterday", "--until", "today")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 3, out
    assert "alice yesterday on shop" in lines[0] and "alice yesterday on demo" in lines[1] and "run_python" in lines[2]
    assert all("alice@example.com" in line for line in lines) and "shop as analyst_eu" in lines[0], out
    assert "three days ago" not in out and "bob" not in out
    # the same question by her e-mail, her subject; by tool and database; as the records themselves
    for user in ("alice@example.com", "ALICE", "user-alice"):  # 48 h back holds yesterday at any hour of today
        assert cli("audit", "--user", user, "--since", "48h")[1].count("\n") in (3, 4)
    assert "alice yesterday on demo" in cli("audit", "--database", "demo")[1]
    assert cli("audit", "--tool", "run_python")[1].count("\n") == 1
    shown = [json.loads(line) for line in cli("audit", "--user", "bob", "--json")[1].splitlines()]
    assert [r["statement"]["text"] for r in shown] == ["SELECT 'bob yesterday'"], shown
    refused = cli("audit", "--since", "7d")[1].splitlines()[-1]
    assert "refused 401 invalid_token: expired (exp)" in refused and "from 10.0.0.7" in refused, refused
    assert cli("audit", "--user", "nobody")[1].strip() == "no audit records match"
    code, _, err = cli("audit", "--since", "last tuesday")
    assert code == 2 and "yesterday" in err, err


def test_ba_mcp_audit_says_when_there_is_no_trail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BA_MCP_AUDIT__DIR", str(tmp_path / "none"))
    monkeypatch.setenv("BA_MCP_AUDIT__ENABLED", "false")
    code, _, err = cli("audit")
    assert code == 1 and "no audit trail" in err and "audit.enabled is false" in err, err


def test_ba_mcp_stats_breaks_usage_down_by_user(trail_of_a_team: Path, tmp_path: Path) -> None:
    logs = tmp_path / "ws" / "logs"
    logs.mkdir(parents=True)
    telemetry = TelemetryLog(logs)
    now = time.time()
    for session, tool in [
        ("user-alice", "query_database"),
        ("user-alice~analysis", "query_database"),  # a saved analysis's run is its caller's
        ("user-alice", "run_python"),
        ("user-bob", "query_database"),
        ("http-0123456789abcdef", "file_reader"),  # a session the trail never named: shown by its key
    ]:
        telemetry.write(_record(now, session=session, tool=tool))
    telemetry.close()
    code, out, err = cli("stats")
    assert code == 0, err
    users = {line.split()[0]: int(line.split()[1]) for line in out.split("\nuser", 1)[1].splitlines()[1:]}
    assert users == {"alice@example.com": 3, "bob@example.com": 1, "http-0123456789abcdef": 1}, out
    report = json.loads(cli("stats", "--json")[1])
    assert report["users"]["alice@example.com"]["calls"] == 3 and report["total"]["calls"] == 5, report


def test_artifacts_list_and_analyses_list_show_their_owners(trail_of_a_team: Path, tmp_path: Path) -> None:
    from ba_mcp.stores.artifacts import ArtifactStore
    from ba_mcp.workspace import Workspace, home_name

    settings = load_settings()  # the operator's: BA_MCP_WORKSPACE, as the commands read it
    ws = Workspace.open(settings.workspace_root())
    store = ArtifactStore(ws.dir("artifacts"), settings.artifacts)
    with callers.acting_as("user-alice"):
        mine = store.put_text("alice's notes", title="notes", source_tool="run_python")
    with callers.acting_as("user-bob~analysis"):
        theirs = store.put_text("bob's notes", title="other notes", source_tool="run_python")
    listed = cli("artifacts", "list")[1].splitlines()
    assert any(mine.id in line and "alice@example.com" in line for line in listed), listed
    assert any(theirs.id in line and "bob@example.com" in line for line in listed), listed
    folder = ws.root / "users" / home_name("user-bob") / "analyses" / "weekly"
    folder.mkdir(parents=True)
    manifest = {"owner": "user-bob", "description": "bob's week", "steps": [], "parameters": {}}
    (folder / "analysis.yaml").write_text(yaml.safe_dump(manifest))
    shown = cli("analyses", "list")[1]
    assert "weekly" in shown and "[owner bob@example.com]" in shown, shown


# -- pieces ------------------------------------------------------------------------------------------------------


def test_since_and_until_read_dates_days_and_durations() -> None:
    now = dt.datetime(2026, 5, 6, 15, 30).timestamp()  # local time
    midnight = dt.datetime(2026, 5, 6).timestamp()
    assert audit.moment("today", now) == midnight
    assert audit.moment("Yesterday", now) == dt.datetime(2026, 5, 5).timestamp()
    assert audit.moment("2026-05-01", now) == dt.datetime(2026, 5, 1).timestamp()
    assert audit.moment("2026-05-01T09:30", now) == dt.datetime(2026, 5, 1, 9, 30).timestamp()
    assert audit.moment("2026-05-01T09:30+00:00", now) == dt.datetime(2026, 5, 1, 9, 30, tzinfo=dt.UTC).timestamp()
    for said, seconds in (("24h", 86400), ("7d", 7 * 86400), ("30m", 1800), ("90s", 90), ("2w", 14 * 86400)):
        assert audit.moment(said, now) == now - seconds, said
    with pytest.raises(ValueError, match="yesterday"):
        audit.moment("soon", now)


def test_a_bounded_text_keeps_short_texts_whole_and_cuts_long_ones_at_a_character() -> None:
    assert audit.bounded_text("SELECT 1", 1024) == {
        "sha256": hashlib.sha256(b"SELECT 1").hexdigest(),
        "chars": 8,
        "text": "SELECT 1",
    }
    long = "é" * 1000  # two bytes each: the cut falls inside no character
    kept = audit.bounded_text(long, 1001)
    assert kept["truncated"] is True and kept["text"] == "é" * 500 and kept["chars"] == 1000
    big = {"params": list(range(100_000))}
    bounded = audit.bounded_value(big, 1024)
    assert set(bounded) == {"json"} and bounded["json"]["truncated"] is True, str(bounded)[:200]
    assert audit.bounded_value({"params": [1, 2]}, 1024) == {"params": [1, 2]}


def test_a_disabled_trail_writes_nothing(tmp_path: Path) -> None:
    trail = AuditLog.open(AuditSettings(enabled=False), tmp_path / "audit")
    trail.call(_record(time.time()), _person("alice"), {"query": "SELECT 1"}, {})
    trail.refused("no_token", "no bearer token", status=401)
    assert not (tmp_path / "audit").exists()


def test_the_folder_is_tightened_to_0700(tmp_path: Path) -> None:
    folder = tmp_path / "audit"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    AuditLog.open(AuditSettings(), folder).close()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_a_link_in_place_of_the_days_file_is_not_followed(tmp_path: Path) -> None:
    folder = tmp_path / "audit"
    folder.mkdir(mode=0o700)
    target = tmp_path / "elsewhere.txt"
    target.write_text("")
    today = dt.datetime.now(dt.UTC).date()
    (folder / f"audit-{today}.jsonl").symlink_to(target)
    with pytest.raises(ConfigError, match="cannot be written"):
        AuditLog.open(AuditSettings(), folder)
    assert target.read_text() == ""
