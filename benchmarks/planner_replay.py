"""Whole data sets released by the rules' plan and by the optimiser (issue 37). By default
the optimiser is the release's own setting (``budget_planner = "optimiser"``,
``release/vehicle_budget/optimiser.py``: one regrouping, its cells and the parents of those
that cannot be released alone, paced by the release price, no hold), run as the panel runs
it. ``--hold``, ``--hold-history`` and ``--unpaced`` replay the earlier variants, patched in
by attribute (the evidence for wiring it in):

For every window the regrouping chooses its cells as it does today; the *plan* of those cells
(``release.budget.budget_plan``: per cell its ε and cap, the sit-outs, what each vehicle pays)
is replaced, by attribute in this script only, by the optimiser's: per chosen cell its options
(``release_candidates_compiled.cell_options``: ε_T times :data:`FACTORS`, at most the burst; a
second variant where vehicles of low room sit out), each worth its expected useful readings
times ``1 − κ a`` (``a`` its span so far in hours, κ = :func:`release_hold.staleness_weight`),
with :data:`WITH_HOLD` (``--hold``) a *hold* option (``release_hold.hold_values``: arrivals
estimated from the cell's span so far, its vehicles per hour of span); each read vehicle
pays the cell's ε (what ``check_plan`` checks), within its room; with :data:`PRICE_CEILING`
each option also at most the cell's release price (the plan's pacing,
``budget.epsilon_ceiling``). ``choose_releases`` picks at most one option per cell; a cell
held or not chosen gets ε = +inf (dropped: carried or withheld by the span rules, unchanged).

Each data set is released ``--runs`` times (seeds 0…) with the panel's profile
(``panel.profile_row``) and scored as ``benchmarks/panel.py`` scores it (``panel.one_run``:
useful coverage against the held readings, staleness from the window's close, finer share,
busiest loss per period), the plan as it is beside the optimiser. Every run asserts that no
vehicle lost more than B in any period.

Run: ``python benchmarks/planner_choice.py --replay [--only NAME ...] [--runs N] [--quick]
[--hold] [--unpaced]``
(``--quick``: the panel's quick files, e.g. the 0.6M-reading city).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import h3
import numpy as np
import usefulness
from panel import PANEL, DataSet, one_run, profile_row
from usefulness import Truth

from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.release_candidates_compiled import cell_options
from stream_dp.dp.release_choice import Candidates, choose_releases
from stream_dp.dp.release_hold import arrival_rates, hold_values, staleness_weight
from stream_dp.release.vehicle_budget import cells as budget_cells
from stream_dp.release.vehicle_budget import plan as budget
from stream_dp.release.vehicle_budget import stages as budget_stages
from stream_dp.release.vehicle_budget.planner import BudgetPlan

#: A cell's options: the least ε meeting T times these (at most the burst).
FACTORS = (1.0, 1.5, 2.0, 3.0)
#: Vehicles whose room is under this share of the burst sit out in a cell's second variant.
SIT_OUT_SHARE = 1 / 16
#: τ: a released mean is useful within this share of U of the truth (the panel's).
USEFUL_SHARE = 0.1
#: The data sets replayed by default (the panel's vessel sets and the city).
DEFAULT_SETS = ("AIS week", "Virginia Beach", "US coastal", "New York 8 Dec", "city")
#: Whether each cell's options stop at its release price (``budget.epsilon_ceiling``: the
#: plan's pacing of the rooms over the span); off: up to the burst, within the rooms.
PRICE_CEILING = True
#: Whether each cell has a hold option (``--hold``; off by default: as estimated here it
#: costs the dense city its live release, benchmarks/planner_gaps.md).
WITH_HOLD = False


#: Per (cell, window start): its vehicles' readings in that window (the public occupancy of
#: the data set being replayed, every resolution from R0 to R; :func:`occupancy_history`).
#: Empty: the hold estimates arrivals from the cell's span so far.
HISTORY: dict[tuple[str, int], dict[str, int]] = {}
#: Whether the hold's arrivals come from the earlier windows (``--hold-history``), not the span.
HISTORY_FROM_WINDOWS = False
#: The earlier windows the hold's arrivals are estimated from (``release_hold.arrival_rates``).
HISTORY_WINDOWS = 3


def occupancy_history(
    readings: list[dict[str, Any]], finest: int, coarsest: int, window_seconds: int
) -> dict[tuple[str, int], dict[str, int]]:
    """Per (cell at each resolution ``coarsest … finest``, window start) its vehicles'
    readings: public occupancy, what the hold's arrival estimate reads."""
    out: dict[tuple[str, int], dict[str, int]] = {}
    for r in readings:
        cell = h3.latlng_to_cell(r["lat"], r["lon"], finest)
        start = int(r["ts"]) // window_seconds * window_seconds
        for res in range(coarsest, finest + 1):
            parent = cell if res == finest else h3.cell_to_parent(cell, res)
            counts = out.setdefault((parent, start), {})
            counts[r["vehicle_id"]] = counts.get(r["vehicle_id"], 0) + 1
    return out


def _arrivals(
    params: Any, window_start: int, occupancy: Occupancy, age: np.ndarray, count: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per cell its new vehicles per hour and their mean readings: from :data:`HISTORY` (the
    cell's last :data:`HISTORY_WINDOWS` windows) when set, else from its span so far."""
    n = len(occupancy.cells)
    if not HISTORY:
        k = np.diff(occupancy.cell_start).astype(np.float64)
        return k / age, count / k
    step = params.window_seconds
    window, cell, vehicle, counts = [], [], [], []
    codes: dict[str, int] = {}
    for g, name in enumerate(occupancy.cells):
        for back in range(HISTORY_WINDOWS + 1, 0, -1):
            for v, c in HISTORY.get((name, window_start - back * step), {}).items():
                window.append(-back)
                cell.append(g)
                vehicle.append(codes.setdefault(v, len(codes)))
                counts.append(c)
    return arrival_rates(np.array(window, dtype=np.int64), np.array(cell, dtype=np.int64),
                         np.array(vehicle, dtype=np.int64), np.array(counts, dtype=np.int64),
                         n)  # fmt: skip


def optimised_plan(
    params: Any,
    rooms: Any,
    occupancy: Occupancy,
    span_start: np.ndarray | None = None,
    due: tuple[str, ...] = (),
    refusable: np.ndarray | None = None,
    refuse_at: float = 0.0,
) -> BudgetPlan:
    """The window's plan of ``occupancy``'s cells chosen by the optimiser (module docstring);
    the signature of ``release.vehicle_budget.plan.budget_plan``. ``span_start`` is None when
    no release price applies: with the profile's spans, at the input's last window; no price
    loop runs here, so ``refusable`` and ``refuse_at`` (what would stop one) change nothing."""
    window_start, last = rooms.window_start, span_start is None
    room = budget.vehicle_room(rooms, occupancy)
    n_cells, share = len(occupancy.cells), 1.0 - params.variance_share
    start, count = occupancy.cell_start, occupancy.count
    cell_of = np.repeat(np.arange(n_cells), np.diff(start))
    low = room[occupancy.vehicle_index] < SIT_OUT_SHARE * params.vehicle_burst
    twin = np.flatnonzero(np.bincount(cell_of, weights=low, minlength=n_cells) > 0)
    entries = _entries(start, twin)
    stacked = np.r_[start, start[-1] + np.cumsum(np.diff(start)[twin])].astype(np.int64)
    row_cell = np.r_[np.arange(n_cells), twin]
    settings = _settings(params, share)
    opts = cell_options(stacked, np.r_[count, count[entries]],
                        sits_out=np.r_[np.zeros(len(low), bool), low[entries]],
                        **settings)  # fmt: skip
    ceiling = (
        budget.epsilon_ceiling(params, rooms, occupancy, span_start, due) if PRICE_CEILING else None
    )
    if ceiling is not None:  # the release price: what the plan would let the cell take now
        opts.meets[:] &= opts.epsilon <= ceiling[row_cell][:, None] + 1e-12
    age = _age(params, window_start, occupancy, span_start)
    kappa = staleness_weight(params.max_span_hours)
    row, column = np.nonzero(opts.meets)
    value = opts.useful[row, column] * (1.0 - kappa * age[row_cell[row]])
    entry_of = np.r_[np.arange(len(count)), entries]
    read = ~opts.sits_out
    pay_start, payer, pay = _payments(stacked, row, column, opts.epsilon, read,
                                      occupancy.vehicle_index[entry_of])  # fmt: skip
    group = row_cell[row]
    if WITH_HOLD and params.max_span_hours > 1 and not last:
        arrivals, each = _arrivals(params, window_start, occupancy, age, opts.total[:n_cells])
        hold = hold_values(start, count, age, arrivals, each,
                           max_span_hours=params.max_span_hours, staleness=kappa,
                           sits_out=None, **settings)  # fmt: skip
        holds = np.flatnonzero(hold.value > 0)
        group, value = np.r_[group, holds], np.r_[value, hold.value[holds]]
        pay_start = np.r_[pay_start, np.full(len(holds), pay_start[-1])]
    cands = Candidates(group.astype(np.int64), value, pay_start.astype(np.int64), payer, pay)
    choice = choose_releases(cands, room)
    epsilon, cap = np.full(n_cells, np.inf), np.zeros(n_cells, dtype=np.int64)
    kept = np.zeros(len(count), dtype=bool)
    for k in choice.chosen.tolist():
        if k >= len(row):
            continue  # a hold: the cell waits
        r, j = int(row[k]), int(column[k])
        g = int(row_cell[r])
        epsilon[g], cap[g] = opts.epsilon[r, j], opts.cap[r, j]
        kept[start[g] : start[g + 1]] = read[stacked[r] : stacked[r + 1]]
    paid = np.bincount(occupancy.vehicle_index[kept], weights=epsilon[cell_of[kept]],
                       minlength=len(room))  # fmt: skip
    return BudgetPlan(kept, epsilon, cap, paid, 1)


def _settings(params: Any, share: float) -> dict[str, Any]:
    """``cell_options``' settings of the release's parameters."""
    return {
        "upper": params.upper, "target": float(params.target_mean_error),
        "tau": USEFUL_SHARE * params.upper, "factors": np.array(FACTORS),
        "max_epsilon": params.vehicle_burst, "mean_share": share,
        "min_vehicles": params.min_vehicles,
        "prefix_limit": params.prefix_limit if params.pseudo_user else None,
    }  # fmt: skip


def _age(
    params: Any, window_start: int, occupancy: Occupancy, span_start: np.ndarray | None
) -> np.ndarray:
    """Per cell, the hours its span so far covers (1: this window only, and at the input's
    last window, where no span start is given)."""
    n = len(occupancy.cells)
    if params.max_span_hours < 2 or span_start is None or len(span_start) != n:
        return np.ones(n, dtype=np.int64)
    hours = (window_start - np.asarray(span_start)) // params.window_seconds + 1
    return np.clip(hours, 1, None).astype(np.int64)


def _entries(start: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """The entries of ``cells``, cell after cell."""
    sizes = np.diff(start)[cells]
    return np.repeat(start[cells], sizes) + (
        np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    )


def _payments(
    stacked: np.ndarray,
    row: np.ndarray,
    column: np.ndarray,
    epsilon: np.ndarray,
    read: np.ndarray,
    vehicle: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per candidate (row, column), each read vehicle of its row paying the ε (CSR)."""
    entries = _entries(stacked, row)
    n = np.diff(stacked)[row]
    cand = np.repeat(np.arange(len(row)), n)
    keep = read[entries]
    pay = np.repeat(epsilon[row, column], n)[keep]
    counts = np.bincount(cand[keep], minlength=len(row))
    return np.r_[0, np.cumsum(counts)], vehicle[entries][keep].astype(np.int64), pay


@contextmanager
def optimiser_in_place() -> Iterator[None]:
    """``budget_plan`` replaced by :func:`optimised_plan` where the release calls it."""
    kept = budget_cells.budget_plan, budget.budget_plan, budget_stages.budget_plan
    budget_cells.budget_plan = budget.budget_plan = optimised_plan
    budget_stages.budget_plan = optimised_plan
    try:
        yield
    finally:
        budget_cells.budget_plan, budget.budget_plan, budget_stages.budget_plan = kept


def replay(data: DataSet, runs: int, quick: bool = False) -> dict[str, Any]:
    """``runs`` seeded releases of ``data`` (``quick``: its quick file, as the panel's) with
    the plan and with the optimiser, scored."""
    readings = data.readings(quick)
    truth = Truth(readings, upper=data.upper)
    row = profile_row(data, "rules")  # the rules' plan, its optimiser swapped in below
    HISTORY.clear()
    if WITH_HOLD and HISTORY_FROM_WINDOWS:
        settings = usefulness.settings_of(row)
        coarsest = settings.coarsest_resolution
        HISTORY.update(occupancy_history(
            readings, settings.resolution,
            settings.resolution if coarsest is None else coarsest, settings.window_seconds,
        ))  # fmt: skip
    out: dict[str, Any] = {"name": data.name, "plan": [], "optimiser": []}
    patched = WITH_HOLD or not PRICE_CEILING  # variants the setting does not offer
    optimiser = row if patched else {**row, "budget_planner": "optimiser"}
    variants = (("plan", row, _as_is), ("optimiser", optimiser,
                                         optimiser_in_place if patched else _as_is))  # fmt: skip
    for seed in range(runs):
        for label, settings, context in variants:
            began = time.perf_counter()
            with context():
                run = one_run(truth, settings, seed, data.period_seconds)
            run["wall"] = time.perf_counter() - began
            assert run["loss"] <= data.budget + 1e-9, f"{data.name}: a vehicle past B"
            out[label].append(run)
            print(f"  {data.name} seed {seed} {label}: coverage {100 * run['coverage']:.1f} %, "
                  f"staleness {run['staleness']:.2f} h, finer {100 * run['finer']:.1f} %, "
                  f"loss {run['loss']:.2f} / {data.budget:g}, {run['seconds']:.1f} s",
                  flush=True)  # fmt: skip
    out["budget"] = data.budget
    return out


@contextmanager
def _as_is() -> Iterator[None]:
    yield


HEADER = (
    "| data set | planner | useful coverage %: median (worst) | median staleness h: median "
    "(worst) | finer than R0 %: median (worst) | busiest loss / B: median (worst) | release s "
    "(median) |\n|---|---|---|---|---|---|---|"
)


def rows(result: dict[str, Any]) -> str:
    """The two markdown rows of one data set (:data:`HEADER`)."""
    lines = []
    for label in ("plan", "optimiser"):
        runs = result[label]
        lines.append(
            f"| {result['name']} | {label} "
            f"| {_pair(runs, 'coverage', min, 100.0)} | {_pair(runs, 'staleness', max, 1.0)} "
            f"| {_pair(runs, 'finer', min, 100.0)} "
            f"| {_pair(runs, 'loss', max, 1.0 / result['budget'])} "
            f"| {statistics.median(r['seconds'] for r in runs):.1f} |"
        )
    return "\n".join(lines)


def _pair(runs: list[dict[str, Any]], key: str, worst: Callable[..., float], scale: float) -> str:
    values = [r[key] * scale for r in runs if not np.isnan(r[key])]
    if not values:
        return "n/a"
    return f"{statistics.median(values):.2f} ({worst(values):.2f})"


def main(
    names: list[str] | None,
    runs: int,
    quick: bool = False,
    hold: bool = False,
    paced: bool = True,
    history: bool = False,
) -> int:
    """Replay the data sets ``names`` (default :data:`DEFAULT_SETS`; ``quick``: their quick
    files; ``hold``, ``paced``, ``history``: :data:`WITH_HOLD`, :data:`PRICE_CEILING`,
    :data:`HISTORY_FROM_WINDOWS`) and print the table."""
    global WITH_HOLD, PRICE_CEILING, HISTORY_FROM_WINDOWS  # noqa: PLW0603 - a script's switches
    WITH_HOLD, PRICE_CEILING, HISTORY_FROM_WINDOWS = hold or history, paced, history
    sets = {d.name: d for d in PANEL}
    results = []
    for name in names or DEFAULT_SETS:
        results.append(replay(sets[name], runs, quick))
        print(HEADER + "\n" + "\n".join(rows(r) for r in results), flush=True)
    return 0
