"""Backup and restore of the release log (the privacy ledger) on Kafka.

:func:`export_ledger` reads every record of the release log; :func:`import_ledger` writes a
backup's records back, in order, into an empty release log (or completes an interrupted
import), appends the restore snapshot (:mod:`stream_dp.worker.restore_snapshot`), and reads
the log back to check each record landed at its old offset with its key, value and headers;
:func:`init_ledger` starts a first ledger on a new deployment; :func:`ledger_missing` is the
worker's start-up check under ``require_existing_ledger``. File format:
:mod:`stream_dp.worker.ledger_file`.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiokafka import AIOKafkaProducer, ConsumerRecord

from stream_dp.config import Settings
from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.partition_reader import read_partition_to_end
from stream_dp.kafka.partition_tail import find_last
from stream_dp.worker.ledger_file import (
    RELEASE_LOG,
    LedgerFileError,
    LedgerRecord,
    check_restorable,
)
from stream_dp.worker.release_snapshots import ReleaseSnapshot
from stream_dp.worker.restore_snapshot import restore_snapshot

#: The release log has one partition (its order is total, see ``worker.release_log``).
PARTITIONS = 1


class LedgerError(Exception):
    """The broker's release log does not allow the operation; the message says why."""


def backed_up_topics(settings: Settings) -> dict[str, tuple[str, int]]:
    return {RELEASE_LOG: (settings.topic_release_log, PARTITIONS)}


async def export_ledger(conn: KafkaConnection, settings: Settings) -> list[LedgerRecord]:
    """Every record of the release log, in order."""
    out: list[LedgerRecord] = []
    for partition in range(PARTITIONS):
        records = await read_partition_to_end(conn, settings.topic_release_log, partition)
        out.extend(_from_kafka(partition, r) for r in records)
    return out


def _from_kafka(partition: int, r: ConsumerRecord) -> LedgerRecord:
    headers = tuple((name, bytes(value)) for name, value in (r.headers or ()))
    return LedgerRecord(RELEASE_LOG, partition, r.offset, int(r.timestamp), r.key, r.value, headers)


async def log_bounds(conn: KafkaConnection, settings: Settings) -> tuple[int, int]:
    """The release log's earliest offset held and end (equal when it holds nothing)."""
    tail = await find_last(conn, settings.topic_release_log, 0, lambda _: True)
    return tail.earliest, tail.end


async def ledger_missing(conn: KafkaConnection, settings: Settings) -> str | None:
    """Under ``require_existing_ledger``, why this worker must not release (its release log
    is empty: an emptied or new broker), else None."""
    if not settings.require_existing_ledger:
        return None
    earliest, end = await log_bounds(conn, settings)
    if end > earliest:
        return None
    return (
        f"the release log {settings.topic_release_log} is empty and require_existing_ledger "
        "is set: refusing to start every vehicle's privacy loss from zero (restore it with "
        "`stream-dp ledger import FILE`, or start a first ledger with `stream-dp ledger init`)"
    )


async def import_ledger(
    conn: KafkaConnection,
    settings: Settings,
    records: Sequence[LedgerRecord],
    resume: bool = False,
) -> tuple[int, bool]:
    """Write ``records`` to the (existing) release log, which must be empty, then the
    restore snapshot (:mod:`stream_dp.worker.restore_snapshot`); with ``resume`` the log may
    already hold the first of them (an interrupted import). Returns the number of the file's
    records written and whether a restore snapshot follows them; :class:`LedgerError` if the
    log does not allow it or a record did not land at its old offset."""
    check_restorable(records)
    topic = settings.topic_release_log
    snapshot = restore_snapshot((r.offset, r.value or b"") for r in records)
    expected = [_comparable(r) for r in records]
    if snapshot is not None:
        expected.append((len(records), None, snapshot.encode(), ()))
    held = [_as_ledger(h) for h in await read_partition_to_end(conn, topic, 0)]
    if held and not resume:
        raise LedgerError(
            f"the release log {topic} is not empty ({len(held)} records): import restores "
            "into an empty log only (--resume completes an interrupted import)"
        )
    if held != expected[: len(held)]:
        raise LedgerError(
            f"the release log {topic} holds records that are not this file's first ones: "
            "nothing imported"
        )
    rest = list(records[len(held) :])
    if snapshot is not None and len(held) < len(expected):
        rest.append(LedgerRecord(RELEASE_LOG, 0, len(records), 0, None, snapshot.encode()))
    producer = AIOKafkaProducer(**conn.producer_kwargs(), acks="all", linger_ms=5)
    try:
        await producer.start()  # inside: a start cancelled half-way is stopped too
        for record in rest:  # one at a time: each acknowledged before the next is sent
            await producer.send_and_wait(
                topic,
                record.value,
                key=record.key,
                partition=record.partition,
                timestamp_ms=record.timestamp or None,
                headers=list(record.headers) or None,
            )
    finally:
        await producer.stop()
    back = [_as_ledger(b) for b in await read_partition_to_end(conn, topic, 0)]
    if back != expected:
        raise LedgerError(
            f"the release log {topic} does not read back as the file (another writer, or "
            "records not at their old offsets): do not start a worker on it"
        )
    return len(records) - min(len(held), len(records)), snapshot is not None


def _comparable(record: LedgerRecord) -> tuple:
    return (record.offset, record.key, record.value, tuple(record.headers))


def _as_ledger(r: ConsumerRecord) -> tuple:
    headers = tuple((name, bytes(value)) for name, value in (r.headers or ()))
    return (r.offset, r.key, r.value, headers)


async def init_ledger(conn: KafkaConnection, settings: Settings) -> None:
    """Start a first, empty ledger: one snapshot summarising nothing (``read_from`` 0), so a
    worker under ``require_existing_ledger`` starts. Only on an empty release log."""
    earliest, end = await log_bounds(conn, settings)
    if end > earliest:
        raise LedgerError(
            f"the release log {settings.topic_release_log} already holds records (a ledger)"
        )
    first = ReleaseSnapshot(
        read_from=0, released_through=None, spent_before=0.0, releases_from=0,
        last_released=None,
    )  # fmt: skip
    producer = AIOKafkaProducer(**conn.producer_kwargs(), acks="all")
    try:
        await producer.start()  # inside: a start cancelled half-way is stopped too
        await producer.send_and_wait(settings.topic_release_log, first.encode(), partition=0)
    finally:
        await producer.stop()


__all__ = [
    "LedgerError",
    "LedgerFileError",
    "backed_up_topics",
    "export_ledger",
    "import_ledger",
    "init_ledger",
    "ledger_missing",
]
