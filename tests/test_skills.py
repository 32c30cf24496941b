"""Skills over MCP (docs/skills.md): lenient loading and strict validation, skill:// resources confined to their
folder, the io.modelcontextprotocol/skills extension, prompts, use_skill's levels, catalog and dependency
chains — through a real MCP client (in-process and, for the wire, stdio)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

from tests.conftest import ROOT, ba, in_process, server_env, stdio_params, text_of

pytestmark = pytest.mark.anyio

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def skill_md(name: str, description: str = "Does a thing. Use when testing.", extra: str = "", body: str = "") -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n# {name}\n\n{body or 'Step one.'}\n"


@pytest.fixture(scope="module")
def skills_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Skill folders for every loading case, and a secret beside them."""
    root = tmp_path_factory.mktemp("skills")
    d = root / "skills"

    def write(folder: str, text: str, files: dict[str, bytes | str] | None = None) -> Path:
        p = d / folder
        p.mkdir(parents=True)
        (p / "SKILL.md").write_text(text, encoding="utf-8")
        for rel, content in (files or {}).items():
            (p / rel).parent.mkdir(parents=True, exist_ok=True)
            (p / rel).write_bytes(content if isinstance(content, bytes) else content.encode())
        return p

    good = write(
        "good",
        skill_md("good", "Summarise sales. Use when asked for a summary.", "metadata:\n  requires: base\n"),
        {"references/guide.md": "# Guide\r\nCRLF kept\r\n", "assets/logo.png": PNG, "scripts/run.py": "print(1)\n"},
    )
    (root / "secret.txt").write_text("secret outside the skill\n")
    os.symlink(root / "secret.txt", good / "references" / "escape.md")
    os.symlink("guide.md", good / "references" / "alias.md")  # stays in the folder: served
    (good / ".hidden").write_text("not a file of the skill")
    write("base", skill_md("base", "Shared basics. Use first."))
    write("mismatch", skill_md("other-name", "Name differs from folder."))
    write("long", skill_md("long", "x" * 1100))
    write("extras", skill_md("extras", extra="version: 1.2\ntags: [a, b]\n"))
    write("tools-list", skill_md("tools-list", extra="allowed-tools:\n  - Read\n  - Bash\n"))
    write("colon", "---\nname: colon\ndescription: Use when: the YAML has a colon\n---\nBody\n")
    write("no-description", "---\nname: no-description\n---\nBody\n")
    write("bad-yaml", "---\nname: [unclosed\ndescription: x\n---\nBody\n")
    write("hidden-skill", skill_md("hidden-skill", "Only for users.", "disable-model-invocation: true\n"))
    write("model-only", skill_md("model-only", "Only for the model.", "user-invocable: false\n"))
    write("cycle-a", skill_md("cycle-a", extra="metadata:\n  requires: cycle-b\n"))
    write("cycle-b", skill_md("cycle-b", extra="metadata:\n  requires: cycle-c\n"))
    write("cycle-c", skill_md("cycle-c", extra="metadata:\n  requires: cycle-a\n"))
    for i, nxt in enumerate(["deep-1", "deep-2", "deep-3", "deep-4", None]):
        requires = f"metadata:\n  requires: {nxt}\n" if nxt else ""
        write(f"deep-{i}", skill_md(f"deep-{i}", extra=requires))
    return d


def env_for(skills_dir: Path, **extra: str) -> dict[str, str]:
    return {"BA_MCP_SKILLS__PATHS": json.dumps([str(skills_dir)]), "BA_MCP_SKILLS__BUNDLED": "false", **extra}


@pytest.fixture(scope="module")
async def client(skills_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    ws = tmp_path_factory.mktemp("sk") / "ws"
    async with in_process(ws, ["file_reader", "use_skill"], **env_for(skills_dir)) as c:
        yield c


async def call(client: Client, **arguments: Any) -> Any:
    return await client.call_tool("use_skill", arguments)


# -- loading and validation -------------------------------------------------------------------------


def cli(*args: str, env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """The command as a process: its warnings go through logging to its own stderr."""
    return subprocess.run(
        [sys.executable, "-m", "ba_mcp", *args], capture_output=True, text=True, timeout=60, env=env, cwd=cwd
    )


@pytest.mark.slow  # a server or command-line process of its own: the slow tier (the fast tier stays in process)
def test_loading_is_lenient_and_says_why_on_stderr(skills_dir: Path, tmp_path: Path) -> None:
    out = cli("skills", "list", env=server_env(tmp_path / "ws", **env_for(skills_dir)))
    assert out.returncode == 0, out.stderr
    listed = {line.split()[0] for line in out.stdout.splitlines()[1:]}
    assert {"good", "other-name", "long", "extras", "tools-list", "colon", "hidden-skill", "model-only"} <= listed
    assert "no-description" not in listed and "bad-yaml" not in listed
    err = out.stderr
    for expected in (
        "does not match its folder 'mismatch'",
        "description is 1,100 characters",
        "keys outside the specification: version, tags",
        "allowed-tools is a list",
        "read after quoting values that contain ': '",
        "no description in the frontmatter; skipped",
        "frontmatter is not valid YAML",
        "escape.md",  # the link that leaves the folder is not served
    ):
        assert expected in err, expected
    assert str(skills_dir) not in out.stdout + err  # sources are named by setting, never by path


def test_validate_is_strict_and_names_each_problem(skills_dir: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    good = ba("skills", "validate", str(skills_dir / "base"), workspace=ws)
    assert good.returncode == 0 and "ok    base" in good.stdout
    cases = {
        "mismatch": "does not match its folder name",
        "long": "'description' is 1,100 characters",
        "extras": "unexpected key 'version'",
        "tools-list": "'allowed-tools' must be a space-separated string",
        "no-description": "missing required key 'description'",
        "bad-yaml": "frontmatter is not valid YAML",
        "colon": "frontmatter is not valid YAML",
    }
    for folder, problem in cases.items():
        out = ba("skills", "validate", str(skills_dir / folder), workspace=ws)
        assert out.returncode == 1, folder
        assert f"FAIL  {folder}" in out.stdout and problem in out.stdout, (folder, out.stdout)
    whole = ba("skills", "validate", str(skills_dir), workspace=ws)
    assert whole.returncode == 1 and "ok    good" in whole.stdout and "FAIL  extras" in whole.stdout


# -- resources --------------------------------------------------------------------------------------


async def test_skill_md_resources_are_listed_and_every_file_is_served_byte_exact(
    client: Client, skills_dir: Path
) -> None:
    listed = {str(r.uri): r for r in (await client.list_resources()).resources}
    good = listed["skill://good/SKILL.md"]
    assert good.mime_type == "text/markdown" and good.name == "good"
    assert good.description == "Summarise sales. Use when asked for a summary."
    md = await client.read_resource("skill://good/SKILL.md")
    assert md.contents[0].text.encode() == (skills_dir / "good" / "SKILL.md").read_bytes()
    guide = await client.read_resource("skill://good/references/guide.md")
    assert guide.contents[0].text.encode() == b"# Guide\r\nCRLF kept\r\n"  # byte for byte
    alias = await client.read_resource("skill://good/references/alias.md")  # a link inside the folder
    assert alias.contents[0].text == guide.contents[0].text
    logo = await client.read_resource("skill://good/assets/logo.png")
    assert logo.contents[0].mime_type == "image/png" and base64.b64decode(logo.contents[0].blob) == PNG


@pytest.mark.parametrize(
    "uri",
    [
        "skill://good/../base/SKILL.md",
        "skill://good/%2e%2e/%2e%2e/secret.txt",
        "skill://good/%252e%252e/secret.txt",
        "skill://good//etc/passwd",
        "skill://good/references/escape.md",
        "skill://good/.hidden",
        "skill://good/references",
        "skill://good/nothing.md",
        "skill://unknown/SKILL.md",
        "skill://good/references/guide.md%00",
    ],
)
async def test_skill_paths_that_leave_the_folder_or_name_nothing_are_refused(client: Client, uri: str) -> None:
    with pytest.raises(MCPError) as err:
        await client.read_resource(uri)
    assert "secret outside" not in str(err.value) and "/tmp" not in str(err.value)


async def test_file_reader_reads_skill_files_confined_the_same_way(client: Client) -> None:
    ok = await client.call_tool("file_reader", {"path": "skill://good/references/guide.md"})
    assert not ok.is_error and "CRLF kept" in text_of(ok)
    bad = await client.call_tool("file_reader", {"path": "skill://good/references/escape.md"})
    assert bad.is_error and "permission_denied" in text_of(bad) and "secret outside" not in text_of(bad)


# -- the skills extension ---------------------------------------------------------------------------


async def raw(session: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
    from mcp.types import Request

    result: dict[str, Any] = await session.send_request(
        Request[dict[str, Any], str](method=method, params=params), TypeAdapter(dict[str, Any])
    )
    return result


@pytest.mark.slow  # a server or command-line process of its own: the slow tier (the fast tier stays in process)
async def test_skills_list_and_get_over_stdio_with_digests(skills_dir: Path, tmp_path: Path) -> None:
    params = stdio_params(tmp_path / "ws", **env_for(skills_dir))
    async with Client(params) as client:  # the 2026-07-28 protocol, which carries capabilities.extensions
        session = client.session
        assert client.server_capabilities.resources is not None
        assert (client.server_capabilities.extensions or {}).get("io.modelcontextprotocol/skills") == {}
        listing = await raw(session, "skills/list", {})
        assert listing["resultType"] == "complete" and listing["ttlMs"] > 0 and listing["cacheScope"]
        entries = {e["uri"]: e for e in listing["skills"]}
        assert "skill://other-name/SKILL.md" not in entries or entries["skill://other-name/SKILL.md"]
        good = entries["skill://good/SKILL.md"]
        assert good["frontmatter"] == {
            "name": "good",
            "description": "Summarise sales. Use when asked for a summary.",
            "metadata": {"requires": "base"},
        }
        files = {r["uri"]: r for r in good["resources"]}
        assert set(files) == {
            "skill://good/SKILL.md",
            "skill://good/assets/logo.png",
            "skill://good/references/alias.md",
            "skill://good/references/guide.md",
            "skill://good/scripts/run.py",
        }
        for uri, entry in files.items():
            data = (skills_dir / "good" / uri.removeprefix("skill://good/")).read_bytes()
            assert entry == {"uri": uri, "digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data)}
        got = await raw(session, "skills/get", {"uri": "skill://good/SKILL.md"})
        assert got["skill"] == good and got["resultType"] == "complete"
        with pytest.raises(MCPError) as err:
            await raw(session, "skills/get", {"uri": "skill://nope/SKILL.md"})
        assert err.value.code == -32602
        with pytest.raises(MCPError) as err:
            await raw(session, "skills/list", {"cursor": "not-a-cursor"})
        assert err.value.code == -32602
        # The server still serves after the errors
        assert (await session.list_tools()).tools


# -- prompts ----------------------------------------------------------------------------------------


async def test_each_user_invocable_skill_is_a_prompt_embedding_its_skill_and_the_task(client: Client) -> None:
    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert "good" in prompts and "hidden-skill" in prompts  # disable-model-invocation stays a prompt
    assert "model-only" not in prompts  # user-invocable: false
    assert [a.name for a in prompts["good"].arguments or []] == ["task"]
    task = (prompts["good"].arguments or [])[0]
    assert task.required is False and task.description == "what to analyse, in your words (optional)"
    untold = await client.get_prompt("good")
    assert untold.messages[-1].content.text.endswith("Ask me what to analyse first.")
    got = await client.get_prompt("good", {"task": "summarise Q3 sales"})
    embedded = [m.content for m in got.messages if m.content.type == "resource"]
    assert [str(e.resource.uri) for e in embedded] == ["skill://good/SKILL.md", "skill://base/SKILL.md"]
    assert "Summarise sales" in embedded[0].resource.text
    assert "summarise Q3 sales" in got.messages[-1].content.text


# -- use_skill --------------------------------------------------------------------------------------


async def test_use_skill_description_holds_the_catalog_after_how_to_use_it(client: Client) -> None:
    tool = next(t for t in (await client.list_tools()).tools if t.name == "use_skill")
    description = tool.description or ""
    assert description.startswith("Analysis playbooks: load the one a task fits with use_skill(name)")
    assert description.index("use_skill(name)") < description.index("\ngood: Summarise sales")
    assert "\nmodel-only: Only for the model." in description
    assert "hidden-skill" not in description  # disable-model-invocation: not for the model


async def test_use_skill_returns_the_body_and_file_list_then_one_file(client: Client) -> None:
    result = await call(client, name="good")
    text = text_of(result)
    assert not result.is_error and "# Skill: good" in text and "Step one." in text
    assert "- references/guide.md (20 bytes)" in text and "print(1)" not in text  # listed, not inlined
    assert "Requires: base" in text and "# Required skill: base" in text
    script = await call(client, name="good", path="scripts/run.py")
    assert "print(1)" in text_of(script)
    image = await call(client, name="good", path="assets/logo.png")
    assert any(b.type == "image" for b in image.content)
    escape = await call(client, name="good", path="../base/SKILL.md")
    assert escape.is_error and "permission_denied" in text_of(escape)


async def test_use_skill_refuses_unknown_and_hidden_skills_naming_close_ones(client: Client) -> None:
    result = await call(client, name="god")
    assert result.is_error and "UNKNOWN_SKILL" in text_of(result) and "good" in text_of(result)
    hidden = await call(client, name="hidden-skill")
    assert hidden.is_error and "UNKNOWN_SKILL" in text_of(hidden)


async def test_use_skill_reports_cycles_with_their_path_and_chains_too_deep(client: Client) -> None:
    cycle = text_of(await call(client, name="cycle-a"))
    assert "SKILL_CYCLE" in cycle and "cycle-a → cycle-b → cycle-c → cycle-a" in cycle
    deep = text_of(await call(client, name="deep-0"))
    assert "SKILL_CHAIN_TOO_DEEP" in deep and "4 levels deep" in deep
    ok = text_of(await call(client, name="deep-1"))  # deep-1 → deep-2 → deep-3 → deep-4: 3 levels
    assert "Requires: deep-2, deep-3, deep-4" in ok


async def test_use_skill_surfaces_the_context_modifier(client: Client) -> None:
    from tests.conftest import meta_of

    result = await call(client, name="tools-list")
    assert meta_of(result)["meta"]["context_modifier"] == {
        "allowed_tools": ["Read", "Bash"],
        "model": None,
        "disable_model_invocation": False,
    }
    assert "The skill asks for these tools: Read Bash" in text_of(result)


async def test_catalog_over_budget_lists_names_only_and_stays_within_it(skills_dir: Path, tmp_path: Path) -> None:
    from ba_mcp.pipeline.tokens import TokenCounter
    from ba_mcp.settings import config_dir

    counter = TokenCounter(config_dir() / "token_encoders.yaml", "claude")
    async with in_process(
        tmp_path / "ws", ["use_skill"], **env_for(skills_dir, BA_MCP_SKILLS__CATALOG_BUDGET_TOKENS="60")
    ) as c:
        description = (await c.list_tools()).tools[0].description or ""
    catalog = description.split("Skills:\n", 1)[1]
    lines = [line for line in catalog.splitlines() if not line.startswith("More skills")]
    assert lines and counter.raw_tokens("\n".join(lines)) <= 60
    assert "More skills (use_skill returns their description): " in catalog and "tools-list" in catalog


async def test_no_skills_no_use_skill_and_no_extension(tmp_path: Path) -> None:
    async with in_process(tmp_path / "ws", None, BA_MCP_SKILLS__BUNDLED="false") as c:
        assert "use_skill" not in {t.name for t in (await c.list_tools()).tools}
        assert not (await c.list_prompts()).prompts
        assert "io.modelcontextprotocol/skills" not in (c.server_capabilities.extensions or {})


async def test_a_skill_md_that_links_out_of_its_folder_is_not_followed(tmp_path: Path) -> None:
    """Issue 22 item 5: evil/SKILL.md -> a private file outside (0600, starting with frontmatter) was served by
    use_skill. SKILL.md is now opened like every file of a skill: beneath its folder, links only within it."""
    from ba_mcp.skills.loader import load_skill

    private = tmp_path / "private" / "notes.md"
    private.parent.mkdir()
    private.write_text(skill_md("evil", "Private notes. Use always.", body="salary of the CEO: 912345"))
    private.chmod(0o600)
    skills = tmp_path / "skills"
    (skills / "evil").mkdir(parents=True)
    os.symlink(private, skills / "evil" / "SKILL.md")
    (skills / "fine").mkdir()
    (skills / "fine" / "SKILL.md").write_text(skill_md("fine", "A fine skill. Use when testing."))
    os.symlink("SKILL.md", skills / "fine" / "skill.md")  # a link within the folder is still allowed
    skill, warnings = load_skill(skills / "evil", "user")
    assert skill is None and "cannot be opened inside the skill folder" in " ".join(warnings), warnings
    async with in_process(tmp_path / "ws", ["use_skill"], **env_for(skills)) as c:
        listed = " ".join(t.description or "" for t in (await c.list_tools()).tools)
        assert "fine" in listed and "Private notes" not in listed
        result = await call(c, name="evil")
        assert result.is_error and "912345" not in text_of(result), text_of(result)
