"""Offline planning on a public occupancy array: what the release would do to one window.

``build_plan`` runs the release's own stages (:func:`stream_dp.release.stages.plan_stages`:
adaptive regrouping, selection, CLIP-USER, the cap, the error bars and the withholding,
docs/math.md §9) without noise on an occupancy (read by :mod:`stream_dp.sources.occupancy_csv`),
so it shows the K and the error bars ``release`` gives that window; ``plan_to_json`` and
``format_plan`` render the result. A bad parameter raises ``PlanInputError`` with a one-line
message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from stream_dp.dp.occupancy import Occupancy
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.params import ReleaseParams
from stream_dp.release.records import capped_error
from stream_dp.release.stages import Pipeline, plan_stages
from stream_dp.release.state import WindowState
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

    @property
    def growth(self) -> float:
        return self.error - self.initial_error


@dataclass(frozen=True)
class Plan:
    """What the release's stages do to one window's occupancy (K: over the released cells)."""

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
    suppressed: tuple[tuple[str, str], ...]
    grids: tuple[GridPlan, ...]

    @property
    def privacy_loss_before(self) -> float:
        return self.g1 * self.epsilon

    @property
    def privacy_loss_after(self) -> float:
        return self.k * self.epsilon

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
        """Cells whose error after CLIP-USER exceeds E (possible only with a tight bound)."""
        return sum(grid.error > self.error_bound * (1 + 1e-12) for grid in self.grids)


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
    state = WindowState(0, occupancy_columns(occupancy), params, PrivacyAccountant(params))
    Pipeline(plan_stages()).run(state)
    if state.empty:
        raise PlanInputError("no cell of the occupancy is chosen with these settings")
    pairs, report, bars = state.pairs, state.report, state.bars
    assert pairs is not None and pairs.clip is not None and pairs.capped is not None
    assert bars is not None and state.released is not None
    clip, capped, chosen = pairs.clip, pairs.capped, pairs.occupancy
    n_cells = len(chosen.cells)
    vehicles = np.bincount(chosen.cell_index, minlength=n_cells)
    kept = np.bincount(
        chosen.cell_index, weights=np.asarray(clip.kept, dtype=np.int64), minlength=n_cells
    )
    readings = chosen.total_per_cell()
    columns = (  # per cell, as Python numbers (indexing numpy arrays cell by cell is slower)
        chosen.cells, vehicles.tolist(), readings.tolist(), clip.initial_error.tolist(),
        clip.error.tolist(), kept.astype(np.int64).tolist(), capped.cap.tolist(),
        capped.error.tolist(), bars.mean.tolist(), state.released.tolist(),
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
        )
        for (
            cell, n_vehicles, n_readings, initial_error, error, kept_vehicles, cap,
            error_after_cap, mean_bar, released,
        ) in zip(*columns, strict=True)
    )  # fmt: skip
    return Plan(
        epsilon=params.epsilon,
        upper=params.upper,
        variance_share=params.variance_share,
        target_mean_error=params.target_mean_error,
        error_bound=report.error_bound,
        g1=report.g1,
        k=report.k,
        n_vehicles=len(chosen.vehicles),
        n_entries=chosen.n_entries,
        pseudo_user=params.pseudo_user,
        suppressed=clip.suppressed,
        grids=grids,
    )


def plan_to_json(plan: Plan) -> dict[str, Any]:
    """The plan as one JSON-ready object."""
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
        "initial_max_error": plan.initial_max_error,
        "max_error": plan.max_error,
        "max_error_after_cap": plan.max_error_after_cap,
        "pseudo_user": plan.pseudo_user,
        "cells_over_error_bound": plan.cells_over_bound,
        "suppressed": [[cell, vehicle] for cell, vehicle in plan.suppressed],
        "grids": {
            grid.cell: {
                "vehicles": grid.vehicles,
                "readings": grid.readings,
                "initial_error": grid.initial_error,
                "error": grid.error,
                "kept_vehicles": grid.kept_vehicles,
                "cap": grid.cap,
                "error_after_cap": grid.error_after_cap,
                "mean_error": grid.mean_error,
                "released": grid.released,
            }
            for grid in plan.grids
        },
    }


def format_plan(plan: Plan, label: str, top: int = 5) -> str:
    """A readable summary of the plan."""
    step = "after the pseudo-user step" if plan.pseudo_user else "(no pseudo-user step)"
    lines = [
        f"occupancy {label}: {_count(len(plan.grids), 'cell')}, "
        f"{_count(plan.n_vehicles, 'vehicle')}, {plan.n_entries} (cell, vehicle) pairs",
        f"parameters: epsilon {plan.epsilon:g} per cell, upper bound U {plan.upper:g},"
        f" variance share {plan.variance_share:g}"
        + ("" if plan.target_mean_error is None else f", target T {plan.target_mean_error:g}"),
        f"cells released:           {sum(g.released for g in plan.grids)}"
        f" (largest mean_error {max(g.mean_error for g in plan.grids):.4f})",
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
    width = max(len("cell"), *(len(grid.cell) for grid in grown))
    lines.append(f"cells whose worst-case error grew most (top {len(grown)}):")
    lines.append(
        f"  {'cell':<{width}}  {'before':>12}  {'after':>12}  {'after cap':>12}"
        f"  {'kept/vehicles':>13}  {'cap':>6}"
    )
    for grid in grown:
        lines.append(
            f"  {grid.cell:<{width}}  {grid.initial_error:>12.4f}  {grid.error:>12.4f}"
            f"  {grid.error_after_cap:>12.4f}  {grid.kept_vehicles:>6}/{grid.vehicles:<6}"
            f"  {grid.cap:>6}"
        )
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    """``1 cell``, ``2 cells``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
