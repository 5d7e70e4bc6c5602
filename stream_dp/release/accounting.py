"""The one privacy accountant of the release (docs/math.md §8, §9.4), after dp-accounting's
``PrivacyAccountant``: everything the release, the failed outcome and the worker's metrics
say about the budget is asked of it, and computed nowhere else.

It owns each released cell's ε and δ (an array per cell: all equal today), their split
between mean and variance, a window's per-vehicle losses and K·ε, the PLD figure (None where
the PLD accountant does not compose the mechanism), the budget mask's view of the ledger
(the cells each vehicle may still be read in) and a failed window's charge.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from stream_dp.dp.budget_ledger import BudgetLedger, WindowLoss
from stream_dp.dp.grid_error import ErrorModel
from stream_dp.dp.occupancy import IntArray, Occupancy
from stream_dp.release.params import ReleaseParams

if TYPE_CHECKING:
    from stream_dp.dp.pseudo_user import PseudoUserResult

#: Per (vehicle, cell) pair read under per-cell ε: the occupancy's vehicle names, each read
#: pair's vehicle index and what it lost there (the run's PLD per vehicle; never published).
Reads = tuple[tuple[str, ...], np.ndarray, np.ndarray]
#: Per occupancy entry its kept readings, per cell its cap (the CLIP mean's ``top``, §13.1).
Shares = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class PrivacyAccountant:
    """The budget of the release configured by ``params`` (docs/math.md §8.1, §9.4).

    Each released cell is (ε, δ)-DP (δ = 0 unless the mechanism needs it): (1 − s)·ε for its
    mean and s·ε for its variance (s = ``variance_share``; 0: no variance is released). A
    vehicle read in G_l released cells loses G_l·ε; after CLIP-USER G_l ≤ K, so the window's
    loss is K·ε (Prop. V.1), or by the PLD accountant ε at ``accounting_delta`` of K cells.
    """

    params: ReleaseParams
    #: With a vehicle budget, each cell's own ε (§13; +inf: a dropped cell); else None.
    per_cell: np.ndarray | None = field(default=None, compare=False)

    def with_cell_epsilons(self, epsilons: np.ndarray) -> PrivacyAccountant:
        """This accountant with each cell's own ε (the vehicle budget's plan, §13)."""
        return replace(self, per_cell=np.asarray(epsilons, dtype=np.float64))

    # --- one cell ---------------------------------------------------------------------
    @property
    def epsilon(self) -> float:
        """ε of every cell; with per-cell ε the largest (:meth:`cell_epsilons`)."""
        if self.per_cell is not None:
            finite = self.per_cell[np.isfinite(self.per_cell)]
            return float(finite.max()) if finite.size else self.params.epsilon
        return self.params.epsilon

    def cell_epsilons(self, n_cells: int) -> np.ndarray:
        """ε of each of ``n_cells`` cells (a dropped cell of the budget's plan: 1, unused)."""
        if self.per_cell is not None:
            assert len(self.per_cell) == n_cells
            return np.where(np.isfinite(self.per_cell), self.per_cell, 1.0)
        return np.full(n_cells, self.params.epsilon)

    @property
    def regroup_epsilon(self) -> float:
        """The mean's ε adaptive cells are chosen at (§12): ε, at most the vehicle budget's
        burst (no cell costs more, §13)."""
        params = self.params
        epsilon = params.epsilon
        if params.vehicle_budget is not None:
            epsilon = min(epsilon, params.vehicle_burst)
        return epsilon * (1.0 - params.variance_share)

    @property
    def cell_delta(self) -> float:
        """δ of every released cell: the mechanism's δ when it needs one, else 0."""
        params = self.params
        return float(params.delta or 0.0) if params.mechanism.needs_delta else 0.0

    @property
    def variance_share(self) -> float:
        return self.params.variance_share

    @property
    def mean_epsilon(self) -> float | np.ndarray:
        """The mean's share of a cell's ε (per cell with per-cell ε)."""
        if self.per_cell is not None:
            return self.cell_epsilons(len(self.per_cell)) * (1.0 - self.variance_share)
        return self.epsilon * (1.0 - self.variance_share)

    @property
    def variance_epsilon(self) -> float | np.ndarray:
        if self.per_cell is not None:
            return self.cell_epsilons(len(self.per_cell)) * self.variance_share
        return self.epsilon * self.variance_share

    def error_model(self, quantile: float) -> ErrorModel:
        """The cells' error model of this split (CLIP-USER and the cap minimise it)."""
        return ErrorModel.split(self.epsilon, self.variance_share, quantile)

    # --- one window -------------------------------------------------------------------
    def privacy_loss(self, cells_per_vehicle: int) -> float:
        """The loss of a vehicle in ``cells_per_vehicle`` released cells (K·ε for K)."""
        return cells_per_vehicle * self.epsilon

    def window_epsilon(self, released: np.ndarray | None) -> float:
        """The summary's ``epsilon``: ε of every cell; with a vehicle budget (§13) the largest
        ε of the ``released`` cells, or with none released (a failed window) the burst, the
        most any cell of the window could have taken."""
        params = self.params
        if params.vehicle_budget is None:
            return params.epsilon
        if self.per_cell is None or released is None or not released.any():
            return params.vehicle_burst
        return float(self.cell_epsilons(len(self.per_cell))[released].max())

    def window_privacy_loss(self, k: int, loss: WindowLoss | None) -> float:
        """The summary's ``privacy_loss``: K·ε (Prop. V.1); with per-cell ε (§13), where K·ε
        does not hold, the largest per-vehicle loss the ledger is charged (``loss``)."""
        if self.params.vehicle_budget is not None and loss is not None:
            return loss.max_loss
        return self.privacy_loss(k)

    def pld_loss(self, cells_per_vehicle: int) -> float | None:
        """ε at ``accounting_delta`` of that many cells; None where PLD does not compose the
        mechanism (e.g. an (ε, δ) mean) or without dp-accounting."""
        if not self.params.mechanism.pld_composes:
            return None
        from stream_dp.dp.pld_accounting import pld_loss

        params = self.params
        return pld_loss(
            cells_per_vehicle, self.epsilon, self.variance_share, params.accounting_delta
        )

    def loss(
        self, window_start: int, occupancy: Occupancy | None, cells: IntArray | None
    ) -> WindowLoss:
        """Per vehicle of ``occupancy``, its cells read (``cells``: G_l); none without."""
        if occupancy is None:
            return WindowLoss.from_counts(window_start, self.epsilon, [], [])
        return WindowLoss.of_occupancy(window_start, self.epsilon, occupancy, None, cells)

    def released_loss(
        self,
        window_start: int,
        occupancy: Occupancy | None,
        grids: IntArray | None,
        read: np.ndarray | None,
        shares: Shares | None = None,
    ) -> tuple[WindowLoss, Reads | None]:
        """What a released window charges each vehicle (§8.2): with per-cell ε, the summed ε
        of the cells it is ``read`` in (:meth:`budget_loss`, with ``shares`` each vehicle's
        own share) and those reads; else its released cells (``grids``) × ε (:meth:`loss`)."""
        if self.per_cell is None or occupancy is None or read is None:
            return self.loss(window_start, occupancy, grids), None
        eps = self._entry_epsilons(occupancy, read, shares)
        reads = (occupancy.vehicles, occupancy.vehicle_index[read], eps[read])
        return _summed_loss(window_start, occupancy, read, eps), reads

    def read_loss(
        self,
        window_start: int,
        occupancy: Occupancy,
        kept: np.ndarray,
        released: np.ndarray,
        shares: Shares | None = None,
    ) -> tuple[WindowLoss, Reads]:
        """:meth:`released_loss` with per-cell ε of the entries ``kept`` in a ``released``
        cell (a budget plan's release), in one compiled pass over the entries
        (:mod:`stream_dp.dp.plan_passes`): the same loss and reads as :meth:`budget_loss`
        with the same ``shares``."""
        from stream_dp.dp.plan_passes import read_payments

        if len(kept) != occupancy.n_entries or len(released) != len(occupancy.cells):
            raise AssertionError("kept entries or released cells differ from the occupancy")
        own = None
        if shares is not None:
            kept_count, cap = _checked_shares(occupancy, shares)
            own = (kept_count, cap, 1.0 - self.variance_share)
        cells, losses, _, vehicle, read_eps = read_payments(
            occupancy.cell_start, occupancy.vehicle_index, kept, released,
            self.cell_epsilons(len(occupancy.cells)), len(occupancy.vehicles), True, own,
        )  # fmt: skip
        loss = WindowLoss.of_occupancy_losses(window_start, occupancy, cells, losses)
        return loss, (occupancy.vehicles, vehicle, read_eps)

    def own_shares(self, capped: PseudoUserResult | None) -> Shares | None:
        """What a budget release charges each vehicle by (§13.1, the loss): per entry its kept
        readings and per cell its cap (``capped``: the CLIP mean's), so each vehicle pays its
        own share of a cell's ε; None (the whole ε) without them, or with a variance share
        (the variance runs at the cell's ``s ε`` whatever a vehicle's share of the mean, and
        the run's PLD audit composes each read as one cell's mean and variance)."""
        if capped is None or self.variance_share > 0:
            return None
        return capped.kept_count, capped.cap

    def budget_loss(
        self,
        window_start: int,
        occupancy: Occupancy,
        read: np.ndarray,
        shares: Shares | None = None,
    ) -> WindowLoss:
        """With per-cell ε (§13): per vehicle, the summed ε of the cells it is ``read`` in
        (per occupancy entry: kept and in a released cell; Thm II.3). With ``shares`` (per
        entry its kept readings, per cell its cap: the CLIP mean's), each entry costs its
        vehicle only its own share of the cell's ε (§13.1, "The loss"); without, the whole ε
        (an upper bound: a failed window's charge)."""
        return _summed_loss(
            window_start, occupancy, read, self._entry_epsilons(occupancy, read, shares)
        )

    def _entry_epsilons(
        self, occupancy: Occupancy, read: np.ndarray, shares: Shares | None
    ) -> np.ndarray:
        """Per occupancy entry, what its vehicle loses if it is ``read``: its cell's ε, or
        with ``shares`` its own share of it
        (:func:`stream_dp.dp.individual_loss.entry_epsilons`; 0 where not read)."""
        assert self.per_cell is not None
        eps = self.cell_epsilons(len(occupancy.cells))[occupancy.cell_index]
        if shares is None:
            return eps
        from stream_dp.dp.individual_loss import entry_epsilons

        kept_count, cap = _checked_shares(occupancy, shares)
        cell = occupancy.cell_index
        cell_kept = np.bincount(cell, weights=kept_count, minlength=len(occupancy.cells))
        return entry_epsilons(np.where(read, eps, 0.0), kept_count, cap[cell], cell_kept[cell],
                              1.0 - self.variance_share)  # fmt: skip

    def failed_charge(self, window_start: int, occupancy: Occupancy) -> WindowLoss:
        """A failed window's charge: every vehicle pays each cell of ``occupancy`` it is in
        (the cells the release could have read: CLIP-USER only removes cells)."""
        cells = np.bincount(occupancy.vehicle_index, minlength=len(occupancy.vehicles))
        return WindowLoss.of_occupancy(window_start, self.epsilon, occupancy, None, cells=cells)

    def failed_charge_of_counts(
        self, window_start: int, vehicles: list[str], cells: list[int]
    ) -> WindowLoss:
        """A failed window's coarser charge, from cells counted per vehicle elsewhere."""
        return WindowLoss.from_counts(window_start, self.epsilon, vehicles, cells)

    # --- the ledger -------------------------------------------------------------------
    def new_ledger(self) -> BudgetLedger:
        """The per-vehicle budget ledger (tracking always; the cap if set), over the period
        of :attr:`~stream_dp.release.params.ReleaseParams.ledger_period_seconds`."""
        return BudgetLedger(self.params.ledger_period_seconds, self.params.budget_cap)

    def allowed_cells(
        self, ledger: BudgetLedger, vehicles: tuple[str, ...], window_start: int
    ) -> np.ndarray:
        """The budget mask's view of the ledger (§8.4): cells each vehicle may still be read
        in, its remaining budget over ε (basic), or what keeps its PLD ε within the cap."""
        params = self.params
        if params.accounting == "pld":
            from stream_dp.dp.pld_accounting import pld_allowed_cells

            spent = ledger.spent(vehicles, window_start)
            return pld_allowed_cells(
                spent, self.epsilon, self.variance_share, params.accounting_delta, ledger.cap
            )
        return ledger.allowed_cells(vehicles, window_start, self.epsilon)

    def period_delta(self, epsilon_loss: float) -> float:
        """The δ that goes with a vehicle's summed ε over the period (§7.11, §8.1): c cells
        (ε-loss c·ε) of an (ε, δ) mean cost c·δ by basic composition; 0 for pure ε. The
        ledger counts ε; this reads the cells back, so it assumes the current ε and mechanism
        held over the whole period (as :meth:`period_pld` does). A vehicle budget's cells (mixed
        ε of the 1/128 grid) have the ``clip`` mean, pure ε: δ 0 whatever the mix."""
        return round(epsilon_loss / self.epsilon) * self.cell_delta

    def period_pld(self, epsilon_loss: float) -> float | None:
        """The PLD ε of a vehicle's summed ε over the period (None where PLD does not apply).
        With a vehicle budget the cells' ε differ and the ledger keeps their sum only: that sum,
        an upper bound of the PLD figure (the run's exact figure: ``stream-dp release``, §13.4)."""
        if self.params.vehicle_budget is not None:
            return epsilon_loss if self.params.mechanism.pld_composes else None
        return self.pld_loss(round(epsilon_loss / self.epsilon))


def _summed_loss(
    window_start: int, occupancy: Occupancy, read: np.ndarray, eps: np.ndarray
) -> WindowLoss:
    """Per vehicle, its ``read`` entries counted and their ``eps`` (per entry) summed."""
    n = len(occupancy.vehicles)
    cells = np.bincount(occupancy.vehicle_index[read], minlength=n)
    losses = np.bincount(occupancy.vehicle_index, weights=np.where(read, eps, 0.0), minlength=n)
    return WindowLoss.of_occupancy_losses(window_start, occupancy, cells, losses)


def _checked_shares(occupancy: Occupancy, shares: Shares) -> Shares:
    """``shares`` as int64 arrays, one kept count per entry and one cap per cell."""
    kept_count, cap = (np.asarray(a, dtype=np.int64) for a in shares)
    if len(kept_count) != occupancy.n_entries or len(cap) != len(occupancy.cells):
        raise AssertionError("kept counts or caps differ from the occupancy")
    return kept_count, cap
