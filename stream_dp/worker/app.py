"""The Faust app of a worker: the ingest, the releaser, timers and web pages.

The readings topic is read in batches so per-message cost is amortised (a message may also
carry many readings) by an aiokafka ``getmany`` consumer running as a task of the app
(:mod:`stream_dp.worker.batch_consumer`), not by a Faust agent: Faust's stream delivered too
few messages per second into ``take_events``. All state lives in the engine's structures, made
durable through the state topic (see :mod:`stream_dp.worker.ingest`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import faust

from stream_dp.config import Settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.service_topics import service_topic_partitions
from stream_dp.worker.batch_consumer import ReadingsConsumer
from stream_dp.worker.broker_health import BrokerHealth
from stream_dp.worker.idle_rule import TICK_SECONDS, UNKNOWN_INPUT, InputState
from stream_dp.worker.log_setup import RejectedReadingsLog
from stream_dp.worker.metrics import ServiceMetrics
from stream_dp.worker.runtime import EXIT_FAILED, WorkerRuntime
from stream_dp.worker.web import register_pages

log = logging.getLogger(__name__)
__all__ = ["EXIT_FAILED", "build_app"]

#: Seconds between the log lines counting invalid and late readings (only when there were).
REJECTED_LOG_INTERVAL_S = 60.0


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
        try:
            await runtime.start()  # inside: a start cancelled half-way is stopped too
            assert runtime.releaser is not None
            try:
                await runtime.releaser.run()
            except Exception as exc:
                runtime.fail("releaser", exc)
                raise
        finally:
            await runtime.stop()

    input_state = _register_batch_ingest(app, runtime)

    @app.timer(TICK_SECONDS)
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
    """The ingest: a :class:`ReadingsConsumer` task; returns its ``input_state``."""
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
