"""Bounded per-window state: for each (cell, vehicle), count, sum, sum of squares and the
first ``C`` readings in event-time order (what the pseudo-user cap may need).

Accumulators follow the create / merge / compute shape, so a partition's partial state and
a batch's delta merge the same way (order-independent: ties in event time are broken by
value, so merging in any order keeps the same prefix).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

PairKey = tuple[str, str]  # (cell, vehicle)


class PairStats:
    """Sufficient statistics of one vehicle's readings in one cell and window."""

    __slots__ = ("count", "total", "total_sq", "prefix")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.total_sq = 0.0
        self.prefix: list[tuple[float, float]] = []  # (ts, speed), sorted, at most C

    def add(self, ts: float, speed: float, limit: int) -> None:
        self.count += 1
        self.total += speed
        self.total_sq += speed * speed
        prefix = self.prefix
        item = (ts, speed)
        if len(prefix) < limit:
            if not prefix or item >= prefix[-1]:
                prefix.append(item)
            else:
                bisect.insort(prefix, item)
        elif item < prefix[-1]:
            bisect.insort(prefix, item)
            prefix.pop()

    def merge(self, other: PairStats, limit: int) -> None:
        self.count += other.count
        self.total += other.total
        self.total_sq += other.total_sq
        if other.prefix:
            self.prefix = sorted(self.prefix + other.prefix)[:limit]

    def to_row(self) -> list[Any]:
        return [
            self.count,
            self.total,
            self.total_sq,
            [t for t, _ in self.prefix],
            [v for _, v in self.prefix],
        ]

    @classmethod
    def from_row(cls, row: list[Any]) -> PairStats:
        stats = cls()
        stats.count = int(row[0])
        stats.total = float(row[1])
        stats.total_sq = float(row[2])
        stats.prefix = list(zip(row[3], row[4], strict=True))
        return stats


WindowPairs = dict[PairKey, PairStats]


def merge_pairs(into: WindowPairs, other: WindowPairs, limit: int) -> None:
    """Merge ``other`` into ``into`` (a vehicle split across partials is summed); ``into``
    takes ownership of ``other``'s accumulators."""
    for key, stats in other.items():
        mine = into.get(key)
        if mine is None:
            into[key] = stats
        else:
            mine.merge(stats, limit)


def pairs_to_rows(pairs: WindowPairs) -> list[list[Any]]:
    return [[cell, vehicle, *stats.to_row()] for (cell, vehicle), stats in pairs.items()]


def pairs_from_rows(rows: Iterable[list[Any]]) -> WindowPairs:
    return {(str(r[0]), str(r[1])): PairStats.from_row(r[2:]) for r in rows}


def window_start_of(ts: float, window_seconds: int) -> int:
    """Start (epoch seconds) of the event-time window holding ``ts``."""
    return int(ts // window_seconds) * window_seconds


@dataclass
class BatchOutcome:
    """What one batch did: counts and the delta it added (for the state changelog)."""

    accepted: int = 0
    late: int = 0
    late_by_window: dict[int, int] = field(default_factory=dict)
    delta_rows: dict[int, list[list[Any]]] | None = None


@dataclass
class PartitionState:
    """Open windows of one input partition and its event-time watermark.

    A reading is late when its window was already closed: its end is at or below the
    watermark before the reading arrived (watermark = largest event time seen − grace), or
    it was closed early by the idle fallback. Late readings are dropped and counted.
    """

    window_seconds: int
    grace_seconds: float
    prefix_limit: int
    max_ts: float = float("-inf")
    open: dict[int, WindowPairs] = field(default_factory=dict)
    force_closed: set[int] = field(default_factory=set)
    late_by_window: dict[int, int] = field(default_factory=dict)

    @property
    def watermark(self) -> float:
        return self.max_ts - self.grace_seconds

    def add_batch(
        self,
        vehicles: list[str],
        ts: list[float],
        cells: list[str],
        speeds: list[float],
        record_delta: bool = False,
    ) -> BatchOutcome:
        """Accumulate readings in arrival order; returns counts (and, with ``record_delta``,
        the batch's delta as rows for the state changelog)."""
        outcome = BatchOutcome()
        width = self.window_seconds
        limit = self.prefix_limit
        max_ts = self.max_ts
        grace = self.grace_seconds
        forced = self.force_closed
        delta: dict[int, WindowPairs] = {}
        for vehicle, t, cell, speed in zip(vehicles, ts, cells, speeds, strict=True):
            start = int(t // width) * width  # window_start_of, inlined: hot loop
            if start + width <= max_ts - grace or start in forced:
                outcome.late += 1
                outcome.late_by_window[start] = outcome.late_by_window.get(start, 0) + 1
                continue
            if t > max_ts:
                max_ts = t
            window = delta.get(start)
            if window is None:
                window = delta[start] = {}
            key = (cell, vehicle)
            stats = window.get(key)
            if stats is None:
                stats = window[key] = PairStats()
            stats.add(t, speed, limit)
            outcome.accepted += 1
        if record_delta:
            outcome.delta_rows = {start: pairs_to_rows(p) for start, p in delta.items()}
        self.apply_delta(delta, max_ts, outcome.late_by_window)
        return outcome

    def apply_delta(
        self,
        delta: dict[int, WindowPairs],
        max_ts: float,
        late_by_window: dict[int, int] | None = None,
    ) -> None:
        """Merge a batch delta (also used when replaying the state changelog); the state
        takes ownership of the delta's accumulators."""
        for start, pairs in delta.items():
            window = self.open.get(start)
            if window is None:
                self.open[start] = pairs
            else:
                merge_pairs(window, pairs, self.prefix_limit)
        if max_ts > self.max_ts:
            self.max_ts = max_ts
        for start, n in (late_by_window or {}).items():
            self.late_by_window[start] = self.late_by_window.get(start, 0) + n

    def due_windows(self) -> list[int]:
        """Open windows whose end the watermark has passed, oldest first."""
        limit = self.watermark
        return sorted(s for s in self.open if s + self.window_seconds <= limit)

    def close(self, window_start: int, forced: bool = False) -> WindowPairs:
        """Remove and return a window's partial state; later readings for it are late."""
        pairs = self.open.pop(window_start, {})
        if forced or window_start + self.window_seconds > self.watermark:
            self.force_closed.add(window_start)
        self._prune_force_closed()
        return pairs

    def _prune_force_closed(self) -> None:
        limit = self.watermark
        self.force_closed = {s for s in self.force_closed if s + self.window_seconds > limit}

    def iter_open(self) -> Iterator[int]:
        return iter(sorted(self.open))
