"""The independent Kafka client kcat reads what stream-dp writes, through a real broker.

kcat 1.7.1 (librdkafka 2.0.2) cannot parse Tansu 0.6.0's ApiVersions v3 response, so the
broker here advertises a test-only relay that strips that response's tagged fields; see
:mod:`tests.e2e.kafka_protocol_relay` for the measured cause. Against Apache Kafka, kcat
connects directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.embedded_broker import (
    EmbeddedBrokerError,
    free_loopback_port,
    resolve_broker_binary,
)
from stream_dp.kafka.topics import TopicSpec, ensure_topics
from stream_dp.release.records import SCHEMA_VERSION
from tests.e2e.kafka_protocol_relay import (
    API_VERSIONS_TAG_DEFAULTS,
    KafkaProtocolRelay,
    read_tag_buffer,
    read_uvarint,
    strip_api_versions_tags,
)
from tests.e2e.service_harness import (
    create_topics,
    produce,
    read_releases,
    read_topic,
    start_worker,
    wait_for_windows,
)
from tests.support.readings import synthetic_readings
from tests.support.settings import service_settings

LOOPBACK = "127.0.0.1"
# Variables Tansu reads that must not leak in (as in EmbeddedBroker).
_TANSU_ENV_SCRUBBED = ("SCHEMA_REGISTRY", "OTEL_EXPORTER_OTLP_ENDPOINT", "STORAGE_ENGINE")

# Tansu 0.6.0's ApiVersions v3 answer to kcat's request (correlation id 2), frame length
# stripped, as captured on the wire: header v0, error 0, 36 api keys, throttle 0, then
# the 4 KIP-584 tagged fields (20 bytes) that librdkafka 2.0.2 mis-parses.
TANSU_API_VERSIONS_V3 = bytes.fromhex(
    "0000000200002500"
    "3c00000001000033000000000000140000000600000d000000050000130000000700000f"
    "0000000500001a00000004000001000000110000080000000900000e0000000500003200"
    "000000000047000000000000110000000100004b00000000000009000000090000180000"
    "00050000000000000b000010000000050000160000000500000a0000000600001d000000"
    "030000120000000400002c000000010000020000000900001e0000000300001c00000004"
    "0000190000000400002e00000000000024000000020000030000000c0000450000000000"
    "000b0000000900002a00000002000020000000040000150000000200000c000000040000"
    "000000"
    "04 000101 0108ffffffffffffffff 020101 030100"
)


def librdkafka_2_0_2_skip_tags(body: bytes, offset: int) -> int:
    """Model of ``rd_kafka_buf_skip_tags`` before librdkafka 2.2.0 (#4278): skips
    ``taglen - 1`` bytes per tagged field. Returns the offset after the tags, or raises
    ValueError with librdkafka's underflow message."""
    count, offset = read_uvarint(body, offset)
    for _ in range(count):
        _, offset = read_uvarint(body, offset)
        taglen, offset = read_uvarint(body, offset)
        if taglen > 1:
            if taglen - 1 > len(body) - offset:
                raise ValueError(
                    f"underflow at {offset}/{len(body)}: expected {taglen - 1} bytes > "
                    f"{len(body) - offset} remaining bytes"
                )
            offset += taglen - 1
    return offset


def test_the_relay_rewrite_fixes_the_measured_librdkafka_underflow():
    body_offset = 4  # librdkafka's offsets start after the correlation id
    tags_offset = len(TANSU_API_VERSIONS_V3) - 20 - body_offset
    original = TANSU_API_VERSIONS_V3[body_offset:]
    # The exact failure kcat reports: "... at 274/279 ...: expected 216172782113783806
    # bytes > 5 remaining bytes".
    with pytest.raises(ValueError, match=r"at 274/279: expected 216172782113783806 bytes > 5"):
        librdkafka_2_0_2_skip_tags(original, tags_offset)
    # The response itself is valid: a spec decoder consumes it exactly.
    tags, end = read_tag_buffer(original, tags_offset)
    assert end == len(original)
    assert tags == API_VERSIONS_TAG_DEFAULTS

    rewritten, dropped = strip_api_versions_tags(TANSU_API_VERSIONS_V3)
    assert dropped == API_VERSIONS_TAG_DEFAULTS
    assert rewritten == TANSU_API_VERSIONS_V3[:-20] + b"\x00"
    new_body = rewritten[body_offset:]
    assert librdkafka_2_0_2_skip_tags(new_body, tags_offset) == len(new_body)
    # Idempotent, and error responses (v0 layout) pass untouched.
    assert strip_api_versions_tags(rewritten) == (rewritten, {})
    error_reply = TANSU_API_VERSIONS_V3[:4] + b"\x00\x23" + b"\x00\x00\x00\x00"
    assert strip_api_versions_tags(error_reply) == (error_reply, {})


# --- against a real broker ---------------------------------------------------------


@dataclass
class RelayedBroker:
    relay: KafkaProtocolRelay
    broker_port: int
    log_path: Path

    @property
    def bootstrap(self) -> str:
        """Where clients connect: the relay (also what the broker advertises)."""
        return self.relay.bootstrap

    @property
    def conn(self) -> KafkaConnection:
        return KafkaConnection(self.bootstrap, embedded=True)

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]


def _require_kcat() -> None:
    if shutil.which("kcat") is not None:
        return
    reason = "kcat is not installed (Debian package kcat)"
    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason}; CI must run the kcat end-to-end tests", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def relayed() -> Iterator[RelayedBroker]:
    """A Tansu broker on a free port that advertises a protocol relay in front of it."""
    _require_kcat()
    try:
        binary = resolve_broker_binary()
    except EmbeddedBrokerError as exc:
        pytest.skip(f"embedded Tansu broker unavailable: {exc}")
    broker_port = free_loopback_port()
    fd, log_name = tempfile.mkstemp(prefix="stream-dp-kcat-tansu-", suffix=".log")
    os.close(fd)
    log_path = Path(log_name)
    try:
        yield from _relayed_broker(binary, broker_port, log_path)
    finally:
        log_path.unlink(missing_ok=True)


def _relayed_broker(binary: str, broker_port: int, log_path: Path) -> Iterator[RelayedBroker]:
    with KafkaProtocolRelay(LOOPBACK, broker_port) as relay, log_path.open("ab") as log:
        env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV_SCRUBBED}
        process = subprocess.Popen(
            [binary, "broker",
             "--listener-url", f"tcp://{LOOPBACK}:{broker_port}",
             "--advertised-listener-url", f"tcp://{LOOPBACK}:{relay.port}",
             "--storage-engine", "memory://tansu/"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True,
        )  # fmt: skip
        started = RelayedBroker(relay, broker_port, log_path)
        try:
            _wait_until_listening(process, broker_port, started)
            yield started
        finally:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, sig)
                try:
                    process.wait(timeout=5)
                    break
                except subprocess.TimeoutExpired:
                    continue


def _wait_until_listening(process: subprocess.Popen, port: int, broker: RelayedBroker) -> None:
    for _ in range(300):  # at least 15 s
        if process.poll() is not None:
            pytest.fail(f"Tansu exited with {process.returncode}:\n{broker.log_tail()}")
        try:
            socket.create_connection((LOOPBACK, port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    pytest.fail(f"Tansu did not listen on port {port}:\n{broker.log_tail()}")


def kcat(*args: str, stdin: str | None = None, timeout: float = 30) -> str:
    """Run kcat; return stdout, failing the test with stderr on a non-zero exit."""
    result = subprocess.run(
        ["kcat", *args], input=stdin, capture_output=True, text=True, timeout=timeout
    )
    if result.returncode != 0:
        pytest.fail(f"kcat {' '.join(args)} exited {result.returncode}:\n{result.stderr[-3000:]}")
    return result.stdout


def consume_with_kcat(bootstrap: str, topic: str) -> list[str]:
    """Every record value of ``topic`` (from the beginning to the end), one per line."""
    out = kcat("-b", bootstrap, "-C", "-t", topic, "-e", "-q", "-o", "beginning", "-f", "%s\n")
    return out.splitlines()


def create(conn: KafkaConnection, topic: str, partitions: int) -> None:
    asyncio.run(ensure_topics(conn, [TopicSpec(topic, partitions)]))


@pytest.mark.broker
def test_without_the_relay_kcat_cannot_read_tansu_metadata(relayed):
    """The reason the relay exists; if this starts to fail, the relay can go."""
    result = subprocess.run(
        ["kcat", "-b", f"{LOOPBACK}:{relayed.broker_port}", "-L", "-m", "2"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode != 0
    assert "ApiVersionRequest failed: Local: Read underflow" in result.stderr


@pytest.mark.broker
def test_kcat_lists_metadata_through_the_relay(relayed, topic_prefix):
    topic = f"{topic_prefix}.meta"
    create(relayed.conn, topic, partitions=2)
    metadata = json.loads(kcat("-b", relayed.bootstrap, "-L", "-J", "-t", topic, "-m", "10"))
    assert [b["name"] for b in metadata["brokers"]] == [relayed.bootstrap]
    [described] = metadata["topics"]
    assert described["topic"] == topic
    assert "error" not in described
    assert sorted(p["partition"] for p in described["partitions"]) == [0, 1]
    # What the relay changed: only the ApiVersions tags, which held their defaults.
    assert relayed.relay.rewrites, "kcat's ApiVersions v3 response was not rewritten"
    assert all(r.only_defaults for r in relayed.relay.rewrites)
    assert relayed.relay.unparsed == []


@pytest.mark.broker
def test_kcat_produces_and_consumes_through_the_relay(relayed, topic_prefix):
    topic = f"{topic_prefix}.roundtrip"
    create(relayed.conn, topic, partitions=1)
    lines = [f"key-{i}:value {i}" for i in range(20)]
    kcat("-b", relayed.bootstrap, "-P", "-t", topic, "-K", ":", stdin="\n".join(lines) + "\n")
    out = kcat(
        "-b", relayed.bootstrap, "-C", "-t", topic, "-e", "-q", "-o", "beginning",
        "-f", "%k:%s\n",
    )  # fmt: skip
    assert out.splitlines() == lines
    # The service's own client (aiokafka) sees the same records kcat wrote.
    records = read_topic(relayed.conn, topic)
    assert [f"{r.key.decode()}:{r.value.decode()}" for r in records] == lines


@pytest.mark.broker
@pytest.mark.slow
def test_kcat_reads_the_releases_a_worker_published(relayed, topic_prefix, tmp_path):
    conn = relayed.conn
    settings = service_settings(topic_prefix)
    create_topics(conn, settings)
    # APP_DATADIR: Faust's data directory, otherwise created in the current directory.
    datadir = str(tmp_path / "faust-data")
    worker = start_worker(relayed.bootstrap, settings, tmp_path, APP_DATADIR=datadir)
    try:
        worker.wait_ready()
        produce(conn, settings.topic_readings, synthetic_readings(10, hours=2, per_hour=150))
        wait_for_windows(conn, settings, expected=2, worker=worker)
    finally:
        worker.stop()  # the topic no longer changes: both readers see the same end
    via_aiokafka = read_releases(conn, settings)
    lines = consume_with_kcat(relayed.bootstrap, settings.topic_releases)
    via_kcat = [json.loads(line) for line in lines]
    assert len({r["window_start"] for r in via_kcat if r["type"] == "window"}) >= 2
    assert all(r["schema_version"] == SCHEMA_VERSION for r in via_kcat)
    # One partition: the same records, in the same order, through both clients.
    assert [r["release_id"] for r in via_kcat] == [r["release_id"] for r in via_aiokafka]
    assert via_kcat == via_aiokafka
