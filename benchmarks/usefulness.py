"""Are the releases worth reading? Usefulness of stream-dp's releases on the bundled AIS week.

For each row (a set of settings) the whole week (New York Harbor AIS, 1-7 Dec 2020, the
sample ``stream-dp demo`` replays) goes through the offline engine ``runs`` times (fresh
noise each time) and is scored against the truth of each released record: the mean of the
readings, clamped to [0, U], that the record holds (the ``n_readings`` its ``mean_error``
speaks of, kept or not), found by replaying the release with
``tests.support.membership`` (which checks them against each record's count). The older
"cell and span" truth (every reading of the record's cell and span not taken by an earlier
record: it also credits readings no record holds, such as withheld carried pairs) is still
reported beside useful coverage and ``mean_error holds``, in brackets.

- useful coverage: share of *all* readings held by released records whose released mean is
  within 10 % of U of that truth (in brackets: the readings of released cells and spans,
  against the cell-and-span truth);
- median |released mean - true mean|; share of released means at exactly 0 or U;
- mean_error holds: share of released cells with |error| <= mean_error (cells with a bound),
  against the held readings (in brackets: the cell-and-span truth);
- the busiest vessel's weekly epsilon, basic (cells x eps) and PLD at delta = 1e-6;
- cells per resolution; the share of usefully covered readings in cells finer than R0;
- the release time of the 1M-reading benchmark window (benchmarks/release.py's window,
  resolution 8) with the row's settings, and its ratio to the fixed-epsilon targeted row's
  release of the same window timed alternately in the same run (medians of 5 pairs);
  ``--timing-only`` prints just these, without the week, for a window that holds its cells
  for a longer span and for the input's last window (which releases them).

PipelineDP (MEAN and VARIANCE, Laplace, public partitions = the cells the targeted row
released, ``max_partitions_contributed = K``, ``total_epsilon = K eps``) is scored on the
same cells, windows and readings.

Run: ``python benchmarks/usefulness.py [--runs 3] [--rows name,...]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from stream_dp.experiments.pipeline_dp_baseline import pipeline_dp_aggregate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support/: not installed

UPPER = 65.0
DELTA = 1e-6
USEFUL_SHARE = 0.1
USEFUL = USEFUL_SHARE * UPPER

#: The rows of the table: name -> settings (on top of app_id, U and the fixed mode).
ROWS: dict[str, dict[str, Any]] = {
    "fixed res 8, eps 1 (the defaults before issue 26)": {},
    "demo before (res 7, >=3 vessels, eps 0.5)": {
        "resolution": 7,
        "min_vehicles": 3,
        "epsilon": 0.5,
    },
    "static res 5 (>=3 vessels, eps 0.5)": {"resolution": 5, "min_vehicles": 3, "epsilon": 0.5},
    "static res 4 (>=3 vessels, eps 0.5)": {"resolution": 4, "min_vehicles": 3, "epsilon": 0.5},
    "static res 4, bestfit, eps 1": {
        "resolution": 4,
        "epsilon": 1.0,
        "mean_mechanism": "array-averaging-bestfit",
    },
    "targeted (recommended: remainder, T 15, R0 3, eps 1, share 0)": {
        "resolution": 8,
        "coarsest_resolution": 3,
        "target_mean_error": 15.0,
        "variance_share": 0.0,
        "epsilon": 1.0,
        "adaptive_shape": "remainder",
    },
    "targeted compact (same settings)": {
        "resolution": 8,
        "coarsest_resolution": 3,
        "target_mean_error": 15.0,
        "variance_share": 0.0,
        "epsilon": 1.0,
        "adaptive_shape": "compact",
    },
}
TARGETED = "targeted (recommended: remainder, T 15, R0 3, eps 1, share 0)"
WEEK = 7 * 86400
ROWS["targeted, cap 14 per 7 days (masking)"] = {
    **ROWS[TARGETED], "budget_cap": 14.0, "budget_period_seconds": WEEK,
}  # fmt: skip
#: The per-vehicle budget rows (issue 25): B per 7 days, T 10, spans up to 8 h, burst B/4
#: (the recommended profile's spans and the default burst).
BUDGETS = (7.0, 14.0, 28.0)
for _b in BUDGETS:
    ROWS[f"vehicle budget B {_b:g} per 7 days (T 10, span 8 h)"] = {
        "resolution": 8, "coarsest_resolution": 3, "target_mean_error": 10.0,
        "variance_share": 0.0, "epsilon": 1.0, "vehicle_budget": _b,
        "budget_period_seconds": WEEK, "max_span_hours": 8,
    }  # fmt: skip


def with_sets(row: dict[str, Any], items: list[str]) -> dict[str, Any]:
    """``row`` with each ``KEY=VALUE`` of ``items`` (a ``--set`` option; VALUE is JSON)."""
    row = dict(row)
    for item in items:
        key, _, value = item.partition("=")
        row[key] = json.loads(value)
    return row


def readings_of(path: str | None) -> list[dict[str, Any]] | None:
    """The readings of ``path`` (``other_data.py``'s formats; None: the AIS week)."""
    if not path:
        return None
    from other_data import load  # benchmarks/other_data.py, beside this script

    return load(path)[0]


def settings_of(row: dict[str, Any]) -> Any:
    from stream_dp.config import load_settings
    from tests.support.settings import FIXED_MODE

    return load_settings(app_id="usefulness", **{"upper": UPPER, **FIXED_MODE, **row})


class Truth:
    """The week's readings (or ``readings``: another file's), with each reading's cell at every
    resolution (vectorised); values clamped to [0, ``upper``], the U the release used."""

    def __init__(self, readings: list[dict[str, Any]] | None = None, upper: float = UPPER) -> None:
        import h3

        from stream_dp.sources.sample import load_sample

        self.readings = load_sample() if readings is None else readings
        self.ts = np.array([float(r["ts"]) for r in self.readings])
        self.window = (self.ts // 3600).astype(np.int64) * 3600
        self.upper = upper
        self.value = np.clip([float(r["speed"]) for r in self.readings], 0.0, upper)
        self.vehicle = [r["vehicle_id"] for r in self.readings]
        self.points = [(r["lat"], r["lon"]) for r in self.readings]
        self._cells: dict[tuple[int, int], list[str]] = {}
        self._h3 = h3

    def cells(self, finest: int, res: int) -> list[str]:
        """Each reading's cell at ``res`` as the release sees it: the parent of its cell at the
        finest resolution (H3 cells are not exactly nested, so not ``latlng_to_cell(res)``)."""
        key = (finest, res)
        if key not in self._cells:
            if res == finest:
                h3 = self._h3
                self._cells[key] = [h3.latlng_to_cell(la, lo, res) for la, lo in self.points]
            else:
                parent = self._h3.cell_to_parent
                self._cells[key] = [parent(c, res) for c in self.cells(finest, finest)]
        return self._cells[key]

    def held(self, members: list[Any], finest: int) -> np.ndarray:
        """Per reading, the index of the released record holding it (-1: none), from the
        release's members (``tests.support.membership.recording_members``, one per record
        in release order); raises ``MembershipError`` unless each record's pairs match these
        readings exactly (the engine must have accepted them all)."""
        from tests.support.membership import member_readings

        return member_readings(members, self.cells(finest, finest), self.vehicle, self.window)

    def cell_and_span(self, records: list[dict[str, Any]], finest: int) -> np.ndarray:
        """The older truth: :meth:`covered_spans` for records spanning several windows,
        :meth:`covered` for hourly ones."""
        spans = any(r["window_end"] != _hour_after(r["window_start"]) for r in records)
        return self.covered_spans(records, finest) if spans else self.covered(records, finest)

    def covered(self, records: list[dict[str, Any]], finest: int) -> np.ndarray:
        """Per reading, the index into ``records`` of the released record covering it (-1: none):
        the finest released cell among the reading's cells in its window."""
        from stream_dp.release.records import rfc3339

        by_key = {(r["window_start"], r["cell"]): i for i, r in enumerate(records)}
        out = np.full(len(self.readings), -1, dtype=np.int64)
        resolutions = sorted({int(r["resolution"]) for r in records}, reverse=True)
        starts = [rfc3339(w) for w in self.window.tolist()]
        for res in resolutions:
            cells = self.cells(finest, res)
            todo = np.flatnonzero(out < 0)
            for i in todo.tolist():
                j = by_key.get((starts[i], cells[i]))
                if j is not None:
                    out[i] = j
        return out

    def covered_spans(self, records: list[dict[str, Any]], finest: int) -> np.ndarray:
        """:meth:`covered` for records spanning several windows (a vehicle budget's spans),
        in release order: each record takes the readings of its cell and span not taken by
        an earlier release or a finer record of its own (a reading of a finer cell that was
        chosen but withheld may be credited to its released parent: a small over-count)."""
        ts_of = {r["window_start"] for r in records} | {r["window_end"] for r in records}
        seconds = {t: _epoch(t) for t in ts_of}
        out = np.full(len(self.readings), -1, dtype=np.int64)
        order = sorted(
            range(len(records)),
            key=lambda i: (seconds[records[i]["window_end"]], -int(records[i]["resolution"])),
        )
        cells_at = {}
        for i in order:
            r = records[i]
            res = int(r["resolution"])
            if res not in cells_at:
                cells_at[res] = np.array(self.cells(finest, res))
            start, end = seconds[r["window_start"]], seconds[r["window_end"]]
            take = (out < 0) & (self.window >= start) & (self.window < end)
            take &= cells_at[res] == r["cell"]
            out[take] = i
        return out


def _epoch(stamp: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())


def release_week(
    settings: Any,
    readings: list[dict[str, Any]] | None = None,
    noise: Any = None,
    releases: list[Any] | None = None,
    file_end: bool = False,
) -> tuple[list[dict[str, Any]], Any, list[Any]]:
    """The week's (or ``readings``') cell records, each vessel's loss over the run
    (RunLosses) and each record's members (``tests.support.membership``), released with
    ``noise`` (default: fresh Laplace noise); each window's release appended to ``releases``
    if given. As the service releases them (it never sees an end), or with ``file_end`` as
    ``stream-dp release`` does: the input's last window holds no cell back."""
    from stream_dp.dp.noise import LaplaceNoise
    from stream_dp.engine import OfflineEngine
    from stream_dp.release.run_losses import RunLosses
    from stream_dp.sources.sample import load_sample
    from tests.support.membership import recording_members

    engine = OfflineEngine(settings, LaplaceNoise() if noise is None else noise)
    records: list[dict[str, Any]] = []
    losses = RunLosses(engine.params)
    source = load_sample() if readings is None else readings
    with recording_members() as members:
        for batch in (engine.feed(source), engine.finish(release_held=file_end)):
            for release in batch:
                records.extend(release.cells)
                losses.add(release)
                if releases is not None:
                    releases.append(release)
    return records, losses, members


def score(
    truth: Truth,
    records: list[dict[str, Any]],
    means: np.ndarray,
    finest: int,
    coarsest: int,
    bounds: np.ndarray | None,
    covering: np.ndarray,
    cell_and_span: np.ndarray | None = None,
) -> dict[str, Any]:
    """The row's columns for one run (``means``: the released means, per record;
    ``covering``: per reading, the record holding it, :meth:`Truth.held`; ``cell_and_span``:
    the older truth's, :meth:`Truth.cell_and_span`, for its ``mean_error`` holds only)."""
    n = len(records)
    counts, true_mean = truth_means(truth, covering, n)
    error = np.abs(means - true_mean)
    useful = error <= USEFUL_SHARE * truth.upper
    useful_readings = counts[useful].sum()
    res = np.array([int(r["resolution"]) for r in records], dtype=np.int64)
    holds = _holds(error, bounds)
    holds_cell_and_span, coverage_cell_and_span = None, float("nan")
    if cell_and_span is not None:
        other_counts, other = truth_means(truth, cell_and_span, n)
        other_error = np.abs(means - other)
        holds_cell_and_span = _holds(other_error, bounds)
        useful_other = other_counts[other_error <= USEFUL_SHARE * truth.upper].sum()
        coverage_cell_and_span = useful_other / len(truth.readings)
    hit = covering >= 0
    ends = np.array([_epoch(r["window_end"]) for r in records], dtype=np.int64)
    starts = np.array([_epoch(r["window_start"]) for r in records], dtype=np.int64)
    in_useful = hit & useful[np.maximum(covering, 0)] if n else hit
    stale = (ends[covering[in_useful]] - truth.ts[in_useful]) / 3600.0
    return {
        "coverage": useful_readings / len(truth.readings),
        "coverage_cell_and_span": coverage_cell_and_span,
        "staleness": float(np.median(stale)) if stale.size else float("nan"),
        "per_span": dict(sorted(Counter(((ends - starts) // 3600).tolist()).items())),
        "median_error": float(np.median(error)) if n else float("nan"),
        "at_bounds": float(np.mean((means <= 0.0) | (means >= truth.upper))) if n else float("nan"),
        "holds": holds,
        "holds_cell_and_span": holds_cell_and_span,
        "fine_share": (
            float(counts[useful & (res > coarsest)].sum() / useful_readings)
            if useful_readings
            else 0.0
        ),
        "cells": len(records),
        "per_resolution": dict(sorted(Counter(res.tolist()).items())),
    }


def truth_means(truth: Truth, covering: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per record (``n``), the number of readings ``covering`` gives it and their mean."""
    hit = covering >= 0
    sums = np.bincount(covering[hit], weights=truth.value[hit], minlength=n)
    counts = np.bincount(covering[hit], minlength=n)
    return counts, sums / np.maximum(counts, 1)


def _holds(error: np.ndarray, bounds: np.ndarray | None) -> tuple[int, int] | None:
    """(cells where ``error`` <= their ``mean_error``, cells with a bound), or None."""
    if bounds is None or not len(error):
        return None
    has = ~np.isnan(bounds)
    return (int(np.sum(error[has] <= bounds[has])), int(has.sum())) if has.any() else None


def _hour_after(stamp: str) -> str:
    from stream_dp.release.records import rfc3339

    return rfc3339(_epoch(stamp) + 3600)


def weekly_epsilon(losses: Any) -> tuple[float, float | None]:
    """The busiest vessel's loss over the week, basic and PLD (at the row's delta, 1e-6)."""
    return losses.busiest()


def pipeline_dp_means(
    truth: Truth,
    records: list[dict[str, Any]],
    covering: np.ndarray,
    k: int,
    epsilon: float,
    per_partition: int,
) -> np.ndarray:
    """PipelineDP's MEAN per record's (window, cell) on the readings each holds
    (``covering``, :meth:`Truth.held`; None -> NaN)."""
    # One privacy unit per (window, vessel): each window is its own K*eps release, as stream-dp's.
    rows = [
        (f"{truth.window[i]}|{truth.vehicle[i]}", int(j), float(truth.value[i]))
        for i, j in enumerate(covering.tolist())
        if j >= 0
    ]
    public = list(range(len(records)))
    result = pipeline_dp_aggregate(rows, k, per_partition, epsilon, UPPER, public)
    means = np.full(len(records), np.nan)
    for partition, metrics in result:
        means[partition] = min(max(metrics.mean, 0.0), UPPER)
    return means


def score_run(
    truth: Truth,
    records: list[dict[str, Any]],
    members: list[Any],
    finest: int,
    coarsest: int,
) -> dict[str, Any]:
    """:func:`score` of one run of the engine (:func:`release_week`'s records and members),
    against the held readings and, for ``mean_error`` holds, the cell-and-span truth too."""
    means = np.array([r["mean"] for r in records], dtype=np.float64)
    bounds = np.array([np.nan if r.get("mean_error") is None else r["mean_error"] for r in records])
    covering = truth.held(members, finest)
    older = truth.cell_and_span(records, finest)
    return score(truth, records, means, finest, coarsest, bounds, covering, older)


def release_params(settings_row: dict[str, Any]) -> Any:
    """The release parameters of a row for the 1M-reading window (resolution 8)."""
    from stream_dp.release.params import ReleaseParams

    row = {**settings_row, "resolution": 8}
    if row.get("coarsest_resolution", 0) > 8:
        row["coarsest_resolution"] = 8
    return ReleaseParams.from_settings(settings_of(row))


def release_once(params: Any, columns: Any, last: bool = False) -> float:
    """Seconds of one release of the 1M-reading window (a fresh ledger); ``last``: as the
    input's last window (a vehicle budget then holds nothing back for a longer span)."""
    from release import WINDOW_START  # benchmarks/release.py, beside this script

    from stream_dp.dp.noise import LaplaceNoise
    from stream_dp.release.accounting import PrivacyAccountant
    from stream_dp.release.window import release_window

    ledger = PrivacyAccountant(params).new_ledger()
    start = time.perf_counter()
    release_window(WINDOW_START, columns, params, LaplaceNoise(), ledger=ledger, last=last)
    return time.perf_counter() - start


def release_time(
    settings_row: dict[str, Any], columns: Any, last: bool = False
) -> tuple[float, float]:
    """The 1M-reading window released with the row's settings (``last``: as the input's last
    window, :func:`release_once`) and with the fixed-epsilon targeted row (:data:`TARGETED`),
    alternately, 5 times each after one warm-up of each (the machine may be shared): the row's
    median seconds and the median of the paired ratios row / targeted (issue 25: a vehicle
    budget's release within 1.5x of the targeted one)."""
    row, targeted = release_params(settings_row), release_params(ROWS[TARGETED])
    release_once(row, columns, last), release_once(targeted, columns)
    pairs = [(release_once(row, columns, last), release_once(targeted, columns)) for _ in range(5)]
    return statistics.median(a for a, _ in pairs), statistics.median(a / b for a, b in pairs)


def million_window() -> Any:
    """benchmarks/release.py's 1M-reading window merged as the coordinator does."""
    from release import WINDOW_START, build_partitions, synthetic_window

    from stream_dp.windows.coordinator import ReleaseCoordinator

    window = synthetic_window(1_000_000, 100_000, 2_000)
    states = build_partitions(window, 64)
    coordinator = ReleaseCoordinator(len(states), 3600, 64)
    for p, state in enumerate(states):
        coordinator.add_partial(WINDOW_START, p, state.partial(WINDOW_START))
    return coordinator.merged(WINDOW_START)


#: The table's header and rule (:func:`print_row` prints its rows).
HEADER = (
    "| row | useful coverage (cell-and-span truth) | median abs error | means at 0 or U "
    "| mean_error holds (cell-and-span truth) "
    "| busiest vessel eps (basic / PLD) | cells per resolution | useful in cells finer "
    "than R0 | median staleness h | records per span (h) | 1M-window release s "
    "(x targeted) |\n" + "|---" * 11 + "|"
)

#: Each printed row's medians (the plot reads them).
SUMMARY: dict[str, dict[str, float]] = {}


def plot_coverage(path: str) -> None:
    """Useful coverage against B (the vehicle-budget rows: the runs' medians and the exact
    expectation of expected_usefulness.py), beside the fixed-epsilon rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = [b for b in BUDGETS if _budget_row(b) in SUMMARY]
    if not budgets:
        return
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot(budgets, [100 * SUMMARY[_budget_row(b)]["coverage"] for b in budgets], "o-",
            label="vehicle budget (T 10, spans <= 8 h): median of the runs")  # fmt: skip
    from expected_usefulness import expected  # beside this script; imports this module

    truth = Truth()
    exact = [100 * expected(ROWS[_budget_row(b)], truth)["coverage"] for b in budgets]
    ax.plot(budgets, exact, "s--", color="tab:blue", alpha=0.6,
            label="the same, expected over the noise (exact)")  # fmt: skip
    for name, style in ((TARGETED, "--"), ("targeted, cap 14 per 7 days (masking)", ":")):
        if name in SUMMARY:
            ax.axhline(100 * SUMMARY[name]["coverage"], linestyle=style, color="grey",
                       label=name.split(" (")[0] if name == TARGETED else name)  # fmt: skip
    ax.set_xlabel("B: each vessel's epsilon per 7 days")
    ax.set_ylabel("useful coverage (%)")
    ax.set_xticks(budgets)
    ax.set_ylim(0, 100)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _budget_row(b: float) -> str:
    return f"vehicle budget B {b:g} per 7 days (T 10, span 8 h)"


def fmt(x: float | None, spec: str = ".1f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else format(x, spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rows", help="semicolon-separated row names (default: all)")
    parser.add_argument("--no-timing", action="store_true", help="skip the 1M-window timing")
    parser.add_argument("--timing-only", action="store_true", help="only the 1M-window timing")
    parser.add_argument("--plot", help="PNG of useful coverage against B (needs [plot])")
    args = parser.parse_args()
    names = list(ROWS) if not args.rows else args.rows.split(";")
    if args.timing_only:
        return print_timings(names, million_window())
    truth = Truth()
    columns = None if args.no_timing else million_window()
    print(
        f"AIS week: {len(truth.readings):,} readings, {len(set(truth.vehicle))} vessels; "
        f"{args.runs} runs per row (median over runs)"
    )
    print(HEADER)
    targeted_records: list[dict[str, Any]] | None = None
    targeted_covering = np.zeros(0, dtype=np.int64)
    targeted_k = 1
    for name in names:
        row = ROWS[name]
        settings = settings_of(row)
        coarsest = settings.coarsest_resolution
        coarsest = settings.resolution if coarsest is None else coarsest
        runs, eps_pairs = [], []
        for _ in range(args.runs):
            records, cells, members = release_week(settings)
            runs.append(score_run(truth, records, members, settings.resolution, coarsest))
            eps_pairs.append(weekly_epsilon(cells))
            if name == TARGETED:
                targeted_records = records
                targeted_covering = truth.held(members, settings.resolution)
                targeted_k = max(int(r["K"]) for r in records) if records else 1
        timing = None if columns is None else release_time(row, columns)
        print_row(name, runs, eps_pairs, timing)
    if targeted_records is not None:
        settings = settings_of(ROWS[TARGETED])
        runs = []
        for _ in range(args.runs):
            means = pipeline_dp_means(
                truth,
                targeted_records,
                targeted_covering,
                targeted_k,
                settings.epsilon,
                settings.prefix_limit,
            )
            coarsest = settings.coarsest_resolution
            runs.append(
                score(
                    truth, targeted_records, means, settings.resolution, coarsest, None,
                    targeted_covering,
                )
            )  # fmt: skip
        print_row(f"PipelineDP on the targeted cells (K={targeted_k})", runs, None, None)
    if args.plot:
        plot_coverage(args.plot)
    return 0


def print_timings(names: list[str], columns: Any) -> int:
    """The 1M-reading window's release time per row and its ratio to the targeted row's, as
    a window that holds its cells for a longer span and as the input's last window (under a
    vehicle budget the first releases nothing, the second its cells; fixed ε: the same)."""
    print("| row | window | 1M-window release s | x targeted (same run) |")
    print("|---|---|---|---|")
    for name in names:
        for last, window in ((False, "holding (last=False)"), (True, "releasing (last=True)")):
            seconds, ratio = release_time(ROWS[name], columns, last)
            print(f"| {name} | {window} | {seconds:.3f} | {ratio:.2f}x |", flush=True)
    return 0


def print_row(
    name: str,
    runs: list[dict[str, Any]],
    eps_pairs: list[tuple[float, float | None]] | None,
    timing: tuple[float, float] | None,
) -> None:
    keys = ("coverage", "median_error", "at_bounds", "fine_share", "cells", "staleness")
    keys += ("coverage_cell_and_span",) if "coverage_cell_and_span" in runs[0] else ()
    med = {k: statistics.median(r[k] for r in runs) for k in keys}
    holds, older = _pooled(runs, "holds"), _pooled(runs, "holds_cell_and_span")
    per_res = runs[0]["per_resolution"]
    eps_text = "n/a"
    if eps_pairs:
        basic = statistics.median(b for b, _ in eps_pairs)
        plds = [p for _, p in eps_pairs if p is not None]
        eps_text = f"{basic:.1f} / {fmt(statistics.median(plds) if plds else None)}"
    print(
        f"| {name} | {100 * med['coverage']:.1f} %{_bracket(med, 'coverage_cell_and_span')} "
        f"| {med['median_error']:.2f} "
        f"| {100 * med['at_bounds']:.1f} % | "
        f"{fmt(holds)} %{'' if older is None else f' ({older:.1f} %)'} | {eps_text} | "
        f"{', '.join(f'r{k}: {v}' for k, v in per_res.items())} | "
        f"{100 * med['fine_share']:.1f} % | {fmt(med['staleness'], '.2f')} | "
        f"{', '.join(f'{k}: {v}' for k, v in runs[0]['per_span'].items())} | "
        f"{'n/a' if timing is None else f'{timing[0]:.3f} ({timing[1]:.2f}x)'} |",
        flush=True,
    )
    SUMMARY[name] = med


def _bracket(med: dict[str, float], key: str) -> str:
    """`` (x %)``: the cell-and-span truth's figure beside the held readings' one, if any."""
    x = med.get(key, float("nan"))
    return "" if np.isnan(x) else f" ({100 * x:.1f} %)"


def _pooled(runs: list[dict[str, Any]], key: str) -> float | None:
    """The runs' ``key`` (cells where ``mean_error`` holds, cells with a bound) pooled, in
    %; None if no run has a bound."""
    pairs = [r[key] for r in runs if r.get(key) is not None]
    return 100 * sum(h for h, _ in pairs) / sum(n for _, n in pairs) if pairs else None


if __name__ == "__main__":
    sys.exit(main())
