"""Explicit, idempotent topic creation against the real broker."""

from __future__ import annotations

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.topics import (
    TOPIC_ROLES,
    TopicError,
    TopicSpec,
    ensure_topics,
    stream_dp_topic_names,
    stream_dp_topics,
)


async def _describe(conn: KafkaConnection, name: str) -> tuple[int, dict[str, str]]:
    admin = AIOKafkaAdminClient(**conn.admin_kwargs())
    await admin.start()
    try:
        (topic,) = await admin.describe_topics([name])
        (response,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    finally:
        await admin.close()
    configs = {entry[0]: entry[1] for entry in response.resources[0][4]}
    return len(topic["partitions"]), configs


async def test_creates_with_partitions_and_explicit_retention(
    kafka: KafkaConnection, topic_prefix: str
) -> None:
    name = f"{topic_prefix}.readings"
    counts = await ensure_topics(kafka, [TopicSpec(name, 3)])
    assert counts == {name: 3}
    partitions, configs = await _describe(kafka, name)
    assert partitions == 3
    assert "retention.ms" in configs and "retention.bytes" in configs


async def test_is_idempotent(kafka: KafkaConnection, topic_prefix: str) -> None:
    specs = [TopicSpec(f"{topic_prefix}.a", 2), TopicSpec(f"{topic_prefix}.b", 1)]
    first = await ensure_topics(kafka, specs)
    second = await ensure_topics(kafka, specs)
    assert first == second == {specs[0].name: 2, specs[1].name: 1}


async def test_rejects_an_existing_topic_with_other_partitions(
    kafka: KafkaConnection, topic_prefix: str
) -> None:
    name = f"{topic_prefix}.state"
    await ensure_topics(kafka, [TopicSpec(name, 2)])
    with pytest.raises(TopicError, match=rf"{name}.*2 partitions.*expected 5"):
        await ensure_topics(kafka, [TopicSpec(name, 5)])
    lenient = await ensure_topics(kafka, [TopicSpec(name, 5)], strict_partitions=False)
    assert lenient == {name: 2}


async def test_creates_every_service_topic(kafka: KafkaConnection, topic_prefix: str) -> None:
    specs = stream_dp_topics(3, prefix=topic_prefix)
    counts = await ensure_topics(kafka, specs)
    names = stream_dp_topic_names(topic_prefix)
    assert counts == {
        names["readings"]: 3,
        names["dlq"]: 3,
        names["releases"]: 1,
        names["partials"]: 1,
        names["state"]: 3,
        names["release_log"]: 1,
    }


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
