"""The snapshot an import appends after a restored release log: the new broker's topics.

A release-log snapshot (see :mod:`stream_dp.worker.release_snapshots`) names offsets in two
other topics: ``partials_from`` (partials) and ``releases_from`` (releases). After a broker
lost its data those topics start again at offset 0, so the old offsets point at unrelated
records: a releaser seeking the new partials topic to an old ``partials_from`` would skip
partials once that topic has grown past it. The restore snapshot repeats the backup's
latest snapshot with both offsets at 0 and no partition progress, so a rebuild reads the new
topics from their start. Windows stored after that latest snapshot may never have been
published (a releaser can stop between storing and publishing): they are listed in
``unpublished``, so a rebuild re-publishes their stored copies. Pure: fed the log's records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import orjson

from stream_dp.worker.release_log import ReleaseLogIndex
from stream_dp.worker.release_snapshots import ReleaseSnapshot, is_release_snapshot


def restore_snapshot(records: Iterable[tuple[int, bytes]]) -> ReleaseSnapshot | None:
    """The snapshot to append after the release log's ``(offset, value)`` records, in order;
    None when the log holds no snapshot (a rebuild then reads every topic from its start)."""
    records = list(records)
    if not any(is_release_snapshot(value) for _, value in records):
        return None
    index = ReleaseLogIndex()
    latest: tuple[int, ReleaseSnapshot] | None = None
    stored_after: set[int] = set()
    for offset, value in records:
        if is_release_snapshot(value):
            latest = (offset, ReleaseSnapshot.from_record(orjson.loads(value)))
            stored_after.clear()
            continue
        won = index.add(offset, value)
        if won is not None:
            stored_after.add(won.release.window_start)
    if latest is None:
        return None
    snapshot = latest[1]
    candidates = [*stored_after]
    if snapshot.last_released is not None:
        candidates.append(snapshot.last_released)
    return dataclasses.replace(
        snapshot,
        partials_from=0,
        progress={},
        releases_from=0,
        unpublished=tuple(sorted({*snapshot.unpublished, *stored_after})),
        last_released=max(candidates, default=None),
    )
