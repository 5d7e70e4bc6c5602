"""One window's secret-routes release (docs/math.md §14): pure, no Kafka, no asyncio.

Bound each vehicle's contribution (L0 cells, one clipped mean per cell), add exact discrete
Laplace noise to every touched cell's vehicle count, keep the cells whose noisy count
reaches the threshold, add noise to their sums, and publish the noisy count, the mean and
its interval; with a ``coarse_resolution``, the same again for the kept pairs' parents
(§14.9), or the fine level only under the coarse cells whose noisy count asks for it
(``resolution_choice`` adaptive, §14.10). Nothing published is computed from the true
occupancy; the summary states the window's epsilon and the period's, the same for every
vehicle.
"""

from __future__ import annotations

from typing import Any

from stream_dp.dp.randomness import RandomSource
from stream_dp.release.records import WindowRelease, new_release_nonce
from stream_dp.secret_routes.adaptive import adaptive_levels
from stream_dp.secret_routes.levels import fixed_levels
from stream_dp.secret_routes.params import SecretRoutesParams
from stream_dp.secret_routes.records import cell_records, window_summary
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
    nonce = new_release_nonce()
    records: list[dict[str, Any]] = []
    levels = (adaptive_levels if params.adaptive else fixed_levels)(columns, params, source)
    for shown in levels:
        records += cell_records(window_start, params, shown, windows_in_period, nonce)
    summary = window_summary(window_start, params, len(records), windows_in_period, nonce)
    return WindowRelease(window_start, records, summary)
