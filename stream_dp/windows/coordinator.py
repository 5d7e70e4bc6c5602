"""Which windows are complete: merges the partial states of all input partitions.

Each partition closes its own windows by its event-time watermark (or the idle fallback)
and sends, in order, its partial state for each closed window and then a progress
record with its watermark (+inf when idle with nothing open). A window is complete when
every partition has either sent its partial for it or reported a watermark at or past
the window's end. Pure: the Kafka adapter and the offline engine both drive it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stream_dp.windows.closing import ClosedWindows
from stream_dp.windows.columns import WindowColumns
from stream_dp.windows.name_order import EARLY_SORT_MIN
from stream_dp.windows.state import PartialColumns


@dataclass
class ReleaseCoordinator:
    partitions: int
    window_seconds: int
    prefix_limit: int
    released: set[int] = field(default_factory=set)
    #: Every window starting at or before this is released (a release-log snapshot's).
    released_through: int | None = None
    watermarks: dict[int, float] = field(default_factory=dict)
    _partials: dict[int, dict[int, PartialColumns]] = field(default_factory=dict)
    _late: dict[int, dict[int, int]] = field(default_factory=dict)
    _merged_from: dict[int, set[int]] = field(default_factory=dict)

    def add_partial(self, window_start: int, partition: int, partial: PartialColumns) -> bool:
        """Record a partition's partial; a duplicate (replay) or a released window is
        ignored."""
        if window_start in self.released or (
            self.released_through is not None and window_start <= self.released_through
        ):
            return False
        per_partition = self._partials.setdefault(window_start, {})
        if partition in per_partition:
            return False
        per_partition[partition] = partial
        if len(partial.vehicle_names) >= EARLY_SORT_MIN:
            # Performance (benchmarks/release.py): the sort runs while the next partial is decoded.
            partial.start_vehicle_name_sort()
        return True

    def accept(self, closed: ClosedWindows) -> None:
        """A partition's closed windows (:func:`~stream_dp.windows.closing.close_windows`):
        its partials, then its progress, as the worker's partials topic carries them."""
        for start, partial in closed.partials:
            self.add_partial(start, closed.partition, partial)
        self.set_progress(closed.partition, closed.watermark, closed.late_by_window)

    def set_progress(
        self, partition: int, watermark: float, late_by_window: dict[int, int] | None = None
    ) -> None:
        self.watermarks[partition] = watermark
        for start, count in (late_by_window or {}).items():
            self._late.setdefault(start, {})[partition] = count

    def progress(self, after: int | None = None) -> dict[int, tuple[float, dict[int, int]]]:
        """Per partition: its watermark and late counts of the windows after ``after``, as
        its last progress record gave them (what a release-log snapshot keeps)."""
        out: dict[int, tuple[float, dict[int, int]]] = {
            p: (wm, {}) for p, wm in self.watermarks.items()
        }
        for start, counts in self._late.items():
            if after is None or start > after:
                for partition, count in counts.items():
                    out.setdefault(partition, (float("-inf"), {}))[1][start] = count
        return out

    def ready_windows(self) -> list[int]:
        """Complete, unreleased windows, oldest first, up to the first incomplete one.

        Releases go out in event-time order: a later window can complete first (a
        partition's partial for it arrives before the progress record that carries the
        same partition past an earlier window) and then waits the moment it takes."""
        ready = []
        for start in sorted(self._partials):
            end = start + self.window_seconds
            per_partition = self._partials[start]
            if not all(
                p in per_partition or self.watermarks.get(p, float("-inf")) >= end
                for p in range(self.partitions)
            ):
                break
            ready.append(start)
        return ready

    def partials(self, window_start: int) -> list[PartialColumns]:
        """The window's partials held here, by partition."""
        per_partition = self._partials.get(window_start, {})
        return [per_partition[p] for p in sorted(per_partition)]

    def merged(self, window_start: int) -> WindowColumns:
        """The window's partials merged, column-wise (see ``WindowColumns.from_partials``)."""
        return WindowColumns.from_partials(self.partials(window_start), self.prefix_limit)

    def late_count(self, window_start: int) -> int:
        return sum(self._late.get(window_start, {}).values())

    def mark_released(self, window_start: int, from_partials: bool = False) -> None:
        """No further release of the window; ``from_partials`` when it was released from
        the partials held here (then later partials of other partitions are recognised by
        :meth:`take_after_release`)."""
        self.released.add(window_start)
        partitions = set(self._partials.pop(window_start, {}))
        if from_partials:
            self._merged_from[window_start] = partitions

    def take_after_release(self, window_start: int, partition: int) -> bool:
        """True (once) for a partial of a window released without it (its partition had
        reported itself idle and then read older data): its readings are dropped. Known only
        for windows released from this coordinator's partials."""
        merged = self._merged_from.get(window_start)
        if merged is None or partition in merged:
            return False
        merged.add(partition)
        return True

    @property
    def pending(self) -> list[int]:
        return sorted(self._partials)
