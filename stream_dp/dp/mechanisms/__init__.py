"""Per-cell user-level DP mean mechanisms, selectable by name (``--mean-mechanism NAME``).

``get_mean_mechanism(name, **params)`` builds one; ``MEAN_MECHANISMS`` is the one registry
(:mod:`stream_dp.dp.mechanism_specs`): every name's spec. Every mechanism has
``release(cell, upper, epsilon, source) -> MeanRelease`` with ``epsilon`` the mean's share of
the cell budget (the caller passes eps/2).

Exact with aggregates (count, sum) only: clip (when nothing is partially clipped),
baseline, akmv, and every array-based mechanism and worst-case-optimal with the default
``fill="user-mean"``. Otherwise see each mechanism's ``prefix_needed``.
"""

from __future__ import annotations

from typing import Any

from stream_dp.dp.mechanism_specs import (
    DEFAULT_MEAN_MECHANISM,
    MEAN_MECHANISMS,
    mechanism_spec,
)
from stream_dp.dp.mechanisms.base import (
    CellData,
    InsufficientPrefixError,
    MeanMechanism,
    MeanRelease,
)

__all__ = [
    "DEFAULT_MEAN_MECHANISM",
    "MEAN_MECHANISMS",
    "CellData",
    "InsufficientPrefixError",
    "MeanMechanism",
    "MeanRelease",
    "get_mean_mechanism",
]


def get_mean_mechanism(name: str, /, **params: Any) -> MeanMechanism:
    """The mechanism ``name`` configured by ``params``; ValueError naming what is wrong."""
    mechanism: MeanMechanism = mechanism_spec(name).build(**params)
    return mechanism
