"""Release the ready windows under secret routes: the loop the offline engine runs in this
model (docs/math.md §14.7). Every window from the first to the last is released, an empty
one too, so whether a window has a summary says nothing about who drove in it; a window
whose computation raises becomes a failed summary (no cells) and the stream goes on. Each
window counts towards every vehicle's period loss, released or failed."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from stream_dp.dp.randomness import RandomSource
from stream_dp.release.records import WindowRelease, new_release_nonce
from stream_dp.secret_routes.params import SecretRoutesParams
from stream_dp.secret_routes.records import window_summary
from stream_dp.secret_routes.release import release_secret_window
from stream_dp.windows.columns import WindowColumns
from stream_dp.windows.coordinator import ReleaseCoordinator


class SecretRoutesReleaser:
    """Releases windows in order, each once, tracking the windows of the current period."""

    def __init__(self, params: SecretRoutesParams, source: RandomSource) -> None:
        self.params = params
        self.source = source
        self.last: int | None = None
        self.recent: deque[int] = deque()

    def release_ready(self, coordinator: ReleaseCoordinator) -> Iterator[WindowRelease]:
        """The coordinator's ready windows and any empty window between them, oldest first."""
        for start in coordinator.ready_windows():
            if start in coordinator.released:
                continue
            for empty in self._gap_before(start):
                yield self.release(empty, WindowColumns.from_partials([]))
            columns = coordinator.merged(start)
            coordinator.mark_released(start, from_partials=True)
            yield self.release(start, columns)

    def note_stored(self, start: int, windows_in_period: int) -> None:
        """A stored window's summary read back (a restart's rebuild): the period's windows are
        the ``windows_in_period`` consecutive ones ending at ``start`` (every window from the
        first on is released, §14.7), so the count never restarts lower than it was."""
        if self.last is not None and start < self.last:
            return
        step = self.params.window_seconds
        first = start - (windows_in_period - 1) * step
        self.recent = deque(range(first, start + step, step))
        self.last = start

    def _gap_before(self, start: int) -> range:
        if self.last is None:
            return range(0)
        return range(self.last + self.params.window_seconds, start, self.params.window_seconds)

    def release(self, start: int, columns: WindowColumns) -> WindowRelease:
        """One window's release (or its failed summary), counted in the period."""
        period = self.params.budget.windows * self.params.window_seconds
        self.recent.append(start)
        while self.recent[0] <= start - period:
            self.recent.popleft()
        self.last = start
        try:
            return release_secret_window(start, columns, self.params, self.source,
                                         len(self.recent))  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - any failure becomes a failed summary
            summary = window_summary(start, self.params, 0, len(self.recent),
                                     new_release_nonce(), exc)  # fmt: skip
            return WindowRelease(start, [], summary)
