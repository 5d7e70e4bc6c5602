"""Two workers on one machine with steady input keep their assignment (no rebalance).

``STAY_PUT_SECONDS`` (default 30) sets how long the input streams, ``STAY_PUT_RATE``
(default 1000/s) and ``STAY_PUT_PER_MESSAGE`` (default 20) its shape. 30 s suffices in CI:
the rebalance loop this guards against bumped the generation every ~4 s. Measured once for
300 s at 3,000 readings/s, one per message: generation 1 in all three groups throughout.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time

import pytest

from stream_dp.producer import produce_readings
from tests.e2e.service_harness import Worker, create_topics, start_worker
from tests.e2e.waiting import PATIENCE_S, wait_until
from tests.support.readings import synthetic_readings
from tests.support.settings import service_settings

pytestmark = [pytest.mark.broker, pytest.mark.slow]

PER_MESSAGE = int(os.environ.get("STAY_PUT_PER_MESSAGE", "20"))
JOINED = re.compile(r"Joined group '([^']+)' \(generation (\d+)\)")
RATE = float(os.environ.get("STAY_PUT_RATE", "1000"))  # readings per second


def generations(log: str) -> dict[str, list[int]]:
    """Every generation each consumer group was joined with, in log order."""
    out: dict[str, list[int]] = {}
    for group, generation in JOINED.findall(log):
        out.setdefault(group, []).append(int(generation))
    return out


def groups_settled(workers: list[Worker]) -> bool:
    """Whether every consumer group is joined by each worker at one and the same (latest)
    generation: both members are in every group."""
    seen = [generations(w.log_path.read_text(errors="replace")) for w in workers]
    groups = seen[0].keys()
    return bool(groups) and all(
        s.keys() == groups and all(s[g][-1] == seen[0][g][-1] for g in groups) for s in seen
    )


@pytest.mark.parametrize("embedded_flag", ["true", "false"])
def test_two_workers_keep_their_groups_under_steady_input(
    kafka, topic_prefix, tmp_path, embedded_flag
):
    """``embedded_flag`` false: the operator did not say the broker is Tansu."""
    seconds = float(os.environ.get("STAY_PUT_SECONDS", "30"))
    settings = service_settings(topic_prefix, idle_close_seconds=30.0)
    create_topics(kafka, settings)
    env = {"STREAM_DP_KAFKA_EMBEDDED": embedded_flag}
    workers = []
    try:
        for name in ("a", "b"):  # one after the other: the second join is a rebalance
            workers.append(start_worker(kafka.bootstrap_servers, settings, tmp_path, name, **env))
            workers[-1].wait_ready()
        wait_until(lambda: groups_settled(workers), "both workers in every group")
        settled = [generations(w.log_path.read_text()) for w in workers]
        n = int(seconds * RATE)
        readings = synthetic_readings(n_vehicles=300, hours=3, per_hour=n // 3 + 1, seed=41)
        sending = threading.Thread(
            target=lambda: asyncio.run(
                produce_readings(kafka, settings.topic_readings, readings, PER_MESSAGE, rate=RATE)
            ),
            daemon=True,
        )
        began = time.monotonic()
        sending.start()
        sending.join(timeout=seconds * 3 + PATIENCE_S)
        elapsed = time.monotonic() - began
        after = [generations(w.log_path.read_text()) for w in workers]
        accepted = sum(w.metric("stream_dp_readings_total", 'outcome="accepted"') for w in workers)
        print(f"\n{elapsed:.0f} s of input at {RATE:g}/s: generations settled {settled} "
              f"after {after}; accepted so far {accepted:g}")  # fmt: skip
        assert not sending.is_alive()
        assert after == settled, "a consumer group rebalanced under steady input"
        assert all(w.process.poll() is None for w in workers)
    finally:
        for worker in workers:
            worker.stop()


def test_a_worker_joining_under_load_settles_and_stays_put(kafka, topic_prefix, tmp_path):
    """Scaling out while readings stream: the second worker recovers the state of the
    partitions it takes over, then both keep their groups for the rest of the input."""
    seconds = float(os.environ.get("STAY_PUT_SECONDS", "30"))
    settings = service_settings(topic_prefix, idle_close_seconds=30.0)
    create_topics(kafka, settings)
    workers = [start_worker(kafka.bootstrap_servers, settings, tmp_path, "a")]
    try:
        workers[0].wait_ready()
        n = int(seconds * RATE)
        readings = synthetic_readings(n_vehicles=300, hours=3, per_hour=n // 3 + 1, seed=43)
        sending = threading.Thread(
            target=lambda: asyncio.run(
                produce_readings(kafka, settings.topic_readings, readings, PER_MESSAGE, rate=RATE)
            ),
            daemon=True,
        )
        began = time.monotonic()
        sending.start()
        time.sleep(seconds / 3)
        workers.append(start_worker(kafka.bootstrap_servers, settings, tmp_path, "b"))
        workers[1].wait_ready()
        joined_after = time.monotonic() - began
        wait_until(lambda: groups_settled(workers), "both workers in every group")
        settled = [generations(w.log_path.read_text()) for w in workers]
        sending.join(timeout=seconds * 3 + PATIENCE_S)
        after = [generations(w.log_path.read_text()) for w in workers]
        print(f"\nsecond worker ready {joined_after:.0f} s into {seconds:g} s of input at "
              f"{RATE:g}/s: generations settled {settled} after {after}")  # fmt: skip
        assert not sending.is_alive()
        assert after == settled, "a consumer group rebalanced under steady input"
    finally:
        for worker in workers:
            worker.stop()
