"""Under secret routes no vehicle's timestamps decide whether another vehicle's readings are
kept (docs/math.md §14.7): offline every reading goes to its window, and in the service a
reading is late only by the public clock."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from stream_dp.config import load_settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.engine import OfflineEngine
from stream_dp.secret_routes import window as secret_window
from stream_dp.windows.columns import WindowColumns
from stream_dp.windows.state import PartitionState
from stream_dp.worker.idle_rule import InputState
from stream_dp.worker.ingest import IngestProcessor
from stream_dp.worker.metrics import ServiceMetrics
from stream_dp.worker.recovery import PartitionRuntime

HOUR = 3600
START = 1_700_000_000 - 1_700_000_000 % (4 * HOUR)

Kept = set[tuple[int, str, str, int, float]]


def crowd() -> list[dict[str, Any]]:
    return [{"vehicle_id": f"u{i}", "ts": START + 2 * HOUR + i, "lat": 40.7, "lon": -74.0,
             "speed": 20.0} for i in range(300)]  # fmt: skip


def future_first() -> list[dict[str, Any]]:
    """The neighbour: one vehicle whose only reading is hours ahead, first in the input."""
    return [{"vehicle_id": "y", "ts": START + 5 * HOUR, "lat": 40.7, "lon": -74.0,
             "speed": 60.0}, *crowd()]  # fmt: skip


def kept_by_engine(rows: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> Kept:
    """Every (window, vehicle, cell, readings, sum) the releaser was handed, vehicle y's
    entries left out."""
    kept: Kept = set()
    release = secret_window.release_secret_window

    def spy(start: int, columns: WindowColumns, *args: Any) -> Any:
        for i in range(len(columns)):
            vehicle = columns.vehicle_names[columns.vehicle_code[i]]
            if vehicle != "y":
                cell = columns.cell_names[columns.cell_code[i]]
                kept.add((start, vehicle, cell, int(columns.count[i]), float(columns.total[i])))
        return release(start, columns, *args)

    monkeypatch.setattr(secret_window, "release_secret_window", spy)
    settings = load_settings(
        privacy_model="secret-routes", vehicle_budget=4.0, budget_period_seconds=4 * HOUR,
        window_seconds=HOUR, contribution_cells=1, resolution=7, accounting_delta=1e-6,
    )  # fmt: skip
    span = (START, START + 6 * HOUR)
    engine = OfflineEngine(settings, LaplaceNoise(RandomSource.seeded_for_tests(1)), span=span)
    for _ in (*engine.feed(rows, batch_size=50), *engine.finish(True)):
        pass
    return kept


def test_a_future_reading_first_keeps_every_other_vehicles_readings(monkeypatch) -> None:
    without = kept_by_engine(crowd(), monkeypatch)
    with_y = kept_by_engine(future_first(), monkeypatch)
    assert len(without) == 300
    assert with_y == without


def test_a_public_clock_state_is_moved_by_the_clock_not_by_readings() -> None:
    state = PartitionState(HOUR, 600.0, 8, public_clock=True)
    state.add_batch(["y"], [5.0 * HOUR], ["c"], [60.0])
    outcome = state.add_batch(["u"], [2.0 * HOUR], ["c"], [20.0])
    assert (outcome.accepted, outcome.late) == (1, 0)
    assert state.due_windows() == []  # no clock yet: nothing closes
    state.advance_clock(3.0 * HOUR + 600.0)  # the clock passes hour 2's end plus grace
    assert state.due_windows() == [2 * HOUR]
    state.close(2 * HOUR)
    outcome = state.add_batch(["v"], [2.5 * HOUR], ["c"], [20.0])
    assert (outcome.accepted, outcome.late) == (0, 1)  # late by the clock alone
    state.advance_clock(HOUR)  # never backwards
    assert state.watermark == 3.0 * HOUR


def test_the_service_closes_secret_windows_by_the_clock_never_as_idle() -> None:
    """A quiet, caught-up partition (idle under public occupancy) keeps its window open
    until the wall clock passes its end plus grace; then the tick closes it, not forced."""
    settings = load_settings(privacy_model="secret-routes", vehicle_budget=4.0,
                             idle_close_seconds=5.0, window_seconds=HOUR)  # fmt: skip
    ingest = IngestProcessor(settings, conn=None, producer=None, metrics=ServiceMetrics())
    state = PartitionState.for_settings(settings)
    now = time.time()
    recent = now - now % HOUR  # this hour: open by the clock
    state.add_batch(["v", "w"], [100.0, recent], ["c", "c"], [10.0, 20.0])
    ingest.partitions[0] = PartitionRuntime(state, applied_offset=9,
                                            last_event_wall=time.monotonic() - 600)  # fmt: skip
    ingest.partitions[0].quiet_since = time.monotonic() - 600
    calls: list[tuple[list[int], bool]] = []

    async def close_windows(partition: int, runtime: Any, windows: list[int],
                            forced: bool) -> None:  # fmt: skip
        calls.append((windows, forced))

    async def input_state(partition: int) -> InputState:
        return InputState(10, 10, 0.1)

    ingest._close_windows = close_windows  # type: ignore[method-assign]
    asyncio.run(ingest.tick([0], input_state))
    assert calls == [([0], False)]  # the 1970 window by the clock; this hour's stays open
    assert state.watermark == pytest.approx(time.time() - settings.grace_seconds, abs=60)
