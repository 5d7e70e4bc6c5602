"""One window's secret-routes release (docs/math.md §14): pure, no Kafka, no asyncio.

Bound each vehicle's contribution (L0 cells, one clipped mean per cell), add exact discrete
Laplace noise to every touched cell's vehicle count, keep the cells whose noisy count
reaches the threshold, add noise to their sums, and publish the noisy count, the mean and
its interval; with a ``coarse_resolution``, the same again for the kept pairs' parents
(§14.9). Nothing published is computed from the true occupancy; the summary states the
window's epsilon and the period's, the same for every vehicle.
"""

from __future__ import annotations

from typing import Any

import h3
import numpy as np
from numpy.typing import NDArray

from stream_dp.dp.contribution_bound import bounded_cells, kept_pairs
from stream_dp.dp.grid_laplace import draw_many
from stream_dp.dp.noisy_mean import noisy_means
from stream_dp.dp.randomness import RandomSource
from stream_dp.dp.secret_accounting import COUNT_STEPS, SUM_STEPS
from stream_dp.release.records import WindowRelease, new_release_nonce
from stream_dp.secret_routes.params import SecretRoutesParams
from stream_dp.secret_routes.records import ReleasedCells, cell_records, window_summary
from stream_dp.windows.columns import WindowColumns


def release_secret_window(
    window_start: int,
    columns: WindowColumns,
    params: SecretRoutesParams,
    source: RandomSource,
    windows_in_period: int,
) -> WindowRelease:
    """The records of one window; ``windows_in_period``: the windows released in the period
    ending with this one, this one included (the summary's cumulative epsilon)."""
    kept = kept_pairs(columns.vehicle_code, columns.cell_code, columns.count,
                      params.contribution_cells)  # fmt: skip
    vehicle, cell = columns.vehicle_code[kept], columns.cell_code[kept]
    count, total = columns.count[kept], columns.total[kept]
    nonce = new_release_nonce()
    records: list[dict[str, Any]] = []
    for resolution in params.resolutions:
        names = columns.cell_names
        if resolution != params.resolution:  # §14.9: the vehicle's kept pairs, by parent
            names, vehicle, cell, count, total = _by_parent(
                names, vehicle, cell, count, total, resolution
            )
        shown = _shown_cells(names, vehicle, cell, count, total, params, source, resolution)
        records += cell_records(window_start, params, shown, windows_in_period, nonce)
    summary = window_summary(window_start, params, len(records), windows_in_period, nonce)
    return WindowRelease(window_start, records, summary)


def _shown_cells(names: tuple[str, ...], vehicle: NDArray[np.int64], cell: NDArray[np.int64],
                 count: NDArray[np.int64], total: NDArray[np.float64],
                 params: SecretRoutesParams, source: RandomSource,
                 resolution: int) -> ReleasedCells:  # fmt: skip
    """One level: noisy counts of every touched cell, the threshold, noisy sums of the shown
    cells, their means and intervals (§14.3, §14.4, §14.6)."""
    bounded = bounded_cells(vehicle, cell, count, total, params.upper,
                            params.contribution_cells, SUM_STEPS)  # fmt: skip
    noisy_steps = bounded.vehicles * COUNT_STEPS + draw_many(
        source, len(bounded.cell), params.count_scale
    )
    shown = np.flatnonzero(noisy_steps >= params.threshold)
    sum_steps = bounded.sum_steps[shown] + draw_many(source, len(shown), params.sum_scale)
    noisy_count = noisy_steps[shown] / COUNT_STEPS
    noisy_total = sum_steps * (params.upper / SUM_STEPS)
    count_width, sum_width = params.widths()
    means = noisy_means(noisy_count, noisy_total, count_width, sum_width, params.upper,
                        params.upper / (2 * SUM_STEPS))  # fmt: skip
    shown_names = [names[i] for i in bounded.cell[shown].tolist()]
    return ReleasedCells(shown_names, noisy_count, means, resolution)


def _by_parent(names: tuple[str, ...], vehicle: NDArray[np.int64], cell: NDArray[np.int64],
               count: NDArray[np.int64], total: NDArray[np.float64], resolution: int,
               ) -> tuple[tuple[str, ...], NDArray[np.int64], NDArray[np.int64],
                          NDArray[np.int64], NDArray[np.float64]]:  # fmt: skip
    """Each vehicle's kept pairs merged by their cell's parent at ``resolution``: one pair per
    (vehicle, parent), its counts and sums added (at most L0 parents a vehicle)."""
    parents = [h3.cell_to_parent(name, resolution) for name in names]
    parent_names, parent_of = np.unique(np.array(parents, dtype=object), return_inverse=True)
    width = max(len(parent_names), 1)
    keys, pair = np.unique(vehicle * width + parent_of[cell], return_inverse=True)
    return (
        tuple(str(p) for p in parent_names), keys // width, keys % width,
        np.bincount(pair, weights=count, minlength=len(keys)).astype(np.int64),
        np.bincount(pair, weights=total, minlength=len(keys)),
    )  # fmt: skip
