"""One window's secret-routes release (docs/math.md §14): pure, no Kafka, no asyncio.

Bound each vehicle's contribution (L0 cells, one clipped mean per cell), add exact discrete
Laplace noise to every touched cell's vehicle count, keep the cells whose noisy count
reaches the threshold, add noise to their sums, and publish the noisy count, the mean and
its interval. Nothing published is computed from the true occupancy; the summary states the
window's epsilon and the period's, the same for every vehicle.
"""

from __future__ import annotations

import numpy as np

from stream_dp.dp.contribution_bound import bounded_cells
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
    budget = params.budget
    bounded = bounded_cells(
        columns.vehicle_code, columns.cell_code, columns.count, columns.total, params.upper,
        budget.cells, SUM_STEPS,
    )  # fmt: skip
    noisy_steps = bounded.vehicles * COUNT_STEPS + draw_many(
        source, len(bounded.cell), params.count_scale
    )
    shown = np.flatnonzero(noisy_steps >= params.threshold)
    sum_steps = bounded.sum_steps[shown] + draw_many(source, len(shown), params.sum_scale)
    count = noisy_steps[shown] / COUNT_STEPS
    total = sum_steps * (params.upper / SUM_STEPS)
    count_width, sum_width = params.widths()
    means = noisy_means(count, total, count_width, sum_width, params.upper,
                        params.upper / (2 * SUM_STEPS))  # fmt: skip
    names = [columns.cell_names[i] for i in bounded.cell[shown].tolist()]
    nonce = new_release_nonce()
    released = ReleasedCells(names, count, means)
    cells = cell_records(window_start, params, released, windows_in_period, nonce)
    summary = window_summary(window_start, params, len(names), windows_in_period, nonce)
    return WindowRelease(window_start, cells, summary)
