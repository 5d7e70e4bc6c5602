"""Exact exponential mechanism over finitely many blocks (McSherry & Talwar 2007).

Used by LEVY's private interval (003, Algorithm 3) and by Smith's (2011, Algorithm 2)
private quantile. Block ``i`` has an integer score ``s_i`` (lower is better, user-level
sensitivity ``Delta``) and an integer size ``n_i`` (the number of outputs it stands for).

Why not ``exp(-eps s / 2 Delta)`` in floats, Gumbel noise or a float inverse CDF: the
sampled index would then depend on rounding errors of data-dependent quantities (Mironov
2012, Ilvento 2020). Instead the base of the exponential is a *rational* number:

    b = ceil(e^{-eps / (2 Delta)} 2^P) / 2^P,   so   e^{-eps / (2 Delta)} <= b < 1,

computed from a rigorous rational upper bound of ``e^{-x}`` (an alternating Taylor partial
sum, ``_exp_neg_upper``). The target weights ``n_i b^{d_i}`` (``d_i = s_i - min s``) are
then exact rationals. Sampling is exact rejection (the "base-2 / rational weights" idea of
Ilvento 2020, "Implementing the Exponential Mechanism with Base-2 Differential Privacy",
used by OpenDP): propose block ``i`` with probability proportional to ``n_i 2^{-j_i}``
(integers after a common shift, one ``randbelow`` draw), where ``j_i`` is an integer with
``2^{-j_i} >= b^{d_i} > 2^{-j_i - 2}``, and accept with the exact rational probability
``b^{d_i} 2^{j_i}`` (``> 1/4``, one more ``randbelow``). The accepted index has
probability exactly proportional to ``n_i b^{d_i}``; at most 4 proposals are expected.

Privacy: for neighbours, every score moves by at most ``Delta``, so every weight ratio is
at most ``b^{-Delta}`` and the normaliser ratio too, so the output probabilities differ by
at most a factor ``b^{-2 Delta} = e^{2 Delta ln(1/b)} <= e^{eps}``: the mechanism is
``eps_b := 2 Delta ln(1/b) <= eps``-DP, exactly (no floating point touches the draw).
``P`` only controls how close ``eps_b`` is to ``eps`` (relative gap ``< 2^-P / x``).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache
from itertools import accumulate

from stream_dp.dp.randomness import RandomSource

__all__ = [
    "PRECISION_BITS",
    "exponential_base",
    "exponential_probabilities",
    "sample_exponential",
]

#: Bits of the dyadic base ``b``; the privacy loss actually used is within ``2^-P / x``
#: (relative) of the nominal one, ``x = eps / (2 Delta)``.
PRECISION_BITS = 32


def _as_fraction(x: float | Fraction | int, name: str) -> Fraction:
    if not (math.isfinite(float(x)) and x > 0):
        raise ValueError(f"{name} must be finite and > 0, got {x!r}")
    return Fraction(x)


def _exp_neg_upper(x: Fraction, error_bits: int) -> Fraction:
    """A rational ``u`` with ``e^{-x} <= u <= e^{-x} + 2^-error_bits``, for rational ``x > 0``.

    Partial sums ``S_K`` of ``sum_k (-x)^k / k!`` with ``K`` even are upper bounds once the
    terms decrease (``K + 1 >= x``): the remaining tail starts with a negative term and is
    alternating with decreasing magnitudes. The truncation error is at most the first
    omitted term, so we stop when it is below ``2^-error_bits``.
    """
    bound = Fraction(1, 1 << error_bits)
    total = Fraction(1)
    term = Fraction(1)
    k = 0
    while True:
        k += 1
        term = term * x / k  # x^k / k!
        total += -term if k % 2 else term
        next_term = term * x / (k + 1)
        if k % 2 == 0 and k + 1 >= x and next_term <= bound:
            return total


def exponential_base(
    epsilon: float | Fraction, sensitivity: int = 1, precision_bits: int = PRECISION_BITS
) -> Fraction:
    """The dyadic base ``b`` with ``e^{-eps/(2 Delta)} <= b < 1`` (module docstring)."""
    x = _as_fraction(epsilon, "epsilon") / (2 * _check_sensitivity(sensitivity))
    return _dyadic_upper_exp_neg(x, precision_bits)


@lru_cache(maxsize=1024)
def _dyadic_upper_exp_neg(x: Fraction, precision_bits: int) -> Fraction:
    """``ceil(u 2^bits) / 2^bits`` for an upper bound ``u`` of ``e^{-x}``, relative error ~2^-P."""
    # Bits below 1 so that b < 1 for tiny x (1 - e^{-x} ~ x) and b ~ e^{-x} for large x.
    bits = (
        precision_bits
        + max(0, -math.floor(math.log2(float(x))))
        + math.ceil(float(x) * math.log2(math.e))
    )
    upper = _exp_neg_upper(x, bits + 2)
    scale = 1 << bits
    numerator = -((-upper.numerator * scale) // upper.denominator)  # ceil(upper * 2^bits)
    if numerator >= scale:  # pragma: no cover - excluded by the choice of bits
        raise ArithmeticError("exponential base rounded up to 1")
    return Fraction(numerator, scale)


def _check_sensitivity(sensitivity: int) -> int:
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, int) or sensitivity < 1:
        raise ValueError(f"sensitivity must be a positive int, got {sensitivity!r}")
    return sensitivity


def _check_blocks(
    scores: Sequence[int], sizes: Sequence[int] | None
) -> tuple[list[int], list[int]]:
    score_list = [int(s) for s in scores]
    size_list = [1] * len(score_list) if sizes is None else [int(n) for n in sizes]
    if len(size_list) != len(score_list):
        raise ValueError("scores and sizes must have the same length")
    if any(n < 0 for n in size_list) or not any(n > 0 for n in size_list):
        raise ValueError("sizes must be >= 0 with at least one positive size")
    return score_list, size_list


def _integer_weights(scores: list[int], sizes: list[int], base: Fraction) -> list[int]:
    """``n_i b^{d_i} 2^{P (D - d_i)}`` with ``d_i = s_i - min s`` (exact; for small inputs)."""
    low = min(s for s, n in zip(scores, sizes, strict=True) if n > 0)
    top = max(s for s, n in zip(scores, sizes, strict=True) if n > 0) - low
    p, shift = base.numerator, base.denominator.bit_length() - 1
    return [
        (n * p ** (s - low)) << (shift * (top - s + low)) if n > 0 else 0
        for s, n in zip(scores, sizes, strict=True)
    ]


def exponential_probabilities(
    scores: Sequence[int],
    epsilon: float | Fraction,
    sizes: Sequence[int] | None = None,
    sensitivity: int = 1,
) -> list[Fraction]:
    """The exact output distribution of :func:`sample_exponential` (for tests and analysis)."""
    score_list, size_list = _check_blocks(scores, sizes)
    weights = _integer_weights(score_list, size_list, exponential_base(epsilon, sensitivity))
    total = sum(weights)
    return [Fraction(w, total) for w in weights]


def sample_exponential(
    scores: Sequence[int],
    epsilon: float | Fraction,
    source: RandomSource,
    sizes: Sequence[int] | None = None,
    sensitivity: int = 1,
) -> int:
    """Index ``i`` with probability proportional to ``n_i b^{s_i}``, ``b >= e^{-eps/(2 Delta)}``.

    The exponential mechanism with utility ``-score``: ``eps``-DP when every score has
    user-level sensitivity ``<= sensitivity``. A block stands for ``n_i`` outputs sharing
    its score: the base measure (counting over those outputs) must be data-independent,
    as in Smith's quantile on a fixed grid, where only the grouping of grid points into
    blocks depends on the data.
    """
    score_list, size_list = _check_blocks(scores, sizes)
    base = exponential_base(epsilon, sensitivity)
    p, shift = base.numerator, base.denominator.bit_length() - 1
    low = min(s for s, n in zip(score_list, size_list, strict=True) if n > 0)
    # Proposal exponents j_i <= d_i log2(1/b), so that 2^-j_i >= b^d_i: the 1 - 2^-30 factor
    # and the -1 absorb float error; the acceptance step re-checks exactly.
    log2_inverse = -math.log2(float(base)) * (1.0 - 2.0**-30)
    powers = [
        max(0, math.floor((s - low) * log2_inverse) - 1) if n > 0 else 0
        for s, n in zip(score_list, size_list, strict=True)
    ]
    top = max(powers)
    cumulative = list(accumulate(n << (top - j) for n, j in zip(size_list, powers, strict=True)))
    while True:
        i = bisect_right(cumulative, source.randbelow(cumulative[-1]))
        d = score_list[i] - low
        # Accept with probability b^d 2^j_i = p^d 2^j_i / 2^(P d), in (1/4, 1].
        numerator, denominator = p**d << powers[i], 1 << (shift * d)
        if numerator > denominator:  # pragma: no cover - float guard failed; never silent
            raise ArithmeticError("exponential mechanism proposal exponent too large")
        if source.randbelow(denominator) < numerator:
            return i
