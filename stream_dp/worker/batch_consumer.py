"""The readings consumer of the default ingest path: one aiokafka ``getmany`` per batch.

Faust's stream delivers messages one at a time into ``take_events`` (about 5,000 messages/s
measured here, and nothing is fetched while the agent works), which caps ingest well below
what Kafka and the engine can do. This consumer runs as a task of the Faust app instead: it
joins its own consumer group (``<app_id>-ingest``) on the readings topic, lets aiokafka's
fetcher prefetch while a batch is processed, and hands each ``getmany`` result to
:meth:`IngestProcessor.process`.

Delivery: the state topic, not the committed offset, says what was applied. Every batch's
delta carries its last input offset and is durable before the next ``getmany``; a
redelivered message at or below that offset is skipped. Offsets are committed from the
applied offsets about once a second, on revocation and on stop, so a restart re-reads
little, and a commit that fails (rebalance in progress) loses nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError

from stream_dp.config import Settings
from stream_dp.kafka.connection import KafkaConnection

if TYPE_CHECKING:
    from stream_dp.worker.ingest import IngestProcessor

log = logging.getLogger(__name__)

#: Seconds between offset commits while consuming.
COMMIT_INTERVAL_S = 1.0
#: Bytes one fetch may return per partition: a few hundred 100-reading messages, so a
#: batch is big enough to amortise the per-batch work and the fetcher stays ahead.
MAX_PARTITION_FETCH_BYTES = 4 * 1024 * 1024


class _Assignment(ConsumerRebalanceListener):
    """Keeps the worker's view of its readings partitions in step with the group."""

    def __init__(self, consumer: ReadingsConsumer) -> None:
        self._owner = consumer

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        await self._owner.revoke([tp.partition for tp in revoked])

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self._owner.assign([tp.partition for tp in assigned])


class ReadingsConsumer:
    """Consumes the readings topic in ``getmany`` batches and applies them to the ingest.

    ``on_assignment(partitions)`` is told the current readings partitions after every change,
    *before* any batch of the new assignment is processed (the releaser's idle rule and
    readiness use it).
    """

    def __init__(
        self,
        settings: Settings,
        conn: KafkaConnection,
        ingest: IngestProcessor,
        on_assignment: Callable[[set[int]], None],
    ) -> None:
        self.settings = settings
        self.conn = conn
        self.ingest = ingest
        self._on_assignment = on_assignment
        self.assigned: set[int] = set()
        self._consumer: AIOKafkaConsumer | None = None
        self._stopping = asyncio.Event()
        self._last_commit = time.monotonic()

    @property
    def group_id(self) -> str:
        return f"{self.settings.app_id}-ingest"

    # --- assignment ---------------------------------------------------------------------
    def assign(self, partitions: list[int]) -> None:
        self.assigned.clear()  # in place: a batch waiting for the ingest lock sees it
        self.assigned.update(partitions)
        self._on_assignment(set(self.assigned))

    async def revoke(self, partitions: list[int]) -> None:
        # Drop them from the assignment first, synchronously: a batch already fetched but
        # waiting for the ingest lock then skips them instead of writing state for a
        # partition another worker is about to own.
        self.assigned -= set(partitions)
        self._on_assignment(set(self.assigned))
        await self._commit(partitions)
        await self.ingest.on_revoked(partitions)

    # --- the loop -----------------------------------------------------------------------
    async def run(self) -> None:
        consumer = AIOKafkaConsumer(
            **self.conn.consumer_kwargs(),
            group_id=self.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=MAX_PARTITION_FETCH_BYTES,
        )
        self._consumer = consumer
        await consumer.start()
        consumer.subscribe([self.settings.topic_readings], listener=_Assignment(self))
        timeout_ms = int(self.settings.batch_seconds * 1000)
        try:
            while not self._stopping.is_set():
                batches = await consumer.getmany(
                    timeout_ms=timeout_ms, max_records=self.settings.batch_size
                )
                records = [
                    record
                    for tp, part in batches.items()
                    if tp.partition in self.assigned
                    for record in part
                ]
                if records:
                    await self.ingest.process(records, still_assigned=self.assigned)
                if time.monotonic() - self._last_commit >= COMMIT_INTERVAL_S:
                    await self._commit(sorted(self.assigned))
        finally:
            try:
                await self._commit(sorted(self.assigned))
            finally:
                await consumer.stop()

    async def stop(self) -> None:
        self._stopping.set()

    # --- what the idle rule needs --------------------------------------------------------
    async def input_state(self, partition: int) -> tuple[int | None, int | None]:
        """The partition's high watermark as last fetched and this consumer's position; None
        for what is not known (not assigned, before the first fetch, or no answer)."""
        consumer = self._consumer
        if consumer is None or partition not in self.assigned:
            return None, None
        tp = TopicPartition(self.settings.topic_readings, partition)
        try:
            end = consumer.highwater(tp)
            position = await asyncio.wait_for(consumer.position(tp), timeout=1.0)
        except Exception:  # revoked meanwhile, or no answer in time
            return None, None
        return end, position

    async def _commit(self, partitions: list[int]) -> None:
        """Commit the applied offsets of ``partitions`` (best effort: see module docstring)."""
        self._last_commit = time.monotonic()
        consumer = self._consumer
        if consumer is None:
            return
        offsets = {}
        for partition in partitions:
            runtime = self.ingest.partitions.get(partition)
            if runtime is not None and runtime.applied_offset >= 0:
                tp = TopicPartition(self.settings.topic_readings, partition)
                offsets[tp] = runtime.applied_offset + 1
        if not offsets:
            return
        try:
            await consumer.commit(offsets)
        except (KafkaError, AssertionError) as exc:  # rebalancing, or no longer assigned
            log.debug("offset commit skipped: %s", type(exc).__name__)
