"""Ingest of one worker: readings → per-partition window state, made durable per batch.

For every batch (one ``getmany`` of :mod:`stream_dp.worker.batch_consumer`, or Faust
``take_events`` on the ``faust`` ingest path) and input partition it:
1. recovers the partition's state from the state topic the first time it sees it
   (:mod:`stream_dp.worker.recovery` replays ``delta``/``close`` records up to the end);
2. skips records at or below the last input offset already applied (redelivery after a
   crash: Faust commits lag behind), validates the rest — bad readings go to the
   dead-letter topic with the reason code (:mod:`stream_dp.windows.reject_reasons`) and
   the detail in headers;
3. accumulates, then writes the batch's delta (with its last input offset) to the state
   topic and waits for it, so offsets are committed only after the delta is durable;
4. closes the windows its watermark has passed: the partial goes to the partials topic
   first, then a ``close`` record to the state topic (a crash in between only causes a
   duplicate partial, which the coordinator ignores).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from typing import Any

from aiokafka import AIOKafkaProducer

from stream_dp.config import Settings
from stream_dp.fault_injection import crash_point_counted, crash_point_in_flight
from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.partition_tail import RecordDeleter
from stream_dp.windows.closing import close_windows
from stream_dp.windows.readings import InvalidReading, ParsedBatch, ReadingValidator, decode_message
from stream_dp.wire import internal_records as rec
from stream_dp.worker.checkpoints import CHECKPOINT_EVERY_RECORDS
from stream_dp.worker.idle_rule import (
    UNKNOWN_INPUT,
    InputObservation,
    InputState,
    decide_idle,
)
from stream_dp.worker.metrics import ServiceMetrics
from stream_dp.worker.recovery import PartitionRuntime, Revoked, recover_partition
from stream_dp.worker.service_clock import ServiceClock

log = logging.getLogger(__name__)


class IngestProcessor:
    """Applies batches of readings-topic events to durable per-partition state."""

    def __init__(
        self,
        settings: Settings,
        conn: KafkaConnection,
        producer: AIOKafkaProducer,
        metrics: ServiceMetrics,
    ) -> None:
        self.settings = settings
        self.conn = conn
        self.producer = producer
        self.metrics = metrics
        self.validator = ReadingValidator(
            settings.upper, settings.resolution, settings.max_future_seconds
        )
        self.partitions: dict[int, PartitionRuntime] = {}
        self.lock = asyncio.Lock()
        self.recovering = 0
        self._last_done = time.monotonic()
        self.deleter = RecordDeleter(conn)
        self._deleting: set[asyncio.Task[bool]] = set()
        #: Partitions whose broker-confirmed end fell below what they had applied (the
        #: broker lost or truncated their log), as of the last tick.
        self.input_lost: set[int] = set()
        #: The public clock of secret routes: the wall clock or the declared replay clock.
        self.clock = ServiceClock.for_settings(settings)

    # --- recovery ---------------------------------------------------------------------
    async def _runtime(
        self, partition: int, still_assigned: Collection[int] | None = None
    ) -> PartitionRuntime | None:
        """The partition's runtime, recovered from the state topic the first time; None if
        the partition was revoked (``still_assigned``) before or during the recovery."""
        runtime = self.partitions.get(partition)
        if runtime is None:
            try:
                runtime = await self._recover(partition, still_assigned)
            except Revoked:
                log.info("partition %d revoked during its recovery", partition)
                return None
            self.partitions[partition] = runtime
        return runtime

    async def _recover(
        self, partition: int, still_assigned: Collection[int] | None = None
    ) -> PartitionRuntime:
        self.recovering += 1
        try:
            return await recover_partition(self.settings, self.conn, partition, still_assigned)
        finally:
            self.recovering -= 1

    async def on_revoked(
        self,
        partitions: Sequence[int],
        before_drop: Callable[[Sequence[int]], Awaitable[None]] | None = None,
    ) -> None:
        """Drop the partitions' state once the batch in flight is done; ``before_drop`` runs
        first, under the same lock (e.g. committing their durable offsets)."""
        async with self.lock:
            try:
                if before_drop is not None:
                    await before_drop(partitions)
            finally:
                for partition in partitions:
                    self.partitions.pop(partition, None)
                    try:
                        self.metrics.consumer_lag.remove(str(partition))
                    except KeyError:
                        pass  # never reported
                self._export_watermark()

    def durable_offsets(self, partitions: Iterable[int]) -> dict[int, int]:
        """Per partition, the last input offset whose delta is acknowledged (if any)."""
        out = {}
        for partition in partitions:
            runtime = self.partitions.get(partition)
            if runtime is not None and runtime.durable_offset >= 0:
                out[partition] = runtime.durable_offset
        return out

    # --- the hot path -----------------------------------------------------------------
    async def process(
        self, messages: Sequence[Any], still_assigned: Collection[int] | None = None
    ) -> None:
        """Apply one batch of readings-topic messages (any mix of partitions).

        A message has ``topic``, ``partition``, ``offset``, ``key`` and ``value`` (an aiokafka
        ``ConsumerRecord`` or a Faust ``Message``). Partitions missing from ``still_assigned``
        when the batch gets its turn are skipped: they were revoked meanwhile.
        """
        entered = time.monotonic()
        async with self.lock:
            self.validator.refresh_clock()
            by_partition: dict[int, list[Any]] = {}
            for message in messages:
                by_partition.setdefault(message.partition, []).append(message)
            sends: list[asyncio.Future[Any]] = []
            done_runtimes = []
            for partition, part_messages in by_partition.items():
                if still_assigned is not None and partition not in still_assigned:
                    continue
                runtime = await self._runtime(partition, still_assigned)
                if runtime is None:
                    continue
                await self._process_partition(partition, runtime, part_messages, sends)
                done_runtimes.append(runtime)
            computed = time.monotonic()
            if sends:
                await asyncio.gather(*sends)
            for runtime in done_runtimes:  # only now may their offsets be committed
                runtime.durable_offset = runtime.applied_offset
            for partition, runtime in self.partitions.items():
                if runtime.checkpoints.records_since >= CHECKPOINT_EVERY_RECORDS:
                    await self._checkpoint(partition, runtime, delete=False)
            crash_point_counted("after-durable-batch")
            done = time.monotonic()
            log.debug(
                "batch of %d messages: %.3f s since the previous, %.3f s compute, %.3f s waiting "
                "for durability", len(messages), entered - self._last_done, computed - entered,
                done - computed,
            )  # fmt: skip
            self._last_done = done

    async def _process_partition(
        self,
        partition: int,
        runtime: PartitionRuntime,
        messages: list[Any],
        sends: list[asyncio.Future[Any]],
    ) -> None:
        batch = ParsedBatch()
        invalid = 0
        last_offset = runtime.applied_offset
        for message in messages:
            if message.offset <= runtime.applied_offset:
                continue  # applied before a crash or a rebalance: the commit lags the state
            last_offset = max(last_offset, message.offset)
            try:
                objects = decode_message(message.value)
            except InvalidReading as exc:
                invalid += 1
                sends.append(await self._dead_letter(message, message.value, exc))
                continue
            for obj in objects:
                try:
                    self.validator.add(obj, batch)
                except InvalidReading as exc:
                    invalid += 1
                    sends.append(await self._dead_letter(message, _dump(obj), exc))
        if last_offset == runtime.applied_offset:
            return
        state = runtime.state
        if state.public_clock:  # secret routes: lateness by the public clock alone (§14.7)
            state.advance_clock(self.clock.now())
        outcome = state.add_batch(
            batch.vehicle, batch.ts, batch.cell, batch.speed, record_delta=True
        )
        runtime.applied_offset = last_offset
        runtime.last_event_wall = time.monotonic()
        delta = rec.encode_delta(
            last_offset, state.max_ts, outcome.delta or {}, outcome.late_by_window
        )
        # The delta must be durable before the batch is acknowledged (offsets committed):
        # ``process`` waits for every send of the batch before it returns, so the write
        # overlaps the next partition's work instead of stalling it. (Records of one state
        # partition stay in order: one producer, sent in order.)
        parts = [
            await self.producer.send(self.settings.topic_state, part, partition=partition)
            for part in delta
        ]
        sends.extend(parts)
        runtime.checkpoints.note_delta(parts, outcome.delta or {})
        self.metrics.readings.labels("accepted").inc(outcome.accepted)
        self.metrics.readings.labels("late").inc(outcome.late)
        self.metrics.readings.labels("invalid").inc(invalid)
        due = state.due_windows()
        if not due:
            self._export_watermark()
        await self._close_windows(partition, runtime, due, forced=False)

    def _export_watermark(self) -> None:
        """The gauge shows the slowest partition that still holds a window open (the one
        holding releases back); with none open, the most advanced one."""
        seen = [r.state for r in self.partitions.values() if r.state.max_ts > -math.inf]
        holding = [state.watermark for state in seen if state.open]
        if holding:
            self.metrics.watermark.set(min(holding))
        elif seen:
            self.metrics.watermark.set(max(state.watermark for state in seen))

    async def _close_windows(
        self, partition: int, runtime: PartitionRuntime, windows: list[int], forced: bool
    ) -> None:
        closed = close_windows(runtime.state, partition, windows, forced)
        for start, partial in closed.partials:  # each partial is durable before its close
            encoded = rec.encode_partial(start, partition, partial, uuid.uuid4().hex)
            await self._send_all(self.settings.topic_partials, encoded, 0)
            stored = await self.producer.send_and_wait(
                self.settings.topic_state, rec.encode_close(start, forced), partition=partition
            )
            runtime.checkpoints.note_close(start, stored.offset)
        if windows:
            self._export_watermark()
            await self._checkpoint(partition, runtime, delete=True)
        await self._progress(partition, runtime, closed.watermark, force=bool(windows))

    async def _progress(
        self, partition: int, runtime: PartitionRuntime, watermark: float, force: bool
    ) -> None:
        late_total = sum(runtime.state.late_by_window.values())
        key = (watermark, late_total)
        if not force and runtime.last_progress == key:
            return
        runtime.last_progress = key
        recent = dict(sorted(runtime.state.late_by_window.items())[-48:])
        await self._send_and_wait(
            self.settings.topic_partials, rec.encode_progress(partition, watermark, recent), 0
        )

    async def _checkpoint(self, partition: int, runtime: PartitionRuntime, delete: bool) -> None:
        """Write the partition's checkpoint once every state record it names is durable;
        with ``delete``, then drop the state records before it where the broker can."""
        tracker = runtime.checkpoints
        unresolved = tracker.unresolved()
        if unresolved:
            await asyncio.gather(*unresolved)
        checkpoint = tracker.checkpoint(runtime.state, runtime.applied_offset)
        if checkpoint is None:
            return
        crash_point_counted("before-checkpoint")
        sent = await self.producer.send(
            self.settings.topic_state, checkpoint.encode(), partition=partition
        )
        await crash_point_in_flight("during-checkpoint")
        await sent
        crash_point_counted("after-checkpoint")
        if delete and self.deleter.supported is not False:
            task = asyncio.create_task(
                self.deleter.delete_before(
                    self.settings.topic_state, partition, checkpoint.replay_from
                )
            )
            self._deleting.add(task)
            task.add_done_callback(self._deleting.discard)

    # --- idle fallback and heartbeats (called by a timer) -----------------------------
    async def tick(
        self,
        assigned: Sequence[int],
        input_state: Callable[[int], Awaitable[InputState]] | None = None,
        still_assigned: Collection[int] | None = None,
    ) -> None:
        """Close the windows of partitions the broker confirms idle (:func:`decide_idle`)
        and report every assigned partition's watermark (a never-seen partition is recovered
        first, so an empty partition does not hold back the release).

        ``input_state(partition)`` gives what the consumer last heard from the broker about
        the input partition (:class:`InputState`). A partition no longer in the live
        ``still_assigned`` (it was revoked while this ran) is left alone."""

        def revoked(partition: int) -> bool:
            return still_assigned is not None and partition not in still_assigned

        self.clock.begin()  # a replay clock runs from the first tick (§14.7)
        async with self.lock:
            lost: set[int] = set()
            for partition in assigned:
                if revoked(partition):
                    continue
                runtime = await self._runtime(partition, still_assigned)
                if runtime is None:
                    continue
                seen = UNKNOWN_INPUT if input_state is None else await input_state(partition)
                now = time.monotonic()
                decision = decide_idle(
                    InputObservation(
                        now=now,
                        fetched_at=None if seen.fetched_age is None else now - seen.fetched_age,
                        end=seen.end,
                        position=seen.position,
                        applied_next=runtime.applied_offset + 1,
                        last_applied_at=runtime.last_event_wall,
                    ),
                    runtime.quiet_since,
                    self.settings.idle_close_seconds,
                    runtime.confirmed_at,
                )
                runtime.quiet_since = decision.quiet_since
                runtime.confirmed_at = decision.confirmed_at
                if seen.end is not None:
                    lag = max(0, seen.end - runtime.applied_offset - 1)
                    self.metrics.consumer_lag.labels(str(partition)).set(lag)
                if decision.input_lost:
                    lost.add(partition)
                if revoked(partition):
                    continue
                if runtime.state.public_clock:  # secret routes: close by the clock, not idle
                    runtime.state.advance_clock(self.clock.now())
                    await self._close_windows(
                        partition, runtime, runtime.state.due_windows(), forced=False
                    )
                elif decision.idle and runtime.state.open:
                    await self._close_windows(
                        partition, runtime, sorted(runtime.state.open), forced=True
                    )
                elif decision.idle:
                    await self._progress(partition, runtime, math.inf, force=False)
                else:
                    await self._progress(partition, runtime, runtime.state.watermark, False)
            self.input_lost = lost

    # --- I/O helpers ------------------------------------------------------------------
    async def _send_and_wait(self, topic: str, value: bytes, partition: int) -> None:
        await self.producer.send_and_wait(topic, value, partition=partition)

    async def _send_all(self, topic: str, values: list[bytes], partition: int) -> None:
        """Send in order and wait for every acknowledgement."""
        futures = [await self.producer.send(topic, v, partition=partition) for v in values]
        await asyncio.gather(*futures)

    async def _dead_letter(
        self, message: Any, value: bytes, error: InvalidReading
    ) -> asyncio.Future[Any]:
        """Send the rejected value on with its reason code (``RejectReason``, the vocabulary
        of ``stream-dp release``'s rejects file) and the detail naming the field."""
        headers = [
            ("reason", str(error.reason).encode()),
            ("detail", error.detail.encode()),
            ("source-topic", str(message.topic).encode()),
            ("source-partition", str(message.partition).encode()),
            ("source-offset", str(message.offset).encode()),
        ]
        return await self.producer.send(
            self.settings.topic_dlq,
            value,
            key=message.key if isinstance(message.key, bytes) else None,
            partition=message.partition % self.settings.partitions,
            headers=headers,
        )


def _dump(obj: Any) -> bytes:
    import orjson

    try:
        return orjson.dumps(obj)
    except TypeError:
        return repr(obj).encode()
