"""CLIP-USER (Algorithm 1 of the composition paper, Sec. V-B1), as specified in docs/math.md §5.

Suppress whole ``(cell, vehicle)`` contributions of the vehicles that occupy the most cells,
stage by stage, while every cell's worst-case error (eq. 13) stays ``<= E``. The composed release
is then ``K * eps``-DP (Prop. V.1).

Per cell we keep ``M``, ``S`` and its entries sorted by count (descending) with the positions of
the first three kept ones, so "largest kept count without vehicle ``l``" is O(1) and a candidate
``E_g(l)`` is O(1) (no grid is recomputed from scratch). :class:`ClipUserRun`
(:mod:`stream_dp.dp.clip_user_run`) builds that state; :data:`stream_dp.dp.kernels.CLIP_USER`
runs the exact sequential algorithm over it as one numba kernel
(:mod:`stream_dp.dp.clip_user_kernel`) or, in a process without numba on one window's
occupancy, by the uncompiled schemes of :mod:`stream_dp.dp.clip_user_rounds` (batched numpy
rounds and a plain Python loop over the same state); the tests check that they, and the
plain transcription ``tests/support/clip_user_reference.py``, give identical results.
"""

from __future__ import annotations

from stream_dp.dp import kernels
from stream_dp.dp.clip_user_run import HALT_RTOL, ClipUserResult, ClipUserRun, cell_errors
from stream_dp.dp.grid_error import ErrorModel
from stream_dp.dp.occupancy import Occupancy

__all__ = ["HALT_RTOL", "ClipUserResult", "ClipUserRun", "cell_errors", "clip_user"]


def clip_user(
    occupancy: Occupancy,
    upper: float,
    epsilon: float,
    error_bound: float | None = None,
    *,
    model: ErrorModel | None = None,
) -> ClipUserResult:
    """Run CLIP-USER (Algorithm 1; docs/math.md §5.1).

    ``E = error_bound`` if given (footnote 3), else the largest initial cell error (eq. 12).
    Stages take the vehicles with ``G_l == max G`` in ascending id; each suppresses itself in
    the cell minimising ``E_g(l)`` (eq. 13; ties to the smallest cell id) unless that exceeds
    ``E``, which halts. A cell's last kept vehicle is never suppressed (its error is +inf).
    ``model``: the error function (default eq. 13 with ``eps/2`` per statistic; see
    :class:`~stream_dp.dp.grid_error.ErrorModel`).
    """
    clip_user_by = kernels.CLIP_USER.pick(occupancy.n_entries)
    return clip_user_by(occupancy, upper, epsilon, error_bound, model)  # type: ignore[no-any-return]
