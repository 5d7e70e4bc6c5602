"""Synthetic occupancy arrays: the paper's heavy-hitter model (Sec. VI-A2) and a city-scale one.

Ids are zero-padded decimal strings, so ascending string order (the CLIP-USER tie-break order)
equals the numeric order of the paper's user and grid indices.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp.occupancy import Occupancy


def _ids(n: int) -> list[str]:
    width = len(str(max(n, 1)))
    return [str(i).zfill(width) for i in range(n)]


def _scale_heavy_hitters(
    cell_idx: NDArray[np.int64], counts: NDArray[np.int64], gamma: float
) -> NDArray[np.int64]:
    """Step iii: per cell, one argmax entry (the first one) gets ``m <- (1 + gamma) m``."""
    order = np.lexsort((-counts, cell_idx))  # by cell, then count descending (stable)
    sorted_cells = cell_idx[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = sorted_cells[1:] != sorted_cells[:-1]
    heavy = order[first]
    scaled = counts.copy()
    scaled[heavy] = np.rint((1.0 + gamma) * counts[heavy]).astype(np.int64)
    return np.maximum(scaled, counts)


def paper_synthetic_occupancy(
    rng: np.random.Generator,
    gamma: float,
    q: float = 0.01,
    n_cells: int = 12,
    n_bits: int = 12,
) -> Occupancy:
    """The synthetic dataset of the composition paper, Sec. VI-A2.

    ``L = 2^n_bits - 1`` users; user ``l`` in ``[2^j, 2^(j+1) - 1]`` occupies ``n_cells - j``
    cells (clamped to ``[1, n_cells]``) drawn uniformly without replacement; each count is
    ``Geo(q)`` on ``{1, 2, ...}``; per cell one argmax user is scaled by ``(1 + gamma)``.
    User ``l`` gets the id ``str(l)`` zero-padded, cells ``str(g)`` zero-padded.
    """
    n_users = 2**n_bits - 1
    cell_ids = _ids(n_cells)
    width = len(str(n_users))
    cells: list[int] = []
    users: list[int] = []
    for user in range(1, n_users + 1):
        j = user.bit_length() - 1
        k = min(max(n_cells - j, 1), n_cells)
        chosen = rng.choice(n_cells, size=k, replace=False)
        cells.extend(int(c) for c in chosen)
        users.extend([user] * k)
    cell_idx = np.asarray(cells, dtype=np.int64)
    counts = rng.geometric(q, size=len(cells)).astype(np.int64)
    counts = _scale_heavy_hitters(cell_idx, counts, gamma)
    return Occupancy.from_arrays(
        [cell_ids[c] for c in cells], [str(u).zfill(width) for u in users], counts.tolist()
    )


def city_occupancy(
    rng: np.random.Generator,
    n_vehicles: int,
    n_cells: int,
    cells_per_vehicle: float,
    q: float,
    gamma: float = 3.0,
) -> Occupancy:
    """A city-scale occupancy: ``1 + Poisson(cells_per_vehicle - 1)`` uniform cells per vehicle
    (duplicates merged), ``Geo(q)`` counts, one heavy hitter per cell scaled by ``(1 + gamma)``.
    """
    per_vehicle = 1 + rng.poisson(max(cells_per_vehicle - 1.0, 0.0), size=n_vehicles)
    per_vehicle = np.minimum(per_vehicle, n_cells)
    vehicle = np.repeat(np.arange(n_vehicles, dtype=np.int64), per_vehicle)
    cell = rng.integers(0, n_cells, size=len(vehicle), dtype=np.int64)
    key = np.unique(vehicle * n_cells + cell)
    vehicle, cell = key // n_cells, key % n_cells
    counts = rng.geometric(q, size=len(key)).astype(np.int64)
    counts = _scale_heavy_hitters(cell, counts, gamma)
    cell_ids = np.asarray(_ids(n_cells), dtype=object)
    vehicle_ids = np.asarray(_ids(n_vehicles), dtype=object)
    return Occupancy.from_arrays(cell_ids[cell], vehicle_ids[vehicle], counts)
