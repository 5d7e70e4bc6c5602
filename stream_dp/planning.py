"""Offline planning on a public occupancy array: what the release would do to one window.

``build_plan`` runs the release's own stages (the ``plan`` pipeline of
:func:`stream_dp.release.pipelines.pipelines_of`:
adaptive regrouping, selection, CLIP-USER, the cap, the error bars and the withholding,
docs/math.md §9) without noise on an occupancy (read by :mod:`stream_dp.sources.occupancy_csv`),
so it shows the K and the error bars ``release`` gives that window; ``plan_to_json`` and
``format_plan`` render the result. A bad parameter raises ``PlanInputError`` with a one-line
message. Under a vehicle budget (docs/math.md §13) the stages are the release's budget mode
with no ledger: each vehicle's room is the burst (a vehicle's first window, or one whose
allowance has refilled), so the plan states each cell's own ε, the vehicles that sit out and
the largest per-vehicle loss, as the release of that window publishes them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from stream_dp.dp.occupancy import Occupancy
from stream_dp.release.accounting import WindowReads
from stream_dp.release.bounding import Contributions
from stream_dp.release.params import ReleaseParams
from stream_dp.release.pipelines import pipelines_of
from stream_dp.release.records import capped_error
from stream_dp.release.state import WindowInput, WindowState
from stream_dp.windows.columns import WindowColumns


class PlanInputError(ValueError):
    """A bad parameter of the plan; the message is one line."""


def parse_positive(name: str, text: str) -> float:
    """Parse a finite, strictly positive number given as ``--name``."""
    try:
        value = float(text)
    except ValueError:
        raise PlanInputError(f"--{name} must be a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise PlanInputError(f"--{name} must be a finite number > 0, got {text!r}")
    return value


@dataclass(frozen=True)
class GridPlan:
    """One cell of the plan."""

    cell: str
    vehicles: int
    readings: int
    initial_error: float
    error: float
    kept_vehicles: int
    cap: int
    error_after_cap: float
    #: The released mean's 95 % error bar (as the release publishes it, ``mean_error``).
    mean_error: float
    #: Whether the release releases the cell (adaptive cells: its mean_error meets T).
    released: bool
    #: The cell's ε (the record's ``epsilon``); under a vehicle budget None where the plan
    #: gives the cell none (held for a span, or dropped: not released).
    epsilon: float | None = None
    #: Under a vehicle budget: vehicles of the cell that sit out its release.
    sat_out: int = 0

    @property
    def growth(self) -> float:
        return self.error - self.initial_error


@dataclass(frozen=True)
class Plan:
    """What the release's stages do to one window's occupancy (K: over the released cells).
    ``epsilon``: every cell's, or under a vehicle budget the largest of the released cells'
    (the window summary's); ``privacy_loss_before``/``_after``: the largest per-vehicle loss
    with every pair read (G1·ε) and as the release reads them (K·ε, or under a vehicle
    budget what a vehicle is charged for the cells it is read in, its own share of each, after
    the sit-outs)."""

    epsilon: float
    upper: float
    variance_share: float
    target_mean_error: float | None
    error_bound: float
    g1: int
    k: int
    n_vehicles: int
    n_entries: int
    pseudo_user: bool
    #: The (cell, vehicle) pairs not read: CLIP-USER's, or the vehicle budget's sit-outs.
    suppressed: tuple[tuple[str, str], ...]
    grids: tuple[GridPlan, ...]
    privacy_loss_before: float
    privacy_loss_after: float
    #: Under a vehicle budget: B, the burst (each vehicle's room here) and the period.
    vehicle_budget: float | None = None
    vehicle_burst: float | None = None
    budget_period_seconds: int | None = None
    #: Under a vehicle budget: the vehicles that sit out some cell.
    vehicles_sat_out: int = 0
    #: Under a vehicle budget: the planner that chose the cells ("rules" or "optimiser").
    planned_by: str | None = None

    @property
    def initial_max_error(self) -> float:
        return max(grid.initial_error for grid in self.grids)

    @property
    def max_error(self) -> float:
        return max(grid.error for grid in self.grids)

    @property
    def max_error_after_cap(self) -> float:
        return max(grid.error_after_cap for grid in self.grids)

    @property
    def cells_over_bound(self) -> int:
        """Cells whose error after CLIP-USER exceeds E (possible only with a tight bound; not
        the cells a vehicle budget gives no ε, whose error is infinite)."""
        bound = self.error_bound * (1 + 1e-12)
        return sum(bound < grid.error < math.inf for grid in self.grids)


def occupancy_columns(occupancy: Occupancy) -> WindowColumns:
    """The occupancy as a window's columns without readings (the plan reads counts only)."""
    n = occupancy.n_entries
    none = np.zeros(0, dtype=np.float64)
    return WindowColumns(
        occupancy.cells, occupancy.cell_index, occupancy.vehicles, occupancy.vehicle_index,
        occupancy.count, np.zeros(n), np.zeros(n), np.zeros(0, dtype=np.int64), none, none,
    )  # fmt: skip


def _check_h3_cells(occupancy: Occupancy, resolution: int) -> None:
    """Adaptive cells regroup H3 cells of ``resolution``: a one-line error for other ids."""
    import h3

    for cell in occupancy.cells:
        if not (h3.is_valid_cell(cell) and h3.get_resolution(cell) == resolution):
            raise PlanInputError(
                f"cell {cell!r} is not an H3 cell of resolution {resolution}: adaptive cells "
                "(target_mean_error) regroup H3 cells; --fixed-cells plans fixed cells, "
                "--resolution names the cells' resolution"
            )


def build_plan(occupancy: Occupancy, params: ReleaseParams) -> Plan:
    """Run the release's stages up to the error bars on ``occupancy`` and tabulate them."""
    if params.target_mean_error is not None:
        _check_h3_cells(occupancy, params.resolution)
    # the occupancy is the whole input (last): no cell waits for a longer span
    window = WindowInput(0, occupancy_columns(occupancy), params, last=True)
    state = pipelines_of(params).plan().run(WindowState.start(window))
    if state.empty:
        raise PlanInputError("no cell of the occupancy is chosen with these settings")
    pairs, report, bars, accountant = state.pairs, state.report, state.bars, state.accountant
    assert pairs is not None and pairs.bounded is not None and accountant is not None
    assert bars is not None and state.released is not None
    bounded, capped, chosen = pairs.bounded, pairs.bounded.capped, pairs.occupancy
    n_cells = len(chosen.cells)
    vehicles = np.bincount(chosen.cell_index, minlength=n_cells)
    kept = np.bincount(
        chosen.cell_index, weights=np.asarray(bounded.kept, dtype=np.int64), minlength=n_cells
    )
    readings = chosen.total_per_cell()
    budget = _budget_view(state)
    epsilons = budget.epsilons if budget else [params.epsilon] * n_cells
    sat_out = budget.sat_out if budget else [0] * n_cells
    suppressed = tuple(budget.sat_out_pairs) if budget else _suppressed(pairs)
    columns = (  # per cell, as Python numbers (indexing numpy arrays cell by cell is slower)
        chosen.cells, vehicles.tolist(), readings.tolist(), bounded.initial_error.tolist(),
        bounded.error.tolist(), kept.astype(np.int64).tolist(), capped.cap.tolist(),
        capped.error.tolist(), bars.mean.tolist(), state.released.tolist(), epsilons, sat_out,
    )  # fmt: skip
    grids = tuple(
        GridPlan(
            cell=cell,
            vehicles=n_vehicles,
            readings=n_readings,
            initial_error=initial_error,
            error=error,
            kept_vehicles=kept_vehicles,
            cap=cap,
            error_after_cap=error_after_cap,
            mean_error=float(capped_error(mean_bar, params.upper)),
            released=released,
            epsilon=cell_epsilon,
            sat_out=cell_sat_out,
        )
        for (
            cell, n_vehicles, n_readings, initial_error, error, kept_vehicles, cap,
            error_after_cap, mean_bar, released, cell_epsilon, cell_sat_out,
        ) in zip(*columns, strict=True)
    )  # fmt: skip
    before, after = (
        budget.losses
        if budget
        else (accountant.privacy_loss(report.g1), accountant.privacy_loss(report.k))
    )
    return Plan(
        epsilon=accountant.window_epsilon(state.released),
        upper=params.upper,
        variance_share=params.variance_share,
        target_mean_error=params.target_mean_error,
        error_bound=report.error_bound,
        g1=report.g1,
        k=report.k,
        n_vehicles=len(chosen.vehicles),
        n_entries=chosen.n_entries,
        pseudo_user=params.pseudo_user,
        suppressed=suppressed,
        grids=grids,
        privacy_loss_before=before,
        privacy_loss_after=after,
        vehicle_budget=params.vehicle_budget,
        vehicle_burst=params.vehicle_burst if budget else None,
        budget_period_seconds=params.budget_period_seconds if budget else None,
        vehicles_sat_out=report.vehicles_budget_limited,
        planned_by=report.planned_by,
    )


@dataclass(frozen=True)
class _BudgetView:
    """What the vehicle budget's plan of the window says, per cell and per vehicle."""

    epsilons: list[float | None]
    sat_out: list[int]
    sat_out_pairs: list[tuple[str, str]]
    #: The largest per-vehicle loss with every pair of the released cells read at its cell's
    #: ε, and as the release charges the pairs it reads (each vehicle its own share).
    losses: tuple[float, float]


def _suppressed(pairs: Contributions) -> tuple[tuple[str, str], ...]:
    """CLIP-USER's suppressed (cell, vehicle) pairs, in suppression order."""
    assert pairs.clip is not None, "CLIP-USER bounded the pairs"
    return pairs.clip.suppressed


def _budget_view(state: WindowState) -> _BudgetView | None:
    """The budget's per-cell ε, sit-outs and per-vehicle losses (the release's own figures:
    :meth:`~stream_dp.release.accounting.PrivacyAccountant.charge`); None without."""
    plan, pairs, released = state.budget_plan, state.pairs, state.released
    if plan is None or pairs is None or released is None or pairs.bounded is None:
        return None
    occupancy = pairs.occupancy
    given = np.isfinite(plan.epsilon)
    epsilons = [float(e) if ok else None for e, ok in zip(plan.epsilon, given, strict=True)]
    sits = ~plan.kept & given[occupancy.cell_index]
    sat_out = np.bincount(occupancy.cell_index[sits], minlength=len(occupancy.cells))
    pairs_out = [
        (occupancy.cells[c], occupancy.vehicles[v])
        for c, v in zip(
            occupancy.cell_index[sits].tolist(),
            occupancy.vehicle_index[sits].tolist(),
            strict=True,
        )
    ]
    in_released = released[occupancy.cell_index]
    accountant = state.accountant
    assert accountant is not None
    every = accountant.charge(0, WindowReads(occupancy, in_released))[0].max_loss
    as_read = WindowReads(occupancy, plan.kept, released, capped=pairs.bounded.capped)
    read = accountant.charge(0, as_read)[0].max_loss  # as charged (§13.1, the loss)
    return _BudgetView(epsilons, sat_out.tolist(), pairs_out, (every, read))


def plan_to_json(plan: Plan) -> dict[str, Any]:
    """The plan as one JSON-ready object (an infinite error, of a cell the vehicle budget
    gives no ε, as null)."""
    return {
        "epsilon": plan.epsilon,
        "upper": plan.upper,
        "variance_share": plan.variance_share,
        "target_mean_error": plan.target_mean_error,
        "error_bound": plan.error_bound,
        "G1": plan.g1,
        "K": plan.k,
        "privacy_loss_before": plan.privacy_loss_before,
        "privacy_loss_after": plan.privacy_loss_after,
        "cells": len(plan.grids),
        "cells_released": sum(grid.released for grid in plan.grids),
        "vehicles": plan.n_vehicles,
        "pairs": plan.n_entries,
        "initial_max_error": _finite(plan.initial_max_error),
        "max_error": _finite(plan.max_error),
        "max_error_after_cap": _finite(plan.max_error_after_cap),
        "pseudo_user": plan.pseudo_user,
        "vehicle_budget": plan.vehicle_budget,
        "vehicle_burst": plan.vehicle_burst,
        "budget_period_seconds": plan.budget_period_seconds,
        "vehicles_sat_out": plan.vehicles_sat_out,
        "planned_by": plan.planned_by,
        "max_vehicle_loss": plan.privacy_loss_after,
        "cells_over_error_bound": plan.cells_over_bound,
        "suppressed": [[cell, vehicle] for cell, vehicle in plan.suppressed],
        "grids": {
            grid.cell: {
                "vehicles": grid.vehicles,
                "readings": grid.readings,
                "initial_error": _finite(grid.initial_error),
                "error": _finite(grid.error),
                "kept_vehicles": grid.kept_vehicles,
                "cap": grid.cap,
                "error_after_cap": _finite(grid.error_after_cap),
                "mean_error": grid.mean_error,
                "released": grid.released,
                "epsilon": grid.epsilon,
                "sat_out": grid.sat_out,
            }
            for grid in plan.grids
        },
    }


def format_plan(plan: Plan, label: str, top: int = 5) -> str:
    """A readable summary of the plan."""
    target = "" if plan.target_mean_error is None else f", target T {plan.target_mean_error:g}"
    if plan.vehicle_budget is None:
        per_cell = f"epsilon {plan.epsilon:g} per cell,"
    else:
        per_cell = (
            f"vehicle budget B {plan.vehicle_budget:g} per "
            f"{(plan.budget_period_seconds or 0) / 86400:g} days, burst {plan.vehicle_burst:g}"
            " (no ledger: each vehicle's room here),\n "
        )
    lines = [
        f"occupancy {label}: {_count(len(plan.grids), 'cell')}, "
        f"{_count(plan.n_vehicles, 'vehicle')}, {plan.n_entries} (cell, vehicle) pairs",
        f"parameters: {per_cell} upper bound U {plan.upper:g},"
        f" variance share {plan.variance_share:g}{target}",
    ]
    if plan.vehicle_budget is not None:
        return "\n".join(lines + _budget_lines(plan, top))
    lines.append(
        f"cells released:           {sum(g.released for g in plan.grids)}"
        f" (largest mean_error {max(g.mean_error for g in plan.grids):.4f})"
    )
    step = "after the pseudo-user step" if plan.pseudo_user else "(no pseudo-user step)"
    lines += [
        f"error bound E:            {plan.error_bound:.4f}",
        f"cells per vehicle:        G1 {plan.g1} -> K {plan.k}",
        f"privacy loss per window:  {plan.privacy_loss_before:g} -> {plan.privacy_loss_after:g}"
        f"  (G1*eps -> K*eps)",
        f"suppressed pairs:         {len(plan.suppressed)} (cell, vehicle)",
        f"worst-case error:         {plan.initial_max_error:.4f} initially",
        f"                          {plan.max_error:.4f} after CLIP-USER",
        f"                          {plan.max_error_after_cap:.4f} {step}",
    ]
    if plan.cells_over_bound:
        lines.append(
            f"warning: {plan.cells_over_bound} cells exceed E (already above it before clipping)"
        )
    grown = sorted(
        (grid for grid in plan.grids if grid.growth > 0), key=lambda g: (-g.growth, g.cell)
    )[:top]
    if not grown:
        lines.append("no cell's worst-case error grew")
        return "\n".join(lines)
    lines += _cell_table(
        "cells whose worst-case error grew most", grown,
        f"{'before':>12}  {'after':>12}  {'after cap':>12}  {'kept/vehicles':>13}  {'cap':>6}",
        lambda g: f"{g.initial_error:>12.4f}  {g.error:>12.4f}  {g.error_after_cap:>12.4f}"
        f"  {g.kept_vehicles:>6}/{g.vehicles:<6}  {g.cap:>6}",
    )  # fmt: skip
    return "\n".join(lines)


def _cell_table(
    title: str, grids: list[GridPlan], header: str, row: Callable[[GridPlan], str]
) -> list[str]:
    """``title (top N):``, then a column of cell ids beside ``header`` and each ``row``."""
    width = max(len("cell"), *(len(grid.cell) for grid in grids))
    return [
        f"{title} (top {len(grids)}):",
        f"  {'cell':<{width}}  {header}",
        *(f"  {grid.cell:<{width}}  {row(grid)}" for grid in grids),
    ]


def _budget_lines(plan: Plan, top: int) -> list[str]:
    """The vehicle budget's part of the summary: per-cell ε, sit-outs, per-vehicle loss."""
    released = [grid for grid in plan.grids if grid.released]
    epsilons = [grid.epsilon for grid in released if grid.epsilon is not None]
    spread = f"{min(epsilons):g} to {max(epsilons):g}" if epsilons else "none released"
    bars = [grid.mean_error for grid in released]
    largest = f" (largest mean_error {max(bars):.4f})" if bars else ""
    lines = [
        f"cells released:           {len(released)} of {len(plan.grids)}{largest}",
        f"planned by:               the {plan.planned_by}",
        f"epsilon per released cell: {spread} (each cell's least epsilon meeting T)",
        f"cells per vehicle:        G1 {plan.g1} -> K {plan.k}",
        f"largest vehicle loss:     {plan.privacy_loss_before:g} -> "
        f"{plan.privacy_loss_after:g}  (every pair read at its cells' epsilon -> as "
        "charged after the sit-outs, each vehicle its own share)",
        f"sit-outs:                 {_count(plan.vehicles_sat_out, 'vehicle')} in "
        f"{len(plan.suppressed)} (cell, vehicle) pairs (their readings count in mean_error)",
    ]
    if len(released) < len(plan.grids):
        lines.insert(2, "  (the others miss T, or wait to pool with the next windows: spans)")
    if not released:
        return lines
    shown = sorted(released, key=lambda g: (-(g.epsilon or 0.0), g.cell))[:top]
    return lines + _cell_table(
        "released cells with the largest epsilon", shown,
        f"{'epsilon':>8}  {'mean_error':>10}  {'sat out/vehicles':>16}  {'cap':>6}",
        lambda g: f"{g.epsilon or 0.0:>8g}  {g.mean_error:>10.4f}"
        f"  {g.sat_out:>7}/{g.vehicles:<8}  {g.cap:>6}",
    )  # fmt: skip


def _finite(value: float) -> float | None:
    """A JSON number: None for the infinite error of a cell the vehicle budget gives no ε."""
    return value if math.isfinite(value) else None


def _count(n: int, noun: str) -> str:
    """``1 cell``, ``2 cells``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
