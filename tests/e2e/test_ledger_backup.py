"""Backup and restore of the release log (`stream-dp ledger`) across a lost broker.

The embedded Tansu broker keeps everything in memory: stopping it loses every topic, as a
broker that lost its disks would. Each test starts brokers of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.embedded_broker import EmbeddedBroker
from stream_dp.wire import internal_records as rec
from stream_dp.worker.ledger_file import read_ledger_file
from stream_dp.worker.release_log import ReleaseLogIndex
from stream_dp.worker.release_snapshots import is_release_snapshot
from tests.e2e.service_harness import (
    HOUR,
    create_topics,
    produce,
    read_releases,
    start_worker,
    wait_for_windows,
)
from tests.e2e.waiting import PATIENCE_S
from tests.support.readings import START, synthetic_readings
from tests.support.settings import service_settings

pytestmark = [pytest.mark.broker, pytest.mark.slow]
REQUIRE = {"STREAM_DP_REQUIRE_EXISTING_LEDGER": "true"}
LOSS = "stream_dp_vehicle_privacy_loss_period_max_epsilon"
SPENT = "stream_dp_privacy_budget_cumulative_epsilon"


def ledger_cli(settings, bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **settings.to_env(), "STREAM_DP_KAFKA_EMBEDDED": "true"}
    env.pop("STREAM_DP_KAFKA_BOOTSTRAP", None)
    return subprocess.run(
        [sys.executable, "-m", "stream_dp.cli", "ledger", *args, "--bootstrap", bootstrap],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def stored(path: Path) -> dict[int, tuple]:
    """Each window's winning stored copy in a ledger file: its attempt, its records and
    the per-vehicle losses charged for it."""
    index = ReleaseLogIndex()
    out = {}
    for record in read_ledger_file(path)[1]:
        won = index.add(record.offset, record.value)
        if won is not None:
            out[won.release.window_start] = (won.attempt, won.release.records, won.loss)
    return out


def stored_copies(path: Path) -> list[tuple[str, int]]:
    """Every complete stored payload in a ledger file, losing copies included: its kind and
    window."""
    assembler = rec.PartAssembler()
    out = []
    for record in read_ledger_file(path)[1]:
        if is_release_snapshot(record.value):
            continue
        whole = assembler.add(rec.decode(record.value))
        if whole is not None:
            kind = whole[0]["kind"]
            payload = rec.loss_payload(whole) if kind == "loss" else rec.release_payload(whole)
            start = payload.window_start if kind == "loss" else payload["window_start"]
            out.append((kind, start))
    return out


def wait_for_metric(worker, name: str, value: float, labels: str = "", timeout=PATIENCE_S) -> None:
    deadline = time.monotonic() + timeout
    while worker.metric(name, labels) != value and time.monotonic() < deadline:
        time.sleep(0.3)
    assert worker.metric(name, labels) == value, worker.log()


def test_export_lose_the_broker_import_restart(topic_prefix, tmp_path):
    settings = service_settings(topic_prefix)
    readings = synthetic_readings(n_vehicles=12, hours=3, per_hour=150, seed=41)
    backup = tmp_path / "ledger.jsonl"
    with EmbeddedBroker() as first:
        kafka = KafkaConnection(first.bootstrap, embedded=True)
        create_topics(kafka, settings)
        worker = start_worker(first.bootstrap, settings, tmp_path, "first")
        try:
            worker.wait_ready()
            produce(kafka, settings.topic_readings, readings)
            before = wait_for_windows(kafka, settings, expected=3, worker=worker)
            wait_for_metric(worker, "stream_dp_windows_released_total", 3)
            loss, spent = worker.metric(LOSS), worker.metric(SPENT)
        finally:
            worker.stop()
        done = ledger_cli(settings, first.bootstrap, "export", str(backup))
        assert done.returncode == 0, done.stderr
    assert loss > 0 and spent > 0
    windows = stored(backup)
    assert len(windows) == 3 and all(w[2] is not None for w in windows.values())

    with EmbeddedBroker() as second:  # the first broker's topics are gone
        kafka = KafkaConnection(second.bootstrap, embedded=True)
        create_topics(kafka, settings)
        refused = start_worker(second.bootstrap, settings, tmp_path, "refused", **REQUIRE)
        refused.process.wait(timeout=PATIENCE_S)
        assert refused.process.returncode == 1, refused.log()
        text = refused.log_path.read_text()
        lines = [line for line in text.splitlines() if "require_existing_ledger" in line]
        assert len(lines) == 1 and "release log" in lines[0] and "empty" in lines[0], text
        assert "releaser ready" not in text

        done = ledger_cli(settings, second.bootstrap, "import", str(backup))
        assert done.returncode == 0, done.stderr
        again = ledger_cli(settings, second.bootstrap, "import", str(backup))
        assert again.returncode == 2 and len(again.stderr.splitlines()) == 1, again.stderr
        assert "not empty" in again.stderr

        worker = start_worker(second.bootstrap, settings, tmp_path, "restored", **REQUIRE)
        try:
            worker.wait_ready()
            # every vehicle's loss and the total as before the broker was lost
            assert worker.metric(LOSS) == pytest.approx(loss)
            assert worker.metric(SPENT) == pytest.approx(spent)
            # the same readings again, and one more hour: only the new hour is released
            new_hour = synthetic_readings(12, hours=1, per_hour=150, start=START + 3 * HOUR)
            produce(kafka, settings.topic_readings, readings)
            produce(kafka, settings.topic_readings, new_hour)
            total = len(readings) + len(new_hour)
            wait_for_metric(worker, "stream_dp_readings_total", total, 'outcome="accepted"')
            wait_for_metric(worker, "stream_dp_windows_released_total", 1)
            after = read_releases(kafka, settings)
        finally:
            worker.stop()
        restored = tmp_path / "after.jsonl"
        assert ledger_cli(settings, second.bootstrap, "export", str(restored)).returncode == 0
        published = read_releases(kafka, settings)
    now = stored(restored)
    assert {w: now[w] for w in windows} == windows  # the old windows' copies, unchanged
    assert len(now) == 4
    # no old window computed again: one loss and one release stored per window, in all
    copies = stored_copies(restored)
    assert sorted(copies) == sorted((kind, w) for w in now for kind in ("loss", "release"))
    old_ids = {r["release_id"]: r for r in before}
    new_windows = {r["window_start"] for r in after if r["release_id"] not in old_ids}
    assert len(new_windows) == 1 and new_windows.isdisjoint(windows)
    # anything of an old window on the new broker is its stored copy, re-published as is
    assert all(old_ids[r["release_id"]] == r for r in published if r["window_start"] in windows)


def test_a_new_deployment_starts_after_ledger_init(topic_prefix, tmp_path):
    """Under require_existing_ledger a first deployment runs `stream-dp ledger init` once;
    the worker then releases as usual, from the ledger it started."""
    settings = service_settings(topic_prefix)
    with EmbeddedBroker() as broker:
        kafka = KafkaConnection(broker.bootstrap, embedded=True)
        done = ledger_cli(settings, broker.bootstrap, "init")
        assert done.returncode == 0, done.stderr
        twice = ledger_cli(settings, broker.bootstrap, "init")
        assert twice.returncode == 2 and len(twice.stderr.splitlines()) == 1, twice.stderr
        worker = start_worker(broker.bootstrap, settings, tmp_path, "new", **REQUIRE)
        try:
            worker.wait_ready()
            readings = synthetic_readings(n_vehicles=10, hours=2, per_hour=100, seed=43)
            produce(kafka, settings.topic_readings, readings)
            records = wait_for_windows(kafka, settings, expected=2, worker=worker)
            spent = sum(r["privacy_loss"] for r in records if r["type"] == "window")
            wait_for_metric(worker, "stream_dp_windows_released_total", 2)
            assert spent > 0 and worker.metric(SPENT) == pytest.approx(spent)
        finally:
            worker.stop()
