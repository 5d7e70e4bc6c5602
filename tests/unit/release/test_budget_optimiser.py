"""The optimiser as the budget pipeline's plan stage (``budget_planner = "optimiser"``,
docs/math.md §13.5): it releases where the rules' refusal loop gives up, never charges a
vehicle past B, and its setting fails fast naming the field."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import h3
import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_dp.cli import build_parser, main
from stream_dp.commands.release import settings_from_args
from stream_dp.config import OPTIMISER_MAX_PAIRS, ConfigError, load_settings
from stream_dp.dp.adaptive_cells import AdaptiveCells
from stream_dp.dp.budget_ledger import BudgetLedger, WindowLoss
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.dp.release_candidates import cell_options
from stream_dp.release.accounting import PrivacyAccountant
from stream_dp.release.adaptive import adaptive_moves
from stream_dp.release.params import ReleaseParams
from stream_dp.release.selection import occupancy_of
from stream_dp.release.vehicle_budget import stages as budget_stages
from stream_dp.release.vehicle_budget.candidate_cells import candidate_cells
from stream_dp.release.vehicle_budget.optimiser import Options
from stream_dp.release.window import WindowRelease, release_window
from stream_dp.windows.columns import WindowColumns
from tests.unit import test_plan_budget as plan_budget
from tests.unit.dp.test_adaptive_cells import targeted_window
from tests.unit.release.test_budget_cells import HOUR, PARENT, A, B, C, _params, _run, _twice
from tests.unit.release.test_window_outcome import SCHEMA

FAR = h3.latlng_to_cell(40.85, -73.80, 8)


def _refused_window(planner: str) -> list[tuple[str, int, int]]:
    """One hour: A (10 vessels × 2 readings, and s0-s4 with one each), C (3 vessels, too few
    alone) and FAR (250 vessels × 130 readings, and s0-s4). s0-s4 spent 1.37 an hour before:
    their room (~1.55) pays FAR and A's parent (ε 1.26), not A itself (1.56). Returns the
    records' (cell, resolution, readings)."""
    hour = _twice([(A, f"a{v}") for v in range(10)] + [(C, f"c{v}") for v in range(3)])
    hour += _twice([(FAR, f"s{v}") for v in range(5)])
    hour += [(FAR, f"d{v}") for v in range(250) for _ in range(130)]
    hour += [(A, f"s{v}") for v in range(5)]
    params = _params(max_span_hours=1, budget_planner=planner)
    ledger = PrivacyAccountant(params).new_ledger()
    spent = [f"s{v}" for v in range(5)]
    ledger.record(WindowLoss.of_losses(-HOUR, spent, [1] * 5, [1.37] * 5))
    (release,) = _run(params, [hour], ledger)
    return sorted((r["cell"], r["resolution"], r["n_readings"]) for r in release.cells)


def test_the_optimiser_releases_the_parent_the_rules_refusal_loop_gives_up() -> None:
    # The rules: A passes the price but s0-s4 cannot pay it beside FAR; A (and C with it)
    # hold under MIN_REFUSED_SHARE of the window's readings, so no second choice pools
    # them: 31 readings withheld. The optimiser weighs A's parent in the same choice.
    assert _refused_window("rules") == [(FAR, 8, 32510)]
    assert _refused_window("optimiser") == sorted([(FAR, 8, 32510), (PARENT, 7, 31)])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hours=st.lists(
        st.lists(
            st.tuples(st.integers(0, 4), st.integers(0, 24), st.integers(1, 6)),
            min_size=20, max_size=80,
        ),
        min_size=1, max_size=4,
    ),
    spans=st.sampled_from([1, 2]),
    burst=st.sampled_from([1.0, 14.0 / 6, 7.0]),
)  # fmt: skip
def test_no_vehicle_loses_more_than_b_under_the_optimiser(
    hours: list[list[tuple[int, int, int]]], spans: int, burst: float
) -> None:
    # Random small windows: 5 cells (four res-8 siblings under one parent and one far), 25
    # vehicles, 1-6 readings a pair; B 14 per day; every window released (the plan passes
    # check_plan), and each vehicle's recorded losses over the day sum to at most B.
    cells = [*sorted(h3.cell_to_children(PARENT, 8))[:4], FAR]
    pairs = [[(cells[c], f"v{v}") for c, v, n in hour for _ in range(n)] for hour in hours]
    params = _params(max_span_hours=spans, vehicle_budget_burst=burst, budget_planner="optimiser")
    releases = _run(params, pairs)
    lost: dict[str, float] = {}
    for release in releases:
        assert release.summary.get("error") is None
        loss = release.loss
        assert loss is not None
        each = loss.cells * loss.epsilon if loss.losses is None else loss.losses
        for vehicle, x in zip(loss.vehicles, np.asarray(each).tolist(), strict=True):
            lost[vehicle] = lost.get(vehicle, 0.0) + x
    assert max(lost.values(), default=0.0) <= params.vehicle_budget + 1e-9


def test_the_setting_reaches_the_mode_and_defaults_to_auto() -> None:
    default = load_settings(vehicle_budget=14, target_mean_error=10)
    assert ReleaseParams.from_settings(default).mode.planner == "auto"
    assert ReleaseParams(vehicle_budget=14, target_mean_error=10).mode.planner == "auto"
    for planner in ("rules", "optimiser"):
        named = load_settings(vehicle_budget=14, target_mean_error=10, budget_planner=planner)
        assert ReleaseParams.from_settings(named).mode.planner == planner


def test_a_bad_planner_fails_fast_naming_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="^budget_planner: must be one of auto, rules, optimiser"):
        _params(budget_planner="greedy")
    with pytest.raises(ConfigError, match="budget_planner"):
        load_settings(vehicle_budget=14, target_mean_error=10, budget_planner="greedy")
    monkeypatch.setenv("STREAM_DP_BUDGET_PLANNER", "greedy")
    with pytest.raises(ConfigError, match="STREAM_DP_BUDGET_PLANNER"):
        load_settings(vehicle_budget=14, target_mean_error=10)
    monkeypatch.setenv("STREAM_DP_BUDGET_PLANNER", "optimiser")
    with pytest.raises(ConfigError, match="budget_planner.*has no effect without vehicle_budget"):
        load_settings(vehicle_budget="none")


def test_the_cli_flag_is_checked_and_reaches_the_settings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["release", "missing.jsonl", "--out", "o.jsonl", "--budget-planner", "greedy"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--budget-planner" in err and "greedy" in err
    monkeypatch.delenv("STREAM_DP_BUDGET_PLANNER", raising=False)
    args = build_parser("release").parse_args(
        ["release", "in.jsonl", "--out", "o.jsonl", "--budget-planner", "optimiser"]
    )
    assert settings_from_args(args).budget_planner == "optimiser"


def test_the_optimisers_pair_limit_is_a_setting_checked_where_it_is_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budget = {"vehicle_budget": 14, "target_mean_error": 10}
    assert ReleaseParams.from_settings(load_settings(**budget)).mode.optimiser_max_pairs == (
        OPTIMISER_MAX_PAIRS
    )
    monkeypatch.setenv("STREAM_DP_OPTIMISER_MAX_PAIRS", "5000")
    assert ReleaseParams.from_settings(load_settings(**budget)).mode.optimiser_max_pairs == 5000
    monkeypatch.setenv("STREAM_DP_OPTIMISER_MAX_PAIRS", "-1")
    with pytest.raises(ConfigError, match="STREAM_DP_OPTIMISER_MAX_PAIRS"):
        load_settings(**budget)
    monkeypatch.delenv("STREAM_DP_OPTIMISER_MAX_PAIRS")
    with pytest.raises(ValueError, match="^optimiser_max_pairs: must be >= 0, got -1"):
        _params(optimiser_max_pairs=-1)
    only_auto = "optimiser_max_pairs.*has no effect with budget_planner 'rules' .only 'auto'."
    with pytest.raises(ConfigError, match=only_auto):
        load_settings(**budget, budget_planner="rules", optimiser_max_pairs=10)
    with pytest.raises(ConfigError, match="optimiser_max_pairs.*no effect without vehicle_budget"):
        load_settings(vehicle_budget="none", optimiser_max_pairs=10)
    with pytest.raises(ConfigError, match="optimiser_max_pairs.*belongs to the public-occupancy"):
        load_settings(vehicle_budget=14, privacy_model="secret-routes", variance_share=0,
                      optimiser_max_pairs=10)  # fmt: skip
    args = build_parser("release").parse_args(
        ["release", "in.jsonl", "--out", "o.jsonl", "--optimiser-max-pairs", "7"]
    )
    assert settings_from_args(args).optimiser_max_pairs == 7
    bad = ["release", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "o.jsonl")]
    assert main([*bad, "--optimiser-max-pairs", "-3"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "optimiser_max_pairs (--optimiser-max-pairs" in line and "got -3" in line


def test_a_lifted_cells_parent_covers_it_and_the_withheld_cells_under_it_not_its_siblings() -> None:
    # A (lifted) and B are regrouped cells under PARENT, C under it was withheld, FAR is
    # elsewhere: the candidates are the three cells and PARENT, which covers A and C (B stays
    # apart, so PARENT is a remainder), its vehicles' readings summed over both.
    cells = [A] * 3 + [B] * 2 + [C] + [FAR] * 2
    vehicles = ["v0", "v1", "v0", "v2", "v3", "v1", "v4", "v5"]
    columns = WindowColumns.from_readings(cells, vehicles, [0.0] * 8, [30.0] * 8, 64)
    names = (FAR, A, B)  # sorted as the regrouping's are
    assert list(names) == sorted(names) and list(columns.cell_names) == sorted([A, B, C, FAR])
    unit_of_cell = np.array([names.index(c) if c in names else -1 for c in columns.cell_names])
    adaptive = AdaptiveCells(names, np.array([8, 8, 8]), np.zeros(3, dtype=bool),
                             np.zeros(3), unit_of_cell)  # fmt: skip
    moves, _ = adaptive_moves(columns, adaptive)
    units, _ = occupancy_of(moves.counts(), np.arange(3))
    out = candidate_cells(columns, adaptive, units, np.array([False, True, False]), 7)
    assert out.names == (FAR, A, B, PARENT)
    assert out.unit.tolist() == [0, 1, 2, -1] and out.remainder.tolist() == [0, 0, 0, 1]
    covered = out.covers[out.covers_start[3] : out.covers_start[4]]
    assert sorted(columns.cell_names[o] for o in covered.tolist()) == sorted([A, C])
    entries = slice(out.start[3], out.start[4])
    readings = {
        columns.vehicle_names[v]: int(n)
        for v, n in zip(out.vehicle[entries].tolist(), out.count[entries].tolist(), strict=True)
    }
    assert readings == {"v0": 2, "v1": 2}  # v0 twice in A; v1 once in A and once in C
    assert candidate_cells(columns, adaptive, units, np.zeros(3, dtype=bool), 7).names == names


@pytest.mark.parametrize("planner", ["optimiser", "auto"])
def test_plan_states_what_the_optimisers_release_publishes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], planner: str
) -> None:
    # `stream-dp plan --budget-planner optimiser` runs the same pipeline as the release: the
    # same cells at the same ε, the same busiest loss ("auto": the optimiser at this size).
    values = {**plan_budget.BUDGET, "max_span_hours": 4, "budget_planner": planner}
    params = ReleaseParams.from_settings(load_settings(epsilon=1.0, **values))
    window = targeted_window(5)
    ledger = BudgetLedger(params.ledger_period_seconds, None)
    noise = LaplaceNoise(RandomSource.seeded_for_tests(5))
    release = release_window(0, window, params, noise, ledger=ledger, last=True)
    # Its 200 vehicles cross many cells: two resolution-5 cells hold all but 365 of the
    # 9,966 readings (six resolution-8 cells and 3,789 readings before the joint lift).
    assert len(release.cells) >= 2
    assert sum(record["n_readings"] for record in release.cells) >= 9000
    path = plan_budget._occupancy_csv(tmp_path / "occupancy.csv", window)
    assert main(["plan", str(path), "--epsilon", "1", *plan_budget._options(values), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    released = {cell: grid["epsilon"] for cell, grid in plan["grids"].items() if grid["released"]}
    assert released == {record["cell"]: record["epsilon"] for record in release.cells}
    assert plan["max_vehicle_loss"] == pytest.approx(release.summary["max_vehicle_loss"])
    assert plan["planned_by"] == release.summary["planned_by"] == "optimiser"
    if planner == "auto":  # plan honours the limit
        args = ["plan", str(path), "--epsilon", "1", *plan_budget._options(values), "--json"]
        assert main([*args, "--optimiser-max-pairs", "0"]) == 0
        assert json.loads(capsys.readouterr().out)["planned_by"] == "rules"


def _motorway_hour(planner: str, **changes: Any) -> list[tuple[str, int, int]]:
    """One hour on a road through PARENT's seven res-8 cells: 40 vehicles, 4 readings in
    each. Each cell alone needs ε ≈ 0.49 for T (160 readings, cap 4), which any vehicle can
    pay; all seven together need ≈ 3.4 of a vehicle, past its room (the burst 2.33). PARENT
    (1,120 readings, cap 28) needs the same ≈ 0.49 of each. Returns the records' (cell,
    resolution, readings)."""
    release = _motorway_release(planner, **changes)
    return sorted((r["cell"], r["resolution"], r["n_readings"]) for r in release.cells)


def _motorway_release(planner: str, **changes: Any) -> WindowRelease:
    """:func:`_motorway_hour`'s release (``changes``: more parameters)."""
    road = sorted(h3.cell_to_children(PARENT, 8))
    hour = [(cell, f"v{v}") for v in range(40) for cell in road for _ in range(4)]
    (release,) = _run(_params(max_span_hours=1, budget_planner=planner, **changes), [hour])
    return release


def test_many_cells_per_vehicle_hour_pool_into_the_parent_every_vehicle_can_pay() -> None:
    # Every cell is affordable on its own, so before, no parent was a candidate: the
    # vehicles' rooms paid four of the seven cells and the other three (480 readings) were
    # withheld. A vehicle short of the least ε of all its cells together brings the parents
    # in: the parent releases every reading at once.
    assert _motorway_hour("optimiser") == [(PARENT, 7, 1120)]


@settings(max_examples=60, deadline=None)
@given(
    cells=st.lists(
        st.dictionaries(st.integers(0, 5), st.integers(1, 6), min_size=1, max_size=6),
        min_size=1, max_size=5,
    ),
    room=st.lists(st.floats(0.0, 4.0), min_size=6, max_size=6),
)  # fmt: skip
def test_joint_affordability_against_each_vehicles_demand_summed_by_hand(
    cells: list[dict[int, int]], room: list[float]
) -> None:
    # Each cell: {vehicle: readings}; a last row is cell 0 with its first vehicle sitting
    # out (a twin, not counted). A cell is jointly affordable when each of its vehicles'
    # rooms holds the least ε meeting T of every cell it is in (cells meeting T nowhere
    # count nothing), computed here cell by cell.
    rows = [*cells, cells[0]]
    start = np.r_[0, np.cumsum([len(c) for c in rows])].astype(np.int64)
    vehicle = np.array([v for c in rows for v in sorted(c)], dtype=np.int64)
    count = np.array([c[v] for c in rows for v in sorted(c)], dtype=np.int64)
    out = np.zeros(len(count), dtype=bool)
    out[start[-2]] = True
    options = cell_options(start, count, upper=65.0, target=20.0, tau=6.5,
                           factors=np.array([1.0, 2.0]), max_epsilon=3.0, sits_out=out)  # fmt: skip
    opts = Options(options, np.r_[np.arange(len(cells)), 0], start, vehicle, ~out, True)
    least = [min((e for e, m in zip(options.epsilon[g], options.meets[g], strict=True) if m),
                 default=None) for g in range(len(cells))]  # fmt: skip
    demand = [sum(least[g] for g, c in enumerate(cells) if v in c and least[g] is not None)
              for v in range(6)]  # fmt: skip
    expected = [all(demand[v] <= room[v] + 1e-12 for v in c) for c in cells]
    assert opts.jointly_affordable(np.array(room), len(cells)).tolist() == expected


def test_auto_plans_a_window_by_the_optimiser_up_to_its_size_and_by_the_rules_above(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The motorway hour: 40 vehicles in 7 cells, 280 (cell, vehicle) pairs, which the two
    # planners release differently.
    rules, optimiser = _motorway_hour("rules"), _motorway_hour("optimiser")
    assert rules != optimiser
    logger = budget_stages.__name__
    with caplog.at_level(logging.INFO, logger=logger):
        assert _motorway_hour("auto") == optimiser
        assert _motorway_hour("auto", optimiser_max_pairs=280) == optimiser
        assert not [r for r in caplog.records if r.name == logger]
        assert _motorway_hour("auto", optimiser_max_pairs=279) == rules
        assert _motorway_hour("auto", optimiser_max_pairs=0) == rules
    lines = [r.getMessage() for r in caplog.records if r.name == logger]
    assert lines == [
        f"budget_planner auto: 280 pooled cell-vehicle pairs, over optimiser_max_pairs {n}: "
        "this window is planned by the rules"
        for n in (279, 0)
    ]


def _planned_by(planner: str, **changes: Any) -> str | None:
    """The motorway hour's summary's ``planned_by`` (checked against the record schema)."""
    release = _motorway_release(planner, **changes)
    assert release.cells  # something was planned and released
    jsonschema.validate(release.summary, SCHEMA)
    return release.summary["planned_by"]


def test_the_summary_names_the_planner_that_planned_the_window() -> None:
    # The motorway hour's 280 pooled pairs: auto's choice flips at its limit, and the summary
    # says which planner chose the cells; the fixed-epsilon release names none.
    assert (_planned_by("rules"), _planned_by("optimiser")) == ("rules", "optimiser")
    assert _planned_by("auto", optimiser_max_pairs=280) == "optimiser"
    assert _planned_by("auto", optimiser_max_pairs=279) == "rules"
    fixed = ReleaseParams(resolution=8, epsilon=1.0, upper=65.0)
    road = sorted(h3.cell_to_children(PARENT, 8))
    hour = [(cell, f"v{v}") for v in range(40) for cell in road for _ in range(4)]
    (release,) = _run(fixed, [hour])
    assert release.cells and release.summary["planned_by"] is None
    jsonschema.validate(release.summary, SCHEMA)
    with pytest.raises(jsonschema.ValidationError):  # only the two planners
        jsonschema.validate({**release.summary, "planned_by": "auto"}, SCHEMA)


@pytest.mark.parametrize("planner", ["auto", "rules", "optimiser"])
def test_a_window_with_no_readings_names_no_planner_and_one_releasing_nothing_does(
    planner: str,
) -> None:
    params = _params(max_span_hours=1, budget_planner=planner, optimiser_max_pairs=0)
    empty = WindowColumns.from_readings([], [], [], [], 64)
    release = release_window(
        0, empty, params, LaplaceNoise(), 0, PrivacyAccountant(params).new_ledger()
    )
    assert release.summary["planned_by"] is None
    jsonschema.validate(release.summary, SCHEMA)
    # One vehicle in one cell cannot meet T: nothing is released, yet a planner chose that.
    (lonely,) = _run(params, [[(A, "v0")]])
    assert lonely.cells == [] and lonely.summary["cells_withheld"] == 1
    assert lonely.summary["planned_by"] == ("optimiser" if planner == "optimiser" else "rules")


def _own_share_hour(
    spent: float, variance_share: float = 0.0
) -> tuple[list[tuple[str, int, float]], float | None, float]:
    """One hour of FAR: 12 vessels × 6 readings and vessel s with 1, s having spent
    ``spent`` an hour before. Returns the records' (cell, readings, ε), s's charge (None if
    not charged) and its room; the window must not fail."""
    hour = [(FAR, f"d{v}") for v in range(12) for _ in range(6)] + [(FAR, "s")]
    params = _params(max_span_hours=1, budget_planner="optimiser", variance_share=variance_share)
    ledger = PrivacyAccountant(params).new_ledger()
    ledger.record(WindowLoss.of_losses(-HOUR, ["s"], [1], [spent]))
    (room,) = ledger.budget_room(["s"], 0, params.vehicle_budget, params.vehicle_burst)
    (release,) = _run(params, [hour], ledger)
    assert release.summary.get("error") is None and release.loss is not None
    charged = dict(zip(release.loss.vehicles, release.loss.loss.tolist(), strict=True))
    records = [(r["cell"], r["n_readings"], r["epsilon"]) for r in release.cells]
    return records, charged.get("s"), float(room)


def test_the_optimiser_prices_each_vehicle_by_its_own_share() -> None:
    """§13.5: a read vehicle pays its own share of a cell's ε (§13.1, what the ledger
    records), not the whole ε. Vessel s (1 reading beside 12 vessels of 6, cap 6) is charged
    about a sixth of FAR's ε: with a room between that and the whole ε, FAR is still released
    with s read (73 readings), and s's charge fits its room; priced at the whole ε, no option
    of FAR would be affordable to s, and it would not be."""
    free, share, _ = _own_share_hour(0.001)
    ((cell, readings, eps),) = free
    assert cell == FAR and readings == 73 and share is not None and share < eps / 5
    records, charged, room = _own_share_hour(14.0 / 6 + 14.0 / 24 - (share + eps) / 2)
    assert share < room < eps
    assert records == free and charged == share <= room


def test_a_variance_share_prices_every_read_vehicle_at_the_whole_epsilon() -> None:
    """With a variance share every read vehicle is charged the cell's whole ε (§13.1), so the
    optimiser prices it so: vessel s, with a room under FAR's ε (and over its would-be own
    share), cannot be read there; priced by a share, FAR would be released with s read and
    the window would fail the plan's check."""
    (free,), _, _ = _own_share_hour(0.001, variance_share=0.25)
    eps = free[2]
    records, charged, room = _own_share_hour(14.0 / 6 + 14.0 / 24 - eps / 2, variance_share=0.25)
    assert eps / 3 < room < eps
    assert charged is None and all(r[0] != FAR or r[1] < 73 for r in records)
