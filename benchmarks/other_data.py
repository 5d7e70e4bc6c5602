"""Do the recommended settings work on real data they were not tuned on (issue 25)?

The same table as ``benchmarks/usefulness.py`` (its truth, scoring and row printer, imported),
for readings from another file (``--data``: CSV, JSON Lines or tracktable ``.traj``, optionally
gzipped; a ``.traj`` has its speeds derived from consecutive fixes) and three rows:

- the fixed-epsilon targeted mode without a budget (usefulness.py's targeted row);
- the same with ``budget_cap`` = the profile's B over the profile's period (masking);
- the recommended vehicle-budget profile, ``commands.profile.BUDGET_PROFILE`` as it stands, so
  a change to the profile is measured here without editing this script.

Each row goes through the offline engine ``--runs`` times (fresh noise). Below the table: each
row's largest busiest-vehicle loss over the runs against the promise B (basic composition).
No 1M-window timing here (that column reads ``n/a``): the timing does not depend on the data.

Run: ``python benchmarks/other_data.py --data FILE [--data FILE ...] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
from usefulness import (  # benchmarks/usefulness.py, beside this script
    HEADER,
    ROWS,
    TARGETED,
    Truth,
    print_row,
    release_week,
    score_run,
    settings_of,
    weekly_epsilon,
)

from stream_dp.commands.profile import BUDGET_PROFILE, promise
from stream_dp.sources import SourceError, numbered_readings


def rows() -> dict[str, dict[str, Any]]:
    """The three rows, named after the profile's B and period."""
    b = BUDGET_PROFILE["vehicle_budget"]
    period = BUDGET_PROFILE["budget_period_seconds"]
    words = promise(settings_of(BUDGET_PROFILE))
    return {
        "fixed eps 1, targeted T 15, no budget": ROWS[TARGETED],
        f"same, budget_cap {words} (mask)": {
            **ROWS[TARGETED], "budget_cap": b, "budget_period_seconds": period,
        },
        f"recommended profile: vehicle_budget {words}": dict(BUDGET_PROFILE),
    }  # fmt: skip


def load(path: str) -> tuple[list[dict[str, Any]], int]:
    """The file's readings in file order (a ``.traj``: by time) and the number of bad rows
    skipped (as ``stream-dp release`` skips them)."""
    readings: list[dict[str, Any]] = []
    bad = 0
    for _line, item in numbered_readings(path):
        if isinstance(item, SourceError):
            bad += 1
        else:
            readings.append(item)
    return readings, bad


def describe(path: str, readings: list[dict[str, Any]], bad: int) -> str:
    """One line about the data: size, vehicles, hours, speeds."""
    ts = np.array([float(r["ts"]) for r in readings])
    speed = np.array([float(r["speed"]) for r in readings])
    hours = len(np.unique((ts // 3600).astype(np.int64)))
    vehicles = len({r["vehicle_id"] for r in readings})
    return (
        f"{Path(path).name}: {len(readings):,} readings ({bad} bad rows skipped), "
        f"{vehicles} vehicles, {hours} hours with data, median speed {np.median(speed):.1f} "
        f"km/h ({100 * np.mean(speed > 65.0):.1f} % above U 65)"
    )


def measure(path: str, runs: int) -> None:
    """Print the table for one file."""
    readings, bad = load(path)
    if not readings:
        print(f"{path}: no readings", flush=True)
        return
    truth = Truth(readings)
    print(f"\n{describe(path, readings, bad)}; {runs} runs per row (median over runs)")
    print(HEADER)
    worst: dict[str, float] = {}
    for name, row in rows().items():
        settings = settings_of(row)
        coarsest = settings.coarsest_resolution
        coarsest = settings.resolution if coarsest is None else coarsest
        scored, eps_pairs = [], []
        for _ in range(runs):
            records, losses, members = release_week(settings, readings)
            scored.append(score_run(truth, records, members, settings.resolution, coarsest))
            eps_pairs.append(weekly_epsilon(losses))
        print_row(name, scored, eps_pairs, None)
        worst[name] = max(basic for basic, _ in eps_pairs)
    b = BUDGET_PROFILE["vehicle_budget"]
    for name, loss in worst.items():
        verdict = "within" if loss <= b + 1e-9 else "PAST"
        print(f"- {name}: busiest vehicle {loss:.2f} at most over {runs} runs ({verdict} B {b:g})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", action="append", required=True, help="readings file")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for path in args.data:
        measure(path, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
