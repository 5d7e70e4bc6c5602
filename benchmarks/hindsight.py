"""How much useful coverage any plan of whole cells could reach on a data set, in hindsight.

Run: ``python benchmarks/hindsight.py [--only NAME ...] [--max-span H] [--pay cell|share]
[--median-staleness H] [--finer-share F] [--live-first] [--pacing] [--detail] [--runs N]
[--threshold F]``.

A planner decides window by window, not knowing which vehicles come next. This script
knows the whole data set and solves, as a linear programme, the best choice of releases it
could have made: an upper bound on the *expected* useful coverage of every plan in one
family, in the optimiser's model of usefulness, against which the planner's runs
(``panel.py``) can be read.

The family. A release is one H3 cell at a resolution from R0 to R over a span of 1 to
``--max-span`` consecutive windows (only spans that begin and end in a window with readings
in the cell: any other holds the same readings, released later), at ε = ε_T times one of
:data:`FACTORS` (ε_T the least ε whose error bar meets T), at most B. Its value is its
expected useful readings (``dp/release_candidates.py``: ``M · P(|β + Lap(b)| ≤ τ)``, τ = 10 %
of U, the worst-case bias β: a lower estimate of the chance, as the optimiser uses it) and
each of its vehicles pays either the cell's ε (``--pay cell``: what the plan's check charges
against a room) or its own share of it (``--pay share``: what the ledger records, the
promise). Constraints: each finest cell-window's readings in at most one release (a cell
excludes its finer and coarser cells and overlapping spans); each vehicle's payments at most
B over any budget period (the data set must lie within one period, so: its total). The LP
relaxation of that choice (fractions of a release allowed) is solved with SciPy's HiGHS; its
optimum bounds every integral choice, and can lie well above the best one (``--detail``
prints how many releases it takes in part).

Not in the family: a parent released without its released children (the adaptive cells'
remainder), sit-outs, spans of more than ``--max-span`` windows, ε between two factors (the
LP values it as their mix, which the concave chance of being useful can pass slightly).
Pacing and a burst per window are left out (they only lower what a plan can reach), except
with ``--pacing`` (each vehicle's token bucket, as rows over its levels) and
``--live-first``, where a cell-window that meets T alone within the burst is never pooled;
``--median-staleness`` and ``--finer-share`` add the panel's other measures as constraints.

The coverage is the bound's expected useful readings over all the data set's readings (the
panel's denominator).

The bound's own runs (``--detail``; :func:`run_spread`). The optimum is an expectation over
the noise; a run of it lands each of its releases within τ or not, each with its own chance
and independently of the others (one Laplace draw per cell). So a run's coverage spreads
around the bound, the more the fewer and larger its releases; the issue's targets read the
worst of ``--runs`` runs. Printed: the standard deviation of one run's coverage, the expected
worst of ``--runs`` runs and the chance that it reaches ``--threshold``, each simulated from
the optimum's releases (a release taken in part counts that part of its readings). A plan
chosen for a lower spread rather than the highest expectation is outside what this reads.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Literal

import h3
import numpy as np
from scipy import sparse
from scipy.optimize import linprog

sys.path.insert(0, str(Path(__file__).parent))

from panel import PANEL, profile_row  # noqa: E402
from usefulness import USEFUL_SHARE, settings_of  # noqa: E402

from stream_dp.dp.release_candidates import cell_options, entry_payments  # noqa: E402
from stream_dp.release.params import ReleaseParams  # noqa: E402
from stream_dp.release.vehicle_budget.candidate_cells import entries_of  # noqa: E402

#: The ε options: ε_T times these (the LP may mix them, so a finer grid adds little).
FACTORS = (1.0, 1.25, 1.5, 2.0, 3.0, 4.0)


class LongerThanOnePeriod(ValueError):
    """The data set is longer than one budget period (no bound: :func:`bound`)."""


class TooLarge(ValueError):
    """The LP would hold more nonzeros than ``max_nonzeros`` (:func:`bound`): refused before
    it is built, rather than filling the machine's memory."""


#: The LP's most nonzeros by default: the AIS week's (spans ≤ 8 h) hold 19.7 million and
#: solve within 3.7 GB; the aircraft over Switzerland's would hold 76.8 million (it passed 11 GB).
MAX_NONZEROS = 40_000_000


def run_spread(
    readings: np.ndarray,
    chance: np.ndarray,
    total: int,
    *,
    runs: int = 5,
    threshold: float = 0.8,
    draws: int = 20_000,
    seed: int = 0,
) -> dict[str, float]:
    """One run's coverage when release ``i`` holds ``readings[i]`` readings and lands within
    τ with ``chance[i]``, independently (module docstring, "The bound's own runs"): its
    expectation and standard deviation (closed forms), and over ``draws`` simulated sets of
    ``runs`` runs (seeded) the mean of their worst and the share whose worst is at least
    ``threshold`` (a share of the ``total`` readings)."""
    n, p = np.asarray(readings, dtype=np.float64), np.asarray(chance, dtype=np.float64)
    if n.shape != p.shape or np.any((p < 0) | (p > 1)) or total <= 0:
        raise ValueError("readings and chances must pair up, chances in [0, 1], total > 0")
    if runs < 1 or draws < 1:
        raise ValueError(f"runs and draws must be at least 1, got {runs} and {draws}")
    rng = np.random.default_rng(seed)
    worst = np.empty(draws)
    chunk = max(1, 2_000_000 // max(1, runs * len(n)))  # at most ~2M draws of a release at once
    for lo in range(0, draws, chunk):
        hi = min(draws, lo + chunk)
        hits = rng.random((hi - lo, runs, len(n))) < p
        worst[lo:hi] = (hits @ n).min(axis=1) / total
    return {
        "releases": float(len(n)),
        "mean": float(n @ p) / total,
        "sd": float(np.sqrt(np.sum(n * n * p * (1.0 - p)))) / total,
        "expected_worst": float(worst.mean()),
        "worst_at_least": float(np.mean(worst >= threshold - 1e-12)),
    }


def bucket_pairs(
    last_window: np.ndarray, vehicle: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The (vehicle, window) pairs in which payments fall: per payment (its release's
    ``last_window``, its ``vehicle``) its pair's index, and per pair its vehicle and window,
    ordered by vehicle, then window (:func:`bucket_rows`)."""
    span = int(last_window.max(initial=0)) + 1
    key = vehicle.astype(np.int64) * span + last_window.astype(np.int64)
    used, pair = np.unique(key, return_inverse=True)
    return pair.astype(np.int64), used // span, used % span


def bucket_nonzeros(n_payments: int, pair_vehicle: np.ndarray) -> int:
    """How many entries :func:`bucket_rows` makes: each payment once, two per pair's spend
    row and two per refill row (a pair after another of its vehicle's)."""
    refills = len(pair_vehicle) - len(np.unique(pair_vehicle))
    return n_payments + 2 * len(pair_vehicle) + 2 * refills


def bucket_rows(
    pair: np.ndarray,
    pair_vehicle: np.ndarray,
    pair_window: np.ndarray,
    column: np.ndarray,
    pay: np.ndarray,
    n_columns: int,
    params: ReleaseParams,
) -> tuple[sparse.csr_matrix, np.ndarray, np.ndarray]:
    """Each vehicle's token bucket (``BudgetLedger.budget_room``: capacity the burst, full at
    first, refilled at B per widened period, a release spending at its span's close) as LP
    rows over two level variables per pair (:func:`bucket_pairs`), appended after the
    ``n_columns`` release columns: ``before_k`` in ``[0, burst]``, the level as the pair's
    window opens, and ``after_k ≥ 0``, the level once its payments are made. Rows:

    - spend: the pair's payments (per payment its ``pair``, LP ``column`` and ``pay``)
      ``+ after_k − before_k ≤ 0``;
    - refill, for a pair after another of its vehicle's: ``before_k − after_{k−1} ≤ rate ·
      (window_k − window_{k−1})``.

    Together with the bound ``before_k ≤ burst`` these hold exactly when the payments of
    every interval of windows are at most ``burst + rate · (its length − 1)`` (a bucket full
    at first; ``tests/unit/test_hindsight_benchmark.py`` checks the two forms against each
    other). 2 variables and at most 2 rows per pair instead of one row per (vehicle,
    interval), so a week of hourly windows fits. Returns the rows (over ``n_columns + 2 ·
    pairs`` columns), their limits and the level variables' bounds."""
    burst = params.vehicle_burst
    rate = float(params.vehicle_budget) * params.window_seconds / params.ledger_period_seconds
    n_pairs = len(pair_vehicle)
    before, after = n_columns + np.arange(n_pairs), n_columns + n_pairs + np.arange(n_pairs)
    refill = np.flatnonzero(pair_vehicle[1:] == pair_vehicle[:-1]) + 1  # a pair after another
    rows = np.r_[pair, np.arange(n_pairs), np.arange(n_pairs),
                 n_pairs + np.arange(len(refill)), n_pairs + np.arange(len(refill))]  # fmt: skip
    cols = np.r_[column, after, before, before[refill], after[refill - 1]]
    vals = np.r_[pay, np.ones(n_pairs), -np.ones(n_pairs), np.ones(len(refill)),
                 -np.ones(len(refill))]  # fmt: skip
    matrix = sparse.csr_matrix(
        (vals, (rows, cols)), shape=(n_pairs + len(refill), n_columns + 2 * n_pairs)
    )
    gaps = (pair_window[refill] - pair_window[refill - 1]).astype(np.float64)
    limits = np.r_[np.zeros(n_pairs), rate * gaps]
    bounds = np.r_[np.tile([0.0, burst], (n_pairs, 1)), np.tile([0.0, np.inf], (n_pairs, 1))]
    return matrix, limits, bounds


def _widened(matrix: sparse.csr_matrix, n_columns: int) -> sparse.csr_matrix:
    """``matrix`` with empty columns appended up to ``n_columns``."""
    return sparse.csr_matrix((matrix.data, matrix.indices, matrix.indptr),
                             shape=(matrix.shape[0], n_columns))  # fmt: skip


def overlap_groups(spans: np.ndarray) -> np.ndarray:
    """Per row of ``spans`` (``cell, first hour, last hour``) its group: rows of one cell
    whose hours overlap, directly or through others, share one (numbered from 0). The LP may
    split one cell's readings over several parts (factors, overlapping spans) that a whole
    plan releases once, in one draw: :func:`bound`'s ``spread_by_overlap`` draws each group as
    one release. Not grouped: a cell and its parent over the same readings; grouped: spans
    chained by overlaps that a whole plan could release apart."""
    group = np.empty(len(spans), dtype=np.int64)
    n, cell, end = -1, None, 0
    for i in np.lexsort((spans[:, 1], spans[:, 0])).tolist():
        c, a, b = spans[i].tolist()
        if c != cell or a > end:
            n, cell, end = n + 1, c, b
        end = max(end, b)
        group[i] = n
    return group


def readings_arrays(
    readings: list[dict[str, Any]], resolution: int, window_seconds: int
) -> dict[str, np.ndarray]:
    """Per reading: its vehicle (index), window (the release's: ``ts // window_seconds``) and
    finest cell (index, resolution R)."""
    vehicles = {v: i for i, v in enumerate(sorted({r["vehicle_id"] for r in readings}))}
    vehicle = np.array([vehicles[r["vehicle_id"]] for r in readings], dtype=np.int64)
    hour = np.array([int(r["ts"] // window_seconds) for r in readings], dtype=np.int64)
    names = [h3.latlng_to_cell(r["lat"], r["lon"], resolution) for r in readings]
    cells = {c: i for i, c in enumerate(sorted(set(names)))}
    fine = np.array([cells[c] for c in names], dtype=np.int64)
    return {"vehicle": vehicle, "hour": hour, "fine": fine, "fine_names": np.array(list(cells))}


def candidates_at(
    cell: np.ndarray, hour: np.ndarray, vehicle: np.ndarray, row: np.ndarray, max_span: int
) -> tuple[list[Any], ...]:
    """Every (cell, span) release of one resolution (``cell``: per reading its cell there):
    per release its entries' vehicles and counts, the finest cell-hour rows it covers, per
    reading its staleness (hours from its window's close to the span's end) and the one-hour
    releases of the same cell its span is made of (their indices in this list; none for a
    one-hour release), and per release its cell, first and last hour."""
    order = np.lexsort((vehicle, hour, cell))
    c, h, v, rw = cell[order], hour[order], vehicle[order], row[order]
    breaks = np.flatnonzero(np.diff(c)) + 1
    vehicles_of, counts_of, rows_of, stale_of, parts_of, cell_of = [], [], [], [], [], []
    for lo, hi in zip(np.r_[0, breaks], np.r_[breaks, len(c)], strict=True):
        hours, first = np.unique(h[lo:hi], return_index=True)
        ends = np.r_[first[1:], hi - lo]
        spans: list[tuple[int, int, int]] = []
        for i in range(len(hours)):
            for j in range(i, len(hours)):
                if hours[j] - hours[i] >= max_span:
                    break
                a, b = lo + first[i], lo + ends[j]
                spans.append((i, j, len(vehicles_of)))
                who, n = np.unique(v[a:b], return_counts=True)
                vehicles_of.append(who)
                counts_of.append(n)
                rows_of.append(np.unique(rw[a:b]))
                stale_of.append(hours[j] - h[a:b])
                cell_of.append((int(c[lo]), int(hours[i]), int(hours[j])))
        single = {i: k for i, j, k in spans if i == j}
        parts_of += [np.array([single[m] for m in range(i, j + 1)] if j > i else [], np.int64)
                     for i, j, _ in spans]  # fmt: skip
    return vehicles_of, counts_of, rows_of, stale_of, parts_of, cell_of


def bound(
    readings: list[dict[str, Any]],
    row: dict[str, Any],
    max_span: int,
    pay: Literal["cell", "share"],
    median_staleness: float | None = None,
    finer_share: float | None = None,
    live_first: bool = False,
    runs: int = 5,
    threshold: float = 0.8,
    pacing: bool = False,
    max_nonzeros: int = MAX_NONZEROS,
    spread: bool = True,
) -> dict[str, Any]:
    """The LP's optimum (module docstring) for a data set released with settings ``row``;
    with ``median_staleness``, the expected useful readings later than it at most those not
    (the panel's median staleness, in expectation: a cell's readings are equally likely
    useful); with ``finer_share``, at least that share of the expected useful readings in
    cells finer than R0; with ``live_first``, no span longer than an hour of a cell that
    meets T alone in one of its hours within the burst (B/4: its readings are released in
    that hour, never pooled); with ``pacing``, each vehicle's token bucket too
    (:func:`bucket_rows`). With ``spread``, the result's ``spread`` is :func:`run_spread` of
    the optimum's releases drawn apart, its ``spread_by_overlap`` of their
    :func:`overlap_groups` drawn as one (the worst of ``runs`` runs against ``threshold``);
    else both None. Raises :class:`TooLarge` before building an LP of over ``max_nonzeros``
    nonzeros (its payments, cover rows and bucket rows)."""
    params = ReleaseParams.from_settings(settings_of(row))
    fine_res, coarsest = params.resolution, params.coarsest
    arrays = readings_arrays(readings, fine_res, params.window_seconds)
    vehicle, hour, fine = arrays["vehicle"], arrays["hour"], arrays["fine"]
    span_seconds = (int(hour.max()) - int(hour.min()) + 1) * params.window_seconds
    if span_seconds > int(row["budget_period_seconds"]):
        raise LongerThanOnePeriod("the readings span more than one budget period: B over all "
                                  "of them would not bound every plan")  # fmt: skip
    fine_hour = fine * (int(hour.max()) + 1) + hour
    _, row_of = np.unique(fine_hour, return_inverse=True)
    n_rows, n_vehicles = int(row_of.max()) + 1, int(vehicle.max()) + 1
    vehicles_of: list[np.ndarray] = []
    counts_of: list[np.ndarray] = []
    rows_of: list[np.ndarray] = []
    late_share: list[float] = []
    resolution_of: list[int] = []
    span_of: list[int] = []
    parts_of: list[np.ndarray] = []
    span_key: list[tuple[int, int, int]] = []  # per release its cell (unique), hours
    for res in range(coarsest, fine_res + 1):
        parents = np.array([h3.cell_to_parent(n, res) for n in arrays["fine_names"]])
        _, parent = np.unique(parents, return_inverse=True)
        got = candidates_at(parent[fine], hour, vehicle, row_of, max_span)
        vehicles_of += got[0]
        counts_of += got[1]
        rows_of += got[2]
        late_share += [0.0 if median_staleness is None else float(np.mean(st > median_staleness))
                       for st in got[3]]  # fmt: skip
        resolution_of += [res] * len(got[0])
        span_key += [(res * len(arrays["fine_names"]) + c, a, b) for c, a, b in got[5]]
        span_of += [int(st.max()) + 1 for st in got[3]]
        offset = len(parts_of)  # this resolution's first release
        parts_of += [p + offset for p in got[4]]
    sizes = np.array([len(v) for v in vehicles_of], dtype=np.int64)
    cell_start = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    count = np.concatenate(counts_of).astype(np.int64)
    entry_vehicle = np.concatenate(vehicles_of).astype(np.int64)
    mean_share = 1.0 - params.variance_share
    options = cell_options(
        cell_start, count, upper=params.upper, target=float(params.target_mean_error),
        tau=USEFUL_SHARE * params.upper, factors=np.array(FACTORS),
        max_epsilon=float(params.vehicle_budget),
        mean_share=mean_share, min_vehicles=params.min_vehicles,
        prefix_limit=params.prefix_limit if params.pseudo_user else None,
    )  # fmt: skip
    if live_first:  # a span holding an hour that meets T alone within the burst: none
        now = options.meets[:, 0] & (options.epsilon[:, 0] <= params.vehicle_burst + 1e-12)
        pooled = np.array([len(p) > 0 and bool(now[p].any()) for p in parts_of])
        options.meets[pooled] = False
    if pay == "share":
        entry_pay = entry_payments(cell_start, options, mean_share)
    else:
        entry_pay = np.where(options.meets, options.epsilon, 0.0)[np.repeat(np.arange(len(sizes)),
                                                                            sizes)]  # fmt: skip
    cand, col = np.nonzero(options.meets)
    n_x = len(cand)
    if not n_x:  # no release meets T within B: nothing to choose
        none_spread = (run_spread(np.zeros(0), np.zeros(0), len(readings), runs=runs,
                                  threshold=threshold) if spread else None)  # fmt: skip
        return {"readings": len(readings), "candidates": 0, "coverage": 0.0,
                "released_share": 0.0, "finer_share": 0.0, "fractional": 0, "chosen": 0,
                "useful_by_span": {}, "useful_by_factor": {}, "spent_over_budget": [],
                "seconds": 0.0, "spread": none_spread,
                "spread_by_overlap": none_spread}  # fmt: skip
    row_sizes = np.array([len(r) for r in rows_of], dtype=np.int64)
    nonzeros = int(sizes[cand].sum() + row_sizes[cand].sum())
    entries = entries_of(cell_start, cand)  # the chosen columns' payments
    payer = entry_vehicle[entries]  # per payment, its vehicle
    if pacing:  # counted in the nonzeros before the LP's rows are built
        last_window = np.array([key[2] for key in span_key], dtype=np.int64)[cand]
        entry_window = np.repeat(last_window, sizes[cand])  # per payment, as the pay columns
        pair, pair_vehicle, pair_window = bucket_pairs(entry_window, payer)
        nonzeros += bucket_nonzeros(len(entry_window), pair_vehicle)
    if nonzeros > max_nonzeros:
        raise TooLarge(f"the LP would hold {nonzeros:,} nonzeros, over {max_nonzeros:,} "
                       "(--max-nonzeros)")  # fmt: skip
    value = options.useful[cand, col]
    # readings rows: each finest cell-hour covered at most once
    cover_cols = np.repeat(np.arange(n_x), row_sizes[cand])
    cover_rows = np.concatenate(rows_of)[entries_of(np.r_[0, np.cumsum(row_sizes)], cand)]
    # vehicle rows: each vehicle's payments at most B
    pay_cols = np.repeat(np.arange(n_x), sizes[cand])
    pay_rows = n_rows + payer
    pay_vals = entry_pay[entries, np.repeat(col, sizes[cand])]
    matrix = sparse.csr_matrix(
        (np.r_[np.ones(len(cover_cols)), pay_vals], (np.r_[cover_rows, pay_rows],
                                                     np.r_[cover_cols, pay_cols])),
        shape=(n_rows + n_vehicles, n_x),
    )  # fmt: skip
    limits = np.r_[np.ones(n_rows), np.full(n_vehicles, float(params.vehicle_budget))]
    if median_staleness is not None:  # Σ useful · (late − on time) ≤ 0
        late = np.array(late_share)[cand]
        matrix = sparse.vstack([matrix, sparse.csr_matrix(value * (2.0 * late - 1.0))])
        limits = np.r_[limits, 0.0]
    res = np.array(resolution_of)[cand]
    if finer_share is not None:  # Σ useful · (share − finer) ≤ 0
        fine_row = value * (finer_share - (res > coarsest))
        matrix = sparse.vstack([matrix, sparse.csr_matrix(fine_row)])
        limits = np.r_[limits, 0.0]
    objective, bounds = -value, np.tile([0.0, 1.0], (n_x, 1))
    if pacing:  # the level variables after the releases' columns
        paced, paced_limits, level_bounds = bucket_rows(
            pair, pair_vehicle, pair_window, pay_cols, pay_vals, n_x, params
        )
        matrix = sparse.vstack([_widened(matrix, paced.shape[1]), paced]).tocsr()
        limits = np.r_[limits, paced_limits]
        objective = np.r_[objective, np.zeros(len(level_bounds))]
        bounds = np.r_[bounds, level_bounds]
    start = time.perf_counter()
    result = linprog(objective, A_ub=matrix, b_ub=limits, bounds=bounds, method="highs")
    seconds = time.perf_counter() - start
    if result.status != 0:
        raise RuntimeError(f"linprog: {result.message}")
    x = result.x[:n_x]
    chosen = x > 1e-9
    readings_at = options.total[cand]
    useful = -float(result.fun)
    gained = x * value
    spans = np.array(span_of)[cand]
    paid = np.bincount(payer, weights=pay_vals * x[pay_cols],
                       minlength=n_vehicles)  # fmt: skip
    spread_apart, spread_by_overlap = None, None
    if spread:
        spread_apart = run_spread((x * readings_at)[chosen], (value / readings_at)[chosen],
                                  len(readings), runs=runs, threshold=threshold)  # fmt: skip
        # the parts of one cell whose spans overlap (its factors, its overlapping spans) as one
        # release: a whole plan releases those readings in one of them, one draw
        group = overlap_groups(np.array(span_key, dtype=np.int64)[cand][chosen])
        held = np.bincount(group, weights=(x * readings_at)[chosen])
        spread_by_overlap = run_spread(held, np.bincount(group, weights=gained[chosen]) / held,
                                       len(readings), runs=runs, threshold=threshold)  # fmt: skip
    return {
        "readings": len(readings),
        "candidates": n_x,
        "coverage": useful / len(readings),
        "released_share": float(np.sum(x * readings_at)) / len(readings),
        "finer_share": float(np.sum((x * value)[res > coarsest])) / useful if useful else 0.0,
        "fractional": int(np.sum(chosen & (x < 1 - 1e-9))),
        "chosen": int(np.sum(chosen)),
        "useful_by_span": {
            int(n): float(gained[spans == n].sum() / useful) for n in np.unique(spans[chosen])
        }
        if useful
        else {},  # fmt: skip
        "useful_by_factor": {
            FACTORS[c]: float(gained[col == c].sum() / useful) for c in np.unique(col[chosen])
        }
        if useful
        else {},  # fmt: skip
        "spent_over_budget": np.percentile(paid / float(params.vehicle_budget), [10, 50, 90, 100])
        .round(2)
        .tolist(),  # fmt: skip
        "seconds": seconds,
        "spread": spread_apart,
        "spread_by_overlap": spread_by_overlap,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="a data set's name (repeatable)")
    parser.add_argument("--max-span", type=int, default=0,
                        help="the longest span in hours (default: the profile's)")  # fmt: skip
    parser.add_argument("--pay", choices=("cell", "share"), default="share",
                        help="each vehicle pays the cell's ε or its own share of it")  # fmt: skip
    parser.add_argument("--median-staleness", type=float,
                        help="also: median staleness of useful readings, hours")  # fmt: skip
    parser.add_argument("--finer-share", type=float,
                        help="also: least share of useful readings finer than R0")  # fmt: skip
    parser.add_argument("--live-first", action="store_true",
                        help="pool no cell-hour that meets T alone within the burst")  # fmt: skip
    parser.add_argument("--detail", action="store_true",
                        help="also: useful readings by span and factor, spend / B")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="the panel's quick files")
    parser.add_argument("--pacing", action="store_true",
                        help="also: each vehicle's token bucket")  # fmt: skip
    parser.add_argument("--max-nonzeros", type=int, default=MAX_NONZEROS,
                        help="refuse a data set whose LP would hold more")  # fmt: skip
    parser.add_argument("--runs", type=int, default=5,
                        help="--detail: the worst of this many runs of the optimum")  # fmt: skip
    parser.add_argument("--threshold", type=float, default=0.8,
                        help="--detail: the coverage that worst is held against")  # fmt: skip
    args = parser.parse_args()
    chosen = [d for d in PANEL if not args.only or d.name in args.only]
    header = ("data set", "max span h", "median staleness h", "pays",
              "LP bound: expected useful %", "released %", "finer than R0 %", "candidates",
              "LP s")  # fmt: skip
    print("| " + " | ".join(header) + " |\n" + "|---" * len(header) + "|")
    for data in chosen:
        row = profile_row(data)
        span = args.max_span or int(row["max_span_hours"])
        cap = "any" if args.median_staleness is None else f"<= {args.median_staleness:g}"
        try:
            got = bound(data.readings(args.quick), row, span, args.pay, args.median_staleness,
                        args.finer_share, args.live_first, args.runs, args.threshold,
                        args.pacing, args.max_nonzeros, spread=args.detail)  # fmt: skip
        except (LongerThanOnePeriod, TooLarge) as error:
            print(f"| {data.name} | {span} | {cap} | {args.pay} | none: {error} |", flush=True)
            continue
        print(f"| {data.name} | {span} | {cap} | {args.pay} | {100 * got['coverage']:.1f} | "
              f"{100 * got['released_share']:.1f} | {100 * got['finer_share']:.1f} | "
              f"{got['candidates']:,} | {got['seconds']:.1f} |", flush=True)  # fmt: skip
        if args.detail:
            print(f"  releases taken in part: {got['fractional']} of {got['chosen']}")
            for key in ("useful_by_span", "useful_by_factor", "spent_over_budget"):
                print(f"  {key}: {got[key]}")
            views = (("its releases drawn apart", "spread"),
                     ("its overlapping parts drawn as one", "spread_by_overlap"))  # fmt: skip
            for label, key in views:
                spread = got[key]
                print(
                    f"  one run, {label} ({spread['releases']:.0f}): "
                    f"sd {100 * spread['sd']:.1f} points; "
                    f"worst of {args.runs} runs: expected {100 * spread['expected_worst']:.1f} %,"
                    f" at least {100 * args.threshold:g} % with chance "
                    f"{spread['worst_at_least']:.3f}"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
