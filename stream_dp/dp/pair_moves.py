"""The numpy forms of the regrouping's pair moves (:data:`stream_dp.dp.kernels.SPLIT_MOVES`,
:data:`~stream_dp.dp.kernels.MERGED_GROUPS`, :data:`~stream_dp.dp.kernels.TAKE_READINGS`):
a window's pairs renumbered to the adaptive cells they move to
(:class:`stream_dp.release.adaptive.PairMoves`). Each gives what its compiled form in
:mod:`stream_dp.dp.adaptive_kernel` or :mod:`stream_dp.dp.span_kernels` gives."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp.adaptive_cells import pair_groups

IntArray = NDArray[np.int64]


def split_moves_by_masks(
    unit: IntArray, merged_unit: NDArray[np.bool_], vehicle: IntArray, count: IntArray
) -> tuple[IntArray, IntArray, IntArray, IntArray, IntArray]:
    """The indices of the pairs that stay alone (``unit >= 0`` not a ``merged_unit``) and of
    those merged, each in order, and int64 buffers of new cells, vehicles and counts whose
    first entries are the lone pairs' (one more entry per merged pair)."""
    keep = unit >= 0
    is_merged = keep & np.append(merged_unit, False)[unit]  # unit -1 reads the padding
    single, merged = np.flatnonzero(keep & ~is_merged), np.flatnonzero(is_merged)
    cell_code = np.concatenate((unit[single], unit[merged])).astype(np.int64)
    vehicle_code = np.concatenate((vehicle[single], vehicle[merged])).astype(np.int64)
    counts = np.concatenate((count[single], count[merged])).astype(np.int64)
    return single, merged, cell_code, vehicle_code, counts


def merged_groups_by_sort(
    unit: IntArray,
    vehicle: IntArray,
    count: IntArray,
    merged: IntArray,
    n_units: int,
    n_vehicles: int,
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """The distinct (unit, vehicle) of the ``merged`` pairs in ascending order, each merged
    pair's index among them, and their counts added (``pair_groups`` and a ``bincount``)."""
    group_unit, group_vehicle, group = pair_groups(
        unit[merged], vehicle[merged], n_units, n_vehicles
    )
    summed = np.bincount(group, weights=count[merged], minlength=len(group_unit))
    return group_unit, group_vehicle, group, summed.astype(np.int64)


def take_readings_by_mask(
    reading_pair: IntArray, pair_map: IntArray, ts: np.ndarray, value: np.ndarray
) -> tuple[IntArray, np.ndarray, np.ndarray]:
    """The readings whose pair maps to ``pair_map[pair] >= 0``, in log order: their new pair
    numbers, times and values."""
    new_pair = pair_map[reading_pair]
    live = new_pair >= 0
    return new_pair[live], ts[live], value[live]
