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

from stream_dp.dp.mechanisms import array_length
from stream_dp.dp.mechanisms.base import (
    CellData,
    Fill,
    IntArray,
    MeanMechanism,
    MeanRelease,
    check_fill,
    clamp,
    laplace_release,
)
from stream_dp.dp.mechanisms.grouping import (
    STRATEGIES,
    Grouping,
    Strategy,
    array_means,
    group,
    readings_needed,
)
from stream_dp.dp.mechanisms.levy import influence_factor, projected_mean
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
class QuantileMean(MeanMechanism):
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
        if self.grouping not in STRATEGIES:
            raise ValueError(f"grouping must be one of {STRATEGIES}, got {self.grouping!r}")
        check_fill(self.fill)
        array_length.choose_length(self.m_ub, [1], 1.0)

    def grouping_for(self, counts: IntArray, epsilon: float) -> Grouping:
        """The grouping used for these public counts (m_UB rule at the mean's budget eps/2)."""
        return group(self.grouping, counts, array_length.choose_length(self.m_ub, counts, epsilon))

    def _release(
        self, cell: CellData, upper: float, epsilon: float, source: RandomSource
    ) -> MeanRelease:
        data = cell.participants()
        half, quarter = epsilon / 2, epsilon / 4
        grouping = self.grouping_for(data.counts, half)
        means = array_means(grouping, data, self.fill)
        k = grouping.n_arrays
        cut = tail_count(self.variant, k, epsilon, Fraction(str(self.q)))
        rank_sensitivity = max(1, grouping.influence)
        ends = sorted(
            private_quantile(means, rank, 0.0, upper, quarter, source, rank_sensitivity)
            for rank in (cut, k - cut)
        )
        low, high = ends
        sensitivity = influence_factor(grouping) * (high - low) / k
        raw, scale = laplace_release(projected_mean(means, low, high), sensitivity, half, source)
        return MeanRelease(
            value=clamp(raw, upper),
            raw_value=raw,
            epsilon_spent=epsilon,
            delta_spent=0.0,
            sensitivity=sensitivity,
            worst_case_error=None,
            parameters={
                "variant": self.variant,
                "grouping": self.grouping,
                "m_ub_rule": self.m_ub,
                "m_ub": grouping.m_ub,
                "groups": k,
                "fill": self.fill,
                "target_ranks": (cut, k - cut),
                "interval": (low, high),
                "lower_epsilon": quarter,
                "upper_epsilon": quarter,
                "mean_epsilon": half,
                "noise_scale": scale,
                "vehicles": data.n_vehicles,
            },
            mechanism=self.name,
        )

    def _prefix_needed(self, counts: IntArray, epsilon: float) -> IntArray:
        return readings_needed(self.grouping_for(counts, epsilon / 2), counts, self.fill)
