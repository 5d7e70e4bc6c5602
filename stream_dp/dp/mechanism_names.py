"""Names of the per-cell mean mechanisms the release step can use.

Listed here without importing the mechanisms (and their compiled kernels), so that the
command line and the settings validate a name at once; a test keeps this list equal to the
registry `stream_dp.dp.mechanisms.MEAN_MECHANISMS`.
"""

from __future__ import annotations

DEFAULT_MEAN_MECHANISM = "clip"

MEAN_MECHANISM_NAMES: tuple[str, ...] = (
    "clip",
    "baseline",
    "array-averaging-wrap",
    "array-averaging-bestfit",
    "levy",
    "quantile-fixed",
    "quantile-optimized",
    "opt-array-averaging",
    "opt-array-averaging-surrogate",
    "worst-case-optimal",
    "akmv",
    "cummings",
)


def known_mean_mechanisms() -> set[str]:
    return set(MEAN_MECHANISM_NAMES)
