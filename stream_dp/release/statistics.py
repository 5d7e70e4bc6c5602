"""Stage 3 of the release, statistics (docs/math.md §3.1, §9.3): per released cell the count,
sum and sum of squares of the kept readings, hence the clipped mean (:mod:`stream_dp.dp.clip_mean`)
and variance."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from stream_dp.dp.clip_mean import clipped_means
from stream_dp.dp.float_variance import clipped_variances
from stream_dp.dp.kernels import compiled_step
from stream_dp.dp.occupancy import Occupancy
from stream_dp.windows import background
from stream_dp.windows.columns import WindowColumns

# Compiled steps, imported at their first call (a plan of counts alone loads no numba).
_gather_pair_totals = compiled_step("stream_dp.dp.array_kernels:gather_pair_totals")
_grouped_sums = compiled_step("stream_dp.dp.accurate_sum:grouped_sums")
_kept_cell_totals = compiled_step("stream_dp.dp.array_kernels:kept_cell_totals")
_kept_entry_sums = compiled_step("stream_dp.dp.array_kernels:kept_entry_sums")
_kept_entry_sums_of_log = compiled_step("stream_dp.dp.array_kernels:kept_entry_sums_of_log")
_pair_prefix_sums = compiled_step("stream_dp.dp.array_kernels:pair_prefix_sums")
_wanted_prefix_sums = compiled_step("stream_dp.dp.array_kernels:wanted_prefix_sums")


def kept_sums(
    columns: WindowColumns,
    entries: np.ndarray,
    kept_count: np.ndarray,
    prefix_sums: Future[tuple[np.ndarray, ...]] | None = None,
    count: np.ndarray | None = None,
    entry_totals: Future[tuple[np.ndarray, np.ndarray]] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Sum and sum of squares of the first ``kept_count`` readings of each chosen entry.

    ``prefix_sums`` and ``entry_totals``: :func:`start_prefix_sums` and
    :func:`start_entry_totals` of these columns and entries, if started earlier (without
    ``prefix_sums``, the running sums of the partly kept entries' pairs alone are computed
    here, :func:`cut_prefix_sums`); ``count``: ``columns.count[entries]``, if at hand (the
    occupancy's counts)."""

    entries = entries.astype(np.int64, copy=False)
    kept_count = kept_count.astype(np.int64, copy=False)
    count = np.take(columns.count, entries) if count is None else count
    count = count.astype(np.int64, copy=False)
    cut = (kept_count != count) & (kept_count > 0)
    if prefix_sums is None and CUTS_FROM_LOG and cut.any():
        # Performance (issue 25): the few cut entries' sums straight from the log, without
        # the running sums laid out per pair of the window (:func:`cut_prefix_sums`).

        entry_total, entry_total_sq = (
            entry_totals or start_entry_totals(columns, entries)
        ).result()
        total, total_sq, beyond = _kept_entry_sums_of_log(
            entries, kept_count, count, entry_total, entry_total_sq,
            columns.reading_pair.astype(np.int64, copy=False),
            columns.reading_ts.astype(np.float64, copy=False),
            columns.reading_value.astype(np.float64, copy=False), len(columns),
        )  # fmt: skip
        if beyond >= 0:
            raise ValueError("a cap needs readings beyond the stored prefix")
        return total, total_sq
    if prefix_sums is not None and cut.any():
        start, sums, sums_sq = prefix_sums.result()
    elif cut.any():
        start, sums, sums_sq = cut_prefix_sums(columns, entries[cut])
    else:
        start = np.zeros(1, dtype=np.int64)
        sums = sums_sq = np.zeros(0, dtype=np.float64)
    entry_total, entry_total_sq = (entry_totals or start_entry_totals(columns, entries)).result()
    total, total_sq, beyond = _kept_entry_sums(
        entries, kept_count, count, entry_total, entry_total_sq, start, sums, sums_sq
    )
    if beyond >= 0:
        raise ValueError("a cap needs readings beyond the stored prefix")
    return total, total_sq


#: Whether :func:`kept_sums` without the running sums reads the cut entries' sums off the
#: log in one compiled call (:func:`~stream_dp.dp.array_kernels.kept_entry_sums_of_log`)
#: instead of :func:`cut_prefix_sums`; the tests switch it off to compare.
CUTS_FROM_LOG = True


def start_entry_totals(
    columns: WindowColumns, entries: np.ndarray
) -> Future[tuple[np.ndarray, np.ndarray]]:
    """Start gathering the chosen entries' totals and totals of squares (in entry order) on the
    background thread: random reads over the window's pairs, done while CLIP-USER runs."""

    return background.submit(
        _gather_pair_totals,
        entries.astype(np.int64, copy=False),
        columns.total.astype(np.float64, copy=False),
        columns.total_sq.astype(np.float64, copy=False),
    )


def cut_prefix_sums(
    columns: WindowColumns, pairs: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`~stream_dp.dp.array_kernels.pair_prefix_sums` of ``pairs`` (the pairs a cap
    cuts) alone, in its layout and with its floats: under a vehicle budget they are a few
    percent of the window's pairs, and a pass over the reading log that sorts only theirs
    costs a fraction of the whole log's (benchmarks/release.py)."""

    wanted = np.zeros(len(columns), dtype=bool)
    wanted[pairs[pairs < len(wanted)]] = True  # a pair past the columns: kept_sums refuses it
    return _wanted_prefix_sums(
        columns.reading_pair.astype(np.int64, copy=False),
        columns.reading_ts.astype(np.float64, copy=False),
        columns.reading_value.astype(np.float64, copy=False),
        wanted,
    )


def start_prefix_sums(columns: WindowColumns) -> Future[tuple[np.ndarray, ...]]:
    """Start :func:`~stream_dp.dp.array_kernels.pair_prefix_sums` of the window's reading log
    on the background thread (the compiled kernel releases the GIL, so it runs beside CLIP-USER)."""

    return background.submit(
        _pair_prefix_sums,
        columns.reading_pair.astype(np.int64, copy=False),
        columns.reading_ts.astype(np.float64, copy=False),
        columns.reading_value.astype(np.float64, copy=False),
        len(columns),
    )


@dataclass(frozen=True)
class CellStatistics:
    """Per released cell (occupancy order): the kept readings' count and sum, the clipped
    mean and population variance (eq. (6), (7)), and the occupancy's counts."""

    kept_readings: np.ndarray
    kept_sums: np.ndarray
    n_kept_vehicles: np.ndarray
    n_vehicles: np.ndarray
    n_readings: np.ndarray
    means: np.ndarray
    variances: np.ndarray


def cell_statistics(
    columns: WindowColumns,
    occupancy: Occupancy,
    entry_of: np.ndarray,
    kept_count: np.ndarray,
    prefix_sums: Future[tuple[np.ndarray, ...]] | None,
    entry_totals: Future[tuple[np.ndarray, np.ndarray]],
) -> CellStatistics:
    """:class:`CellStatistics` of the kept readings (``kept_count`` per occupancy entry); each
    cell's kept sum and sum of squares are the accurate sums (:mod:`stream_dp.dp.accurate_sum`)
    of its entries' float sums, which the CLIP mean's and the variance's sampler sensitivities
    assume (docs/math.md §4.2, "Float inputs")."""

    total, total_sq = kept_sums(
        columns, entry_of, kept_count, prefix_sums, occupancy.count, entry_totals
    )
    kept_readings, n_kept_vehicles = _kept_cell_totals(
        occupancy.cell_index, len(occupancy.cells), kept_count
    )
    cell_sum = _grouped_sums(occupancy.cell_start, total)
    means = clipped_means(cell_sum, kept_readings)
    variances = clipped_variances(
        _grouped_sums(occupancy.cell_start, total_sq), means, kept_readings
    )
    return CellStatistics(
        kept_readings,
        cell_sum,
        n_kept_vehicles,
        np.diff(occupancy.cell_start),
        occupancy.total_per_cell(),
        means,
        variances,
    )


def cell_counts(occupancy: Occupancy, kept_count: np.ndarray) -> CellStatistics:
    """:class:`CellStatistics` of the counts alone (an occupancy without readings, as ``plan``
    reads): the kept readings per cell and the vehicles with a kept reading, the counts
    :func:`cell_statistics` takes (in numpy: the plan loads no compiled kernel for them); no
    sums, means or variances (NaN)."""
    cell, n_cells = occupancy.cell_index, len(occupancy.cells)
    kept_readings = np.bincount(cell, weights=kept_count, minlength=n_cells).astype(np.int64)
    n_kept_vehicles = np.bincount(cell[kept_count > 0], minlength=n_cells).astype(np.int64)
    unknown = np.full(len(occupancy.cells), np.nan)
    return CellStatistics(
        kept_readings,
        unknown,
        n_kept_vehicles,
        np.diff(occupancy.cell_start),
        occupancy.total_per_cell(),
        unknown,
        unknown,
    )
