"""What would release the cells the data cannot support (docs/math.md §13.3): the closed
forms against a scan over ε, and the logged line's T and B checked by releasing with them."""

from __future__ import annotations

import logging
import math

import h3
import numpy as np
import pytest

from stream_dp.dp.adaptive_cells import best_cap_mean_error
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.release.params import ReleaseParams
from stream_dp.release.vehicle_budget.unsupported import release_needs
from stream_dp.release.window import release_window
from stream_dp.windows.columns import WindowColumns

U, T = 65.0, 10.0


@pytest.mark.parametrize("counts", [[1, 1, 1], [5, 1, 2, 9], [40, 3], [2] * 12])
def test_the_needs_match_a_scan_over_epsilon(counts: list[int]) -> None:
    unit, count = np.zeros(len(counts), dtype=np.int64), np.array(counts, dtype=np.int64)
    needs = release_needs(unit, count, 1, upper=U, target=T, budget=14.0, burst=3.5,
                          mean_share=1.0, prefix_limit=64)  # fmt: skip
    grid = np.linspace(0.001, 200.0, 200_000)
    errors = np.array([best_cap_mean_error(unit, count, 1, U, e, 64)[0] for e in grid[::100]])
    first = grid[::100][np.argmax(errors <= T)]  # the least ε on the coarse scan meeting T
    assert needs.budget[0] * 3.5 / 14.0 == pytest.approx(first, abs=0.1 + 1e-3 * first)
    assert needs.target[0] == pytest.approx(best_cap_mean_error(unit, count, 1, U, 3.5, 64)[0])


def test_a_cell_the_bias_alone_breaks_needs_an_infinite_budget() -> None:
    # Nobody's readings kept can bring the bias under T: never with a cap below the max, and
    # the max keeps everything (bias 0), so every unit is reachable: T = 0 is not.
    unit, count = np.zeros(2, dtype=np.int64), np.array([3, 3])
    needs = release_needs(unit, count, 1, upper=U, target=0.0, budget=14.0, burst=3.5,
                          mean_share=1.0, prefix_limit=64)  # fmt: skip
    assert math.isinf(needs.budget[0])


def _sparse_window(params: ReleaseParams) -> list[dict[str, object]]:
    cell = h3.latlng_to_cell(40.70, -74.02, 8)
    cells, vehicles = [cell] * 6, [f"v{i // 2}" for i in range(6)]
    columns = WindowColumns.from_readings(cells, vehicles, [float(i) for i in range(6)],
                                          [30.0] * 6, 64)  # fmt: skip
    ledger = None
    return release_window(0, columns, params, LaplaceNoise(), 0, ledger, None, last=True).cells


def test_the_line_names_a_target_and_a_budget_that_do_release(
    caplog: pytest.LogCaptureFixture,
) -> None:
    base = dict(epsilon=1.0, upper=U, resolution=8, coarsest_resolution=7, target_mean_error=T,
                variance_share=0.0, vehicle_budget=2.0, budget_period_seconds=86400,
                max_span_hours=1, app_id="test", budget_planner="rules")  # fmt: skip
    with caplog.at_level(logging.INFO, logger="stream_dp.release.vehicle_budget.cells"):
        assert _sparse_window(ReleaseParams(**base)) == []
    (line,) = [r.getMessage() for r in caplog.records if "cannot meet T" in r.getMessage()]
    assert line.startswith("6 readings in 1 resolution-7 cells cannot meet T 10")
    words = line.split()
    target = float(words[words.index("or") - 1])
    budget = float(words[words.index("or") + 2])
    assert target > T and budget > 2.0
    assert _sparse_window(ReleaseParams(**{**base, "target_mean_error": target * 1.01}))
    assert _sparse_window(ReleaseParams(**{**base, "vehicle_budget": budget * 1.01}))
