"""The readings consumer of the default ingest path: one aiokafka ``getmany`` per batch.

Faust's stream delivers messages one at a time into ``take_events`` (about 5,000 messages/s
measured here, and nothing is fetched while the agent works), which caps ingest well below
what Kafka and the engine can do. This consumer runs as a task of the Faust app instead: it
joins its own consumer group (``<app_id>-ingest``) on the readings topic, lets aiokafka's
fetcher prefetch while a batch is processed, and hands each ``getmany`` result to
:meth:`IngestProcessor.process`.

Delivery: the state topic, not the committed offset, says what was applied. Every batch's
delta carries its last input offset and is durable before the next ``getmany``; a
redelivered message at or below that offset is skipped. Only offsets whose delta the state
topic has acknowledged are committed (about once a second, on revocation under the ingest
lock, and on stop), so a commit never runs ahead of the state, a restart re-reads little,
and a commit that fails (rebalance in progress) loses nothing.

Rebalances: a revoked partition's state is dropped only after the batch in flight (and a
recovery in progress stops at its next step), and the group waits up to
``REBALANCE_TIMEOUT_MS`` for that instead of the session timeout, so a slow member is not
replaced while it still writes the partition's state.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError

from stream_dp.config import Settings
from stream_dp.kafka.connection import KafkaConnection
from stream_dp.worker.idle_rule import UNKNOWN_INPUT, InputState, input_state_from

if TYPE_CHECKING:
    from stream_dp.worker.ingest import IngestProcessor

log = logging.getLogger(__name__)

#: Seconds between offset commits while consuming.
COMMIT_INTERVAL_S = 1.0
#: Longest wait for one commit: aiokafka retries a commit to a topic the broker lost every
#: 100 ms for ever (an empty broker came back), which would hang the worker's stop.
COMMIT_TIMEOUT_S = 5.0
#: Bytes one fetch may return per partition: a few hundred 100-reading messages, so a
#: batch is big enough to amortise the per-batch work and the fetcher stays ahead.
MAX_PARTITION_FETCH_BYTES = 4 * 1024 * 1024
#: How long the group waits for a member to finish its revocation (a batch, or a partition's
#: recovery from the state topic) before it gives the partitions to others.
REBALANCE_TIMEOUT_MS = 300_000
#: Longest time between two ``getmany`` calls (a batch that first recovers partitions).
MAX_POLL_INTERVAL_MS = 600_000


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

    ``assigned`` is the live set of readings partitions, updated in place.
    ``on_rebalance(settled)`` is told False when a rebalance starts and True once the new
    assignment is in ``assigned``, before any batch of it is processed (readiness uses it).
    """

    def __init__(
        self,
        settings: Settings,
        conn: KafkaConnection,
        ingest: IngestProcessor,
        on_rebalance: Callable[[bool], None],
    ) -> None:
        self.settings = settings
        self.conn = conn
        self.ingest = ingest
        self._on_rebalance = on_rebalance
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
        self._on_rebalance(True)

    async def revoke(self, partitions: list[int]) -> None:
        # Drop them from the assignment first, synchronously: a batch already fetched but
        # waiting for the ingest lock then skips them instead of writing state for a
        # partition another worker is about to own. Their durable offsets are committed
        # under the ingest lock, after the batch in flight, just before the state is dropped
        # (in a ``finally``: aiokafka logs and swallows what this callback raises, so a
        # failed commit must not leave stale state behind).
        self.assigned -= set(partitions)
        self._on_rebalance(False)
        await self.ingest.on_revoked(partitions, before_drop=self._commit)

    # --- the loop -----------------------------------------------------------------------
    async def run(self) -> None:
        consumer = AIOKafkaConsumer(
            **self.conn.consumer_kwargs(),
            group_id=self.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=MAX_PARTITION_FETCH_BYTES,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
            max_poll_interval_ms=MAX_POLL_INTERVAL_MS,
        )
        self._consumer = consumer
        timeout_ms = int(self.settings.batch_seconds * 1000)
        try:
            await consumer.start()
            consumer.subscribe([self.settings.topic_readings], listener=_Assignment(self))
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
    async def input_state(self, partition: int) -> InputState:
        """What this consumer last heard from the broker about ``partition`` (see
        :func:`fetch_evidence`); unknown when not assigned."""
        consumer = self._consumer
        if consumer is None or partition not in self.assigned:
            return UNKNOWN_INPUT
        tp = TopicPartition(self.settings.topic_readings, partition)
        return await fetch_evidence(consumer, tp)

    async def _commit(self, partitions: Sequence[int]) -> None:
        """Commit the durable offsets of ``partitions`` (best effort: see module docstring)."""
        self._last_commit = time.monotonic()
        consumer = self._consumer
        if consumer is None:
            return
        topic = self.settings.topic_readings
        offsets = {
            TopicPartition(topic, partition): offset + 1
            for partition, offset in self.ingest.durable_offsets(partitions).items()
        }
        if not offsets:
            return
        try:
            await asyncio.wait_for(consumer.commit(offsets), COMMIT_TIMEOUT_S)
        except (KafkaError, TimeoutError) as exc:  # rebalancing, no longer assigned, lost
            log.debug("offset commit skipped: %s", type(exc).__name__)


async def fetch_evidence(consumer: AIOKafkaConsumer, tp: TopicPartition) -> InputState:
    """The partition's high watermark from the last successful Fetch, the consumer's
    position, and that fetch's age in seconds (aiokafka stamps a partition's state with the
    wall clock each time a Fetch for it succeeds); unknown parts are None (revoked meanwhile,
    before the first fetch, or no answer in time)."""
    try:
        end = consumer.highwater(tp)
        stamped_ms = consumer.last_poll_timestamp(tp)
        position = await asyncio.wait_for(consumer.position(tp), timeout=1.0)
    except Exception:
        return UNKNOWN_INPUT
    return input_state_from(end, position, stamped_ms)
