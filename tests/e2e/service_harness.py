"""Helpers for end-to-end tests: worker processes, replay, and reading topics back."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from stream_dp.config import Settings
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.engine import OfflineEngine
from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.embedded_broker import free_loopback_port
from stream_dp.kafka.partition_reader import read_partition_to_end
from stream_dp.kafka.service_topics import ensure_service_topics
from tests.e2e.waiting import PATIENCE_S

HOUR = 3600


def create_topics(conn: KafkaConnection, settings: Settings) -> None:
    ensure_service_topics(settings, conn)


#: A worker's log line when its web port was taken between ``free_loopback_port`` and its
#: bind (other processes on a shared machine pick free ports too).
PORT_TAKEN = "address already in use"


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    web_port: int
    log_path: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    #: Starts the same worker on another web port (its log appended): see :meth:`wait_ready`.
    launch: Callable[[int], subprocess.Popen[bytes]] | None = None
    _log_from: int = 0

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.web_port}{path}"

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self.url(path), timeout=60) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def wait_ready(self, timeout: float = PATIENCE_S) -> None:
        """Wait until ``/readyz`` answers 200; a worker whose web port was taken before it
        could bind it is started again on another."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                log = self.log_path.read_bytes()[self._log_from :].decode(errors="replace")
                if self.launch is not None and PORT_TAKEN in log:
                    self._log_from = self.log_path.stat().st_size
                    self.web_port = free_loopback_port()
                    self.process = self.launch(self.web_port)
                    continue
                raise AssertionError(f"worker exited early:\n{self.log()}")
            try:
                if self.get("/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"worker not ready in {timeout} s:\n{self.log()}")

    def metric(self, name: str, labels: str = "") -> float:
        body = self.get("/metrics")[1].decode()
        for line in body.splitlines():
            if line.startswith(f"{name}{labels} ") or line.startswith(f"{name}{{{labels}}} "):
                return float(line.split()[-1])
        return 0.0

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]


def start_worker(
    bootstrap: str, settings: Settings, tmp_path: Path, name: str = "worker", **env: str
) -> Worker:
    """A ``stream-dp serve`` process; ``STREAM_DP_KAFKA_EMBEDDED`` is ``true`` unless ``env``
    says otherwise (as an operator who does not set it would run it)."""
    port = free_loopback_port()
    log_path = tmp_path / f"{name}-{port}.log"
    full_env = {**os.environ, **settings.to_env(), "STREAM_DP_KAFKA_EMBEDDED": "true", **env}
    full_env.pop("STREAM_DP_KAFKA_BOOTSTRAP", None)

    def launch(web_port: int) -> subprocess.Popen[bytes]:
        command = [sys.executable, "-m", "stream_dp.cli", "serve", "--bootstrap", bootstrap,
                   "--web-port", str(web_port), "--log-level", "info"]  # fmt: skip
        with log_path.open("ab") as log:
            return subprocess.Popen(
                command, env=full_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    return Worker(launch(port), port, log_path, env, launch)


def produce(conn: KafkaConnection, topic: str, readings: Iterable[dict], batch_size: int = 50):
    from stream_dp.producer import produce_readings

    return asyncio.run(produce_readings(conn, topic, list(readings), batch_size))


def produce_raw(conn: KafkaConnection, topic: str, values: list[bytes], key: bytes | None = None):
    from aiokafka import AIOKafkaProducer

    async def send() -> None:
        producer = AIOKafkaProducer(**conn.producer_kwargs())
        await producer.start()
        try:
            for value in values:
                await producer.send(topic, value, key=key)
            await producer.flush()
        finally:
            await producer.stop()

    asyncio.run(send())


def read_topic(conn: KafkaConnection, topic: str, partitions: int = 1) -> list[Any]:
    async def read() -> list[Any]:
        out = []
        for p in range(partitions):
            out.extend(await read_partition_to_end(conn, topic, p))
        return out

    return asyncio.run(read())


def end_offsets(conn: KafkaConnection, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's end offset (last record's offset + 1, 0 when empty)."""

    async def read() -> dict[int, int]:
        ends = {}
        for p in range(partitions):
            records = await read_partition_to_end(conn, topic, p)
            ends[p] = records[-1].offset + 1 if records else 0
        return ends

    return asyncio.run(read())


def topic_names(conn: KafkaConnection) -> set[str]:
    """Every topic the broker has (an auto-created one shows up here too)."""
    from stream_dp.kafka.topics import existing_topics

    return asyncio.run(existing_topics(conn))


def topic_partitions(conn: KafkaConnection, topic: str) -> int:
    from aiokafka.admin import AIOKafkaAdminClient

    async def count() -> int:
        admin = AIOKafkaAdminClient(**conn.admin_kwargs())
        await admin.start()
        try:
            (described,) = await admin.describe_topics([topic])
            return len(described["partitions"])
        finally:
            await admin.close()

    return asyncio.run(count())


def wait_for_commits(
    conn: KafkaConnection,
    group: str,
    topic: str,
    expected: dict[int, int],
    timeout: float = PATIENCE_S,
) -> dict[int, int | None]:
    """Poll ``group``'s committed offsets until they equal ``expected``; return the last seen."""

    async def committed() -> dict[int, int | None]:
        consumer = AIOKafkaConsumer(
            **conn.consumer_kwargs(), group_id=group, enable_auto_commit=False
        )
        await consumer.start()
        try:
            return {p: await consumer.committed(TopicPartition(topic, p)) for p in expected}
        finally:
            await consumer.stop()

    deadline = time.monotonic() + timeout
    seen = asyncio.run(committed())
    while seen != expected and time.monotonic() < deadline:
        time.sleep(0.5)
        seen = asyncio.run(committed())
    return seen


def read_releases(conn: KafkaConnection, settings: Settings) -> list[dict[str, Any]]:
    return [orjson.loads(r.value) for r in read_topic(conn, settings.topic_releases)]


def wait_for_windows(
    conn: KafkaConnection, settings: Settings, expected: int, worker: Worker | None = None,
    timeout: float = PATIENCE_S,
) -> list[dict[str, Any]]:  # fmt: skip
    deadline = time.monotonic() + timeout
    records: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        records = read_releases(conn, settings)
        if len({r["window_start"] for r in records if r["type"] == "window"}) >= expected:
            return records
        time.sleep(1.0)
    log = worker.log() if worker else ""
    raise AssertionError(f"only {len(records)} records after {timeout} s\n{log}")


def non_noise(records: list[dict[str, Any]]) -> dict[tuple[str, str], tuple]:
    """The fields of each record that do not depend on the noise."""
    keep = ("n_vehicles", "n_readings", "n_readings_used", "K", "error_bound", "cap", "G1",
            "cells_released", "privacy_loss", "pairs_withheld_budget",
            "vehicles_budget_limited")  # fmt: skip
    return {
        (r["window_start"], r.get("cell", "*")): tuple(
            round(r[k], 9) if isinstance(r.get(k), float) else r.get(k) for k in keep
        )
        for r in records
    }


def dump(obj: Any) -> str:
    return json.dumps(obj, indent=1, default=str)[:3000]


def sigint_as_by_default() -> None:
    """A child's ``preexec_fn``: SIGINT back to its default disposition. A shell starts a
    background job (``pytest ... &``) with SIGINT ignored and children inherit that, so a
    command started from such a run would never see the SIGINT a test sends it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_keep_running_demo(hours: int, port: int) -> tuple[subprocess.Popen[str], str]:
    """`stream-dp demo --hours N --keep-running` on ``port``, read up to its "still running:"
    line: the process and everything it printed (the caller stops it)."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("STREAM_DP_")}
    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stream_dp",
            "demo",
            "--hours",
            str(hours),
            "--keep-running",
            "--web-port",
            str(port),
            "--map-tiles",
            "none",
        ],  # fmt: skip
        cwd=Path(__file__).parents[2],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        preexec_fn=sigint_as_by_default,  # the tests stop it with SIGINT too
    )
    assert demo.stdout is not None
    shown = ""
    for line in demo.stdout:
        shown += line
        if line.startswith("still running:"):
            break
    return demo, shown


def offline_records(settings: Settings, readings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the offline engine releases from ``readings`` (records, in order)."""
    engine = OfflineEngine(settings, LaplaceNoise())
    out = []
    for releases in (engine.feed(readings), engine.finish()):
        for release in releases:
            out.extend(release.records)
    return out
