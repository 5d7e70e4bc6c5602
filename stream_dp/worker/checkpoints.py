"""State-topic checkpoints: a restart replays what the open windows need, not the history.

Each state partition holds ``delta`` and ``close`` records (see
:mod:`stream_dp.wire.internal_records`). Whenever a window closes (and every
:data:`CHECKPOINT_EVERY_RECORDS` state records) the partition's writer appends a small
``checkpoint`` record:

- ``replay_from``: the state-topic offset of the first delta of the oldest window still open
  (with none open, the offset after the last record written) — no record before it is
  needed any more;
- the partition's progress at that moment: the last input offset applied, the largest event
  time, the windows closed early (``force_closed``), the recent late counts, and ``closed``:
  the windows already closed whose deltas may still lie at or after ``replay_from`` (a batch
  delta can span two windows), which a replay must skip.

Recovery finds the latest checkpoint (read from the tail, see
:func:`stream_dp.kafka.partition_tail.find_last`),
:func:`~stream_dp.worker.resume_plan.plan_resume` picks where to start,
and :class:`StateReplay` rebuilds the partition from there: seeded with the checkpoint's
progress, it ends in the state a replay of the whole topic gives. Pure: no Kafka, no asyncio
(offsets of records still being written are futures, resolved by the caller first).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from stream_dp.windows.state import PartitionState
from stream_dp.wire import internal_records as rec
from stream_dp.worker.resume_plan import ResumePlan

#: A checkpoint is also written after this many state records without one, so the tail
#: read that finds the latest checkpoint stays short while a window is open.
CHECKPOINT_EVERY_RECORDS = 64
#: Late counts of this many most recent windows are kept (what progress records carry).
RECENT_LATE_WINDOWS = 48


class _Sent(Protocol):
    """A producer's send future (``result().offset``) once done."""

    def done(self) -> bool: ...

    def result(self) -> Any: ...


Offset = int | _Sent


def _offset(value: Offset) -> int:
    return value if isinstance(value, int) else int(value.result().offset)


@dataclass(frozen=True)
class Checkpoint:
    """What a replay starting at ``replay_from`` needs besides the records after it."""

    replay_from: int
    applied: int
    max_ts: float
    late: dict[int, int]
    force_closed: tuple[int, ...]
    closed: tuple[int, ...]

    @property
    def read_from(self) -> int:
        """The first state record a replay from this checkpoint reads (its summary rule)."""
        return self.replay_from

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "kind": "checkpoint",
                "replay_from": self.replay_from,
                "applied": self.applied,
                "max_ts": None if self.max_ts == float("-inf") else self.max_ts,
                "late": {str(k): v for k, v in self.late.items()},
                "force_closed": list(self.force_closed),
                "closed": list(self.closed),
            }
        )

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> Checkpoint:
        max_ts = data["max_ts"]
        return cls(
            replay_from=int(data["replay_from"]),
            applied=int(data["applied"]),
            max_ts=float("-inf") if max_ts is None else float(max_ts),
            late={int(k): int(v) for k, v in data["late"].items()},
            force_closed=tuple(int(w) for w in data["force_closed"]),
            closed=tuple(int(w) for w in data["closed"]),
        )


def is_checkpoint(value: bytes) -> bool:
    """Whether a state record is a checkpoint (cheap: checkpoints are plain JSON)."""
    return value.startswith(b'{"kind":"checkpoint"')


class CheckpointTracker:
    """Per partition: the state-topic offsets a checkpoint needs (first delta of each open
    window, last delta of recently closed ones) and when the next one is due."""

    def __init__(self) -> None:
        self._first: dict[int, Offset] = {}
        self._last: dict[int, Offset] = {}
        self._closed: set[int] = set()
        self._next = 0
        self._pending: list[_Sent] = []
        self.records_since = 0

    def note_delta(self, parts: Sequence[Offset], windows: Iterable[int]) -> None:
        """A delta written as ``parts`` (offsets, or send futures) touched ``windows``."""
        first = parts[0]
        for window in windows:
            self._first.setdefault(window, first)
            self._last[window] = first
        for part in parts:
            if isinstance(part, int):
                self._next = max(self._next, part + 1)
            else:
                self._pending.append(part)
        self.records_since += len(parts)

    def note_close(self, window: int, offset: int) -> None:
        """The window's ``close`` record was written at ``offset``."""
        self._first.pop(window, None)
        if window in self._last:
            self._closed.add(window)
        self._next = max(self._next, offset + 1)
        self.records_since += 1

    def seed_closed(self, windows: Iterable[int]) -> None:
        """Windows a checkpoint listed as closed (a replay from it skips their deltas)."""
        self._closed.update(windows)

    def unresolved(self) -> list[_Sent]:
        """Sends whose offsets are not known yet (await them before :meth:`checkpoint`)."""
        self._pending = [f for f in self._pending if not f.done()]
        return list(self._pending)

    def checkpoint(self, state: PartitionState, applied: int) -> Checkpoint | None:
        """The checkpoint for ``state`` now (None if an open window's first delta is not
        known, which would make the replay miss it); forgets what no later one needs."""
        if any(w not in self._first for w in state.open):
            return None
        self._pending = []
        first = {w: _offset(o) for w, o in self._first.items() if w in state.open}
        self._first = dict(first)
        last = {w: _offset(o) for w, o in self._last.items()}
        self._next = max([self._next, *(o + 1 for o in last.values())])
        replay_from = min(first.values(), default=self._next)
        closed = sorted(w for w in self._closed if last.get(w, -1) >= replay_from)
        self._closed = set(closed)
        self._last = {w: o for w, o in last.items() if w in first or w in self._closed}
        self.records_since = 0
        late = dict(sorted(state.late_by_window.items())[-RECENT_LATE_WINDOWS:])
        return Checkpoint(
            replay_from, applied, state.max_ts, late, tuple(sorted(state.force_closed)),
            tuple(closed),
        )  # fmt: skip


#: Where a partition's replay starts, and the checkpoint it is seeded from (if any).
ReplayPlan = ResumePlan[Checkpoint]


class StateReplay:
    """Rebuilds one partition's state from its state records read in order from a plan's
    start (see the module docstring)."""

    def __init__(
        self, state: PartitionState, plan: ReplayPlan, tracker: CheckpointTracker | None = None
    ) -> None:
        self.state = state
        self.plan = plan
        self.tracker = tracker if tracker is not None else CheckpointTracker()
        self.applied = -1
        self.replayed = 0
        self.truncated = 0
        self._parts = rec.PartAssembler()
        self._part0 = -1
        self._skip: frozenset[int] = frozenset()
        ckpt = plan.summary
        if ckpt is not None:
            state.max_ts = max(state.max_ts, ckpt.max_ts)
            state.force_closed |= set(ckpt.force_closed)
            state.late_by_window = dict(ckpt.late)
            self._skip = frozenset(ckpt.closed)
            self.tracker.seed_closed(ckpt.closed)

    def add(self, offset: int, value: bytes) -> None:
        """Apply the state record at ``offset``."""
        self.replayed += 1
        if is_checkpoint(value):
            return
        data = rec.decode(value)
        if data["kind"] == "close":
            self.state.close(data["window"], forced=data["forced"])
            self.tracker.note_close(data["window"], offset)
            return
        if data["part"] == 0:
            self._part0 = offset  # parts of one payload are consecutive
        whole = self._parts.add(data)
        if whole is None:  # a delta counts only once all its parts are read
            return
        delta = rec.delta_payload(whole)
        if delta["offset"] <= self.applied:
            return  # a producer retry wrote it twice: apply it once
        windows = {w: d for w, d in delta["windows"].items() if w not in self._skip}
        # Late counts up to the checkpoint are in the checkpoint: count later ones only.
        late = delta["late"] if offset > self.plan.summary_offset else None
        self.truncated += self.state.apply_delta(windows, delta["max_ts"], late)
        self.tracker.note_delta(list(range(self._part0, offset + 1)), delta["windows"])
        self.applied = delta["offset"]

    def finish(self) -> int:
        """The last input offset whose effect is in the state."""
        if self.plan.summary is not None:
            self.applied = max(self.applied, self.plan.summary.applied)
        return self.applied
