"""The compiled per-group minimum equals ``np.minimum.at`` (floats with NaN, integers)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dp.dp.group_min_kernel import minimum_at


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
    np.minimum.at(expected, group, floats)
    minimum_at(got, group, floats)
    assert np.array_equal(expected, got, equal_nan=True)
    ints = np.nan_to_num(floats, nan=0.0, posinf=9e18, neginf=-9e18).astype(np.int64)
    expected_int, got_int = (
        np.full(n_groups, 7, dtype=np.int64),
        np.full(n_groups, 7, dtype=np.int64),
    )
    np.minimum.at(expected_int, group, ints)
    minimum_at(got_int, group, ints)
    assert np.array_equal(expected_int, got_int)
