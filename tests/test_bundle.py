"""Issue 53: installed the way analysts install.

* **The Claude Desktop extension** (an MCPB bundle, manifest 0.4, ``server.type: "uv"``): assembled by ``ba-mcp
  bundle``, validated and packed by the official ``@anthropic-ai/mcpb`` CLI (tests/mcpb, installed by ``.ci/run``),
  unpacked by it, and started the way Claude Desktop starts it — its command computed by the same library's
  ``getMcpConfigForManifest`` (the host's own code: ``${__dirname}`` and ``${user_config.*}`` substituted), only the
  manifest's environment beside what any spawned process has — then driven by a real MCP client. It runs offline (a
  network namespace of the test's own): from uv's warm cache it answers; from a cold cache it fails at once, saying
  what it could not download.
* **The wheel needs no repository**: built by ``uv build``, installed into a fresh virtual environment (the lock's
  versions, from uv's cache), ``ba-mcp demo`` from an empty folder; ``uvx --from <wheel>`` too.
* ``server.json`` describes the package for the official MCP registry.

Slow tier: each test starts processes and installs environments."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from ba_mcp import registry
from ba_mcp.version import __version__
from tests.conftest import ROOT, text_of

pytestmark = [pytest.mark.slow, pytest.mark.anyio]
MCPB_HOME = ROOT / "tests" / "mcpb"
MCPB = MCPB_HOME / "node_modules" / ".bin" / "mcpb"


def offline(command: list[str]) -> list[str]:
    """``command`` in a network namespace of its own (no interface but loopback): nothing leaves the machine."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare for a network namespace (the CI machine has both)")
    return ["unshare", "-n", *command]


def uv() -> str:
    found = shutil.which("uv")
    assert found, "uv is not on PATH"
    return found


def mcpb(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    if not MCPB.exists():
        pytest.skip("tests/mcpb is not installed (.ci/run runs: npm ci --prefix tests/mcpb)")
    done = subprocess.run([str(MCPB), *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundle as a user downloads it: ``ba-mcp bundle`` then ``mcpb validate`` and ``mcpb pack``."""
    base = tmp_path_factory.mktemp("bundle")
    made = subprocess.run(
        [sys.executable, "-m", "ba_mcp", "bundle", str(base / "folder")], capture_output=True, text=True, timeout=120
    )
    assert made.returncode == 0, made.stderr
    assert "passes" in mcpb("validate", str(base / "folder" / "manifest.json")).stdout
    mcpb("pack", str(base / "folder"), str(base / "ba-mcp.mcpb"))
    return base / "ba-mcp.mcpb"


def desktop_config(extension: Path, user_config: dict[str, Any]) -> dict[str, Any]:
    """What Claude Desktop runs for the unpacked extension: ``getMcpConfigForManifest`` of @anthropic-ai/mcpb."""
    done = subprocess.run(
        ["node", "desktop_config.mjs", str(extension), json.dumps(user_config)],
        cwd=MCPB_HOME,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    config: dict[str, Any] = json.loads(done.stdout)
    return config


@pytest.fixture
def extension(packed: Path, tmp_path: Path) -> Path:
    """The bundle unpacked as Desktop unpacks it (a fresh folder per test: its .venv is made on first start)."""
    mcpb("unpack", str(packed), str(tmp_path / "extension"))
    return tmp_path / "extension"


def test_the_bundle_holds_the_project_and_no_environment_cache_or_test(packed: Path) -> None:
    with zipfile.ZipFile(packed) as archive:
        names = archive.namelist()
        manifest = json.loads(archive.read("manifest.json"))
    size = packed.stat().st_size
    print(f"bundle: {size / 1024:.0f} KB packed, {len(names)} files")  # for the note
    assert size < 5 * 1024 * 1024
    for needed in ("pyproject.toml", "uv.lock", "README.md", "icon.png", "ba_mcp/cli.py", "sandbox/worker.py"):
        assert needed in names, needed
    assert any(n.startswith("skills/") and n.endswith("SKILL.md") for n in names)
    assert any(n.startswith("config/") and n.endswith("default.yaml") for n in names)
    unwanted = [
        n
        for n in names
        if n.startswith((".venv/", "tests/", "bench/", "docs/", ".git/", "node_modules/", ".ci/"))
        or "__pycache__/" in n
        or n.endswith(".pyc")
    ]
    assert not unwanted, unwanted[:10]
    assert manifest["manifest_version"] == "0.4" and manifest["server"]["type"] == "uv"
    assert manifest["version"] == __version__
    assert [t["name"] for t in manifest["tools"]] == registry.tool_names()
    assert {"profitability", "rfm-segmentation"} <= {p["name"] for p in manifest["prompts"]}
    config = manifest["user_config"]
    assert config["database_url"]["sensitive"] is True and config["workspace"]["type"] == "directory"
    # the secret travels as an environment variable the server reads, never in its arguments
    assert all("user_config.database_url" not in a for a in manifest["server"]["mcp_config"]["args"])


async def test_the_bundle_starts_as_claude_desktop_starts_it_and_answers_offline(
    extension: Path, tmp_path: Path
) -> None:
    """The first start from uv's warm cache (as on any machine that ran uv before: here, the suite's own sync),
    with no network: uv makes the extension's environment, the server answers initialize, tools/list, a query on
    the demo and a file from the user's data folder; the blank database field configures nothing."""
    data = tmp_path / "my data"
    data.mkdir()
    (data / "sales.csv").write_text("region,amount\nNorth,7\nSouth,5\n")
    config = desktop_config(extension, {"workspace": str(tmp_path / "workspace"), "data_folder": str(data)})
    assert config["args"][config["args"].index("--directory") + 1] == str(extension)
    assert config["env"]["BA_MCP_DATABASES__WAREHOUSE__URL"] == ""  # left blank by the user
    command = offline([shutil.which(config["command"]) or config["command"], *config["args"]])
    params = StdioServerParameters(command=command[0], args=command[1:], env=config["env"], cwd=str(tmp_path))
    started = time.monotonic()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        hello = await session.initialize()
        first_start = time.monotonic() - started
        print(f"first start from the bundle (warm uv cache): {first_start:.1f} s")  # for the note
        assert hello.server_info.name == "ba-mcp"
        names = [t.name for t in (await session.list_tools()).tools]
        assert names == [n for n in registry.tool_names() if n in names] and "query_database" in names
        result = await session.call_tool("query_database", {"query": "SELECT count(*) AS orders FROM orders"})
        assert not result.is_error, text_of(result)
        read_back = await session.call_tool("file_reader", {"path": "my_data/sales.csv"})
        assert "North" in text_of(read_back) and "South" in text_of(read_back), text_of(read_back)
        schema = await session.call_tool("query_database", {"query": "SELECT 1", "database": "warehouse"})
        assert schema.is_error and "warehouse" in text_of(schema)  # no such database: the blank field set nothing
    assert (extension / ".venv").is_dir()  # the environment uv made where Desktop unpacked it


async def test_a_bad_database_url_in_the_extensions_field_leaves_only_that_database_unavailable(
    extension: Path, tmp_path: Path
) -> None:
    """Issue 63: the database field as users fill it in — a URL without its scheme, a password with ``@`` and ``#``
    pasted as-is. The extension starts as Claude Desktop starts it, the demo and the file tools work, the database's
    call says what to do (no scheme; percent-encode the password), ``ba-mcp doctor`` in the extension says the same,
    and no part of the password is in any error, the tools' descriptions, the doctor or the server's stderr. The
    manifest says so in the field's description and names uv, which it needs."""
    manifest = json.loads((extension / "manifest.json").read_text())
    field = manifest["user_config"]["database_url"]["description"]
    assert "percent-encode" in field.lower() and "%40" in field and "unavailable" in field, field
    assert manifest["server"]["type"] == "uv" and "Needs uv" in manifest["long_description"]
    data = tmp_path / "my data"
    data.mkdir()
    (data / "sales.csv").write_text("region,amount\nNorth,7\nSouth,5\n")
    password = "p@ss#word"
    cases = {
        "127.0.0.1:55433/aw": "no scheme",
        f"postgresql://analyst:{password}@127.0.0.1:55433/aw": "percent-encode the password",
    }
    for url, said in cases.items():
        user = {"workspace": str(tmp_path / "workspace"), "data_folder": str(data), "database_url": url}
        config = desktop_config(extension, user)
        assert config["env"]["BA_MCP_DATABASES__WAREHOUSE__URL"] == url
        command = offline([shutil.which(config["command"]) or config["command"], *config["args"]])
        params = StdioServerParameters(command=command[0], args=command[1:], env=config["env"], cwd=str(tmp_path))
        errors = tmp_path / "stderr.log"
        with errors.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                tools = (await session.list_tools()).tools
                description = next(t.description or "" for t in tools if t.name == "query_database")
                assert "warehouse (" in description and said in description, description
                demo = await session.call_tool(
                    "query_database", {"query": "SELECT count(*) AS n FROM orders", "timeout": 240}
                )  # the demo made on first use, on a busy machine
                assert not demo.is_error, text_of(demo)
                read_back = await session.call_tool("file_reader", {"path": "my_data/sales.csv"})
                assert "North" in text_of(read_back), text_of(read_back)
                failed = await session.call_tool("query_database", {"query": "SELECT 1", "database": "warehouse"})
                assert failed.is_error and "DATABASE_UNAVAILABLE" in text_of(failed), text_of(failed)
                assert said in text_of(failed), text_of(failed)
                shown = [text_of(failed), description, *(t.description or "" for t in tools)]
        doctor_args = [*config["args"][: config["args"].index("serve")], "doctor"]
        doctor = subprocess.run(
            offline([shutil.which(config["command"]) or config["command"], *doctor_args]),
            env={**config["env"], "PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(tmp_path))},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
        line = next(x for x in (doctor.stdout + doctor.stderr).splitlines() if "database warehouse" in x)
        assert "unavailable" in line and said in line, line
        shown += [doctor.stdout, doctor.stderr, errors.read_text()]
        print(f"{said}: {text_of(failed)}\n  doctor: {line.strip()}")  # for the note
        for piece in ("p@ss", "ss#word", "#word", password):
            assert not any(piece in text for text in shown), piece


def test_the_bundle_from_a_cold_uv_cache_offline_fails_at_once_saying_why(extension: Path, tmp_path: Path) -> None:
    config = desktop_config(extension, {})
    env = {
        **config["env"],
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "UV_CACHE_DIR": str(tmp_path / "cold-cache"),
    }
    started = time.monotonic()
    done = subprocess.run(
        offline([shutil.which(config["command"]) or config["command"], *config["args"]]),
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    took = time.monotonic() - started
    print(f"cold cache, offline: ended in {took:.1f} s: {done.stderr.strip().splitlines()[:2]}")
    assert done.returncode != 0 and took < 120
    assert "Failed to download" in done.stderr or "Failed to fetch" in done.stderr, done.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        offline([uv(), "build", "--offline", "--wheel", "--out-dir", str(out), str(ROOT)]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (found,) = out.glob("ba_mcp-*.whl")
    return found


@pytest.fixture(scope="module")
def empty_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("nowhere")
    yield folder
    assert not any(p for p in folder.iterdir() if p.name != "ws"), "something wrote into the working folder"


def test_the_wheel_carries_everything_and_runs_the_demo_in_a_fresh_venv(wheel: Path, empty_folder: Path) -> None:
    """No checkout anywhere: the wheel holds the skills, the views, the configuration and the demo; installed with the
    lock's versions (from uv's cache: offline) into a fresh environment, ``ba-mcp demo`` runs from an empty folder."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    for needed in ("ba_mcp/_config/default.yaml", "ba_mcp/views/view.js", "ba_mcp/demo_data.py", "sandbox/worker.py"):
        assert needed in names, needed
    assert any(n.startswith("ba_mcp/_skills/") and n.endswith("SKILL.md") for n in names)
    venv = empty_folder.parent / "fresh-venv"
    lock = empty_folder.parent / "pylock.toml"
    steps = [
        [uv(), "export", "--frozen", "--no-dev", "--no-emit-project", "--format", "pylock.toml", "-o", str(lock)],
        offline([uv(), "venv", "--quiet", str(venv)]),
        offline([uv(), "pip", "install", "--quiet", "--offline", "--python", str(venv), "-r", str(lock)]),
        offline([uv(), "pip", "install", "--quiet", "--offline", "--no-deps", "--python", str(venv), str(wheel)]),
    ]
    for step in steps:
        done = subprocess.run(step, cwd=ROOT if "export" in step else empty_folder, capture_output=True, text=True)
        assert done.returncode == 0, (step, done.stderr)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(empty_folder.parent), "BA_MCP_WORKSPACE": str(empty_folder / "ws")}
    demo = subprocess.run(
        offline([str(venv / "bin" / "ba-mcp"), "demo"]),
        cwd=empty_folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "run_python" in demo.stdout and "query_database" in demo.stdout
    # the install's bytecode made once, by the demo, before its server started: its workers read bytecode
    assert demo.stdout.startswith("Compiling the installed libraries' bytecode"), demo.stdout[:300]
    stamp = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "from ba_mcp import bytecode; print(bytecode.compiled())"],
        cwd=empty_folder,
        capture_output=True,
        text=True,
    )
    assert stamp.stdout.strip() == "True", stamp.stdout + stamp.stderr
    imported = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import ba_mcp, sys; print(ba_mcp.__file__)"],
        cwd=empty_folder,
        capture_output=True,
        text=True,
    )
    assert str(venv) in imported.stdout and str(ROOT) not in imported.stdout  # the wheel's copy, not the checkout


def test_uvx_runs_the_wheel_from_an_empty_folder(wheel: Path, empty_folder: Path) -> None:
    """``uvx --from <wheel> ba-mcp``, offline: it resolves from uv's cache of the registry's pages, which .ci/run's
    online ``uvx --from`` of the same wheel filled (a machine that never ran it online has nothing to resolve from)."""
    done = subprocess.run(
        offline([uv(), "tool", "run", "--offline", "--from", str(wheel), "ba-mcp", "--help"]),
        cwd=empty_folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0 and "network was disabled" in done.stderr:
        pytest.skip("uv's cache holds no registry pages for the wheel's requirements: run .ci/run (it runs uvx online)")
    assert done.returncode == 0, done.stderr
    assert "serve" in done.stdout and "demo" in done.stdout


def test_server_json_describes_the_package_for_the_mcp_registry() -> None:
    """The official registry's server.json: its name is claimed in the README (PyPI ownership: ``mcp-name:``), its
    version is the package's, the PyPI package runs ``serve`` over stdio, and the variables it lists are settings
    (the secret one marked secret)."""
    import re
    import tomllib

    from ba_mcp.settings import ConfigError, load_settings

    server = json.loads((ROOT / "server.json").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert re.fullmatch(r"io\.github\.[\w-]+/[\w.-]+", server["name"])
    assert f"mcp-name: {server['name']}" in (ROOT / "README.md").read_text()
    assert server["version"] == __version__ == project["version"]
    (pypi,) = [p for p in server["packages"] if p["registryType"] == "pypi"]
    assert pypi["identifier"] == project["name"] and pypi["version"] == __version__
    assert pypi["transport"] == {"type": "stdio"} and pypi["packageArguments"][0]["value"] == "serve"
    assert len(server["description"]) <= 100
    for variable in pypi["environmentVariables"]:
        try:  # each one a setting of the server (an unknown BA_MCP_* variable stops the start)
            load_settings(environ={variable["name"]: "/tmp" if "URL" not in variable["name"] else "sqlite:////x.db"})
        except ConfigError as exc:
            raise AssertionError(f"{variable['name']}: {exc}") from None
        assert variable.get("isSecret", False) == ("URL" in variable["name"])
