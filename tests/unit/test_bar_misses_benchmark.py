"""``benchmarks/bar_misses.py``'s arithmetic: a bar's parts, each record's chance to miss, the
distribution of the misses of a run, and the split of a miss's gap."""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate

# The benchmarks are scripts importing their neighbours by name (``from usefulness import``).
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import bar_misses  # noqa: E402

RECORD = {
    "cell": "871f1aca4ffffff", "resolution": 7, "window_start": "2026-06-01T07:00:00Z",
    "window_end": "2026-06-01T08:00:00Z", "n_readings": 400, "n_readings_used": 300,
    "n_vehicles": 40, "cap": 10, "epsilon": 0.5, "mean_error": 50.0 + 3 * math.log(20.0),
    "mean": 130.0,
}  # fmt: skip


def test_a_bar_is_the_bias_bound_plus_the_noise_quantile() -> None:
    bias, noise = bar_misses.bar_parts(RECORD, 200.0)
    assert bias == pytest.approx(200.0 * (1 - 300 / 400))
    assert noise == pytest.approx(3 * math.log(20.0))


@pytest.mark.parametrize("offset", [0.0, 1.5, -4.0, 12.0])
def test_the_chance_to_miss_is_the_laplace_mass_outside_the_bar(offset: float) -> None:
    scale, bar = 2.0, 8.0

    def density(x: float) -> float:
        return math.exp(-abs(x) / scale) / (2 * scale)

    # |offset + L| > bar: L below -bar - offset or above bar - offset (integrated numerically)
    below = integrate.quad(density, -np.inf, -bar - offset)[0]
    above = integrate.quad(density, bar - offset, np.inf)[0]
    chance = bar_misses.miss_chances(np.array([offset]), np.array([scale]), np.array([bar]))
    assert chance[0] == pytest.approx(below + above, rel=1e-9)
    if offset == 0.0:  # an unbiased record at bar ln20 * scale misses with 5 % exactly
        at_quantile = bar_misses.miss_chances(np.zeros(1), np.ones(1), np.array([math.log(20)]))
        assert at_quantile[0] == pytest.approx(0.05)


def test_the_count_of_misses_is_distributed_as_every_outcome_says() -> None:
    chances = np.array([0.05, 0.2, 0.5, 0.01])
    dist = bar_misses.count_distribution(chances)
    brute = np.zeros(len(chances) + 1)
    for outcome in itertools.product((0, 1), repeat=len(chances)):
        p = np.prod([c if hit else 1 - c for c, hit in zip(chances, outcome, strict=True)])
        brute[sum(outcome)] += p
    assert dist == pytest.approx(brute, abs=1e-15)


def test_a_miss_splits_its_gap_into_the_offset_and_the_noise() -> None:
    plain = {**RECORD, "mean": 126.0}
    line = bar_misses.describe_miss(RECORD, plain, 125.5, 200.0)
    # gap 4.5 = offset +0.5 (noise-free mean against the truth) + noise +4.0 = 4/3 of b = 3
    assert "bar 58.987 = bias bound 50.000 + noise 8.987" in line
    assert "released 130.000, noise-free 126.000, truth 125.500" in line
    assert line.endswith("gap 4.500 = offset +0.500 + noise +4.000 (1.33 b)")
