"""What each stage of a window's release reports into the window's summary (docs/math.md §9.5)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Withheld:
    """Cells and readings a stage withholds (dropped for good, §12, §13.3)."""

    cells: int = 0
    readings: int = 0

    def __add__(self, other: Withheld) -> Withheld:
        return Withheld(self.cells + other.cells, self.readings + other.readings)


#: A stage that withholds nothing.
NONE_WITHHELD = Withheld()


@dataclass(frozen=True)
class WindowReport:
    """The summary's lines, each set by the one stage that knows it and declares it
    (:attr:`~stream_dp.release.stages.Stage.reports`; 0: the stage did nothing, e.g. in an
    empty window): a stage returns the report with its lines replaced
    (``dataclasses.replace``). Each stage that withholds has its own ``withheld_*`` line;
    :meth:`withheld` sums them into the summary's ``cells_withheld`` and
    ``readings_withheld``."""

    #: Budget mask: vehicles limited by their remaining budget, pairs withheld for it.
    vehicles_budget_limited: int = 0
    pairs_withheld_budget: int = 0
    #: CLIP-USER (or the vehicle budget's plan): G1, E, pairs suppressed.
    g1: int = 0
    error_bound: float = 0.0
    suppressed_pairs: int = 0
    #: Error bars: K over the released cells (§12).
    k: int = 0
    #: The cap: the largest per-cell eq. (13) error.
    max_error: float = 0.0
    #: Spans (§13.3): carried readings withheld before pooling (stale, under a window-alone
    #: cell, or set aside at the input's end).
    withheld_pool: Withheld = NONE_WITHHELD
    #: Adaptive regrouping (§12): the cells no regrouping brings within T, and their readings.
    withheld_regroup: Withheld = NONE_WITHHELD
    #: Error bars (§12): the cells still missing T after the bounds, and their readings.
    withheld_error_bars: Withheld = NONE_WITHHELD
    #: Spans (§13.3): what the release leaves and carries on to no later window, settled
    #: (every reading it pooled and neither released nor carried on, those the regrouping and
    #: the error bars dropped included); None without spans.
    withheld_defer: Withheld | None = None
    #: Spans (§13.3): unreleased cells carried on to pool, and their readings of this hour.
    cells_held: int = 0
    readings_held: int = 0
    #: Vehicle budget (§13.1, §13.5): the planner that chose the cells and their ε, "rules" or
    #: "optimiser" (``budget_planner = "auto"`` picks one by the window's size), also where it
    #: chose to release none; None without a budget and for a window without pairs.
    planned_by: str | None = None

    def withheld(self) -> Withheld:
        """What the window withholds (the summary's ``cells_withheld`` and
        ``readings_withheld``): the pool's and, with spans, the deferral's settled count
        (which covers what the regrouping and the error bars dropped, some of it carried on
        instead), else the regrouping's and the error bars'."""
        if self.withheld_defer is not None:
            return self.withheld_pool + self.withheld_defer
        return self.withheld_pool + self.withheld_regroup + self.withheld_error_bars
