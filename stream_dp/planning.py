"""Offline planning on a public occupancy array: what CLIP-USER and the pseudo-user step would do.

``build_plan`` runs CLIP-USER (docs/math.md §5) and the pseudo-user step on an occupancy (read
by :mod:`stream_dp.sources.occupancy_csv`); ``plan_to_json`` and ``format_plan`` render the
result. A bad parameter raises ``PlanInputError`` with a one-line message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from stream_dp.dp.clip_user import ClipUserResult, clip_user
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.pseudo_user import PseudoUserResult, no_pseudo_user, pseudo_user_step


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

    @property
    def growth(self) -> float:
        return self.error - self.initial_error


@dataclass(frozen=True)
class Plan:
    """What CLIP-USER and the pseudo-user step do to one window's occupancy."""

    epsilon: float
    upper: float
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


def build_plan(
    occupancy: Occupancy,
    upper: float,
    epsilon: float,
    error_bound: float | None = None,
    pseudo_user: bool = True,
) -> Plan:
    """Run CLIP-USER, then the pseudo-user step (or plain max-count caps), and tabulate."""
    clip: ClipUserResult = clip_user(occupancy, upper, epsilon, error_bound=error_bound)
    capped: PseudoUserResult = (
        pseudo_user_step(clip, upper, epsilon) if pseudo_user else no_pseudo_user(clip)
    )
    n_cells = len(occupancy.cells)
    vehicles = np.bincount(occupancy.cell_index, minlength=n_cells)
    kept = np.bincount(
        occupancy.cell_index, weights=np.asarray(clip.kept, dtype=np.int64), minlength=n_cells
    )
    readings = occupancy.total_per_cell()
    grids = tuple(
        GridPlan(
            cell=cell,
            vehicles=int(vehicles[g]),
            readings=int(readings[g]),
            initial_error=float(clip.initial_error[g]),
            error=float(clip.error[g]),
            kept_vehicles=int(kept[g]),
            cap=int(capped.cap[g]),
            error_after_cap=float(capped.error[g]),
        )
        for g, cell in enumerate(occupancy.cells)
    )
    return Plan(
        epsilon=float(epsilon),
        upper=float(upper),
        error_bound=float(clip.error_bound),
        g1=int(clip.g1),
        k=int(clip.k),
        n_vehicles=len(occupancy.vehicles),
        n_entries=occupancy.n_entries,
        pseudo_user=pseudo_user,
        suppressed=tuple((str(c), str(v)) for c, v in clip.suppressed),
        grids=grids,
    )


def plan_to_json(plan: Plan) -> dict[str, Any]:
    """The plan as one JSON-ready object."""
    return {
        "epsilon": plan.epsilon,
        "upper": plan.upper,
        "error_bound": plan.error_bound,
        "G1": plan.g1,
        "K": plan.k,
        "privacy_loss_before": plan.privacy_loss_before,
        "privacy_loss_after": plan.privacy_loss_after,
        "cells": len(plan.grids),
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
            }
            for grid in plan.grids
        },
    }


def format_plan(plan: Plan, label: str, top: int = 5) -> str:
    """A readable summary of the plan."""
    step = "after the pseudo-user step" if plan.pseudo_user else "(no pseudo-user step)"
    lines = [
        f"occupancy {label}: {len(plan.grids)} cells, {plan.n_vehicles} vehicles,"
        f" {plan.n_entries} (cell, vehicle) pairs",
        f"parameters: epsilon {plan.epsilon:g} per cell, upper bound U {plan.upper:g}",
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
