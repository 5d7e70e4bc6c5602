"""The Faust app of a worker: the ingest, the releaser, timers and web pages.

The readings topic is read in batches so per-message cost is amortised (a message may also
carry many readings): by default by an aiokafka ``getmany`` consumer running as a task of
the app (:mod:`stream_dp.worker.batch_consumer`), or, with ``ingest_consumer = "faust"``, by
a Faust agent over ``take_events``. All state lives in the engine's structures, made durable
through the state topic (see :mod:`stream_dp.worker.ingest`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import faust
from aiokafka import AIOKafkaProducer
from faust.types import TP

from stream_dp.config import Settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.service_topics import service_topic_partitions
from stream_dp.metrics import ServiceMetrics
from stream_dp.worker.batch_consumer import ReadingsConsumer
from stream_dp.worker.broker_health import BrokerHealth, probe_broker
from stream_dp.worker.idle_rule import UNKNOWN_INPUT, InputState, input_state_from
from stream_dp.worker.ingest import IngestProcessor
from stream_dp.worker.log_setup import RejectedReadingsLog
from stream_dp.worker.release_service import ReleaseService
from stream_dp.worker.web import register_pages

log = logging.getLogger(__name__)
#: Exit status of a worker that stopped because it could not go on (broker gone or empty, a
#: crashed task); a forced exit follows after ``HARD_EXIT_AFTER_S`` if the graceful stop hangs.
EXIT_FAILED = 1
HARD_EXIT_AFTER_S = 15.0
#: aiokafka's default producer request timeout: a send fails after this long without an answer.
DEFAULT_REQUEST_TIMEOUT_S = 40.0


def producer_request_timeout_ms(settings: Settings) -> int:
    """A send waits out a broker outage for as long as the worker does (``stall_seconds``,
    plus a margin): with aiokafka's 40 s default, a longer pause failed the ingest's
    state write and crashed the worker in the middle of the outage."""
    return int(max(DEFAULT_REQUEST_TIMEOUT_S, settings.stall_seconds + 10.0) * 1000)


#: Seconds between the log lines counting invalid and late readings (only when there were).
REJECTED_LOG_INTERVAL_S = 60.0


@dataclass
class WorkerRuntime:
    """What the agent, timers and pages share; created lazily inside the worker's loop."""

    settings: Settings
    conn: KafkaConnection
    metrics: ServiceMetrics
    noise: LaplaceNoise
    producer: AIOKafkaProducer | None = None
    ingest: IngestProcessor | None = None
    releaser: ReleaseService | None = None
    started: asyncio.Event = field(default_factory=asyncio.Event)
    #: The readings partitions assigned to this worker (changed in place on revocation).
    assigned: set[int] = field(default_factory=set)
    #: False until the first assignment and during a rebalance.
    assignment_known: bool = False
    failed: str | None = None
    health: BrokerHealth | None = None

    def fail(self, where: str, exc: BaseException) -> None:
        """A crashed agent must not leave a live-looking worker: report unhealthy and stop
        the process (its orchestrator restarts it; state is recovered from Kafka)."""
        log.error("%s failed: %s; stopping the worker", where, type(exc).__name__)
        self._stop_process(f"{where}: {type(exc).__name__}")

    async def give_up(self, reason: str) -> None:
        """No progress is possible: stop releasing at once, say why in one line, and exit
        with :data:`EXIT_FAILED` (``/healthz`` is 503 meanwhile)."""
        if self.failed is not None:
            return
        log.error("stream-dp worker stopping: %s", reason)
        if self.releaser is not None:
            await self.releaser.stop()  # fenced: nothing more is released
        self._stop_process(reason)

    def _stop_process(self, reason: str) -> None:
        self.failed = reason
        # A stop against an unreachable broker can hang in the clients: exit regardless.
        watchdog = threading.Timer(HARD_EXIT_AFTER_S, os._exit, args=(EXIT_FAILED,))
        watchdog.daemon = True
        watchdog.start()
        os.kill(os.getpid(), signal.SIGTERM)

    async def watch_broker(self, expected: dict[str, int]) -> None:
        """One probe (see :mod:`stream_dp.worker.broker_health`); gives up when fatal."""
        health, producer = self.health, self.producer
        if health is None or producer is None:
            return
        try:
            lost = await probe_broker(producer.client, expected, set(expected))
        except Exception as exc:  # no answer in time, or no connection
            log.debug("broker probe failed: %s", type(exc).__name__)
        else:
            health.answered(time.monotonic(), lost)
        if self.ingest is not None:
            health.input_lost(self.ingest.input_lost)
        reason = health.fatal(time.monotonic())
        if reason is not None:
            await self.give_up(reason)

    async def start(self) -> None:
        self.producer = AIOKafkaProducer(
            **self.conn.producer_kwargs(),
            acks="all",
            linger_ms=5,
            enable_idempotence=False,
            request_timeout_ms=producer_request_timeout_ms(self.settings),
        )
        await self.producer.start()
        self.ingest = IngestProcessor(self.settings, self.conn, self.producer, self.metrics)
        self.releaser = ReleaseService(
            self.settings, self.conn, self.producer, self.metrics, self.noise
        )
        self.started.set()

    async def stop(self) -> None:
        if self.releaser is not None:
            await self.releaser.stop()
        if self.producer is not None:
            await self.producer.stop()

    @property
    def ready(self) -> bool:
        """Ready once started and every assigned partition's state is recovered."""
        if not self.started.is_set() or self.ingest is None or self.releaser is None:
            return False
        recovered = self.assignment_known and self.assigned <= set(self.ingest.partitions)
        reachable = self.health is None or self.health.reachable(time.monotonic())
        return (
            recovered and reachable and not self.ingest.recovering and not self.releaser.rebuilding
        )

    def fatal(self) -> str | None:
        """Why this worker cannot go on (``/healthz``), or None."""
        if self.failed is not None:
            return self.failed
        return None if self.health is None else self.health.fatal(time.monotonic())


def build_app(settings: Settings, conn: KafkaConnection, noise: LaplaceNoise) -> faust.App:
    if noise.source.is_seeded:
        raise ValueError("the service refuses a seeded random source: releases need fresh noise")
    (settings.data_dir / settings.app_id).mkdir(parents=True, exist_ok=True)
    metrics = ServiceMetrics()
    metrics.info.info(settings.info_labels())
    runtime = WorkerRuntime(settings, conn, metrics, noise)
    runtime.health = BrokerHealth(
        settings.broker_unavailable_seconds, settings.stall_seconds, time.monotonic()
    )
    app = faust.App(
        settings.app_id,
        **conn.faust_kwargs(),
        store="memory://",
        datadir=str(settings.data_dir / settings.app_id),
        topic_partitions=settings.partitions,
        topic_allow_declare=False,
        consumer_auto_offset_reset="earliest",
        broker_commit_interval=1.0,
        web_host=settings.web_host,
        web_bind=settings.web_host,  # Faust binds web_bind (default 0.0.0.0), not web_host
        web_port=settings.web_port,
        web_router_enabled=False,
        web_tables_enabled=False,
        web_graph_enabled=False,
        web_stats_enabled=False,
        web_metrics_enabled=False,
    )

    @app.task
    async def start_runtime() -> None:
        await runtime.start()
        assert runtime.releaser is not None
        try:
            await runtime.releaser.run()
        except Exception as exc:
            runtime.fail("releaser", exc)
            raise
        finally:
            await runtime.stop()

    if settings.ingest_consumer == "batch":
        input_state = _register_batch_ingest(app, runtime)
    else:
        input_state = _register_faust_ingest(app, runtime)

    @app.timer(1.0)
    async def idle_and_progress() -> None:
        if not runtime.started.is_set() or runtime.ingest is None:
            return
        await runtime.ingest.tick(sorted(runtime.assigned), input_state, runtime.assigned)

    expected_topics = service_topic_partitions(settings)

    @app.timer(1.0)
    async def broker_probe() -> None:
        if runtime.started.is_set():
            await runtime.watch_broker(expected_topics)

    rejected = RejectedReadingsLog(metrics.registry)

    @app.timer(REJECTED_LOG_INTERVAL_S)
    async def log_rejected_readings() -> None:
        line = rejected.report()
        if line is not None:
            log.warning(line)

    register_pages(app, runtime)
    app.stream_dp_runtime = runtime  # type: ignore[attr-defined]
    return app


InputStateOf = Callable[[int], Awaitable[InputState]]


def _register_batch_ingest(app: faust.App, runtime: WorkerRuntime) -> InputStateOf:
    """The default ingest: a :class:`ReadingsConsumer` task; returns its ``input_state``."""
    consumer: ReadingsConsumer | None = None

    def on_rebalance(settled: bool) -> None:
        runtime.assignment_known = settled

    @app.task
    async def ingest_batches() -> None:
        nonlocal consumer
        await runtime.started.wait()
        assert runtime.ingest is not None
        consumer = ReadingsConsumer(runtime.settings, runtime.conn, runtime.ingest, on_rebalance)
        runtime.assigned = consumer.assigned  # the consumer's live set
        try:
            await consumer.run()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            runtime.fail("ingest", exc)
            raise

    async def input_state(partition: int) -> InputState:
        if consumer is None:
            return UNKNOWN_INPUT
        return await consumer.input_state(partition)

    return input_state


def _register_faust_ingest(app: faust.App, runtime: WorkerRuntime) -> InputStateOf:
    """The Faust-agent ingest (``take_events``); returns its ``input_state``."""
    settings = runtime.settings
    readings = app.topic(
        settings.topic_readings,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
        partitions=settings.partitions,
    )

    @app.agent(readings, concurrency=1)
    async def ingest(stream: faust.StreamT) -> None:
        await runtime.started.wait()
        assert runtime.ingest is not None
        try:
            async for events in stream.take_events(
                settings.batch_size, within=settings.batch_seconds
            ):
                await runtime.ingest.process([event.message for event in events])
        except Exception as exc:
            runtime.fail("ingest", exc)
            raise

    async def input_state(partition: int) -> InputState:
        """What Faust's consumer (its aiokafka consumer runs in a thread of its own) last
        heard about the readings partition; unknown before the first fetch, during a
        rebalance, or when it does not answer in time."""
        tp = TP(settings.topic_readings, partition)
        try:
            end = app.consumer.highwater(tp)
            inner = app.consumer._thread._ensure_consumer()  # type: ignore[attr-defined]
            stamped_ms = inner.last_poll_timestamp(tp)
            position = await asyncio.wait_for(app.consumer.position(tp), timeout=1.0)
        except Exception:
            return UNKNOWN_INPUT
        return input_state_from(end, position, stamped_ms)

    @app.on_partitions_assigned.connect
    async def on_assigned(sender: Any, assigned: Any, **_: Any) -> None:
        runtime.assigned = {
            tp.partition for tp in assigned if tp.topic == readings.get_topic_name()
        }
        runtime.assignment_known = True

    @app.on_partitions_revoked.connect
    async def on_revoked(sender: Any, revoked: Any, **_: Any) -> None:
        lost = [tp.partition for tp in revoked if tp.topic == readings.get_topic_name()]
        runtime.assignment_known = False
        runtime.assigned -= set(lost)
        if runtime.ingest is not None:
            await runtime.ingest.on_revoked(lost)

    return input_state
