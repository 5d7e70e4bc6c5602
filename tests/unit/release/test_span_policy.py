"""Pool only where pooling keeps a cell within reach of T (docs/math.md §13.3,
``release/span_policy.py``): moored vessels' readings pooled into a cell make it need more ε,
so a cell that meets T alone is released alone instead of being lost to the pool."""

from __future__ import annotations

from typing import Any

import h3
import numpy as np

from stream_dp.dp.noise import LaplaceNoise
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.params import ReleaseParams
from stream_dp.release.records import WindowRelease
from stream_dp.release.span_policy import choose_pooling, due_cells
from stream_dp.release.window import release_window
from stream_dp.windows.columns import WindowColumns

U, T, HOUR = 65.0, 10.0, 3600
CELL = h3.latlng_to_cell(40.70, -74.02, 8)

#: 30 passing vessels with 2 readings each: the cell meets T at ε 0.65 (under the burst, 1).
PASSING = [(f"p{v}", 2) for v in range(30)]
#: 3 moored vessels with 60 readings each: pooled with the passing ones, the cell needs ε ~5.
MOORED = [(f"m{v}", 60) for v in range(3)]


def _params(**changes: Any) -> ReleaseParams:
    values: dict[str, Any] = {
        "epsilon": 1.0, "upper": U, "resolution": 8, "coarsest_resolution": 7,
        "target_mean_error": T, "variance_share": 0.0, "vehicle_budget": 6.0,
        "budget_period_seconds": 6 * HOUR, "max_span_hours": 3, "app_id": "test",
    }  # fmt: skip
    values.update(changes)
    return ReleaseParams(**values)


def _window(start: int, vehicles: list[tuple[str, int]]) -> WindowColumns:
    names = [name for name, n in vehicles for _ in range(n)]
    ts = [float(start + i) for i in range(len(names))]
    values = [20.0 + (i % 7) for i in range(len(names))]
    return WindowColumns.from_readings([CELL] * len(names), names, ts, values, 64)


def _run(params: ReleaseParams, hours: list[list[tuple[str, int]]]) -> list[WindowRelease]:
    ledger = PrivacyAccountant(params).new_ledger()
    releases, carry = [], None
    for hour, vehicles in enumerate(hours):
        release = release_window(
            hour * HOUR, _window(hour * HOUR, vehicles), params, LaplaceNoise(), 0, ledger, carry
        )
        assert release.loss is not None
        ledger.record_released(release.loss)
        carry = release.carry
        releases.append(release)
    return releases


def test_a_cell_that_meets_t_alone_is_released_alone_when_the_carry_would_break_it() -> None:
    """Hour 0: three moored vessels (missing T, carried). Hour 1: thirty passing vessels meet
    T alone; pooled with the moored readings they need ε ~5, past the burst. The window's
    cell is released from its own readings; the moored readings are withheld."""
    params = _params()
    window = _window(HOUR, PASSING)
    carry = _run(params, [MOORED])[0].carry
    assert carry is not None and int(carry.count.sum()) == 180
    choice = choose_pooling(window, carry, params, 1.0)
    assert choice.carry is None and choice.withheld == 180 and choice.due == ()
    assert int(choice.window.count.sum()) == 60

    releases = _run(params, [MOORED, PASSING])
    assert [len(r.cells) for r in releases] == [0, 1]
    (record,) = releases[1].cells
    assert record["n_readings"] == 60 and record["mean_error"] <= T
    assert (record["window_start"], record["window_end"]) == (
        "1970-01-01T01:00:00Z", "1970-01-01T02:00:00Z",
    )  # fmt: skip
    assert record["epsilon"] <= 1.0
    assert releases[1].summary["readings_withheld"] >= 180
    assert releases[1].carry is None  # nothing left to pool


def test_a_held_cell_that_the_next_window_would_break_is_released_then() -> None:
    """At the coarsest resolution a passing cell is held for more windows. Hour 0: thirty
    passing vessels (held). Hour 1: three moored vessels, which pooled would take the cell
    past T: the held cell is due and released from hour 0's readings, its span hours 0-1;
    the moored readings are carried on as a span of their own."""
    params = _params(coarsest_resolution=8)
    releases = _run(params, [PASSING, MOORED])
    assert [len(r.cells) for r in releases] == [0, 1]
    (record,) = releases[1].cells
    assert record["n_readings"] == 60 and record["mean_error"] <= T
    assert (record["window_start"], record["window_end"]) == (
        "1970-01-01T00:00:00Z", "1970-01-01T02:00:00Z",
    )  # fmt: skip
    carried = releases[1].carry
    assert carried is not None and int(carried.count.sum()) == 180
    assert set(carried.vehicle_names) == {name for name, _ in MOORED}


def test_pooling_that_lowers_the_needed_epsilon_still_pools() -> None:
    """Six new vessels an hour: no hour meets T alone, the pool does (the spans of §13.3)."""
    params = _params(coarsest_resolution=8, max_span_hours=4)
    hours = [[(f"h{h}v{v}", 2) for v in range(6)] for h in range(4)]
    releases = _run(params, hours)
    assert [len(r.cells) for r in releases] == [0, 0, 0, 1]
    assert releases[3].cells[0]["n_readings"] == 48


def test_a_due_cell_is_matched_at_any_resolution() -> None:
    parent = h3.cell_to_parent(CELL, 6)
    other = h3.latlng_to_cell(-33.9, 151.2, 6)
    assert due_cells([parent, other, CELL], (h3.cell_to_parent(CELL, 7),)).tolist() == [
        True, False, True,
    ]  # fmt: skip
    assert not np.any(due_cells([parent], ()))
