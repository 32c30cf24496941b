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
