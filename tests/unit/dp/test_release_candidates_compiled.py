"""The compiled candidate build (dp/release_candidates_compiled.py) equals the numpy form."""

from __future__ import annotations

import numpy as np
import pytest

from stream_dp.dp import release_candidates as numpy_form
from stream_dp.dp import release_candidates_compiled as compiled
from stream_dp.dp.release_choice import Candidates

FIELDS = ("epsilon", "cap", "kept", "error", "meets", "useful", "total", "entry_count", "sits_out")


def _equal_candidates(a: Candidates, b: Candidates) -> None:
    for field in ("group", "value", "start", "vehicle", "pay"):
        x, y = getattr(a, field), getattr(b, field)
        assert x.dtype == y.dtype and np.array_equal(x, y), field


@pytest.mark.parametrize(("prefix_limit", "mean_share", "seed"),
                         [(None, 1.0, 1), (6, 1.0, 2), (None, 0.8, 3), (12, 0.9, 4)])  # fmt: skip
def test_the_compiled_build_equals_the_numpy_form(
    prefix_limit: int | None, mean_share: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    n_cells, n_vehicles = 300, 40
    sizes = rng.integers(1, 25, n_cells)
    start = np.r_[0, np.cumsum(sizes)].astype(np.int64)
    vehicle = np.concatenate([rng.choice(n_vehicles, k, replace=False) for k in sizes])
    counts = rng.integers(1, 40, len(vehicle)).astype(np.int64)
    out = rng.random(len(vehicle)) < 0.15
    out[start[0] : start[1]] = True  # a cell where everyone sits out: no allowed cap
    settings = {"upper": 65.0, "target": 20.0, "tau": 6.5, "factors": np.array([1, 1.5, 2, 3.0]),
                "max_epsilon": 3.5, "mean_share": mean_share, "prefix_limit": prefix_limit,
                "min_vehicles": 5, "sits_out": out}  # fmt: skip
    want = numpy_form.cell_options(start, counts, **settings)
    got = compiled.cell_options(start, counts, **settings)
    for field in FIELDS:
        x, y = getattr(want, field), getattr(got, field)
        assert x.dtype == y.dtype and np.array_equal(x, y), field
    assert 20 < want.meets.sum() < want.meets.size  # both kinds of option are compared
    pay = numpy_form.entry_payments(start, want, mean_share)
    assert np.array_equal(pay, compiled.entry_payments(start, got, mean_share))
    assert ((pay > 0) & (pay < want.epsilon[np.repeat(np.arange(n_cells), sizes)])).any()
    group, layout = rng.integers(0, 60, n_cells), rng.integers(0, 3, n_cells)
    stale = rng.uniform(0, 0.3, n_cells)
    want_c, want_col = numpy_form.grouped_candidates(start, vehicle, want, pay, group, layout,
                                                     stale)  # fmt: skip
    got_c, got_col = compiled.grouped_candidates(start, vehicle, got, pay, group, layout, stale)
    _equal_candidates(want_c, got_c)
    fused = compiled.cell_candidates(start, vehicle, got, mean_share, group, layout, stale)
    _equal_candidates(want_c, fused[0])
    assert np.array_equal(want_col, got_col)
    ordered = np.concatenate([np.sort(vehicle[a:b]) for a, b in zip(start, start[1:])])  # noqa: B905
    alone = np.arange(n_cells)  # a cell per group, its vehicles ascending: the direct copy
    _equal_candidates(
        numpy_form.grouped_candidates(start, ordered, want, pay, alone, alone * 0)[0],
        compiled.grouped_candidates(start, ordered, got, pay, alone, alone * 0)[0],
    )
    n_cover = rng.integers(0, 4, len(want_c.value))
    covers = rng.integers(0, 50, int(n_cover.sum()))
    covers_start = np.r_[0, np.cumsum(n_cover)]
    want_x = numpy_form.with_exclusions(want_c, covers_start, covers, n_vehicles)
    _equal_candidates(want_x, compiled.with_exclusions(got_c, covers_start, covers, n_vehicles))
