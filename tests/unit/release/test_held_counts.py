"""Held is not withheld (docs/output.md, "Held and withheld"): under a vehicle budget with
spans a cell that waits to pool more hours is counted in ``cells_held``/``readings_held``,
each reading once, in its own hour's window; ``readings_withheld`` counts only readings
dropped for good, so over a run released + withheld adds up to every reading."""

from __future__ import annotations

from typing import Any

import h3
import numpy as np
import pytest

from stream_dp.commands.profile import BUDGET_PROFILE
from stream_dp.config import load_settings
from stream_dp.engine import OfflineEngine
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.vehicle_budget.spans import pooled_with_own
from stream_dp.release.window import release_window
from stream_dp.sources.sample import load_sample
from tests.support.membership import recording_members
from tests.support.noise_free import NoNoise
from tests.support.settings import FIXED_MODE
from tests.unit.release.test_record_membership import Readings, _tagged
from tests.unit.release.test_span_policy import _harbour, _waiting
from tests.unit.release.test_span_policy import _params as _span_params
from tests.unit.release.test_vehicle_budget import CELLS, HOUR, U, _run, _window

#: Six new vessels an hour, two readings each: no hour meets T alone, six hours pooled do.
SIX_AN_HOUR = [[(0, 6 * h + v, 30.0 + v) for v in range(6) for _ in range(2)] for h in range(6)]


def test_a_cell_held_for_a_six_hour_span_is_held_not_withheld() -> None:
    """At a slow pace (the cell stays above its release price until its span is full, §13.3)
    hours 0-4 hold the cell (12 readings each), hour 5 releases it spanning 00:00-06:00
    with all 72: no reading is withheld, and the held ones add up to the record's earlier
    hours (the old counting said 12 + 24 + 36 + 48 + 60 = 180 withheld out of 72)."""
    params = _waiting(coarsest_resolution=8, max_span_hours=6)
    releases, _ = _run(params, SIX_AN_HOUR)
    summaries = [r.summary for r in releases]
    assert [len(r.cells) for r in releases] == [0, 0, 0, 0, 0, 1]
    assert [s["cells_held"] for s in summaries] == [1, 1, 1, 1, 1, 0]
    assert [s["readings_held"] for s in summaries] == [12, 12, 12, 12, 12, 0]
    assert [s["cells_withheld"] for s in summaries] == [0] * 6
    assert [s["readings_withheld"] for s in summaries] == [0] * 6
    (record,) = releases[-1].cells
    assert (record["window_start"], record["window_end"]) == (
        "1970-01-01T00:00:00Z", "1970-01-01T06:00:00Z",
    )  # fmt: skip
    own_hour = summaries[-1]["n_readings"]
    assert record["n_readings"] == 72 == sum(s["readings_held"] for s in summaries) + own_hour


def _released_run(
    windows: list[list[tuple[int, int, float]]], **params: Any
) -> tuple[list[Any], list[Any]]:
    """The windows released without noise as ``stream-dp release`` on a file releases them
    (the input ends with the last: nothing is handed on), with each record's members."""
    p = _span_params(**params)
    ledger, carry, releases = PrivacyAccountant(p).new_ledger(), None, []
    with recording_members() as members:
        for hour, readings in enumerate(windows):
            release = release_window(
                hour * HOUR, _window(hour * HOUR, readings), p, NoNoise(), 0, ledger, carry,
                last=hour == len(windows) - 1,
            )  # fmt: skip
            assert release.loss is not None
            ledger.record_released(release.loss)
            carry = release.carry
            releases.append(release)
    return releases, members


@pytest.mark.parametrize("seed", [0, 3, 9])
def test_released_and_withheld_add_up_to_every_reading_and_held_ones_are_not_counted_twice(
    seed: int,
) -> None:
    """Harbour data (spans, due cells, carried pairs withheld) over 8 hours: every reading is
    in one record or counted withheld once (the readings in no record are exactly the sum of
    ``readings_withheld``); the held readings are those released in a later window than
    their own hour, plus some of the withheld ones (held first, withheld later)."""
    windows = _harbour(8, seed)
    releases, members = _released_run(windows, coarsest_resolution=6, max_span_hours=4)
    summaries = [r.summary for r in releases]
    assert releases[-1].carry is None  # the input ends: nothing is handed on uncounted
    total = sum(map(len, windows))
    assert sum(s["n_readings"] for s in summaries) == total
    released = sum(c["n_readings"] for r in releases for c in r.cells)
    withheld = sum(s["readings_withheld"] for s in summaries)
    assert released + withheld == total

    _assert_held_between(summaries, members, _tagged(windows))


def _assert_held_between(
    summaries: list[dict[str, Any]], members: list[Any], readings: Readings
) -> None:
    """The readings in no record are exactly the sum of ``readings_withheld``; the held ones
    are at least those released in a later window than their own hour and at most those
    plus the withheld ones (held first, withheld later)."""
    record = readings.held(members)  # each reading's record (-1: none), checked exact
    withheld = sum(s["readings_withheld"] for s in summaries)
    assert int(np.count_nonzero(record < 0)) == withheld
    releasing = np.array([m.window_start for m in members] + [-1])[record]
    later = int(np.count_nonzero((record >= 0) & (releasing > readings.window)))
    held = sum(s["readings_held"] for s in summaries)
    assert later > 0 and later <= held <= later + withheld
    assert sum(s["cells_held"] for s in summaries) > 0


@pytest.mark.slow
def test_on_the_ais_week_released_and_withheld_add_up_and_held_ones_are_counted_once() -> None:
    """The budget profile on the bundled AIS week, released as ``stream-dp release`` releases
    a file (the last window holds nothing back): the same sums as on the harbour data."""
    settings = load_settings(app_id="t", upper=U, **{**FIXED_MODE, **BUDGET_PROFILE})
    engine = OfflineEngine(settings, NoNoise())
    sample = load_sample()
    summaries, cells = [], []
    with recording_members() as members:
        for batch in (engine.feed(sample), engine.finish(release_held=True)):
            for release in batch:
                summaries.append(release.summary)
                cells.extend(release.cells)
    assert sum(s["n_readings"] for s in summaries) == len(sample)
    released = sum(c["n_readings"] for c in cells)
    assert released + sum(s["readings_withheld"] for s in summaries) == len(sample)
    res = settings.resolution
    readings = Readings(
        [h3.latlng_to_cell(r["lat"], r["lon"], res) for r in sample],
        [r["vehicle_id"] for r in sample], [float(r["ts"]) for r in sample],
        [float(r["speed"]) for r in sample],
    )  # fmt: skip
    _assert_held_between(summaries, members, readings)


def test_pooling_tells_each_pooled_pair_s_readings_of_the_window() -> None:
    """A (cell, vehicle) in the carry and the window pools into one pair holding both; the
    pair's own count is the window's readings of it, a carried-only pair's is 0."""
    earlier = _window(0, [(0, 1, 5.0)] * 3 + [(1, 2, 5.0)])
    own = _window(HOUR, [(0, 1, 6.0)] * 2 + [(1, 3, 6.0)] * 4 + [(2, 2, 6.0)])
    both, own_count = pooled_with_own(own, earlier, 64)
    keys = [
        (both.cell_names[c], both.vehicle_names[v])
        for c, v in zip(both.cell_code.tolist(), both.vehicle_code.tolist(), strict=True)
    ]
    by_key = dict(zip(keys, zip(both.count.tolist(), own_count.tolist(), strict=True),
                      strict=True))  # fmt: skip
    assert by_key == {
        (CELLS[0], "v1"): (5, 2), (CELLS[1], "v2"): (1, 0), (CELLS[1], "v3"): (4, 4),
        (CELLS[2], "v2"): (1, 1),
    }  # fmt: skip
    assert pooled_with_own(own, None, 64)[1].tolist() == own.count.tolist()
    empty = _window(HOUR, [])
    assert pooled_with_own(empty, earlier, 64)[1].tolist() == [0] * len(earlier)
