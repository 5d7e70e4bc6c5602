"""Tight per-vehicle accounting: epsilon at delta of ``n`` released cells, by the PLD accountant.

Every released cell costs a vehicle counted in it the same two Laplace releases (the mean at
``(1 - s) eps``, the variance at ``s eps``; sensitivity-normalised scale ``1/eps'``), so a
vehicle's loss over the budget period depends only on how many cells ``n`` it was counted in.
The privacy-loss distribution (PLD) of that n-fold composition, from Google's
``dp-accounting`` package (pessimistic discretisation, so the stated epsilon is an upper
bound), gives ``eps_pld(n)`` at the configured delta; :class:`PldAccountant` computes it once per
``n`` and reports ``min(eps_pld(n), n eps)`` (``n eps``-DP implies ``(n eps, delta)``-DP).

Only mechanisms whose release is exactly these Laplace steps compose this way
(:data:`COMPOSABLE`); the others (exponential-mechanism intervals, ``(eps, delta)`` means)
are refused by :func:`check_composable`.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from stream_dp.dp.mechanism_specs import MEAN_MECHANISMS, mechanism_spec

#: Mean mechanisms releasing one Laplace draw at the mean's budget (parameters from public counts).
COMPOSABLE = frozenset(name for name, spec in MEAN_MECHANISMS.items() if spec.pld_composes)
#: Width of the PLD's privacy-loss grid (dp-accounting's ``value_discretization_interval``;
#: pessimistic rounding, so an upper bound; 1e-4 changes epsilon by < 1e-6 relative, 10x slower).
DISCRETIZATION = 1e-3
PLD_EXTRA_MESSAGE = "accounting 'pld' needs the dp-accounting package: pip install 'stream-dp[pld]'"


def check_composable(mean_mechanism: str) -> None:
    """ValueError naming the mechanism when ``accounting = 'pld'`` cannot compose it, or when
    the optional ``dp-accounting`` package is missing."""
    if not mechanism_spec(mean_mechanism).pld_composes:
        raise ValueError(
            f"accounting 'pld' cannot compose mean_mechanism {mean_mechanism!r} (not a single "
            f"Laplace release); use accounting 'basic' or one of {', '.join(sorted(COMPOSABLE))}"
        )
    try:
        import dp_accounting  # noqa: F401
    except ImportError:
        raise ValueError(PLD_EXTRA_MESSAGE) from None


def cell_pld(epsilon: float, variance_share: float) -> Any:
    """The PLD of one released cell: Laplace at ``(1 - s) eps`` (+ Laplace at ``s eps``)."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    def laplace(eps: float) -> Any:
        return pld_lib.from_laplace_mechanism(
            1.0 / eps, sensitivity=1.0, value_discretization_interval=DISCRETIZATION
        )

    pld = laplace(epsilon * (1.0 - variance_share))
    if variance_share > 0:
        pld = pld.compose(laplace(epsilon * variance_share))
    return pld


class PldAccountant:
    """``epsilon(n)``: the loss at ``delta`` of ``n`` released cells (cached per ``n``)."""

    def __init__(self, epsilon: float, variance_share: float, delta: float) -> None:
        if not (epsilon > 0 and 0 <= variance_share < 1 and 0 < delta < 1):
            raise ValueError("need epsilon > 0, variance_share in [0, 1), delta in (0, 1)")
        self.epsilon_per_cell = float(epsilon)
        self.delta = float(delta)
        self._cell = cell_pld(epsilon, variance_share)
        self._table: dict[int, float] = {0: 0.0}

    def epsilon(self, n: int) -> float:
        """``min(eps_pld(n), n eps)`` at ``delta``."""
        n = int(n)
        if n < 0:
            raise ValueError("a count is >= 0")
        if n not in self._table:
            composed = self._cell.self_compose(n)
            pld_eps = float(composed.get_epsilon_for_delta(self.delta))
            self._table[n] = min(max(pld_eps, 0.0), n * self.epsilon_per_cell)
        return self._table[n]

    def epsilons(self, counts: ArrayLike) -> NDArray[np.float64]:
        """:meth:`epsilon` of each count (each distinct count composed once)."""
        arr = np.asarray(counts, dtype=np.int64).reshape(-1)
        unique, inverse = np.unique(arr, return_inverse=True)
        return np.array([self.epsilon(n) for n in unique.tolist()])[inverse].astype(np.float64)

    def max_count(self, budget: float) -> int:
        """The largest ``n`` with ``epsilon(n) <= budget`` (``epsilon`` is non-decreasing)."""
        if budget < self.epsilon(1):
            return 0
        low, high = 1, 2
        while self.epsilon(high) <= budget:
            low, high = high, high * 2
        while high - low > 1:
            mid = (low + high) // 2
            if self.epsilon(mid) <= budget:
                low = mid
            else:
                high = mid
        return low

    def allowed_cells(self, spent_cells: ArrayLike, cap: float) -> NDArray[np.int64]:
        """Per vehicle, how many more cells keep its loss within ``cap``: ``max_count(cap) -
        spent`` (>= 0), for ``spent_cells`` cells already counted in the period."""
        spent = np.asarray(spent_cells, dtype=np.float64)
        total = self.max_count(cap)
        spent_n = np.where(np.isfinite(spent), spent, math.inf)
        return np.clip(total - spent_n, 0, total).astype(np.int64)


@functools.lru_cache(maxsize=8)
def accountant(epsilon: float, variance_share: float, delta: float) -> PldAccountant:
    """The (cached) accountant of one setting: its table is shared by every window."""
    return PldAccountant(epsilon, variance_share, delta)


def pld_available() -> bool:
    """Whether the optional ``dp-accounting`` package is installed."""
    try:
        import dp_accounting  # noqa: F401
    except ImportError:
        return False
    return True


def pld_loss(cells: int, epsilon: float, variance_share: float, delta: float) -> float | None:
    """Epsilon at ``delta`` of ``cells`` released cells, or None without dp-accounting."""
    if cells <= 0:
        return 0.0
    if not pld_available():
        return None
    return accountant(epsilon, variance_share, delta).epsilon(cells)


def pld_allowed_cells(
    spent_basic: ArrayLike, epsilon: float, variance_share: float, delta: float, cap: float
) -> NDArray[np.int64]:
    """Cells each vehicle may still be counted in under a PLD ``cap``, from its basic spend
    over the period (``spent / eps`` cells: a setting's cells all cost ``eps``)."""
    spent = np.asarray(spent_basic, dtype=np.float64)
    cells = np.where(np.isfinite(spent), np.rint(spent / epsilon), np.inf)
    return accountant(epsilon, variance_share, delta).allowed_cells(cells, cap)


@functools.lru_cache(maxsize=4096)
def _cell_pld_cached(epsilon: float, variance_share: float) -> Any:
    return cell_pld(epsilon, variance_share)


@functools.lru_cache(maxsize=65536)
def _mixed_epsilon(
    counts: tuple[tuple[float, int], ...], variance_share: float, delta: float
) -> float:
    composed = None
    for epsilon, n in counts:
        part = _cell_pld_cached(epsilon, variance_share).self_compose(n)
        composed = part if composed is None else composed.compose(part)
    assert composed is not None
    basic = sum(epsilon * n for epsilon, n in counts)
    return min(max(float(composed.get_epsilon_for_delta(delta)), 0.0), basic)


def mixed_pld_loss(
    cells_by_epsilon: dict[float, int], variance_share: float, delta: float
) -> float | None:
    """Epsilon at ``delta`` of a vehicle's released cells of different ε (per-cell ε,
    docs/math.md §13): the PLDs of each cell's Laplace releases composed (dp-accounting
    composes heterogeneous PLDs), at most the basic sum; None without dp-accounting."""
    counts = tuple(sorted((float(e), int(n)) for e, n in cells_by_epsilon.items() if n > 0))
    if not counts:
        return 0.0
    if not pld_available():
        return None
    return _mixed_epsilon(counts, variance_share, delta)
