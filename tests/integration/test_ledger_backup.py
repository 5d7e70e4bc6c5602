"""``stream_dp.worker.ledger_backup`` against the embedded broker: export, import, init."""

from __future__ import annotations

import asyncio

import orjson
import pytest
from aiokafka import AIOKafkaProducer

from stream_dp.kafka.service_topics import ensure_service_topics
from stream_dp.worker.ledger_backup import (
    LedgerError,
    export_ledger,
    import_ledger,
    init_ledger,
    ledger_missing,
)
from stream_dp.worker.ledger_file import LedgerRecord
from stream_dp.worker.release_snapshots import ReleaseSnapshot, is_release_snapshot
from tests.support.settings import service_settings
from tests.unit.worker.test_release_log import stored_copy

RECORDS = [
    (b"3600", b'{"kind":"loss","part":0}', [("h", b"\x00\x01")]),
    (None, b"\xff\xfe not json", []),
    (b"7200", b'{"kind":"release"}', [("a", b"1"), ("a", b"2")]),
]


def fill(kafka, topic: str, records) -> None:
    async def send() -> None:
        producer = AIOKafkaProducer(**kafka.producer_kwargs())
        await producer.start()
        try:
            for key, value, headers in records:
                await producer.send_and_wait(
                    topic, value, key=key, partition=0, headers=headers or None
                )
        finally:
            await producer.stop()

    asyncio.run(send())


def comparable(records: list[LedgerRecord]) -> list[tuple]:
    return [(r.offset, r.key, r.value, r.headers) for r in records]


@pytest.fixture
def source(kafka, topic_prefix):
    settings = service_settings(f"{topic_prefix}.a")
    ensure_service_topics(settings, kafka)
    fill(kafka, settings.topic_release_log, RECORDS)
    return settings


@pytest.fixture
def target(kafka, topic_prefix):
    settings = service_settings(f"{topic_prefix}.b", require_existing_ledger=True)
    ensure_service_topics(settings, kafka)
    return settings


def test_export_then_import_gives_the_same_log(kafka, source, target):
    exported = asyncio.run(export_ledger(kafka, source))
    assert [(r.key, r.value, list(r.headers)) for r in exported] == RECORDS
    assert [r.offset for r in exported] == [0, 1, 2]
    assert asyncio.run(ledger_missing(kafka, target)) is not None
    assert asyncio.run(import_ledger(kafka, target, exported)) == (3, False)
    assert comparable(asyncio.run(export_ledger(kafka, target))) == comparable(exported)
    assert asyncio.run(ledger_missing(kafka, target)) is None


def test_import_refuses_a_non_empty_log_and_resumes_an_interrupted_one(kafka, source, target):
    exported = asyncio.run(export_ledger(kafka, source))
    fill(kafka, target.topic_release_log, RECORDS[:2])  # an import stopped after 2 records
    with pytest.raises(LedgerError, match="not empty"):
        asyncio.run(import_ledger(kafka, target, exported))
    assert asyncio.run(import_ledger(kafka, target, exported, resume=True)) == (1, False)
    assert comparable(asyncio.run(export_ledger(kafka, target))) == comparable(exported)


def test_resume_refuses_a_log_of_other_records(kafka, source, target):
    exported = asyncio.run(export_ledger(kafka, source))
    fill(kafka, target.topic_release_log, [RECORDS[1]])
    with pytest.raises(LedgerError, match="not this file's first"):
        asyncio.run(import_ledger(kafka, target, exported, resume=True))
    assert len(asyncio.run(export_ledger(kafka, target))) == 1  # nothing written


def test_init_starts_an_empty_ledger_once(kafka, target):
    asyncio.run(init_ledger(kafka, target))
    (first,) = asyncio.run(export_ledger(kafka, target))
    assert is_release_snapshot(first.value)
    snapshot = ReleaseSnapshot.from_record(orjson.loads(first.value))
    assert (snapshot.read_from, snapshot.released_through, snapshot.spent_before) == (0, None, 0)
    assert asyncio.run(ledger_missing(kafka, target)) is None
    with pytest.raises(LedgerError, match="already holds records"):
        asyncio.run(init_ledger(kafka, target))


def test_without_the_setting_an_empty_log_is_no_refusal(kafka, topic_prefix):
    settings = service_settings(topic_prefix)
    ensure_service_topics(settings, kafka)
    assert asyncio.run(ledger_missing(kafka, settings)) is None


def test_import_appends_the_restore_snapshot_and_resume_sees_it_done(kafka, topic_prefix, target):
    source = service_settings(f"{topic_prefix}.c")
    ensure_service_topics(source, kafka)
    old = ReleaseSnapshot(
        read_from=0, released_through=None, spent_before=0.0, releases_from=40,
        last_released=3600, partials_from=700, progress={0: (10.0, {})},
    )  # fmt: skip
    log = [*stored_copy("a", 1.0, window=3600), old.encode()]
    fill(kafka, source.topic_release_log, [(b"3600", value, []) for value in log])
    exported = asyncio.run(export_ledger(kafka, source))
    assert asyncio.run(import_ledger(kafka, target, exported)) == (len(log), True)
    *copied, appended = asyncio.run(export_ledger(kafka, target))
    assert comparable(copied) == comparable(exported)
    assert appended.offset == len(log)
    restored = ReleaseSnapshot.from_record(orjson.loads(appended.value))
    assert (restored.partials_from, restored.releases_from, restored.progress) == (0, 0, {})
    assert restored.last_released == 3600
    assert asyncio.run(import_ledger(kafka, target, exported, resume=True)) == (0, True)
    assert len(asyncio.run(export_ledger(kafka, target))) == len(log) + 1
