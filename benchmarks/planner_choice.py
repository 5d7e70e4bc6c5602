"""Offline evidence for the release choice (issue 37, item 3): per window, the expected useful
readings of the current plan's releases against the optimiser's (``dp/release_choice.py``) on
the same public occupancy and the same rooms.

Each data set is released once without noise (the plan, spans and losses do not depend on the
noise) with the panel's profile (``panel.profile_row``). At every window's regrouping the
script keeps what the planner sees there (public): the pooled pairs (carry and window), each
vehicle's room (the ledger's rolling budget and pacing) and the window's start. Per window:

- **plan**: the records the window released, each worth ``M · P(useful)`` under the model
  (``release_candidates.useful_probability``: Laplace noise of the record's scale, shifted by
  its worst-case bias ``U (1 − S/M)``, within τ = 10 % of U);
- **optimiser, ledger rooms**: candidates (every resolution from R0 to R of the pooled pairs,
  one exclusive group per R0 cell, a layout per resolution, ε on a grid of shares of the
  burst; each releasing the cells of its layout meeting T at that ε, each vehicle paying its
  own share) chosen by ``choose_releases`` within the rooms the plan had;
- **optimiser, the plan's spend**: the same within what the plan charged each vehicle in this
  window (it may spend no vehicle's budget the plan did not);
- **left unspent**: what the optimiser adds in the R0 cells where the plan released nothing,
  within the rooms the plan left (budget unspent while an affordable candidate existed);
- **in no candidate**: readings whose every enclosing cell misses T even at the burst.

The per-window comparison is myopic: the plan holds cells on purpose (to pool them into
longer spans, released later with more readings), which a single window's value does not
credit, so "ledger rooms" is an upper estimate of the gain and "the plan's spend" a lower one.

Run: ``python benchmarks/planner_choice.py [--only NAME ...] [--million]`` (``--million``
alone: only the 1M-reading window's timing); ``--replay [--only NAME ...] [--runs N]``: whole
data sets released with the optimiser in place of the plan (``planner_replay.py``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h3
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support/: not installed

import planner_replay  # noqa: E402
from panel import PANEL, profile_row  # noqa: E402
from panel_data import aircraft_readings  # noqa: E402
from usefulness import _epoch, million_window, release_params, release_week  # noqa: E402
from usefulness import settings_of as usefulness_settings  # noqa: E402

from stream_dp.commands.profile import BUDGET_PROFILE  # noqa: E402
from stream_dp.dp.noise import LaplaceNoise  # noqa: E402
from stream_dp.dp.release_candidates import useful_probability  # noqa: E402
from stream_dp.dp.release_candidates_compiled import (  # noqa: E402
    cell_candidates,
    cell_options,
    with_exclusions,
)
from stream_dp.dp.release_choice import Candidates, choose_releases  # noqa: E402
from stream_dp.release.accounting import PrivacyAccountant  # noqa: E402
from stream_dp.release.params import ReleaseParams  # noqa: E402
from stream_dp.release.vehicle_budget import stages as budget_stages  # noqa: E402
from stream_dp.release.window import release_window  # noqa: E402
from tests.support.noise_free import NoNoise  # noqa: E402

#: A cell's options: the least ε meeting T times these (at most the burst).
FACTORS = (1.0, 1.5, 2.0, 3.0)
#: Vehicles whose room is under this share of the burst sit out in the second variant of
#: every layout (their readings stay in M; they pay nothing).
SIT_OUT_SHARE = 1 / 16
#: τ: a released mean is useful within this share of U of the truth (the panel's).
USEFUL_SHARE = 0.1
HERE = Path(__file__).parent
EXTRA = {"aircraft (SampleNFlights)": HERE / "data" / "SampleNFlights.csv"}


@dataclass(frozen=True)
class Seen:
    """What the planner saw at one window's regrouping (public)."""

    start: int
    last: bool
    cell_names: tuple[str, ...]
    cell_code: np.ndarray
    vehicle_names: tuple[str, ...]
    vehicle_code: np.ndarray
    count: np.ndarray
    room: np.ndarray


def capture(run: Any) -> tuple[Any, list[Seen]]:
    """``run()``'s result and what every window's regrouping saw (wrapping it: an
    experiment's tool, as coverage_breakdown.py wraps the span policy)."""
    seen: list[Seen] = []
    regroup = budget_stages.PLANNERS["rules"]

    def keeping(cols: Any, params: Any, rooms: Any, *args: Any, **kwargs: Any) -> Any:
        last = bool(args[1] if len(args) > 1 else kwargs.get("last", False))
        room = rooms.of(cols.vehicle_names)
        seen.append(Seen(rooms.window_start, last, cols.cell_names,
                         cols.cell_code.copy(), cols.vehicle_names, cols.vehicle_code.copy(),
                         cols.count.copy(), np.array(room, dtype=np.float64)))  # fmt: skip
        return regroup(cols, params, rooms, *args, **kwargs)

    budget_stages.PLANNERS["rules"] = keeping
    try:
        return run(), seen
    finally:
        budget_stages.PLANNERS["rules"] = regroup


@dataclass(frozen=True)
class Layouts:
    """The candidate cells of one window: every resolution's cells of the pooled pairs,
    stacked (``start``: CSR over ``vehicle``/``count``), each with its R0 group and layout."""

    start: np.ndarray
    vehicle: np.ndarray
    count: np.ndarray
    group: np.ndarray
    layout: np.ndarray
    names: list[str]
    group_names: list[str]
    observed_cells: list[np.ndarray]  # per layout, each observed cell's row


def layouts(seen: Seen, finest: int, coarsest: int) -> Layouts:
    """:class:`Layouts` of ``seen``'s pairs from ``coarsest`` to ``finest``."""
    n_veh = max(len(seen.vehicle_names), 1)
    starts, vehicles, counts, groups, lays, names, observed = [], [], [], [], [], [], []
    top = [h3.cell_to_parent(c, coarsest) for c in seen.cell_names]
    group_names = sorted(set(top))
    group_of = {g: i for i, g in enumerate(group_names)}
    offset = 0
    for lay, res in enumerate(range(coarsest, finest + 1)):
        parents = [h3.cell_to_parent(c, res) for c in seen.cell_names]
        own = sorted(set(parents))
        index = {p: i for i, p in enumerate(own)}
        observed_row = np.array([index[p] for p in parents], dtype=np.int64)
        key = observed_row[seen.cell_code] * n_veh + seen.vehicle_code
        pairs, inverse = np.unique(key, return_inverse=True)
        cell = pairs // n_veh
        starts.append(np.searchsorted(cell, np.arange(len(own))) + offset)
        vehicles.append(pairs % n_veh)
        counts.append(np.bincount(inverse, weights=seen.count).astype(np.int64))
        groups.append(np.array([group_of[h3.cell_to_parent(p, coarsest)] for p in own]))
        lays.append(np.full(len(own), lay, dtype=np.int64))
        names += own
        observed.append(observed_row + sum(len(g) for g in groups[:-1]))
        offset += len(pairs)
    start = np.concatenate([*starts, [offset]]).astype(np.int64)
    return Layouts(start, np.concatenate(vehicles), np.concatenate(counts),
                   np.concatenate(groups), np.concatenate(lays), names, group_names,
                   observed)  # fmt: skip


def record_value(records: list[dict[str, Any]], upper: float, tau: float, share: float) -> float:
    """The records' expected useful readings under the model (module docstring)."""
    if not records:
        return 0.0
    m = np.array([r["n_readings"] for r in records], dtype=np.float64)
    s = np.array([r["n_readings_used"] for r in records], dtype=np.float64)
    cap = np.array([r["cap"] for r in records], dtype=np.float64)
    eps = np.array([r["epsilon"] for r in records], dtype=np.float64)
    p = useful_probability(tau, upper * (1.0 - s / m), upper * cap / (s * eps * share))
    return float((p * m).sum())


def window_figures(seen: Seen, records: list[dict[str, Any]], charge: np.ndarray,
                   params: Any, coarsest: int | None = None) -> dict[str, float]:  # fmt: skip
    """One window's figures (module docstring); candidate cells from ``coarsest`` (default
    R0) to R."""
    upper, tau = params.upper, USEFUL_SHARE * params.upper
    share = 1.0 - params.variance_share
    lay = layouts(seen, params.resolution, params.coarsest if coarsest is None else coarsest)
    began = time.perf_counter()
    cands, meets_any = build_candidates(lay, seen.room, params, len(seen.vehicle_names))
    built = time.perf_counter()
    cells = np.ones(len(seen.cell_names))  # each observed cell's readings released once
    ledger = choose_releases(cands, np.r_[seen.room, cells])
    solved = time.perf_counter()
    spend = choose_releases(cands, np.r_[np.minimum(charge, seen.room), cells])
    plan = record_value(records, upper, tau, share)
    taken = plan_cells(records, seen, params)
    unspent = choose_releases(cands, np.r_[np.maximum(seen.room - charge, 0.0), 1.0 - taken])
    reachable = np.zeros(len(seen.cell_names), dtype=bool)
    for rows in lay.observed_cells:
        reachable |= meets_any[rows]
    return {
        "readings": float(seen.count.sum()),
        "plan": plan,
        "ledger": ledger.value,
        "ledger_bound": ledger.upper_bound,
        "spend": spend.value,
        "unspent": unspent.value,
        "no_candidate": float(seen.count[~reachable[seen.cell_code]].sum()),
        "candidates": float(len(cands.value)),
        "payments": float(len(cands.pay)),
        "build_s": built - began,
        "solve_s": solved - built,
    }


def build_candidates(
    lay: Layouts, room: np.ndarray, params: Any, n_vehicles: int
) -> tuple[Candidates, np.ndarray]:
    """The candidates of ``lay``'s cells (module docstring), each observed cell a room of 1
    after the ``n_vehicles`` vehicles', and per cell whether any option meets T. A cell with
    a vehicle whose room is under ``SIT_OUT_SHARE`` of the burst has a second layout where
    those vehicles sit out."""
    share = 1.0 - params.variance_share
    rows = np.arange(len(lay.names))
    cell_of = np.repeat(rows, np.diff(lay.start))
    low = room[lay.vehicle] < SIT_OUT_SHARE * params.vehicle_burst
    twin = np.flatnonzero(np.bincount(cell_of, weights=low, minlength=len(rows)) > 0)
    sizes = np.diff(lay.start)[twin]
    entries = np.repeat(lay.start[twin], sizes) + (
        np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    )
    start = np.r_[lay.start, lay.start[-1] + np.cumsum(sizes)].astype(np.int64)
    row_of = np.r_[rows, twin]
    opts = cell_options(
        start, np.r_[lay.count, lay.count[entries]], upper=params.upper,
        target=float(params.target_mean_error), tau=USEFUL_SHARE * params.upper,
        factors=np.array(FACTORS), max_epsilon=params.vehicle_burst, mean_share=share,
        min_vehicles=params.min_vehicles, sits_out=np.r_[np.zeros(len(low), bool), low[entries]],
        prefix_limit=params.prefix_limit if params.pseudo_user else None,
    )  # fmt: skip
    cands, _ = cell_candidates(start, np.r_[lay.vehicle, lay.vehicle[entries]], opts, share,
                               row_of, np.r_[rows * 0, twin * 0 + 1])  # fmt: skip
    meets = opts.meets.any(axis=1)
    cands = with_readings(cands, row_of[meets], lay, n_vehicles)
    return cands, np.bincount(row_of, weights=meets, minlength=len(rows)) > 0


def with_readings(cands: Candidates, rows: np.ndarray, lay: Layouts, n_vehicles: int) -> Candidates:
    """``cands`` (one group per candidate cell, ``rows``: the cells with a candidate, in group
    order) each paying 1 more to every observed cell it covers (rooms ``n_vehicles +
    observed``, each 1): a cell and its finer or coarser cells exclude each other."""
    row_of = np.concatenate(lay.observed_cells)  # per (resolution, observed cell) its row
    observed = np.tile(np.arange(len(lay.observed_cells[0])), len(lay.observed_cells))
    order = np.argsort(row_of, kind="mergesort")
    row_start = np.searchsorted(row_of[order], np.arange(len(lay.names) + 1))
    row = np.unique(rows)[cands.group]  # per candidate its cell
    n_res = row_start[row + 1] - row_start[row]
    res_entries = np.repeat(row_start[row], n_res) + (
        np.arange(int(n_res.sum())) - np.repeat(np.cumsum(n_res) - n_res, n_res)
    )
    covers = observed[order][res_entries]
    return with_exclusions(cands, np.r_[0, np.cumsum(n_res)], covers, n_vehicles)


def plan_cells(records: list[dict[str, Any]], seen: Seen, params: Any) -> np.ndarray:
    """Per observed cell of ``seen``, 1 where a record of the window covers it."""
    out = np.zeros(len(seen.cell_names))
    released: dict[int, set[str]] = {}
    for r in records:
        released.setdefault(int(r["resolution"]), set()).add(r["cell"])
    for i, name in enumerate(seen.cell_names):
        for res, cells in released.items():
            if h3.cell_to_parent(name, res) in cells:
                out[i] = 1.0
    return out


def charges(releases: list[Any], seen: Seen) -> np.ndarray:
    """What the plan charged each of ``seen``'s vehicles in its window."""
    out = np.zeros(len(seen.vehicle_names))
    index = {v: i for i, v in enumerate(seen.vehicle_names)}
    for r in releases:
        loss = r.loss
        if loss is None or loss.window_start != seen.start:
            continue
        lost = loss.cells * loss.epsilon if loss.losses is None else loss.losses
        for v, x in zip(loss.vehicles, lost, strict=True):
            if v in index:
                out[index[v]] += float(x)
    return out


def measure(name: str, readings: list[dict[str, Any]], row: dict[str, Any]) -> dict[str, Any]:
    """Every window's figures of one data set, and their summary."""
    settings = usefulness_settings(row)
    releases: list[Any] = []
    (records, _, _), seen = capture(lambda: release_week(settings, readings, NoNoise(), releases))
    params = ReleaseParams.from_settings(settings)
    by_end: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        by_end.setdefault(_epoch(r["window_end"]), []).append(r)
    rows = []
    for s in seen:
        rows.append(window_figures(s, by_end.get(s.start + params.window_seconds, []),
                                   charges(releases, s), params))  # fmt: skip
    return {"name": name, "readings": len(readings), "windows": rows,
            "diagnosis": diagnosis(name, readings, seen, params)}  # fmt: skip


def diagnosis(name: str, readings: list[dict[str, Any]], seen: list[Seen], params: Any) -> str:
    """One line on what the data can support: readings, vehicles, vehicle-hours; over every
    window's pooled pairs at R0 and at R, the reading-weighted median vehicles per cell, the
    share of readings in cells whose least ε meeting T fits the burst, that ε's median, and
    the vehicles' reading-weighted median room."""
    hours = {(r["vehicle_id"], int(r["ts"]) // 3600) for r in readings}
    vehicles = len({r["vehicle_id"] for r in readings})
    parts = []
    for res in (params.coarsest, params.resolution):
        k, m, eps, room = [], [], [], []
        for w in seen:
            lay = layouts(w, res, res)
            opts = cell_options(
                lay.start, lay.count, upper=params.upper,
                target=float(params.target_mean_error), tau=USEFUL_SHARE * params.upper,
                factors=np.array([1.0]), max_epsilon=np.inf, mean_share=1 - params.variance_share,
                prefix_limit=params.prefix_limit if params.pseudo_user else None,
            )  # fmt: skip
            k.append(np.diff(lay.start))
            m.append(opts.total)
            eps.append(opts.epsilon[:, 0])
            cell_of = np.repeat(np.arange(len(lay.names)), np.diff(lay.start))
            weighed = np.bincount(cell_of, weights=w.room[lay.vehicle] * lay.count)
            room.append(weighed / opts.total)
        k_, m_, e_, r_ = (np.concatenate(x) for x in (k, m, eps, room))
        fits = 100 * m_[e_ <= params.vehicle_burst].sum() / max(m_.sum(), 1)
        parts.append(
            f"res {res}: {len(m_):,} pooled cell-windows, median vehicles {_wmedian(k_, m_):.0f} "
            f"(max {int(k_.max(initial=0))}), "
            f"readings in cells meeting T at the burst {fits:.1f} %, "
            f"least ε meeting T median {_wmedian(e_, m_):.3g} (burst {params.vehicle_burst:g}), "
            f"mean room {_wmedian(r_, m_):.2f}"
        )
    return (f"{name}: {len(readings):,} readings, {vehicles} vehicles, {len(hours):,} "
            f"vehicle-hours; " + "; ".join(parts))  # fmt: skip


def _wmedian(x: np.ndarray, w: np.ndarray) -> float:
    """The ``w``-weighted median of ``x`` (nan when empty)."""
    if not len(x):
        return float("nan")
    order = np.argsort(x, kind="mergesort")
    cum = np.cumsum(w[order])
    return float(x[order][np.searchsorted(cum, cum[-1] / 2)])


def summary(result: dict[str, Any]) -> str:
    """One markdown row (:data:`HEADER`)."""
    rows = result["windows"]
    n = result["readings"]
    ratios = {k: [r[k] / r["plan"] for r in rows if r["plan"] > 0] for k in ("ledger", "spend")}
    shares = {k: [r[k] / r["readings"] for r in rows if r["readings"]]
              for k in ("unspent", "no_candidate")}  # fmt: skip
    return (
        f"| {result['name']} | {n:,} | {len(rows)} "
        f"| {100 * sum(r['plan'] for r in rows) / n:.1f} "
        f"| {_med_worst(ratios['ledger'], min)} | {_med_worst(ratios['spend'], min)} "
        f"| {sum(r['ledger'] > r['plan'] + 1e-9 for r in rows)} "
        f"| {100 * sum(r['ledger'] - r['plan'] for r in rows) / n:.1f} "
        f"| {_med_worst([100 * x for x in shares['unspent']], max)} "
        f"| {_med_worst([100 * x for x in shares['no_candidate']], max)} "
        f"| {max(r['solve_s'] for r in rows) * 1e3:.0f} |"
    )


def _med_worst(values: list[float], worst: Any) -> str:
    if not values:
        return "n/a"
    return f"{statistics.median(values):.2f} ({worst(values):.2f})"


HEADER = (
    "| data set | readings | windows | plan: expected useful % (model) "
    "| optimiser / plan, ledger rooms: median (worst) window "
    "| optimiser / plan, within the plan's spend: median (worst) "
    "| windows the optimiser (ledger rooms) beats | optimiser − plan summed over windows, % "
    "of readings (myopic upper estimate) | left unspent: what the optimiser adds beside the "
    "plan within the rooms it left, % of the window's pooled readings: median (max) "
    "| in no candidate even at the burst, % of pooled: median (max) | slowest solve ms |\n"
    + "|---" * 11
    + "|"
)


def million() -> str:
    """The 1M-reading window (the input's last): candidates built and solved, timed."""
    params = release_params(dict(BUDGET_PROFILE))
    columns = million_window()
    ledger = PrivacyAccountant(params).new_ledger()
    _, seen = capture(lambda: release_window(0, columns, params, LaplaceNoise(),
                                             ledger=ledger, last=True))  # fmt: skip
    lines = []
    for label, coarsest in (("R only", params.resolution), ("R0 to R", params.coarsest)):
        nothing = np.zeros(len(seen[0].vehicle_names))
        window_figures(seen[0], [], nothing, params, coarsest)  # warm-up (numba, caches)
        fig = window_figures(seen[0], [], nothing, params, coarsest)
        lines.append(
            f"1M window, candidates {label}: {len(seen[0].cell_names):,} observed cells, "
            f"{len(seen[0].vehicle_names):,} vehicles, {int(fig['candidates']):,} candidates, "
            f"{int(fig['payments']):,} payments; build {fig['build_s'] * 1e3:.0f} ms, solve "
            f"{fig['solve_s'] * 1e3:.0f} ms; expected useful {fig['ledger']:,.0f} of "
            f"{fig['readings']:,.0f} readings, bound {fig['ledger_bound']:,.0f}"
        )
    return "\n".join(lines)


def warm_up() -> None:
    """One tiny solve first: numba compiles the solver's passes then, not in a timed window."""
    tiny = Candidates(np.zeros(1, np.int64), np.ones(1), np.array([0, 1]), np.zeros(1, np.int64),
                      np.ones(1))  # fmt: skip
    choose_releases(tiny, np.ones(1))


def data_sets() -> dict[str, tuple[list[dict[str, Any]], dict[str, Any]]]:
    """The panel's data sets and the second aircraft file, with their profile rows."""
    out = {}
    for d in PANEL:
        out[d.name] = (lambda d=d: d.readings(False), profile_row(d, "rules"))
    aircraft = next(d for d in PANEL if d.name == "aircraft")
    for name, path in EXTRA.items():
        out[name] = (lambda p=path: aircraft_readings(p), profile_row(aircraft, "rules"))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="a data set's name (repeatable)")
    parser.add_argument("--million", action="store_true", help="time the 1M-reading window")
    parser.add_argument("--replay", action="store_true",
                        help="whole data sets with the optimiser in place of the plan "
                        "(benchmarks/planner_replay.py)")  # fmt: skip
    parser.add_argument("--runs", type=int, default=5, help="seeded runs of --replay")
    parser.add_argument("--quick", action="store_true", help="--replay on the quick files")
    parser.add_argument("--hold", action="store_true", help="--replay with the hold option")
    parser.add_argument("--hold-history", action="store_true",
                        help="--replay with the hold, arrivals from earlier windows")  # fmt: skip
    parser.add_argument("--unpaced", action="store_true",
                        help="--replay with no release price as a cell's ceiling")  # fmt: skip
    args = parser.parse_args()
    if args.replay:
        return planner_replay.main(args.only, args.runs, args.quick, args.hold, not args.unpaced,
                                   args.hold_history)  # fmt: skip
    sets = data_sets()
    names = args.only or ([] if args.million else ["AIS week", "Virginia Beach", "US coastal"])
    warm_up()
    print(HEADER)
    notes: list[str] = []
    for name in names:
        load, row = sets[name]
        result = measure(name, load(), row)
        print(summary(result), flush=True)
        notes.append(result["diagnosis"])
    print("\n".join(notes))
    if args.million:
        print(million())
    return 0


if __name__ == "__main__":
    sys.exit(main())
