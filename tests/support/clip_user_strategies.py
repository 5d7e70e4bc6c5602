"""CLIP-USER evaluated by each of its schemes, for the tests and the benchmarks: the package's
compiled kernel (:func:`stream_dp.dp.clip_user_kernel.run_stages`) and the uncompiled schemes of
:mod:`stream_dp.dp.clip_user_rounds` (``"numpy"``, which the package runs without numba, and
its two parts ``"batched"`` and ``"sequential"``) over the same state, so the tests can check
that every scheme gives identical results (and the benchmarks can time them).
:mod:`.clip_user_reference` is the plain transcription.
"""

from __future__ import annotations

from typing import Literal, get_args

from stream_dp.dp.clip_user import ClipUserResult
from stream_dp.dp.clip_user_kernel import run_stages
from stream_dp.dp.clip_user_rounds import UncompiledRun
from stream_dp.dp.grid_error import ErrorModel
from stream_dp.dp.occupancy import Occupancy

Strategy = Literal["compiled", "numpy", "batched", "sequential"]
#: Every strategy, the package's first.
STRATEGIES: tuple[Strategy, ...] = get_args(Strategy)


def clip_user_with(
    occupancy: Occupancy,
    upper: float,
    epsilon: float,
    error_bound: float | None = None,
    *,
    strategy: Strategy,
    model: ErrorModel | None = None,
) -> ClipUserResult:
    """:func:`stream_dp.dp.clip_user.clip_user` evaluated by ``strategy`` (identical results)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}")
    run = UncompiledRun(occupancy, upper, epsilon, error_bound, model)
    if strategy == "compiled":
        run_stages(run)
    else:
        run.run_strategy(strategy)
    return run.result()
