"""A Kafka client whose start is cancelled half-way (SIGINT while a command starts) is
stopped too: aiokafka does not stop it itself, and a client left unstopped is reported as
"Unclosed AIOKafkaConsumer" after the command's last line."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from stream_dp.config import Settings
from stream_dp.dashboard import follower
from stream_dp.kafka import partition_reader, partition_tail
from stream_dp.worker import ledger_backup


class StuckClient:
    """An aiokafka client stand-in whose ``start`` never returns until cancelled."""

    made: list[StuckClient] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.starting = asyncio.Event()
        self.stopped = False
        StuckClient.made.append(self)

    async def start(self) -> None:
        self.starting.set()
        await asyncio.Event().wait()

    async def stop(self) -> None:
        self.stopped = True


class Connection:
    def reader_kwargs(self, _max_records: int) -> dict[str, Any]:
        return {}

    def producer_kwargs(self) -> dict[str, Any]:
        return {}


async def _first_batch(conn: Connection) -> None:
    async for _ in partition_reader.iter_partition_to_end(conn, "t", 0):  # type: ignore[arg-type]
        return


async def _empty_log(*_args: Any) -> tuple[int, int]:
    return 0, 0


#: name: (its module, the client class it makes, the call, what else to stand in for)
STARTS: dict[
    str, tuple[Any, str, Callable[[Connection], Coroutine[Any, Any, Any]], dict[str, Any]]
] = {
    "find_last": (
        partition_tail,
        "AIOKafkaConsumer",
        lambda c: partition_tail.find_last(c, "t", 0, bool),  # type: ignore[arg-type]
        {},
    ),
    "follow_releases": (
        follower,
        "AIOKafkaConsumer",
        lambda c: follower.follow_releases(c, "t", print, asyncio.Event()),  # type: ignore[arg-type]
        {},
    ),
    "init_ledger": (
        ledger_backup,
        "AIOKafkaProducer",
        lambda c: ledger_backup.init_ledger(c, Settings()),  # type: ignore[arg-type]
        {"log_bounds": _empty_log},  # an empty release log: the producer starts next
    ),
    "iter_partition_to_end": (partition_reader, "AIOKafkaConsumer", _first_batch, {}),
}


@pytest.mark.parametrize("name", sorted(STARTS))
def test_a_start_cancelled_half_way_is_stopped(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module, client, call, others = STARTS[name]
    monkeypatch.setattr(module, client, StuckClient)
    for attribute, stand_in in others.items():
        monkeypatch.setattr(module, attribute, stand_in)
    StuckClient.made.clear()

    async def cancel_while_starting() -> None:
        task = asyncio.create_task(call(Connection()))
        await asyncio.wait_for(_started(), timeout=60)  # waits on the start, not a time
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_while_starting())
    assert len(StuckClient.made) == 1
    assert StuckClient.made[0].stopped


async def _started() -> None:
    while not StuckClient.made:
        await asyncio.sleep(0)
    await StuckClient.made[0].starting.wait()
