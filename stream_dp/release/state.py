"""The state of one window's release as it passes through the stages (docs/math.md §9)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from stream_dp.dp.budget_ledger import BudgetLedger, WindowLoss
from stream_dp.release.accounting import PrivacyAccountant, Reads
from stream_dp.release.params import ReleaseParams
from stream_dp.release.report import WindowReport
from stream_dp.windows.columns import WindowColumns

if TYPE_CHECKING:
    from collections.abc import Sequence

    from stream_dp.dp.adaptive_cells import AdaptiveCells
    from stream_dp.dp.vehicle_budget import BudgetPlan
    from stream_dp.release.bounding import Contributions
    from stream_dp.release.noisy import ErrorBars, NoisyCells
    from stream_dp.release.statistics import CellStatistics


@dataclass
class WindowState:
    """One window on its way through the stages: its inputs, what each stage made of it, and
    the report. ``observed``: every reading of the window (the summary counts them all);
    ``columns``: what the stages read (regrouped into adaptive cells, with a target)."""

    window_start: int
    #: None only for a failed window whose partials could not be merged.
    observed: WindowColumns | None
    params: ReleaseParams
    accountant: PrivacyAccountant
    ledger: BudgetLedger | None = None
    late_readings: int = 0
    #: One per release event: every record id derives from it.
    nonce: str = ""
    columns: WindowColumns = field(init=False)
    report: WindowReport = field(default_factory=WindowReport)
    adaptive: AdaptiveCells | None = None
    chosen: np.ndarray | None = None
    pairs: Contributions | None = None
    #: With a vehicle budget: the cells' ε, caps and sit-outs (§13).
    budget: BudgetPlan | None = None
    stats: CellStatistics | None = None
    bars: ErrorBars | None = None
    #: Per cell of the occupancy, whether it is released; per vehicle, its released cells.
    released: np.ndarray | None = None
    grids: np.ndarray | None = None
    noisy: NoisyCells | None = None
    #: The records: one per released cell, then the summary.
    cells: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    #: With a ledger: what the release charges each vehicle, and its reads (per-cell ε).
    loss: WindowLoss | None = None
    reads: Reads | None = None
    #: Entries deferred by earlier windows (spans, §13), and those this release defers.
    carry_in: WindowColumns | None = None
    carry_out: WindowColumns | None = None
    #: With spans: what the stages read (the window's pairs pooled with the carry) and per
    #: pooled pair its readings of this window, the window's pairs set aside to wait
    #: (§13.3), and the carried readings withheld before pooling.
    pooled: WindowColumns | None = None
    pooled_own: np.ndarray | None = None
    aside: WindowColumns | None = None
    withheld_unpooled: int = 0
    #: The input ends with this window: no cell is held for a longer span (§13.3).
    last: bool = False
    #: The cells' span starts and the occupancy they were computed for (spans.span_starts).
    span_start_memo: tuple[Any, np.ndarray] | None = None
    #: The vehicle budget's regrouping's last choice: the columns, their chosen pairs and
    #: their plan (budget_cells.budget_regroup), reused while the columns and pairs are these.
    choice_memo: tuple[WindowColumns, Contributions, BudgetPlan] | None = None
    #: The first window of each pair of some columns, and those columns (spans.first_window).
    first_window_memo: tuple[WindowColumns, np.ndarray] | None = None
    #: Units pooling would push past T, released now rather than held (§13.3).
    due: tuple[str, ...] = ()
    #: Some vehicle names and their rooms under a vehicle budget (release.budget.vehicle_room:
    #: the ledger does not change during a release), reused while the names are these.
    room_memo: tuple[Sequence[str], np.ndarray] | None = None

    def __post_init__(self) -> None:
        if self.observed is not None:
            self.columns = self.observed

    @property
    def empty(self) -> bool:
        """No cell is left to release."""
        return self.pairs is not None and not len(self.pairs.chosen)
