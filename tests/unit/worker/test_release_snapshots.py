"""Release-log snapshots: a rebuild from the last snapshot and the records after it gives
the same ledger, released windows and cumulative epsilon as a rebuild from the whole log,
and a window whose stored copy has aged out of the log is never released again."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from stream_dp.dp.budget_ledger import BudgetLedger, WindowLoss
from stream_dp.windows.coordinator import ReleaseCoordinator
from stream_dp.windows.state import PartialColumns
from stream_dp.wire import internal_records as rec
from stream_dp.worker.release_log import ReleaseLogIndex
from stream_dp.worker.release_snapshots import (
    RebuildPlan,
    ReleaseSnapshot,
    SnapshotTracker,
    is_release_snapshot,
    known_published,
)
from stream_dp.worker.resume_plan import plan_resume

W = 3600
PERIOD = 3 * W


def stored_copy(window: int, attempt: str = "a") -> list[bytes]:
    release = {
        "window_start": window,
        "cells": [{"cell": "c", "mean": 1.0, "release_id": f"{window}-c"}],
        "summary": {"K": 1, "release_id": f"{window}-w", "privacy_loss": 0.25 + window / W},
    }
    vehicles = [f"v{window // W % 5}", "w"]
    loss = WindowLoss.from_counts(window, 0.5, vehicles, [1, 2])
    return rec.encode_loss(loss, attempt) + rec.encode_release(release, attempt)


class Releaser:
    """What ``ReleaseService`` does with the release log, without Kafka."""

    def __init__(self, log: list[bytes | None], plan: RebuildPlan) -> None:
        self.log = log
        self.index = ReleaseLogIndex()
        self.index.next_offset = plan.start
        self.tracker = SnapshotTracker(plan)
        self.ledger = BudgetLedger(PERIOD, cap=1.0)
        self.coordinator = ReleaseCoordinator(1, W, 4)
        if plan.summary is not None:
            self.coordinator.released_through = plan.summary.released_through
        self.spent = self.tracker.spent_before
        self.read_to_end()

    def read_to_end(self) -> None:
        for offset in range(self.index.next_offset, len(self.log)):
            value = self.log[offset]
            if value is None:
                continue  # aged out
            winner = self.index.add(offset, value)
            if winner is None:
                continue
            start = winner.release.window_start
            self.coordinator.mark_released(start)
            loss = float(winner.release.summary["privacy_loss"])
            self.spent += loss
            self.tracker.note_stored(start, winner.offset, loss)
            assert winner.loss is not None
            self.ledger.record_released(winner.loss)

    def release(self, window: int) -> None:
        self.log.extend(stored_copy(window))
        self.read_to_end()
        windows = (loss.window_start for loss in self.ledger.entries())
        self.log.append(self.tracker.snapshot(windows, self.index.next_offset).encode())


def latest_snapshot(log: list[bytes | None]) -> tuple[int, ReleaseSnapshot] | None:
    for offset in range(len(log) - 1, -1, -1):
        value = log[offset]
        if value is not None and is_release_snapshot(value):
            return offset, ReleaseSnapshot.from_record(orjson.loads(value))
    return None


def released_log(n_windows: int) -> tuple[list[bytes | None], Releaser]:
    log: list[bytes | None] = []
    live = Releaser(log, RebuildPlan(0))
    for i in range(n_windows):
        live.release(i * W)
    return log, live


def one_partial() -> PartialColumns:
    return PartialColumns.from_readings(["c"], ["v0"], [1.0], [3.0], 4)


@pytest.mark.parametrize("n_windows", [1, 4, 30])
def test_a_rebuild_from_the_snapshot_matches_the_whole_log(n_windows):
    log, live = released_log(n_windows)
    whole = Releaser(log, RebuildPlan(0))
    plan = plan_resume(0, len(log), latest_snapshot(log))
    assert plan.summary is not None
    part = Releaser(log, plan)
    for rebuilt in (whole, part):
        assert rebuilt.ledger.entries() == live.ledger.entries()
        assert rebuilt.spent == pytest.approx(live.spent)
    if n_windows > 10:  # the ledger keeps two periods: older windows are not read again
        assert plan.start > len(log) // 2
        assert len(part.index.winners) <= 2 * PERIOD // W + 1
    later = (n_windows + 1) * W
    assert (
        part.ledger.spent(["v0", "w"], later).tolist()
        == live.ledger.spent(["v0", "w"], later).tolist()
    )


def test_a_window_whose_stored_copy_aged_out_is_never_released_again():
    log, _ = released_log(30)
    plan = plan_resume(0, len(log), latest_snapshot(log))
    assert plan.summary is not None and plan.start > 0
    aged = [None] * plan.start + log[plan.start :]  # retention removed everything before
    earliest = plan.start
    rebuilt = Releaser(aged, plan_resume(earliest, len(aged), latest_snapshot(aged)))
    # window 0's partial is still in the partials topic (or re-sent): it must not be ready
    rebuilt.coordinator.add_partial(0, 0, one_partial())
    rebuilt.coordinator.set_progress(0, float(31 * W))
    assert rebuilt.coordinator.ready_windows() == []
    assert 0 not in rebuilt.index.winners  # its copy was indeed not read
    assert rebuilt.spent == pytest.approx(sum(0.25 + i for i in range(30)))
    # Without the snapshot the same aged log would release window 0 a second time.
    blind = Releaser(aged, RebuildPlan(earliest))
    blind.coordinator.add_partial(0, 0, one_partial())
    blind.coordinator.set_progress(0, float(31 * W))
    assert blind.coordinator.ready_windows() == [0]


def test_a_window_stored_by_a_rival_and_not_seen_published_is_read_again():
    tracker = SnapshotTracker()
    tracker.note_stored(0, 0, 1.0, published=False)
    tracker.note_stored(W, 5, 1.0)
    snapshot = tracker.snapshot([], 10)
    assert snapshot.read_from == 0 and snapshot.unpublished == (0,)
    plan = plan_resume(0, 12, (10, snapshot))
    assert not known_published(plan, 0, 0) and known_published(plan, W, 5)
    assert not known_published(plan, 2 * W, 11)  # stored after the snapshot
    tracker.note_stored(0, 0, 1.0, published=True)  # re-published by a rebuild
    assert tracker.snapshot([], 12).read_from == 12


def test_plan_without_a_usable_snapshot_reads_the_whole_log():
    snapshot = ReleaseSnapshot(4, 0, 1.0, 3, 0)
    assert plan_resume(0, 10, None) == RebuildPlan(0)
    assert plan_resume(0, 10, (3, snapshot)) == RebuildPlan(0)  # names an offset past itself
    assert plan_resume(0, 10, (6, snapshot)) == RebuildPlan(4, snapshot, 6)
    assert plan_resume(5, 10, (6, snapshot)) == RebuildPlan(5, snapshot, 6)
    assert ReleaseSnapshot.from_record(rec.decode(snapshot.encode())) == snapshot


def test_snapshot_records_are_skipped_by_the_log_index():
    index = ReleaseLogIndex()
    values = [ReleaseSnapshot(0, None, 0.0, 0, None).encode(), *stored_copy(W)]
    winners = [w for o, v in enumerate(values) if (w := index.add(o, v)) is not None]
    assert [w.release.window_start for w in winners] == [W] and winners[0].offset == 1
    assert np.isfinite(float(winners[0].release.summary["privacy_loss"]))


def test_progress_kept_in_a_snapshot_lets_the_partials_be_read_from_its_offset():
    """A coordinator fed every partials-topic record and one seeded with the snapshot's
    progress and fed only the records after ``partials_from`` agree on what is ready."""
    partial = one_partial()
    feed: list[tuple[str, int, int, object]] = []
    for i in range(6):
        for p in range(3 if i < 3 else 2):  # partition 2 goes idle after window 2
            feed.append(("partial", i * W, p, partial))
            feed.append(("progress", p, (i + 1) * W + 60, {i * W: p + i, (i + 1) * W: 1}))
    feed.insert(6 * 3, ("progress", 2, float("inf"), {}))  # sent once, before the cut
    whole = ReleaseCoordinator(3, W, 4)
    tracker = SnapshotTracker()

    def apply(coordinator: ReleaseCoordinator, item: tuple[str, int, int, object]) -> None:
        kind, a, b, c = item
        if kind == "partial":
            coordinator.add_partial(a, b, c)  # type: ignore[arg-type]
        else:
            coordinator.set_progress(a, float(b), c)  # type: ignore[arg-type]

    cut = None
    for offset, item in enumerate(feed):
        apply(whole, item)
        for start in whole.ready_windows():
            whole.mark_released(start, from_partials=True)
            tracker.note_stored(start, offset, 1.0)
            if not whole.pending and cut is None and start >= 3 * W:
                tracker.note_partials(offset + 1, whole.progress(start))
                cut = offset + 1
                stored = tracker.snapshot([], cut).encode()
    assert cut is not None
    snapshot = ReleaseSnapshot.from_record(orjson.loads(stored))
    assert snapshot.partials_from == cut
    seeded = ReleaseCoordinator(3, W, 4, released_through=snapshot.released_through)
    for partition, (watermark, late) in snapshot.progress.items():
        seeded.set_progress(partition, watermark, late)
    replayed = ReleaseCoordinator(3, W, 4, released_through=snapshot.released_through)
    for item in feed[:cut]:
        apply(replayed, item)
    for item in feed[cut:]:
        apply(seeded, item)
        apply(replayed, item)
        assert seeded.ready_windows() == replayed.ready_windows()
        for start in seeded.ready_windows():
            assert seeded.late_count(start) == replayed.late_count(start)
            seeded.mark_released(start)
            replayed.mark_released(start)
    assert seeded.watermarks == replayed.watermarks
    assert seeded.released_through == 3 * W and len(seeded.released) == 2
    # without the snapshot's progress the idle partition would hold every window back
    blind = ReleaseCoordinator(3, W, 4, released_through=snapshot.released_through)
    for item in feed[cut:]:
        apply(blind, item)
    assert blind.ready_windows() == []


def test_snapshot_progress_round_trips_infinite_watermarks():
    snapshot = ReleaseSnapshot(
        1, 0, 2.0, 3, 0, (), 7, {0: (float("inf"), {}), 1: (float("-inf"), {3600: 2})}
    )
    assert ReleaseSnapshot.from_record(orjson.loads(snapshot.encode())) == snapshot
