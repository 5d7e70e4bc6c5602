"""The getmany ingest path's bookkeeping: revoked partitions are skipped, not re-created."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import orjson

from stream_dp.config import load_settings
from stream_dp.worker.batch_consumer import ReadingsConsumer
from stream_dp.worker.ingest import IngestProcessor
from stream_dp.worker.metrics import ServiceMetrics


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

    async def recover(partition, still_assigned=None):  # no Kafka: a fresh partition
        from stream_dp.windows.state import PartitionState
        from stream_dp.worker.recovery import PartitionRuntime

        return PartitionRuntime(PartitionState.for_settings(settings))

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
    seen: list[bool] = []
    consumer = ReadingsConsumer(ingest.settings, conn=None, ingest=ingest, on_rebalance=seen.append)
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
    assert seen == [True, False]  # settled on {0, 1}, then a rebalance is in progress


class _FailingProducer(_Producer):
    """Every send's acknowledgement fails (the state topic is unreachable)."""

    async def send(self, topic, value, partition=None, **_):
        self.sent.append((topic, partition))
        future = asyncio.get_running_loop().create_future()
        future.set_exception(RuntimeError("broker gone"))
        return future


def test_only_acknowledged_deltas_count_as_durable():
    ingest, _ = _processor()
    asyncio.run(ingest.process([_message(0, i, "a") for i in range(3)]))
    assert ingest.durable_offsets([0, 1]) == {0: 2}
    ingest.producer = _FailingProducer()
    try:
        asyncio.run(ingest.process([_message(0, i, "a") for i in range(3, 6)]))
    except RuntimeError:
        pass
    else:
        raise AssertionError("a failed state write must fail the batch")
    assert ingest.partitions[0].applied_offset == 5  # in memory ...
    assert ingest.durable_offsets([0]) == {0: 2}  # ... but never committed


def test_revocation_commits_durable_offsets_after_the_batch_in_flight_then_drops_state():
    ingest, _ = _processor()
    committed: list[dict[int, int]] = []

    async def commit(partitions):
        assert ingest.lock.locked()  # under the ingest lock
        committed.append(ingest.durable_offsets(partitions))

    consumer = ReadingsConsumer(ingest.settings, conn=None, ingest=ingest, on_rebalance=print)
    consumer._commit = commit
    consumer.assign([0, 1])

    async def scenario():
        batch = asyncio.create_task(
            ingest.process([_message(0, i, "a") for i in range(4)], consumer.assigned)
        )
        await asyncio.sleep(0)  # the batch holds the lock
        await consumer.revoke([0])
        await batch

    asyncio.run(scenario())
    assert committed == [{0: 3}]
    assert 0 not in ingest.partitions


def _state_records(settings, batches):
    """State-topic records (as ``iter_partition_to_end`` yields them) of deltas."""
    from stream_dp.windows.state import PartitionState
    from stream_dp.wire import internal_records as rec

    state = PartitionState.for_settings(settings)
    records = []
    for offset, readings in batches:
        vehicles, ts, cells, speeds = zip(*readings, strict=True)
        outcome = state.add_batch(list(vehicles), list(ts), list(cells), list(speeds),
                                  record_delta=True)  # fmt: skip
        parts = rec.encode_delta(offset, state.max_ts, outcome.delta or {}, outcome.late_by_window)
        first = sum(map(len, records))  # state-topic offsets, in write order
        records.append(
            [SimpleNamespace(offset=first + i, value=part) for i, part in enumerate(parts)]
        )
    return state, records


def test_recovery_applies_a_delta_written_twice_once():
    from stream_dp.windows.state import PartitionState
    from stream_dp.worker.checkpoints import StateReplay
    from stream_dp.worker.resume_plan import plan_resume

    settings = load_settings(partitions=2, topic_state="state", topic_readings="readings")
    cell = "872a1070bffffff"
    first = [("a", 1_700_000_000.0, cell, 10.0), ("b", 1_700_000_001.0, cell, 20.0)]
    second = [("a", 1_700_000_002.0, cell, 30.0)]
    state, (one, two) = _state_records(settings, [(4, first), (9, second)])
    records = (*one, *two, *two)  # the second delta's send was retried
    recovered = PartitionState.for_settings(settings)
    replay = StateReplay(recovered, plan_resume(0, len(records), None))
    for offset, record in enumerate(records):
        replay.add(offset, record.value)
    assert replay.finish() == 9
    (start,) = state.open
    assert recovered.partial(start).count.tolist() == state.partial(start).count.tolist()


def test_a_partition_revoked_during_its_recovery_is_not_kept(monkeypatch):
    import stream_dp.worker.recovery as recovery_module

    settings = load_settings(partitions=2, topic_state="state", topic_readings="readings")
    _, records = _state_records(settings, [(i, [("a", 1_700_000_000.0 + i, "872a1070bffffff",
                                                 5.0)]) for i in range(3)])  # fmt: skip
    assigned = {0}

    async def replay(conn, topic, partition, start=0):
        for batch in records:
            yield batch
            assigned.discard(0)  # revoked while the recovery reads on

    async def no_checkpoint(conn, topic, partition, matches):
        return SimpleNamespace(record=None, earliest=0, end=len(records))

    monkeypatch.setattr(recovery_module, "iter_partition_to_end", replay)
    monkeypatch.setattr(recovery_module, "find_last", no_checkpoint)
    ingest = IngestProcessor(settings, conn=None, producer=None, metrics=ServiceMetrics())
    assert asyncio.run(ingest._runtime(0, assigned)) is None
    assert 0 not in ingest.partitions and ingest.recovering == 0
