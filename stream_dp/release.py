"""Release of one closed window: occupancy → CLIP-USER → pseudo-user cap → noisy records.

Everything published is computed from the (public) occupancy array and Laplace-noised
values (composition paper Sec. V-B2, MATH.md "The release of one grid"): per cell the mean
and variance of the kept readings, each with ``eps/2`` of the cell budget, clamped after
noise to ``[0, U]`` and ``[0, U^2/4]`` (post-processing).
"""

from __future__ import annotations

import gc
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import chain
from operator import itemgetter
from typing import Any

import numpy as np

from stream_dp.config import Settings
from stream_dp.dp.clip_user import ClipUserResult, clip_user
from stream_dp.dp.grid_error import variance_bias
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.occupancy import Occupancy, factorize
from stream_dp.dp.pseudo_user import PseudoUserResult, no_pseudo_user, pseudo_user_step
from stream_dp.window_state import WindowPairs, pairs_to_rows

SCHEMA_VERSION = 1
RELEASE_NAMESPACE = uuid.UUID("6f1e2a4c-5b0d-4e7a-9c3f-2d8b1a7e4c90")


def rfc3339(epoch_seconds: float) -> str:
    return datetime.fromtimestamp(epoch_seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def release_id(app_id: str, window_start: int, resolution: int, cell: str) -> str:
    """Stable id of one (window, cell) release: a re-publication carries the same id."""
    return str(uuid.uuid5(RELEASE_NAMESPACE, f"{app_id}|{window_start}|{resolution}|{cell}"))


@dataclass(frozen=True)
class WindowRelease:
    """The records of one window: one per released cell, then the window summary."""

    window_start: int
    cells: list[dict[str, Any]]
    summary: dict[str, Any]

    @property
    def records(self) -> list[dict[str, Any]]:
        return [*self.cells, self.summary]

    def to_json_obj(self) -> dict[str, Any]:
        return {"window_start": self.window_start, "cells": self.cells, "summary": self.summary}

    @classmethod
    def from_json_obj(cls, obj: dict[str, Any]) -> WindowRelease:
        return cls(int(obj["window_start"]), list(obj["cells"]), dict(obj["summary"]))


@dataclass(frozen=True)
class WindowColumns:
    """A window's merged state column-wise: one entry per (cell, vehicle) pair.

    ``prefixes[i]`` holds entry ``i``'s first stored readings in event-time order. Built
    straight from the partials' wire rows (:meth:`from_rows`), so releasing a large window
    touches no per-pair Python object.
    """

    cell_names: tuple[str, ...]
    cell_code: np.ndarray
    vehicle_names: tuple[str, ...]
    vehicle_code: np.ndarray
    count: np.ndarray
    total: np.ndarray
    total_sq: np.ndarray
    prefixes: tuple[list[float], ...]

    @classmethod
    def from_rows(cls, rows: list[list[Any]]) -> WindowColumns:
        """From rows ``[cell, vehicle, count, sum, sum_sq, prefix_ts, prefix_values]`` with
        unique (cell, vehicle) keys."""
        if not rows:
            empty = np.zeros(0, dtype=np.int64)
            return cls((), empty, (), empty, empty, empty.astype(float), empty.astype(float), ())
        n = len(rows)

        def column(i: int) -> list[Any]:
            return list(map(itemgetter(i), rows))

        cell_names, cell_code = factorize(column(0))
        vehicle_names, vehicle_code = factorize(column(1))
        return cls(
            cell_names,
            cell_code,
            vehicle_names,
            vehicle_code,
            np.fromiter(map(itemgetter(2), rows), dtype=np.int64, count=n),
            np.fromiter(map(itemgetter(3), rows), dtype=np.float64, count=n),
            np.fromiter(map(itemgetter(4), rows), dtype=np.float64, count=n),
            tuple(map(itemgetter(6), rows)),
        )

    @classmethod
    def from_pairs(cls, pairs: WindowPairs) -> WindowColumns:
        return cls.from_rows(pairs_to_rows(pairs))

    def has_unique_keys(self) -> bool:
        key = self.cell_code * max(len(self.vehicle_names), 1) + self.vehicle_code
        return len(np.unique(key)) == len(key)


def select_cells(columns: WindowColumns, min_vehicles: int, top_cells: int | None) -> np.ndarray:
    """Cells (codes) chosen from public information only: vehicle and reading counts."""
    n_cells = len(columns.cell_names)
    vehicles = np.bincount(columns.cell_code, minlength=n_cells)
    readings = np.bincount(columns.cell_code, weights=columns.count, minlength=n_cells)
    chosen = np.flatnonzero(vehicles >= min_vehicles)
    if top_cells is not None and len(chosen) > top_cells:
        busiest_first = np.lexsort((chosen, -readings[chosen]))  # ties: smaller cell id
        chosen = np.sort(chosen[busiest_first[:top_cells]])
    return chosen


def kept_sums(
    columns: WindowColumns, entries: np.ndarray, kept_count: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Sum and sum of squares of the first ``kept_count`` readings of each chosen entry."""
    count = columns.count[entries]
    full = kept_count == count
    total = np.where(full, columns.total[entries], 0.0)
    total_sq = np.where(full, columns.total_sq[entries], 0.0)
    partial = np.flatnonzero(~full & (kept_count > 0))
    if len(partial):
        keep = kept_count[partial].tolist()
        prefixes = [columns.prefixes[i] for i in entries[partial].tolist()]
        if any(k > len(p) for p, k in zip(prefixes, keep, strict=True)):
            raise ValueError("a cap needs readings beyond the stored prefix")
        first = np.fromiter(chain.from_iterable(map(_head, prefixes, keep)), dtype=np.float64)
        starts = np.concatenate(([0], np.cumsum(keep)[:-1]))
        total[partial] = np.add.reduceat(first, starts)
        total_sq[partial] = np.add.reduceat(first * first, starts)
    return total, total_sq


def _head(prefix: list[float], n: int) -> list[float]:
    return prefix[:n]


def _occupancy(columns: WindowColumns, chosen: np.ndarray) -> tuple[Occupancy, np.ndarray]:
    """The occupancy array of the chosen cells and, per entry, its index into ``columns``."""
    in_chosen = np.zeros(len(columns.cell_names), dtype=bool)
    in_chosen[chosen] = True
    entries = np.flatnonzero(in_chosen[columns.cell_code])
    cell_rank = np.cumsum(in_chosen) - 1
    cell_index = cell_rank[columns.cell_code[entries]]
    used_vehicles, vehicle_index = np.unique(columns.vehicle_code[entries], return_inverse=True)
    order = np.lexsort((vehicle_index, cell_index))
    occupancy = Occupancy(
        cells=tuple(columns.cell_names[c] for c in chosen.tolist()),
        vehicles=tuple(columns.vehicle_names[v] for v in used_vehicles.tolist()),
        cell_index=cell_index[order].astype(np.int64),
        vehicle_index=vehicle_index[order].astype(np.int64),
        count=columns.count[entries[order]],
    )
    return occupancy, entries[order]


def release_window(
    window_start: int,
    pairs: WindowPairs | WindowColumns,
    settings: Settings,
    noise: LaplaceNoise,
    late_readings: int = 0,
) -> WindowRelease:
    """Run the whole per-window release (pure: no I/O)."""
    # The step allocates no reference cycles; pausing the cyclic collector avoids repeated
    # full scans of the window's million accumulators (measured: up to 40 % of the time).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _release_window(window_start, pairs, settings, noise, late_readings)
    finally:
        if collecting:
            gc.enable()


def _release_window(
    window_start: int,
    pairs: WindowPairs | WindowColumns,
    settings: Settings,
    noise: LaplaceNoise,
    late_readings: int,
) -> WindowRelease:
    eps = settings.epsilon
    upper = settings.upper
    window_end = window_start + settings.window_seconds
    columns = pairs if isinstance(pairs, WindowColumns) else WindowColumns.from_pairs(pairs)
    chosen = select_cells(columns, settings.min_vehicles, settings.top_cells)
    base = {
        "schema_version": SCHEMA_VERSION,
        "window_start": rfc3339(window_start),
        "window_end": rfc3339(window_end),
        "resolution": settings.resolution,
        "epsilon": eps,
    }
    if not len(chosen):
        summary = _summary(settings, base, window_start, None, None, 0, columns)
        summary["readings_dropped_late"] = late_readings
        return WindowRelease(window_start, [], summary)

    occupancy, entry_of = _occupancy(columns, chosen)
    clip = clip_user(occupancy, upper, eps, settings.error_bound)
    if settings.pseudo_user:
        capped = pseudo_user_step(clip, upper, eps, prefix_limit=settings.prefix_limit)
    else:
        capped = no_pseudo_user(clip)
    total, total_sq = kept_sums(columns, entry_of, capped.kept_count)
    n_cells = len(occupancy.cells)
    cell_idx = occupancy.cell_index
    kept_readings = np.bincount(cell_idx, weights=capped.kept_count, minlength=n_cells)
    cell_sum = np.bincount(cell_idx, weights=total, minlength=n_cells)
    cell_sum_sq = np.bincount(cell_idx, weights=total_sq, minlength=n_cells)
    n_vehicles = np.bincount(cell_idx, minlength=n_cells)
    n_kept_vehicles = np.bincount(cell_idx, weights=capped.kept_count > 0, minlength=n_cells)
    n_readings = occupancy.total_per_cell()

    mean_mechanism = _mean_mechanism(settings)
    bounds = np.searchsorted(cell_idx, np.arange(n_cells + 1))
    var_bias = variance_bias(upper, kept_readings.astype(np.int64), n_readings)
    cells: list[dict[str, Any]] = []
    for g, cell in enumerate(occupancy.cells):
        s = float(kept_readings[g])
        mean = cell_sum[g] / s
        variance = max(cell_sum_sq[g] / s - mean * mean, 0.0)
        noisy_var = noise.release(variance, float(capped.variance_sensitivity[g]), eps / 2)
        error_bound: float | None = float(capped.error[g])
        if mean_mechanism is None:
            noisy_mean = noise.release(mean, float(capped.mean_sensitivity[g]), eps / 2)
        else:
            entries = range(bounds[g], bounds[g + 1])
            outcome = mean_mechanism.release(
                _cell_data(columns, entry_of, capped.kept_count, entries),
                upper,
                eps / 2,
                noise.source,
            )
            noisy_mean = outcome.value
            variance_part = var_bias[g] + 2.0 * capped.variance_sensitivity[g] / eps
            error_bound = (
                None
                if outcome.worst_case_error is None
                else float(outcome.worst_case_error + variance_part)
            )
        cells.append(
            {
                **base,
                "type": "cell",
                "release_id": release_id(settings.app_id, window_start, settings.resolution, cell),
                "cell": cell,
                "mean": min(max(noisy_mean, 0.0), upper),
                "variance": min(max(noisy_var, 0.0), upper * upper / 4.0),
                "n_vehicles": int(n_vehicles[g]),
                "n_vehicles_kept": int(n_kept_vehicles[g]),
                "n_readings": int(n_readings[g]),
                "n_readings_used": int(s),
                "cap": int(capped.cap[g]),
                "error_bound": error_bound,
                "mechanism": settings.mean_mechanism,
                "K": clip.k,
            }
        )
    summary = _summary(settings, base, window_start, clip, capped, len(cells), columns)
    summary["readings_dropped_late"] = late_readings
    return WindowRelease(window_start, cells, summary)


def _mean_mechanism(settings: Settings) -> Any:
    """None for the built-in CLIP mean, else the configured mechanism of issue 4."""
    if settings.mean_mechanism == "clip":
        return None
    from stream_dp.dp.mechanisms import get_mean_mechanism

    params = {"delta": settings.delta} if settings.mean_mechanism == "cummings" else {}
    return get_mean_mechanism(settings.mean_mechanism, **params)


def _cell_data(
    columns: WindowColumns, entry_of: np.ndarray, kept_count: np.ndarray, entries: range
) -> Any:
    from stream_dp.dp.mechanisms import CellData

    chosen = entry_of[entries.start : entries.stop]
    return CellData(
        counts=columns.count[chosen],
        sums=columns.total[chosen],
        sumsqs=columns.total_sq[chosen],
        prefixes=tuple(np.array(columns.prefixes[i]) for i in chosen.tolist()),
        kept_counts=np.asarray(kept_count[entries.start : entries.stop], dtype=np.int64),
    )


def _summary(
    settings: Settings,
    base: dict[str, Any],
    window_start: int,
    clip: ClipUserResult | None,
    capped: PseudoUserResult | None,
    cells_released: int,
    columns: WindowColumns,
) -> dict[str, Any]:
    eps = settings.epsilon
    g1 = clip.g1 if clip else 0
    k = clip.k if clip else 0
    return {
        **base,
        "type": "window",
        "release_id": release_id(settings.app_id, window_start, settings.resolution, "*"),
        "G1": g1,
        "K": k,
        "privacy_loss": k * eps,
        "privacy_loss_unclipped": g1 * eps,
        "error_bound": float(clip.error_bound) if clip else 0.0,
        "max_error": float(np.max(capped.error)) if capped is not None else 0.0,
        "cells_released": cells_released,
        "cells_observed": len(columns.cell_names),
        "n_vehicles": len(columns.vehicle_names),
        "n_readings": int(columns.count.sum()),
        "suppressed_pairs": clip.n_suppressed if clip else 0,
        "mechanism": settings.mean_mechanism,
        "delta": settings.delta if settings.mean_mechanism == "cummings" else 0.0,
    }
