"""The embedded Tansu broker: start, serve, stop with its group; quirk settings only for it."""

from __future__ import annotations

import os
import socket
import ssl
import stat
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.embedded_broker import (
    EmbeddedBroker,
    EmbeddedBrokerError,
    resolve_broker_binary,
)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def tansu() -> str:
    try:
        return resolve_broker_binary()
    except EmbeddedBrokerError as exc:
        pytest.skip(f"embedded Tansu broker unavailable: {exc}")


def test_start_serve_stop_leaves_no_process(tansu: str) -> None:
    with EmbeddedBroker(binary=tansu) as broker:
        host, port = broker.bootstrap.split(":")
        assert host == "127.0.0.1"
        with socket.create_connection((host, int(port)), timeout=2):
            pass
        pgid = broker.pid
        assert pgid is not None and os.getpgid(pgid) == pgid  # leads its own group
    assert not broker.running
    assert not _group_alive(pgid)
    broker.stop()  # a second stop is harmless
    with pytest.raises(EmbeddedBrokerError, match="not running"):
        _ = broker.bootstrap


async def test_answers_kafka_metadata(broker: EmbeddedBroker) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        cluster = await admin.describe_cluster()
    finally:
        await admin.close()
    assert cluster["brokers"]


def test_failed_start_reports_the_broker_output(tmp_path: Path) -> None:
    fake = tmp_path / "fake-tansu"
    fake.write_text("#!/bin/sh\necho 'boom: storage engine missing' >&2\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    broker = EmbeddedBroker(binary=str(fake), start_timeout=5)
    with pytest.raises(EmbeddedBrokerError, match="status 3") as info:
        broker.start()
    assert "boom: storage engine missing" in str(info.value)
    assert not broker.running


def test_log_goes_to_the_given_file(tansu: str, tmp_path: Path) -> None:
    log = tmp_path / "tansu.log"
    with EmbeddedBroker(binary=tansu, log_path=log):
        pass
    assert log.exists()


# --- client settings: Tansu workarounds only for the embedded broker ---------------------


def test_quirk_overrides_apply_only_to_the_embedded_broker() -> None:
    embedded = KafkaConnection("127.0.0.1:9092", embedded=True)
    remote = KafkaConnection("kafka-1:9092,kafka-2:9092")
    assert embedded.consumer_kwargs()["session_timeout_ms"] == 2000
    assert embedded.faust_kwargs()["broker_session_timeout"] == 2.0
    assert "producer_max_batch_size" not in embedded.faust_kwargs()
    assert embedded.faust_kwargs(relies_on_table_recovery=True)["producer_max_batch_size"] == 1
    assert "session_timeout_ms" not in remote.consumer_kwargs()
    assert remote.faust_kwargs() == {"broker": ["kafka://kafka-1:9092", "kafka://kafka-2:9092"]}
    assert remote.producer_kwargs()["bootstrap_servers"] == ["kafka-1:9092", "kafka-2:9092"]


def test_sasl_over_tls_settings() -> None:
    conn = KafkaConnection.from_env(
        {
            "STREAM_DP_KAFKA_BOOTSTRAP": "broker:9093",
            "STREAM_DP_KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
            "STREAM_DP_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "STREAM_DP_KAFKA_SASL_USERNAME": "svc",
            "STREAM_DP_KAFKA_SASL_PASSWORD": "s3cret",
        }
    )
    kwargs = conn.admin_kwargs()
    assert kwargs["security_protocol"] == "SASL_SSL"
    assert isinstance(kwargs["ssl_context"], ssl.SSLContext)
    assert (kwargs["sasl_mechanism"], kwargs["sasl_plain_username"]) == ("SCRAM-SHA-512", "svc")
    credentials = conn.faust_kwargs()["broker_credentials"]
    assert credentials.username == "svc" and credentials.ssl_context is not None
    assert "s3cret" not in repr(conn)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"bootstrap_servers": " , "},
        {"bootstrap_servers": "h:1", "security_protocol": "TLS"},
        {"bootstrap_servers": "h:1", "security_protocol": "SASL_PLAINTEXT"},
        {"bootstrap_servers": "h:1", "security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN"},
    ],
)
def test_connection_rejects_incomplete_settings(kwargs: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        KafkaConnection(**kwargs)
