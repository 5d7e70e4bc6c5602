"""The service's topic plan (replication, min.insync.replicas, retention) and `stream-dp topics`."""

from __future__ import annotations

import pytest

from stream_dp.config import load_settings
from stream_dp.kafka.service_topics import service_topic_specs

ROLES = 7  # six service topics and Faust's leader topic


@pytest.mark.parametrize(("brokers", "replication", "insync"), [(1, 1, 1), (2, 2, 1), (5, 3, 2)])
def test_replication_defaults_to_min_3_brokers_and_insync_one_less(brokers, replication, insync):
    specs = service_topic_specs(load_settings(), brokers)
    assert len(specs) == ROLES
    assert {s.replication_factor for s in specs} == {replication}
    assert {s.topic_configs()["min.insync.replicas"] for s in specs} == {str(insync)}


def test_topic_settings_override_the_defaults():
    settings = load_settings(
        topic_replication_factor=2, topic_min_insync_replicas=2, topic_retention_ms=3_600_000
    )
    specs = {s.name: s for s in service_topic_specs(settings, brokers=9)}
    assert {s.replication_factor for s in specs.values()} == {2}
    assert {s.topic_configs()["min.insync.replicas"] for s in specs.values()} == {"2"}
    retention = {name: s.topic_configs()["retention.ms"] for name, s in specs.items()}
    assert retention.pop(settings.topic_release_log) == "-1"  # kept forever
    assert set(retention.values()) == {"3600000"}
