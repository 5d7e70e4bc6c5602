"""Laplace thresholding: which cells a release may show without the true occupancy
(docs/math.md §14.4; Korolova et al. 2009, Desfontaines et al. 2022 for the approach).

A cell is shown only if its noisy vehicle count reaches the threshold ``T``. A vehicle
touches at most ``L0`` cells; a cell that only it touched has count 1, so it is shown with
probability ``P(Z >= T - 1)``. ``T`` is the least grid value with ``L0 P(Z >= T - 1) <=
delta``: whatever the vehicle's cells, the chance that any cell reveals it alone is at
most ``delta``.
"""

from __future__ import annotations

from fractions import Fraction

from stream_dp.dp.laplace_tails import tail_width


def threshold_steps(one_vehicle_steps: int, contribution_cells: int, delta: float,
                    scale: Fraction) -> int:  # fmt: skip
    """``T`` in count steps: one vehicle's count (``one_vehicle_steps``) plus the tail width
    at ``delta / L0`` of discrete Laplace noise of ``scale`` steps."""
    if contribution_cells < 1:
        raise ValueError(f"contribution_cells must be >= 1, got {contribution_cells}")
    return one_vehicle_steps + tail_width(delta / contribution_cells, scale)
