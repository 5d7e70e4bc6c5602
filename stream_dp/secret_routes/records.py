"""The records of a secret-routes window (docs/output.md, "Secret routes"): every record
names the model; a cell carries its noisy vehicle count, mean and interval; the summary the
window's and the period's (epsilon, delta), the same for every vehicle."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stream_dp.dp.noisy_mean import NoisyMeans
from stream_dp.dp.secret_accounting import COUNT_STEPS
from stream_dp.release.records import FAILED, RELEASED, release_ids, rfc3339
from stream_dp.secret_routes import SECRET_ROUTES
from stream_dp.secret_routes.params import INTERVAL_LEVEL, SecretRoutesParams

#: Records of the secret-routes model are a new kind: schema_version 3.
SCHEMA_VERSION = 3


@dataclass(frozen=True)
class ReleasedCells:
    """The cells shown, their noisy vehicle counts and means."""

    names: list[str]
    count: np.ndarray
    means: NoisyMeans
    resolution: int


def common(
    window_start: int, params: SecretRoutesParams, windows_in_period: int, resolution: int
) -> dict[str, Any]:
    """The fields every record of the window carries."""
    budget = params.budget
    return {
        "schema_version": SCHEMA_VERSION,
        "privacy_model": SECRET_ROUTES,
        "window_start": rfc3339(window_start),
        "window_end": rfc3339(window_start + params.window_seconds),
        "resolution": resolution,
        "upper": params.upper,
        "epsilon_window": budget.window_epsilon,
        "delta_window": budget.selection_delta,
        "epsilon_period": budget.period_epsilon(windows_in_period),
        "delta_period": budget.period_delta(windows_in_period),
    }


def cell_records(window_start: int, params: SecretRoutesParams, cells: ReleasedCells,
                 windows_in_period: int, nonce: str) -> list[dict[str, Any]]:  # fmt: skip
    """One record per shown cell."""
    base = common(window_start, params, windows_in_period, cells.resolution)
    ids = release_ids(params.app_id, window_start, cells.resolution, cells.names, nonce)
    means = cells.means
    bar = means.error_bar
    return [
        {
            **base,
            "type": "cell",
            "release_id": ids[i],
            "cell": name,
            "n_vehicles_noisy": float(cells.count[i]),
            "mean": float(means.mean[i]),
            "mean_error": float(bar[i]),
            "mean_low": float(means.low[i]),
            "mean_high": float(means.high[i]),
            "interval_level": INTERVAL_LEVEL,
        }
        for i, name in enumerate(cells.names)
    ]


def window_summary(window_start: int, params: SecretRoutesParams, cells_released: int,
                   windows_in_period: int, nonce: str,
                   error: BaseException | None = None) -> dict[str, Any]:  # fmt: skip
    """The window's summary, released or failed (``error``: its class is named)."""
    budget = params.budget
    summary = {
        **common(window_start, params, windows_in_period, params.resolution),
        "type": "window",
        "release_id": release_ids(params.app_id, window_start, params.resolution, ["*"], nonce)[0],
        "status": RELEASED if error is None else FAILED,
        "cells_released": cells_released,
        "contribution_cells": params.contribution_cells,
        "coarse_resolution": params.coarse_resolution,
        "resolution_choice": None if params.coarse_resolution is None else params.resolution_choice,
        "fine_cut_vehicles": params.fine_cut / COUNT_STEPS if params.adaptive else None,
        "threshold_vehicles": params.threshold / COUNT_STEPS,
        "vehicle_budget": budget.budget,
        "accounting_delta": budget.delta,
        "windows_per_period": budget.windows,
        "windows_in_period": windows_in_period,
    }
    if error is not None:
        summary["error"] = type(error).__name__
    return summary
