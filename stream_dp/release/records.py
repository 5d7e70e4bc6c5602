"""A window's records: the release ids, the common fields, the released or failed window."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from stream_dp.config import PUBLIC_OCCUPANCY
from stream_dp.dp.budget_ledger import WindowLoss
from stream_dp.release.modes import VehicleBudget
from stream_dp.release.params import ReleaseParams

if TYPE_CHECKING:
    from stream_dp.release.accounting import PrivacyAccountant
    from stream_dp.release.noisy import NoisyCells
    from stream_dp.release.report import WindowReport
    from stream_dp.release.statistics import CellStatistics
    from stream_dp.windows.columns import WindowColumns

#: Version 2 (issue 21): every window summary has ``status``, ``released`` or ``failed``.
SCHEMA_VERSION = 2


#: ``status`` of a window summary: its cells were released / its release computation failed.
RELEASED, FAILED = "released", "failed"


RELEASE_NAMESPACE = uuid.UUID("6f1e2a4c-5b0d-4e7a-9c3f-2d8b1a7e4c90")


_NAMESPACE_BYTES = RELEASE_NAMESPACE.bytes


def rfc3339(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def release_id(app_id: str, window_start: int, resolution: int, cell: str, nonce: str = "") -> str:
    """Id of one (window, cell) record of one release event.

    ``uuid5(RELEASE_NAMESPACE, "[nonce|]app|window|resolution|cell")`` (RFC 4122 name-based,
    SHA-1), formatted directly: ``uuid.uuid5`` costs several times more, 2,000 times per
    window. A release draws its ``nonce`` once (:func:`new_release_nonce`), so two releases
    of the same window (the service's and an offline run's, or two apps') never share an id;
    a re-publication of a stored release carries the stored records, ids included."""
    return release_ids(app_id, window_start, resolution, [cell], nonce)[0]


def new_release_nonce() -> str:
    """A fresh random identifier of one release event (128 bits from the OS CSPRNG)."""
    return secrets.token_hex(16)


def release_ids(
    app_id: str, window_start: int, resolution: int, cells: list[str], nonce: str = ""
) -> list[str]:
    """:func:`release_id` of each cell of one window (the common prefix hashed once)."""
    name = f"{nonce}|" if nonce else ""
    prefix = hashlib.sha1(
        _NAMESPACE_BYTES + f"{name}{app_id}|{window_start}|{resolution}|".encode()
    )
    out = []
    for cell in cells:
        sha = prefix.copy()
        sha.update(cell.encode())
        digest = bytearray(sha.digest()[:16])
        digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
        digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
        h = digest.hex()
        out.append(f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    return out


@dataclass(frozen=True)
class WindowRelease:
    """The records of one window: one per released cell, then the window summary."""

    window_start: int
    cells: list[dict[str, Any]]
    summary: dict[str, Any]
    #: Cells each vehicle was counted in (for the budget ledger; never published).
    loss: WindowLoss | None = None
    #: A failed window's ``file:line in function`` of the error (for its log line; not stored).
    error_site: str | None = None
    #: The entries this release defers to the next window (spans, docs/math.md §13): raw
    #: private columns, never published; the worker stores them with the release.
    carry: WindowColumns | None = None
    #: Per read (vehicle, cell) pair of a vehicle budget's release: the vehicle's index into
    #: ``loss``'s occupancy names and the cell's ε (the run's PLD per vehicle; never published).
    reads: tuple[tuple[str, ...], np.ndarray, np.ndarray] | None = None

    @property
    def records(self) -> list[dict[str, Any]]:
        return [*self.cells, self.summary]

    @property
    def failed(self) -> bool:
        """The window's release computation failed: only its summary is published."""
        return self.summary.get("status") == FAILED

    def to_json_obj(self) -> dict[str, Any]:
        return {"window_start": self.window_start, "cells": self.cells, "summary": self.summary}

    @classmethod
    def from_json_obj(cls, obj: dict[str, Any]) -> WindowRelease:
        return cls(int(obj["window_start"]), list(obj["cells"]), dict(obj["summary"]))


def window_base(params: ReleaseParams, window_start: int) -> dict[str, Any]:
    """The fields every record of the window carries (the model that protected it too)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "privacy_model": PUBLIC_OCCUPANCY,
        "window_start": rfc3339(window_start),
        "window_end": rfc3339(window_start + params.window_seconds),
        "resolution": params.resolution,
        "epsilon": params.epsilon,
        "upper": params.upper,
    }


def cell_records(
    base: dict[str, Any],
    params: ReleaseParams,
    cells: tuple[str, ...],
    ids: list[str],
    noisy: NoisyCells,
    variance_errors: list[float | None],
    stats: CellStatistics,
    cap: list[int],
    released: list[bool],
    shapes: list[dict[str, Any]],
    k: int,
) -> list[dict[str, Any]]:
    """One record per released cell (docs/math.md §9.5): the noisy mean and variance clamped
    to [0, U] and [0, U²/4] (post-processing), their error bars capped at U and U²/4 (both
    the released and the true value lie in that range), public counts, the cap and the
    worst-case error bound."""
    upper = params.upper
    kept, vehicles = stats.kept_readings.tolist(), stats.n_vehicles.tolist()
    kept_vehicles, readings = stats.n_kept_vehicles.tolist(), stats.n_readings.tolist()
    return [
        {
            **base,
            **shapes[g],
            "type": "cell",
            "release_id": ids[g],
            "cell": cell,
            "mean": min(max(noisy.means[g], 0.0), upper),
            "variance": _clamped_variance(noisy.variances[g], upper),
            "mean_error": capped_error(noisy.mean_errors[g], upper),
            "variance_error": capped_error(variance_errors[g], upper**2 / 4),
            "n_vehicles": int(vehicles[g]),
            "n_vehicles_kept": int(kept_vehicles[g]),
            "n_readings": int(readings[g]),
            "n_readings_used": int(kept[g]),
            "cap": int(cap[g]),
            "error_bound": noisy.error_bounds[g],
            "mechanism": params.mean_mechanism,
            "K": k,
        }
        for g, cell in enumerate(cells)
        if released[g]
    ]


def capped_error(error: float | None, width: float) -> float | None:
    """An error bar no wider than the range [0, width] that both values lie in (the released
    and the true value alike), as published; the plan reports the same."""
    return None if error is None else min(error, width)


def _clamped_variance(variance: float | None, upper: float) -> float | None:
    return None if variance is None else min(max(variance, 0.0), upper**2 / 4)


def window_summary(
    accountant: PrivacyAccountant,
    window_start: int,
    report: WindowReport,
    columns: WindowColumns | None,
    late_readings: int,
    nonce: str,
    cells_released: int = 0,
    error: BaseException | None = None,
    loss: WindowLoss | None = None,
    released: np.ndarray | None = None,
) -> dict[str, Any]:
    """The window's summary record (docs/math.md §9.5), released or failed (``error``: the
    exception whose class a failed window names): what each stage reported (the bounds, the
    cells withheld, K over the released cells), the accountant's ε, K·ε (or the largest
    per-vehicle ``loss`` charged, with per-cell ε), G1·ε and PLD figure, the window's public
    counts and the budget fields. Both kinds have the same fields, built here alone; a failed
    window's data fields are None. ``released``: per cell, whether it is released."""
    params = accountant.params
    counted = columns is not None and error is None
    stated = report if error is None else None  # a failed window states none of its data
    base = window_base(params, window_start)
    base["epsilon"] = accountant.window_epsilon(released if error is None else None)
    withheld = report.withheld()  # each stage's own line, summed
    return {
        **base,
        "type": "window",
        "release_id": release_id(params.app_id, window_start, params.resolution, "*", nonce),
        "status": RELEASED if error is None else FAILED,
        "G1": report.g1,
        "K": report.k,
        "privacy_loss": accountant.window_privacy_loss(report.k, loss),
        "privacy_loss_unclipped": accountant.privacy_loss(report.g1),
        "error_bound": _line(stated, "error_bound"),
        "max_error": _line(stated, "max_error"),
        "cells_released": cells_released,
        "cells_observed": len(columns.cell_names) if counted else None,
        "n_vehicles": len(columns.vehicle_names) if counted else None,
        "n_readings": int(columns.count.sum()) if counted else None,
        "suppressed_pairs": _line(stated, "suppressed_pairs"),
        "mechanism": params.mean_mechanism,
        "delta": accountant.cell_delta,
        "readings_dropped_late": late_readings,
        "budget_cap": params.budget_cap,
        "budget_period_seconds": params.budget_period_seconds,
        "vehicles_budget_limited": _line(stated, "vehicles_budget_limited"),
        "pairs_withheld_budget": _line(stated, "pairs_withheld_budget"),
        "cells_withheld": None if stated is None else withheld.cells,
        "readings_withheld": None if stated is None else withheld.readings,
        "cells_held": _line(stated, "cells_held"),
        "readings_held": _line(stated, "readings_held"),
        "planned_by": _line(stated, "planned_by"),
        "variance_share": params.variance_share,
        "accounting": params.accounting,
        "accounting_delta": params.accounting_delta,
        "target_mean_error": params.target_mean_error,
        "privacy_loss_pld": (
            None if isinstance(params.mode, VehicleBudget) else accountant.pld_loss(report.k)
        ),
        "vehicle_budget": params.vehicle_budget,
        "max_vehicle_loss": None if loss is None else loss.max_loss,
        "error": None if error is None else type(error).__name__,
    }


def _line(report: WindowReport | None, name: str) -> Any:
    """A report line of the summary (None for a failed window)."""
    return None if report is None else getattr(report, name)
