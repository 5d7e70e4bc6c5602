"""Compiled (numba) build of the candidate releases: the figures of
:mod:`stream_dp.dp.release_candidates` (``cell_options``, ``entry_payments``,
``grouped_candidates``, ``with_exclusions``) in one pass per cell, equal to the numpy form
(the same float expressions in the same order; tested for equality).

Per cell its read counts are sorted once; the caps tried are the distinct read counts (§12.4)
and the prefix ``C`` (``prefix_limit < 0``: none), as in the numpy form.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from stream_dp.dp.epsilon_grid import EPSILON_STEP, ROUNDING_MARGIN
from stream_dp.dp.error_bars import LN20, SAMPLER_RTOL
from stream_dp.dp.float_mean import GRID_SLACK, SHARE_SLACK_UNIT


@njit(cache=True, nogil=True)
def _round_up(eps: float) -> float:  # pragma: no cover - compiled
    """``vehicle_budget.round_up`` of one value."""
    if not math.isfinite(eps):
        return math.inf
    ticks = math.ceil(eps * (1.0 + ROUNDING_MARGIN) / EPSILON_STEP - 1e-9)
    return max(ticks, 1.0) * EPSILON_STEP


@njit(cache=True, nogil=True)
def _caps_of(read: np.ndarray, prefix_limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One cell's caps in the numpy form's order (its read counts ascending, then ``C``),
    each with ``S(c)`` and whether it is allowed."""  # pragma: no cover - compiled
    n = len(read)
    caps = np.sort(read)
    extra = 1 if prefix_limit >= 0 else 0
    out_cap = np.empty(n + extra, dtype=np.int64)
    kept = np.empty(n + extra, dtype=np.int64)
    allowed = np.empty(n + extra, dtype=np.bool_)
    below = 0
    top = caps[n - 1]
    least = -1
    limit_kept = 0
    for i in range(n):
        c = caps[i]
        out_cap[i] = c
        kept[i] = below + c * (n - i)
        below += c
        allowed[i] = c > 0 and (prefix_limit < 0 or c <= prefix_limit or c == top)
        if c > 0 and least < 0:
            least = c
        limit_kept += min(c, prefix_limit)
    if extra:
        out_cap[n] = prefix_limit
        kept[n] = limit_kept
        allowed[n] = least >= 0 and least <= prefix_limit and prefix_limit < top
    return out_cap, kept, allowed


@njit(cache=True, nogil=True)
def cell_options_kernel(
    cell_start: np.ndarray,
    count: np.ndarray,
    sits_out: np.ndarray,
    settings: np.ndarray,
    factors: np.ndarray,
    prefix_limit: int,
    min_vehicles: int,
) -> tuple[np.ndarray, ...]:  # pragma: no cover - compiled
    """``cell_options``' arrays ``(epsilon, cap, kept, error, meets, total)`` (the useful
    readings follow in numpy: its vectorised ``exp`` may differ from libm's in the last bit);
    ``settings``: ``(upper, target, max_epsilon, mean_share)``."""
    upper, target, max_epsilon, mean_share = settings
    n_cells = len(cell_start) - 1
    n_opt = len(factors)
    epsilon = np.empty((n_cells, n_opt))
    cap = np.empty((n_cells, n_opt), dtype=np.int64)
    kept = np.empty((n_cells, n_opt), dtype=np.int64)
    error = np.empty((n_cells, n_opt))
    meets = np.empty((n_cells, n_opt), dtype=np.bool_)
    total = np.empty(n_cells, dtype=np.int64)
    for g in range(n_cells):
        lo, hi = cell_start[g], cell_start[g + 1]
        read = np.empty(hi - lo, dtype=np.int64)
        m = 0
        readers = 0
        for e in range(lo, hi):
            m += count[e]
            read[e - lo] = 0 if sits_out[e] else count[e]
            readers += 0 if sits_out[e] else 1
        total[g] = m
        caps, s_of, allowed = _caps_of(read, prefix_limit)
        least = math.inf
        for i in range(len(caps)):
            if 0 < i < len(read) and caps[i] == caps[i - 1]:
                continue
            bias = upper * (1.0 - s_of[i] / m)
            if allowed[i] and bias < target and s_of[i] > 0:
                need = LN20 * upper * caps[i] * (1.0 + SAMPLER_RTOL) / (s_of[i] * (target - bias))
                least = min(least, need)
        for j in range(n_opt):
            eps = _round_up(least / mean_share * factors[j])
            mean_eps = eps * mean_share
            best = math.inf
            pick = -1
            for i in range(len(caps)):
                if not allowed[i] or (0 < i < len(read) and caps[i] == caps[i - 1]):
                    continue  # a repeated cap: the same bar, and the first of equals wins
                safe = s_of[i] if s_of[i] > 0 else 1
                err = (
                    upper * (1.0 - safe / m)
                    + LN20 * upper * caps[i] / safe * (1.0 + SAMPLER_RTOL) / mean_eps
                )
                if err < best or pick < 0:
                    best, pick = err, i
            epsilon[g, j] = eps
            error[g, j] = best
            cap[g, j] = caps[pick] if pick >= 0 else caps[0]  # no allowed cap: the least
            s = s_of[pick] if pick >= 0 and math.isfinite(best) else 0
            kept[g, j] = s
            meets[g, j] = (
                eps <= max_epsilon + 1e-12
                and best <= target * (1.0 + 1e-9)
                and readers >= min_vehicles
            )
    return epsilon, cap, kept, error, meets, total


@njit(cache=True, nogil=True)
def _own_share(e: int, g: int, j: int, shares: tuple, mean_share: float) -> float:
    """What entry ``e`` of cell ``g`` pays at option ``j`` (a candidate there):
    ``individual_loss.entry_epsilons`` of one entry, nothing when it sits out. ``shares``:
    ``(entry_count, sits_out, epsilon, cap, kept)``."""  # pragma: no cover - compiled
    entry_count, sits_out, epsilon, cap, kept = shares
    if sits_out[e]:
        return 0.0
    eps = epsilon[g, j]
    c = max(cap[g, j], 1)
    k = min(entry_count[e], cap[g, j])
    if k >= c:
        return eps
    slack = GRID_SLACK + (c + 8.0) * kept[g, j] / c * SHARE_SLACK_UNIT
    return min(eps, _round_up(eps * mean_share * (k / c + slack) + eps * (1.0 - mean_share)))


@njit(cache=True, nogil=True)
def entry_payments_kernel(
    cell_start: np.ndarray, meets: np.ndarray, shares: tuple, mean_share: float
) -> np.ndarray:  # pragma: no cover - compiled
    """``entry_payments``: per entry and option its vehicle's own share (at most ε)."""
    epsilon = shares[2]
    pay = np.zeros((cell_start[-1], epsilon.shape[1]))
    for g in range(len(cell_start) - 1):
        for j in range(epsilon.shape[1]):
            if meets[g, j] and epsilon[g, j] > 0:
                for e in range(cell_start[g], cell_start[g + 1]):
                    pay[e, j] = _own_share(e, g, j, shares, mean_share)
    return pay


@njit(cache=True, nogil=True)
def grouped_candidates_kernel(
    cell_start: np.ndarray,
    vehicle: np.ndarray,
    meets: np.ndarray,
    weighted_useful: np.ndarray,
    payments: np.ndarray,
    cell_key: np.ndarray,
    shares: tuple,
    mean_share: float,
) -> tuple[np.ndarray, ...]:  # pragma: no cover - compiled
    """``grouped_candidates``' candidates: per (key of the cell, option) with a cell meeting T,
    its value (the cells' ``weighted_useful``, in cell order) and per vehicle (ascending) the
    sum of its payments (in cell order; ``payments`` per entry and option, or with no rows:
    each entry's own share from ``shares``, as in ``entry_payments_kernel``). Returns ``(key,
    value, start, vehicle, pay)``, candidates in ascending ``cell_key · n_options + option``."""
    n_cells, n_opt = meets.shape
    n_meet = 0
    for g in range(n_cells):
        for j in range(n_opt):
            n_meet += meets[g, j]
    key = np.empty(n_meet, dtype=np.int64)
    cell = np.empty(n_meet, dtype=np.int64)
    column = np.empty(n_meet, dtype=np.int64)
    i = 0
    for g in range(n_cells):
        for j in range(n_opt):
            if meets[g, j]:
                key[i], cell[i], column[i] = cell_key[g] * n_opt + j, g, j
                i += 1
    order = np.argsort(key, kind="mergesort")
    n_cand = 0
    for i in range(n_meet):
        n_cand += i == 0 or key[order[i]] != key[order[i - 1]]
    keys = np.empty(n_cand, dtype=np.int64)
    value = np.zeros(n_cand)
    first = np.empty(n_cand + 1, dtype=np.int64)
    k = -1
    for i in range(n_meet):
        if i == 0 or key[order[i]] != key[order[i - 1]]:
            k += 1
            keys[k], first[k] = key[order[i]], i
        value[k] += weighted_useful[cell[order[i]], column[order[i]]]
    first[n_cand] = n_meet
    n_veh = 0
    for e in range(len(vehicle)):
        n_veh = max(n_veh, vehicle[e] + 1)
    owed = np.zeros(n_veh)
    touched = np.zeros(n_veh, dtype=np.bool_)
    start = np.zeros(n_cand + 1, dtype=np.int64)
    size = 0
    for k in range(n_cand):  # an upper bound on the payments first
        for i in range(first[k], first[k + 1]):
            g = cell[order[i]]
            size += cell_start[g + 1] - cell_start[g]
    out_vehicle = np.empty(size, dtype=np.int64)
    out_pay = np.empty(size)
    n = 0
    for k in range(n_cand):
        begin = n
        if first[k + 1] - first[k] == 1 and _ascending(
            vehicle, *_span(cell_start, cell, order, first[k])
        ):
            g, j = cell[order[first[k]]], column[order[first[k]]]
            for e in range(cell_start[g], cell_start[g + 1]):  # one cell, one entry a vehicle
                out_vehicle[n], out_pay[n] = (
                    vehicle[e],
                    0.0 + _paid(e, g, j, payments, shares, mean_share),
                )
                n += 1
            start[k + 1] = n
            continue
        for i in range(first[k], first[k + 1]):
            g, j = cell[order[i]], column[order[i]]
            for e in range(cell_start[g], cell_start[g + 1]):
                v = vehicle[e]
                if not touched[v]:
                    touched[v] = True
                    out_vehicle[n] = v
                    n += 1
                owed[v] += _paid(e, g, j, payments, shares, mean_share)
        if not _ascending(out_vehicle, begin, n):
            out_vehicle[begin:n] = np.sort(out_vehicle[begin:n])
        for x in range(begin, n):
            v = out_vehicle[x]
            out_pay[x] = owed[v]
            owed[v] = 0.0
            touched[v] = False
        start[k + 1] = n
    if n < size:  # a vehicle in two cells of one candidate: its payments summed
        return keys, value, start, out_vehicle[:n].copy(), out_pay[:n].copy()
    return keys, value, start, out_vehicle, out_pay


@njit(cache=True, nogil=True)
def _paid(
    e: int, g: int, j: int, payments: np.ndarray, shares: tuple, mean_share: float
) -> float:  # pragma: no cover - compiled
    """``payments[e, j]``, or the entry's own share when ``payments`` has no rows."""
    if payments.shape[0] == 0:
        return _own_share(e, g, j, shares, mean_share)
    return payments[e, j]


@njit(cache=True, nogil=True)
def _span(
    cell_start: np.ndarray, cell: np.ndarray, order: np.ndarray, i: int
) -> tuple[int, int]:  # pragma: no cover - compiled
    g = cell[order[i]]
    return cell_start[g], cell_start[g + 1]


@njit(cache=True, nogil=True)
def _ascending(values: np.ndarray, lo: int, hi: int) -> bool:  # pragma: no cover - compiled
    """Whether ``values[lo:hi]`` strictly ascend."""
    for x in range(lo + 1, hi):
        if values[x] <= values[x - 1]:
            return False
    return True


@njit(cache=True, nogil=True)
def with_exclusions_kernel(
    start: np.ndarray,
    vehicle: np.ndarray,
    pay: np.ndarray,
    covers_start: np.ndarray,
    covers: np.ndarray,
    first_room: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``with_exclusions``: each candidate's payments, then 1 to each room it covers."""
    n = len(start) - 1
    out_start = np.zeros(n + 1, dtype=np.int64)
    for k in range(n):
        own = start[k + 1] - start[k]
        out_start[k + 1] = out_start[k] + own + covers_start[k + 1] - covers_start[k]
    out_vehicle = np.empty(out_start[n], dtype=np.int64)
    out_pay = np.empty(out_start[n])
    for k in range(n):
        x = out_start[k]
        for e in range(start[k], start[k + 1]):
            out_vehicle[x], out_pay[x] = vehicle[e], pay[e]
            x += 1
        for e in range(covers_start[k], covers_start[k + 1]):
            out_vehicle[x], out_pay[x] = first_room + covers[e], 1.0
            x += 1
    return out_start, out_vehicle, out_pay
