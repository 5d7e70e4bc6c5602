"""QUANTILE (003 Sec. III-E): LEVY with the interval from two private quantiles.

BESTFIT arrays with m_UB from eq. (9); ``[a', b']`` from Smith's (2011) exponential-
mechanism quantile of the array means over [0, U] (:mod:`.private_quantile`), budget eps/4
for each end; then ``(1/K) sum_i Pi_[a',b'](A-bar_i) + Lap(Delta / (eps/2))`` with
``Delta = (b' - a')/K`` (times 2 under WRAPAROUND).

* FIXEDQUANTILE: the (1/10, 9/10) inter-quantile interval.
* OPTIMIZEDQUANTILE: ``b'`` the ceil(2/eps)-th largest and ``a'`` the ceil(2/eps)-th
  smallest array mean (Amin et al. 2019, Sec. 3). 003 prints floor(2/eps) for ``a`` but
  ceil in the interquantile interval right after; we use ceil at both ends (symmetric).

Target ranks (number of array means below the point): ``floor(q K)`` for the lower end and
``K - floor(q K)`` for the upper end, with ``q K`` capped at ``K/2``. If the two private
ends come out crossed they are swapped (post-processing).

Prefix: as ARRAY-AVERAGING (aggregates suffice with ``fill="user-mean"``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from stream_dp.dp.mechanisms.base import Fill, FloatArray
from stream_dp.dp.mechanisms.grouping import Grouping, Strategy
from stream_dp.dp.mechanisms.levy import Interval, ProjectedArrayMean
from stream_dp.dp.mechanisms.private_quantile import private_quantile
from stream_dp.dp.randomness import RandomSource

Variant = Literal["fixed", "optimized"]


def tail_count(variant: Variant, n_arrays: int, epsilon: float, q: Fraction) -> int:
    """How many array means each end should cut off: floor(q K) or ceil(2/eps), <= K/2."""
    if variant == "fixed":
        cut = math.floor(q * n_arrays)
    else:
        cut = math.ceil(Fraction(2) / Fraction(epsilon))
    return min(cut, n_arrays // 2)


@dataclass(frozen=True)
class QuantileMean(ProjectedArrayMean):
    """QUANTILE with the FIXEDQUANTILE (``q`` = 1/10) or OPTIMIZEDQUANTILE interval."""

    variant: Variant = "fixed"
    q: float = 0.1
    m_ub: str | int = "eq9"
    grouping: Strategy = "bestfit"
    fill: Fill = "user-mean"
    name: str = "quantile-fixed"

    def __post_init__(self) -> None:
        if self.variant not in ("fixed", "optimized"):
            raise ValueError(f"variant must be 'fixed' or 'optimized', got {self.variant!r}")
        if not 0 <= self.q <= 0.5:
            raise ValueError(f"q must lie in [0, 1/2], got {self.q!r}")
        super().__post_init__()

    def _interval(
        self, grouping: Grouping, means: FloatArray, upper: float, eps: float, source: RandomSource
    ) -> Interval:
        """Private quantiles at eps/4 each end (swapped if they come out crossed)."""
        quarter = eps / 4
        k = grouping.n_arrays
        cut = tail_count(self.variant, k, eps, Fraction(str(self.q)))
        rank_sensitivity = max(1, grouping.influence)
        low, high = sorted(
            private_quantile(means, rank, 0.0, upper, quarter, source, rank_sensitivity)
            for rank in (cut, k - cut)
        )
        own = {
            "variant": self.variant,
            "target_ranks": (cut, k - cut),
            "lower_epsilon": quarter,
            "upper_epsilon": quarter,
        }
        return low, high, own
