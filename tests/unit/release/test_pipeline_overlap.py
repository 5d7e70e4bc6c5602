"""Under a vehicle budget the later stages' background work (the pairs' totals and reading
prefix sums) starts before the plan, so it runs beside it as it runs beside CLIP-USER."""

from __future__ import annotations

import pytest

from stream_dp.dp.noise import LaplaceNoise
from stream_dp.release import budget, stages
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.window import release_window
from tests.unit.release.test_vehicle_budget import _busy_windows, _params, _window


def test_the_statistics_start_before_the_vehicle_budget_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[str] = []
    begin, plan = stages.Statistics.begin, budget.budget_plan

    def recording_begin(self: stages.Statistics, state: stages.WindowState) -> None:
        events.append("statistics begin")
        begin(self, state)

    def recording_plan(state: stages.WindowState, occupancy: object) -> object:
        events.append("plan")
        return plan(state, occupancy)  # type: ignore[arg-type]

    monkeypatch.setattr(stages.Statistics, "begin", recording_begin)
    monkeypatch.setattr(budget, "budget_plan", recording_plan)  # the stage imports it late
    params = _params(max_span_hours=1, vehicle_budget=60.0)
    readings = _busy_windows(1, 3)[0]
    release = release_window(
        0, _window(0, readings), params, LaplaceNoise(), 0, PrivacyAccountant(params).new_ledger()
    )
    assert release.cells, "the window must release cells"
    # the regrouping prices its cells with plans of its own first (budget_cells); the
    # vehicle budget stage's plan is the last, and the statistics begin just before it
    assert events.count("statistics begin") == 1
    assert events[-2:] == ["statistics begin", "plan"]
