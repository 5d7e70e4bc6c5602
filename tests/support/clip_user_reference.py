"""A deliberately plain transcription of CLIP-USER (Algorithm 1, docs/math.md §5.1).

Everything is recomputed from scratch with dicts; every candidate evaluates eq. (13) from its
four terms (:func:`paper_error`).
Used as the oracle for ``stream_dp.dp.clip_user`` and as the benchmark baseline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stream_dp.dp.grid_error import mean_bias, mean_sensitivity, variance_bias, variance_sensitivity


def paper_error(upper: float, epsilon: float, top: int, kept: int, total: int) -> float:
    """Eq. (13) as the paper writes it, from its four terms (eq. 9, Prop. III.1, Thm IV.1,
    Thm IV.2 corrected) with ``eps/2`` each: independent of the package's one scalar
    ``cell_error``, which the compiled path runs; +inf when nothing is kept."""
    if kept == 0:
        return math.inf
    return float(
        mean_bias(upper, kept, total)
        + variance_bias(upper, kept, total)
        + 2.0 * mean_sensitivity(upper, top, kept) / epsilon
        + 2.0 * variance_sensitivity(upper, top, kept) / epsilon
    )


@dataclass(frozen=True)
class ReferenceResult:
    k: int
    g1: int
    error_bound: float
    suppressed: list[tuple[str, str]]
    kept: dict[tuple[str, str], bool]
    initial_error: dict[str, float]
    error: dict[str, float]


def reference_clip_user(
    counts: dict[tuple[str, str], int],
    upper: float,
    epsilon: float,
    error_bound: float | None = None,
) -> ReferenceResult:
    """``counts[(cell, vehicle)] = m > 0``. Returns K, the suppressions in order, the kept flags."""
    cells = sorted({cell for cell, _ in counts})
    vehicles = sorted({vehicle for _, vehicle in counts})
    members = {cell: [v for v in vehicles if (cell, v) in counts] for cell in cells}
    gamma = dict(counts)  # kept readings; 0 once suppressed

    def cell_error(cell: str) -> float:
        kept = [gamma[(cell, v)] for v in members[cell]]
        total = sum(counts[(cell, v)] for v in members[cell])
        return paper_error(upper, epsilon, max(kept), sum(kept), total)

    def grids_of(vehicle: str) -> int:
        return sum(1 for cell in cells if gamma.get((cell, vehicle), 0) > 0)

    initial = {cell: cell_error(cell) for cell in cells}
    bound = error_bound if error_bound is not None else max(initial.values(), default=0.0)
    g1 = max((grids_of(v) for v in vehicles), default=0)
    suppressed: list[tuple[str, str]] = []
    halted = False
    while not halted:
        gmax = max((grids_of(v) for v in vehicles), default=0)
        if gmax <= 1:
            break
        stage = [v for v in vehicles if grids_of(v) == gmax]
        for vehicle in stage:
            best_value: float = math.inf
            best_cell: str | None = None
            for cell in cells:
                if gamma.get((cell, vehicle), 0) == 0:
                    continue
                gamma[(cell, vehicle)] = 0  # Algorithm 1 line 9
                value = cell_error(cell)
                gamma[(cell, vehicle)] = counts[(cell, vehicle)]  # lines 14/17: restore
                if best_cell is None or value < best_value:
                    best_value, best_cell = value, cell
            if best_cell is None or math.isinf(best_value) or best_value > bound * (1.0 + 1e-12):
                halted = True
                break
            gamma[(best_cell, vehicle)] = 0
            suppressed.append((best_cell, vehicle))
    return ReferenceResult(
        k=max((grids_of(v) for v in vehicles), default=0),
        g1=g1,
        error_bound=bound,
        suppressed=suppressed,
        kept={key: gamma[key] > 0 for key in counts},
        initial_error=initial,
        error={cell: cell_error(cell) for cell in cells},
    )
