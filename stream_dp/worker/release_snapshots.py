"""Release-log snapshots: a new releaser reads the last snapshot and the records after it.

After each window it publishes, the releaser appends a small ``snapshot`` record to the
release log. It names ``read_from``, the release-log offset of the oldest stored window the
budget ledger still holds (what :meth:`BudgetLedger.record_released` has not pruned: the
ledger must be rebuilt exactly), and summarises every window stored before that offset:

- ``released_through``: the latest window start among them — a rebuild treats every window
  starting at or before it as released, so a window whose stored copy is no longer read
  (or has aged out of the log) can never be released again;
- ``spent_before``: their summed privacy loss (the cumulative-ε gauge);
- ``partials_from`` and ``progress``: the partials-topic offset up to which every partial
  read belonged to a released window, and each partition's watermark and late counts at
  that offset, so a rebuild reads the partials topic from there instead of its start;
- ``releases_from``: the releases-topic offset after the last record published before the
  snapshot; every window stored before the snapshot is published (but those in
  ``unpublished``: stored by a rival releaser that this one has not seen published), so a
  rebuild checks only the others against the releases topic, read from there.

A rebuild starts at the latest snapshot's ``read_from``
(:func:`~stream_dp.worker.resume_plan.plan_resume`); without one, at the log's start (older
logs). Pure: fed window starts, offsets and losses.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from stream_dp.worker.resume_plan import ResumePlan


@dataclass(frozen=True)
class ReleaseSnapshot:
    read_from: int
    released_through: int | None
    spent_before: float
    releases_from: int
    last_released: int | None
    unpublished: tuple[int, ...] = ()
    partials_from: int = 0
    progress: dict[int, tuple[float, dict[int, int]]] = field(default_factory=dict)

    def encode(self) -> bytes:
        progress = {
            str(p): [_wm(wm), {str(w): c for w, c in late.items()}]
            for p, (wm, late) in self.progress.items()
        }
        return orjson.dumps({"kind": "snapshot", **self.__dict__, "progress": progress})

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> ReleaseSnapshot:
        through, last = data["released_through"], data["last_released"]
        return cls(
            read_from=int(data["read_from"]),
            released_through=None if through is None else int(through),
            spent_before=float(data["spent_before"]),
            releases_from=int(data["releases_from"]),
            last_released=None if last is None else int(last),
            unpublished=tuple(int(w) for w in data.get("unpublished", ())),
            partials_from=int(data.get("partials_from", 0)),
            progress={
                int(p): (_wm_back(wm), {int(w): int(c) for w, c in late.items()})
                for p, (wm, late) in data.get("progress", {}).items()
            },
        )


def _wm(value: float) -> float | str:
    return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def _wm_back(value: float | str) -> float:
    return float(value)  # float("inf") / float("-inf") read the strings back


def is_release_snapshot(value: bytes) -> bool:
    return value.startswith(b'{"kind":"snapshot"')


#: Where a rebuild reads the release log from, and the snapshot it is seeded with.
RebuildPlan = ResumePlan[ReleaseSnapshot]


def known_published(plan: RebuildPlan, window_start: int, offset: int) -> bool:
    """Whether the window stored at ``offset`` was published before the plan's snapshot."""
    unpublished = plan.summary.unpublished if plan.summary is not None else ()
    return offset < plan.summary_offset and window_start not in unpublished


class SnapshotTracker:
    """The stored windows read since ``read_from`` (start → log offset, privacy loss) and the
    summary of those before it; makes the next snapshot."""

    def __init__(self, plan: RebuildPlan | None = None) -> None:
        snapshot = plan.summary if plan is not None else None
        self.read_from = plan.start if plan is not None else 0
        self.released_through = snapshot.released_through if snapshot else None
        self.spent_before = snapshot.spent_before if snapshot else 0.0
        self.releases_from = snapshot.releases_from if snapshot else 0
        self.last_released = snapshot.last_released if snapshot else None
        self.partials_from = snapshot.partials_from if snapshot else 0
        self.progress = dict(snapshot.progress) if snapshot else {}
        self._stored: dict[int, tuple[int, float]] = {}
        self._unpublished: set[int] = set()

    def note_stored(
        self, window_start: int, offset: int, privacy_loss: float, published: bool = True
    ) -> None:
        """A window's winning copy, stored from ``offset`` on, was read from the log
        (``published``: known to be published, e.g. after a rebuild's check)."""
        if offset < self.read_from:
            return  # already in the summary
        self._stored[window_start] = (offset, privacy_loss)
        if published:
            self._unpublished.discard(window_start)
        else:
            self._unpublished.add(window_start)
        if self.last_released is None or window_start > self.last_released:
            self.last_released = window_start

    def note_partials(
        self, position: int, progress: dict[int, tuple[float, dict[int, int]]]
    ) -> None:
        """Every partial below ``position`` in the partials topic belongs to a released
        window; ``progress``: the partitions' progress as read up to there."""
        self.partials_from, self.progress = position, progress

    def note_published(self, next_releases_offset: int) -> None:
        self.releases_from = max(self.releases_from, next_releases_offset)

    def snapshot(self, needed_windows: Iterable[int], next_offset: int) -> ReleaseSnapshot:
        """The snapshot keeping the stored copies of ``needed_windows`` (the ledger's) to be
        read again; ``next_offset``: the log's end as read."""
        keep = {*needed_windows, *self._unpublished}
        needed = [self._stored[w][0] for w in keep if w in self._stored]
        read_from = min(needed, default=next_offset)
        for start, (offset, loss) in list(self._stored.items()):
            if offset < read_from:
                del self._stored[start]
                self.spent_before += loss
                if self.released_through is None or start > self.released_through:
                    self.released_through = start
        self.read_from = max(self.read_from, read_from)
        return ReleaseSnapshot(
            self.read_from, self.released_through, self.spent_before, self.releases_from,
            self.last_released, tuple(sorted(self._unpublished)), self.partials_from,
            self.progress,
        )  # fmt: skip
