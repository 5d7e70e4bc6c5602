"""Topic names, specs and retention of the service topics (no broker)."""

from __future__ import annotations

import pytest

from stream_dp.kafka.topics import (
    TOPIC_ROLES,
    TopicSpec,
    stream_dp_topic_names,
    stream_dp_topics,
)


def test_service_topic_names() -> None:
    names = stream_dp_topic_names()
    assert names["readings"] == "stream-dp.readings"
    assert names["dlq"] == "stream-dp.readings.dlq"
    assert names["release_log"] == "stream-dp.release-log"
    custom = stream_dp_topic_names("x", {"releases": "traffic.out"})
    assert custom["releases"] == "traffic.out" and custom["partials"] == "x.partials"
    assert set(custom) == set(TOPIC_ROLES)
    with pytest.raises(ValueError, match="unknown topic roles"):
        stream_dp_topic_names(overrides={"nope": "x"})


def test_release_log_is_kept_forever() -> None:
    specs = {s.name: s for s in stream_dp_topics(2)}
    assert specs["stream-dp.release-log"].topic_configs()["retention.ms"] == "-1"
    assert specs["stream-dp.readings"].topic_configs()["retention.bytes"] == "-1"


@pytest.mark.parametrize("kwargs", [{"partitions": 0}, {"partitions": 1, "replication_factor": 0}])
def test_spec_rejects_bad_counts(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        TopicSpec("t", **kwargs)
