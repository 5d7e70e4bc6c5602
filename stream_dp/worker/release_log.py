"""The release log read in order: which stored copy of each window is *the* release.

Every storing of a window (an ``attempt``) writes the window's losses and then its release
to the one-partition release log. The log's order is total, so the first complete release
of a window in it is the release; a later copy (a second releaser that computed the same
window during a leadership change, with its own noise) is never published and its losses
are never recorded; nor is its ``carry`` (the entries its release defers to the next window,
issue 25): only the winner's carry is fed on. Every releaser applies the same rule — after
storing, it reads the log up to its end and publishes the winning copy — so a window is
published with one set of values even when two releasers race. Pure: fed the log's record
values in order.
"""

from __future__ import annotations

from dataclasses import dataclass

from stream_dp.dp.budget_ledger import WindowLoss
from stream_dp.release.records import WindowRelease
from stream_dp.windows.columns import WindowColumns
from stream_dp.wire import internal_records as rec
from stream_dp.worker.release_snapshots import is_release_snapshot


@dataclass(frozen=True)
class StoredRelease:
    """The winning stored copy of a window: its attempt, records, losses (if stored) and the
    entries it deferred to the next window (``carry``; None: nothing deferred)."""

    attempt: str
    release: WindowRelease
    loss: WindowLoss | None
    #: Log offset of the copy's first record (its losses', else its carry's or release's).
    offset: int = -1
    carry: WindowColumns | None = None


class ReleaseLogIndex:
    """Assembles release-log records and keeps the first complete release of each window."""

    def __init__(self) -> None:
        self._parts = rec.PartAssembler()
        self._losses: dict[tuple[int, str], WindowLoss] = {}
        self._carries: dict[tuple[int, str], WindowColumns] = {}
        self.winners: dict[int, str] = {}  # window start -> winning attempt
        self.next_offset = 0
        self._first_offset: dict[tuple[str, str], int] = {}  # (kind, id) -> part 0's offset

    def add(self, offset: int, value: bytes) -> StoredRelease | None:
        """Feed the record at ``offset``; returns a window's release when its first complete
        copy has just been read, else None (a part, a loss, or a losing copy)."""
        self.next_offset = max(self.next_offset, offset + 1)
        if is_release_snapshot(value):
            return None  # read by the rebuild's plan, not here
        record = rec.decode(value)
        key = (record["kind"], str(record["id"]))
        if record["part"] == 0:
            self._first_offset[key] = offset
        whole = self._parts.add(record)
        if whole is None:
            return None
        attempt = rec.attempt_of(whole)
        if whole[0]["kind"] == "loss":
            loss = rec.loss_payload(whole)
            if loss.window_start not in self.winners:
                self._losses[(loss.window_start, attempt)] = loss
            else:
                self._first_offset.pop(key, None)
            return None
        if whole[0]["kind"] == "carry":
            start, carry = rec.carry_payload(whole)
            if start not in self.winners:
                self._carries[(start, attempt)] = carry
            else:
                self._first_offset.pop(key, None)
            return None
        release = WindowRelease.from_json_obj(rec.release_payload(whole))
        start = release.window_start
        first = self._first_offset.pop(key, -1)
        first = self._first_offset.pop(("carry", key[1]), first)
        first = self._first_offset.pop(("loss", key[1]), first)
        if start in self.winners:
            self._losses.pop((start, attempt), None)
            self._carries.pop((start, attempt), None)
            return None
        self.winners[start] = attempt
        loss = self._losses.pop((start, attempt), None)
        carry = self._carries.pop((start, attempt), None)
        for kind, pending in (("loss", self._losses), ("carry", self._carries)):
            for k in [k for k in pending if k[0] == start]:
                del pending[k]  # a losing attempt's, stored before the winner's
                self._first_offset.pop((kind, f"{k[0]}/{k[1]}"), None)
        return StoredRelease(attempt, release, loss, first, carry)
