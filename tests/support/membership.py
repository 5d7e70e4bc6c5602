"""Which readings each released record holds (tests and benchmarks only, never the service).

A record's ``mean_error`` bounds its distance from the mean of the readings it holds
(docs/math.md §12.1): the readings counted in its ``n_readings`` (M), kept or not. Under a
vehicle budget that set is not "every reading of the record's cell and span" (§13.3: withheld
carried pairs, the window's readings set aside under a due unit, a finer cell's readings
withheld while its parent is released). :func:`recording_members` reports, per record
released within its block, the pooled (finest cell, vehicle) pairs it was computed from, read
off the release's own state after its stages ran: what is released is unchanged, and the
release path does no extra work outside the block (it wraps
``stream_dp.release.window.release_pipeline`` for the ``with`` block only).

:func:`member_readings` maps those pairs back to readings. A pooled pair holds the readings
of its (cell, vehicle) in consecutive windows: from its first window (the first logged
reading's) to the releasing window, or to the window before it when the release set that
window's readings aside (§13.3 case 1); its count tells which.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from stream_dp.release import window as release_window_module
from stream_dp.release.stages import Pipeline
from stream_dp.release.vehicle_budget.spans import first_window

if TYPE_CHECKING:
    from stream_dp.release.state import WindowState
    from stream_dp.windows.columns import WindowColumns


@dataclass(frozen=True)
class MemberPair:
    """One pooled (finest cell, vehicle) pair counted in a record: its ``count`` readings and
    the window of its first one."""

    cell: str
    vehicle: str
    count: int
    first_window: int


@dataclass(frozen=True)
class RecordMembers:
    """The pairs of one released record: the releasing window, the record's index among
    that release's records, its cell, and per vehicle the readings the release kept of them
    (its first ones in time; 0 for a vehicle that sat out or was suppressed)."""

    window_start: int
    index: int
    cell: str
    pairs: tuple[MemberPair, ...]
    kept: dict[str, int]


class _RecordingPipeline(Pipeline):
    """A release pipeline that hands its state, and the pooled columns it started from, to
    ``sink`` once every stage has run."""

    sink: list[RecordMembers]

    def run(self, state: WindowState) -> WindowState:
        state = super().run(state)
        pooled = state.pooled.columns if state.pooled is not None else state.observed
        assert pooled is not None
        self.sink.extend(_members(state, pooled))
        return state


@contextmanager
def recording_members() -> Iterator[list[RecordMembers]]:
    """Within the block, every window released through :mod:`stream_dp.release.window`
    (the offline engine, :func:`~stream_dp.release.window.release_window`) appends its
    records' members to the yielded list, in release order."""
    sink: list[RecordMembers] = []
    original = release_window_module.release_pipeline

    def recording(params: Any, noise: Any) -> Pipeline:
        base = original(params, noise)
        pipeline = _RecordingPipeline(base.after_choice, base.choice, base.closing)
        pipeline.sink = sink
        return pipeline

    release_window_module.release_pipeline = recording
    try:
        yield sink
    finally:
        release_window_module.release_pipeline = original


def _members(state: WindowState, pooled: WindowColumns) -> list[RecordMembers]:
    """Per released record of ``state``, the pairs of ``pooled`` (the columns the stages
    started from: the window pooled with its carry) in its cell."""
    pairs = state.pairs
    if pairs is None or state.released is None or state.empty or not len(pooled):
        return []
    occupancy = pairs.occupancy
    released = np.flatnonzero(state.released).tolist()
    if state.adaptive is not None:  # each finest cell's regrouped cell (§12.4)
        names, unit = state.adaptive.names, state.adaptive.unit_of_cell[pooled.cell_code]
    else:
        names, unit = pooled.cell_names, pooled.cell_code
    code = {name: u for u, name in enumerate(names)}
    order = np.argsort(unit, kind="stable")
    bounds = np.searchsorted(unit[order], np.arange(len(names) + 1))
    first = first_window(pooled, state.params.window_seconds)
    capped = None if pairs.bounded is None else pairs.bounded.capped
    kept_count = occupancy.count if capped is None else capped.kept_count
    vehicles, vehicle_index = occupancy.vehicles, occupancy.vehicle_index
    out = []
    for index, g in enumerate(released):
        cell = occupancy.cells[g]
        u = code[cell]
        members = tuple(
            MemberPair(
                pooled.cell_names[pooled.cell_code[p]],
                pooled.vehicle_names[pooled.vehicle_code[p]],
                int(pooled.count[p]),
                int(first[p]),
            )
            for p in order[bounds[u] : bounds[u + 1]].tolist()
        )
        entries = range(int(occupancy.cell_start[g]), int(occupancy.cell_start[g + 1]))
        kept = {vehicles[vehicle_index[e]]: int(kept_count[e]) for e in entries}
        out.append(RecordMembers(state.window_start, index, cell, members, kept))
    return out


class MembershipError(AssertionError):
    """A record's pairs do not match the readings: the reconstruction is not exact."""


def member_readings(
    members: list[RecordMembers],
    cells: list[str],
    vehicles: list[str],
    windows: np.ndarray,
    window_seconds: int = 3600,
) -> np.ndarray:
    """Per reading (the accepted readings: finest ``cells``, ``vehicles``, ``windows`` starts),
    the index into ``members`` of the record holding it, -1 for none. Raises
    :class:`MembershipError` if a pair's count fits no run of windows (first window to the
    releasing one or the one before) or a reading would be in two records."""
    by_pair: dict[tuple[str, str], list[int]] = {}
    for i, key in enumerate(zip(cells, vehicles, strict=True)):
        by_pair.setdefault(key, []).append(i)
    out = np.full(len(cells), -1, dtype=np.int64)
    for r, record in enumerate(members):
        for pair in record.pairs:
            idx = np.array(by_pair.get((pair.cell, pair.vehicle), []), dtype=np.int64)
            w = windows[idx] if len(idx) else np.zeros(0, dtype=np.int64)
            chosen = None
            for last in (record.window_start, record.window_start - window_seconds):
                inside = idx[(w >= pair.first_window) & (w <= last)]
                if len(inside) == pair.count:
                    chosen = inside
                    break
            if chosen is None:
                raise MembershipError(
                    f"record {r} ({record.cell}): a pair of {pair.count} readings from "
                    f"{pair.first_window} matches no run of windows"
                )
            if (out[chosen] >= 0).any():
                raise MembershipError(f"record {r} ({record.cell}): a reading in two records")
            out[chosen] = r
    return out
