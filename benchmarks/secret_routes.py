"""Secret routes (issue 36, docs/math.md §14): usefulness in one run, beside the
public-occupancy profile and PipelineDP on the same cells with the same per-window budget.

Data: the bundled AIS week, the three tracktable files and the simulated city
(``benchmarks/panel.py``'s loaders; the city is ``city_26_14000_6000_meso``: 20,000 vehicles,
1.95M readings over 25 h). Each secret-routes configuration goes through the offline engine
(``stream-dp release --privacy-model secret-routes``'s path) with seeded noise and is scored
against every reading of each released (window, cell), clamped to [0, U]:

- useful coverage: share of all readings in released cells whose released mean is within
  10 % of U of the cell's true mean reading;
- staleness: median hours from a usefully released reading's hour close to its window's end;
- resolution: the cells' resolution (one per configuration; the mix is the table's rows);
- loss: every vehicle's (epsilon, delta) per period, from the records (the same for all);
- bar honest: share of released cells whose true mean of per-vehicle means (the estimand)
  lies in the published interval (the target is >= 95 %);
- PipelineDP: its MEAN (Laplace, public partitions = the cells secret-routes released,
  ``max_partitions_contributed = L0``, one reading per vehicle and cell, total epsilon = the
  window's epsilon), scored the same way on the same cells;
- public-occupancy: ``panel.py``'s recommended profile (B 14 per 7 days) on the same data.

Run: ``python benchmarks/secret_routes.py [--only NAME ...] [--sweep] [--no-public]``.
"""

from __future__ import annotations

import argparse
import calendar
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from panel import CITY, PANEL, DataSet, one_run, profile_row
from release import WINDOW_START
from usefulness import USEFUL_SHARE, Truth, million_window, release_once, release_params

from stream_dp.commands.profile import BUDGET_PROFILE
from stream_dp.config import load_settings
from stream_dp.dp.contribution_bound import kept_pairs
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.engine import OfflineEngine
from stream_dp.experiments.pipeline_dp_baseline import pipeline_dp_aggregate
from stream_dp.secret_routes.params import SecretRoutesParams
from stream_dp.secret_routes.release import release_secret_window

#: The data sets of the table (panel.py's names).
NAMES = ("AIS week", "Virginia Beach", "US coastal", "New York 8 Dec", "city")


@dataclass(frozen=True)
class Config:
    """One secret-routes configuration: window hours, L0, resolution."""

    hours: int
    cells: int
    resolution: int
    coarse: int | None = None
    choice: str = "fixed"

    def label(self) -> str:
        levels = "" if self.coarse is None else f" + {self.coarse}"
        adaptive = ", adaptive" if self.choice == "adaptive" else ""
        return f"{self.hours} h, L0 {self.cells}, res {self.resolution}{levels}{adaptive}"


#: The configuration of the table, and the sweep's (city only, ``--sweep``).
CHOSEN = Config(3, 1, 7)
SWEEP = (
    *(Config(h, 1, 7) for h in (1, 2, 3, 4)),
    Config(3, 2, 7),
    Config(3, 3, 7),
    Config(1, 1, 8),
    Config(3, 1, 8),
)
#: Two levels of cells (``--levels``, city only).
LEVELS = (Config(3, 1, 8, 7), Config(3, 2, 8, 7), Config(3, 1, 7, 6), Config(3, 2, 7, 6))
#: The same levels, the fine one chosen from the coarse noisy counts (``--adaptive``).
ADAPTIVE = tuple(
    Config(h, cells, fine, fine - 1, "adaptive")
    for h, cells, fine in ((3, 1, 8), (3, 2, 8), (3, 1, 7), (3, 2, 7), (2, 1, 7), (2, 1, 8))
)


def secret_settings(data: DataSet, config: Config) -> Any:
    levels = {} if config.coarse is None else {"resolution_choice": config.choice}
    return load_settings(
        app_id="secret-routes-bench",
        privacy_model="secret-routes",
        upper=data.upper,
        vehicle_budget=data.budget,
        budget_period_seconds=data.period_seconds,
        window_seconds=config.hours * 3600,
        contribution_cells=config.cells,
        resolution=config.resolution,
        coarse_resolution=config.coarse,
        **levels,
    )


class CellTruth:
    """Per (window, cell) at one window length and resolution: the readings and their mean,
    and the mean over vehicles of their clipped mean (the estimand, all of a vehicle's
    cells; L0 keeps fewer)."""

    def __init__(self, truth: Truth, window_seconds: int, resolution: int) -> None:
        cells = truth.cells(resolution, resolution)
        window = (truth.ts // window_seconds).astype(np.int64) * window_seconds
        keys = [f"{w}|{c}" for w, c in zip(window.tolist(), cells, strict=True)]
        names, self.index = np.unique(np.array(keys), return_inverse=True)
        self.key = {str(k): i for i, k in enumerate(names.tolist())}
        self.readings = np.bincount(self.index)
        self.mean = np.bincount(self.index, weights=truth.value) / self.readings
        self.hour_close = truth.window + 3600.0
        self.truth = truth

    def of(self, record: dict[str, Any]) -> int:
        start = int(_epoch(record["window_start"]))
        return self.key.get(f"{start}|{record['cell']}", -1)


def _epoch(stamp: str) -> float:
    return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))


def file_span(readings: list[dict[str, Any]], window_seconds: int) -> tuple[int, int]:
    """The span an operator declares for a file it knows: its whole windows, first to last
    (a benchmark's choice; ``stream-dp release`` takes it from ``--from/--to``)."""
    times = [float(r["ts"]) for r in readings]
    first = int(min(times)) // window_seconds * window_seconds
    return first, (int(max(times)) // window_seconds + 1) * window_seconds


def release(data: DataSet, readings: list[dict[str, Any]], config: Config, seed: int) -> list[Any]:
    span = file_span(readings, config.hours * 3600)
    noise = LaplaceNoise(RandomSource.seeded_for_tests(seed))
    engine = OfflineEngine(secret_settings(data, config), noise, span=span)
    return [r for batch in (engine.feed(readings), engine.finish(True)) for r in batch]


def score(truth: Truth, records: list[dict[str, Any]], hours: int, upper: float,
          means: np.ndarray | None = None) -> dict[str, float]:  # fmt: skip
    """Useful coverage, staleness and the finest level's share of ``records`` (``means``:
    other means for them): each reading counts in the finest shown record holding it."""
    if not records:  # nothing shown: no reading is covered
        return {"coverage": 0.0, "staleness": float("nan"), "cells": 0, "finest": float("nan")}
    released = means if means is not None else np.array([r["mean"] for r in records])
    resolution = np.array([int(r["resolution"]) for r in records], dtype=np.int64)
    levels = sorted(set(resolution.tolist()), reverse=True)
    assigned = np.full(len(truth.ts), -1, dtype=np.int64)
    useful_record = np.zeros(len(records), dtype=bool)
    for level in levels:
        cells = CellTruth(truth, hours * 3600, level)
        index = np.array([cells.of(r) if r["resolution"] == level else -1 for r in records])
        ok = index >= 0
        record_of = np.full(len(cells.readings), -1, dtype=np.int64)
        record_of[index[ok]] = np.flatnonzero(ok)
        error = np.abs(released[ok] - cells.mean[index[ok]])
        useful_record[ok] = error <= USEFUL_SHARE * upper
        candidate = record_of[cells.index]
        take = (assigned < 0) & (candidate >= 0)
        assigned[take] = candidate[take]
    useful = (assigned >= 0) & useful_record[np.maximum(assigned, 0)]
    ends = np.array([_epoch(r["window_end"]) for r in records] or [0.0])
    stale = (ends[assigned[useful]] - (truth.window[useful] + 3600.0)) / 3600.0
    finest = useful & (resolution[np.maximum(assigned, 0)] == (levels[0] if levels else -1))
    return {
        "coverage": float(useful.mean()),
        "staleness": float(np.median(stale)) if stale.size else float("nan"),
        "cells": len(records),
        "finest": float(finest.sum() / useful.sum()) if useful.any() else float("nan"),
    }


def estimand_holds(truth: Truth, records: list[dict[str, Any]], config: Config,
                   upper: float) -> float:  # fmt: skip
    """Share of records whose interval holds the estimand: the mean over the cell's kept
    vehicles (each vehicle's L0 cells of most readings, ties by cell name, as the release
    keeps them) of their mean reading clipped to [0, U]."""
    cells = np.array(truth.cells(config.resolution, config.resolution))
    window = (truth.ts // (config.hours * 3600)).astype(np.int64)
    vehicles = np.array(truth.vehicle)
    keys = np.char.add(np.char.add(window.astype(str), "|"), vehicles)
    pair_keys = np.char.add(np.char.add(keys, "|"), cells)
    pairs, pair_of = np.unique(pair_keys, return_inverse=True)
    count = np.bincount(pair_of)
    total = np.bincount(pair_of, weights=truth.value)
    first = np.zeros(len(pairs), dtype=np.int64)
    first[pair_of] = np.arange(len(pair_of))
    _, vehicle_code = np.unique(keys[first], return_inverse=True)
    _, cell_code = np.unique(cells[first], return_inverse=True)
    kept = kept_pairs(vehicle_code, cell_code, count, config.cells)
    mean = np.clip(total / count, 0.0, upper)
    cell_keys = np.char.add(np.char.add(window[first].astype(str), "|"), cells[first])[kept]
    names, where = np.unique(cell_keys, return_inverse=True)
    estimand = np.bincount(where, weights=mean[kept]) / np.bincount(where)
    by_key = dict(zip(names.tolist(), estimand.tolist(), strict=True))
    seconds = config.hours * 3600
    held = [
        r["mean_low"] <= by_key[key] <= r["mean_high"]
        for r in records
        if (key := f"{int(_epoch(r['window_start'])) // seconds}|{r['cell']}") in by_key
    ]
    return float(np.mean(held)) if held else float("nan")


def pipeline_dp(truth: Truth, cells: CellTruth, records: list[dict[str, Any]], config: Config,
                epsilon_window: float, upper: float) -> np.ndarray:  # fmt: skip
    """PipelineDP's MEAN on the released (window, cell)s, same per-window epsilon."""
    index = np.array([cells.of(r) for r in records], dtype=np.int64)
    partition = {int(i): j for j, i in enumerate(index.tolist()) if i >= 0}
    window = (truth.ts // (config.hours * 3600)).astype(np.int64)
    rows = [
        (f"{window[k]}|{truth.vehicle[k]}", partition[i], float(truth.value[k]))
        for k, i in enumerate(cells.index.tolist())
        if i in partition
    ]
    result = pipeline_dp_aggregate(rows, config.cells, 1, epsilon_window / config.cells, upper,
                                   list(range(len(records))), with_variance=False)  # fmt: skip
    means = np.full(len(records), np.nan)
    for j, metrics in result:
        means[j] = min(max(metrics.mean, 0.0), upper)
    return means


def run_config(data: DataSet, readings: list[dict[str, Any]], truth: Truth, config: Config,
               with_baseline: bool) -> dict[str, Any]:  # fmt: skip
    start = time.perf_counter()
    releases = release(data, readings, config, seed=1)
    seconds = time.perf_counter() - start
    records = [c for r in releases for c in r.cells]
    summary = releases[-1].summary if releases else {}
    cells = CellTruth(truth, config.hours * 3600, config.resolution)
    out = {
        "data": data.name, "config": config.label(),
        **score(truth, records, config.hours, data.upper),
        "epsilon_window": summary.get("epsilon_window", float("nan")),
        "epsilon_period": max((r.summary["epsilon_period"] for r in releases), default=0.0),
        "delta_period": max((r.summary["delta_period"] for r in releases), default=0.0),
        "threshold": summary.get("threshold_vehicles", float("nan")),
        "honest": estimand_holds(truth, records, config, data.upper),
        "seconds": seconds,
    }  # fmt: skip
    if with_baseline and records:
        means = pipeline_dp(truth, cells, records, config, out["epsilon_window"], data.upper)
        out["pipeline_dp"] = score(truth, records, config.hours, data.upper, means)["coverage"]
    return out


def public_row(data: DataSet, truth: Truth) -> dict[str, Any]:
    run = one_run(truth, profile_row(data), 1, data.period_seconds)
    return {"coverage": run["coverage"], "staleness": run["staleness"], "loss": run["loss"]}


def million_times() -> tuple[float, float]:
    """The 1M-reading window (benchmarks/release.py's, resolution 8) released by the
    public-occupancy profile and by secret-routes (1 h windows, L0 1), alternately, 3 times
    each after a warm-up: the median seconds of each."""
    columns = million_window()
    public = release_params(dict(BUDGET_PROFILE))
    secret = SecretRoutesParams.from_settings(load_settings(privacy_model="secret-routes"))

    def secret_once() -> float:
        start = time.perf_counter()
        release_secret_window(WINDOW_START, columns, secret, RandomSource(), 1)
        return time.perf_counter() - start

    release_once(public, columns, True), secret_once()
    pairs = [(release_once(public, columns, True), secret_once()) for _ in range(3)]
    return sorted(p for p, _ in pairs)[1], sorted(s for _, s in pairs)[1]


def _pct(x: float) -> str:
    return "n/a" if x != x else f"{100 * x:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", default=list(NAMES))
    parser.add_argument("--sweep", action="store_true", help="the city's configurations")
    parser.add_argument("--no-public", action="store_true", help="skip the public profile")
    parser.add_argument("--levels", action="store_true", help="the city's two-level runs")
    parser.add_argument("--adaptive", action="store_true", help="the city's adaptive runs")
    parser.add_argument("--million", action="store_true", help="the 1M-window release times")
    args = parser.parse_args()
    panel = {d.name: d for d in PANEL}
    if args.million:
        public, secret = million_times()
        print(f"1M-reading window: public-occupancy {public:.2f} s, secret-routes {secret:.2f} s "
              f"({secret / public:.2f}x; target <= 2x)")  # fmt: skip
    print("| data | readings | vehicles | secret-routes (3 h, L0 1, res 7): useful % | "
          "staleness h | cells | threshold veh. | eps/window | loss per period (eps, delta) | "
          "bar honest % | PipelineDP same cells: useful % | public-occupancy: useful % | "
          "staleness h | busiest loss |")  # fmt: skip
    print("|" + "---|" * 14)
    for name in args.only:
        data = panel[name]
        readings = data.readings(False)
        truth = Truth(readings, upper=data.upper)
        row = run_config(data, readings, truth, CHOSEN, with_baseline=True)
        public = ({"coverage": float("nan"), "staleness": float("nan"), "loss": float("nan")}
                  if args.no_public else public_row(data, truth))  # fmt: skip
        print(f"| {name} | {len(readings):,} | {len(set(truth.vehicle)):,} | "
              f"{_pct(row['coverage'])} | {row['staleness']:.2f} | {row['cells']} | "
              f"{row['threshold']:.0f} | {row['epsilon_window']:.3f} | "
              f"{row['epsilon_period']:.2f}, {row['delta_period']:.1g} | {_pct(row['honest'])} | "
              f"{_pct(row.get('pipeline_dp', float('nan')))} | {_pct(public['coverage'])} | "
              f"{public['staleness']:.2f} | {public['loss']:.2f} |", flush=True)  # fmt: skip
    if args.sweep or args.levels or args.adaptive:
        data = panel["city"]
        readings = data.readings(False)
        truth = Truth(readings, upper=data.upper)
        print(f"\nsweep on the city ({CITY}): useful coverage, staleness, eps per window")
        print("| window h | L0 | res | useful % | finest level % | staleness h | cells | "
              "eps/window | threshold | bar honest % |")  # fmt: skip
        print("|" + "---|" * 10)
        chosen = (SWEEP if args.sweep else ()) + (LEVELS if args.levels else ())
        for config in chosen + (ADAPTIVE if args.adaptive else ()):
            row = run_config(data, readings, truth, config, with_baseline=False)
            res = config.label().split("res ")[1]
            print(f"| {config.hours} | {config.cells} | {res} | {_pct(row['coverage'])} | "
                  f"{_pct(row['finest'])} | {row['staleness']:.2f} | {row['cells']} | "
                  f"{row['epsilon_window']:.3f} | {row['threshold']:.0f} | "
                  f"{_pct(row['honest'])} |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
