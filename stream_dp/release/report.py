"""What each stage of a window's release reports into the window's summary (docs/math.md §9.5)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WindowReport:
    """The summary's lines, each set by the one stage that knows it (0: the stage did
    nothing, e.g. in an empty window): a stage returns the report with its lines replaced
    (``dataclasses.replace``); the withheld counts add up what each stage withholds."""

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
    #: Adaptive regrouping and withholding: cells and readings withheld (dropped for good).
    cells_withheld: int = 0
    readings_withheld: int = 0
    #: Spans (§13.3): unreleased cells carried on to pool, and their readings of this hour.
    cells_held: int = 0
    readings_held: int = 0
