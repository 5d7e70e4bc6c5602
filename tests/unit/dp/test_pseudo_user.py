"""Pseudo-user post-step (``stream_dp.dp.pseudo_user``) against a scan of every integer cap."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dp.dp.clip_user import ClipUserResult, cell_errors, clip_user
from stream_dp.dp.grid_error import grid_error, variance_sensitivity
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.pseudo_user import no_pseudo_user, pseudo_user_step


def scan(
    kept: np.ndarray, total: int, upper: float, epsilon: float, limit: int | None
) -> tuple[int, float]:
    """Every allowed integer cap in [min, max]; first (smallest) minimiser."""
    lo, hi = int(kept.min()), int(kept.max())
    best_cap, best = -1, np.inf
    for cap in range(lo, hi + 1):
        if limit is not None and cap > limit and cap != hi:
            continue
        value = float(grid_error(upper, epsilon, cap, int(np.minimum(kept, cap).sum()), total))
        if value < best:
            best_cap, best = cap, value
    return best_cap, best


def manual_clip(counts: dict[tuple[str, str], int], suppressed: set[tuple[str, str]], upper, eps):
    """A ``ClipUserResult`` with a chosen kept mask (for hand-made cells)."""
    occ = Occupancy.from_triples((c, v, m) for (c, v), m in counts.items())
    kept = np.array(
        [
            (occ.cells[c], occ.vehicles[v]) not in suppressed
            for c, v in zip(occ.cell_index, occ.vehicle_index, strict=True)
        ]
    )
    errors = cell_errors(occ, kept, upper, eps)
    return ClipUserResult(
        occupancy=occ,
        upper=upper,
        epsilon=eps,
        kept=kept,
        g1=0,
        k=0,
        error_bound=float(errors.max()),
        initial_error=cell_errors(occ, np.ones_like(kept), upper, eps),
        error=errors,
        suppressed_entries=np.flatnonzero(~kept),
    )


@st.composite
def clipped(draw):
    n_cells = draw(st.integers(min_value=1, max_value=4))
    n_vehicles = draw(st.integers(min_value=1, max_value=8))
    size = st.integers(min_value=1, max_value=draw(st.sampled_from([5, 60, 400])))
    counts = {
        (f"c{c}", f"v{v}"): draw(size)
        for c in range(n_cells)
        for v in range(n_vehicles)
        if draw(st.booleans())
    }
    if not counts:
        counts = {("c0", "v0"): draw(size)}
    upper = draw(st.sampled_from([1.0, 65.0]))
    epsilon = draw(st.sampled_from([0.05, 0.5, 2.0, 20.0]))
    occ = Occupancy.from_triples((c, v, m) for (c, v), m in counts.items())
    factor = draw(st.sampled_from([1.0, 3.0, 100.0]))
    initial = float(cell_errors(occ, np.ones(occ.n_entries, bool), upper, epsilon).max())
    return clip_user(occ, upper, epsilon, factor * initial), upper, epsilon


@pytest.mark.parametrize("method", ["auto", "scan", "candidates"])
@settings(max_examples=150, deadline=None)
@given(case=clipped(), limit=st.none() | st.integers(min_value=0, max_value=80))
def test_matches_a_scan_of_every_cap(method, case, limit) -> None:
    clip, upper, epsilon = case
    occ = clip.occupancy
    result = pseudo_user_step(clip, upper, epsilon, limit, method=method)
    total = occ.total_per_cell()
    for cell in range(len(occ.cells)):
        mine = (occ.cell_index == cell) & clip.kept
        kept = occ.count[mine]
        cap, best = scan(kept, int(total[cell]), upper, epsilon, limit)
        assert result.cap[cell] == cap
        assert result.error[cell] == best
        assert limit is None or cap <= limit or cap == kept.max()
        np.testing.assert_array_equal(result.kept_count[mine], np.minimum(kept, cap))
        kept_sum, top = int(np.minimum(kept, cap).sum()), min(cap, int(kept.max()))
        assert result.cap[cell] == top  # the mean's eq. (9) uses the cap as its top
        assert result.variance_sensitivity[cell] == variance_sensitivity(upper, top, kept_sum)
    np.testing.assert_array_equal(result.kept_count[~clip.kept], 0)
    # K is unchanged: every vehicle keeps exactly its cells.
    np.testing.assert_array_equal(result.kept_count > 0, clip.kept)
    # No cell's error grows.
    assert (result.error <= clip.error).all()
    assert result.max_error <= clip.max_error


@pytest.mark.parametrize(
    ("kept", "dropped", "epsilon", "expected"),
    [
        ((1, 3), 5, 1.0, 1),  # caps 1 and 2 tie exactly (U = 4)
        ((1, 1, 6), 4, 2.0, 1),  # caps 1 and 6 tie exactly
    ],
)
@pytest.mark.parametrize("method", ["scan", "candidates"])
def test_exact_ties_go_to_the_smallest_cap(kept, dropped, epsilon, expected, method) -> None:
    upper = 4.0
    counts = {("g", f"v{i}"): m for i, m in enumerate(kept)} | {("g", "gone"): dropped}
    clip = manual_clip(counts, {("g", "gone")}, upper, epsilon)
    total = sum(kept) + dropped
    values = {
        c: float(grid_error(upper, epsilon, c, int(np.minimum(kept, c).sum()), total))
        for c in range(min(kept), max(kept) + 1)
    }
    tied = [c for c, v in values.items() if v == min(values.values())]
    assert len(tied) >= 2 and tied[0] == expected
    result = pseudo_user_step(clip, upper, epsilon, method=method)
    assert int(result.cap[0]) == expected
    assert result.error[0] == min(values.values())


@pytest.mark.parametrize(
    ("kept", "dropped", "epsilon", "expected"),
    [((1, 19), 4, 0.5, 2), ((9, 13), 4, 0.05, 12), ((2, 27), 6, 0.05, 3)],
)
@pytest.mark.parametrize("method", ["scan", "candidates"])
def test_the_best_cap_can_lie_strictly_between_kept_counts(
    kept, dropped, epsilon, expected, method
):
    """Odd ``S`` lowers the variance sensitivity (Lemma III.3), so interior caps can win."""
    upper = 65.0
    counts = {("g", f"v{i}"): m for i, m in enumerate(kept)} | {("g", "gone"): dropped}
    clip = manual_clip(counts, {("g", "gone")}, upper, epsilon)
    result = pseudo_user_step(clip, upper, epsilon, method=method)
    assert int(result.cap[0]) == expected and expected not in kept
    total = sum(kept) + dropped
    at_kept_counts = [
        float(grid_error(upper, epsilon, c, int(np.minimum(kept, c).sum()), total)) for c in kept
    ]
    assert result.error[0] < min(at_kept_counts)
    limited = pseudo_user_step(clip, upper, epsilon, prefix_limit=expected - 1, method=method)
    assert limited.cap[0] <= expected - 1 or limited.cap[0] == max(kept)
    assert result.error[0] < limited.error[0] <= clip.error[0]


@pytest.mark.parametrize("method", ["scan", "candidates"])
def test_prefix_limit_below_every_count_leaves_the_cell_uncut(method) -> None:
    counts = {("g", "a"): 5, ("g", "b"): 9, ("g", "c"): 30}
    clip = clip_user(Occupancy.from_triples((c, v, m) for (c, v), m in counts.items()), 65.0, 0.5)
    result = pseudo_user_step(clip, 65.0, 0.5, prefix_limit=4, method=method)
    assert result.cap[0] == 30
    np.testing.assert_array_equal(result.kept_count, clip.kept_count)
    assert result.error[0] == clip.error[0]


def test_no_pseudo_user_keeps_clip_user_counts() -> None:
    counts = {("a", "1"): 3, ("a", "2"): 7, ("b", "1"): 2, ("b", "3"): 11}
    clip = manual_clip(counts, {("a", "1")}, 65.0, 0.5)
    result = no_pseudo_user(clip)
    np.testing.assert_array_equal(result.cap, [7, 11])
    np.testing.assert_array_equal(result.kept_count, clip.kept_count)
    np.testing.assert_array_equal(result.error, clip.error)


def test_rejects_bad_parameters() -> None:
    clip = clip_user(Occupancy.from_triples([("a", "1", 2)]), 65.0, 0.5)
    with pytest.raises(ValueError):
        pseudo_user_step(clip, 65.0, 0.0)
    with pytest.raises(ValueError):
        pseudo_user_step(clip, 65.0, 0.5, prefix_limit=-1)
    with pytest.raises(ValueError, match="unknown method"):
        pseudo_user_step(clip, 65.0, 0.5, method="guess")  # type: ignore[arg-type]
