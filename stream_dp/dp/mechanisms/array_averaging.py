"""ARRAY-AVERAGING (003 Sec. III-C) and OPT-ARRAY-AVERAGING (003 Sec. VI).

f_arr = (1/K) sum_i A-bar_i over the kept arrays of a grouping, released as
f_arr + Lap(Delta / eps) with the paper's sensitivities

* WRAPAROUND: ``Delta = 2U/K`` (a vehicle may occupy two arrays). This is what 003 states
  and it is valid, but loose: all K kept arrays are full, so a vehicle with s <= m_UB slots
  moves f_arr by at most ``U s / (K m_UB) <= U/K`` (see :func:`exact_sensitivity`).
* BESTFIT: ``Delta = U / K-bar``, eq. (4) (a vehicle sits in one array).

The data-independent worst-case error is the exact worst-case bias of the grouping (the
estimator is linear in the readings, :func:`worst_case_bias`) plus ``Delta / eps``.
OPT-ARRAY-AVERAGING is BESTFIT with m_UB = m^(eps) (eq. (13), Lemma V.2) or with the
minimiser of the convex surrogate (19).

Prefix: exact with aggregates only for ``fill="user-mean"``; with ``fill="readings"`` each
vehicle needs its first min(m_l, m_UB) readings stored (unless that is all of them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stream_dp.dp.mechanisms import array_length
from stream_dp.dp.mechanisms.array_based import ArrayMeanMechanism
from stream_dp.dp.mechanisms.base import (
    CellData,
    Fill,
    FloatArray,
    IntArray,
    MeanRelease,
    laplace_mean_release,
)
from stream_dp.dp.mechanisms.grouping import Grouping, Strategy, array_means
from stream_dp.dp.randomness import RandomSource


def stated_sensitivity(grouping: Grouping, upper: float) -> float:
    """003's sensitivity: ``2U/K`` (WRAPAROUND) or ``U/K-bar`` (BESTFIT, eq. (4))."""
    factor = 2.0 if grouping.strategy == "wraparound" else 1.0
    return factor * upper / grouping.n_arrays


def exact_sensitivity(grouping: Grouping, upper: float) -> float:
    """The true user-level sensitivity of f_arr for this grouping (either fill).

    f_arr is linear in each vehicle's slots: vehicle l moves it by at most
    ``U sum_{placements} slots / (K w(A))``; maximise over l.
    """
    per_slot = 1.0 / (grouping.n_arrays * grouping.fills[grouping.array])
    moves = np.bincount(grouping.vehicle, weights=grouping.slots * per_slot)
    return float(upper * moves.max())


def estimate(grouping: Grouping, cell: CellData, fill: Fill) -> float:
    """f_arr: the mean of the kept arrays' means (003 Sec. III-C)."""
    return float(array_means(grouping, cell, fill).mean())


def reading_coefficients(grouping: Grouping, counts: IntArray, fill: Fill) -> list[FloatArray]:
    """Per vehicle, the coefficient of each of its readings in ``f_arr - f``.

    ``f = sum of all readings / sum m``; ``f_arr`` gives a placed reading (``fill="readings"``)
    weight ``1/(K w(A))``, and with ``fill="user-mean"`` spreads a vehicle's total slot
    weight evenly over its m_l readings (each slot holds mu_l).
    """
    total = float(counts.sum())
    slot_weight = 1.0 / (grouping.n_arrays * grouping.fills[grouping.array])
    coefficients = [np.full(int(c), -1.0 / total) for c in counts.tolist()]
    for v, o, s, w in zip(
        grouping.vehicle.tolist(),
        grouping.offset.tolist(),
        grouping.slots.tolist(),
        slot_weight.tolist(),
        strict=True,
    ):
        if fill == "user-mean":
            coefficients[v] += s * w / counts[v]
        else:
            coefficients[v][o : o + s] += w
    return coefficients


def worst_case_bias(grouping: Grouping, counts: IntArray, upper: float, fill: Fill) -> float:
    """max over datasets in [0, U] of |f_arr - f|, exactly (generalises 003 Lemma V.1).

    ``f_arr - f`` is linear in the readings, so the maximum of its absolute value over the
    box is U times the larger of the sums of its positive and of its negative coefficients.
    With fully filled arrays (K m_UB = sum Gamma) this equals Lemma V.1's U (1 - sum Gamma / sum m).
    """
    flat = np.concatenate(reading_coefficients(grouping, counts, fill))
    return float(upper * max(flat[flat > 0].sum(), -flat[flat < 0].sum()))


@dataclass(frozen=True)
class ArrayAveraging(ArrayMeanMechanism):
    """ARRAY-AVERAGING; m_UB rule "median", "eq9", "opt", "surrogate" or an int."""

    grouping: Strategy = "bestfit"
    m_ub: str | int = "median"
    fill: Fill = "user-mean"
    name: str = "array-averaging-bestfit"

    def _release(
        self, cell: CellData, upper: float, epsilon: float, source: RandomSource
    ) -> MeanRelease:
        data = cell.participants()
        grouping = self.grouping_for(data.counts, epsilon)
        bias = worst_case_bias(grouping, data.counts, upper, self.fill)
        parameters = {
            **self.array_parameters(grouping),
            "worst_case_bias": bias,
            "vehicles": data.n_vehicles,
        }
        if self.m_ub == "opt":
            parameters["eq15_error"] = float(
                array_length.minimax_error(data.counts, grouping.m_ub, upper, epsilon)
            )
        return laplace_mean_release(
            self.name,
            estimate(grouping, data, self.fill),
            stated_sensitivity(grouping, upper),
            epsilon,
            upper,
            source,
            parameters,
            worst_case_bias=bias,
        )
