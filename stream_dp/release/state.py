"""The state of one window's release as it passes through the stages (docs/math.md §9), and
what each stage reports into the window's summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from stream_dp.dp.budget_ledger import BudgetLedger
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.params import ReleaseParams
from stream_dp.windows.columns import WindowColumns

if TYPE_CHECKING:
    from stream_dp.dp.adaptive_cells import AdaptiveCells
    from stream_dp.release.bounding import Contributions
    from stream_dp.release.noisy import ErrorBars, NoisyCells
    from stream_dp.release.statistics import CellStatistics


@dataclass
class WindowReport:
    """The summary's lines, each written by the one stage that knows it (0: the stage did
    nothing, e.g. in an empty window)."""

    #: Budget mask: vehicles limited by their remaining budget, pairs withheld for it.
    vehicles_budget_limited: int = 0
    pairs_withheld_budget: int = 0
    #: CLIP-USER: G1, K (after withholding: over the released cells), E, pairs suppressed.
    g1: int = 0
    k: int = 0
    error_bound: float = 0.0
    suppressed_pairs: int = 0
    #: The cap: the largest per-cell eq. (13) error.
    max_error: float = 0.0
    #: Adaptive regrouping and withholding: cells and readings withheld.
    cells_withheld: int = 0
    readings_withheld: int = 0


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
    stats: CellStatistics | None = None
    bars: ErrorBars | None = None
    #: Per cell of the occupancy, whether it is released; per vehicle, its released cells.
    released: np.ndarray | None = None
    grids: np.ndarray | None = None
    noisy: NoisyCells | None = None
    #: The records: one per released cell, then the summary.
    cells: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.observed is not None:
            self.columns = self.observed

    @property
    def empty(self) -> bool:
        """No cell is left to release."""
        return self.pairs is not None and not len(self.pairs.chosen)
