"""CLIP-USER (Algorithm 1 of the composition paper, Sec. V-B1), as specified in docs/math.md §5.

Suppress whole ``(cell, vehicle)`` contributions of the vehicles that occupy the most cells,
stage by stage, while every cell's worst-case error (eq. 13) stays ``<= E``. The composed release
is then ``K * eps``-DP (Prop. V.1).

Per cell we keep ``M``, ``S`` and its entries sorted by count (descending) with the positions of
the first three kept ones, so "largest kept count without vehicle ``l``" is O(1) and a candidate
``E_g(l)`` is O(1) (no grid is recomputed from scratch).

Stage users are processed in rounds (windows of consecutive stage users, numpy): every user picks
its argmin against the round-start state minus the speculated picks of the window users before
it, and the picks are iterated. If the picks first change at user ``r``, users ``0..r`` are exact
(induction on the user order), so the fixed point, cut at the first halting user, is exactly
what the sequential algorithm does. Each pass only re-evaluates the cells whose choosers changed.
With few cells (a window's users share nearly every cell) a plain sequential loop is used.
The ``"compiled"`` strategy (the default through ``"auto"``) runs the sequential loop as a numba
kernel over the same arrays (:mod:`stream_dp.dp.clip_user_kernel`); ``"numpy"`` is the mix of
batched rounds and sequential loop above (the default before the kernel). All paths give
identical results (tested against ``tests/reference_clip_user.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, get_args

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp.error_bars import ErrorModel
from stream_dp.dp.grid_error import grid_error
from stream_dp.dp.occupancy import Occupancy

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]
Strategy = Literal["auto", "compiled", "numpy", "batched", "sequential"]

#: ``E_g(l) > E`` is decided as ``E_g(l) > E * (1 + HALT_RTOL)`` (docs/math.md §5.1, step 4).
HALT_RTOL = 1e-12

_START_WINDOW = 64
_MAX_WINDOW = 4096
_MIN_PROGRESS = 16  # users per pass below which "numpy" switches to the sequential loop
_SEQUENTIAL_RUN = 256
_MIN_CELLS_FOR_BATCHES = 256
_MAX_ITERATIONS = 16
_NOT_IN_WINDOW = np.iinfo(np.int64).max


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
    #: The error function used (None: eq. 13 with ``eps/2`` each, see :mod:`.error_bars`).
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


def _candidate_error(
    upper: float, u2: float, model: ErrorModel, top: int, kept: int, total: int
) -> float:
    """Scalar eq. (13) (generalised by ``model``); the same floating-point operations, in the
    same order, as :func:`stream_dp.dp.grid_error.grid_error`, so all paths break ties
    identically."""
    if kept <= 0:
        return math.inf
    kept_f = float(kept)
    total_f = float(total)
    mean_bias = upper * (1.0 - kept_f / total_f)
    if kept == total:
        var_bias = 0.0
    elif total < 2 * kept:
        var_bias = u2 * kept * (total - kept) / (total_f * total_f)
    elif total % 2 == 0:
        var_bias = u2 / 4.0
    else:
        var_bias = u2 / 4.0 * (1.0 - 1.0 / (total_f * total_f))
    mean_sens = upper * top / kept_f
    if kept > 2 * top:
        var_sens = u2 * top * (kept - top) / (kept_f * kept_f)
    elif kept % 2 == 0:
        var_sens = u2 / 4.0
    else:
        var_sens = u2 / 4.0 * (1.0 - 1.0 / (kept_f * kept_f))
    eps_m, eps_v, weight, q = model.kernel_args()
    return mean_bias + weight * var_bias + q * mean_sens / eps_m + weight * (q * var_sens / eps_v)


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
    strategy: Strategy = "auto",
    model: ErrorModel | None = None,
) -> ClipUserResult:
    """Run CLIP-USER (Algorithm 1; docs/math.md §5.1).

    ``E = error_bound`` if given (footnote 3), else the largest initial cell error (eq. 12).
    Stages take the vehicles with ``G_l == max G`` in ascending id; each suppresses itself in
    the cell minimising ``E_g(l)`` (eq. 13; ties to the smallest cell id) unless that exceeds
    ``E``, which halts. A cell's last kept vehicle is never suppressed (its error is +inf).
    ``strategy`` only selects the evaluation scheme (identical results); keep ``"auto"``
    (= ``"compiled"``, the numba kernel). Uncompiled paths: ``"numpy"`` (batched rounds with a
    sequential fallback; the default before the kernel), ``"batched"`` (batched rounds only)
    and ``"sequential"`` (a Python loop). ``model``: the error function (default eq. 13 with
    ``eps/2`` per statistic; see :class:`~stream_dp.dp.error_bars.ErrorModel`).
    """
    if not upper > 0 or not epsilon > 0:
        raise ValueError("upper and epsilon must be positive")
    if error_bound is not None and not error_bound >= 0:
        raise ValueError("error_bound must be non-negative")
    if strategy not in get_args(Strategy):
        raise ValueError(f"unknown strategy {strategy!r}")
    initial_error = cell_errors(occupancy, None, upper, epsilon, model)
    bound = float(error_bound) if error_bound is not None else float(initial_error.max(initial=0))
    run = _Suppressor(occupancy, upper, epsilon, bound * (1.0 + HALT_RTOL), model)
    g1 = int(run.grids.max(initial=0))
    run.run(strategy)
    kept = run.kept[:-1].copy()
    return ClipUserResult(
        occupancy=occupancy,
        upper=float(upper),
        epsilon=float(epsilon),
        kept=kept,
        g1=g1,
        k=int(run.grids.max(initial=0)),
        error_bound=bound,
        initial_error=initial_error,
        error=run.errors(),
        suppressed_entries=np.asarray(run.order, dtype=np.int64),
        grids=run.grids.astype(np.int64, copy=False),
        model=model,
    )


def _segment_argmin(values: FloatArray, seg_start: IntArray, owner: IntArray) -> IntArray:
    """Per contiguous segment, the index of the first minimum (segments are non-empty)."""
    seg_min = np.minimum.reduceat(values, seg_start)
    index = np.where(values == seg_min[owner], np.arange(len(values)), len(values))
    return np.minimum.reduceat(index, seg_start)


@dataclass(frozen=True)
class _StaticLists:
    cell_of: list[int]
    count: list[int]
    by_vehicle: list[int]
    vehicle_start: list[int]
    position: list[int]
    sorted_count: list[int]
    total: list[int]


def _by_cell_then_count_descending(occ: Occupancy) -> IntArray:
    """Entry order by cell, then count descending, then entry order (entries are grouped by
    cell)."""
    from stream_dp.dp.array_kernels import order_by_pair  # numba: imported on first use

    top = int(occ.count.max(initial=0))
    return order_by_pair(occ.cell_index, top - occ.count, len(occ.cells), top + 1)


def _by_vehicle(occ: Occupancy) -> IntArray:
    """Entry order by vehicle (stable: then by cell)."""
    from stream_dp.dp.array_kernels import stable_order_by

    return stable_order_by(occ.vehicle_index, len(occ.vehicles))


def _by_grids_descending(grids: IntArray) -> IntArray:
    """Vehicles by ``G_l`` descending, ties in ascending vehicle order."""
    from stream_dp.dp.array_kernels import stable_order_by

    top = int(grids.max(initial=0))
    return stable_order_by(top - grids, top + 1)


class _Suppressor:
    """Mutable state of one CLIP-USER run.

    Entry ``n`` (one past the last) is a sentinel: never kept, count 0, at position ``n``.
    ``top3[g]`` holds the positions (in ``by_cell`` order) of the first three kept entries of
    cell ``g``, padded with ``n``.
    """

    def __init__(
        self,
        occ: Occupancy,
        upper: float,
        epsilon: float,
        limit: float,
        model: ErrorModel | None = None,
    ) -> None:
        n = occ.n_entries
        n_cells = len(occ.cells)
        self.n = n
        self.upper = float(upper)
        self.u2 = float(upper) ** 2
        self.epsilon = float(epsilon)
        self.model = model  # None: eq. 13 (the numpy paths' legacy operations)
        self.kernel_model = model or ErrorModel.split(epsilon)  # bit-identical to eq. 13
        self.limit = limit
        self.cell_of = occ.cell_index
        self.count = occ.count
        #: Per-slot (``by_vehicle`` order) cell, count and position, when already built.
        self._slots: tuple[IntArray, IntArray, IntArray] | None = None
        top = int(occ.count.max(initial=0))
        from stream_dp.dp.array_kernels import counting_sort_fits  # numba: on first use

        if n and counting_sort_fits(n, n_cells * (top + 1)):
            from stream_dp.dp.clip_user_kernel import suppressor_layout

            (self.grids, self.vehicle_start, self.by_vehicle, self.by_cell, self.position,
             self.sorted_count, cell_start, *slots) = suppressor_layout(
                occ.cell_index.astype(np.int64, copy=False),
                occ.vehicle_index.astype(np.int64, copy=False),
                occ.count.astype(np.int64, copy=False),
                n_cells, len(occ.vehicles), top,
            )  # fmt: skip
            self._slots = (slots[0], slots[1], slots[2])
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
        self.cell_end = cell_start[1:]
        first3 = cell_start[:-1, None] + np.arange(3)
        self.top3 = np.where(first3 < self.cell_end[:, None], first3, n)
        self.total = occ.total_per_cell()
        self.kept_sum = self.total.copy()
        self.kept = np.ones(n + 1, dtype=bool)
        self.kept[n] = False
        self.kept_sorted = self.kept.copy()
        self.cand_of_entry = np.full(n + 1, -1, dtype=np.int64)
        self.order: list[int] | IntArray = []

    def errors(self) -> FloatArray:
        """Per-cell eq. (13) in the current state (``cell_errors`` of ``kept``, read off the
        per-cell state: ``top3[g, 0]`` is the largest kept count's position)."""
        top = self.sorted_count[self.top3[:, 0]]
        return grid_error(self.upper, self.epsilon, top, self.kept_sum, self.total, self.model)

    @cached_property
    def _lists(self) -> _StaticLists:
        """Python-list copies of the static arrays, for the sequential loop."""
        return _StaticLists(
            cell_of=self.cell_of.tolist(),
            count=self.count.tolist(),
            by_vehicle=self.by_vehicle.tolist(),
            vehicle_start=self.vehicle_start.tolist(),
            position=self.position.tolist(),
            sorted_count=self.sorted_count.tolist(),
            total=self.total.tolist(),
        )

    def run(self, strategy: Strategy) -> None:
        """Stages until ``max G <= 1`` or a halt (docs/math.md §5.1 steps 2-5)."""
        if strategy in ("auto", "compiled"):
            self._run_compiled()
            return
        while True:
            gmax = int(self.grids.max(initial=0))
            if gmax <= 1:
                return
            if self._stage(np.flatnonzero(self.grids == gmax), strategy):
                return

    def _stage(self, stage: IntArray, strategy: Strategy) -> bool:
        """One stage, users in ascending index; True if the run halted.

        ``numpy`` runs batched rounds while they make enough progress per pass and falls back
        to the sequential loop for a while when choices conflict too much (few cells).
        """
        i, window, n_users, sequential = 0, _START_WINDOW, len(stage), 0
        if strategy == "numpy" and len(self.total) < _MIN_CELLS_FOR_BATCHES:
            strategy = "sequential"  # a window's users would share nearly every cell
        while i < n_users:
            if strategy == "sequential" or sequential > 0:
                stop = n_users if strategy == "sequential" else min(n_users, i + sequential)
                for vehicle in stage[i:stop].tolist():
                    if not self._one(vehicle):
                        return True
                i, sequential = stop, 0
                continue
            size = n_users - i if strategy == "batched" else min(window, n_users - i)
            done, halted, passes = self._round(stage[i : i + size])
            if halted:
                return True
            i += done
            if strategy == "numpy" and done < _MIN_PROGRESS * passes:
                sequential, window = _SEQUENTIAL_RUN, _START_WINDOW
            else:
                window = min(_MAX_WINDOW, 2 * size if done == size else max(2 * done, 16))
        return False

    def _run_compiled(self) -> None:
        """The sequential algorithm as one numba kernel over this run's arrays (imported on
        first use: importing numba and loading the cached kernel take a fraction of a second).
        The kernel reads each vehicle's entries from contiguous copies in ``by_vehicle`` order.
        """
        from stream_dp.dp.clip_user_kernel import run_sequential

        by_vehicle = self.by_vehicle.astype(np.int64, copy=False)
        slots = self._slots or (
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
            *self.kernel_model.kernel_args(),
            float(self.limit),
        )

    # -- sequential path ---------------------------------------------------------------------

    def _one(self, vehicle: int) -> bool:
        """Process one stage user; False if it halts the run (docs/math.md §5.1 steps 3-4)."""
        best, best_entry = math.inf, -1
        kept, top3, kept_sum, static = self.kept, self.top3, self.kept_sum, self._lists
        for i in range(static.vehicle_start[vehicle], static.vehicle_start[vehicle + 1]):
            entry = static.by_vehicle[i]
            if not kept[entry]:
                continue
            cell = static.cell_of[entry]
            first = int(top3[cell, 0])
            top_pos = int(top3[cell, 1]) if first == static.position[entry] else first
            value = _candidate_error(
                self.upper,
                self.u2,
                self.kernel_model,
                static.sorted_count[top_pos],
                int(kept_sum[cell]) - static.count[entry],
                static.total[cell],
            )
            if value < best:
                best, best_entry = value, entry
        if best_entry < 0 or best == math.inf or best > self.limit:
            return False
        cell, pos = static.cell_of[best_entry], static.position[best_entry]
        kept[best_entry] = False
        self.kept_sorted[pos] = False
        kept_sum[cell] -= static.count[best_entry]
        self.grids[vehicle] -= 1
        self.order.append(best_entry)
        if pos in top3[cell].tolist():
            self._refill(cell)
        return True

    def _refill(self, cell: int) -> None:
        """Restore ``top3[cell]`` after removals (its kept positions only move forward)."""
        n = self.n
        old = [p for p in self.top3[cell].tolist() if p != n]
        keep = [p for p in old if self.kept_sorted[p]]
        if len(old) == 3:
            start, end = old[2] + 1, int(self.cell_end[cell])
            while len(keep) < 3 and start < end:
                stop = min(end, start + 64)
                hits = np.flatnonzero(self.kept_sorted[start:stop]) + start
                keep.extend(hits[: 3 - len(keep)].tolist())
                start = stop
        self.top3[cell] = keep + [n] * (3 - len(keep))

    # -- batched path ------------------------------------------------------------------------

    def _round(self, users: IntArray) -> tuple[int, bool, int]:
        """Process a prefix of the window ``users`` exactly.

        Returns (users processed, halted, evaluation passes).

        Speculate a choice per user, evaluate every user against the round-start state minus
        the speculated choices of the window users before it, and iterate. If the new choices
        first differ from the speculation at user ``r``, users ``0..r`` are exact (induction on
        the user order), so a fixed point is the sequential result. Per iteration only the
        cells whose choosers changed are re-evaluated.
        """
        cand = _Candidates(self, users)
        spec = cand.start()
        cand.speculate(np.empty(0, np.int64), spec)
        for iteration in range(_MAX_ITERATIONS):
            pick = cand.update(cand.runs_of(cand.touched))
            unresolved = np.bincount(cand.owner[cand.unresolved], minlength=cand.width) > 0
            differs = pick != spec
            problem = differs | unresolved
            if not problem.any():
                return *self._accept(users, cand, pick, cand.width), iteration + 2
            first = int(np.argmax(problem))
            if unresolved[first]:
                return *self._accept(users, cand, pick, first), iteration + 2
            if iteration == _MAX_ITERATIONS - 1:
                return *self._accept(users, cand, pick, first + 1), iteration + 2
            cand.speculate(spec[differs], pick[differs])
            spec = pick
        raise AssertionError("unreachable")

    def _accept(
        self, users: IntArray, cand: _Candidates, pick: IntArray, exact: int
    ) -> tuple[int, bool]:
        """Apply the exact prefix ``pick[:exact]``, up to the first halting user."""
        best = cand.value[pick[:exact]]
        halts = np.flatnonzero(np.isinf(best) | (best > self.limit))
        done = int(halts[0]) if len(halts) else exact
        self._apply(cand.entry[pick[:done]], users[:done])
        return done, bool(len(halts))

    def _apply(self, entries: IntArray, vehicles: IntArray) -> None:
        """Suppress ``entries`` (distinct), one per vehicle of ``vehicles``, in order."""
        if len(entries) == 0:
            return
        cells = self.cell_of[entries]
        pos = self.position[entries]
        self.kept[entries] = False
        self.kept_sorted[pos] = False
        np.subtract.at(self.kept_sum, cells, self.count[entries])
        self.grids[vehicles] -= 1
        self.order.extend(entries.tolist())
        hit = (self.top3[cells] == pos[:, None]).any(axis=1)
        self._refill_many(np.unique(cells[hit]))

    def _refill_many(self, cells: IntArray, reach: int = 16) -> None:
        """Vectorised :meth:`_refill` looking ``reach`` positions past the old third kept
        entry; cells that need to look further use the scalar version."""
        n = self.n
        old = self.top3[cells]
        end = self.cell_end[cells]
        start = old[:, 2] + 1  # only meaningful where the cell had three kept entries
        scan = start[:, None] + np.arange(reach)
        scan = np.where((old[:, 2:3] != n) & (scan < end[:, None]), scan, n)
        position = np.concatenate((old, scan), axis=1)
        alive = self.kept_sorted[position]  # the sentinel n is never kept
        rank = np.cumsum(alive, axis=1)
        found = rank[:, -1]
        rows = np.arange(len(cells))
        new = np.full((len(cells), 3), n, dtype=np.int64)
        for k in range(3):
            column = np.argmax(alive & (rank == k + 1), axis=1)
            new[:, k] = np.where(found > k, position[rows, column], n)
        further = (found < 3) & (old[:, 2] != n) & (start + reach < end)
        self.top3[cells[~further]] = new[~further]
        for cell in cells[further].tolist():
            self._refill(cell)


class _Candidates:
    """The candidate entries ``(user, cell)`` of one round and their speculative errors.

    Candidates are grouped by user (``owner``, window rank) for the argmin and, through
    ``order``, by cell in user order for the removed-count prefix sums. ``top_cand[k]`` is
    the candidate holding the cell's ``k``-th largest kept count (-1 if its vehicle is not in
    the window), ``top_owner[k]`` that candidate's owner.
    """

    def __init__(self, run: _Suppressor, users: IntArray) -> None:
        self.run = run
        self.width = width = len(users)
        starts = run.vehicle_start[users]
        lengths = run.vehicle_start[users + 1] - starts
        offsets = np.cumsum(lengths) - lengths
        flat = np.arange(int(lengths.sum())) - np.repeat(offsets - starts, lengths)
        entry = run.by_vehicle[flat]
        owner = np.repeat(np.arange(width), lengths)
        alive = run.kept[entry]
        self.entry = entry = entry[alive]
        self.owner = owner = owner[alive]
        n = len(entry)
        self.seg_start = np.searchsorted(owner, np.arange(width))
        cell = run.cell_of[entry]
        self.cell = cell
        self.count = run.count[entry]
        self.total = run.total[cell]
        self.base = run.kept_sum[cell] - self.count  # S without the candidate, round start
        top3 = run.top3[cell]
        run.cand_of_entry[entry] = np.arange(n)
        self.top_cand = [run.cand_of_entry[run.by_cell[top3[:, k]]] for k in range(3)]
        run.cand_of_entry[entry] = -1
        owner_or_none = np.append(owner, _NOT_IN_WINDOW)  # index -1: not in the window
        self.top_owner = [owner_or_none[c] for c in self.top_cand]
        self.top_count = [run.sorted_count[top3[:, k]] for k in range(3)]
        cell_key = cell.astype(np.uint16) if len(run.total) <= 1 << 16 else cell
        self.order = np.argsort(cell_key, kind="stable")  # (cell, owner) order
        cell_sorted = cell[self.order]
        new_run = np.ones(n, dtype=bool)
        new_run[1:] = cell_sorted[1:] != cell_sorted[:-1]
        self.run_first = np.flatnonzero(new_run)
        self.run_cell = cell_sorted[self.run_first]
        self.run_end = np.append(self.run_first[1:], n)
        self.value = np.empty(n, dtype=np.float64)
        self.used_removed = np.full(n, -1, dtype=np.int64)
        self.used_top = np.full(n, -1, dtype=np.int64)
        self.unresolved = np.zeros(n, dtype=bool)
        self.weight = np.zeros(n, dtype=np.int64)
        self.is_spec = np.zeros(n + 1, dtype=bool)  # index -1 (= n): never
        self.touched = np.empty(0, dtype=np.int64)

    def start(self) -> IntArray:
        """Evaluate against the round-start state (no speculation); return the picks."""
        own_first = self.top_cand[0] == np.arange(len(self.entry))
        top = np.where(own_first, self.top_count[1], self.top_count[0])
        run = self.run
        self.value[:] = grid_error(run.upper, run.epsilon, top, self.base, self.total, run.model)
        self.used_removed[:] = 0
        self.used_top[:] = top
        return _segment_argmin(self.value, self.seg_start, self.owner)

    def speculate(self, old: IntArray, new: IntArray) -> None:
        """Some users now speculate candidate ``new`` instead of ``old``."""
        self.weight[old] = 0
        self.is_spec[old] = False
        self.weight[new] = self.count[new]
        self.is_spec[new] = True
        self.touched = np.unique(np.concatenate((self.cell[old], self.cell[new])))

    def runs_of(self, cells: IntArray) -> IntArray:
        """Indices of the cell runs of ``cells`` (each is a candidate cell)."""
        return np.searchsorted(self.run_cell, cells)

    def update(self, runs: IntArray) -> IntArray:
        """Re-evaluate the candidates of the cell runs ``runs`` given the speculation;
        return every user's argmin candidate (ties: first = smallest cell)."""
        lengths = self.run_end[runs] - self.run_first[runs]
        offsets = np.cumsum(lengths) - lengths
        flat = np.arange(int(lengths.sum())) - np.repeat(offsets - self.run_first[runs], lengths)
        idx = self.order[flat]
        weight = self.weight[idx]
        cum = np.cumsum(weight) - weight
        removed = cum - np.repeat(cum[offsets], lengths)
        owner = self.owner[idx]
        free = []
        for cand, cand_owner in zip(self.top_cand, self.top_owner, strict=True):
            holder = cand[idx]
            gone = (holder == idx) | ((cand_owner[idx] < owner) & self.is_spec[holder])
            free.append(~gone)
        counts = [c[idx] for c in self.top_count]
        top = np.where(free[0], counts[0], np.where(free[1], counts[1], counts[2]))
        self.unresolved[idx] = ~(free[0] | free[1] | free[2])
        changed = (removed != self.used_removed[idx]) | (top != self.used_top[idx])
        idx, removed, top = idx[changed], removed[changed], top[changed]
        self.value[idx] = grid_error(
            self.run.upper,
            self.run.epsilon,
            top,
            self.base[idx] - removed,
            self.total[idx],
            self.run.model,
        )
        self.used_removed[idx] = removed
        self.used_top[idx] = top
        return _segment_argmin(self.value, self.seg_start, self.owner)
