"""Under a vehicle budget the later stages' background work (the pairs' totals and reading
prefix sums) starts before the plan, so it runs beside it as it runs beside CLIP-USER."""

from __future__ import annotations

import pytest

from stream_dp.dp.noise import LaplaceNoise
from stream_dp.release import stages
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.vehicle_budget import cells as budget_cells
from stream_dp.release.vehicle_budget import plan as budget
from stream_dp.release.vehicle_budget import stages as budget_stages
from stream_dp.release.window import release_window
from tests.unit.release.test_vehicle_budget import _busy_windows, _params, _window


def test_the_statistics_start_before_the_vehicle_budget_stage_which_reuses_the_last_plan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[str] = []
    begin, plan, stage = stages.Statistics.begin, budget.budget_plan, budget_stages.Plan.run

    def recording_begin(self: stages.Statistics, state: stages.WindowState) -> None:
        events.append("statistics begin")
        begin(self, state)

    def recording_plan(*args: object) -> object:
        events.append("plan")
        return plan(*args)  # type: ignore[arg-type]

    def recording_stage(self: budget_stages.Plan, state: stages.WindowState) -> object:
        events.append("vehicle budget stage")
        return stage(self, state)

    monkeypatch.setattr(stages.Statistics, "begin", recording_begin)
    monkeypatch.setattr(budget_stages.Plan, "run", recording_stage)
    monkeypatch.setattr(budget_stages, "budget_plan", recording_plan)
    monkeypatch.setattr(budget_cells, "budget_plan", recording_plan)
    params = _params(max_span_hours=1, vehicle_budget=60.0)
    readings = _busy_windows(1, 3)[0]
    release = release_window(
        0, _window(0, readings), params, LaplaceNoise(), 0, PrivacyAccountant(params).new_ledger()
    )
    assert release.cells, "the window must release cells"
    # the regrouping prices its cells with plans of its own (budget_cells); the vehicle
    # budget stage runs right after the statistics begin and takes the regrouping's last plan
    # (same columns, pairs, rooms) instead of planning the same window again
    assert events.count("statistics begin") == 1
    assert events[0] == "plan"
    assert events[-2:] == ["statistics begin", "vehicle budget stage"]
