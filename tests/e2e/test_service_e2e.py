"""End to end through the real (embedded Tansu) broker: worker processes, replay, releases."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import jsonschema
import orjson
import pytest

from stream_dp.dp.noise import LaplaceNoise
from stream_dp.engine import OfflineEngine
from stream_dp.kafka.topics import faust_leader_topic
from stream_dp.windows.reject_reasons import RejectReason
from stream_dp.wire import internal_records as rec
from stream_dp.worker.release_snapshots import is_release_snapshot
from tests.e2e.service_harness import (
    create_topics,
    end_offsets,
    non_noise,
    offline_records,
    produce,
    produce_raw,
    read_releases,
    read_topic,
    start_worker,
    topic_names,
    topic_partitions,
    wait_for_commits,
    wait_for_windows,
)
from tests.e2e.waiting import PATIENCE_S, wait_until
from tests.support.readings import depot_readings, synthetic_readings
from tests.support.settings import service_settings

pytestmark = [pytest.mark.broker, pytest.mark.slow]
SCHEMA = json.loads(
    (Path(__file__).parents[2] / "stream_dp/schemas/release-record.schema.json").read_text()
)


@pytest.fixture
def release_mode():
    """Overrides of the release settings; a test of both modes parametrizes it."""
    return {}


#: The settings' own defaults (targeted adaptive cells), where service_settings pins fixed cells.
DEFAULT_MODE = {"target_mean_error": 15.0, "variance_share": 0.0}


@pytest.fixture
def setup(kafka, topic_prefix, tmp_path, release_mode):
    settings = service_settings(topic_prefix, **release_mode)
    create_topics(kafka, settings)
    workers = []

    def spawn(name="worker", **env):
        worker = start_worker(kafka.bootstrap_servers, settings, tmp_path, name, **env)
        workers.append(worker)
        return worker

    yield settings, spawn
    for worker in workers:
        worker.stop()


@pytest.mark.parametrize("release_mode", [{}, DEFAULT_MODE], ids=["fixed", "defaults"])
def test_releases_match_the_offline_engine_and_the_schema(kafka, setup):
    settings, spawn = setup
    readings = synthetic_readings(n_vehicles=30, hours=3, per_hour=400)
    worker = spawn()
    worker.wait_ready()
    produce(kafka, settings.topic_readings, readings)
    records = wait_for_windows(kafka, settings, expected=3, worker=worker)
    for record in records:
        jsonschema.validate(record, SCHEMA)
    assert non_noise(records) == non_noise(offline_records(settings, readings))
    cells = [r for r in records if r["type"] == "cell"]
    assert cells and all(0 <= r["mean"] <= settings.upper for r in cells)
    if settings.variance_share:
        assert all(0 <= r["variance"] <= settings.upper**2 / 4 for r in cells)
    else:  # the targeted default: the mean gets all of epsilon, no variance is released
        assert all(r["variance"] is None for r in cells)
        assert all(r["mean_error"] <= settings.target_mean_error for r in cells)
    assert worker.metric("stream_dp_readings_total", 'outcome="accepted"') == len(readings)
    assert worker.metric("stream_dp_windows_released_total") == 3
    spent = sum(r["privacy_loss"] for r in records if r["type"] == "window")
    assert worker.metric("stream_dp_privacy_budget_spent_epsilon_total") == pytest.approx(spent)
    assert worker.metric("stream_dp_privacy_budget_cumulative_epsilon") == pytest.approx(spent)
    windows = [r for r in records if r["type"] == "window"]
    last = windows[-1]
    assert worker.metric("stream_dp_window_privacy_loss_epsilon") == last["privacy_loss"]
    assert worker.metric("stream_dp_window_privacy_loss_unclipped_epsilon") == pytest.approx(
        last["privacy_loss_unclipped"]
    )
    assert worker.metric("stream_dp_window_error_bound") == pytest.approx(last["error_bound"])
    assert worker.metric("stream_dp_suppressed_pairs_total") == sum(
        w["suppressed_pairs"] for w in windows
    )
    assert worker.metric("stream_dp_release_latency_seconds_count") == 3
    # every window is closed now, so the gauge shows the most advanced partition
    watermark = worker.metric("stream_dp_watermark_timestamp_seconds")
    assert watermark == max(r["ts"] for r in readings) - settings.grace_seconds
    # The batch consumer commits what the state topic says was applied: everything.
    ends = end_offsets(kafka, settings.topic_readings, settings.partitions)
    assert sum(ends.values()) > 0
    group = f"{settings.app_id}-ingest"
    assert wait_for_commits(kafka, group, settings.topic_readings, ends) == ends


def test_two_workers_give_the_same_non_noise_fields_as_one(kafka, setup, topic_prefix, tmp_path):
    settings, spawn = setup
    readings = synthetic_readings(n_vehicles=40, hours=2, per_hour=500, seed=5)
    first, second = spawn("a"), spawn("b")
    first.wait_ready()
    second.wait_ready()
    produce(kafka, settings.topic_readings, readings)
    two = wait_for_windows(kafka, settings, expected=2, worker=first)
    assert non_noise(two) == non_noise(offline_records(settings, readings))
    accepted = [w.metric("stream_dp_readings_total", 'outcome="accepted"') for w in (first, second)]
    assert sum(accepted) == len(readings)
    assert min(accepted) > 0, f"one worker did all the work: {accepted}"
    # every topic the workers touched was created explicitly (none auto-created by Tansu)
    ours = {t for t in topic_names(kafka) if t.startswith(settings.app_id)}
    roles = ("readings", "dlq", "releases", "partials", "state", "release_log")
    expected = {getattr(settings, f"topic_{role}") for role in roles}
    assert ours == expected | {faust_leader_topic(settings.app_id).name}
    assert topic_partitions(kafka, faust_leader_topic(settings.app_id).name) == 1


def test_malformed_flood_goes_to_the_dead_letter_topic(kafka, setup):
    settings, spawn = setup
    worker = spawn()
    worker.wait_ready()
    good = synthetic_readings(n_vehicles=5, hours=1, per_hour=50, seed=9)
    bad_messages = [b"not json", b"[]", b'{"vehicle_id": "x"}', b"\xff\xfe"] * 50
    bad_reading = {**good[0], "lat": 123.0}
    produce_raw(kafka, settings.topic_readings, bad_messages, key=b"x")
    produce_raw(kafka, settings.topic_readings, [json.dumps([good[1], bad_reading]).encode()])
    produce(kafka, settings.topic_readings, good[2:])
    wait_for_windows(kafka, settings, expected=1, worker=worker)
    dead = read_topic(kafka, settings.topic_dlq, settings.partitions)
    assert len(dead) == len(bad_messages) + 1
    reasons = {dict(r.headers)["reason"].decode() for r in dead}
    assert reasons == {"not_json", "empty_message", "missing_field", "lat_out_of_range"}
    assert set(reasons) <= {str(reason) for reason in RejectReason}  # the offline vocabulary
    details = {dict(r.headers)["detail"].decode() for r in dead}
    assert "lat out of range [-90, 90]" in details and "ts is missing" in details
    assert worker.metric("stream_dp_readings_total", 'outcome="invalid"') == len(dead)
    assert worker.metric("stream_dp_readings_total", 'outcome="accepted"') == len(good) - 1


def test_late_readings_are_dropped_and_counted(kafka, setup):
    settings, spawn = setup
    worker = spawn()
    worker.wait_ready()
    readings = synthetic_readings(n_vehicles=5, hours=3, per_hour=60, seed=11)
    produce(kafka, settings.topic_readings, readings)
    records = wait_for_windows(kafka, settings, expected=3, worker=worker)
    late = [{**r, "speed": 1.0} for r in readings[:7]]  # the first window: released already
    produce(kafka, settings.topic_readings, late)
    wait_until(
        lambda: worker.metric("stream_dp_readings_total", 'outcome="late"') == len(late),
        f"{len(late)} late readings counted",
    )
    assert read_releases(kafka, settings) == records  # nothing re-released


@pytest.mark.parametrize("crash", ["after-stored", "after-published"])
def test_release_once_across_a_crash(kafka, setup, crash):
    settings, spawn = setup
    readings = synthetic_readings(n_vehicles=12, hours=2, per_hour=120, seed=13)
    doomed = spawn("doomed", STREAM_DP_FAULT_INJECTION=crash)
    doomed.wait_ready()
    produce(kafka, settings.topic_readings, readings)
    doomed.process.wait(timeout=PATIENCE_S)  # it kills itself at the crash point
    assert doomed.process.returncode == -signal.SIGKILL
    log = stored_log(kafka, settings)
    assert [kind for kind, _ in log] == ["loss", "release"]  # window 1 stored before the crash
    stored = rec.release_payload(log[1][1])
    survivor = spawn("survivor")
    records = wait_for_windows(kafka, settings, expected=2, worker=survivor)
    by_id: dict[str, set] = {}
    for r in records:
        by_id.setdefault(r["release_id"], set()).add(
            (r["mean"], r["variance"]) if r["type"] == "cell" else r["K"]
        )
    assert all(len(v) == 1 for v in by_id.values()), "a release id was published with two values"
    for cell in stored["cells"]:
        published = [r for r in records if r["release_id"] == cell["release_id"]]
        assert published and all(r["mean"] == cell["mean"] for r in published)
    assert [kind for kind, _ in stored_log(kafka, settings)] == ["loss", "release"] * 2
    # Budget: the gauge holds the whole log (restored), the counter only this process's
    # releases, so summing counters over restarts and workers never counts a window twice.
    total = sum(r["privacy_loss"] for r in records if r["type"] == "window")
    before_crash = stored["summary"]["privacy_loss"]
    assert 0 < before_crash < total
    assert survivor.metric("stream_dp_privacy_budget_cumulative_epsilon") == pytest.approx(total)
    assert survivor.metric("stream_dp_privacy_budget_spent_epsilon_total") == pytest.approx(
        total - before_crash
    )
    # the survivor rebuilt the budget ledger from the release log: its rolling maximum
    # includes the window the doomed worker released
    engine = OfflineEngine(settings, LaplaceNoise())
    for _ in (*engine.feed(readings), *engine.finish()):
        pass
    last = engine.ledger.entries()[-1].window_start
    assert survivor.metric("stream_dp_vehicle_privacy_loss_period_max_epsilon") == pytest.approx(
        engine.ledger.max_loss(last)
    )
    assert engine.ledger.max_loss(last) > max(e.max_loss for e in engine.ledger.entries())


def stored_log(kafka, settings):
    """The release log as (kind, payload parts) of each complete stored payload."""
    assembler = rec.PartAssembler()
    out = []
    for record in read_topic(kafka, settings.topic_release_log):
        if is_release_snapshot(record.value):
            continue
        whole = assembler.add(rec.decode(record.value))
        if whole is not None:
            out.append((whole[0]["kind"], whole))
    return out


def cli_release(settings, readings, tmp_path):
    """``stream-dp release`` on the same readings (a JSONL file) with the same parameters:
    its records and the accepted count it reports."""
    source, out = tmp_path / "readings.jsonl", tmp_path / "offline.jsonl"
    source.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in readings))
    options = ["--epsilon", str(settings.epsilon), "--upper", str(settings.upper),
               "--resolution", str(settings.resolution), "--partitions",
               str(settings.partitions), "--prefix-limit", str(settings.prefix_limit)]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "stream_dp.cli", "release", str(source), "--out", str(out),
         *options],
        env={**os.environ, **settings.to_env()},  # every other setting too (the mode)
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    accepted = int(re.search(r"readings accepted (\d+)", done.stderr).group(1))
    return [orjson.loads(line) for line in out.read_bytes().splitlines()], accepted


@pytest.mark.parametrize("kill", ["crash-point", "external"])
def test_sigkill_during_ingestion_loses_no_accepted_reading(kafka, setup, tmp_path, kill):
    """``crash-point``: the worker kills itself once its third batch's state is durable and
    before that batch's offsets are committed (120 messages in batches of at most 20: the
    middle of ingestion, every time). ``external``: SIGKILL from outside as soon as readings
    are being accepted, while the producer is still sending."""
    settings, spawn = setup
    readings = synthetic_readings(n_vehicles=25, hours=2, per_hour=3000, seed=17)
    if kill == "crash-point":
        first = spawn(
            "first", STREAM_DP_FAULT_INJECTION="after-durable-batch:3", STREAM_DP_BATCH_SIZE="20"
        )
        first.wait_ready()
        produce(kafka, settings.topic_readings, readings)
        first.process.wait(timeout=PATIENCE_S)
        ends = end_offsets(kafka, settings.topic_readings, settings.partitions)
        committed = wait_for_commits(
            kafka, f"{settings.app_id}-ingest", settings.topic_readings, ends, timeout=0
        )
        assert committed != ends, "the whole input was committed before the crash"
    else:
        first = spawn("first")
        first.wait_ready()
        producing = threading.Thread(
            target=produce, args=(kafka, settings.topic_readings, readings)
        )
        producing.start()
        accepted_at_kill = 0.0
        deadline = time.monotonic() + PATIENCE_S
        while not accepted_at_kill and time.monotonic() < deadline:
            accepted_at_kill = first.metric("stream_dp_readings_total", 'outcome="accepted"')
            time.sleep(0.02)
        first.kill()
        producing.join(timeout=PATIENCE_S)
        assert not producing.is_alive()
        assert accepted_at_kill > 0, "no reading was accepted before the kill"
    assert first.process.returncode == -signal.SIGKILL
    assert read_topic(kafka, settings.topic_state, settings.partitions), "no state written"
    second = spawn("second")
    second.wait_ready()
    records = wait_for_windows(kafka, settings, expected=2, worker=second)
    offline, offline_accepted = cli_release(settings, readings, tmp_path)
    assert offline_accepted == len(readings)
    assert non_noise(records) == non_noise(offline)
    used = sum(r["n_readings"] for r in records if r["type"] == "cell")
    assert used == sum(r["n_readings"] for r in offline if r["type"] == "cell") > 0


def test_a_capped_budget_gives_the_offline_engines_releases(kafka, topic_prefix, tmp_path):
    """With a per-vehicle cap the service withholds the same pairs as the offline engine
    and exports what it withheld."""
    settings = service_settings(
        topic_prefix, epsilon=0.5, budget_cap=1.0, budget_period_seconds=3 * 3600
    )
    create_topics(kafka, settings)
    readings = synthetic_readings(n_vehicles=20, hours=3, per_hour=300, seed=3)
    worker = start_worker(kafka.bootstrap_servers, settings, tmp_path)
    try:
        worker.wait_ready()
        produce(kafka, settings.topic_readings, readings)
        records = wait_for_windows(kafka, settings, expected=3, worker=worker)
        assert non_noise(records) == non_noise(offline_records(settings, readings))
        withheld = sum(r["pairs_withheld_budget"] for r in records if r["type"] == "window")
        assert withheld > 0
        assert worker.metric("stream_dp_budget_withheld_pairs_total") == withheld
        period_max = worker.metric("stream_dp_vehicle_privacy_loss_period_max_epsilon")
        assert 0 < period_max <= 1.0
    finally:
        worker.stop()


def test_a_rival_copy_stored_first_is_the_one_published(kafka, setup, tmp_path):
    """Two releasers racing for a window (a leadership change mid-release): the copy
    stored first in the release log is published, the later one never is."""
    settings, spawn = setup
    readings = synthetic_readings(n_vehicles=12, hours=2, per_hour=120, seed=21)
    gate = tmp_path / "go"
    worker = spawn("paused", STREAM_DP_FAULT_INJECTION=f"before-stored:{gate}")
    worker.wait_ready()
    produce(kafka, settings.topic_readings, readings)
    paused = Path(f"{gate}.paused")
    deadline = time.monotonic() + PATIENCE_S
    while not paused.exists():  # the worker computed window 1 and waits before storing it
        assert time.monotonic() < deadline and worker.process.poll() is None, worker.log()
        time.sleep(0.1)
    engine = OfflineEngine(settings, LaplaceNoise())
    rival = [*engine.feed(readings), *engine.finish()][0]  # same window, other noise
    produce_raw(
        kafka,
        settings.topic_release_log,
        rec.encode_loss(rival.loss, "rival") + rec.encode_release(rival.to_json_obj(), "rival"),
    )
    gate.touch()
    records = wait_for_windows(kafka, settings, expected=2, worker=worker)
    rival_means = {c["release_id"]: c["mean"] for c in rival.cells}
    first = [r for r in records if r["release_id"] in rival_means]
    assert first and all(r["mean"] == rival_means[r["release_id"]] for r in first)
    values: dict[str, set] = {}
    for r in records:
        values.setdefault(r["release_id"], set()).add(r.get("mean", r["K"]))
    assert all(len(v) == 1 for v in values.values())
    kinds = [
        (kind, rec.attempt_of(parts) == "rival") for kind, parts in stored_log(kafka, settings)
    ]
    assert kinds[:2] == [("loss", True), ("release", True)] and len(kinds) == 6
    # The window the rival stored counts in the log's total, not in this worker's counter.
    windows = [r for r in records if r["type"] == "window"]
    total = sum(w["privacy_loss"] for w in windows)
    assert worker.metric("stream_dp_privacy_budget_cumulative_epsilon") == pytest.approx(total)
    assert worker.metric("stream_dp_privacy_budget_spent_epsilon_total") == pytest.approx(
        total - rival.summary["privacy_loss"]
    )


def test_a_failed_window_is_contained_and_never_published_twice(kafka, setup):
    """Issue 21: ``release-error:2`` makes the second window's release computation raise.
    Window 2 is published as failed (summary only), windows 1, 3 and 4 normally, the worker
    keeps running, and a restart publishes nothing again."""
    settings, spawn = setup
    readings = synthetic_readings(n_vehicles=20, hours=4, per_hour=300, seed=4)
    worker = spawn("faulty", STREAM_DP_FAULT_INJECTION="release-error:2")
    worker.wait_ready()
    produce(kafka, settings.topic_readings, readings)
    records = wait_for_windows(kafka, settings, expected=4, worker=worker)
    windows = [r for r in records if r["type"] == "window"]
    assert [w["status"] for w in windows] == ["released", "failed", "released", "released"]
    failed = windows[1]
    assert failed["error"] == "InjectedReleaseError" and failed["cells_released"] == 0
    for record in records:
        jsonschema.validate(record, SCHEMA)
    cells_by_window = {w["window_start"]: 0 for w in windows}
    for r in records:
        if r["type"] == "cell":
            cells_by_window[r["window_start"]] += 1
    assert [cells_by_window[w["window_start"]] for w in windows] == [
        w["cells_released"] for w in windows
    ]
    assert cells_by_window[failed["window_start"]] == 0
    assert all(cells_by_window[w["window_start"]] > 0 for w in windows if w is not failed)
    # The released windows are the offline engine's (no budget cap: a failure changes no
    # other window's cells).
    offline = non_noise(offline_records(settings, readings))
    assert {k: v for k, v in non_noise(records).items() if k[0] != failed["window_start"]} == {
        k: v for k, v in offline.items() if k[0] != failed["window_start"]
    }
    assert worker.process.poll() is None, worker.log()
    assert worker.metric("stream_dp_release_failures_total") == 1
    assert worker.metric("stream_dp_windows_released_total") == 3
    spent = sum(w["privacy_loss"] for w in windows)
    assert failed["privacy_loss"] > 0
    assert worker.metric("stream_dp_privacy_budget_cumulative_epsilon") == pytest.approx(spent)
    failure_lines = [line for line in worker.log().splitlines() if "InjectedReleaseError" in line]
    assert len(failure_lines) == 1, worker.log()
    assert failed["window_start"] in failure_lines[0] and "Traceback" not in worker.log()
    # Stored once, like a release (its conservative loss first), never retried.
    assert [kind for kind, _ in stored_log(kafka, settings)] == ["loss", "release"] * 4
    worker.stop()
    restarted = spawn("restarted", STREAM_DP_FAULT_INJECTION="release-error:1")
    restarted.wait_ready()
    wait_until(
        lambda: (
            restarted.metric("stream_dp_privacy_budget_cumulative_epsilon") == pytest.approx(spent)
        ),
        "the ledger rebuilt from the release log",
    )
    time.sleep(5)  # time to (wrongly) compute or re-publish something: nothing may appear
    assert restarted.process.poll() is None, restarted.log()
    again = read_releases(kafka, settings)
    assert len(again) == len(records)
    assert [r["release_id"] for r in again].count(failed["release_id"]) == 1
    assert [kind for kind, _ in stored_log(kafka, settings)] == ["loss", "release"] * 4
    assert restarted.metric("stream_dp_release_failures_total") == 0
    assert restarted.metric("stream_dp_privacy_budget_cumulative_epsilon") == pytest.approx(spent)


def test_the_depot_is_released_by_the_service_with_cummings(kafka, topic_prefix, tmp_path):
    """Issue 21's depot (8 buses with 100-121 readings among 20 cars with 3 in one
    cell-hour, then three ordinary hours) with cummings, delta 1e-6, default resolution:
    all four windows released, no worker exit."""
    settings = service_settings(topic_prefix, mean_mechanism="cummings", delta=1e-6, resolution=8)
    create_topics(kafka, settings)
    worker = start_worker(kafka.bootstrap_servers, settings, tmp_path)
    try:
        worker.wait_ready()
        produce(kafka, settings.topic_readings, depot_readings())
        records = wait_for_windows(kafka, settings, expected=4, worker=worker)
        windows = [r for r in records if r["type"] == "window"]
        assert len(windows) == 4 and all(w["status"] == "released" for w in windows)
        depot = [r for r in records if r["type"] == "cell" and r["n_vehicles"] == 28]
        assert len(depot) == 1 and depot[0]["window_start"] == windows[0]["window_start"]
        assert worker.process.poll() is None, worker.log()
        assert worker.metric("stream_dp_windows_released_total") == 4
        assert worker.metric("stream_dp_release_failures_total") == 0
        # Each released cell is (eps, delta)-DP: the busiest vehicle's delta is its cells x 1e-6.
        cells = (
            worker.metric("stream_dp_vehicle_privacy_loss_period_max_epsilon") / settings.epsilon
        )
        assert cells >= 1
        assert worker.metric("stream_dp_vehicle_privacy_loss_period_max_delta") == pytest.approx(
            round(cells) * 1e-6
        )
    finally:
        worker.stop()


@pytest.mark.parametrize("crash", ["before-checkpoint", "during-checkpoint", "after-checkpoint"])
def test_sigkill_around_a_state_checkpoint_loses_nothing(kafka, setup, tmp_path, crash):
    """The worker kills itself just before, while and just after writing its second state
    checkpoint (the first window is closing); a new worker recovers from whatever checkpoint
    is the latest and releases what the offline engine releases."""
    settings, spawn = setup
    readings = synthetic_readings(n_vehicles=25, hours=2, per_hour=1500, seed=19)
    first = spawn("first", STREAM_DP_FAULT_INJECTION=f"{crash}:2", STREAM_DP_BATCH_SIZE="20")
    first.wait_ready()
    produce(kafka, settings.topic_readings, readings)
    first.process.wait(timeout=PATIENCE_S)
    assert first.process.returncode == -signal.SIGKILL
    state = read_topic(kafka, settings.topic_state, settings.partitions)
    checkpoints = [r for r in state if r.value.startswith(b'{"kind":"checkpoint"')]
    assert len(checkpoints) >= (2 if crash == "after-checkpoint" else 1)
    second = spawn("second")
    second.wait_ready()
    records = wait_for_windows(kafka, settings, expected=2, worker=second)
    assert "from its latest checkpoint" in second.log()
    offline, offline_accepted = cli_release(settings, readings, tmp_path)
    assert offline_accepted == len(readings)
    assert non_noise(records) == non_noise(offline)
    by_id: dict[str, int] = {}
    for r in records:
        by_id[r["release_id"]] = by_id.get(r["release_id"], 0) + 1
    assert set(by_id.values()) == {1}, "a record was published twice"


def test_a_new_releaser_rebuilds_from_the_latest_snapshot(kafka, topic_prefix, tmp_path):
    """Five windows released under a capped two-hour budget, the worker stopped, a new one
    started: it reads the release log from its latest snapshot (the oldest window the
    ledger still needs, not the start), reads the partials from the snapshot's offset, and
    releases the sixth window once, as the offline engine does (the cap needs the rebuilt
    ledger)."""
    settings = service_settings(
        topic_prefix, epsilon=0.5, budget_cap=1.0, budget_period_seconds=2 * 3600
    )
    create_topics(kafka, settings)
    readings = synthetic_readings(n_vehicles=15, hours=6, per_hour=200, seed=23)
    cut = readings[0]["ts"] - readings[0]["ts"] % 3600 + 5 * 3600
    first = start_worker(kafka.bootstrap_servers, settings, tmp_path, "first")
    second = None
    try:
        first.wait_ready()
        produce(kafka, settings.topic_readings, [r for r in readings if r["ts"] < cut])
        wait_for_windows(kafka, settings, expected=5, worker=first)
        first.stop()
        log = read_topic(kafka, settings.topic_release_log)
        snapshots = [orjson.loads(r.value) for r in log if is_release_snapshot(r.value)]
        assert len(snapshots) == 5 and snapshots[-1]["read_from"] > 0
        assert snapshots[-1]["partials_from"] > 0
        second = start_worker(kafka.bootstrap_servers, settings, tmp_path, "second")
        second.wait_ready()
        assert "from its latest snapshot" in second.log()
        produce(kafka, settings.topic_readings, [r for r in readings if r["ts"] >= cut])
        records = wait_for_windows(kafka, settings, expected=6, worker=second)
        cumulative = second.metric("stream_dp_privacy_budget_cumulative_epsilon")
        released_here = second.metric("stream_dp_windows_released_total")
    finally:
        first.stop()
        if second is not None:
            second.stop()
    assert non_noise(records) == non_noise(offline_records(settings, readings))
    counts: dict[str, int] = {}
    for r in records:
        counts[r["release_id"]] = counts.get(r["release_id"], 0) + 1
    assert set(counts.values()) == {1}, "a record was published twice"
    windows = [r for r in records if r["type"] == "window"]
    assert sum(w["pairs_withheld_budget"] for w in windows) > 0
    total = sum(w["privacy_loss"] for w in windows)
    assert cumulative == pytest.approx(total)  # 5 windows from the snapshot and the log
    assert released_here == 1
