"""The release of one window as a pipeline of named stages (docs/math.md §9), one pipeline per
mode (:mod:`stream_dp.release.modes`), chosen once by
:func:`~stream_dp.release.pipelines.pipelines_of`.

Each stage reads the window so far (a frozen :class:`~stream_dp.release.state.WindowState`)
and returns a new one with what it makes filled in (``dataclasses.replace``), writing only the
state fields and report lines it declares (:attr:`Stage.writes`, :attr:`Stage.reports`; the
pipeline checks both, :mod:`stream_dp.release.stage_contract`); no stage asks which mode
runs. A stage may also :meth:`~Stage.begin` background work it will need (on
:mod:`stream_dp.windows.background`) as soon as the chosen pairs are known, so that it runs
beside the bound (benchmarks/release.py).

Fixed ε (:class:`~stream_dp.release.modes.FixedEpsilon`): accountant → regroup (adaptive
cells, §12) → select (§9.1) → mask (the ledger's cap, §8.4) → CLIP-USER (§5) → cap (§6,
§9.2) → statistics (§9.3) → error bars and withhold (§10, §12) → noise (§9.4) → records →
summary and charge (§9.5, §8.2).

Vehicle budget (:class:`~stream_dp.release.modes.VehicleBudget`, §13): pool (the carry,
§13.3) → budget regroup and select (§13.1, §9.1) → plan (per-cell ε, caps and sit-outs) →
accountant → statistics → error bars and withhold → noise → records → span records (each
record's ε and span) → defer (spans, §13.3) → summary and charge.

The stages up to the accountant choose what a window reads (public inputs only, no budget
spent, §2.2): a failed window is charged what they chose. Everything published is computed
from the public occupancy array and noised values (composition paper Sec. V-B2). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

from stream_dp.dp.error_bars import LN20
from stream_dp.release.accounting import PrivacyAccountant, WindowReads, regroup_epsilon
from stream_dp.release.adaptive import adaptive_columns, cell_shapes, released_cells
from stream_dp.release.bounding import BudgetMask, ClipUserBound, Contributions, ReadingCap
from stream_dp.release.noisy import CellDataOf, error_bars, noisy_cells
from stream_dp.release.params import ReleaseParams
from stream_dp.release.records import cell_records, release_ids, window_base, window_summary
from stream_dp.release.report import WindowReport, Withheld
from stream_dp.release.selection import occupancy_of, select_cells
from stream_dp.release.stage_contract import (
    check_declared,
    check_report_owners,
    check_stage_writes,
)
from stream_dp.release.state import WindowState
from stream_dp.release.statistics import (
    cell_counts,
    cell_statistics,
    start_entry_totals,
    start_prefix_sums,
)
from stream_dp.windows import background
from stream_dp.windows.columns import WindowColumns

# The noise's module (it loads numba for its sampler) is imported where its stage needs it,
# and the vehicle budget's stages (:mod:`stream_dp.release.vehicle_budget.stages`) when that mode is
# chosen: a plan draws no noise and, without a vehicle budget, plans none (start-up,
# benchmarks/plan_startup.py).
if TYPE_CHECKING:
    from stream_dp.dp.noise import LaplaceNoise


class Stage:
    """One named step of the release, declaring what it makes: the fields of the window state
    it writes (``writes``) and its own lines of the report (``reports``); the pipeline checks
    that it changes nothing else (:func:`run_stage`)."""

    name = "stage"
    #: The pairs (entries, columns) are final before this stage runs: it only chooses what
    #: is kept of them, so the later stages' background work may start beside it.
    pairs_final = False
    writes: ClassVar[frozenset[str]] = frozenset()
    reports: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_declared(cls.__name__, cls.writes, cls.reports)

    def begin(self, state: WindowState) -> None:
        """Start background work this stage needs (the masked pairs are known); none here."""

    def run(self, state: WindowState) -> WindowState:
        """The window so far with what this stage makes."""
        raise NotImplementedError


class Regroup(Stage):
    """With ``target_mean_error`` T, regroup into the adaptive cells of the occupancy (§12)."""

    name = "regroup"
    writes = frozenset({"columns", "adaptive"})
    reports = frozenset({"withheld_regroup"})

    def run(self, state: WindowState) -> WindowState:
        params = state.input.params
        if params.target_mean_error is None:
            return state
        columns, adaptive, withheld = adaptive_columns(
            state.columns, params, regroup_epsilon(params)
        )
        report = replace(state.report, withheld_regroup=Withheld(*withheld))
        return replace(state, columns=columns, adaptive=adaptive, report=report)


class Account(Stage):
    """The window's accountant at a fixed ε, built once (under a vehicle budget the plan
    stage builds it with each cell's own ε)."""

    name = "accountant"
    writes = frozenset({"accountant"})

    def run(self, state: WindowState) -> WindowState:
        return replace(state, accountant=PrivacyAccountant(state.input.params))


class Select(Stage):
    """The cells to release and their occupancy array, from public counts (§9.1)."""

    name = "select"
    writes = frozenset({"pairs"})

    def run(self, state: WindowState) -> WindowState:
        params, columns = state.input.params, state.columns
        chosen = select_cells(columns, params.min_vehicles, params.top_cells)
        return replace(state, pairs=Contributions(chosen, *occupancy_of(columns, chosen)))


class Mask(Stage):
    """With a budget cap, each vehicle keeps the cells its remaining budget allows (§8.4)."""

    name = "mask"
    writes = frozenset({"pairs"})
    reports = frozenset({"vehicles_budget_limited", "pairs_withheld_budget"})

    def run(self, state: WindowState) -> WindowState:
        window = state.input
        mask = BudgetMask(state.columns, window.ledger, window.window_start, _accountant(state))
        return _bounded(state, mask.apply(_pairs(state), state.report))


class ClipUser(Stage):
    """CLIP-USER (Algorithm 1, §5), keeping the error of the accountant's split within E
    (with adaptive cells and no variance, T)."""

    name = "clip-user"
    writes = frozenset({"pairs"})
    reports = frozenset({"g1", "error_bound", "suppressed_pairs"})

    def run(self, state: WindowState) -> WindowState:
        params, accountant = state.input.params, _accountant(state)
        target, error_star = params.target_mean_error, params.error_bound
        if error_star is None and target is not None and params.variance_share == 0.0:
            error_star = target  # the model's error is then the mean_error itself
        model = accountant.error_model(LN20 if target is not None else 1.0)
        bound = ClipUserBound(params.upper, accountant.epsilon, error_star, model)
        return _bounded(state, bound.apply(_pairs(state), state.report))


class Cap(Stage):
    """The pseudo-user cap (Sec. V-B3, §6), or every kept reading when it is off."""

    name = "cap"
    writes = frozenset({"pairs"})
    reports = frozenset({"max_error"})

    def run(self, state: WindowState) -> WindowState:
        p = state.input.params
        cap = ReadingCap(p.pseudo_user, p.upper, _accountant(state).epsilon, p.prefix_limit)
        return _bounded(state, cap.apply(_pairs(state), state.report))


@dataclass
class Statistics(Stage):
    """The kept readings' counts, sums, clipped means and variances (§9.3). It starts the
    pairs' totals, and with ``prefix_sums`` and the cap the reading prefixes' sums, beside
    CLIP-USER (the compiled kernels release the GIL). Under a vehicle budget nothing runs
    beside it (the plan is made during the regrouping) and the cap cuts few pairs: their
    prefixes alone are summed when needed
    (:func:`~stream_dp.release.statistics.cut_prefix_sums`), so it starts none."""

    prefix_sums: bool = True
    name = "statistics"
    writes = frozenset({"stats"})
    _prefix_sums: Future[tuple[Any, ...]] | None = None
    _entry_totals: Future[tuple[Any, Any]] | None = None

    def begin(self, state: WindowState) -> None:
        if self.prefix_sums and state.input.params.pseudo_user:  # only the cap reads them
            self._prefix_sums = start_prefix_sums(state.columns)
        self._entry_totals = start_entry_totals(state.columns, _pairs(state).entry_of)

    def run(self, state: WindowState) -> WindowState:
        pairs = _pairs(state)
        assert pairs.bounded is not None and self._entry_totals is not None
        with np.errstate(invalid="ignore", divide="ignore"):  # a budget's dropped cells: NaN
            stats = cell_statistics(
                state.columns, pairs.occupancy, pairs.entry_of, pairs.bounded.capped.kept_count,
                self._prefix_sums, self._entry_totals,
            )  # fmt: skip
        return replace(state, stats=stats)


class CountStatistics(Stage):
    """The statistics stage on counts alone, for an occupancy without readings (``plan``):
    the kept counts the error bars and the withholding read, as :class:`Statistics` has them."""

    name = "statistics"
    writes = frozenset({"stats"})

    def run(self, state: WindowState) -> WindowState:
        pairs = _pairs(state)
        assert pairs.bounded is not None
        return replace(state, stats=cell_counts(pairs.occupancy, pairs.bounded.capped.kept_count))


class Withhold(Stage):
    """The error bars (§10), and with adaptive cells the cells still missing T withheld; K
    over the cells released (§12)."""

    name = "error-bars"
    writes = frozenset({"bars", "released", "grids"})
    reports = frozenset({"k", "withheld_error_bars"})

    def run(self, state: WindowState) -> WindowState:
        pairs, report, stats, params = _pairs(state), state.report, state.stats, state.input.params
        bounded = pairs.bounded
        assert bounded is not None and stats is not None
        bars = error_bars(stats, bounded.capped, _accountant(state), params.upper)
        released, grids, k, withheld = released_cells(
            params.target_mean_error, bars.mean, bounded.kept, bounded.grids,
            pairs.occupancy, stats.n_readings,
        )  # fmt: skip
        report = replace(report, k=k, withheld_error_bars=Withheld(*withheld))
        return replace(state, bars=bars, released=released, grids=grids, report=report)


@dataclass
class Noise(Stage):
    """Each released cell's noisy mean and variance (§9.4), by the CLIP mean's combiner or
    the configured mean mechanism."""

    noise: LaplaceNoise
    name = "noise"
    writes = frozenset({"noisy"})

    def run(self, state: WindowState) -> WindowState:
        pairs, stats, params = _pairs(state), state.stats, state.input.params
        assert pairs.bounded is not None and stats is not None and state.bars is not None
        assert state.released is not None
        capped = pairs.bounded.capped
        mechanism, cell_data = None, None
        if not params.mechanism.window_combiner:
            mechanism = configured_mean_mechanism(params)
            cell_data = CellDataOf(
                state.columns, pairs.entry_of, capped.kept_count,
                pairs.occupancy.cell_start, params.upper,
            )  # fmt: skip
        noisy = noisy_cells(
            stats, capped, _accountant(state), self.noise, state.bars, state.released,
            params.upper, mechanism, cell_data,
        )  # fmt: skip
        return replace(state, noisy=noisy)


@dataclass
class Records(Stage):
    """One record per released cell (§9.5); the release ids are hashed beside CLIP-USER."""

    name = "records"
    writes = frozenset({"cells"})
    _ids: Future[list[str]] | None = None

    def begin(self, state: WindowState) -> None:
        params = state.input.params
        self._ids = background.submit(
            release_ids, params.app_id, state.input.window_start, params.resolution,
            list(_pairs(state).occupancy.cells), state.input.nonce,
        )  # fmt: skip

    def run(self, state: WindowState) -> WindowState:
        pairs, stats, bars, noisy = _pairs(state), state.stats, state.bars, state.noisy
        assert pairs.bounded is not None and stats is not None and bars is not None
        assert noisy is not None and state.released is not None and self._ids is not None
        params, occupancy = state.input.params, pairs.occupancy
        variance_errors = (
            [None] * len(state.released) if bars.variance is None else bars.variance.tolist()
        )
        cells = cell_records(
            window_base(params, state.input.window_start), params, occupancy.cells,
            self._ids.result(), noisy, variance_errors, stats, pairs.bounded.capped.cap.tolist(),
            state.released.tolist(),
            cell_shapes(state.adaptive, occupancy.cells, params.resolution), state.report.k,
        )  # fmt: skip
        return replace(state, cells=cells)


class Summary(Stage):
    """The ledger's charge (:meth:`~stream_dp.release.accounting.PrivacyAccountant.charge`,
    §8.2) and the window's summary (§9.5), also of a window with no cell chosen: the one
    place a released window's budget fields are set."""

    name = "summary"
    writes = frozenset({"loss", "reads", "summary"})

    def run(self, state: WindowState) -> WindowState:
        window = state.input
        if window.ledger is not None:
            loss, reads = _accountant(state).charge(
                window.window_start, released_reads(state), window.ledger
            )
            state = replace(state, loss=loss, reads=reads)
        return replace(state, summary=summary_of(state))


def released_reads(state: WindowState) -> WindowReads:
    """What a released (or empty) window read: the bound's kept entries of the cells it
    released."""
    pairs = state.pairs
    if pairs is None or not len(pairs.chosen) or pairs.bounded is None:
        return WindowReads()
    bounded = pairs.bounded
    return WindowReads(pairs.occupancy, bounded.kept, state.released, state.grids, bounded.capped)


def chosen_reads(state: WindowState) -> WindowReads:
    """What a failed window is charged for: the pairs its choice kept, each in every cell it
    chose (CLIP-USER only removes cells)."""
    pairs = state.pairs
    assert pairs is not None, "the choice chose the pairs"
    kept = None if pairs.bounded is None else pairs.bounded.kept
    return WindowReads(pairs.occupancy, kept)


def summary_of(state: WindowState) -> dict[str, Any]:
    """The released (or empty) window's summary, with the loss charged to the ledger
    (``state.loss``)."""
    window = state.input
    accountant = state.accountant or PrivacyAccountant(window.params)
    return window_summary(
        accountant, window.window_start, state.report, window.observed, window.late_readings,
        window.nonce, len(state.cells), None, state.loss, state.released,
    )  # fmt: skip


def configured_mean_mechanism(params: ReleaseParams) -> Any:
    """The configured mean mechanism (a ``MeanMechanism``) with its parameters; for the CLIP
    mean the release calls its combiner with every cell at once instead (§7.2)."""
    spec, extra = params.mechanism, {}
    if spec.needs_delta:
        extra["delta"] = params.delta
    if spec.takes_prefix_limit:
        extra["prefix_limit"] = params.prefix_limit
    return spec.build(**extra)


@dataclass
class Pipeline:
    """The stages that choose a window's pairs (``choice``), then ``after_choice`` in order, then
    ``closing``. A window with no pair chosen skips ``after_choice``; otherwise each of those
    stages may first begin its background work, which then runs beside CLIP-USER (or beside
    the vehicle budget's plan, which starts once the pairs are final)."""

    after_choice: Sequence[Stage] = ()
    choice: Sequence[Stage] = ()
    closing: Sequence[Stage] = ()

    def __post_init__(self) -> None:
        stages = [*self.choice, *self.after_choice, *self.closing]
        check_report_owners((stage.name, stage.reports) for stage in stages)

    def run(self, state: WindowState) -> WindowState:
        """The window after every stage, each given the window its predecessor returned."""
        begun = False
        for stage in self.choice:
            if stage.pairs_final and not begun and state.pairs is not None and not state.empty:
                self._begin(state)  # beside the vehicle budget's plan, as beside CLIP-USER
                begun = True
            state = run_stage(stage, state)
        if not state.empty:
            if not begun:
                self._begin(state)
            for stage in self.after_choice:
                state = run_stage(stage, state)
        for stage in self.closing:
            state = run_stage(stage, state)
        return state

    def _begin(self, state: WindowState) -> None:
        for stage in self.after_choice:
            stage.begin(state)


def run_stage(stage: Stage, state: WindowState) -> WindowState:
    """``stage`` run on ``state``, checked to have written only what it declares (identity
    of each field: cheap, in every release)."""
    after = stage.run(state)
    check_stage_writes(stage.name, stage.writes, stage.reports, state, after)
    return after


def _bounded(state: WindowState, bound: tuple[Contributions, WindowReport]) -> WindowState:
    """The window with a bound's pairs and report lines."""
    pairs, report = bound
    return replace(state, pairs=pairs, report=report)


def _pairs(state: WindowState) -> Contributions:
    assert state.pairs is not None, "the select stage runs first"
    return state.pairs


def _accountant(state: WindowState) -> PrivacyAccountant:
    assert state.accountant is not None, "the accountant (or plan) stage runs first"
    return state.accountant


class ModePipelines(Protocol):
    """A mode's pipelines: its release, the choice a failed window is charged by, and the
    release up to the error bars on an occupancy without readings (``plan``)."""

    def release(self, noise: LaplaceNoise) -> Pipeline: ...

    def choice(self) -> Pipeline: ...

    def plan(self) -> Pipeline: ...

    def failed_input(
        self, columns: WindowColumns | None, carry: WindowColumns | None, window_start: int
    ) -> tuple[WindowColumns | None, WindowColumns | None]:
        """A failed window's columns (with the carry its release would have pooled) and the
        carry they hold, for the charge."""
        ...


@dataclass(frozen=True)
class FixedPipelines:
    """:class:`~stream_dp.release.modes.FixedEpsilon`'s stages (module docstring)."""

    def _choice(self) -> list[Stage]:
        return [Account(), Regroup(), Select(), Mask()]

    def release(self, noise: LaplaceNoise) -> Pipeline:
        bound: list[Stage] = [ClipUser(), Cap()]
        rest = [Statistics(), Withhold(), Noise(noise), Records()]
        return Pipeline(bound + rest, self._choice(), [Summary()])

    def choice(self) -> Pipeline:
        return Pipeline((), self._choice())

    def plan(self) -> Pipeline:
        return Pipeline([ClipUser(), Cap(), CountStatistics(), Withhold()], self._choice())

    def failed_input(
        self, columns: WindowColumns | None, carry: WindowColumns | None, window_start: int
    ) -> tuple[WindowColumns | None, WindowColumns | None]:
        return columns, None
