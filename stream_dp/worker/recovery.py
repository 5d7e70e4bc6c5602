"""Recovery of one input partition's window state from its state topic (as Quix Streams keeps
recovery in ``state/recovery.py``): a pure replay of the decoded records, and the read of the
topic to its end that feeds it."""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from dataclasses import dataclass, field

from stream_dp.config import Settings
from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.partition_reader import iter_partition_to_end
from stream_dp.windows.state import PartitionState
from stream_dp.wire import internal_records as rec

log = logging.getLogger(__name__)


@dataclass
class PartitionRuntime:
    state: PartitionState
    #: Last input offset whose effect is in ``state``.
    applied_offset: int = -1
    #: Last input offset whose delta the state topic has acknowledged (what may be committed).
    durable_offset: int = -1
    last_event_wall: float = field(default_factory=time.monotonic)
    last_progress: tuple[float, int] | None = None
    #: Start of the span over which the broker kept confirming there is nothing more to read.
    quiet_since: float | None = None


class Revoked(Exception):
    """The partition being recovered was revoked meanwhile."""


class StateReplay:
    """Rebuilds a partition's runtime from its state-topic records, in log order: ``delta``
    records (in parts; each applied once, by its input offset) and ``close`` records."""

    def __init__(self, settings: Settings) -> None:
        self.runtime = PartitionRuntime(PartitionState.for_settings(settings))
        self.replayed = 0
        #: Windows found to have lost their first records to the topic's retention.
        self.truncated = 0
        self._parts = rec.PartAssembler()

    def apply(self, value: bytes) -> None:
        runtime, state = self.runtime, self.runtime.state
        data = rec.decode(value)
        self.replayed += 1
        if data["kind"] == "close":
            state.close(data["window"], forced=data["forced"])
            return
        whole = self._parts.add(data)
        if whole is None:  # a delta counts only once all its parts are read
            return
        delta = rec.delta_payload(whole)
        if delta["offset"] <= runtime.applied_offset:
            return  # a producer retry wrote it twice: apply it once
        self.truncated += state.apply_delta(delta["windows"], delta["max_ts"], delta["late"])
        runtime.applied_offset = delta["offset"]

    def finish(self) -> PartitionRuntime:
        """The recovered runtime: everything replayed is durable."""
        self.runtime.durable_offset = self.runtime.applied_offset
        return self.runtime


async def recover_partition(
    settings: Settings,
    conn: KafkaConnection,
    partition: int,
    still_assigned: Collection[int] | None = None,
) -> PartitionRuntime:
    """Replay the partition's state topic to its end; :class:`Revoked` if the partition
    leaves ``still_assigned`` meanwhile."""

    def check_assigned() -> None:
        if still_assigned is not None and partition not in still_assigned:
            raise Revoked(partition)

    replay = StateReplay(settings)
    async for batch in iter_partition_to_end(conn, settings.topic_state, partition):
        check_assigned()
        for record in batch:
            replay.apply(record.value)
    runtime = replay.finish()
    check_assigned()
    if replay.truncated:
        log.warning(
            "partition %d: %d window(s) lost their first state records to the state "
            "topic's retention; they are treated as closed and this partition's remains of "
            "them are left out of their release",
            partition, replay.truncated,
        )  # fmt: skip
    log.info(
        "partition %d recovered from %d state records (%d open windows)",
        partition, replay.replayed, len(runtime.state.open),
    )  # fmt: skip
    return runtime
