"""The topics of one deployment, from its settings: names, partitions, replication, configs.

Used by the worker at start (``ensure_service_topics``), by its broker probe, and by
``stream-dp topics``.
"""

from __future__ import annotations

import asyncio

from stream_dp.config import Settings
from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.topics import (
    TOPIC_ROLES,
    TopicSpec,
    broker_count,
    default_min_insync_replicas,
    default_replication_factor,
    ensure_topics,
    faust_leader_topic,
    stream_dp_topics,
)


def settings_topic_names(settings: Settings) -> dict[str, str]:
    """The topic name of each role (see :data:`stream_dp.kafka.topics.TOPIC_ROLES`)."""
    return {role: getattr(settings, f"topic_{role}") for role in TOPIC_ROLES}


def service_topic_specs(settings: Settings, brokers: int | None = None) -> list[TopicSpec]:
    """Every topic the service uses, Faust's leader topic last. ``brokers`` (the cluster's
    broker count) sets the default replication factor; without it (and without the
    setting) the specs say 1, for callers that only need names and partitions."""
    replication = settings.topic_replication_factor
    if replication is None:
        replication = default_replication_factor(brokers) if brokers is not None else 1
    min_insync = settings.topic_min_insync_replicas
    if min_insync is None:
        min_insync = default_min_insync_replicas(replication)
    specs = stream_dp_topics(
        settings.partitions,
        names=settings_topic_names(settings),
        replication_factor=replication,
        retention_ms=settings.topic_retention_ms,
        min_insync_replicas=min_insync,
    )
    leader = faust_leader_topic(settings.app_id)
    config = {
        "min.insync.replicas": str(min_insync),
        "retention.ms": str(settings.topic_retention_ms),
    }
    return [*specs, TopicSpec(leader.name, leader.partitions, replication, config)]


def service_topic_partitions(settings: Settings) -> dict[str, int]:
    """Each of the service's own topics (not Faust's) and its partition count."""
    leader = faust_leader_topic(settings.app_id).name
    return {s.name: s.partitions for s in service_topic_specs(settings) if s.name != leader}


async def planned_service_topics(settings: Settings, conn: KafkaConnection) -> list[TopicSpec]:
    """:func:`service_topic_specs` with the cluster's broker count when it is needed."""
    brokers = None
    if settings.topic_replication_factor is None:
        brokers = await broker_count(conn)
    return service_topic_specs(settings, brokers)


async def ensure_service_topics_async(settings: Settings, conn: KafkaConnection) -> None:
    """Create the topics that do not exist. Nothing depends on the leader topic's partition
    count, and deployments from before it was created here may hold an auto-created one
    with several: any count is accepted for it."""
    *own, leader = await planned_service_topics(settings, conn)
    await ensure_topics(conn, own)
    await ensure_topics(conn, [leader], strict_partitions=False)


def ensure_service_topics(settings: Settings, conn: KafkaConnection) -> None:
    asyncio.run(ensure_service_topics_async(settings, conn))
