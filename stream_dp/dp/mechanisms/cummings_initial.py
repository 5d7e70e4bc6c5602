"""The private initial estimators of 002 Sec. 6, on values in [0, 1].

* :func:`initial_mean` -- Sec. 6.1 / Lemma 6.1: the mean of one reading from each of the
  users with the fewest readings, plus ``Lap(1 / (eps n'))`` (``n'`` such users); eps-DP.
  :func:`initial_mean_accuracy` is Lemma 6.1's ``alpha`` with ``n/10`` replaced by ``n'``
  (valid for any data in [0, 1], whose variance is at most its mean).
* :func:`initial_std` -- Sec. 6.2 / Lemma 6.2 / Algorithm 5 (Karwa & Vadhan 2018) on the
  users' means of their first k readings: pair differences ``Y_i = Z_2i - Z_2i-1``, a
  histogram of ``|Y_i|`` over the bins ``(2^j, 2^(j+1)]`` (all integers j, plus {0}), the
  most populated bin l gives ``sigma = 2^(l+2)``. Algorithm 5's batching constant
  ``phi = ceil((600 gamma rho)^2)`` (a proof artefact with an unspecified constant) is 1.
  The infinitely many bins need approximate DP: the stability-based histogram
  (Lemma E.2 with K = infinity; Bun, Nissim, Stemmer 2016) releases ``c_j + Lap(2/eps)``
  for non-empty bins only and keeps those above ``1 + 2 ln(1/delta)/eps``: one user
  moves one |Y_i| between two bins, so this is (eps, delta)-DP. With no bin kept the
  output is the public fallback (``None``).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from stream_dp.dp.mechanisms.base import FloatArray, laplace_release
from stream_dp.dp.randomness import RandomSource


def initial_mean(first_readings: FloatArray, epsilon: float, source: RandomSource) -> float | None:
    """002 Lemma 6.1: ``mean + Lap(1/(eps n'))`` clamped to [0, 1]; None if there is no user."""
    n = first_readings.size
    if n == 0:
        return None
    noisy, _ = laplace_release(float(first_readings.mean()), 1.0 / n, epsilon, source)
    return min(max(noisy, 0.0), 1.0)


def initial_mean_accuracy(p_hat: float, n: int, epsilon: float, beta: float) -> float:
    """002 Lemma 6.1's ``alpha`` (natural logs), with the cohort size ``n'`` for n/10."""
    if n == 0:
        return 1.0  # no information: every interval below then covers [0, 1]
    log4, log2 = math.log(4 / beta), math.log(2 / beta)
    sampling = math.sqrt(12 * p_hat * log4 / n + 36 * log4**2 / n**2) + 6 * log4 / n
    return 2 * max(sampling, log2 / (epsilon * n))


def _bin(value: float) -> int | None:
    """The j with ``value`` in (2^j, 2^(j+1)]; None for 0."""
    if value == 0.0:
        return None
    mantissa, exponent = math.frexp(value)  # value = mantissa 2^exponent, 0.5 <= mantissa < 1
    return exponent - 2 if mantissa == 0.5 else exponent - 1


def stability_histogram_mode(
    labels: list[int | None], epsilon: float, delta: float, source: RandomSource
) -> tuple[bool, int | None]:
    """(found, label): the noisy mode among bins whose noisy count passes the threshold."""
    threshold = 1.0 + 2.0 * math.log(1.0 / delta) / epsilon
    best: tuple[float, int | None] | None = None
    for label, count in Counter(labels).items():
        noisy, _ = laplace_release(float(count), 2.0, epsilon, source)
        if noisy >= threshold and (best is None or noisy > best[0]):
            best = (noisy, label)
    return (False, None) if best is None else (True, best[1])


def initial_std(
    values: FloatArray, epsilon: float, delta: float, source: RandomSource
) -> float | None:
    """002 Algorithm 5 (phi = 1) on values in [0, 1]; None when no bin passes (or < 2 values)."""
    pairs = values.size // 2
    if pairs == 0:
        return None
    differences = np.abs(values[1 : 2 * pairs : 2] - values[0 : 2 * pairs : 2])
    found, label = stability_histogram_mode(
        [_bin(float(d)) for d in differences], epsilon, delta, source
    )
    if not found:
        return None
    return 0.0 if label is None else 2.0 ** (label + 2)
