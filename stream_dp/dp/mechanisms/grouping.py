"""Pseudo-user creation: WRAPAROUND (003 Algorithm 1) and BESTFIT (003 Algorithm 2).

Both process vehicles in non-increasing order of ``m_l`` (ties: ascending vehicle index, a
public order) and place the first ``Gamma_l = min(m_l, m_UB)`` readings of each. Only the
public counts are used, so the grouping itself costs no privacy.

A grouping is stored as *placements* ``(vehicle, array, offset, slots)``: readings
``offset .. offset + slots - 1`` of ``vehicle`` sit in ``array``.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right, insort
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from stream_dp.dp.mechanisms.base import CellData, Fill

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
Strategy = Literal["wraparound", "bestfit"]
STRATEGIES: tuple[str, ...] = ("wraparound", "bestfit")


@dataclass(frozen=True, eq=False)
class Grouping:
    """Arrays of one grouping; only kept arrays appear (WRAPAROUND drops a partial last one).

    ``n_arrays`` is K of eq. (3) for WRAPAROUND and K-bar (non-empty arrays) for BESTFIT;
    ``fills[i]`` = w(A_i).
    """

    strategy: Strategy
    m_ub: int
    n_arrays: int
    fills: IntArray
    vehicle: IntArray
    array: IntArray
    offset: IntArray
    slots: IntArray

    @property
    def influence(self) -> int:
        """The most kept arrays any one vehicle occupies (1 for BESTFIT, <= 2 for WRAPAROUND)."""
        if self.vehicle.size == 0:
            return 0
        return int(np.bincount(self.vehicle).max())


def processing_order(counts: ArrayLike) -> IntArray:
    """Vehicle indices by non-increasing count, ties by index (003 Sec. III-A)."""
    return np.argsort(-np.asarray(counts, dtype=np.int64), kind="stable").astype(np.int64)


def _as_counts(counts: ArrayLike, m_ub: int) -> IntArray:
    arr = np.asarray(counts, dtype=np.int64).reshape(-1)
    if arr.size == 0 or np.any(arr < 1):
        raise ValueError("counts must be a non-empty sequence of positive integers")
    if int(m_ub) < 1:
        raise ValueError(f"m_UB must be >= 1, got {m_ub}")
    return arr


def wraparound(counts: ArrayLike, m_ub: int) -> Grouping:
    """003 Algorithm 1: fill arrays of length m_UB contiguously, splitting a vehicle when needed.

    Keeps the ``K = floor(sum_l min(m_l, m_UB) / m_UB)`` full arrays, eq. (3).
    """
    arr = _as_counts(counts, m_ub)
    rows: list[tuple[int, int, int, int]] = []
    array, filled = 0, 0
    for v in processing_order(arr).tolist():
        left, offset = min(int(arr[v]), m_ub), 0
        while left > 0:
            take = min(left, m_ub - filled)
            rows.append((v, array, offset, take))
            filled += take
            offset += take
            left -= take
            if filled == m_ub:
                array, filled = array + 1, 0
    n_full = array  # eq. (3): the index of the last filled-up array
    kept = [r for r in rows if r[1] < n_full]
    return _build("wraparound", m_ub, n_full, kept)


def bestfit(counts: ArrayLike, m_ub: int) -> Grouping:
    """003 Algorithm 2: each vehicle goes whole into the fullest array that still fits it.

    Ties go to the least index; an empty array is opened only when no partly filled one
    fits. Fill levels are kept in a sorted list with a min-heap of array ids per level.
    """
    arr = _as_counts(counts, m_ub)
    rows: list[tuple[int, int, int, int]] = []
    fills: list[int] = []
    by_level: dict[int, list[int]] = {}
    levels: list[int] = []  # sorted fill levels in (0, m_UB) with a non-empty heap
    for v in processing_order(arr).tolist():
        r = min(int(arr[v]), m_ub)
        pos = bisect_right(levels, m_ub - r) - 1
        if pos >= 0:
            level = levels[pos]
            target = heapq.heappop(by_level[level])
            if not by_level[level]:
                del by_level[level]
                levels.pop(pos)
        else:
            target, level = len(fills), 0
            fills.append(0)
        fills[target] = level + r
        rows.append((v, target, 0, r))
        if level + r < m_ub:
            if level + r not in by_level:
                by_level[level + r] = []
                insort(levels, level + r)
            heapq.heappush(by_level[level + r], target)
    return _build("bestfit", m_ub, len(fills), rows)


def _build(
    strategy: Strategy, m_ub: int, n_arrays: int, rows: list[tuple[int, int, int, int]]
) -> Grouping:
    table = np.array(rows, dtype=np.int64).reshape(-1, 4)
    fills = np.bincount(table[:, 1], weights=table[:, 3], minlength=n_arrays).astype(np.int64)
    return Grouping(
        strategy=strategy,
        m_ub=int(m_ub),
        n_arrays=int(n_arrays),
        fills=fills,
        vehicle=table[:, 0].copy(),
        array=table[:, 1].copy(),
        offset=table[:, 2].copy(),
        slots=table[:, 3].copy(),
    )


def group(strategy: str, counts: ArrayLike, m_ub: int) -> Grouping:
    """Dispatch on ``strategy`` ("wraparound" | "bestfit")."""
    if strategy == "wraparound":
        return wraparound(counts, m_ub)
    if strategy == "bestfit":
        return bestfit(counts, m_ub)
    raise ValueError(f"grouping must be one of {STRATEGIES}, got {strategy!r}")


def array_means(grouping: Grouping, cell: CellData, fill: Fill) -> FloatArray:
    """A-bar_i, the mean of each kept array (003 Sec. III-C).

    ``fill="readings"``: the placed readings themselves (exact iff each vehicle's prefix
    covers its placed readings, or the placement ends at its last reading);
    ``fill="user-mean"``: every slot of vehicle l holds mu_l (003 Sec. IV-A), so only the
    aggregates are used.
    """
    if fill == "user-mean":
        contributions = grouping.slots * cell.user_means()[grouping.vehicle]
    else:
        contributions = np.array(
            [
                cell.partial_sum(v, o, o + s)
                for v, o, s in zip(
                    grouping.vehicle.tolist(),
                    grouping.offset.tolist(),
                    grouping.slots.tolist(),
                    strict=True,
                )
            ],
            dtype=np.float64,
        )
    sums = np.bincount(grouping.array, weights=contributions, minlength=grouping.n_arrays)
    return sums / grouping.fills


def readings_needed(grouping: Grouping, counts: IntArray, fill: Fill) -> IntArray:
    """Per vehicle, the prefix length ``array_means`` needs (0 when aggregates suffice)."""
    need = np.zeros(counts.size, dtype=np.int64)
    if fill == "user-mean":
        return need
    for v, o, s in zip(
        grouping.vehicle.tolist(), grouping.offset.tolist(), grouping.slots.tolist(), strict=True
    ):
        stop = o + s
        need[v] = max(int(need[v]), o if stop == counts[v] else stop)
    return need
