"""CLIP-USER (``stream_dp.dp.clip_user``) against the plain transcription, plus invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from stream_dp.dp.cell_error import cell_error
from stream_dp.dp.clip_user import ClipUserResult, ClipUserRun, cell_errors, clip_user
from stream_dp.dp.error_bars import mean_error
from stream_dp.dp.grid_error import (
    ErrorModel,
    grid_error,
    mean_bias,
    mean_sensitivity,
    variance_bias,
    variance_sensitivity,
)
from stream_dp.dp.grid_error_kernel import compiled_cell_error
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.synthetic import city_occupancy
from tests.support.clip_user_reference import reference_clip_user
from tests.support.clip_user_strategies import STRATEGIES, clip_user_with

# STRATEGIES: "compiled" (the package's numba kernel), then the uncompiled references.
# Ids whose string order differs from their numeric order ("10" < "9").
IDS = st.one_of(
    st.sampled_from(["9", "10", "09", "100", "2", "a", "B", "b"]),
    st.text(alphabet="019ab", min_size=1, max_size=2),
)
CELL_IDS = st.sampled_from(["9", "10", "a", "B"]) | st.text(alphabet="019", min_size=1, max_size=2)
COUNTS = st.dictionaries(
    st.tuples(CELL_IDS, IDS), st.integers(min_value=1, max_value=20), min_size=1, max_size=40
)


def occupancy_of(counts: dict[tuple[str, str], int]) -> Occupancy:
    return Occupancy.from_triples((c, v, m) for (c, v), m in counts.items())


def kept_by_pair(result: ClipUserResult) -> dict[tuple[str, str], bool]:
    occ = result.occupancy
    return {
        (occ.cells[c], occ.vehicles[v]): bool(k)
        for c, v, k in zip(occ.cell_index, occ.vehicle_index, result.kept, strict=True)
    }


def check_invariants(result: ClipUserResult) -> None:
    occ = result.occupancy
    bound = result.error_bound * (1 + 1e-12)
    grids = result.grids_per_vehicle()
    np.testing.assert_array_equal(grids, occ.grids_per_vehicle(result.kept))
    assert result.k == int(grids.max(initial=0)) <= result.g1
    assert result.privacy_loss(0.3) == pytest.approx(result.k * 0.3)
    assert result.privacy_loss(0.3) <= result.g1 * 0.3
    kept_per_cell = np.bincount(occ.cell_index, weights=result.kept, minlength=len(occ.cells))
    assert (kept_per_cell > 0).all(), "a cell lost its last kept vehicle"
    touched = {cell for cell, _ in result.suppressed}
    for index, cell in enumerate(occ.cells):
        error = result.error[index]
        assert error <= max(result.initial_error[index], bound)
        if cell in touched:
            assert error <= bound
    assert len(result.suppressed) == result.n_suppressed == int((~result.kept).sum())
    np.testing.assert_array_equal(result.kept_count, np.where(result.kept, occ.count, 0))
    np.testing.assert_array_equal(
        result.error, cell_errors(occ, result.kept, result.upper, result.epsilon)
    )


def run_both(counts, upper, epsilon, factor):
    occ = occupancy_of(counts)
    bound = None
    if factor is not None:
        bound = factor * float(cell_errors(occ, np.ones(occ.n_entries, bool), upper, epsilon).max())
    return occ, bound, reference_clip_user(counts, upper, epsilon, bound)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    counts=COUNTS,
    upper=st.floats(min_value=0.5, max_value=100.0),
    epsilon=st.floats(min_value=0.05, max_value=5.0),
    factor=st.none() | st.floats(min_value=0.3, max_value=30.0) | st.just(math.inf),
)
def test_matches_the_plain_transcription(counts, upper, epsilon, factor) -> None:
    occ, bound, expected = run_both(counts, upper, epsilon, factor)
    event(f"suppressions: {min(len(expected.suppressed), 3)}")
    event(f"K < G1: {expected.k < expected.g1}")
    for strategy in STRATEGIES:
        result = clip_user_with(occ, upper, epsilon, bound, strategy=strategy)
        assert result.k == expected.k
        assert result.g1 == expected.g1
        assert list(result.suppressed) == expected.suppressed
        assert kept_by_pair(result) == expected.kept
        assert result.error_bound == expected.error_bound
        check_invariants(result)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_cells=st.integers(min_value=2, max_value=8),
    n_vehicles=st.integers(min_value=20, max_value=60),
    density=st.floats(min_value=0.3, max_value=0.9),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    factor=st.none() | st.floats(min_value=0.8, max_value=20.0),
)
def test_matches_on_crowded_instances(n_cells, n_vehicles, density, seed, factor) -> None:
    """Many users per stage and few cells: the batched rounds conflict and iterate."""
    rng = np.random.default_rng(seed)
    counts = {
        (str(c), str(v)): int(rng.geometric(0.2)) * (5 if rng.random() < 0.1 else 1)
        for c in range(n_cells)
        for v in range(n_vehicles)
        if rng.random() < density
    }
    occ, bound, expected = run_both(counts, 65.0, 0.5, factor)
    event(f"suppressions >= 10: {len(expected.suppressed) >= 10}")
    for strategy in STRATEGIES:
        result = clip_user_with(occ, 65.0, 0.5, bound, strategy=strategy)
        assert list(result.suppressed) == expected.suppressed
        assert result.k == expected.k
        check_invariants(result)


@settings(max_examples=300, deadline=None)
@given(
    top=st.integers(min_value=0, max_value=10**6),
    extra=st.integers(min_value=0, max_value=10**6),
    dropped=st.integers(min_value=0, max_value=10**6),
    upper=st.floats(min_value=0.01, max_value=1e3),
    epsilon=st.floats(min_value=1e-3, max_value=1e2),
)
def test_scalar_error_is_bit_identical_to_grid_error(top, extra, dropped, upper, epsilon) -> None:
    kept = top + extra
    total = kept + dropped
    if total == 0:
        return
    expected = math.inf  # nothing kept: no release
    if kept > 0:  # eq. (13) as the paper prints it, from the named numpy terms
        expected = float(
            mean_bias(upper, kept, total)
            + variance_bias(upper, kept, total)
            + 2.0 * mean_sensitivity(upper, top, kept) / epsilon
            + 2.0 * variance_sensitivity(upper, top, kept) / epsilon
        )
    assert float(grid_error(upper, epsilon, top, kept, total)) == expected
    model = ErrorModel.split(epsilon)  # eq. 13, bit for bit
    args = model.kernel_args()
    assert cell_error(upper, upper**2, *args, top, kept, total) == expected
    assert compiled_cell_error(upper, upper**2, *args, top, kept, total) == expected
    assert float(grid_error(upper, epsilon, top, kept, total, model)) == expected


@settings(max_examples=200, deadline=None)
@given(
    top=st.integers(min_value=1, max_value=10**5),
    extra=st.integers(min_value=0, max_value=10**5),
    dropped=st.integers(min_value=0, max_value=10**5),
    epsilon=st.floats(min_value=1e-3, max_value=1e2),
    share=st.sampled_from([0.0, 0.25, 0.5, 0.9]),
    quantile=st.sampled_from([1.0, math.log(20.0)]),
)
def test_generalised_error_is_identical_on_every_path(
    top, extra, dropped, epsilon, share, quantile
) -> None:
    kept, total = top + extra, top + extra + dropped
    model = ErrorModel.split(epsilon, share, quantile)
    eps_m, eps_v, weight, q = model.kernel_args()
    # The named numpy terms, composed as ErrorModel documents.
    expected = float(
        mean_bias(65.0, kept, total)
        + weight * variance_bias(65.0, kept, total)
        + q * mean_sensitivity(65.0, top, kept) / eps_m
        + weight * (q * variance_sensitivity(65.0, top, kept) / eps_v)
    )
    assert float(grid_error(65.0, epsilon, top, kept, total, model)) == expected
    args = model.kernel_args()
    assert cell_error(65.0, 65.0**2, *args, top, kept, total) == expected
    assert compiled_cell_error(65.0, 65.0**2, *args, top, kept, total) == expected
    if share == 0.0 and quantile != 1.0:  # the mean's own 95 % bound
        bound = float(mean_error(65.0, epsilon, top, kept, total))
        assert expected == pytest.approx(bound, rel=1e-8)


SYMMETRIC = {
    ("a", "10"): 1,
    ("b", "10"): 1,
    ("a", "9"): 1,
    ("b", "9"): 1,
    ("a", "ha"): 50,
    ("b", "hb"): 50,
}


def test_stage_order_is_string_order_and_ties_go_to_the_smallest_cell() -> None:
    """ "10" < "9" as strings, so "10" goes first; its two cells tie, so it takes "a"; "9" then
    prefers the untouched "b"."""
    occ = occupancy_of(SYMMETRIC)
    initial_max = float(clip_user(occ, 65.0, 0.5).initial_error.max())
    for strategy in STRATEGIES:
        result = clip_user_with(occ, 65.0, 0.5, 10 * initial_max, strategy=strategy)
        assert result.suppressed == (("a", "10"), ("b", "9"))
        assert (result.g1, result.k) == (2, 1)


def test_error_bound_larger_or_smaller_than_the_initial_max() -> None:
    """Every suppression here raises a cell's error: none with E = max E_g or below it."""
    occ = occupancy_of(SYMMETRIC)
    default = clip_user(occ, 65.0, 0.5)
    initial_max = float(default.initial_error.max())
    assert default.error_bound == initial_max
    assert (default.suppressed, default.k) == ((), 2)
    smaller = clip_user(occ, 65.0, 0.5, 0.5 * initial_max)
    assert (smaller.suppressed, smaller.k, smaller.error_bound) == ((), 2, 0.5 * initial_max)
    larger = clip_user(occ, 65.0, 0.5, 10 * initial_max)
    assert larger.k == 1 and larger.error_bound == 10 * initial_max
    assert larger.max_error > initial_max


def test_cell_ids_tie_in_string_order() -> None:
    counts = {("9", "v"): 1, ("10", "v"): 1, ("9", "h9"): 50, ("10", "h10"): 50}
    result = clip_user(occupancy_of(counts), 65.0, 0.5, 1e6)
    assert result.suppressed == (("10", "v"),)


def test_halts_mid_stage_and_keeps_the_stage_level() -> None:
    """E is exactly user "1"'s best error; user "2" (two readings per cell) exceeds it."""
    counts = {
        ("a", "1"): 1,
        ("b", "1"): 1,
        ("a", "2"): 2,
        ("b", "2"): 2,
        ("a", "ha"): 50,
        ("b", "hb"): 50,
    }
    upper, epsilon = 65.0, 0.5
    bound = float(grid_error(upper, epsilon, 50, 52, 53))  # cell a without user "1"
    for strategy in STRATEGIES:
        result = clip_user_with(occupancy_of(counts), upper, epsilon, bound, strategy=strategy)
        assert result.suppressed == (("a", "1"),)
        assert (result.g1, result.k) == (2, 2)
        assert result.error_bound == bound
        assert result.error[0] == pytest.approx(bound, rel=1e-15)


def test_zero_error_bound_suppresses_nothing() -> None:
    counts = {("a", "1"): 3, ("b", "1"): 4, ("a", "2"): 5, ("b", "2"): 1}
    result = clip_user(occupancy_of(counts), 65.0, 1.0, 0.0)
    assert result.suppressed == ()
    assert result.k == result.g1 == 2
    assert result.kept.all()


def test_never_suppresses_a_cells_last_vehicle_even_with_an_infinite_bound() -> None:
    counts = {("a", "v"): 2, ("b", "v"): 3, ("a", "u"): 1, ("c", "u"): 1, ("c", "w"): 4}
    for strategy in STRATEGIES:
        result = clip_user_with(occupancy_of(counts), 65.0, 0.5, math.inf, strategy=strategy)
        check_invariants(result)
        assert result.suppressed == (("c", "u"), ("a", "v"))  # "v" is alone in "b"
        assert result.k == 1


def test_single_cell_vehicles_need_no_stage_and_empty_input_is_fine() -> None:
    single = clip_user(occupancy_of({("a", "1"): 4, ("b", "2"): 9}), 65.0, 0.5)
    assert (single.g1, single.k, single.suppressed) == (1, 1, ())
    empty = clip_user(Occupancy.from_triples([]), 65.0, 0.5)
    assert (empty.g1, empty.k, empty.suppressed) == (0, 0, ())
    assert empty.max_error == 0.0


@pytest.mark.parametrize(
    ("upper", "epsilon", "bound"), [(0.0, 1.0, None), (1.0, 0.0, None), (1.0, 1.0, -1.0)]
)
def test_rejects_bad_parameters(upper: float, epsilon: float, bound: float | None) -> None:
    with pytest.raises(ValueError):
        clip_user(occupancy_of({("a", "1"): 1}), upper, epsilon, bound)


@pytest.mark.parametrize("seed", [0, 1])
def test_many_cells_take_the_batched_rounds_and_still_match(seed: int) -> None:
    """>= 256 cells: ``numpy`` runs batched rounds (and may fall back); same result."""
    rng = np.random.default_rng(seed)
    counts: dict[tuple[str, str], int] = {}
    for vehicle in range(700):
        for cell in rng.choice(300, size=int(rng.integers(1, 7)), replace=False):
            heavy = 6 if rng.random() < 0.05 else 1
            counts[(f"h{cell:03d}", f"v{vehicle:03d}")] = int(rng.geometric(0.2)) * heavy
    occ, bound, expected = run_both(counts, 65.0, 0.5, 3.0)
    assert len(occ.cells) >= 256 and len(expected.suppressed) > 500
    for strategy in STRATEGIES:
        result = clip_user_with(occ, 65.0, 0.5, bound, strategy=strategy)
        assert list(result.suppressed) == expected.suppressed
        assert result.k == expected.k


@pytest.mark.parametrize("factor", [None, 1.0, math.inf])
@pytest.mark.parametrize("seed", [3, 4])
def test_compiled_matches_the_uncompiled_paths_on_a_small_city(seed: int, factor) -> None:
    """Thousands of suppressions over many stages, halting mid-stage or running to K = 1:
    the kernel and the uncompiled paths agree entry for entry, in order."""
    occ = city_occupancy(np.random.default_rng(seed), 3000, 300, 6.0, 0.1)
    bound = None
    if factor is not None:
        initial = cell_errors(occ, np.ones(occ.n_entries, bool), 65.0, 0.5)
        bound = factor * float(initial.max())
    compiled = clip_user(occ, 65.0, 0.5, bound)
    assert compiled.n_suppressed > 1000 and compiled.g1 - compiled.k >= 10
    for strategy in ("numpy", "sequential"):
        result = clip_user_with(occ, 65.0, 0.5, bound, strategy=strategy)
        np.testing.assert_array_equal(result.suppressed_entries, compiled.suppressed_entries)
        np.testing.assert_array_equal(result.kept, compiled.kept)
        assert (result.k, result.g1) == (compiled.k, compiled.g1)
    check_invariants(compiled)


def test_rejects_an_unknown_strategy() -> None:
    with pytest.raises(ValueError, match="strategy"):
        clip_user_with(occupancy_of({("a", "1"): 1}), 65.0, 0.5, strategy="fast")  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [1, 2])
def test_cell_errors_with_everything_kept_equal_an_all_true_mask(seed: int) -> None:
    occ = city_occupancy(np.random.default_rng(seed), 500, 60, 4.0, 0.2)
    everything = cell_errors(occ, None, 65.0, 0.5)
    np.testing.assert_array_equal(
        everything, cell_errors(occ, np.ones(occ.n_entries, bool), 65.0, 0.5)
    )
    assert np.isfinite(everything).all()


@pytest.mark.parametrize("seed", [5, 6])
@pytest.mark.parametrize("count_scale", [1, 10**7])  # the compiled layout, then the fallback
def test_suppressor_layout_is_the_sorted_definition(seed: int, count_scale: int) -> None:
    occ = city_occupancy(np.random.default_rng(seed), 400, 50, 5.0, 0.2)
    occ = Occupancy(occ.cells, occ.vehicles, occ.cell_index, occ.vehicle_index,
                    occ.count * count_scale)  # fmt: skip
    run = ClipUserRun(occ, 65.0, 0.5, math.inf)
    n = occ.n_entries
    by_vehicle = np.argsort(occ.vehicle_index, kind="stable")
    by_cell = np.lexsort((-occ.count, occ.cell_index))
    np.testing.assert_array_equal(run.by_vehicle, by_vehicle)
    np.testing.assert_array_equal(run.by_cell, np.append(by_cell, n))
    np.testing.assert_array_equal(run.position[run.by_cell], np.arange(n + 1))
    np.testing.assert_array_equal(run.sorted_count, np.append(occ.count[by_cell], 0))
    np.testing.assert_array_equal(run.grids, np.bincount(occ.vehicle_index))
    np.testing.assert_array_equal(run.vehicle_start, np.searchsorted(
        occ.vehicle_index[by_vehicle], np.arange(len(occ.vehicles) + 1)))  # fmt: skip
    np.testing.assert_array_equal(run.cell_end, np.cumsum(np.bincount(occ.cell_index)))
    cells, counts, positions = run.slots
    np.testing.assert_array_equal(cells, occ.cell_index[by_vehicle])
    np.testing.assert_array_equal(counts, occ.count[by_vehicle])
    np.testing.assert_array_equal(positions, run.position[by_vehicle])
    bound = 3.0 * float(run.initial_error.max())  # the kernel over either layout
    compiled = clip_user(occ, 65.0, 0.5, bound)
    sequential = clip_user_with(occ, 65.0, 0.5, bound, strategy="sequential")
    assert compiled.n_suppressed > 0
    np.testing.assert_array_equal(compiled.suppressed_entries, sequential.suppressed_entries)
