"""The window's releases chosen as an optimisation over public quantities
(docs/math.md §13.5, "The objective" and "The solver").

Given candidate releases, each in one exclusive *group* (the options for the same readings:
one cell at several ε or sit-out variants), each with a
*value* (expected usefully covered readings minus a staleness cost) and a payment from each of
its vehicles, choose at most one candidate per group so that the summed value is largest and
no vehicle pays more than its room:

    max Σ_k v_k x_k   s.t.   Σ_{k ∈ g} x_k ≤ 1 (each group g),
                             Σ_k p_{k,l} x_k ≤ r_l (each vehicle l),   x_k ∈ {0, 1}.

A multiple-choice knapsack with one constraint per vehicle (other exclusions, such as a cell
and its parent, are rooms too: a room of 1 that each excluding candidate pays 1). The solver
relaxes the rooms with
multipliers ``λ_l ≥ 0`` (Lagrangian relaxation): for any ``λ``

    L(λ) = Σ_g max(0, max_{k ∈ g} v_k − Σ_l λ_l p_{k,l}) + Σ_l λ_l r_l  ≥  OPT

(weak duality: every feasible choice's value is at most its Lagrangian, and that at most
``L(λ)``). A few subgradient steps lower ``L``; the candidates are then taken greedily in
three orders (value, reduced value at the bound's multipliers, value per share of the rooms
taken), keeping the best feasible choice, each made maximal by
:func:`~stream_dp.dp.release_choice_kernel.greedy_in_order`. The result carries
``upper_bound = max(value, min L(λ))``, so its value is at least
``value / upper_bound`` times the optimum: a bound proven for every instance and computed
with it. Every input is a function of the public occupancy, the configuration and the
ledger, so the choice costs no privacy (docs/math.md §2.2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp.release_choice_kernel import greedy_in_order, lagrangian_bound, weighed_costs

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

#: Subgradient steps on the multipliers (each one numpy pass over the payments).
DUAL_STEPS = 60
#: A room below this counts as this in the density order (a zero room takes nothing).
_TINY_ROOM = 1e-12


@dataclass(frozen=True)
class Candidates:
    """Candidate releases: per candidate its ``group`` (``0 … n_groups − 1``) and ``value``;
    its payments ``pay[start[k]:start[k + 1]]`` from vehicles ``vehicle[start[k]:start[k + 1]]``
    (indices into the rooms; a vehicle at most once per candidate)."""

    group: IntArray
    value: FloatArray
    start: IntArray
    vehicle: IntArray
    pay: FloatArray

    def __post_init__(self) -> None:
        n = len(self.group)
        if len(self.value) != n or len(self.start) != n + 1:
            raise ValueError("group, value and start must describe the same candidates")
        if len(self.vehicle) != len(self.pay) or int(self.start[-1]) != len(self.pay):
            raise ValueError("start must end at the number of payments")
        if len(self.pay) and float(np.min(self.pay)) < 0.0:
            raise ValueError("payments must be non-negative")

    @property
    def payments(self) -> tuple[IntArray, IntArray, FloatArray]:
        """``(start, vehicle, pay)``, as the compiled passes take them."""
        return self.start, self.vehicle, self.pay

    @property
    def n_groups(self) -> int:
        return int(self.group.max()) + 1 if len(self.group) else 0

    def cost(self, weights: FloatArray) -> FloatArray:
        """Per candidate, ``Σ_l weights_l p_{k,l}`` (its payments weighed per vehicle)."""
        return weighed_costs(self.start, self.vehicle, self.pay, weights)

    def usage(self, chosen: IntArray, n_vehicles: int) -> FloatArray:
        """Per vehicle, what the ``chosen`` candidates (indices) take from its room."""
        taken = np.zeros(len(self.group), dtype=bool)
        taken[chosen] = True
        entry_taken = np.repeat(taken, np.diff(self.start))
        return np.bincount(
            self.vehicle[entry_taken], weights=self.pay[entry_taken], minlength=n_vehicles
        )


@dataclass(frozen=True)
class Choice:
    """The chosen candidates (``chosen``: indices, one per group at most), their summed
    ``value``, each vehicle's ``spent``, and ``upper_bound`` ≥ the optimum (weak duality)."""

    chosen: IntArray
    value: float
    spent: FloatArray
    upper_bound: float

    @property
    def certified_ratio(self) -> float:
        """``value / upper_bound``: the choice is at least this share of the optimum."""
        return 1.0 if self.upper_bound <= 0.0 else self.value / self.upper_bound


def choose_releases(candidates: Candidates, room: FloatArray, steps: int = DUAL_STEPS) -> Choice:
    """The choice of the module docstring for vehicles of ``room`` (indexed like
    ``candidates.vehicle``): the Lagrangian bound after ``steps`` subgradient steps, and the
    best of three greedy orders: by value, by reduced value at the bound's multipliers, and
    by value per share of the rooms taken (``v_k / Σ_l p_{k,l} / r_l``)."""
    room = np.asarray(room, dtype=np.float64)
    n_groups = candidates.n_groups
    best = _greedy(candidates, room, -candidates.value, n_groups)
    bound, multipliers = lagrangian_bound(
        candidates.group, n_groups, candidates.value, candidates.payments, room, best.value,
        int(steps),
    )  # fmt: skip
    reduced = candidates.value - candidates.cost(multipliers)
    share = candidates.cost(1.0 / np.maximum(room, _TINY_ROOM))  # rooms each one takes
    for key in (-reduced, -candidates.value / np.maximum(share, _TINY_ROOM)):
        other = _greedy(candidates, room, key, n_groups)
        best = other if other.value > best.value else best
    return Choice(best.chosen, best.value, best.spent, max(float(bound), best.value))


def _greedy(candidates: Candidates, room: FloatArray, key: FloatArray, n_groups: int) -> Choice:
    """The feasible, maximal choice greedy takes in ascending ``key`` (its bound left at
    +inf)."""
    order = np.argsort(key, kind="mergesort").astype(np.int64)
    per_group = greedy_in_order(
        order, candidates.group, n_groups, candidates.value, candidates.payments, room
    )
    chosen = per_group[per_group >= 0]
    spent = candidates.usage(chosen, len(room))
    return Choice(chosen, float(candidates.value[chosen].sum()), spent, np.inf)
