"""The declared replay clock of secret routes (docs/math.md §14.7; ``clock_start``,
``clock_speed``): its arithmetic, the settings refused naming the field, and a reading that
arrives after the replay clock closed its window is late, counted, never released."""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass
from typing import Any

import orjson
import pytest

from stream_dp.commands import demo, demo_secret, serve
from stream_dp.commands.shared import CliError
from stream_dp.config import ConfigError, load_settings
from stream_dp.windows.state import PartitionState
from stream_dp.worker.idle_rule import InputState
from stream_dp.worker.ingest import IngestProcessor
from stream_dp.worker.metrics import ServiceMetrics
from stream_dp.worker.recovery import PartitionRuntime
from stream_dp.worker.service_clock import ServiceClock

HOUR = 3600
#: 2026-01-05 07:00 UTC.
START = 1_767_596_400
SECRET = {"privacy_model": "secret-routes", "vehicle_budget": 4.0, "window_seconds": HOUR}


class FakeMonotonic:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_the_replay_clock_stands_at_its_start_then_runs_speed_times_real_time() -> None:
    real = FakeMonotonic()
    clock = ServiceClock(start=START, speed=360.0, wall=lambda: 5.0, monotonic=real)
    real.t = 2000.0
    assert clock.now() == START  # not begun: at its start
    clock.begin()  # t0 = 2000
    real.t = 2000.5
    assert clock.now() == START + 180.0
    real.t = 2010.0
    clock.begin()  # a later tick leaves t0 alone
    assert clock.now() == START + 3600.0
    assert ServiceClock(wall=lambda: 5.0, monotonic=real).now() == 5.0  # none: the wall clock


def test_the_clock_settings_read_rfc3339_or_epoch_seconds(monkeypatch) -> None:
    assert load_settings(**SECRET, clock_start="2026-01-05T07:00:00Z").clock_start == START
    assert load_settings(**SECRET, clock_start="2026-01-05T02:00:00-05:00").clock_start == START
    monkeypatch.setenv("STREAM_DP_CLOCK_START", str(START))
    monkeypatch.setenv("STREAM_DP_CLOCK_SPEED", "60")
    settings = load_settings(**SECRET)
    assert (settings.clock_start, settings.clock_speed) == (START, 60.0)
    clock = ServiceClock.for_settings(settings)
    assert (clock.start, clock.speed) == (START, 60.0)
    assert ServiceClock.for_settings(load_settings(**SECRET)).start is not None  # the env's
    monkeypatch.setenv("STREAM_DP_CLOCK_START", "none")
    monkeypatch.delenv("STREAM_DP_CLOCK_SPEED")
    assert load_settings(**SECRET).clock_start is None
    assert load_settings(**SECRET).to_env()["STREAM_DP_CLOCK_START"] == "none"


@pytest.mark.parametrize(
    ("values", "field", "reason"),
    [({"clock_start": "2026-01-05T07:00:00"}, "clock_start", "UTC offset"),
     ({"clock_start": "monday"}, "clock_start", "RFC 3339 or epoch seconds"),
     ({"clock_start": START, "clock_speed": 0}, "clock_speed", "> 0"),
     ({"clock_start": START, "clock_speed": -2}, "clock_speed", "> 0"),
     ({"clock_speed": 60}, "clock_speed", "needs clock_start")],
)  # fmt: skip
def test_bad_clock_settings_are_refused_naming_the_field(values, field, reason) -> None:
    with pytest.raises(ConfigError, match=f"invalid setting {field} .*{reason}"):
        load_settings(**SECRET, **values)


def test_a_replay_clock_is_refused_under_public_occupancy() -> None:
    with pytest.raises(ConfigError, match="clock_start .*without privacy_model secret-routes"):
        load_settings(clock_start=START)


def parsed(command: Any, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    return parser.parse_args(argv)


def test_serve_takes_the_clock_options_and_refuses_a_speed_alone() -> None:
    flags = ("--privacy-model", "secret-routes", "--vehicle-budget", "4")
    args = parsed(serve, "serve", *flags, "--clock-start", "2026-01-05T07:00:00Z",
                  "--clock-speed", "120")  # fmt: skip
    settings = serve.serve_settings(args)
    assert (settings.clock_start, settings.clock_speed) == (START, 120.0)
    with pytest.raises(CliError, match=r"clock_speed \(--clock-speed .*needs clock_start"):
        serve.serve_settings(parsed(serve, "serve", *flags, "--clock-speed", "120"))


def test_the_secret_demo_declares_its_clock_at_the_citys_first_window() -> None:
    settings = demo.demo_settings(parsed(demo, "demo", "--privacy-model", "secret-routes"))
    assert settings.clock_start == demo_secret.CITY_START
    assert settings.clock_speed == HOUR / demo_secret.SECONDS_PER_WINDOW
    readings = demo_secret.dense_city_readings(1)
    assert min(r["ts"] for r in readings) >= settings.clock_start
    # throttled: the clock runs at most half as fast as the readings are produced
    hours, rate = 2, 1000.0
    slow = demo.demo_settings(parsed(demo, "demo", "--privacy-model", "secret-routes",
                                     "--hours", str(hours), "--rate", str(rate)))  # fmt: skip
    produced_in = hours * demo_secret.DENSE_VEHICLES * demo_secret.READINGS_PER_HOUR / rate
    assert slow.clock_speed == pytest.approx(hours * HOUR / produced_in / 2)
    assert demo.demo_settings(parsed(demo, "demo")).clock_start is None  # public: no clock


@dataclass
class Message:
    offset: int
    value: bytes


class Producer:
    async def send(self, topic: str, value: bytes, partition: int) -> asyncio.Future[Any]:
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def reading(vehicle: str, ts: float) -> bytes:
    return orjson.dumps({"vehicle_id": vehicle, "ts": ts, "lat": 40.7, "lon": -74.0,
                         "speed": 20.0})  # fmt: skip


def test_a_reading_after_the_replay_clock_closed_its_window_is_late_never_released() -> None:
    """Old data on a replay clock from its first hour: readings are kept until the clock
    passes their window's end plus grace; one arriving after that is counted late and goes
    to no later window."""
    settings = load_settings(**SECRET, clock_start=START, clock_speed=HOUR / 10)
    ingest = IngestProcessor(settings, conn=None, producer=Producer(), metrics=ServiceMetrics())
    real = FakeMonotonic()
    ingest.clock.monotonic = real
    state = PartitionState.for_settings(settings)
    runtime = ingest.partitions[0] = PartitionRuntime(state)
    closed: list[tuple[list[int], bool]] = []

    async def close_windows(partition: int, runtime: Any, windows: list[int],
                            forced: bool) -> None:  # fmt: skip
        closed.append((windows, forced))
        for start in windows:
            runtime.state.close(start)

    async def input_state(partition: int) -> InputState:
        return InputState(10, 10, 0.1)

    ingest._close_windows = close_windows  # type: ignore[method-assign]

    async def apply(offset: int, *values: bytes) -> None:
        sends: list[asyncio.Future[Any]] = []
        await ingest._process_partition(0, runtime, [Message(offset, v) for v in values], sends)
        await asyncio.gather(*sends)

    async def scenario() -> None:
        await apply(0, reading("a", START + 100), reading("b", START + 2 * HOUR))
        await ingest.tick([0], input_state)  # the clock begins at START
        real.t += 1.0  # START + 360 s: hour 0 is still open
        await ingest.tick([0], input_state)
        assert sorted(state.open) == [START, START + 2 * HOUR] and not closed[-1][0]
        real.t += 10.0 + 600 / 360  # past hour 0's end plus grace
        await ingest.tick([0], input_state)
        assert closed[-1] == ([START], False)
        await apply(1, reading("c", START + 200), reading("d", START + 2 * HOUR + 5))

    asyncio.run(scenario())
    assert state.late_by_window == {START: 1}
    late = ingest.metrics.readings.labels("late")._value.get()
    accepted = ingest.metrics.readings.labels("accepted")._value.get()
    assert (accepted, late) == (3, 1)
    assert START not in state.open  # c is in no window to release
    assert len(state.open[START + 2 * HOUR]) == 2  # b and d, kept by the clock
