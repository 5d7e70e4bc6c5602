"""`stream-dp topics`: every topic the service uses, with partitions and configs.

For clusters where the workers may not create topics: an operator (or a pipeline) creates
them from this list, or with ``--create``. The settings are the worker's (environment,
``STREAM_DP_CONFIG_FILE``): topic names, ``partitions``, ``topic_replication_factor``
(default ``min(3, brokers in the cluster)``), ``topic_min_insync_replicas``,
``topic_retention_ms``. With a bootstrap server the replication default is resolved and
each topic's partition count on the cluster is shown (``-`` if it does not exist yet).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from stream_dp.commands.shared import add_bootstrap_option, plain_text, settings_with_bootstrap
from stream_dp.config import Settings
from stream_dp.kafka.topics import TopicSpec


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "topics",
        help="list (and create) the topics the service uses",
        description=plain_text(__doc__),
    )
    add_bootstrap_option(parser)
    parser.add_argument("--create", action="store_true", help="create the missing topics")
    parser.add_argument("--json", action="store_true", help="one JSON document")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    needed_by = "--create needs --bootstrap" if args.create else None
    settings = settings_with_bootstrap(args.bootstrap, needed_by)
    specs, found = asyncio.run(_plan(settings, args.create))
    # Unconnected and unset, the replication factor (and the min.insync.replicas derived
    # from it) depends on the cluster: shown as null / "min(3, brokers)".
    resolved = bool(settings.kafka_bootstrap or settings.topic_replication_factor)
    insync_set = resolved or settings.topic_min_insync_replicas is not None
    rows = [_row(spec, found, resolved, insync_set) for spec in specs]
    if args.json:
        print(json.dumps({"topics": rows}, indent=1))
        return 0
    for row in rows:
        rf = row["replication_factor"] or "min(3, brokers)"
        configs = ",".join(f"{k}={v}" for k, v in sorted(row["configs"].items()))
        line = f"{row['name']}  partitions={row['partitions']}  replication={rf}  {configs}"
        if found is not None:
            line += f"  on cluster: {row['partitions_on_cluster'] or '-'}"
        print(line)
    return 0


def _row(
    spec: TopicSpec, found: dict[str, int] | None, resolved: bool, insync_set: bool
) -> dict[str, Any]:
    configs = spec.topic_configs()
    if not insync_set:
        configs["min.insync.replicas"] = "replication - 1 (at least 1)"
    row: dict[str, Any] = {
        "name": spec.name,
        "partitions": spec.partitions,
        "replication_factor": spec.replication_factor if resolved else None,
        "configs": configs,
    }
    if found is not None:
        row["partitions_on_cluster"] = found.get(spec.name)
    return row


async def _plan(settings: Settings, create: bool) -> tuple[list[TopicSpec], dict[str, int] | None]:
    """The specs (replication resolved when connected) and, when connected, each existing
    topic's partition count."""
    from stream_dp.kafka.service_topics import (
        ensure_service_topics_async,
        planned_service_topics,
        service_topic_specs,
    )
    from stream_dp.worker.connection_settings import connection_from_settings

    if not settings.kafka_bootstrap:
        return service_topic_specs(settings), None
    conn = connection_from_settings(settings)
    if create:
        await ensure_service_topics_async(settings, conn)
    specs = await planned_service_topics(settings, conn)
    return specs, await _existing(conn, [s.name for s in specs])


async def _existing(conn: Any, names: list[str]) -> dict[str, int]:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(**conn.admin_kwargs())
    try:
        await admin.start()  # inside: a start cancelled half-way is closed too
        present = set(await admin.list_topics()) & set(names)
        described = await admin.describe_topics(sorted(present)) if present else []
        return {d["topic"]: len(d["partitions"]) for d in described if d["error_code"] == 0}
    finally:
        await admin.close()
