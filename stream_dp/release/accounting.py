"""Privacy accounting: the stream's per-vehicle budget ledger and one window's ε."""

from __future__ import annotations

from dataclasses import dataclass

from stream_dp.config import Settings
from stream_dp.dp.budget_ledger import BudgetLedger, WindowLoss
from stream_dp.dp.occupancy import IntArray, Occupancy


def new_ledger(settings: Settings) -> BudgetLedger:
    """The per-vehicle budget ledger the settings ask for (tracking always; cap if set)."""
    return BudgetLedger(settings.budget_period_seconds, settings.budget_cap)


@dataclass(frozen=True)
class WindowAccountant:
    """The privacy budget of one window (docs/math.md §8.1, §9.4).

    Each released cell is ε-DP: ε/2 for its mean, ε/2 for its variance (the mechanisms
    here are asked for exactly these). A vehicle read in G_l cells loses G_l·ε; after
    CLIP-USER G_l ≤ K, so the window's loss is K·ε (Prop. V.1). The ledger is charged
    :meth:`loss`, once the release is stored.
    """

    window_start: int
    epsilon: float

    @property
    def mean_epsilon(self) -> float:
        return self.epsilon / 2

    @property
    def variance_epsilon(self) -> float:
        return self.epsilon / 2

    def privacy_loss(self, cells_per_vehicle: int) -> float:
        """The loss of a vehicle in ``cells_per_vehicle`` released cells (K·ε for K)."""
        return cells_per_vehicle * self.epsilon

    def loss(self, occupancy: Occupancy | None, cells: IntArray | None) -> WindowLoss:
        """Per vehicle of ``occupancy``, its cells read (``cells``: G_l); none without."""
        if occupancy is None:
            return WindowLoss.from_counts(self.window_start, self.epsilon, [], [])
        return WindowLoss.of_occupancy(self.window_start, self.epsilon, occupancy, None, cells)
