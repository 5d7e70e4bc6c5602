"""The candidate build of :mod:`stream_dp.dp.release_candidates` as compiled passes
(:mod:`stream_dp.dp.release_candidates_kernel`): the same signatures and results, equal to
the numpy form (tested); the numpy form stays the readable reference."""

from __future__ import annotations

import numpy as np

from stream_dp.dp.release_candidates import (
    BoolArray,
    CellOptions,
    FloatArray,
    IntArray,
    expected_useful,
)
from stream_dp.dp.release_candidates_kernel import (
    cell_options_kernel,
    entry_payments_kernel,
    grouped_candidates_kernel,
    with_exclusions_kernel,
)
from stream_dp.dp.release_choice import Candidates


def cell_options(
    cell_start: IntArray,
    count: IntArray,
    *,
    upper: float,
    target: float,
    tau: float,
    factors: FloatArray,
    max_epsilon: float,
    mean_share: float = 1.0,
    prefix_limit: int | None = None,
    min_vehicles: int = 1,
    sits_out: BoolArray | None = None,
) -> CellOptions:
    """:func:`stream_dp.dp.release_candidates.cell_options`, compiled."""
    count = np.asarray(count, dtype=np.int64)
    out = np.zeros(len(count), dtype=bool) if sits_out is None else np.asarray(sits_out, bool)
    settings = np.array([upper, target, max_epsilon, mean_share], dtype=np.float64)
    eps, cap, kept, error, meets, total = cell_options_kernel(
        np.asarray(cell_start, dtype=np.int64), count, out, settings,
        np.asarray(factors, dtype=np.float64), -1 if prefix_limit is None else int(prefix_limit),
        int(min_vehicles),
    )  # fmt: skip
    return CellOptions(
        eps,
        cap,
        kept,
        error,
        meets,
        expected_useful(eps, cap, kept, total, upper, tau, mean_share),
        total,
        count,
        out,
    )


def entry_payments(
    cell_start: IntArray, options: CellOptions, mean_share: float = 1.0
) -> FloatArray:
    """:func:`stream_dp.dp.release_candidates.entry_payments`, compiled."""
    return entry_payments_kernel(
        np.asarray(cell_start, dtype=np.int64), options.meets, _shares(options), float(mean_share)
    )


def grouped_candidates(
    cell_start: IntArray,
    vehicle: IntArray,
    options: CellOptions,
    payments: FloatArray,
    cell_group: IntArray,
    cell_layout: IntArray,
    stale_cost: FloatArray | None = None,
) -> tuple[Candidates, IntArray]:
    """:func:`stream_dp.dp.release_candidates.grouped_candidates`, compiled."""
    return _grouped(cell_start, vehicle, options, payments, 1.0, cell_group, cell_layout,
                    stale_cost)  # fmt: skip


def cell_candidates(
    cell_start: IntArray,
    vehicle: IntArray,
    options: CellOptions,
    mean_share: float,
    cell_group: IntArray,
    cell_layout: IntArray,
    stale_cost: FloatArray | None = None,
) -> tuple[Candidates, IntArray]:
    """``grouped_candidates(…, entry_payments(cell_start, options, mean_share), …)`` in one
    compiled pass (each payment computed where it is summed, no per-entry table)."""
    none = np.zeros((0, options.epsilon.shape[1]))
    return _grouped(cell_start, vehicle, options, none, mean_share, cell_group, cell_layout,
                    stale_cost)  # fmt: skip


def _grouped(
    cell_start: IntArray,
    vehicle: IntArray,
    options: CellOptions,
    payments: FloatArray,
    mean_share: float,
    cell_group: IntArray,
    cell_layout: IntArray,
    stale_cost: FloatArray | None,
) -> tuple[Candidates, IntArray]:
    n_eps = options.epsilon.shape[1]
    layouts = int(np.max(cell_layout)) + 1
    weight = 1.0 if stale_cost is None else 1.0 - np.asarray(stale_cost)[:, None]
    keys, value, start, payer, pay = grouped_candidates_kernel(
        np.asarray(cell_start, dtype=np.int64), np.asarray(vehicle, dtype=np.int64),
        options.meets, options.useful * weight, np.asarray(payments, dtype=np.float64),
        np.asarray(cell_group, dtype=np.int64) * layouts + np.asarray(cell_layout, np.int64),
        _shares(options), float(mean_share),
    )  # fmt: skip
    _, group_index = np.unique(keys // n_eps // layouts, return_inverse=True)
    candidates = Candidates(group_index.astype(np.int64), value, start, payer, pay)
    return candidates, (keys % n_eps).astype(np.int64)


def _shares(options: CellOptions) -> tuple[IntArray, BoolArray, FloatArray, IntArray, IntArray]:
    """What the own shares are computed from, as the kernels take it."""
    return (options.entry_count, options.sits_out, options.epsilon, options.cap, options.kept)


def with_exclusions(
    candidates: Candidates, covers_start: IntArray, covers: IntArray, first_room: int
) -> Candidates:
    """:func:`stream_dp.dp.release_candidates.with_exclusions`, compiled."""
    start, vehicle, pay = with_exclusions_kernel(
        *candidates.payments, np.asarray(covers_start, dtype=np.int64),
        np.asarray(covers, dtype=np.int64), int(first_room),
    )  # fmt: skip
    return Candidates(candidates.group, candidates.value, start, vehicle, pay)
