"""The dashboard's release store: grouping, duplicates, the budget it derives, hexagons."""

from __future__ import annotations

import h3
import pytest

from stream_dp.dashboard.colour_scale import (
    OPACITY_CERTAIN,
    OPACITY_UNCERTAIN,
    error_opacity,
)
from stream_dp.dashboard.span_text import span_text
from stream_dp.dashboard.store import ReleaseStore, cell_boundary
from tests.support.records import hour_stamp as _stamp
from tests.support.records import window_records

NYC = h3.latlng_to_cell(40.70, -74.00, 8)


def test_records_are_grouped_by_window_and_duplicates_dropped() -> None:
    store = ReleaseStore()
    first = window_records(0, {NYC: 30.0, h3.cell_to_parent(NYC, 6): 50.0}, 1.0)
    assert store.add(first)
    version = store.version
    assert not store.add(first)  # the same window re-published: nothing new
    assert store.duplicates == len(first) and store.version == version
    bad_start = {"type": "window", "release_id": "x", "window_start": "yesterday"}
    assert not store.add([{"type": "cell"}, "not a record", {"window_start": 3}, bad_start])
    assert store.invalid == 4
    cells = store.cells(_stamp(0))
    assert cells is not None
    assert sorted((c["cell"], c["mean"]) for c in cells) == sorted(
        (r["cell"], r["mean"]) for r in first if r["type"] == "cell"
    )
    # Mixed resolutions: each cell's own hexagon and resolution.
    by_cell = {c["cell"]: c for c in cells}
    assert by_cell[NYC]["resolution"] == 8
    assert by_cell[h3.cell_to_parent(NYC, 6)]["resolution"] == 6
    assert len(by_cell[NYC]["boundary"]) == 6
    assert store.cells(_stamp(5)) is None


def test_a_window_is_listed_once_its_summary_arrived() -> None:
    store = ReleaseStore()
    records = window_records(0, {NYC: 30.0}, 1.0)
    store.add(records[:-1])
    assert store.index() == []
    store.add(records[-1:])
    [entry] = store.index()
    assert entry["window_start"] == _stamp(0) and entry["cells_received"] == 1
    assert "cells_withheld" not in entry  # absent from the record: the page shows "—"


def test_cumulative_epsilon_and_the_rolling_period_bound() -> None:
    store = ReleaseStore(max_windows=3)
    losses = {0: 1.0, 1: 2.0, 2: 0.5, 3: 4.0, 4: 0.25}
    for hour in (3, 0, 4, 2, 1):  # arrival order does not matter
        store.add(window_records(hour, {NYC: 10.0}, losses[hour]))
    index = store.index()
    # Only the newest three windows are kept, the older ones' loss still counts.
    assert [w["window_start"] for w in index] == [_stamp(h) for h in (2, 3, 4)]
    assert [w["cumulative_epsilon"] for w in index] == [3.5, 7.5, 7.75]
    # The period (3 h) ending with each window: its window and the two before.
    assert [w["period_loss_bound"] for w in index] == [3.5, 6.5, 4.75]


def test_the_budget_cap_bounds_the_period_loss() -> None:
    store = ReleaseStore()
    for hour in range(3):
        store.add(window_records(hour, {NYC: 10.0}, 2.0, budget_cap=5.0, cells_withheld=4))
    index = store.index()
    assert [w["period_loss_bound"] for w in index] == [2.0, 4.0, 5.0]
    assert index[-1]["cells_withheld"] == 4


def test_cell_boundary_is_the_h3_hexagon() -> None:
    ring = cell_boundary(NYC)
    expected = h3.cell_to_boundary(NYC)
    assert len(ring) == len(expected) == 6
    for (lat, lng), (elat, elng) in zip(ring, expected, strict=True):
        assert lat == pytest.approx(elat, abs=1e-6) and lng == pytest.approx(elng, abs=1e-6)
    pentagon = h3.get_pentagons(3)[0]
    assert len(cell_boundary(pentagon)) >= 5


def test_error_opacity_fades_with_the_mean_error() -> None:
    assert error_opacity(None, 65.0) == OPACITY_CERTAIN
    assert error_opacity(0.0, 65.0) == OPACITY_CERTAIN
    assert error_opacity(65.0 / 8, 65.0) == pytest.approx((OPACITY_CERTAIN + OPACITY_UNCERTAIN) / 2)
    assert error_opacity(100.0, 65.0) == pytest.approx(OPACITY_UNCERTAIN)


def test_each_window_states_its_own_u() -> None:
    """Issue 26: the index carries each window's U as its records state it (none for
    records written before they carried it); a record with a U that is not a positive
    finite number is not stored."""
    store = ReleaseStore()
    store.add(window_records(0, {NYC: 30.0}, 1.0, upper=120.0))
    store.add(window_records(1, {NYC: 30.0}, 1.0, upper=65.0))
    store.add(window_records(2, {NYC: 30.0}, 1.0))
    assert [w.get("upper") for w in store.index()] == [120.0, 65.0, None]
    bad = window_records(3, {NYC: 30.0}, 1.0, upper=float("inf"))
    assert not store.add(bad[:1]) and store.invalid == 1


def test_common_upper_refuses_a_mix() -> None:
    from stream_dp.dashboard.store import common_upper

    same = window_records(0, {NYC: 1.0}, 1.0, upper=90.0)
    assert common_upper(same, 65.0) == 90.0
    assert common_upper(window_records(0, {NYC: 1.0}, 1.0), 65.0) == 65.0  # none stated
    mixed = same + window_records(1, {NYC: 1.0}, 1.0)  # 90 and (unstated) 65
    with pytest.raises(ValueError, match="mix different U"):
        common_upper(mixed, 65.0)


def test_a_span_s_cells_are_filed_with_the_window_that_released_them() -> None:
    """Under a vehicle budget a record covers a span of windows: its window_start is the span's
    first window, its window_end that of the window releasing it. The map must show it with
    that window, not with the (already released) window the span started in."""
    store = ReleaseStore()
    parent = h3.cell_to_parent(NYC, 4)
    store.add(window_records(0, {NYC: 20.0}, 1.0))  # hour 0, released on its own
    released = window_records(3, {parent: 42.0}, 0.5)  # hour 3 releases a span 0..3
    span_cell = released[0]
    span_cell["window_start"] = _stamp(0)
    store.add([span_cell])  # the span's cell may arrive before hour 3's summary
    assert [c["cell"] for c in store.cells(_stamp(0)) or []] == [NYC]
    store.add(released[1:])
    assert [c["cell"] for c in store.cells(_stamp(3)) or []] == [parent]
    assert [c["cell"] for c in store.cells(_stamp(0)) or []] == [NYC]
    assert [w["window_start"] for w in store.index()] == [_stamp(0), _stamp(3)]


def test_held_counts_are_sent_beside_the_withheld_ones_and_spans_cover_their_hours() -> None:
    """A window's held and withheld counts reach the page apart; a record spanning 07:00-13:00
    (released with window 12) covers each of its hours and no other."""
    store = ReleaseStore()
    held = dict(cells_held=1, readings_held=12, cells_withheld=2, readings_withheld=5)
    for hour in range(7, 12):
        store.add(window_records(hour, {}, 0.0, **held, planned_by="optimiser"))
    span = window_records(12, {NYC: 30.0}, 1.0)
    span[0]["window_start"] = _stamp(7)
    store.add(span)
    entry = store.index()[0]
    assert {k: entry[k] for k in held} == held
    assert entry["planned_by"] == "optimiser"  # which planner held them
    for hour in range(7, 13):
        assert [c["cell"] for c in store.cells_covering(_stamp(hour))] == [NYC], hour
    assert store.cells_covering(_stamp(6)) == store.cells_covering(_stamp(13)) == []
    assert store.cells(_stamp(7)) == []  # filed under the window that released it
    assert [c["window_start"] for c in store.cells(_stamp(12)) or []] == [_stamp(7)]


@pytest.mark.parametrize(
    ("start", "end", "text"),
    [
        ("2024-06-01T07:00:00Z", "2024-06-01T13:00:00Z", "2024-06-01 07:00–13:00"),
        ("2024-06-01T23:00:00Z", "2024-06-02T00:00:00Z", "2024-06-01 23:00–24:00"),
        ("2024-06-01T20:00:00Z", "2024-06-02T02:00:00Z", "2024-06-01 20:00–2024-06-02 02:00"),
        ("2024-06-30T22:00:00Z", "2024-07-01T00:00:00Z", "2024-06-30 22:00–24:00"),
        ("2024-06-01T22:00:00Z", "2024-06-03T00:00:00Z", "2024-06-01 22:00–2024-06-03 00:00"),
    ],
)
def test_a_span_is_written_as_its_hours(start: str, end: str, text: str) -> None:
    assert span_text(start, end) == text


def test_secret_routes_windows_carry_their_model_and_every_vehicle_s_epsilon() -> None:
    """Issue 36: the index names the model and the window's and period's (epsilon, delta);
    the cumulative sum counts each window's epsilon (no K there)."""
    store = ReleaseStore()
    summaries = []
    for hour, period in ((1, 0.27), (2, 0.5)):
        summaries.append({
            "type": "window", "release_id": f"w{hour}", "privacy_model": "secret-routes",
            "window_start": _stamp(hour), "window_end": _stamp(hour + 1), "cells_released": 0,
            "epsilon_window": 0.27, "delta_window": 6e-10, "epsilon_period": period,
            "delta_period": 1e-9, "windows_in_period": hour, "threshold_vehicles": 153.2,
        })  # fmt: skip
    store.add(summaries)
    first, second = store.index()
    assert second["privacy_model"] == "secret-routes"
    assert (second["epsilon_period"], second["windows_in_period"]) == (0.5, 2)
    assert second["threshold_vehicles"] == 153.2
    assert (first["cumulative_epsilon"], second["cumulative_epsilon"]) == (0.27, 0.54)
