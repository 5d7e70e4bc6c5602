"""Issue 25 item 7: the demo and ``serve`` default to the per-vehicle budget profile, the demo
never requires an existing ledger, and it says in plain words what each vessel lost."""

from __future__ import annotations

import argparse

import pytest

from stream_dp.commands import demo, serve
from stream_dp.commands.profile import BUDGET_PROFILE, period_losses, promise
from stream_dp.config import load_settings
from stream_dp.dp.budget_ledger import WindowLoss

HOUR = 3600


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for name in [n for n in os.environ if n.startswith("STREAM_DP_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def parsed(command, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    return parser.parse_args([command.__name__.rsplit(".", 1)[1], *argv])


def test_the_demo_ignores_a_required_existing_ledger_in_the_environment(clean_env):
    clean_env.setenv("STREAM_DP_REQUIRE_EXISTING_LEDGER", "true")
    assert load_settings().require_existing_ledger  # what the user's environment says
    settings = demo.demo_settings(parsed(demo))
    assert settings.require_existing_ledger is False
    env = demo.worker_env(load_settings())  # even from settings that still require it
    assert env["STREAM_DP_REQUIRE_EXISTING_LEDGER"] == "false"
    assert env["STREAM_DP_KAFKA_EMBEDDED"] == "true"


def test_the_demo_runs_the_budget_profile(clean_env):
    settings = demo.demo_settings(parsed(demo))
    assert settings.vehicle_budget == 14.0 and settings.max_span_hours == 8
    assert settings.target_mean_error == 10.0
    assert settings.budget_period_seconds == 7 * 24 * HOUR
    assert promise(settings) == "14 per 7 days"
    override = demo.demo_settings(parsed(demo, "--vehicle-budget", "7"))
    assert override.vehicle_budget == 7.0
    fixed = demo.demo_settings(parsed(demo, "--fixed-cells"))
    assert fixed.vehicle_budget is None and fixed.target_mean_error is None
    short = demo.demo_settings(parsed(demo, "--hours", "6"))
    assert short.vehicle_budget == 14.0 and short.max_span_hours == 6
    short_fixed = demo.demo_settings(parsed(demo, "--hours", "6", "--fixed-cells"))
    assert short_fixed.vehicle_budget is None and short_fixed.max_span_hours == 8  # no spans


def test_serve_defaults_to_the_profile_each_setting_on_its_own(clean_env):
    bare = serve.serve_settings(parsed(serve))
    assert {k: getattr(bare, k) for k in BUDGET_PROFILE} == BUDGET_PROFILE
    clean_env.setenv("STREAM_DP_EPSILON", "0.5")
    configured = serve.serve_settings(parsed(serve))
    assert configured.vehicle_budget == 14.0 and configured.epsilon == 0.5  # issue 34
    clean_env.delenv("STREAM_DP_EPSILON")
    option = serve.serve_settings(
        parsed(serve, "--vehicle-budget", "28", "--target-mean-error", "12")
    )
    assert option.vehicle_budget == 28.0 and option.max_span_hours == 8
    assert option.budget_period_seconds == 7 * 24 * HOUR  # the profile's period (issue 34)


def test_the_losses_in_plain_words_come_from_the_ledger_over_the_period(clean_env):
    settings = load_settings(**BUDGET_PROFILE)
    first = 1_000 * HOUR
    losses = [  # a week of 168 windows: the busiest vessel is in two cells of each
        WindowLoss.from_counts(first + h * HOUR, 0.04, ["a", "b", "c"], [2, 1, 1])
        for h in range(168)
    ]
    per_vehicle = period_losses(settings, losses)
    assert sorted(per_vehicle) == pytest.approx([6.72, 6.72, 13.44])  # the first hour counts
    line = demo.describe_losses(per_vehicle, settings)
    assert line.startswith("The busiest vessel lost ε 13.4 of its ε 14 per 7 days; ")
    assert "the median vessel ε 6.7 (3 vessels" in line
    # one more hour: the first drops out of the period that ends with the last window
    later = [*losses, WindowLoss.from_counts(first + 168 * HOUR, 0.04, ["a"], [1])]
    assert max(period_losses(settings, later)) == pytest.approx(13.44 - 0.08 + 0.04)
    fixed = load_settings(vehicle_budget="none")
    assert "no per-vessel budget" in demo.describe_losses([1.0], fixed)


def test_under_a_budget_the_plain_words_read_the_busiest_vessels_own_loss(
    clean_env, capsys: pytest.CaptureFixture[str]
):
    """The windows' largest losses summed (3.5 here: a different vessel is the largest in
    each) only bound a vessel's loss; the words follow the ledger's busiest vessel (2.0)."""
    settings = load_settings(**BUDGET_PROFILE)
    summaries = [
        {"privacy_loss": x, "privacy_loss_unclipped": x, "cells_released": 1,
         "readings_dropped_late": 0}
        for x in (2.0, 1.5)
    ]  # fmt: skip
    demo._print_summary(summaries, settings)
    printed = capsys.readouterr().out
    assert "summed over the windows (a bound" in printed and ": 3.50 (" in printed
    assert "In plain words" not in printed  # not of the summed bound
    lines = demo.ledger_lines([2.0, 1.5, 0.25], settings)
    assert lines[0].startswith("The busiest vessel lost ε 2.0 of its ε 14 per 7 days")
    assert "at most e^2.00 times more likely" in lines[1]
    assert "within ε 14 per 7 days" in lines[1]
    fixed = load_settings(vehicle_budget="none")  # the summed worst case is the figure
    demo._print_summary(summaries, fixed)
    assert "at most e^3.50 times more likely" in capsys.readouterr().out
    assert len(demo.ledger_lines([2.0], fixed)) == 1
