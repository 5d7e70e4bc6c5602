"""Release a window, and release the ready windows: the one entry of the offline engine and
the service releaser (docs/math.md §9, issue 21).

:func:`release_window` runs the pipeline of the parameters' mode
(:func:`~stream_dp.release.pipelines.pipelines_of`) on one window. A
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
any release could have charged it, so a failure never takes a vehicle past B. The failed
window runs its mode's choice and every charge is the accountant's
(:meth:`~stream_dp.release.accounting.PrivacyAccountant.charge`).
Pure apart from the fault point (tests only).
"""

from __future__ import annotations

import gc
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from stream_dp.dp.budget_ledger import BudgetLedger, WindowLoss
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.fault_injection import error_point_counted
from stream_dp.release.accounting import PrivacyAccountant, WindowReads
from stream_dp.release.params import ReleaseParams
from stream_dp.release.pipelines import pipelines_of
from stream_dp.release.records import (
    WindowRelease,
    new_release_nonce,
    rfc3339,
    window_summary,
)
from stream_dp.release.report import WindowReport
from stream_dp.release.stages import ModePipelines, Pipeline, chosen_reads
from stream_dp.release.state import WindowInput, WindowState
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
        window = _input(window_start, columns, params, ledger, late_readings, carry, last)
        state = release_pipeline(params, noise).run(WindowState.start(window))
    finally:
        if collecting:
            gc.enable()
    return WindowRelease(
        window_start, state.cells, state.summary, state.loss, carry=state.carry_out,
        reads=state.reads,
    )  # fmt: skip


def release_pipeline(params: ReleaseParams, noise: LaplaceNoise) -> Pipeline:
    """The release of a window in the parameters' mode
    (:func:`~stream_dp.release.pipelines.pipelines_of`)."""
    return pipelines_of(params).release(noise)


def _input(
    window_start: int,
    columns: WindowColumns | None,
    params: ReleaseParams,
    ledger: BudgetLedger | None,
    late_readings: int = 0,
    carry: WindowColumns | None = None,
    last: bool = False,
) -> WindowInput:
    nonce = new_release_nonce()  # one per release event: every record id derives from it
    return WindowInput(window_start, columns, params, ledger, late_readings, nonce, carry, last)


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
    pipelines = pipelines_of(params)
    columns, carried = pipelines.failed_input(columns, carry, window_start)
    window = _input(window_start, columns, params, ledger, late_readings)
    accountant, loss = PrivacyAccountant(params), None
    if ledger is not None:
        chosen = _failed_choice(window, pipelines)
        if chosen is not None and chosen.accountant is not None:
            accountant = chosen.accountant
        reads = chosen_reads(chosen) if chosen is not None else _counted_reads(partials, carried)
        loss, _ = accountant.charge(window_start, reads, ledger)
    most_cells = int(loss.cells.max(initial=0)) if loss is not None else 0
    report = WindowReport(g1=most_cells, k=most_cells)  # the charge's most cells (docstring)
    summary = window_summary(
        accountant, window_start, report, columns, late_readings, window.nonce, 0, error, loss
    )
    return WindowRelease(window_start, [], summary, loss, error_site=_site(error))


def _failed_choice(window: WindowInput, pipelines: ModePipelines) -> WindowState | None:
    """The failed window after its mode's choice (the pairs it is charged for, module
    docstring); None if it has no readings or the choice itself fails."""
    if window.observed is None:
        return None
    try:
        return pipelines.choice().run(WindowState.start(window))
    except Exception:  # noqa: BLE001 - fall back to the coarser, larger charge
        return None


def _counted_reads(
    partials: list[PartialColumns], carry: WindowColumns | None = None
) -> WindowReads:
    """What a failed window is charged for when even its choice fails (module docstring): the
    cells each vehicle occupies in any partial (and the carry)."""
    per_vehicle: dict[str, int] = {}
    sources = [(p.pair_vehicle, p.vehicle_names) for p in partials]
    if carry is not None:
        sources.append((carry.vehicle_code, carry.vehicle_names))
    for pair_vehicle, names in sources:
        cells = np.bincount(pair_vehicle, minlength=len(names))
        for name, count in zip(list(names), cells.tolist(), strict=True):
            per_vehicle[name] = per_vehicle.get(name, 0) + count
    return WindowReads(counted=(list(per_vehicle), list(per_vehicle.values())))


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
