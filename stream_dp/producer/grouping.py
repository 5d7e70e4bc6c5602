"""Group consecutive readings of one vehicle into messages, bounded in size and delay."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

Reading = Mapping[str, Any]
#: A message to send: the key (vehicle id, ``None`` when missing) and its readings.
Group = tuple[str | None, list[Reading]]
#: Event-time seconds a reading may wait for its group: a fifth of the default 600 s grace.
DEFAULT_MAX_DELAY = 120.0


class ReadingGrouper:
    """Collect readings per vehicle and release them as groups of at most ``batch_size``.

    A vehicle's pending group is released when it is full, when its oldest reading is more
    than ``max_delay`` seconds of event time behind the newest reading seen, or (oldest
    group first) when more than ``max_pending`` readings are waiting. Groups come out in
    the order their first reading arrived, so each vehicle's readings keep their order and
    no reading is held back by more than ``max_delay`` seconds of event time: keep it
    below the service's lateness grace. Readings without ``vehicle_id`` go out alone.
    """

    def __init__(
        self, batch_size: int, *, max_delay: float = DEFAULT_MAX_DELAY, max_pending: int = 100_000
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if max_delay < 0:
            raise ValueError("max_delay must be >= 0")
        self.batch_size = batch_size
        self.max_delay = max_delay
        self.max_pending = max(max_pending, batch_size)
        self._groups: dict[str, list[Reading]] = {}  # insertion order = age order
        self._first_ts: dict[str, float] = {}
        self._pending = 0
        self._now = float("-inf")

    @property
    def pending(self) -> int:
        """Readings waiting in unreleased groups."""
        return self._pending

    def add(self, reading: Reading) -> Iterator[Group]:
        """Add one reading; yield the groups that are due."""
        vehicle = reading.get("vehicle_id")
        ts = _event_time(reading)
        if ts is not None and ts > self._now:
            self._now = ts
        if vehicle is None or self.batch_size == 1:
            yield (None if vehicle is None else str(vehicle)), [reading]
            return
        key = str(vehicle)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = []
            self._first_ts[key] = self._now if ts is None else ts
        group.append(reading)
        self._pending += 1
        if len(group) >= self.batch_size:
            yield self._release(key)
        yield from self._release_overdue()

    def flush(self) -> Iterator[Group]:
        """Yield every pending group, oldest first."""
        while self._groups:
            yield self._release(next(iter(self._groups)))

    def _release_overdue(self) -> Iterator[Group]:
        while self._groups:
            oldest = next(iter(self._groups))
            too_old = self._now - self._first_ts[oldest] > self.max_delay
            if not (too_old or self._pending > self.max_pending):
                return
            yield self._release(oldest)

    def _release(self, key: str) -> Group:
        group = self._groups.pop(key)
        del self._first_ts[key]
        self._pending -= len(group)
        return key, group


def _event_time(reading: Reading) -> float | None:
    try:
        return float(reading["ts"])
    except (KeyError, TypeError, ValueError):
        return None
