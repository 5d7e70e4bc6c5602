"""Recovery of one input partition's window state from its state topic (as Quix Streams keeps
recovery in ``state/recovery.py``): find the latest checkpoint at the tail, then replay the
records from where it says (:class:`~stream_dp.worker.checkpoints.StateReplay`, a pure
replay of the decoded records)."""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from dataclasses import dataclass, field

from stream_dp.config import Settings
from stream_dp.kafka.connection import KafkaConnection
from stream_dp.kafka.partition_reader import iter_partition_to_end
from stream_dp.kafka.partition_tail import find_last
from stream_dp.windows.state import PartitionState
from stream_dp.wire import internal_records as rec
from stream_dp.worker.checkpoints import (
    Checkpoint,
    CheckpointTracker,
    ReplayPlan,
    StateReplay,
    is_checkpoint,
)
from stream_dp.worker.resume_plan import plan_resume

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
    #: State-topic offsets for the partition's checkpoints (see ``worker.checkpoints``).
    checkpoints: CheckpointTracker = field(default_factory=CheckpointTracker)
    #: Start of the span over which the broker kept confirming there is nothing more to read.
    quiet_since: float | None = None
    #: The broker's confirmation the last idle decision read (``IdleDecision.confirmed_at``).
    confirmed_at: float | None = None


class Revoked(Exception):
    """The partition being recovered was revoked meanwhile."""


async def recover_partition(
    settings: Settings,
    conn: KafkaConnection,
    partition: int,
    still_assigned: Collection[int] | None = None,
) -> PartitionRuntime:
    """Replay the partition's state topic from its latest checkpoint to its end;
    :class:`Revoked` if the partition leaves ``still_assigned`` meanwhile."""

    def check_assigned() -> None:
        if still_assigned is not None and partition not in still_assigned:
            raise Revoked(partition)

    runtime = PartitionRuntime(PartitionState.for_settings(settings))
    topic = settings.topic_state
    tail = await find_last(conn, topic, partition, is_checkpoint)
    latest = None
    if tail.record is not None:
        latest = (tail.record.offset, Checkpoint.from_record(rec.decode(tail.record.value)))
    plan: ReplayPlan = plan_resume(tail.earliest, tail.end, latest)
    replay = StateReplay(runtime.state, plan, runtime.checkpoints)
    async for batch in iter_partition_to_end(conn, topic, partition, plan.start):
        check_assigned()
        for record in batch:
            replay.add(record.offset, record.value)
    runtime.applied_offset = runtime.durable_offset = replay.finish()
    check_assigned()
    if replay.truncated:
        log.warning(
            "partition %d: %d window(s) lost their first state records to the state "
            "topic's retention; they are treated as closed and this partition's remains of "
            "them are left out of their release",
            partition, replay.truncated,
        )  # fmt: skip
    log.info(
        "partition %d recovered from %d state records from offset %d of %d "
        "(%s; %d open windows)", partition, replay.replayed, plan.start, tail.end,
        "no checkpoint" if plan.summary is None else "from its latest checkpoint",
        len(runtime.state.open),
    )  # fmt: skip
    return runtime
