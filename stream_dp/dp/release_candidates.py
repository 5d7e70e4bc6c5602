"""Candidate releases and what each is worth, from public counts only (docs/planner-draft.md,
"The objective").

For a cell of ``M`` readings whose vehicle ``l`` has ``m_l`` of them (capped at the stored
prefix ``C``) released at ε with cap ``c`` (``S(c) = Σ_l min(m_l, c)`` kept readings), the
released mean is the kept readings' mean plus ``Lap(b)``, ``b = U c / (S ε (1 − s))``, and
the kept mean lies within ``β = U (1 − S/M)`` of the mean of all ``M`` (Thm IV.1;
docs/math.md §12.1). So for any readings with that occupancy

    P(|released − truth| ≤ τ)  ≥  P(|β + Lap(b)| ≤ τ)
                               =  1 − (e^{−(τ − β)/b} + e^{−(τ + β)/b}) / 2      (β ≤ τ)

(the least over every shift of at most β: :func:`useful_probability`), and the cell's
*expected useful readings* are at least ``M`` times that.
Per ε the cell takes the cap of least published error bar ``β + b ln 20`` (as the release
does, §13.1), is a candidate only when that bar meets ``T`` (the release publishes nothing
else) and it has ``min_vehicles``, and each vehicle pays its own share of ε
(:func:`~stream_dp.dp.individual_loss.entry_epsilons`, what the ledger records).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp.error_bars import LN20, SAMPLER_RTOL
from stream_dp.dp.individual_loss import entry_epsilons
from stream_dp.dp.release_choice import Candidates

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


def useful_probability(tau: float, bias: FloatArray, scale: FloatArray) -> FloatArray:
    """``min over |β'| ≤ bias`` of ``P(|β' + Lap(b)| ≤ τ)``, reached at ``|β'| = bias`` (the
    noise is symmetric and unimodal, so the probability falls as the shift grows):
    ``1 − (e^{−(τ − β)/b} + e^{−(τ + β)/b}) / 2`` for ``β ≤ τ``, else
    ``(e^{−(β − τ)/b} − e^{−(β + τ)/b}) / 2``."""
    beta = np.asarray(bias, dtype=np.float64)
    b = np.asarray(scale, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        near, far = np.exp(-np.abs(tau - beta) / b), np.exp(-(tau + beta) / b)
    return np.where(beta <= tau, 1.0 - 0.5 * (near + far), 0.5 * (near - far))


@dataclass(frozen=True)
class CellOptions:
    """Per cell (rows) and ε of ``epsilon`` (columns): the cap, the kept readings ``S``, the
    published error bar, whether the cell is a candidate there (``meets``) and its expected
    useful readings; per cell its readings ``M``; per entry its kept count (capped at C)."""

    epsilon: FloatArray
    cap: IntArray
    kept: IntArray
    error: FloatArray
    meets: BoolArray
    useful: FloatArray
    total: IntArray
    entry_count: IntArray


def cell_options(
    cell_start: IntArray,
    count: IntArray,
    *,
    upper: float,
    target: float,
    tau: float,
    epsilons: FloatArray,
    mean_share: float = 1.0,
    prefix_limit: int | None = None,
    min_vehicles: int = 1,
) -> CellOptions:
    """:class:`CellOptions` of the cells whose entries (one per vehicle, ``count`` readings)
    are ``cell_start[g]:cell_start[g + 1]``; every cell has at least one entry."""
    count = np.asarray(count, dtype=np.int64)
    eps = np.asarray(epsilons, dtype=np.float64)
    n_cells = len(cell_start) - 1
    sizes = np.diff(cell_start)
    cell_of = np.repeat(np.arange(n_cells), sizes)
    total = np.bincount(cell_of, weights=count, minlength=n_cells).astype(np.int64)
    capped = count if prefix_limit is None else np.minimum(count, int(prefix_limit))
    order = np.lexsort((capped, cell_of))  # each cell's entries by count, ascending
    caps = capped[order]
    below = np.cumsum(caps) - caps  # readings of entries before, across cells
    before = below - below[cell_start[:-1]][cell_of]  # … within the cell
    rank = np.arange(len(caps)) - cell_start[:-1][cell_of]
    kept = before + caps * (sizes[cell_of] - rank)  # S(c) at c = this entry's count
    bias = upper * (1.0 - kept / total[cell_of])
    noise = LN20 * upper * caps / kept * (1.0 + SAMPLER_RTOL)
    error = bias[:, None] + noise[:, None] / (eps[None, :] * mean_share)
    best = np.minimum.reduceat(error, cell_start[:-1], axis=0)
    index = np.where(error <= best[cell_of], np.arange(len(caps))[:, None], len(caps))
    pick = np.minimum.reduceat(index, cell_start[:-1], axis=0)
    cap, s = caps[pick], kept[pick]
    scale = upper * cap / (s * eps[None, :] * mean_share)
    p = useful_probability(tau, upper * (1.0 - s / total[:, None]), scale)
    meets = (best <= target) & (sizes >= min_vehicles)[:, None]
    return CellOptions(eps, cap, s, best, meets, p * total[:, None], total, capped)


def entry_payments(
    cell_start: IntArray, options: CellOptions, mean_share: float = 1.0
) -> FloatArray:
    """Per entry (rows) and ε (columns), what its vehicle pays if its cell is released at that
    ε: its own share (module docstring), at most the ε."""
    sizes = np.diff(cell_start)
    cell_of = np.repeat(np.arange(len(sizes)), sizes)
    cap, kept = options.cap[cell_of], options.kept[cell_of]
    k = np.minimum(options.entry_count[:, None], cap)
    eps = np.broadcast_to(options.epsilon[None, :], cap.shape)
    return entry_epsilons(eps, k, cap, kept, mean_share)


def grouped_candidates(
    cell_start: IntArray,
    vehicle: IntArray,
    options: CellOptions,
    payments: FloatArray,
    cell_group: IntArray,
    cell_layout: IntArray,
    stale_cost: FloatArray | None = None,
) -> tuple[Candidates, IntArray]:
    """One candidate per (group, layout, ε) with a cell meeting T there: it releases every
    cell of that group and layout meeting T at that ε (a layout: e.g. one resolution of a
    coarse cell's readings; the layouts of a group are exclusive). Its value is the cells'
    expected useful readings times ``1 − stale_cost`` (per cell, the staleness cost of a
    useful reading); each vehicle pays the sum over its cells. Returns the candidates and,
    per candidate, its ε's column."""
    n_eps = len(options.epsilon)
    sizes = np.diff(cell_start)
    cell, column = np.nonzero(options.meets)
    key = (np.asarray(cell_group)[cell] * (int(np.max(cell_layout)) + 1)
           + np.asarray(cell_layout)[cell]) * n_eps + column  # fmt: skip
    keys, cand_of = np.unique(key, return_inverse=True)
    weight = 1.0 if stale_cost is None else 1.0 - np.asarray(stale_cost)[cell]
    value = np.bincount(cand_of, weights=options.useful[cell, column] * weight,
                        minlength=len(keys)).astype(np.float64)  # fmt: skip
    per_entry_cand = np.repeat(cand_of, sizes[cell])
    entry = _entries_of(cell_start, cell, sizes)
    entry_vehicle = np.asarray(vehicle, dtype=np.int64)[entry]
    entry_pay = payments[entry, np.repeat(column, sizes[cell])]
    pair = per_entry_cand * (int(entry_vehicle.max(initial=0)) + 1) + entry_vehicle
    pairs, pair_of = np.unique(pair, return_inverse=True)
    pay = np.bincount(pair_of, weights=entry_pay, minlength=len(pairs))
    stride = int(entry_vehicle.max(initial=0)) + 1
    start = np.searchsorted(pairs // stride, np.arange(len(keys) + 1))
    group = keys // n_eps // (int(np.max(cell_layout)) + 1)
    _, group_index = np.unique(group, return_inverse=True)
    candidates = Candidates(group_index.astype(np.int64), value, start.astype(np.int64),
                            (pairs % stride).astype(np.int64), pay)  # fmt: skip
    return candidates, (keys % n_eps).astype(np.int64)


def _entries_of(cell_start: IntArray, cells: IntArray, sizes: IntArray) -> IntArray:
    """The entry indices of ``cells`` (with repeats), cell after cell."""
    n = sizes[cells]
    offsets = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    return np.repeat(np.asarray(cell_start)[cells], n) + offsets
