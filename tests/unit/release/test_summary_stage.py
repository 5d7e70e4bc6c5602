"""The window's summary is built in one place, the pipeline's summary stage, from the
accountant (issue 25): the budget fields of a released window (its ε, privacy_loss,
max_vehicle_loss, readings_withheld) are not patched afterwards, and a failed window's
summary states its charge the same way."""

from __future__ import annotations

import pytest

from stream_dp.dp.budget_ledger import BudgetLedger
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.release.params import ReleaseParams
from stream_dp.release.state import WindowInput, WindowState
from stream_dp.release.window import failed_release, release_pipeline, release_window
from tests.unit.release.test_vehicle_budget import HOUR, _params, _window


def _two_cells() -> list[tuple[int, int, float]]:
    """A dense cell (24 vehicles) and a sparser one (12): their per-cell ε differ."""
    dense = [(0, v, 20.0 + v % 7) for v in range(24) for _ in range(3)]
    sparse = [(1, 100 + v, 40.0 + v % 5) for v in range(12) for _ in range(3)]
    return dense + sparse


def _noise() -> LaplaceNoise:
    return LaplaceNoise(RandomSource.seeded_for_tests(5))


def test_the_release_pipeline_alone_states_the_budget_fields() -> None:
    params = _params(vehicle_budget=12.0, epsilon=2.0, coarsest_resolution=8, max_span_hours=1)
    ledger = BudgetLedger(params.ledger_period_seconds, None)
    window = WindowInput(0, _window(0, _two_cells()), params, ledger, nonce="n")
    state = release_pipeline(params, _noise()).run(WindowState.start(window))
    cells, summary, loss = state.cells, state.summary, state.loss
    assert loss is not None and len(cells) == 2
    epsilons = sorted(c["epsilon"] for c in cells)
    assert epsilons[0] < epsilons[1] < params.vehicle_burst  # per-cell ε, not ε 1
    assert summary["epsilon"] == epsilons[1]
    assert summary["max_vehicle_loss"] == summary["privacy_loss"] == loss.max_loss
    assert loss.max_loss == pytest.approx(epsilons[1])  # no vehicle is in both cells
    assert summary["privacy_loss"] != summary["K"] * params.epsilon
    # release_window adds nothing to it (another release event: its own id only).
    released = release_window(0, _window(0, _two_cells()), params, _noise(), 0, ledger)
    assert {**released.summary, "release_id": None} == {**summary, "release_id": None}


def test_a_stale_carry_is_withheld_in_the_summary_the_pipeline_builds() -> None:
    params = _params(vehicle_budget=12.0, epsilon=2.0, coarsest_resolution=8, max_span_hours=2)
    ledger = BudgetLedger(params.ledger_period_seconds, None)
    sparse = [(1, 100 + v, 40.0) for v in range(2) for _ in range(3)]  # misses T: carried
    first = release_window(0, _window(0, sparse), params, _noise(), 0, ledger)
    assert first.carry is not None and not first.cells
    without, with_stale = (
        release_window(
            3 * HOUR, _window(3 * HOUR, _two_cells()), params, _noise(), 0, ledger, carry
        ).summary
        for carry in (None, first.carry)
    )
    # The carry is 3 windows old: its 6 readings are withheld, beside the window's own.
    assert with_stale["readings_withheld"] == without["readings_withheld"] + 6
    assert with_stale["cells_withheld"] == without["cells_withheld"]


def test_a_failed_fixed_epsilon_window_states_its_charge() -> None:
    """With a ledger, a failed window's summary names the largest charge, as a released
    one does (it was null before in the fixed-ε mode)."""
    params = ReleaseParams(
        epsilon=0.5, resolution=8, target_mean_error=None, variance_share=0.0, app_id="t"
    )
    columns = _window(0, _two_cells() + [(0, 100, 30.0)])  # vehicle 100 is in both cells
    ledger = BudgetLedger(86400, None)
    failed = failed_release(0, RuntimeError(), params, 0, ledger, columns, [])
    assert failed.loss is not None
    assert failed.summary["max_vehicle_loss"] == pytest.approx(1.0)  # two cells at 0.5
    assert failed.summary["privacy_loss"] == failed.summary["max_vehicle_loss"]
