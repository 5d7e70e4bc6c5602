"""Where a vehicle-budget row's readings go, in expectation over the noise (issue 25).

``benchmarks/expected_usefulness.py`` gives one figure, the expected useful coverage. This
script splits *all* the readings of the AIS week (or ``--data``'s) into what became of them,
from one noise-free release (the plan, spans and losses do not depend on the noise):

- **useful**: held by a record, expected to fall within 10 % of U of the truth (the mean of
  the readings the record holds, as ``usefulness.py`` scores);
- **lost to noise**: released, unbiased enough (noise-free ``|bias| <= 6.5``) but expected to
  miss through the Laplace noise;
- **biased**: released in a record whose noise-free mean already misses (``|bias| > 6.5``);
- **in a record's cell and span, held by none**: lying in a released record's cell and span
  but held by no record (carried pairs withheld later, §13.3; the older cell-and-span truth
  counted these as covered);
- **beside a released finer cell**: not released, and in an hour of its coarsest cell that a
  record of a finer cell covers (the remainder of a split that was never released);
- **in no record's hours**: not released, and no record of its coarsest cell (at any
  resolution) covers its hour (its cell missed T at the price, was dropped by the plan, or
  its pairs aged out or were withheld).

Beside them, two counts read off the release itself: the carried readings the span policy
withheld (``release/vehicle_budget/pooling.py``, rule 2: a unit formed from its window's own
pairs), and
the readings inside released records that the record did not read (sat out or over the cap).

Run: ``python benchmarks/coverage_breakdown.py [--budget 14] [--set key=json ...]
[--data FILE]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support/: not installed

import expected_usefulness as eu  # noqa: E402
import usefulness as u  # noqa: E402

from stream_dp.release.vehicle_budget import stages as budget_stages  # noqa: E402
from tests.support.noise_free import NoNoise  # noqa: E402


def noise_free_week(
    settings: Any, readings: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[Any], int]:
    """The cell records and members of one noise-free release, and the carried readings the
    span policy withheld (counted by wrapping its choice: an experiment's tool)."""
    withheld = [0]
    choose = budget_stages.choose_pooling

    def counting(*args: Any) -> Any:
        choice = choose(*args)
        withheld[0] += choice.withheld
        return choice

    budget_stages.choose_pooling = counting
    try:
        records, _, members = u.release_week(settings, readings, noise=NoNoise())
    finally:
        budget_stages.choose_pooling = choose
    return records, members, withheld[0]


def breakdown(row: dict[str, Any], truth: u.Truth) -> dict[str, float]:
    """Shares of all the readings (module docstring)."""
    settings = u.settings_of(row)
    records, members, policy_withheld = noise_free_week(settings, truth.readings)
    finest = settings.resolution
    coarsest = settings.coarsest_resolution or finest
    total = len(truth.readings)
    held = truth.held(members, finest)
    in_span = truth.cell_and_span(records, finest) >= 0
    epsilon = np.array([r["epsilon"] for r in records], dtype=np.float64)
    cap = np.array([r["cap"] for r in records], dtype=np.float64)
    used = np.array([r["n_readings_used"] for r in records], dtype=np.float64)
    scale = u.UPPER * cap / (used * epsilon * (1.0 - settings.variance_share))
    means = np.array([r["mean"] for r in records], dtype=np.float64)
    bars = np.array([r["mean_error"] for r in records], dtype=np.float64)
    finer = np.array([int(r["resolution"]) > coarsest for r in records], dtype=bool)
    fig = eu.figures(truth, held, means, scale, bars, finer)
    counts, bias = fig["counts"], fig["bias"]
    p = eu.laplace_within(bias, scale, u.USEFUL)
    unbiased = np.abs(bias) <= u.USEFUL
    hit = held >= 0
    beside = _beside_finer(truth, records, finest, coarsest) & ~hit & ~in_span
    unread = sum(int(r["n_readings"]) - int(r["n_readings_used"]) for r in records)
    return {
        "useful": fig["coverage"],
        "lost to noise": float(((1.0 - p) * counts)[unbiased].sum() / total),
        "biased": float(counts[~unbiased].sum() / total),
        "in a record's cell and span, held by none": float((in_span & ~hit).sum() / total),
        "beside a released finer cell": float(beside.sum() / total),
        "in no record's hours": float((~hit & ~in_span & ~beside).sum() / total),
        "withheld by the span policy (release count)": policy_withheld / total,
        "in records, not read (sat out or over the cap)": unread / total,
    }


def _beside_finer(
    truth: u.Truth, records: list[dict[str, Any]], finest: int, coarsest: int
) -> np.ndarray:
    """Per reading, whether a record finer than ``coarsest`` under the reading's coarsest
    cell covers the reading's hour."""
    import h3

    start = {r["window_start"]: u._epoch(r["window_start"]) for r in records}
    end = {r["window_end"]: u._epoch(r["window_end"]) for r in records}
    roots = np.array(truth.cells(finest, coarsest))
    out = np.zeros(len(truth.readings), dtype=bool)
    for r in records:
        if int(r["resolution"]) <= coarsest:
            continue
        root = h3.cell_to_parent(r["cell"], coarsest)
        lo, hi = start[r["window_start"]], end[r["window_end"]]
        out |= (roots == root) & (truth.window >= lo) & (truth.window < hi)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=14.0, help="B per 7 days (a row's)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of the row to change (JSON value)")  # fmt: skip
    parser.add_argument("--data", help="readings file (default: the AIS week)")
    args = parser.parse_args()
    row = u.with_sets(dict(u.ROWS[u._budget_row(14.0)], vehicle_budget=args.budget), args.set)
    readings = u.readings_of(args.data)
    for name, share in breakdown(row, u.Truth(readings)).items():
        print(f"{name:48s} {100 * share:5.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
