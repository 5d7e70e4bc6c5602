"""Issue 34 items 1 and 2: one budget profile of defaults for the settings, ``serve``,
``release``, the demo, compose and deploy/; a flag changes only itself; the default target is
a share of U; ``release`` states the promise at start and end and why it released no cell."""

from __future__ import annotations

import argparse
import csv
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from stream_dp.cli import build_parser, main
from stream_dp.commands import demo, serve
from stream_dp.commands.profile import BUDGET_PROFILE
from stream_dp.commands.release import add_release_options, settings_from_args
from stream_dp.commands.shared import CliError
from stream_dp.config import ConfigError, ReleaseSettings, Settings, load_settings
from stream_dp.worker.metrics import ServiceMetrics
from tests.support.readings import vehicle_readings

ROOT = Path(__file__).resolve().parents[3]
WEEK = 7 * 86400

#: A valid value other than the default for each profile field (and U, which moves T), as
#: an option or a variable would give it.
OTHER_VALUE = {
    "vehicle_budget": "10",
    "budget_period_seconds": str(3 * 86400),
    "max_span_hours": "4",
    "target_mean_error": "12",
    "resolution": "9",
    "coarsest_resolution": "2",
    "variance_share": "0.25",
    "upper": "1000",
}
#: What else a value moves, as documented: R0 follows the resolution, T follows U.
DERIVED = {"resolution": {"coarsest_resolution": 4}, "upper": {"target_mean_error": 1000 / 6.5}}
WATCHED = (*BUDGET_PROFILE, "upper")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in [n for n in os.environ if n.startswith("STREAM_DP_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def watched(settings: Settings) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in WATCHED}


def expected(name: str) -> dict[str, Any]:
    """The profile at U 65 with ``name`` alone changed (and what it documentedly moves)."""
    values = {**BUDGET_PROFILE, "upper": 65.0}
    values[name] = type(values[name])(OTHER_VALUE[name])
    values.update(DERIVED.get(name, {}))
    return values


def command_settings(command: str, *argv: str) -> Settings:
    """The settings ``serve``, ``release`` or ``demo`` would run with these options."""
    leading = {"release": ["readings.csv", "--out", "out.jsonl"]}.get(command, [])
    args = build_parser().parse_args([command, *leading, *argv])
    if command == "serve":
        return serve.serve_settings(args)
    if command == "demo":
        return demo.demo_settings(args)
    return settings_from_args(args)


@pytest.mark.parametrize("command", ["serve", "release", "demo"])
def test_every_command_defaults_to_the_one_profile(command):
    assert watched(command_settings(command)) == {**BUDGET_PROFILE, "upper": 65.0}
    assert BUDGET_PROFILE == {
        "vehicle_budget": 14.0, "budget_period_seconds": WEEK, "max_span_hours": 8,
        "target_mean_error": 10.0, "resolution": 8, "coarsest_resolution": 3,
        "variance_share": 0.0,
    }  # fmt: skip


@pytest.mark.parametrize("name", sorted(OTHER_VALUE))
def test_a_setting_changes_only_itself(name, clean_env):
    assert watched(load_settings(**{name: OTHER_VALUE[name]})) == pytest.approx(expected(name))
    clean_env.setenv(f"STREAM_DP_{name.upper()}", OTHER_VALUE[name])
    assert watched(load_settings()) == pytest.approx(expected(name))


@pytest.mark.parametrize("command", ["serve", "release", "demo"])
@pytest.mark.parametrize("name", sorted(OTHER_VALUE))
def test_an_option_changes_only_itself(command, name):
    option = "--" + name.replace("_", "-")
    settings = command_settings(command, option, OTHER_VALUE[name])
    assert watched(settings) == pytest.approx(expected(name))


@pytest.mark.parametrize("command", ["serve", "release", "demo"])
def test_the_opt_outs_leave_the_rest_of_the_profile(command):
    fixed_epsilon = watched(command_settings(command, "--fixed-epsilon"))
    assert fixed_epsilon == {**BUDGET_PROFILE, "upper": 65.0, "vehicle_budget": None}
    fixed_cells = watched(command_settings(command, "--fixed-cells"))
    # no per-cell ε to pace, no adaptive cells to merge up to R0
    unset = {"vehicle_budget": None, "target_mean_error": None, "coarsest_resolution": None}
    assert fixed_cells == {**BUDGET_PROFILE, "upper": 65.0, **unset}


def test_an_explicit_target_stays_absolute_and_the_default_follows_u():
    assert load_settings(upper=1000).target_mean_error == pytest.approx(1000 * 10 / 65)
    assert load_settings(upper=65).target_mean_error == 10.0  # the AIS demo's, exactly
    assert load_settings(upper=1000, target_mean_error=15).target_mean_error == 15.0


def compose_env() -> dict[str, str]:
    """The worker's STREAM_DP_* variables in docker-compose.yml, each at its default."""
    text = (ROOT / "docker-compose.yml").read_text()
    env = yaml.safe_load(text)["x-stream-dp-env"]
    return {k: re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", str(v)) for k, v in env.items()}


def configmap_env() -> dict[str, str]:
    text = (ROOT / "deploy/kubernetes/configmap.yaml").read_text()
    return {k: str(v) for k, v in yaml.safe_load(text)["data"].items()}


@pytest.mark.parametrize("read", [compose_env, configmap_env], ids=["compose", "deploy"])
def test_compose_and_deploy_release_the_one_profile(read, clean_env):
    for name, value in read().items():
        clean_env.setenv(name, value)
    deployed = load_settings()
    assert watched(deployed) == {**BUDGET_PROFILE, "upper": 65.0}
    assert deployed.vehicle_burst == 14.0 / 4
    clean_env.setenv("STREAM_DP_UPPER", "1000")  # the operator's U: T follows it
    assert load_settings().target_mean_error == pytest.approx(1000 / 6.5)
    for name in [n for n in os.environ if n.startswith("STREAM_DP_")]:
        clean_env.delenv(name)
    defaults = load_settings()
    for name in ReleaseSettings.model_fields:
        assert getattr(deployed, name) == getattr(defaults, name), name


def aircraft_csv(path: Path) -> Path:
    """An hour of 30 aircraft at 700 to 950 km/h over half a degree: U is 1000, not 65."""
    rows = vehicle_readings(900, vehicles=30, interval=4.0, spread=0.5, speeds=(700.0, 950.0))
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(("vehicle_id", "ts", "lat", "lon", "speed"))
        writer.writerows([r[k] for k in ("vehicle_id", "ts", "lat", "lon", "speed")] for r in rows)
    return path


def released_cells(out: Path) -> int:
    return out.read_text().count('"type":"cell"')


def test_release_states_the_promise_at_start_and_end(tmp_path, capsys):
    source, out = aircraft_csv(tmp_path / "air.csv"), tmp_path / "out.jsonl"
    assert main(["release", str(source), "--out", str(out), "--upper", "1000"]) == 0
    lines = capsys.readouterr().err.splitlines()
    promise = (
        "promise: each vehicle loses at most epsilon 14 per 7 days; target mean error "
        "T 153.846, U 1000"
    )
    assert lines[0] == promise
    busiest = next(line for line in lines if line.startswith("busiest vehicle's loss"))
    assert re.match(r"busiest vehicle's loss over the run: epsilon \d+\.\d\d \(basic\)", busiest)
    assert busiest.endswith("; " + promise)
    assert released_cells(out) > 0  # the default T is a share of U: the aircraft get cells
    assert not any(line.startswith("released no cell") for line in lines)


def test_a_run_releasing_no_cell_says_why_in_one_line(tmp_path, capsys):
    source, out = aircraft_csv(tmp_path / "air.csv"), tmp_path / "out.jsonl"
    argv = ["release", str(source), "--out", str(out), "--upper", "1000"]
    assert main([*argv, "--target-mean-error", "15"]) == 0
    assert released_cells(out) == 0
    why = [line for line in capsys.readouterr().err.splitlines() if "no cell" in line]
    assert why == [
        "released no cell: no cell met the target mean error T 15 (as set) at resolutions 8 "
        "to 3 within the vehicle budget with the 900 readings accepted (min_vehicles 1); a "
        "larger --target-mean-error or a coarser --coarsest-resolution or more readings per "
        "cell release some"
    ]
    assert main([*argv, "--overwrite", "--fixed-cells", "--min-vehicles", "31"]) == 0
    why = [line for line in capsys.readouterr().err.splitlines() if "no cell" in line]
    assert why[0].startswith(
        "released no cell: no fixed cell at resolution 8 was released with the 900 readings "
        "accepted (min_vehicles 31)"
    )


def test_serve_ends_with_the_busiest_vehicles_loss_over_the_period_beside_the_promise():
    metrics = ServiceMetrics()
    metrics.vehicle_loss_period_max.set(3.25)
    line = serve.busiest_period_line(metrics, load_settings(vehicle_budget=10))
    assert line == (
        "busiest vehicle's loss over the last 7 days: epsilon 3.25 (basic); promise: each "
        "vehicle loses at most epsilon 10 per 7 days; target mean error T 10, U 65"
    )
    fixed = serve.busiest_period_line(ServiceMetrics(), load_settings(vehicle_budget="none"))
    assert fixed == (
        "busiest vehicle's loss over the last 7 days: epsilon 0.00 (basic); promise: none (a "
        "fixed epsilon 1 per cell, each vehicle's loss tracked, not capped); target mean "
        "error T 10, U 65"
    )


def test_fixed_cells_alone_do_not_drop_the_promise_unsaid() -> None:
    """T none (fixed cells) leaves the budget nothing to pace: without B none said too it is
    refused, naming the field, instead of silently releasing without the weekly promise;
    ``--fixed-cells`` says both."""
    with pytest.raises(ConfigError, match="target_mean_error.*vehicle_budget none"):
        load_settings(target_mean_error="none")
    both = load_settings(target_mean_error="none", vehicle_budget="none")
    assert (both.target_mean_error, both.vehicle_budget) == (None, None)
    parser = argparse.ArgumentParser()
    add_release_options(parser)
    fixed = settings_from_args(parser.parse_args(["--fixed-cells"]))
    assert (fixed.target_mean_error, fixed.vehicle_budget) == (None, None)
    with pytest.raises(CliError, match="vehicle_budget"):  # a budget given beside fixed cells
        settings_from_args(parser.parse_args(["--vehicle-budget", "14", "--fixed-cells"]))
