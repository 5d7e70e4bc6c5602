"""Which released records miss their ``mean_error`` in the panel, and why.

For one panel data set (``panel.py``'s, with its U, T and B) and the recommended profile, the
release is run once without noise (``tests.support.noise_free.NoNoise``: the cells, ε, caps
and spans do not read the noise, so every seeded run has the same records) and once per seed.
Each record that misses in a seeded run is printed with its cell, resolution, span, readings
``M`` and kept ``S``, vehicles, cap, ε, its bar split into the bias bound ``U (1 − S/M)`` and
the noise part ``ln 20 · b`` (docs/math.md §12.1), and the gap ``|released − truth|`` split into
the noise-free mean's offset from the truth (the clipping bias, which the bias bound must
cover) and the noise (which exceeds ``ln 20 · b`` with probability 0.05). The truth is the
estimand docs/output.md defines and the panel scores with: the mean of the record's readings
(its ``n_readings``), clamped to ``[0, U]``.

From the noise-free release alone it also prints each record's chance to miss
(``P(|bias + L| > bar)``, ``L`` ~ Laplace(``b``), ignoring the clamp into ``[0, U]``, which only
lowers it) and the distribution of the number of misses per run.

Run: ``python benchmarks/bar_misses.py [--data-set motorway] [--budget-planner rules]
[--seeds 0,1,2]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support/: not installed

import panel  # noqa: E402
import usefulness as u  # noqa: E402
from expected_usefulness import laplace_within  # noqa: E402

from stream_dp.config import BUDGET_PLANNERS  # noqa: E402
from stream_dp.dp.error_bars import LN20  # noqa: E402
from stream_dp.dp.noise import LaplaceNoise  # noqa: E402
from stream_dp.dp.randomness import RandomSource  # noqa: E402
from tests.support.noise_free import NoNoise  # noqa: E402


def bar_parts(record: dict[str, Any], upper: float) -> tuple[float, float]:
    """A record's ``mean_error`` split into the bias bound ``U (1 − S/M)`` and the noise part
    ``ln 20 · b`` (docs/math.md §12.1; uncapped bars only)."""
    bias = upper * (1.0 - record["n_readings_used"] / record["n_readings"])
    return bias, record["mean_error"] - bias


def miss_chances(bias: np.ndarray, scale: np.ndarray, bars: np.ndarray) -> np.ndarray:
    """Per record, ``P(|bias + L| > bar)`` for ``L`` ~ Laplace(``scale``)."""
    return 1.0 - laplace_within(bias, scale, bars)


def count_distribution(chances: np.ndarray) -> np.ndarray:
    """``P(k misses)`` for k = 0..n of independent records missing with ``chances``."""
    dist = np.array([1.0])
    for p in chances.tolist():
        dist = np.convolve(dist, [1.0 - p, p])
    return dist


def describe_miss(
    record: dict[str, Any], plain: dict[str, Any], true_mean: float, upper: float
) -> str:
    """One line: the record, its bar's parts, and its gap to ``true_mean`` split into the
    noise-free mean's offset (``plain``: the same record released without noise) and the
    noise, also in units of the noise scale ``b``."""
    bias, noise_part = bar_parts(record, upper)
    noise = record["mean"] - plain["mean"]
    return (
        f"{record['cell']} res {record['resolution']} {record['window_start']}.."
        f"{record['window_end']}: M {record['n_readings']}, S {record['n_readings_used']}, "
        f"{record['n_vehicles']} vehicles, cap {record['cap']}, eps {record['epsilon']:.4f}; "
        f"bar {record['mean_error']:.3f} = bias bound {bias:.3f} + noise {noise_part:.3f}; "
        f"released {record['mean']:.3f}, noise-free {plain['mean']:.3f}, truth "
        f"{true_mean:.3f}: gap {abs(record['mean'] - true_mean):.3f} = offset "
        f"{plain['mean'] - true_mean:+.3f} + noise {noise:+.3f} "
        f"({abs(noise) / (noise_part / LN20):.2f} b)"
    )


def _truth_of(truth: u.Truth, settings: Any, records: list[Any], members: list[Any]) -> Any:
    covering = truth.held(members, settings.resolution)
    return u.truth_means(truth, covering, len(records))[1]


def _key(record: dict[str, Any]) -> tuple[str, str, str]:
    return record["window_start"], record["window_end"], record["cell"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-set", default="motorway", help="a panel data set's name")
    parser.add_argument("--budget-planner", choices=BUDGET_PLANNERS, default=panel.DEFAULT_PLANNER)
    parser.add_argument("--seeds", default="0", help="comma-separated seeds (panel.py's runs)")
    args = parser.parse_args()
    data = {d.name: d for d in panel.PANEL}[args.data_set]
    truth = u.Truth(data.readings(False), upper=data.upper)
    settings = u.settings_of(panel.profile_row(data, args.budget_planner))
    plain, _, members = u.release_week(settings, truth.readings, NoNoise())
    plain_truth = _truth_of(truth, settings, plain, members)
    parts = np.array([bar_parts(r, data.upper) for r in plain])
    offset = np.array([r["mean"] for r in plain]) - plain_truth
    bars = np.array([r["mean_error"] for r in plain])
    chances = miss_chances(offset, parts[:, 1] / LN20, bars)
    dist = count_distribution(chances)
    within = bool(np.all(np.abs(offset) <= parts[:, 0] + 1e-9 * data.upper))
    print(f"{len(plain)} records; noise-free |mean - truth| within the bias bound in every one: "
          f"{within} (largest {np.abs(offset).max():.3f}); chance to miss: largest "
          f"{chances.max():.4f}, expected misses a run {chances.sum():.2f}; P(k misses): "
          + ", ".join(f"{k}: {p:.3f}" for k, p in enumerate(dist[:6])))  # fmt: skip
    plain_of = {_key(r): (r, t) for r, t in zip(plain, plain_truth, strict=True)}
    for seed in (int(s) for s in args.seeds.split(",")):
        noise = LaplaceNoise(RandomSource.seeded_for_tests(seed))
        records, _, members = u.release_week(settings, truth.readings, noise)
        true_mean = _truth_of(truth, settings, records, members)
        gaps = np.abs(np.array([r["mean"] for r in records]) - true_mean)
        missed = np.flatnonzero(gaps > np.array([r["mean_error"] for r in records])).tolist()
        print(f"seed {seed}: {len(missed)} of {len(records)} records miss")
        for i in missed:
            plain_record, plain_truth_mean = plain_of[_key(records[i])]
            print("  " + describe_miss(records[i], plain_record, plain_truth_mean, data.upper))
    return 0


if __name__ == "__main__":
    sys.exit(main())
