"""Stage 2 of the release, bound contributions (docs/math.md §9.2): budget mask → CLIP-USER →
pseudo-user cap.

Each bound maps the public occupancy (and the public ledger) to what every vehicle may
contribute, behind one interface: :meth:`ContributionBound.apply` takes the
:class:`Contributions` so far and returns them bounded further, writing what it did into the
window summary's report (as PipelineDP's contribution bounders report theirs). All of it is
computed from public quantities, so none of it costs budget (§2.2).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from stream_dp.config import Settings
from stream_dp.dp.budget_ledger import BudgetLedger, limit_to_budget
from stream_dp.dp.clip_user import ClipUserResult, clip_user
from stream_dp.dp.grid_error import ErrorModel
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.pseudo_user import PseudoUserResult, no_pseudo_user, pseudo_user_step
from stream_dp.release.selection import occupancy_of, select_cells
from stream_dp.windows.columns import WindowColumns

#: What each bound reports into the window summary when it did nothing (an empty window).
NOTHING_BOUNDED: dict[str, Any] = {
    "vehicles_budget_limited": 0,
    "pairs_withheld_budget": 0,
    "G1": 0,
    "K": 0,
    "error_bound": 0.0,
    "suppressed_pairs": 0,
    "max_error": 0.0,
    "cells_withheld": 0,
    "readings_withheld": 0,
    "privacy_loss_pld": 0.0,
}


@dataclass(frozen=True)
class Contributions:
    """The pairs a window's release reads: the chosen cells (codes), their occupancy array,
    each occupancy entry's index into the columns, and after CLIP-USER and the cap their
    results (``capped.kept_count``: the readings each entry contributes)."""

    chosen: np.ndarray
    occupancy: Occupancy
    entry_of: np.ndarray
    clip: ClipUserResult | None = None
    capped: PseudoUserResult | None = None


class ContributionBound(Protocol):
    def apply(self, pairs: Contributions, report: dict[str, Any]) -> Contributions:
        """``pairs`` bounded further; what was done goes into ``report``."""
        ...


@dataclass(frozen=True)
class BudgetMask:
    """With a budget cap, each vehicle keeps only as many chosen cells as its remaining
    budget allows (§8.4); the cells are then chosen again from the pairs left (§9.1)."""

    columns: WindowColumns
    ledger: BudgetLedger | None
    window_start: int
    settings: Settings

    def apply(self, pairs: Contributions, report: dict[str, Any]) -> Contributions:
        report["vehicles_budget_limited"] = report["pairs_withheld_budget"] = 0
        ledger, occupancy, settings = self.ledger, pairs.occupancy, self.settings
        if ledger is None or ledger.cap is None or not len(pairs.chosen):
            return pairs
        allowed = self._allowed(ledger, occupancy)
        keep = limit_to_budget(occupancy, allowed)
        if keep.all():
            return pairs
        withheld_vehicles = np.count_nonzero(np.bincount(occupancy.vehicle_index[~keep]))
        report["vehicles_budget_limited"] = int(withheld_vehicles)
        report["pairs_withheld_budget"] = int(np.count_nonzero(~keep))
        usable = np.zeros(len(self.columns), dtype=bool)
        usable[pairs.entry_of[keep]] = True
        chosen = select_cells(self.columns, settings.min_vehicles, settings.top_cells, usable)
        return Contributions(chosen, *occupancy_of(self.columns, chosen, usable))

    def _allowed(self, ledger: BudgetLedger, occupancy: Occupancy) -> np.ndarray:
        """Cells each vehicle may still be read in: its remaining budget over ε (basic), or
        what keeps its PLD ε at δ within the cap (§8.4)."""
        settings = self.settings
        if settings.accounting == "pld":
            from stream_dp.dp.pld_accounting import pld_allowed_cells

            spent = ledger.spent(occupancy.vehicles, self.window_start)
            return pld_allowed_cells(
                spent, settings.epsilon, settings.variance_share, settings.accounting_delta,
                ledger.cap,
            )  # fmt: skip
        return ledger.allowed_cells(occupancy.vehicles, self.window_start, settings.epsilon)


@dataclass(frozen=True)
class ClipUserBound:
    """CLIP-USER (Algorithm 1, §5): suppresses whole (cell, vehicle) pairs until every
    vehicle is in at most K cells, keeping each cell's eq. (13) error within E."""

    upper: float
    epsilon: float
    error_bound: float | None
    model: ErrorModel | None = None

    def apply(self, pairs: Contributions, report: dict[str, Any]) -> Contributions:
        clip = clip_user(
            pairs.occupancy, self.upper, self.epsilon, self.error_bound, model=self.model
        )
        report["G1"], report["K"] = clip.g1, clip.k
        report["error_bound"] = float(clip.error_bound)
        report["suppressed_pairs"] = clip.n_suppressed
        return replace(pairs, clip=clip)


@dataclass(frozen=True)
class ReadingCap:
    """The pseudo-user cap (Sec. V-B3, §6): per cell, each kept vehicle contributes at most
    its first ``c_g`` readings (``c_g`` of least eq. (13) error); off, every kept reading."""

    enabled: bool
    upper: float
    epsilon: float
    prefix_limit: int

    def apply(self, pairs: Contributions, report: dict[str, Any]) -> Contributions:
        assert pairs.clip is not None, "the cap bounds what CLIP-USER kept"
        if self.enabled:
            capped = pseudo_user_step(
                pairs.clip, self.upper, self.epsilon, prefix_limit=self.prefix_limit
            )
        else:
            capped = no_pseudo_user(pairs.clip)
        report["max_error"] = float(np.max(capped.error))
        return replace(pairs, capped=capped)
