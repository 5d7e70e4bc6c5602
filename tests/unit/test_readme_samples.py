"""The README's generated blocks (``benchmarks/readme_samples.py``): the rewriting of marked
blocks, the sample's format, and (slow: it releases the AIS week twice) that the README says
what the demo's settings release today."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

import stream_dp.release.window as release_window
from stream_dp.config import ENV_PREFIX

ROOT = Path(__file__).parents[2]
_SPEC = importlib.util.spec_from_file_location(
    "readme_samples", ROOT / "benchmarks" / "readme_samples.py"
)
assert _SPEC is not None and _SPEC.loader is not None
samples = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = samples  # its dataclass looks its module up
_SPEC.loader.exec_module(samples)

PAGE = """# Title
<!-- generated:one -->
old one
<!-- /generated -->
kept text
<!-- generated:two -->
<!-- /generated -->
"""


def test_rewrite_replaces_the_marked_blocks_only() -> None:
    new = samples.rewrite(PAGE, {"one": lambda: "new one\n", "two": lambda: "two\nlines\n"})
    assert new == PAGE.replace("old one\n", "new one\n").replace(
        "<!-- generated:two -->\n", "<!-- generated:two -->\ntwo\nlines\n"
    )
    assert samples.rewrite(new, {"one": lambda: "new one\n", "two": lambda: "two\nlines\n"}) == new


@pytest.mark.parametrize("names", [("one",), ("one", "two", "three")])
def test_rewrite_refuses_markers_and_writers_that_do_not_match(names: tuple[str, ...]) -> None:
    with pytest.raises(SystemExit, match="do not match"):
        samples.rewrite(PAGE, {name: lambda: "" for name in names})


def test_a_record_is_wrapped_between_fields_and_rounded_except_the_grid_values() -> None:
    record = {"type": "cell", "mean": 13.0812345, "epsilon": 0.765625, "cell": "8" * 80, "K": 2}
    lines = samples.record_lines(record)
    assert lines == [
        '{"type": "cell", "mean": 13.08, "epsilon": 0.765625,',
        ' "cell": "' + "8" * 80 + '",',
        ' "K": 2}',
    ]
    assert all(len(line) <= samples.WIDTH for line in lines if "888" not in line)
    assert samples.record_lines(record, ("type", "K")) == ['{"type": "cell", "K": 2, …}']


def test_the_map_window_is_the_earliest_with_the_most_cells() -> None:
    def window(start: str, cells: int) -> object:
        return samples.Window({"window_start": start}, [{}] * cells)

    windows = [window("a", 0), window("b", 1), window("c", 2), window("d", 2), window("e", 1)]
    assert samples._map_window(windows).summary["window_start"] == "c"


@pytest.mark.slow
def test_the_readme_says_what_the_demo_settings_release(monkeypatch: pytest.MonkeyPatch) -> None:
    """``python benchmarks/readme_samples.py --check``, in process: every generated block of
    the README is what the generator writes from today's release and demo defaults."""
    for name in [n for n in os.environ if n.startswith(ENV_PREFIX)]:
        monkeypatch.delenv(name)
    monkeypatch.setattr(release_window, "new_release_nonce", lambda: samples.FIXED_NONCE)
    text = (ROOT / "README.md").read_text()
    assert samples.rewrite(text, samples.generated_blocks()) == text, (
        "README out of date: run python benchmarks/readme_samples.py"
    )
