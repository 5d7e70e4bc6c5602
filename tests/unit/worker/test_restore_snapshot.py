"""The snapshot an import appends (``stream_dp.worker.restore_snapshot``)."""

from __future__ import annotations

import orjson

from stream_dp.worker.release_snapshots import ReleaseSnapshot, known_published
from stream_dp.worker.restore_snapshot import restore_snapshot
from stream_dp.worker.resume_plan import plan_resume
from tests.unit.worker.test_release_log import stored_copy

HOUR = 3600


def snapshot(**fields) -> ReleaseSnapshot:
    values = {
        "read_from": 0, "released_through": None, "spent_before": 0.0, "releases_from": 57,
        "last_released": HOUR, "unpublished": (), "partials_from": 900,
        "progress": {0: (7200.0, {3600: 2}), 1: (7100.0, {})},
    }  # fmt: skip
    return ReleaseSnapshot(**(values | fields))


def numbered(values: list[bytes]) -> list[tuple[int, bytes]]:
    return list(enumerate(values))


def test_a_log_without_a_snapshot_needs_none():
    assert restore_snapshot(numbered(stored_copy("a", 1.0, window=HOUR))) is None
    assert restore_snapshot([]) is None


def test_it_repeats_the_latest_snapshot_with_the_new_topics_read_from_their_start():
    old = snapshot(read_from=3, released_through=0, spent_before=2.5)
    log = stored_copy("a", 1.0, window=0) + [snapshot().encode()]
    log += stored_copy("b", 1.0, window=HOUR) + [old.encode()]
    restored = restore_snapshot(numbered(log))
    assert restored is not None
    assert (restored.partials_from, restored.releases_from, restored.progress) == (0, 0, {})
    # the ledger part is the latest snapshot's
    assert (restored.read_from, restored.released_through, restored.spent_before) == (3, 0, 2.5)
    assert restored.last_released == HOUR and restored.unpublished == ()
    # it is a valid latest snapshot of the restored log, appended at its end
    plan = plan_resume(0, len(log) + 1, (len(log), restored))
    assert plan.start == 3 and plan.summary == restored
    assert ReleaseSnapshot.from_record(orjson.loads(restored.encode())) == restored


def test_windows_stored_after_the_latest_snapshot_count_as_unpublished():
    log = stored_copy("a", 1.0, window=HOUR) + [snapshot(unpublished=(0,)).encode()]
    log += stored_copy("b", 1.0, window=2 * HOUR)  # stored; the releaser stopped there
    restored = restore_snapshot(numbered(log))
    assert restored is not None
    assert restored.unpublished == (0, 2 * HOUR)
    assert restored.last_released == 2 * HOUR
    plan = plan_resume(0, len(log) + 1, (len(log), restored))
    first_of_b = len(stored_copy("a", 1.0, window=HOUR)) + 1
    assert not known_published(plan, 2 * HOUR, first_of_b)  # re-published from its copy
    assert known_published(plan, HOUR, 0)
