"""The vehicle budget's plan as first written: every round re-costs the changed cells, then
re-derives the kept counts, the drops and every vehicle's payment from the whole occupancy
(docs/math.md §13.1). Slow (each of its ~20 rounds touches every entry) but plain; used as
the oracle for :func:`stream_dp.release.vehicle_budget.planner.plan_budget`, which must return
exactly
the same plan (kept entries, per-cell ε and caps, payments and rounds)."""

from __future__ import annotations

import numpy as np

from stream_dp.dp.epsilon_grid import round_up
from stream_dp.dp.occupancy import Occupancy
from stream_dp.release.vehicle_budget.planner import (
    _FACTOR,
    BoolArray,
    BudgetPlan,
    FloatArray,
    IntArray,
)


def reference_plan_budget(
    occupancy: Occupancy,
    room: FloatArray,
    *,
    target: float,
    upper: float,
    variance_share: float,
    max_cell_epsilon: float,
    min_vehicles: int = 1,
    prefix_limit: int | None = None,
    pseudo_user: bool = True,
    held: BoolArray | None = None,
) -> BudgetPlan:
    """The plan of :func:`~stream_dp.release.vehicle_budget.planner.plan_budget`, each round over
    all
    entries."""
    n_cells, n_vehicles = len(occupancy.cells), len(occupancy.vehicles)
    cell, vehicle = occupancy.cell_index, occupancy.vehicle_index
    total = occupancy.total_per_cell().astype(np.float64)
    kept = np.ones(occupancy.n_entries, dtype=bool)
    dropped = np.zeros(n_cells, dtype=bool) if held is None else held.copy()
    share = 1.0 - variance_share
    rounds = 0
    order = np.lexsort((occupancy.count, cell))
    mean_eps, cap = cheapest_epsilon(
        occupancy, kept, target, upper, prefix_limit, pseudo_user, order
    )
    changed: BoolArray | None = None
    while True:
        rounds += 1
        if changed is not None:
            sub = order[changed[cell[order]]]
            again, again_cap = cheapest_epsilon(
                occupancy, kept, target, upper, prefix_limit, pseudo_user, sub
            )
            mean_eps[changed], cap[changed] = again[changed], again_cap[changed]
        epsilon = round_up(mean_eps / share)
        vehicles_kept = np.bincount(cell[kept], minlength=n_cells)
        dropped |= (epsilon > max_cell_epsilon + 1e-12) | (vehicles_kept < min_vehicles)
        epsilon[dropped] = np.inf
        kept &= ~dropped[cell]
        cost = np.where(kept, epsilon[cell], 0.0)
        paid = np.bincount(vehicle, weights=cost, minlength=n_vehicles)
        excess = paid - room
        over = excess > 1e-12
        if not over.any():
            return BudgetPlan(kept, epsilon, cap, paid, rounds)
        leave = _reference_sit_outs(occupancy, kept, epsilon, total, excess, over)
        kept &= ~leave
        changed = np.zeros(n_cells, dtype=bool)
        changed[cell[leave]] = True


def _reference_sit_outs(
    occupancy: Occupancy,
    kept: BoolArray,
    epsilon: FloatArray,
    total: FloatArray,
    excess: FloatArray,
    over: BoolArray,
) -> BoolArray:
    """Per vehicle over its room, its kept entries by least ``m / (M ε)`` first, left until
    they cover the excess."""
    cell, vehicle = occupancy.cell_index, occupancy.vehicle_index
    idx = np.flatnonzero(kept & over[vehicle])
    eps = epsilon[cell[idx]]
    score = occupancy.count[idx] / (total[cell[idx]] * eps)
    order = np.lexsort((cell[idx], score, vehicle[idx]))
    idx, eps = idx[order], eps[order]
    v = vehicle[idx]
    cum = np.cumsum(eps)
    first = np.searchsorted(v, v)
    before = cum - eps - (cum[first] - eps[first])
    leave = np.zeros(occupancy.n_entries, dtype=bool)
    leave[idx[before < excess[v] - 1e-12]] = True
    return leave


def cheapest_epsilon(
    occupancy: Occupancy,
    kept: BoolArray,
    target: float,
    upper: float,
    prefix_limit: int | None,
    pseudo_user: bool,
    order: IntArray | None = None,
) -> tuple[FloatArray, IntArray]:
    """Per cell the least mean ε meeting ``target`` with the ``kept`` entries, and its cap
    (module docstring); +inf and 0 where none does. ``order``: the entries sorted by (cell,
    count), if the caller has it (:func:`entry_order`)."""
    n_cells = len(occupancy.cells)
    total = occupancy.total_per_cell().astype(np.float64)
    if order is None:
        order = entry_order(occupancy)
    idx = order[kept[order]]
    cell, count = occupancy.cell_index[idx], occupancy.count[idx].astype(np.int64)
    start = np.searchsorted(cell, np.arange(n_cells + 1))
    n_kept = np.diff(start)
    csum = np.concatenate(([0], np.cumsum(count)))
    pos = np.arange(len(cell))
    below = csum[pos] - csum[start[cell]]  # kept readings of smaller counts in the cell
    s_of_c = below + (start[cell + 1] - pos) * count  # S(c) with c = this count
    largest = np.zeros(n_cells, dtype=np.int64)
    has = n_kept > 0
    largest[has] = count[start[1:][has] - 1]
    allowed = np.ones(len(cell), dtype=bool)
    if not pseudo_user:
        allowed = count == largest[cell]
    elif prefix_limit is not None:
        allowed = (count <= prefix_limit) | (count == largest[cell])
    m = total[cell]
    slack = target - upper * (1.0 - s_of_c / np.where(m > 0, m, 1.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.where(
            allowed & (slack > 0) & (s_of_c > 0),
            _FACTOR * upper * count / (s_of_c * slack),
            np.inf,
        )
    best = np.full(n_cells, np.inf)
    cap = np.zeros(n_cells, dtype=np.int64)
    if len(eps):
        seg = start[:-1][has]
        best[has] = np.minimum.reduceat(eps, seg)
        is_best = (eps == best[cell]) & np.isfinite(eps)
        first = np.where(is_best, pos, len(eps))
        first_of = np.full(n_cells, len(eps))
        first_of[has] = np.minimum.reduceat(first, seg)  # ties: the smallest cap
        found = first_of < len(eps)
        cap[found] = count[first_of[found]]
    return best, cap


def entry_order(occupancy: Occupancy) -> IntArray:
    """The occupancy's entries sorted by (cell, count), ties in entry order (as
    ``np.lexsort((count, cell_index))``, by a counting sort when the keys are few)."""
    from stream_dp.dp.ordering import order_by_pair

    top = int(occupancy.count.max(initial=0))
    return order_by_pair(occupancy.cell_index, occupancy.count, len(occupancy.cells), top + 1)
