"""The runner's policies (T-R, T-L, T-E, T-T) through an MCP client, with tools made for each case."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from mcp import Client
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ba_mcp.app import App
from ba_mcp.errors import ErrorType, ToolFailure
from ba_mcp.results import Composite, Document, Image, JsonValue, Table
from ba_mcp.server import build_server
from ba_mcp.settings import ToolSettings, load_settings
from ba_mcp.tool import CacheMode, CachePolicy, Tool, ToolContext, ToolParams, ToolPolicy
from tests.conftest import NO_SPARES, meta_of, text_of

pytestmark = pytest.mark.anyio

PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
    b"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82"
)


class CountParams(ToolParams):
    n: int = 0
    timeout: float | None = None


class Flaky(Tool):
    """Fails with a retryable error `n` times, then succeeds."""

    name, title, description = "flaky", "Flaky", "fails n times with transient_error, then succeeds"
    Params = CountParams
    policy = ToolPolicy(idempotent=True)

    def __init__(self) -> None:
        self.calls: list[float] = []

    def execute(self, params: CountParams, ctx: ToolContext) -> JsonValue:
        self.calls.append(time.monotonic())
        if len(self.calls) <= params.n:
            raise ToolFailure(ErrorType.TRANSIENT_ERROR, "UPSTREAM_BUSY", "busy", retry_after=0.05)
        return JsonValue("flaky result", {"attempts": len(self.calls)})


class Writer(Flaky):
    name = "writer"
    policy = ToolPolicy(idempotent=False, read_only=False)


class Slow(Tool):
    name, title, description = "slow", "Slow", "sleeps; stops when cancelled"
    Params = CountParams

    def __init__(self) -> None:
        self.stopped = threading.Event()
        self.calls = 0

    def execute(self, params: CountParams, ctx: ToolContext) -> Document:
        self.calls += 1
        for i in range(200):
            ctx.progress(i, 200, "working")
            if ctx.cancelled.wait(0.02):
                self.stopped.set()
                raise TimeoutError
        return Document("slow", "done")


class Crash(Tool):
    name, title, description = "crash", "Crash", "raises an unexpected exception mentioning a path"
    Params = CountParams

    def __init__(self, secret_path: str = "/srv/private/secret.txt") -> None:
        self.secret_path = secret_path

    def execute(self, params: CountParams, ctx: ToolContext) -> Document:
        raise RuntimeError(f"boom in {self.secret_path}")


class Ticker(Tool):
    name, title, description = "ticker", "Ticker", "counts executions; cached for an hour"
    Params = CountParams
    policy = ToolPolicy(cache=CachePolicy(CacheMode.TTL, 3600))

    def __init__(self) -> None:
        self.runs = 0

    def execute(self, params: CountParams, ctx: ToolContext) -> Table:
        self.runs += 1
        return Table("ticks", pd.DataFrame({"i": range(params.n)}))


class Mixed(Tool):
    name, title, description = "mixed", "Mixed", "a composite with text, a table and an image"
    Params = CountParams

    def execute(self, params: CountParams, ctx: ToolContext) -> Composite:
        return Composite(
            "cell output",
            parts=[
                ("stdout", Document("stdout", "hello\n")),
                ("value", Table("df", pd.DataFrame({"x": range(25)}))),
                ("figure 1", Image("figure 1", PNG)),
            ],
        )


class Chatty(Tool):
    """A composite of three large parts whose full view would be over the hosts' inline limits."""

    name, title, description = "chatty", "Chatty", "returns a lot"
    Params = CountParams

    def execute(self, params: CountParams, ctx: ToolContext) -> Composite:
        text = "\n".join(f"line {i} of a long report about revenue" for i in range(900))
        return Composite("lots", parts=[(f"part {k}", Document(f"part {k}", text)) for k in range(3)])


class UpstreamDown(Exception):
    """What an HTTP client raises when the other side refuses the connection (httpx.ConnectError's kind)."""


class AsyncFetch(Tool):
    """An async tool, as the web tools will be: progress from the event loop, its own error classification,
    retries, a TTL cache, cancellation at the timeout."""

    name, title, description = "fetchish", "Fetch-ish", "an async tool that talks to a flaky upstream"
    Params = CountParams
    policy = ToolPolicy(idempotent=True, cache=CachePolicy(CacheMode.TTL, 60), open_world=True)

    def __init__(self, fail: int = 0) -> None:
        self.fail = fail
        self.calls = 0
        self.cancelled = False

    async def execute(self, params: CountParams, ctx: ToolContext) -> JsonValue:
        import anyio

        self.calls += 1
        for i in range(3):
            ctx.progress(i, 3, f"async step {i}")
            await anyio.sleep(0.01)
        if params.n < 0:
            try:
                await anyio.sleep(30)
            except BaseException:
                self.cancelled = True
                raise
        if self.calls <= self.fail:
            raise UpstreamDown("connection refused by upstream.invalid:443 while reading /srv/secret")
        return JsonValue("fetched", {"calls": self.calls, "n": params.n})

    def classify_error(self, exc: BaseException) -> ToolFailure | None:
        if isinstance(exc, UpstreamDown):
            return ToolFailure(
                ErrorType.TRANSIENT_ERROR, "UPSTREAM_DOWN", "the upstream refused the connection", "retry later"
            )
        return None


def make_server(tmp_path: Path, tools: list[Tool | str], **overrides: Any):
    settings = load_settings(
        workspace=tmp_path / "ws",
        retry={"base_ms": 10, "max_ms": 100},
        tools={"slow": {"timeout_s": 0.3, "max_timeout_s": 0.6}, "fetchish": {"timeout_s": 0.5}},
        tool_models={"slow": ToolSettings, "fetchish": ToolSettings},
        environ=NO_SPARES,
        **overrides,
    )
    return build_server(App(settings, tools))


async def test_retryable_errors_of_idempotent_tools_are_retried_with_backoff(tmp_path: Path) -> None:
    flaky = Flaky()
    logs: list[Any] = []

    async def on_log(params: Any) -> None:
        logs.append(params)

    async with Client(make_server(tmp_path, [flaky]), mode="legacy", logging_callback=on_log) as client:
        await client.session.set_logging_level("warning")
        result = await client.call_tool("flaky", {"n": 2})
    assert not result.is_error, text_of(result)
    assert meta_of(result)["kind"] == "json" and len(flaky.calls) == 3
    assert "succeeded after 2 retries" in text_of(result)
    gaps = [b - a for a, b in zip(flaky.calls, flaky.calls[1:], strict=False)]
    assert all(g >= 0.045 for g in gaps)  # Retry-After (0.05 s) honoured over the 10 ms base
    assert [p.level for p in logs] == ["warning", "warning"] and "UPSTREAM_BUSY" in logs[0].data


async def test_retries_stop_at_the_maximum(tmp_path: Path) -> None:
    flaky = Flaky()
    async with Client(make_server(tmp_path, [flaky])) as client:
        result = await client.call_tool("flaky", {"n": 10})
    assert result.is_error and "Error Type: transient_error" in text_of(result)
    assert len(flaky.calls) == 4  # one call + 3 retries


async def test_non_idempotent_tools_are_not_retried(tmp_path: Path) -> None:
    writer = Writer()
    async with Client(make_server(tmp_path, [writer])) as client:
        result = await client.call_tool("writer", {"n": 1})
    assert result.is_error and len(writer.calls) == 1


async def test_timeout_uses_the_default_and_refuses_more_than_the_ceiling(tmp_path: Path) -> None:
    slow = Slow()
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    async with Client(make_server(tmp_path, [slow])) as client:
        result = await client.call_tool("slow", {}, progress_callback=on_progress)
        calls = slow.calls
        over = await client.call_tool("slow", {"timeout": 99})
        short = await client.call_tool("slow", {"timeout": 0.5})
    assert result.is_error and "Error Type: timeout" in text_of(result) and "0.3 s" in text_of(result)
    # the hint names the parameter the tool takes and its ceiling; more than the ceiling is refused, not cut
    assert "pass timeout (seconds) up to 0.6" in text_of(result), text_of(result)
    assert over.is_error and "invalid_parameters" in text_of(over) and "ceiling of 0.6 s" in text_of(over)
    assert "0.5 s" in text_of(short)
    assert calls == 1  # timeouts of local tools are not retried (not in the policy's retry_on)
    assert slow.stopped.wait(60)  # the cancelled flag reached the worker thread
    assert progress, "progress notifications reached the client"


async def test_unexpected_exceptions_leak_neither_text_nor_paths(tmp_path: Path) -> None:
    async with Client(make_server(tmp_path, [Crash(), Flaky()])) as client:
        result = await client.call_tool("crash", {})
        after = await client.call_tool("flaky", {})
    text = text_of(result)
    assert result.is_error and "Error Type: internal_error" in text
    assert "boom" not in text and str(tmp_path) not in text and "Traceback" not in text
    assert not after.is_error  # the server keeps serving


async def test_cache_serves_every_level_from_one_raw_result(tmp_path: Path) -> None:
    ticker = Ticker()
    async with Client(make_server(tmp_path, [ticker])) as client:
        brief = await client.call_tool("ticker", {"n": 30, "output_level": "brief"})
        full = await client.call_tool("ticker", {"n": 30, "output_level": "full"})
        other = await client.call_tool("ticker", {"n": 31})
        metrics = (await client.read_resource("ba://metrics")).contents[0].text
    assert ticker.runs == 2
    assert "30 rows × 1 columns" in text_of(brief) and "Rows (csv):" in text_of(full)
    assert "31 rows" in text_of(other)
    assert '"cache_hit_rate": 0.3333' in metrics


async def test_file_reader_cache_follows_the_file(tmp_path: Path) -> None:
    async with Client(make_server(tmp_path, ["file_reader"])) as client:
        csv = tmp_path / "ws" / "uploads" / "t.csv"
        csv.write_text("a\n1\n")
        first = await client.call_tool("file_reader", {"path": "uploads/t.csv", "output_level": "full"})
        csv.write_text("a\n1\n2\n")
        second = await client.call_tool("file_reader", {"path": "uploads/t.csv", "output_level": "full"})
    assert meta_of(first)["rows"] == 1 and meta_of(second)["rows"] == 2


async def test_session_budget_downgrades_unnamed_levels_to_brief(tmp_path: Path) -> None:
    ticker = Ticker()
    server = make_server(tmp_path, [ticker], session_token_budget=1000, downgrade_floor_tokens=60)
    async with Client(server) as client:
        big = await client.call_tool("ticker", {"n": 400, "output_level": "full"})
        assert meta_of(big)["level"] == "full"
        auto = await client.call_tool("ticker", {"n": 300})
        small = await client.call_tool("ticker", {"n": 5})
        explicit = await client.call_tool("ticker", {"n": 300, "output_level": "standard"})
    assert meta_of(auto)["level"] == "brief" and "of its budget" in text_of(auto)
    assert meta_of(small)["level"] == "standard"  # smaller than brief plus a follow-up call: not downgraded
    assert meta_of(explicit)["level"] == "standard"


def test_the_budget_is_a_sliding_window() -> None:
    from ba_mcp.pipeline.levels import RecentTokens

    recent = RecentTokens()
    recent.add(150_000, now=0.0)
    recent.add(10_000, now=1000.0)
    assert recent.within(1800, now=1500.0) == 160_000
    assert recent.within(1800, now=2000.0) == 10_000  # the old result aged out: a long-lived process recovers
    assert recent.within(1800, now=5000.0) == 0


async def test_composites_images_and_artifacts(tmp_path: Path) -> None:
    async with Client(make_server(tmp_path, [Mixed(), "file_reader"])) as client:
        result = await client.call_tool("mixed", {})
        kinds = [b.type for b in result.content]
        text = text_of(result)
        sc = meta_of(result)
        image_link = next(b for b in result.content if b.type == "resource_link" and b.mime_type == "image/png")
        image = await client.read_resource(image_link.uri)
        brief = await client.call_tool("mixed", {"output_level": "brief"})
    assert text.splitlines()[0] == "mixed: result (standard)"
    assert "## stdout" in text and "hello" in text and "## value" in text and "## figure 1" in text
    # the 25-row value fits the standard budget, so it is shown whole and needs no artifact; the figure has one
    assert kinds.count("image") == 1 and kinds.count("resource_link") == 1 and "25 rows × 1 columns" in text
    assert [p["label"] for p in sc["parts"]] == ["stdout", "value", "figure 1"]
    assert image.contents[0].mime_type == "image/png"
    assert [b.type for b in brief.content].count("image") == 0


async def test_pipeline_attributes_are_set_on_the_sdk_span(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mcp.shared._otel as sdk_otel

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    # The SDK's own tracer, for this test only: the process-wide provider stays untouched.
    monkeypatch.setattr(sdk_otel, "_tracer", provider.get_tracer("mcp-python-sdk"))
    async with Client(make_server(tmp_path, [Ticker()])) as client:
        await client.call_tool("ticker", {"n": 20, "output_level": "brief"})
    spans = [s for s in exporter.get_finished_spans() if s.name == "tools/call ticker"]
    assert spans, [s.name for s in exporter.get_finished_spans()]
    attrs = spans[-1].attributes
    assert attrs["ba_mcp.output_level"] == "brief" and attrs["ba_mcp.cache_hit"] is False
    assert attrs["ba_mcp.output_tokens"] > 0 and attrs["ba_mcp.artifact_ids"][0].startswith("artifact_")


async def test_telemetry_is_one_jsonl_line_per_call(tmp_path: Path) -> None:
    from ba_mcp.pipeline.usage import TelemetryLog

    async with Client(make_server(tmp_path, [Ticker(), Crash()])) as client:
        await client.call_tool("ticker", {"n": 3})
        await client.call_tool("crash", {})
    records = list(TelemetryLog(tmp_path / "ws" / "logs").read())
    assert [(r.tool, r.success, r.error_type) for r in records] == [
        ("ticker", True, None),
        ("crash", False, "internal_error"),
    ]
    assert records[0].output_tokens > 0 and records[0].input_tokens > 0 and records[0].duration_ms > 0


async def test_a_transport_that_settles_bookkeeping_gets_it_once_the_answer_is_out(tmp_path: Path) -> None:
    """Over stdio the runner's bookkeeping (input tokens, usage, telemetry) waits until the answer is written
    (``Runner.deferred``, settled by the transport); the history is kept before the answer all the same, and a
    call settles what earlier calls left, so nothing is lost or out of order."""
    from ba_mcp.pipeline.usage import TelemetryLog

    server = make_server(tmp_path, [Ticker(), Crash()])
    runner = server.app.runner
    logs = tmp_path / "ws" / "logs"
    with runner.deferred():
        async with Client(server) as client:
            await client.call_tool("ticker", {"n": 3})
            assert list(TelemetryLog(logs).read()) == [] and len(runner.unsettled) == 1
            assert [r.tool for r in server.app.sessions("default").history] == ["ticker"]
            runner.settle()
            assert [r.tool for r in TelemetryLog(logs).read()] == ["ticker"] and not runner.unsettled
            await client.call_tool("crash", {})
            await client.call_tool("ticker", {"n": 4})  # settles the crash's first
            assert [r.tool for r in TelemetryLog(logs).read()] == ["ticker", "crash"]
    records = list(TelemetryLog(logs).read())  # the App's close settled the last
    assert [(r.tool, r.success) for r in records] == [("ticker", True), ("crash", False), ("ticker", True)]
    assert all(r.input_tokens > 0 and r.output_tokens > 0 for r in records)
    usage = server.app.sessions("default").usage.report()["total"]
    assert usage["calls"] == 3 and usage["input_tokens"] == sum(r.input_tokens for r in records)


async def test_an_async_tool_reports_progress_retries_its_own_errors_caches_and_times_out(tmp_path: Path) -> None:
    fetch = AsyncFetch(fail=2)
    seen: list[str | None] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    async with Client(make_server(tmp_path, [fetch])) as client:
        first = await client.call_tool("fetchish", {"n": 1}, progress_callback=on_progress)
        assert not first.is_error, text_of(first)
        assert "succeeded after 2 retries" in text_of(first) and fetch.calls == 3  # classified, so retried
        assert "async step 0" in seen and "async step 2" in seen  # progress from the event loop arrived
        again = await client.call_tool("fetchish", {"n": 1, "output_level": "brief"})
        assert not again.is_error and fetch.calls == 3  # the raw result came from the cache
        slow = await client.call_tool("fetchish", {"n": -1})
    text = text_of(slow)
    assert slow.is_error and "Error Type: timeout" in text and "Error Code: TIMEOUT" in text
    assert fetch.cancelled  # the coroutine was cancelled at the timeout, not left running


async def test_an_async_tools_own_errors_keep_the_error_format(tmp_path: Path) -> None:
    async with Client(make_server(tmp_path, [AsyncFetch(fail=99)])) as client:
        result = await client.call_tool("fetchish", {"n": 2})
    text = text_of(result)
    assert result.is_error and text.splitlines()[:3] == [
        "fetchish: operation failed",
        "Error Type: transient_error",
        "Error Code: UPSTREAM_DOWN",
    ]
    assert "/srv/secret" not in text and "upstream.invalid" not in text  # the tool's words, not the exception's
    assert meta_of(result)["error"]["retryable"] is True


def test_retry_after_is_a_floor_that_jitter_never_lowers() -> None:
    from ba_mcp.pipeline.runner import retry_delay

    for attempt in range(4):
        assert all(retry_delay(1000, 1.5, 10_000, attempt, 30.0) >= 30.0 for _ in range(50))
        delays = [retry_delay(1000, 1.5, 10_000, attempt, None) for _ in range(50)]
        base = min(1000 * 1.5**attempt, 10_000) / 1000
        assert all(base <= d <= base * 1.2 for d in delays)


async def test_no_observation_is_over_what_hosts_show_inline(tmp_path: Path) -> None:
    async with Client(make_server(tmp_path, [Chatty()])) as client:
        result = await client.call_tool("chatty", {"output_level": "full"})
    text = text_of(result)
    assert not result.is_error and len(text) <= 48_000
    assert "over what hosts show inline" in text and "artifact_" in text  # nothing dropped: kept as artifacts


async def test_the_lag_monitor_reports_the_event_loops_responsiveness(tmp_path: Path) -> None:
    import json

    import anyio

    async with Client(make_server(tmp_path, [Ticker()], telemetry={"lag_monitor": True})) as client:
        await client.call_tool("ticker", {"n": 3})
        for _ in range(600):  # samples come every few ms; a busy machine takes longer to give five
            report = json.loads((await client.read_resource("ba://metrics")).contents[0].text)
            if report["event_loop"]["samples"] >= 5:
                break
            await anyio.sleep(0.1)
    loop = report["event_loop"]
    # sampled while the ticker ran: a count, the worst lag and how many samples were over 50 ms, consistent
    assert loop["samples"] >= 5 and 0 <= loop["over_50ms"] <= loop["samples"] and loop["max_ms"] > 0, loop
