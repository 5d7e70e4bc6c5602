"""The release's modes: how a window's cells get their ε and what bounds each vehicle's loss
(docs/math.md §8, §13). One mode per run, chosen once from the parameters
(:attr:`~stream_dp.release.params.ReleaseParams.mode`); each mode is released by a pipeline
of its own (:func:`stream_dp.release.stages.pipeline_of`), so no stage asks which mode runs.

A mode is a frozen dataclass carrying its own fields; a new mode is a new variant of
:data:`ReleaseMode` and a new entry of the pipelines' table.
"""

from __future__ import annotations

from dataclasses import dataclass

from stream_dp.config import OPTIMISER_MAX_PAIRS


@dataclass(frozen=True)
class FixedEpsilon:
    """Every released cell at the configured ε; CLIP-USER bounds each vehicle's cells to K, so
    a window costs K·ε (Prop. V.1, §8), within the ledger's cap if one is set (§8.4)."""


@dataclass(frozen=True)
class VehicleBudget:
    """Each vehicle loses at most ``budget`` (B) over any ``period_seconds`` (§13): per-cell ε
    from the occupancy and the vehicles' rooms, at most ``burst`` a cell; cells pooled over
    at most ``max_span_hours`` windows (§13.3); ``planner``: the rules' plan and refusals
    (§13.1), the optimiser (§13.5) or either by the window's size ("auto": the optimiser up to
    ``optimiser_max_pairs`` pooled pairs)."""

    budget: float
    burst: float
    max_span_hours: int
    period_seconds: int
    planner: str = "auto"
    optimiser_max_pairs: int = OPTIMISER_MAX_PAIRS

    @property
    def spans(self) -> bool:
        """Whether a cell's readings may pool over more than one window (§13.3)."""
        return self.max_span_hours >= 2


#: The modes a release runs in (a tagged union: match on the variant's class).
ReleaseMode = FixedEpsilon | VehicleBudget
