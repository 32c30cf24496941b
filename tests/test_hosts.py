"""Hosts (docs/views.md): the Claude Code plugin (manifests checked by the real Claude Code CLI when it is
installed; .mcp.json started as Claude Code starts it, from a project directory), read roots for the
project's files, tools turned off, and the Claude Desktop entry started from another directory."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import ROOT, in_process, meta_of, server_env, text_of

pytestmark = pytest.mark.anyio


def project_dir(root: Path) -> Path:
    """A user's project: data files, a link out of it, and a secret beside it."""
    project = root / "project"
    (project / "data").mkdir(parents=True)
    (project / "data" / "sales.csv").write_text("region,revenue\nNorth,10\nSouth,32\nNorth,5\n")
    (root / "secret.txt").write_text("secret beside the project\n")
    os.symlink(root / "secret.txt", project / "data" / "leak.csv")
    return project


# -- tools on and off -------------------------------------------------------------------------------


async def test_a_tool_turned_off_is_not_served(tmp_path: Path) -> None:
    env = {"BA_MCP_TOOLS__WEB_SEARCH__ENABLED": "false", "BA_MCP_TOOLS__WEB_READER__ENABLED": "false"}
    async with in_process(tmp_path / "ws", None, **env) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"file_reader", "query_database", "run_python", "use_skill"} <= names
        assert not {"web_search", "web_reader"} & names
        result = await client.call_tool("web_search", {"query": "x"})
        assert result.is_error and "UNKNOWN_TOOL" in text_of(result)


# -- read roots -------------------------------------------------------------------------------------


async def test_read_roots_are_readable_as_name_slash_path_and_confined(tmp_path: Path) -> None:
    project = project_dir(tmp_path)
    env = {"BA_MCP_FILES__READ_ROOTS": json.dumps({"project": str(project)})}
    async with in_process(tmp_path / "ws", ["file_reader", "query_database"], **env) as client:
        assert "project/<path>" in (client.instructions or "")
        read = await client.call_tool("file_reader", {"path": "project/data/sales.csv", "output_level": "full"})
        assert not read.is_error and "North,10" in text_of(read) and "project/data/sales.csv" in text_of(read)
        assert str(tmp_path) not in text_of(read) + json.dumps(meta_of(read))
        query = await client.call_tool(
            "query_database",
            {"query": "SELECT sum(revenue) AS r FROM 'project/data/sales.csv'", "output_level": "full"},
        )
        assert not query.is_error and "\n47" in text_of(query)
        for path, expected in [
            ("project/data/leak.csv", "permission_denied"),
            ("project/../secret.txt", "permission_denied"),
            ("project/%2e%2e/secret.txt", "permission_denied"),
            ("project/nothing.csv", "not_found"),
        ]:
            result = await client.call_tool("file_reader", {"path": path})
            assert result.is_error and f"Error Type: {expected}" in text_of(result), (path, text_of(result))
            assert "secret beside" not in text_of(result) and str(tmp_path) not in text_of(result)
        leak = await client.call_tool("query_database", {"query": "SELECT * FROM 'project/data/leak.csv'"})
        assert leak.is_error and "secret beside" not in text_of(leak)


async def test_a_read_root_holding_the_workspace_does_not_open_its_private_folders(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "logs").mkdir(parents=True)
    (ws / "logs" / "x.jsonl").write_text('{"a": 1}\n')
    env = {"BA_MCP_FILES__READ_ROOTS": json.dumps({"home": str(tmp_path)})}
    async with in_process(ws, ["file_reader"], **env) as client:
        result = await client.call_tool("file_reader", {"path": "home/ws/logs/x.jsonl"})
        assert result.is_error and "private folder of the workspace" in text_of(result)


def test_read_root_names_are_checked_at_start(tmp_path: Path) -> None:
    from ba_mcp.settings import ConfigError, load_settings

    for bad in ("uploads", "Project", "upload_x"):
        with pytest.raises(ConfigError, match="read root name"):
            load_settings(environ={"BA_MCP_FILES__READ_ROOTS": json.dumps({bad: str(tmp_path)})})


def ba_mcp_command() -> list[str]:
    """ba-mcp as a newcomer runs it from another directory: through uv with --project, else this Python."""
    uv = shutil.which("uv")
    return [uv, "run", "--frozen", "--project", str(ROOT), "ba-mcp"] if uv else [sys.executable, "-m", "ba_mcp"]


# -- Claude Code ------------------------------------------------------------------------------------


def claude_cli() -> str | None:
    ci = ROOT / ".ci" / ".claude-cli" / "node_modules" / ".bin" / "claude"  # where .ci/run installs it
    return os.environ.get("CLAUDE_CLI") or shutil.which("claude") or (str(ci) if ci.exists() else None)


def test_plugin_and_marketplace_pass_the_claude_code_validator(tmp_path: Path) -> None:
    cli = claude_cli()
    if cli is None:
        pytest.skip("the Claude Code CLI is not installed (npm i @anthropic-ai/claude-code; or set CLAUDE_CLI)")
    for target in (ROOT / "plugin", ROOT):  # the plugin, then the marketplace
        out = subprocess.run([cli, "plugin", "validate", "--strict", str(target)], capture_output=True, text=True)
        assert out.returncode == 0 and "Validation passed" in out.stdout, out.stdout + out.stderr
    # The validator does reject: a manifest with a name that is not kebab-case fails.
    (tmp_path / ".claude-plugin").mkdir()
    (tmp_path / ".claude-plugin" / "plugin.json").write_text('{"name": "BA MCP"}')
    out = subprocess.run([cli, "plugin", "validate", "--strict", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode != 0


def test_plugin_manifests_say_what_the_plugin_is() -> None:
    plugin = json.loads((ROOT / "plugin" / ".claude-plugin" / "plugin.json").read_text())
    assert re.fullmatch(r"[a-z][a-z0-9]*(-[a-z0-9]+)*", plugin["name"]) and plugin["version"] and plugin["description"]
    from ba_mcp import __version__

    assert plugin["version"] == __version__
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    assert [p["name"] for p in market["plugins"]] == [plugin["name"]] and market["plugins"][0]["source"] == "./plugin"
    # Claude Code substitutes only the exact text ${CLAUDE_PLUGIN_ROOT}: no ${CLAUDE_PLUGIN_ROOT:-…} form.
    assert "${CLAUDE_PLUGIN_ROOT:-" not in (ROOT / "plugin" / ".mcp.json").read_text()


def copy_of_the_repository(target: Path) -> Path:
    """A user's clone: the tracked tree (links kept) plus a development .venv, as `uv sync` leaves one."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    for name in listed.decode().split("\0"):
        source = ROOT / name
        if not name or not (source.is_symlink() or source.exists()):
            continue
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            os.symlink(os.readlink(source), target / name)
        else:
            shutil.copy2(source, target / name)
    (target / ".venv" / "lib").mkdir(parents=True)
    (target / ".venv" / "lib" / "big.bin").write_bytes(b"\0" * (8 << 20))
    return target


@pytest.mark.slow  # the real Claude Code CLI installs the plugin and starts the server
def test_plugin_installed_with_the_claude_code_cli_connects_from_another_project(tmp_path: Path) -> None:
    """As a user does it: marketplace add, plugin install, `claude mcp list` in a project elsewhere; then
    the command Claude Code started answers a tool call on the project's files."""
    cli, uv = claude_cli(), shutil.which("uv")
    if cli is None or uv is None:
        pytest.skip("needs the Claude Code CLI (npm i @anthropic-ai/claude-code, or CLAUDE_CLI) and uv")
    clone = copy_of_the_repository(tmp_path / "clone")
    project = project_dir(tmp_path)
    uv_cache = (
        os.environ.get("UV_CACHE_DIR") or subprocess.run([uv, "cache", "dir"], capture_output=True, text=True).stdout
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("BA_MCP_", "CLAUDE"))},
        **server_env(tmp_path / "ws"),
        "HOME": str(tmp_path / "home"),
        "UV_CACHE_DIR": uv_cache.strip(),  # the machine's warm cache (`uv sync` filled it) ...
        "UV_OFFLINE": "1",  # ... and nothing is downloaded
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",  # no telemetry or update checks off this machine
        "DISABLE_AUTOUPDATER": "1",
        "MCP_TIMEOUT": "120000",  # the first start installs the plugin's environment
    }

    def claude(*args: str) -> str:
        out = subprocess.run([cli, *args], cwd=project, env=env, capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    claude("plugin", "marketplace", "add", str(clone))
    claude("plugin", "install", "ba-mcp@ba-mcp")
    installed = json.loads((tmp_path / "home" / ".claude" / "plugins" / "installed_plugins.json").read_text())
    (install,) = installed["plugins"]["ba-mcp@ba-mcp"]
    cached = Path(install["installPath"])
    assert (cached / ".mcp.json").is_file() and (cached / "skills" / "analysis-workflow" / "SKILL.md").is_file()
    assert not (cached / ".venv").exists(), "the clone's .venv was copied into Claude Code's plugin cache"
    size = sum(f.stat().st_size for f in cached.rglob("*") if f.is_file())
    assert size < 10 << 20, f"the installed plugin holds {size} bytes"

    listed = claude("mcp", "list")
    line = next((x for x in listed.splitlines() if x.startswith("plugin:ba-mcp:ba-mcp:")), "")
    assert "✔ Connected" in line, listed
    command = line.split(":", 3)[3].rsplit(" - ", 1)[0].split()
    assert "${" not in " ".join(command)

    (entry,) = json.loads((cached / ".mcp.json").read_text())["mcpServers"].values()
    started = StdioServerParameters(command=command[0], args=command[1:], env={**env, **entry["env"]}, cwd=project)

    async def call() -> None:
        async with Client(started) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            # Claude Code loads the plugin's skills/ itself: the server does not serve them a second time.
            assert "use_skill" not in names and {"file_reader", "query_database", "run_python"} <= names
            read = await client.call_tool("file_reader", {"path": "project/data/sales.csv", "output_level": "full"})
            assert not read.is_error and "3 rows" in text_of(read) and "North,10" in text_of(read), text_of(read)
            leak = await client.call_tool("file_reader", {"path": "project/data/leak.csv"})
            assert leak.is_error and "secret beside" not in text_of(leak)

    anyio.run(call)


@pytest.mark.slow  # a server or command-line process of its own: the slow tier (the fast tier stays in process)
def test_install_claude_code_writes_into_the_directory_it_is_run_from(tmp_path: Path) -> None:
    project = project_dir(tmp_path)
    command = ba_mcp_command()
    out = subprocess.run(
        [*command, "install", "claude-code", "--workspace", str(tmp_path / "ws")],
        cwd=project,
        env=server_env(tmp_path / "ws"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    written = json.loads((project / ".mcp.json").read_text())["mcpServers"]["ba-mcp"]
    assert Path(written["command"]).is_absolute()
    # The project's files are readable as project/<path>, exports land in its ba-exports/ (issue 19).
    assert f"project={project.resolve()}" in written["args"], written
    assert written["env"]["BA_MCP_FILES__EXPORT_DIR"] == str(project.resolve() / "ba-exports")


# -- Claude Desktop ---------------------------------------------------------------------------------


@pytest.mark.slow  # a server or command-line process of its own: the slow tier (the fast tier stays in process)
async def test_claude_desktop_entry_works_when_installed_from_another_directory(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    command = ba_mcp_command()
    out = subprocess.run(
        [*command, "install", "claude-desktop", "--print", "--workspace", str(tmp_path / "ws")],
        cwd=elsewhere,
        env=server_env(tmp_path / "ignored"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    entry: dict[str, Any] = json.loads(out.stdout)["mcpServers"]["ba-mcp"]
    assert Path(entry["command"]).is_absolute() and entry["env"]["BA_MCP_WORKSPACE"] == str(tmp_path / "ws")
    # Claude Desktop starts it with only the entry's environment, from a directory of its own.
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), **entry["env"]}
    env["BA_MCP_WEB__SEARCH__DUCKDUCKGO__ENDPOINT"] = "http://127.0.0.1:9/"
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env, cwd="/")
    async with Client(params) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "sales-performance-review" in (tools["use_skill"].description or "")
        loaded = await client.call_tool("use_skill", {"name": "sales-performance-review"})
        assert not loaded.is_error and "price_volume_mix.py" in text_of(loaded)
        assert "sales-performance-review" in {p.name for p in (await client.list_prompts()).prompts}
