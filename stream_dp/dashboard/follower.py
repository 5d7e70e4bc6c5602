"""Follow the releases topic from its beginning, as an independent subscriber.

No consumer group: the partitions are assigned by hand and nothing is committed, so any
number of followers (each worker's dashboard, each ``stream-dp dashboard``) read the whole
topic without affecting the workers or each other. Duplicates are dropped by the store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from stream_dp.kafka.connection import KafkaConnection

log = logging.getLogger(__name__)

RETRY_SECONDS = 2.0


def _decode(values: list[bytes]) -> tuple[list[Any], int]:
    """Decoded records and the count of values that are not JSON."""
    records, bad = [], 0
    for value in values:
        try:
            records.append(orjson.loads(value))
        except orjson.JSONDecodeError:
            bad += 1
    return records, bad


async def follow_releases(
    conn: KafkaConnection,
    topic: str,
    on_records: Callable[[list[Any]], None],
    stop: asyncio.Event,
) -> None:
    """Read ``topic`` from offset 0 of every partition, then keep following it, passing
    each fetched batch of decoded records to ``on_records`` until ``stop`` is set."""
    consumer = AIOKafkaConsumer(**conn.reader_kwargs(200))
    try:
        await consumer.start()  # inside: a start cancelled half-way is stopped too
        partitions = await _wait_for_partitions(consumer, topic, stop)
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, 0)  # an offset before the log start resets to the earliest
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=500, max_records=5000)
            for batch in batches.values():
                records, bad = _decode([r.value for r in batch])
                if bad:
                    log.warning("%d records of %s are not JSON; skipped", bad, topic)
                on_records(records)
    finally:
        await consumer.stop()


async def _wait_for_partitions(
    consumer: AIOKafkaConsumer, topic: str, stop: asyncio.Event
) -> list[TopicPartition]:
    warned = False
    while not stop.is_set():
        await consumer.topics()  # refreshes the metadata
        found = consumer.partitions_for_topic(topic)
        if found:
            return [TopicPartition(topic, p) for p in sorted(found)]
        if not warned:
            log.warning("topic %s does not exist yet; waiting for it", topic)
            warned = True
        await asyncio.sleep(RETRY_SECONDS)
    return []


def read_releases_file(path: Path) -> list[Any]:
    """The records of a releases JSONL file (``stream-dp release --out``); a line that is
    not JSON raises ``ValueError`` naming the line."""
    records = []
    with path.open("rb") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                records.append(orjson.loads(line))
            except orjson.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON: {exc}") from None
    return records
