"""A worker's log lines, from a worker process on the broker."""

from __future__ import annotations

import json

import pytest

from tests.e2e.service_harness import create_topics, produce, start_worker, wait_for_windows
from tests.support.readings import synthetic_readings
from tests.support.settings import service_settings


@pytest.mark.broker
@pytest.mark.slow
def test_a_json_logging_worker_logs_its_broker_and_each_window_and_no_tables(
    kafka, topic_prefix, tmp_path
):
    settings = service_settings(topic_prefix, log_format="json")
    create_topics(kafka, settings)
    worker = start_worker(kafka.bootstrap_servers, settings, tmp_path)
    try:
        worker.wait_ready()
        readings = synthetic_readings(n_vehicles=8, hours=2, per_hour=100, seed=37)
        produce(kafka, settings.topic_readings, readings)
        records = wait_for_windows(kafka, settings, expected=2, worker=worker)
    finally:
        worker.stop()
    lines = [json.loads(line) for line in worker.log_path.read_text().splitlines() if line]
    messages = [line["message"] for line in lines]
    assert f"kafka bootstrap servers: {kafka.bootstrap_servers}" in messages
    windows = [r for r in records if r["type"] == "window"]
    released = [m for m in messages if m.startswith("released window ")]
    assert len(released) == len(windows) == 2
    for window, line in zip(windows, released, strict=True):
        assert line.startswith(
            f"released window {window['window_start']}: {window['cells_released']} cells, "
            f"K*epsilon {window['privacy_loss']:g}, "
        )
    assert not [m for m in messages if "Topic Partition Set" in m or "Subscription" in m]
    assert not [m for m in messages if "veh-" in m]  # never a vehicle id
