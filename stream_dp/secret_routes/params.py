"""The secret-routes release's parameters, built once at the edge from the settings
(docs/math.md §14): B per period at delta, the window, L0, U and the resolution."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from stream_dp.config import Settings
from stream_dp.dp.laplace_tails import tail_width
from stream_dp.dp.level_choice import fine_cut_steps
from stream_dp.dp.partition_selection import threshold_steps
from stream_dp.dp.secret_accounting import COUNT_STEPS, SUM_STEPS, SecretRoutesBudget

#: Coverage of the published interval (§14.6).
INTERVAL_LEVEL = 0.95
#: ``resolution_choice``: both levels everywhere (§14.9), or the fine level only under the
#: coarse cells whose noisy count asks for it (§14.10).
FIXED, ADAPTIVE = "fixed", "adaptive"


@dataclass(frozen=True)
class SecretRoutesParams:
    """What the secret-routes release of a window reads."""

    budget: SecretRoutesBudget
    upper: float = 65.0
    resolution: int = 8
    window_seconds: int = 10800
    app_id: str = "stream-dp"
    #: L0 (``budget.cells`` counts the cells of every level: L0 per level, §14.9).
    contribution_cells: int = 1
    #: The second, coarser level of cells (§14.9); None: one level.
    coarse_resolution: int | None = None
    #: With two levels: ADAPTIVE (§14.10) or FIXED (§14.9).
    resolution_choice: str = ADAPTIVE

    def __post_init__(self) -> None:
        """The accountant counts every level's cells: ``L0`` per level."""
        if self.budget.cells != self.contribution_cells * len(self.resolutions):
            raise ValueError(
                f"budget.cells: must be contribution_cells x levels "
                f"({self.contribution_cells} x {len(self.resolutions)}), got {self.budget.cells}"
            )
        if self.resolution_choice not in (FIXED, ADAPTIVE):
            raise ValueError(f"resolution_choice: must be {FIXED!r} or {ADAPTIVE!r}, "
                             f"got {self.resolution_choice!r}")  # fmt: skip

    @property
    def adaptive(self) -> bool:
        """Two levels, the fine one released under the split coarse cells only (§14.10)."""
        return self.resolution_choice == ADAPTIVE and self.coarse_resolution is not None

    @property
    def selected_cells(self) -> int:
        """The cells per vehicle a partition selection may show alone (the threshold's union
        bound, §14.4): every level's ``L0``, or only the coarse level's when adaptive (the
        fine level's candidates are public, §14.10)."""
        return self.contribution_cells if self.adaptive else self.budget.cells

    @property
    def fine_cut(self) -> int:
        """The adaptive fine level's cut in count steps (§14.10)."""
        return fine_cut_steps(self.sum_scale, SUM_STEPS, COUNT_STEPS)

    @property
    def resolutions(self) -> tuple[int, ...]:
        """The levels released, finest first."""
        if self.coarse_resolution is None:
            return (self.resolution,)
        return (self.resolution, self.coarse_resolution)

    @classmethod
    def from_settings(cls, settings: Settings) -> SecretRoutesParams:
        """The settings' secret-routes fields (checked by :class:`Settings`)."""
        assert settings.vehicle_budget is not None  # the settings refuse B none here
        levels = 1 if settings.coarse_resolution is None else 2
        budget = SecretRoutesBudget(
            budget=settings.vehicle_budget,
            delta=settings.accounting_delta,
            windows=settings.budget_period_seconds // settings.window_seconds,
            cells=settings.contribution_cells * levels,
            count_share=settings.count_share,
        )
        return cls(budget, settings.upper, settings.resolution, settings.window_seconds,
                   settings.app_id, settings.contribution_cells,
                   settings.coarse_resolution, settings.resolution_choice)  # fmt: skip

    @property
    def count_scale(self) -> Fraction:
        """Count noise scale in count steps: ``COUNT_STEPS / eps_count``."""
        return COUNT_STEPS / self.budget.cell_epsilons[0]

    @property
    def sum_scale(self) -> Fraction:
        """Sum noise scale in sum steps: ``SUM_STEPS / eps_sum``."""
        return SUM_STEPS / self.budget.cell_epsilons[1]

    @property
    def threshold(self) -> int:
        """T in count steps (§14.4)."""
        b = self.budget
        return threshold_steps(COUNT_STEPS, self.selected_cells, b.selection_delta,
                               self.count_scale)  # fmt: skip

    def widths(self) -> tuple[float, float]:
        """(count, sum) half-widths of the interval, in vehicles and in units of U (§14.6)."""
        side = (1.0 - INTERVAL_LEVEL) / 4
        count = tail_width(side, self.count_scale) / COUNT_STEPS
        total = tail_width(side, self.sum_scale) * self.upper / SUM_STEPS
        return count, total
