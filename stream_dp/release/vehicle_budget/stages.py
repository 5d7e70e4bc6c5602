"""The vehicle budget's own stages and its pipelines (docs/math.md §13): pool the carry
(§13.3), regroup into the cells the vehicles can pay for (§13.1), plan each cell's ε, caps and
sit-outs, stamp each record with its ε and span, and defer what may still wait. The stages
they share with the fixed-ε release are :mod:`stream_dp.release.stages`'."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from stream_dp.release.accounting import PrivacyAccountant, regroup_epsilon
from stream_dp.release.bounding import Contributions
from stream_dp.release.modes import VehicleBudget
from stream_dp.release.params import ReleaseParams
from stream_dp.release.records import rfc3339
from stream_dp.release.report import Withheld
from stream_dp.release.stages import (
    CountStatistics,
    Noise,
    Pipeline,
    Records,
    Stage,
    Statistics,
    Summary,
    Withhold,
)
from stream_dp.release.state import Pooled, WindowInput, WindowState
from stream_dp.release.vehicle_budget.cells import Regrouped, budget_regroup
from stream_dp.release.vehicle_budget.held import ReleasedCells, held_counts
from stream_dp.release.vehicle_budget.optimiser import optimised_regroup
from stream_dp.release.vehicle_budget.plan import (
    Rooms,
    budget_mode,
    budget_plan,
    check_plan,
    planned_bound,
    prices_spans,
    vehicle_room,
)
from stream_dp.release.vehicle_budget.pooling import choose_pooling, with_aside
from stream_dp.release.vehicle_budget.spans import (
    deferred_pairs,
    fresh_carry,
    pooled,
    pooled_with_own,
    span_starts,
    take_pairs,
)
from stream_dp.windows.columns import WindowColumns

if TYPE_CHECKING:
    from stream_dp.dp.noise import LaplaceNoise


class Pool(Stage):
    """Spans (§13.3): the carry cut to the pairs young enough to pool
    (:func:`~stream_dp.release.vehicle_budget.spans.fresh_carry`), the pooling choice
    (:func:`~stream_dp.release.vehicle_budget.pooling.choose_pooling`), and the window's pairs
    pooled
    with it; a stale carry, the carried pairs a window-alone cell leaves and, at the input's
    end, the pairs set aside are withheld."""

    name = "pool"
    writes = frozenset({"pooled", "columns"})
    reports = frozenset({"withheld_pool"})

    def run(self, state: WindowState) -> WindowState:
        window, columns = state.input, state.columns
        params = window.params
        carry, stale = fresh_carry(window.carry, window.window_start, params)
        choice = choose_pooling(columns, carry, params, regroup_epsilon(params))
        aside = choice.aside  # this window's own pairs: young enough to wait one more
        if window.last and aside is not None:  # the input ends: no later window to release them
            stale += int(aside.count.sum())
            aside = None
        pooled, own = pooled_with_own(choice.window, choice.carry, params.prefix_limit)
        withheld = stale + choice.withheld
        made = Pooled(pooled, own, aside, choice.due)
        report = replace(state.report, withheld_pool=Withheld(readings=withheld))
        return replace(state, pooled=made, columns=pooled, report=report)


@dataclass
class BudgetRegroup(Stage):
    """The adaptive cells the vehicles' rooms can pay for, their chosen pairs and their plan,
    by the planner the pipeline was built with (``budget_planner``): the rules'
    (:func:`~stream_dp.release.vehicle_budget.cells.budget_regroup`, §13.1), the
    optimiser's (:func:`~stream_dp.release.vehicle_budget.optimiser.optimised_regroup`,
    §13.5) or either by the window's size (:func:`sized_regroup`, ``"auto"``)."""

    regroup: Callable[..., Regrouped] = budget_regroup
    name = "regroup"
    writes = frozenset({"columns", "adaptive", "pairs"})
    reports = frozenset({"withheld_regroup", "planned_by"})

    def run(self, state: WindowState) -> WindowState:
        window = state.input
        regrouped = self.regroup(
            state.columns, window.params, _rooms(window, state), regroup_epsilon(window.params),
            window.last, state.due,
        )  # fmt: skip
        planned = regrouped.planner if len(state.columns) else None  # no pair: nothing planned
        report = replace(
            state.report, withheld_regroup=Withheld(*regrouped.withheld), planned_by=planned
        )
        return replace(
            state, columns=regrouped.columns, adaptive=regrouped.adaptive, pairs=regrouped.pairs,
            report=report,
        )  # fmt: skip


log = logging.getLogger(__name__)


def sized_regroup(
    columns: WindowColumns, params: ReleaseParams, *args: object, **kwargs: object
) -> Regrouped:
    """``budget_planner = "auto"``: the optimiser's regrouping for a window of at most
    ``optimiser_max_pairs`` pooled pairs, else the rules' (a window without pairs plans
    nothing either way). The pair count is the public
    occupancy's, so the choice costs no privacy (§2.2); a window left to the rules is logged
    (counts only)."""
    limit = budget_mode(params).optimiser_max_pairs
    if len(columns) <= limit:
        return optimised_regroup(columns, params, *args, **kwargs)
    log.info(
        "budget_planner auto: %d pooled cell-vehicle pairs, over optimiser_max_pairs %d: this "
        "window is planned by the rules", len(columns), limit,
    )  # fmt: skip
    return budget_regroup(columns, params, *args, **kwargs)


#: ``budget_planner`` → the regrouping that plans (§13.1 rules, §13.5 optimiser, "auto": by
#: the window's size).
PLANNERS: dict[str, Callable[..., Regrouped]] = {
    "rules": budget_regroup,
    "optimiser": optimised_regroup,
    "auto": sized_regroup,
}


class Plan(Stage):
    """Per-cell ε, caps and sit-outs from the occupancy and each vehicle's room in the ledger
    (§13, :mod:`stream_dp.release.vehicle_budget.planner`); what it keeps bounds each vehicle
    (as CLIP-USER and the cap do at a fixed ε). The window's accountant is built here, with
    the plan's ε, and the plan checked by what it would charge each vehicle, apart from the
    planner's own sums (:func:`~stream_dp.release.vehicle_budget.plan.check_plan`)."""

    name = "plan"
    pairs_final = True
    writes = frozenset({"pairs", "budget_plan", "accountant"})
    reports = frozenset({"vehicles_budget_limited", "g1", "error_bound", "suppressed_pairs"})

    def run(self, state: WindowState) -> WindowState:
        pairs, window = state.pairs, state.input
        assert pairs is not None, "the select stage runs first"
        if not len(pairs.chosen):
            return replace(state, accountant=PrivacyAccountant(window.params))
        params, rooms = window.params, _rooms(window, state)
        plan = state.cache.plan_of(pairs)  # planned by the regrouping (same inputs)
        if plan is None:
            start = None
            if prices_spans(params, state.adaptive, window.last):
                start = span_starts(
                    state.cache, state.columns, pairs, window.window_start, params.window_seconds
                )
            plan = budget_plan(params, rooms, pairs.occupancy, start, state.due)
        bounded, g1, sat_out = planned_bound(pairs.occupancy, plan, params)
        accountant = PrivacyAccountant(params, plan.epsilon)  # the window's, built once
        charged = accountant.vehicle_charges(
            pairs.occupancy, plan.kept, np.isfinite(plan.epsilon), bounded.capped
        )
        check_plan(pairs.occupancy, plan, vehicle_room(rooms, pairs.occupancy), charged)
        report = replace(  # as CLIP-USER reports its bound (the plan's sit-outs suppress)
            state.report, vehicles_budget_limited=sat_out, g1=g1,
            error_bound=float(params.target_mean_error or 0.0),
            suppressed_pairs=int(np.count_nonzero(~plan.kept)),
        )  # fmt: skip
        bound = Contributions(pairs.chosen, pairs.occupancy, pairs.entry_of, None, bounded)
        return replace(state, pairs=bound, budget_plan=plan, report=report, accountant=accountant)


class SpanRecords(Stage):
    """Each record states its own ε and the start of its span (§13, §13.3)."""

    name = "span-records"
    writes = frozenset({"cells"})

    def run(self, state: WindowState) -> WindowState:
        pairs, released, accountant = state.pairs, state.released, state.accountant
        assert pairs is not None and released is not None and accountant is not None
        occupancy = pairs.occupancy
        epsilons = accountant.cell_epsilons(len(occupancy.cells)).tolist()
        window = state.input
        seconds = window.params.window_seconds
        starts = span_starts(state.cache, state.columns, pairs, window.window_start, seconds)
        starts = starts.tolist()
        stamps = {start: rfc3339(start) for start in set(starts)}  # a few spans' starts
        cells = [
            {**record, "epsilon": epsilons[g], "window_start": stamps[starts[g]]}
            for record, g in zip(state.cells, np.flatnonzero(released).tolist(), strict=True)
        ]
        return replace(state, cells=cells)


class Defer(Stage):
    """Spans (§13.3): the pairs no released record covers that may still wait, and the ones
    set aside, are carried on (none after the input's last window: withheld); what the
    release leaves is then counted held or withheld
    (:mod:`stream_dp.release.vehicle_budget.held`)."""

    name = "defer"
    writes = frozenset({"carry_out"})
    reports = frozenset({"cells_held", "readings_held", "withheld_defer"})

    def run(self, state: WindowState) -> WindowState:
        window, pooled = state.input, state.pooled
        assert pooled is not None, "the pool stage runs first"
        params, columns, last = window.params, pooled.columns, window.last
        adaptive = state.adaptive
        carried = np.zeros(0, dtype=np.int64)
        if not last and adaptive is not None:  # no regrouping (no T): nothing is deferred
            released = _released_cells(state)
            names = [] if released is None else released.released_names
            carried = deferred_pairs(
                columns, adaptive, names, window.window_start, params, state.cache
            )
        out = take_pairs(columns, carried) if len(carried) else None
        carry_out = None if last else with_aside(out, pooled.aside, params.prefix_limit)
        state = replace(state, carry_out=carry_out)
        if adaptive is None:
            return state  # no regrouping (no T): nothing is carried
        aside = 0 if pooled.aside is None or last else int(pooled.aside.count.sum())
        counts = held_counts(
            columns, pooled.aside, carry_out, adaptive, _released_cells(state),
            int(pooled.own[carried].sum()) + aside,
        )  # fmt: skip
        settled = Withheld(counts.cells_withheld, counts.readings_withheld)
        report = replace(
            state.report, cells_held=counts.cells_held, readings_held=counts.readings_held,
            withheld_defer=settled,
        )  # fmt: skip
        return replace(state, report=report)


def _rooms(window: WindowInput, state: WindowState) -> Rooms:
    """The window's vehicles' rooms, kept in its cache."""
    params = window.params
    return Rooms(budget_mode(params), window.ledger, window.window_start, state.cache)


def _released_cells(state: WindowState) -> ReleasedCells | None:
    """The regrouped cells the release chose and which it released; None if none."""
    if state.empty or state.pairs is None or state.released is None or state.stats is None:
        return None
    return ReleasedCells(state.pairs.occupancy.cells, state.released, state.stats.n_readings)


@dataclass(frozen=True)
class BudgetPipelines:
    """:class:`~stream_dp.release.modes.VehicleBudget`'s stages (module docstring of
    :mod:`stream_dp.release.stages`)."""

    params: ReleaseParams
    mode: VehicleBudget

    def _choice(self, pool: bool) -> list[Stage]:
        pooling: list[Stage] = [Pool()] if pool else []
        return [*pooling, BudgetRegroup(PLANNERS[self.mode.planner]), Plan()]

    def release(self, noise: LaplaceNoise) -> Pipeline:
        after = [Statistics(prefix_sums=False), Withhold(), Noise(noise), Records(), SpanRecords()]
        deferring: list[Stage] = [Defer()] if self.mode.spans else []
        return Pipeline(after, self._choice(pool=True), [*deferring, Summary()])

    def choice(self) -> Pipeline:
        return Pipeline((), self._choice(pool=False))

    def plan(self) -> Pipeline:
        return Pipeline([CountStatistics(), Withhold()], self._choice(pool=False))

    def failed_input(
        self, columns: WindowColumns | None, carry: WindowColumns | None, window_start: int
    ) -> tuple[WindowColumns | None, WindowColumns | None]:
        """The failed window pools its whole carry (its release would have pooled it, or set
        parts of it aside, §13.3)."""
        carried, _ = fresh_carry(carry, window_start, self.params)
        if columns is not None:
            columns = pooled(columns, carried, self.params.prefix_limit)
        return columns, carried
