"""Neighbours through the release's own path (docs/math.md §4.2, "Float inputs"): the float
clipped mean the sampler is given never moves by more than the sensitivity it is given.

One vehicle's readings go from 0 to U while everyone else's stay; the other vehicles' readings
are random, so the float sums round differently in the two neighbours. A plain running sum of
the pairs' sums and ``U top / S`` (the old path) fail this in most of these cases (checked
below, so the test cannot pass vacuously); the accurate sum and the sampler sensitivity never.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
from numpy.typing import ArrayLike, NDArray

from stream_dp.dp.clip_mean import ClipMeanCombiner, ClippedSums
from stream_dp.release.selection import occupancy_of
from stream_dp.release.statistics import CellStatistics, cell_statistics, start_entry_totals
from stream_dp.windows.columns import WindowColumns

U = 65.0


@dataclass
class Recorder:
    """Stands in for the sampler: keeps what it is given and adds no noise."""

    calls: list[tuple[NDArray[np.float64], NDArray[np.float64]]] = field(default_factory=list)

    def release_many(self, values: ArrayLike, sensitivities: ArrayLike, epsilon: float) -> NDArray:
        return self.release_each(values, sensitivities, epsilon)

    def release_each(
        self, values: ArrayLike, sensitivities: ArrayLike, epsilons: ArrayLike
    ) -> NDArray:
        given = np.asarray(values, dtype=np.float64)
        sens = np.broadcast_to(np.asarray(sensitivities, dtype=np.float64), given.shape)
        self.calls.append((given.copy(), sens.copy()))
        return given.copy()


def counts_of(n_vehicles: int, cap: int, seed: int) -> NDArray[np.int64]:
    """Each vehicle's readings in the cell: ``cap`` for all (``cap`` exact), or 1..cap."""
    rng = np.random.default_rng(seed)
    if seed % 2 == 0:
        return np.full(n_vehicles, cap)
    counts = rng.integers(1, cap + 1, size=n_vehicles)
    counts[0] = cap
    return counts


def one_cell_statistics(
    values: NDArray[np.float64], counts: NDArray[np.int64]
) -> tuple[CellStatistics, NDArray[np.int64]]:
    """The release's statistics of one cell of these readings (``counts[l]`` readings of
    vehicle ``l``, all kept) and the kept counts per vehicle."""
    vehicle = np.repeat(np.arange(len(counts)), counts)
    columns = WindowColumns.from_readings(
        ["c"] * len(values), [f"v{v:06d}" for v in vehicle.tolist()],
        np.arange(len(values), dtype=float).tolist(), values.tolist(), int(counts.max()),
    )  # fmt: skip
    occupancy, entry_of = occupancy_of(columns, np.arange(1), None)
    kept = occupancy.count.copy()
    stats = cell_statistics(
        columns, occupancy, entry_of, kept, None, start_entry_totals(columns, entry_of)
    )
    return stats, kept


def sampler_input(
    values: NDArray[np.float64], counts: NDArray[np.int64], epsilon: float
) -> tuple[float, float]:
    """The value and sensitivity the CLIP mean gives the sampler for one cell of these
    readings (``counts[l]`` readings of vehicle ``l``, all kept)."""
    stats, kept = one_cell_statistics(values, counts)
    sums = ClippedSums(
        stats.kept_sums, stats.kept_readings, np.array([kept.max()]), stats.n_readings
    )
    recorder = Recorder()
    ClipMeanCombiner(U, epsilon).noisy_means(sums, recorder)
    ((given, sensitivity),) = recorder.calls
    return float(given[0]), float(sensitivity[0])


#: (vehicles, cap, epsilon): the issue's case first, then others a search found failing.
CASES = [(12_000, 4, 1 / 128), (3_000, 1, 1.0), (2_000, 10, 0.25)]


@pytest.mark.parametrize(("n_vehicles", "cap", "epsilon"), CASES)
def test_the_float_mean_moves_by_at_most_the_sensitivity_the_sampler_is_given(
    n_vehicles: int, cap: int, epsilon: float
) -> None:
    old_failures = 0
    for seed in range(8):
        rng = np.random.default_rng(seed)
        counts = counts_of(n_vehicles, cap, seed)
        values = rng.uniform(0.0, U, size=int(counts.sum()))
        moved = int(rng.choice(np.flatnonzero(counts == cap)))  # a vehicle at the cap changes
        first = int(counts[:moved].sum())
        mine = slice(first, first + int(counts[moved]))
        low, high = values.copy(), values.copy()
        low[mine], high[mine] = 0.0, U
        value_low, sensitivity = sampler_input(low, counts, epsilon)
        value_high, sensitivity_high = sampler_input(high, counts, epsilon)
        assert sensitivity == sensitivity_high  # public: the occupancy's
        assert abs(value_high - value_low) <= sensitivity
        # The old path on the same pairs' sums: a running sum and U top / S.
        pair_low = np.add.reduceat(low, np.concatenate([[0], np.cumsum(counts)[:-1]]))
        pair_high = pair_low.copy()
        pair_high[moved] = U * counts[moved]
        kept = int(counts.sum())
        old_moved = abs(np.cumsum(pair_high)[-1] / kept - np.cumsum(pair_low)[-1] / kept)
        old_failures += int(old_moved > U * int(counts.max()) / kept)
    assert old_failures > 0  # the cases are ones the old path fails
