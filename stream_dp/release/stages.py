"""The release of one window as a pipeline of named stages (docs/math.md §9).

Each stage reads the :class:`~stream_dp.release.state.WindowState`, adds what it makes and
writes its own lines of the report. A stage may also :meth:`~Stage.begin` background work it
will need (on :mod:`stream_dp.windows.background`) as soon as the masked pairs are known, so
that it runs beside CLIP-USER (benchmarks/release.py). In order:

regroup (adaptive cells, §12) → select (§9.1) → mask (the ledger, §8.4) → CLIP-USER → cap
(§9.2) → statistics (§9.3) → error bars and withhold (§10, §12) → noise (§9.4) → records
→ with spans, what is carried on (§13.3) → the ledger's charge and the summary (§9.5), the
last two also for a window with no cell chosen. Everything published is computed from the
public occupancy array and noised values (composition paper Sec. V-B2). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from stream_dp.dp.error_bars import LN20
from stream_dp.release.adaptive import adaptive_columns, cell_shapes, released_cells
from stream_dp.release.bounding import BudgetMask, ClipUserBound, Contributions, ReadingCap
from stream_dp.release.held import ReleasedCells, held_counts
from stream_dp.release.noisy import CellDataOf, error_bars, noisy_cells
from stream_dp.release.params import ReleaseParams
from stream_dp.release.records import (
    cell_records,
    release_ids,
    rfc3339,
    window_base,
    window_summary,
)
from stream_dp.release.selection import occupancy_of, select_cells
from stream_dp.release.span_policy import with_aside
from stream_dp.release.spans import deferred_pairs, span_starts, take_pairs
from stream_dp.release.state import WindowState
from stream_dp.release.statistics import (
    cell_counts,
    cell_statistics,
    start_entry_totals,
    start_prefix_sums,
)
from stream_dp.windows import background

#: Whether a budget plan's release charges its vehicles in compiled passes
#: (:meth:`~stream_dp.release.accounting.PrivacyAccountant.read_loss`); the tests switch it off
#: to compare with the numpy form (:meth:`~stream_dp.release.accounting.PrivacyAccountant.
#: released_loss`).
COMPILED_LOSS = True

# The noise's module (it loads numba for its sampler) and the vehicle budget's are imported
# where their stages need them: a plan draws no noise and, without a vehicle budget, plans
# none (start-up, benchmarks/plan_startup.py).
if TYPE_CHECKING:
    from stream_dp.dp.budget_ledger import WindowLoss
    from stream_dp.dp.noise import LaplaceNoise
    from stream_dp.release.accounting import Reads


class Stage:
    """One named step of the release."""

    name = "stage"
    #: The pairs (entries, columns) are final before this stage runs: it only chooses what
    #: is kept of them, so the later stages' background work may start beside it.
    pairs_final = False

    def begin(self, state: WindowState) -> None:
        """Start background work this stage needs (the masked pairs are known); none here."""

    def run(self, state: WindowState) -> None:
        raise NotImplementedError


class Regroup(Stage):
    """With ``target_mean_error`` T, regroup into the adaptive cells of the occupancy (§12)."""

    name = "regroup"

    def run(self, state: WindowState) -> None:
        if state.params.target_mean_error is None:
            return
        mean_epsilon = state.accountant.regroup_epsilon
        if state.params.vehicle_budget is not None:
            from stream_dp.release.budget_cells import budget_regroup

            withheld = budget_regroup(state, mean_epsilon)
        else:
            state.columns, state.adaptive, withheld = adaptive_columns(
                state.columns, state.params, mean_epsilon
            )
        state.report.cells_withheld += withheld[0]  # after a stale carry's (§13.3)
        state.report.readings_withheld += withheld[1]


class Select(Stage):
    """The cells to release and their occupancy array, from public counts (§9.1)."""

    name = "select"

    def run(self, state: WindowState) -> None:
        params, columns = state.params, state.columns
        memo = state.choice_memo
        if memo is not None and memo[0] is columns:  # the regrouping chose them already
            state.chosen, state.pairs = memo[1].chosen, memo[1]
            return
        chosen = select_cells(columns, params.min_vehicles, params.top_cells)
        state.chosen = chosen
        state.pairs = Contributions(chosen, *occupancy_of(columns, chosen))


class Mask(Stage):
    """With a budget cap, each vehicle keeps the cells its remaining budget allows (§8.4)."""

    name = "mask"

    def run(self, state: WindowState) -> None:
        mask = BudgetMask(state.columns, state.ledger, state.window_start, state.accountant)
        state.pairs = mask.apply(_pairs(state), state.report)


class VehicleBudget(Stage):
    """With a vehicle budget B (instead of the mask): per-cell ε, caps and sit-outs from the
    occupancy and each vehicle's room in the ledger (§13, :mod:`stream_dp.dp.vehicle_budget`);
    CLIP-USER and the cap then keep what it chose."""

    name = "vehicle-budget"
    pairs_final = True

    def run(self, state: WindowState) -> None:
        params = state.params
        if params.vehicle_budget is None:
            return
        pairs = _pairs(state)
        if not len(pairs.chosen):
            return
        from stream_dp.release.budget import budget_plan, check_plan, planned_pairs, vehicle_room

        memo = state.choice_memo
        if memo is not None and memo[1] is pairs:  # planned by the regrouping (same inputs)
            plan = memo[2]
        else:
            plan = budget_plan(state, pairs.occupancy)
        check_plan(pairs.occupancy, plan, vehicle_room(state, pairs.occupancy))  # the one kept
        state.pairs, state.report.vehicles_budget_limited = planned_pairs(pairs, plan, params)
        clip = state.pairs.clip
        assert clip is not None
        report = state.report  # as CLIP-USER reports its bound (the plan's sit-outs suppress)
        report.g1, report.k, report.error_bound = clip.g1, clip.k, clip.error_bound
        report.suppressed_pairs = len(clip.suppressed_entries)
        state.budget = plan
        state.accountant = state.accountant.with_cell_epsilons(plan.epsilon)


class ClipUser(Stage):
    """CLIP-USER (Algorithm 1, §5), keeping the error of the accountant's split within E
    (with adaptive cells and no variance, T)."""

    name = "clip-user"

    def run(self, state: WindowState) -> None:
        if state.budget is not None:
            return  # the vehicle budget bounded each vehicle's loss (§13)
        params = state.params
        target, error_star = params.target_mean_error, params.error_bound
        if error_star is None and target is not None and params.variance_share == 0.0:
            error_star = target  # the model's error is then the mean_error itself
        model = state.accountant.error_model(LN20 if target is not None else 1.0)
        bound = ClipUserBound(params.upper, state.accountant.epsilon, error_star, model)
        state.pairs = bound.apply(_pairs(state), state.report)


class Cap(Stage):
    """The pseudo-user cap (Sec. V-B3, §6), or every kept reading when it is off."""

    name = "cap"

    def run(self, state: WindowState) -> None:
        if state.budget is not None:
            return  # caps chosen with the cells' ε (§13)
        p = state.params
        cap = ReadingCap(p.pseudo_user, p.upper, state.accountant.epsilon, p.prefix_limit)
        state.pairs = cap.apply(_pairs(state), state.report)


@dataclass
class Statistics(Stage):
    """The kept readings' counts, sums, clipped means and variances (§9.3). It starts the
    pairs' totals, and with the cap the reading prefixes' sums, beside CLIP-USER (the compiled
    kernels release the GIL). Under a vehicle budget nothing runs beside it (the plan is
    made during the regrouping) and the cap cuts few pairs: their prefixes alone are summed
    when needed (:func:`~stream_dp.release.statistics.cut_prefix_sums`)."""

    name = "statistics"
    _prefix_sums: Future[tuple[Any, ...]] | None = None
    _entry_totals: Future[tuple[Any, Any]] | None = None

    def begin(self, state: WindowState) -> None:
        params = state.params
        if params.pseudo_user and params.vehicle_budget is None:  # only the cap reads them
            self._prefix_sums = start_prefix_sums(state.columns)
        self._entry_totals = start_entry_totals(state.columns, _pairs(state).entry_of)

    def run(self, state: WindowState) -> None:
        pairs = _pairs(state)
        assert pairs.capped is not None and self._entry_totals is not None
        with np.errstate(invalid="ignore", divide="ignore"):  # a budget's dropped cells: NaN
            state.stats = cell_statistics(
                state.columns, pairs.occupancy, pairs.entry_of, pairs.capped.kept_count,
                self._prefix_sums, self._entry_totals,
            )  # fmt: skip


class CountStatistics(Stage):
    """The statistics stage on counts alone, for an occupancy without readings (``plan``):
    the kept counts the error bars and the withholding read, as :class:`Statistics` has them."""

    name = "statistics"

    def run(self, state: WindowState) -> None:
        pairs = _pairs(state)
        assert pairs.capped is not None
        state.stats = cell_counts(pairs.occupancy, pairs.capped.kept_count)


class Withhold(Stage):
    """The error bars (§10), and with adaptive cells the cells still missing T withheld; K
    over the cells released (§12)."""

    name = "error-bars"

    def run(self, state: WindowState) -> None:
        pairs, report, stats = _pairs(state), state.report, state.stats
        assert pairs.capped is not None and pairs.clip is not None and stats is not None
        state.bars = error_bars(stats, pairs.capped, state.accountant, state.params.upper)
        withheld = (report.cells_withheld, report.readings_withheld)
        state.released, state.grids, report.k, withheld = released_cells(
            state.params.target_mean_error, state.bars.mean, pairs.clip, pairs.occupancy,
            stats.n_readings, withheld,
        )  # fmt: skip
        report.cells_withheld, report.readings_withheld = withheld


@dataclass
class Noise(Stage):
    """Each released cell's noisy mean and variance (§9.4), by the CLIP mean's combiner or
    the configured mean mechanism."""

    noise: LaplaceNoise
    name = "noise"

    def run(self, state: WindowState) -> None:
        pairs, stats, params = _pairs(state), state.stats, state.params
        assert pairs.capped is not None and stats is not None and state.bars is not None
        assert state.released is not None
        mechanism, cell_data = None, None
        if not params.mechanism.window_combiner:
            mechanism = configured_mean_mechanism(params)
            cell_data = CellDataOf(
                state.columns, pairs.entry_of, pairs.capped.kept_count,
                pairs.occupancy.cell_start, params.upper,
            )  # fmt: skip
        state.noisy = noisy_cells(
            stats, pairs.capped, state.accountant, self.noise, state.bars, state.released,
            params.upper, mechanism, cell_data,
        )  # fmt: skip


@dataclass
class Records(Stage):
    """One record per released cell (§9.5); the release ids are hashed beside CLIP-USER."""

    name = "records"
    _ids: Future[list[str]] | None = None

    def begin(self, state: WindowState) -> None:
        params = state.params
        self._ids = background.submit(
            release_ids, params.app_id, state.window_start, params.resolution,
            list(_pairs(state).occupancy.cells), state.nonce,
        )  # fmt: skip

    def run(self, state: WindowState) -> None:
        pairs, stats, bars, noisy = _pairs(state), state.stats, state.bars, state.noisy
        assert pairs.capped is not None and stats is not None and bars is not None
        assert noisy is not None and state.released is not None and self._ids is not None
        params, occupancy = state.params, pairs.occupancy
        variance_errors = (
            [None] * len(state.released) if bars.variance is None else bars.variance.tolist()
        )
        state.cells = cell_records(
            window_base(params, state.window_start), params, occupancy.cells,
            self._ids.result(), noisy, variance_errors, stats, pairs.capped.cap.tolist(),
            state.released.tolist(),
            cell_shapes(state.adaptive, occupancy.cells, params.resolution), state.report.k,
        )  # fmt: skip
        if state.budget is not None:  # each record states its own ε (§13)
            released = np.flatnonzero(state.released).tolist()
            epsilons = state.accountant.cell_epsilons(len(occupancy.cells)).tolist()
            starts = span_starts(state).tolist()
            stamps = {start: rfc3339(start) for start in set(starts)}  # a few spans' starts
            for record, g in zip(state.cells, released, strict=True):
                record["epsilon"] = epsilons[g]
                record["window_start"] = stamps[starts[g]]


class Defer(Stage):
    """With spans (§13.3): the pairs no released record covers that may still wait, and the
    ones set aside, are carried on (none after the input's last window: withheld); what the
    release leaves is then counted held or withheld (:mod:`stream_dp.release.held`)."""

    name = "defer"

    def run(self, state: WindowState) -> None:
        params, pooled, own = state.params, state.pooled, state.pooled_own
        if params.vehicle_budget is None or params.max_span_hours < 2 or pooled is None:
            return
        carried = np.zeros(0, dtype=np.int64) if state.last else deferred_pairs(state, pooled)
        out = take_pairs(pooled, carried) if len(carried) else None
        state.carry_out = None if state.last else with_aside(out, state.aside, params.prefix_limit)
        if state.adaptive is None or own is None:
            return  # no regrouping (no T): nothing is carried
        aside = 0 if state.aside is None or state.last else int(state.aside.count.sum())
        counts = held_counts(
            pooled, state.aside, state.carry_out, state.adaptive, _released_cells(state),
            int(own[carried].sum()) + aside,
        )  # fmt: skip
        report = state.report
        report.cells_held, report.readings_held = counts.cells_held, counts.readings_held
        report.cells_withheld = counts.cells_withheld
        report.readings_withheld = state.withheld_unpooled + counts.readings_withheld


def _released_cells(state: WindowState) -> ReleasedCells | None:
    """The regrouped cells the release chose and which it released; None if none."""
    if state.empty or state.pairs is None or state.released is None or state.stats is None:
        return None
    return ReleasedCells(state.pairs.occupancy.cells, state.released, state.stats.n_readings)


class Summary(Stage):
    """The ledger's charge (:meth:`~stream_dp.release.accounting.PrivacyAccountant.
    released_loss`, §8.2) and the window's summary (§9.5), also of a window with no cell
    chosen: the one place a released window's budget fields are set."""

    name = "summary"

    def run(self, state: WindowState) -> None:
        if state.ledger is not None:
            state.loss, state.reads = _charge(state)
        state.summary = summary_of(state)


def _charge(state: WindowState) -> tuple[WindowLoss, Reads | None]:
    """What the window charges each vehicle, and under a budget plan its reads (§8.2, §13)."""
    accountant, start, occupancy = state.accountant, state.window_start, None
    if state.pairs is not None and not state.empty:
        occupancy = state.pairs.occupancy
        plan, released = state.budget, state.released
        if plan is not None and released is not None:
            shares = accountant.own_shares(state.pairs.capped)  # §13.1, the loss
            if COMPILED_LOSS and accountant.per_cell is not None:
                return accountant.read_loss(start, occupancy, plan.kept, released, shares)
            read = plan.kept & released[occupancy.cell_index]
            return accountant.released_loss(start, occupancy, state.grids, read, shares)
    return accountant.released_loss(start, occupancy, state.grids, None)


def summary_of(state: WindowState, error: BaseException | None = None) -> dict[str, Any]:
    """The window's summary from its state (released, empty or failed: ``error``), with the
    loss charged to the ledger (``state.loss``)."""
    return window_summary(
        state.accountant, state.window_start, state.report, state.observed,
        state.late_readings, state.nonce, len(state.cells), error, state.loss, state.released,
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


def choose_stages() -> list[Stage]:
    """The stages that choose what a window reads: regroup, select, mask. Public inputs
    only, no budget spent (§2.2); a failed window is charged what they chose (§8.2)."""
    return [Regroup(), Select(), Mask(), VehicleBudget()]


def plan_stages() -> list[Stage]:
    """After the choice, the release's stages up to the error bars on an occupancy without
    readings (``plan``): the same K and error bars as the release, no noise."""
    return [ClipUser(), Cap(), CountStatistics(), Withhold()]


def release_stages(noise: LaplaceNoise) -> list[Stage]:
    """After the choice, every stage of a window's release."""
    return [ClipUser(), Cap(), Statistics(), Withhold(), Noise(noise), Records()]


def release_pipeline(noise: LaplaceNoise) -> Pipeline:
    """A window's whole release: the choice, :func:`release_stages`, then its summary."""
    return Pipeline(release_stages(noise), closing=[Defer(), Summary()])


@dataclass
class Pipeline:
    """The stages that choose a window's pairs, then ``after_choice`` in order, then
    ``closing``. A window with no pair chosen skips ``after_choice``; otherwise each of those
    stages may first begin its background work, which then runs beside CLIP-USER (or beside
    the vehicle budget's plan, which starts once the pairs are final)."""

    after_choice: Sequence[Stage] = ()
    choice: Sequence[Stage] = field(default_factory=choose_stages)
    closing: Sequence[Stage] = ()

    def run(self, state: WindowState) -> WindowState:
        begun = False
        for stage in self.choice:
            if stage.pairs_final and not begun and state.pairs is not None and not state.empty:
                self._begin(state)  # beside the vehicle budget's plan, as beside CLIP-USER
                begun = True
            stage.run(state)
        if not state.empty:
            if not begun:
                self._begin(state)
            for stage in self.after_choice:
                stage.run(state)
        for stage in self.closing:
            stage.run(state)
        return state

    def _begin(self, state: WindowState) -> None:
        for stage in self.after_choice:
            stage.begin(state)


def _pairs(state: WindowState) -> Contributions:
    assert state.pairs is not None, "the select stage runs first"
    return state.pairs
