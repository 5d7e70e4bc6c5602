"""Accuracy-targeted adaptive cells, chosen from the public occupancy only.

Per window, readings observed in H3 cells at the finest resolution ``R`` are grouped into
released cells with resolutions between ``R0`` and ``R`` so that every reading belongs to at
most one released record and each record's predicted ``mean_error`` (:mod:`.error_bars`) is at
most the target ``T``:

- A *unit* is a set of readings under one H3 cell; at level ``R`` the units are the observed
  cells. A unit *passes* when it has at least ``min_vehicles`` vehicles and its predicted
  ``mean_error`` -- the clipped mean with the best pseudo-user cap (docs/math.md §6) and
  nothing suppressed -- is ``<= T``.
- ``shape="compact"``: if every unit under a parent passes, they are released as they are;
  otherwise they all merge into the parent unit, one level up (siblings merge together: the
  released set has the shape of ``h3.compact_cells``, no two released cells overlap).
- ``shape="remainder"``: passing units are released; the failing ones pool into their parent,
  which is released (if it passes) as the *remainder* of its released children. A parent is
  split this way only when that covers at least ``1 - DETAIL_SLACK`` of the readings that
  merging all its children would (the remainder alone may miss T); otherwise its children
  all merge, as in ``compact``.
- At ``R0`` passing units are released and failing ones are withheld: no record, no budget.

Everything here is a function of the occupancy (cells, vehicles, counts), which is public,
so the choice costs no privacy; CLIP-USER, the cap and the noise then run on the chosen cells.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp import kernels
from stream_dp.dp.epsilon_grid import EPSILON_STEP
from stream_dp.dp.error_bars import LN20, SAMPLER_RTOL
from stream_dp.dp.ordering import counting_sort_fits, grouped, order_by_pair

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
Shape = Literal["compact", "remainder"]
#: ``remainder`` shape: a parent is split into its passing children (+ remainder) when that
#: covers at least ``1 - DETAIL_SLACK`` of the readings releasing the whole parent would.
DETAIL_SLACK = 0.2


@dataclass(frozen=True)
class AdaptiveCells:
    """The chosen released cells of one window.

    ``unit_of_cell[i]``: index into ``names`` of the released cell holding observed cell ``i``
    (-1: withheld). ``names`` are sorted; ``resolution`` and ``remainder`` are per released
    cell. ``predicted_error`` is the predicted ``mean_error`` per released cell.
    """

    names: tuple[str, ...]
    resolution: IntArray
    remainder: NDArray[np.bool_]
    predicted_error: FloatArray
    unit_of_cell: IntArray

    @property
    def withheld_cells(self) -> IntArray:
        """Observed cells (indices) whose readings are withheld."""
        return np.flatnonzero(self.unit_of_cell < 0)


def best_cap_mean_error(
    unit: IntArray,
    count: IntArray,
    n_units: int,
    upper: float,
    mean_epsilon: float | FloatArray,
    prefix_limit: int | None,
) -> FloatArray:
    """Per unit, ``min_c U (1 - S(c)/M) + ln20 U c / (S(c) eps_mean)`` over the caps the
    pseudo-user step allows (``c`` in [min, max] of the unit's per-vehicle counts; ``c <= C``
    or ``c = max``), ``S(c) = sum_l min(m_l, c)``. ``unit``/``count``: one entry per
    (unit, vehicle) with that vehicle's readings in the unit. Between consecutive distinct
    counts the objective is concave in ``c`` (``c / (P + R c)`` is concave, the bias linear),
    so its minimum is at a distinct count, at ``C`` or at the max; +inf for an empty unit."""
    out = np.full(n_units, np.inf)
    if len(unit) == 0:
        return out
    from stream_dp.dp import adaptive_kernel  # numba: imported on first use

    unit, count = unit.astype(np.int64, copy=False), count.astype(np.int64, copy=False)
    width = int(count.max()) + 1
    limit = -1 if prefix_limit is None else int(prefix_limit)
    factor = LN20 * (1.0 + SAMPLER_RTOL)
    eps = np.broadcast_to(np.asarray(mean_epsilon, dtype=np.float64), (n_units,))
    eps = np.ascontiguousarray(eps)  # per unit (one ε for all, or a price's, §13.1)
    if TALLY_COUNTS and counting_sort_fits(len(unit), n_units * width):  # no order needed
        return adaptive_kernel.best_cap_by_counts(  # type: ignore[no-any-return]
            unit, count, n_units, width, upper, eps, limit, factor
        )
    order = order_by_pair(unit, count, n_units, width)
    return adaptive_kernel.best_cap_scan(  # type: ignore[no-any-return]
        unit[order], count[order], n_units, upper, eps, limit, factor
    )


#: Whether :func:`best_cap_mean_error` tallies each unit's counts where that is small
#: (:func:`~stream_dp.dp.adaptive_kernel.best_cap_by_counts`) instead of ordering the
#: entries; the tests switch it off to compare.
TALLY_COUNTS = True


@dataclass(frozen=True)
class _Rule:
    """What a unit must meet: predicted mean_error <= target, >= min_vehicles vehicles; with
    a ``price``, the ε it needs affordable to its vehicles (:class:`UnitPrice`)."""

    n_vehicles: int
    upper: float
    mean_epsilon: float
    prefix_limit: int | None
    target: float
    min_vehicles: int
    price: UnitPrice | None = None

    def passing(
        self,
        group: IntArray,
        vehicle: IntArray,
        count: IntArray,
        n_groups: int,
        select: NDArray[np.bool_] | None = None,
        unique: bool = False,
    ) -> tuple[FloatArray, NDArray[np.bool_]]:
        """Predicted error and pass flag of each group (entries: (group, vehicle, count);
        ``unique``: no (group, vehicle) repeats)."""
        if select is not None:
            group, vehicle, count = group[select], vehicle[select], count[select]
        if not unique:
            group, vehicle, count = _aggregate(group, vehicle, count, self.n_vehicles)
        if self.price is not None:
            return self.price.passing(group, vehicle, count, n_groups, self)
        err = best_cap_mean_error(
            group, count, n_groups, self.upper, self.mean_epsilon, self.prefix_limit
        )
        n_veh = np.bincount(group, minlength=n_groups)
        return err, (err <= self.target) & (n_veh >= self.min_vehicles)


@dataclass(frozen=True)
class UnitPrice:
    """The budget-aware pass test (docs/math.md §13.1): under a per-vehicle budget a unit
    passes when it meets T at the ε its vehicles can pay: the reading-weighted ``quantile`` of
    their ``room`` (indexed by vehicle), at most ``max_epsilon``, on the per-cell ε grid
    (:data:`~stream_dp.dp.epsilon_grid.EPSILON_STEP`), ``share`` of it on the mean.
    Public: counts, configuration and the ledger's rooms only."""

    room: FloatArray
    share: float
    max_epsilon: float
    quantile: float = 0.5

    def passing(
        self, group: IntArray, vehicle: IntArray, count: IntArray, n_groups: int, rule: _Rule
    ) -> tuple[FloatArray, NDArray[np.bool_]]:
        """Predicted error (at the price) and pass flag per group (entries unique per
        (group, vehicle))."""
        n_veh = np.bincount(group, minlength=n_groups)
        paid = self.pay(group, vehicle, count, n_groups, present=n_veh > 0)
        ceiling = np.minimum(paid, self.max_epsilon)
        ceiling = np.floor(ceiling / EPSILON_STEP + 1e-9) * EPSILON_STEP
        mean_eps = np.maximum(ceiling * self.share, 1e-300)  # no room: an error of +inf
        err = best_cap_mean_error(group, count, n_groups, rule.upper, mean_eps, rule.prefix_limit)
        err = np.where(ceiling > 0, err, np.inf)
        return err, (err <= rule.target) & (n_veh >= rule.min_vehicles)

    def pay(
        self,
        group: IntArray,
        vehicle: IntArray,
        count: IntArray,
        n_groups: int,
        present: NDArray[np.bool_] | None = None,
    ) -> FloatArray:
        """Per group, the reading-weighted ``quantile`` of its vehicles' rooms (0 for a group
        without entries). ``present``: per group whether it has an entry, when the caller
        knows it (one room for every vehicle then needs no pass over the entries)."""
        if not len(group):
            return np.zeros(n_groups)
        if self.room_rank[1] == 1:  # one room for every vehicle: each group's price is it
            if present is None:
                out = np.zeros(n_groups)
                out[group] = self.room[0]
                return out
            return np.where(present, float(self.room[0]), 0.0)
        order = self.order(group, vehicle, n_groups)
        quantile = kernels.WEIGHTED_QUANTILE.pick(len(group))
        return quantile(  # type: ignore[no-any-return]
            order, group, self.room[vehicle], count, n_groups, float(self.quantile)
        )

    def order(self, group: IntArray, vehicle: IntArray, n_groups: int) -> IntArray:
        """The stable order by (group, the vehicle's room), ``np.lexsort((room[vehicle],
        group))``, by counting sorts on the rooms' ranks (:attr:`room_rank`)."""
        rank, n_ranks = self.room_rank
        return order_by_pair(group, rank[vehicle], max(n_groups, 1), n_ranks)

    @cached_property
    def room_rank(self) -> tuple[IntArray, int]:
        """Per vehicle, the rank of its room among the distinct rooms (equal rooms: equal
        ranks), and how many distinct rooms there are: ordering by it orders by room."""
        distinct, rank = np.unique(self.room, return_inverse=True)
        return rank.astype(np.int64).reshape(-1), max(len(distinct), 1)


@dataclass(frozen=True)
class BudgetChoice:
    """What a vehicle budget changes in the choice (docs/math.md §13.1): the ``price`` (the
    pass test), the ``refused`` cells (they do not pass), and per observed cell whether its
    readings may all still wait for a longer span (``waiting``: a unit finer than the
    coarsest resolution made of such cells alone does not pass; None: none waits)."""

    price: UnitPrice
    refused: frozenset[str] = frozenset()
    waiting: NDArray[np.bool_] | None = None
    #: The finest level's pass test of an earlier choice of the same window (one dict for
    #: all its choices): reused when the pairs and the rule are the same (:func:`_first_level`).
    memo: dict[str, Any] = field(default_factory=dict, compare=False)

    def may_pass(self, names: list[str], unit_of_cell: IntArray, finer: bool) -> NDArray[np.bool_]:
        """Per unit (``names``; ``unit_of_cell``: each observed cell's unit, -1: none) whether
        it may pass; ``finer``: the level is finer than the coarsest resolution."""
        allowed = np.array([name not in self.refused for name in names], dtype=bool)
        if finer and self.waiting is not None:
            ready = np.zeros(len(names), dtype=bool)
            ready[unit_of_cell[(unit_of_cell >= 0) & ~self.waiting]] = True
            allowed &= ready
        return allowed


def _aggregate(
    group: IntArray, vehicle: IntArray, count: IntArray, n_vehicles: int
) -> tuple[IntArray, IntArray, IntArray]:
    """One entry per distinct (group, vehicle), counts added, grouped by group ascending.
    Within a group the entries' order is not promised (compiled:
    :func:`~stream_dp.dp.adaptive_kernel.aggregate_pairs`, vehicles as they first appear;
    numpy: ascending): nothing the choice computes from them depends on it (sums of integer
    counts, a unit's price a room its tied entries share, :func:`best_cap_mean_error` over
    the counts)."""
    n_groups = int(group.max(initial=-1)) + 1
    aggregate = kernels.AGGREGATE_PAIRS.pick(len(group))
    pairs = _as_int64(group, vehicle, count)
    return aggregate(*pairs, n_groups, max(n_vehicles, 1))  # type: ignore[no-any-return]


def _aggregate_selected(
    group: IntArray,
    vehicle: IntArray,
    count: IntArray,
    select: NDArray[np.bool_],
    n_groups: int,
    n_vehicles: int,
) -> tuple[IntArray, IntArray, IntArray]:
    """:func:`_aggregate` of the ``select``-ed entries (groups below ``n_groups``); compiled,
    without copying them out first."""
    aggregate = kernels.AGGREGATE_SELECTED.pick(int(np.count_nonzero(select)))
    pairs = _as_int64(group, vehicle, count)
    return aggregate(*pairs, select, n_groups, max(n_vehicles, 1))  # type: ignore[no-any-return]


def _as_int64(*arrays: np.ndarray) -> tuple[IntArray, ...]:
    """The arrays as int64 (the compiled forms' type; no copy when they are)."""
    return tuple(a.astype(np.int64, copy=False) for a in arrays)


def aggregate_by_sort(
    group: IntArray, vehicle: IntArray, count: IntArray, n_groups: int, n_vehicles: int
) -> tuple[IntArray, IntArray, IntArray]:
    """:func:`_aggregate` by :func:`pair_groups` and a ``bincount`` (numpy only)."""
    groups, vehicles, inverse = pair_groups(group, vehicle, n_groups, n_vehicles)
    summed = np.bincount(inverse, weights=count, minlength=len(groups)).astype(np.int64)
    return groups, vehicles, summed


def aggregate_selected_by_sort(
    group: IntArray,
    vehicle: IntArray,
    count: IntArray,
    select: NDArray[np.bool_],
    n_groups: int,
    n_vehicles: int,
) -> tuple[IntArray, IntArray, IntArray]:
    """:func:`aggregate_by_sort` of the ``select``-ed entries (numpy only)."""
    return aggregate_by_sort(group[select], vehicle[select], count[select], n_groups, n_vehicles)


def weighted_quantile_by_sort(
    order: IntArray,
    group: IntArray,
    room: FloatArray,
    count: IntArray,
    n_groups: int,
    quantile: float,
) -> FloatArray:
    """Per group, the ``count``-weighted ``quantile`` of its entries' ``room`` (entries in
    ``order``: by group, then room), by cumulative sums (the numpy form of
    :data:`~stream_dp.dp.kernels.WEIGHTED_QUANTILE`, the compiled one's floats)."""
    out = np.zeros(n_groups)
    if not len(group):
        return out
    g, r, w = group[order], room[order], count[order].astype(np.float64)
    cum = np.cumsum(w)
    start = np.searchsorted(g, np.arange(n_groups))
    end = np.searchsorted(g, np.arange(n_groups), side="right")
    has = end > start
    base = np.where(start > 0, cum[np.maximum(start - 1, 0)], 0.0)
    total = cum[np.maximum(end - 1, 0)] - base
    goal = base + quantile * total
    at = np.searchsorted(cum, goal[has], side="left")
    out[has] = r[np.minimum(at, end[has] - 1)]
    return out


def pair_groups(
    major: IntArray, minor: IntArray, n_major: int, n_minor: int
) -> tuple[IntArray, IntArray, IntArray]:
    """The distinct ``(major, minor)`` pairs in ascending order and each input's index into
    them (``np.unique`` of the pairs with ``return_inverse``, by counting sorts)."""
    major = major.astype(np.int64, copy=False)
    minor = minor.astype(np.int64, copy=False)
    if len(major) == 0:
        return major, minor, np.zeros(0, dtype=np.int64)
    order = order_by_pair(major, minor, max(n_major, 1), max(n_minor, 1))
    a, b = major[order], minor[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    rank = np.cumsum(new) - 1
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = rank
    return a[new], b[new], inverse


def _parents(names: list[str], resolution: int) -> list[str]:
    import h3

    return [h3.cell_to_parent(n, resolution) for n in names]


def _check_choice(target: float, finest: int, coarsest: int, shape: str) -> None:
    if not target > 0:
        raise ValueError("target must be positive")
    if coarsest > finest:
        raise ValueError("coarsest must be <= finest")
    if shape not in ("compact", "remainder"):
        raise ValueError(f"unknown shape {shape!r}")


def choose_cells(
    cell_names: tuple[str, ...] | list[str],
    pair_cell: IntArray,
    pair_vehicle: IntArray,
    pair_count: IntArray,
    *,
    upper: float,
    mean_epsilon: float,
    target: float,
    finest: int,
    coarsest: int,
    prefix_limit: int | None = None,
    min_vehicles: int = 1,
    shape: Shape = "remainder",
    detail_slack: float = DETAIL_SLACK,
    budget: BudgetChoice | None = None,
) -> AdaptiveCells:
    """Choose the released cells (module docstring). ``cell_names``: the observed cells at
    resolution ``finest``; one entry per observed (cell, vehicle) pair in ``pair_*``;
    ``budget``: under a vehicle budget, its pass test and the cells kept out (§13.1)."""
    _check_choice(target, finest, coarsest, shape)
    pair_cell, pair_vehicle, pair_count = (
        np.asarray(a, dtype=np.int64) for a in (pair_cell, pair_vehicle, pair_count)
    )
    n_vehicles = int(pair_vehicle.max(initial=-1)) + 1
    price = None if budget is None else budget.price
    rule = _Rule(n_vehicles, upper, mean_epsilon, prefix_limit, target, min_vehicles, price)
    pairs = (pair_cell, pair_vehicle, pair_count)
    if shape == "compact":
        return _choose_compact(list(cell_names), pairs, rule, finest, coarsest, budget)
    levels = (finest, coarsest, detail_slack)
    return _choose_remainder(list(cell_names), pairs, rule, levels, budget)


def _by_cell(
    pairs: tuple[IntArray, IntArray, IntArray], n_cells: int, memo: dict[str, Any]
) -> tuple[IntArray, IntArray, IntArray]:
    """The pairs in the stable order of their cells, kept in ``memo`` for the window's next
    choice. Nothing the choice computes depends on the pairs' order (:func:`_aggregate`), but
    grouped by cell, and so by parent at every level (sorted H3 cells of one resolution have
    sorted parents), its passes over them read memory in order."""
    seen = memo.get("by_cell")
    if seen is not None and all(a is b for a, b in zip(seen[0], pairs, strict=True)):
        return seen[1]  # type: ignore[no-any-return]
    cell, vehicle, count = grouped(pairs[0], max(n_cells, 1), pairs[1], pairs[2])
    memo["by_cell"] = (pairs, (cell, vehicle, count))
    return cell, vehicle, count


def _choose_remainder(
    cell_names: list[str],
    pairs: tuple[IntArray, IntArray, IntArray],
    rule: _Rule,
    levels: tuple[int, int, float],
    budget: BudgetChoice | None,
) -> AdaptiveCells:
    """The remainder shape (module docstring), level by level from ``finest`` to
    ``coarsest`` (``levels``: those and the detail slack)."""
    finest, coarsest, detail_slack = levels
    n_cells = len(cell_names)
    # Per observed cell: its unit at the current level (-1 once released or withheld).
    unit_of_cell = np.arange(n_cells, dtype=np.int64)
    unit_names: list[str] = list(cell_names)
    final_of_cell = np.full(n_cells, -1, dtype=np.int64)
    released: list[tuple[str, int, bool, float]] = []
    partial_parent: set[str] = set()  # units some of whose readings were released below
    # One entry per (unit, vehicle) at the current level: (unit, vehicle, readings).
    entries = pairs
    known: tuple[FloatArray, NDArray[np.bool_]] | None = None  # (error, passes), from below
    level = finest
    while level >= coarsest:
        alive = unit_of_cell >= 0
        if not alive.any():
            break
        if level > coarsest and budget is not None and _all_wait(budget, alive):
            # Nothing finer than the coarsest level may pass: every level up to it releases
            # nothing and moves all its units up, so move them there at once.
            up = _to_coarsest(unit_names, unit_of_cell, entries, partial_parent, coarsest, rule)
            unit_names, unit_of_cell, entries, partial_parent = up
            level, known = coarsest, None
            continue
        n_units = len(unit_names)
        if level == finest and budget is not None:
            entries = _by_cell(entries, n_cells, budget.memo)  # each cell its own unit here
            error, passes = _first_level(rule, entries, n_units, budget.memo)
        elif known is None:
            error, passes = rule.passing(*entries, n_units, unique=True)
        else:
            error, passes = known
        unit = entries[0]
        if budget is not None:
            passes &= budget.may_pass(unit_names, unit_of_cell, level > coarsest)
        occupied = np.zeros(n_units, dtype=bool)
        occupied[unit] = True
        if level == coarsest:
            release_now = passes & occupied
            move_up = np.zeros(n_units, dtype=bool)
        else:
            frame = _level_frame(unit_names, level, entries, budget if level == finest else None)
            split = _split_parents(rule, frame, entries, passes, occupied, detail_slack)
            parents, parent_names, parent_of, release_now, moved = split
            move_up = occupied & ~release_now
        new_index = np.full(n_units, -1, dtype=np.int64)
        for u in np.flatnonzero(release_now).tolist():
            new_index[u] = len(released)
            name = unit_names[u]
            released.append((name, level, name in partial_parent, float(error[u])))
        done = release_now[unit_of_cell.clip(0)] & alive
        final_of_cell[done] = new_index[unit_of_cell[done]]
        if level == coarsest:
            break
        # A parent unit is a remainder when readings under it were released at a finer level.
        partial_parent = {parents[u] for u in np.flatnonzero(release_now).tolist()} | {
            parents[u] for u in np.flatnonzero(move_up).tolist() if unit_names[u] in partial_parent
        }
        moving = alive & move_up[unit_of_cell.clip(0)]
        next_unit = np.full(n_cells, -1, dtype=np.int64)
        next_unit[moving] = parent_of[unit_of_cell[moving]]
        used = np.unique(next_unit[moving])
        remap = np.full(len(parent_names), -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        unit_of_cell = np.where(moving, remap[next_unit.clip(0)], -1)
        unit_names = [str(parent_names[i]) for i in used.tolist()]
        # The moving units' entries and pass test, as the split aggregated and tested them.
        entries = (remap[moved.group], moved.vehicle, moved.count)
        known = (moved.error[used], moved.passes[used])
        level -= 1
    return _result(released, final_of_cell)


#: Whether the remainder choice moves units straight to the coarsest level when every
#: remaining cell waits (:func:`_all_wait`); the tests switch it off to compare.
JUMP_WAITING = True


def _all_wait(budget: BudgetChoice, alive: NDArray[np.bool_]) -> bool:
    """Whether every observed cell still unreleased (``alive``) may wait for a longer span:
    then no unit finer than the coarsest level may pass (:meth:`BudgetChoice.may_pass`)."""
    return JUMP_WAITING and budget.waiting is not None and bool(budget.waiting[alive].all())


def _to_coarsest(
    unit_names: list[str],
    unit_of_cell: IntArray,
    entries: tuple[IntArray, IntArray, IntArray],
    partial_parent: set[str],
    coarsest: int,
    rule: _Rule,
) -> tuple[list[str], IntArray, tuple[IntArray, IntArray, IntArray], set[str]]:
    """The remainder choice's state at the coarsest level when the levels between release
    nothing: each occupied unit moved into its ancestor there (names sorted, entries
    aggregated, the remainders' ancestors), as moving up one level at a time does."""
    unit, vehicle, count = entries
    occupied = np.zeros(len(unit_names), dtype=bool)
    occupied[unit] = True
    ancestors = _parents(unit_names, coarsest)
    names, ancestor_of = np.unique(np.asarray(ancestors, dtype=object), return_inverse=True)
    moving = (unit_of_cell >= 0) & occupied[unit_of_cell.clip(0)]
    used = np.unique(ancestor_of[unit_of_cell[moving]])
    remap = np.full(len(names), -1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    new_unit = remap[ancestor_of]
    unit_of_cell = np.where(moving, new_unit[unit_of_cell.clip(0)], -1)
    partial = {ancestors[u] for u in np.flatnonzero(occupied).tolist()
               if unit_names[u] in partial_parent}  # fmt: skip
    moved = _aggregate(new_unit[unit], vehicle, count, rule.n_vehicles)
    return [str(names[i]) for i in used.tolist()], unit_of_cell, moved, partial


def _first_level(
    rule: _Rule,
    entries: tuple[IntArray, IntArray, IntArray],
    n_units: int,
    memo: dict[str, Any],
) -> tuple[FloatArray, NDArray[np.bool_]]:
    """The finest level's predicted error and pass flag per unit (:meth:`_Rule.passing`),
    taken from ``memo`` when an earlier choice computed them for equal entries and rule (a
    window chosen again with more cells refused: the refusals apply after this test)."""
    seen = memo.get("first_level")
    if seen is not None:
        seen_rule, seen_entries, error, passes = seen
        if (
            seen_rule.price is rule.price  # the same rooms (an array: compared by identity)
            and replace(seen_rule, price=None) == replace(rule, price=None)
            and len(error) == n_units
            and all(
                a is b or np.array_equal(a, b) for a, b in zip(seen_entries, entries, strict=True)
            )
        ):
            return error.copy(), passes.copy()
    error, passes = rule.passing(*entries, n_units, unique=True)
    memo["first_level"] = (rule, entries, error.copy(), passes.copy())
    return error, passes


class _Frame(NamedTuple):
    """What one level's split reads that its pass test does not change: each unit's parent
    name, the distinct parents, each unit's parent index, each entry's parent index
    (``up``) and each unit's readings."""

    parents: list[str]
    parent_names: np.ndarray
    parent_of: IntArray
    up: IntArray
    readings: FloatArray


def _level_frame(
    unit_names: list[str],
    level: int,
    entries: tuple[IntArray, IntArray, IntArray],
    budget: BudgetChoice | None,
) -> _Frame:
    """The :class:`_Frame` of the units ``unit_names`` at ``level``; with a ``budget`` (at
    the finest level), the one an earlier choice of the window computed for the same entries
    and names, kept in its memo (refusals change the pass test only)."""
    memo = None if budget is None else budget.memo
    seen = None if memo is None else memo.get("frame")
    if (
        seen is not None
        and seen[0] == level
        and all(a is b for a, b in zip(seen[1], entries, strict=True))
        and seen[2] == unit_names
    ):
        return seen[3]  # type: ignore[no-any-return]
    unit, _, count = entries
    parents = _parents(unit_names, level - 1)
    parent_names, parent_of = np.unique(np.asarray(parents, dtype=object), return_inverse=True)
    readings = np.bincount(unit, weights=count, minlength=len(unit_names))
    frame = _Frame(parents, parent_names, parent_of, parent_of[unit], readings)
    if memo is not None and USE_FRAME_MEMO:
        memo["frame"] = (level, entries, list(unit_names), frame)
    return frame


#: Whether the finest level's :class:`_Frame` is kept for the window's next budget choice;
#: the tests switch it off to compare.
USE_FRAME_MEMO = True


def _split_parents(
    rule: _Rule,
    frame: _Frame,
    entries: tuple[IntArray, IntArray, IntArray],
    passes: np.ndarray,
    occupied: np.ndarray,
    detail_slack: float,
) -> tuple[list[str], np.ndarray, IntArray, np.ndarray, _Whole]:
    """One level up from the units of ``frame``: each unit's parent name, the distinct
    parents, each unit's parent index, the units released now (passing, under a parent that
    is split), and the entries that move up with their pass test (:func:`_moved`)."""
    unit = entries[0]
    parents, parent_names, parent_of, up, readings = frame
    # Split a parent (release its passing children on their own) unless that
    # leaves a remainder missing T where the whole parent would meet it.
    failing = occupied & ~passes
    n_parents = len(parent_names)
    has_failing = np.zeros(n_parents, dtype=bool)
    has_failing[parent_of[failing]] = True
    mixed = has_failing[up]  # entries under a parent with a failing child
    whole_parents = _Whole.of(rule, mixed, up, entries, n_parents)
    whole_passes = whole_parents.passes
    remainder = mixed & failing[unit]
    if np.array_equal(remainder, mixed):  # no passing child under them: the same units
        rest_parents = whole_parents
    else:
        rest_parents = _Whole.of(rule, remainder, up, entries, n_parents)
    remainder_passes = rest_parents.passes
    # Readings covered now or next level: split vs whole parent.
    kept_split = np.bincount(parent_of, weights=readings * passes, minlength=n_parents)
    rest = np.bincount(parent_of, weights=readings * failing, minlength=n_parents)
    whole = np.bincount(parent_of, weights=readings, minlength=n_parents)
    kept_split += rest * remainder_passes
    kept_whole = whole * whole_passes
    split = ~has_failing | (kept_split >= (1.0 - detail_slack) * kept_whole)
    release_now = occupied & passes & split[parent_of]
    return parents, parent_names, parent_of, release_now, _moved(whole_parents, rest_parents, split)


def _moved(whole: _Whole, rest: _Whole, split: NDArray[np.bool_]) -> _Whole:
    """What moves up a level, as it was aggregated and tested for the split: a parent with a
    failing child moves as its remainder (``rest``) where it is split, else ``whole``; a
    parent without one releases all its children and moves nothing."""
    if rest is whole:
        return whole
    from_whole, from_rest = ~split[whole.group], split[rest.group]
    return _Whole(
        np.concatenate((whole.group[from_whole], rest.group[from_rest])),
        np.concatenate((whole.vehicle[from_whole], rest.vehicle[from_rest])),
        np.concatenate((whole.count[from_whole], rest.count[from_rest])),
        np.where(split, rest.error, whole.error),
        np.where(split, rest.passes, whole.passes),
    )


class _Whole(NamedTuple):
    """Some entries under parents (those a ``select`` picks, :meth:`of`) as (parent,
    vehicle) entries with counts added, and each parent's predicted error and pass flag
    (:meth:`_Rule.passing`). The entries that move up a level are made of these
    (:func:`_moved`): that level's entries and pass test, not computed again."""

    group: IntArray
    vehicle: IntArray
    count: IntArray
    error: FloatArray
    passes: NDArray[np.bool_]

    @classmethod
    def of(
        cls,
        rule: _Rule,
        select: NDArray[np.bool_],
        up: IntArray,
        entries: tuple[IntArray, IntArray, IntArray],
        n_parents: int,
    ) -> _Whole:
        _, vehicle, count = entries
        group, vehicle, count = _aggregate_selected(
            up, vehicle, count, select, n_parents, rule.n_vehicles
        )
        error, passes = rule.passing(group, vehicle, count, n_parents, unique=True)
        return cls(group, vehicle, count, error, passes)


def _choose_compact(
    cell_names: list[str],
    pairs: tuple[IntArray, IntArray, IntArray],
    rule: _Rule,
    finest: int,
    coarsest: int,
    budget: BudgetChoice | None = None,
) -> AdaptiveCells:
    """The compact shape, bottom-up: a node is *complete* when its selection covers all its
    readings: every occupied child is complete (keep their selections), or else the node as
    a whole passes (release it instead). An incomplete node's readings all move up; an
    incomplete node at ``R0`` is withheld. No two released cells overlap. ``budget``: as
    :func:`choose_cells`'s."""
    cell, vehicle, count = pairs
    n_cells = len(cell_names)
    released: list[tuple[str, int, bool, float]] = []
    selection = np.full(n_cells, -1, dtype=np.int64)  # per observed cell: tentative release
    node_names = list(cell_names)
    node_of_cell = np.arange(n_cells, dtype=np.int64)
    complete = np.zeros(0, dtype=bool)
    child_parent = np.zeros(0, dtype=np.int64)  # per node of the level below: its parent
    for level in range(finest, coarsest - 1, -1):
        n_nodes = len(node_names)
        error, passes = rule.passing(node_of_cell[cell], vehicle, count, n_nodes)
        if budget is not None:
            passes &= budget.may_pass(node_names, node_of_cell, level > coarsest)
        if level == finest:
            node_complete = passes.copy()
            keep_children = np.zeros(n_nodes, dtype=bool)
        else:
            all_children = np.ones(n_nodes, dtype=bool)
            np.logical_and.at(all_children, child_parent, complete)
            keep_children = all_children
            node_complete = all_children | passes
        whole = node_complete & ~keep_children
        entry = np.full(n_nodes, -1, dtype=np.int64)
        for u in np.flatnonzero(whole).tolist():
            entry[u] = len(released)
            released.append((node_names[u], level, False, float(error[u])))
        cell_node = node_of_cell
        selection = np.where(
            keep_children[cell_node], selection, np.where(whole[cell_node], entry[cell_node], -1)
        )
        complete = node_complete
        if level == coarsest:
            break
        parents = _parents(node_names, level - 1)
        parent_names, child_parent = np.unique(
            np.asarray(parents, dtype=object), return_inverse=True
        )
        node_of_cell = child_parent[node_of_cell]
        node_names = [str(n) for n in parent_names.tolist()]
    return _result(released, selection)


def _result(released: list[tuple[str, int, bool, float]], final_of_cell: IntArray) -> AdaptiveCells:
    """The released cells sorted by name (entries no observed cell maps to are dropped)."""
    used = sorted(set(final_of_cell[final_of_cell >= 0].tolist()), key=lambda i: released[i][0])
    rank = np.full(len(released) + 1, -1, dtype=np.int64)  # index -1: withheld
    rank[used] = np.arange(len(used))
    final = rank[final_of_cell]
    chosen = [released[i] for i in used]
    return AdaptiveCells(
        names=tuple(r[0] for r in chosen),
        resolution=np.array([r[1] for r in chosen], dtype=np.int64),
        remainder=np.array([r[2] for r in chosen], dtype=bool),
        predicted_error=np.array([r[3] for r in chosen], dtype=np.float64),
        unit_of_cell=final.astype(np.int64),
    )
