"""001 Sec. IV-C: worst-case error of the optimal strategy (Thm III.1) against AKMV.

Collections of counts (001 Sec. IV-B):

* geometric: for i = 0..M, 2^i users with 2^(M-i) readings each (M = 6: L = 127,
  sum m = 448, m^* = 64);
* extreme-valued: L - 1 users with one reading and one with m^* (L = 101, m^* = 10, the
  sizes 001 uses for its Fig. 3; its Fig. 1 does not state them).

The worst-case dataset has every reading equal to U (remark after 001 Lemma III.1).
``E_OPT`` is the closed form the mechanism reports (``worst_case_error``, eq. (12) with
the errata noted in ``worst_case_optimal``); ``E_AKMV`` is 001's Monte-Carlo estimate
``E[(sum_l max(0, U m_l - T) + T / (eps/2)) / sum m]`` over the private threshold T
drawn by AKMV on the worst-case dataset.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from stream_dp.dp.mechanisms import CellData, get_mean_mechanism
from stream_dp.dp.randomness import RandomSource
from stream_dp.experiments.fast_samplers import akmv_threshold_sampler
from stream_dp.experiments.itms_synthetic import UPPER
from stream_dp.experiments.mae import derived_seed

IntArray = NDArray[np.int64]


def geometric_counts(levels: int = 6) -> IntArray:
    """2^i users with 2^(M-i) readings, i = 0..M (descending counts)."""
    return np.concatenate(
        [np.full(2**i, 2 ** (levels - i), dtype=np.int64) for i in range(levels + 1)]
    )


def extreme_counts(n_users: int = 101, top: int = 10) -> IntArray:
    """One user with ``top`` readings, ``n_users - 1`` users with one."""
    return np.concatenate([[top], np.ones(n_users - 1, dtype=np.int64)]).astype(np.int64)


COLLECTIONS = {"geometric": geometric_counts, "extreme-valued": extreme_counts}


def worst_case_cell(counts: IntArray, upper: float = UPPER) -> CellData:
    """Every reading equal to U (aggregates only)."""
    counts = np.asarray(counts, dtype=np.int64)
    return CellData(
        counts=counts,
        sums=upper * counts.astype(np.float64),
        sumsqs=upper**2 * counts.astype(np.float64),
        prefixes=tuple(np.empty(0) for _ in counts.tolist()),
    )


def akmv_error_given_threshold(
    counts: IntArray, upper: float, epsilon: float, threshold: float
) -> float:
    """001's integrand: ``(sum_l max(0, U m_l - T) + T / (eps/2)) / sum m``."""
    excess = np.maximum(0.0, upper * counts - threshold).sum()
    return float((excess + threshold / (epsilon / 2)) / counts.sum())


@dataclass(frozen=True)
class WorstCasePoint:
    """E_OPT and the Monte-Carlo E_AKMV of one collection at one epsilon."""

    collection: str
    epsilon: float
    vehicles: int
    readings: int
    e_opt: float
    e_akmv: float
    e_akmv_se: float
    runs: int


def worst_case_point(
    collection: str, epsilon: float, runs: int, seed: int, upper: float = UPPER
) -> WorstCasePoint:
    """Both worst-case errors for ``collection`` at ``epsilon``."""
    counts = COLLECTIONS[collection]()
    cell = worst_case_cell(counts, upper)
    source = RandomSource.seeded_for_tests(derived_seed(seed, "wc001", collection, epsilon))
    optimal = get_mean_mechanism("worst-case-optimal").release(cell, upper, epsilon, source)
    if optimal.worst_case_error is None:
        raise RuntimeError("worst-case-optimal reported no worst-case error")
    threshold_of = akmv_threshold_sampler(cell, upper, epsilon)
    errors = np.array(
        [
            akmv_error_given_threshold(counts, upper, epsilon, threshold_of(source))
            for _ in range(runs)
        ]
    )
    spread = float(errors.std(ddof=1)) if runs > 1 else math.nan
    return WorstCasePoint(
        collection=collection,
        epsilon=float(epsilon),
        vehicles=int(counts.size),
        readings=int(counts.sum()),
        e_opt=optimal.worst_case_error,
        e_akmv=float(errors.mean()),
        e_akmv_se=spread / math.sqrt(runs),
        runs=int(runs),
    )


def write_worst_case(points: Sequence[WorstCasePoint], path: Path) -> None:
    """One CSV row per (collection, epsilon)."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["collection", "epsilon", "vehicles", "readings"]
            + ["e_opt", "e_akmv", "e_akmv_se", "runs"]
        )
        for p in points:
            writer.writerow(
                [
                    p.collection,
                    repr(p.epsilon),
                    p.vehicles,
                    p.readings,
                    repr(p.e_opt),
                    repr(p.e_akmv),
                    repr(p.e_akmv_se),
                    p.runs,
                ]
            )
