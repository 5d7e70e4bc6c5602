"""The colour scale of released means, shared by the live map and ``stream-dp map``.

Viridis (perceptually uniform, readable in greyscale and by most colour-blind viewers),
sampled at 11 evenly spaced stops and interpolated linearly in between; the domain is the
public range [0, U] of a released mean, so colours compare across windows.
"""

from __future__ import annotations

#: matplotlib's viridis at 0, 0.1, ..., 1.
VIRIDIS_STOPS: tuple[str, ...] = (
    "#440154", "#482475", "#414487", "#355f8d", "#2a788e", "#21918c",
    "#22a884", "#44bf70", "#7ad151", "#bddf26", "#fde725",
)  # fmt: skip

#: Unit of the readings (and so of U and of a released mean).
UNITS = "km/h"

#: A cell's fill opacity without a known ``mean_error``, and at ``mean_error >= U/4``.
OPACITY_CERTAIN = 0.85
OPACITY_UNCERTAIN = 0.2


def error_opacity(mean_error: float | None, upper: float) -> float:
    """Fill opacity showing a cell's uncertainty: it fades linearly as ``mean_error`` grows
    to U/4 (the page's ``opacityOf`` computes the same)."""
    if mean_error is None:
        return OPACITY_CERTAIN
    fraction = min(1.0, max(0.0, mean_error) / (upper / 4))
    return OPACITY_CERTAIN - (OPACITY_CERTAIN - OPACITY_UNCERTAIN) * fraction
