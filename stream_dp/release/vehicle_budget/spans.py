"""Spans: pooling a cell's readings over consecutive windows under a vehicle budget
(docs/math.md §13.3).

A window's release reads its own pairs and the ``carry``: the pairs earlier windows left
unreleased (their cells missed T, were dropped by the budget's plan, or were held), pooled
with this window's pairs of the same (cell, vehicle). The pairs this release leaves
unreleased are carried on, unless their first reading is ``max_span_hours`` windows old
(those are withheld, as today); a carry handed across windows that released nothing (a gap
in the stream) is cut the same way before it is pooled (:func:`fresh_carry`). A released
record covers the windows from its pairs' first window to this window's end: its
``window_start``/``window_end``. A pair is either read in this window's records, or counted
in one (a sit-out in a released cell), or carried, or withheld: so every reading is in at
most one released record. Which pairs are carried is a function of the occupancy (the
windows each pair has readings in) and the release's public choices. The carry is raw
private columns: never published. Which carried pairs pool with a window at all (and which
wait or are withheld because pooling would push their cell past T) is
:mod:`stream_dp.release.vehicle_budget.pooling`'s choice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from stream_dp.dp.budget_ledger import take_names
from stream_dp.dp.occupancy import factorize
from stream_dp.dp.span_kernels import earliest_of_groups, minimum_at, take_readings
from stream_dp.windows.columns import WindowColumns

if TYPE_CHECKING:
    from collections.abc import Sequence

    from stream_dp.dp.adaptive_cells import AdaptiveCells
    from stream_dp.release.bounding import Contributions
    from stream_dp.release.params import ReleaseParams
    from stream_dp.release.state import WindowCache


def pooled(columns: WindowColumns, carry: WindowColumns | None, prefix_limit: int) -> WindowColumns:
    """``columns`` with the ``carry``'s pairs added (a (cell, vehicle) in both merged:
    counts and sums added, reading log cut to its first ``prefix_limit``)."""
    return pooled_with_own(columns, carry, prefix_limit)[0]


def pooled_with_own(
    columns: WindowColumns, carry: WindowColumns | None, prefix_limit: int
) -> tuple[WindowColumns, np.ndarray]:
    """:func:`pooled`, and per pooled pair how many of its readings are ``columns``' (the
    window's own; the rest are the carry's)."""
    if carry is None or not len(carry):
        return columns, columns.count
    if not len(columns):
        return carry, np.zeros(len(carry), dtype=np.int64)
    cell_names, cell_code = factorize([*carry.cell_names, *columns.cell_names])
    vehicle_names, vehicle_code = factorize([*carry.vehicle_names, *columns.vehicle_names])
    nc, nv = len(carry.cell_names), len(carry.vehicle_names)
    joined = WindowColumns(
        cell_names,
        np.concatenate((cell_code[:nc][carry.cell_code], cell_code[nc:][columns.cell_code])),
        vehicle_names,
        np.concatenate(
            (vehicle_code[:nv][carry.vehicle_code], vehicle_code[nv:][columns.vehicle_code])
        ),
        np.concatenate((carry.count, columns.count)),
        np.concatenate((carry.total, columns.total)),
        np.concatenate((carry.total_sq, columns.total_sq)),
        np.concatenate((carry.reading_pair, columns.reading_pair + len(carry))),
        np.concatenate((carry.reading_ts, columns.reading_ts)),
        np.concatenate((carry.reading_value, columns.reading_value)),
    )
    merged, pair_of = joined._merged_with_inverse(prefix_limit)
    own = np.bincount(pair_of[len(carry) :], weights=columns.count, minlength=len(merged))
    return merged, own.astype(np.int64)


def fresh_carry(
    carry: WindowColumns | None, window_start: int, params: ReleaseParams
) -> tuple[WindowColumns | None, int]:
    """The ``carry``'s pairs a release at ``window_start`` may still pool, and how many
    readings it drops: a pair whose first window is more than ``max_span_hours - 1`` windows
    before ``window_start`` (the carry crossed windows with no release, e.g. hours without
    readings) would make a span longer than ``max_span_hours``; it is withheld, never
    released (§13.3)."""
    if carry is None or not len(carry):
        return None, 0
    oldest = window_start - (params.max_span_hours - 1) * params.window_seconds
    young = first_window(carry, params.window_seconds) >= oldest
    if young.all():
        return carry, 0
    stale = int(carry.count[~young].sum())
    keep = np.flatnonzero(young)
    return (take_pairs(carry, keep) if len(keep) else None), stale


def first_window(
    columns: WindowColumns, window_seconds: int, wanted: np.ndarray | None = None
) -> np.ndarray:
    """Per pair, the start of the window of its first reading (its log holds it); a pair
    with no reading logged (``plan``'s occupancy of counts alone) has no earlier window: the
    largest int64, so it counts as the current window's. With ``wanted`` (a bool per pair),
    only those pairs' (the others' read as unlogged)."""
    if wanted is not None:  # the wanted pairs' minima alone: in cache, and no NaN to carry
        group = np.where(wanted, np.arange(len(columns)), -1)
        first, finite = earliest_of_groups(
            columns.reading_pair.astype(np.int64, copy=False),
            columns.reading_ts.astype(np.float64, copy=False), group, len(columns),
        )  # fmt: skip
        if not finite:  # a time that is not finite leaves its pair out: the whole log's way
            return first_window(columns, window_seconds)
    else:
        first = np.full(len(columns), np.inf)
        minimum_at(first, columns.reading_pair, columns.reading_ts)
    logged = np.isfinite(first)
    start = np.full(len(columns), np.iinfo(np.int64).max, dtype=np.int64)
    start[logged] = np.floor(first[logged] / window_seconds) * window_seconds
    return start


def first_window_of(
    cache: WindowCache,
    columns: WindowColumns,
    window_seconds: int,
    wanted: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`first_window` of ``columns``, computed once per columns in a window's release
    (``cache``: the regrouping and the carry both read the pooled one); if it was not, and
    only the ``wanted`` pairs' are read, theirs alone."""
    known = cache.first_window(columns)
    if known is not None:
        return known
    if wanted is not None:
        return first_window(columns, window_seconds, wanted)
    first = first_window(columns, window_seconds)
    cache.keep_first_window(columns, first)
    return first


def take_pairs(columns: WindowColumns, pairs: np.ndarray) -> WindowColumns:
    """The window of ``columns``' pairs ``pairs`` (indices) alone, names compacted."""
    if (
        np.array_equal(pairs, np.arange(len(columns)))
        and np.bincount(columns.cell_code, minlength=len(columns.cell_names)).all()
        and np.bincount(columns.vehicle_code, minlength=len(columns.vehicle_names)).all()
    ):
        return _every_pair(columns)
    return _taken(columns, pairs)


def _taken(columns: WindowColumns, pairs: np.ndarray) -> WindowColumns:
    """:func:`take_pairs` by renumbering the names, pairs and reading log."""
    cells_used = _used(columns.cell_code[pairs], len(columns.cell_names))
    vehicles_used = _used(columns.vehicle_code[pairs], len(columns.vehicle_names))
    cell_map = np.full(len(columns.cell_names), -1, dtype=np.int64)
    cell_map[cells_used] = np.arange(len(cells_used))
    vehicle_map = np.full(len(columns.vehicle_names), -1, dtype=np.int64)
    vehicle_map[vehicles_used] = np.arange(len(vehicles_used))
    pair_map = np.full(len(columns), -1, dtype=np.int64)
    pair_map[pairs] = np.arange(len(pairs))
    reading_pair, reading_ts, reading_value = take_readings(
        columns.reading_pair, pair_map, columns.reading_ts, columns.reading_value
    )
    return WindowColumns(
        take_names(columns.cell_names, cells_used),
        cell_map[columns.cell_code[pairs]],
        take_names(columns.vehicle_names, vehicles_used),
        vehicle_map[columns.vehicle_code[pairs]],
        columns.count[pairs],
        columns.total[pairs],
        columns.total_sq[pairs],
        reading_pair,
        reading_ts,
        reading_value,
    )


def _every_pair(columns: WindowColumns) -> WindowColumns:
    """:func:`take_pairs` of every pair when every name is used: the same columns, codes and
    pair numbers as int64 (what :func:`_taken`'s renumbering makes of them), the arrays
    shared instead of copied (a window that holds every cell carries all its pairs on: ~10^6
    readings, benchmarks/release.py)."""
    cell_code, vehicle_code, reading_pair = (
        codes.astype(np.int64, copy=False)
        for codes in (columns.cell_code, columns.vehicle_code, columns.reading_pair)
    )
    return WindowColumns(
        columns.cell_names, cell_code, columns.vehicle_names, vehicle_code, columns.count,
        columns.total, columns.total_sq, reading_pair, columns.reading_ts, columns.reading_value,
    )  # fmt: skip


def _used(codes: np.ndarray, n_names: int) -> np.ndarray:
    """The distinct ``codes`` ascending (``np.unique`` of small non-negative codes, by
    counting)."""
    return np.flatnonzero(np.bincount(codes, minlength=n_names))


def deferred_pairs(
    pooled_columns: WindowColumns,
    adaptive: AdaptiveCells,
    released_cells: Sequence[str],
    window_start: int,
    params: ReleaseParams,
    cache: WindowCache,
) -> np.ndarray:
    """The indices of the pairs of ``pooled_columns`` (this window's, carry included) that no
    released record covers (``released_cells``: the regrouped cells released, names of
    ``adaptive``) and whose span may still grow (module docstring)."""
    if not len(pooled_columns):
        return np.zeros(0, dtype=np.int64)
    unit = adaptive.unit_of_cell[pooled_columns.cell_code]
    covered = np.zeros(len(adaptive.names) + 1, dtype=bool)  # last: unit -1
    if len(released_cells):
        index = {name: u for u, name in enumerate(adaptive.names)}
        for name in released_cells:
            covered[index[name]] = True
    open_pairs = ~covered[unit]
    oldest_next = window_start - (params.max_span_hours - 1) * params.window_seconds
    if oldest_next + params.window_seconds <= window_start and logged_in_window(
        pooled_columns, window_start, params.window_seconds
    ):
        return np.flatnonzero(open_pairs)  # every first window is this one or later: young
    first = first_window_of(cache, pooled_columns, params.window_seconds, open_pairs)
    young = first >= oldest_next + params.window_seconds
    return np.flatnonzero(open_pairs & young)


def span_starts(
    cache: WindowCache,
    columns: WindowColumns,
    pairs: Contributions,
    window_start: int,
    window_seconds: int,
) -> np.ndarray:
    """Per cell of the ``pairs``' occupancy (of ``columns``), the start of its span: the
    first window of its pairs, at the latest ``window_start`` (computed once per occupancy,
    ``cache``: the held cells and the records both read it)."""
    occupancy = pairs.occupancy

    def compute() -> np.ndarray:
        start = _cell_span_starts(columns, pairs.entry_of, occupancy.cell_index,
                                  len(occupancy.cells), window_start, window_seconds)  # fmt: skip
        if start is None:  # a time that is not finite: per pair, as first_window leaves it out
            first = first_window(columns, window_seconds)[pairs.entry_of]
            start = np.full(len(occupancy.cells), window_start, dtype=np.int64)
            minimum_at(start, occupancy.cell_index, first)
        return start

    return cache.span_starts(occupancy, compute)


def _cell_span_starts(
    columns: WindowColumns,
    entry_of: np.ndarray,
    cell_index: np.ndarray,
    n_cells: int,
    window_start: int,
    window_seconds: int,
) -> np.ndarray | None:
    """Per cell, the earlier of ``window_start`` and the window of its pairs' earliest
    reading, in one pass over the log into ``n_cells`` minima instead of one per pair; the
    same values as the per-pair minima (``floor(t / w) w`` does not decrease with ``t``).
    None if a logged time is not finite."""
    if logged_in_window(columns, window_start, window_seconds):
        return np.full(n_cells, window_start, dtype=np.int64)  # no cell's span began earlier
    cell_of_pair = np.full(len(columns), -1, dtype=np.int64)
    cell_of_pair[entry_of] = cell_index
    earliest, finite = earliest_of_groups(
        columns.reading_pair.astype(np.int64, copy=False),
        columns.reading_ts.astype(np.float64, copy=False), cell_of_pair, n_cells,
    )  # fmt: skip
    if not finite:
        return None
    start = np.full(n_cells, window_start, dtype=np.int64)
    logged = np.isfinite(earliest)
    first = np.full(n_cells, np.iinfo(np.int64).max, dtype=np.int64)
    first[logged] = np.floor(earliest[logged] / window_seconds) * window_seconds
    return np.minimum(start, first)


#: Whether the span starts (:func:`_cell_span_starts`, the regrouping's observed cells'
#: and :func:`deferred_pairs`' young pairs) are answered at once when the whole log lies in
#: the current window or later (:func:`logged_in_window`); the tests switch it off to compare.
LOG_IN_WINDOW = True


def logged_in_window(columns: WindowColumns, window_start: int, window_seconds: int) -> bool:
    """With :data:`LOG_IN_WINDOW`, whether ``columns``' whole log lies in the window at
    ``window_start`` or later (:func:`_log_in_window`): every pair's first window is then
    that window or a later one, read off two reductions instead of a pass per pair."""
    return LOG_IN_WINDOW and _log_in_window(columns.reading_ts, window_start, window_seconds)


def _log_in_window(ts: np.ndarray, window_start: int, window_seconds: int) -> bool:
    """Whether every logged time is finite and at least ``window_start`` (a window boundary):
    then every cell's first window is the current one or later, so its span starts now
    (two reductions instead of a pass that gathers each reading's cell)."""
    if not len(ts) or window_start % window_seconds:
        return False
    return bool(ts.min() >= window_start) and bool(ts.max() < np.inf)  # NaN fails both
