"""The one privacy accountant of the release: per-cell ε and δ, K·ε, PLD where it applies."""

from __future__ import annotations

import numpy as np
import pytest

from stream_dp.dp.budget_ledger import CAP_RTOL, BudgetLedger, WindowLoss
from stream_dp.dp.mechanism_specs import MEAN_MECHANISMS
from stream_dp.dp.pld_accounting import pld_available
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.params import ReleaseParams


def test_each_cell_has_its_epsilon_and_the_mechanism_s_delta() -> None:
    pure = PrivacyAccountant(ReleaseParams(epsilon=0.5, variance_share=0.2))
    assert pure.cell_epsilons(3).tolist() == [0.5, 0.5, 0.5]
    assert pure.cell_delta == 0.0
    assert pure.mean_epsilon == pytest.approx(0.4) and pure.variance_epsilon == pytest.approx(0.1)
    assert pure.privacy_loss(4) == 2.0
    cummings = PrivacyAccountant(ReleaseParams(mean_mechanism="cummings", delta=1e-7))
    assert cummings.cell_delta == 1e-7
    assert cummings.period_delta(3 * cummings.epsilon) == pytest.approx(3e-7)


@pytest.mark.parametrize("name", sorted(MEAN_MECHANISMS))
def test_the_pld_figure_exists_only_where_pld_composes_the_mechanism(name: str) -> None:
    spec = MEAN_MECHANISMS[name]
    accountant = PrivacyAccountant(ReleaseParams(mean_mechanism=name, delta=1e-6))
    figure = accountant.pld_loss(3)
    if not spec.pld_composes or not pld_available():
        assert figure is None
    else:
        assert figure is not None and 0 < figure <= accountant.privacy_loss(3)
    assert accountant.period_pld(3 * accountant.epsilon) == figure


def test_the_mask_reads_the_ledger_through_the_accountant() -> None:
    accountant = PrivacyAccountant(ReleaseParams(epsilon=1.0, budget_cap=3.0))
    ledger = accountant.new_ledger()
    assert isinstance(ledger, BudgetLedger) and ledger.cap == 3.0
    ledger.record_released(WindowLoss.from_counts(0, 1.0, ["a", "b"], [2, 3]))
    allowed = accountant.allowed_cells(ledger, ("a", "b", "c"), 3600)
    assert np.asarray(allowed).tolist() == [1, 0, 3]


def test_a_failed_window_under_a_vehicle_budget_charges_each_vehicle_at_most_its_room() -> None:
    """§13.1, "The loss": a plan is checked by each vehicle's own shares, so the whole ε of
    its kept cells (what a failed window charges) may pass a room; the failed charge is each
    vehicle's whole ε or its room, the lesser (a vehicle with no room left pays nothing)."""
    from stream_dp.dp.occupancy import Occupancy
    from stream_dp.release.accounting import WindowReads

    params = ReleaseParams(
        vehicle_budget=4.0, vehicle_budget_burst=4.0, budget_period_seconds=86400,
        target_mean_error=10.0,
    )  # fmt: skip
    occupancy = Occupancy(
        cells=("x", "y"), vehicles=("a", "b", "c", "d"),
        cell_index=np.array([0, 0, 0, 1, 1, 1]), vehicle_index=np.array([0, 1, 3, 0, 2, 3]),
        count=np.array([3, 3, 3, 3, 3, 3]),
    )  # fmt: skip
    accountant = PrivacyAccountant(params, np.array([1.5, 1.25]))
    ledger = accountant.new_ledger()
    ledger.record_released(WindowLoss.of_losses(0, ["a", "d"], [1, 1], [2.5, 4.0]))
    slack = 4.0 * CAP_RTOL  # the room's float slack, not charged
    room = ledger.budget_room(["a", "b", "c", "d"], 3600, 4.0, 4.0) - slack
    assert room[0] == pytest.approx(1.5) and room[3] == 0.0  # a: B minus 2.5; d: none left
    whole = {"a": 2.75, "b": 1.5, "c": 1.25, "d": 2.75}
    unbounded, _ = accountant.charge(3600, WindowReads(occupancy))
    assert dict(zip(unbounded.vehicles, unbounded.loss.tolist(), strict=True)) == whole
    failed, _ = accountant.charge(3600, WindowReads(occupancy), ledger)
    charged = dict(zip(failed.vehicles, failed.loss.tolist(), strict=True))
    assert charged == {"a": room[0], "b": 1.5, "c": 1.25}  # d: nothing, a: its room
