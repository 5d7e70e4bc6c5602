"""The release builds occupancies grouped by cell but, within a cell, in the merged columns'
order (not by vehicle). Everything computed from an occupancy must not depend on that order:
CLIP-USER, the pseudo-user cap, the budget mask and the per-vehicle losses."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dp.dp.budget_ledger import WindowLoss, limit_to_budget
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.pseudo_user import pseudo_user_step
from stream_dp.dp.synthetic import city_occupancy
from tests.support.clip_user_strategies import Strategy, clip_user_with

COUNTS = st.dictionaries(
    st.tuples(st.sampled_from("abcdef"), st.text(alphabet="0129", min_size=1, max_size=2)),
    st.integers(min_value=1, max_value=9),
    min_size=1,
    max_size=60,
)


def shuffled_within_cells(occ: Occupancy, rng: np.random.Generator) -> tuple[Occupancy, np.ndarray]:
    """The same occupancy with each cell's entries in a random order, and ``perm`` such that
    entry ``i`` of the result is entry ``perm[i]`` of ``occ``."""
    perm = np.lexsort((rng.random(occ.n_entries), occ.cell_index))
    shuffled = Occupancy(
        cells=occ.cells,
        vehicles=occ.vehicles,
        cell_index=occ.cell_index[perm],
        vehicle_index=occ.vehicle_index[perm],
        count=occ.count[perm],
    )
    return shuffled, perm


def assert_same_release(occ: Occupancy, seed: int, strategy: Strategy = "compiled") -> None:
    rng = np.random.default_rng(seed)
    other, perm = shuffled_within_cells(occ, rng)
    a = clip_user_with(occ, 65.0, 0.5, strategy=strategy)
    b = clip_user_with(other, 65.0, 0.5, strategy=strategy)
    assert (a.k, a.g1, a.error_bound) == (b.k, b.g1, b.error_bound)
    assert a.suppressed == b.suppressed
    np.testing.assert_array_equal(a.kept[perm], b.kept)
    np.testing.assert_array_equal(a.error, b.error)
    for method in ("scan", "candidates"):
        pa = pseudo_user_step(a, 65.0, 0.5, prefix_limit=4, method=method)
        pb = pseudo_user_step(b, 65.0, 0.5, prefix_limit=4, method=method)
        np.testing.assert_array_equal(pa.cap, pb.cap)
        np.testing.assert_array_equal(pa.error, pb.error)
        np.testing.assert_array_equal(pa.kept_count[perm], pb.kept_count)
    allowed = rng.integers(0, 4, len(occ.vehicles))
    np.testing.assert_array_equal(
        limit_to_budget(occ, allowed)[perm], limit_to_budget(other, allowed)
    )
    la = WindowLoss.of_occupancy(0, 0.5, occ, a.kept)
    lb = WindowLoss.of_occupancy(0, 0.5, other, b.kept)
    assert la.vehicles == lb.vehicles
    np.testing.assert_array_equal(la.cells, lb.cells)


@given(COUNTS, st.integers(0, 2**32 - 1), st.sampled_from(["compiled", "sequential", "numpy"]))
@settings(max_examples=150, deadline=None)
def test_small_occupancies_release_the_same_in_any_order_within_cells(counts, seed, strategy):
    occ = Occupancy.from_triples((c, v, m) for (c, v), m in counts.items())
    assert_same_release(occ, seed, strategy)


@pytest.mark.parametrize("seed", range(4))
def test_city_occupancies_release_the_same_in_any_order_within_cells(seed):
    occ = city_occupancy(np.random.default_rng(seed), 3000, 200, 6.0, 0.1)
    assert_same_release(occ, seed)
