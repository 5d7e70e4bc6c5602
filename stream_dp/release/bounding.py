"""Stage 2 of the release, bound contributions (docs/math.md §9.2): budget mask → CLIP-USER →
pseudo-user cap.

Each bound maps the public occupancy (and the public ledger) to what every vehicle may
contribute, behind one interface: :meth:`ContributionBound.apply` takes the
:class:`Contributions` so far and returns them bounded further, writing what it did into the
window's :class:`~stream_dp.release.state.WindowReport` (as PipelineDP's contribution
bounders report theirs). All of it is
computed from public quantities, so none of it costs budget (§2.2).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

from stream_dp.dp.budget_ledger import BudgetLedger, limit_to_budget
from stream_dp.dp.clip_user import ClipUserResult, clip_user
from stream_dp.dp.grid_error import ErrorModel
from stream_dp.dp.occupancy import Occupancy
from stream_dp.dp.pseudo_user import PseudoUserResult, no_pseudo_user, pseudo_user_step
from stream_dp.release.selection import occupancy_of, select_cells
from stream_dp.windows.columns import WindowColumns

if TYPE_CHECKING:
    from stream_dp.release.accounting import PrivacyAccountant
    from stream_dp.release.report import WindowReport


@dataclass(frozen=True)
class BoundedPairs:
    """What bounding each vehicle's contribution leaves for the later stages, whichever bound
    made it (CLIP-USER and the cap, §5-§6, or the vehicle budget's plan, §13): per occupancy
    entry whether it is ``kept``, per vehicle its kept cells ``grids`` (G_l), per cell its
    mean's error before and after the bound, and the cap's result (``capped.kept_count``: the
    readings each entry contributes; ``capped.cap``: per cell c_g)."""

    kept: np.ndarray
    grids: np.ndarray
    initial_error: np.ndarray
    error: np.ndarray
    capped: PseudoUserResult

    @classmethod
    def of_clip_user(cls, clip: ClipUserResult, capped: PseudoUserResult) -> BoundedPairs:
        """CLIP-USER's kept entries and errors, and the cap's result."""
        grids = clip.grids_per_vehicle()
        return cls(clip.kept, grids, clip.initial_error, clip.error, capped)


@dataclass(frozen=True)
class Contributions:
    """The pairs a window's release reads: the chosen cells (codes), their occupancy array,
    each occupancy entry's index into the columns, CLIP-USER's result on the fixed-ε path
    (the cap's input), and once each vehicle is bounded what the bound kept."""

    chosen: np.ndarray
    occupancy: Occupancy
    entry_of: np.ndarray
    clip: ClipUserResult | None = None
    bounded: BoundedPairs | None = None


class ContributionBound(Protocol):
    def apply(
        self, pairs: Contributions, report: WindowReport
    ) -> tuple[Contributions, WindowReport]:
        """``pairs`` bounded further, and ``report`` with this bound's lines."""
        ...


@dataclass(frozen=True)
class BudgetMask:
    """With a budget cap, each vehicle keeps only as many chosen cells as its remaining
    budget allows (§8.4); the cells are then chosen again from the pairs left (§9.1)."""

    columns: WindowColumns
    ledger: BudgetLedger | None
    window_start: int
    accountant: PrivacyAccountant

    def apply(
        self, pairs: Contributions, report: WindowReport
    ) -> tuple[Contributions, WindowReport]:
        ledger, occupancy = self.ledger, pairs.occupancy
        if ledger is None or ledger.cap is None or not len(pairs.chosen):
            return pairs, report
        allowed = self.accountant.allowed_cells(ledger, occupancy.vehicles, self.window_start)
        keep = limit_to_budget(occupancy, allowed)
        if keep.all():
            return pairs, report
        withheld_vehicles = np.count_nonzero(np.bincount(occupancy.vehicle_index[~keep]))
        report = replace(
            report,
            vehicles_budget_limited=int(withheld_vehicles),
            pairs_withheld_budget=int(np.count_nonzero(~keep)),
        )
        usable = np.zeros(len(self.columns), dtype=bool)
        usable[pairs.entry_of[keep]] = True
        params = self.accountant.params
        chosen = select_cells(self.columns, params.min_vehicles, params.top_cells, usable)
        return Contributions(chosen, *occupancy_of(self.columns, chosen, usable)), report


@dataclass(frozen=True)
class ClipUserBound:
    """CLIP-USER (Algorithm 1, §5): suppresses whole (cell, vehicle) pairs until every
    vehicle is in at most K cells, keeping each cell's eq. (13) error within E."""

    upper: float
    epsilon: float
    error_bound: float | None
    model: ErrorModel | None = None

    def apply(
        self, pairs: Contributions, report: WindowReport
    ) -> tuple[Contributions, WindowReport]:
        clip = clip_user(
            pairs.occupancy, self.upper, self.epsilon, self.error_bound, model=self.model
        )
        lines = replace(  # K is the error bars' (over the cells released)
            report, g1=clip.g1, error_bound=float(clip.error_bound),
            suppressed_pairs=clip.n_suppressed,
        )  # fmt: skip
        return replace(pairs, clip=clip), lines


@dataclass(frozen=True)
class ReadingCap:
    """The pseudo-user cap (Sec. V-B3, §6): per cell, each kept vehicle contributes at most
    its first ``c_g`` readings (``c_g`` of least eq. (13) error); off, every kept reading."""

    enabled: bool
    upper: float
    epsilon: float
    prefix_limit: int

    def apply(
        self, pairs: Contributions, report: WindowReport
    ) -> tuple[Contributions, WindowReport]:
        assert pairs.clip is not None, "the cap bounds what CLIP-USER kept"
        if self.enabled:
            capped = pseudo_user_step(
                pairs.clip, self.upper, self.epsilon, prefix_limit=self.prefix_limit
            )
        else:
            capped = no_pseudo_user(pairs.clip)
        lines = replace(report, max_error=float(np.max(capped.error)))
        return replace(pairs, bounded=BoundedPairs.of_clip_user(pairs.clip, capped)), lines
