"""Issue 25 item 3 on the service: a span's carry survives a worker killed between windows.

The release defers entries to the next window (spans); the worker stores each release's
carry with it in the release log and feeds it to the next window. Here a stand-in policy
(``span_stub.py``, in the worker through ``sitecustomize``) makes the first window defer all
its entries; the worker kills itself right after publishing that window, with the carry
pending; a restarted worker rebuilds the carry from the release log and must release what
the offline engine releases on the same readings, every reading in at most one record.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from stream_dp.commands.demo import replayed_readings
from stream_dp.commands.profile import BUDGET_PROFILE
from stream_dp.release import window as release_window_module
from stream_dp.release.records import rfc3339
from stream_dp.wire import internal_records as rec
from tests.e2e.service_harness import (
    create_topics,
    non_noise,
    offline_records,
    produce,
    start_worker,
    wait_for_windows,
)
from tests.e2e.span_stub import ENV, deferring
from tests.e2e.test_service_e2e import stored_log
from tests.e2e.waiting import PATIENCE_S
from tests.support.readings import START, synthetic_readings
from tests.support.settings import service_settings

pytestmark = [pytest.mark.broker, pytest.mark.slow]
HOUR = 3600
SITE = Path(__file__).parent / "span_stub_site"


def stub_env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(SITE), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, ENV: str(START)}


def test_a_pending_carry_survives_a_kill_between_windows(
    kafka, topic_prefix, tmp_path, monkeypatch
):
    settings = service_settings(topic_prefix)
    create_topics(kafka, settings)
    readings = synthetic_readings(n_vehicles=12, hours=3, per_hour=120, seed=13)
    per_hour = [sum(START + h * HOUR <= r["ts"] < START + (h + 1) * HOUR for r in readings)
                for h in range(3)]  # fmt: skip
    assert all(per_hour) and sum(per_hour) == len(readings)
    workers = []
    try:
        doomed = start_worker(
            kafka.bootstrap_servers, settings, tmp_path, "doomed",
            STREAM_DP_FAULT_INJECTION="after-published", **stub_env(),
        )  # fmt: skip
        workers.append(doomed)
        doomed.wait_ready()
        produce(kafka, settings.topic_readings, readings)
        doomed.process.wait(timeout=PATIENCE_S)  # killed itself after publishing the first window
        assert doomed.process.returncode == -signal.SIGKILL
        log = stored_log(kafka, settings)
        kinds = [kind for kind, _ in log]
        assert kinds.count("release") == 1 and "carry" in kinds  # the carry is pending
        start, carry = rec.carry_payload(log[kinds.index("carry")][1])
        assert start == START and int(carry.count.sum()) == per_hour[0]

        survivor = start_worker(
            kafka.bootstrap_servers, settings, tmp_path, "survivor", **stub_env()
        )
        workers.append(survivor)
        records = wait_for_windows(kafka, settings, expected=3, worker=survivor)
    finally:
        for worker in workers:
            worker.stop()

    # Release once: no record published twice, one summary per window.
    ids = [r["release_id"] for r in records]
    assert len(ids) == len(set(ids))
    windows = sorted((r for r in records if r["type"] == "window"), key=lambda r: r["window_start"])
    assert len(windows) == 3
    # The first window released nothing; the second pooled its carry with its own readings
    # (the restarted worker rebuilt the carry); every reading is in at most one record.
    assert [w["n_readings"] for w in windows] == [0, per_hour[0] + per_hour[1], per_hour[2]]
    assert not [r for r in records if r["type"] == "cell" and r["window_start"] == windows[0]
                ["window_start"]]  # fmt: skip
    cells = [r for r in records if r["type"] == "cell"]
    assert cells and sum(r["n_readings"] for r in cells) <= len(readings)
    # The offline engine, with the same policy, releases the same cells and counts.
    monkeypatch.setattr(
        release_window_module,
        "release_window",
        deferring(release_window_module.release_window, {START}),
    )
    offline = offline_records(settings, readings)
    assert non_noise(records) == non_noise(offline)
    assert sorted(ids) != sorted(r["release_id"] for r in offline)  # fresh noise, own ids
    # Nothing stored twice: three windows, one carry, in the release log.
    kinds = [kind for kind, _ in stored_log(kafka, settings)]
    assert kinds.count("release") == 3 and kinds.count("carry") == 1


def test_a_real_span_pending_at_a_kill_is_released_once_as_offline(kafka, topic_prefix, tmp_path):
    """The release's own spans (budget profile, busiest 4 AIS hours, spans as long as the
    replay, as the demo sets them): the first window defers every entry (held until its span
    is full), the worker dies right after publishing it, and the restarted worker releases
    the span from the stored carry as the offline engine does; every reading in at most one
    record."""
    profile = {**BUDGET_PROFILE, "max_span_hours": 4}
    settings = service_settings(topic_prefix, **profile, epsilon=1.0)
    create_topics(kafka, settings)
    readings = replayed_readings(4)
    first_hour = min(int(r["ts"]) // HOUR * HOUR for r in readings)
    offline = offline_records(settings, readings)
    spans = [r for r in offline if r["type"] == "cell" and r["window_start"] == rfc3339(first_hour)]
    assert spans and all(r["window_end"] > rfc3339(first_hour + HOUR) for r in spans)
    workers = []
    try:
        doomed = start_worker(
            kafka.bootstrap_servers, settings, tmp_path, "doomed",
            STREAM_DP_FAULT_INJECTION="after-published",
        )  # fmt: skip
        workers.append(doomed)
        doomed.wait_ready()
        produce(kafka, settings.topic_readings, readings, batch_size=200)
        doomed.process.wait(timeout=PATIENCE_S)
        assert doomed.process.returncode == -signal.SIGKILL
        log = stored_log(kafka, settings)
        kinds = [kind for kind, _ in log]
        assert kinds.count("release") == 1 and "carry" in kinds  # a span is pending
        start, carry = rec.carry_payload(log[kinds.index("carry")][1])
        assert start == first_hour and len(carry) > 0
        survivor = start_worker(kafka.bootstrap_servers, settings, tmp_path, "survivor")
        workers.append(survivor)
        records = wait_for_windows(kafka, settings, expected=4, worker=survivor)
    finally:
        for worker in workers:
            worker.stop()
    ids = [r["release_id"] for r in records]
    assert len(ids) == len(set(ids))
    assert non_noise(records) == non_noise(offline)  # cells, spans, counts, losses
    published = [r for r in records if r["type"] == "cell"]
    assert {(r["window_start"], r["window_end"], r["cell"]) for r in published} == {
        (r["window_start"], r["window_end"], r["cell"]) for r in offline if r["type"] == "cell"
    }
    assert sum(r["n_readings"] for r in published) <= len(readings)
