"""The numpy forms a process without numba runs (``stream-dp plan``) give exactly what the
compiled kernels give: orders, eq. (13) errors, CLIP-USER and the pseudo-user cap."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dp.dp import kernel_choice
from stream_dp.dp.array_kernels import stable_order_by
from stream_dp.dp.clip_user import clip_user
from stream_dp.dp.grid_error import ErrorModel, composed_error
from stream_dp.dp.grid_error_kernel import cell_errors_into
from stream_dp.dp.ordering import sorted_distinct, stable_order
from stream_dp.dp.pseudo_user import pseudo_user_step
from stream_dp.dp.synthetic import city_occupancy

MODELS = [
    ErrorModel.split(0.7),  # eq. 13
    ErrorModel.split(1.3, 0.0, math.log(20.0)),  # no variance: its terms are left out
    ErrorModel.split(0.4, 0.3, 1.0),
]


def test_small_inputs_run_numpy_until_numba_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "numba", raising=False)
    assert not kernel_choice.use_kernels(kernel_choice.SMALL_INPUT)
    assert kernel_choice.use_kernels(kernel_choice.SMALL_INPUT + 1)
    monkeypatch.setitem(sys.modules, "numba", sys.modules.get("numba", object()))
    assert kernel_choice.use_kernels(1)


@given(st.lists(st.integers(0, 9), max_size=300))
@settings(max_examples=150, deadline=None)
def test_the_numpy_order_is_the_counting_sort(keys: list[int]) -> None:
    array = np.array(keys, dtype=np.int64)
    expected = stable_order_by(array, 10)
    original = kernel_choice.use_kernels
    kernel_choice.use_kernels = lambda n_items: False  # no fixture inside @given
    try:
        order = stable_order(array, 10)
    finally:
        kernel_choice.use_kernels = original
    assert np.array_equal(order, expected)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("seed", range(4))
def test_the_composed_error_is_the_compiled_loop_bit_for_bit(model: ErrorModel, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 5_000
    top = rng.integers(0, 60, size=n)
    kept = top + rng.integers(0, 400, size=n) * (rng.random(n) < 0.9)  # some S == top, S == 0
    total = kept + rng.integers(0, 300, size=n) * (rng.random(n) < 0.7) + (kept == 0)
    upper = float(rng.uniform(1.0, 120.0))
    compiled = np.empty(n, dtype=np.float64)
    cell_errors_into(compiled, upper, upper**2, *model.kernel_args(), top, kept, total)
    assert np.isinf(compiled).any() and np.isfinite(compiled).any()
    numpy_form = composed_error(upper, model, top, kept, total)
    assert numpy_form.tobytes() == compiled.tobytes()


OCCUPANCIES = [  # (vehicles, cells, cells per vehicle): batched rounds, and few cells (sequential)
    (3_000, 400, 6.0),
    (1_500, 60, 4.0),
    (800, 2_000, 9.0),
]


@pytest.mark.parametrize(("n_vehicles", "n_cells", "per_vehicle"), OCCUPANCIES)
@pytest.mark.parametrize("model", MODELS)
def test_clip_user_and_the_cap_without_kernels_equal_the_kernels(
    monkeypatch: pytest.MonkeyPatch,
    n_vehicles: int,
    n_cells: int,
    per_vehicle: float,
    model: ErrorModel,
) -> None:
    occ = city_occupancy(np.random.default_rng(n_cells), n_vehicles, n_cells, per_vehicle, 0.05)
    epsilon = model.mean_epsilon
    compiled = clip_user(occ, 65.0, epsilon, model=model)
    compiled_cap = pseudo_user_step(compiled, 65.0, epsilon, prefix_limit=64)
    assert 0 < compiled.n_suppressed and compiled.k < compiled.g1  # CLIP-USER does something
    monkeypatch.setattr(kernel_choice, "use_kernels", lambda n_items: False)
    uncompiled = clip_user(occ, 65.0, epsilon, model=model)
    uncompiled_cap = pseudo_user_step(uncompiled, 65.0, epsilon, prefix_limit=64)
    assert (uncompiled.g1, uncompiled.k) == (compiled.g1, compiled.k)
    assert uncompiled.error_bound == compiled.error_bound
    np.testing.assert_array_equal(uncompiled.suppressed_entries, compiled.suppressed_entries)
    np.testing.assert_array_equal(uncompiled.kept, compiled.kept)
    assert uncompiled.initial_error.tobytes() == compiled.initial_error.tobytes()
    assert uncompiled.error.tobytes() == compiled.error.tobytes()
    np.testing.assert_array_equal(uncompiled.grids_per_vehicle(), compiled.grids_per_vehicle())
    np.testing.assert_array_equal(uncompiled_cap.cap, compiled_cap.cap)
    np.testing.assert_array_equal(uncompiled_cap.kept_count, compiled_cap.kept_count)
    assert uncompiled_cap.error.tobytes() == compiled_cap.error.tobytes()


@given(st.lists(st.integers(-(2**40), 2**40) | st.integers(0, 5), max_size=300))
@settings(max_examples=150, deadline=None)
def test_sorted_distinct_is_np_unique(values: list[int]) -> None:
    array = np.array(values, dtype=np.int64)
    assert np.array_equal(sorted_distinct(array), np.unique(array))
