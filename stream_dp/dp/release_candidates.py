"""Candidate releases and what each is worth, from public counts only (docs/math.md §13.5,
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
A cell's options are ε at a few multiples of ``ε_T``, the least ε whose published error bar
``β + b ln 20`` meets ``T`` (§13.1; the release publishes nothing else); at each it takes the
cap of least bar, is a candidate when that ε is at most the burst and it has
``min_vehicles`` read vehicles, and each read vehicle pays its own share of ε
(:func:`~stream_dp.dp.individual_loss.entry_epsilons`, what the ledger records).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp.epsilon_grid import round_up
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
    """Per cell (rows) and option (columns): the ε (``ε_T`` times the option's factor,
    rounded up to the ε grid), the cap, the kept readings ``S``, the published error bar,
    whether the cell is a candidate there (``meets``) and its expected useful readings; per
    cell its readings ``M``; per entry its count and whether it sits out."""

    epsilon: FloatArray
    cap: IntArray
    kept: IntArray
    error: FloatArray
    meets: BoolArray
    useful: FloatArray
    total: IntArray
    entry_count: IntArray
    sits_out: BoolArray


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
    """:class:`CellOptions` of the cells whose entries (one per vehicle, ``count`` readings)
    are ``cell_start[g]:cell_start[g + 1]`` (every cell has one at least). Per cell ``ε_T``
    is the least ε whose error bar meets ``target`` (§13.1: over the allowed caps), the
    options ``ε_T`` times each of ``factors`` (a larger ε only lowers the noise), each a
    candidate when at most ``max_epsilon``. Entries that ``sits_out`` are not read: their
    readings stay in ``M`` (worst-case bias, §13.1) and they pay nothing."""
    count = np.asarray(count, dtype=np.int64)
    out = np.zeros(len(count), dtype=bool) if sits_out is None else np.asarray(sits_out, bool)
    n_cells = len(cell_start) - 1
    sizes = np.diff(cell_start)
    cell_of = np.repeat(np.arange(n_cells), sizes)
    total = np.bincount(cell_of, weights=count, minlength=n_cells).astype(np.int64)
    caps, kept, allowed, cap_cell = _cap_candidates(cell_start, cell_of, np.where(out, 0, count),
                                                    prefix_limit)  # fmt: skip
    bias = upper * (1.0 - kept / total[cap_cell])
    with np.errstate(divide="ignore", invalid="ignore"):
        need = LN20 * upper * caps * (1.0 + SAMPLER_RTOL) / (kept * (target - bias))
    need = np.where(allowed & (bias < target) & (kept > 0), need, np.inf)
    least = np.full(n_cells, np.inf)
    np.minimum.at(least, cap_cell, need)
    # ε_T times each factor, rounded once (round_up is not idempotent: its margin lifts a
    # grid value one step)
    eps = round_up(least[:, None] / mean_share * np.asarray(factors, dtype=np.float64)[None, :])
    cap, s, best = _least_error(cap_cell, caps, kept, allowed, total, upper, eps * mean_share)
    useful = expected_useful(eps, cap, s, total, upper, tau, mean_share)
    readers = np.bincount(cell_of, weights=~out, minlength=n_cells)
    meets = (eps <= max_epsilon + 1e-12) & (best <= target * (1.0 + 1e-9))
    meets &= (readers >= min_vehicles)[:, None]
    return CellOptions(eps, cap, s, best, meets, useful, total, count, out)


def expected_useful(
    eps: FloatArray,
    cap: IntArray,
    kept: IntArray,
    total: IntArray,
    upper: float,
    tau: float,
    mean_share: float,
) -> FloatArray:
    """Per cell (rows) and option (columns), ``M · P(useful)`` at ε ``eps``, cap and kept
    readings ``S`` (module docstring; 0 where ε is infinite)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = upper * cap / (kept * eps * mean_share)
    p = np.where(np.isfinite(eps), useful_probability(tau, upper * (1.0 - kept / total[:, None]),
                                                      scale), 0.0)  # fmt: skip
    return p * total[:, None]


def _cap_candidates(
    cell_start: IntArray, cell_of: IntArray, read: IntArray, prefix_limit: int | None
) -> tuple[IntArray, IntArray, BoolArray, IntArray]:
    """The caps to try per cell (§12.4: each read vehicle's count, and the prefix ``C``; only
    ``c <= C`` or ``c = max`` allowed), each with its kept readings ``S(c)``, whether it is
    allowed, and its cell."""
    n_cells = len(cell_start) - 1
    sizes = np.diff(cell_start)
    order = np.lexsort((read, cell_of))  # each cell's entries by count, ascending
    caps = read[order]
    below = np.cumsum(caps) - caps  # readings of entries before, across cells
    before = below - below[cell_start[:-1]][cell_of]  # … within the cell
    rank = np.arange(len(caps)) - cell_start[:-1][cell_of]
    kept = before + caps * (sizes[cell_of] - rank)  # S(c) at c = this entry's count
    top = caps[cell_start[1:] - 1]  # per cell its largest count
    allowed = caps > 0
    if prefix_limit is None:
        return caps, kept, allowed, cell_of
    allowed &= (caps <= prefix_limit) | (caps == top[cell_of])
    least = np.full(n_cells, np.iinfo(np.int64).max)
    np.minimum.at(least, cell_of[caps > 0], caps[caps > 0])
    at_limit = (least <= prefix_limit) & (prefix_limit < top)
    limit_kept = np.bincount(cell_of, weights=np.minimum(read, prefix_limit), minlength=n_cells)
    return (
        np.r_[caps, np.full(n_cells, prefix_limit, dtype=np.int64)],
        np.r_[kept, limit_kept.astype(np.int64)],
        np.r_[allowed, at_limit],
        np.r_[cell_of, np.arange(n_cells)],
    )


def _least_error(
    cell_of: IntArray,
    caps: IntArray,
    kept: IntArray,
    allowed: BoolArray,
    total: IntArray,
    upper: float,
    mean_eps: FloatArray,
) -> tuple[IntArray, IntArray, FloatArray]:
    """Per cell (rows) and option (columns, mean ε ``mean_eps``): the allowed cap of least
    error bar (the first in ``caps``' order among equals), its kept readings and the bar."""
    safe = np.where(kept > 0, kept, 1)
    bias = upper * (1.0 - safe / total[cell_of])
    noise = LN20 * upper * caps / safe * (1.0 + SAMPLER_RTOL)
    error = bias[:, None] + noise[:, None] / mean_eps[cell_of]
    error[~allowed] = np.inf
    best = np.full(mean_eps.shape, np.inf)
    np.minimum.at(best, cell_of, error)
    index = np.where(error <= best[cell_of], np.arange(len(caps))[:, None], len(caps))
    pick = np.full(best.shape, len(caps))
    np.minimum.at(pick, cell_of, index)
    pick = np.minimum(pick, len(caps) - 1)  # a cell with no allowed cap: never a candidate
    return caps[pick], np.where(np.isfinite(best), kept[pick], 0), best


def entry_payments(
    cell_start: IntArray, options: CellOptions, mean_share: float = 1.0
) -> FloatArray:
    """Per entry (rows) and option (columns), what its vehicle pays if its cell is released
    there: its own share (module docstring), at most the ε; nothing when it sits out or the
    cell is no candidate there."""
    sizes = np.diff(cell_start)
    cell_of = np.repeat(np.arange(len(sizes)), sizes)
    cap, kept = options.cap[cell_of], options.kept[cell_of]
    k = np.minimum(options.entry_count[:, None], cap)
    eps = np.where(options.meets, options.epsilon, 0.0)[cell_of]
    pay = entry_epsilons(np.where(eps > 0, eps, 1.0), k, np.maximum(cap, 1), kept, mean_share)
    return np.where((eps > 0) & ~options.sits_out[:, None], pay, 0.0)


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


def with_exclusions(
    candidates: Candidates, covers_start: IntArray, covers: IntArray, first_room: int
) -> Candidates:
    """``candidates``, each also paying 1 to the rooms ``first_room + covers[covers_start[k]:
    covers_start[k + 1]]`` (e.g. the observed cells its cell covers): given those rooms 1, no
    two chosen candidates cover the same one (a cell excludes its finer and coarser cells)."""
    n = len(candidates.group)
    own, extra = np.diff(candidates.start), np.diff(covers_start)
    owner = np.r_[np.repeat(np.arange(n), own), np.repeat(np.arange(n), extra)]
    order = np.argsort(owner, kind="mergesort")  # each candidate's payments, then its covers
    vehicle = np.r_[candidates.vehicle, first_room + np.asarray(covers, dtype=np.int64)]
    pay = np.r_[candidates.pay, np.ones(len(covers))]
    start = np.r_[0, np.cumsum(own + extra)].astype(np.int64)
    return Candidates(candidates.group, candidates.value, start, vehicle[order], pay[order])
