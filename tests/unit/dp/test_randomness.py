"""Tests of RandomSource: provenance flags, reproducibility and the exact CKS20 samplers."""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from stream_dp.dp.randomness import RandomSource

ALPHA = 1e-6  # goodness-of-fit tests must not reject at this level


def _bernoulli_within(successes: int, n: int, p: float, z: float = 5.0) -> bool:
    se = math.sqrt(p * (1 - p) / n)
    return abs(successes / n - p) <= z * se + 1e-12


def test_secure_source_is_not_seeded() -> None:
    assert RandomSource().is_seeded is False
    assert "secure" in repr(RandomSource())


def test_seeded_source_is_flagged() -> None:
    source = RandomSource.seeded_for_tests(1)
    assert source.is_seeded is True
    assert "seeded" in repr(source)


def test_seeded_sources_reproduce() -> None:
    def draw(seed: int) -> list[int]:
        s = RandomSource.seeded_for_tests(seed)
        return [s.discrete_laplace(Fraction(7, 2)) for _ in range(200)] + [
            s.randbelow(10**30) for _ in range(20)
        ]

    assert draw(42) == draw(42)
    assert draw(42) != draw(43)


def test_secure_sources_differ() -> None:
    a, b = RandomSource(), RandomSource()
    assert [a.randbelow(2**64) for _ in range(4)] != [b.randbelow(2**64) for _ in range(4)]


def test_randbelow_uniform_chi_square() -> None:
    source = RandomSource.seeded_for_tests(3)
    n, draws = 7, 14_000
    counts = Counter(source.randbelow(n) for _ in range(draws))
    assert set(counts) == set(range(n))
    assert stats.chisquare([counts[i] for i in range(n)]).pvalue > ALPHA


def test_randbelow_arbitrary_size() -> None:
    source = RandomSource.seeded_for_tests(4)
    unit = 2**100
    n = 3 * unit
    draws = [source.randbelow(n) for _ in range(6_000)]
    assert all(0 <= r < n for r in draws)
    thirds = Counter(r // unit for r in draws)
    assert stats.chisquare([thirds[i] for i in range(3)]).pvalue > ALPHA
    assert source.randbelow(1) == 0


@pytest.mark.parametrize("n", [0, -5])
def test_randbelow_rejects_nonpositive(n: int) -> None:
    with pytest.raises(ValueError, match="n"):
        RandomSource.seeded_for_tests(0).randbelow(n)


def test_bernoulli_exact_frequency_and_edges() -> None:
    source = RandomSource.seeded_for_tests(5)
    n = 20_000
    hits = sum(source.bernoulli(Fraction(1, 3)) for _ in range(n))
    assert _bernoulli_within(hits, n, 1 / 3)
    assert not any(source.bernoulli(Fraction(0)) for _ in range(100))
    assert all(source.bernoulli(1) for _ in range(100))


@pytest.mark.parametrize("p", [Fraction(-1, 2), Fraction(3, 2)])
def test_bernoulli_rejects_out_of_range(p: Fraction) -> None:
    with pytest.raises(ValueError, match="p"):
        RandomSource.seeded_for_tests(0).bernoulli(p)


def test_samplers_refuse_floats() -> None:
    source = RandomSource.seeded_for_tests(0)
    with pytest.raises(TypeError):
        source.bernoulli(0.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        source.bernoulli_exp_neg(1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        source.discrete_laplace(2.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("x", [Fraction(1, 3), Fraction(1), Fraction(5, 2), Fraction(7, 3)])
def test_bernoulli_exp_neg_frequency(x: Fraction) -> None:
    source = RandomSource.seeded_for_tests(int(x * 1000))
    n = 20_000
    hits = sum(source.bernoulli_exp_neg(x) for _ in range(n))
    assert _bernoulli_within(hits, n, math.exp(-x))


def test_bernoulli_exp_neg_zero_is_certain() -> None:
    source = RandomSource.seeded_for_tests(6)
    assert all(source.bernoulli_exp_neg(0) for _ in range(200))
    with pytest.raises(ValueError, match="x"):
        source.bernoulli_exp_neg(Fraction(-1, 5))


@pytest.mark.parametrize("x", [Fraction(1, 2), Fraction(3), Fraction(1, 10)])
def test_geometric_exp_neg_matches_pmf(x: Fraction) -> None:
    source = RandomSource.seeded_for_tests(7)
    n = 20_000
    draws = np.array([source.geometric_exp_neg(x) for _ in range(n)])
    assert draws.min() >= 0
    q = math.exp(-x)
    # Bins 0..m-1 plus a tail bin, chosen so every expected count is >= 20.
    m = 0
    while n * q ** (m + 1) >= 20 and m < 60:
        m += 1
    m = max(m, 1)
    pmf = [(1 - q) * q**y for y in range(m)]
    observed = [int(np.sum(draws == y)) for y in range(m)] + [int(np.sum(draws >= m))]
    expected = [n * p for p in pmf] + [n * q**m]
    assert stats.chisquare(observed, expected).pvalue > ALPHA
    with pytest.raises(ValueError, match="x"):
        source.geometric_exp_neg(0)


@pytest.mark.parametrize("scale", [Fraction(3), Fraction(5, 2)])
def test_discrete_laplace_pmf_ratios(scale: Fraction) -> None:
    source = RandomSource.seeded_for_tests(8)
    n = 50_000
    counts = Counter(source.discrete_laplace(scale) for _ in range(n))
    log_ratio = 1 / float(scale)  # P(k)/P(k+1) = exp(1/scale) for k >= 0, mirrored for k < 0
    for k in range(4):
        for a, b in ((k, k + 1), (-k, -k - 1)):
            ca, cb = counts[a], counts[b]
            se = math.sqrt(1 / ca + 1 / cb)  # delta-method SE of log(ca/cb)
            assert abs(math.log(ca / cb) - log_ratio) <= 5 * se, (a, b, ca, cb)
    # P(0) = (1 - q) / (1 + q), q = exp(-1/scale): the rejected "negative zero" matters.
    q = math.exp(-1 / float(scale))
    assert _bernoulli_within(counts[0], n, (1 - q) / (1 + q))


def test_discrete_laplace_rejects_nonpositive_scale() -> None:
    with pytest.raises(ValueError, match="scale"):
        RandomSource.seeded_for_tests(0).discrete_laplace(0)


def test_secure_discrete_laplace_mean_absolute_value() -> None:
    source = RandomSource()
    scale = Fraction(4)
    n = 4_000
    draws = np.array([source.discrete_laplace(scale) for _ in range(n)], dtype=float)
    q = math.exp(-1 / 4)
    mean_abs = 2 * q / (1 - q**2)  # E|Z| for the discrete Laplace
    second = 2 * q / (1 - q) ** 2  # E Z^2
    se = math.sqrt((second - mean_abs**2) / n)
    assert abs(np.mean(np.abs(draws)) - mean_abs) <= 6 * se
    assert abs(np.mean(draws > 0) - np.mean(draws < 0)) <= 6 * math.sqrt(1 / n)


def test_secure_bit_pool_gives_uniform_bits_of_the_requested_width():
    from stream_dp.dp.randomness import _urandom_words, _WordBits

    pool = _WordBits(_urandom_words)
    assert pool.getrandbits(0) == 0
    draws = [pool.getrandbits(3) for _ in range(40_000)]  # crosses several 4 KiB refills
    assert set(draws) == set(range(8))
    expected = len(draws) / 8
    chi2 = sum((draws.count(v) - expected) ** 2 / expected for v in range(8))
    assert chi2 < 30  # 7 degrees of freedom: p < 1e-4
    wide = pool.getrandbits(70_000)  # wider than one refill
    assert wide < 2**70_000 and wide.bit_length() > 69_900


# The test forks on purpose (the child only draws and exits); Python 3.12+ warns on any fork of
# a process with threads, which is what the test must survive.
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_does_not_reuse_the_parents_bits():
    import os

    from stream_dp.dp.randomness import _urandom_words, _WordBits

    pool = _WordBits(_urandom_words)
    pool.getrandbits(8)  # fill the pool
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.write(write, pool.getrandbits(64).to_bytes(8, "little"))
        os._exit(0)
    os.waitpid(pid, 0)
    child = int.from_bytes(os.read(read, 8), "little")
    assert child != pool.getrandbits(64)
