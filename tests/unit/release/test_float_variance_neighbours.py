"""Neighbours through the release's own path (docs/math.md §4.2, "Float inputs", the
variance): the float variance the sampler is given never moves by more than the sensitivity it
is given.

The variance moves by its whole ``Delta_Var`` only between neighbours at the extremes: one
vehicle's ``top`` readings go from 0 to U while everyone else's stay at one end. Here the
others' readings are random within ``10^-17 U`` of 0 (or U minus those, which rounds to U),
so the exact movement is within a rounding of ``Delta_Var``. A
running sum of the pairs' sums of squares and the exact-arithmetic ``Delta_Var`` (the old path)
fail this in some of these cases (checked below, so the test cannot pass vacuously); the
accurate sums and the sampler sensitivity with its allowance never.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from stream_dp.dp.grid_error import variance_sensitivity
from stream_dp.dp.pseudo_user import PseudoUserResult
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.noisy import ErrorBars, noisy_cells
from stream_dp.release.params import ReleaseParams
from tests.unit.release.test_float_mean_neighbours import (
    Recorder,
    counts_of,
    one_cell_statistics,
)

U = 65.0


def sampler_input(values: NDArray[np.float64], counts: NDArray[np.int64]) -> tuple[float, float]:
    """The value and sensitivity the release gives the variance's sampler for one cell of
    these readings (``counts[l]`` readings of vehicle ``l``, all kept)."""
    stats, kept = one_cell_statistics(values, counts)
    top, kept_sum = np.array([kept.max()]), stats.kept_readings
    capped = PseudoUserResult(top, kept, np.zeros(1), variance_sensitivity(U, top, kept_sum))
    recorder = Recorder()
    accountant = PrivacyAccountant(ReleaseParams(epsilon=1.0, upper=U, variance_share=0.5))
    bars = ErrorBars(np.zeros(1), None)
    noisy_cells(stats, capped, accountant, recorder, bars, np.array([True]), U)  # type: ignore[arg-type]
    assert len(recorder.calls) == 2  # the variances first, then the means
    given, sensitivity = recorder.calls[0]
    return float(given[0]), float(sensitivity[0])


def old_variance(values: NDArray[np.float64], counts: NDArray[np.int64]) -> float:
    """The old path's float variance: running sums of the pairs' sums of squares (the mean
    as the release forms it)."""
    bounds = np.concatenate([[0], np.cumsum(counts)[:-1]])
    pair_sum = [
        float(np.cumsum(values[b : b + c])[-1]) for b, c in zip(bounds, counts, strict=True)
    ]
    pair_sq = [
        float(np.cumsum(values[b : b + c] ** 2)[-1]) for b, c in zip(bounds, counts, strict=True)
    ]
    kept = int(counts.sum())
    mean = np.cumsum(pair_sum)[-1] / kept  # the order does not matter here: tiny or equal
    return max(float(np.cumsum(pair_sq)[-1] / kept - mean * mean), 0.0)


#: (vehicles, cap): many vehicles (the variance's sensitivity small), few, and a large cap.
CASES = [(12_000, 4), (3_000, 1), (40, 3), (2_000, 10)]


@pytest.mark.parametrize(("n_vehicles", "cap"), CASES)
def test_the_float_variance_moves_by_at_most_the_sensitivity_the_sampler_is_given(
    n_vehicles: int, cap: int
) -> None:
    old_failures = 0
    for seed in range(12):
        rng = np.random.default_rng(seed)
        counts = counts_of(n_vehicles, cap, seed)
        near_end = rng.uniform(0.0, 1e-17 * U, size=int(counts.sum()))
        values = near_end if seed % 4 < 2 else U - near_end
        moved = int(rng.choice(np.flatnonzero(counts == cap)))
        first = int(counts[:moved].sum())
        mine = slice(first, first + int(counts[moved]))
        low, high = values.copy(), values.copy()
        low[mine], high[mine] = 0.0, U
        value_low, sensitivity = sampler_input(low, counts)
        value_high, sensitivity_high = sampler_input(high, counts)
        assert sensitivity == sensitivity_high  # public: the occupancy's
        assert abs(value_high - value_low) <= sensitivity
        exact_sensitivity = float(variance_sensitivity(U, cap, int(counts.sum())))
        old_moved = abs(old_variance(high, counts) - old_variance(low, counts))
        old_failures += int(old_moved > exact_sensitivity)
    assert old_failures > 0  # the cases are ones the old path fails
