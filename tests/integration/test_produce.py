"""`stream-dp produce` and the replay producer on the real broker."""

from __future__ import annotations

import asyncio
import sys
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka.partitioner import murmur2

from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.embedded_broker import EmbeddedBroker
from stream_dp.kafka.partition_reader import read_partition_to_end
from stream_dp.kafka.topics import TopicSpec, ensure_topics
from stream_dp.producer import (
    produce_readings,
)
from tests.producing import Terminal, produce_cli, three_vehicles

VEHICLES = ("veh-0", "veh-1", "veh-2")


def _decode(value: bytes) -> list[dict[str, Any]]:
    payload = orjson.loads(value)
    return payload if isinstance(payload, list) else [payload]


def _read_topic(conn: KafkaConnection, topic: str, partitions: int) -> list[Any]:
    async def read() -> list[Any]:
        records = []
        for p in range(partitions):
            records += await read_partition_to_end(conn, topic, p)
        return records

    return asyncio.run(read())


# --- grouping -------------------------------------------------------------------------


def test_cli_progress_is_a_bar_with_the_total(
    broker: EmbeddedBroker,
    topic_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "readings.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in three_vehicles(250)) + b"\n")
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("STREAM_DP_KAFKA_BOOTSTRAP", broker.bootstrap)

    status = produce_cli(monkeypatch, str(path), "--topic", f"{topic_prefix}.readings")

    assert status == 0
    shown = terminal.getvalue()
    assert shown.startswith("\r[") and shown.endswith("\n")
    assert "/250 readings" in shown
    assert shown.rsplit("\r", 1)[1].startswith("[####################] 100%  250/250 readings")


# --- producing to the real broker -------------------------------------------------------


async def test_produce_readings_from_an_async_source_with_a_rate(
    kafka: KafkaConnection, topic_prefix: str
) -> None:
    topic = f"{topic_prefix}.readings"
    await ensure_topics(kafka, [TopicSpec(topic, 1)])
    seen: list[int] = []

    async def source() -> AsyncIterator[dict[str, Any]]:
        for reading in three_vehicles(40):
            yield reading

    stats = await produce_readings(
        kafka, topic, source(), 1, 5000.0, progress=lambda s: seen.append(s.readings)
    )

    assert (stats.readings, stats.messages) == (40, 40)
    assert seen[-1] == 40
    records = await read_partition_to_end(kafka, topic, 0)
    assert [orjson.loads(r.value)["ts"] for r in records] == [r["ts"] for r in three_vehicles(40)]


async def test_a_pausing_source_does_not_hold_back_sent_readings(
    kafka: KafkaConnection, topic_prefix: str
) -> None:
    topic = f"{topic_prefix}.readings"
    await ensure_topics(kafka, [TopicSpec(topic, 1)])
    resume = asyncio.Event()

    async def live_source() -> AsyncIterator[dict[str, Any]]:
        first, second = three_vehicles(10)[:5], three_vehicles(10)[5:]
        for reading in first:
            yield reading
        await resume.wait()  # the feed pauses until the first readings were seen on Kafka
        for reading in second:
            yield reading

    producing = asyncio.create_task(produce_readings(kafka, topic, live_source(), batch_size=1))
    seen: list[Any] = []
    async with asyncio.timeout(30):
        while len(seen) < 5:
            seen = await read_partition_to_end(kafka, topic, 0)
    resume.set()
    stats = await producing
    assert stats.readings == 10
    assert len(await read_partition_to_end(kafka, topic, 0)) == 10


async def test_every_message_arrives_when_the_stale_batch_flusher_is_busy(
    kafka: KafkaConnection, topic_prefix: str
) -> None:
    """Regression: stopping the stale-batch flusher by cancellation lost the batch it was
    submitting (seen as 2,979 of 3,000 messages). Many vehicles, tiny linger, several runs."""
    topic = f"{topic_prefix}.readings"
    await ensure_topics(kafka, [TopicSpec(topic, 4)])
    readings = [{**r, "vehicle_id": f"v{i % 997}"} for i, r in enumerate(three_vehicles(3000))]
    for _ in range(3):
        stats = await produce_readings(kafka, topic, readings, batch_size=1, linger_ms=1)
        assert stats.messages == 3000
    records = [r for p in range(4) for r in await read_partition_to_end(kafka, topic, p)]
    assert len(records) == 3 * 3000


async def test_records_land_on_the_default_partition_of_their_key(
    kafka: KafkaConnection, topic_prefix: str
) -> None:
    topic = f"{topic_prefix}.readings"
    await ensure_topics(kafka, [TopicSpec(topic, 3)])
    await produce_readings(kafka, topic, three_vehicles(90), batch_size=4)
    records = [r for p in range(3) for r in await read_partition_to_end(kafka, topic, p)]
    assert sum(len(_decode(r.value)) for r in records) == 90
    for record in records:  # the Java client's murmur2 choice, as aiokafka's send() makes it
        assert record.partition == (murmur2(record.key) & 0x7FFFFFFF) % 3


def test_cli_replays_a_jsonl_file(
    broker: EmbeddedBroker,
    topic_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    readings = three_vehicles(250)
    path = tmp_path / "readings.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in readings) + b"\n")
    topic = f"{topic_prefix}.readings"
    monkeypatch.setenv("STREAM_DP_KAFKA_BOOTSTRAP", broker.bootstrap)

    status = produce_cli(
        monkeypatch, str(path), "--topic", topic, "--batch-size", "10", "--partitions", "3"
    )

    assert status == 0
    assert "produced 250 readings" in capsys.readouterr().out
    conn = KafkaConnection(broker.bootstrap, embedded=True)
    records = _read_topic(conn, topic, 3)
    per_vehicle: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        members = _decode(record.value)
        assert 1 <= len(members) <= 10
        assert {m["vehicle_id"] for m in members} == {record.key.decode()}
        per_vehicle[record.key.decode()] += members
    assert sorted(per_vehicle) == sorted(VEHICLES)
    for vehicle, got in per_vehicle.items():
        assert got == [r for r in readings if r["vehicle_id"] == vehicle]  # all, in order


def test_cli_skips_bad_rows_counts_them_by_reason_and_sends_the_rest(
    broker: EmbeddedBroker,
    topic_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 34 item 5: the one bad-input policy (was: the whole file refused, nothing sent)."""
    readings = three_vehicles(6)
    header = "vehicle_id,ts,lat,lon,speed\n"
    rows = [f"{r['vehicle_id']},{r['ts']},{r['lat']},{r['lon']},{r['speed']}\n" for r in readings]
    spoiled = rows[:2] + ["\n", header, "veh-0,yesterday,40.7,-74.0,3\n"] + rows[2:] + ["\n"]
    path = tmp_path / "joined.csv"
    path.write_text(header + "".join(spoiled))
    topic = f"{topic_prefix}.readings"
    monkeypatch.setenv("STREAM_DP_KAFKA_BOOTSTRAP", broker.bootstrap)

    status = produce_cli(monkeypatch, str(path), "--topic", topic, "--partitions", "1", "--quiet")

    assert status == 0
    captured = capsys.readouterr()
    assert "produced 6 readings" in captured.out
    assert captured.err.strip().splitlines()[-1] == (
        "skipped 2 bad rows (bad_ts 1, repeated_header 1), 2 blank lines"
    )
    conn = KafkaConnection(broker.bootstrap, embedded=True)
    sent = [m for record in _read_topic(conn, topic, 1) for m in _decode(record.value)]
    by_vehicle = sorted(readings, key=lambda r: (r["vehicle_id"], r["ts"]))
    assert sorted(sent, key=lambda r: (r["vehicle_id"], r["ts"])) == by_vehicle
