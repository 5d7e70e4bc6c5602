"""The replay's optimiser in place of the plan (``benchmarks/planner_replay.py``): every
window's plan within each vehicle's room, no vehicle past B, the release changed while it is
in place and restored after."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import h3
import numpy as np
import pytest

# The benchmarks are scripts importing their neighbours by name (``from usefulness import``).
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import panel  # noqa: E402
import planner_replay  # noqa: E402
import usefulness  # noqa: E402

from stream_dp.release.vehicle_budget import cells as budget_cells
from stream_dp.release.vehicle_budget import plan as budget  # noqa: E402
from stream_dp.sources.sample import load_sample  # noqa: E402
from tests.support.noise_free import NoNoise  # noqa: E402

READINGS = 30_000


def _release(readings: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    ais = next(d for d in panel.PANEL if d.name == "AIS week")
    releases: list[Any] = []
    records, _, _ = usefulness.release_week(
        usefulness.settings_of(panel.profile_row(ais, "rules")), readings, NoNoise(), releases
    )
    return records, releases


@pytest.mark.parametrize("hold", [False, True])
def test_the_optimisers_plans_keep_every_vehicle_within_its_room_and_b(
    hold: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(planner_replay, "WITH_HOLD", hold)
    readings = load_sample()[:READINGS]
    plans: list[tuple[np.ndarray, np.ndarray]] = []
    chosen = planner_replay.optimised_plan

    def watched(params: Any, rooms: Any, occupancy: Any, *args: Any) -> Any:
        plan = chosen(params, rooms, occupancy, *args)
        plans.append((plan.paid, budget.vehicle_room(rooms, occupancy)))
        return plan

    original = budget_cells.budget_plan, budget.budget_plan
    planner_replay.optimised_plan = watched
    try:
        with planner_replay.optimiser_in_place():
            assert budget.budget_plan is watched and budget_cells.budget_plan is watched
            records, releases = _release(readings)
    finally:
        planner_replay.optimised_plan = chosen
    assert (budget_cells.budget_plan, budget.budget_plan) == original  # restored
    assert len(plans) > 10 and all(np.all(paid <= room + 1e-9) for paid, room in plans)
    assert any(paid.sum() > 0 for paid, _ in plans)
    assert panel.busiest_per_period(releases, 7 * 86_400, 3600) <= 14.0 + 1e-9
    as_is, _ = _release(readings)
    assert records and {(r["cell"], r["epsilon"]) for r in records} != {
        (r["cell"], r["epsilon"]) for r in as_is
    }


def test_the_occupancy_history_counts_each_vehicles_readings_per_cell_and_window() -> None:
    readings = load_sample()[:2000]
    history = planner_replay.occupancy_history(readings, 8, 6, 3600)
    for res in (6, 8):
        r = readings[123]
        cell = h3.cell_to_parent(h3.latlng_to_cell(r["lat"], r["lon"], 8), res)
        start = int(r["ts"]) // 3600 * 3600
        want = sum(
            1 for x in readings if x["vehicle_id"] == r["vehicle_id"]
            and int(x["ts"]) // 3600 * 3600 == start
            and h3.cell_to_parent(h3.latlng_to_cell(x["lat"], x["lon"], 8), res) == cell
        )  # fmt: skip
        assert history[(cell, start)][r["vehicle_id"]] == want
    assert sum(sum(c.values()) for (cell, _), c in history.items()
               if h3.get_resolution(cell) == 7) == len(readings)  # fmt: skip
