"""Fill one record batch per partition ourselves and hand whole batches to aiokafka.

``AIOKafkaProducer.send`` costs a coroutine, a future and a murmur2 hash per message;
``send_batch`` costs them once per batch, and the key -> partition choice is cached per
key (same murmur2 choice as ``send``, so keyed records land where any Kafka client puts them).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner


class PartitionBatches:
    """Open batches per partition of one topic, submitted when full, stale, or flushed.

    ``on_submitted`` receives each batch's delivery future. ``linger`` is the longest a
    non-empty batch waits before :meth:`submit_stale` sends it; run
    :meth:`submit_stale_until` beside a source that may pause.
    """

    def __init__(
        self,
        producer: AIOKafkaProducer,
        topic: str,
        partitions: list[int],
        *,
        linger: float,
        on_submitted: Callable[[asyncio.Future[Any]], None],
    ) -> None:
        if not partitions:
            raise ValueError(f"topic {topic!r} has no partitions")
        self._producer = producer
        self._topic = topic
        self._partitions = sorted(partitions)
        self._linger = linger
        self._on_submitted = on_submitted
        self._loop = asyncio.get_running_loop()
        self._open: dict[int, tuple[Any, float]] = {}  # partition -> (builder, opened at)
        self._key_partition: dict[bytes, int] = {}
        self._partitioner = DefaultPartitioner()
        self._round_robin = 0
        self._submitting = asyncio.Lock()  # FIFO: batches of a partition keep their order

    @classmethod
    async def for_topic(
        cls,
        producer: AIOKafkaProducer,
        topic: str,
        *,
        linger: float,
        on_submitted: Callable[[asyncio.Future[Any]], None],
    ) -> PartitionBatches:
        partitions = await producer.partitions_for(topic)
        return cls(producer, topic, list(partitions), linger=linger, on_submitted=on_submitted)

    def partition_for(self, key: bytes | None) -> int:
        """Kafka's default choice: murmur2 of the key, round robin without a key."""
        if key is None:
            self._round_robin += 1
            return self._partitions[self._round_robin % len(self._partitions)]
        partition = self._key_partition.get(key)
        if partition is None:
            partition = self._partitioner(key, self._partitions, self._partitions)
            self._key_partition[key] = partition
        return partition

    async def add(self, key: bytes | None, value: bytes) -> None:
        """Append one record to its partition's batch, submitting the batch when full."""
        partition = self.partition_for(key)
        entry = self._open.get(partition)
        if entry is not None:
            if entry[0].append(timestamp=None, key=key, value=value) is not None:
                return
            await self._submit(partition)
        builder = self._producer.create_batch()
        if builder.append(timestamp=None, key=key, value=value) is None:
            raise ValueError(f"a message of {len(value)} bytes does not fit in a record batch")
        self._open[partition] = (builder, self._loop.time())

    async def submit_stale(self) -> None:
        """Submit every batch that has been open longer than ``linger``."""
        now = self._loop.time()
        for partition, (_, opened) in list(self._open.items()):
            if now - opened >= self._linger:
                await self._submit(partition)

    async def submit_all(self) -> None:
        """Submit every open batch."""
        for partition in list(self._open):
            await self._submit(partition)

    async def _submit(self, partition: int) -> None:
        entry = self._open.pop(partition, None)
        if entry is None:
            return
        builder = entry[0]
        builder.close()
        async with self._submitting:
            future = await self._producer.send_batch(builder, self._topic, partition=partition)
        self._on_submitted(future)

    async def submit_stale_until(self, stop: asyncio.Event) -> None:
        """Run :meth:`submit_stale` every ``linger`` seconds until ``stop`` is set (a
        background task). Stop it with the event, never by cancelling: a cancelled
        submission would lose the batch it had already taken."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self._linger)
            await self.submit_stale()
