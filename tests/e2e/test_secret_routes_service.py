"""``serve`` under the secret-routes model (docs/math.md §14) through the embedded broker:
every window of the period released once, an empty one too, and the period's window count
rebuilt from the release log after a restart, never lower than it was.

The readings are old, so the worker runs on a declared replay clock (§14.7) starting at
their first window, a window every :data:`SECONDS_PER_WINDOW` s; each test produces the
readings before the worker whose clock closes their windows starts."""

from __future__ import annotations

from typing import Any

import pytest

from stream_dp.config import Settings, default_target_mean_error
from tests.e2e.service_harness import HOUR, create_topics, produce, start_worker, wait_for_windows
from tests.support.readings import START, synthetic_readings
from tests.support.settings import service_settings

pytestmark = [pytest.mark.broker, pytest.mark.slow]

MODEL = 'privacy_model="secret-routes"'
#: Real seconds per hourly window of the replay clock: far more than a worker needs to
#: consume the readings produced before it starts (none is late), and than the tests need to
#: see a window released before the clock closes the next (the counts are exact).
SECONDS_PER_WINDOW = 15.0


def secret_settings(prefix: str) -> Settings:
    """Hourly windows, a six-hour period, a budget large enough for the small data here to
    pass the threshold, and the replay clock from the data's first hour."""
    return service_settings(
        prefix, privacy_model="secret-routes", vehicle_budget=600.0,
        target_mean_error=default_target_mean_error(65.0),
        variance_share=0.0, window_seconds=HOUR, budget_period_seconds=6 * HOUR,
        clock_start=START, clock_speed=HOUR / SECONDS_PER_WINDOW,
    )  # fmt: skip


def hours(readings: list[dict[str, Any]], *keep: int) -> list[dict[str, Any]]:
    """The readings of the hours ``keep`` (counted from the first reading's hour)."""
    first = min(r["ts"] for r in readings) // HOUR
    return [r for r in readings if r["ts"] // HOUR - first in keep]


def summaries(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((r for r in records if r["type"] == "window"), key=lambda r: r["window_start"])


def test_serve_releases_every_window_of_the_period_once(kafka, topic_prefix, tmp_path):
    settings = secret_settings(topic_prefix)
    create_topics(kafka, settings)
    readings = synthetic_readings(n_vehicles=60, hours=4, per_hour=600, seed=4)
    produce(kafka, settings.topic_readings, hours(readings, 0, 1, 3))  # hour 2 empty
    worker = start_worker(kafka.bootstrap_servers, settings, tmp_path)
    try:
        worker.wait_ready()
        records = wait_for_windows(kafka, settings, expected=4, worker=worker)
        windows = summaries(records)
        assert [w["windows_in_period"] for w in windows] == [1, 2, 3, 4]
        assert len({w["window_start"] for w in windows}) == len(windows)  # each once
        assert windows[2]["cells_released"] == 0  # the empty hour has its summary
        assert all(r["privacy_model"] == "secret-routes" for r in records)
        cells = [r for r in records if r["type"] == "cell"]
        assert cells and not any("n_vehicles" in r for r in cells)
        assert all(r["mean_low"] <= r["mean_high"] for r in cells)
        assert worker.metric("stream_dp_windows_released_total") == 4
        assert worker.metric("stream_dp_readings_total", 'outcome="late"') == 0
        assert worker.metric("stream_dp_cells_released_total") == len(cells)
        last = windows[-1]
        got = {
            name: worker.metric(f"stream_dp_privacy_model_{name}", MODEL)
            for name in ("window_epsilon", "window_delta", "period_epsilon", "period_delta")
        }
        assert got["window_epsilon"] == pytest.approx(last["epsilon_window"])
        assert got["window_delta"] == pytest.approx(last["delta_window"])
        assert got["period_epsilon"] == pytest.approx(last["epsilon_period"])
        assert got["period_delta"] == pytest.approx(last["delta_period"])
        assert windows[0]["epsilon_period"] < last["epsilon_period"] <= 600.0
    finally:
        worker.stop()


def test_a_restart_keeps_the_period_count(kafka, topic_prefix, tmp_path):
    """The second worker rebuilds the period's window count from the release log: the next
    windows count on from it (the empty hour between them too), never from one again."""
    settings = secret_settings(topic_prefix)
    create_topics(kafka, settings)
    readings = synthetic_readings(n_vehicles=40, hours=4, per_hour=300, seed=6)
    produce(kafka, settings.topic_readings, hours(readings, 0, 1))
    first = start_worker(kafka.bootstrap_servers, settings, tmp_path, "first")
    try:
        first.wait_ready()
        before = summaries(wait_for_windows(kafka, settings, expected=2, worker=first))
        assert [w["windows_in_period"] for w in before] == [1, 2]
    finally:
        first.kill()
    # The second worker's clock starts again at hour 0: the windows released before stay
    # closed (the state's watermark never goes back, the release log releases a window once).
    produce(kafka, settings.topic_readings, hours(readings, 3))
    second = start_worker(kafka.bootstrap_servers, settings, tmp_path, "second")
    try:
        second.wait_ready()
        windows = summaries(wait_for_windows(kafka, settings, expected=4, worker=second))
        assert [w["windows_in_period"] for w in windows] == [1, 2, 3, 4]
        assert len({w["window_start"] for w in windows}) == len(windows)  # each once
        accepted = second.metric("stream_dp_readings_total", 'outcome="accepted"')
        assert accepted == len(hours(readings, 3))  # hour 3's readings were all in time
        assert second.metric("stream_dp_readings_total", 'outcome="late"') == 0
        period = second.metric("stream_dp_privacy_model_period_epsilon", MODEL)
        assert period == pytest.approx(windows[-1]["epsilon_period"])
    finally:
        second.stop()
