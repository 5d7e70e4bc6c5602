"""PLD accounting: epsilon at delta by count, against dp-accounting and basic composition."""

from __future__ import annotations

import random

import numpy as np
import pytest

pytest.importorskip("dp_accounting")

from dp_accounting.pld import privacy_loss_distribution as pld_lib  # noqa: E402

from stream_dp.dp.budget_ledger import BudgetLedger  # noqa: E402
from stream_dp.dp.noise import LaplaceNoise  # noqa: E402
from stream_dp.dp.pld_accounting import DISCRETIZATION, PldAccountant, accountant  # noqa: E402
from stream_dp.dp.randomness import RandomSource  # noqa: E402
from stream_dp.release.params import ReleaseParams
from stream_dp.release.window import release_window  # noqa: E402
from stream_dp.windows.columns import WindowColumns
from tests.support.settings import fixed_mode_settings  # noqa: E402

DELTA = 1e-6


@pytest.mark.parametrize("share", [0.0, 0.5])
def test_pld_is_never_above_basic_composition(share) -> None:
    acc = PldAccountant(0.5, share, DELTA)
    eps = acc.epsilons(np.arange(0, 61))
    assert eps[0] == 0.0
    assert np.all(eps[1:] <= 0.5 * np.arange(1, 61) + 1e-12)
    assert np.all(np.diff(eps) >= -1e-12)  # non-decreasing
    assert eps[60] < 0.5 * 60 * 0.75  # and much tighter for many releases


def test_one_cell_costs_its_epsilon() -> None:
    for eps in (0.1, 0.5, 1.0, 2.0):
        assert PldAccountant(eps, 0.0, DELTA).epsilon(1) == pytest.approx(eps, rel=1e-3)


def laplace(eps: float):
    return pld_lib.from_laplace_mechanism(
        1.0 / eps, sensitivity=1.0, value_discretization_interval=DISCRETIZATION
    )


@pytest.mark.parametrize("seed", range(4))
def test_the_table_equals_dp_accounting_composed_directly_on_random_histories(seed) -> None:
    """A vehicle's history: per window, the cells it was counted in (each cell: mean Laplace
    at (1 - s) eps and variance Laplace at s eps), recorded in the ledger; its PLD loss read
    from the ledger and the table equals composing every release one by one."""
    rng = random.Random(seed)
    eps, share = rng.choice([0.3, 0.5, 1.0]), rng.choice([0.0, 0.5])
    history = [rng.randint(0, 3) for _ in range(rng.randint(1, 8))]
    ledger = BudgetLedger(86400 * 30, None)
    from stream_dp.dp.budget_ledger import WindowLoss

    for w, cells in enumerate(history):
        if cells:
            ledger.record(WindowLoss.from_counts(w * 3600, eps, ["veh"], [cells]))
    spent = ledger.spent(["veh"], len(history) * 3600)[0]
    n = round(spent / eps)
    assert n == sum(history)
    table = accountant(eps, share, DELTA).epsilon(n)
    direct = None
    for cells in history:
        for _ in range(cells):
            releases = [laplace(eps * (1 - share))] + ([laplace(eps * share)] if share else [])
            for pld in releases:
                direct = pld if direct is None else direct.compose(pld)
    expected = 0.0 if direct is None else min(direct.get_epsilon_for_delta(DELTA), n * eps)
    assert table == pytest.approx(expected, rel=1e-3, abs=1e-9)


def test_the_pld_cap_never_lets_a_vehicle_past_it() -> None:
    """Hourly windows where one vehicle drives through every cell: under a PLD cap the
    ledger's loss, read by the accountant, never exceeds the cap over the period."""
    settings = fixed_mode_settings(
        epsilon=0.5, variance_share=0.0, accounting="pld", budget_cap=3.0,
        budget_period_seconds=86400, resolution=7,
    )  # fmt: skip
    cells = ["872a10701ffffff", "872a10703ffffff", "872a10705ffffff", "872a10707ffffff"]
    ledger = BudgetLedger(settings.budget_period_seconds, settings.budget_cap)
    noise = LaplaceNoise(RandomSource.seeded_for_tests(3))
    acc = accountant(0.5, 0.0, settings.accounting_delta)
    counted = []
    for hour in range(30):
        readings = [(c, "busy", float(hour * 3600 + i), 10.0) for i, c in enumerate(cells)]
        readings += [
            (c, f"other{k}", float(hour * 3600 + k), 20.0) for c in cells for k in range(3)
        ]
        cs, vs, ts, xs = (list(x) for x in zip(*readings, strict=True))
        window = WindowColumns.from_readings(cs, vs, ts, xs, 64)
        release = release_window(
            hour * 3600, window, ReleaseParams.from_settings(settings), noise, ledger=ledger
        )
        assert release.loss is not None
        ledger.record_released(release.loss)
        busy = dict(zip(release.loss.vehicles, release.loss.cells.tolist(), strict=True))
        counted.append(busy.get("busy", 0))
        in_period = sum(counted[-24:])
        assert acc.epsilon(in_period) <= settings.budget_cap * (1 + 1e-9)
    assert sum(counted[:24]) == acc.max_count(3.0)  # the cap is used, not just respected


def test_a_pld_cap_allows_more_cells_than_basic_composition() -> None:
    acc = PldAccountant(0.25, 0.0, DELTA)
    allowed = acc.max_count(20.0)
    assert allowed > 20.0 / 0.25
    assert acc.epsilon(allowed) <= 20.0 < acc.epsilon(allowed + 1)
    spent = np.array([0, 10, allowed, np.inf])
    assert acc.allowed_cells(spent, 20.0).tolist() == [allowed, allowed - 10, 0, 0]
