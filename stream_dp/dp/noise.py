"""Floating-point-safe Laplace noise (docs/math.md §4.1-§4.3).

Why not ``value + numpy.random.laplace(...)``: Mironov (2012), "On Significance of the Least
Significant Bits for Differential Privacy", shows that a float inverse-CDF sample added to a
float leaves a data-dependent pattern in the low-order bits, so the set of reachable outputs
differs between neighbours and the guarantee is lost.

The construction here is the one OpenDP uses for float Laplace (``make_laplace`` with noise
granularity ``2^k``, privacy map ``(d_in + 2^k) / scale``), built on CKS20 (Canonne, Kamath,
Steinke 2020, Alg. 2) and the geometric mechanism of Ghosh, Roughgarden, Sundararajan (2012):

1. Pick a data-independent grid ``2^k`` with
   ``k = floor(log2(min(sensitivity, sensitivity / epsilon))) - GRID_BITS``.
   Relative to ``sensitivity / epsilon`` the grid is invisible (``2^-40`` of the scale), and
   relative to the sensitivity the inflation below is at most ``2^-40``.
2. Round the float input exactly (integer arithmetic) to the nearest grid point ``n 2^k``.
3. Add ``2^k Z`` with ``Z`` exact discrete Laplace of scale ``scale / 2^k`` where
   ``scale = (sensitivity + 2^k) / epsilon``.
4. Return the correctly rounded float of the exact rational ``(n + Z) 2^k``.

Privacy: neighbours' inputs differ by at most ``sensitivity``; after rounding (each by at most
``2^(k-1)``) their grid indices differ by at most ``sensitivity / 2^k + 1``. The discrete
Laplace pmf ratio for a shift of ``d`` indices is at most ``exp(d 2^k / scale)``, so the loss
is at most ``(sensitivity + 2^k) / scale = epsilon`` -- exactly, because steps 2-3 use no
floating point. Step 4 is post-processing. "Neighbours' inputs" are the floats the caller
passes: a value computed in floating point needs its rounding inside ``sensitivity``
(docs/math.md §4.2, "Float inputs": the CLIP mean's ``float_mean.sampler_sensitivity``, the
variance's ``float_variance.sampler_sensitivity``; the other mean mechanisms' are not).
The released float is always a multiple of ``2^k`` when ``k >= -1074`` (below ``2^(k+53)``
the grid point is representable; above it the float spacing is itself a multiple of ``2^k``).

``sensitivity == 0``: neighbours have the identical value, so releasing ``value`` unchanged
is 0-DP; it is returned exactly. Overflow of the final float yields ``+-inf``
(post-processing, only possible next to the float range limit).

``release_many`` (one ε) and ``release_each`` (each entry its own ε, in one batch) run steps
1-4 compiled (``laplace_kernel``) wherever they are exact in 64-bit integers and floats, and
this module's Python code for the rest; their output is the one ``release`` would give entry
after entry on the same bits.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

from stream_dp.dp import laplace_kernel
from stream_dp.dp.randomness import RandomSource

__all__ = ["GRID_BITS", "LaplaceNoise"]

#: The grid ``2^k`` sits this many binary orders of magnitude below min(sensitivity, scale).
GRID_BITS = 40


@dataclass(frozen=True, slots=True)
class _Plan:
    """Data-independent parameters of one (sensitivity, epsilon) pair."""

    k: int  # grid exponent
    grid_scale: Fraction  # discrete Laplace scale in grid units: scale / 2^k
    scale: Fraction  # (sensitivity + 2^k) / epsilon


def _floor_log2(x: Fraction) -> int:
    """``floor(log2(x))`` for a positive rational, exactly."""
    p, q = x.numerator, x.denominator
    e = p.bit_length() - q.bit_length()  # 2^(e-1) < p/q < 2^(e+1)
    at_least = p >= q << e if e >= 0 else p << -e >= q
    return e if at_least else e - 1


def _pow2(k: int) -> Fraction:
    return Fraction(1 << k) if k >= 0 else Fraction(1, 1 << -k)


@lru_cache(maxsize=4096)
def _plan(sensitivity: float, epsilon: float) -> _Plan | None:
    """The grid and scale for validated arguments; None when sensitivity is 0."""
    if sensitivity == 0.0:
        return None
    sens, eps = Fraction(sensitivity), Fraction(epsilon)
    k = _floor_log2(sens / max(eps, Fraction(1))) - GRID_BITS
    grid = _pow2(k)
    scale = (sens + grid) / eps
    return _Plan(k=k, grid_scale=scale / grid, scale=scale)


def _round_to_grid(value: float, k: int) -> int:
    """The integer ``n`` nearest to ``value / 2^k`` (ties to even), exactly."""
    p, q = value.as_integer_ratio()  # q is a power of two
    num, den = (p, q << k) if k >= 0 else (p << -k, q)
    n, r = divmod(num, den)  # floor division, 0 <= r < den
    twice = 2 * r
    if twice > den or (twice == den and n % 2 == 1):
        n += 1
    return n


def _grid_to_float(n: int, k: int) -> float:
    """The correctly rounded float of ``n 2^k`` (``+-inf`` on overflow)."""
    try:
        return float(n << k) if k >= 0 else n / (1 << -k)
    except OverflowError:
        return math.copysign(math.inf, n)


def _check_value(value: float, name: str = "value") -> float:
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return v


def _check_sensitivity(sensitivity: float, name: str = "sensitivity") -> float:
    s = float(sensitivity)
    if not (math.isfinite(s) and s >= 0.0):
        raise ValueError(f"{name} must be finite and >= 0, got {sensitivity!r}")
    return s


def _check_all(x: NDArray[np.float64], ok: NDArray[np.bool_], message: str) -> None:
    """``ValueError(message.format(first offending entry))`` unless ``ok`` holds everywhere."""
    bad = np.flatnonzero(~ok)
    if len(bad):
        raise ValueError(message.format(x[bad[0]].item()))


def _check_epsilon(epsilon: float) -> float:
    e = float(epsilon)
    if not (math.isfinite(e) and e > 0.0):
        raise ValueError(f"epsilon must be finite and > 0, got {epsilon!r}")
    return e


class LaplaceNoise:
    """Laplace mechanism on floats, safe against Mironov's attack (see module docstring)."""

    __slots__ = ("_source",)

    def __init__(self, source: RandomSource | None = None) -> None:
        """``source=None`` uses a fresh cryptographically secure ``RandomSource()``."""
        self._source = RandomSource() if source is None else source

    @property
    def source(self) -> RandomSource:
        """The randomness in use; the service refuses ``source.is_seeded``."""
        return self._source

    @staticmethod
    def grid_exponent(sensitivity: float, epsilon: float) -> int | None:
        """``k`` of the output grid ``2^k``; None when sensitivity is 0 (value returned as is)."""
        plan = _plan(_check_sensitivity(sensitivity), _check_epsilon(epsilon))
        return None if plan is None else plan.k

    @staticmethod
    def effective_scale(sensitivity: float, epsilon: float) -> float:
        """The Laplace scale actually used, ``(sensitivity + 2^k) / epsilon`` (0 if sensitivity 0).

        ``E|noise| = scale`` and ``Var(noise) = 2 scale^2`` up to the ``2^k`` discretisation.
        """
        plan = _plan(_check_sensitivity(sensitivity), _check_epsilon(epsilon))
        if plan is None:
            return 0.0
        try:
            return float(plan.scale)
        except OverflowError:
            return math.inf

    def release(self, value: float, sensitivity: float, epsilon: float) -> float:
        """``value`` plus Laplace noise of scale ``effective_scale(sensitivity, epsilon)``.

        ``epsilon``-DP for inputs whose neighbours differ by at most ``sensitivity``.
        """
        v = _check_value(value)
        plan = _plan(_check_sensitivity(sensitivity), _check_epsilon(epsilon))
        if plan is None:
            return v
        n = _round_to_grid(v, plan.k)
        z = self._source.discrete_laplace(plan.grid_scale)
        return _grid_to_float(n + z, plan.k)

    # Performance (benchmarks/release.py): a window's draws in one compiled batch, bit for bit the
    # Python samplers (4,000 draws ~63 → ~1.6 ms).
    def release_many(
        self,
        values: ArrayLike,
        sensitivities: ArrayLike | Iterable[float],
        epsilon: float,
    ) -> NDArray[np.float64]:
        """Independent ``release`` of each value; ``sensitivities`` broadcast against ``values``.

        Each entry is ``epsilon``-DP on its own; the caller accounts for composition. Bit for
        bit what ``release`` gives for the entries in turn on the same random bits, but
        compiled where the integers fit in 64 bits (``laplace_kernel``; e.g. every plan of
        ``epsilon = 0.5``, not those of ``epsilon = 0.05``, whose 53-bit odd mantissa makes
        the scale's integers too wide).
        """
        vals, sens = np.broadcast_arrays(
            np.asarray(values, dtype=np.float64), np.asarray(sensitivities, dtype=np.float64)
        )
        eps = _check_epsilon(epsilon)
        flat_v = np.array(vals, dtype=np.float64, order="C").ravel()  # writable, contiguous
        flat_s = np.array(sens, dtype=np.float64, order="C").ravel()
        _check_all(flat_v, np.isfinite(flat_v), "values must be finite, got {!r}")
        _check_all(
            flat_s,
            np.isfinite(flat_s) & (flat_s >= 0.0),
            "sensitivities must be finite and >= 0, got {!r}",
        )
        out = self._release_flat(flat_v, flat_s, np.full(len(flat_v), eps))
        return out.reshape(vals.shape)

    def release_each(
        self, values: ArrayLike, sensitivities: ArrayLike, epsilons: ArrayLike
    ) -> NDArray[np.float64]:
        """:meth:`release_many` with each entry's own ε (per-cell ε, docs/math.md §13), in ONE
        batch whatever the mix of ε: bit for bit ``release(values[i], sensitivities[i],
        epsilons[i])`` for the entries in turn on the same random bits, compiled wherever the
        entry's integers fit in 64 bits (every ε of the dyadic per-cell grid,
        :data:`~stream_dp.dp.epsilon_grid.EPSILON_STEP`, also times 0.25, 0.5 or
        0.75; not
        times a share such as 0.3, drawn by the exact Python path). Entries of non-finite value,
        sensitivity or ε are not released (NaN: a cell with nothing kept, withheld anyway)."""
        vals = np.asarray(values, dtype=np.float64)
        sens = np.broadcast_to(np.asarray(sensitivities, dtype=np.float64), vals.shape)
        eps = np.broadcast_to(np.asarray(epsilons, dtype=np.float64), vals.shape)
        out = np.full(vals.shape, np.nan)
        ok = np.isfinite(vals) & np.isfinite(sens) & np.isfinite(eps)
        flat_s, flat_e = sens[ok], eps[ok]
        _check_all(flat_s, flat_s >= 0.0, "sensitivities must be finite and >= 0, got {!r}")
        _check_all(flat_e, flat_e > 0.0, "epsilon must be finite and > 0, got {!r}")
        out[ok] = self._release_flat(vals[ok], flat_s, flat_e)
        return out

    def _release_flat(
        self,
        flat_v: NDArray[np.float64],
        flat_s: NDArray[np.float64],
        flat_e: NDArray[np.float64],
    ) -> NDArray[np.float64]:
        """Steps 1-4 for validated contiguous 1-d entries, entry ``i`` at ``flat_e[i]``: the
        compiled plans and draws where they fit in int64, this module's exact code for the
        rest, in entry order on this source's bits."""
        kind, k, n, t, s = laplace_kernel.grid_plans(flat_v, flat_s, flat_e, GRID_BITS)
        plans = {
            i: _plan(flat_s[i].item(), flat_e[i].item())
            for i in np.flatnonzero(kind == laplace_kernel.EXACT).tolist()
        }
        z, in_python = self._source.discrete_laplace_batch(
            kind, t, s, {i: plan.grid_scale for i, plan in plans.items() if plan is not None}
        )
        out, exact = laplace_kernel.grid_floats(kind, k, n, z, flat_v)
        for i in set(np.flatnonzero(exact).tolist()) | in_python.keys():
            plan = plans.get(i)
            if plan is None:  # compiled plan; the sum or the float is finished here
                grid, index = int(k[i]), int(n[i])
            else:
                grid, index = plan.k, _round_to_grid(flat_v[i].item(), plan.k)
            out[i] = _grid_to_float(index + in_python.get(i, int(z[i])), grid)
        return out
