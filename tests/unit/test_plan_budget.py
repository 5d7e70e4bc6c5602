"""`stream-dp plan` under a per-vehicle budget (issue 25): the release's own budget mode with
no ledger, so it states the per-cell ε, mean_error, sit-outs and largest per-vehicle loss the
release of that window (a vehicle's first) publishes; its options are release's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stream_dp.cli import main
from stream_dp.config import load_settings
from stream_dp.dp.budget_ledger import BudgetLedger
from stream_dp.dp.noise import LaplaceNoise
from stream_dp.dp.randomness import RandomSource
from stream_dp.release.params import ReleaseParams
from stream_dp.release.window import release_window
from stream_dp.windows.columns import WindowColumns
from tests.unit.dp.test_adaptive_cells import targeted_window

BUDGET = {
    "vehicle_budget": 14.0, "budget_period_seconds": 7 * 86400, "target_mean_error": 20.0,
    "resolution": 8, "coarsest_resolution": 5, "variance_share": 0.0, "budget_planner": "rules",
}  # fmt: skip


def _occupancy_csv(path: Path, window: WindowColumns) -> Path:
    rows = zip(
        window.cell_code.tolist(), window.vehicle_code.tolist(), window.count.tolist(), strict=True
    )
    path.write_text(
        "cell,vehicle,count\n"
        + "".join(f"{window.cell_names[c]},{window.vehicle_names[v]},{n}\n" for c, v, n in rows)
    )
    return path


def _options(values: dict[str, object]) -> list[str]:
    return [f"--{k.replace('_', '-')}={v}" for k, v in values.items()]


@pytest.mark.parametrize(("seed", "span"), [(3, 1), (3, 9), (5, 4)])
def test_plan_and_release_agree_under_a_vehicle_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], seed: int, span: int
) -> None:
    values = {**BUDGET, "max_span_hours": span}
    params = ReleaseParams.from_settings(load_settings(epsilon=1.0, **values))
    window = targeted_window(seed)
    ledger = BudgetLedger(params.ledger_period_seconds, None)  # the engine's, fresh
    noise = LaplaceNoise(RandomSource.seeded_for_tests(seed))
    release = release_window(0, window, params, noise, ledger=ledger, last=True)
    assert len(release.cells) >= 3
    epsilons = {record["cell"]: record["epsilon"] for record in release.cells}
    assert len(set(epsilons.values())) > 1 and min(epsilons.values()) < 0.5  # not ε 1

    path = _occupancy_csv(tmp_path / "occupancy.csv", window)
    assert main(["plan", str(path), "--epsilon", "1", *_options(values), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    released = {cell: grid for cell, grid in plan["grids"].items() if grid["released"]}
    assert set(released) == set(epsilons)
    for record in release.cells:
        grid = released[record["cell"]]
        assert grid["epsilon"] == record["epsilon"]
        assert grid["mean_error"] == record["mean_error"]
        assert grid["kept_vehicles"] == record["n_vehicles_kept"]
        assert grid["sat_out"] == record["n_vehicles"] - record["n_vehicles_kept"]
    summary = release.summary
    assert plan["epsilon"] == summary["epsilon"]
    assert plan["max_vehicle_loss"] == pytest.approx(summary["max_vehicle_loss"])
    assert plan["privacy_loss_after"] == pytest.approx(summary["privacy_loss"])
    assert plan["vehicles_sat_out"] == summary["vehicles_budget_limited"]
    assert plan["K"] == summary["K"] and plan["G1"] == summary["G1"]
    assert plan["vehicle_budget"] == 14.0 and plan["vehicle_burst"] == pytest.approx(14 / 4)
    assert plan["cells_over_error_bound"] == 0  # a cell given no ε is not "over E"


def test_the_text_plan_names_the_budget_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _occupancy_csv(tmp_path / "occupancy.csv", targeted_window(3))
    args = ["plan", str(path), "--epsilon", "1", *_options({**BUDGET, "max_span_hours": 1})]
    assert main([*args, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "vehicle budget B 14 per 7 days, burst 3.5" in out
    assert plan["planned_by"] == "rules"  # BUDGET names the rules
    assert "planned by:               the rules" in out
    eps = [g["epsilon"] for g in plan["grids"].values() if g["released"]]
    assert f"epsilon per released cell: {min(eps):g} to {max(eps):g}" in out
    after = plan["max_vehicle_loss"]
    assert f"largest vehicle loss:     {plan['privacy_loss_before']:g} -> {after:g}" in out
    assert after <= 14 / 4 + 1e-9 < plan["privacy_loss_before"]  # the sit-outs keep the burst
    assert f"sit-outs:                 {plan['vehicles_sat_out']} vehicles" in out
    assert "privacy loss per window" not in out  # no K*eps line: it does not hold here


@pytest.mark.parametrize(
    "bad",
    [
        ["--vehicle-budget", "-1"],
        ["--vehicle-budget", "14", "--vehicle-budget-burst", "20"],
        ["--vehicle-budget", "14", "--max-span-hours", "0"],
        ["--vehicle-budget", "14", "--fixed-cells"],
        ["--fixed-epsilon", "--max-span-hours", "4"],  # no effect without a budget: refused
        ["--vehicle-budget", "14", "--budget-period-seconds", "5000"],
    ],
)
def test_the_budget_options_are_checked_as_release_checks_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: list[str]
) -> None:
    path = _occupancy_csv(tmp_path / "occupancy.csv", targeted_window(3))
    readings = tmp_path / "readings.csv"
    readings.write_text("vehicle_id,ts,lat,lon,speed\na,0,40.7,-74.0,10\n")
    assert main(["plan", str(path), "--epsilon", "1", *bad]) == 2
    planned = capsys.readouterr().err.strip().splitlines()
    out = tmp_path / "out.jsonl"
    assert main(["release", str(readings), "--out", str(out), *bad]) == 2
    released = capsys.readouterr().err.strip().splitlines()
    assert len(planned) == len(released) == 1
    reason = released[0].removeprefix("stream-dp release: error: ")
    assert reason != released[0] and "invalid setting" in reason
    assert planned[0] == f"stream-dp plan: error: {reason}"


def test_plan_options_lift_what_the_config_file_alone_would_refuse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The file names the rules and a pair limit (refused together: the limit is auto's);
    # --budget-planner auto on the command line makes them a valid pair, as for `release`.
    config = tmp_path / "stream-dp.toml"
    config.write_text('budget_planner = "rules"\noptimiser_max_pairs = 0\n')
    monkeypatch.setenv("STREAM_DP_CONFIG_FILE", str(config))
    path = _occupancy_csv(tmp_path / "occupancy.csv", targeted_window(3))
    options = _options({k: v for k, v in BUDGET.items() if k != "budget_planner"})
    args = ["plan", str(path), "--epsilon", "1", *options, "--json"]
    assert main(args) == 2  # the file alone: refused, naming the field
    assert "optimiser_max_pairs" in capsys.readouterr().err
    assert main([*args, "--budget-planner", "auto"]) == 0
    assert json.loads(capsys.readouterr().out)["planned_by"] == "rules"  # the limit, 0
