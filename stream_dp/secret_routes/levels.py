"""One level of cells of a secret-routes window (docs/math.md §14.2-§14.6, §14.9): pure.

A level's cells get noisy vehicle counts; those reaching a cut (the partition selection's
threshold, or the adaptive fine level's cut on public candidates) get noisy sums, a mean and
its interval. ``by_parent`` lifts each vehicle's pairs to a coarser resolution.
"""

from __future__ import annotations

import h3
import numpy as np
from numpy.typing import NDArray

from stream_dp.dp.contribution_bound import bounded_cells, kept_pairs
from stream_dp.dp.grid_laplace import draw_many
from stream_dp.dp.noisy_mean import noisy_means
from stream_dp.dp.randomness import RandomSource
from stream_dp.dp.secret_accounting import COUNT_STEPS, SUM_STEPS
from stream_dp.secret_routes.params import SecretRoutesParams
from stream_dp.secret_routes.records import ReleasedCells
from stream_dp.windows.columns import WindowColumns


def fixed_levels(columns: WindowColumns, params: SecretRoutesParams,
                 source: RandomSource) -> list[ReleasedCells]:  # fmt: skip
    """Every level, each by its own partition selection (§14.4, §14.9): the fine cells, then
    the parents of each vehicle's kept pairs."""
    kept = kept_pairs(columns.vehicle_code, columns.cell_code, columns.count,
                      params.contribution_cells)  # fmt: skip
    vehicle, cell = columns.vehicle_code[kept], columns.cell_code[kept]
    count, total = columns.count[kept], columns.total[kept]
    levels = []
    for resolution in params.resolutions:
        names = columns.cell_names
        if resolution != params.resolution:  # §14.9: the vehicle's kept pairs, by parent
            names, vehicle, cell, count, total = by_parent(
                names, vehicle, cell, count, total, resolution
            )
        levels.append(thresholded_level(names, vehicle, cell, count, total, params, source,
                                        resolution))  # fmt: skip
    return levels


def thresholded_level(names: tuple[str, ...], vehicle: NDArray[np.int64],
                      cell: NDArray[np.int64], count: NDArray[np.int64],
                      total: NDArray[np.float64], params: SecretRoutesParams,
                      source: RandomSource, resolution: int) -> ReleasedCells:  # fmt: skip
    """One level: noisy counts of every touched cell, the threshold, noisy sums of the shown
    cells, their means and intervals (§14.3, §14.4, §14.6)."""
    bounded = bounded_cells(vehicle, cell, count, total, params.upper,
                            params.contribution_cells, SUM_STEPS)  # fmt: skip
    noisy_steps = noisy_counts(bounded.vehicles, params, source)
    cells = [names[i] for i in bounded.cell.tolist()]
    return shown_cells(cells, noisy_steps, bounded.sum_steps, params.threshold, params, source,
                       resolution)  # fmt: skip


def noisy_counts(vehicles: NDArray[np.int64], params: SecretRoutesParams,
                 source: RandomSource) -> NDArray[np.int64]:  # fmt: skip
    """Each cell's vehicle count plus its noise, in count steps (§14.3)."""
    return vehicles * COUNT_STEPS + draw_many(source, len(vehicles), params.count_scale)


def shown_cells(cells: list[str], noisy_steps: NDArray[np.int64],
                sum_steps: NDArray[np.int64], cut: int, params: SecretRoutesParams,
                source: RandomSource, resolution: int) -> ReleasedCells:  # fmt: skip
    """The cells whose noisy count reaches ``cut`` (count steps), with their noisy sums, means
    and intervals (§14.4, §14.6)."""
    shown = np.flatnonzero(noisy_steps >= cut)
    noisy_sum = sum_steps[shown] + draw_many(source, len(shown), params.sum_scale)
    noisy_count = noisy_steps[shown] / COUNT_STEPS
    noisy_total = noisy_sum * (params.upper / SUM_STEPS)
    count_width, sum_width = params.widths()
    means = noisy_means(noisy_count, noisy_total, count_width, sum_width, params.upper,
                        params.upper / (2 * SUM_STEPS))  # fmt: skip
    return ReleasedCells([cells[i] for i in shown.tolist()], noisy_count, means, resolution)


def by_parent(names: tuple[str, ...], vehicle: NDArray[np.int64], cell: NDArray[np.int64],
               count: NDArray[np.int64], total: NDArray[np.float64], resolution: int,
               ) -> tuple[tuple[str, ...], NDArray[np.int64], NDArray[np.int64],
                          NDArray[np.int64], NDArray[np.float64]]:  # fmt: skip
    """Each vehicle's pairs merged by their cell's parent at ``resolution``: one pair per
    (vehicle, parent), its counts and sums added (of kept pairs: at most L0 parents a
    vehicle, §14.9; of all its pairs: the adaptive coarse level keeps L0 after, §14.10)."""
    parents = [h3.cell_to_parent(name, resolution) for name in names]
    parent_names, parent_of = np.unique(np.array(parents, dtype=object), return_inverse=True)
    width = max(len(parent_names), 1)
    keys, pair = np.unique(vehicle * width + parent_of[cell], return_inverse=True)
    return (
        tuple(str(p) for p in parent_names), keys // width, keys % width,
        np.bincount(pair, weights=count, minlength=len(keys)).astype(np.int64),
        np.bincount(pair, weights=total, minlength=len(keys)),
    )  # fmt: skip
