"""Pseudo-user post-step after CLIP-USER (composition paper Sec. V-B3, eq. 15; docs/math.md §6).

Per cell, cap every kept count at ``c`` in ``[min kept, max kept]``: ``Gamma' = min(Gamma, c)``,
suppressed vehicles stay 0, biases are against the original ``m``; choose the ``c`` minimising
the cell error (eq. 11/13), ties to the smallest ``c``. ``K`` is unchanged (no vehicle leaves a
cell) and no cell's error grows (``c = max`` reproduces CLIP-USER's error).

Why a few candidate caps suffice. Sort a cell's kept counts ``a_1 <= ... <= a_n``. Between two
consecutive distinct counts ``a_k <= c <= a_k'``, ``S(c) = P + R c`` with ``P = sum_{a_i <= a_k}
a_i >= 1`` and ``R = #{a_i > a_k} >= 1``, and ``top = c``. There, as functions of ``c``: the mean
bias is linear; the variance bias is a concave function of ``S`` (flat, then
``U^2 S (M - S) / M^2`` with matching value, to 0 at ``S = M``); ``c / S`` is concave; and where
``S > 2c`` the variance sensitivity ``c (S - c) / S^2`` is concave: with ``u = S / P`` it is
``((R - 1) + (2 - R)/u - 1/u^2) / R^2`` in ``u``, whose second derivative has the sign of
``(2 - R) u - 3 < 0`` there (``u < 2`` when ``R = 1``). ``S <= 2c`` only happens for ``R = 1``
(``c >= P``), where the sensitivity is ``U^2/4 - [S odd] U^2 / (4 S^2)``: concave on each parity
class of ``S``. A concave sequence attains its minimum (and, for ties, its smallest minimiser) at
an end, so it suffices to evaluate the ends of every piece and parity class: every distinct kept
count, ``P - 1``, ``P``, ``P + 1`` and ``max - 1`` of the last piece, and ``C - 1``, ``C`` for
``prefix_limit = C``. ``tests/test_pseudo_user.py`` checks this against a scan of every integer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp.clip_user import ClipUserResult
from stream_dp.dp.grid_error import ErrorModel, grid_error, variance_sensitivity
from stream_dp.dp.ordering import order_by_pair, sorted_distinct

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class PseudoUserResult:
    """Per-cell caps and the resulting kept counts, errors and sensitivities.

    ``cap[g]`` is the chosen ``c`` (0 for a cell with nothing kept); ``kept_count[i]`` is
    ``Gamma'`` of occupancy entry ``i`` (so ``cap[g]`` is the cell's largest kept count, the
    ``top`` of the mean's eq. (9) sensitivity: :mod:`stream_dp.dp.clip_mean`); ``error`` and
    ``variance_sensitivity`` are per cell after capping (Lemma III.3, eq. 11/13), +inf for a
    cell with nothing kept.
    """

    cap: IntArray
    kept_count: IntArray
    error: FloatArray
    variance_sensitivity: FloatArray

    @property
    def max_error(self) -> float:
        """``E-bar = max_g E-bar_g`` (0 with no cells)."""
        return float(self.error.max(initial=0.0))


def _check_arguments(upper: float, epsilon: float, prefix_limit: int | None, method: str) -> None:
    if not upper > 0 or not epsilon > 0:
        raise ValueError("upper and epsilon must be positive")
    if prefix_limit is not None and prefix_limit < 0:
        raise ValueError("prefix_limit must be non-negative")
    if method not in ("auto", "scan", "candidates"):
        raise ValueError(f"unknown method {method!r}")


def pseudo_user_step(
    clip: ClipUserResult,
    upper: float,
    epsilon: float,
    prefix_limit: int | None = None,
    *,
    method: Literal["auto", "scan", "candidates"] = "auto",
) -> PseudoUserResult:
    """Choose per cell the cap minimising eq. (15) (ties to the smallest cap), with
    CLIP-USER's error function (``clip.model``; default eq. 13).

    With ``prefix_limit = C`` (only the first ``C`` readings of each (cell, vehicle) are
    stored) only caps ``c <= C`` or ``c = max kept count`` (nothing cut) are allowed.
    ``method`` only selects the evaluation (identical results): ``"scan"`` evaluates every
    integer cap of every cell from a (cell, kept count) histogram, ``"candidates"`` only the
    candidate caps of the module docstring; ``"auto"`` scans when the histogram is at most a
    few times the entries (kept counts are small), else evaluates the candidates.
    """
    _check_arguments(upper, epsilon, prefix_limit, method)
    occ = clip.occupancy
    if occ.n_entries and int(occ.count.max()) >= 1 << 31:
        raise ValueError("counts must be below 2**31")
    n_cells = len(occ.cells)
    total = occ.total_per_cell()
    gamma = clip.kept_count
    top = int(gamma.max(initial=0))
    if method == "scan" or (method == "auto" and n_cells * (top + 1) <= 4 * len(gamma) + 65_536):
        cap, capped_kept_sum = _scan_every_cap(
            occ.cell_index, gamma, n_cells, top, total, upper, epsilon, prefix_limit, clip.model
        )
        return _result(clip, upper, epsilon, cap, capped_kept_sum)
    kept = np.flatnonzero(gamma > 0)
    cell, count = occ.cell_index[kept], gamma[kept]
    order = order_by_pair(cell, count, n_cells, int(count.max(initial=0)) + 1)
    cell, count = cell[order], count[order]
    cell_start = np.searchsorted(cell, np.arange(n_cells + 1))
    n_kept = np.diff(cell_start)
    prefix = np.concatenate(([0], np.cumsum(count)))
    lowest = np.where(n_kept > 0, count[np.minimum(cell_start[:-1], len(count) - 1)], 0)
    highest = np.where(n_kept > 0, count[np.maximum(cell_start[1:] - 1, 0)], 0)

    # Candidate caps (see the module docstring), as (cell, cap) pairs.
    kept_sum = prefix[cell_start[1:]] - prefix[cell_start[:-1]]
    last_p = kept_sum - highest  # P of the last piece
    extra = [last_p - 1, last_p, last_p + 1, highest - 1]
    if prefix_limit is not None:
        extra += [np.full(n_cells, prefix_limit - 1), np.full(n_cells, prefix_limit)]
    # Each cell's distinct kept counts (runs in the sorted order), then the extra candidates.
    distinct = np.flatnonzero(np.diff(cell, prepend=-1) | np.diff(count, prepend=-1))
    cand_cell = np.concatenate([cell[distinct], *[np.arange(n_cells)] * len(extra)])
    cand_cap = np.concatenate([count[distinct], *extra])
    allowed = (n_kept[cand_cell] > 0) & (cand_cap >= lowest[cand_cell])
    allowed &= cand_cap <= highest[cand_cell]
    if prefix_limit is not None:
        allowed &= (cand_cap <= prefix_limit) | (cand_cap == highest[cand_cell])
    cand_cell, cand_cap = cand_cell[allowed], cand_cap[allowed]
    uniq = sorted_distinct(cand_cell.astype(np.int64) << 32 | cand_cap)  # sorted by (cell, cap)
    cand_cell, cand_cap = uniq >> 32, uniq & 0xFFFFFFFF

    capped_sum = _capped_sum(cell, count, cell_start, prefix, cand_cell, cand_cap)
    value = grid_error(upper, epsilon, cand_cap, capped_sum, total[cand_cell], clip.model)
    first = np.searchsorted(cand_cell, np.arange(n_cells))
    has = n_kept > 0
    seg = first[has]
    seg_min = np.minimum.reduceat(value, seg) if len(seg) else value[:0]
    owner = np.searchsorted(seg, np.arange(len(value)), side="right") - 1
    index = np.where(value == seg_min[owner], np.arange(len(value)), len(value))
    best = np.minimum.reduceat(index, seg) if len(seg) else index[:0]

    cap = np.zeros(n_cells, dtype=np.int64)
    cap[has] = cand_cap[best]
    capped_kept_sum = np.zeros(n_cells, dtype=np.int64)
    capped_kept_sum[has] = capped_sum[best]
    return _result(clip, upper, epsilon, cap, capped_kept_sum)


def no_pseudo_user(clip: ClipUserResult) -> PseudoUserResult:
    """The ``--no-pseudo-user`` variant: cap = max kept count, i.e. CLIP-USER's counts."""
    top = clip.occupancy.max_per_cell(clip.kept_count)
    return _result(clip, clip.upper, clip.epsilon, top)


def _scan_every_cap(
    cell_index: IntArray,
    gamma: IntArray,
    n_cells: int,
    top: int,
    total: IntArray,
    upper: float,
    epsilon: float,
    prefix_limit: int | None,
    model: ErrorModel | None = None,
) -> tuple[IntArray, IntArray]:
    """Per cell, the allowed cap ``c`` in ``[min kept, max kept]`` of least eq. (13) error
    (the first, i.e. smallest, on ties) and its ``S(c)``, every integer ``c`` evaluated at
    once: with ``h[g, a]`` kept vehicles of count ``a`` in cell ``g``,
    ``S(c) = sum_{a <= c} a h[g, a] + c #{a > c}``. (0, 0) for a cell with nothing kept."""
    width = top + 1
    hist = np.bincount(cell_index * width + gamma, minlength=n_cells * width)
    hist = hist.reshape(n_cells, width)
    hist[:, 0] = 0  # suppressed entries
    caps = np.arange(width, dtype=np.int64)
    n_upto = np.cumsum(hist, axis=1)
    n_kept = n_upto[:, -1]
    capped_sum = np.cumsum(hist * caps, axis=1) + caps * (n_kept[:, None] - n_upto)
    present = hist > 0
    has = n_kept > 0
    lowest = np.argmax(present, axis=1)
    highest = top - np.argmax(present[:, ::-1], axis=1)
    allowed = (caps >= lowest[:, None]) & (caps <= highest[:, None]) & has[:, None]
    if prefix_limit is not None:
        allowed &= (caps <= prefix_limit) | (caps == highest[:, None])
    safe_sum = np.where(allowed, capped_sum, 1)
    value = grid_error(upper, epsilon, caps, safe_sum, total[:, None], model)
    best = np.argmin(np.where(allowed, value, np.inf), axis=1)  # first minimum: smallest cap
    chosen_sum = np.take_along_axis(capped_sum, best[:, None], axis=1)[:, 0]
    return np.where(has, best, 0), np.where(has, chosen_sum, 0)


def _capped_sum(
    cell: IntArray,
    count: IntArray,
    cell_start: IntArray,
    prefix: IntArray,
    cand_cell: IntArray,
    cand_cap: IntArray,
) -> IntArray:
    """``S(c) = sum_l min(Gamma_l, c)`` via prefix sums over each cell's sorted counts."""
    key = cell.astype(np.int64) << 32 | count
    below = np.searchsorted(key, cand_cell << 32 | cand_cap, side="right")  # counts <= c
    start, end = cell_start[cand_cell], cell_start[cand_cell + 1]
    return prefix[below] - prefix[start] + cand_cap * (end - below)


def _result(
    clip: ClipUserResult,
    upper: float,
    epsilon: float,
    cap: IntArray,
    kept_sum: IntArray | None = None,
) -> PseudoUserResult:
    """The outcome of capping every cell's kept counts at ``cap`` (at most the cell's largest
    kept count, so the capped ``top`` is ``cap`` itself; 0 where nothing is kept).
    ``kept_sum``: the capped ``S`` per cell, if already known."""
    occ = clip.occupancy
    kept_count = np.minimum(clip.kept_count, np.repeat(cap, np.diff(occ.cell_start)))
    if kept_sum is None:
        kept_sum = np.bincount(occ.cell_index, weights=kept_count, minlength=len(occ.cells))
        kept_sum = kept_sum.astype(np.int64)
    top = cap
    released = kept_sum > 0
    safe = np.where(released, kept_sum, 1)
    return PseudoUserResult(
        cap=cap,
        kept_count=kept_count,
        error=grid_error(upper, epsilon, top, kept_sum, occ.total_per_cell(), clip.model),
        variance_sensitivity=np.where(released, variance_sensitivity(upper, top, safe), np.inf),
    )
