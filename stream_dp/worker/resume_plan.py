"""Where a restart reads a partition from: the one rule of the state replay and the
release-log rebuild.

Both write summary records into their own topic (a state checkpoint,
:mod:`stream_dp.worker.checkpoints`; a release-log snapshot,
:mod:`stream_dp.worker.release_snapshots`), each making every record before its
``read_from`` unnecessary. A restart finds the latest summary (read from the partition's
tail) and :func:`plan_resume` turns it into a :class:`ResumePlan`. Pure: offsets in, a plan out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar


class Summary(Protocol):
    """A summary record: every record before ``read_from`` is summarised by it."""

    @property
    def read_from(self) -> int: ...


S = TypeVar("S", bound=Summary)


@dataclass(frozen=True)
class ResumePlan(Generic[S]):
    """Where a partition's read starts, and the summary it is seeded from (if any) with the
    summary's own offset (-1 without one)."""

    start: int
    summary: S | None = None
    summary_offset: int = -1


def resume_offset(earliest: int, end: int, summary_offset: int, read_from: int) -> int | None:
    """Where to read a partition holding ``[earliest, end)`` from, given a summary record at
    ``summary_offset`` that makes every record before ``read_from`` unnecessary: ``read_from``,
    never before the earliest record held (what precedes it is summarised, not lost); None if
    the summary is unusable (outside the records held, or naming an offset it cannot know:
    past itself)."""
    if not earliest <= summary_offset < end or read_from > summary_offset:
        return None
    return max(read_from, earliest)


def plan_resume(earliest: int, end: int, latest: tuple[int, S] | None) -> ResumePlan[S]:
    """Start at the latest summary's ``read_from`` (``latest``: its offset and content, see
    :func:`resume_offset`); without a usable summary, at the earliest record."""
    if latest is not None:
        offset, summary = latest
        start = resume_offset(earliest, end, offset, summary.read_from)
        if start is not None:
            return ResumePlan(start, summary, offset)
    return ResumePlan(earliest)
