"""Names of the per-cell mean mechanisms the release step can use.

``clip`` (the composition paper's CLIP mean) is built in; the others come from
``stream_dp.dp.mechanisms`` when that package is present.
"""

from __future__ import annotations


def known_mean_mechanisms() -> set[str]:
    names = {"clip"}
    try:
        from stream_dp.dp.mechanisms import MEAN_MECHANISMS
    except ImportError:
        return names
    return names | set(MEAN_MECHANISMS)
