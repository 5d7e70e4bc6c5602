"""The one privacy accountant of the release (docs/math.md §8, §9.4), after dp-accounting's
``PrivacyAccountant``: everything the release, the failed outcome and the worker's metrics
say about the budget is asked of it, and computed nowhere else.

It owns each released cell's ε and δ (fixed: all equal; under a vehicle budget each cell's
own, fixed when the accountant is built), their split between mean and variance, K·ε, the
PLD figure (None where the PLD accountant does not compose the mechanism), the budget mask's
view of the ledger (the cells each vehicle may still be read in), and every vehicle's charge
for a window, released, empty or failed: :meth:`PrivacyAccountant.charge` of a
:class:`WindowReads`, the one place a vehicle is charged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from stream_dp.dp import kernels, pld_accounting
from stream_dp.dp.budget_ledger import CAP_RTOL, BudgetLedger, WindowLoss
from stream_dp.dp.grid_error import ErrorModel
from stream_dp.dp.individual_loss import entry_epsilons
from stream_dp.dp.occupancy import IntArray, Occupancy
from stream_dp.release.modes import VehicleBudget
from stream_dp.release.params import ReleaseParams

if TYPE_CHECKING:
    from stream_dp.dp.pseudo_user import PseudoUserResult


#: Per (vehicle, cell) pair read under per-cell ε: the occupancy's vehicle names, each read
#: pair's vehicle index and what it lost there (the run's PLD per vehicle; never published).
Reads = tuple[tuple[str, ...], np.ndarray, np.ndarray]
#: Per occupancy entry its kept readings, per cell its cap (the CLIP mean's ``top``, §13.1).
Shares = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class WindowReads:
    """What a window read, the one description its charge is computed from (§8.2, §13).

    ``occupancy``: the chosen pairs (None: no cell chosen); ``kept``: per entry, kept by the
    bound (None: every entry); ``released``: per cell, released (None: a failed window, charged
    every cell it chose, each at its whole ε, under a vehicle budget at most each vehicle's
    room); ``grids``: per vehicle its released cells when
    the release counted them (CLIP-USER's G_l over the released cells); ``capped``: the cap's
    result, so that under per-cell ε each vehicle pays its own share (§13.1, "The loss").
    ``counted``: a failed window whose chosen cells could not be computed: per vehicle (names)
    the cells it occupies in any partial (an over-count)."""

    occupancy: Occupancy | None = None
    kept: np.ndarray | None = None
    released: np.ndarray | None = None
    grids: IntArray | None = None
    capped: PseudoUserResult | None = None
    counted: tuple[Sequence[str], Sequence[int]] | None = None


@dataclass(frozen=True)
class PrivacyAccountant:
    """The budget of the release configured by ``params`` (docs/math.md §8.1, §9.4).

    Each released cell is (ε, δ)-DP (δ = 0 unless the mechanism needs it): (1 − s)·ε for its
    mean and s·ε for its variance (s = ``variance_share``; 0: no variance is released). A
    vehicle read in G_l released cells loses G_l·ε; after CLIP-USER G_l ≤ K, so the window's
    loss is K·ε (Prop. V.1), or by the PLD accountant ε at ``accounting_delta`` of K cells.
    """

    params: ReleaseParams
    #: With a vehicle budget's plan, each cell's own ε (§13; +inf: a dropped cell); else None.
    per_cell: np.ndarray | None = field(default=None, compare=False)
    #: The last pass of :meth:`_read_entries`: its inputs and result. The plan's check and the
    #: window's charge read the same entries of the same cells when every planned cell is
    #: released, so the charge reuses the check's pass (one pass over 10^6 entries: ~4 ms).
    _last_read: list[object] = field(default_factory=list, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.per_cell is not None:
            object.__setattr__(self, "per_cell", np.asarray(self.per_cell, dtype=np.float64))

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
        """:func:`regroup_epsilon` of the parameters."""
        return regroup_epsilon(self.params)

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
        mode = self.params.mode
        if not isinstance(mode, VehicleBudget):
            return self.params.epsilon
        if self.per_cell is None or released is None or not released.any():
            return mode.burst
        return float(self.cell_epsilons(len(self.per_cell))[released].max())

    def window_privacy_loss(self, k: int, loss: WindowLoss | None) -> float:
        """The summary's ``privacy_loss``: K·ε (Prop. V.1); with per-cell ε (§13), where K·ε
        does not hold, the largest per-vehicle loss the ledger is charged (``loss``)."""
        if isinstance(self.params.mode, VehicleBudget) and loss is not None:
            return loss.max_loss
        return self.privacy_loss(k)

    def pld_loss(self, cells_per_vehicle: int) -> float | None:
        """ε at ``accounting_delta`` of that many cells; None where PLD does not compose the
        mechanism (e.g. an (ε, δ) mean) or without dp-accounting."""
        if not self.params.mechanism.pld_composes:
            return None
        params = self.params
        return pld_accounting.pld_loss(
            cells_per_vehicle, self.epsilon, self.variance_share, params.accounting_delta
        )

    def charge(
        self, window_start: int, reads: WindowReads, ledger: BudgetLedger | None = None
    ) -> tuple[WindowLoss, Reads | None]:
        """What the window charges each vehicle (§8.2), and with per-cell ε the reads (the run's
        PLD, §13.4): the one place a vehicle's charge is computed. Released: per vehicle its
        released cells × ε, or with per-cell ε the summed ε (each its own share) of the cells
        it is read in. Failed (``reads.released`` None): each chosen cell it is kept in, at its
        whole ε (CLIP-USER only removes cells; a release charges at most that), under a vehicle
        budget at most its room in the ``ledger`` (:meth:`_within_room`). Failed before
        the cells were chosen (``reads.counted``): the cells counted per vehicle, and under a
        vehicle budget each vehicle at most its room in the ``ledger`` (never past B)."""
        if reads.counted is not None:
            return self._counted_charge(window_start, *reads.counted, ledger), None
        occupancy = reads.occupancy
        if occupancy is None:
            return WindowLoss.from_counts(window_start, self.epsilon, [], []), None
        read = reads.kept if reads.kept is not None else np.ones(occupancy.n_entries, bool)
        if reads.released is None:  # failed: every chosen cell kept, at its whole ε
            if self.per_cell is None:
                cells = np.bincount(
                    occupancy.vehicle_index[read], minlength=len(occupancy.vehicles)
                )
                return WindowLoss.of_occupancy(
                    window_start, self.epsilon, occupancy, None, cells
                ), None
            eps = self._entry_epsilons(occupancy, read, None)
            loss = _summed_loss(window_start, occupancy, read, eps)
            return self._within_room(loss, ledger), None
        if self.per_cell is None:
            grids = reads.grids
            if grids is None:
                grids = occupancy.grids_per_vehicle(read & reads.released[occupancy.cell_index])
            return WindowLoss.of_occupancy(window_start, self.epsilon, occupancy, None, grids), None
        return self._read_loss(
            window_start, occupancy, read, reads.released, self._own_shares(reads.capped)
        )

    def _within_room(self, loss: WindowLoss, ledger: BudgetLedger | None) -> WindowLoss:
        """A failed window's charge under a vehicle budget, each vehicle at most its room in
        the ``ledger`` (§13.1, "The loss"): the plan it ran under was checked to charge
        nobody past it (its own shares), and a failure before that check released nothing.
        The room without its float slack, as :meth:`_counted_charge`'s."""
        mode = self.params.mode
        if ledger is None or not isinstance(mode, VehicleBudget) or loss.losses is None:
            return loss
        names = list(loss.vehicles)
        return _within_rooms(mode, ledger, loss.window_start, names, loss.cells, loss.losses)

    def _counted_charge(
        self,
        window_start: int,
        vehicles: Sequence[str],
        cells: Sequence[int],
        ledger: BudgetLedger | None,
    ) -> WindowLoss:
        """:meth:`charge` of cells counted per vehicle: ε each; under a vehicle budget (§13)
        each vehicle at most its room (capped at its cells × the burst: the most any release
        could have charged it); a vehicle with no room pays nothing."""
        mode = self.params.mode
        if not isinstance(mode, VehicleBudget):
            return WindowLoss.from_counts(window_start, self.epsilon, list(vehicles), list(cells))
        per_vehicle = dict(zip(vehicles, cells, strict=True))
        names = sorted(name for name, n in per_vehicle.items() if n > 0)
        counts = np.array([per_vehicle[name] for name in names], dtype=np.int64)
        return _within_rooms(mode, ledger, window_start, names, counts, counts * mode.burst)

    def _read_loss(
        self,
        window_start: int,
        occupancy: Occupancy,
        kept: np.ndarray,
        released: np.ndarray,
        shares: Shares | None,
    ) -> tuple[WindowLoss, Reads]:
        """Per-cell ε: per vehicle the summed ε of its entries ``kept`` in a ``released``
        cell (each its own share with ``shares``, §13.1), and those reads, by the one kernel
        :data:`~stream_dp.dp.kernels.READ_LOSS` (its compiled form one pass over the
        entries)."""
        cells, losses, vehicle, read_eps = self._read_entries(occupancy, kept, released, shares)
        loss = WindowLoss.of_occupancy_losses(window_start, occupancy, cells, losses)
        return loss, (occupancy.vehicles, vehicle, read_eps)

    def vehicle_charges(
        self,
        occupancy: Occupancy,
        kept: np.ndarray,
        released: np.ndarray,
        capped: PseudoUserResult | None,
    ) -> np.ndarray:
        """Per vehicle of ``occupancy``, what :meth:`charge` would charge it were the
        ``released`` cells released with these ``kept`` entries and the cap's result
        ``capped`` (per-cell ε): the vehicle budget's plan is checked against its rooms by
        this (§13.1, "The loss")."""
        shares = self._own_shares(capped)
        return self._read_entries(occupancy, kept, released, shares)[1]

    def _read_entries(
        self,
        occupancy: Occupancy,
        kept: np.ndarray,
        released: np.ndarray,
        shares: Shares | None,
        with_entries: bool = True,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:data:`~stream_dp.dp.kernels.READ_LOSS` of the window: per vehicle its read entries
        and their summed ε (each its own share with ``shares``), and (``with_entries``) the
        read entries' vehicles and ε."""
        if len(kept) != occupancy.n_entries or len(released) != len(occupancy.cells):
            raise AssertionError("kept entries or released cells differ from the occupancy")
        inputs = (occupancy, kept, released, shares)
        if self._last_read and _same_reads(self._last_read[0], inputs):  # type: ignore[arg-type]
            return self._last_read[1]  # type: ignore[return-value]
        own = None
        if shares is not None:
            kept_count, cap = _checked_shares(occupancy, shares)
            own = (kept_count, cap, 1.0 - self.variance_share)
        result: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] = kernels.READ_LOSS.pick(
            occupancy.n_entries
        )(
            occupancy.cell_start, occupancy.vehicle_index, kept, released,
            self.cell_epsilons(len(occupancy.cells)), len(occupancy.vehicles), own, with_entries,
        )  # fmt: skip
        if with_entries:  # copies: a later call's arrays are compared with these values
            copied = None if shares is None else (shares[0].copy(), shares[1].copy())
            self._last_read[:] = [(occupancy, kept.copy(), released.copy(), copied), result]
        return result

    def _own_shares(self, capped: PseudoUserResult | None) -> Shares | None:
        """What a budget release charges each vehicle by (§13.1, the loss): per entry its kept
        readings and per cell its cap (``capped``: the CLIP mean's), so each vehicle pays its
        own share of a cell's ε; None (the whole ε) without them, or with a variance share
        (the variance runs at the cell's ``s ε`` whatever a vehicle's share of the mean, and
        the run's PLD audit composes each read as one cell's mean and variance)."""
        if capped is None or self.variance_share > 0:
            return None
        return capped.kept_count, capped.cap

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
        kept_count, cap = _checked_shares(occupancy, shares)
        cell = occupancy.cell_index
        cell_kept = np.bincount(cell, weights=kept_count, minlength=len(occupancy.cells))
        return entry_epsilons(np.where(read, eps, 0.0), kept_count, cap[cell], cell_kept[cell],
                              1.0 - self.variance_share)  # fmt: skip

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
            spent = ledger.spent(vehicles, window_start)
            return pld_accounting.pld_allowed_cells(
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
        if isinstance(self.params.mode, VehicleBudget):
            return epsilon_loss if self.params.mechanism.pld_composes else None
        return self.pld_loss(round(epsilon_loss / self.epsilon))


def regroup_epsilon(params: ReleaseParams) -> float:
    """The mean's ε adaptive cells are chosen at (§12): ε, at most the vehicle budget's burst
    (no cell costs more, §13)."""
    epsilon = params.epsilon
    if isinstance(params.mode, VehicleBudget):
        epsilon = min(epsilon, params.mode.burst)
    return epsilon * (1.0 - params.variance_share)


def vehicle_room(
    mode: VehicleBudget, ledger: BudgetLedger | None, vehicles: Sequence[str], at: int
) -> np.ndarray:
    """What each of ``vehicles`` may spend in the window at ``at`` under ``mode`` (§13.1): the
    ledger's rolling budget and pacing
    (:meth:`~stream_dp.dp.budget_ledger.BudgetLedger.budget_room`); with no ledger
    (``plan``), the burst."""
    if ledger is None:
        return np.full(len(vehicles), min(mode.budget, mode.burst))
    return ledger.budget_room(vehicles, at, mode.budget, mode.burst)


def _within_rooms(
    mode: VehicleBudget,
    ledger: BudgetLedger | None,
    window_start: int,
    names: Sequence[str],
    cells: np.ndarray,
    charge: np.ndarray,
) -> WindowLoss:
    """A failed window's loss: each of ``names`` (ascending) charged ``charge`` for its
    ``cells``, at most its room under ``mode`` (its room without the float slack); a vehicle
    with no room left pays nothing."""
    room = vehicle_room(mode, ledger, names, window_start)
    charge = np.minimum(charge, np.maximum(room - CAP_RTOL * float(mode.budget), 0.0))
    return WindowLoss.of_losses(window_start, names, np.where(charge > 0, cells, 0), charge)


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


def _same_reads(
    last: tuple[Occupancy, np.ndarray, np.ndarray, Shares | None],
    now: tuple[Occupancy, np.ndarray, np.ndarray, Shares | None],
) -> bool:
    """Whether two :meth:`PrivacyAccountant._read_entries` calls read the same: the same
    occupancy, equal kept entries, released cells and own shares."""
    if last[0] is not now[0] or (last[3] is None) != (now[3] is None):
        return False
    shares = () if last[3] is None else tuple(zip(last[3], now[3], strict=True))  # type: ignore[arg-type]
    return (
        np.array_equal(last[1], now[1])
        and np.array_equal(last[2], now[2])
        and all(np.array_equal(a, b) for a, b in shares)
    )
