"""Every relative link in the project's markdown pages (the README, docs/, benchmarks/,
deploy/, the data notices; not vendored files) names a file that exists, and every ``#anchor``
names a heading of the page it points to (GitHub's heading ids); every repository path the
README, docs/*.md, benchmarks/README.md and deploy/README.md name (``tests/...::test_name``
and ``file.py:LINE`` included) exists."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PATH_PAGES = [*PAGES, ROOT / "benchmarks" / "README.md", ROOT / "deploy" / "README.md"]
#: Top-level folders of the repository: a path starting with one is named from the root.
REPO_FOLDERS = ("stream_dp", "tests", "benchmarks", "docs", "deploy", "examples", ".ci")

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
# A link inside a heading: GitHub's id keeps only its text.
_INLINE_LINK = re.compile(r"(?<!!)\[([^\]]*)\]\([^)]*\)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
# A path-like word (``folder/...``, not inside a URL or a longer path), then optionally a
# test's name (``::test_x``) or a line (``:82``, ``:82-90``).
_PATH = re.compile(r"(?<![\w./:-])((?:\.ci|[A-Za-z_][\w.-]*)/[\w./-]*)(?:::(\w+)|:(\d+))?")
# A path inside the package named from its own folder (``release/window.py``): a file.
_FILE_SUFFIX = re.compile(r"\.(py|ya?ml|json|md|csv|toml|sh)$")


def _prose(text: str) -> str:
    """The text without fenced code blocks and code spans (links are not links there)."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def anchors(text: str) -> set[str]:
    """The ids GitHub gives a page's headings: lower case, punctuation dropped, spaces to
    hyphens, a repeated id suffixed -1, -2, ..."""
    seen: dict[str, int] = {}
    ids = set()
    for heading in _HEADING.findall(_FENCE.sub("", text)):
        words = _INLINE_LINK.sub(r"\1", heading)
        slug = re.sub(r"[^\w\- ]", "", words.lower()).replace(" ", "-")
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


def link_pages(root: Path = ROOT) -> list[Path]:
    """The project's markdown pages whose links are checked: the README and every ``.md``
    under the repository's folders, except vendored files and folders scripts make."""
    generated = generated_folders(root)
    return [root / "README.md"] + [
        root / name
        for name in repository_files(root)
        if name.endswith(".md")
        and "vendor" not in name.split("/")
        and not name.startswith(generated)
    ]


def repository_files(root: Path = ROOT) -> list[str]:
    """Every file under the repository's top-level folders, as ``folder/.../name``."""
    return sorted(
        path.relative_to(root).as_posix()
        for folder in REPO_FOLDERS
        for path in (root / folder).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    )


def generated_folders(root: Path = ROOT) -> tuple[str, ...]:
    """The folders ``.gitignore`` names at the root (``benchmarks/data/``): scripts make them, so
    a path inside one is named, never committed."""
    ignore = root / ".gitignore"
    lines = ignore.read_text().splitlines() if ignore.is_file() else []
    return tuple(line for line in lines if "/" in line.rstrip("/") and line.endswith("/"))


def missing_paths(page: Path, root: Path = ROOT) -> list[str]:
    """Each repository path ``page`` names that does not exist, with why: a path from the
    root (``tests/e2e/x.py``, ``deploy/``) must exist there; a file named from inside a folder
    (``release/window.py``, ``prometheus/alerts.yml``) beside the page or at the end of some
    repository path; a ``::test`` must be defined in its file, a ``:LINE`` within it."""
    files = repository_files(root)
    known = set(files) | {str(PurePosixPath(f).parent) for f in files}
    known |= {str(parent) for f in files for parent in PurePosixPath(f).parents}
    problems = []
    for match in _PATH.finditer(page.read_text()):
        name, test, line = match.group(1).rstrip("./"), match.group(2), match.group(3)
        if f"{name}/".startswith(generated_folders(root)):
            continue  # made by a script, ignored by git
        if name.split("/")[0] in REPO_FOLDERS:
            found = name if name in known else None
        elif _FILE_SUFFIX.search(name):
            beside = (page.parent / name).resolve()
            found = (
                beside.relative_to(root.resolve()).as_posix()
                if beside.is_file() and beside.is_relative_to(root.resolve())
                else next((f for f in files if f.endswith(f"/{name}")), None)
            )
        else:
            continue  # a word with a slash (km/h, count/sum), not a path
        if found is None:
            problems.append(f"{name}: no such path")
        elif test and not re.search(rf"^\s*(async )?def {test}\(", _read(root, found), re.M):
            problems.append(f"{name}::{test}: no such test")
        elif line and int(line) > len(_read(root, found).splitlines()):
            problems.append(f"{name}:{line}: past the end of the file")
    return problems


def _read(root: Path, name: str) -> str:
    path = root / name
    return path.read_text(errors="replace") if path.is_file() else ""


@pytest.mark.parametrize("page", PATH_PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_repository_path_named_exists(page: Path) -> None:
    assert missing_paths(page) == []


def test_the_path_check_finds_missing_files_tests_and_lines(tmp_path: Path) -> None:
    (tmp_path / "stream_dp" / "release").mkdir(parents=True)
    (tmp_path / "stream_dp" / "release" / "window.py").write_text("a = 1\nb = 2\n")
    (tmp_path / "tests" / "e2e").mkdir(parents=True)
    (tmp_path / "tests" / "e2e" / "test_x.py").write_text("def test_one():\n    pass\n")
    (tmp_path / "deploy" / "prometheus").mkdir(parents=True)
    (tmp_path / "deploy" / "prometheus" / "alerts.yml").write_text("groups: []\n")
    (tmp_path / "deploy" / "README.md").write_text(
        "`prometheus/alerts.yml` and `prometheus/rules.yml`\n"
    )
    page = tmp_path / "README.md"
    page.write_text(
        "Found: `stream_dp/release/window.py:2`, `release/window.py`, `stream_dp/release/`, "
        "(tests/e2e/test_x.py::test_one), https://example.org/tests/gone.py, km/h.\n"
        "Missing: `tests/test_x.py`, `release/step.py: GC`, `stream_dp/release/window.py:3`, "
        "`tests/e2e/test_x.py::test_two`, `deploy/grafana/`.\n"
    )
    assert missing_paths(page, tmp_path) == [
        "tests/test_x.py: no such path",
        "release/step.py: no such path",
        "stream_dp/release/window.py:3: past the end of the file",
        "tests/e2e/test_x.py::test_two: no such test",
        "deploy/grafana: no such path",
    ]
    assert missing_paths(tmp_path / "deploy" / "README.md", tmp_path) == [
        "prometheus/rules.yml: no such path"
    ]


@pytest.mark.parametrize("page", link_pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_links_of_every_project_page_are_checked(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "budget.md").write_text("# Budget\n\n## The ledger\n")
    (tmp_path / "deploy" / "kubernetes").mkdir(parents=True)
    (tmp_path / "deploy" / "README.md").write_text("[ok](../docs/budget.md#the-ledger)\n")
    (tmp_path / "deploy" / "kubernetes" / "NOTES.md").write_text("[x](../../docs/budget.md#cap)")
    (tmp_path / "benchmarks" / "data").mkdir(parents=True)
    (tmp_path / "benchmarks" / "README.md").write_text("[gone](../docs/plan.md)\n")
    (tmp_path / "benchmarks" / "data" / "made.md").write_text("[made](nothing.md)\n")
    (tmp_path / "stream_dp" / "web" / "vendor").mkdir(parents=True)
    (tmp_path / "stream_dp" / "web" / "vendor" / "README.md").write_text("[theirs](x.md)\n")
    (tmp_path / ".gitignore").write_text("benchmarks/data/\n")
    (tmp_path / "README.md").write_text("[budget](docs/budget.md#the-ledger)\n")
    problems = {
        page.relative_to(tmp_path).as_posix(): broken_links(page, tmp_path)
        for page in link_pages(tmp_path)
    }
    assert {page: found for page, found in problems.items() if found} == {
        "benchmarks/README.md": ["../docs/plan.md: no such file"],
        "deploy/kubernetes/NOTES.md": ["../../docs/budget.md#cap: no heading with this anchor"],
    }
    assert "README.md" in problems and "deploy/README.md" in problems


def test_a_heading_with_a_link_is_named_by_its_text() -> None:
    page = (
        "## Errata ([docs/math.md](math.md) §10 has them)\n## [Plan](plan.md): `stream-dp plan`\n"
    )
    assert anchors(page) == {"errata-docsmathmd-10-has-them", "plan-stream-dp-plan"}


def test_the_docs_pages_the_readme_links_exist_and_are_linked() -> None:
    readme = _prose((ROOT / "README.md").read_text())
    for name in (
        "configuration", "operations", "output", "architecture", "math", "budget",
        "adaptive-cells", "plan", "performance", "experiments", "dashboard",
    ):  # fmt: skip
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


def test_a_path_inside_a_folder_git_ignores_is_named_not_required(tmp_path: Path) -> None:
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "city.py").write_text("")
    (tmp_path / ".gitignore").write_text("__pycache__/\nbenchmarks/data/\n")
    page = tmp_path / "README.md"
    page.write_text("`benchmarks/city.py` makes `benchmarks/data/a.csv`; `benchmarks/gone.py`\n")
    assert missing_paths(page, tmp_path) == ["benchmarks/gone.py: no such path"]
    (tmp_path / ".gitignore").write_text("__pycache__/\n")
    assert missing_paths(page, tmp_path) == [
        "benchmarks/data/a.csv: no such path",
        "benchmarks/gone.py: no such path",
    ]
