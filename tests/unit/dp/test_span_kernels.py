"""The compiled per-group minimum equals ``np.minimum.at`` (floats with NaN, integers)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dp.dp.span_kernels import minimum_at, take_readings


@settings(max_examples=200, deadline=None)
@given(
    n_groups=st.integers(1, 20),
    values=st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), max_size=60),
    data=st.data(),
)
def test_minimum_at_equals_numpy(n_groups: int, values: list[float], data: st.DataObject) -> None:
    group = np.array(
        data.draw(
            st.lists(st.integers(0, n_groups - 1), min_size=len(values), max_size=len(values))
        ),
        dtype=np.int64,
    )
    floats = np.array(values, dtype=np.float64)
    expected, got = np.full(n_groups, 5.0), np.full(n_groups, 5.0)
    with np.errstate(invalid="ignore"):  # NaN compared: numpy's rule is the oracle
        np.minimum.at(expected, group, floats)
    minimum_at(got, group, floats)
    assert np.array_equal(expected, got, equal_nan=True)
    ints = np.clip(np.nan_to_num(floats, nan=0.0), -9e18, 9e18).astype(np.int64)
    expected_int, got_int = (
        np.full(n_groups, 7, dtype=np.int64),
        np.full(n_groups, 7, dtype=np.int64),
    )
    np.minimum.at(expected_int, group, ints)
    minimum_at(got_int, group, ints)
    assert np.array_equal(expected_int, got_int)


@settings(max_examples=200, deadline=None)
@given(n_pairs=st.integers(1, 12), data=st.data())
def test_take_readings_equals_numpy(n_pairs: int, data: st.DataObject) -> None:
    reading_pair = np.array(data.draw(st.lists(st.integers(0, n_pairs - 1), max_size=50)))
    reading_pair = reading_pair.astype(np.int64)
    keep = data.draw(st.lists(st.booleans(), min_size=n_pairs, max_size=n_pairs))
    pair_map = np.full(n_pairs, -1, dtype=np.int64)
    kept = np.flatnonzero(keep)
    pair_map[kept] = np.arange(len(kept))
    ts = np.arange(len(reading_pair), dtype=np.float64) * 1.5
    value = ts[::-1].copy()
    pair, got_ts, got_value = take_readings(reading_pair, pair_map, ts, value)
    live = pair_map[reading_pair] >= 0
    assert np.array_equal(pair, pair_map[reading_pair][live])
    assert np.array_equal(got_ts, ts[live]) and np.array_equal(got_value, value[live])
