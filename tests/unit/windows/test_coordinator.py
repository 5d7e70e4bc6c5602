"""The coordinator releases a window only when every partition is past it."""

from __future__ import annotations

import math

import numpy as np

from stream_dp.windows.coordinator import ReleaseCoordinator
from stream_dp.windows.state import PartialColumns


def pairs(vehicle: str, count: int, cell: str = "cell", also: tuple = ()) -> PartialColumns:
    """A partial with ``count`` readings of ``vehicle`` (ts i, value 10 + i) and, for each
    ``(vehicle, count)`` in ``also``, those too."""
    readings = [(vehicle, count), *also]
    rows = [(cell, v, float(i), 10.0 + i) for v, n in readings for i in range(n)]
    cells, vehicles, ts, values = (list(col) for col in zip(*rows, strict=True))
    return PartialColumns.from_readings(cells, vehicles, ts, values, 8)


def counts(columns) -> dict:
    return {
        (columns.cell_names[c], columns.vehicle_names[v]): int(n)
        for c, v, n in zip(columns.cell_code, columns.vehicle_code, columns.count, strict=True)
    }


def test_window_waits_for_every_partition():
    c = ReleaseCoordinator(partitions=3, window_seconds=3600, prefix_limit=8)
    c.add_partial(0, 0, pairs("a", 2))
    c.set_progress(0, 3600.0)
    assert c.ready_windows() == []
    c.set_progress(1, 3600.0)  # partition 1 had no data for the window but is past it
    assert c.ready_windows() == []
    c.set_progress(2, math.inf)  # idle
    assert c.ready_windows() == [0]


def test_partials_merge_and_duplicates_are_ignored():
    c = ReleaseCoordinator(partitions=2, window_seconds=3600, prefix_limit=8)
    assert c.add_partial(0, 0, pairs("a", 2))
    assert not c.add_partial(0, 0, pairs("a", 5))  # a replayed partial
    assert c.add_partial(0, 1, pairs("b", 3))
    assert counts(c.merged(0)) == {("cell", "a"): 2, ("cell", "b"): 3}
    assert counts(c.merged(0)) == {("cell", "a"): 2, ("cell", "b"): 3}  # not consumed


def test_a_vehicle_split_across_partitions_is_merged_exactly():
    c = ReleaseCoordinator(partitions=2, window_seconds=3600, prefix_limit=8)
    c.add_partial(0, 0, pairs("a", 3))
    c.add_partial(0, 1, pairs("a", 2, also=(("b", 1),)))
    merged = c.merged(0)
    assert counts(merged) == {("cell", "a"): 5, ("cell", "b"): 1}
    a = list(merged.vehicle_names).index("a")
    row = int(list(merged.vehicle_code).index(a))
    assert merged.total[row] == (10 + 11 + 12) + (10 + 11)
    assert list(merged.prefixes(np.array([row]))[0]) == [10.0, 10.0, 11.0, 11.0, 12.0]


def test_released_window_is_never_ready_again():
    c = ReleaseCoordinator(partitions=1, window_seconds=3600, prefix_limit=8)
    c.add_partial(0, 0, pairs("a", 1))
    c.set_progress(0, 7200.0, {0: 4})
    assert c.ready_windows() == [0] and c.late_count(0) == 4
    c.mark_released(0)
    assert not c.add_partial(0, 0, pairs("a", 1))
    assert c.ready_windows() == []


def test_a_partial_arriving_after_its_window_was_released_is_recognised_once():
    c = ReleaseCoordinator(partitions=2, window_seconds=3600, prefix_limit=8)
    c.add_partial(0, 0, pairs("a", 2))
    c.set_progress(1, math.inf)  # partition 1 reported itself idle
    assert c.ready_windows() == [0]
    c.mark_released(0, from_partials=True)
    assert not c.add_partial(0, 1, pairs("b", 3))  # partition 1 then read older data
    assert c.take_after_release(0, 1)
    assert not c.take_after_release(0, 1)  # a replay of it is not counted again
    assert not c.take_after_release(0, 0)  # partition 0's partial was released


def test_windows_known_only_from_the_release_log_count_nothing_after_release():
    c = ReleaseCoordinator(partitions=2, window_seconds=3600, prefix_limit=8)
    c.mark_released(0)  # learnt from the release log at a rebuild
    assert not c.add_partial(0, 1, pairs("b", 3))
    assert not c.take_after_release(0, 1)


def test_windows_are_released_in_event_time_order():
    """Partition 1 sends its partial for hour 1 before the progress record that takes it
    past hour 0 (it had no readings there): hour 1 waits for hour 0."""
    c = ReleaseCoordinator(partitions=2, window_seconds=3600, prefix_limit=8)
    c.add_partial(0, 0, pairs("a", 1))
    c.add_partial(3600, 0, pairs("a", 1))
    c.set_progress(0, 7200.0)
    c.add_partial(3600, 1, pairs("b", 1))
    assert c.ready_windows() == []  # hour 1 is complete, hour 0 is not yet
    c.set_progress(1, 7200.0)
    assert c.ready_windows() == [0, 3600]
    c.mark_released(0)
    assert c.ready_windows() == [3600]
