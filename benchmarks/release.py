"""Close-to-records time of one large window: stream-dp against PipelineDP and OpenDP.

One window of 1,000,000 readings of 100,000 vehicles over 2,000 H3 cells (resolution 8,
around New York), each vehicle driving a route of 10 cells (numpy, seeded; speeds in
[0, 65] km/h). Timed on the same data:

- stream-dp: the ingest state of 4 input partitions is built first (not timed against the
  baselines); then timed, everything from "the window is closed" to its records: each
  partition's state to a partial, through the partial's wire format, the merge, and
  ``release_window`` (selection, occupancy, CLIP-USER, pseudo-user cap, noisy clamped mean
  and variance, records, the per-vehicle losses for the budget ledger);
- PipelineDP: ``DPEngine.aggregate`` on ``LocalBackend`` with MEAN and VARIANCE, Laplace,
  the 2,000 cells as public partitions, ``max_partitions_contributed=10``,
  ``max_contributions_per_partition=L``, bounds [0, 65], materialised with ``list()``;
- OpenDP: per cell, ``make_mean`` and ``make_variance`` on a sized, bounded vector
  (the occupancy array is public in stream-dp's model, so each cell's size is too) chained
  with ``then_laplace``, after the same per-(vehicle, cell) contribution bound L applied
  with numpy (OpenDP 0.16 has no user-level bounding outside its Polars API, and Polars is
  not installed).

Same budget everywhere: eps per cell (eps/2 mean + eps/2 variance); for PipelineDP, whose
budget is per privacy unit over all partitions, ``total_epsilon = 10 * eps`` (10 partitions
per vehicle), the same worst case as stream-dp's K * eps with K <= 10.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _common import CpuMeter, Result, load_average, print_ratio, print_table
from numpy.typing import NDArray

from stream_dp.experiments.pipeline_dp_baseline import pipeline_dp_aggregate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support/: not installed

WINDOW_START = 1_700_002_800  # an hour boundary
UPPER = 65.0
ROUTE = 10  # cells per vehicle
NY_CENTRE = (40.73, -73.95)


# --- data ---------------------------------------------------------------------------------
class Window:
    """Readings of one window as columns, sorted by event time."""

    def __init__(
        self, vehicle: NDArray[np.int64], cell: NDArray[np.int64], ts: NDArray[np.float64],
        speed: NDArray[np.float64], cell_names: list[str], n_vehicles: int,
    ) -> None:  # fmt: skip
        self.vehicle = vehicle
        self.cell = cell
        self.ts = ts
        self.speed = speed
        self.cell_names = cell_names
        self.vehicle_names = [f"veh-{v:06d}" for v in range(n_vehicles)]

    def __len__(self) -> int:
        return int(self.ts.shape[0])

    def subset(self, fraction: float) -> Window:
        """The readings of the first ``fraction`` of the vehicles (all their readings)."""
        keep = self.vehicle < int(len(self.vehicle_names) * fraction)
        return Window(
            self.vehicle[keep], self.cell[keep], self.ts[keep], self.speed[keep],
            self.cell_names, len(self.vehicle_names),
        )  # fmt: skip


def h3_cells(n: int, resolution: int = 8) -> list[str]:
    """``n`` real H3 cells: the nearest ones around Manhattan, sorted."""
    import h3

    centre = h3.latlng_to_cell(*NY_CENTRE, resolution)
    k = 1
    while 1 + 3 * k * (k + 1) < n:
        k += 1
    by_ring = [c for ring in range(k + 1) for c in sorted(h3.grid_ring(centre, ring))]
    return sorted(by_ring[:n])


def synthetic_window(
    n_readings: int, n_vehicles: int, n_cells: int, seed: int = 20240601
) -> Window:
    """Every vehicle has a route of 10 distinct cells (route starts skewed towards busy
    cells), at least one reading (lognormal activity, exactly ``n_readings`` in total), each
    reading in a uniformly chosen cell of its route; speed = cell level + vehicle habit +
    noise, clipped to [0, 65]."""
    rng = np.random.default_rng(seed)
    start = (rng.exponential(n_cells / 6, n_vehicles)).astype(np.int64) % n_cells
    step = rng.integers(1, n_cells // ROUTE, n_vehicles)  # step * 9 < n_cells: distinct
    route = (start[:, None] + step[:, None] * np.arange(ROUTE)[None, :]) % n_cells
    activity = rng.lognormal(0.0, 0.8, n_vehicles)
    extra = rng.multinomial(n_readings - n_vehicles, activity / activity.sum())
    vehicle = np.repeat(np.arange(n_vehicles), 1 + extra)
    cell = route[vehicle, rng.integers(0, ROUTE, vehicle.shape[0])]
    cell_level = rng.uniform(15, 55, n_cells)
    habit = rng.normal(0, 6, n_vehicles)
    speed = np.clip(
        cell_level[cell] + habit[vehicle] + rng.normal(0, 8, vehicle.shape[0]), 0, UPPER
    )
    ts = WINDOW_START + rng.uniform(0, 3600, vehicle.shape[0])
    order = np.argsort(ts, kind="stable")
    return Window(
        vehicle[order], cell[order], ts[order], speed[order], h3_cells(n_cells), n_vehicles
    )


# --- stream-dp ----------------------------------------------------------------------------
PARTITIONS = 4


def build_partitions(window: Window, prefix_limit: int, batch: int = 20_000) -> list[Any]:
    """The ingest state at close: the window's readings fed, in event-time order and in
    batches, to the ``PartitionState`` of each of 4 input partitions (Kafka's default
    partitioner on the vehicle id, as the service)."""
    from stream_dp.config import load_settings
    from stream_dp.kafka.partitioner import partition_for
    from stream_dp.windows.state import PartitionState

    settings = load_settings(prefix_limit=prefix_limit, app_id="bench")
    states = [PartitionState.for_settings(settings) for _ in range(PARTITIONS)]
    of_vehicle = np.array([partition_for(v, PARTITIONS) for v in window.vehicle_names])
    partition = of_vehicle[window.vehicle]
    cells, vehicles = window.cell_names, window.vehicle_names
    for p, state in enumerate(states):
        at = np.flatnonzero(partition == p)
        for i in range(0, len(at), batch):
            chunk = at[i : i + batch]
            state.add_batch(
                [vehicles[v] for v in window.vehicle[chunk].tolist()],
                window.ts[chunk].tolist(),
                [cells[c] for c in window.cell[chunk].tolist()],
                window.speed[chunk].tolist(),
            )
    return states


@functools.cache
def _service_settings(epsilon: float) -> Any:
    from stream_dp.config import load_settings
    from tests.support.settings import FIXED_MODE

    # The fixed res-8 mode the benchmark has always timed (the defaults before issue 26).
    return load_settings(epsilon=epsilon, upper=UPPER, resolution=8, app_id="bench", **FIXED_MODE)


def stream_dp_release(
    states: list[Any], epsilon: float, phases: dict[str, list[float]] | None = None
) -> tuple[int, dict[str, Any]]:
    """Everything from "the window is closed" to the release records, as the service does
    it: each partition's state to a partial, the partial through its wire format (binary
    parts, encoded and decoded), the coordinator's merge, then ``release_window``."""
    from stream_dp.dp.noise import LaplaceNoise
    from stream_dp.release.accounting import PrivacyAccountant
    from stream_dp.release.params import ReleaseParams
    from stream_dp.release.window import release_window
    from stream_dp.windows.coordinator import ReleaseCoordinator
    from stream_dp.wire import internal_records as rec

    settings = _service_settings(epsilon)  # loaded once, as the worker does at start
    params = ReleaseParams.from_settings(settings)
    marks = [time.perf_counter()]
    partials = [state.partial(WINDOW_START) for state in states]
    marks.append(time.perf_counter())
    coordinator = ReleaseCoordinator(PARTITIONS, 3600, settings.prefix_limit)
    for p, partial in enumerate(partials):
        assembler = rec.PartAssembler()
        for part in rec.encode_partial(WINDOW_START, p, partial, "bench"):
            whole = assembler.add(rec.decode(part))
        coordinator.add_partial(*rec.partial_payload(whole))
    marks.append(time.perf_counter())
    columns = coordinator.merged(WINDOW_START)
    marks.append(time.perf_counter())
    ledger = PrivacyAccountant(params).new_ledger()  # the default: tracked, no cap
    release = release_window(WINDOW_START, columns, params, LaplaceNoise(), ledger=ledger)
    marks.append(time.perf_counter())
    if phases is not None:
        names = ("partition state -> partials", "partials through the wire", "merge", "release")
        for name, a, b in zip(names, marks, marks[1:], strict=False):
            phases.setdefault(name, []).append(b - a)
    return len(release.cells), release.summary


# --- baselines ----------------------------------------------------------------------------
def pipeline_dp_release(window: Window, epsilon: float, per_partition: int) -> int:
    cells, vehicles = window.cell_names, window.vehicle_names
    rows = [
        (vehicles[v], cells[c], s)
        for v, c, s in zip(
            window.vehicle.tolist(), window.cell.tolist(), window.speed.tolist(), strict=True
        )
    ]
    return len(pipeline_dp_aggregate(rows, ROUTE, per_partition, epsilon, UPPER, cells))


def bound_per_pair(window: Window, per_partition: int) -> tuple[NDArray[np.int64], NDArray[Any]]:
    """Keep each vehicle's first ``per_partition`` readings per cell (event-time order);
    return the kept readings' cells and speeds, grouped by cell."""
    n_vehicles = len(window.vehicle_names)
    key = window.cell * n_vehicles + window.vehicle
    order = np.lexsort((window.ts, key))  # by pair, then time
    sorted_key = key[order]
    first = np.r_[True, sorted_key[1:] != sorted_key[:-1]]
    start_of_run = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
    rank = np.arange(len(order)) - start_of_run
    kept = order[rank < per_partition]
    kept = kept[np.argsort(window.cell[kept], kind="stable")]
    return window.cell[kept], window.speed[kept]


def opendp_release(window: Window, epsilon: float, per_partition: int) -> int:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    cell, speed = bound_per_pair(window, per_partition)
    bounds = np.searchsorted(cell, np.arange(len(window.cell_names) + 1))
    d_in = 2 * per_partition  # one vehicle changes <= L readings of a sized cell vector
    released = 0
    for g in range(len(window.cell_names)):
        values = speed[bounds[g] : bounds[g + 1]].tolist()
        if len(values) < 2:
            continue  # the sample variance needs two readings
        domain = dp.vector_domain(dp.atom_domain(bounds=(0.0, UPPER)), size=len(values))
        metric = dp.symmetric_distance()
        for make in (dp.t.make_mean, dp.t.make_variance):
            transformation = make(domain, metric)
            measurement = transformation >> dp.m.then_laplace(
                _laplace_scale(transformation.map(d_in), epsilon / 2)
            )
            if measurement.map(d_in) > epsilon / 2 * (1 + 1e-6):
                raise AssertionError("OpenDP scale under-calibrated")
            measurement(values)
        released += 1
    return released


def _laplace_scale(sensitivity: float, epsilon: float) -> float:
    """A scale whose float Laplace privacy map stays within ``epsilon`` (with a little slack
    for OpenDP's rounding term)."""
    return sensitivity / epsilon * (1 + 1e-9) if sensitivity > 0 else 1e-12


def profile_release(states: list[Any], epsilon: float, top: int = 22) -> None:
    """Where the close-to-records time goes (cProfile, cumulative, stream-dp frames)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    stream_dp_release(states, epsilon)
    profiler.disable()
    print("\nclose-to-records under cProfile (cumulative; profiling inflates times):")
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(r"stream_dp|sorted|unique", top)


# --- timing -------------------------------------------------------------------------------
def timed(function: Callable[[], Any], repeat: int = 1) -> tuple[float, Any, float]:
    """Median wall time of ``repeat`` calls, the last result, and the cores other
    processes used meanwhile."""
    times = []
    result = None
    meter = CpuMeter([])
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result, meter.stop()[1]


def timed_or_extrapolated(
    name: str, window: Window, run: Callable[[Window], Any], budget: float
) -> Result:
    """Time ``run`` on the whole window, or, when a pilot on 10% of the vehicles predicts
    more than ``budget`` seconds, on the fraction that fits, scaled linearly (said in the
    note; linear scaling overstates per-cell fixed costs, so it favours stream-dp less)."""
    pilot_fraction = 0.1
    load = load_average()
    pilot = timed(lambda: run(window.subset(pilot_fraction)))[0]
    predicted = pilot / pilot_fraction
    if predicted <= budget:
        seconds, _, others = timed(lambda: run(window))
        note = f"whole window; the 10% pilot took {pilot:.1f} s"
        return Result(name, seconds, "s", load, note, others)
    fraction = max(pilot_fraction, min(1.0, budget / 2 / predicted))
    part, _, others = timed(lambda: run(window.subset(fraction)))
    note = f"EXTRAPOLATED from {fraction:.0%} of the vehicles ({part:.1f} s)"
    return Result(name, part / fraction, "s", load, note, others)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readings", type=int, default=1_000_000)
    parser.add_argument("--vehicles", type=int, default=100_000)
    parser.add_argument("--cells", type=int, default=2_000)
    parser.add_argument("--epsilon", type=float, default=1.0, help="per cell")
    parser.add_argument(
        "--per-partition", type=int, default=4,
        help="L: readings per (vehicle, cell) kept by the baselines",
    )  # fmt: skip
    parser.add_argument("--baseline-budget", type=float, default=180.0, help="seconds")
    parser.add_argument("--skip-baselines", action="store_true")
    parser.add_argument("--profile", action="store_true", help="cProfile the release")
    parser.add_argument("--repeat", type=int, default=5, help="timed stream-dp runs")
    parser.add_argument(
        "--default-allocator",
        action="store_true",
        help="skip the allocator setting the service applies at start (keep_freed_memory)",
    )
    args = parser.parse_args(argv)

    from stream_dp.allocator import keep_freed_memory
    from stream_dp.config import Settings

    # As `stream-dp serve` and `stream-dp release` do at start (process-wide, so the
    # baselines in this process run with it too).
    tuned = False if args.default_allocator else keep_freed_memory()
    print(f"allocator: {'keep_freed_memory (as the service)' if tuned else 'glibc default'}")

    prefix_limit = Settings().prefix_limit
    window = synthetic_window(args.readings, args.vehicles, args.cells)
    per_pair = np.unique(window.cell * args.vehicles + window.vehicle, return_counts=True)[1]
    over = float(np.mean(per_pair > args.per_partition))
    print(
        f"{len(window):,} readings, {len(np.unique(window.vehicle)):,} vehicles, "
        f"{len(np.unique(window.cell)):,} cells, {len(per_pair):,} (cell, vehicle) pairs; "
        f"readings per pair: mean {per_pair.mean():.2f}, max {per_pair.max()}, "
        f"{over:.2%} over L={args.per_partition}"
    )
    print(f"start: {load_average()}")

    results: list[Result] = []
    load = load_average()
    build_seconds, states, others = timed(lambda: build_partitions(window, prefix_limit))
    results.append(
        Result("stream-dp: ingest state (not timed below)", build_seconds, "s", load, "", others)
    )
    stream_dp_release(states, args.epsilon)  # warm-up: numba kernels from their cache
    load = load_average()
    phases: dict[str, list[float]] = {}
    release_seconds, (cells, summary), others = timed(
        lambda: stream_dp_release(states, args.epsilon, phases), args.repeat
    )
    note = (
        f"median of {args.repeat}; {cells} cells, G1={summary['G1']}, K={summary['K']}; "
        + ", ".join(f"{k} {statistics.median(v):.3f}" for k, v in phases.items())
    )
    results.append(Result("stream-dp: close-to-records", release_seconds, "s", load, note, others))

    if args.profile:
        profile_release(states, args.epsilon)

    baselines: dict[str, float] = {}
    if not args.skip_baselines:
        for name, run in (
            ("PipelineDP LocalBackend", pipeline_dp_release),
            ("OpenDP per-cell make_mean/variance", opendp_release),
        ):
            result = timed_or_extrapolated(
                name, window, lambda w, run=run: run(w, args.epsilon, args.per_partition),
                args.baseline_budget,
            )  # fmt: skip
            results.append(result)
            baselines[name] = result.value

    print_table("Close-to-records time of one window", results)
    print("\nRatios (baseline time / stream-dp time)")
    for name, seconds in baselines.items():
        print_ratio(f"{name} / stream-dp close-to-records", seconds / release_seconds, 20)
    print(f"\nend: {load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
