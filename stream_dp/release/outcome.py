"""A window's outcome: its release, or, when computing the release raises, a failed window.

The one place where a window's release is computed for the offline engine and the service
releaser alike (issue 21). A release that raises (a bug in a stage, a mechanism's corner
case) must not stop the stream: the caller gets a :class:`~stream_dp.release.records.WindowRelease`
with no cells whose summary says ``"status": "failed"`` and names the exception's class
(never its message, which could quote data), stores and publishes it like any release, so
the window is never computed again, and goes on with the next window.

Budget (conservative): the failed window is charged as if it had been released. Each
vehicle is charged ``eps`` per chosen cell it occupies after the budget cap and *before*
CLIP-USER, which is at least what the release would have charged (CLIP-USER only removes
cells); ``K`` and ``privacy_loss`` in the summary are that charge's maximum. Whether a
window fails may depend on the private readings, so the bare fact "failed" is not covered by
the noise; charging the budget keeps the ledger an upper bound on what was released about
each vehicle, and a failure caused by the public counts (the usual kind) reveals nothing
more than the counts already do. If even the chosen cells cannot be computed, each vehicle
is charged every cell it occupies in any partition's partial (an over-count, never an
under-count). Pure apart from the fault point (tests only).
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from stream_dp.config import Settings
from stream_dp.dp.budget_ledger import BudgetLedger, WindowLoss
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.fault_injection import error_point_counted
from stream_dp.release.records import (
    FAILED,
    WindowRelease,
    new_release_nonce,
    release_id,
    rfc3339,
    window_base,
)
from stream_dp.release.step import chosen_pairs, release_window
from stream_dp.windows.columns import WindowColumns
from stream_dp.windows.coordinator import ReleaseCoordinator
from stream_dp.windows.state import PartialColumns

#: The fault point of :mod:`stream_dp.fault_injection` that raises in here.
FAULT_POINT = "release-error"


def release_ready_window(
    coordinator: ReleaseCoordinator,
    window_start: int,
    settings: Settings,
    noise: LaplaceNoise,
    ledger: BudgetLedger | None,
) -> WindowRelease:
    """Merge the window's partials and release it; on any exception, its failed outcome."""
    partials = coordinator.partials(window_start)
    late = coordinator.late_count(window_start)
    columns: WindowColumns | None = None
    try:
        error_point_counted(FAULT_POINT)
        columns = coordinator.merged(window_start)
        return release_window(window_start, columns, settings, noise, late, ledger)
    except Exception as exc:  # noqa: BLE001 - the point: any failure becomes an outcome
        return failed_release(window_start, exc, settings, late, ledger, columns, partials)


def release_ready_windows(
    coordinator: ReleaseCoordinator,
    settings: Settings,
    noise: LaplaceNoise,
    ledger: BudgetLedger | None,
) -> Iterator[WindowRelease]:
    """Release the coordinator's ready windows, oldest first (docs/math.md §9): the one loop
    of the offline engine and the service releaser. Which windows are ready is read now, on
    the caller's thread; each is computed when the caller asks for it (the worker does so in
    a thread, one at a time, never two concurrently). The caller stores each yielded release
    and calls :func:`record_stored` before asking for the next; a window found stored
    meanwhile (by another releaser, during a leadership change) is skipped. The caller may
    stop asking at any point: nothing is held open."""
    ready = coordinator.ready_windows()
    return (
        release_ready_window(coordinator, start, settings, noise, ledger)
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
    settings: Settings,
    late_readings: int,
    ledger: BudgetLedger | None,
    columns: WindowColumns | None,
    partials: list[PartialColumns],
) -> WindowRelease:
    """The failed outcome of a window: no cells, a summary without data, the charged loss."""
    loss = None
    if ledger is not None:
        loss = _charged_loss(window_start, settings, ledger, columns, partials)
    most_cells = int(loss.cells.max(initial=0)) if loss is not None else 0
    summary: dict[str, Any] = {
        **window_base(settings, window_start),
        "type": "window",
        "release_id": release_id(
            settings.app_id, window_start, settings.resolution, "*", new_release_nonce()
        ),
        "status": FAILED,
        "error": type(error).__name__,
        "G1": most_cells,
        "K": most_cells,
        "privacy_loss": most_cells * settings.epsilon,
        "privacy_loss_unclipped": most_cells * settings.epsilon,
        "cells_released": 0,
        "readings_dropped_late": late_readings,
        "mechanism": settings.mean_mechanism,
        "delta": settings.delta if settings.mean_mechanism == "cummings" else 0.0,
        "budget_cap": settings.budget_cap,
        "budget_period_seconds": settings.budget_period_seconds,
    }
    return WindowRelease(window_start, [], summary, loss, error_site=_site(error))


def _charged_loss(
    window_start: int,
    settings: Settings,
    ledger: BudgetLedger,
    columns: WindowColumns | None,
    partials: list[PartialColumns],
) -> WindowLoss:
    """Per vehicle, the chosen cells it occupies before CLIP-USER (module docstring)."""
    eps = settings.epsilon
    if columns is not None:
        try:
            occupancy = chosen_pairs(window_start, columns, settings, ledger).occupancy
            cells = np.bincount(occupancy.vehicle_index, minlength=len(occupancy.vehicles))
            return WindowLoss.of_occupancy(window_start, eps, occupancy, None, cells=cells)
        except Exception:  # noqa: BLE001 - fall back to the coarser, larger charge
            pass
    per_vehicle: dict[str, int] = {}
    for partial in partials:
        cells = np.bincount(partial.pair_vehicle, minlength=len(partial.vehicle_names))
        for name, count in zip(partial.vehicle_names.tolist(), cells.tolist(), strict=True):
            per_vehicle[name] = per_vehicle.get(name, 0) + count
    return WindowLoss.from_counts(window_start, eps, list(per_vehicle), list(per_vehicle.values()))


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
