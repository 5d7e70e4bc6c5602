"""Bounded per-window state, column-wise: for each (cell, vehicle) pair, count, sum, sum of
squares and the first ``C`` readings in event-time order (what the pseudo-user cap may need).

One :class:`WindowAccumulator` per (partition, window). Pairs get integer slots when first
seen; the statistics live in numpy arrays updated once per batch, and the readings that may
belong to a pair's first ``C`` go to a reading log that is compacted (first ``C`` per pair
by ``(ts, value)``, so the prefix does not depend on arrival order) whenever it doubles.
Memory is therefore bounded by the number of pairs times ``C``, not by a vehicle's reading
rate, and closing a window hands over arrays (:class:`PartialColumns`), not per-pair objects.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from stream_dp.config import SECRET_ROUTES
from stream_dp.windows.name_order import NameSort

if TYPE_CHECKING:
    from stream_dp.config import ReleaseSettings

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]

#: The reading log is never compacted below this many entries (compaction is a sort).
_MIN_COMPACT_AT = 1 << 16


@dataclass(frozen=True)
class PartialColumns:
    """One partition's state of one window (what a partial carries to the release step).

    Pair ``i`` is vehicle ``vehicle_names[pair_vehicle[i]]`` in cell ``cell_names[pair_cell[i]]``
    with ``count[i]`` readings summing to ``total[i]`` (squares: ``total_sq[i]``). The reading
    log (``reading_pair``, ``reading_ts``, ``reading_value``, in no particular order) holds each
    pair's first ``min(count, C)`` readings by ``(ts, value)``. Names are distinct, any order.
    """

    cell_names: list[str]
    #: A numpy unicode array (the form the merge sorts; see :mod:`stream_dp.windows.name_order`).
    vehicle_names: np.ndarray
    pair_cell: IntArray
    pair_vehicle: IntArray
    count: IntArray
    total: FloatArray
    total_sq: FloatArray
    reading_pair: IntArray
    reading_ts: FloatArray
    reading_value: FloatArray

    @classmethod
    def empty(cls) -> PartialColumns:
        ints, floats = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        names = np.zeros(0, dtype="<U1")
        return cls([], names, ints, ints, ints, floats, floats, ints, floats, floats)

    @classmethod
    def from_readings(
        cls,
        cells: list[str],
        vehicles: list[str],
        ts: list[float],
        values: list[float],
        prefix_limit: int,
    ) -> PartialColumns:
        """The state of one window holding exactly these readings (tests, benchmarks)."""
        acc = WindowAccumulator(prefix_limit)
        slot = [acc.slot_of(c, v) for c, v in zip(cells, vehicles, strict=True)]
        acc.add(np.asarray(slot, dtype=np.int64), np.asarray(ts, float), np.asarray(values, float))
        return acc.to_partial()

    def __len__(self) -> int:
        return int(self.count.shape[0])

    def start_vehicle_name_sort(self) -> NameSort:
        """The vehicle names' sort, started on the background thread at the first call (the
        coordinator calls it as a large partial arrives; the merge then finds it done)."""
        return self._vehicle_name_sort

    @cached_property
    def _vehicle_name_sort(self) -> NameSort:
        return NameSort.start(self.vehicle_names)

    def pair_names(self) -> list[tuple[str, str]]:
        cells, vehicles = self.cell_names, self.vehicle_names.tolist()
        return [
            (cells[c], vehicles[v])
            for c, v in zip(self.pair_cell.tolist(), self.pair_vehicle.tolist(), strict=True)
        ]

    def prefix_of(self, pair: int) -> list[tuple[float, float]]:
        """Pair ``pair``'s stored readings as sorted ``(ts, value)`` (tests, audits)."""
        at = np.flatnonzero(self.reading_pair == pair)
        ts, values = self.reading_ts[at].tolist(), self.reading_value[at].tolist()
        return sorted(zip(ts, values, strict=True))


@dataclass(frozen=True)
class WindowDelta:
    """What one batch added to one window: the new pairs (slots ``first_pair`` onwards, by
    name) and the accepted readings by slot, in arrival order. Replaying the deltas of a
    window in order rebuilds its accumulator exactly (same slots, same float sums)."""

    first_pair: int
    new_cells: list[str]
    new_vehicles: list[str]
    pair: IntArray
    ts: FloatArray
    value: FloatArray


class WindowAccumulator:
    """Sufficient statistics of one window of one partition (see the module docstring)."""

    def __init__(self, prefix_limit: int) -> None:
        if prefix_limit < 1:
            raise ValueError("prefix_limit must be >= 1")
        self.prefix_limit = prefix_limit
        self.slots: dict[tuple[str, str], int] = {}
        self._cell_code: dict[str, int] = {}
        self._vehicle_code: dict[str, int] = {}
        self.cell_names: list[str] = []
        self.vehicle_names: list[str] = []
        #: ``vehicle_names`` as numpy unicode arrays (the form the release sorts), built batch
        #: by batch during ingest rather than all at once when the window closes.
        self._vehicle_name_chunks: list[np.ndarray] = []
        self._vehicle_names_arrayed = 0
        self._pair_cell = array("q")
        self._pair_vehicle = array("q")
        self._count = np.zeros(1024, dtype=np.int64)
        self._total = np.zeros(1024, dtype=np.float64)
        self._total_sq = np.zeros(1024, dtype=np.float64)
        self._log_pair = np.zeros(0, dtype=np.int64)
        self._log_ts = np.zeros(0, dtype=np.float64)
        self._log_value = np.zeros(0, dtype=np.float64)
        self._pending: list[tuple[IntArray, FloatArray, FloatArray]] = []
        self._pending_len = 0
        self._compact_at = _MIN_COMPACT_AT

    def __len__(self) -> int:
        return len(self._pair_cell)

    def slot_of(self, cell: str, vehicle: str) -> int:
        """The pair's slot, created on first sight. A vehicle id must not end in NUL (numpy's
        unicode arrays would strip it; ingest refuses such ids)."""
        key = (cell, vehicle)
        slot = self.slots.get(key)
        if slot is None:
            vehicle_code = self._vehicle_code.get(vehicle)
            if vehicle_code is None:
                if vehicle.endswith("\0"):
                    raise ValueError("a vehicle id must not end in NUL")
                vehicle_code = self._code(self._vehicle_code, self.vehicle_names, vehicle)
            slot = self.slots[key] = len(self._pair_cell)
            self._pair_cell.append(self._code(self._cell_code, self.cell_names, cell))
            self._pair_vehicle.append(vehicle_code)
        return slot

    @staticmethod
    def _code(codes: dict[str, int], names: list[str], name: str) -> int:
        code = codes.get(name)
        if code is None:
            code = codes[name] = len(names)
            names.append(name)
        return code

    def vehicle_name_array(self) -> np.ndarray:
        """``vehicle_names`` as a numpy unicode array (read-only; shared, not copied)."""
        self._array_new_vehicles()
        chunks = self._vehicle_name_chunks
        if len(chunks) > 1:
            chunks[:] = [np.concatenate(chunks)]
            chunks[0].flags.writeable = False
        return chunks[0] if chunks else np.zeros(0, dtype="<U1")

    def _array_new_vehicles(self) -> None:
        """Append the names seen since the last call as one more chunk; merge the last two
        chunks while the newer is at least half the older (few chunks, linear total copy)."""
        names, done = self.vehicle_names, self._vehicle_names_arrayed
        if len(names) == done:
            return
        chunks = self._vehicle_name_chunks
        chunks.append(np.array(names[done:]))
        self._vehicle_names_arrayed = len(names)
        while len(chunks) > 1 and 2 * len(chunks[-1]) >= len(chunks[-2]):
            newer = chunks.pop()
            chunks[-1] = np.concatenate((chunks[-1], newer))
        chunks[-1].flags.writeable = False

    def add(self, pair: IntArray, ts: FloatArray, value: FloatArray) -> None:
        """Accumulate readings (slots from :meth:`slot_of`), in arrival order."""
        self._array_new_vehicles()
        n = len(self)
        if n > len(self._count):
            size = max(n, 2 * len(self._count))
            for name in ("_count", "_total", "_total_sq"):
                old = getattr(self, name)
                grown = np.zeros(size, dtype=old.dtype)
                grown[: len(old)] = old
                setattr(self, name, grown)
        np.add.at(self._count, pair, 1)
        np.add.at(self._total, pair, value)
        np.add.at(self._total_sq, pair, value * value)
        self._pending.append((pair, ts, value))
        self._pending_len += len(pair)
        if len(self._log_pair) + self._pending_len > self._compact_at:
            self._compact()

    def _flush_pending(self) -> None:
        if self._pending:
            pairs, ts, values = zip(*self._pending, strict=True)
            self._log_pair = np.concatenate((self._log_pair, *pairs))
            self._log_ts = np.concatenate((self._log_ts, *ts))
            self._log_value = np.concatenate((self._log_value, *values))
            self._pending, self._pending_len = [], 0

    def _compact(self) -> None:
        """Keep each pair's first ``C`` logged readings by ``(ts, value)``."""
        self._flush_pending()
        limit = self.prefix_limit
        count = self._count[: len(self)]
        if len(count) and int(count.max()) > limit:
            pair, ts, value = self._log_pair, self._log_ts, self._log_value
            over = count[pair] > limit
            at = np.flatnonzero(over)
            order = at[np.lexsort((value[at], ts[at], pair[at]))]
            first = order[rank_in_runs(pair[order]) < limit]
            keep = np.concatenate((np.flatnonzero(~over), first))
            keep.sort()
            self._log_pair, self._log_ts, self._log_value = pair[keep], ts[keep], value[keep]
        self._compact_at = max(2 * len(self._log_pair), _MIN_COMPACT_AT)

    def delta_since(
        self, first_pair: int, pair: IntArray, ts: FloatArray, value: FloatArray
    ) -> WindowDelta:
        """The delta of a batch that added these readings and the pairs from ``first_pair``
        on (named, so that a replay rebuilds the same slots)."""
        return WindowDelta(
            first_pair,
            [self.cell_names[c] for c in self._pair_cell[first_pair:]],
            [self.vehicle_names[v] for v in self._pair_vehicle[first_pair:]],
            pair,
            ts,
            value,
        )

    def to_partial(self) -> PartialColumns:
        """The window's state as columns (the accumulator stays usable)."""
        self._compact()
        n = len(self)
        return PartialColumns(
            cell_names=list(self.cell_names),
            vehicle_names=self.vehicle_name_array(),
            pair_cell=np.frombuffer(self._pair_cell, dtype=np.int64).copy(),
            pair_vehicle=np.frombuffer(self._pair_vehicle, dtype=np.int64).copy(),
            count=self._count[:n].copy(),
            total=self._total[:n].copy(),
            total_sq=self._total_sq[:n].copy(),
            reading_pair=self._log_pair.copy(),
            reading_ts=self._log_ts.copy(),
            reading_value=self._log_value.copy(),
        )

    def replay(self, delta: WindowDelta) -> None:
        """Apply a delta recorded by :meth:`PartitionState.add_batch` (changelog replay)."""
        if delta.first_pair != len(self):
            raise ValueError(
                f"state delta out of order: starts at pair {delta.first_pair}, "
                f"the state has {len(self)}"
            )
        for cell, vehicle in zip(delta.new_cells, delta.new_vehicles, strict=True):
            self.slot_of(cell, vehicle)
        if len(delta.pair):
            if int(delta.pair.max()) >= len(self) or int(delta.pair.min()) < 0:
                raise ValueError("state delta names a pair it does not define")
            self.add(delta.pair, delta.ts, delta.value)


def rank_in_runs(sorted_keys: np.ndarray) -> np.ndarray:
    """Position of each element within its run of equal consecutive keys."""
    n = len(sorted_keys)
    if not n:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    return np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))


def window_start_of(ts: float, window_seconds: int) -> int:
    """Start (epoch seconds) of the event-time window holding ``ts``."""
    return int(ts // window_seconds) * window_seconds


@dataclass
class BatchOutcome:
    """What one batch did: counts and the delta it added (for the state changelog)."""

    accepted: int = 0
    late: int = 0
    late_by_window: dict[int, int] = field(default_factory=dict)
    delta: dict[int, WindowDelta] | None = None


@dataclass
class PartitionState:
    """Open windows of one input partition and its event-time watermark.

    A reading is late when its window was already closed: its end is at or below the
    watermark before the reading arrived (watermark = largest event time seen − grace), or
    it was closed early by the idle fallback. Late readings are dropped and counted.

    With ``public_clock`` (secret routes, docs/math.md §14.7) the readings never move the
    watermark: it is a public clock (:meth:`advance_clock`, the service's wall clock) minus
    grace, so whether a reading is late depends on it and the clock alone, never on another
    vehicle's timestamps; a clock never advanced (an offline file) makes no reading late.
    """

    window_seconds: int
    grace_seconds: float
    prefix_limit: int
    max_ts: float = float("-inf")
    open: dict[int, WindowAccumulator] = field(default_factory=dict)
    force_closed: set[int] = field(default_factory=set)
    late_by_window: dict[int, int] = field(default_factory=dict)
    public_clock: bool = False

    @classmethod
    def for_settings(cls, release: ReleaseSettings) -> PartitionState:
        """An empty state with the release group's window length, grace and prefix limit C
        (the windows see no Kafka, operations or web setting); secret routes: a public
        clock."""
        return cls(
            window_seconds=release.window_seconds,
            grace_seconds=release.grace_seconds,
            prefix_limit=release.prefix_limit,
            public_clock=release.privacy_model == SECRET_ROUTES,
        )

    def advance_clock(self, now: float) -> None:
        """Public clock mode: the watermark becomes ``now`` minus grace (never backwards)."""
        self._advance(now, {})
        self._prune_force_closed()

    @property
    def watermark(self) -> float:
        return self.max_ts - self.grace_seconds

    def _window(self, start: int) -> WindowAccumulator:
        acc = self.open.get(start)
        if acc is None:
            acc = self.open[start] = WindowAccumulator(self.prefix_limit)
        return acc

    def add_batch(
        self,
        vehicles: list[str],
        ts: list[float],
        cells: list[str],
        speeds: list[float],
        record_delta: bool = False,
    ) -> BatchOutcome:
        """Accumulate readings in arrival order; returns counts (and, with ``record_delta``,
        the batch's delta per window for the state changelog)."""
        outcome = BatchOutcome()
        late_by_window = outcome.late_by_window
        width = self.window_seconds
        max_ts = self.max_ts
        grace = self.grace_seconds
        forced = self.force_closed
        clock = self.public_clock  # the readings' times never move a public clock
        # per window: accumulator, its slot map, and the batch's slots / times / values
        batch: dict[int, tuple[WindowAccumulator, list[int], list[float], list[float], int]] = {}
        late_end = max_ts - grace  # a window ending at or before this is closed
        lo = hi = 0.0  # event-time span of the window of the previous reading (none yet)
        for vehicle, t, cell, speed in zip(vehicles, ts, cells, speeds, strict=True):
            if not lo <= t < hi:  # another window than the previous reading's
                # Performance (benchmarks/ingest.py): one Python loop over the batch, locals only,
                # the window looked up again only when a reading falls outside the previous one's.
                start = int(t // width) * width  # window_start_of, inlined: hot loop
                if start + width <= late_end or start in forced:
                    late_by_window[start] = late_by_window.get(start, 0) + 1
                    lo = hi = 0.0
                    continue
                entry = batch.get(start)
                if entry is None:
                    acc = self._window(start)
                    entry = batch[start] = (acc, [], [], [], len(acc))
                acc, b_pair, b_ts, b_value, _ = entry
                slots_get = acc.slots.get
                lo, hi = start, start + width
            if t > max_ts and not clock:  # t < hi, grace >= 0: the window stays open
                max_ts = t
                late_end = t - grace
            slot = slots_get((cell, vehicle))
            if slot is None:
                slot = acc.slot_of(cell, vehicle)
            b_pair.append(slot)
            b_ts.append(t)
            b_value.append(speed)
        delta: dict[int, WindowDelta] = {}
        for start, (acc, b_pair, b_ts, b_value, first) in batch.items():
            pair = np.array(b_pair, dtype=np.int64)
            t_arr = np.array(b_ts, dtype=np.float64)
            v_arr = np.array(b_value, dtype=np.float64)
            acc.add(pair, t_arr, v_arr)
            outcome.accepted += len(b_pair)
            if record_delta:
                delta[start] = acc.delta_since(first, pair, t_arr, v_arr)
        outcome.late = sum(late_by_window.values())
        if record_delta:
            outcome.delta = delta
        self._advance(max_ts, late_by_window)
        return outcome

    def apply_delta(
        self,
        delta: dict[int, WindowDelta],
        max_ts: float,
        late_by_window: dict[int, int] | None = None,
    ) -> int:
        """Replay a batch delta from the state changelog; returns the number of windows
        newly found truncated.

        A window whose first delta on the log starts after pair 0 lost its beginning to the
        state topic's retention. Its remaining deltas are skipped and the window is treated
        as closed early (later readings for it are late): a partial state must never be
        released as if it were whole."""
        truncated = 0
        for start, window_delta in delta.items():
            if start not in self.open and (
                window_delta.first_pair != 0 or start in self.force_closed
            ):
                if start not in self.force_closed:
                    truncated += 1
                    self.force_closed.add(start)
                continue
            self._window(start).replay(window_delta)
        self._advance(max_ts, late_by_window or {})
        return truncated

    def _advance(self, max_ts: float, late_by_window: dict[int, int]) -> None:
        if max_ts > self.max_ts:
            self.max_ts = max_ts
        for start, n in late_by_window.items():
            self.late_by_window[start] = self.late_by_window.get(start, 0) + n

    def due_windows(self) -> list[int]:
        """Open windows whose end the watermark has passed, oldest first."""
        limit = self.watermark
        return sorted(s for s in self.open if s + self.window_seconds <= limit)

    def partial(self, window_start: int) -> PartialColumns:
        """A window's state as columns (empty if the partition saw none of it)."""
        acc = self.open.get(window_start)
        return PartialColumns.empty() if acc is None else acc.to_partial()

    def close(self, window_start: int, forced: bool = False) -> None:
        """Remove a window (take its :meth:`partial` first); later readings for it are
        late."""
        self.open.pop(window_start, None)
        if forced or window_start + self.window_seconds > self.watermark:
            self.force_closed.add(window_start)
        self._prune_force_closed()

    def _prune_force_closed(self) -> None:
        limit = self.watermark
        self.force_closed = {s for s in self.force_closed if s + self.window_seconds > limit}

    def iter_open(self) -> Iterator[int]:
        return iter(sorted(self.open))
