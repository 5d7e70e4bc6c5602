"""The coordinator releases a window only when every partition is past it."""

from __future__ import annotations

import math

from stream_dp.coordinator import ReleaseCoordinator
from stream_dp.window_state import PairStats


def pairs(vehicle: str, count: int) -> dict:
    stats = PairStats()
    for i in range(count):
        stats.add(float(i), 10.0, 8)
    return {("cell", vehicle): stats}


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
    merged = c.merged(0)
    assert {k: v.count for k, v in merged.items()} == {("cell", "a"): 2, ("cell", "b"): 3}
    assert c.merged(0)[("cell", "a")].count == 2  # merging does not consume the partials


def test_released_window_is_never_ready_again():
    c = ReleaseCoordinator(partitions=1, window_seconds=3600, prefix_limit=8)
    c.add_partial(0, 0, pairs("a", 1))
    c.set_progress(0, 7200.0, {0: 4})
    assert c.ready_windows() == [0] and c.late_count(0) == 4
    c.mark_released(0)
    assert not c.add_partial(0, 0, pairs("a", 1))
    assert c.ready_windows() == []
