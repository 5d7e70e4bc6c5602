"""State checkpoints: a replay from the latest checkpoint gives the state a replay of the
whole state topic gives, reading only what the open windows need."""

from __future__ import annotations

import random

import numpy as np
import pytest

from stream_dp.kafka.partition_tail import backward_chunks
from stream_dp.windows.state import PartitionState
from stream_dp.wire import internal_records as rec
from stream_dp.worker.checkpoints import (
    Checkpoint,
    CheckpointTracker,
    ReplayPlan,
    StateReplay,
    is_checkpoint,
)
from stream_dp.worker.resume_plan import plan_resume, resume_offset

W = 3600


def new_state() -> PartitionState:
    return PartitionState(window_seconds=W, grace_seconds=300, prefix_limit=4)


class StateLog:
    """Writes a partition's state records as ingest does (deltas, closes, checkpoints)."""

    def __init__(self, checkpoint_every: int | None = None) -> None:
        self.records: list[bytes] = []
        self.state = new_state()
        self.tracker = CheckpointTracker()
        self.applied = -1
        self.checkpoint_every = checkpoint_every

    def write(self, value: bytes) -> int:
        self.records.append(value)
        return len(self.records) - 1

    def batch(self, input_offset: int, ts: list[float], vehicles: list[str]) -> None:
        cells = [f"c{int(t) % 3}" for t in ts]
        outcome = self.state.add_batch(vehicles, ts, cells, [t % 17.0 for t in ts], True)
        self.applied = input_offset
        parts = rec.encode_delta(
            input_offset, self.state.max_ts, outcome.delta or {}, outcome.late_by_window
        )
        self.tracker.note_delta([self.write(p) for p in parts], outcome.delta or {})
        due = self.state.due_windows()
        for start in due:
            self.state.close(start)
            self.tracker.note_close(start, self.write(rec.encode_close(start, False)))
        every = self.checkpoint_every
        if due or (every is not None and self.tracker.records_since >= every):
            self.checkpoint()

    def checkpoint(self) -> None:
        checkpoint = self.tracker.checkpoint(self.state, self.applied)
        assert checkpoint is not None
        self.write(checkpoint.encode())

    def latest(self) -> tuple[int, Checkpoint] | None:
        for offset in range(len(self.records) - 1, -1, -1):
            if is_checkpoint(self.records[offset]):
                data = rec.decode(self.records[offset])
                return offset, Checkpoint.from_record(data)
        return None


def replay(records: list[bytes], plan: ReplayPlan) -> tuple[StateReplay, int]:
    state_replay = StateReplay(new_state(), plan)
    for offset in range(plan.start, len(records)):
        state_replay.add(offset, records[offset])
    return state_replay, state_replay.finish()


def assert_same_state(a: PartitionState, b: PartitionState) -> None:
    assert a.max_ts == b.max_ts
    assert a.force_closed == b.force_closed
    assert sorted(a.open) == sorted(b.open)
    for start in a.open:
        pa, pb = a.partial(start), b.partial(start)
        assert pa.pair_names() == pb.pair_names()
        for name in ("count", "total", "total_sq"):
            np.testing.assert_array_equal(getattr(pa, name), getattr(pb, name))
        prefixes = [[p.prefix_of(i) for i in range(len(p))] for p in (pa, pb)]
        assert prefixes[0] == prefixes[1]
    recent = sorted(a.late_by_window)[-48:]
    assert {w: a.late_by_window[w] for w in recent} == {
        w: b.late_by_window.get(w, 0) for w in recent
    }


def random_log(seed: int, batches: int = 120, checkpoint_every: int | None = None) -> StateLog:
    """Readings moving forward in event time with jitter and some late ones, in batches
    that often span two windows."""
    rng = random.Random(seed)
    log = StateLog(checkpoint_every)
    clock = 10 * W + rng.uniform(0, W)
    for offset in range(batches):
        ts, vehicles = [], []
        for _ in range(rng.randint(1, 30)):
            clock += rng.uniform(0, 120)
            jitter = -rng.uniform(0, 900) if rng.random() < 0.2 else 0.0  # some late
            ts.append(clock + jitter)
            vehicles.append(f"v{rng.randint(0, 9)}")
        log.batch(offset, ts, vehicles)
    return log


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("checkpoint_every", [None, 7])
def test_replay_from_the_latest_checkpoint_equals_the_whole_replay(seed, checkpoint_every):
    log = random_log(seed, checkpoint_every=checkpoint_every)
    latest = log.latest()
    assert latest is not None
    plan = plan_resume(0, len(log.records), latest)
    assert plan.summary is not None and 0 < plan.start <= latest[0]
    whole, whole_applied = replay(log.records, ReplayPlan(0))
    part, part_applied = replay(log.records, plan)
    assert whole_applied == part_applied == log.applied
    assert whole.truncated == part.truncated == 0
    assert part.replayed < whole.replayed
    assert_same_state(whole.state, log.state)
    assert_same_state(part.state, log.state)
    # the recovered tracker writes the same next checkpoint as the live one
    assert part.tracker.checkpoint(part.state, part_applied) == log.tracker.checkpoint(
        log.state, log.applied
    )


def test_every_intermediate_checkpoint_recovers_the_state_at_its_offset():
    log = random_log(11, batches=80, checkpoint_every=5)
    checkpoints = [i for i, v in enumerate(log.records) if is_checkpoint(v)]
    assert len(checkpoints) > 5
    for offset in checkpoints:
        prefix = log.records[: offset + 1]
        latest = (offset, Checkpoint.from_record(rec.decode(prefix[offset])))
        whole, applied_whole = replay(prefix, ReplayPlan(0))
        part, applied_part = replay(prefix, plan_resume(0, len(prefix), latest))
        assert applied_whole == applied_part
        assert_same_state(whole.state, part.state)


def test_a_window_spanning_the_replay_start_is_skipped_not_called_truncated():
    """A batch with readings of a closed window and of a new one: the new window's first
    delta is where the replay starts; the closed window's part of it is skipped."""
    log = StateLog()
    log.batch(0, [10 * W + 100.0, 10 * W + 200.0], ["a", "b"])
    log.batch(1, [11 * W - 10.0, 11 * W + 50.0, 11 * W + 400.0], ["a", "b", "a"])
    latest = log.latest()
    assert latest is not None
    checkpoint = latest[1]
    assert checkpoint.closed == (10 * W,)
    plan = plan_resume(0, len(log.records), latest)
    part, _ = replay(log.records, plan)
    assert part.truncated == 0
    assert_same_state(part.state, log.state)


def test_lost_beginning_after_retention_still_marks_windows_truncated():
    log = random_log(3, batches=60)
    latest = log.latest()
    assert latest is not None and log.state.open
    earliest = latest[1].replay_from + 1  # retention removed the first needed record
    plan = plan_resume(earliest, len(log.records), latest)
    assert plan.start == earliest and plan.summary is latest[1]
    part, _ = replay(log.records, plan)
    assert part.truncated >= 1
    assert not set(part.state.open) & part.state.force_closed


def test_plan_without_a_usable_checkpoint_starts_at_the_earliest_record():
    checkpoint = Checkpoint(5, 10, 100.0, {}, (), ())
    assert plan_resume(3, 20, None) == ReplayPlan(3)
    assert plan_resume(3, 20, (4, checkpoint)) == ReplayPlan(3)  # names an offset past itself
    assert plan_resume(3, 20, (25, checkpoint)) == ReplayPlan(3)  # outside the partition
    assert plan_resume(3, 20, (8, checkpoint)) == ReplayPlan(5, checkpoint, 8)
    assert plan_resume(6, 20, (8, checkpoint)) == ReplayPlan(6, checkpoint, 8)


def test_no_checkpoint_while_an_open_window_has_no_known_first_delta():
    state = new_state()
    state.add_batch(["a"], [10 * W + 1.0], ["c"], [1.0])
    assert CheckpointTracker().checkpoint(state, 0) is None


def test_checkpoint_round_trip_and_recognition():
    checkpoint = Checkpoint(5, 10, float("-inf"), {7200: 3}, (3600,), (0,))
    value = checkpoint.encode()
    assert is_checkpoint(value)
    assert Checkpoint.from_record(rec.decode(value)) == checkpoint
    assert not is_checkpoint(rec.encode_close(0, False))
    assert not any(map(is_checkpoint, rec.encode_delta(1, 2.0, {}, {})))


def test_backward_chunks_cover_the_partition_newest_first():
    chunks = list(backward_chunks(5, 1000, first=10, largest=100))
    assert chunks[0] == (990, 1000) and chunks[1] == (970, 990)
    assert chunks[-1][0] == 5
    assert all(hi - lo <= 100 for lo, hi in chunks)
    covered = sorted(o for lo, hi in chunks for o in range(lo, hi))
    assert covered == list(range(5, 1000))
    assert list(backward_chunks(7, 7)) == []


def test_a_summary_is_used_only_inside_the_records_held_and_never_ahead_of_itself() -> None:
    """The rule both the state replay and the release-log rebuild start from."""
    assert resume_offset(0, 10, 7, 4) == 4
    assert resume_offset(5, 10, 7, 4) == 5  # what precedes the earliest record is summarised
    assert resume_offset(0, 10, 7, 7) == 7
    assert resume_offset(0, 10, 7, 8) is None  # names an offset past itself
    assert resume_offset(0, 10, 10, 4) is None  # at or past the end: not a record held
    assert resume_offset(8, 10, 7, 4) is None  # below the earliest record held
