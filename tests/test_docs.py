"""The documentation a newcomer navigates: the README within a few screens, every topic in docs/ reachable from it,
and every link between them (and into the repository) pointing at a file and a heading that exist."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS, ROOT / "bench" / "README.md"]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _prose(path: Path) -> str:
    """The page without its code blocks (a `## stdout` inside an example is no heading, a [x](y) no link)."""
    return re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation but - and _ dropped, spaces as -."""
    found = set()
    for heading in re.findall(r"^#{1,6} (.+)$", _prose(path), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


def test_every_link_in_the_readme_and_docs_reaches_a_file_and_heading_that_exist() -> None:
    broken = []
    checked = 0
    for page in PAGES:
        for target in LINK.findall(_prose(page)):
            if re.match(r"(https?:|mailto:)", target):
                continue
            checked += 1
            file, _, anchor = target.partition("#")
            where = (page.parent / file).resolve() if file else page
            if not where.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and (where.suffix != ".md" or anchor not in _anchors(where)):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert checked > 20, checked  # the pages do link to each other
    assert not broken, "\n".join(broken)


def test_the_readme_is_a_few_screens_and_reaches_every_topic() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", _prose(ROOT / "README.md"), flags=re.M)
    # issue 53: installing leads (the extension, uvx), the clone second; issue 54: a team's server after one's own
    expected = ["Install", "Quick start", "Connect a client", "Run it for your team", "Configure", "Read more"]
    assert headings[: len(expected)] == expected, headings
    assert len(readme.splitlines()) <= 200, len(readme.splitlines())
    linked = {m for m in LINK.findall(readme) if m.startswith("docs/")}
    assert {f"docs/{page.name}" for page in DOCS} <= linked, "a topic in docs/ the README does not link"


TRACKED_TEXT = (".py", ".md", ".yaml", ".yml", ".toml", ".json", ".sql", ".txt", ".html", ".js", ".sh", "")
REQUIREMENT = re.compile(r"(?<![\w-])((?:[SP]-\d{1,2})|(?:T-[A-Z](?:-[A-Z])?))(?![\w-])")


def _tracked() -> list[Path]:
    import subprocess

    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / n for n in names if Path(n).suffix in TRACKED_TEXT and (ROOT / n).is_file()]


def test_the_repository_cites_no_document_it_does_not_hold() -> None:
    """The product specification lives outside the repository: what the code relies on is in docs/requirements.md,
    and the requirement ids cited (S-9, P-1, T-L) are all defined there."""
    defined = set(re.findall(r"^\| ((?:[SPT]-[A-Z0-9-]+)) \|", (ROOT / "docs" / "requirements.md").read_text(), re.M))
    assert {"S-1", "S-21", "P-1", "P-17", "T-L"} <= defined, sorted(defined)
    spec, unknown, cited = [], [], 0
    for path in _tracked():
        text = path.read_text(encoding="utf-8", errors="replace")
        name = path.relative_to(ROOT)
        spec += [f"{name}: {m.group(0)}" for m in re.finditer(r"\bSPEC(?:\.md|\b(?!_))", text)]
        for m in REQUIREMENT.finditer(text):
            cited += 1
            if m.group(1) not in defined:
                unknown.append(f"{name}: {m.group(1)}")
    assert cited > 100, cited  # the code does cite them
    assert not spec, "\n".join(spec)
    assert not unknown, "\n".join(unknown)


def test_the_command_reference_is_the_parsers() -> None:
    from tests import cli_reference

    doc = cli_reference.DOC.read_text(encoding="utf-8")
    assert cli_reference.BEGIN in doc and cli_reference.END in doc
    assert "### `ba-mcp audit`" in cli_reference.reference()
    assert doc == cli_reference.rendered(doc), "docs/commands.md is stale: uv run python -m tests.cli_reference"


def test_every_test_file_is_in_the_map_of_rooms_with_its_tier() -> None:
    """tests/README.md maps each room to its test files: every ``tests/test_*.py`` is there, no file it names is gone,
    and "(slow)" follows exactly the files whose module-level mark puts them all in the slow tier."""
    from tests.conftest import _slow_throughout

    table = (ROOT / "tests" / "README.md").read_text(encoding="utf-8").partition("\n|")[2]
    named = dict(re.findall(r"`(test_\w+\.py)`( \(slow\))?", table))
    files = {p.name: p for p in (ROOT / "tests").glob("test_*.py")}
    assert len(files) > 50, sorted(files)
    missing, gone = sorted(set(files) - set(named)), sorted(set(named) - set(files))
    assert not missing, f"test files missing from tests/README.md: {missing}"
    assert not gone, f"tests/README.md names test files that are gone: {gone}"
    wrong = [
        f"{name}: {'slow' if _slow_throughout(path) else 'fast'} throughout, the map says otherwise"
        for name, path in sorted(files.items())
        if bool(named[name]) != _slow_throughout(path)
    ]
    assert not wrong, "\n".join(wrong)


def test_every_test_file_the_conftest_names_exists() -> None:
    """conftest.py hands files out longest first and starts PostgreSQL for the files that need it, by name: a renamed
    file the conftest still names by its old name would lose its place, or its database."""
    named = set(re.findall(r"\"(test_\w+\.py)\"", (ROOT / "tests" / "conftest.py").read_text(encoding="utf-8")))
    assert len(named) > 20, sorted(named)
    gone = sorted(n for n in named if not (ROOT / "tests" / n).is_file())
    assert not gone, f"tests/conftest.py names test files that are gone: {gone}"
