"""What ``pip install .`` alone runs: the release in a process that can import only stream-dp's
dependencies (no extra), its numba kernels compiled afresh (``tests/support/runtime_only.py``).
The tests' own extras (SciPy among them) would otherwise hide a dependency the package lacks:
numba's ``@`` on arrays asks for SciPy's BLAS, and a kernel using it failed every window the
optimiser planned after a plain ``pip install . && stream-dp demo``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from stream_dp.dp.release_choice import Candidates, choose_releases
from stream_dp.sources.sample import sample_path
from tests.support.runtime_only import blocked_modules, run_runtime_only

ROOT = Path(__file__).parents[2]

#: A release-choice instance (three candidates per group, shared vehicles, rooms that bind).
_INSTANCE = """
import numpy as np
from stream_dp.dp.release_choice import Candidates
rng = np.random.default_rng(7)
group = np.repeat(np.arange(6), 3)
start, who, pay = [0], [], []
for _ in group:
    members = rng.choice(5, rng.integers(1, 6), replace=False)
    who += members.tolist()
    pay += (rng.integers(1, 9, len(members)) / 8).tolist()
    start.append(len(who))
cands = Candidates(group.astype(np.int64), rng.uniform(-1.0, 10.0, len(group)),
                   np.array(start, dtype=np.int64), np.array(who, dtype=np.int64), np.array(pay))
room = rng.integers(0, 12, 5) / 4
"""


def test_the_child_cannot_import_what_only_the_tests_install(tmp_path: Path) -> None:
    """The guard is real: SciPy is importable here (a test dependency) and not in the child."""
    assert importlib.util.find_spec("scipy") is not None
    assert "scipy" in blocked_modules()
    done = run_runtime_only("import scipy", tmp_path, cwd=ROOT)
    assert done.returncode == 1
    assert "ModuleNotFoundError: No module named 'scipy'" in done.stderr


def test_the_optimisers_solver_runs_without_the_tests_extras(tmp_path: Path) -> None:
    """The solver's kernels compiled afresh without SciPy give the choice they give here."""
    code = _INSTANCE + (
        "import json\n"
        "from stream_dp.dp.release_choice import choose_releases\n"
        "c = choose_releases(cands, room)\n"
        "print(json.dumps([c.chosen.tolist(), c.value, c.upper_bound]))\n"
    )
    done = run_runtime_only(code, tmp_path, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    scope: dict[str, object] = {}
    exec(_INSTANCE, scope)  # noqa: S102 - the same instance, built here
    cands, room = scope["cands"], scope["room"]
    assert isinstance(cands, Candidates) and isinstance(room, np.ndarray)
    here = choose_releases(cands, room)
    assert here.upper_bound > here.value  # the rooms bind: the dual bound was computed
    assert json.loads(done.stdout) == [here.chosen.tolist(), here.value, here.upper_bound]


@pytest.mark.slow
@pytest.mark.parametrize(
    "options", [[], ["--budget-planner", "rules"], ["--fixed-epsilon"]],
    ids=["defaults", "rules", "fixed-epsilon"],
)  # fmt: skip
def test_the_bundled_week_releases_without_the_tests_extras(
    tmp_path: Path, options: list[str]
) -> None:
    """`stream-dp release` of the demo's week (every kernel of that release mode compiled
    afresh, no SciPy): no window fails and cells are released."""
    out = tmp_path / "out.jsonl"
    args = ["release", str(sample_path()), "--out", str(out), *options]
    code = f"import sys\nfrom stream_dp.cli import main\nsys.exit(main({args!r}))\n"
    done = run_runtime_only(code, tmp_path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    windows = [r for r in records if r["type"] == "window"]
    assert len(windows) > 100
    assert [w["window_start"] for w in windows if w["status"] != "released"] == []
    assert sum(w["cells_released"] for w in windows) > 0
