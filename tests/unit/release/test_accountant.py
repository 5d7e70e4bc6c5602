"""The one privacy accountant of the release: per-cell ε and δ, K·ε, PLD where it applies."""

from __future__ import annotations

import numpy as np
import pytest

from stream_dp.dp.budget_ledger import BudgetLedger, WindowLoss
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
