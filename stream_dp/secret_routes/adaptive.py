"""Adaptive resolution of a secret-routes window (docs/math.md §14.10): pure.

The coarse level first: each vehicle's pairs lifted to their parents at ``coarse_resolution``,
``L0`` of them kept, released by partition selection (§14.4). Then the fine level, only under
the shown coarse cells whose noisy count reaches the fine cut: their children are the
candidates (a function of released noisy counts and public parameters), each vehicle keeps
``L0`` of its pairs among them, every candidate gets a noisy count (an empty one too) and is
shown when it reaches the cut. Every vehicle pays both levels' epsilon, wherever it was.
"""

from __future__ import annotations

import h3
import numpy as np

from stream_dp.dp.contribution_bound import bounded_cells
from stream_dp.dp.randomness import RandomSource
from stream_dp.dp.secret_accounting import COUNT_STEPS, SUM_STEPS
from stream_dp.secret_routes.levels import by_parent, noisy_counts, shown_cells
from stream_dp.secret_routes.params import SecretRoutesParams
from stream_dp.secret_routes.records import ReleasedCells
from stream_dp.windows.columns import WindowColumns


def adaptive_levels(columns: WindowColumns, params: SecretRoutesParams,
                    source: RandomSource) -> list[ReleasedCells]:  # fmt: skip
    """The coarse level, then the fine one under the split coarse cells."""
    assert params.coarse_resolution is not None  # params.adaptive says so
    coarse = coarse_level(columns, params, source, params.coarse_resolution)
    candidates = split_children(coarse, params.fine_cut, params.resolution)
    return [coarse, candidate_level(columns, candidates, params, source)]


def coarse_level(columns: WindowColumns, params: SecretRoutesParams, source: RandomSource,
                 resolution: int) -> ReleasedCells:  # fmt: skip
    """Each vehicle's pairs by parent, ``L0`` kept, thresholded (§14.2, §14.4)."""
    names, vehicle, cell, count, total = by_parent(
        columns.cell_names, columns.vehicle_code, columns.cell_code, columns.count,
        columns.total, resolution,
    )  # fmt: skip
    bounded = bounded_cells(vehicle, cell, count, total, params.upper,
                            params.contribution_cells, SUM_STEPS)  # fmt: skip
    cells = [names[i] for i in bounded.cell.tolist()]
    return shown_cells(cells, noisy_counts(bounded.vehicles, params, source),
                       bounded.sum_steps, params.threshold, params, source,
                       resolution)  # fmt: skip


def split_children(coarse: ReleasedCells, cut_steps: int, resolution: int) -> tuple[str, ...]:
    """The fine candidates: the children at ``resolution`` of the shown coarse cells whose
    noisy count reaches ``cut_steps`` (count steps), sorted (the public cell order)."""
    steps = np.rint(np.asarray(coarse.count) * COUNT_STEPS).astype(np.int64)
    split = [name for name, s in zip(coarse.names, steps.tolist(), strict=True) if s >= cut_steps]
    return tuple(sorted(c for name in split for c in h3.cell_to_children(name, resolution)))


def candidate_level(columns: WindowColumns, candidates: tuple[str, ...],
                    params: SecretRoutesParams, source: RandomSource) -> ReleasedCells:  # fmt: skip
    """The fine level on public candidates: each vehicle's ``L0`` pairs among them, a noisy
    count for every candidate, shown at the cut (post-processing, no selection, §14.10)."""
    index = {name: i for i, name in enumerate(candidates)}
    where = np.array([index.get(name, -1) for name in columns.cell_names], dtype=np.int64)
    candidate = where[columns.cell_code] if len(columns) else np.zeros(0, dtype=np.int64)
    inside = candidate >= 0
    bounded = bounded_cells(columns.vehicle_code[inside], candidate[inside],
                            columns.count[inside], columns.total[inside], params.upper,
                            params.contribution_cells, SUM_STEPS)  # fmt: skip
    vehicles = np.zeros(len(candidates), dtype=np.int64)
    sums = np.zeros(len(candidates), dtype=np.int64)
    vehicles[bounded.cell] = bounded.vehicles
    sums[bounded.cell] = bounded.sum_steps
    return shown_cells(list(candidates), noisy_counts(vehicles, params, source), sums,
                       params.fine_cut, params, source, params.resolution)  # fmt: skip
