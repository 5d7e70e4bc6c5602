"""What one worker's tasks, timers and web pages share (:class:`WorkerRuntime`): its
settings and clients, the ingest and the releaser once started, its health, and how it stops
when it cannot go on."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field

from aiokafka import AIOKafkaProducer

from stream_dp.config import Settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.kafka.connection import KafkaConnection
from stream_dp.worker.broker_health import BrokerHealth, probe_broker
from stream_dp.worker.ingest import IngestProcessor
from stream_dp.worker.metrics import ServiceMetrics
from stream_dp.worker.release_service import ReleaseService

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
