"""Compiled (numba) passes of the release choice's solver (docs/math.md §13.5, "The
solver"): the greedy that turns an order of candidates into a feasible choice, and the
upgrade pass that makes the choice maximal.

A candidate ``k`` pays ``pay[start[k]:start[k + 1]]`` from the rooms of the vehicles
``vehicle[start[k]:start[k + 1]]``; at most one candidate of each ``group`` is chosen.
Rooms are compared with a relative slack of ``1e-9`` (the ε grid's sums are exact; the slack
only absorbs the float sums of other payments).
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Relative slack when a payment is checked against what is left of a room.
ROOM_RTOL = 1e-9
#: The subgradient steps stop once the bound is within this share of the best known value,
#: or after this many steps in a row that lower it by less than that share of the gap.
GAP_TOLERANCE = 1e-3
STALL_STEPS = 3


@njit(cache=True, nogil=True)
def _fits(
    k: int, start: np.ndarray, vehicle: np.ndarray, pay: np.ndarray, left: np.ndarray
) -> bool:  # pragma: no cover - compiled
    for e in range(start[k], start[k + 1]):
        v = vehicle[e]
        if pay[e] > left[v] + ROOM_RTOL * (1.0 + abs(left[v])):
            return False
    return True


@njit(cache=True, nogil=True)
def _charge(
    k: int, start: np.ndarray, vehicle: np.ndarray, pay: np.ndarray, left: np.ndarray, sign: float
) -> None:  # pragma: no cover - compiled
    for e in range(start[k], start[k + 1]):
        left[vehicle[e]] -= sign * pay[e]


@njit(cache=True, nogil=True)
def greedy_in_order(
    order: np.ndarray,
    group: np.ndarray,
    n_groups: int,
    value: np.ndarray,
    payments: tuple[np.ndarray, np.ndarray, np.ndarray],
    room: np.ndarray,
) -> np.ndarray:  # pragma: no cover - compiled
    """Per group the chosen candidate (-1: none): candidates in ``order``, each taken when its
    group has none yet, its value is positive and every payment fits what is left of its
    vehicle's room; then each group's choice is upgraded to its most valuable candidate that
    fits once the current one is given back, and empty groups are offered every candidate
    again, until a pass changes nothing (so no candidate that fits would add value).
    ``payments``: ``(start, vehicle, pay)``."""
    start, vehicle, pay = payments
    left = room.copy()
    chosen = np.full(n_groups, -1, dtype=np.int64)
    for k in order:
        g = group[k]
        if chosen[g] >= 0 or value[k] <= 0.0:
            continue
        if _fits(k, start, vehicle, pay, left):
            _charge(k, start, vehicle, pay, left, 1.0)
            chosen[g] = k
    by_value = np.argsort(-value, kind="mergesort")
    changed = True
    while changed:
        changed = False
        for k in by_value:
            g = group[k]
            current = chosen[g]
            if value[k] <= 0.0 or (current >= 0 and value[k] <= value[current]):
                continue
            if current >= 0:
                _charge(current, start, vehicle, pay, left, -1.0)
            if _fits(k, start, vehicle, pay, left):
                _charge(k, start, vehicle, pay, left, 1.0)
                chosen[g] = k
                changed = True
            elif current >= 0:
                _charge(current, start, vehicle, pay, left, 1.0)
    return chosen


@njit(cache=True, nogil=True)
def weighed_costs(
    start: np.ndarray, vehicle: np.ndarray, pay: np.ndarray, weights: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    """Per candidate, ``Σ_l weights_l p_{k,l}`` over its payments."""
    n = len(start) - 1
    out = np.zeros(n)
    for k in range(n):
        total = 0.0
        for e in range(start[k], start[k + 1]):
            total += weights[vehicle[e]] * pay[e]
        out[k] = total
    return out


@njit(cache=True, nogil=True)
def lagrangian_bound(
    group: np.ndarray,
    n_groups: int,
    value: np.ndarray,
    payments: tuple[np.ndarray, np.ndarray, np.ndarray],
    room: np.ndarray,
    lower: float,
    steps: int,
) -> tuple[float, np.ndarray]:  # pragma: no cover - compiled
    """The least ``L(λ)`` found (release_choice's module docstring) and its multipliers:
    ``steps`` projected subgradient steps from ``λ = 0`` with Polyak's step
    ``(L − lower) / |g|²`` towards the best known feasible value ``lower``; ``g = r − usage``
    of the relaxed problem's choice, its components at ``λ_l = 0`` pointing below 0 left out
    (they cannot move); early when the gap closes or the bound stalls (:data:`STALL_STEPS`).
    ``payments``: ``(start, vehicle, pay)``."""
    start, vehicle, pay = payments
    n_vehicles = len(room)
    lam = np.zeros(n_vehicles)
    best_lam = lam.copy()
    bound = np.inf
    stalled = 0
    for step in range(steps + 1):
        top = np.zeros(n_groups)
        pick = np.full(n_groups, -1, dtype=np.int64)
        for k in range(len(group)):
            reduced = value[k]
            for e in range(start[k], start[k + 1]):
                reduced -= lam[vehicle[e]] * pay[e]
            if reduced > top[group[k]]:
                top[group[k]] = reduced
                pick[group[k]] = k
        priced = 0.0  # λ · r summed in order: numba's ``@`` would need SciPy's BLAS
        for v in range(n_vehicles):
            priced += lam[v] * room[v]
        dual = top.sum() + priced
        if dual < bound - GAP_TOLERANCE * (bound - lower):
            stalled = 0
        else:
            stalled += 1
        if dual < bound:
            bound = dual
            best_lam[:] = lam
        gap = bound - lower
        if step == steps or gap <= GAP_TOLERANCE * max(bound, 1.0) or stalled >= STALL_STEPS:
            break
        gradient = room.copy()
        for g in range(n_groups):
            k = pick[g]
            if k >= 0:
                for e in range(start[k], start[k + 1]):
                    gradient[vehicle[e]] -= pay[e]
        norm = 0.0
        for v in range(n_vehicles):
            if lam[v] > 0.0 or gradient[v] < 0.0:
                norm += gradient[v] * gradient[v]
        if norm == 0.0:
            break
        size = gap / norm
        for v in range(n_vehicles):
            lam[v] = max(lam[v] - size * gradient[v], 0.0)
    return bound, best_lam
