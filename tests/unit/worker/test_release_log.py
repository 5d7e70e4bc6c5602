"""The first complete copy of a window in the release log is the release."""

from __future__ import annotations

import itertools

import orjson
import pytest

from stream_dp.dp.budget_ledger import WindowLoss
from stream_dp.wire import internal_records as rec
from stream_dp.worker.release_log import ReleaseLogIndex


def stored_copy(attempt: str, mean: float, n_cells: int = 3, window: int = 3600) -> list[bytes]:
    """A window's loss + release parts, as a releaser with ``attempt`` stores them."""
    release = {
        "window_start": window,
        "cells": [{"cell": f"c{i}", "mean": mean, "release_id": f"id{i}"} for i in range(n_cells)],
        "summary": {"K": 1, "release_id": "w"},
    }
    loss = WindowLoss.from_counts(window, 1.0, [f"v-{attempt}"], [1])
    return rec.encode_loss(loss, attempt) + rec.encode_release(release, attempt)


def read(values: list[bytes]):
    index = ReleaseLogIndex()
    return [w for offset, v in enumerate(values) if (w := index.add(offset, v)) is not None]


@pytest.mark.parametrize("cells", [3, 700])  # 700 cells: the release has several parts
def test_the_first_complete_copy_wins_with_its_own_losses(cells):
    a, b = stored_copy("a", 1.0, cells), stored_copy("b", 2.0, cells)
    for first, second, name in ((a, b, "a"), (b, a, "b")):
        winners = read(first + second)
        assert len(winners) == 1
        assert winners[0].attempt == name
        assert winners[0].loss.vehicles == (f"v-{name}",)
        assert {c["mean"] for c in winners[0].release.cells} == {1.0 if name == "a" else 2.0}


def test_interleaved_racing_writers_assemble_separately():
    a, b = stored_copy("a", 1.0, 700), stored_copy("b", 2.0, 700)
    interleaved = [v for pair in itertools.zip_longest(a, b) for v in pair if v is not None]
    winners = read(interleaved)
    assert len(winners) == 1
    # b's release completes first when b has fewer parts left at the end; either way the
    # winner's losses are its own
    assert winners[0].loss.vehicles == (f"v-{winners[0].attempt}",)


def test_a_loss_without_its_release_is_never_counted():
    a, b = stored_copy("a", 1.0), stored_copy("b", 2.0)
    winners = read(a[:1] + b)  # a crashed after storing its losses
    assert [w.attempt for w in winners] == ["b"] and winners[0].loss.vehicles == ("v-b",)


def test_records_stored_before_attempt_ids_still_read():
    legacy = {"kind": "release", "id": "0", "part": 0, "parts": 1, "window_start": 0,
              "cells": [], "summary": {"K": 0}}  # fmt: skip
    winners = read([orjson.dumps(legacy)])
    assert len(winners) == 1 and winners[0].loss is None
