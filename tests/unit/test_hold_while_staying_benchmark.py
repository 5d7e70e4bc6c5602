"""``benchmarks/hold_while_staying.py`` replaces the release price where the planners read it:
a renamed or moved price breaks these tests rather than the experiment's figures."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

# The benchmarks are scripts importing their neighbours by name (``from panel import``).
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import hold_while_staying  # noqa: E402
from panel import PANEL, one_run, profile_row  # noqa: E402
from usefulness import Truth, settings_of  # noqa: E402

from stream_dp.release.params import ReleaseParams  # noqa: E402
from stream_dp.release.vehicle_budget import optimiser, plan  # noqa: E402
from stream_dp.sources.sample import load_sample  # noqa: E402

#: The AIS week's first readings: a day and more, moored vessels staying in their cells.
READINGS = 30_000


@pytest.fixture(scope="module")
def week() -> tuple[Truth, dict[str, Any], dict[Any, Any]]:
    readings = load_sample()[:READINGS]
    row = profile_row(PANEL[0])
    return Truth(readings, upper=PANEL[0].upper), row, hold_while_staying.history_of(readings, row)


def _run(truth: Truth, row: dict[str, Any]) -> dict[str, Any]:
    return one_run(truth, row, 0, PANEL[0].period_seconds)


def test_no_cell_waits_when_none_can_have_that_many_staying(week: Any) -> None:
    truth, row, history = week
    main = _run(truth, row)
    with hold_while_staying.hold_while_staying(history, stay=2.0):
        same = _run(truth, row)
    for key in ("coverage", "records", "loss", "finer"):
        assert same[key] == main[key]


def test_cells_whose_vessels_stay_wait_and_the_release_changes(
    week: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    truth, row, history = week
    held: list[int] = []
    made = hold_while_staying.staying

    def counted(history: Any, stay: float, gate: float | None = None) -> Any:
        price = made(history, stay, gate)

        def ceiling(*args: Any, **kwargs: Any) -> Any:
            out = price(*args, **kwargs)
            held.append(0 if out is None else int(np.sum(out == 0.0)))
            return out

        return ceiling

    monkeypatch.setattr(hold_while_staying, "staying", counted)
    original = plan.epsilon_ceiling
    main = _run(truth, row)
    with hold_while_staying.hold_while_staying(history, stay=0.5):
        assert plan.epsilon_ceiling is optimiser.epsilon_ceiling  # both planners read it
        hold = _run(truth, row)
    assert sum(held) > 0  # the release read the replaced price, and some cell waited
    assert (hold["records"], hold["coverage"]) != (main["records"], main["coverage"])
    assert plan.epsilon_ceiling is original and optimiser.epsilon_ceiling is original


def test_the_gate_holds_only_the_cells_whose_eps_passes_it(week: Any) -> None:
    """``--gate K``: a staying cell waits only if its ε now passes K windows' refill. At
    10^9 refills only the cells where no ε within the burst meets T (+inf) wait, and main's
    plan drops those too: main's release; every ε passes 0: the ungated hold's; at K = 10
    (a K where, on these readings, some staying cells wait and some do not) a third."""
    truth, row, history = week
    keys = ("coverage", "records", "loss", "finer")

    def held_at(gate: float | None) -> tuple[Any, ...]:
        with hold_while_staying.hold_while_staying(history, stay=0.5, gate=gate):
            got = _run(truth, row)
        return tuple(got[key] for key in keys)

    main = _run(truth, row)
    ungated = held_at(None)
    assert held_at(1e9) == tuple(main[key] for key in keys) != ungated
    assert held_at(0.0) == ungated
    assert held_at(10.0) not in (ungated, tuple(main[key] for key in keys))


@pytest.mark.parametrize("name", ["AIS week", "motorway"])
def test_the_span_gate_is_the_burst_spread_over_the_longest_span(name: str) -> None:
    """``--gate span``: the burst (B/4) over the 8 one-hour windows of the longest span; in
    refills of the period (widened by the span's other 7 hours, ``ledger_period_seconds``)
    175/32 ≈ 5.47 of a weekly B and 31/32 of a daily one."""
    data = next(d for d in PANEL if d.name == name)
    params = ReleaseParams.from_settings(settings_of(profile_row(data)))
    assert params.max_span_hours == 8 and params.window_seconds == 3600
    span = hold_while_staying.gate_epsilon(params, hold_while_staying.SPAN_GATE)
    assert span == data.budget / 4 / 8
    refill = hold_while_staying.gate_epsilon(params, 1.0)
    assert span / refill == pytest.approx((data.period_seconds / 3600 + 7) / 32)


def test_the_span_gate_holds_the_staying_cells_that_cost_more_than_it(week: Any) -> None:
    """On the week's first readings at B 25.6 (burst 6.4, span gate 0.8) the span gate lets
    some staying cells wait and releases others (neither main's release nor the ungated
    hold's), as the refill gate of the same ε does."""
    truth, row, history = week
    row = {**row, "vehicle_budget": 25.6}
    keys = ("coverage", "records", "loss", "finer")

    def held_at(gate: Any) -> tuple[Any, ...]:
        with hold_while_staying.hold_while_staying(history, stay=0.5, gate=gate):
            got = _run(truth, row)
        return tuple(got[key] for key in keys)

    main = _run(truth, row)
    gated = held_at("span")
    assert gated not in (tuple(main[key] for key in keys), held_at(None))
    params = ReleaseParams.from_settings(settings_of(row))
    span = hold_while_staying.gate_epsilon(params, hold_while_staying.SPAN_GATE)
    assert span == 0.8  # off the ε grid (1/128): no cell's ε sits on it
    assert gated == held_at(span / hold_while_staying.gate_epsilon(params, 1.0))


def test_the_gate_argument_is_a_number_of_refills_or_span() -> None:
    assert hold_while_staying._gate("span") == hold_while_staying.SPAN_GATE
    assert hold_while_staying._gate("4.5") == 4.5
    with pytest.raises(ValueError):
        hold_while_staying._gate("spam")
