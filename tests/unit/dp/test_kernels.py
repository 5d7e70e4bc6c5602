"""The kernel registry (:mod:`stream_dp.dp.kernels`): every entry's numpy and compiled forms give
equal results on the same inputs (edge cases, ties, sizes around the switch), and the switch
picks numpy for small inputs in a process without numba. The test enumerates the registry: a
new entry without inputs here fails until it has some."""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dp.dp import kernels
from stream_dp.dp.array_kernels import stable_order_by
from stream_dp.dp.clip_user import clip_user
from stream_dp.dp.grid_error import ErrorModel
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.ordering import sorted_distinct, stable_order
from stream_dp.dp.pseudo_user import pseudo_user_step
from stream_dp.dp.synthetic import city_occupancy

Rng = np.random.Generator
Args = tuple[Any, ...]

#: Input sizes (items: keys, pairs, entries): empty, one, a few, and around the switch.
SIZES = [0, 1, 2, 7, 300, 5_000]
THRESHOLD = [kernels.SMALL_INPUT, kernels.SMALL_INPUT + 1]

MODELS = [
    ErrorModel.split(0.7),  # eq. 13
    ErrorModel.split(1.3, 0.0, math.log(20.0)),  # no variance: its terms are left out
    ErrorModel.split(0.4, 0.3, 1.0),
]


def _keys(rng: Rng, n: int) -> tuple[np.ndarray, int]:
    """``n`` keys with many ties (the order among equal keys is the input's)."""
    n_keys = int(rng.integers(1, 40)) if n < 1000 else int(rng.integers(1, 2 * n))
    return rng.integers(0, n_keys, n).astype(np.int64), n_keys


def _stable_order(rng: Rng, n: int) -> Args:
    return _keys(rng, n)


def _grouped(rng: Rng, n: int) -> Args:
    keys, n_keys = _keys(rng, n)
    return keys, n_keys, rng.integers(0, 10**6, n), rng.integers(-50, 50, n).astype(np.int32)


def _order_and_gather(rng: Rng, n: int) -> Args:
    keys, n_keys = _keys(rng, n)
    return keys, n_keys, rng.integers(0, 10**6, n), rng.integers(1, 60, n)


def _cell_errors(rng: Rng, n: int) -> Args:
    top = rng.integers(0, 60, size=n)
    kept = top + rng.integers(0, 400, size=n) * (rng.random(n) < 0.9)  # some S == top, S == 0
    total = kept + rng.integers(0, 300, size=n) * (rng.random(n) < 0.7) + (kept == 0)
    model = MODELS[int(rng.integers(0, len(MODELS)))]
    shape = (n // 2, 2) if n % 2 == 0 and n else (n,)  # a 2-d grid too
    counts = [a.astype(np.int64).reshape(shape) for a in (top, kept, total)]
    return (float(rng.uniform(1.0, 120.0)), model, *counts)


def _occupancy(rng: Rng, n: int, count_scale: int = 1) -> Occupancy:
    """An occupancy of about ``n`` entries (few cells for small ones: ties in every cell)."""
    if n == 0:
        none = np.zeros(0, dtype=np.int64)
        return Occupancy((), (), none, none, none)
    n_vehicles = max(1, n // 5)
    n_cells = max(1, min(n // 3, int(rng.integers(1, 2_000))))
    occ = city_occupancy(rng, n_vehicles, n_cells, 5.0, 0.2)
    return dataclasses.replace(occ, count=occ.count * count_scale)


def _layout(rng: Rng, n: int) -> Args:
    # Counts far apart: the counting sort would not be linear, the compiled form sorts.
    occ = _occupancy(rng, n, count_scale=10**7 if rng.random() < 0.25 else 1)
    top = int(occ.count.max(initial=0))
    return occ.cell_index, occ.vehicle_index, occ.count, len(occ.cells), len(occ.vehicles), top


def _clip_user(rng: Rng, n: int) -> Args:
    model = MODELS[int(rng.integers(0, len(MODELS)))]
    bound = None if rng.random() < 0.7 else float(rng.uniform(0.0, 50.0))
    return _occupancy(rng, n), 65.0, model.mean_epsilon, bound, model


def _groups_and_vehicles(rng: Rng, n: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    n_groups, n_vehicles = int(rng.integers(1, 30)), int(rng.integers(1, 40))
    return rng.integers(0, n_groups, n), rng.integers(0, n_vehicles, n), n_groups, n_vehicles


def _weighted_quantile(rng: Rng, n: int) -> Args:
    group, _, n_groups, _ = _groups_and_vehicles(rng, n)
    room = rng.choice([0.0, 0.5, 1.25, 7.0 / 3.0, 3.0], n)  # ties
    order = np.lexsort((room, group))
    quantile = float(rng.choice([0.5, 0.25, 1.0, rng.random()]))
    return order, group, room, rng.integers(1, 40, n), n_groups, quantile


def _aggregate_pairs(rng: Rng, n: int) -> Args:
    group, vehicle, n_groups, n_vehicles = _groups_and_vehicles(rng, n)
    return group, vehicle, rng.integers(1, 40, n), n_groups, n_vehicles


def _aggregate_selected(rng: Rng, n: int) -> Args:
    group, vehicle, n_groups, n_vehicles = _groups_and_vehicles(rng, n)
    select = rng.random(n) < 0.6
    return group, vehicle, rng.integers(1, 40, n), select, n_groups, n_vehicles


def _units(rng: Rng, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pairs moved to 12 units (-1: dropped), some units merging several pairs."""
    unit = rng.integers(-1, 12, n)
    merged_unit = rng.random(12) < 0.5
    return unit, merged_unit, rng.integers(0, 30, n), rng.integers(1, 40, n)


def _split_moves(rng: Rng, n: int) -> Args:
    return _units(rng, n)


def _merged_groups(rng: Rng, n: int) -> Args:
    unit, merged_unit, vehicle, count = _units(rng, n)
    merged = np.flatnonzero((unit >= 0) & np.append(merged_unit, False)[unit])
    return unit, vehicle, count, merged, 12, 30


def _take_readings(rng: Rng, n: int) -> Args:
    n_pairs = int(rng.integers(1, 50))
    pair_map = np.where(rng.random(n_pairs) < 0.7, rng.integers(0, 100, n_pairs), -1)
    ts = rng.integers(0, 3600, n).astype(np.float64)
    return rng.integers(0, n_pairs, n), pair_map, ts, rng.choice([0.0, 3.5, 64.0], n)


def _plan_of(rng: Rng, n: int) -> tuple[Occupancy, np.ndarray, np.ndarray, np.ndarray]:
    """An occupancy and a plan of it: kept entries, per cell a cap and an ε (+inf: dropped;
    ε of a power-of-two step, as plans have, and some not)."""
    occ = _occupancy(rng, n)
    n_cells = len(occ.cells)
    kept = rng.random(occ.n_entries) < 0.8
    epsilon = np.where(rng.random(n_cells) < 0.15, np.inf, rng.integers(1, 64, n_cells) / 64)
    epsilon[: n_cells // 4] = rng.uniform(0.01, 2.0, n_cells // 4)
    return occ, kept, rng.integers(1, 30, n_cells), epsilon


def _planned_counts(rng: Rng, n: int) -> Args:
    occ, kept, cap, epsilon = _plan_of(rng, n)
    return occ.cell_start, occ.vehicle_index, occ.count, kept, cap, epsilon, len(occ.vehicles)


def _read_loss(rng: Rng, n: int) -> Args:
    """A budget release's reads: a plan's kept entries, the cells released, and (half the
    time) the own shares: per entry its readings kept under its cell's cap, a mean share;
    sometimes without the read entries (the plan's check)."""
    occ, kept, cap, epsilon = _plan_of(rng, n)
    kept &= np.isfinite(epsilon)[occ.cell_index]  # a plan keeps nothing in a dropped cell
    released = np.isfinite(epsilon) & (rng.random(len(occ.cells)) < 0.8)
    shares = None
    if rng.random() < 0.5:
        kept_count = np.where(kept, np.minimum(occ.count, cap[occ.cell_index]), 0)
        shares = (kept_count.astype(np.int64), cap.astype(np.int64), float(rng.choice([1.0, 0.75])))
    return (occ.cell_start, occ.vehicle_index, kept, released, epsilon, len(occ.vehicles),
            shares, bool(rng.random() < 0.5))  # fmt: skip


def _by_group_then_vehicle(out: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Entries of one group in any order (promised for the aggregates): sorted."""
    group, vehicle, count = out
    order = np.lexsort((vehicle, group))
    return group[order], vehicle[order], count[order]


def _lone_pairs_part(out: tuple[np.ndarray, ...]) -> tuple[Any, ...]:
    """The split's indices, and of its buffers the lone pairs' part and the length (the rest
    is room the caller fills)."""
    single, merged, *buffers = out
    return single, merged, *[(len(b), b[: len(single)]) for b in buffers]


#: Per kernel: its inputs of about ``n`` items, and what of its output is promised.
INPUTS: dict[str, Callable[[Rng, int], Args]] = {
    "stable_order": _stable_order,
    "grouped": _grouped,
    "order_and_gather": _order_and_gather,
    "cell_errors": _cell_errors,
    "suppressor_layout": _layout,
    "clip_user": _clip_user,
    "weighted_quantile": _weighted_quantile,
    "aggregate_pairs": _aggregate_pairs,
    "aggregate_selected": _aggregate_selected,
    "split_moves": _split_moves,
    "merged_groups": _merged_groups,
    "take_readings": _take_readings,
    "planned_counts": _planned_counts,
    "read_loss": _read_loss,
}
PROMISED: dict[str, Callable[[Any], Any]] = {
    "aggregate_pairs": _by_group_then_vehicle,
    "aggregate_selected": _by_group_then_vehicle,
    "split_moves": _lone_pairs_part,
}


def assert_same(numpy_out: Any, compiled_out: Any, where: str = "output") -> None:
    """Equal to the bit: arrays (dtype, shape, bytes), sequences and dataclasses field by
    field, anything else by ``==``."""
    if isinstance(numpy_out, np.ndarray) or isinstance(compiled_out, np.ndarray):
        a, b = numpy_out, compiled_out
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), where
        assert (a.dtype, a.shape) == (b.dtype, b.shape), (
            f"{where}: {a.dtype}{a.shape}, {b.dtype}{b.shape}"
        )
        assert a.tobytes() == b.tobytes(), f"{where} differs"
    elif dataclasses.is_dataclass(numpy_out) and not isinstance(numpy_out, type):
        assert type(numpy_out) is type(compiled_out), where
        for field in dataclasses.fields(numpy_out):
            name = field.name
            assert_same(getattr(numpy_out, name), getattr(compiled_out, name), f"{where}.{name}")
    elif isinstance(numpy_out, tuple | list):
        assert isinstance(compiled_out, tuple | list), where
        assert len(numpy_out) == len(compiled_out), f"{where}: lengths differ"
        for i, (a, b) in enumerate(zip(numpy_out, compiled_out, strict=True)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert numpy_out == compiled_out, f"{where}: {numpy_out!r} vs {compiled_out!r}"


def _cases() -> list[Any]:
    """Every kernel at every size, three seeds each (one at the switch's sizes)."""
    cases = []
    for kernel in kernels.REGISTRY:
        for n in SIZES + THRESHOLD:
            for seed in range(1 if n in THRESHOLD else 3):
                cases.append(pytest.param(kernel, n, seed, id=f"{kernel.name}-{n}-{seed}"))
    return cases


@pytest.mark.parametrize(("kernel", "n", "seed"), _cases())
def test_numpy_and_compiled_forms_are_equal(kernel: kernels.Kernel, n: int, seed: int) -> None:
    assert kernel.name in INPUTS, f"kernel {kernel.name!r} has no inputs in this test"
    rng = np.random.default_rng([seed, n, len(kernel.name)])
    args = INPUTS[kernel.name](rng, n)
    promised = PROMISED.get(kernel.name, lambda out: out)
    numpy_out = kernel.numpy(*args)
    compiled_out = kernel.compiled(*args)
    assert_same(promised(numpy_out), promised(compiled_out))


def test_every_kernel_is_registered_once_with_inputs_here() -> None:
    names = [kernel.name for kernel in kernels.REGISTRY]
    assert len(names) == len(set(names))
    assert set(names) == set(INPUTS)
    by_module = {name: getattr(kernels, name) for name in dir(kernels) if name.isupper()}
    declared = {k for k in by_module.values() if isinstance(k, kernels.Kernel)}
    assert declared == set(kernels.REGISTRY)  # no entry left out of the registry


def test_assert_same_tells_a_differing_pair() -> None:
    # The comparison the registry test relies on fails on a one-ulp, a dtype or an order change.
    a = np.array([0.1, 0.2, np.inf])
    for other in (np.nextafter(a, 1.0), a.astype(np.float32), a[::-1].copy()):
        with pytest.raises(AssertionError):
            assert_same(a, other)
    assert_same((a, 3), (a.copy(), 3))


def test_small_inputs_run_numpy_until_numba_is_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "numba", raising=False)
    assert not kernels.use_compiled(kernels.SMALL_INPUT)
    assert kernels.use_compiled(kernels.SMALL_INPUT + 1)
    picked = kernels.STABLE_ORDER.pick(kernels.SMALL_INPUT)
    assert picked is kernels.STABLE_ORDER.numpy
    assert kernels.STABLE_ORDER.pick(kernels.SMALL_INPUT + 1) is kernels.STABLE_ORDER.compiled
    monkeypatch.setitem(sys.modules, "numba", sys.modules.get("numba", object()))
    assert kernels.use_compiled(1)
    with kernels.forced("numpy"):
        assert not kernels.use_compiled(kernels.SMALL_INPUT + 1)
        assert kernels.STABLE_ORDER.pick(10**9) is kernels.STABLE_ORDER.numpy
    with kernels.forced("compiled"):
        assert kernels.use_compiled(0)
    assert kernels.use_compiled(1)  # the override ends with its block


OCCUPANCIES = [  # (vehicles, cells, cells per vehicle): batched rounds, and few cells (sequential)
    (3_000, 400, 6.0),
    (1_500, 60, 4.0),
    (800, 2_000, 9.0),
]


@pytest.mark.parametrize(("n_vehicles", "n_cells", "per_vehicle"), OCCUPANCIES)
@pytest.mark.parametrize("model", MODELS)
def test_clip_user_and_the_cap_without_kernels_equal_the_kernels(
    n_vehicles: int, n_cells: int, per_vehicle: float, model: ErrorModel
) -> None:
    # Through the callers (CLIP-USER, then the pseudo-user cap over its result), on data where
    # CLIP-USER suppresses pairs.
    occ = city_occupancy(np.random.default_rng(n_cells), n_vehicles, n_cells, per_vehicle, 0.05)
    epsilon = model.mean_epsilon
    with kernels.forced("compiled"):
        compiled = clip_user(occ, 65.0, epsilon, model=model)
        compiled_cap = pseudo_user_step(compiled, 65.0, epsilon, prefix_limit=64)
    assert 0 < compiled.n_suppressed and compiled.k < compiled.g1  # CLIP-USER does something
    with kernels.forced("numpy"):
        uncompiled = clip_user(occ, 65.0, epsilon, model=model)
        uncompiled_cap = pseudo_user_step(uncompiled, 65.0, epsilon, prefix_limit=64)
    assert_same(uncompiled, compiled)
    np.testing.assert_array_equal(uncompiled.grids_per_vehicle(), compiled.grids_per_vehicle())
    np.testing.assert_array_equal(uncompiled_cap.cap, compiled_cap.cap)
    np.testing.assert_array_equal(uncompiled_cap.kept_count, compiled_cap.kept_count)
    assert uncompiled_cap.error.tobytes() == compiled_cap.error.tobytes()


@given(st.lists(st.integers(0, 9), max_size=300))
@settings(max_examples=150, deadline=None)
def test_the_numpy_order_is_the_counting_sort(keys: list[int]) -> None:
    array = np.array(keys, dtype=np.int64)
    with kernels.forced("numpy"):
        order = stable_order(array, 10)
    assert np.array_equal(order, stable_order_by(array, 10))


@given(st.lists(st.integers(-(2**40), 2**40) | st.integers(0, 5), max_size=300))
@settings(max_examples=150, deadline=None)
def test_sorted_distinct_is_np_unique(values: list[int]) -> None:
    array = np.array(values, dtype=np.int64)
    assert np.array_equal(sorted_distinct(array), np.unique(array))
