"""The compiled release kernels agree with plain numpy / Python on random inputs."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dp.dp.array_kernels import (
    gather_pair_totals,
    kept_cell_totals,
    kept_entry_sums,
    pair_prefix_sums,
    stable_order_by,
)
from stream_dp.dp.ordering import order_by_pair


@given(st.lists(st.integers(0, 9), max_size=200))
@settings(max_examples=200, deadline=None)
def test_stable_order_by_is_a_stable_sort(keys):
    array = np.array(keys, dtype=np.int64)
    order = stable_order_by(array, 10)
    assert np.array_equal(order, np.argsort(array, kind="stable"))


@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 40)), max_size=200),
    st.sampled_from([7, 300_000, 10**9]),  # one combined counting sort, two passes, lexsort
)
@settings(max_examples=300, deadline=None)
def test_order_by_pair_is_lexsort(pairs, n_major):
    major = np.array([a for a, _ in pairs], dtype=np.int64)
    minor = np.array([b for _, b in pairs], dtype=np.int64)
    order = order_by_pair(major, minor, n_major, 41)
    assert np.array_equal(order, np.lexsort((minor, major)))


readings = st.lists(
    st.tuples(st.integers(0, 5), st.integers(0, 6).map(float), st.integers(0, 4).map(float)),
    max_size=80,
)


@given(readings)
@settings(max_examples=300, deadline=None)
def test_pair_prefix_sums_run_over_each_pairs_readings_in_event_time_then_value_order(items):
    pair = np.array([p for p, _, _ in items], dtype=np.int64)
    ts = np.array([t for _, t, _ in items], dtype=np.float64)
    value = np.array([v for _, _, v in items], dtype=np.float64)
    start, sums, sums_sq = pair_prefix_sums(pair, ts, value, 6)
    for p in range(6):
        mine = [v for _, v in sorted((t, v) for q, t, v in items if q == p)]
        assert start[p + 1] - start[p] == len(mine)
        for k in range(1, len(mine) + 1):
            first = mine[:k]
            assert sums[start[p] + k - 1] == sum(first)
            assert sums_sq[start[p] + k - 1] == sum(v * v for v in first)


@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 6), st.integers(0, 9)), max_size=60),
    st.lists(st.integers(0, 7), min_size=6, max_size=6),
    st.randoms(use_true_random=False),
)
@settings(max_examples=300, deadline=None)
def test_kept_entry_sums_are_the_sums_of_each_entrys_first_kept_readings(items, counts, rnd):
    """Pairs 0..5 hold ``counts[p]`` readings, of which the log stores the first few; each
    chosen entry keeps some of them: full totals, prefix sums or 0, and the first entry whose
    kept readings are not all stored is reported."""
    pair = np.array([p for p, _, _ in items], dtype=np.int64)
    ts = np.array([t for _, t, _ in items], dtype=np.float64)
    value = np.array([v for _, _, v in items], dtype=np.float64)
    logged = [sorted((t, v) for q, t, v in items if q == p) for p in range(6)]
    count = np.array([max(c, len(log)) for c, log in zip(counts, logged, strict=True)])
    total = np.array([sum(v for _, v in log) + 1000.0 * (c - len(log)) for c, log in
                      zip(count, logged, strict=True)])  # fmt: skip
    total_sq = total * 3.0
    entries = np.array(rnd.sample(range(6), rnd.randint(0, 6)), dtype=np.int64)
    kept = np.array([rnd.randint(0, int(count[e])) for e in entries], dtype=np.int64)
    start, sums, sums_sq = pair_prefix_sums(pair, ts, value, 6)
    entry_total, entry_total_sq = gather_pair_totals(entries, total, total_sq)
    assert (entry_total.tolist(), entry_total_sq.tolist()) == (
        total[entries].tolist(),
        total_sq[entries].tolist(),
    )
    out, out_sq, beyond = kept_entry_sums(
        entries, kept, count[entries], entry_total, entry_total_sq, start, sums, sums_sq
    )
    expect_beyond = -1
    for i, (e, k) in enumerate(zip(entries.tolist(), kept.tolist(), strict=True)):
        if k == count[e]:
            want = (total[e], total_sq[e])
        elif k > len(logged[e]):
            expect_beyond = i
            break
        else:
            first = [v for _, v in logged[e][:k]]
            want = (sum(first), sum(v * v for v in first))
        assert (out[i], out_sq[i]) == want
    assert beyond == expect_beyond


@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 5), st.floats(0, 100), st.floats(0, 1e4)),
        max_size=60,
    )
)
@settings(max_examples=200, deadline=None)
def test_kept_cell_totals_are_bincounts(entries):
    cell = np.array(sorted(c for c, _, _, _ in entries), dtype=np.int64)
    kept = np.array([k for _, k, _, _ in entries], dtype=np.int64)
    readings, vehicles = kept_cell_totals(cell, 5, kept)
    assert readings.tolist() == np.bincount(cell, weights=kept, minlength=5).tolist()
    assert vehicles.tolist() == np.bincount(cell, weights=kept > 0, minlength=5).tolist()
