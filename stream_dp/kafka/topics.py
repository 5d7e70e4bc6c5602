"""Topic specifications and their explicit, idempotent creation with the admin client.

Create every topic here before any producer, consumer or Faust app touches it: a Metadata
request for an unknown topic makes Tansu auto-create it with 4 partitions (and real Kafka
with ``num.partitions``), which would silently break partition-aligned state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from stream_dp.kafka.connection import KafkaConnection

TOPIC_ALREADY_EXISTS = 36
DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000
KEEP_FOREVER = -1


def faust_leader_topic(app_id: str) -> TopicSpec:
    """Faust's leader-election topic (``<app_id>-__assignor-__leader``, one partition).

    The worker's Faust consumer subscribes to it (with the batch ingest it is the Faust
    consumer's only topic), and ``topic_allow_declare=False`` keeps Faust from creating it.
    """
    return TopicSpec(f"{app_id}-__assignor-__leader", 1)


class TopicError(RuntimeError):
    """A topic could not be created, or exists with an incompatible layout."""


@dataclass(frozen=True)
class TopicSpec:
    """A topic to create: name, partition count, replication factor and topic configs.

    ``retention.ms`` and ``retention.bytes`` are always sent (defaults: 7 days, unbounded)
    because Tansu answers DescribeConfigs with ``{}`` for topics created without them.
    """

    name: str
    partitions: int
    replication_factor: int = 1
    config: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("topic name is empty")
        if self.partitions < 1:
            raise ValueError(f"topic {self.name!r}: partitions must be >= 1")
        if self.replication_factor < 1:
            raise ValueError(f"topic {self.name!r}: replication_factor must be >= 1")

    def topic_configs(self) -> dict[str, str]:
        """Configs sent at creation: explicit retention first, then ``config``."""
        configs = {"retention.ms": str(DEFAULT_RETENTION_MS), "retention.bytes": "-1"}
        configs.update({k: str(v) for k, v in self.config.items()})
        return configs


async def ensure_topics(
    conn: KafkaConnection,
    specs: Iterable[TopicSpec],
    *,
    strict_partitions: bool = True,
) -> dict[str, int]:
    """Create the topics that do not exist; return each topic's actual partition count.

    An existing topic is accepted when its partition count equals the spec's; otherwise
    :class:`TopicError` names the topic and both counts (``strict_partitions=False``
    accepts any count, for clients such as the replay producer that do not depend on it).
    """
    wanted = list(specs)
    names = [s.name for s in wanted]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate topic names in {names}")
    if not wanted:
        return {}
    admin = AIOKafkaAdminClient(**conn.admin_kwargs())
    try:
        await admin.start()  # inside: a start cancelled half-way is closed too
        existing = await _create(admin, wanted)
        counts = {s.name: s.partitions for s in wanted if s.name not in existing}
        if existing:
            counts.update(await _partition_counts(admin, sorted(existing)))
    finally:
        await admin.close()
    if strict_partitions:
        for spec in wanted:
            if counts[spec.name] != spec.partitions:
                raise TopicError(
                    f"topic {spec.name!r} exists with {counts[spec.name]} partitions, "
                    f"expected {spec.partitions}"
                )
    return counts


async def _create(admin: AIOKafkaAdminClient, specs: list[TopicSpec]) -> set[str]:
    """Send one CreateTopics request; return the names that already existed."""
    response = await admin.create_topics(
        [
            NewTopic(
                s.name,
                s.partitions,
                s.replication_factor,
                topic_configs=s.topic_configs(),
            )
            for s in specs
        ]
    )
    existing: set[str] = set()
    for name, code, *rest in response.topic_errors:
        if code == TOPIC_ALREADY_EXISTS:
            existing.add(name)
        elif code != 0:
            message = rest[0] if rest and rest[0] else ""
            raise TopicError(f"cannot create topic {name!r}: error {code} {message}".rstrip())
    return existing


async def _partition_counts(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for topic in await admin.describe_topics(names):
        name, code = topic["topic"], topic["error_code"]
        if code != 0:
            raise TopicError(f"cannot describe topic {name!r}: error {code}")
        counts[name] = len(topic["partitions"])
    return counts


TOPIC_ROLES = ("readings", "dlq", "releases", "partials", "state", "release_log")
_SUFFIXES = {
    "readings": "readings",
    "dlq": "readings.dlq",
    "releases": "releases",
    "partials": "partials",
    "state": "state",
    "release_log": "release-log",
}


def stream_dp_topic_names(
    prefix: str = "stream-dp", overrides: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Topic name per role (:data:`TOPIC_ROLES`): ``{prefix}.{suffix}`` unless overridden."""
    overrides = dict(overrides or {})
    unknown = set(overrides) - set(TOPIC_ROLES)
    if unknown:
        raise ValueError(f"unknown topic roles {sorted(unknown)}; known: {TOPIC_ROLES}")
    return {role: overrides.get(role) or f"{prefix}.{_SUFFIXES[role]}" for role in TOPIC_ROLES}


def stream_dp_topics(
    partitions: int = 4,
    *,
    prefix: str = "stream-dp",
    names: Mapping[str, str] | None = None,
    replication_factor: int = 1,
    retention_ms: int = DEFAULT_RETENTION_MS,
    min_insync_replicas: int | None = None,
) -> list[TopicSpec]:
    """Every topic of the service, in role order.

    ``partitions`` applies to the vehicle-keyed topics (readings, dead letters, state);
    releases, partials and the release log have one partition so a single agent sees one
    total order. The release log is kept forever: it is the stored copy of every release
    that makes re-publishing after a restart possible. ``min_insync_replicas`` (unset: the
    broker's default) is set on every topic.
    """
    topic = stream_dp_topic_names(prefix, names)
    extra = {} if min_insync_replicas is None else {"min.insync.replicas": str(min_insync_replicas)}

    def spec(role: str, count: int, keep_ms: int = retention_ms) -> TopicSpec:
        config = {"retention.ms": str(keep_ms), **extra}
        return TopicSpec(topic[role], count, replication_factor, config)

    return [
        spec("readings", partitions),
        spec("dlq", partitions),
        spec("releases", 1),
        spec("partials", 1),
        spec("state", partitions),
        spec("release_log", 1, KEEP_FOREVER),
    ]


def default_replication_factor(brokers: int) -> int:
    """``min(3, brokers)``: three copies where the cluster has them, never more than it has."""
    return max(1, min(3, brokers))


def default_min_insync_replicas(replication_factor: int) -> int:
    """One less than the replication factor, at least 1 (2 of 3: one broker may be down)."""
    return max(1, replication_factor - 1)


async def broker_count(conn: KafkaConnection) -> int:
    """How many brokers the cluster's metadata lists."""
    admin = AIOKafkaAdminClient(**conn.admin_kwargs())
    try:
        await admin.start()  # inside: a start cancelled half-way is closed too
        return len((await admin.describe_cluster())["brokers"])
    finally:
        await admin.close()


async def existing_topics(conn: KafkaConnection) -> set[str]:
    """Every topic the broker has (an auto-created one shows up here too)."""
    admin = AIOKafkaAdminClient(**conn.admin_kwargs())
    try:
        await admin.start()  # inside: a start cancelled half-way is closed too
        return set(await admin.list_topics())
    finally:
        await admin.close()
