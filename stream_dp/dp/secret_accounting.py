"""The secret-routes accountant (docs/math.md §14.5): per-window noise fixed from the period
budget, composed over the windows of the period with the privacy-loss distribution (PLD).

Every vehicle is charged every window, present or not, so one accountant serves all of
them. Per window a vehicle adds to at most ``L0`` cells one vehicle count (shift
``COUNT_STEPS`` grid steps) and one clipped mean (``SUM_STEPS`` steps): ``2 L0`` discrete
Laplace mechanisms. Over ``k`` windows that is ``k L0`` of each, composed by dp-accounting's
PLD (pessimistic estimates: an upper bound on the true ``delta(epsilon)``). Partition
selection adds ``delta_sel`` per window to ``delta`` and ``-ln(1 - delta_sel)`` to
``epsilon`` (§14.4). The per-window epsilon is the largest dyadic value (``2^-EPSILON_BITS``
steps) whose composition stays within ``(B, delta)``; it is found by bisection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

try:  # the optional [pld] extra; the secret-routes model refuses to start without it
    from dp_accounting.pld import privacy_loss_distribution as pld
except ImportError:  # pragma: no cover - exercised only without the extra
    pld = None

#: Grid steps of one vehicle in a count and of ``U`` in a sum (§14.3).
COUNT_STEPS = 2**8
SUM_STEPS = 2**12
#: Per-cell epsilons are multiples of ``2^-EPSILON_BITS`` (exact rational noise scales).
EPSILON_BITS = 20
#: PLD grid of the loss values (pessimistic: a coarser grid only loosens the bound).
DISCRETISATION = 1e-3


def pld_available() -> bool:
    """dp-accounting is installed (``pip install 'stream-dp[pld]'``)."""
    return pld is not None


@dataclass(frozen=True)
class SecretRoutesBudget:
    """B per period at ``delta``, over ``windows`` windows of at most ``cells`` cells each."""

    budget: float
    delta: float
    windows: int
    cells: int
    count_share: float = 0.5
    selection_share: float = 0.1

    def __post_init__(self) -> None:
        if not (math.isfinite(self.budget) and self.budget > 0):
            raise ValueError(f"vehicle_budget: must be a finite number > 0, got {self.budget!r}")
        if not 0 < self.delta < 1:
            raise ValueError(f"accounting_delta: must be in (0, 1), got {self.delta!r}")
        if self.windows < 1 or self.cells < 1:
            raise ValueError("windows and contribution_cells must be >= 1")
        if not (0 < self.count_share < 1 and 0 < self.selection_share < 1):
            raise ValueError("count_share and selection_share must be in (0, 1)")

    @property
    def selection_delta(self) -> float:
        """``delta_sel``: per window, the chance a cell shows one vehicle alone (§14.4)."""
        return self.selection_share * self.delta / self.windows

    @property
    def composition_delta(self) -> float:
        """The ``delta`` left to the PLD of the Laplace releases."""
        return (1.0 - self.selection_share) * self.delta

    @property
    def cell_epsilons(self) -> tuple[Fraction, Fraction]:
        """(count, sum) epsilon of one cell per window: the largest that fit (bisection)."""
        return _cell_epsilons(self)

    @property
    def window_epsilon(self) -> float:
        """One window's pure epsilon for one vehicle: ``L0 (eps_count + eps_sum)``, plus
        the selection's ``-ln(1 - delta_sel)``; its delta is ``delta_sel``."""
        count, total = self.cell_epsilons
        return self.cells * float(count + total) + _selection_epsilon(self.selection_delta)

    def period_epsilon(self, windows: int) -> float:
        """Epsilon at ``delta`` after ``windows`` windows of one period (§14.5): the smaller
        of the PLD's and basic composition's (the PLD's pessimistic grid can exceed the
        basic sum for few mechanisms), plus ``windows`` selection terms."""
        return _spent(*self.cell_epsilons, self, windows)

    def period_delta(self, windows: int) -> float:
        """Delta after ``windows`` windows: the PLD's share plus ``windows * delta_sel``."""
        return self.composition_delta + windows * self.selection_delta


def _selection_epsilon(delta_sel: float) -> float:
    return -math.log1p(-delta_sel)


def dyadic_floor(x: float) -> Fraction:
    """``x`` rounded down to a multiple of ``2^-EPSILON_BITS`` (exact, > 0)."""
    steps = math.floor(x * 2**EPSILON_BITS)
    if steps < 1:
        raise ValueError(f"per-cell epsilon {x!r} is below 2^-{EPSILON_BITS}")
    return Fraction(steps, 2**EPSILON_BITS)


def _mechanisms(count: Fraction, total: Fraction) -> object:
    """One cell's count and sum releases, as one PLD."""
    assert pld is not None, "secret-routes accounting needs dp-accounting (the [pld] extra)"
    counts = pld.from_discrete_laplace_mechanism(
        parameter=float(count) / COUNT_STEPS,
        sensitivity=COUNT_STEPS,
        value_discretization_interval=DISCRETISATION,
    )
    sums = pld.from_discrete_laplace_mechanism(
        parameter=float(total) / SUM_STEPS,
        sensitivity=SUM_STEPS,
        value_discretization_interval=DISCRETISATION,
    )
    return counts.compose(sums)


@lru_cache(maxsize=256)
def _composed_epsilon(count: Fraction, total: Fraction, cells: int, windows: int,
                      budget: SecretRoutesBudget) -> float:  # fmt: skip
    if windows < 1:
        return 0.0
    one = _mechanisms(count, total)
    composed = one.self_compose(cells * windows)  # type: ignore[attr-defined]
    return float(composed.get_epsilon_for_delta(budget.composition_delta))


def _period_laplace_epsilon(count: Fraction, total: Fraction, budget: SecretRoutesBudget,
                            windows: int) -> float:  # fmt: skip
    """The Laplace releases' epsilon over ``windows`` windows: min(basic, PLD); both are
    upper bounds at ``composition_delta`` (basic composition has delta 0)."""
    basic = windows * budget.cells * float(count + total)
    return min(basic, _composed_epsilon(count, total, budget.cells, windows, budget))


def _spent(count: Fraction, total: Fraction, budget: SecretRoutesBudget, windows: int) -> float:
    """The period's epsilon after ``windows`` windows at these per-cell epsilons."""
    selection = windows * _selection_epsilon(budget.selection_delta)
    return _period_laplace_epsilon(count, total, budget, windows) + selection


@lru_cache(maxsize=64)
def _cell_epsilons(budget: SecretRoutesBudget) -> tuple[Fraction, Fraction]:
    """The largest split that fits (bisection); checked: the period's epsilon is <= B."""
    target = budget.budget - budget.windows * _selection_epsilon(budget.selection_delta)
    if target <= 0:
        raise ValueError("vehicle_budget: too small for the partition selection's share")

    def split(eps: float) -> tuple[Fraction, Fraction]:
        return dyadic_floor(eps * budget.count_share), dyadic_floor(eps * (1 - budget.count_share))

    def fits(eps: float) -> bool:
        return _spent(*split(eps), budget, budget.windows) <= budget.budget

    low = target / (budget.windows * budget.cells)  # basic composition: fits up to rounding
    while not fits(low):  # a float ulp over: step down (dyadic floors lose more than this)
        low *= 1 - 2**-30
    high = low
    while fits(high * 2):
        high *= 2
    high *= 2
    for _ in range(14):  # relative precision ~ 1e-4 of the bracket; low always fits
        middle = (low + high) / 2
        if fits(middle):
            low = middle
        else:
            high = middle
    cells = split(low)
    if not _spent(*cells, budget, budget.windows) <= budget.budget:
        raise RuntimeError("secret-routes accountant: the period's epsilon exceeds B")
    return cells
