"""Compiled (numba) sequential CLIP-USER over the arrays of ``clip_user.ClipUserRun``.

The exact sequential algorithm of docs/math.md §5.1: stages of the
vehicles with ``G_l == max G`` in ascending id, each picking the cell of least ``E_g(l)`` (ties
to the smallest cell id: a vehicle's entries are visited in ascending cell order and only a
strictly smaller value replaces the best), halting when that exceeds ``limit`` (``E`` with the
relative tolerance already applied) or is +inf (the cell's last kept vehicle).

A candidate's error is eq. (13) as written once in :func:`stream_dp.dp.cell_error.cell_error`,
compiled (:mod:`stream_dp.dp.grid_error_kernel`; numba caches this file's kernels keyed on this
file alone, see there), so ties break exactly as in the numpy paths and the test references.

State layout (as built by ``ClipUserRun``; entry ``n`` is a never-kept sentinel of count 0):
``by_vehicle[vehicle_start[v]:vehicle_start[v + 1]]`` are vehicle ``v``'s entries in ascending
cell order; each cell's entries sit at positions ``position[e]`` of ``by_cell`` order, sorted
by count descending, and ``top3[g]`` holds the positions of the cell's first three kept entries
(padded with ``n``), so "largest kept count without vehicle ``l``" is O(1).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from stream_dp.dp.clip_user_run import (
    ClipUserResult,
    ClipUserRun,
    by_grids_descending,
    layout_by_sorts,
)
from stream_dp.dp.grid_error import ErrorModel
from stream_dp.dp.grid_error_kernel import compiled_cell_error as candidate_error
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.ordering import counting_sort_fits


@njit(cache=True, nogil=True)
def _refill(
    cell: int,
    top3: np.ndarray,
    top3_count: np.ndarray,
    kept_sorted: np.ndarray,
    sorted_count: np.ndarray,
    cell_end: np.ndarray,
    n: int,
) -> None:  # pragma: no cover - compiled
    """Restore ``top3[cell]`` (and its counts) after a removal. Kept positions only move
    forward, so the scans past the old third one add up to O(cell size) over the run."""
    found = 0
    third = top3[cell, 2]
    for k in range(3):
        p = top3[cell, k]
        if p != n and kept_sorted[p]:
            top3[cell, found] = p  # found <= k: never overwrites an unread slot
            found += 1
    if third != n:
        p = third + 1
        end = cell_end[cell]
        while found < 3 and p < end:
            if kept_sorted[p]:
                top3[cell, found] = p
                found += 1
            p += 1
    for k in range(found, 3):
        top3[cell, k] = n
    for k in range(3):
        top3_count[cell, k] = sorted_count[top3[cell, k]]


# Performance (benchmarks/clip_user.py): the sequential rounds compiled, 436-2,172x the plain
# transcription; the uncompiled strategies of tests.support are far slower on large windows.
@njit(cache=True, nogil=True)
def run_sequential(
    slot_cell: np.ndarray,
    slot_count: np.ndarray,
    slot_position: np.ndarray,
    slot_entry: np.ndarray,
    vehicle_start: np.ndarray,
    queue: np.ndarray,
    sorted_count: np.ndarray,
    cell_end: np.ndarray,
    total: np.ndarray,
    top3: np.ndarray,
    kept_sum: np.ndarray,
    kept: np.ndarray,
    kept_sorted: np.ndarray,
    grids: np.ndarray,
    upper: float,
    u2: float,
    eps_m: float,
    eps_v: float,
    weight: float,
    q: float,
    limit: float,
) -> np.ndarray:  # pragma: no cover - compiled
    """Run every stage until ``max G <= 1`` or a halt; return the suppressed entries in order.

    Slot ``i`` is the ``i``-th entry in vehicle order (``slot_entry = by_vehicle``), with its
    cell, count and ``by_cell`` position copied alongside so a candidate reads contiguous
    memory plus per-cell state. ``queue`` lists the vehicles by ``grids`` descending, ties by
    ascending id. Mutates ``top3``, ``kept_sum``, ``kept``, ``kept_sorted`` and ``grids`` as
    the sequential algorithm does (docs/math.md §5.1).
    """
    n = len(slot_cell)
    n_vehicles = len(grids)
    order = np.empty(n, dtype=np.int64)
    n_order = 0
    if n_vehicles == 0:
        return order[:0]
    slot_kept = np.ones(n, dtype=np.bool_)
    top3_count = np.empty_like(top3)
    for cell in range(top3.shape[0]):
        for k in range(3):
            top3_count[cell, k] = sorted_count[top3[cell, k]]
    # A stage is the previous stage (all one lower now) merged, by id, with the vehicles whose
    # untouched G equals the new level.
    next_q = 0
    stage = np.empty(n_vehicles, dtype=np.int64)
    merged = np.empty(n_vehicles, dtype=np.int64)
    n_stage = 0
    gmax = grids[queue[0]]
    while gmax > 1:
        a, m = 0, 0
        while next_q < n_vehicles and grids[queue[next_q]] == gmax:
            v = queue[next_q]
            while a < n_stage and stage[a] < v:
                merged[m] = stage[a]
                m += 1
                a += 1
            merged[m] = v
            m += 1
            next_q += 1
        while a < n_stage:
            merged[m] = stage[a]
            m += 1
            a += 1
        stage, merged = merged, stage
        n_stage = m
        for s in range(n_stage):
            vehicle = stage[s]
            best = np.inf
            best_slot = -1
            for i in range(vehicle_start[vehicle], vehicle_start[vehicle + 1]):
                if not slot_kept[i]:
                    continue
                cell = slot_cell[i]
                top = (
                    top3_count[cell, 1]
                    if top3[cell, 0] == slot_position[i]
                    else top3_count[cell, 0]
                )
                value = candidate_error(
                    upper, u2, eps_m, eps_v, weight, q, top, kept_sum[cell] - slot_count[i],
                    total[cell],
                )  # fmt: skip
                if value < best:  # slots ascend by cell: ties keep the smallest cell
                    best = value
                    best_slot = i
            if best_slot < 0 or best == np.inf or best > limit:
                return order[:n_order]
            cell = slot_cell[best_slot]
            pos = slot_position[best_slot]
            entry = slot_entry[best_slot]
            slot_kept[best_slot] = False
            kept[entry] = False
            kept_sorted[pos] = False
            kept_sum[cell] -= slot_count[best_slot]
            grids[vehicle] -= 1
            order[n_order] = entry
            n_order += 1
            if top3[cell, 0] == pos or top3[cell, 1] == pos or top3[cell, 2] == pos:
                _refill(cell, top3, top3_count, kept_sorted, sorted_count, cell_end, n)
        gmax -= 1
    return order[:n_order]


@njit(cache=True, nogil=True)
def suppressor_layout(
    cell_of: np.ndarray,
    vehicle_of: np.ndarray,
    count: np.ndarray,
    n_cells: int,
    n_vehicles: int,
    top: int,
) -> tuple[np.ndarray, ...]:  # pragma: no cover - compiled
    """The static arrays of ``ClipUserRun`` in a few passes (entries grouped by cell;
    ``n_cells * (top + 1)`` small enough for a counting sort).

    Returns ``grids``, ``vehicle_start``, ``by_vehicle`` (stable by vehicle), ``by_cell``
    (stable by (cell, count descending), with the sentinel ``n`` appended), ``position``,
    ``sorted_count`` (sentinel count 0 appended), ``cell_start`` and the per-slot copies in
    ``by_vehicle`` order that :func:`run_sequential` reads (cell, count, position).
    """
    n = len(cell_of)
    grids = np.zeros(n_vehicles, dtype=np.int64)
    for v in vehicle_of:
        grids[v] += 1
    vehicle_start = np.zeros(n_vehicles + 1, dtype=np.int64)
    for v in range(n_vehicles):
        vehicle_start[v + 1] = vehicle_start[v] + grids[v]
    fill = vehicle_start[:-1].copy()
    by_vehicle = np.empty(n, dtype=np.int64)
    for i in range(n):
        v = vehicle_of[i]
        by_vehicle[fill[v]] = i
        fill[v] += 1
    n_keys = n_cells * (top + 1)
    key_start = np.zeros(n_keys + 1, dtype=np.int64)
    cell_start = np.zeros(n_cells + 1, dtype=np.int64)
    for i in range(n):
        key_start[cell_of[i] * (top + 1) + (top - count[i]) + 1] += 1
        cell_start[cell_of[i] + 1] += 1
    for k in range(n_keys):
        key_start[k + 1] += key_start[k]
    for g in range(n_cells):
        cell_start[g + 1] += cell_start[g]
    by_cell = np.empty(n + 1, dtype=np.int64)
    position = np.empty(n + 1, dtype=np.int64)
    sorted_count = np.empty(n + 1, dtype=np.int64)
    for i in range(n):
        k = cell_of[i] * (top + 1) + (top - count[i])
        j = key_start[k]
        key_start[k] = j + 1
        by_cell[j] = i
        position[i] = j
        sorted_count[j] = count[i]
    by_cell[n] = n
    position[n] = n
    sorted_count[n] = 0
    slot_cell = np.empty(n, dtype=np.int64)
    slot_count = np.empty(n, dtype=np.int64)
    slot_position = np.empty(n, dtype=np.int64)
    for j in range(n):
        i = by_vehicle[j]
        slot_cell[j] = cell_of[i]
        slot_count[j] = count[i]
        slot_position[j] = position[i]
    return (
        grids, vehicle_start, by_vehicle, by_cell, position, sorted_count, cell_start,
        slot_cell, slot_count, slot_position,
    )  # fmt: skip


def compiled_layout(
    cell_of: np.ndarray,
    vehicle_of: np.ndarray,
    count: np.ndarray,
    n_cells: int,
    n_vehicles: int,
    top: int,
) -> tuple[np.ndarray, ...]:
    """:data:`~stream_dp.dp.kernels.SUPPRESSOR_LAYOUT` compiled: :func:`suppressor_layout`
    where its counting sort is linear in the entries, else
    :func:`~stream_dp.dp.clip_user_run.layout_by_sorts`."""
    n = len(cell_of)
    if not (n and counting_sort_fits(n, n_cells * (top + 1))):
        return layout_by_sorts(cell_of, vehicle_of, count, n_cells, n_vehicles, top)
    return suppressor_layout(cell_of, vehicle_of, count, n_cells, n_vehicles, top)  # type: ignore[no-any-return]


def run_stages(run: ClipUserRun) -> None:
    """Stages until ``max G <= 1`` or a halt (docs/math.md §5.1 steps 2-5), as one numba
    kernel over ``run``'s arrays. The kernel reads each vehicle's entries from contiguous
    copies in ``by_vehicle`` order (``run.slots``)."""
    run.order = run_sequential(
        *run.slots,
        run.by_vehicle.astype(np.int64, copy=False),
        run.vehicle_start.astype(np.int64, copy=False),
        by_grids_descending(run.grids),
        run.sorted_count.astype(np.int64, copy=False),
        run.cell_end.astype(np.int64, copy=False),
        run.total.astype(np.int64, copy=False),
        run.top3,
        run.kept_sum,
        run.kept,
        run.kept_sorted,
        run.grids,
        run.upper,
        run.u2,
        *run.model.kernel_args(),
        float(run.limit),
    )


def run_clip_user(
    occupancy: Occupancy,
    upper: float,
    epsilon: float,
    error_bound: float | None,
    model: ErrorModel | None,
) -> ClipUserResult:
    """:data:`~stream_dp.dp.kernels.CLIP_USER` compiled: :func:`run_stages` over a new
    :class:`~stream_dp.dp.clip_user_run.ClipUserRun`."""
    run = ClipUserRun(occupancy, upper, epsilon, error_bound, model)
    run_stages(run)
    return run.result()
