"""CLIP-USER (Algorithm 1 of the composition paper, Sec. V-B1), as specified in docs/math.md §5.

Suppress whole ``(cell, vehicle)`` contributions of the vehicles that occupy the most cells,
stage by stage, while every cell's worst-case error (eq. 13) stays ``<= E``. The composed release
is then ``K * eps``-DP (Prop. V.1).

Per cell we keep ``M``, ``S`` and its entries sorted by count (descending) with the positions of
the first three kept ones, so "largest kept count without vehicle ``l``" is O(1) and a candidate
``E_g(l)`` is O(1) (no grid is recomputed from scratch). :class:`ClipUserRun` builds that state
and runs the exact sequential algorithm as one numba kernel over it
(:mod:`stream_dp.dp.clip_user_kernel`). A process without numba runs one window's occupancy
by the uncompiled schemes of :mod:`stream_dp.dp.clip_user_rounds` instead (batched numpy
rounds and a plain Python loop over the same state; :mod:`stream_dp.dp.kernel_choice`); the
tests check that they, and the plain transcription
:mod:`stream_dp.testing.clip_user_reference`, give identical results.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp import kernel_choice
from stream_dp.dp.grid_error import ErrorModel, grid_error
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.ordering import counting_sort_fits, order_by_pair, stable_order

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


def clip_user(
    occupancy: Occupancy,
    upper: float,
    epsilon: float,
    error_bound: float | None = None,
    *,
    model: ErrorModel | None = None,
) -> ClipUserResult:
    """Run CLIP-USER (Algorithm 1; docs/math.md §5.1).

    ``E = error_bound`` if given (footnote 3), else the largest initial cell error (eq. 12).
    Stages take the vehicles with ``G_l == max G`` in ascending id; each suppresses itself in
    the cell minimising ``E_g(l)`` (eq. 13; ties to the smallest cell id) unless that exceeds
    ``E``, which halts. A cell's last kept vehicle is never suppressed (its error is +inf).
    ``model``: the error function (default eq. 13 with ``eps/2`` per statistic; see
    :class:`~stream_dp.dp.grid_error.ErrorModel`).
    """
    if kernel_choice.use_kernels(occupancy.n_entries):
        run = ClipUserRun(occupancy, upper, epsilon, error_bound, model)
        run.run()
        return run.result()
    from stream_dp.dp.clip_user_rounds import UncompiledRun  # no numba: its numpy rounds

    uncompiled = UncompiledRun(occupancy, upper, epsilon, error_bound, model)
    uncompiled.run_strategy("numpy")
    return uncompiled.result()


def _by_cell_then_count_descending(occ: Occupancy) -> IntArray:
    """Entry order by cell, then count descending, then entry order (entries are grouped by
    cell)."""
    top = int(occ.count.max(initial=0))
    return order_by_pair(occ.cell_index, top - occ.count, len(occ.cells), top + 1)


def _by_vehicle(occ: Occupancy) -> IntArray:
    """Entry order by vehicle (stable: then by cell)."""
    return stable_order(occ.vehicle_index, len(occ.vehicles))


def _by_grids_descending(grids: IntArray) -> IntArray:
    """Vehicles by ``G_l`` descending, ties in ascending vehicle order."""
    top = int(grids.max(initial=0))
    return stable_order(top - grids, top + 1)


class ClipUserRun:
    """Mutable state of one CLIP-USER run (docs/math.md §5.1); :meth:`run` is the compiled
    algorithm. The attributes are public so the uncompiled schemes of
    :mod:`stream_dp.dp.clip_user_rounds` can run over the same state.

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
        #: Per-slot (``by_vehicle`` order) cell, count and position, when already built.
        self.slots: tuple[IntArray, IntArray, IntArray] | None = None
        top = int(occ.count.max(initial=0))
        if n and kernel_choice.use_kernels(n) and counting_sort_fits(n, n_cells * (top + 1)):
            from stream_dp.dp.clip_user_kernel import suppressor_layout

            (self.grids, self.vehicle_start, self.by_vehicle, self.by_cell, self.position,
             self.sorted_count, cell_start, *slots) = suppressor_layout(
                occ.cell_index.astype(np.int64, copy=False),
                occ.vehicle_index.astype(np.int64, copy=False),
                occ.count.astype(np.int64, copy=False),
                n_cells, len(occ.vehicles), top,
            )  # fmt: skip
            self.slots = (slots[0], slots[1], slots[2])
        else:
            self.by_vehicle = _by_vehicle(occ)  # then ascending cell
            self.grids = occ.grids_per_vehicle()
            self.vehicle_start = np.concatenate(([0], np.cumsum(self.grids)))
            by_cell = _by_cell_then_count_descending(occ)
            self.by_cell = np.append(by_cell, n)
            self.position = np.empty(n + 1, dtype=np.int64)
            self.position[self.by_cell] = np.arange(n + 1)
            self.sorted_count = np.append(occ.count[by_cell], 0)
            cell_start = np.searchsorted(occ.cell_index, np.arange(n_cells + 1))  # by cell
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

    def run(self) -> None:
        """Stages until ``max G <= 1`` or a halt (docs/math.md §5.1 steps 2-5), as one numba
        kernel over this run's arrays. The kernel reads each vehicle's entries from contiguous
        copies in ``by_vehicle`` order."""
        from stream_dp.dp.clip_user_kernel import run_sequential

        by_vehicle = self.by_vehicle.astype(np.int64, copy=False)
        slots = self.slots or (
            self.cell_of[by_vehicle].astype(np.int64, copy=False),
            self.count[by_vehicle].astype(np.int64, copy=False),
            self.position[by_vehicle],
        )
        self.order = run_sequential(
            *slots,
            by_vehicle,
            self.vehicle_start.astype(np.int64, copy=False),
            _by_grids_descending(self.grids),
            self.sorted_count.astype(np.int64, copy=False),
            self.cell_end.astype(np.int64, copy=False),
            self.total.astype(np.int64, copy=False),
            self.top3,
            self.kept_sum,
            self.kept,
            self.kept_sorted,
            self.grids,
            self.upper,
            self.u2,
            *self.model.kernel_args(),
            float(self.limit),
        )
