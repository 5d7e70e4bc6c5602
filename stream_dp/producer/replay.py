"""Replay readings into the readings topic: grouped per vehicle, keyed, optionally throttled.

Message format: the key is the ``vehicle_id`` (UTF-8); the value is a JSON object for a
single reading or a JSON array of reading objects of that one vehicle, in event-time order.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer

from stream_dp.kafka.connection import KafkaConnection
from stream_dp.producer.batches import PartitionBatches
from stream_dp.producer.grouping import DEFAULT_MAX_DELAY, Group, Reading, ReadingGrouper
from stream_dp.producer.stats import ProduceStats

ProgressCallback = Callable[[ProduceStats], None]

#: Longest time a partly filled batch waits before it is submitted.
LINGER_MS = 10
#: Bytes per partition batch (a group of 100 readings is ~9 kB of JSON).
MAX_BATCH_BYTES = 256 * 1024
# Every so many messages: check deliveries and yield to the sender and flusher tasks.
_CHECK_EVERY = 256


def encode_group(readings: list[Reading]) -> bytes:
    """The message value: one object for one reading, an array for several."""
    payload: Any = readings[0] if len(readings) == 1 else readings
    return orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY)


class _Deliveries:
    """Keep the first delivery error of the submitted batches."""

    def __init__(self) -> None:
        self.error: BaseException | None = None

    def watch(self, future: asyncio.Future[Any]) -> None:
        future.add_done_callback(self._done)

    def _done(self, future: asyncio.Future[Any]) -> None:
        if self.error is None and not future.cancelled() and future.exception() is not None:
            self.error = future.exception()

    def raise_if_failed(self) -> None:
        if self.error is not None:
            raise self.error


class _Throttle:
    """How long to wait so that no more than ``rate`` readings per second are released."""

    def __init__(self, rate: float | None) -> None:
        if rate is not None and rate <= 0:
            raise ValueError("rate must be > 0 readings/s (or None for unthrottled)")
        self.rate = rate
        self._loop = asyncio.get_running_loop()
        self._start = self._loop.time()

    def delay(self, released: int) -> float:
        if self.rate is None:
            return 0.0
        return self._start + released / self.rate - self._loop.time()


async def _aiter(readings: Iterable[Reading] | AsyncIterable[Reading]) -> AsyncIterator[Reading]:
    if isinstance(readings, AsyncIterable):
        async for reading in readings:
            yield reading
    else:
        for reading in readings:
            yield reading


async def produce_readings(
    conn: KafkaConnection,
    topic: str,
    readings: Iterable[Reading] | AsyncIterable[Reading],
    batch_size: int = 100,
    rate: float | None = None,
    progress: ProgressCallback | None = None,
    *,
    max_delay: float = DEFAULT_MAX_DELAY,
    linger_ms: int = LINGER_MS,
) -> ProduceStats:
    """Send ``readings`` (event-time ordered) to ``topic``; return once all are acknowledged.

    ``batch_size`` is the maximum readings per message (see :class:`ReadingGrouper`, which
    also bounds how long a reading waits: ``max_delay`` seconds of event time); ``rate``
    caps readings per second (``None``: as fast as possible). ``progress`` is called with
    the running counters after every message (rate-limit it yourself) and once at the
    end. The topic must exist (:func:`stream_dp.kafka.topics.ensure_topics`).
    """
    grouper = ReadingGrouper(batch_size, max_delay=max_delay)
    throttle = _Throttle(rate)
    loop = asyncio.get_running_loop()
    started = loop.time()
    stats = ProduceStats()
    deliveries = _Deliveries()
    producer = AIOKafkaProducer(
        **conn.producer_kwargs(), linger_ms=linger_ms, max_batch_size=MAX_BATCH_BYTES
    )
    try:
        await producer.start()  # inside: a start cancelled half-way is stopped too
        batches = await PartitionBatches.for_topic(
            producer, topic, linger=linger_ms / 1000, on_submitted=deliveries.watch
        )

        async def send(group: Group) -> None:
            key, members = group
            delay = throttle.delay(stats.readings + len(members))
            if delay > 0:
                await batches.submit_all()  # nothing waits in a batch while we sleep
                await asyncio.sleep(delay)
            await batches.add(None if key is None else key.encode(), encode_group(members))
            stats.readings += len(members)
            stats.messages += 1
            if progress is not None:
                stats.seconds = loop.time() - started
                progress(stats)
            if stats.messages % _CHECK_EVERY == 0:
                deliveries.raise_if_failed()
                await asyncio.sleep(0)  # let the sender and the stale-batch flusher run

        stop_flusher = asyncio.Event()
        flusher = asyncio.create_task(batches.submit_stale_until(stop_flusher))
        try:
            async for reading in _aiter(readings):
                for group in grouper.add(reading):
                    await send(group)
            for group in grouper.flush():
                await send(group)
        finally:
            stop_flusher.set()
            await flusher
        await batches.submit_all()
        await producer.flush()
        deliveries.raise_if_failed()
    finally:
        await producer.stop()
    stats.seconds = loop.time() - started
    if progress is not None:
        progress(stats)
    return stats
