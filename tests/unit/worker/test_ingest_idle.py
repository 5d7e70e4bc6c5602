"""The idle fallback: a partition is idle only when quiet *and* caught up with its input."""

from __future__ import annotations

import asyncio
import math
import time

from stream_dp.config import load_settings
from stream_dp.windows.state import PartitionState
from stream_dp.worker.idle_rule import InputState
from stream_dp.worker.ingest import IngestProcessor
from stream_dp.worker.metrics import ServiceMetrics
from stream_dp.worker.recovery import PartitionRuntime


def processor(applied_offset: int, quiet_for: float, with_open_window: bool):
    settings = load_settings(idle_close_seconds=5.0)
    ingest = IngestProcessor(settings, conn=None, producer=None, metrics=ServiceMetrics())
    state = PartitionState.for_settings(settings)
    if with_open_window:
        state.add_batch(["v"], [100.0], ["872a10701ffffff"], [10.0])
    ingest.partitions[0] = PartitionRuntime(
        state, applied_offset=applied_offset, last_event_wall=time.monotonic() - quiet_for
    )
    calls = []

    async def close_windows(partition, runtime, windows, forced):
        calls.append(("close", windows, forced))

    async def progress(partition, runtime, watermark, force):
        calls.append(("progress", watermark))

    ingest._close_windows = close_windows
    ingest._progress = progress
    return ingest, calls


def tick(ingest, end, position=None, fetched_age=0.1, times=1):
    async def input_state(partition):
        return InputState(end, position, fetched_age)

    async def run():
        for _ in range(times):
            await ingest.tick([0], input_state)

    asyncio.run(run())


def confirmed_quiet(ingest, seconds: float) -> None:
    """As if the broker had kept confirming the partition's end for ``seconds``."""
    ingest.partitions[0].quiet_since = time.monotonic() - seconds


def test_a_quiet_partition_with_unread_input_is_not_idle():
    ingest, calls = processor(applied_offset=9, quiet_for=30.0, with_open_window=True)
    confirmed_quiet(ingest, 30.0)
    tick(ingest, end=500, position=250)  # 490 records it has not applied, 250 not fetched
    assert calls == [("progress", ingest.partitions[0].state.watermark)]


def test_a_quiet_caught_up_partition_closes_its_windows_once_confirmed_long_enough():
    ingest, calls = processor(applied_offset=9, quiet_for=6.0, with_open_window=True)
    tick(ingest, end=10)  # the first confirmation starts the quiet span: not idle yet
    assert calls == [("progress", ingest.partitions[0].state.watermark)]
    confirmed_quiet(ingest, 6.0)
    calls.clear()
    tick(ingest, end=10)
    assert calls == [("close", [0], True)]


def test_a_stale_confirmation_never_closes_a_window():
    """The broker paused or unreachable: the consumer still remembers an end that says
    'everything applied', but no fetch has succeeded lately."""
    ingest, calls = processor(applied_offset=9, quiet_for=600.0, with_open_window=True)
    confirmed_quiet(ingest, 600.0)
    tick(ingest, end=10, position=10, fetched_age=60.0)
    assert calls == [("progress", ingest.partitions[0].state.watermark)]
    assert ingest.partitions[0].quiet_since is None  # the outage ended the quiet span


def test_a_tick_held_up_through_an_outage_does_not_count_it_as_quiet():
    """The last confirmation the timer read was 6 s ago, just before the broker paused, and
    the timer waited on the broker since: the fresh confirmation after the pause restarts the
    span instead of closing the windows on 6 s nobody confirmed."""
    ingest, calls = processor(applied_offset=9, quiet_for=6.0, with_open_window=True)
    confirmed_quiet(ingest, 6.0)
    ingest.partitions[0].confirmed_at = time.monotonic() - 6.0
    tick(ingest, end=10)
    assert calls == [("progress", ingest.partitions[0].state.watermark)]
    runtime = ingest.partitions[0]
    assert runtime.quiet_since == runtime.confirmed_at > time.monotonic() - 1.0
    confirmed_quiet(ingest, 6.0)  # the broker then confirmed 6 s, observed every tick
    runtime.confirmed_at = time.monotonic() - 0.5
    calls.clear()
    tick(ingest, end=10)
    assert calls == [("close", [0], True)]


def test_an_end_below_what_was_applied_is_reported_as_lost_input():
    ingest, calls = processor(applied_offset=99, quiet_for=600.0, with_open_window=True)
    confirmed_quiet(ingest, 600.0)
    tick(ingest, end=0, position=0)  # an empty broker came back
    assert calls[0][0] == "progress" and ingest.input_lost == {0}


def test_an_empty_caught_up_partition_reports_infinity():
    ingest, calls = processor(applied_offset=-1, quiet_for=6.0, with_open_window=False)
    confirmed_quiet(ingest, 6.0)
    tick(ingest, end=0)
    assert calls == [("progress", math.inf)]


def test_before_the_first_fetch_the_end_is_unknown_and_nothing_is_idle():
    ingest, calls = processor(applied_offset=-1, quiet_for=6.0, with_open_window=False)
    confirmed_quiet(ingest, 6.0)
    tick(ingest, end=None, fetched_age=None)  # before the consumer's first fetch
    assert calls[0][0] == "progress" and calls[0][1] != math.inf


def test_a_fetched_partition_is_caught_up_even_if_offsets_were_skipped():
    """Found in review: transaction markers or expired state leave the end above the last
    applied offset for ever; the fetch position says everything was read."""
    ingest, calls = processor(applied_offset=-1, quiet_for=6.0, with_open_window=False)
    confirmed_quiet(ingest, 6.0)
    tick(ingest, end=1000, position=1000)  # fetched: records may still be queued in Faust
    assert calls[0][1] != math.inf
    ingest, calls = processor(applied_offset=-1, quiet_for=16.0, with_open_window=False)
    confirmed_quiet(ingest, 16.0)
    tick(ingest, end=1000, position=1000)  # confirmed quiet for 3x the idle time
    assert calls == [("progress", math.inf)]


def test_a_partition_confirmed_quiet_for_very_long_is_idle_whatever_its_offsets():
    ingest, calls = processor(applied_offset=-1, quiet_for=51.0, with_open_window=False)
    confirmed_quiet(ingest, 51.0)
    tick(ingest, end=1000, position=3)
    assert calls == [("progress", math.inf)]


def test_a_recently_active_partition_is_not_idle():
    ingest, calls = processor(applied_offset=9, quiet_for=0.0, with_open_window=True)
    confirmed_quiet(ingest, 60.0)
    tick(ingest, end=10)
    assert calls[0][0] == "progress"


def test_the_watermark_gauge_follows_the_partition_holding_releases_back():
    settings = load_settings(grace_seconds=600.0)
    metrics = ServiceMetrics()
    ingest = IngestProcessor(settings, conn=None, producer=None, metrics=metrics)

    def gauge():
        return metrics.registry.get_sample_value("stream_dp_watermark_timestamp_seconds")

    states = []
    for latest in (9000.0, 5000.0, 7000.0):
        state = PartitionState.for_settings(settings)
        state.add_batch(["v"], [latest], ["872a10701ffffff"], [10.0])
        states.append(state)
        ingest.partitions[len(states) - 1] = PartitionRuntime(state)
    ingest._export_watermark()
    assert gauge() == 5000.0 - 600.0  # the slowest partition with an open window
    states[1].close(3600, forced=True)  # it closes everything (idle fallback)
    ingest._export_watermark()
    assert gauge() == 7000.0 - 600.0
    asyncio.run(ingest.on_revoked([2]))
    assert gauge() == 9000.0 - 600.0
    states[0].close(7200, forced=True)
    ingest._export_watermark()
    assert gauge() == 9000.0 - 600.0  # nothing open anywhere: the most advanced partition
