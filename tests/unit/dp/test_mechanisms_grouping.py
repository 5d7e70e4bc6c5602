"""WRAPAROUND and BESTFIT (003 Algorithms 1-2): invariants and a literal reference transcription."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dp.dp.mechanisms.base import CellData
from stream_dp.dp.mechanisms.grouping import (
    array_means,
    bestfit,
    processing_order,
    readings_needed,
    wraparound,
)

counts_strategy = st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=40)


def _reference_bestfit(counts: list[int], m_ub: int) -> list[int]:
    """003 Algorithm 2 line by line: L arrays, the fullest feasible one, least index on ties."""
    fill = [0] * len(counts)
    chosen = [0] * len(counts)
    for v in sorted(range(len(counts)), key=lambda i: (-counts[i], i)):
        r = min(counts[v], m_ub)
        feasible = [i for i in range(len(fill)) if m_ub - fill[i] >= r]
        best = max(fill[i] for i in feasible)
        target = min(i for i in feasible if fill[i] == best)
        fill[target] += r
        chosen[v] = target
    return chosen


@given(counts=counts_strategy, data=st.data())
@settings(max_examples=150, deadline=None)
def test_bestfit_places_every_vehicle_in_exactly_one_array(
    counts: list[int], data: st.DataObject
) -> None:
    m_ub = data.draw(st.integers(min_value=min(counts), max_value=max(counts)))
    grouping = bestfit(counts, m_ub)
    assert sorted(grouping.vehicle.tolist()) == list(range(len(counts)))
    assert grouping.influence == 1
    np.testing.assert_array_equal(
        grouping.slots[np.argsort(grouping.vehicle)], np.minimum(counts, m_ub)
    )
    assert np.all(grouping.offset == 0)
    assert np.all((grouping.fills >= 1) & (grouping.fills <= m_ub))
    assert grouping.n_arrays == grouping.fills.size
    # K-bar >= K of eq. (3) (003 Sec. III-A2).
    assert grouping.n_arrays >= int(np.minimum(counts, m_ub).sum()) // m_ub
    # Same assignment as the literal transcription (array ids are opening order in both).
    by_vehicle = dict(zip(grouping.vehicle.tolist(), grouping.array.tolist(), strict=True))
    assert [by_vehicle[v] for v in range(len(counts))] == _reference_bestfit(counts, m_ub)


@given(counts=counts_strategy, data=st.data())
@settings(max_examples=150, deadline=None)
def test_wraparound_keeps_k_full_arrays_per_eq_3(counts: list[int], data: st.DataObject) -> None:
    m_ub = data.draw(st.integers(min_value=min(counts), max_value=max(counts)))
    grouping = wraparound(counts, m_ub)
    clipped_total = int(np.minimum(counts, m_ub).sum())
    assert grouping.n_arrays == clipped_total // m_ub  # eq. (3)
    assert np.all(grouping.fills == m_ub)  # every kept array is filled up
    assert grouping.influence <= 2  # a vehicle is split between at most two arrays
    # Slots are contiguous in processing order: the kept ones are a prefix of the sequence.
    order = processing_order(counts).tolist()
    sequence = [v for v in order for _ in range(min(counts[v], m_ub))]
    placed = [
        v
        for a in range(grouping.n_arrays)
        for v, arr, s in zip(
            grouping.vehicle.tolist(), grouping.array.tolist(), grouping.slots.tolist(), strict=True
        )
        if arr == a
        for _ in range(s)
    ]
    assert placed == sequence[: grouping.n_arrays * m_ub]


def test_split_vehicle_contributes_consecutive_readings_to_two_arrays() -> None:
    grouping = wraparound([2, 2, 2], 3)
    # A1 = (v0, v0, v1), A2 = (v1, v2, v2).
    rows = list(
        zip(
            grouping.vehicle.tolist(),
            grouping.array.tolist(),
            grouping.offset.tolist(),
            grouping.slots.tolist(),
            strict=True,
        )
    )
    assert rows == [(0, 0, 0, 2), (1, 0, 0, 1), (1, 1, 1, 1), (2, 1, 0, 2)]
    cell = CellData.from_readings([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], 10.0)
    np.testing.assert_allclose(array_means(grouping, cell, "readings"), [2.0, 5.0])
    np.testing.assert_allclose(
        array_means(grouping, cell, "user-mean"), [(1.5 * 2 + 3.5) / 3, (3.5 + 5.5 * 2) / 3]
    )


def test_array_means_with_prefixes_match_whole_arrays() -> None:
    rng = np.random.default_rng(1)
    counts = [9, 7, 4, 4, 3, 1]
    readings = [rng.uniform(0, 65, size=c) for c in counts]
    full = CellData.from_readings(readings, 65.0)
    for grouping in (bestfit(counts, 4), wraparound(counts, 4)):
        need = readings_needed(grouping, full.counts, "readings")
        prefixes = tuple(r[: int(n)] for r, n in zip(readings, need, strict=True))
        bounded = CellData(full.counts, full.sums, full.sumsqs, prefixes)
        np.testing.assert_allclose(
            array_means(grouping, bounded, "readings"), array_means(grouping, full, "readings")
        )
