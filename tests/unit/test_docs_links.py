"""Every relative link in the README and in docs/*.md names a file that exists, and every
``#anchor`` names a heading of the page it points to (GitHub's heading ids)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _prose(text: str) -> str:
    """The text without fenced code blocks and code spans (links are not links there)."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def anchors(text: str) -> set[str]:
    """The ids GitHub gives a page's headings: lower case, punctuation dropped, spaces to
    hyphens, a repeated id suffixed -1, -2, ..."""
    seen: dict[str, int] = {}
    ids = set()
    for heading in _HEADING.findall(_FENCE.sub("", text)):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        ids.add(slug if count == 0 else f"{slug}-{count}")
    return ids


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """``target: why`` for each relative link of ``page`` that does not resolve."""
    problems = []
    for target in _LINK.findall(_prose(page.read_text())):
        if _SCHEME.match(target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.is_relative_to(root.resolve()) or not file.exists():
            problems.append(f"{target}: no such file")
        elif anchor and anchor not in anchors(file.read_text()):
            problems.append(f"{target}: no heading with this anchor")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_docs_pages_the_readme_links_exist_and_are_linked() -> None:
    readme = _prose((ROOT / "README.md").read_text())
    for name in ("configuration", "operations", "output", "architecture", "math"):
        assert f"(docs/{name}.md" in readme
        assert (ROOT / "docs" / f"{name}.md").exists()


def test_the_check_finds_a_missing_file_and_a_missing_anchor(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# A page\n\n## Rejected readings\n")
    readme = tmp_path / "README.md"
    readme.write_text(
        "[ok](docs/page.md#rejected-readings) [ok](#top-part) [web](https://example.org/x)\n"
        "`[in code](missing.md)`\n\n# Top part\n\n"
        "[gone](docs/nothing.md) [moved](docs/page.md#configuration) [up](../outside.md)\n"
    )
    assert broken_links(readme, tmp_path) == [
        "docs/nothing.md: no such file",
        "docs/page.md#configuration: no heading with this anchor",
        "../outside.md: no such file",
    ]
