"""Read one partition from an offset up to its high watermark, without a consumer group.

The end is the high watermark reported in Fetch responses (``consumer.highwater``), not
ListOffsets/``end_offsets()``: Tansu answers ListOffsets(LATEST) with the base offset of
the last record batch + 1, which loses the tail of a partition written in batches.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from stream_dp.kafka.connection import KafkaConnection

_POLL_MS = 50


async def iter_partition_to_end(
    conn: KafkaConnection,
    topic: str,
    partition: int,
    start_offset: int = 0,
    *,
    timeout: float | None = 60.0,
    **consumer_kwargs: Any,
) -> AsyncIterator[list[ConsumerRecord]]:
    """Yield batches of records of ``topic[partition]`` from ``start_offset`` to the end.

    The end is the first high watermark the broker reports, so records produced while
    reading are not waited for. An empty partition, or ``start_offset`` at or past the
    end, yields nothing. ``TimeoutError`` after ``timeout`` seconds without progress; extra
    keyword arguments go to ``AIOKafkaConsumer`` (e.g. ``value_deserializer``). The topic
    must already exist (see :func:`stream_dp.kafka.topics.ensure_topics`).
    """
    if start_offset < 0:
        raise ValueError("start_offset must be >= 0")
    tp = TopicPartition(topic, partition)
    consumer = AIOKafkaConsumer(**(conn.reader_kwargs(100) | consumer_kwargs))
    try:
        await consumer.start()  # inside: a start cancelled half-way is stopped too
        consumer.assign([tp])
        consumer.seek(tp, start_offset)
        loop = asyncio.get_running_loop()
        last_progress = loop.time()
        end: int | None = None
        while end is None or await consumer.position(tp) < end:
            if timeout is not None and loop.time() - last_progress > timeout:
                raise TimeoutError(f"no progress reading {tp} for {timeout:g} s")
            batches = await consumer.getmany(tp, timeout_ms=_POLL_MS)
            if end is None:
                end = consumer.highwater(tp)  # None until the first Fetch answers
            # An out-of-range start is reset to the earliest offset: skip what precedes it.
            records = [
                r
                for r in batches.get(tp, ())
                if r.offset >= start_offset and (end is None or r.offset < end)
            ]
            if records:
                yield records
            if batches:
                last_progress = loop.time()  # also excludes the caller's time after a yield
    finally:
        await consumer.stop()


async def read_partition_to_end(
    conn: KafkaConnection,
    topic: str,
    partition: int,
    start_offset: int = 0,
    *,
    timeout: float | None = 60.0,
    **consumer_kwargs: Any,
) -> list[ConsumerRecord]:
    """All records of ``topic[partition]`` from ``start_offset`` up to the high watermark."""
    records: list[ConsumerRecord] = []
    async for batch in iter_partition_to_end(
        conn, topic, partition, start_offset, timeout=timeout, **consumer_kwargs
    ):
        records.extend(batch)
    return records
