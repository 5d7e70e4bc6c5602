"""Release the ready windows under secret routes: the loop the offline engine runs in this
model (docs/math.md §14.5). Every window of the public span is released, from its public
``first`` window on (``stream-dp release``'s ``--from``, or the window the service started
in), an empty one too, so whether a window has a summary says nothing about who drove in
it; readings of windows before ``first`` or from ``end`` on are dropped. A window whose
computation raises becomes a failed summary (no cells) and the stream goes on. Each window
counts towards every vehicle's period loss, released or failed."""

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

    def __init__(self, params: SecretRoutesParams, source: RandomSource, first: int,
                 end: int | None = None) -> None:  # fmt: skip
        """``first``/``end``: the public span's window starts, ``[first, end)`` (``end``
        None: no end, the service). ``first`` is required: a span started by the first ready
        window would say when the first vehicle appeared."""
        self.params = params
        self.source = source
        self.first = first
        self.end = end
        self.last: int | None = None
        self.recent: deque[int] = deque()

    def release_ready(self, coordinator: ReleaseCoordinator) -> Iterator[WindowRelease]:
        """The coordinator's ready windows and any empty window between them, oldest first;
        a window outside the span is marked released and dropped, nothing published."""
        for start in coordinator.ready_windows():
            if start in coordinator.released:
                continue
            if not self._in_span(start):
                coordinator.mark_released(start, from_partials=True)
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

    def release_to_end(self) -> Iterator[WindowRelease]:
        """The span's remaining windows, all empty (the input has ended)."""
        if self.end is not None:
            for empty in self._gap_before(self.end):
                yield self.release(empty, WindowColumns.from_partials([]))

    def _in_span(self, start: int) -> bool:
        if self.last is None and start < self.first:
            return False
        return self.end is None or start < self.end

    def _gap_before(self, start: int) -> range:
        step = self.params.window_seconds
        if self.last is not None:
            return range(self.last + step, start, step)
        return range(self.first, start, step)

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
