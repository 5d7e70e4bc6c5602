"""The release step on Kafka: one worker at a time merges partials and releases windows.

Leadership: a consumer group of its own on the one-partition partials topic; the member
that holds the partition is the releaser. On gaining it, the releaser rebuilds from
Kafka alone (no local disk): the release log (windows already released, with their stored
records), the releases topic (which stored records are already published — any that are
not are re-published from the stored copy, never re-drawn), then the partials topic from
its beginning. A window's records are written to the release log and acknowledged
**before** they are published, so a window is released once. Each stored release is
preceded by the window's per-vehicle losses, from which the budget ledger is rebuilt, and by
the entries its release defers to the next window (``carry``: a span still pooling, issue
25), which the next window's release takes in; a rebuild takes the carry of the latest stored
window, so a deferred reading is released once, by the release after the one that stored it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition

from stream_dp.config import Settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.fault_injection import crash_point, pause_point
from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.partition_reader import iter_partition_to_end
from stream_dp.kafka.partition_tail import find_last
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.params import ReleaseParams
from stream_dp.release.records import WindowRelease
from stream_dp.release.window import failure_line, record_stored, release_ready_windows
from stream_dp.secret_routes import SECRET_ROUTES
from stream_dp.secret_routes.params import SecretRoutesParams
from stream_dp.secret_routes.window import SecretRoutesReleaser
from stream_dp.windows.columns import WindowColumns
from stream_dp.windows.coordinator import ReleaseCoordinator
from stream_dp.windows.state import window_start_of
from stream_dp.wire import internal_records as rec
from stream_dp.worker.metrics import ServiceMetrics
from stream_dp.worker.release_log import ReleaseLogIndex, StoredRelease
from stream_dp.worker.release_snapshots import (
    RebuildPlan,
    ReleaseSnapshot,
    SnapshotTracker,
    is_release_snapshot,
    known_published,
)
from stream_dp.worker.resume_plan import plan_resume
from stream_dp.worker.service_clock import ServiceClock

log = logging.getLogger(__name__)


class _Leadership(ConsumerRebalanceListener):
    def __init__(self, service: ReleaseService) -> None:
        self.service = service

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.service.leader = False

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        if assigned:
            self.service.needs_rebuild = True
            self.service.leader = True


class ReleaseService:
    """Runs while the worker runs; releases windows when it is the leader."""

    def __init__(
        self,
        settings: Settings,
        conn: KafkaConnection,
        producer: AIOKafkaProducer,
        metrics: ServiceMetrics,
        noise: LaplaceNoise,
    ) -> None:
        self.settings = settings
        self.params = ReleaseParams.from_settings(settings)  # all the release reads
        self.accountant = PrivacyAccountant(self.params)
        self.conn = conn
        self.producer = producer
        self.metrics = metrics
        self.noise = noise
        self.leader = False
        self.needs_rebuild = False
        self.rebuilding = False
        self.coordinator = self._new_coordinator()
        self.ledger = self.accountant.new_ledger()
        self.log_index = ReleaseLogIndex()
        self.recent: deque[dict[str, Any]] = deque(maxlen=200)
        self._consumer: AIOKafkaConsumer | None = None
        self._stopping = asyncio.Event()
        self._parts = rec.PartAssembler()
        self.spent_all = 0.0  # sum of K*eps over the release log's winning copies
        self.rebuild_plan = RebuildPlan(0)
        self.snapshots = SnapshotTracker()
        #: The entries the latest stored window deferred (None: none), and that window.
        self.carry: WindowColumns | None = None
        self.carry_from: int | None = None
        #: The secret-routes model's releaser (docs/math.md §14); None: public occupancy.
        self.secret = self._new_secret_releaser()
        budget = vehicle_budget(settings)
        if budget is not None:
            metrics.vehicle_budget.set(budget)

    def _new_secret_releaser(self) -> SecretRoutesReleaser | None:
        if self.settings.privacy_model != SECRET_ROUTES:
            return None
        params = SecretRoutesParams.from_settings(self.settings)
        # The public span starts with the window the service's clock starts in (§14.5, §14.7:
        # the wall clock or the declared replay clock); a stored summary read back on a
        # rebuild takes over from there.
        first = window_start_of(
            ServiceClock.for_settings(self.settings).now(), self.settings.window_seconds
        )
        return SecretRoutesReleaser(params, self.noise.source, first)

    def _new_coordinator(self) -> ReleaseCoordinator:
        s = self.settings
        return ReleaseCoordinator(s.partitions, s.window_seconds, s.prefix_limit)

    async def run(self) -> None:
        tp = TopicPartition(self.settings.topic_partials, 0)
        consumer = AIOKafkaConsumer(
            **self.conn.consumer_kwargs(),
            group_id=f"{self.settings.app_id}-releaser",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=200,
        )
        self._consumer = consumer
        try:
            await consumer.start()  # inside: a start cancelled half-way is stopped too
            consumer.subscribe([self.settings.topic_partials], listener=_Leadership(self))
            while not self._stopping.is_set():
                batches = await consumer.getmany(timeout_ms=250, max_records=5000)
                if self.needs_rebuild:
                    await self._rebuild(consumer, tp)
                    continue
                if not self.leader:
                    continue
                for record in batches.get(tp, ()):
                    self._apply(record.value, record.offset)
                await self._release_ready()
        finally:
            await consumer.stop()

    async def stop(self) -> None:
        self._stopping.set()

    # --- rebuild on gaining leadership ------------------------------------------------
    async def _rebuild(self, consumer: AIOKafkaConsumer, tp: TopicPartition) -> None:
        self.rebuilding = True
        try:
            self.needs_rebuild = False
            self.coordinator = self._new_coordinator()
            self._parts = rec.PartAssembler()
            self.log_index = ReleaseLogIndex()
            self.ledger = self.accountant.new_ledger()
            self.carry, self.carry_from = None, None
            self.secret = self._new_secret_releaser()
            plan = await self._plan_rebuild()
            stored = [w async for w in self._read_release_log()]
            published: set[str] = set()
            async for batch in iter_partition_to_end(
                self.conn, self.settings.topic_releases, 0, self.snapshots.releases_from
            ):
                for record in batch:
                    published.add(orjson.loads(record.value)["release_id"])
                self.snapshots.note_published(batch[-1].offset + 1)
            for winner in sorted(stored, key=lambda w: w.release.window_start):
                release = winner.release
                self._mark_stored(winner)
                missing = [
                    r
                    for r in release.records
                    if r["release_id"] not in published
                    and not known_published(plan, release.window_start, winner.offset)
                ]
                if missing:
                    log.info("re-publishing %d stored records of one window", len(missing))
                    await self._publish(missing)
                self.recent.extend(release.records)
            self.metrics.privacy_budget_spent_all.set(self.spent_all)
            await self._seek_partials(consumer, tp, plan)
            log.info(
                "releaser ready: read %d stored windows from release-log offset %d (%s)",
                len(stored), plan.start,
                "no snapshot" if plan.summary is None else "from its latest snapshot",
            )  # fmt: skip
        finally:
            self.rebuilding = False

    async def _plan_rebuild(self) -> RebuildPlan:
        """Start from the latest snapshot in the release log (read from its tail)."""
        topic = self.settings.topic_release_log
        tail = await find_last(self.conn, topic, 0, is_release_snapshot)
        latest = None
        if tail.record is not None:
            latest = (
                tail.record.offset,
                ReleaseSnapshot.from_record(orjson.loads(tail.record.value)),
            )
        plan: RebuildPlan = plan_resume(tail.earliest, tail.end, latest)
        self.rebuild_plan = plan
        self.snapshots = SnapshotTracker(plan)
        self.log_index.next_offset = plan.start
        self.spent_all = self.snapshots.spent_before
        if plan.summary is not None:
            self.coordinator.released_through = plan.summary.released_through
        return plan

    async def _seek_partials(
        self, consumer: AIOKafkaConsumer, tp: TopicPartition, plan: RebuildPlan
    ) -> None:
        """Read the partials from where the snapshot says nothing before is needed, with
        the partitions' progress as it was there; without one, from the start."""
        snapshot = plan.summary
        if snapshot is None or snapshot.partials_from <= 0:
            await consumer.seek_to_beginning(tp)
            return
        for partition, (watermark, late) in snapshot.progress.items():
            self.coordinator.set_progress(partition, watermark, late)
        consumer.seek(tp, snapshot.partials_from)

    async def _write_snapshot(self) -> None:
        """Append a snapshot to the release log (see ``worker.release_snapshots``)."""
        consumer = self._consumer
        if consumer is not None and not self.coordinator.pending:
            tp = TopicPartition(self.settings.topic_partials, 0)
            position = await consumer.position(tp)
            unfinished = self._parts.oldest_unfinished()
            if unfinished is None or unfinished >= position:
                progress = self.coordinator.progress(self.snapshots.last_released)
                self.snapshots.note_partials(position, progress)
        snapshot = self.snapshots.snapshot(self.windows_to_keep(), self.log_index.next_offset)
        await self.producer.send_and_wait(
            self.settings.topic_release_log, snapshot.encode(), partition=0
        )

    def carry_for_next(self) -> WindowColumns | None:
        """The pending carry for the window about to be computed (the oldest ready one not
        stored), or None when that window is not later than the one that stored the carry
        (a window completing out of order): a carry is only ever taken forward in time, and
        an older window's own deferrals are then dropped (``_mark_stored``), never released
        twice."""
        if self.carry is None or self.carry_from is None:
            return None
        released = self.coordinator.released
        pending = [s for s in self.coordinator.ready_windows() if s not in released]
        if not pending or pending[0] <= self.carry_from:
            return None
        return self.carry

    def windows_to_keep(self) -> list[int]:
        """Stored windows a rebuild must read again: the ledger's, and the window whose
        stored carry is still pending (released by the next window, not yet stored)."""
        windows = [loss.window_start for loss in self.ledger.entries()]
        if self.secret is not None and self.secret.last is not None:
            windows.append(self.secret.last)  # its summary: the period's window count
        if self.carry is not None and self.carry_from is not None:
            windows.append(self.carry_from)
        return windows

    # --- steady state -----------------------------------------------------------------
    def _apply(self, value: bytes, offset: int = -1) -> None:
        data = rec.decode(value)
        if data["kind"] == "progress":
            self.coordinator.set_progress(*rec.progress_payload(data))
            return
        whole = self._parts.add(data, offset)
        if whole is None:
            return
        start, partition, partial = rec.partial_payload(whole)
        if self.coordinator.add_partial(start, partition, partial):
            return
        if self.coordinator.take_after_release(start, partition):
            readings = int(partial.count.sum())
            self.metrics.readings_after_release.inc(readings)
            log.warning("%d readings arrived after their window was released", readings)

    async def _release_ready(self) -> None:
        # A computation that raises comes back as the window's failed outcome: stored and
        # published like a release, so no restart computes this window again. Each window
        # takes the carry the window stored before it deferred (``_mark_stored``).
        windows = self._ready_releases()
        while self.leader and not self._stopping.is_set():
            began = time.monotonic()
            release = await asyncio.to_thread(next, windows, None)
            if release is None:
                return
            start = release.window_start
            if not self.leader or self.needs_rebuild:
                return  # leadership moved while computing: the new leader releases it
            # Stored (and acknowledged) before published: a restart re-publishes this copy.
            attempt = uuid.uuid4().hex
            parts = rec.encode_loss(release.loss, attempt) if release.loss is not None else []
            deferred = deferred_entries(release)
            if deferred is not None:
                parts += rec.encode_carry(start, deferred, attempt)
            parts += rec.encode_release(release.to_json_obj(), attempt)
            await pause_point("before-stored")
            stored = [
                await self.producer.send(
                    self.settings.topic_release_log, part, key=str(start).encode(), partition=0
                )
                for part in parts
            ]
            await asyncio.gather(*stored)
            crash_point("after-stored")
            # The first copy stored in the log is the release (another releaser may have
            # stored this window first during a leadership change): publish that one.
            winner = None
            async for done in self._read_release_log():
                ours = done.release.window_start == start  # published below
                # (the secret-routes releaser marked its window released from the partials)
                from_partials = ours and self.secret is None
                self._mark_stored(done, from_partials=from_partials, published=ours)
                if done.release.window_start == start:
                    winner = done
            if winner is None:
                raise RuntimeError(f"window {start} stored but not found in the release log")
            if winner.attempt != attempt:
                log.warning("another releaser stored this window first; publishing its copy")
            ours = winner.attempt == attempt
            if ours and release.failed:
                log.error(failure_line(release, "going on with the next window"))
            release = winner.release
            await self._publish(release.records)
            crash_point("after-published")
            await self._write_snapshot()
            self.recent.extend(release.records)
            self._observe(release, time.monotonic() - began, ours=ours)

    def _ready_releases(self) -> Iterator[WindowRelease]:
        """The ready windows' releases, by the settings' privacy model (the dispatch)."""
        if self.secret is not None:
            return self.secret.release_ready(self.coordinator)
        return release_ready_windows(
            self.coordinator, self.params, self.noise, self.ledger, self.carry_for_next
        )

    async def _publish(self, records: list[dict[str, Any]]) -> None:
        futures = [
            await self.producer.send(
                self.settings.topic_releases,
                orjson.dumps(record),
                key=str(record.get("cell", "window")).encode(),
                partition=0,
            )
            for record in records
        ]
        sent = await asyncio.gather(*futures)
        if sent:
            self.snapshots.note_published(sent[-1].offset + 1)

    async def _read_release_log(self) -> AsyncIterator[StoredRelease]:
        """Read the release log from where this releaser stopped to its end; yield each
        window's winning stored copy as it completes."""
        async for batch in iter_partition_to_end(
            self.conn, self.settings.topic_release_log, 0, self.log_index.next_offset
        ):
            for record in batch:
                winner = self.log_index.add(record.offset, record.value)
                if winner is not None:
                    yield winner

    def _mark_stored(
        self, winner: StoredRelease, from_partials: bool = False, published: bool = True
    ) -> None:
        """A window's release is in the log: never release it again; charge its losses
        (older logs stored none) and export the largest per-vehicle loss over the period."""
        start, loss = winner.release.window_start, winner.loss
        record_stored(self.coordinator, self.ledger, start, loss, from_partials)
        if self.carry_from is None or start > self.carry_from:
            # The latest stored window's carry replaces the one it took in (released by it).
            self.carry, self.carry_from = winner.carry, start
        privacy_loss = float(winner.release.summary.get("privacy_loss", 0.0))
        self.spent_all += privacy_loss
        self.snapshots.note_stored(start, winner.offset, privacy_loss, published)
        if self.secret is not None:
            self._note_secret_stored(winner.release)
        if not self.rebuilding:
            self.metrics.privacy_budget_spent_all.set(self.spent_all)
        if loss is not None:
            self._export_loss(start)

    def _note_secret_stored(self, release: WindowRelease) -> None:
        """Secret routes: the releaser's period count follows the stored summaries (a rebuild
        restores it from the latest), and so do the period gauges."""
        assert self.secret is not None
        summary = release.summary
        self.secret.note_stored(release.window_start, int(summary["windows_in_period"]))
        if release.window_start == self.secret.last:
            self.metrics.set_model_loss(summary)

    def _export_loss(self, window_start: int) -> None:
        """Export the largest per-vehicle loss over the rolling period (its δ too, and by the
        PLD accountant, where it applies and is installed)."""
        worst = self.ledger.max_loss(window_start)  # per-cell ε summed (Thm II.3)
        self.metrics.vehicle_loss_period_max.set(worst)
        self.metrics.vehicle_delta_period_max.set(self.accountant.period_delta(worst))
        pld = self.accountant.period_pld(worst)
        if pld is not None:
            self.metrics.vehicle_loss_period_max_pld.set(pld)

    def _observe(self, release: WindowRelease, seconds: float, ours: bool) -> None:
        """Export a published window; the spend counter counts only the copy this process
        stored (a rival releaser that stored first counts its own); so does the failures
        counter. A failed window's conservative charge counts in the spend; the per-window
        gauges keep describing the last released window."""
        summary = release.summary
        m = self.metrics
        if self.secret is not None:
            self._observe_secret(release, seconds, ours)
            return
        if ours:
            m.privacy_budget_spent.inc(summary["privacy_loss"])
        if release.failed:  # charged to the budget (above), but nothing was released
            if ours:
                m.release_failures.inc()
            return
        m.windows_released.inc()
        m.cells_released.inc(len(release.cells))
        m.window_privacy_loss.set(summary["privacy_loss"])
        m.window_privacy_loss_unclipped.set(summary["privacy_loss_unclipped"])
        m.error_bound.set(summary["error_bound"])
        m.suppressed_pairs.inc(summary["suppressed_pairs"])
        m.budget_withheld_pairs.inc(summary.get("pairs_withheld_budget", 0))
        m.budget_limited_vehicles.set(summary.get("vehicles_budget_limited", 0))
        m.readings_withheld.inc(summary.get("readings_withheld") or 0)
        m.readings_held.inc(summary.get("readings_held") or 0)
        m.cells_withheld.set(summary.get("cells_withheld") or 0)
        m.cells_held.set(summary.get("cells_held") or 0)
        if summary.get("planned_by"):
            m.windows_planned.labels(summary["planned_by"]).inc()
        m.release_latency.observe(seconds)
        log.info(
            "released window %s: %d cells, K*epsilon %g, %.2f s after it completed",
            summary["window_start"], len(release.cells), summary["privacy_loss"], seconds,
        )  # fmt: skip

    def _observe_secret(self, release: WindowRelease, seconds: float, ours: bool) -> None:
        """Export a published secret-routes window: every vehicle's epsilon and delta for it
        and for the period so far (set when it was stored), its cells and latency."""
        m = self.metrics
        if release.failed:
            if ours:
                m.release_failures.inc()
            return
        m.windows_released.inc()
        m.cells_released.inc(len(release.cells))
        m.release_latency.observe(seconds)
        summary = release.summary
        log.info(
            "released window %s (secret-routes): %d cells, epsilon %g, %.2f s after it completed",
            summary["window_start"], len(release.cells), summary["epsilon_window"], seconds,
        )  # fmt: skip


def deferred_entries(release: WindowRelease) -> WindowColumns | None:
    """The entries ``release`` defers to the next window (None, or empty: none)."""
    carry = release.carry
    return carry if carry is not None and len(carry) else None


def vehicle_budget(settings: Settings) -> float | None:
    """The per-vehicle budget B in force (``vehicle_budget``; else the older ``budget_cap``,
    the same promise per period), None without one."""
    budget = settings.vehicle_budget
    if budget is None:
        budget = settings.budget_cap
    return None if budget is None else float(budget)
