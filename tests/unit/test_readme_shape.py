"""The README stays a first page (issue 35, item 6): at most :data:`MAX_LINES` lines, the
long material in docs/, and a quick start of exactly two commands (the demo, the tests)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
#: The README's length limit: what a newcomer and an operator need, the rest linked.
MAX_LINES = 450
#: The quick start: install and run the demo; install and run the fast suite.
QUICK_START = (
    "pip install . && stream-dp demo",
    'pip install -e ".[test]" && python -m pytest -q',
)
_SECTION = re.compile(r"^## (.+?)\n(.*?)(?=^## |\Z)", re.MULTILINE | re.DOTALL)
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def sections(text: str) -> dict[str, str]:
    """Each ``## `` heading of a page and the text under it (up to the next one)."""
    return {title: body for title, body in _SECTION.findall(text)}


def quick_start_commands(text: str) -> list[list[str]]:
    """The non-blank lines of each fenced block in the page's "Quick start" section."""
    body = sections(text).get("Quick start", "")
    return [[line for line in block.splitlines() if line.strip()] for block in _FENCE.findall(body)]


def test_the_readme_has_at_most_450_lines() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_LINES, f"README.md has {lines} lines; move detail to docs/"


def test_the_quick_start_is_exactly_two_commands() -> None:
    assert quick_start_commands(README.read_text()) == [list(QUICK_START)]


def test_the_quick_start_check_finds_a_third_command_or_a_second_block() -> None:
    page = "# x\n\n## Quick start\n\n```bash\n{}\n```\n{}\n## Next\n\n```\nls\n```\n"
    two = "\n".join(QUICK_START)
    assert quick_start_commands(page.format(two, "")) == [list(QUICK_START)]
    assert quick_start_commands(page.format(two + "\nstream-dp serve", "")) != [list(QUICK_START)]
    assert len(quick_start_commands(page.format(two, "```\nmake\n```\n"))) == 2
    assert quick_start_commands("# x\n\n## Start\n\n```\nls\n```\n") == []


def test_which_privacy_model_is_a_section_saying_when_each_applies_with_the_table() -> None:
    """Issue 36: in plain words, when the public-occupancy model applies (fixed routes) and
    when secret-routes is required (probe vehicles), and the measured table of both models
    and PipelineDP on the same data."""
    body = sections(README.read_text()).get("Which privacy model", "")
    words = body.lower()
    for word in ("public-occupancy", "buses", "ferries", "secret-routes", "probe vehicles",
                 "connected cars", "taxis"):  # fmt: skip
        assert word in words, word
    header = next((line for line in body.splitlines() if line.startswith("| data")), "")
    assert all(name in header for name in ("secret-routes", "PipelineDP", "public-occupancy"))
    rows = [line for line in body.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) >= 4 and any("city" in row for row in rows)
