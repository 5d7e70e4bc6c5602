"""The panel (issue 37, items 4 and 5): one recommended profile on several kinds of data, every
seeded run reported, the worst beside the median.

Data sets (``--only NAME``): the bundled AIS week; three tracktable files (Virginia Beach 4-6
June 2020, US coastal 30 June 2020, New York Harbor 8 Dec 2020); one aircraft set
(SampleFlightsUS, speeds from consecutive fixes; SampleNFlights, SampleASDI and ads_with_utf8
are kept aside for checking), too sparse to release anything and kept as a record of that; two
real ADS-B sets never used to choose a setting, aircraft over Switzerland (842 aircraft, 17
hours of 1 August 2018) and around Paris (210 aircraft, 3 hours of 7 October 2021); the
fast movers, a simulated motorway (``benchmarks/motorway.py``); a newcomer's small fleet and a
simulated city, both built with SUMO by ``benchmarks/city.py``. The tracktable files come from
the ``tracktable-data`` wheel (BSD-2-Clause), the ADS-B sets from the ``traffic`` wheel's
sample collections (MIT; recorded by the OpenSky Network), each fetched with ``pip download``
into the gitignored ``benchmarks/data/`` if absent.

Per data set the recommended profile (``commands.profile.BUDGET_PROFILE`` as it stands) with the
data set's U, T at the profile's share of U (10 of 65) and its B per period (14 per 7 days;
aircraft and the motorway 4 per day), and the named baseline: the fixed-epsilon targeted release
(eps 1 per cell, T at 15 of 65 of U, no promise; ``usefulness.py``'s targeted row). Each goes
through the offline engine ``--runs`` times with seeded noise (run i: seed i, the same for both)
and is scored by ``usefulness.py`` against the readings each record holds:

- useful coverage: share of all readings held by records within 10 % of U of their mean;
- staleness: median hours from a usefully released reading's window close to its record's
  publication (the end of the record's span); in brackets ``usefulness.py``'s figure, from the
  reading itself;
- finer share: usefully released readings in cells finer than R0;
- busiest loss / B: the largest loss of one vehicle over any budget period (the ledger's sum
  over the windows of the period ending at each window), over B;
- mean_error honest: share of released cells whose error is within their ``mean_error``; each
  bar holds with probability at least 0.95 on its own (docs/output.md), so a run of n records
  may miss about n/20 of them: under the table, per data set and release, the misses of all
  the runs pooled and the chance of at least that many were every bar's miss chance 5 %
  (:func:`promise_tail`; a small chance says the bars miss more often than they promise);
- release seconds of the whole run, and the budgeted / fixed ratio of the same seed.

Worst = the minimum over the runs for the shares, the maximum for staleness and loss. Writes
``--json`` (every run; with ``--only``, the file's other data sets are kept) and ``--plot``
(``docs/panel.png``) and prints the table in markdown, all from the JSON's data sets.

Run: ``python benchmarks/panel.py [--runs 5] [--only NAME ...] [--quick] [--million]``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from other_data import load  # benchmarks/, beside this script
from panel_data import aircraft_readings, surveillance_readings
from usefulness import (
    ROWS,
    TARGETED,
    UPPER,
    USEFUL_SHARE,
    Truth,
    million_window,
    release_time,
    release_week,
    score,
    settings_of,
    truth_means,
)
from usefulness import _epoch as epoch

from stream_dp.commands.profile import BUDGET_PROFILE
from stream_dp.config import BUDGET_PLANNERS, Settings
from stream_dp.dp.budget_ledger import BudgetLedger
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.sources.sample import load_sample

HERE = Path(__file__).parent
DATA = HERE / "data"
WHEEL = "tracktable_data-1.7.3.1-py3-none-any.whl"
EXAMPLES = "tracktable_data/python_example_data/"
AIRCRAFT = "tracktable_data/internal_test_data/Points/SampleFlightsUS.csv"
#: The ``traffic`` wheel (MIT) and its ADS-B sample collections (gzipped JSON state vectors).
TRAFFIC_WHEEL = ("traffic==2.13", "traffic-2.13-py3-none-any.whl")
SWITZERLAND = "traffic/data/samples/collections/switzerland.json.gz"
PARIS = "traffic/data/samples/collections/quickstart.json.gz"
DAY, WEEK = 86400, 7 * 86400
#: The readings files ``city.py`` writes (``benchmarks/data/NAME.csv``) and its options for
#: them: the city (sumo's mesoscopic model: the car-following one took over an hour for the
#: morning peak on 2 shared cores), the quick one, the small fleet (car following).
SIMULATED: dict[str, tuple[str, ...]] = {
    "city_26_14000_6000_meso": ("--grid", "26", "--commuters", "14000", "--others", "6000"),
    "city_16_6000_2000_meso": ("--grid", "16", "--commuters", "6000", "--others", "2000"),
    "fleet": ("--fleet",),
}
CITY, QUICK_CITY = "city_26_14000_6000_meso", "city_16_6000_2000_meso"
#: ``motorway.py``'s readings file (car following, its defaults) and the quick one.
MOTORWAY, QUICK_MOTORWAY = "motorway_64_2000", "motorway_64_400"
#: Readings released once per row before the timed runs (numba compiles its kernels then).
WARM_UP = 5000


@dataclass(frozen=True)
class DataSet:
    """A panel entry: how to get its readings, its U and its promise B per period."""

    name: str
    readings: Callable[[bool], list[dict[str, Any]]]
    upper: float
    budget: float
    period_seconds: int


def wheel_member(member: str, wheel: tuple[str, str] = ("tracktable-data==1.7.3.1", WHEEL)) -> Path:
    """``member`` of a ``wheel`` (its requirement and file name; the tracktable-data one
    unless given), extracted into ``benchmarks/data/`` (the wheel is downloaded with pip
    first if absent)."""
    target = DATA / Path(member).name
    if not target.exists():
        requirement, name = wheel
        if not (DATA / name).exists():
            subprocess.run([sys.executable, "-m", "pip", "download", requirement, "--no-deps",
                            "-d", str(DATA)], check=True)  # fmt: skip
        with zipfile.ZipFile(DATA / name) as archive:
            target.write_bytes(archive.read(member))
    return target


def simulated(name: str) -> Path:
    """``city.py``'s readings CSV ``name`` (:data:`SIMULATED`; simulated first if absent)."""
    path = DATA / f"{name}.csv"
    if not path.exists():
        meso = ("--meso",) if name.endswith("_meso") else ()
        subprocess.run([sys.executable, str(HERE / "city.py"), *SIMULATED[name], *meso],
                       check=True)  # fmt: skip
    return path


def motorway(name: str) -> Path:
    """``motorway.py``'s readings CSV ``name`` (``motorway_KM_VEHICLES``; simulated first if
    absent)."""
    path = DATA / f"{name}.csv"
    if not path.exists():
        _, km, vehicles = name.split("_")
        subprocess.run([sys.executable, str(HERE / "motorway.py"), "--km", km,
                        "--vehicles", vehicles], check=True)  # fmt: skip
    return path


def _file(path: Callable[[bool], Path]) -> Callable[[bool], list[dict[str, Any]]]:
    return lambda quick: load(str(path(quick)))[0]


PANEL: tuple[DataSet, ...] = (
    DataSet("AIS week", lambda quick: load_sample(), 65.0, 14.0, WEEK),
    DataSet("Virginia Beach", _file(lambda q: wheel_member(
        EXAMPLES + "VirginiaBeach_2020_06_04_to_06_filtered.traj")), 65.0, 14.0, WEEK),
    DataSet("US coastal", _file(lambda q: wheel_member(EXAMPLES + "US_coastal_2020_06_30.traj")),
            65.0, 14.0, WEEK),
    DataSet("New York 8 Dec", _file(lambda q: wheel_member(EXAMPLES + "NYHarbor_2020_12_08.traj")),
            65.0, 14.0, WEEK),
    DataSet("aircraft", lambda quick: aircraft_readings(wheel_member(AIRCRAFT)), 1000.0, 4.0, DAY),
    DataSet("aircraft Switzerland", lambda quick: surveillance_readings(
        wheel_member(SWITZERLAND, TRAFFIC_WHEEL)), 1000.0, 4.0, DAY),
    DataSet("aircraft Paris", lambda quick: surveillance_readings(
        wheel_member(PARIS, TRAFFIC_WHEEL)), 1000.0, 4.0, DAY),
    DataSet("motorway", _file(lambda q: motorway(QUICK_MOTORWAY if q else MOTORWAY)),
            200.0, 4.0, DAY),
    DataSet("small fleet", _file(lambda q: simulated("fleet")), 100.0, 14.0, WEEK),
    DataSet("city", _file(lambda q: simulated(QUICK_CITY if q else CITY)), 100.0, 14.0, WEEK),
)  # fmt: skip


#: The settings' ``budget_planner`` (the profile's planner unless ``--budget-planner``).
DEFAULT_PLANNER: str = Settings.model_fields["budget_planner"].default


def profile_row(data: DataSet, planner: str = "") -> dict[str, Any]:
    """The recommended profile at the data set's U (T at the profile's share of U) and B,
    planned by ``planner`` (``budget_planner``; empty: the settings' default)."""
    t = BUDGET_PROFILE["target_mean_error"] * data.upper / UPPER
    return {
        **BUDGET_PROFILE, "upper": data.upper, "target_mean_error": t,
        "vehicle_budget": data.budget, "budget_period_seconds": data.period_seconds,
        "budget_planner": planner or DEFAULT_PLANNER,
    }  # fmt: skip


def baseline_row(data: DataSet) -> dict[str, Any]:
    """The fixed-epsilon targeted release (eps 1 per cell, T at 15 of 65 of U, no promise)."""
    t = ROWS[TARGETED]["target_mean_error"] * data.upper / UPPER
    return {**ROWS[TARGETED], "upper": data.upper, "target_mean_error": t}


def busiest_per_period(releases: list[Any], period_seconds: int, window_seconds: int) -> float:
    """The largest loss of one vehicle summed over any budget period: for each window in time
    order, its vehicles' spend over the period ending with it (a vehicle's sum over a period is
    largest when the period ends at one of its windows)."""
    ledger = BudgetLedger(period_seconds, None)
    busiest = 0.0
    losses = sorted((r.loss for r in releases if r.loss is not None), key=lambda x: x.window_start)
    for loss in losses:
        ledger.record_released(loss)
        if len(loss.vehicles):
            at = loss.window_start + window_seconds - 1
            busiest = max(busiest, float(np.max(ledger.spent(list(loss.vehicles), at))))
    return busiest


def one_run(truth: Truth, row: dict[str, Any], seed: int, period_seconds: int) -> dict[str, Any]:
    """One seeded release of the data set with ``row``, scored (module docstring)."""
    settings = settings_of(row)
    coarsest = settings.coarsest_resolution
    coarsest = settings.resolution if coarsest is None else coarsest
    releases: list[Any] = []
    noise = LaplaceNoise(RandomSource.seeded_for_tests(seed))
    start = time.perf_counter()
    records, _, members = release_week(settings, truth.readings, noise, releases)
    seconds = time.perf_counter() - start
    means = np.array([r["mean"] for r in records], dtype=np.float64)
    bounds = np.array([np.nan if r.get("mean_error") is None else r["mean_error"] for r in records])
    covering = truth.held(members, settings.resolution)
    scored = score(truth, records, means, settings.resolution, coarsest, bounds, covering)
    held, total = scored["holds"] or (0, 0)
    return {
        "coverage": scored["coverage"],
        "staleness": window_close_staleness(truth, records, means, covering),
        "staleness_from_reading": scored["staleness"],
        "finer": scored["fine_share"],
        "loss": busiest_per_period(releases, period_seconds, settings.window_seconds),
        "honest": held / total if total else float("nan"),
        "misses": total - held,
        "bars": total,
        "records": len(records),
        "seconds": seconds,
    }


def window_close_staleness(
    truth: Truth, records: list[dict[str, Any]], means: np.ndarray, covering: np.ndarray
) -> float:
    """Median hours from a usefully released reading's window close to its record's end."""
    if not records:
        return float("nan")
    held = covering >= 0
    index = covering[held]
    _, true_mean = truth_means(truth, covering, len(records))
    useful = np.abs(means - true_mean) <= USEFUL_SHARE * truth.upper
    ends = np.array([epoch(r["window_end"]) for r in records], dtype=np.float64)
    closes = truth.window[held] + 3600.0
    stale = (ends[index] - closes)[useful[index]] / 3600.0
    return float(np.median(stale)) if stale.size else float("nan")


#: A released ``mean_error`` misses with probability at most this (docs/output.md).
BAR_MISS_CHANCE = 0.05


def promise_tail(misses: int, bars: int, chance: float = BAR_MISS_CHANCE) -> float:
    """P(X >= ``misses``) for X ~ Binomial(``bars``, ``chance``): the largest chance of at least
    ``misses`` misses among ``bars`` independent bars each missing with probability at most
    ``chance`` (the noise of each record is drawn afresh, and the plan does not read it)."""
    if misses <= 0:
        return 1.0
    log_p, log_q = math.log(chance), math.log1p(-chance)
    head = math.lgamma(bars + 1)
    terms = (
        math.exp(head - math.lgamma(k + 1) - math.lgamma(bars - k + 1) + k * log_p
                 + (bars - k) * log_q)
        for k in range(misses, bars + 1)
    )  # fmt: skip
    return min(1.0, math.fsum(terms))


def pooled_misses(runs: list[dict[str, Any]]) -> tuple[int, int, float] | None:
    """The misses and bars of all ``runs`` together and their :func:`promise_tail` (None: a
    run recorded before the panel counted them, or no bar at all)."""
    if not runs or any("misses" not in r for r in runs):
        return None
    misses, bars = sum(r["misses"] for r in runs), sum(r["bars"] for r in runs)
    return (misses, bars, promise_tail(misses, bars)) if bars else None


#: The panel's columns: key, heading, worst = min (True) or max, scale for printing.
COLUMNS: tuple[tuple[str, str, bool, float], ...] = (
    ("coverage", "useful coverage %", True, 100.0),
    ("staleness", "median staleness h", False, 1.0),
    ("finer", "finer than R0 %", True, 100.0),
    ("loss_share", "busiest loss / B", False, 1.0),
    ("honest", "mean_error honest %", True, 100.0),
)


def summarise(runs: list[dict[str, Any]], budget: float) -> dict[str, dict[str, float]]:
    """Per column, the median and the worst run (the minimum for shares, the maximum for
    staleness and loss); a NaN run (nothing useful released) counts as the worst when
    another run has a value (0, or infinite staleness), else both are NaN."""
    out = {}
    for key, _, lowest_is_worst, _ in COLUMNS:
        values = [r["loss"] / budget if key == "loss_share" else r[key] for r in runs]
        clean = [v for v in values if not np.isnan(v)]
        worst = (min if lowest_is_worst else max)(clean) if clean else float("nan")
        if clean and len(clean) < len(values):
            worst = 0.0 if lowest_is_worst else float("inf")
        out[key] = {
            "median": statistics.median(clean) if clean else float("nan"),
            "worst": worst,
        }
    return out


def measure(data: DataSet, runs: int, quick: bool, planner: str = "") -> dict[str, Any]:
    """Every run of the profile and of the baseline on one data set, and their summaries."""
    readings = data.readings(quick)
    truth = Truth(readings, upper=data.upper)
    profile, baseline = profile_row(data, planner), baseline_row(data)
    warm = Truth(readings[:WARM_UP], upper=data.upper)
    one_run(warm, profile, 0, data.period_seconds), one_run(warm, baseline, 0, data.period_seconds)
    budgeted, fixed = [], []
    for seed in range(runs):
        budgeted.append(one_run(truth, profile, seed, data.period_seconds))
        fixed.append(one_run(truth, baseline, seed, data.period_seconds))
        print(f"  {data.name} run {seed}: budgeted {_brief(budgeted[-1])}; "
              f"fixed {_brief(fixed[-1])}", flush=True)  # fmt: skip
    ratio = [b["seconds"] / f["seconds"] for b, f in zip(budgeted, fixed, strict=True)]
    return {
        "name": data.name,
        "readings": len(readings),
        "vehicles": len(set(truth.vehicle)),
        "hours": int(len(np.unique(truth.window))),
        "runs": runs,
        "upper": data.upper,
        "promise": f"{data.budget:g} per {data.period_seconds // DAY} days",
        "profile": profile,
        "budgeted_runs": budgeted,
        "fixed_runs": fixed,
        "budgeted": summarise(budgeted, data.budget),
        "fixed": summarise(fixed, data.budget),
        "time_ratio_median": statistics.median(ratio),
        "time_ratio_worst": max(ratio),
    }


def _brief(run: dict[str, Any]) -> str:
    return (f"coverage {100 * run['coverage']:.1f} %, staleness {run['staleness']:.2f} h, "
            f"finer {100 * run['finer']:.1f} %, loss {run['loss']:.2f}, "
            f"honest {100 * run['honest']:.1f} %, {run['seconds']:.1f} s")  # fmt: skip


def _cell(summary: dict[str, float], scale: float) -> str:
    """``median (worst)``; ``n/a`` where nothing was released, ``none`` for a run's staleness
    when it released nothing useful."""
    return f"{_number(scale * summary['median'])} ({_number(scale * summary['worst'])})"


def _number(x: float) -> str:
    return "n/a" if np.isnan(x) else "none" if np.isinf(x) else f"{x:.1f}"


def markdown(results: list[dict[str, Any]]) -> str:
    """The README table: per data set the profile's median (worst run) beside the baseline's,
    and the budgeted / fixed release time."""
    head = "| data set | readings, vehicles, hours, runs | U, B | release |"
    head += "".join(f" {title} |" for _, title, _, _ in COLUMNS) + " time budgeted / fixed |"
    lines = [head, "|---" * (5 + len(COLUMNS)) + "|"]
    for r in results:
        about = f"{r['readings']:,}, {r['vehicles']:,}, {r['hours']}, {len(r['budgeted_runs'])}"
        for kind, label in (("budgeted", "profile"), ("fixed", "fixed eps 1 (baseline)")):
            cells = "".join(f" {_cell(r[kind][key], scale)} |" for key, _, _, scale in COLUMNS)
            timing = (f"{r['time_ratio_median']:.2f}x ({r['time_ratio_worst']:.2f}x)"
                      if kind == "budgeted" else "1")  # fmt: skip
            lines.append(f"| {r['name']} | {about} | {r['upper']:g}, {r['promise']} | {label} "
                         f"|{cells} {timing} |")  # fmt: skip
    lines.append(
        "\nmedian (worst) of the seeded runs; worst = the lowest share, the "
        "highest staleness and loss; time: whole-run release seconds, same seed."
    )
    lines.extend(_misses_lines(results))
    return "\n".join(lines)


def _misses_lines(results: list[dict[str, Any]]) -> list[str]:
    """Per data set and release, the pooled ``mean_error`` misses (:func:`pooled_misses`)."""
    out = []
    for r in results:
        for kind, label in (("budgeted_runs", "profile"), ("fixed_runs", "baseline")):
            pooled = pooled_misses(r[kind])
            if pooled is not None:
                misses, bars, tail = pooled
                out.append(f"- {r['name']}, {label}: {misses} of {bars} bars missed "
                           f"({100 * misses / bars:.1f} %); P(>= {misses} | 5 % each) "
                           f"= {tail:.3g}")  # fmt: skip
    if out:
        out.insert(0, "\n`mean_error` misses, all runs pooled (each bar may miss with "
                      "probability 5 %):")  # fmt: skip
    return out


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Coverage, staleness, finer share and busiest loss / B per data set: the profile's median
    (bar) and worst run (marker) beside the baseline's."""
    matplotlib.use("Agg")
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.8))
    names = [r["name"] for r in results]
    x = np.arange(len(names))
    for ax, (key, title, _, scale) in zip(axes, COLUMNS[:4], strict=True):
        for offset, kind, colour in ((-0.2, "budgeted", "tab:blue"), (0.2, "fixed", "tab:grey")):
            med = [scale * r[kind][key]["median"] for r in results]
            worst = [scale * r[kind][key]["worst"] for r in results]
            label = "profile" if kind == "budgeted" else "fixed eps 1 (baseline)"
            ax.bar(x + offset, med, 0.4, color=colour, label=f"{label}: median")
            ax.plot(x + offset, worst, "v", color="black", markersize=4,
                    label="worst run" if kind == "budgeted" else None)  # fmt: skip
        if key == "loss_share":
            ax.axhline(1.0, color="red", linestyle=":", linewidth=1)
            ax.set_yscale("symlog", linthresh=1.0)  # the baseline's loss is many times B
            ticks = [0, 0.5, 1, 2, 5, 10]
            ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
        ax.set_title(title, fontsize=9)
        ax.set_xticks(x)
        ax.set_xticklabels(names, rotation=45, ha="right", fontsize=7)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=7)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=110)


def million_ratio(columns: Any, planner: str, last: bool) -> tuple[float, float]:
    """The profile's release of ``release.py``'s 1M-reading window (``columns``) with
    ``budget_planner``
    ``planner`` (live, or as the input's ``last`` window) against the fixed-epsilon targeted
    row's, alternately (usefulness.py)."""
    row = {**BUDGET_PROFILE, "budget_planner": planner}
    return release_time(row, columns, last=last)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--only", action="append", help="a data set's name (repeatable)")
    parser.add_argument("--quick", action="store_true", help="2 runs and a smaller city")
    parser.add_argument("--million", action="store_true", help="also time the 1M-reading window")
    parser.add_argument("--budget-planner", choices=BUDGET_PLANNERS, default=DEFAULT_PLANNER,
                        help="the profile's budget_planner")  # fmt: skip
    parser.add_argument("--json", type=Path, default=DATA / "panel.json")
    parser.add_argument("--plot", type=Path, default=HERE.parent / "docs" / "panel.png")
    parser.add_argument("--report", type=Path, action="append",
                        help="only print and plot the results in these JSON files")  # fmt: skip
    args = parser.parse_args()
    if args.million:
        columns = million_window()
        for planner in BUDGET_PLANNERS:
            for last in (False, True):
                seconds, ratio = million_ratio(columns, planner, last)
                print(f"1M-reading window ({'last' if last else 'live'}), budget_planner "
                      f"{planner}: {seconds:.3f} s, budgeted / fixed {ratio:.2f}x")  # fmt: skip
    if args.report:
        return report([r for path in args.report for r in earlier(path)], args.plot)
    runs = 2 if args.quick else args.runs
    known = {d.name: d for d in PANEL}
    unknown = [n for n in args.only or [] if n not in known]
    if unknown:
        parser.error(f"--only: unknown data set {unknown[0]!r} (one of {', '.join(known)})")
    chosen = [known[n] for n in args.only] if args.only else list(PANEL)
    DATA.mkdir(exist_ok=True)
    results = {r["name"]: r for r in earlier(args.json) if args.only}
    for data in chosen:
        results[data.name] = measure(data, runs, args.quick, args.budget_planner)
        args.json.write_text(json.dumps(list(results.values()), indent=1, default=float))
    return report(list(results.values()), args.plot)


def report(results: list[dict[str, Any]], path: Path) -> int:
    """Print the markdown table and draw the plot of ``results``, in the panel's order."""
    order = [d.name for d in PANEL]
    results = sorted(results, key=lambda r: order.index(r["name"]))
    for r in results:  # from the runs themselves: a file written by an older summarise
        budget = r["profile"]["vehicle_budget"]
        r["budgeted"] = summarise(r["budgeted_runs"], budget)
        r["fixed"] = summarise(r["fixed_runs"], budget)
    print(markdown(results))
    plot(results, path)
    return 0


def earlier(path: Path) -> list[dict[str, Any]]:
    """The results already in ``path`` (an ``--only`` run replaces its data sets' entries)."""
    return json.loads(path.read_text()) if path.exists() else []


if __name__ == "__main__":
    sys.exit(main())
