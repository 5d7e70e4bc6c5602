"""Bounded window state: sufficient statistics, event-time prefixes, lateness, merging."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dp.windows.state import (
    PartialColumns,
    PartitionState,
    WindowAccumulator,
    window_start_of,
)

readings = st.lists(
    st.tuples(
        st.sampled_from(["c1", "c2"]),
        st.sampled_from(["a", "b", "c"]),
        st.integers(0, 50).map(float),
        st.integers(0, 65).map(float),
    ),
    min_size=1,
    max_size=60,
)


def plain_model(items, limit):
    """The specification: per (cell, vehicle), count, sums and the first ``limit`` readings
    by (event time, value)."""
    by_pair: dict = {}
    for cell, vehicle, ts, value in items:
        by_pair.setdefault((cell, vehicle), []).append((ts, value))
    return {
        key: (len(v), sum(x for _, x in v), sum(x * x for _, x in v), sorted(v)[:limit])
        for key, v in by_pair.items()
    }


def as_model(partial: PartialColumns):
    return {
        key: (
            int(partial.count[i]),
            float(partial.total[i]),
            float(partial.total_sq[i]),
            partial.prefix_of(i),
        )
        for i, key in enumerate(partial.pair_names())
    }


def assert_same_state(got: dict, expected: dict) -> None:
    """Same pairs, counts and prefixes; sums equal up to float rounding."""
    assert got.keys() == expected.keys()
    for key, (count, total, total_sq, prefix) in expected.items():
        assert got[key][0] == count, key
        assert got[key][1:3] == pytest.approx((total, total_sq)), key
        assert got[key][3] == prefix, key


def accumulate(items, limit, chunk, min_compact=None):
    acc = WindowAccumulator(limit)
    if min_compact is not None:
        acc._compact_at = min_compact
    for i in range(0, len(items), chunk):
        part = items[i : i + chunk]
        slots = np.array([acc.slot_of(c, v) for c, v, _, _ in part], dtype=np.int64)
        acc.add(slots, np.array([t for *_, t, _ in part]), np.array([x for *_, x in part]))
    return acc


@given(readings, st.integers(1, 6), st.integers(1, 9), st.sampled_from([None, 1, 4]))
@settings(max_examples=150, deadline=None)
def test_accumulator_matches_the_plain_model(items, limit, chunk, min_compact):
    """Any batching and any compaction schedule keep exactly the specified state."""
    acc = accumulate(items, limit, chunk, min_compact)
    assert_same_state(as_model(acc.to_partial()), plain_model(items, limit))


@given(
    st.lists(
        st.lists(st.text(st.characters(blacklist_characters="\0"), max_size=6), max_size=12),
        max_size=12,
    )
)
@settings(max_examples=200, deadline=None)
def test_vehicle_name_array_equals_the_names_after_any_batching(batches):
    """The names arrayed batch by batch (chunks merged as they go) are the names in code
    order, whatever the batches; the partial carries them."""
    acc = WindowAccumulator(4)
    for batch in batches:
        slots = np.array([acc.slot_of("c", v) for v in batch], dtype=np.int64)
        acc.add(slots, np.zeros(len(batch)), np.zeros(len(batch)))
        assert len(acc._vehicle_name_chunks) <= 1 + max(len(acc.vehicle_names), 1).bit_length()
    array = acc.vehicle_name_array()
    assert array.dtype.kind == "U" and array.tolist() == acc.vehicle_names
    assert acc.to_partial().vehicle_names.tolist() == acc.vehicle_names


def test_a_vehicle_id_ending_in_nul_is_refused_and_leaves_no_trace():
    acc = WindowAccumulator(4)
    acc.slot_of("c", "a")
    with pytest.raises(ValueError, match="NUL"):
        acc.slot_of("c", "b\0")
    assert acc.vehicle_names == ["a"] and len(acc) == 1 and acc.slot_of("d", "a") == 1


def test_reading_log_stays_bounded_for_a_fast_vehicle():
    """A vehicle's readings in one cell cost O(C) memory, whatever its rate."""
    items = [("c1", "a", float(1_000_000 - i), 1.0) for i in range(300_000)]  # ts decreasing
    acc = accumulate(items, 8, 5_000)
    assert len(acc._log_pair) + acc._pending_len <= 2 * 8 + (1 << 16)
    partial = acc.to_partial()
    assert partial.prefix_of(0) == [
        (float(1_000_000 - i), 1.0) for i in range(299_999, 299_991, -1)
    ]
    assert int(partial.count[0]) == 300_000 and len(partial.reading_pair) == 8


@given(readings, st.integers(1, 6), st.randoms(use_true_random=False))
@settings(max_examples=200, deadline=None)
def test_merging_partials_of_a_split_vehicle_equals_one_stream(items, limit, rnd):
    """A vehicle whose readings reach two partitions is merged exactly."""
    from stream_dp.windows.columns import WindowColumns

    side = [rnd.random() < 0.5 for _ in items]
    left = [r for r, s in zip(items, side, strict=True) if s]
    right = [r for r, s in zip(items, side, strict=True) if not s]
    partials = [accumulate(part, limit, 5).to_partial() for part in (left, right) if part]
    merged = WindowColumns.from_partials(partials, limit)
    expected = plain_model(items, limit)
    got = {}
    for key, i in merged.pair_index().items():
        at = np.flatnonzero(merged.reading_pair == i)
        prefix = sorted(
            zip(merged.reading_ts[at].tolist(), merged.reading_value[at].tolist(), strict=True)
        )
        got[key] = (int(merged.count[i]), float(merged.total[i]), float(merged.total_sq[i]), prefix)
    assert_same_state(got, expected)
    assert list(merged.vehicle_names) == sorted(merged.vehicle_names)


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
    partial = s.partial(0)
    s.close(0)
    counts = dict(zip(partial.pair_names(), partial.count.tolist(), strict=True))
    assert counts == {("c1", "a"): 1, ("c1", "b"): 1}


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


def test_deltas_replay_to_the_same_state():
    s = state()
    replayed = state()
    rng = random.Random(3)
    for _ in range(20):
        batch = [
            (
                f"v{rng.randrange(6)}",
                rng.uniform(0, 9000),
                f"c{rng.randrange(3)}",
                rng.uniform(0, 65),
            )
            for _ in range(rng.randrange(1, 30))
        ]
        out = s.add_batch(*[list(col) for col in zip(*batch, strict=True)], record_delta=True)
        replayed.apply_delta(out.delta, s.max_ts, out.late_by_window)
    assert sorted(s.open) == sorted(replayed.open)
    for start in s.open:
        assert as_model(s.partial(start)) == as_model(replayed.partial(start))
    assert replayed.max_ts == s.max_ts and replayed.late_by_window == s.late_by_window


def test_a_delta_out_of_order_is_refused():
    s = state()
    first = s.add_batch(["a"], [10.0], ["c1"], [1.0], record_delta=True)
    second = s.add_batch(["b"], [20.0], ["c1"], [2.0], record_delta=True)
    third = s.add_batch(["c"], [30.0], ["c1"], [3.0], record_delta=True)
    replayed = state()
    replayed.apply_delta(first.delta, s.max_ts)
    with pytest.raises(ValueError, match="out of order"):
        replayed.apply_delta(third.delta, s.max_ts)
    replayed.apply_delta(second.delta, s.max_ts)
    replayed.apply_delta(third.delta, s.max_ts)
    assert as_model(replayed.partial(0)) == as_model(s.partial(0))


def test_a_window_whose_beginning_left_the_log_is_skipped_not_half_released():
    """Retention may delete a window's first deltas: the rest must not become its state."""
    s = state()
    s.add_batch(["a"], [10.0], ["c1"], [1.0], record_delta=True)  # trimmed from the log
    kept = [
        s.add_batch(["b"], [20.0], ["c1"], [2.0], record_delta=True),
        s.add_batch(["a", "c"], [30.0, 4000.0], ["c1", "c2"], [3.0, 4.0], record_delta=True),
    ]
    replayed = state()
    assert replayed.apply_delta(kept[0].delta, s.max_ts) == 1
    assert replayed.apply_delta(kept[1].delta, s.max_ts) == 0  # already known truncated
    assert sorted(replayed.open) == [3600]  # the window that began on the log is whole
    assert as_model(replayed.partial(3600)) == as_model(s.partial(3600))
    late = replayed.add_batch(["d"], [40.0], ["c1"], [5.0])
    assert late.accepted == 0 and late.late_by_window == {0: 1}


def reference_lateness(items, width, grace, forced):
    """The lateness rule read one reading at a time: late when its window ended at or before
    the watermark seen so far (largest event time before it − grace), or was force-closed."""
    max_ts = float("-inf")
    late, accepted = {}, {}
    for vehicle, t, cell in items:
        start = int(t // width) * width
        if start + width <= max_ts - grace or start in forced:
            late[start] = late.get(start, 0) + 1
            continue
        max_ts = max(max_ts, t)
        accepted.setdefault(start, []).append((cell, vehicle))
    return late, accepted


@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.floats(0, 20_000), st.sampled_from(["c1", "c2"])),
        max_size=80,
    ),
    st.integers(1, 25),
    st.sets(st.sampled_from([0, 3600, 7200])),
)
@settings(max_examples=150, deadline=None)
def test_add_batch_follows_the_lateness_rule_reading_by_reading(items, chunk, forced):
    s = state()
    s.force_closed = set(forced)
    for i in range(0, len(items), chunk):
        part = items[i : i + chunk]
        s.add_batch([v for v, _, _ in part], [t for _, t, _ in part], [c for *_, c in part],
                    [1.0] * len(part))  # fmt: skip
    late, accepted = reference_lateness(items, 3600, 600, set(forced))
    assert s.late_by_window == late
    for start, pairs in accepted.items():
        partial = s.partial(start)
        counts = dict(zip(partial.pair_names(), partial.count.tolist(), strict=True))
        expected: dict = {}
        for key in pairs:
            expected[key] = expected.get(key, 0) + 1
        assert counts == expected
