"""The state of one window's release as it passes through the stages (docs/math.md §9), and
the :class:`WindowCache` of what the stages reuse across the vehicle budget's re-choices."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from stream_dp.dp.budget_ledger import BudgetLedger, WindowLoss
from stream_dp.release.accounting import PrivacyAccountant, Reads
from stream_dp.release.params import ReleaseParams
from stream_dp.release.report import WindowReport
from stream_dp.windows.columns import WindowColumns

if TYPE_CHECKING:
    from stream_dp.dp.adaptive_cells import AdaptiveCells, UnitPrice
    from stream_dp.dp.occupancy import Occupancy
    from stream_dp.release.bounding import Contributions
    from stream_dp.release.noisy import ErrorBars, NoisyCells
    from stream_dp.release.statistics import CellStatistics
    from stream_dp.release.vehicle_budget.planner import BudgetPlan


class WindowCache:
    """What one window's release computes once and reads again, each keyed by the object it
    was computed for (identity: the arrays are not compared): the regrouping's last choice
    and its plan, the cells' span starts, the pairs' first windows, the vehicles' rooms and
    their unit price."""

    def __init__(self) -> None:
        self._choice: tuple[WindowColumns, Contributions, BudgetPlan] | None = None
        self._span_starts: tuple[Occupancy, np.ndarray] | None = None
        self._first_window: tuple[WindowColumns, np.ndarray] | None = None
        self._rooms: tuple[Sequence[str], np.ndarray] | None = None
        self._price: tuple[np.ndarray, UnitPrice] | None = None

    def keep_choice(self, columns: WindowColumns, pairs: Contributions, plan: BudgetPlan) -> None:
        """The vehicle budget's regrouping chose ``pairs`` of ``columns`` and planned them."""
        self._choice = (columns, pairs, plan)

    def choice_columns(self) -> WindowColumns | None:
        """The columns of the last choice kept (None: none)."""
        return None if self._choice is None else self._choice[0]

    def move_choice(self, counted: WindowColumns, columns: WindowColumns) -> None:
        """The last choice, if of ``counted``, now of ``columns`` (the same pairs with their
        reading logs)."""
        if self._choice is not None and self._choice[0] is counted:
            self._choice = (columns, self._choice[1], self._choice[2])

    def chosen_pairs(self, columns: WindowColumns) -> Contributions | None:
        """The pairs the last choice kept chose of these ``columns``, if it was of them."""
        choice = self._choice
        return choice[1] if choice is not None and choice[0] is columns else None

    def plan_of(self, pairs: Contributions) -> BudgetPlan | None:
        """The plan the regrouping made of these ``pairs``, if it did."""
        choice = self._choice
        return choice[2] if choice is not None and choice[1] is pairs else None

    def span_starts(self, occupancy: Occupancy, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """Per cell of ``occupancy`` its span's start (a copy), computed once."""
        if self._span_starts is None or self._span_starts[0] is not occupancy:
            self._span_starts = (occupancy, compute().copy())
        return self._span_starts[1].copy()

    def first_window(self, columns: WindowColumns) -> np.ndarray | None:
        """The first window of each pair of ``columns``, if computed."""
        memo = self._first_window
        return memo[1] if memo is not None and memo[0] is columns else None

    def keep_first_window(self, columns: WindowColumns, first: np.ndarray) -> None:
        self._first_window = (columns, first)

    def rooms(self, vehicles: Sequence[str], compute: Callable[[], np.ndarray]) -> np.ndarray:
        """The rooms of ``vehicles`` (read-only), computed once for the same names (the
        ledger does not change during a release)."""
        if self._rooms is None or self._rooms[0] is not vehicles:
            room = compute()
            room.flags.writeable = False  # shared by the price, every plan and the check
            self._rooms = (vehicles, room)
        return self._rooms[1]

    def unit_price(self, room: np.ndarray, compute: Callable[[], UnitPrice]) -> UnitPrice:
        """The unit price of the rooms ``room`` (identity), made once: the choices and the
        release price share its rooms' ranks."""
        if self._price is None or self._price[0] is not room:
            self._price = (room, compute())
        return self._price[1]


@dataclass(frozen=True)
class WindowInput:
    """What a window's release starts from, fixed for the whole release: its start, every
    reading of the window (``observed``: the summary counts them all; None only for a failed
    window whose partials could not be merged), the parameters, the ledger (public: the
    rooms and the cap read it), the late readings, the release event's ``nonce`` (every
    record id derives from it), the ``carry`` earlier windows deferred (spans, §13.3) and
    whether the input ends with this window (``last``: no cell is held for a longer span)."""

    window_start: int
    observed: WindowColumns | None
    params: ReleaseParams
    ledger: BudgetLedger | None = None
    late_readings: int = 0
    nonce: str = ""
    carry: WindowColumns | None = None
    last: bool = False


@dataclass(frozen=True)
class Pooled:
    """What the pool stage made of the window and its carry (§13.3): the pooled ``columns``
    the later stages read, per pooled pair its readings of this window (``own``), the
    window's pairs set ``aside`` to wait and the ``due`` units (released now rather than
    held); the carried readings withheld before pooling are the pool stage's report line."""

    columns: WindowColumns
    own: np.ndarray
    aside: WindowColumns | None
    due: tuple[str, ...]


@dataclass(frozen=True)
class WindowState:
    """One window so far on its way through the stages (frozen): its :class:`WindowInput` and
    what each stage made of it, each stage returning a new record with its own fields filled
    (``dataclasses.replace``). ``columns``: what the stages read (pooled with the carry,
    regrouped into adaptive cells); the report's lines are each written by the stage that
    knows them. Each stage declares the fields and lines it writes
    (:attr:`~stream_dp.release.stages.Stage.writes`), checked after it runs."""

    input: WindowInput
    columns: WindowColumns
    report: WindowReport = field(default_factory=WindowReport)
    #: Built once: at the start with ε for every cell, or after the vehicle budget's plan
    #: with each cell's own (§13).
    accountant: PrivacyAccountant | None = None
    cache: WindowCache = field(default_factory=WindowCache)
    adaptive: AdaptiveCells | None = None
    pairs: Contributions | None = None
    #: With a vehicle budget: the cells' ε (+inf: a dropped cell), caps and sit-outs (§13);
    #: the plan stage builds the accountant with its ε.
    budget_plan: BudgetPlan | None = None
    stats: CellStatistics | None = None
    bars: ErrorBars | None = None
    #: Per cell of the occupancy, whether it is released; per vehicle, its released cells.
    released: np.ndarray | None = None
    grids: np.ndarray | None = None
    noisy: NoisyCells | None = None
    #: The records: one per released cell (the summary is the summary stage's).
    cells: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    #: With a ledger: what the release charges each vehicle, and its reads (per-cell ε).
    loss: WindowLoss | None = None
    reads: Reads | None = None
    #: With spans: what the pool stage made (§13.3), and the entries this release defers.
    pooled: Pooled | None = None
    carry_out: WindowColumns | None = None

    @classmethod
    def start(cls, window: WindowInput) -> WindowState:
        """The window before any stage: its columns are the observed readings."""
        assert window.observed is not None, "a window's stages read its readings"
        return cls(window, window.observed)

    @property
    def window_start(self) -> int:
        return self.input.window_start

    @property
    def observed(self) -> WindowColumns | None:
        return self.input.observed

    @property
    def params(self) -> ReleaseParams:
        return self.input.params

    @property
    def ledger(self) -> BudgetLedger | None:
        return self.input.ledger

    @property
    def last(self) -> bool:
        return self.input.last

    @property
    def due(self) -> tuple[str, ...]:
        """Units pooling would push past T, released now rather than held (§13.3)."""
        return () if self.pooled is None else self.pooled.due

    @property
    def empty(self) -> bool:
        """No cell is left to release."""
        return self.pairs is not None and not len(self.pairs.chosen)
