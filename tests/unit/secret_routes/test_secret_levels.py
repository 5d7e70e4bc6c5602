"""Two fixed levels of cells under secret routes (docs/math.md §14.9): the kept pairs' parents
are released too, each level L0 cells a vehicle, both in the accountant and the threshold
(the adaptive choice, the default with two levels: test_secret_adaptive.py)."""

from __future__ import annotations

import h3
import pytest

from stream_dp.config import load_settings
from stream_dp.dp.randomness import RandomSource
from stream_dp.dp.secret_accounting import SecretRoutesBudget
from stream_dp.secret_routes.params import FIXED, SecretRoutesParams
from stream_dp.secret_routes.release import release_secret_window
from tests.unit.secret_routes.columns import crowd, window_columns
from tests.unit.secret_routes.test_secret_privacy import NoThreshold, cp_low

FINE = h3.latlng_to_cell(40.70, -74.00, 8)
SIBLING = next(c for c in h3.cell_to_children(h3.cell_to_parent(FINE, 7), 8) if c != FINE)
LONE = h3.latlng_to_cell(41.50, -73.00, 8)  # far away: alone at both levels


def test_settings_put_both_levels_in_the_accountant() -> None:
    settings = load_settings(privacy_model="secret-routes", contribution_cells=2,
                             coarse_resolution=7, window_seconds=10800)  # fmt: skip
    params = SecretRoutesParams.from_settings(settings)
    assert params.resolutions == (8, 7) and params.budget.cells == 4
    assert params.contribution_cells == 2
    with pytest.raises(ValueError, match="coarse_resolution"):
        load_settings(privacy_model="secret-routes", coarse_resolution=8)


def test_parents_hold_every_kept_vehicle_of_their_children() -> None:
    params = SecretRoutesParams(SecretRoutesBudget(8.0, 1e-6, 1, 2), window_seconds=3600,
                                coarse_resolution=7, resolution_choice=FIXED)  # fmt: skip
    pairs = crowd(FINE, 300, 20.0) + crowd(SIBLING, 300, 40.0)
    out = release_secret_window(
        0, window_columns(pairs), params, RandomSource.seeded_for_tests(4), 1
    )
    by_cell = {r["cell"]: r for r in out.cells}
    parent = by_cell[h3.cell_to_parent(FINE, 7)]
    assert parent["resolution"] == 7 and by_cell[FINE]["resolution"] == 8
    assert parent["n_vehicles_noisy"] == pytest.approx(600, abs=30)
    assert parent["mean"] == pytest.approx(30.0, abs=3)
    assert by_cell[SIBLING]["mean"] == pytest.approx(40.0, abs=3)
    assert out.summary["cells_released"] == 3 and out.summary["coarse_resolution"] == 7


def test_a_lone_vehicle_shows_at_neither_level_beyond_delta() -> None:
    budget = SecretRoutesBudget(2.0, 0.2, 1, 2)  # L0 1 at two levels: delta_sel 0.02
    params = SecretRoutesParams(budget, window_seconds=3600, coarse_resolution=7,
                                resolution_choice=FIXED)  # fmt: skip
    broken = NoThreshold(budget, window_seconds=3600, coarse_resolution=7,
                         resolution_choice=FIXED)  # fmt: skip
    pairs = crowd(FINE, 40, 20.0) + [("x", LONE, [50.0])]
    lone = {LONE, h3.cell_to_parent(LONE, 7)}
    runs = 3000
    for release_params, caught in ((params, False), (broken, True)):
        source = RandomSource.seeded_for_tests(9)
        columns = window_columns(pairs)
        shown = sum(
            any(c["cell"] in lone for c in release_secret_window(0, columns, release_params,
                                                                  source, 1).cells)
            for _ in range(runs)
        )  # fmt: skip
        assert (cp_low(shown, runs) > budget.selection_delta) is caught
