"""CLIP-USER's state (docs/math.md §5.1): :class:`ClipUserRun`, the arrays every evaluation
scheme runs over, and :class:`ClipUserResult`, what a run returns.

Per cell the run keeps ``M``, ``S`` and its entries sorted by count (descending) with the
positions of the first three kept ones, so "largest kept count without vehicle ``l``" is O(1)
and a candidate ``E_g(l)`` is O(1). The layout is built by
:data:`~stream_dp.dp.kernels.SUPPRESSOR_LAYOUT` (a compiled counting sort, or
:func:`layout_by_sorts`); the stages run by :data:`~stream_dp.dp.kernels.CLIP_USER`
(:func:`stream_dp.dp.clip_user.clip_user`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp import kernels
from stream_dp.dp.grid_error import ErrorModel, grid_error
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.ordering import order_by_pair, stable_order

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

#: ``E_g(l) > E`` is decided as ``E_g(l) > E * (1 + HALT_RTOL)`` (docs/math.md §5.1, step 4).
HALT_RTOL = 1e-12


@dataclass(frozen=True)
class ClipUserResult:
    """Outcome of CLIP-USER on one occupancy array.

    ``kept[i]`` says whether entry ``i`` of ``occupancy`` is kept (``Gamma = m``) or suppressed
    (``Gamma = 0``); ``suppressed_entries`` lists the suppressed entry indices in suppression
    order and ``suppressed`` the same as ``(cell, vehicle)`` ids (built on first use).
    ``g1 = max_l G_l`` before and ``k = max_l G_l`` after suppression; ``error_bound`` is the
    ``E`` used; ``initial_error``/``error`` are per cell, before/after suppression (eq. 13);
    ``upper`` and ``epsilon`` are the ``U`` and per-cell ``eps`` the errors were computed with.
    """

    occupancy: Occupancy
    upper: float
    epsilon: float
    kept: BoolArray
    g1: int
    k: int
    error_bound: float
    initial_error: FloatArray
    error: FloatArray
    suppressed_entries: IntArray
    #: ``G_l`` after suppression, if the run kept it (else counted from ``kept``).
    grids: IntArray | None = None
    #: The error function used (None: eq. 13 with ``eps/2`` each, see ``ErrorModel.split``).
    model: ErrorModel | None = None

    @cached_property
    def suppressed(self) -> tuple[tuple[str, str], ...]:
        """``(cell, vehicle)`` of the suppressed entries, in suppression order."""
        occ = self.occupancy
        order = self.suppressed_entries
        cells = np.asarray(occ.cells, dtype=object)[occ.cell_index[order]].tolist()
        vehicles = np.asarray(occ.vehicles, dtype=object)[occ.vehicle_index[order]].tolist()
        return tuple(zip(cells, vehicles, strict=True))

    @cached_property
    def kept_count(self) -> IntArray:
        """``Gamma[g, l]`` per entry: ``m[g, l]`` if kept, else 0 (computed once; read-only)."""
        kept_count = np.where(self.kept, self.occupancy.count, 0).astype(np.int64, copy=False)
        kept_count.flags.writeable = False
        return kept_count

    @property
    def n_suppressed(self) -> int:
        """Number of suppressed ``(cell, vehicle)`` entries (cheaper than ``len(suppressed)``)."""
        return len(self.suppressed_entries)

    @property
    def max_error(self) -> float:
        """``max_g E_g`` after suppression (0 with no cells)."""
        return float(self.error.max(initial=0.0))

    def grids_per_vehicle(self) -> IntArray:
        """``G_l`` after suppression."""
        if self.grids is not None:
            return self.grids
        return self.occupancy.grids_per_vehicle(self.kept)

    def privacy_loss(self, epsilon: float) -> float:
        """Composed privacy loss ``K * eps`` (Prop. V.1)."""
        return self.k * epsilon


def cell_errors(
    occupancy: Occupancy,
    kept: BoolArray | None,
    upper: float,
    epsilon: float,
    model: ErrorModel | None = None,
) -> FloatArray:
    """Per-cell eq. (13) (or ``model``'s error) for a kept mask (``Gamma`` is ``m`` or 0;
    None: everything kept); +inf where nothing is kept."""
    total = occupancy.total_per_cell()
    if kept is None:
        return grid_error(upper, epsilon, occupancy.max_per_cell(), total, total, model)
    n_cells = len(occupancy.cells)
    kept_count = np.where(kept, occupancy.count, 0)
    kept_sum = np.bincount(occupancy.cell_index, weights=kept_count, minlength=n_cells)
    top = occupancy.max_per_cell(kept_count)
    return grid_error(upper, epsilon, top, kept_sum.astype(np.int64), total, model)


def layout_by_sorts(
    cell_of: IntArray,
    vehicle_of: IntArray,
    count: IntArray,
    n_cells: int,
    n_vehicles: int,
    top: int,
) -> tuple[IntArray, ...]:
    """:class:`ClipUserRun`'s static arrays by stable sorts (the numpy form of
    :data:`~stream_dp.dp.kernels.SUPPRESSOR_LAYOUT`; entries grouped by cell, counts at most
    ``top``): ``grids``, ``vehicle_start``, ``by_vehicle`` (by vehicle, then entry order),
    ``by_cell`` (by cell, then count descending, then entry order; the sentinel ``n``
    appended), ``position`` (its inverse), ``sorted_count`` (sentinel count 0 appended),
    ``cell_start``, and per slot of ``by_vehicle`` its entry's cell, count and position."""
    n = len(cell_of)
    by_vehicle = stable_order(vehicle_of, n_vehicles)
    grids = np.bincount(vehicle_of, minlength=n_vehicles).astype(np.int64)
    vehicle_start = np.concatenate(([0], np.cumsum(grids))).astype(np.int64)
    by_cell = np.append(order_by_pair(cell_of, top - count, n_cells, top + 1), n)
    position = np.empty(n + 1, dtype=np.int64)
    position[by_cell] = np.arange(n + 1)
    sorted_count = np.append(count, 0)[by_cell]
    cell_start = np.searchsorted(cell_of, np.arange(n_cells + 1)).astype(np.int64)
    return (
        grids, vehicle_start, by_vehicle, by_cell, position, sorted_count, cell_start,
        cell_of[by_vehicle], count[by_vehicle], position[by_vehicle],
    )  # fmt: skip


def by_grids_descending(grids: IntArray) -> IntArray:
    """Vehicles by ``G_l`` descending, ties in ascending vehicle order."""
    top = int(grids.max(initial=0))
    return stable_order(top - grids, top + 1)


class ClipUserRun:
    """Mutable state of one CLIP-USER run (docs/math.md §5.1), public so every scheme runs
    over it: the compiled kernel (:func:`stream_dp.dp.clip_user_kernel.run_stages`) and the
    uncompiled ones of :mod:`stream_dp.dp.clip_user_rounds`.

    Entry ``n`` (one past the last) is a sentinel: never kept, count 0, at position ``n``.
    ``by_vehicle[vehicle_start[v]:vehicle_start[v + 1]]`` are vehicle ``v``'s entries in
    ascending cell order; ``by_cell`` orders the entries by cell, then count descending
    (``position`` is its inverse, ``sorted_count`` the counts in that order, ``cell_end`` each
    cell's end in it); ``top3[g]`` holds the positions of the first three kept entries of cell
    ``g``, padded with ``n``. ``kept``/``kept_sorted`` flag kept entries (by entry, by
    position), ``kept_sum`` is ``S`` and ``grids`` ``G_l``; ``order`` lists the suppressed
    entries. ``limit`` is ``E`` with the halting tolerance applied.
    """

    def __init__(
        self,
        occ: Occupancy,
        upper: float,
        epsilon: float,
        error_bound: float | None = None,
        model: ErrorModel | None = None,
    ) -> None:
        if not upper > 0 or not epsilon > 0:
            raise ValueError("upper and epsilon must be positive")
        if error_bound is not None and not error_bound >= 0:
            raise ValueError("error_bound must be non-negative")
        n = occ.n_entries
        n_cells = len(occ.cells)
        self.occupancy = occ
        self.n = n
        self.upper = float(upper)
        self.u2 = float(upper) ** 2
        self.epsilon = float(epsilon)
        self.model = model or ErrorModel.split(epsilon)  # eq. 13 (docs/math.md §3.4)
        self.initial_error = cell_errors(occ, None, upper, epsilon, self.model)
        initial_max = float(self.initial_error.max(initial=0))
        self.error_bound = float(error_bound) if error_bound is not None else initial_max
        self.limit = self.error_bound * (1.0 + HALT_RTOL)
        self.cell_of = occ.cell_index
        self.count = occ.count
        top = int(occ.count.max(initial=0))
        (self.grids, self.vehicle_start, self.by_vehicle, self.by_cell, self.position,
         self.sorted_count, cell_start, *slots) = kernels.SUPPRESSOR_LAYOUT.pick(n)(
            occ.cell_index.astype(np.int64, copy=False),
            occ.vehicle_index.astype(np.int64, copy=False),
            occ.count.astype(np.int64, copy=False),
            n_cells, len(occ.vehicles), top,
        )  # fmt: skip
        #: Per-slot (``by_vehicle`` order) cell, count and position.
        self.slots: tuple[IntArray, IntArray, IntArray] = (slots[0], slots[1], slots[2])
        self.g1 = int(self.grids.max(initial=0))
        self.cell_end = cell_start[1:]
        first3 = cell_start[:-1, None] + np.arange(3)
        self.top3 = np.where(first3 < self.cell_end[:, None], first3, n)
        self.total = occ.total_per_cell()
        self.kept_sum = self.total.copy()
        self.kept = np.ones(n + 1, dtype=bool)
        self.kept[n] = False
        self.kept_sorted = self.kept.copy()
        self.order: list[int] | IntArray = []

    def errors(self) -> FloatArray:
        """Per-cell eq. (13) in the current state (``cell_errors`` of ``kept``, read off the
        per-cell state: ``top3[g, 0]`` is the largest kept count's position)."""
        top = self.sorted_count[self.top3[:, 0]]
        return grid_error(self.upper, self.epsilon, top, self.kept_sum, self.total, self.model)

    def result(self) -> ClipUserResult:
        """The outcome of the run so far."""
        return ClipUserResult(
            occupancy=self.occupancy,
            upper=self.upper,
            epsilon=self.epsilon,
            kept=self.kept[:-1].copy(),
            g1=self.g1,
            k=int(self.grids.max(initial=0)),
            error_bound=self.error_bound,
            initial_error=self.initial_error,
            error=self.errors(),
            suppressed_entries=np.asarray(self.order, dtype=np.int64),
            grids=self.grids.astype(np.int64, copy=False),
            model=self.model,
        )
