"""Explicit, idempotent topic creation against the real broker."""

from __future__ import annotations

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.topics import (
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
