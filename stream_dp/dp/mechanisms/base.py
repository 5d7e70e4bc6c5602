"""The per-cell mean interface: ``CellData`` in, ``MeanRelease`` out.

Privacy model (003 Sec. II-D, 001 Sec. II-C): user-level, pure ``eps`` unless stated; the
per-vehicle reading counts are public (the occupancy array is public, docs/math.md §2.2), the
readings are private and lie in ``[0, U]`` (the engine clamps them before aggregation).

Bounded state: the engine may keep, per vehicle, only ``count``, ``sum``, ``sumsq`` and the
first ``C`` readings (``prefix``). A mechanism reads the data only through
:meth:`CellData.partial_sum` / :meth:`CellData.first_readings`, which are exact whenever the
requested readings are covered by the prefix or by the aggregates, and otherwise raise
:class:`InsufficientPrefixError` (never a silent approximation). Each mechanism's
:meth:`MeanMechanism.prefix_needed` says how long a prefix it needs.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
Fill = Literal["readings", "user-mean"]
FILLS: tuple[str, ...] = ("readings", "user-mean")

#: Slack when validating that stored sums lie in ``[0, U count]`` (float summation error).
_SUM_RTOL = 1e-9


class InsufficientPrefixError(ValueError):
    """The mechanism needs readings beyond the stored prefix of some vehicle."""


@dataclass(frozen=True, eq=False)
class CellData:
    """One cell's (hexagon-hour's) per-vehicle data, vehicles in a fixed public order.

    ``counts[l]`` = m_l >= 1 readings; ``sums``/``sumsqs`` over all of them; ``prefixes[l]``
    = the first ``len(prefixes[l]) <= m_l`` readings in event-time order (the whole array
    when ``len == m_l``). ``kept_counts`` = CLIP-USER's Gamma'_l (docs/math.md §6) or None (all
    kept): CLIP uses the first Gamma'_l readings; every other mechanism drops the vehicles
    with Gamma'_l = 0 (suppressed for the composition bound) and uses all readings of the
    others.
    """

    counts: IntArray
    sums: FloatArray
    sumsqs: FloatArray
    prefixes: tuple[FloatArray, ...]
    kept_counts: IntArray | None = None

    def __post_init__(self) -> None:
        counts = np.asarray(self.counts, dtype=np.int64).reshape(-1)
        n = counts.size
        sums = np.asarray(self.sums, dtype=np.float64).reshape(-1)
        sumsqs = np.asarray(self.sumsqs, dtype=np.float64).reshape(-1)
        prefixes = tuple(np.asarray(p, dtype=np.float64).reshape(-1) for p in self.prefixes)
        if n == 0:
            raise ValueError("a cell needs at least one vehicle")
        if sums.size != n or sumsqs.size != n or len(prefixes) != n:
            raise ValueError("counts, sums, sumsqs and prefixes must have one entry per vehicle")
        if np.any(counts < 1):
            raise ValueError("every vehicle needs count >= 1")
        if any(p.size > c for p, c in zip(prefixes, counts.tolist(), strict=True)):
            raise ValueError("a prefix is longer than its vehicle's count")
        kept = None
        if self.kept_counts is not None:
            kept = np.asarray(self.kept_counts, dtype=np.int64).reshape(-1)
            if kept.size != n or np.any(kept < 0) or np.any(kept > counts):
                raise ValueError("kept_counts must lie in [0, count] for every vehicle")
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "sums", sums)
        object.__setattr__(self, "sumsqs", sumsqs)
        object.__setattr__(self, "prefixes", prefixes)
        object.__setattr__(self, "kept_counts", kept)

    @classmethod
    def from_readings(
        cls,
        readings: Sequence[ArrayLike],
        upper: float,
        prefix_length: int | None = None,
        kept_counts: ArrayLike | None = None,
    ) -> CellData:
        """Clamp each vehicle's readings to ``[0, upper]`` and keep ``prefix_length`` of them.

        ``prefix_length=None`` keeps whole arrays (every mechanism is then exact).
        """
        arrays = [
            np.clip(np.asarray(r, dtype=np.float64).reshape(-1), 0.0, upper) for r in readings
        ]
        return cls(
            counts=np.array([a.size for a in arrays], dtype=np.int64),
            sums=np.array([float(a.sum()) for a in arrays]),
            sumsqs=np.array([float(a @ a) for a in arrays]),
            prefixes=tuple(a if prefix_length is None else a[:prefix_length] for a in arrays),
            kept_counts=None if kept_counts is None else np.asarray(kept_counts, dtype=np.int64),
        )

    @property
    def n_vehicles(self) -> int:
        """L, the number of vehicles."""
        return int(self.counts.size)

    def check_bounds(self, upper: float) -> None:
        """Refuse data outside ``[0, U]``: every sensitivity below assumes clamped readings."""
        if not (math.isfinite(upper) and upper > 0):
            raise ValueError(f"upper must be finite and > 0, got {upper!r}")
        slack = _SUM_RTOL * upper * self.counts
        if np.any(self.sums < -slack) or np.any(self.sums > upper * self.counts + slack):
            raise ValueError("a vehicle's sum lies outside [0, U * count]: clamp readings first")
        for p in self.prefixes:
            if p.size and (p.min() < 0.0 or p.max() > upper):
                raise ValueError("a prefix reading lies outside [0, U]: clamp readings first")

    def participants(self) -> CellData:
        """The vehicles not suppressed by CLIP-USER (``kept_counts > 0``), all readings kept."""
        if self.kept_counts is None:
            return self
        keep = self.kept_counts > 0
        if not np.any(keep):
            raise ValueError("every vehicle of the cell is suppressed: no release")
        index = np.flatnonzero(keep)
        return CellData(
            counts=self.counts[index],
            sums=self.sums[index],
            sumsqs=self.sumsqs[index],
            prefixes=tuple(self.prefixes[i] for i in index.tolist()),
        )

    def user_means(self) -> FloatArray:
        """mu_l = sum_l / m_l (003 Sec. IV-A)."""
        return self.sums / self.counts

    def partial_sum(self, vehicle: int, start: int, stop: int) -> float:
        """Sum of readings ``start .. stop-1`` of ``vehicle`` (event-time order), exactly.

        Uses the prefix when it covers ``stop``; the stored sum when ``stop == count``
        (minus the prefix part before ``start``); otherwise raises InsufficientPrefixError.
        """
        count = int(self.counts[vehicle])
        if not 0 <= start <= stop <= count:
            raise ValueError(f"bad reading range [{start}, {stop}) for count {count}")
        prefix = self.prefixes[vehicle]
        if stop <= prefix.size:
            return float(prefix[start:stop].sum())
        if stop == count and start <= prefix.size:
            return float(self.sums[vehicle]) - float(prefix[:start].sum())
        raise InsufficientPrefixError(
            f"vehicle {vehicle}: readings [{start}, {stop}) of {count} needed, "
            f"only {prefix.size} stored"
        )

    def first_readings(self, vehicle: int, n: int) -> FloatArray:
        """The first ``n`` readings themselves (needs ``n <= len(prefix)``)."""
        prefix = self.prefixes[vehicle]
        if n > prefix.size:
            raise InsufficientPrefixError(
                f"vehicle {vehicle}: {n} individual readings needed, only {prefix.size} stored"
            )
        return prefix[:n]


@dataclass(frozen=True)
class MeanRelease:
    """The outcome of one per-cell mean release.

    ``value``: the noisy mean post-processed into ``[0, U]`` (what is published).
    ``raw_value``: the same noisy mean before the clamp (also DP; diagnostics/experiments).
    ``epsilon_spent``/``delta_spent``: the privacy cost (sub-budgets in ``parameters``).
    ``sensitivity``: user-level sensitivity of the statistic given to the final Laplace
    step (at that step's budget, ``parameters["mean_epsilon"]``); None if there is none.
    ``worst_case_error``: data-independent worst-case error (bias + E|noise|), or None.
    ``parameters``: the choices made (m_UB, groups, interval, threshold, noise_scale, ...).
    """

    value: float
    raw_value: float
    epsilon_spent: float
    delta_spent: float
    sensitivity: float | None
    worst_case_error: float | None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    mechanism: str = ""


def check_epsilon(epsilon: float) -> float:
    """A finite positive budget as float."""
    value = float(epsilon)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"epsilon must be finite and > 0, got {epsilon!r}")
    return value


def check_fill(fill: str) -> Fill:
    """Validate the array-fill option (003 Sec. IV-A)."""
    if fill not in FILLS:
        raise ValueError(f"fill must be one of {FILLS}, got {fill!r}")
    return fill  # type: ignore[return-value]


def laplace_release(
    estimate: float, sensitivity: float, epsilon: float, source: RandomSource
) -> tuple[float, float]:
    """``estimate + Lap(sensitivity / epsilon)`` (float-safe sampler) and the scale used."""
    noise = LaplaceNoise(source)
    return noise.release(estimate, sensitivity, epsilon), noise.effective_scale(
        sensitivity, epsilon
    )


def clamp(value: float, upper: float) -> float:
    """Post-processing into ``[0, U]`` (free under DP)."""
    return min(max(value, 0.0), upper)


def laplace_mean_release(
    mechanism: str,
    estimate: float,
    sensitivity: float,
    epsilon: float,
    upper: float,
    source: RandomSource,
    parameters: Mapping[str, Any],
    *,
    worst_case_bias: float | None = None,
    epsilon_spent: float | None = None,
    delta_spent: float = 0.0,
) -> MeanRelease:
    """The final step every mechanism shares: ``estimate + Lap(sensitivity / epsilon)``,
    published as :func:`noisy_mean_release` describes."""
    raw, scale = laplace_release(estimate, sensitivity, epsilon, source)
    return noisy_mean_release(
        mechanism, raw, scale, sensitivity, epsilon, upper, parameters,
        worst_case_bias=worst_case_bias, epsilon_spent=epsilon_spent, delta_spent=delta_spent,
    )  # fmt: skip


def noisy_mean_release(
    mechanism: str,
    raw: float,
    scale: float,
    sensitivity: float,
    epsilon: float,
    upper: float,
    parameters: Mapping[str, Any],
    *,
    worst_case_bias: float | None = None,
    epsilon_spent: float | None = None,
    delta_spent: float = 0.0,
) -> MeanRelease:
    """The release of ``raw``, an estimate plus ``Lap(scale)`` noise calibrated to
    ``sensitivity / epsilon`` (docs/math.md §7.1).

    The noisy value is published clamped into ``[0, U]`` (``raw_value`` keeps it unclamped).
    ``parameters`` are the mechanism's own choices; ``"mean_epsilon"`` (this step's budget
    ``epsilon``) and ``"noise_scale"`` are added. ``worst_case_bias``: the estimate's
    data-independent worst-case bias, giving ``worst_case_error = bias + E|Lap| = bias +
    sensitivity / epsilon``; None when the mechanism has no data-independent bound.
    ``epsilon_spent`` defaults to ``epsilon`` (pass the total when earlier steps spent some).
    """
    return MeanRelease(
        value=clamp(raw, upper),
        raw_value=raw,
        epsilon_spent=epsilon if epsilon_spent is None else epsilon_spent,
        delta_spent=delta_spent,
        sensitivity=sensitivity,
        worst_case_error=(
            None if worst_case_bias is None else worst_case_bias + sensitivity / epsilon
        ),
        parameters={**parameters, "mean_epsilon": epsilon, "noise_scale": scale},
        mechanism=mechanism,
    )


class MeanMechanism(ABC):
    """A user-level DP mean of one cell. Subclasses set ``name`` and implement ``_release``."""

    name: str = ""

    def release(
        self,
        cell: CellData,
        upper: float,
        epsilon: float,
        source: RandomSource | None = None,
    ) -> MeanRelease:
        """Release the cell's mean with budget ``epsilon`` (the mean's share of the cell).

        ``source=None`` uses a fresh cryptographically secure RandomSource.
        """
        cell.check_bounds(upper)
        return self._release(
            cell, float(upper), check_epsilon(epsilon), RandomSource() if source is None else source
        )

    @abstractmethod
    def _release(
        self, cell: CellData, upper: float, epsilon: float, source: RandomSource
    ) -> MeanRelease:
        """The mechanism proper, on validated inputs."""

    def prefix_needed(
        self, counts: ArrayLike, epsilon: float, kept_counts: ArrayLike | None = None
    ) -> IntArray:
        """Per vehicle, how many leading readings must be stored individually.

        0 means the aggregates (count, sum) suffice. Suppressed vehicles (``kept_counts``
        0) need nothing. Depends only on public counts, so the engine can size its prefix.
        """
        counts_arr = np.asarray(counts, dtype=np.int64).reshape(-1)
        need = np.zeros(counts_arr.size, dtype=np.int64)
        index = np.arange(counts_arr.size)
        if kept_counts is not None:
            index = np.flatnonzero(np.asarray(kept_counts, dtype=np.int64).reshape(-1) > 0)
        if index.size:
            need[index] = self._prefix_needed(counts_arr[index], check_epsilon(epsilon))
        return need

    @abstractmethod
    def _prefix_needed(self, counts: IntArray, epsilon: float) -> IntArray:
        """``prefix_needed`` for the participating vehicles' counts."""
