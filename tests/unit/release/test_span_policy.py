"""Pool only where pooling keeps a cell within reach of T (docs/math.md §13.3,
``release/vehicle_budget/pooling.py``): moored vessels' readings pooled into a cell make it need
more ε,
so a cell that meets T alone is released alone instead of being lost to the pool."""

from __future__ import annotations

from typing import Any

import h3
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_dp.release.params import ReleaseParams
from stream_dp.release.vehicle_budget.pooling import choose_pooling, due_cells
from tests.unit.release.test_vehicle_budget import (
    CELLS,
    HOUR,
    T,
    U,
    _hours,
    _run,
    _window,
    _worst_loss_by_reading_hour,
    _worst_rolling_loss,
)  # fmt: skip
from tests.unit.release.test_vehicle_budget import _params as _budget_params

CELL = CELLS[0]
#: 30 passing vessels with 2 readings each: the cell meets T at ε 0.65 (under the burst, 1).
PASSING = [(0, v, 20.0 + i) for v in range(30) for i in range(2)]
#: 3 moored vessels with 60 readings each: pooled with the passing ones, the cell needs ε ~5.
MOORED = [(0, 100 + v, 20.0 + i % 7) for v in range(3) for i in range(60)]


def _params(**changes: Any) -> ReleaseParams:
    """test_vehicle_budget's parameters with R0 7: a res-8 cell that passes is not held."""
    return _budget_params(**{"coarsest_resolution": 7, **changes})


#: A long budget period: the bucket refills slowly (B 6 per 96 h), so a cell that meets T in
#: hour 0 is above its release price and waits (§13.3): the setting where pooling may break it.
SLOW_PACE = 96 * HOUR


def _waiting(**changes: Any) -> ReleaseParams:
    """:func:`_params` with :data:`SLOW_PACE`."""
    return _params(**{"budget_period_seconds": SLOW_PACE, **changes})


def test_a_cell_that_meets_t_alone_is_released_alone_when_the_carry_would_break_it() -> None:
    """Hour 0: three moored vessels (missing T, carried). Hour 1: thirty passing vessels meet
    T alone; pooled with the moored readings they need ε ~5, past the burst. The window's
    cell is formed from its own readings (released: the input ends there, nothing is held);
    the moored readings are withheld."""
    params = _params()
    window = _window(HOUR, PASSING)
    carry = _run(params, [MOORED])[0][0].carry
    assert carry is not None and int(carry.count.sum()) == 180
    choice = choose_pooling(window, carry, params, 1.0)
    assert choice.carry is None and choice.withheld == 180 and choice.due == ()
    assert int(choice.window.count.sum()) == 60

    releases, _ = _run(params, [MOORED, PASSING], ends=True)
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
    params = _waiting(coarsest_resolution=8)
    releases, _ = _run(params, [PASSING, MOORED])
    assert [len(r.cells) for r in releases] == [0, 1]
    (record,) = releases[1].cells
    assert record["n_readings"] == 60 and record["mean_error"] <= T
    assert (record["window_start"], record["window_end"]) == (
        "1970-01-01T00:00:00Z", "1970-01-01T02:00:00Z",
    )  # fmt: skip
    carried = releases[1].carry
    assert carried is not None and int(carried.count.sum()) == 180
    assert set(carried.vehicle_names) == {f"v{v}" for _, v, _ in MOORED}


def test_a_due_cell_takes_at_most_its_span_s_share_of_the_burst() -> None:
    """With spans of up to 4 hours, the held cell that hour 1's moored vessels would break is
    due after 2 hours, half a span: it may take half the burst (0.5), not the 0.66 its thirty
    vessels need, so it is dropped and its readings carried. Sixty vessels need 0.33: their
    due cell is released. At the input's end nothing is paced: the thirty are released."""
    params = _waiting(coarsest_resolution=8, max_span_hours=4)
    releases, _ = _run(params, [PASSING, MOORED])
    assert [len(r.cells) for r in releases] == [0, 0]
    carried = releases[1].carry
    assert carried is not None and {f"v{v}" for v in range(30)} <= set(carried.vehicle_names)
    wide = [(0, v, 20.0 + i) for v in range(60) for i in range(2)]
    releases, _ = _run(params, [wide, MOORED])
    assert [len(r.cells) for r in releases] == [0, 1]
    (record,) = releases[1].cells
    assert record["n_readings"] == 120 and record["epsilon"] <= 0.5
    releases, _ = _run(params, [PASSING, MOORED], ends=True)
    assert [r["n_readings"] for r in releases[1].cells] == [60]
    assert 0.5 < releases[1].cells[0]["epsilon"] <= 1.0


def test_a_short_due_cell_may_still_take_half_the_burst() -> None:
    """Spans of up to 6 hours: a cell due after 2 covers a third of a span, but may take half
    the burst (``SHORT_SPAN_SHARE``): forty-five vessels (ε 0.44) are released."""
    params = _waiting(coarsest_resolution=8, max_span_hours=6)
    mid = [(0, v, 20.0 + i) for v in range(45) for i in range(2)]
    releases, _ = _run(params, [mid, MOORED])
    assert [r["n_readings"] for r in releases[1].cells] == [90]
    assert 1.0 / 3.0 < releases[1].cells[0]["epsilon"] <= 0.5


def test_pooling_that_lowers_the_needed_epsilon_still_pools() -> None:
    """Six new vessels an hour: no hour meets T alone, the pool does (the spans of §13.3)."""
    params = _params(coarsest_resolution=8, max_span_hours=4)
    hours = [[(0, 6 * h + v, 30.0 + v) for v in range(6) for _ in range(2)] for h in range(4)]
    releases, _ = _run(params, hours)
    assert [len(r.cells) for r in releases] == [0, 0, 0, 1]
    assert releases[3].cells[0]["n_readings"] == 48


def test_a_due_cell_is_matched_at_any_resolution() -> None:
    parent = h3.cell_to_parent(CELL, 6)
    other = h3.latlng_to_cell(-33.9, 151.2, 6)
    assert due_cells([parent, other, CELL], (h3.cell_to_parent(CELL, 7),)).tolist() == [
        True, False, True,
    ]  # fmt: skip
    assert not np.any(due_cells([parent], ()))


def _harbour(hours: int, seed: int) -> list[list[tuple[int, int, float]]]:
    """Moored vessels (ids 0-3, many readings in cells 0-1, in about half the hours) among
    passing ones (new ids each hour, a few readings anywhere in cells 0-3): the data where
    pooling breaks cells."""
    rng = np.random.default_rng(seed)
    out = []
    for hour in range(hours):
        moored = [(int(v % 2), v, 5.0) for v in range(4) for _ in range(int(rng.integers(20, 80)))]
        moored = moored if rng.random() < 0.5 else []  # some hours without them
        passing = [
            (int(rng.integers(0, 4)), 1000 * (hour + 1) + v, float(rng.uniform(0, U)))
            for v in range(int(rng.integers(10, 160)))
            for _ in range(int(rng.integers(1, 4)))
        ]
        out.append(moored + passing)
    return out


def test_the_harbour_data_exercises_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The property below runs where the policy acts: cells due and carried readings withheld."""
    import stream_dp.release.vehicle_budget.stages as stages_module

    seen = {"due": 0, "withheld": 0}
    original = stages_module.choose_pooling

    def counting(*args: Any) -> Any:
        choice = original(*args)
        seen["due"] += len(choice.due)
        seen["withheld"] += choice.withheld
        return choice

    monkeypatch.setattr(stages_module, "choose_pooling", counting)
    releases, _ = _run(_params(max_span_hours=4), _harbour(12, 0))
    assert seen["due"] > 0 and seen["withheld"] > 0
    assert sum(len(r.cells) for r in releases) >= 5


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)  # fmt: skip
@given(
    hours=st.integers(3, 12),
    seed=st.integers(0, 10_000),
    span=st.integers(2, 5),
    coarsest=st.sampled_from([6, 7, 8]),
    restart=st.integers(-1, 11),
)
def test_the_policy_keeps_the_promise_and_releases_each_reading_once(
    hours: int, seed: int, span: int, coarsest: int, restart: int
) -> None:
    params = _params(coarsest_resolution=coarsest, max_span_hours=span)
    windows = _harbour(hours, seed)
    releases, losses = _run(params, windows, restart_at=restart)
    budget = float(params.vehicle_budget or 0.0)
    assert _worst_rolling_loss(losses, params.budget_period_seconds) <= budget * (1 + 1e-9)
    assert _worst_loss_by_reading_hour(releases, params.budget_period_seconds) <= budget * (
        1 + 1e-9
    )
    records = [r for rel in releases for r in rel.cells]
    assert sum(r["n_readings"] for r in records) <= sum(map(len, windows))
    for record in records:
        assert record["mean_error"] <= T
        assert 1 <= _hours(record["window_end"]) - _hours(record["window_start"]) <= span


@pytest.mark.parametrize("coarsest", [6, 7])
def test_a_due_cell_is_released_at_its_own_resolution_with_longer_spans(coarsest: int) -> None:
    """With spans of 3 hours the carry's pairs could still wait, but a due unit is released
    now: at its own resolution (8), not pushed up to R0 as a waiting finer cell would be."""
    params = _waiting(coarsest_resolution=coarsest, max_span_hours=3)
    releases, _ = _run(params, [PASSING, MOORED])
    assert [len(r.cells) for r in releases] == [0, 1]
    (record,) = releases[1].cells
    assert record["resolution"] == 8 and record["n_readings"] == 60


def test_at_the_input_s_end_set_aside_readings_are_counted_withheld() -> None:
    """The last window has no later one to release what it sets aside or would carry: it
    hands nothing on and counts those readings in its ``readings_withheld`` (none vanishes
    uncounted): what it read (its own and the carry) is released or withheld."""
    acted = 0
    for seed in (9, 10, 11):
        params = _params(coarsest_resolution=6, max_span_hours=4)
        windows = _harbour(8, seed)
        releases, _ = _run(params, windows, ends=True)
        last, before = releases[-1], releases[-2]
        assert last.carry is None
        carried_in = 0 if before.carry is None else int(before.carry.count.sum())
        released = sum(c["n_readings"] for c in last.cells)
        assert len(windows[-1]) + carried_in == released + last.summary["readings_withheld"]
        going_on = _run(params, windows)[0][-1].carry  # the service's last window hands on
        acted += going_on is not None and len(going_on) > 0
    assert acted  # the data hands readings on at its end


def _tagged_window(start: int, readings: list[tuple[int, int, float]]) -> Any:
    """A window whose readings have distinct timestamps (a reading's tag)."""
    from stream_dp.windows.columns import WindowColumns

    cells = [CELLS[c] for c, _, _ in readings]
    vehicles = [f"v{v}" for _, v, _ in readings]
    stamps = [float(start + i) for i in range(len(readings))]
    values = [x for *_, x in readings]
    return WindowColumns.from_readings(cells, vehicles, stamps, values, 100_000)


def _released_tags(state: Any) -> list[tuple[str, float]]:
    """(vehicle, timestamp) of every reading in a released cell of the window's state."""
    if state.empty or state.pairs is None or state.released is None:
        return []
    occupancy, columns, out = state.pairs.occupancy, state.columns, []
    for entry in range(occupancy.n_entries):
        if state.released[occupancy.cell_index[entry]]:
            pair = state.pairs.entry_of[entry]
            vehicle = columns.vehicle_names[columns.vehicle_code[pair]]
            out += [(vehicle, float(t)) for t in columns.reading_ts[columns.reading_pair == pair]]
    return out


@pytest.mark.parametrize(("seed", "span", "coarsest"), [(6, 3, 6), (10, 2, 7), (3, 4, 6)])
def test_each_tagged_reading_is_released_at_most_once_and_never_also_carried(
    monkeypatch: pytest.MonkeyPatch, seed: int, span: int, coarsest: int
) -> None:
    """Per reading (not per count): released in at most one window, and never both released
    and handed on in the carry; over harbour data where the policy sets pairs aside (seeds
    where pooling the set-aside pairs too would release readings twice)."""
    from collections import Counter

    import stream_dp.release.window as window_module
    from stream_dp.dp.noise import LaplaceNoise
    from stream_dp.release.accounting import PrivacyAccountant

    states: list[Any] = []
    original = window_module.release_pipeline

    def capturing(params: Any, noise: Any) -> Any:
        pipeline = original(params, noise)
        run = pipeline.run

        def run_and_keep(state: Any) -> Any:
            states.append(run(state))
            return states[-1]

        pipeline.run = run_and_keep  # type: ignore[method-assign]
        return pipeline

    monkeypatch.setattr(window_module, "release_pipeline", capturing)
    params = _waiting(coarsest_resolution=coarsest, max_span_hours=span, prefix_limit=100_000)
    set_aside = 0
    for ends in (False, True):
        ledger, carry, seen = PrivacyAccountant(params).new_ledger(), None, Counter()
        windows = _harbour(8, seed)
        for hour, readings in enumerate(windows):
            release = window_module.release_window(
                hour * HOUR, _tagged_window(hour * HOUR, readings), params, LaplaceNoise(),
                0, ledger, carry, last=ends and hour == len(windows) - 1,
            )  # fmt: skip
            ledger.record_released(release.loss)
            released = _released_tags(states[-1])
            seen.update(released)
            handed = release.carry
            tags = set() if handed is None else {
                (handed.vehicle_names[handed.vehicle_code[p]], float(t))
                for p, t in zip(handed.reading_pair, handed.reading_ts, strict=True)
            }  # fmt: skip
            assert not tags & set(released), "a reading released and carried on"
            set_aside += bool(states[-1].due)
            carry = handed
        assert max(seen.values(), default=1) == 1, "a reading released twice"
    assert set_aside  # the data makes due units (pairs set aside), where the rule matters
