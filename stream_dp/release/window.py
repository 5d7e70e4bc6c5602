"""Release a window, and release the ready windows: the one entry of the offline engine and
the service releaser (docs/math.md §9, issue 21).

:func:`release_window` runs the stages of :mod:`stream_dp.release.stages` on one window. A
release that raises (a bug in a stage, a mechanism's corner case) must not stop the stream:
the caller gets a :class:`~stream_dp.release.records.WindowRelease` with no cells whose
summary says ``"status": "failed"`` and names the exception's class (never its message,
which could quote data), stores and publishes it like any release, so the window is never
computed again, and goes on with the next window.

Budget (conservative): the failed window is charged as if it had been released. Each
vehicle is charged ε per cell it occupies after the stages that choose the window's cells
(adaptive regrouping, selection, the budget mask) and *before* CLIP-USER, which is at least
what the release would have charged (CLIP-USER and the withholding only remove cells); ``K``
and ``privacy_loss`` in the summary are that charge's maximum. Whether a window fails may
depend on the private readings, so the bare fact "failed" is not covered by the noise;
charging the budget keeps the ledger an upper bound on what was released about each vehicle,
and a failure caused by the public counts (the usual kind) reveals nothing more than the
counts already do. If even the chosen cells cannot be computed, each vehicle is charged
every cell it occupies in any partition's partial (an over-count, never an under-count).
Under a vehicle budget (docs/math.md §13) the failed window first pools its whole carry (its
release would have pooled it, or set parts of it aside, §13.3), and is charged its plan; the
partials' fallback charges each vehicle its room (capped at its pairs × the burst), the most
any release could have charged it, so a failure never takes a vehicle past B.
Pure apart from the fault point (tests only).
"""

from __future__ import annotations

import gc
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from stream_dp.dp.budget_ledger import CAP_RTOL, BudgetLedger, WindowLoss
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.fault_injection import error_point_counted
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.budget import room_of
from stream_dp.release.params import ReleaseParams
from stream_dp.release.records import WindowRelease, new_release_nonce, rfc3339
from stream_dp.release.span_policy import choose_pooling
from stream_dp.release.spans import fresh_carry, pooled, pooled_with_own
from stream_dp.release.stages import Pipeline, release_pipeline, summary_of
from stream_dp.release.state import WindowState
from stream_dp.windows.columns import WindowColumns
from stream_dp.windows.coordinator import ReleaseCoordinator
from stream_dp.windows.state import PartialColumns

#: The fault point of :mod:`stream_dp.fault_injection` that raises in here.
FAULT_POINT = "release-error"


def release_window(
    window_start: int,
    columns: WindowColumns,
    params: ReleaseParams,
    noise: LaplaceNoise,
    late_readings: int = 0,
    ledger: BudgetLedger | None = None,
    carry: WindowColumns | None = None,
    last: bool = False,
) -> WindowRelease:
    """Run the whole per-window release (pure: no I/O). With a ``ledger`` whose ``cap`` is
    set, each vehicle is first limited to the cells its remaining budget allows; with any
    ledger, the release carries the per-vehicle cells counted (``loss``) for the caller to
    record once the release is stored. ``carry``: the entries earlier windows deferred
    (spans, docs/math.md §13); the release's own ``carry`` is what it defers in turn.
    ``last``: the input ends with this window, so no cell is held for a longer span."""
    # Performance (benchmarks/release.py): the stages allocate no reference cycles; pausing
    # the cyclic collector avoids repeated full scans of the window's arrays' owners
    # (measured: up to 40 % of the time).
    collecting = gc.isenabled()
    gc.disable()
    try:
        state = _state(window_start, columns, params, ledger, late_readings)
        state.last = last
        aside = None
        if params.vehicle_budget is not None:  # spans (§13.3)
            carry, stale = fresh_carry(carry, window_start, params)
            choice = choose_pooling(columns, carry, params, state.accountant.regroup_epsilon)
            carry, state.due = choice.carry, choice.due
            aside = choice.aside  # this window's own pairs: young enough to wait one more
            if last and aside is not None:  # the input ends: no later window to release them
                stale += int(aside.count.sum())
                aside = None
            state.columns, state.pooled_own = pooled_with_own(
                choice.window, carry, params.prefix_limit
            )
            # a stale carry, the carried pairs a window-alone cell leaves (and, at the input's
            # end, the pairs set aside) are withheld
            state.report.readings_withheld = state.withheld_unpooled = stale + choice.withheld
            state.pooled, state.aside = state.columns, aside
        state.carry_in = carry
        release_pipeline(noise).run(state)  # its Defer stage sets state.carry_out
    finally:
        if collecting:
            gc.enable()
    return WindowRelease(
        window_start, state.cells, state.summary, state.loss, carry=state.carry_out,
        reads=state.reads,
    )  # fmt: skip


def _state(
    window_start: int,
    columns: WindowColumns | None,
    params: ReleaseParams,
    ledger: BudgetLedger | None,
    late_readings: int = 0,
) -> WindowState:
    accountant = PrivacyAccountant(params)
    nonce = new_release_nonce()  # one per release event: every record id derives from it
    return WindowState(window_start, columns, params, accountant, ledger, late_readings, nonce)


def release_ready_window(
    coordinator: ReleaseCoordinator,
    window_start: int,
    params: ReleaseParams,
    noise: LaplaceNoise,
    ledger: BudgetLedger | None,
    carry: WindowColumns | None = None,
    last: bool = False,
) -> WindowRelease:
    """Merge the window's partials and release it (with the ``carry`` of the window before;
    ``last``: the end of the input, :func:`release_window`);
    on any exception, its failed outcome (which defers nothing: a carried entry is then
    withheld, never released twice)."""
    partials = coordinator.partials(window_start)
    late = coordinator.late_count(window_start)
    columns: WindowColumns | None = None
    try:
        error_point_counted(FAULT_POINT)
        columns = coordinator.merged(window_start)
        return release_window(window_start, columns, params, noise, late, ledger, carry, last)
    except Exception as exc:  # noqa: BLE001 - the point: any failure becomes an outcome
        return failed_release(window_start, exc, params, late, ledger, columns, partials, carry)


def release_ready_windows(
    coordinator: ReleaseCoordinator,
    params: ReleaseParams,
    noise: LaplaceNoise,
    ledger: BudgetLedger | None,
    carry: Callable[[], WindowColumns | None] = lambda: None,
    end_of_input: bool = False,
) -> Iterator[WindowRelease]:
    """Release the coordinator's ready windows, oldest first (docs/math.md §9): the one loop
    of the offline engine and the service releaser. Which windows are ready is read now, on
    the caller's thread; each is computed when the caller asks for it (the worker does so in
    a thread, one at a time, never two concurrently). The caller stores each yielded release
    and calls :func:`record_stored` before asking for the next; a window found stored
    meanwhile (by another releaser, during a leadership change) is skipped. The caller may
    stop asking at any point: nothing is held open. ``carry`` is asked, as each window is
    computed, for the entries the release stored last deferred (spans, §13); with
    ``end_of_input`` (the offline engine's last windows) the last ready window holds nothing
    back for a longer span."""
    ready = coordinator.ready_windows()
    last = ready[-1] if end_of_input and len(ready) else None
    return (
        release_ready_window(coordinator, start, params, noise, ledger, carry(), start == last)
        for start in ready
        if start not in coordinator.released
    )


def record_stored(
    coordinator: ReleaseCoordinator,
    ledger: BudgetLedger,
    window_start: int,
    loss: WindowLoss | None,
    from_partials: bool = False,
) -> None:
    """A window's release (or failed outcome) is stored: it is never released again, and its
    per-vehicle loss is charged to the ledger (docs/math.md §8.2). The offline engine calls
    this as it yields the release; the worker once the release log has it."""
    coordinator.mark_released(window_start, from_partials)
    if loss is not None:
        ledger.record_released(loss)


def failed_release(
    window_start: int,
    error: BaseException,
    params: ReleaseParams,
    late_readings: int,
    ledger: BudgetLedger | None,
    columns: WindowColumns | None,
    partials: list[PartialColumns],
    carry: WindowColumns | None = None,
) -> WindowRelease:
    """The failed outcome of a window: no cells, the summary of a release (same fields)
    without data, the accountant's charge (module docstring). Under a vehicle budget the
    ``carry`` is pooled first, as the release would have (§13.3): its pairs are charged too."""
    carried: WindowColumns | None = None
    if params.vehicle_budget is not None:
        carried, _ = fresh_carry(carry, window_start, params)
        if columns is not None:
            columns = pooled(columns, carried, params.prefix_limit)
    state = _state(window_start, columns, params, ledger, late_readings)
    if ledger is not None:
        state.loss = _charged_loss(state, columns is not None, partials, carried)
    most_cells = int(state.loss.cells.max(initial=0)) if state.loss is not None else 0
    state.report.g1 = state.report.k = most_cells
    summary = summary_of(state, error)
    return WindowRelease(window_start, [], summary, state.loss, error_site=_site(error))


def _charged_loss(
    state: WindowState,
    merged: bool,
    partials: list[PartialColumns],
    carry: WindowColumns | None = None,
) -> WindowLoss:
    """Per vehicle, the chosen cells it occupies before CLIP-USER (module docstring)."""
    if merged:
        try:
            Pipeline().run(state)
            assert state.pairs is not None
            if state.budget is not None:  # what its plan would have charged (§13), <= room
                occupancy = state.pairs.occupancy
                return state.accountant.budget_loss(
                    state.window_start, occupancy, state.budget.kept
                )
            return state.accountant.failed_charge(state.window_start, state.pairs.occupancy)
        except Exception:  # noqa: BLE001 - fall back to the coarser, larger charge
            pass
    per_vehicle: dict[str, int] = {}
    sources = [(p.pair_vehicle, p.vehicle_names) for p in partials]
    if carry is not None:
        sources.append((carry.vehicle_code, carry.vehicle_names))
    for pair_vehicle, names in sources:
        cells = np.bincount(pair_vehicle, minlength=len(names))
        for name, count in zip(list(names), cells.tolist(), strict=True):
            per_vehicle[name] = per_vehicle.get(name, 0) + count
    params = state.params
    if params.vehicle_budget is not None:  # §13: each vehicle at most its room, never past B
        names = sorted(name for name, n in per_vehicle.items() if n > 0)
        counts = np.array([per_vehicle[name] for name in names], dtype=np.int64)
        room = room_of(params, state.ledger, names, state.window_start)
        room = np.maximum(room - CAP_RTOL * float(params.vehicle_budget), 0.0)  # no slack
        charge = np.minimum(room, counts * params.vehicle_burst)
        counts = np.where(charge > 0, counts, 0)  # a vehicle with no room pays nothing
        return WindowLoss.of_losses(state.window_start, names, counts, charge)
    return state.accountant.failed_charge_of_counts(
        state.window_start, list(per_vehicle), list(per_vehicle.values())
    )


def _site(error: BaseException) -> str:
    """Where the error was raised: ``file:line in function`` (code, never data)."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return "unknown"
    last = frames[-1]
    return f"{Path(last.filename).name}:{last.lineno} in {last.name}"


def failure_line(release: WindowRelease, what_next: str) -> str:
    """The one line that reports a failed window (logs, stderr): no values, no vehicles."""
    summary = release.summary
    return (
        f"window {rfc3339(release.window_start)} failed: {summary['error']} at "
        f"{release.error_site or 'unknown'}; its summary is published with status "
        f"'failed' and no cells, K={summary['K']} charged to the budget; {what_next}"
    )
