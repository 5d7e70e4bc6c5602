"""Per-cell user-level DP mean mechanisms, selectable by name (``--mean-mechanism NAME``).

``get_mean_mechanism(name, **params)`` builds one; ``MEAN_MECHANISMS`` maps every name to
its factory. Every mechanism has ``release(cell, upper, epsilon, source) -> MeanRelease``
with ``epsilon`` the mean's share of the cell budget (the caller passes eps/2).

Exact with aggregates (count, sum) only: clip (when nothing is partially clipped),
baseline, akmv, and every array-based mechanism and worst-case-optimal with the default
``fill="user-mean"``. Otherwise see each mechanism's ``prefix_needed``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from stream_dp.dp.mechanisms.akmv import AkmvMean
from stream_dp.dp.mechanisms.array_averaging import ArrayAveraging
from stream_dp.dp.mechanisms.base import (
    CellData,
    InsufficientPrefixError,
    MeanMechanism,
    MeanRelease,
)
from stream_dp.dp.mechanisms.baseline import BaselineMean
from stream_dp.dp.mechanisms.clip import ClipMean
from stream_dp.dp.mechanisms.cummings import CummingsMean
from stream_dp.dp.mechanisms.levy import LevyMean
from stream_dp.dp.mechanisms.quantile import QuantileMean
from stream_dp.dp.mechanisms.worst_case_optimal import WorstCaseOptimalMean

__all__ = [
    "DEFAULT_MEAN_MECHANISM",
    "MEAN_MECHANISMS",
    "CellData",
    "InsufficientPrefixError",
    "MeanMechanism",
    "MeanRelease",
    "get_mean_mechanism",
]

DEFAULT_MEAN_MECHANISM = "clip"

MEAN_MECHANISMS: dict[str, Callable[..., MeanMechanism]] = {
    "clip": ClipMean,
    "baseline": BaselineMean,
    "array-averaging-wrap": partial(
        ArrayAveraging, grouping="wraparound", name="array-averaging-wrap"
    ),
    "array-averaging-bestfit": partial(
        ArrayAveraging, grouping="bestfit", name="array-averaging-bestfit"
    ),
    "levy": LevyMean,
    "quantile-fixed": partial(QuantileMean, variant="fixed", name="quantile-fixed"),
    "quantile-optimized": partial(QuantileMean, variant="optimized", name="quantile-optimized"),
    "opt-array-averaging": partial(
        ArrayAveraging, grouping="bestfit", m_ub="opt", name="opt-array-averaging"
    ),
    "opt-array-averaging-surrogate": partial(
        ArrayAveraging, grouping="bestfit", m_ub="surrogate", name="opt-array-averaging-surrogate"
    ),
    "worst-case-optimal": WorstCaseOptimalMean,
    "akmv": AkmvMean,
    "cummings": CummingsMean,
}


def get_mean_mechanism(name: str, /, **params: Any) -> MeanMechanism:
    """The mechanism ``name`` configured by ``params``; ValueError naming what is wrong."""
    try:
        factory = MEAN_MECHANISMS[name]
    except KeyError:
        known = ", ".join(sorted(MEAN_MECHANISMS))
        raise ValueError(f"unknown mean mechanism {name!r}; known: {known}") from None
    preset = set(factory.keywords) if isinstance(factory, partial) else set()
    fixed = sorted((preset | {"name"}) & set(params))
    if fixed:
        raise ValueError(f"{name}: {fixed} fixed by the mechanism's name")
    try:
        return factory(**params)
    except TypeError as exc:
        raise ValueError(f"{name}: bad parameters {sorted(params)}: {exc}") from None
