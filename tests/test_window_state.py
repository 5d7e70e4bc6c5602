"""Bounded window state: sufficient statistics, event-time prefixes, lateness, merging."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dp.window_state import (
    PairStats,
    PartitionState,
    merge_pairs,
    pairs_from_rows,
    pairs_to_rows,
    window_start_of,
)

readings = st.lists(
    st.tuples(st.integers(0, 50).map(float), st.floats(0, 65, allow_nan=False)),
    min_size=1,
    max_size=40,
)


@given(readings, st.integers(1, 6))
@settings(max_examples=200, deadline=None)
def test_pair_stats_keep_first_readings_in_event_time_order(items, limit):
    stats = PairStats()
    for ts, value in items:
        stats.add(ts, value, limit)
    ordered = sorted(items)
    assert stats.count == len(items)
    assert stats.total == pytest.approx(sum(v for _, v in items))
    assert stats.total_sq == pytest.approx(sum(v * v for _, v in items))
    assert stats.prefix == ordered[:limit]


@given(readings, st.integers(1, 6), st.randoms(use_true_random=False))
@settings(max_examples=200, deadline=None)
def test_merging_split_streams_equals_one_stream(items, limit, rnd):
    whole, left, right = PairStats(), PairStats(), PairStats()
    for ts, value in items:
        whole.add(ts, value, limit)
        (left if rnd.random() < 0.5 else right).add(ts, value, limit)
    into = {("c", "v"): left}
    merge_pairs(into, {("c", "v"): right}, limit)
    merged = into[("c", "v")]
    assert merged.count == whole.count
    assert merged.prefix == whole.prefix
    assert merged.total == pytest.approx(whole.total)


def test_rows_round_trip():
    stats = PairStats()
    for ts, v in [(3.0, 1.0), (1.0, 2.0)]:
        stats.add(ts, v, 5)
    back = pairs_from_rows(pairs_to_rows({("cell", "veh"): stats}))[("cell", "veh")]
    assert (back.count, back.total, back.total_sq, back.prefix) == (2, 3.0, 5.0, stats.prefix)


def test_window_start_aligns_to_the_window():
    assert window_start_of(7199.9, 3600) == 3600
    assert window_start_of(7200.0, 3600) == 7200


def state() -> PartitionState:
    return PartitionState(window_seconds=3600, grace_seconds=600, prefix_limit=4)


def test_windows_close_by_event_time_watermark():
    s = state()
    s.add_batch(["a", "b"], [100.0, 3000.0], ["c1", "c1"], [10.0, 20.0])
    assert s.due_windows() == []  # watermark 2400 < window end 3600
    s.add_batch(["a"], [4199.0], ["c1"], [5.0])
    assert s.due_windows() == []  # 3599 < 3600
    s.add_batch(["a"], [4200.0], ["c1"], [5.0])
    assert s.due_windows() == [0]
    pairs = s.close(0)
    assert {k: v.count for k, v in pairs.items()} == {("c1", "a"): 1, ("c1", "b"): 1}


def test_late_readings_are_dropped_and_counted_per_window():
    s = state()
    s.add_batch(["a"], [5000.0], ["c1"], [1.0])  # watermark 4400: window 0 is closed
    outcome = s.add_batch(["a", "b"], [100.0, 4000.0], ["c1", "c2"], [1.0, 2.0])
    assert (outcome.accepted, outcome.late) == (1, 1)
    assert s.late_by_window == {0: 1}
    assert 0 not in s.open


def test_lateness_does_not_depend_on_batch_boundaries():
    rng = random.Random(7)
    items = [
        (f"v{rng.randrange(5)}", rng.uniform(0, 20000), f"c{rng.randrange(3)}") for _ in range(300)
    ]
    one = state()
    one_out = one.add_batch(
        [v for v, _, _ in items],
        [t for _, t, _ in items],
        [c for _, _, c in items],
        [1.0] * len(items),
    )
    many = state()
    late = accepted = 0
    for i in range(0, len(items), 7):
        chunk = items[i : i + 7]
        out = many.add_batch(
            [v for v, _, _ in chunk],
            [t for _, t, _ in chunk],
            [c for _, _, c in chunk],
            [1.0] * len(chunk),
        )
        late, accepted = late + out.late, accepted + out.accepted
    assert (late, accepted) == (one_out.late, one_out.accepted)
    assert one.late_by_window == many.late_by_window


def test_force_closed_window_rejects_later_readings():
    s = state()
    s.add_batch(["a"], [100.0], ["c1"], [1.0])
    s.close(0, forced=True)
    outcome = s.add_batch(["a"], [200.0], ["c1"], [1.0])
    assert outcome.late == 1 and 0 not in s.open


def test_delta_rows_replay_to_the_same_state():
    s = state()
    replayed = state()
    for batch in ([("a", 10.0, "c1", 3.0), ("b", 20.0, "c2", 4.0)], [("a", 30.0, "c1", 5.0)]):
        out = s.add_batch(*[list(col) for col in zip(*batch, strict=True)], record_delta=True)
        replayed.apply_delta(
            {w: pairs_from_rows(rows) for w, rows in out.delta_rows.items()}, s.max_ts
        )
    assert pairs_to_rows(s.open[0]) == pairs_to_rows(replayed.open[0])
    assert replayed.max_ts == s.max_ts
