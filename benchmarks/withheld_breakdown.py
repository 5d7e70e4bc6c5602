"""Where the readings no record holds go, by cause (issue 25; docs/math.md §13.3).

Releases the AIS week (or ``--data FILE``) once without noise under the B 14 row (with
``--set KEY=VALUE`` changes) and follows every reading through the span machinery of
``stream_dp.release.vehicle_budget.stages``: it wraps that module's ``fresh_carry``,
``choose_pooling`` and ``deferred_pairs`` (benchmark only; nothing released changes) and labels each
reading by the last thing that happened to it. A reading no record holds
(``tests.support.membership``) ends in one of:

- ``aged out: cell not chosen``: carried until its pair's first reading was ``max_span_hours``
  old, and at that window its finest cell was in no unit the regrouping kept (missed T even
  at R0 or refused);
- ``aged out: unit not released``: same, but its unit was chosen and not released (dropped
  by the budget's plan, or missing T after the bounds);
- ``withheld: lost to the pool``: a carried pair under a window unit lost to the pool;
- ``withheld: gap``: a carry cut before pooling (a window with no release in between);
- ``end of input``: still carried or set aside when the input ended.

Each cause's readings are also split by whether the pair was ever set aside (§13.3 case 1),
and counted among the readings lying in a released record's cell and span (the older truth).
Below the table: the readings of the labelling window itself (the newest part of a pair lost
whole), each "lost to the pool" event (hour, carried readings withheld, the carry's and the
window's readings) and the largest groups of "cell not chosen" readings per (hour, R0 cell).

Run: ``python benchmarks/withheld_breakdown.py [--set max_span_hours=9] [--data FILE]``.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import h3
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support/: not installed

import usefulness as u  # noqa: E402
from expected_usefulness import B14  # noqa: E402

from stream_dp.release.vehicle_budget import stages as budget_stages  # noqa: E402
from stream_dp.release.vehicle_budget.spans import first_window  # noqa: E402
from tests.support.noise_free import NoNoise  # noqa: E402

HOUR = 3600


class Tracker:
    """Per reading, the last label given to it (``None``: never touched)."""

    def __init__(self, truth: u.Truth, finest: int) -> None:
        self.label: list[str | None] = [None] * len(truth.readings)
        self.aside = np.zeros(len(truth.readings), dtype=bool)
        self.start = int(truth.window.min()) if len(truth.window) else 0
        self.events: list[tuple[int, int, int, int]] = []
        self.unchosen: list[tuple[int, str, int]] = []
        self.when = np.full(len(truth.readings), -1, dtype=np.int64)
        self.window = truth.window
        self.by_pair: dict[tuple[str, str], np.ndarray] = {}
        index: dict[tuple[str, str], list[int]] = {}
        for i, key in enumerate(zip(truth.cells(finest, finest), truth.vehicle, strict=True)):
            index.setdefault(key, []).append(i)
        self.by_pair = {k: np.array(v, dtype=np.int64) for k, v in index.items()}

    def hour(self, window_start: int | None) -> int:
        """Hours from the first window to ``window_start`` (-1: unknown)."""
        return -1 if window_start is None else (window_start - self.start) // HOUR

    def readings(self, columns: Any, pairs: np.ndarray, last_window: int) -> list[np.ndarray]:
        """Per pair index of ``columns`` in ``pairs``, its readings: its (cell, vehicle)'s
        from its first window to ``last_window``."""
        first = first_window(columns, HOUR)
        out = []
        for p in pairs.tolist():
            key = (columns.cell_names[columns.cell_code[p]],
                   columns.vehicle_names[columns.vehicle_code[p]])  # fmt: skip
            idx = self.by_pair.get(key, np.zeros(0, dtype=np.int64))
            w = self.window[idx]
            out.append(idx[(w >= first[p]) & (w <= last_window)])
        return out

    def mark(self, columns: Any, pairs: np.ndarray, last_window: int, label: str) -> None:
        for idx in self.readings(columns, pairs, last_window):
            self.when[idx] = last_window
            for i in idx.tolist():
                self.label[i] = label


def install(tracker: Tracker) -> None:
    """Wrap the window module's span helpers to label readings."""
    original_fresh = budget_stages.fresh_carry
    original_choose = budget_stages.choose_pooling
    original_deferred = budget_stages.deferred_pairs

    def fresh_carry(carry: Any, window_start: int, params: Any) -> Any:
        kept, stale = original_fresh(carry, window_start, params)
        if stale and carry is not None:
            young = first_window(carry, HOUR) >= (window_start - (params.max_span_hours - 1) * HOUR)
            tracker.mark(carry, np.flatnonzero(~young), window_start - HOUR, "withheld: gap")
        return kept, stale

    def choose_pooling(columns: Any, carry: Any, params: Any, eps: float) -> Any:
        choice = original_choose(columns, carry, params, eps)
        t = _window_of(columns)
        if choice.withheld and carry is not None:
            tracker.events.append((tracker.hour(t), choice.withheld, int(carry.count.sum()),
                                   int(columns.count.sum())))  # fmt: skip
            kept = set(_keys(choice.carry)) if choice.carry is not None else set()
            gone = [p for p, k in enumerate(_keys(carry)) if k not in kept]
            tracker.mark(carry, np.array(gone, dtype=np.int64), t - HOUR,
                         "withheld: lost to the pool")  # fmt: skip
        if choice.aside is not None and len(choice.aside) and t is not None:
            for idx in tracker.readings(choice.aside, np.arange(len(choice.aside)), t):
                tracker.aside[idx] = True
                for i in idx.tolist():
                    tracker.label[i] = "end of input"  # unless a later window takes it
        return choice

    def deferred_pairs(
        pooled: Any, adaptive: Any, released: Any, t: int, params: Any, cache: Any
    ) -> Any:
        out = original_deferred(pooled, adaptive, released, t, params, cache)
        if adaptive is None or not len(pooled):
            return out
        unit = adaptive.unit_of_cell[pooled.cell_code]
        released_units = np.zeros(len(adaptive.names) + 1, dtype=bool)
        index = {name: k for k, name in enumerate(adaptive.names)}
        for name in released:
            if name in index:
                released_units[index[name]] = True
        carried = set(out.tolist())
        keys = _keys(pooled)
        for p in np.flatnonzero(~released_units[unit]).tolist():
            if p in carried:
                label = "end of input"  # carried on; a later window relabels it
            elif unit[p] < 0:
                label = "aged out: cell not chosen"
                r0 = h3.cell_to_parent(keys[p][0], params.coarsest)
                tracker.unchosen.append((tracker.hour(t), r0, int(pooled.count[p])))
            else:
                label = "aged out: unit not released"
            tracker.mark(pooled, np.array([p]), t, label)
        return out

    budget_stages.fresh_carry = fresh_carry
    budget_stages.choose_pooling = choose_pooling
    budget_stages.deferred_pairs = deferred_pairs


def _keys(columns: Any) -> list[tuple[str, str]]:
    return [
        (columns.cell_names[c], columns.vehicle_names[v])
        for c, v in zip(columns.cell_code.tolist(), columns.vehicle_code.tolist(), strict=True)
    ]


def _window_of(columns: Any) -> int | None:
    if columns is None or not len(columns.reading_ts):
        return None
    return int(np.floor(float(np.max(columns.reading_ts)) / HOUR) * HOUR)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--data", default=None, help="another readings file (other_data.py's)")
    args = parser.parse_args()
    row = u.with_sets(u.ROWS[B14], args.set)
    readings = u.readings_of(args.data)
    truth = u.Truth(readings)
    settings = u.settings_of(row)
    finest = settings.resolution
    tracker = Tracker(truth, finest)
    install(tracker)
    records, _losses, members = u.release_week(settings, readings, noise=NoNoise())
    held = truth.held(members, finest)
    in_span = truth.cell_and_span(records, finest) >= 0
    n = len(truth.readings)
    lost = held < 0
    labels = [
        (tracker.label[i] or "never pooled") + (" (set aside before)" if tracker.aside[i] else "")
        for i in range(n)
    ]
    total = Counter(labels[i] for i in np.flatnonzero(lost).tolist())
    inside = Counter(labels[i] for i in np.flatnonzero(lost & in_span).tolist())
    print(f"readings {n:,}; held by a record {int((~lost).sum()):,} ({(~lost).mean():.1%}); "
          f"held by none {int(lost.sum()):,}, of them in a released cell-and-span "
          f"{int((lost & in_span).sum()):,}; records {len(records)}")  # fmt: skip
    print("| cause | readings held by none | share | in a released cell-and-span | share |")
    print("|---|---|---|---|---|")
    n_lost, n_in = max(int(lost.sum()), 1), max(int((lost & in_span).sum()), 1)
    for label, count in total.most_common():
        print(f"| {label} | {count:,} | {count / n_lost:.1%} | {inside[label]:,} "
              f"| {inside[label] / n_in:.1%} |")  # fmt: skip
    recent = lost & (tracker.when == truth.window)
    print(
        "readings held by none in the window that labelled them (a pair's newest part):",
        dict(Counter(labels[i] for i in np.flatnonzero(recent).tolist()).most_common()),
    )
    print("lost to the pool (hour, carried readings withheld, carry, window):", tracker.events)
    groups: dict[tuple[int, str], list[int]] = {}
    for hour, cell, count in tracker.unchosen:
        groups.setdefault((hour, cell), []).append(count)
    sizes = sorted(((sum(c), len(c), *key) for key, c in groups.items()), reverse=True)
    print(
        f"aged out, cell not chosen: {len(sizes)} (hour, R0 cell) groups; largest (readings, "
        f"pairs, hour, cell): {sizes[:6]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
