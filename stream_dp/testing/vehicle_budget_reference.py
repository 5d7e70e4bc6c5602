"""The vehicle budget's plan as first written: every round re-costs the changed cells, then
re-derives the kept counts, the drops and every vehicle's payment from the whole occupancy
(docs/math.md §13.1). Slow (each of its ~20 rounds touches every entry) but plain; used as
the oracle for :func:`stream_dp.dp.vehicle_budget.plan_budget`, which must return exactly
the same plan (kept entries, per-cell ε and caps, payments and rounds)."""

from __future__ import annotations

import numpy as np

from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.vehicle_budget import (
    BoolArray,
    BudgetPlan,
    FloatArray,
    cheapest_epsilon,
    round_up,
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
    """The plan of :func:`~stream_dp.dp.vehicle_budget.plan_budget`, each round over all
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
