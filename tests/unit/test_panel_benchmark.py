"""The panel benchmark's own arithmetic (``benchmarks/panel_data.py``, ``benchmarks/panel.py``):
SUMO floating-car data to readings (projection and units), the motorway's network, trips and
floating-car period, aircraft speeds from consecutive
fixes, the busiest vehicle's loss over any budget period, the worst of the runs, and the
usefulness scoring at a U other than 65."""

from __future__ import annotations

import gzip
import math
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from scipy import stats

# The benchmarks are scripts importing their neighbours by name (``from usefulness import``).
sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

import city  # noqa: E402
import motorway  # noqa: E402
import panel  # noqa: E402
import panel_data  # noqa: E402
import usefulness  # noqa: E402

from stream_dp.dp.budget_ledger import WindowLoss  # noqa: E402
from stream_dp.sources.traj import haversine_km  # noqa: E402
from tests.support.noise_free import NoNoise  # noqa: E402

ORIGIN = (52.5, 13.4)
FCD = """<?xml version="1.0" encoding="UTF-8"?>
<fcd-export>
  <timestep time="0.00">
    <vehicle id="c7~1" x="1000.00" y="0.00" speed="10.00"/>
  </timestep>
  <timestep time="10.00">
    <vehicle id="c7~1" x="1000.00" y="2000.00" speed="25.00"/>
    <vehicle id="o3" x="0.00" y="0.00" speed="0.00"/>
  </timestep>
</fcd-export>
"""


def test_fcd_readings_project_metres_east_and_north_and_give_km_per_hour(tmp_path: Path) -> None:
    path = tmp_path / "fcd.xml"
    path.write_text(FCD)
    readings = list(panel_data.fcd_readings(path, ORIGIN, 1_000_000.0))
    assert [(r["vehicle_id"], r["ts"]) for r in readings] == [
        ("c7", 1_000_000.0), ("c7", 1_000_010.0), ("o3", 1_000_010.0),
    ]  # fmt: skip
    east, north_east, origin = readings
    assert east["speed"] == pytest.approx(36.0)
    assert north_east["speed"] == pytest.approx(90.0)
    assert (origin["lat"], origin["lon"]) == pytest.approx(ORIGIN)
    # 1 km due east: same latitude, 1 km away (a longitude degree is cos(lat) shorter).
    assert east["lat"] == pytest.approx(ORIGIN[0], abs=1e-9)
    assert east["lon"] > ORIGIN[1]
    assert haversine_km(*ORIGIN, east["lat"], east["lon"]) == pytest.approx(1.0, rel=1e-3)
    # then 2 km due north: same longitude.
    assert north_east["lon"] == pytest.approx(east["lon"], abs=1e-12)
    assert north_east["lat"] > ORIGIN[0]
    step = haversine_km(east["lat"], east["lon"], north_east["lat"], north_east["lon"])
    assert step == pytest.approx(2.0, rel=1e-3)


def test_fcd_readings_read_a_gzipped_file(tmp_path: Path) -> None:
    path = tmp_path / "fcd.xml.gz"
    path.write_bytes(gzip.compress(FCD.encode()))
    assert len(list(panel_data.fcd_readings(path, ORIGIN, 0.0))) == 3


def test_aircraft_speeds_come_from_consecutive_fixes_in_km_per_hour(tmp_path: Path) -> None:
    ten_km = math.degrees(10.0 / panel_data.EARTH_RADIUS_KM)  # 10 km along a meridian
    path = tmp_path / "flights.csv"
    path.write_text(
        "# object_id timestamp longitude latitude altitude heading speed\n"
        f"AB1,2004-12-07 11:01:00,-81.0,{27.0 + ten_km},3000,0,0\n"
        "AB1,2004-12-07 11:00:00,-81.0,27.0,3000,0,0\n"
        f"AB1,2004-12-07 11:01:00,-81.0,{27.0 + 5 * ten_km},3000,0,0\n"  # same time: dropped
        f"AB1,2004-12-07 11:03:00,-81.0,{27.0 + 2 * ten_km},3000,0,0\n"
        "ONE,2004-12-07 11:00:00,-80.0,26.0,3000,0,0\n"  # one fix: no speed
        "NOPOS,2004-12-07 11:00:00,,,,,\n"
    )
    readings = panel_data.aircraft_readings(path)
    assert [r["vehicle_id"] for r in readings] == ["AB1"] * 3
    assert [r["speed"] for r in readings] == pytest.approx([600.0, 600.0, 300.0])
    assert [r["lon"] for r in readings] == [-81.0] * 3  # third field: longitude
    assert readings[0]["lat"] == 27.0
    assert readings[0]["ts"] == pytest.approx(1102417200.0)  # 2004-12-07 11:00:00 UTC


def _release(window_start: int, losses: dict[str, float]) -> SimpleNamespace:
    names = sorted(losses)
    loss = WindowLoss.of_losses(window_start, names, [1] * len(names), [losses[n] for n in names])
    return SimpleNamespace(loss=loss)


def test_busiest_loss_is_the_largest_sum_over_one_period_not_over_the_run() -> None:
    hour = 3600
    releases = [
        _release(30 * hour, {"a": 1.0, "b": 0.5}),
        _release(0, {"a": 1.0}),
        _release(20 * hour, {"a": 1.0, "b": 1.0}),
        SimpleNamespace(loss=None),
    ]
    # a: 3 over the run, but no 24 hours hold more than two of its windows.
    assert panel.busiest_per_period(releases, 24 * hour, hour) == pytest.approx(2.0)
    assert panel.busiest_per_period(releases, 31 * hour, hour) == pytest.approx(3.0)
    assert panel.busiest_per_period(releases, hour, hour) == pytest.approx(1.0)


def test_the_worst_run_is_the_lowest_share_and_the_highest_staleness_and_loss() -> None:
    runs = [
        {"coverage": 0.9, "staleness": 1.0, "finer": 0.4, "loss": 3.0, "honest": 0.97},
        {"coverage": 0.5, "staleness": 4.0, "finer": 0.6, "loss": 2.0, "honest": 0.99},
        {"coverage": 0.8, "staleness": 2.0, "finer": 0.5, "loss": 4.0, "honest": 0.98},
    ]
    summary = panel.summarise(runs, budget=4.0)
    assert summary["coverage"] == {"median": 0.8, "worst": 0.5}
    assert summary["staleness"] == {"median": 2.0, "worst": 4.0}
    assert summary["finer"] == {"median": 0.5, "worst": 0.4}
    assert summary["loss_share"] == {"median": 0.75, "worst": 1.0}
    runs[0]["staleness"] = float("nan")  # a run that released nothing useful
    assert panel.summarise(runs, budget=4.0)["staleness"]["worst"] == math.inf
    for run in runs:
        run["honest"] = float("nan")  # no run released a cell
    assert all(math.isnan(x) for x in panel.summarise(runs, 4.0)["honest"].values())


def test_usefulness_scores_within_a_tenth_of_the_data_sets_own_u() -> None:
    readings = [
        {"vehicle_id": f"v{i}", "ts": 10.0 * i, "lat": 40.0, "lon": -74.0, "speed": 500.0}
        for i in range(4)
    ]
    truth = usefulness.Truth(readings, upper=1000.0)
    record = {"resolution": 8, "window_start": "1970-01-01T00:00:00Z",
              "window_end": "1970-01-01T01:00:00Z"}  # fmt: skip
    covering = np.zeros(4, dtype=np.int64)
    for mean, useful in ((580.0, 1.0), (620.0, 0.0)):  # 80 and 120 km/h off, U/10 = 100
        scored = usefulness.score(truth, [record], np.array([mean]), 8, 3, None, covering)
        assert scored["coverage"] == useful
    assert usefulness.Truth(readings).value.max() == 65.0  # the AIS week's U by default


def _reachable(lines: motorway.Corridor, start: str, end: str) -> list[str] | None:
    """The edges from ``start`` to ``end`` through the corridor, if any path exists."""
    by_from: dict[str, list[tuple[str, str]]] = {}
    for name, a, b, *_ in lines.edges:
        by_from.setdefault(a, []).append((name, b))
    ends = {name: b for name, _, b, *_ in lines.edges}
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop()
        if path[-1] == end:
            return path
        for name, _ in by_from.get(ends[path[-1]], []):
            if name not in seen:
                seen.add(name)
                paths.append([*path, name])
    return None


def test_the_motorway_is_a_corridor_with_ramps_and_every_trip_keeps_its_direction() -> None:
    lines = motorway.corridor(64_000.0)
    assert lines.sections == 8
    xy = {name: (x, y) for name, x, y in lines.nodes}
    assert math.dist(xy["j0"], xy["j8"]) == pytest.approx(64_000.0)
    carriageway = [e for e in lines.edges if e[0].startswith("m")]
    assert len(carriageway) == 16
    assert {(lanes, speed) for _, _, _, lanes, speed, _ in carriageway} == {(3, 130 / 3.6)}
    for name, a, b, *_ in carriageway:
        assert math.dist(xy[a], xy[b]) == pytest.approx(8000.0)
        east = name.endswith("e")
        assert (int(b[1:]) > int(a[1:])) == east
    ramps = [e for e in lines.edges if not e[0].startswith("m")]
    assert len(ramps) == 14 and all(e[3] == 1 and e[5] < 13 for e in ramps)
    for a in range(9):
        for b in range(9):
            if a == b:
                continue
            path = _reachable(lines, lines.origin_edge(a), lines.destination_edge(b))
            assert path is not None, (a, b)
            main = [e for e in path if e.startswith("m")]
            assert len(main) == abs(b - a)  # one carriageway edge per section, no turning
            assert {e[-1] for e in main} == {"e" if b > a else "w"}


def test_motorway_trips_are_seeded_distinct_and_in_the_morning() -> None:
    lines = motorway.corridor(64_000.0)
    trips = motorway.motorway_trips(lines, 4000, np.random.default_rng(3))
    assert trips == motorway.motorway_trips(lines, 4000, np.random.default_rng(3))
    departs = np.array([t for t, *_ in trips]) / 3600.0
    assert departs.min() >= 5.0 and departs.max() <= 21.0
    near_peak = np.mean(np.abs(departs - 7.5) < 0.5)  # 0.6 * 0.683 + 0.4 / 16 = 0.435
    assert 0.40 < near_peak < 0.47
    pairs = motorway.access_pairs(lines, 4000, np.random.default_rng(3))
    assert all(a != b for a, b in pairs)
    # The two ends weigh 2 ramps each (of 11); a pair's two ends drawn again: 36 / 106.
    ends = sum(a in (0, 8) for a, _ in pairs) / len(pairs)
    assert ends == pytest.approx(36 / 106, abs=0.025)


def test_the_motorway_records_floating_car_data_every_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(city, "run", calls.append)
    (tmp_path / "routes.rou.xml").write_text("<routes/>")
    city.simulate(tmp_path / "n.net.xml", tmp_path / "t.xml", tmp_path, 7, 100.0, False, period=1)
    (sumo,) = calls
    assert sumo[sumo.index("--device.fcd.period") + 1] == "1"


def test_the_panel_s_fast_movers_are_the_motorway_at_u_200_and_b_4_per_day(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (fast,) = [d for d in panel.PANEL if d.name == "motorway"]
    assert (fast.upper, fast.budget, fast.period_seconds) == (200.0, 4.0, 86400)
    calls: list[list[str]] = []
    monkeypatch.setattr(panel, "DATA", tmp_path)
    monkeypatch.setattr(panel.subprocess, "run", lambda args, check: calls.append(args))
    assert panel.motorway("motorway_64_2000") == tmp_path / "motorway_64_2000.csv"
    (args,) = calls
    assert args[1].endswith("motorway.py") and args[2:] == ["--km", "64", "--vehicles", "2000"]
    (tmp_path / "motorway_64_2000.csv").write_text("")
    panel.motorway("motorway_64_2000")  # already there: not simulated again
    assert len(calls) == 1


def _binomial_tail_by_enumeration(misses: int, bars: int, chance: float) -> float:
    """P(at least ``misses`` of ``bars`` independent bars miss), summed over every outcome."""
    total = 0.0
    for outcome in range(2**bars):
        k = bin(outcome).count("1")
        if k >= misses:
            total += chance**k * (1.0 - chance) ** (bars - k)
    return total


@pytest.mark.parametrize("chance", [0.05, 0.3])
def test_the_promise_tail_is_the_binomial_tail_of_every_outcome(chance: float) -> None:
    for misses in range(0, 11):
        brute = _binomial_tail_by_enumeration(misses, 10, chance)
        assert panel.promise_tail(misses, 10, chance) == pytest.approx(brute, rel=1e-12, abs=1e-15)


def test_the_promise_tail_stays_finite_for_the_baselines_thousands_of_bars() -> None:
    # 5 runs of the motorway's fixed-eps release: 6,705 bars; 0.95**6705 alone is ~1e-149.
    assert panel.promise_tail(335, 6705) == pytest.approx(stats.binom.sf(334, 6705, 0.05))
    assert panel.promise_tail(200, 6705) == pytest.approx(1.0)
    assert panel.promise_tail(500, 6705) == pytest.approx(stats.binom.sf(499, 6705, 0.05))


def test_the_table_reports_the_pooled_misses_and_their_chance_under_the_promise() -> None:
    runs = [{"misses": m, "bars": 43} for m in (2, 2, 1, 2, 2)]
    result = {"name": "motorway", "budgeted_runs": runs, "fixed_runs": [{"honest": 1.0}]}
    lines = panel._misses_lines([result])
    expected = f"{stats.binom.sf(8, 215, 0.05):.3g}"
    assert (
        lines[1]
        == f"- motorway, profile: 9 of 215 bars missed (4.2 %); P(>= 9 | 5 % each) = {expected}"
    )
    # runs stored before the panel counted misses report none (the baseline here)
    assert len(lines) == 2
    assert panel.pooled_misses([]) is None


class _FarOffNoise(NoNoise):
    """Moves every released value by 90 (U 200): outside any bar of the profile (T 31)."""

    def release_each(self, values: Any, sensitivities: Any, epsilons: Any) -> np.ndarray:
        return super().release_each(values, sensitivities, epsilons) + 90.0


def test_a_run_counts_the_bars_its_released_means_miss(monkeypatch: pytest.MonkeyPatch) -> None:
    readings = [
        {"vehicle_id": f"v{v}", "ts": 60.0 * i + v, "lat": 40.0, "lon": -74.0 + 0.3 * (v % 2),
         "speed": 100.0 + v}
        for v in range(60) for i in range(5)
    ]  # fmt: skip
    truth = usefulness.Truth(readings, upper=200.0)
    row = panel.profile_row(panel.DataSet("two cells", lambda q: readings, 200.0, 4.0, 86400))
    monkeypatch.setattr(panel, "LaplaceNoise", lambda source: NoNoise())
    run = panel.one_run(truth, row, 0, 86400)
    assert (run["misses"], run["bars"], run["honest"]) == (0, 2, 1.0)
    monkeypatch.setattr(panel, "LaplaceNoise", lambda source: _FarOffNoise())
    run = panel.one_run(truth, row, 0, 86400)
    assert (run["misses"], run["bars"], run["honest"]) == (2, 2, 0.0)
