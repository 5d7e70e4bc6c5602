"""What the array-based mechanisms (ARRAY-AVERAGING, LEVY, QUANTILE) share.

Each groups the vehicles into arrays (:mod:`.grouping`, strategy ``grouping``) of length
m_UB (rule ``m_ub``, :mod:`.array_length`) and averages the arrays' means (``fill``).
m_UB is chosen at the budget of the final Laplace step (:meth:`mean_epsilon`), and the
stored prefix each vehicle needs follows from that grouping alone.
"""

from __future__ import annotations

from typing import Any

from stream_dp.dp.mechanisms import array_length
from stream_dp.dp.mechanisms.base import Fill, IntArray, MeanMechanism, check_fill
from stream_dp.dp.mechanisms.grouping import STRATEGIES, Grouping, Strategy, group, readings_needed


class ArrayMeanMechanism(MeanMechanism):
    """Base of the array-based mechanisms; subclasses are dataclasses with these fields."""

    grouping: Strategy
    m_ub: str | int
    fill: Fill

    def __post_init__(self) -> None:
        """Validate the grouping strategy, the fill and the m_UB rule."""
        if self.grouping not in STRATEGIES:
            raise ValueError(f"grouping must be one of {STRATEGIES}, got {self.grouping!r}")
        check_fill(self.fill)
        array_length.choose_length(self.m_ub, [1], 1.0)  # validates the choice

    def mean_epsilon(self, epsilon: float) -> float:
        """The budget of the final Laplace step (and of the m_UB rule) out of ``epsilon``."""
        return epsilon

    def grouping_for(self, counts: IntArray, epsilon: float) -> Grouping:
        """The grouping used for these public counts, m_UB chosen at budget ``epsilon``."""
        return group(self.grouping, counts, array_length.choose_length(self.m_ub, counts, epsilon))

    def array_parameters(self, grouping: Grouping) -> dict[str, Any]:
        """The grouping choices reported in ``MeanRelease.parameters``."""
        return {
            "grouping": self.grouping,
            "m_ub_rule": self.m_ub,
            "m_ub": grouping.m_ub,
            "groups": grouping.n_arrays,
            "fill": self.fill,
        }

    def _prefix_needed(self, counts: IntArray, epsilon: float) -> IntArray:
        grouping = self.grouping_for(counts, self.mean_epsilon(epsilon))
        return readings_needed(grouping, counts, self.fill)
