"""``benchmarks/hindsight.py``'s bound on instances small enough to solve by hand: each
constraint of the linear programme (readings released once, each vehicle's budget, the
median staleness, the finer share) changes the optimum exactly as the hand solution says."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import h3
import numpy as np
import pytest

# The benchmarks are scripts importing their neighbours by name (``from panel import``).
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import hindsight  # noqa: E402
from panel import PANEL, profile_row  # noqa: E402

from stream_dp.dp.release_candidates import cell_options  # noqa: E402

HOUR = 3600.0
#: A finest cell of the AIS week's harbour, and its centre.
LAT, LON = h3.cell_to_latlng(h3.latlng_to_cell(40.7, -74.0, 8))


def _row(budget: float) -> dict[str, Any]:
    return {**profile_row(PANEL[0]), "vehicle_budget": budget}


def _readings(vehicles: range, hour: int, at: tuple[float, float] = (LAT, LON), per: int = 1):
    return [{"vehicle_id": f"v{v}", "ts": (hour + 0.5) * HOUR + i, "lat": at[0], "lon": at[1],
             "speed": 10.0} for v in vehicles for i in range(per)]  # fmt: skip


def _options(counts: list[int], budget: float) -> Any:
    """The hand solution's values: one cell of these per-vehicle counts, at the script's ε
    options (as it computes them, at most ``budget``)."""
    row = _row(budget)
    return cell_options(
        np.array([0, len(counts)]), np.array(counts), upper=row["upper"],
        target=row["target_mean_error"], tau=hindsight.USEFUL_SHARE * row["upper"],
        factors=np.array(hindsight.FACTORS), max_epsilon=budget,
    )  # fmt: skip


def test_a_reading_is_released_once_across_resolutions_and_spans() -> None:
    # 30 vehicles in hour 0 and the same 30 in hour 1, one reading each: every resolution
    # and both spans hold them; without the cover rows the LP would add them all up
    readings = _readings(range(30), 100) + _readings(range(30), 101)
    got = hindsight.bound(readings, _row(1000.0), max_span=2, pay="cell")
    hour_best = float(np.max(_options([1] * 30, 1000.0).useful[0]))
    span_best = float(np.max(_options([2] * 30, 1000.0).useful[0]))
    assert got["coverage"] * len(readings) == pytest.approx(max(2 * hour_best, span_best))
    assert got["coverage"] <= 1.0


def test_each_vehicle_pays_at_most_its_budget() -> None:
    # two hours of the same 30 vehicles, each hour's release at least ε_T: a budget of ε_T
    # buys one hour's release, 2 ε_T both (no option above ε_T is worth more per ε)
    readings = _readings(range(30), 100) + _readings(range(30), 101)
    least = float(_options([1] * 30, 1000.0).epsilon[0, 0])
    for budget, hours in ((least, 1), (2 * least, 2)):
        useful = float(_options([1] * 30, budget).useful[0, 0])
        got = hindsight.bound(readings, _row(budget), max_span=1, pay="cell")
        assert got["coverage"] * len(readings) == pytest.approx(hours * useful)


def test_the_median_staleness_limit_excludes_a_span_mostly_late() -> None:
    # 14 vehicles in hour 0, 8 others in hour 1: at B 1 neither hour meets T alone, their
    # 2-hour span does, but 14 of its 22 readings are an hour late
    readings = _readings(range(14), 100) + _readings(range(14, 22), 101)
    assert float(np.min(_options([1] * 14, 1.0).epsilon[0])) > 1.0  # hours alone: no candidate
    span = float(_options([1] * 22, 1.0).useful[0, 0])
    assert span > 0
    late = hindsight.bound(readings, _row(1.0), max_span=2, pay="cell", median_staleness=1.0)
    now = hindsight.bound(readings, _row(1.0), max_span=2, pay="cell", median_staleness=0.0)
    assert late["coverage"] * len(readings) == pytest.approx(span)
    assert now["coverage"] == pytest.approx(0.0, abs=1e-9)


def test_the_finer_share_limit_needs_a_finer_cell_that_meets_t() -> None:
    # 12 vehicles in each of two finest cells under different resolution-4 parents of one
    # resolution-3 cell: at B 1 only the resolution-3 cell (24 vehicles) meets T
    r3 = h3.latlng_to_cell(40.7, -74.0, 3)
    first, second = (h3.cell_to_center_child(c, 8) for c in sorted(h3.cell_to_children(r3, 4))[:2])
    readings = (_readings(range(12), 100, h3.cell_to_latlng(first))
                + _readings(range(12, 24), 100, h3.cell_to_latlng(second)))  # fmt: skip
    whole = float(_options([1] * 24, 1.0).useful[0, 0])
    free = hindsight.bound(readings, _row(1.0), max_span=1, pay="cell")
    finer = hindsight.bound(readings, _row(1.0), max_span=1, pay="cell", finer_share=0.3)
    assert free["coverage"] * len(readings) == pytest.approx(whole)
    assert free["finer_share"] == 0.0
    assert finer["coverage"] == pytest.approx(0.0, abs=1e-9)


def test_no_bound_for_readings_longer_than_one_budget_period() -> None:
    # B over all the readings bounds a plan only within one period (a longer run refills it)
    period = int(_row(1.0)["budget_period_seconds"]) // 3600
    readings = _readings(range(30), 100) + _readings(range(30), 100 + period)
    with pytest.raises(ValueError, match="more than one budget period"):
        hindsight.bound(readings, _row(1.0), max_span=1, pay="cell")
    assert hindsight.bound(readings[:30] + _readings(range(30), 99 + period), _row(1000.0),
                           max_span=1, pay="cell")["coverage"] > 0  # fmt: skip


def test_live_first_pools_no_hour_that_meets_t_alone_within_the_burst() -> None:
    # the same 30 vehicles in hours 0 and 1; B (and the burst) ε_T buys one release each:
    # the 2-hour span covers both hours, but live first releases an hour that meets T alone
    readings = _readings(range(30), 100) + _readings(range(30), 101)
    least = float(_options([1] * 30, 1000.0).epsilon[0, 0])
    hour = float(_options([1] * 30, least).useful[0, 0])
    span = float(_options([2] * 30, least).useful[0, 0])
    assert span > hour > 0
    row = {**_row(least), "vehicle_budget_burst": least}
    pooled = hindsight.bound(readings, row, max_span=2, pay="cell")
    live = hindsight.bound(readings, row, max_span=2, pay="cell", live_first=True)
    assert pooled["coverage"] * len(readings) == pytest.approx(span)
    assert live["coverage"] * len(readings) == pytest.approx(hour)
    # with a burst below ε_T no hour meets T alone within it: the span is allowed again
    low = hindsight.bound(readings, {**row, "vehicle_budget_burst": least / 2}, max_span=2,
                          pay="cell", live_first=True)  # fmt: skip
    assert low["coverage"] == pytest.approx(pooled["coverage"])
