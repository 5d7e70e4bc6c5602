"""What the broker probes report, and what /readyz and /healthz make of it."""

from __future__ import annotations

import time
from types import SimpleNamespace

from stream_dp.worker.broker_health import LOST_CONFIRMATIONS, BrokerHealth, missing_state
from tests.unit.worker_pages import get


def health(last_contact: float = 0.0) -> BrokerHealth:
    return BrokerHealth(unavailable_after=10.0, stall_after=120.0, last_contact=last_contact)


def test_an_unanswered_broker_is_unready_after_the_limit_and_fatal_after_the_stall():
    h = health()
    assert h.reachable(10.0) and h.fatal(10.0) is None
    assert not h.reachable(10.5) and h.fatal(10.5) is None
    assert "has not answered for 121 s" in h.fatal(121.0)
    h.answered(121.0, None)
    assert h.reachable(125.0) and h.fatal(125.0) is None


def test_lost_topics_are_fatal_once_confirmed():
    h = health()
    for n in range(1, LOST_CONFIRMATIONS):
        h.answered(float(n), "topics missing: x")
        assert h.fatal(float(n)) is None
    h.answered(5.0, None)  # a transient finding is forgotten
    for n in range(LOST_CONFIRMATIONS):
        h.answered(6.0 + n, "topics missing: x")
    assert "lost the service's state (topics missing: x)" in h.fatal(9.0)
    h.answered(10.0, None)  # never forgiven: the release log was gone
    assert h.fatal(10.0) is not None


def test_an_input_end_below_the_applied_offsets_is_fatal():
    h = health()
    h.input_lost(set())
    assert h.fatal(1.0) is None
    h.input_lost({2, 0})
    assert "readings partitions [0, 2]" in h.fatal(1.0)


def test_missing_state_names_absent_topics_and_changed_partition_counts():
    expected = {"r": 4, "log": 1, "leader": 1}
    assert missing_state(expected, {"r": 4, "log": 1, "leader": 3}, {"r", "log"}) is None
    assert missing_state(expected, {"r": 4, "log": None, "leader": 1}, {"r"}) == (
        "topics missing: log"
    )
    assert missing_state(expected, {"r": 4, "log": 4, "leader": 1}, {"r", "log"}) == (
        "log has 4 partitions, created with 1"
    )


async def test_readyz_and_healthz_follow_the_broker(worker_web):
    runtime, client = worker_web
    runtime.ingest = SimpleNamespace(partitions={0: object()}, recovering=0)
    runtime.releaser = SimpleNamespace(rebuilding=False)
    runtime.assigned, runtime.assignment_known = {0}, True
    runtime.started.set()
    runtime.health.answered(time.monotonic(), None)
    assert (await get(client, "/readyz"))[0] == 200
    runtime.health.last_contact = time.monotonic() - 11.0  # the default limit is 10 s
    assert await get(client, "/readyz") == (503, {"status": "broker unreachable"})
    assert (await get(client, "/healthz"))[0] == 200  # not stalled yet
    runtime.health.last_contact = time.monotonic() - 121.0
    status, body = await get(client, "/healthz")
    assert status == 503 and "has not answered" in body["reason"]
    runtime.health.answered(time.monotonic(), None)
    assert (await get(client, "/readyz"))[0] == 200


def test_the_workers_sends_wait_out_an_outage_as_long_as_the_worker_does():
    from stream_dp.config import load_settings
    from stream_dp.worker.runtime import producer_request_timeout_ms

    assert producer_request_timeout_ms(load_settings()) == 130_000  # stall_seconds 120 + 10
    assert producer_request_timeout_ms(load_settings(stall_seconds=5)) == 40_000  # the default
