"""Brute force of every closed form in ``stream_dp.dp.grid_error`` on all small instances.

Instances: every count vector ``m`` with total <= 7 (a partition: user order is irrelevant)
and every kept vector ``0 <= Gamma <= m`` with ``sum Gamma > 0``. User ``l``'s readings are
positions ``1..m_l``; the kept ones are the first ``Gamma_l``.
- Biases (Thm IV.1, IV.2 with the erratum): maximise over datasets with readings in {0, U}.
- Sensitivities (eq. 9, Lemma III.3): maximise ``|f(D1) - f(D2)|`` over neighbours that differ
  in one user's kept readings, readings on a grid in [0, U] (only kept readings matter).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from functools import cache

import numpy as np
import pytest

from stream_dp.dp.grid_error import (
    grid_error,
    mean_bias,
    mean_sensitivity,
    variance_bias,
    variance_sensitivity,
)

MAX_TOTAL = 7
RTOL = 1e-9
UPPERS = (1.0, 65.0)


def partitions(total: int, largest: int | None = None) -> Iterator[tuple[int, ...]]:
    """Non-increasing positive tuples summing to ``total``."""
    if total == 0:
        yield ()
        return
    for first in range(min(total, largest or total), 0, -1):
        for rest in partitions(total - first, first):
            yield (first, *rest)


def instances() -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """All ``(m, Gamma)`` with ``sum m <= MAX_TOTAL``, ``sum Gamma > 0``, up to user order."""
    seen: set[tuple[tuple[int, int], ...]] = set()
    out = []
    for total in range(1, MAX_TOTAL + 1):
        for m in partitions(total):
            for gamma in itertools.product(*(range(ml + 1) for ml in m)):
                key = tuple(sorted(zip(m, gamma, strict=True)))
                if sum(gamma) > 0 and key not in seen:
                    seen.add(key)
                    out.append((m, gamma))
    return out


INSTANCES = instances()


def assert_close(actual: float, expected: float) -> None:
    assert actual == pytest.approx(expected, rel=RTOL, abs=1e-12)


def population_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise mean and (population, eq. 4/7) variance."""
    mean = x.mean(axis=1)
    return mean, ((x - mean[:, None]) ** 2).mean(axis=1)


@cache
def brute_biases(m: tuple[int, ...], gamma: tuple[int, ...], upper: float, levels: int):
    """max |mu - mu_clip| and max |Var - Var_clip| over readings in ``levels`` equispaced values."""
    kept = np.concatenate([np.arange(ml) < gl for ml, gl in zip(m, gamma, strict=True)])
    values = np.linspace(0.0, upper, levels)
    data = np.array(list(itertools.product(values, repeat=len(kept))))
    mu, var = population_stats(data)
    mu_clip, var_clip = population_stats(data[:, kept])
    return float(np.abs(mu - mu_clip).max()), float(np.abs(var - var_clip).max())


@cache
def brute_sensitivities(gamma: tuple[int, ...], upper: float, levels: int):
    """max over neighbours (one user's kept readings changed) of |mu diff| and |Var diff|."""
    values = np.linspace(0.0, upper, levels)
    total = sum(gamma)
    best_mu = best_var = 0.0
    for own in set(gamma) - {0}:
        # rows: the other users' readings (fixed); columns: the changing user's readings.
        others = np.array(list(itertools.product(values, repeat=total - own)), ndmin=2)
        mine = np.array(list(itertools.product(values, repeat=own)))
        mu = (others.sum(axis=1)[:, None] + mine.sum(axis=1)[None, :]) / total
        second = ((others**2).sum(axis=1)[:, None] + (mine**2).sum(axis=1)[None, :]) / total
        var = second - mu**2
        best_mu = max(best_mu, float((mu.max(axis=1) - mu.min(axis=1)).max()))
        best_var = max(best_var, float((var.max(axis=1) - var.min(axis=1)).max()))
    return best_mu, best_var


def positive(gamma: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(sorted((g for g in gamma if g > 0), reverse=True))


def printed_variance_bias(upper: float, kept: int, total: int) -> float:
    """Thm IV.2 exactly as printed (first case at ``M > 2S``): wrong, see docs/math.md §10.1."""
    if kept == total:
        return 0.0
    if total > 2 * kept:
        return upper**2 * kept * (total - kept) / total**2
    if total % 2 == 0:
        return upper**2 / 4
    return upper**2 / 4 * (1 - 1 / total**2)


def test_instance_enumeration_is_complete() -> None:
    assert len(list(partitions(7))) == 15
    assert ((3, 2, 1), (1, 0, 1)) in INSTANCES
    assert all(sum(m) <= MAX_TOTAL and 0 < sum(g) for m, g in INSTANCES)
    assert len(INSTANCES) > 500


@pytest.mark.parametrize("upper", UPPERS)
def test_biases_match_brute_force_on_extreme_readings(upper: float) -> None:
    for m, gamma in INSTANCES:
        brute_mu, brute_var = brute_biases(m, gamma, upper, 2)
        assert_close(float(mean_bias(upper, sum(gamma), sum(m))), brute_mu)
        assert_close(float(variance_bias(upper, sum(gamma), sum(m))), brute_var)


def test_biases_are_not_exceeded_on_a_finer_grid() -> None:
    """The {0, U} reduction is sound: five levels never beat the closed forms."""
    upper = 65.0
    for m, gamma in INSTANCES:
        if sum(m) > 5:
            continue
        brute_mu, brute_var = brute_biases(m, gamma, upper, 5)
        assert brute_mu <= float(mean_bias(upper, sum(gamma), sum(m))) * (1 + RTOL) + 1e-12
        assert brute_var <= float(variance_bias(upper, sum(gamma), sum(m))) * (1 + RTOL) + 1e-12


@pytest.mark.parametrize("upper", UPPERS)
def test_sensitivities_match_brute_force(upper: float) -> None:
    for _, gamma in INSTANCES:
        kept = positive(gamma)
        brute_mu, brute_var = brute_sensitivities(kept, upper, 3)
        top, total = max(kept), sum(kept)
        assert_close(float(mean_sensitivity(upper, top, total)), brute_mu)
        assert_close(float(variance_sensitivity(upper, top, total)), brute_var)


def test_sensitivities_are_not_exceeded_on_a_finer_grid() -> None:
    upper = 65.0
    for kept in {positive(g) for _, g in INSTANCES if sum(g) <= 6}:
        brute_mu, brute_var = brute_sensitivities(kept, upper, 4)
        top, total = max(kept), sum(kept)
        assert brute_mu <= float(mean_sensitivity(upper, top, total)) * (1 + RTOL)
        assert brute_var <= float(variance_sensitivity(upper, top, total)) * (1 + RTOL)


@pytest.mark.parametrize(
    ("m", "gamma"),
    [
        ((2, 1, 1), (2, 1, 0)),  # S = 3, M = 4: M < 2S, even M
        ((5,), (1,)),  # S = 1, M = 5: M > 2S, odd M
        ((3, 3), (3, 1)),  # S = 4, M = 6
    ],
)
def test_variance_bias_erratum(m: tuple[int, ...], gamma: tuple[int, ...]) -> None:
    """The printed Thm IV.2 condition gives a wrong value here; the corrected one does not."""
    upper = 65.0
    kept, total = sum(gamma), sum(m)
    _, brute_var = brute_biases(m, gamma, upper, 2)
    assert_close(float(variance_bias(upper, kept, total)), brute_var)
    assert abs(printed_variance_bias(upper, kept, total) - brute_var) > 1e-3 * upper**2


def test_variance_bias_erratum_value() -> None:
    """S = 3 of M = 4 kept: worst case is kept readings equal, the dropped one at the far end."""
    _, brute_var = brute_biases((2, 1, 1), (2, 1, 0), 1.0, 2)
    assert brute_var == pytest.approx(3 / 16)
    assert printed_variance_bias(1.0, 3, 4) == pytest.approx(1 / 4)


@pytest.mark.parametrize("upper", UPPERS)
def test_grid_error_is_the_sum_of_the_four_terms(upper: float) -> None:
    eps = 0.7
    for m, gamma in INSTANCES:
        kept, total, top = sum(gamma), sum(m), max(gamma)
        brute_mu, brute_var = brute_biases(m, gamma, upper, 2)
        sens_mu, sens_var = brute_sensitivities(positive(gamma), upper, 3)
        expected = brute_mu + brute_var + 2 * sens_mu / eps + 2 * sens_var / eps
        assert_close(float(grid_error(upper, eps, top, kept, total)), expected)


def test_grid_error_is_infinite_when_nothing_is_kept() -> None:
    errors = grid_error(65.0, 0.5, np.array([0, 2]), np.array([0, 3]), np.array([4, 4]))
    assert np.isinf(errors[0]) and np.isfinite(errors[1])
