"""Per-cell ε and sit-outs under a per-vehicle budget (issue 25; docs/math.md §13).

Pure and public: every choice is a function of the occupancy array (per (cell, vehicle)
reading counts), the configuration and each vehicle's room (what the ledger lets it spend
now, :meth:`~stream_dp.dp.budget_ledger.BudgetLedger.budget_room`). Nothing here sees a
reading's value, so the plan costs no privacy.

- **Per-cell ε.** For a cell's kept counts ``m_l`` and cap ``c`` (``S(c) = Σ min(m_l, c)``,
  ``top = c``, ``M`` all readings of the cell), the published error bar ``U (1 − S/M) +
  ln20 U c / (S ε_μ)`` (Thm IV.1, eq. (9), :func:`~stream_dp.dp.error_bars.mean_error`) is
  ``≤ T`` from ``ε_μ = ln20 U c / (S (T − U (1 − S/M)))``. The cell takes the cap of least
  ``ε_μ`` among its kept counts (only caps ``≤ C`` or the largest count with a prefix limit
  ``C``; the largest count alone without the pseudo-user cap) and ``ε = ε_μ / (1 − s)``
  rounded *up* to a grid of ``EPSILON_STEP`` = 1/128 (the error bar stays ``≤ T``; ledger
  sums are exact sums of whole steps).
- **Sit-outs.** A vehicle whose cells cost more than its room sits out the cells where
  leaving it out costs least per ε saved (``m / (M ε)``: the bias its readings add, per ε
  it saves), until its cells fit. Its readings stay in ``M`` (worst-case bias, as CLIP-USER's
  suppressed readings). The cells are re-costed without it; repeat. A cell that cannot meet
  T at an ε of at most ``max_cell_epsilon``, or keeps fewer than ``min_vehicles``, is
  dropped (withheld: nobody pays for it) for good, and every round removes at least one
  pair: the loop ends. (Removing a vehicle never lowers a cell's ε at a given cap, but under
  the prefix limit the largest count's cap may leave with it, so a dropped cell could have
  come back: keeping it dropped is a choice, docs/math.md §13.1.)

The result: each vehicle pays the summed ε of the cells it is kept in, at most its room.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp.epsilon_grid import EPSILON_STEP, ROUNDING_MARGIN
from stream_dp.dp.error_bars import LN20, SAMPLER_RTOL
from stream_dp.dp.occupancy import Occupancy

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

_FACTOR = LN20 * (1.0 + SAMPLER_RTOL)
#: A plan's round re-sums only the payments that may have changed (of the vehicles in the
#: cells whose ε changed, and of those that sat out) when those cells' entries and sat-out
#: vehicles are fewer than 1/_FEW of the vehicles (else one pass over all entries is faster).
#: Each such vehicle is re-summed over all its entries, by random reads (~20x the cost per
#: entry of the sequential pass: measured on the 1M-reading window, 100,000 vehicles in 5.5
#: cells each), so the work is about ``touched × entries per vehicle`` against the pass's
#: ``entries``. With ``UPDATE_PAYMENTS`` nothing is re-summed after the first round, and
#: only the vehicles a change left past their room are compared with it: _FEW then only
#: chooses how the first round's payers are compared.
_FEW = 16
#: Whether a plan's later rounds move the payments by each change instead of summing them
#: again (exact on the grid, :func:`stream_dp.release.vehicle_budget.planner_kernel.plan_rounds`);
#: the
#: tests switch it off to compare.
UPDATE_PAYMENTS = True
#: The release price's loop (``ceiling``) stops planning again once the cells a plan puts past
#: their price hold, together, under this share of the readings of the cells it releases:
#: they are held in that plan (dropped from it), not in a fresh one (docs/math.md §13.3, "When
#: the re-plans stop"). Measured on the 10^6-reading window: its first choice's 21 plans → 3,
#: the same records released; the AIS week's release by the rules unchanged.
SETTLE_SHARE = 0.02


@dataclass(frozen=True)
class BudgetPlan:
    """Per entry whether it is kept (read), per cell its ε (+inf: dropped) and cap, per
    vehicle the summed ε of its kept cells (an upper bound of its charge, which is its own
    share of each, docs/math.md §13.1)."""

    kept: BoolArray
    epsilon: FloatArray
    cap: IntArray
    paid: FloatArray
    rounds: int

    @property
    def dropped(self) -> BoolArray:
        return ~np.isfinite(self.epsilon)


def plan_budget(
    occupancy: Occupancy,
    room: FloatArray,
    *,
    target: float,
    upper: float,
    variance_share: float,
    max_cell_epsilon: float,
    min_vehicles: int = 1,
    prefix_limit: int | None = None,
    pseudo_user: bool = True,
    held: BoolArray | None = None,
    ceiling: FloatArray | None = None,
    refusable: BoolArray | None = None,
    refuse_at: float = 0.0,
) -> BudgetPlan:
    """The window's per-cell ε, caps and sit-outs for vehicles that may spend ``room``
    (indexed like ``occupancy.vehicles``) (module docstring); ``held`` cells are not
    released now (they wait for more windows, :mod:`stream_dp.release.vehicle_budget.spans`).

    One compiled call (:func:`stream_dp.release.vehicle_budget.planner_kernel.plan_rounds`): the
    first
    round costs every cell; each later round only the cells some vehicle left, and only the
    payments of the vehicles read in them. The first round sums each payment; later rounds
    move it by each change (a sit-out's ε, a repriced cell's change of ε). Every ε is a whole
    number of ``EPSILON_STEP`` (a power of two), so these sums and differences are exact and
    every float is the one a whole-occupancy pass gives
    (``tests.support.vehicle_budget_reference``); off the grid (``UPDATE_PAYMENTS``
    False, or a step that is no power of two) each payment is summed again instead.

    ``ceiling``: per cell the most ε it may take now (the release price, docs/math.md
    §13.3); a cell whose ε passes it is held too and the plan computed again, until none does
    or those that do hold under :data:`SETTLE_SHARE` of the released cells' readings or
    include ``refusable`` cells of at least ``refuse_at`` readings (then dropped from that
    plan)
    (:func:`stream_dp.release.vehicle_budget.planner_kernel.plan_priced`: all these plans in one
    call)."""
    from stream_dp.dp.ordering import counting_sort_fits
    from stream_dp.release.vehicle_budget import planner_kernel as kernel  # numba: on first use

    n_cells, n_vehicles = len(occupancy.cells), len(occupancy.vehicles)
    if len(room) != n_vehicles:
        raise ValueError(f"room has {len(room)} values for {n_vehicles} vehicles")
    if occupancy.n_entries >= 2**31:  # the compiled plan packs an entry index in 32 bits
        raise ValueError(f"occupancy has {occupancy.n_entries} entries, at most 2^31 - 1")
    count = occupancy.count.astype(np.int64, copy=False)
    top = int(count.max(initial=0))
    dropped = np.zeros(n_cells, dtype=bool) if held is None else held.astype(bool, copy=True)
    limit = -1 if prefix_limit is None else int(prefix_limit)
    costing = (_FACTOR * upper, float(target), float(upper), limit, bool(pseudo_user))
    rounding = (1.0 - variance_share, 1.0 + ROUNDING_MARGIN, EPSILON_STEP)
    update = UPDATE_PAYMENTS and math.frexp(EPSILON_STEP)[0] == 0.5  # exact sums (docstring)
    entries = (
        occupancy.cell_start, occupancy.vehicle_index.astype(np.int64, copy=False), count,
        occupancy.total_per_cell().astype(np.float64), np.asarray(room, dtype=np.float64),
    )  # fmt: skip
    by_histogram = counting_sort_fits(occupancy.n_entries, n_cells * (top + 1))
    settings = (costing, rounding, max_cell_epsilon + 1e-12, int(min_vehicles), _FEW, update)
    if ceiling is None:
        kept, epsilon, cap, paid, rounds = kernel.plan_rounds(
            *entries, dropped, top, by_histogram, *settings
        )
    else:
        if len(ceiling) != n_cells:
            raise ValueError(f"ceiling has {len(ceiling)} values for {n_cells} cells")
        if refusable is not None and len(refusable) not in (0, n_cells):
            raise ValueError(f"refusable has {len(refusable)} values for {n_cells} cells")
        kept, epsilon, cap, paid, rounds, _ = kernel.plan_priced(
            *entries, dropped, np.asarray(ceiling, dtype=np.float64), top, by_histogram,
            *settings, SETTLE_SHARE,
            np.zeros(0, dtype=bool) if refusable is None else np.asarray(refusable, dtype=bool),
            float(refuse_at),
        )  # fmt: skip
    return BudgetPlan(kept, epsilon, cap, paid, int(rounds))
