"""Finding the last record of a kind from a partition's tail, on the real (Tansu) broker."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaProducer

from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.partition_tail import RecordDeleter, find_last
from stream_dp.kafka.topics import TopicSpec, ensure_topics


async def _produce_batched(conn: KafkaConnection, topic: str, values: list[bytes]) -> None:
    producer = AIOKafkaProducer(**conn.producer_kwargs(), linger_ms=50)
    await producer.start()
    try:
        futures = [await producer.send(topic, v, partition=0) for v in values]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def test_finds_the_last_mark_in_a_partition_written_in_big_batches(
    kafka: KafkaConnection, topic_prefix: str
) -> None:
    topic = f"{topic_prefix}.tail"
    await ensure_topics(kafka, [TopicSpec(topic, 1)])
    values = [b"mark-%d" % i if i % 300 == 7 else b"data-%d" % i for i in range(1000)]
    await _produce_batched(kafka, topic, values)

    found = await find_last(kafka, topic, 0, lambda v: v.startswith(b"mark"))
    none = await find_last(kafka, topic, 0, lambda v: v.startswith(b"nothing"))

    assert (found.earliest, found.end) == (0, 1000)  # the end from Fetch, not ListOffsets
    assert found.record is not None and found.record.offset == 907
    assert found.record.value == b"mark-907"
    assert none.record is None and none.end == 1000


async def test_an_empty_partition_has_no_match(kafka: KafkaConnection, topic_prefix: str) -> None:
    topic = f"{topic_prefix}.empty"
    await ensure_topics(kafka, [TopicSpec(topic, 1)])
    found = await find_last(kafka, topic, 0, lambda v: True, timeout=10)
    assert (found.earliest, found.end, found.record) == (0, 0, None)


async def test_delete_records_is_refused_gracefully_by_the_embedded_broker(
    kafka: KafkaConnection, topic_prefix: str
) -> None:
    topic = f"{topic_prefix}.del"
    await ensure_topics(kafka, [TopicSpec(topic, 1)])
    await _produce_batched(kafka, topic, [b"x"] * 10)
    deleter = RecordDeleter(kafka)
    try:
        deleted = await deleter.delete_before(topic, 0, 5)
    finally:
        await deleter.close()
    found = await find_last(kafka, topic, 0, lambda v: True)
    if deleted:  # a broker that supports it (not Tansu 0.6.0): the records are gone
        assert deleter.supported and found.earliest == 5
    else:
        assert deleter.supported is False and found.earliest == 0
        assert not await deleter.delete_before(topic, 0, 6)  # not tried again
