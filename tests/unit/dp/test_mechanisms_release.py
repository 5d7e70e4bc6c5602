"""Every registered mean mechanism: registry, budget accounting, noise scale, bounds, prefixes."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from stream_dp.dp.mechanism_specs import MEAN_MECHANISM_NAMES
from stream_dp.dp.mechanisms import (
    MEAN_MECHANISMS,
    CellData,
    InsufficientPrefixError,
    MeanMechanism,
    MeanRelease,
    get_mean_mechanism,
)
from stream_dp.dp.mechanisms.akmv import AkmvMean, clipped_sum_mean
from stream_dp.dp.mechanisms.array_averaging import ArrayAveraging, estimate
from stream_dp.dp.mechanisms.baseline import BaselineMean
from stream_dp.dp.mechanisms.clip import ClipMean, clipped_mean
from stream_dp.dp.mechanisms.cummings import CummingsMean, cohorts, final_stage
from stream_dp.dp.mechanisms.grouping import array_means
from stream_dp.dp.mechanisms.levy import LevyMean, projected_mean
from stream_dp.dp.mechanisms.quantile import QuantileMean
from stream_dp.dp.mechanisms.worst_case_optimal import (
    WorstCaseOptimalMean,
    optimal_threshold,
    projected_estimate,
    projection_bounds,
)
from stream_dp.dp.randomness import RandomSource

U = 65.0
DELTA = 1e-6
NAMES = sorted(MEAN_MECHANISMS)


#: The mechanisms that state a data-independent worst-case error (their specs say so).
STATES_BOUND = {name for name, spec in MEAN_MECHANISMS.items() if spec.states_error_bound}


def _mechanism(name: str, **params: object) -> MeanMechanism:
    if MEAN_MECHANISMS[name].needs_delta:
        params.setdefault("delta", DELTA)
    return get_mean_mechanism(name, **params)


def _cell(seed: int = 0, n: int = 24, prefix: int | None = None) -> CellData:
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 25, size=n)
    readings = [np.clip(rng.normal(20.7, 10.7, size=c), 0, U) for c in counts]
    return CellData.from_readings(readings, U, prefix_length=prefix)


def _estimate(mechanism: MeanMechanism, cell: CellData, release: MeanRelease, eps: float) -> float:
    """The mechanism's statistic before noise, rebuilt from the recorded parameters."""
    params = release.parameters
    counts = cell.counts
    if isinstance(mechanism, ClipMean):
        return clipped_mean(cell, counts if cell.kept_counts is None else cell.kept_counts)
    if isinstance(mechanism, BaselineMean):
        return float(cell.sums.sum() / counts.sum())
    if isinstance(mechanism, ArrayAveraging):
        return estimate(mechanism.grouping_for(counts, eps), cell, mechanism.fill)
    if isinstance(mechanism, LevyMean | QuantileMean):
        grouping = mechanism.grouping_for(counts, eps / 2)
        return projected_mean(array_means(grouping, cell, mechanism.fill), *params["interval"])
    if isinstance(mechanism, WorstCaseOptimalMean):
        low, high = projection_bounds(counts, U, optimal_threshold(counts, U, eps))
        return projected_estimate(cell, U, low, high, "user-mean")
    if isinstance(mechanism, AkmvMean):
        return clipped_sum_mean(cell.sums, counts, params["threshold"])
    if isinstance(mechanism, CummingsMean):
        final = cohorts(counts, eps).final
        initial = (
            params["initial_mean"],
            params["initial_mean_accuracy"],
            params["initial_variance"],
        )
        stage = final_stage(
            cell.user_means()[final] / U, counts[final], cell.n_vehicles, initial, eps, 0.05
        )
        return U * stage.estimate
    raise AssertionError(mechanism.name)


# -- registry ---------------------------------------------------------------------------------


def test_registry_has_every_mechanism_of_the_issue() -> None:
    assert set(MEAN_MECHANISMS) == set(MEAN_MECHANISM_NAMES)
    assert len(MEAN_MECHANISM_NAMES) == 12


@pytest.mark.parametrize("name", NAMES)
def test_release_names_its_mechanism(name: str) -> None:
    mechanism = _mechanism(name)
    assert mechanism.name == name
    release = mechanism.release(_cell(), U, 1.0, RandomSource.seeded_for_tests(1))
    assert release.mechanism == name


@pytest.mark.parametrize(
    ("name", "params", "fragment"),
    [
        ("no-such-mechanism", {}, "no-such-mechanism"),
        ("cummings", {}, "delta"),
        ("cummings", {"delta": 1.5}, "delta"),
        ("levy", {"bogus": 1}, "levy"),
        ("levy", {"gamma": 0.0}, "gamma"),
        ("array-averaging-bestfit", {"fill": "zeros"}, "fill"),
        ("array-averaging-bestfit", {"m_ub": "mode"}, "m_ub"),
        ("quantile-fixed", {"grouping": "firstfit"}, "grouping"),
        ("baseline", {"name": "x"}, "name"),
        ("opt-array-averaging", {"m_ub": "median"}, "m_ub"),
        ("array-averaging-wrap", {"grouping": "bestfit"}, "grouping"),
    ],
)
def test_bad_names_and_parameters_raise_value_error(
    name: str, params: dict[str, object], fragment: str
) -> None:
    with pytest.raises(ValueError, match=fragment):
        get_mean_mechanism(name, **params)


# -- privacy accounting -----------------------------------------------------------------------


SUB_BUDGETS: dict[str, Callable[[MeanRelease], float]] = {
    "levy": lambda r: r.parameters["interval_epsilon"] + r.parameters["mean_epsilon"],
    "quantile-fixed": lambda r: (
        r.parameters["lower_epsilon"] + r.parameters["upper_epsilon"] + r.parameters["mean_epsilon"]
    ),
    "quantile-optimized": lambda r: (
        r.parameters["lower_epsilon"] + r.parameters["upper_epsilon"] + r.parameters["mean_epsilon"]
    ),
    "akmv": lambda r: r.parameters["threshold_epsilon"] + r.parameters["mean_epsilon"],
}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("epsilon", [0.25, 1.0, 3.0])
def test_budget_is_spent_exactly_and_split_as_recorded(name: str, epsilon: float) -> None:
    release = _mechanism(name).release(_cell(), U, epsilon, RandomSource.seeded_for_tests(2))
    assert release.epsilon_spent == epsilon
    if MEAN_MECHANISMS[name].needs_delta:
        # Three disjoint cohorts, each used once: parallel composition.
        assert release.delta_spent == DELTA
        assert release.parameters["composition"] == "parallel"
        for key in ("initial_mean_epsilon", "initial_variance_epsilon", "mean_epsilon"):
            assert release.parameters[key] == epsilon
    else:
        assert release.delta_spent == 0.0
        total = SUB_BUDGETS.get(name, lambda r: r.parameters["mean_epsilon"])(release)
        assert total == epsilon


# -- noise scale and post-processing ------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_noise_has_the_recorded_laplace_scale(name: str) -> None:
    """|raw - statistic| / scale is Exp(1): mean 1, standard deviation 1."""
    mechanism, cell, epsilon = _mechanism(name), _cell(3), 0.8
    source = RandomSource.seeded_for_tests(4)
    n = 600
    normalised = []
    for _ in range(n):
        release = mechanism.release(cell, U, epsilon, source)
        scale = release.parameters["noise_scale"]
        step_epsilon = release.parameters["mean_epsilon"]
        assert scale == pytest.approx(release.sensitivity / step_epsilon, rel=1e-9)
        if scale > 0:
            normalised.append(abs(release.raw_value - _estimate(mechanism, cell, release, epsilon)))
            normalised[-1] /= scale
    assert len(normalised) == n
    assert abs(np.mean(normalised) - 1.0) <= 4.0 / math.sqrt(n)


@pytest.mark.parametrize("name", NAMES)
def test_outputs_are_clamped_into_the_range(name: str) -> None:
    # All readings at the edges and a small budget: raw values often fall outside [0, U].
    rng = np.random.default_rng(5)
    readings = [np.full(int(c), U * (i % 2)) for i, c in enumerate(rng.integers(1, 9, size=12))]
    cell = CellData.from_readings(readings, U)
    mechanism, source = _mechanism(name), RandomSource.seeded_for_tests(6)
    outside, noisy = 0, 0
    for _ in range(150):
        release = mechanism.release(cell, U, 0.05, source)
        assert 0.0 <= release.value <= U
        assert release.value == min(max(release.raw_value, 0.0), U)
        outside += not 0.0 <= release.raw_value <= U
        noisy += release.sensitivity != 0.0  # worst-case-optimal: T = 0, no noise at all
    assert outside > 0 or noisy == 0


def test_worst_case_errors_are_published_where_they_exist() -> None:
    cell, source = _cell(), RandomSource.seeded_for_tests(7)
    assert STATES_BOUND  # the specs name some
    for name in NAMES:
        release = _mechanism(name).release(cell, U, 1.0, source)
        assert (release.worst_case_error is not None) == (name in STATES_BOUND), name
        if release.worst_case_error is not None:
            assert release.worst_case_error >= release.sensitivity / 1.0


def test_worst_case_optimal_with_tiny_budget_releases_half_range_without_noise() -> None:
    cell = _cell(n=10)
    release = _mechanism("worst-case-optimal").release(
        cell, U, 0.1, RandomSource.seeded_for_tests(8)
    )
    assert release.parameters["threshold"] == 0.0  # eps < 2/L
    assert release.sensitivity == 0.0
    assert release.value == U / 2
    assert release.worst_case_error == U / 2


# -- bounded prefixes and suppressed vehicles ---------------------------------------------------


READINGS_VARIANTS = [
    ("array-averaging-wrap", {"fill": "readings"}),
    ("array-averaging-bestfit", {"fill": "readings"}),
    ("levy", {"fill": "readings"}),
    ("quantile-fixed", {"fill": "readings"}),
    ("opt-array-averaging", {"fill": "readings"}),
    ("worst-case-optimal", {"fill": "readings"}),
    ("cummings", {}),
]


@pytest.mark.parametrize(("name", "params"), READINGS_VARIANTS)
def test_prefix_needed_is_enough_and_exact(name: str, params: dict[str, object]) -> None:
    mechanism, epsilon = _mechanism(name, **params), 1.5
    full = _cell(9, n=30)
    need = mechanism.prefix_needed(full.counts, epsilon)
    bounded = CellData(
        full.counts,
        full.sums,
        full.sumsqs,
        tuple(p[: int(k)] for p, k in zip(full.prefixes, need, strict=True)),
    )
    first = mechanism.release(full, U, epsilon, RandomSource.seeded_for_tests(10))
    second = mechanism.release(bounded, U, epsilon, RandomSource.seeded_for_tests(10))
    assert second.value == pytest.approx(first.value, rel=1e-12, abs=1e-9)
    if need.max() > 0:
        short = CellData(
            full.counts,
            full.sums,
            full.sumsqs,
            tuple(p[: max(int(k) - 1, 0)] for p, k in zip(full.prefixes, need, strict=True)),
        )
        with pytest.raises(InsufficientPrefixError):
            mechanism.release(short, U, epsilon, RandomSource.seeded_for_tests(10))


@pytest.mark.parametrize("name", [n for n in NAMES if not MEAN_MECHANISMS[n].reads_prefix])
def test_default_variants_need_aggregates_only(name: str) -> None:
    cell = _cell(11)
    empty = CellData(cell.counts, cell.sums, cell.sumsqs, tuple(np.empty(0) for _ in cell.prefixes))
    assert _mechanism(name).prefix_needed(cell.counts, 1.0).max() == 0
    first = _mechanism(name).release(cell, U, 1.0, RandomSource.seeded_for_tests(12))
    second = _mechanism(name).release(empty, U, 1.0, RandomSource.seeded_for_tests(12))
    assert second.value == pytest.approx(first.value, rel=1e-12, abs=1e-9)


@pytest.mark.parametrize("name", [n for n in NAMES if not MEAN_MECHANISMS[n].window_combiner])
def test_suppressed_vehicles_are_left_out(name: str) -> None:
    cell = _cell(13)
    kept = cell.counts.copy()
    kept[::3] = 0  # CLIP-USER suppressed these vehicles in this cell
    marked = CellData(cell.counts, cell.sums, cell.sumsqs, cell.prefixes, kept_counts=kept)
    index = np.flatnonzero(kept > 0)
    reduced = CellData(
        cell.counts[index],
        cell.sums[index],
        cell.sumsqs[index],
        tuple(cell.prefixes[i] for i in index.tolist()),
    )
    first = _mechanism(name).release(marked, U, 1.0, RandomSource.seeded_for_tests(14))
    second = _mechanism(name).release(reduced, U, 1.0, RandomSource.seeded_for_tests(14))
    assert first.value == second.value


def test_clip_uses_the_first_kept_readings() -> None:
    readings = [[10.0, 20.0, 30.0], [40.0, 50.0], [60.0]]
    cell = CellData.from_readings(readings, U, kept_counts=[2, 0, 1])
    release = _mechanism("clip").release(cell, U, 1.0, RandomSource.seeded_for_tests(15))
    assert release.sensitivity == pytest.approx(U * 2 / 3)
    assert release.parameters["kept"] == 3 and release.parameters["total"] == 6
    assert release.worst_case_error == pytest.approx(U * (1 - 3 / 6) + U * 2 / 3)
    assert clipped_mean(cell, cell.kept_counts) == pytest.approx((10 + 20 + 60) / 3)
    assert list(_mechanism("clip").prefix_needed(cell.counts, 1.0, cell.kept_counts)) == [2, 0, 0]
    with pytest.raises(ValueError, match="suppressed"):
        _mechanism("clip").release(
            CellData.from_readings(readings, U, kept_counts=[0, 0, 0]), U, 1.0
        )


# -- inputs -----------------------------------------------------------------------------------


def test_cell_data_clamps_and_validates() -> None:
    cell = CellData.from_readings([[-5.0, 70.0], [3.0]], U, prefix_length=1)
    assert cell.sums.tolist() == [U, 3.0]
    assert [p.tolist() for p in cell.prefixes] == [[0.0], [3.0]]
    raw = CellData(np.array([1]), np.array([80.0]), np.array([6400.0]), (np.array([80.0]),))
    with pytest.raises(ValueError, match="clamp"):
        _mechanism("baseline").release(raw, U, 1.0)
    with pytest.raises(ValueError, match="count"):
        CellData(np.array([0]), np.array([0.0]), np.array([0.0]), (np.empty(0),))
    with pytest.raises(ValueError, match="prefix"):
        CellData(np.array([1]), np.array([1.0]), np.array([1.0]), (np.array([1.0, 1.0]),))
    with pytest.raises(ValueError, match="epsilon"):
        _mechanism("baseline").release(cell, U, 0.0)


def test_default_source_is_cryptographic() -> None:
    release = _mechanism("baseline").release(_cell(), U, 1.0)  # no source: secure default
    assert 0.0 <= release.value <= U


@pytest.mark.parametrize("name", ["levy", "quantile-fixed", "quantile-optimized"])
def test_interval_mechanisms_under_wraparound_double_the_sensitivity(name: str) -> None:
    cell = _cell(16)
    bestfit = _mechanism(name).release(cell, U, 1.0, RandomSource.seeded_for_tests(17))
    wrap = _mechanism(name, grouping="wraparound").release(
        cell, U, 1.0, RandomSource.seeded_for_tests(17)
    )
    for release in (bestfit, wrap):
        low, high = release.parameters["interval"]
        factor = 2 if release.parameters["grouping"] == "wraparound" else 1
        assert release.sensitivity == pytest.approx(
            factor * (high - low) / release.parameters["groups"]
        )
