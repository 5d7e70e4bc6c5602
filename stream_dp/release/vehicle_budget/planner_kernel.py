"""The vehicle budget's plan (docs/math.md §13.1) as one compiled (numba) call: its setup
and every round, with no Python between rounds.

Every float is computed by the same operations, in the same order, as the numpy expressions
of :func:`stream_dp.dp.epsilon_grid.round_up` and the reference plan
(``tests.support.vehicle_budget_reference``, its ``cheapest_epsilon``): a cell's ε
from integer sums, the sit-outs' scores and their running sum over the over-room vehicles in
ascending order. A vehicle's payment is summed over its kept entries once, then moved by each
change: on the ε grid (a power of two) these sums are exact, so they equal the reference's
sums in entry order (off it, each round sums them again, :func:`plan_rounds`). So the plan is
the same bit for bit (tested).

Layouts (:func:`layout`), besides the occupancy's entries grouped by cell:

- *runs*: ``run_start[g]:run_start[g + 1]`` are cell ``g``'s distinct counts ascending
  (``run_count``), how many of its kept entries have each (``run_kept``) and their sit-out
  score ``m / (M ε)`` at the cell's ε (``run_key``). A cell is costed from its runs (equal
  counts share ``S(c)``); a sit-out decrements its run.
- *slots*: ``slot[vehicle_start[v]:vehicle_start[v + 1]]`` are vehicle ``v``'s entries in
  entry order, each as ``entry << 32 | run`` (one int64 read per entry).
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: A slot's low half: its entry's run (whether the entry is kept is ``kept[entry]``: the
#: slots never change, so one layout serves every plan of an occupancy).
_LOW = 0xFFFFFFFF


@njit(cache=True, nogil=True)
def layout(
    cell_start: np.ndarray,
    vehicle: np.ndarray,
    count: np.ndarray,
    n_vehicles: int,
    top: int,
    by_histogram: bool,
) -> tuple[
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray
]:  # pragma: no cover - compiled
    """``(run_start, run_count, run_kept, run_cell, vehicle_start, slot)`` (module docstring),
    all entries kept: :func:`cell_runs` and :func:`vehicle_slots`. Entries and runs must be
    fewer than 2^31."""
    run_start, run_count, run_kept, run_cell, entry_run = cell_runs(
        cell_start, count, top, by_histogram
    )
    vehicle_start, slot = vehicle_slots(vehicle, entry_run, n_vehicles)
    return run_start, run_count, run_kept, run_cell, vehicle_start, slot


@njit(cache=True, nogil=True)
def cell_runs(
    cell_start: np.ndarray, count: np.ndarray, top: int, by_histogram: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """The runs of :func:`layout` (``(run_start, run_count, run_kept, run_cell)``, all
    entries kept) and per entry its run. A cell's runs come from a histogram of its counts
    over ``0..top`` (``by_histogram``: when ``n_cells * (top + 1)`` is linear in the
    entries) or from its sorted counts; both give the same runs. One pass in entry order."""
    n_cells, n = len(cell_start) - 1, len(count)
    run_start = np.empty(n_cells + 1, dtype=np.int64)
    run_count = np.empty(n, dtype=np.int64)
    run_kept = np.empty(n, dtype=np.int64)
    entry_run = np.empty(n, dtype=np.int64)
    width = top + 1 if by_histogram else 1
    hist = np.zeros(width, dtype=np.int64)
    run_of = np.empty(width, dtype=np.int64)
    r = 0
    for g in range(n_cells):
        run_start[g] = r
        begin, end = cell_start[g], cell_start[g + 1]
        first = r
        if by_histogram:
            low, high = top, 0
            for e in range(begin, end):
                c = count[e]
                hist[c] += 1
                low, high = min(low, c), max(high, c)
            for c in range(low, high + 1):
                if hist[c] > 0:
                    run_count[r], run_kept[r], run_of[c] = c, hist[c], r
                    hist[c] = 0
                    r += 1
        else:
            values = np.sort(count[begin:end])
            for i in range(len(values)):
                if i == 0 or values[i] != values[i - 1]:
                    run_count[r], run_kept[r] = values[i], 0
                    r += 1
                run_kept[r - 1] += 1
        for e in range(begin, end):
            if by_histogram:
                entry_run[e] = run_of[count[e]]
            else:
                entry_run[e] = first + np.searchsorted(run_count[first:r], count[e])
    run_start[n_cells] = r
    run_cell = np.empty(r, dtype=np.int64)
    for g in range(n_cells):
        run_cell[run_start[g] : run_start[g + 1]] = g
    return run_start, run_count[:r].copy(), run_kept[:r].copy(), run_cell, entry_run


@njit(cache=True, nogil=True)
def vehicle_slots(
    vehicle: np.ndarray, entry_run: np.ndarray, n_vehicles: int
) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``(vehicle_start, slot)`` of :func:`layout`: the entries by vehicle, each vehicle's in
    entry order (a stable counting sort), each slot ``entry << 32 | run``."""
    vehicle_start = np.zeros(n_vehicles + 1, dtype=np.int64)
    for v in vehicle:  # a plain count: faster than np.bincount here
        vehicle_start[v + 1] += 1
    for v in range(n_vehicles):
        vehicle_start[v + 1] += vehicle_start[v]
    cursor = vehicle_start[:-1].copy()
    slot = np.empty(len(vehicle), dtype=np.int64)
    for e in range(len(vehicle)):
        q = cursor[vehicle[e]]
        cursor[vehicle[e]] = q + 1
        slot[q] = (e << 32) | entry_run[e]
    return vehicle_start, slot


@njit(cache=True, nogil=True)
def cost_cell(
    g: int,
    run_start: np.ndarray,
    run_count: np.ndarray,
    run_kept: np.ndarray,
    total: np.ndarray,
    factor_upper: float,
    target: float,
    upper: float,
    prefix_limit: int,
    pseudo_user: bool,
) -> tuple[float, int, int]:  # pragma: no cover - compiled
    """Cell ``g``'s least mean ε meeting ``target`` with its kept entries, its cap (+inf and 0
    where none does; ties to the smaller cap) and how many entries it keeps. ``prefix_limit``
    < 0: none. ``factor_upper`` is ``ln20 (1 + rtol) U``. Each distinct count ``c`` has one
    ``S(c)``: the kept readings below it plus ``c`` for each kept entry from it up."""
    begin, end = run_start[g], run_start[g + 1]
    n = 0
    largest = 0
    for r in range(begin, end):
        if run_kept[r] > 0:
            n += run_kept[r]
            largest = run_count[r]
    best = np.inf
    best_cap = 0
    m = total[g]
    if m <= 0:
        m = 1.0
    below = 0
    j = 0
    for r in range(begin, end):
        k = run_kept[r]
        if k == 0:
            continue
        c = run_count[r]
        s = below + (n - j) * c  # S(c): kept readings with this count as the cap
        below += c * k
        j += k
        if not pseudo_user:
            allowed = c == largest
        elif prefix_limit >= 0:
            allowed = c <= prefix_limit or c == largest
        else:
            allowed = True
        slack = target - upper * (1.0 - s / m)
        if not (allowed and slack > 0 and s > 0):
            continue
        eps = factor_upper * c / (s * slack)
        if eps < best and np.isfinite(eps):
            best = eps
            best_cap = c
    return best, best_cap, n


@njit(cache=True, nogil=True)
def round_up_one(epsilon: float, grow: float, step: float) -> float:  # pragma: no cover
    """One value of :func:`stream_dp.dp.epsilon_grid.round_up` (``grow`` = 1 +
    margin)."""
    if not np.isfinite(epsilon):
        return np.inf
    ticks = np.ceil(epsilon * grow / step - 1e-9)
    return max(ticks, 1.0) * step


@njit(cache=True, nogil=True)
def reprice(
    changed: np.ndarray,
    n_changed: int,
    cell_start: np.ndarray,
    runs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    total: np.ndarray,
    costing: tuple[float, float, float, int, bool],
    rounding: tuple[float, float, float],
    max_epsilon: float,
    min_vehicles: int,
    state: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    payments: tuple[np.ndarray, np.ndarray, bool],
    watch: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> int:  # pragma: no cover - compiled
    """Costs the first ``n_changed`` cells of ``changed`` (:func:`cost_cell`), rounds their ε
    up (:func:`round_up_one`), drops (ε +inf, entries unkept) those past ``max_epsilon``,
    keeping fewer than ``min_vehicles`` or already dropped (held). ``runs``: ``(run_start,
    run_count, run_kept, run_key)``; ``state``: ``(epsilon, cap, dropped, kept)``, updated.
    ``payments``: ``(vehicle, paid, update)``; with ``update``, the payments of a cell's kept
    vehicles move by its ε's change (exact: :func:`plan_rounds`) and those a change leaves
    past their room are noted in ``watch`` (:func:`note_over`). Moves the cells whose ε
    changed to the front of ``changed`` and returns how many."""
    run_start, run_count, run_kept, run_key = runs
    epsilon, cap, dropped, kept = state
    vehicle, paid, update = payments
    factor_upper, target, upper, prefix_limit, pseudo_user = costing
    share, grow, step = rounding
    n_repriced = 0
    for i in range(n_changed):
        g = changed[i]
        mean, cap[g], n_kept = cost_cell(g, run_start, run_count, run_kept, total, factor_upper,
                                         target, upper, prefix_limit, pseudo_user)  # fmt: skip
        eps = round_up_one(mean / share, grow, step)
        drop = eps > max_epsilon or n_kept < min_vehicles or dropped[g]
        if drop:
            eps = np.inf
        old = epsilon[g]
        if update and eps != old and np.isfinite(old):  # NaN: the first round, paid after
            delta = eps - old if np.isfinite(eps) else -old
            for e in range(cell_start[g], cell_start[g + 1]):
                if kept[e]:
                    paid[vehicle[e]] += delta
                    note_over(vehicle[e], paid, watch)
        if drop:
            dropped[g] = True
            kept[cell_start[g] : cell_start[g + 1]] = False
        if eps == old:
            continue
        epsilon[g] = eps
        for r in range(run_start[g], run_start[g + 1]):
            run_key[r] = run_count[r] / (total[g] * eps)
        changed[n_repriced] = g  # the front of ``changed`` is already read
        n_repriced += 1
    return n_repriced


@njit(cache=True, nogil=True)
def note_over(
    v: int, paid: np.ndarray, watch: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
) -> None:  # pragma: no cover - compiled
    """Notes vehicle ``v`` in ``watch`` (``(room, noted, watched, n_watched)``: per vehicle
    its room and whether it is noted, the noted vehicles and how many, in a 1-array) when it
    pays past its room (as :func:`over_room` tests it) and is not noted yet."""
    room, noted, watched, n_watched = watch
    if paid[v] - room[v] > 1e-12 and not noted[v]:  # its payment just read: no jump to noted
        noted[v] = True
        watched[n_watched[0]] = v
        n_watched[0] += 1


@njit(cache=True, nogil=True)
def over_watched(
    watch: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    paid: np.ndarray,
    over: np.ndarray,
    excess: np.ndarray,
) -> int:  # pragma: no cover - compiled
    """:func:`over_room` of the vehicles noted in ``watch`` (:func:`note_over`), ascending;
    the notes cleared."""
    room, noted, watched, n_watched = watch
    some = np.sort(watched[: n_watched[0]])
    noted[some] = False
    n_watched[0] = 0
    return over_room(some, paid, room, over, excess)


@njit(cache=True, nogil=True)
def pay_everyone(
    cell_start: np.ndarray,
    vehicle: np.ndarray,
    kept: np.ndarray,
    epsilon: np.ndarray,
    paid: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Every vehicle's summed ε of its kept entries in one pass in entry order:
    ``np.bincount(vehicle, weights=np.where(kept, epsilon[cell], 0.0))`` into ``paid``.
    Faster than summing each vehicle's slots in turn: consecutive entries are other
    vehicles', so their additions do not wait for each other."""
    paid[:] = 0.0
    for g in range(len(cell_start) - 1):
        eps = epsilon[g]
        if not np.isfinite(eps):  # dropped: nothing kept
            continue
        for e in range(cell_start[g], cell_start[g + 1]):
            if kept[e]:
                paid[vehicle[e]] += eps


@njit(cache=True, nogil=True)
def pay_some(
    payers: np.ndarray,
    vehicle_start: np.ndarray,
    slot: np.ndarray,
    kept: np.ndarray,
    run_cell: np.ndarray,
    epsilon: np.ndarray,
    paid: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """The ``payers``' summed ε of their kept entries, each in entry order (its slots)."""
    for v in payers:
        total = 0.0
        for q in range(vehicle_start[v], vehicle_start[v + 1]):
            s = slot[q]
            eps = epsilon[run_cell[s & _LOW]]
            if kept[s >> 32] and np.isfinite(eps):  # not sat out, not dropped
                total += eps
        paid[v] = total


@njit(cache=True, nogil=True)
def over_room(
    payers: np.ndarray, paid: np.ndarray, room: np.ndarray, over: np.ndarray, excess: np.ndarray
) -> int:  # pragma: no cover - compiled
    """The ``payers`` (ascending) paying more than their room, into ``over`` with their excess
    ``paid - room`` into ``excess``; returns how many."""
    n_over = 0
    for v in payers:
        short = paid[v] - room[v]
        if short > 1e-12:
            over[n_over], excess[n_over] = v, short
            n_over += 1
    return n_over


@njit(cache=True, nogil=True)
def sit_outs(
    over: np.ndarray,
    excess: np.ndarray,
    vehicle_start: np.ndarray,
    slot: np.ndarray,
    kept: np.ndarray,
    sat: np.ndarray,
    run_cell: np.ndarray,
    run_key: np.ndarray,
    run_kept: np.ndarray,
    epsilon: np.ndarray,
    changed: np.ndarray,
    paid: np.ndarray,
    update: bool,
) -> int:  # pragma: no cover - compiled
    """The ``over`` vehicles (ascending; ``excess[i]``: the i-th's excess) leave their kept
    entries by ``m / (M ε)`` ascending (ties to the smaller cell) while the ε of the ones
    before is short of the excess. The running sum runs over all of them in that order, as the
    reference's ``np.cumsum`` does. A vehicle's choice reads only its own entries, so each
    leaves at once: unkept, its run decremented (with ``update``, its ε off its ``paid``).
    Lists the cells left in ``changed`` (ascending) and returns how many.

    ``sat``: per slot, whether its entry sat out (set here). A slot is read when it has not
    and its cell's ε is finite: the same as its entry being kept, since an entry is unkept
    only by a sit-out or with its cell dropped (ε +inf, for good), and read in slot order
    instead of by a jump to the entry."""
    longest = 0
    for v in over:
        longest = max(longest, vehicle_start[v + 1] - vehicle_start[v])
    ranked = np.empty(longest, dtype=np.int64)
    score = np.empty(longest, dtype=np.float64)
    left = np.zeros(len(epsilon), dtype=np.bool_)
    run = 0.0
    for i in range(len(over)):
        v = over[i]
        k = 0
        for q in range(vehicle_start[v], vehicle_start[v + 1]):
            s = slot[q]
            if sat[q] or not np.isfinite(epsilon[run_cell[s & _LOW]]):
                continue  # sat out or dropped
            key = run_key[s & _LOW]
            p = k  # insertion sort by score, stable: ties stay in entry (= cell) order
            while p > 0 and score[p - 1] > key:
                score[p], ranked[p] = score[p - 1], ranked[p - 1]
                p -= 1
            score[p], ranked[p] = key, q
            k += 1
        limit = excess[i] - 1e-12
        first_cum, first_eps = 0.0, 0.0
        for p in range(k):
            q = ranked[p]
            run_g = slot[q] & _LOW
            eps = epsilon[run_cell[run_g]]
            run = run + eps
            if p == 0:
                first_cum, first_eps = run, eps
            before = run - eps - (first_cum - first_eps)
            if before < limit:
                if update:
                    paid[v] -= eps
                kept[slot[q] >> 32] = False
                sat[q] = True
                run_kept[run_g] -= 1
                left[run_cell[run_g]] = True
    n_changed = 0
    for g in range(len(left)):
        if left[g]:
            changed[n_changed] = g
            n_changed += 1
    return n_changed


@njit(cache=True, nogil=True, error_model="numpy")
def plan_rounds(
    cell_start: np.ndarray,
    vehicle: np.ndarray,
    count: np.ndarray,
    total: np.ndarray,
    room: np.ndarray,
    dropped: np.ndarray,
    top: int,
    by_histogram: bool,
    costing: tuple[float, float, float, int, bool],
    rounding: tuple[float, float, float],
    max_epsilon: float,
    min_vehicles: int,
    few: int,
    update: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:  # pragma: no cover
    """The plan: ``(kept, epsilon, cap, paid, rounds)`` for vehicles that may spend ``room``.
    ``dropped`` (updated): the cells held back, then also those dropped. ``costing`` and
    ``rounding``: :func:`reprice`'s; ``max_epsilon``: the largest ε a cell may take (slack
    included).

    Each round reprices the changed cells (all, first). The vehicles whose payment may
    differ (those read in a cell whose ε changed, and those that sat out) pay again; all
    vehicles do, in one pass, when ``few`` times those entries outnumber the vehicles. The
    vehicles over their room sit out; the cells they left are the next round's changed.

    With ``update`` (and every payment below 2^52 steps of the grid) the first round sums
    the payments and later rounds move them by each change: a sit-out's ε off, a repriced
    cell's change of ε on its kept vehicles. Every ε is a whole number of grid steps (a power
    of two, :func:`round_up_one`), so each sum and difference is exact: the same floats as
    summing again in entry order. A later round then compares with their rooms only the
    vehicles a change left past theirs (:func:`note_over`): every other one was within its
    room after the round before, and no change since has put it past."""
    laid = layout(cell_start, vehicle, count, len(room), top, by_histogram)
    return plan_laid_out(cell_start, vehicle, total, room, dropped, laid, costing, rounding,
                         max_epsilon, min_vehicles, few, update)  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy")
def plan_priced(
    cell_start: np.ndarray,
    vehicle: np.ndarray,
    count: np.ndarray,
    total: np.ndarray,
    room: np.ndarray,
    held: np.ndarray,
    ceiling: np.ndarray,
    top: int,
    by_histogram: bool,
    costing: tuple[float, float, float, int, bool],
    rounding: tuple[float, float, float],
    max_epsilon: float,
    min_vehicles: int,
    few: int,
    update: bool,
    settle: float,
    refusable: np.ndarray,
    refuse_at: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int]:  # pragma: no cover
    """The release price's loop (docs/math.md §13.3) in one call: :func:`plan_rounds` with
    ``held`` (updated) cells held, the cells whose ε passes their ``ceiling`` (+ 1e-12) added
    to ``held`` and the plan computed again from scratch, until none does, or until those
    that do hold under ``settle`` of the readings of the cells the plan releases or include
    ``refusable`` cells (per cell; empty: none) of at least ``refuse_at`` readings in all:
    they are then dropped from that plan
    (:func:`hold_in_plan`, docs/math.md §13.3, "When the re-plans stop"). The same plans as
    one :func:`plan_rounds` call per round (each a fresh plan: the layout is a function of
    the occupancy alone, so it is built once and each plan starts from a copy of its
    all-kept ``run_kept``).

    A plan's first round costs every cell with all its entries kept, which holding a cell
    does not change: it is computed once (:func:`first_round`, with the cells held at the
    start) and each plan starts from it with its held cells dropped (:func:`hold_more`); the
    next plan's start is this one's with only the newly held cells dropped too
    (:func:`drop_held`: the same floats, exact on the grid). Holding cells only lowers
    payments, so the vehicles past their room as a plan starts are among those of the plan
    before (:func:`past_room`): only they are compared again. Returns the last plan and how
    many plans it took."""
    run_start, run_count, run_kept, run_cell, entry_run = cell_runs(
        cell_start, count, top, by_histogram
    )
    # The slots by vehicle serve only the sit-outs: laid out once a plan first has a vehicle
    # past its room (or when the payments are not exact, whatever the plans).
    vehicle_start = np.zeros(len(room) + 1, dtype=np.int64)  # a stand-in until laid out
    slot = np.zeros(0, dtype=np.int64)
    exact = update and entries_exact(len(vehicle), max_epsilon, rounding[2])
    slots_laid = not exact
    if slots_laid:
        vehicle_start, slot = vehicle_slots(vehicle, entry_run, len(room))
        exact = update and exact_payments(vehicle_start, max_epsilon, rounding[2])
    laid = (run_start, run_count, run_kept, run_cell, vehicle_start, slot)
    first = first_round(cell_start, total, held.copy(), laid, costing, rounding, max_epsilon,
                        min_vehicles)  # fmt: skip
    first_paid = np.zeros(len(room))
    if exact:
        pay_everyone(cell_start, vehicle, first[3], first[0], first_paid)
    base = hold_more(first, held, cell_start, vehicle, run_start, run_count, total, first_paid,
                     exact)  # fmt: skip
    checked = first_payers(cell_start, vehicle, len(room), few)
    plans = 0
    # Every plan runs in the same arrays (a copy of ``base`` into them, no fresh allocation
    # per plan: :func:`plan_scratch`); the last plan's are returned.
    start = (base[0].copy(), base[1].copy(), base[2].copy(), base[3].copy(), base[4].copy(),
             base[5].copy())  # fmt: skip
    run_now = run_kept.copy()
    scratch = plan_scratch(len(room), len(slot))
    while True:
        plans += 1
        if exact:  # the payers past their room as the plan starts, among the last plan's
            checked = past_room(checked, base[5], room)
        if not slots_laid and len(checked):  # none past: the plan ends at its first round
            vehicle_start, slot = vehicle_slots(vehicle, entry_run, len(room))
            slots_laid = True
            scratch = plan_scratch(len(room), len(slot))
        copy_start(base, start)
        run_now[:] = run_kept
        fresh = (run_start, run_count, run_now, run_cell, vehicle_start, slot)
        # ``exact`` is also whether the payments can be moved: with ``update``, either every
        # sum over all entries is exact (so every vehicle's is), or it was tested on the slots
        kept, epsilon, cap, paid, rounds = plan_in(
            cell_start, vehicle, total, room, fresh, start, exact, checked, costing, rounding,
            max_epsilon, min_vehicles, few, exact, scratch,
        )  # fmt: skip
        n_over, over_readings, live_readings, refused = 0, 0.0, 0.0, 0.0
        for g in range(len(epsilon)):
            if np.isfinite(epsilon[g]):
                live_readings += total[g]
                if epsilon[g] > ceiling[g] + 1e-12:
                    held[g] = True
                    n_over += 1
                    over_readings += total[g]
                    if len(refusable) > 0 and refusable[g]:
                        refused += total[g]
        if n_over == 0:
            return kept, epsilon, cap, paid, rounds, plans
        stop = refused > 0.0 and refused >= refuse_at
        if stop or over_readings < settle * live_readings:  # held in this plan
            hold_in_plan(cell_start, vehicle, held, kept, epsilon, paid)
            return kept, epsilon, cap, paid, rounds, plans
        drop_held(base, held, (cell_start, vehicle, run_start, run_count, total), exact)


@njit(cache=True, nogil=True, error_model="numpy")
def hold_in_plan(
    cell_start: np.ndarray,
    vehicle: np.ndarray,
    held: np.ndarray,
    kept: np.ndarray,
    epsilon: np.ndarray,
    paid: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """The ``held`` cells a plan still releases dropped from it (``kept``, ``epsilon`` and
    ``paid`` updated): their entries unkept, their ε +inf, every payment summed again
    (:func:`pay_everyone`). The other cells' ε and sit-outs stay the plan's: a cell's ε reads
    only its own kept entries, and dropping cells only lowers payments, so every vehicle
    stays within its room."""
    for g in range(len(epsilon)):
        if held[g] and np.isfinite(epsilon[g]):
            kept[cell_start[g] : cell_start[g + 1]] = False
            epsilon[g] = np.inf
    pay_everyone(cell_start, vehicle, kept, epsilon, paid)


@njit(cache=True, nogil=True)
def entries_exact(
    n_entries: int, max_epsilon: float, step: float
) -> bool:  # pragma: no cover - compiled
    """Whether a payment summed over any ``n_entries`` entries stays below 2^52 steps of the
    grid: then so does every payment (a vehicle has at most that many entries), and
    :func:`exact_payments` holds whatever the vehicles' entries."""
    return n_entries * (max_epsilon / step + 1.0) < 2.0**52


@njit(cache=True, nogil=True)
def exact_payments(
    vehicle_start: np.ndarray, max_epsilon: float, step: float
) -> bool:  # pragma: no cover - compiled
    """Whether every payment is below 2^52 steps of the grid (``step`` a power of two): its
    sums and differences are then exact, in any order (:func:`plan_rounds`)."""
    longest = 0
    for v in range(len(vehicle_start) - 1):
        longest = max(longest, vehicle_start[v + 1] - vehicle_start[v])
    return entries_exact(longest, max_epsilon, step)


@njit(cache=True, nogil=True, error_model="numpy")
def first_round(
    cell_start: np.ndarray,
    total: np.ndarray,
    dropped: np.ndarray,
    laid: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    costing: tuple[float, float, float, int, bool],
    rounding: tuple[float, float, float],
    max_epsilon: float,
    min_vehicles: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """A plan's first round on its :func:`layout` ``laid`` (all entries kept): every cell
    costed (:func:`reprice`), ``dropped`` (updated) the held cells and those dropped.
    Returns ``(epsilon, cap, dropped, kept, run_key)``; nobody has paid yet."""
    n_cells = len(cell_start) - 1
    run_start, run_count, run_kept = laid[0], laid[1], laid[2]
    run_key = np.empty(len(run_count))
    kept = np.ones(cell_start[n_cells], dtype=np.bool_)
    epsilon = np.full(n_cells, np.nan)  # NaN: unequal to every first ε
    cap = np.zeros(n_cells, dtype=np.int64)
    no_payments = (np.zeros(0, dtype=np.int64), np.zeros(0), False)
    no_watch = (np.zeros(0), np.zeros(0, dtype=np.bool_), np.zeros(0, dtype=np.int64),
                np.zeros(1, dtype=np.int64))  # fmt: skip
    reprice(np.arange(n_cells), n_cells, cell_start, (run_start, run_count, run_kept, run_key),
            total, costing, rounding, max_epsilon, min_vehicles, (epsilon, cap, dropped, kept),
            no_payments, no_watch)  # fmt: skip
    return epsilon, cap, dropped, kept, run_key


@njit(cache=True, nogil=True, error_model="numpy")
def hold_more(
    first: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    held: np.ndarray,
    cell_start: np.ndarray,
    vehicle: np.ndarray,
    run_start: np.ndarray,
    run_count: np.ndarray,
    total: np.ndarray,
    first_paid: np.ndarray,
    exact: bool,
) -> tuple[
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray
]:  # pragma: no cover - compiled
    """A copy of the :func:`first_round` ``first`` with the ``held`` cells it kept dropped
    (:func:`drop_held`), as the first round of a plan holding them; with ``exact`` payments,
    ``paid`` a copy of ``first_paid`` (the first round's) with their ε taken off. Returns
    ``(epsilon, cap, dropped, kept, run_key, paid)``."""
    start = (first[0].copy(), first[1].copy(), first[2].copy(), first[3].copy(),
             first[4].copy(), first_paid.copy())  # fmt: skip
    drop_held(start, held, (cell_start, vehicle, run_start, run_count, total), exact)
    return start


@njit(cache=True, nogil=True, error_model="numpy")
def drop_held(
    start: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    held: np.ndarray,
    cells: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    exact: bool,
) -> None:  # pragma: no cover - compiled
    """Drops from a plan's first round ``start`` (``(epsilon, cap, dropped, kept, run_key,
    paid)``, updated) the ``held`` cells it has not dropped: ε +inf, entries unkept, their
    runs' sit-out scores at ε +inf; with ``exact`` payments their ε taken off their vehicles'
    ``paid`` (exact: :func:`exact_payments`, so dropping cells in turn gives the floats of
    dropping them at once). ``cells``: ``(cell_start, vehicle, run_start, run_count,
    total)``, the entries' and runs' layout by cell and each cell's readings."""
    cell_start, vehicle, run_start, run_count, total = cells
    epsilon, dropped, kept, run_key, paid = start[0], start[2], start[3], start[4], start[5]
    for g in range(len(epsilon)):
        if not held[g] or dropped[g]:
            continue
        eps = epsilon[g]
        if exact:
            for e in range(cell_start[g], cell_start[g + 1]):
                paid[vehicle[e]] -= eps
        dropped[g] = True
        kept[cell_start[g] : cell_start[g + 1]] = False
        epsilon[g] = np.inf
        for r in range(run_start[g], run_start[g + 1]):
            run_key[r] = run_count[r] / (total[g] * np.inf)


@njit(cache=True, nogil=True)
def first_payers(
    cell_start: np.ndarray, vehicle: np.ndarray, n_vehicles: int, few: int
) -> np.ndarray:  # pragma: no cover - compiled
    """The vehicles a plan's first round compares with their rooms (:func:`plan_in`,
    every cell repriced): all, ascending, when ``few`` times the entries outnumber them, else
    the ones with an entry."""
    if cell_start[len(cell_start) - 1] * few > n_vehicles:
        return np.arange(n_vehicles)
    some = np.zeros(n_vehicles, dtype=np.bool_)
    for e in range(cell_start[len(cell_start) - 1]):
        some[vehicle[e]] = True
    return np.flatnonzero(some)


@njit(cache=True, nogil=True)
def past_room(
    payers: np.ndarray, paid: np.ndarray, room: np.ndarray
) -> np.ndarray:  # pragma: no cover - compiled
    """The ``payers`` (ascending) paying more than their room (as :func:`over_room` tests
    it), ascending."""
    over, excess = np.empty(len(payers), dtype=np.int64), np.empty(len(payers))
    return over[: over_room(payers, paid, room, over, excess)].copy()


@njit(cache=True, nogil=True, error_model="numpy")
def plan_laid_out(
    cell_start: np.ndarray,
    vehicle: np.ndarray,
    total: np.ndarray,
    room: np.ndarray,
    dropped: np.ndarray,
    laid: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    costing: tuple[float, float, float, int, bool],
    rounding: tuple[float, float, float],
    max_epsilon: float,
    min_vehicles: int,
    few: int,
    update: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:  # pragma: no cover
    """:func:`plan_rounds` on its :func:`layout` ``laid`` (its ``run_kept`` is updated: a
    fresh plan needs it all-kept)."""
    first = first_round(cell_start, total, dropped, laid, costing, rounding, max_epsilon,
                        min_vehicles)  # fmt: skip
    start = (first[0], first[1], first[2], first[3], first[4], np.zeros(len(room)))
    moves = update and exact_payments(laid[4], max_epsilon, rounding[2])
    return plan_in(cell_start, vehicle, total, room, laid, start, False,
                   np.zeros(0, dtype=np.int64), costing, rounding, max_epsilon, min_vehicles,
                   few, moves, plan_scratch(len(room), len(laid[5])))  # fmt: skip


@njit(cache=True, nogil=True)
def plan_scratch(
    n_vehicles: int, n_slots: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover
    """A plan's working arrays (:func:`plan_in`): ``(over, excess, seen, payers, sat)``, per
    vehicle the over-room list, their excess, the marks and the payers' list, per slot
    whether it sat out. :func:`plan_in` clears ``seen`` and ``sat`` as it starts, so the
    plans of one :func:`plan_priced` call share one set."""
    return (np.empty(n_vehicles, dtype=np.int64), np.empty(n_vehicles),
            np.zeros(n_vehicles, dtype=np.bool_), np.empty(n_vehicles, dtype=np.int64),
            np.zeros(n_slots, dtype=np.bool_))  # fmt: skip


@njit(cache=True, nogil=True)
def copy_start(
    base: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    start: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> None:  # pragma: no cover - compiled
    """``start`` (each array as long as ``base``'s) set to a copy of a plan's first round
    ``base`` (:func:`hold_more`'s six arrays)."""
    start[0][:] = base[0]
    start[1][:] = base[1]
    start[2][:] = base[2]
    start[3][:] = base[3]
    start[4][:] = base[4]
    start[5][:] = base[5]


@njit(cache=True, nogil=True, error_model="numpy")
def plan_in(
    cell_start: np.ndarray,
    vehicle: np.ndarray,
    total: np.ndarray,
    room: np.ndarray,
    laid: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    start: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    paid_first: bool,
    checked: np.ndarray,
    costing: tuple[float, float, float, int, bool],
    rounding: tuple[float, float, float],
    max_epsilon: float,
    min_vehicles: int,
    few: int,
    update: bool,
    scratch: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:  # pragma: no cover
    """:func:`plan_laid_out` from its first round's repricing (``start``: :func:`hold_more`'s
    ``(epsilon, cap, dropped, kept, run_key, paid)``; ``paid_first``: ``paid`` holds the first
    round's payments, else they are summed into it here (``paid`` then all zero); with them,
    ``checked``: ascending, the vehicles the first round compares with their rooms, all that
    may be past it: those of :func:`first_payers` past it, or a subset holding them), in the
    working arrays
    ``scratch`` (:func:`plan_scratch`: any contents, ``seen`` and ``sat`` are cleared here);
    ``update``: moving the payments, already tested on the layout (:func:`exact_payments`)."""
    n_cells, n_vehicles = len(cell_start) - 1, len(room)
    run_start, run_count, run_kept, run_cell, vehicle_start, slot = laid
    epsilon, cap, dropped, kept, run_key = start[0], start[1], start[2], start[3], start[4]
    runs = (run_start, run_count, run_kept, run_key)
    state = (epsilon, cap, dropped, kept)
    paid = start[5]
    changed = np.arange(n_cells)  # the first round repriced every cell, in order
    n_repriced = n_cells
    over, excess, seen, payers, sat = scratch  # sat: per slot, whether its entry sat out
    seen[:] = False
    sat[:] = False
    everyone = np.arange(n_vehicles)  # once a plan, not once a round
    n_over = 0
    payments = (vehicle, paid, update)
    watch = (room, seen, payers, np.zeros(1, dtype=np.int64))  # shared: used apart
    rounds = 1
    while True:
        resum = (rounds == 1 and not paid_first) or (rounds > 1 and not update)
        touched = n_over
        for i in range(n_repriced):
            touched += cell_start[changed[i] + 1] - cell_start[changed[i]]
        if rounds > 1 and update:
            # Moved by each change: a vehicle past its room now is one a change left there
            # (each was within it after the last check, or sat out: noted below).
            n_over = over_watched(watch, paid, over, excess)
        elif rounds == 1 and paid_first:
            n_over = over_room(checked, paid, room, over, excess)
        elif touched * few > n_vehicles:  # many payers: one pass over all entries
            if resum:
                pay_everyone(cell_start, vehicle, kept, epsilon, paid)
            n_over = over_room(everyone, paid, room, over, excess)
        else:
            n_payers = 0
            for i in range(n_over):  # those that sat out (distinct)
                seen[over[i]] = True
                payers[n_payers] = over[i]
                n_payers += 1
            for i in range(n_repriced):
                for e in range(cell_start[changed[i]], cell_start[changed[i] + 1]):
                    if not seen[vehicle[e]]:
                        seen[vehicle[e]] = True
                        payers[n_payers] = vehicle[e]
                        n_payers += 1
            some = np.sort(payers[:n_payers])
            seen[some] = False
            if resum:
                pay_some(some, vehicle_start, slot, kept, run_cell, epsilon, paid)
            n_over = over_room(some, paid, room, over, excess)
        if n_over == 0:
            return kept, epsilon, cap, paid, rounds
        if rounds > len(vehicle):  # each round leaves one entry at least (§13.1)
            raise RuntimeError("vehicle budget plan: a round left no entry")
        n_changed = sit_outs(over[:n_over], excess, vehicle_start, slot, kept, sat, run_cell,
                             run_key, run_kept, epsilon, changed, paid, update)  # fmt: skip
        for i in range(n_over if update else 0):  # checked again, as the sums that moved
            note_over(over[i], paid, watch)
        rounds += 1
        n_repriced = reprice(changed, n_changed, cell_start, runs, total, costing,
                             rounding, max_epsilon, min_vehicles, state, payments,
                             watch)  # fmt: skip
