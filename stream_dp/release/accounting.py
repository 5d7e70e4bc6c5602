"""Privacy accounting: the stream's per-vehicle budget ledger and one window's ε."""

from __future__ import annotations

from dataclasses import dataclass

from stream_dp.config import Settings
from stream_dp.dp.budget_ledger import BudgetLedger, WindowLoss
from stream_dp.dp.grid_error import ErrorModel
from stream_dp.dp.occupancy import IntArray, Occupancy


def new_ledger(settings: Settings) -> BudgetLedger:
    """The per-vehicle budget ledger the settings ask for (tracking always; cap if set)."""
    return BudgetLedger(settings.budget_period_seconds, settings.budget_cap)


def period_delta(epsilon_loss: float, settings: Settings) -> float:
    """The δ that goes with a vehicle's summed ε over the period (docs/math.md §7.11, §8.1):
    each released cell of the ``cummings`` mean is (ε, δ)-DP, so a vehicle charged ``c``
    cells (ε-loss c·ε) has lost c·δ by basic composition; every other mechanism is pure ε-DP
    (δ = 0). The ledger counts ε; this reads the cells back from it, so it assumes the
    current ε and mechanism held over the whole period (as the PLD figure does)."""
    if settings.mean_mechanism != "cummings":
        return 0.0
    return round(epsilon_loss / settings.epsilon) * settings.delta


@dataclass(frozen=True)
class WindowAccountant:
    """The privacy budget of one window (docs/math.md §8.1, §9.4).

    Each released cell is ε-DP: (1 − s)·ε for its mean and s·ε for its variance
    (s = ``variance_share``; 0: no variance is released). A vehicle read in G_l released
    cells loses G_l·ε; after CLIP-USER G_l ≤ K, so the window's loss is K·ε (Prop. V.1), or
    by the PLD accountant ε at ``accounting_delta`` of K cells. The ledger is charged
    :meth:`loss`, once the release is stored.
    """

    window_start: int
    epsilon: float
    variance_share: float = 0.5
    accounting_delta: float = 1e-6

    @classmethod
    def for_settings(cls, settings: Settings, window_start: int) -> WindowAccountant:
        return cls(
            window_start, settings.epsilon, settings.variance_share, settings.accounting_delta
        )

    @property
    def mean_epsilon(self) -> float:
        return self.epsilon * (1.0 - self.variance_share)

    @property
    def variance_epsilon(self) -> float:
        return self.epsilon * self.variance_share

    def error_model(self, quantile: float) -> ErrorModel:
        """The cells' error model of this split (CLIP-USER and the cap minimise it)."""
        return ErrorModel.split(self.epsilon, self.variance_share, quantile)

    def privacy_loss(self, cells_per_vehicle: int) -> float:
        """The loss of a vehicle in ``cells_per_vehicle`` released cells (K·ε for K)."""
        return cells_per_vehicle * self.epsilon

    def pld_loss(self, cells_per_vehicle: int) -> float | None:
        """ε at ``accounting_delta`` of that many cells (None without dp-accounting)."""
        from stream_dp.dp.pld_accounting import pld_loss

        return pld_loss(cells_per_vehicle, self.epsilon, self.variance_share, self.accounting_delta)

    def loss(self, occupancy: Occupancy | None, cells: IntArray | None) -> WindowLoss:
        """Per vehicle of ``occupancy``, its cells read (``cells``: G_l); none without."""
        if occupancy is None:
            return WindowLoss.from_counts(self.window_start, self.epsilon, [], [])
        return WindowLoss.of_occupancy(self.window_start, self.epsilon, occupancy, None, cells)
