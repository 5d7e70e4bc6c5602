"""CLIP-USER's uncompiled evaluation schemes (docs/math.md §5.1), over the state of
:class:`~stream_dp.dp.clip_user_run.ClipUserRun`, with results identical to its compiled kernel.

:func:`clip_user_by_rounds` (the numpy form of :data:`stream_dp.dp.kernels.CLIP_USER`) runs
``"numpy"`` where the registry picks numpy (a process without numba, an input of one
window's size: ``stream-dp plan``); :mod:`tests.support.clip_user_strategies` runs every
scheme for the tests and benchmarks:

- ``"sequential"``: a plain Python loop over the stage users.
- ``"batched"``: rounds over windows of consecutive stage users, in numpy. Every user picks
  its argmin against the round-start state minus the speculated picks of the window users
  before it, and the picks are iterated. If the picks first change at user ``r``, users
  ``0..r`` are exact (induction on the user order), so the fixed point, cut at the first
  halting user, is exactly what the sequential algorithm does. Each pass only re-evaluates
  the cells whose choosers changed.
- ``"numpy"``: batched rounds while they make enough progress per pass, the sequential loop
  for a while when choices conflict too much, and throughout with few cells (a window's users
  then share nearly every cell).

Every candidate's error is :func:`stream_dp.dp.cell_error.cell_error` (scalar) or
:func:`~stream_dp.dp.grid_error.grid_error` (its compiled loop or the same operations in
numpy), the operations of the kernel, so ties break identically.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp.cell_error import cell_error
from stream_dp.dp.clip_user_run import ClipUserResult, ClipUserRun
from stream_dp.dp.grid_error import ErrorModel, grid_error
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.ordering import sorted_distinct

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
Uncompiled = Literal["numpy", "batched", "sequential"]

_START_WINDOW = 64
_MAX_WINDOW = 4096
_MIN_PROGRESS = 16  # users per pass below which "numpy" switches to the sequential loop
_SEQUENTIAL_RUN = 256
_MIN_CELLS_FOR_BATCHES = 256
_MAX_ITERATIONS = 16
_NOT_IN_WINDOW = np.iinfo(np.int64).max


def _segment_argmin(values: FloatArray, seg_start: IntArray, owner: IntArray) -> IntArray:
    """Per contiguous segment, the index of the first minimum (segments are non-empty)."""
    seg_min = np.minimum.reduceat(values, seg_start)
    index = np.where(values == seg_min[owner], np.arange(len(values)), len(values))
    return np.minimum.reduceat(index, seg_start)


@dataclass(frozen=True)
class _StaticLists:
    """Python-list copies of the run's static arrays (faster to index one at a time)."""

    cell_of: list[int]
    count: list[int]
    by_vehicle: list[int]
    vehicle_start: list[int]
    position: list[int]
    sorted_count: list[int]
    total: list[int]


class UncompiledRun(ClipUserRun):
    """A CLIP-USER run evaluated by an uncompiled strategy (see the module docstring)."""

    @cached_property
    def cand_of_entry(self) -> IntArray:
        """Scratch: each entry's candidate in the current round (-1: none)."""
        return np.full(self.n + 1, -1, dtype=np.int64)

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

    def run_strategy(self, strategy: Uncompiled) -> None:
        """Stages until ``max G <= 1`` or a halt (docs/math.md §5.1 steps 2-5)."""
        while True:
            gmax = int(self.grids.max(initial=0))
            if gmax <= 1:
                return
            if self._stage(np.flatnonzero(self.grids == gmax), strategy):
                return

    def _stage(self, stage: IntArray, strategy: Uncompiled) -> bool:
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

    # -- sequential path ---------------------------------------------------------------------

    def _one(self, vehicle: int) -> bool:
        """Process one stage user; False if it halts the run (docs/math.md §5.1 steps 3-4)."""
        best, best_entry = math.inf, -1
        kept, top3, kept_sum, static = self.kept, self.top3, self.kept_sum, self._lists
        model = self.model.kernel_args()
        for i in range(static.vehicle_start[vehicle], static.vehicle_start[vehicle + 1]):
            entry = static.by_vehicle[i]
            if not kept[entry]:
                continue
            cell = static.cell_of[entry]
            first = int(top3[cell, 0])
            top_pos = int(top3[cell, 1]) if first == static.position[entry] else first
            value = cell_error(
                self.upper,
                self.u2,
                *model,
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
        self._refill_many(sorted_distinct(cells[hit]))

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

    def __init__(self, run: UncompiledRun, users: IntArray) -> None:
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
        self.touched = sorted_distinct(np.concatenate((self.cell[old], self.cell[new])))

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


def clip_user_by_rounds(
    occupancy: Occupancy,
    upper: float,
    epsilon: float,
    error_bound: float | None,
    model: ErrorModel | None,
) -> ClipUserResult:
    """:data:`~stream_dp.dp.kernels.CLIP_USER` in numpy: the ``"numpy"`` scheme."""
    run = UncompiledRun(occupancy, upper, epsilon, error_bound, model)
    run.run_strategy("numpy")
    return run.result()
