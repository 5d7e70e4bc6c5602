"""Release-log snapshots: a rebuild from the last snapshot and the records after it gives
the same ledger, released windows and cumulative epsilon as a rebuild from the whole log,
and a window whose stored copy has aged out of the log is never released again."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from stream_dp.coordinator import ReleaseCoordinator
from stream_dp.dp.budget_ledger import BudgetLedger, WindowLoss
from stream_dp.window_state import PartialColumns
from stream_dp.worker import internal_records as rec
from stream_dp.worker.release_log import ReleaseLogIndex
from stream_dp.worker.release_snapshots import (
    RebuildPlan,
    ReleaseSnapshot,
    SnapshotTracker,
    is_release_snapshot,
    plan_rebuild,
)

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
        if plan.snapshot is not None:
            self.coordinator.released_through = plan.snapshot.released_through
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
    plan = plan_rebuild(0, len(log), latest_snapshot(log))
    assert plan.snapshot is not None
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
    plan = plan_rebuild(0, len(log), latest_snapshot(log))
    assert plan.snapshot is not None and plan.start > 0
    aged = [None] * plan.start + log[plan.start :]  # retention removed everything before
    earliest = plan.start
    rebuilt = Releaser(aged, plan_rebuild(earliest, len(aged), latest_snapshot(aged)))
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
    plan = plan_rebuild(0, 12, (10, snapshot))
    assert not plan.known_published(0, 0) and plan.known_published(W, 5)
    assert not plan.known_published(2 * W, 11)  # stored after the snapshot
    tracker.note_stored(0, 0, 1.0, published=True)  # re-published by a rebuild
    assert tracker.snapshot([], 12).read_from == 12


def test_plan_without_a_usable_snapshot_reads_the_whole_log():
    snapshot = ReleaseSnapshot(4, 0, 1.0, 3, 0)
    assert plan_rebuild(0, 10, None) == RebuildPlan(0)
    assert plan_rebuild(0, 10, (3, snapshot)) == RebuildPlan(0)  # names an offset past itself
    assert plan_rebuild(0, 10, (6, snapshot)) == RebuildPlan(4, snapshot, 6)
    assert plan_rebuild(5, 10, (6, snapshot)) == RebuildPlan(5, snapshot, 6)
    assert ReleaseSnapshot.from_record(rec.decode(snapshot.encode())) == snapshot


def test_snapshot_records_are_skipped_by_the_log_index():
    index = ReleaseLogIndex()
    values = [ReleaseSnapshot(0, None, 0.0, 0, None).encode(), *stored_copy(W)]
    winners = [w for o, v in enumerate(values) if (w := index.add(o, v)) is not None]
    assert [w.release.window_start for w in winners] == [W] and winners[0].offset == 1
    assert np.isfinite(float(winners[0].release.summary["privacy_loss"]))
