"""Vehicle names sorted per partial in the background, then merged, give exactly the order
and codes of one sort of all of them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stream_dp.windows.columns as columns_module
from stream_dp.dp.occupancy import factorize
from stream_dp.windows.name_order import NameSort, merged_order

names = st.text(st.sampled_from("ab9Zé\U0001f697-"), min_size=1, max_size=4)
lists = st.lists(st.lists(names, max_size=12, unique=True), min_size=1, max_size=4)


@given(lists)
@settings(max_examples=300, deadline=None)
def test_merged_runs_are_one_stable_sort_of_the_concatenation(partials):
    flat = [n for p in partials for n in p]
    ordered, order = merged_order([NameSort.start(p) for p in partials])
    expected = np.argsort(np.array(flat if flat else [""]), kind="stable")[: len(flat)]
    assert order.tolist() == expected.tolist()
    assert ordered.tolist() == [flat[i] for i in expected.tolist()] == sorted(flat)


@pytest.mark.parametrize("few", [0, 10**9])  # the numpy path for every size, or the dict path
@given(lists)
@settings(max_examples=200, deadline=None)
def test_merge_codes_match_a_dict_factorization(few, partials):
    flat = [n for p in partials for n in p]
    codes = [np.arange(len(p), dtype=np.int64)[::-1].copy() for p in partials]
    saved = columns_module._FEW_NAMES
    columns_module._FEW_NAMES = few
    try:
        merged, global_code = columns_module._merge_codes(partials, codes)
    finally:
        columns_module._FEW_NAMES = saved
    distinct, expected_code = factorize(flat)
    assert merged == distinct
    offsets = np.cumsum([0] + [len(p) for p in partials[:-1]])
    want = np.concatenate([expected_code[o + c] for o, c in zip(offsets, codes, strict=True)])
    assert global_code.tolist() == want.tolist()
