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

from stream_dp.dp.release_choice import choose_releases
from stream_dp.sources.sample import sample_path
from tests.support.release_choice_instances import random_instance
from tests.support.runtime_only import blocked_modules, run_runtime_only

ROOT = Path(__file__).parents[2]


def test_the_child_cannot_import_what_only_the_tests_install(tmp_path: Path) -> None:
    """The guard is real: SciPy is importable here (a test dependency) and not in the child."""
    assert importlib.util.find_spec("scipy") is not None
    assert "scipy" in blocked_modules()
    done = run_runtime_only("import scipy", tmp_path, cwd=ROOT)
    assert done.returncode == 1
    assert "ModuleNotFoundError: No module named 'scipy'" in done.stderr


def test_the_optimisers_solver_runs_without_the_tests_extras(tmp_path: Path) -> None:
    """The solver's kernels compiled afresh without SciPy give the choice they give here."""
    code = (
        "import json, numpy as np\n"
        "from stream_dp.dp.release_choice import choose_releases\n"
        "from tests.support.release_choice_instances import random_instance\n"
        "c = choose_releases(*random_instance(np.random.default_rng(7), 6, 3, 5))\n"
        "print(json.dumps([c.chosen.tolist(), c.value, c.upper_bound]))\n"
    )
    done = run_runtime_only(code, tmp_path, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    here = choose_releases(*random_instance(np.random.default_rng(7), 6, 3, 5))
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
