"""The per-vehicle budget release mode (docs/math.md §13; docs/budget.md): each vehicle loses
at most B per period, met by plan.

The package follows a window through the mode's pipeline (:mod:`.stages`):

- :mod:`.spans` and :mod:`.pooling`: the carry of earlier windows pooled with this one's
  pairs, and which units pool at all (§13.3);
- :mod:`.cells`: the adaptive cells the vehicles can pay for (§13.1, §12.4);
- :mod:`.plan`: each vehicle's room, the price of a short span (:mod:`.price`) and the plan
  (:mod:`.planner`, compiled in :mod:`.planner_kernel`): per-cell ε, caps and sit-outs; its
  single passes (:mod:`.plan_passes`, numpy forms :mod:`.plan_sums`);
- :mod:`.held`: what the release leaves, held apart from withheld;
- :mod:`.unsupported`: the one line naming what would release a cell the data cannot support.

The charge itself is the accountant's (:meth:`stream_dp.release.accounting.PrivacyAccountant.
charge`), as in every mode; the ε grid is :mod:`stream_dp.dp.epsilon_grid`.
"""

from stream_dp.release.vehicle_budget.stages import BudgetPipelines

__all__ = ["BudgetPipelines"]
