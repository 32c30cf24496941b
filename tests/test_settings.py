"""Settings: layers (defaults < YAML < environment < flags), errors that name the key, moved keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ba_mcp.settings import ConfigError, config_dir, load_settings

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


def test_an_empty_variable_sets_nothing() -> None:
    """Issue 53: a Claude Desktop extension passes the optional fields a user left blank as empty variables
    (``${user_config.database_url}`` → ""): they leave the keys at their defaults, instead of a workspace "" (the
    current folder) or a database with no URL."""
    blank = ("BA_MCP_WORKSPACE", "BA_MCP_DATABASES__WAREHOUSE__URL", "BA_MCP_FILES__READ_ROOTS__MY_DATA")
    s = load_settings(environ=dict.fromkeys(blank, ""))
    assert s.workspace is None and "warehouse" not in s.databases and s.files.read_roots == {}
    assert load_settings(environ={"BA_MCP_FILES__READ_ROOTS__MY_DATA": "/srv/data"}).files.read_roots == {
        "my_data": Path("/srv/data")
    }


def test_lists_come_from_the_environment_as_json() -> None:
    s = load_settings(environ={"BA_MCP_SANDBOX__ENV_ALLOWLIST": '["PATH", "TZ"]'})
    assert s.sandbox.env_allowlist == ["PATH", "TZ"]


def test_every_tools_own_setting_is_documented_in_its_model() -> None:
    """Issue 52: a tool's own keys and defaults live in its module (its ``Settings``), not in default.yaml; each key
    says what it means there, and ``ba-mcp config tools`` shows it with its default."""
    from ba_mcp import registry
    from ba_mcp.cli import tool_settings_yaml
    from ba_mcp.settings import ToolSettings

    settings = load_settings(environ={})
    listed = tool_settings_yaml(settings)
    own = 0
    for name in registry.tool_names():
        model = settings.tool_model(name)
        assert issubclass(model, ToolSettings) and f"\n  {name}:\n" in listed, name
        for key, field in model.model_fields.items():
            if key in ToolSettings.model_fields:
                continue
            own += 1
            assert field.description, f"tools.{name}.{key} has no description"
            assert f"    {key}: {json.dumps(getattr(settings.tool(name), key))}" in listed, (name, key)
    assert own >= 7  # max_rows_ceiling, max_rows, the code store's three, max_length, page_cache_entries


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
