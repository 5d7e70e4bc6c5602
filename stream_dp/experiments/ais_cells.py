"""The busiest hexagon-hours of the bundled AIS sample, and PipelineDP's mean on them.

A cell is (H3 cell at ``resolution``, UTC hour); its vehicles are sorted by id, each with
its speeds in event-time order, clamped to [0, U] (``Dataset`` clamps). The busiest cells
are those with the most readings (ties: cell id, then hour).

PipelineDP (``pipeline_dp``, an outside implementation) is run as the baseline "plain
user-level DP mean": MEAN with Laplace noise, bounds [0, U], LocalBackend, the cell as its
one public partition, ``max_partitions_contributed = 1`` and
``max_contributions_per_partition`` = the cell's median count (PipelineDP samples that many
readings of each vehicle and splits eps between its noisy count and noisy normalised sum).
All runs are computed in one aggregation: run r is partition r, and the privacy unit is
(vehicle, run), so each run sees one copy of the cell with the whole eps. PipelineDP draws
its noise from PyDP's secure generator, which cannot be seeded: its numbers are not
reproducible run to run (they are written to their own CSV).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stream_dp.experiments.mae import Dataset


@dataclass(frozen=True)
class AisCell:
    """One hexagon-hour: its key and per-vehicle speeds (vehicles sorted by id)."""

    hexagon: str
    hour: int
    vehicle_ids: tuple[str, ...]
    speeds: tuple[np.ndarray, ...]

    @property
    def name(self) -> str:
        """``<h3 cell>@<hour start, unix seconds>``."""
        return f"{self.hexagon}@{self.hour * 3600}"

    def dataset(self, upper: float) -> Dataset:
        """The cell as a fixed dataset for the MAE runs."""
        return Dataset(self.name, self.speeds, upper)

    def median_count(self) -> int:
        """The median of the per-vehicle counts (the lower one for an even number)."""
        counts = sorted(s.size for s in self.speeds)
        return int(counts[(len(counts) - 1) // 2])


def busiest_cells(readings: Sequence[dict], resolution: int, top: int) -> list[AisCell]:
    """The ``top`` hexagon-hours with the most readings."""
    import h3

    cells: dict[tuple[str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in readings:
        key = (h3.latlng_to_cell(r["lat"], r["lon"], resolution), math.floor(r["ts"] / 3600))
        cells[key][str(r["vehicle_id"])].append(float(r["speed"]))
    ranked = sorted(cells.items(), key=lambda kv: (-sum(map(len, kv[1].values())), kv[0]))
    out = []
    for (hexagon, hour), vehicles in ranked[:top]:
        ids = tuple(sorted(vehicles))
        speeds = tuple(np.asarray(vehicles[v], dtype=np.float64) for v in ids)
        out.append(AisCell(hexagon, hour, ids, speeds))
    return out


def pipelinedp_available() -> bool:
    """Whether ``pipeline_dp`` can be imported."""
    try:
        import pipeline_dp  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class PipelineDpPoint:
    """PipelineDP's MAE on one cell at one epsilon."""

    dataset: str
    epsilon: float
    runs: int
    max_contributions_per_partition: int
    mae: float
    mae_se: float


def pipelinedp_point(cell: AisCell, upper: float, epsilon: float, runs: int) -> PipelineDpPoint:
    """MAE (and its standard error) of PipelineDP's mean over ``runs`` runs, clamped to [0, U]."""
    from stream_dp.experiments.pipeline_dp_baseline import pipeline_dp_aggregate

    rows = [
        ((vehicle, run), run, min(max(float(s), 0.0), upper))
        for run in range(runs)
        for vehicle, speeds in zip(cell.vehicle_ids, cell.speeds, strict=True)
        for s in speeds.tolist()
    ]
    result = pipeline_dp_aggregate(
        rows, 1, cell.median_count(), epsilon, upper, list(range(runs)), with_variance=False
    )
    means = np.array([min(max(m.mean, 0.0), upper) for _, m in result])
    errors = np.abs(means - cell.dataset(upper).true_mean)
    spread = float(errors.std(ddof=1)) if runs > 1 else math.nan
    return PipelineDpPoint(
        dataset=cell.name,
        epsilon=float(epsilon),
        runs=runs,
        max_contributions_per_partition=cell.median_count(),
        mae=float(errors.mean()),
        mae_se=spread / math.sqrt(runs),
    )
