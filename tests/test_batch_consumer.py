"""The getmany ingest path's bookkeeping: revoked partitions are skipped, not re-created."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import orjson

from stream_dp.config import load_settings
from stream_dp.metrics import ServiceMetrics
from stream_dp.worker.batch_consumer import ReadingsConsumer
from stream_dp.worker.ingest import IngestProcessor


class _Producer:
    """Records every send and completes it at once."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int | None]] = []

    async def send(self, topic, value, partition=None, **_):
        self.sent.append((topic, partition))
        future = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future

    async def send_and_wait(self, topic, value, partition=None, **_):
        self.sent.append((topic, partition))


def _message(partition: int, offset: int, vehicle: str) -> SimpleNamespace:
    reading = {"vehicle_id": vehicle, "ts": 1_700_000_000 + offset, "lat": 40.7, "lon": -74.0,
               "speed": 30.0}  # fmt: skip
    return SimpleNamespace(
        topic="readings", partition=partition, offset=offset, key=vehicle.encode(),
        value=orjson.dumps(reading),
    )  # fmt: skip


def _processor() -> tuple[IngestProcessor, _Producer]:
    settings = load_settings(partitions=2, topic_state="state", topic_readings="readings")
    producer = _Producer()
    ingest = IngestProcessor(settings, conn=None, producer=producer, metrics=ServiceMetrics())

    async def recover(partition):  # no Kafka: a fresh partition
        from stream_dp.engine import new_partition_state
        from stream_dp.worker.ingest import PartitionRuntime

        return PartitionRuntime(new_partition_state(settings))

    ingest._recover = recover
    return ingest, producer


def test_a_batch_skips_partitions_revoked_before_its_turn():
    ingest, producer = _processor()
    messages = [_message(0, i, "a") for i in range(3)] + [_message(1, i, "b") for i in range(4)]
    asyncio.run(ingest.process(messages, still_assigned={0}))
    assert set(ingest.partitions) == {0}
    assert ingest.partitions[0].applied_offset == 2
    assert {partition for topic, partition in producer.sent if topic == "state"} == {0}
    assert ingest.metrics.readings.labels("accepted")._value.get() == 3


def test_without_an_assignment_filter_every_partition_is_applied():
    ingest, _ = _processor()
    messages = [_message(0, 0, "a"), _message(1, 5, "b")]
    asyncio.run(ingest.process(messages))
    assert {p: r.applied_offset for p, r in ingest.partitions.items()} == {0: 0, 1: 5}


def test_revocation_updates_the_shared_assignment_in_place_before_waiting():
    ingest, _ = _processor()
    seen: list[set[int]] = []
    consumer = ReadingsConsumer(
        ingest.settings, conn=None, ingest=ingest, on_assignment=seen.append
    )
    shared = consumer.assigned
    consumer.assign([0, 1])
    assert shared == {0, 1}  # a batch holding this set sees every change

    async def revoke_while_a_batch_holds_the_lock():
        async with ingest.lock:
            task = asyncio.create_task(consumer.revoke([1]))
            await asyncio.sleep(0)
            assert shared == {0}  # dropped at once, before the batch finishes
            assert not task.done()  # ... but the state is dropped only after it
        await task

    ingest.partitions[1] = object()
    asyncio.run(revoke_while_a_batch_holds_the_lock())
    assert 1 not in ingest.partitions
    assert seen == [{0, 1}, {0}]
