"""The per-vehicle budget's settings and release parameters (issue 25 item 1)."""

from __future__ import annotations

import math

import pytest

from stream_dp.config import ConfigError, load_settings
from stream_dp.release.params import ReleaseParams


def test_settings_reach_the_release_params_with_the_burst_defaulting_to_a_quarter() -> None:
    settings = load_settings(
        vehicle_budget=14, target_mean_error=10, budget_period_seconds=7 * 86400,
        max_span_hours=6,
    )  # fmt: skip
    params = ReleaseParams.from_settings(settings)
    assert params.vehicle_budget == 14
    assert params.vehicle_burst == pytest.approx(14 / 4)
    assert params.max_span_hours == 6
    assert params.budget_period_seconds == 7 * 86400


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"vehicle_budget": math.nan, "target_mean_error": 10}, "vehicle_budget"),
        ({"vehicle_budget": math.inf, "target_mean_error": 10}, "vehicle_budget"),
        ({"vehicle_budget": -1, "target_mean_error": 10}, "vehicle_budget"),
        ({"vehicle_budget": 14, "target_mean_error": "none"}, "vehicle_budget"),
        ({"vehicle_budget": 14, "target_mean_error": 10, "budget_cap": 5}, "budget_cap"),
        (
            {"vehicle_budget": 1, "vehicle_budget_burst": 2, "target_mean_error": 10},
            "vehicle_budget_burst",
        ),
        ({"max_span_hours": 0}, "max_span_hours"),
    ],
)
def test_bad_budget_settings_name_the_field(values: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        load_settings(**values)


def test_release_params_check_the_budget_themselves() -> None:
    with pytest.raises(ValueError, match="vehicle_budget_burst"):
        ReleaseParams(vehicle_budget=7, vehicle_budget_burst=math.nan, target_mean_error=10)
    with pytest.raises(ValueError, match="target_mean_error"):
        ReleaseParams(vehicle_budget=7)
