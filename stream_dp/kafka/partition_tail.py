"""Find the last record of a kind in a partition by reading backwards from its end.

The bounds come from Fetch responses: the end is the high watermark a fetch reports, the
start the offset of the first record a fetch from offset 0 returns (an offset below the
earliest is reset to it). Never ListOffsets(LATEST): Tansu answers it with the base offset
of the last record batch + 1 (see :mod:`stream_dp.kafka.tansu_quirks`). The tail is then
read in chunks that double in size, newest first, until a match is found.

Also :class:`RecordDeleter`: DeleteRecords where the broker supports it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

from stream_dp.kafka.connection import KafkaConnection

log = logging.getLogger(__name__)
_POLL_MS = 100
FIRST_CHUNK = 32
LARGEST_CHUNK = 4096


def backward_chunks(
    earliest: int, end: int, first: int = FIRST_CHUNK, largest: int = LARGEST_CHUNK
) -> Iterator[tuple[int, int]]:
    """Ranges ``[lo, hi)`` covering ``[earliest, end)`` from the end backwards, each twice
    the previous (from ``first`` up to ``largest`` records)."""
    size, hi = first, end
    while hi > earliest:
        lo = max(earliest, hi - size)
        yield lo, hi
        hi, size = lo, min(2 * size, largest)


@dataclass(frozen=True)
class TailMatch:
    """The partition's bounds and the last matching record (None: no record matched)."""

    earliest: int
    end: int
    record: ConsumerRecord | None


async def find_last(
    conn: KafkaConnection,
    topic: str,
    partition: int,
    matches: Callable[[bytes], bool],
    *,
    timeout: float = 60.0,
) -> TailMatch:
    """The last record of ``topic[partition]`` whose value ``matches``, read backwards."""
    tp = TopicPartition(topic, partition)
    consumer = AIOKafkaConsumer(**conn.reader_kwargs(50))
    try:
        await consumer.start()  # inside: a start cancelled half-way is stopped too
        consumer.assign([tp])
        earliest, end = await _bounds(consumer, tp, timeout)
        for lo, hi in backward_chunks(earliest, end):
            found = None
            for record in await _read_range(consumer, tp, lo, hi, timeout):
                if record.value is not None and matches(record.value):
                    found = record
            if found is not None:
                return TailMatch(earliest, end, found)
        return TailMatch(earliest, end, None)
    finally:
        await consumer.stop()


async def _bounds(
    consumer: AIOKafkaConsumer, tp: TopicPartition, timeout: float
) -> tuple[int, int]:
    consumer.seek(tp, 0)
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        batches = await consumer.getmany(tp, timeout_ms=_POLL_MS, max_records=1)
        end = consumer.highwater(tp)
        records = batches.get(tp, ())
        if records:
            return records[0].offset, end if end is not None else records[-1].offset + 1
        if end is not None and await consumer.position(tp) >= end:
            return end, end  # nothing held below the end
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"no answer reading the bounds of {tp} in {timeout:g} s")


async def _read_range(
    consumer: AIOKafkaConsumer, tp: TopicPartition, lo: int, hi: int, timeout: float
) -> list[ConsumerRecord]:
    """Records with ``lo <= offset < hi`` (fewer if some were deleted meanwhile)."""
    consumer.seek(tp, lo)
    out: list[ConsumerRecord] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while await consumer.position(tp) < hi:
        batches = await consumer.getmany(tp, timeout_ms=_POLL_MS)
        records = batches.get(tp, ())
        out.extend(r for r in records if lo <= r.offset < hi)
        if records:
            deadline = loop.time() + timeout
        elif loop.time() > deadline:
            raise TimeoutError(f"no progress reading {tp} [{lo}, {hi}) for {timeout:g} s")
    return out


class RecordDeleter:
    """DeleteRecords below an offset, where the broker supports it.

    The first refusal (an error answer or an exception, e.g. the embedded Tansu broker,
    which does not implement DeleteRecords) is logged once and turns deletion off for this
    process: the topic's retention then bounds the storage instead.
    """

    def __init__(self, conn: KafkaConnection) -> None:
        self.conn = conn
        self.supported: bool | None = None  # None: not tried yet
        self._admin: AIOKafkaAdminClient | None = None
        self._deleted: dict[TopicPartition, int] = {}

    async def delete_before(self, topic: str, partition: int, offset: int) -> bool:
        """Delete the records of ``topic[partition]`` below ``offset``; False when not
        supported (or nothing new to delete)."""
        tp = TopicPartition(topic, partition)
        if self.supported is False or offset <= self._deleted.get(tp, 0):
            return False
        try:
            if self._admin is None:
                self._admin = AIOKafkaAdminClient(**self.conn.admin_kwargs())
                await self._admin.start()
            answer = await self._admin.delete_records({tp: RecordsToDelete(offset)})
        except Exception as exc:  # an unsupported request surfaces in many forms
            return self._unsupported(f"{type(exc).__name__}: {exc}")
        if tp not in answer:
            return self._unsupported("no answer for the partition")
        self.supported = True
        self._deleted[tp] = offset
        return True

    def _unsupported(self, why: str) -> bool:
        if self.supported is True:  # worked before: a passing failure, try again next time
            log.warning("DeleteRecords failed (%s); retrying at the next checkpoint", why)
            return False
        if self.supported is None:
            log.info(
                "the broker refused DeleteRecords (%s): old state records stay until the "
                "topic's retention removes them", why,
            )  # fmt: skip
        self.supported = False
        return False

    async def close(self) -> None:
        if self._admin is not None:
            await self._admin.close()
            self._admin = None
