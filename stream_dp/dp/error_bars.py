"""Error bars in the units of the data: per-cell ``mean_error`` and ``variance_error``.

A cell's release is the clipped mean (and, with a variance share, the clipped variance) plus
Laplace noise. Against the mean of *all* the cell's readings (clamped to ``[0, U]``) the error
is at most the worst-case clipping bias (Thm IV.1 / IV.2 of the composition paper, with the
kept counts actually used, after CLIP-USER and the pseudo-user cap) plus the noise. For
``Lap(b)``, ``P(|noise| > b ln 20) = exp(-ln 20) = 0.05``, so

    mean_error     = U (1 - S/M)            + ln(20) * D_mu  / eps_mean
    variance_error = bias_var(S, M)          + ln(20) * D_var / eps_var

hold with probability >= 0.95 each, for every dataset with that occupancy (data-independent;
the post-noise clamp into ``[0, U]`` / ``[0, U^2/4]`` only moves a value towards the truth).
Both depend on the public occupancy only.

:func:`combined_error` is the per-cell error CLIP-USER and the pseudo-user cap minimise, eq. (13)
generalised by :class:`~stream_dp.dp.grid_error.ErrorModel` (docs/math.md §12.3): ``q = 1``
(expected noise) or ``q = ln 20`` (the released quantities' own 95 % bounds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from stream_dp.dp.grid_error import (
    ErrorModel,
    grid_error,
    mean_bias,
    mean_sensitivity,
    variance_bias,
    variance_sensitivity,
)
from stream_dp.dp.mechanism_specs import mechanism_spec

FloatArray = NDArray[np.float64]

#: ``b ln 20`` is the 95 % quantile of ``|Lap(b)|``.
LN20 = math.log(20.0)
#: Relative slack for the float-safe sampler (its grid is 2^-40 of the scale, see noise.py).
SAMPLER_RTOL = 1e-9


def mean_error(
    upper: float, mean_epsilon: float, top: ArrayLike, kept: ArrayLike, total: ArrayLike
) -> FloatArray:
    """95 % bound on |released mean - mean of all readings|: Thm IV.1 bias + ``ln 20 b``.

    ``top``/``kept``: the largest and summed kept counts after CLIP-USER and the cap;
    ``total``: all readings of the cell. +inf where nothing is kept."""
    kept_i = np.asarray(kept, dtype=np.int64)
    safe = np.where(kept_i > 0, kept_i, 1)
    scale = mean_sensitivity(upper, top, safe) / mean_epsilon
    bound = mean_bias(upper, safe, total) + LN20 * scale * (1.0 + SAMPLER_RTOL)
    return np.where(kept_i > 0, bound, np.inf).astype(np.float64)


def variance_error(
    upper: float, variance_epsilon: float, top: ArrayLike, kept: ArrayLike, total: ArrayLike
) -> FloatArray:
    """95 % bound on |released variance - variance of all readings| (units U^2): Thm IV.2
    bias (corrected, docs/math.md §10.1) + ``ln 20 b``; +inf where nothing is kept."""
    kept_i = np.asarray(kept, dtype=np.int64)
    safe = np.where(kept_i > 0, kept_i, 1)
    scale = variance_sensitivity(upper, top, safe) / variance_epsilon
    bound = variance_bias(upper, safe, total) + LN20 * scale * (1.0 + SAMPLER_RTOL)
    return np.where(kept_i > 0, bound, np.inf).astype(np.float64)


def mechanism_mean_error(
    mechanism: str,
    parameters: Mapping[str, Any],
    worst_case_error: float | None,
    sensitivity: float | None,
    upper: float,
    participant_readings: int,
    total_readings: int,
) -> float | None:
    """``mean_error`` of a configured mean mechanism's release (None: no known bound).

    The mechanism reports its worst-case bias against its participants' readings (``clip``:
    against all of the cell's readings already); the vehicles CLIP-USER suppressed add at most
    ``U (1 - P/M)`` (Thm IV.1 with ``P`` participant readings; triangle inequality). The noise
    part is ``ln 20`` times the scale actually used (``noise_scale``)."""
    if worst_case_error is None or sensitivity is None:
        return None
    mean_eps = float(parameters["mean_epsilon"])
    bias = max(float(worst_case_error) - float(sensitivity) / mean_eps, 0.0)
    if not mechanism_spec(mechanism).window_combiner:  # its bias is against participants
        bias += float(mean_bias(upper, participant_readings, total_readings))
    scale = float(parameters.get("noise_scale", sensitivity / mean_eps))
    return bias + LN20 * scale * (1.0 + SAMPLER_RTOL)


def combined_error(model: ErrorModel, upper: float, top: ArrayLike, kept: ArrayLike,
                   total: ArrayLike) -> FloatArray:  # fmt: skip
    """The model's per-cell error (what CLIP-USER bounds): +inf where nothing is kept."""
    return grid_error(upper, model.mean_epsilon, top, kept, total, model=model)
