"""Close a partition's windows: the one step the offline engine and the worker share.

A partition closes a window when its watermark passes the window's end (or all its open
windows when it is idle, or at the end of the input): it hands over the window's partial
state, forgets the window (later readings for it are late), and reports its progress
(watermark, and late readings per window) so that the coordinator knows which windows are
complete. The engine hands the result to its coordinator directly; the worker writes it to
the partials topic (each partial before its close record on the state topic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stream_dp.windows.state import PartialColumns, PartitionState


@dataclass(frozen=True)
class ClosedWindows:
    """What one partition hands over: its closed windows' partials, oldest first, then its
    progress (``watermark`` +inf when it was closed as idle and holds nothing open)."""

    partition: int
    partials: list[tuple[int, PartialColumns]]
    watermark: float
    late_by_window: dict[int, int]


def close_windows(
    state: PartitionState, partition: int, starts: list[int], forced: bool = False
) -> ClosedWindows:
    """Take each window's partial and close it (``forced``: before the watermark passed it,
    as idle or at the end of the input)."""
    partials = []
    for start in starts:
        partials.append((start, state.partial(start)))
        state.close(start, forced=forced)
    watermark = math.inf if forced and not state.open else state.watermark
    return ClosedWindows(partition, partials, watermark, state.late_by_window)


def close_due_windows(state: PartitionState, partition: int) -> ClosedWindows:
    """Close the windows the watermark has passed."""
    return close_windows(state, partition, state.due_windows())


def close_all_windows(state: PartitionState, partition: int) -> ClosedWindows:
    """Close every open window (the partition is idle, or the input has ended)."""
    return close_windows(state, partition, list(state.iter_open()), forced=True)
